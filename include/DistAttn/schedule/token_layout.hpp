// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file schedule/token_layout.hpp
/// Which global positions a rank's local token rows hold, for every executor's
/// layout, so the parts of a layer that depend on position (RoPE) follow the
/// attention's own sharding (ring/ring_attention.hpp, grid2d/grid2d_attention.hpp):
///   Contiguous (vanilla, balanced) and Zigzag: schedule/ring_layout.hpp's ring_position;
///   Cyclic (Attention2D): row i is token rank + i*P.
/// The hybrid executor's rank passes rows [row_offset, row_offset + c) of its
/// inner executor's rank (HybridAttention::token_layout).

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/schedule/ring_layout.hpp>

#include <cstdint>

namespace DistAttn {

struct TokenLayout {
  enum class Kind { Contiguous, Zigzag, Cyclic };
  Kind kind = Kind::Contiguous;
  int rank  = 0;
  int size  = 1;
  int chunk = 0;  ///< tokens per rank (per sequence of the batch)
  std::int64_t row_offset = 0;  ///< local row i is row row_offset + i of `rank`
  /// Rows this rank holds; 0: chunk - row_offset. The hybrid's ranks hold one of U
  /// slices of an inner rank's rows (chunk = U c, rows = c).
  int rows = 0;

  int local_rows() const { return rows > 0 ? rows : int(chunk - row_offset); }

  KOKKOS_INLINE_FUNCTION std::int64_t position(std::int64_t local) const {
    const std::int64_t r = rank, P = size, c = chunk, i = row_offset + local;
    switch (kind) {
      case Kind::Contiguous: return ring_position(RingKind::Vanilla, int(P), c, int(r), i);
      case Kind::Zigzag: return ring_position(RingKind::Zigzag, int(P), c, int(r), i);
      case Kind::Cyclic: return r + i * P;
    }
    return -1;
  }
  std::int64_t sequence_length() const { return std::int64_t(size) * chunk; }
};

inline const char* to_string(TokenLayout::Kind k) {
  switch (k) {
    case TokenLayout::Kind::Contiguous: return "contiguous";
    case TokenLayout::Kind::Zigzag: return "zigzag";
    case TokenLayout::Kind::Cyclic: return "cyclic";
  }
  return "?";
}

}  // namespace DistAttn
