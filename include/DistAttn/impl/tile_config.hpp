// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Tile sizes of the portable team kernels. Every operand tile is staged in team
// scratch in the accumulation type, so the footprint is known up front; tiles
// shrink until they fit the level-0 (on-chip) scratch of the backend, and fall
// back to level-1 (global) scratch only if even 8x8 tiles do not fit.

#include <DistAttn/core/kokkos_compat.hpp>

#include <algorithm>
#include <cstddef>

namespace DistAttn::Impl {

struct TileConfig {
  int br = 32;        // query rows per team
  int bc = 32;        // key rows per staged K/V tile
  int level = 0;      // scratch level
  std::size_t bytes = 0;
};

/// Elements each scratch tile row is padded by. Devices: one. Row strides of 64 or
/// 128 words are 0 mod the 32 shared-memory banks, so lanes walking down a column
/// (B = K^T in Q K^T, TeamGemm's 2-row blocks of A) would all hit one bank. Host
/// tiles stay contiguous: their BLAS call takes them as LayoutRight (tile_gemm.hpp).
template <class Exec>
inline constexpr int tile_row_pad = compat::host_accessible_v<Exec> ? 0 : 1;

/// Bytes of team scratch, as a function of (br, bc), for one kernel.
/// n_row_tiles / n_col_tiles: how many [br x d] and [bc x d] tiles it stages;
/// n_square: [br x bc] tiles; n_row_vec: per-row scalars.
struct ScratchShape {
  int n_row_tiles;
  int n_col_tiles;
  int n_square;
  int n_row_vec;
};

/// pad: elements added to every tile row (tile_row_pad).
template <class Acc>
inline std::size_t scratch_bytes(const ScratchShape& s, int br, int bc, int d, int pad = 0) {
  // +16 per array for the scratch alignment.
  const std::size_t n = std::size_t(s.n_row_tiles) * br * (d + pad) + std::size_t(s.n_col_tiles) * bc * (d + pad) +
                        std::size_t(s.n_square) * br * (bc + pad) + std::size_t(s.n_row_vec) * br;
  const int arrays = s.n_row_tiles + s.n_col_tiles + s.n_square + s.n_row_vec;
  return n * sizeof(Acc) + std::size_t(arrays) * 16;
}

/// Square tile rows of the host kernels (choose_tiles says why); the cost model's
/// CPU tile table counts work in these tiles (perf_tests/cost_calibrate).
constexpr int host_tile_rows(int d) { return d <= 128 ? 64 : 32; }

template <class Exec, class Acc>
inline TileConfig choose_tiles(const ScratchShape& shape, int d, std::size_t level0_max) {
  TileConfig cfg;
  if (compat::host_accessible_v<Exec>) {
    // Host: the products go to the BLAS behind Kokkos Kernels (tile_gemm.hpp), and
    // larger tiles spend less per product on staging, the call and the row-wise
    // softmax. On the CI machine (OpenBLAS, d = 64 and 128) square tiles of 32 to
    // 256 rows ran within 10% of each other and 64 was at or near the best
    // (docs/kernels/PORTABLE_NOTES.md). Beyond d = 128 (not measured) 32 rows keep
    // the backward's staged tiles near 200 KiB at d = 256, well inside an L2.
    cfg.br = cfg.bc = host_tile_rows(d);
    cfg.bytes = scratch_bytes<Acc>(shape, cfg.br, cfg.bc, d);
    cfg.level = 0;
    return cfg;
  }
  // Devices: start at 64 rows for small heads (more reuse of each staged K/V row),
  // 32 for d <= 128, 16 beyond, and halve until the tiles fit level-0 scratch.
  constexpr int pad = tile_row_pad<Exec>;
  int t = d <= 64 ? 64 : (d <= 128 ? 32 : 16);
  while (t > 8 && scratch_bytes<Acc>(shape, t, t, d, pad) > level0_max) t /= 2;
  cfg.br = cfg.bc = t;
  cfg.bytes = scratch_bytes<Acc>(shape, t, t, d, pad);
  cfg.level = cfg.bytes <= level0_max ? 0 : 1;
  return cfg;
}

}  // namespace DistAttn::Impl
