// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d_shape.hpp
/// Choice of the Attention2D grid shape R x C for P ranks (docs/design/schedules.md §2.1).
///
/// With G = heads / kv_heads query heads per K/V head, row traffic (Q and the
/// partial outputs) is ~2G d words per token and head group, column traffic
/// (K, V) ~2d, so the forward moves ~((C-1) 2Gd + (R-1) 2d) N/P words per rank
/// and head group. The helper minimises that over the factorizations of P.
/// Ties go to the squarer grid, then to more rows than columns (rows also carry
/// the softmax statistics, so fewer columns is the cheaper side of a tie).

#include <DistAttn/core/error.hpp>

#include <cstdint>
#include <cstdlib>

namespace DistAttn {

/// @brief Position of a rank in an R x C grid: row r in [0, R), column c in [0, C).
struct GridCoord {
  int row = 0;
  int col = 0;
};
inline constexpr bool operator==(const GridCoord& a, const GridCoord& b) { return a.row == b.row && a.col == b.col; }

/// @brief An R x C grid and its rank arithmetic (docs/design/schedules.md §2), the one
/// grid type of the schedules, the process grid and the executor.
///
///   column-major (input/output layout Qp):  p = r + R*c   holds tokens {p + i*P}
///   row-major    (K/V after transpose Kt):  q = C*r + c   holds tokens {q + i*P}
///
/// Example R = 2, C = 3 (P = 6); entry = column-major rank p at (r, c), and in
/// brackets the world rank whose Qp shard p needs as its Kt shard (C*r + c):
///
///          c=0      c=1      c=2
///   r=0   0 [0]    2 [1]    4 [2]
///   r=1   1 [3]    3 [4]    5 [5]
///
/// so rank 1 receives from rank 3 and rank 3 sends to rank 1 ... a permutation,
/// not a pairwise swap; for R == C it is the swap (r, c) <-> (c, r).
/// A shape of 0 rows or 0 columns means "choose" where a request is taken.
struct GridShape {
  int rows = 0;
  int cols = 0;

  constexpr int size() const { return rows * cols; }
  /// Column-major rank of (r, c): r + R*c.
  constexpr int rank_of(GridCoord rc) const { return rc.row + rows * rc.col; }
  constexpr GridCoord coord_of(int rank) const { return GridCoord{rank % rows, rank / rows}; }
  /// Row-major index of (r, c): C*r + c — the rank whose Qp shard equals Kt(r, c).
  constexpr int row_major_index(GridCoord rc) const { return cols * rc.row + rc.col; }
  /// World rank whose Qp-layout shard rank `rank` needs as its Kt shard.
  constexpr int transpose_source(int rank) const { return row_major_index(coord_of(rank)); }
  /// World rank that needs rank `rank`'s Qp shard as its Kt shard. Inverse of transpose_source.
  constexpr int transpose_dest(int rank) const { return rank_of(GridCoord{rank / cols, rank % cols}); }
};
inline constexpr bool operator==(const GridShape& a, const GridShape& b) {
  return a.rows == b.rows && a.cols == b.cols;
}

/// Forward volume (schedules.md §2.1) of an R x C grid in units of 2 d N/P words:
/// (C-1) G + (R-1).
inline std::int64_t grid_forward_cost_units(GridShape g, int group_size) {
  return std::int64_t(g.cols - 1) * group_size + (g.rows - 1);
}

/// The grid for P ranks. `requested` overrides: {R, C} with R*C == P is taken
/// as is; {R, 0} or {0, C} fixes one side (it must divide P); {0, 0} chooses.
inline GridShape choose_grid_shape(int num_ranks, int heads, int kv_heads, GridShape requested = {}) {
  const char* where = "DistAttn::choose_grid_shape";
  DISTATTN_REQUIRE(num_ranks >= 1, where, "P (num_ranks) must be >= 1, got " << num_ranks);
  DISTATTN_REQUIRE(heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0, where,
                   "heads (" << heads << ") must be a positive multiple of kv_heads (" << kv_heads << ")");
  DISTATTN_REQUIRE(requested.rows >= 0 && requested.cols >= 0, where,
                   "requested rows (" << requested.rows << ") and cols (" << requested.cols
                                      << ") must be >= 0 (0 = choose)");
  if (requested.rows > 0 && requested.cols > 0) {
    DISTATTN_REQUIRE(std::int64_t(requested.rows) * requested.cols == num_ranks, where,
                     "requested grid rows x cols = " << requested.rows << " x " << requested.cols
                                                     << " does not equal P=" << num_ranks);
    return requested;
  }
  if (requested.rows > 0) {
    DISTATTN_REQUIRE(num_ranks % requested.rows == 0, where,
                     "requested rows=" << requested.rows << " does not divide P=" << num_ranks);
    return GridShape{requested.rows, num_ranks / requested.rows};
  }
  if (requested.cols > 0) {
    DISTATTN_REQUIRE(num_ranks % requested.cols == 0, where,
                     "requested cols=" << requested.cols << " does not divide P=" << num_ranks);
    return GridShape{num_ranks / requested.cols, requested.cols};
  }

  const int G = heads / kv_heads;
  GridShape best{num_ranks, 1};
  for (int R = 1; R <= num_ranks; ++R) {
    if (num_ranks % R) continue;
    const GridShape g{R, num_ranks / R};
    const auto cg = grid_forward_cost_units(g, G), cb = grid_forward_cost_units(best, G);
    const int sg = std::abs(g.rows - g.cols), sb = std::abs(best.rows - best.cols);
    if (cg < cb || (cg == cb && (sg < sb || (sg == sb && g.rows > best.rows)))) best = g;
  }
  return best;
}

}  // namespace DistAttn
