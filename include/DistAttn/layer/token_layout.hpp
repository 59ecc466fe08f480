#pragma once
/// @file layer/token_layout.hpp
/// Which global positions a rank's local token rows hold, for every executor's
/// layout, so the parts of a layer that depend on position (RoPE) follow the
/// attention's own sharding (ring/ring_attention.hpp, grid2d/grid2d_attention.hpp):
///   Contiguous (vanilla, balanced): row i is token rank*chunk + i;
///   Zigzag: rows [0, chunk/2) are half-chunk `rank`, the rest half-chunk 2P-1-rank;
///   Cyclic (Attention2D): row i is token rank + i*P.

#include <DistAttn/core/kokkos_compat.hpp>

#include <cstdint>

namespace DistAttn {

struct TokenLayout {
  enum class Kind { Contiguous, Zigzag, Cyclic };
  Kind kind = Kind::Contiguous;
  int rank  = 0;
  int size  = 1;
  int chunk = 0;  ///< tokens per rank (per sequence of the batch)

  KOKKOS_INLINE_FUNCTION std::int64_t position(std::int64_t i) const {
    const std::int64_t r = rank, P = size, c = chunk;
    switch (kind) {
      case Kind::Contiguous: return r * c + i;
      case Kind::Zigzag: return i < c / 2 ? r * (c / 2) + i : (2 * P - 1 - r) * (c / 2) + (i - c / 2);
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
