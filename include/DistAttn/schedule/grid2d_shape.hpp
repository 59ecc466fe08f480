#pragma once
/// @file grid2d_shape.hpp
/// Choice of the Attention2D grid shape R x C for P ranks (SPEC §3.12).
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

struct GridShape {
  int rows = 0;
  int cols = 0;
};
inline bool operator==(const GridShape& a, const GridShape& b) { return a.rows == b.rows && a.cols == b.cols; }

/// SPEC §3.12 forward volume of an R x C grid in units of 2 d N/P words:
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
