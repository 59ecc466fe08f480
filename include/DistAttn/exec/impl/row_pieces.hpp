// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file exec/impl/row_pieces.hpp
/// Views of a piece of a rank's token rows, for executors whose ranks hold their
/// rows in several pieces (schedule/ring_layout.hpp: zigzag's two halves). A rank
/// with one piece passes its tensors through untouched, so its kernels see the
/// same views as without pieces.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <utility>

namespace DistAttn::Impl {

/// Every row: the view itself.
struct AllRows {
  template <class V>
  const V& tokens(const V& v) const { return v; }
  template <class V>
  const V& stats(const V& v) const { return v; }
};

/// Rows [a len, (a+1) len) of a token tensor [B, seq, H, D] or a statistics tensor [B, H, seq].
struct RowPiece {
  int a = 0;
  std::int64_t len = 0;
  std::pair<std::int64_t, std::int64_t> rows() const { return {a * len, (a + 1) * len}; }
  template <class V>
  auto tokens(const V& v) const { return Kokkos::subview(v, Kokkos::ALL, rows(), Kokkos::ALL, Kokkos::ALL); }
  template <class V>
  auto stats(const V& v) const { return Kokkos::subview(v, Kokkos::ALL, Kokkos::ALL, rows()); }
};

/// Rows [begin, end) of a token tensor [B, seq, H, D] or a statistics tensor [B, H, seq].
struct RowSpan {
  std::int64_t begin = 0, end = 0;
  template <class V>
  auto tokens(const V& v) const { return Kokkos::subview(v, Kokkos::ALL, std::make_pair(begin, end), Kokkos::ALL, Kokkos::ALL); }
  template <class V>
  auto stats(const V& v) const { return Kokkos::subview(v, Kokkos::ALL, Kokkos::ALL, std::make_pair(begin, end)); }
};

/// f(a, rows) for each of `pieces` row pieces of `len` rows; rows is AllRows when there is one.
template <class F>
void for_each_row_piece(int pieces, std::int64_t len, F&& f) {
  if (pieces == 1) return f(0, AllRows{});
  for (int a = 0; a < pieces; ++a) f(a, RowPiece{a, len});
}

/// f(block, q_rows, k_rows) for each piece block (PieceBlock: q_piece, k_piece, mask).
template <class Blocks, class F>
void for_each_piece_block(int pieces, std::int64_t len, const Blocks& blocks, F&& f) {
  for (const auto& blk : blocks) {
    if (pieces == 1) {
      f(blk, AllRows{}, AllRows{});
    } else {
      f(blk, RowPiece{blk.q_piece, len}, RowPiece{blk.k_piece, len});
    }
  }
}

}  // namespace DistAttn::Impl
