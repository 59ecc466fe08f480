#pragma once
/// @file comm/grid_layout.hpp
/// Rank arithmetic of the R x C process grid of Attention2D (SPEC §3.2, §3.3,
/// §3.12). Pure and MPI-free, so the permutation can be checked on its own.
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

namespace DistAttn {

/// @brief Position of a rank in the grid: row r in [0, R), column c in [0, C).
struct GridCoords {
  int row = 0;
  int col = 0;
  friend constexpr bool operator==(GridCoords a, GridCoords b) { return a.row == b.row && a.col == b.col; }
};

/// @brief Grid shape: R rows, C columns.
struct GridDims {
  int rows = 1;
  int cols = 1;
};

/// @brief The rank <-> coordinate maps and the K/V transpose permutation.
struct GridLayout {
  int rows = 1;  ///< R
  int cols = 1;  ///< C

  constexpr int size() const { return rows * cols; }
  /// Column-major rank of (r, c): r + R*c.
  constexpr int rank_of(GridCoords rc) const { return rc.row + rows * rc.col; }
  constexpr GridCoords coords_of(int rank) const { return GridCoords{rank % rows, rank / rows}; }
  /// Row-major index of (r, c): C*r + c — the rank whose Qp shard equals Kt(r, c).
  constexpr int row_major_index(GridCoords rc) const { return cols * rc.row + rc.col; }

  /// World rank whose Qp-layout shard rank `rank` needs as its Kt shard.
  constexpr int transpose_source(int rank) const { return row_major_index(coords_of(rank)); }
  /// World rank that needs rank `rank`'s Qp shard as its Kt shard: the (r2, c2)
  /// with C*r2 + c2 == rank. Inverse of transpose_source.
  constexpr int transpose_dest(int rank) const {
    return rank_of(GridCoords{rank / cols, rank % cols});
  }
};

}  // namespace DistAttn
