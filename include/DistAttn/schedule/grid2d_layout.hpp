// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d_layout.hpp
/// Attention2D token layouts for an R x C grid, P = R*C (docs/design/schedules.md §2).
///
/// Rank p sits at (r, c) with p = r + R*c (column-major). Every set below is an
/// arithmetic progression, returned as a PositionMap {offset, stride}; local row
/// i of the set holds token offset + stride * i (position order).
///
///   Qp(r,c) = { r + R c + i P : i < N/P }   = rank p's tokens {p + iP}  (input/output)
///   Kt(r,c) = { C r + c + i P : i < N/P }   (K/V after the permutation)
///   Qg(r)   = { r + a R : a < N/R }         = union over c of Qp(r,c)   (row all-gather)
///   Kg(c)   = { c + b C : b < N/C }         = union over r of Kt(r,c)   (column all-gather)
///
/// Score (i, j) is computed by exactly one rank, (i mod R, j mod C). For R = C
/// the permutation Kp -> Kt is the pairwise swap (r,c) <-> (c,r); in general it
/// maps column-major index p to the rank whose row-major index C r + c is p.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/core/grid_shape.hpp>

#include <cstdint>
#include <vector>

namespace DistAttn {

class Grid2DLayout {
 public:
  /// seq_len must be a positive multiple of rows*cols (the executor pads).
  Grid2DLayout(int rows, int cols, std::int64_t seq_len) : rows_(rows), cols_(cols), seq_len_(seq_len) {
    DISTATTN_REQUIRE(rows >= 1 && cols >= 1, "DistAttn::Grid2DLayout",
                     "grid rows (R=" << rows << ") and cols (C=" << cols << ") must be >= 1");
    const std::int64_t P = std::int64_t(rows) * cols;
    DISTATTN_REQUIRE(seq_len > 0 && seq_len % P == 0, "DistAttn::Grid2DLayout",
                     "sequence length N=" << seq_len << " must be a positive multiple of P=R*C=" << P << " (R="
                                          << rows << ", C=" << cols << ")");
  }

  int rows() const { return rows_; }
  GridShape shape() const { return GridShape{rows_, cols_}; }
  int cols() const { return cols_; }
  int num_ranks() const { return rows_ * cols_; }
  std::int64_t seq_len() const { return seq_len_; }
  std::int64_t shard_len() const { return seq_len_ / num_ranks(); }  ///< |Qp| = |Kt| = N/P
  std::int64_t row_gather_len() const { return seq_len_ / rows_; }   ///< |Qg| = N/R
  std::int64_t col_gather_len() const { return seq_len_ / cols_; }   ///< |Kg| = N/C

  /// World rank of (r, c): column-major r + R*c.
  int rank(int r, int c) const {
    check_coord(r, c, "DistAttn::Grid2DLayout::rank");
    return shape().rank_of(GridCoord{r, c});
  }
  GridCoord coord(int rank) const {
    check_rank(rank, "DistAttn::Grid2DLayout::coord");
    return shape().coord_of(rank);
  }
  /// Row-major index C*r + c: the offset of Kt(r, c).
  int row_major_index(int r, int c) const {
    check_coord(r, c, "DistAttn::Grid2DLayout::row_major_index");
    return shape().row_major_index(GridCoord{r, c});
  }

  PositionMap qp(int r, int c) const { return PositionMap{rank(r, c), num_ranks()}; }
  PositionMap kt(int r, int c) const { return PositionMap{row_major_index(r, c), num_ranks()}; }
  PositionMap qg(int r) const {
    check_coord(r, 0, "DistAttn::Grid2DLayout::qg");
    return PositionMap{r, rows_};
  }
  PositionMap kg(int c) const {
    check_coord(0, c, "DistAttn::Grid2DLayout::kg");
    return PositionMap{c, cols_};
  }

  /// Local row of Qg(r) (position order) holding row i of shard Qp(r, qcol):
  /// token r + R qcol + iP = r + R (qcol + iC). A rank-ordered all-gather puts it
  /// at qcol * N/P + i instead (shard-major order).
  std::int64_t row_gather_index(int qcol, std::int64_t i) const { return qcol + i * cols_; }
  /// Local row of Kg(c) (position order) holding row i of shard Kt(krow, c):
  /// token C krow + c + iP = c + C (krow + iR).
  std::int64_t col_gather_index(int krow, std::int64_t i) const { return krow + i * rows_; }

  /// World rank whose Qp (its own K_p, V_p) is Kt(r, c): this rank receives from it.
  int transpose_source(int r, int c) const { return shape().transpose_source(rank(r, c)); }
  /// World rank whose Kt is Qp(r, c): this rank sends its K_p, V_p to it.
  int transpose_dest(int r, int c) const { return shape().transpose_dest(rank(r, c)); }

  /// Causal mask of Qg(r) (position order) against Kg(c) (position order).
  Mask gathered_mask(int r, int c) const { return Mask::causal(qg(r), kg(c)); }
  /// Causal mask of shard Qp(r, qcol) against shard Kt(krow, c) (overlapped variant).
  Mask shard_mask(int r, int qcol, int krow, int c) const { return Mask::causal(qp(r, qcol), kt(krow, c)); }

  /// The rank that computes score (query token i, key token j).
  int pair_owner(std::int64_t i, std::int64_t j) const {
    DISTATTN_REQUIRE(i >= 0 && i < seq_len_ && j >= 0 && j < seq_len_, "DistAttn::Grid2DLayout::pair_owner",
                     "token pair (i=" << i << ", j=" << j << ") out of range [0, N=" << seq_len_ << ")");
    return rank(int(i % rows_), int(j % cols_));
  }

  /// Row(r) communicator members ordered by column, Col(c) members ordered by row.
  std::vector<int> row_members(int r) const {
    std::vector<int> v;
    for (int c = 0; c < cols_; ++c) v.push_back(rank(r, c));
    return v;
  }
  std::vector<int> col_members(int c) const {
    std::vector<int> v;
    for (int r = 0; r < rows_; ++r) v.push_back(rank(r, c));
    return v;
  }

 private:
  void check_coord(int r, int c, const char* where) const {
    DISTATTN_REQUIRE(r >= 0 && r < rows_ && c >= 0 && c < cols_, where,
                     "grid coordinate (r=" << r << ", c=" << c << ") outside " << rows_ << " x " << cols_);
  }
  void check_rank(int p, const char* where) const {
    DISTATTN_REQUIRE(p >= 0 && p < num_ranks(), where, "rank " << p << " out of range [0, " << num_ranks() << ")");
  }

  int rows_;
  int cols_;
  std::int64_t seq_len_;
};

}  // namespace DistAttn
