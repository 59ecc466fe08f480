// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d_volume.hpp
/// Exact words each rank receives in every phase of Attention2D-NO forward and
/// backward (docs/design/schedules.md §3) on a general R x C grid, for one sequence with all
/// heads (multiply by the batch size). Generalises the square-grid table of schedules.md §3 (which is the
/// R = C = s, one-head, MHA case).
///
/// Ring collectives: an all-gather or reduce-scatter over k members with a
/// per-member shard of w words makes every member receive (and send) exactly
/// (k-1) w. Rows have C members, columns R; a shard covers n = N/P tokens.
///
///   forward   K,V permutation           2 n Hkv d      (0 where the rank keeps its own K_p)
///             row all-gather Q          (C-1) n H d
///             column all-gather K,V     2 n Hkv d
///             row reduce-scatter        (C-1) n H (d + fwd_stats_per_row)
///   backward  row all-gather            (C-1) n H (2d + (bwd_gather_o ? d : 1) + bwd_stats_per_row)
///                                       (q, dO, O or Delta, saved stats)
///             column all-gather K,V     2 n Hkv d
///             row reduce-scatter dQ     (C-1) n H d
///             column reduce-scatter dKV 2 n Hkv d   (dK, dV summed over each GQA group first)
///             dK,dV permutation back    2 n Hkv d      (0 where the rank keeps its own)
///
/// H = heads, Hkv = kv_heads. Received words equal sent words for every phase.

#include <DistAttn/core/error.hpp>
#include <DistAttn/schedule/grid2d_layout.hpp>

#include <cstdint>

namespace DistAttn {

struct Grid2DVolumeParams {
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 1;
  /// Statistics per (query row, head) travelling with the forward partial
  /// output: 2 = (m, l) with the unnormalized acc (default; what AttnFix
  /// merges), 1 = LSE with a normalized o ([A2D]'s implementation).
  int fwd_stats_per_row = 2;
  /// Saved softmax statistics per (row, head) gathered in backward:
  /// 1 = LSE (default), 2 = (M, D) as printed in [A2D] Alg. 3.
  int bwd_stats_per_row = 1;
  /// Backward row all-gather ships O (d words per row and head, as [A2D]) when
  /// true, or the precomputed Delta = rowsum(dO * O) (1 word) when false (default).
  bool bwd_gather_o = false;
};

struct Grid2DForwardWords {
  std::int64_t kv_permute = 0;
  std::int64_t q_allgather = 0;
  std::int64_t kv_allgather = 0;
  std::int64_t partial_reduce_scatter = 0;
  std::int64_t total() const { return kv_permute + q_allgather + kv_allgather + partial_reduce_scatter; }
};

struct Grid2DBackwardWords {
  std::int64_t row_allgather = 0;  ///< q, dO, O or Delta, stats
  std::int64_t kv_allgather = 0;
  std::int64_t dq_reduce_scatter = 0;
  std::int64_t dkv_reduce_scatter = 0;
  std::int64_t dkv_permute = 0;
  std::int64_t total() const {
    return row_allgather + kv_allgather + dq_reduce_scatter + dkv_reduce_scatter + dkv_permute;
  }
};

namespace Impl {
inline void check_grid2d_params(const Grid2DVolumeParams& p, const char* where) {
  DISTATTN_REQUIRE(p.heads >= 1 && p.kv_heads >= 1 && p.heads % p.kv_heads == 0, where,
                   "heads (" << p.heads << ") must be a positive multiple of kv_heads (" << p.kv_heads << ")");
  DISTATTN_REQUIRE(p.head_dim >= 1, where, "head_dim must be >= 1, got " << p.head_dim);
  DISTATTN_REQUIRE(p.fwd_stats_per_row >= 0 && p.bwd_stats_per_row >= 0, where,
                   "fwd_stats_per_row (" << p.fwd_stats_per_row << ") and bwd_stats_per_row ("
                                         << p.bwd_stats_per_row << ") must be >= 0");
}
inline bool keeps_own_kv(const Grid2DLayout& g, int rank) {
  const GridCoord rc = g.coord(rank);
  return g.transpose_source(rc.row, rc.col) == rank;
}
}  // namespace Impl

inline Grid2DForwardWords grid2d_no_forward_words(const Grid2DLayout& g, int rank, const Grid2DVolumeParams& p) {
  Impl::check_grid2d_params(p, "DistAttn::grid2d_no_forward_words");
  const std::int64_t n = g.shard_len(), H = p.heads, Hkv = p.kv_heads, d = p.head_dim;
  const std::int64_t R = g.rows(), C = g.cols();
  Grid2DForwardWords w;
  w.kv_permute = Impl::keeps_own_kv(g, rank) ? 0 : 2 * n * Hkv * d;
  w.q_allgather = (C - 1) * n * H * d;
  w.kv_allgather = (R - 1) * 2 * n * Hkv * d;
  w.partial_reduce_scatter = (C - 1) * n * H * (d + p.fwd_stats_per_row);
  return w;
}

inline Grid2DBackwardWords grid2d_no_backward_words(const Grid2DLayout& g, int rank, const Grid2DVolumeParams& p) {
  Impl::check_grid2d_params(p, "DistAttn::grid2d_no_backward_words");
  const std::int64_t n = g.shard_len(), H = p.heads, Hkv = p.kv_heads, d = p.head_dim;
  const std::int64_t R = g.rows(), C = g.cols();
  Grid2DBackwardWords w;
  w.row_allgather = (C - 1) * n * H * (2 * d + (p.bwd_gather_o ? d : 1) + p.bwd_stats_per_row);
  w.kv_allgather = (R - 1) * 2 * n * Hkv * d;
  w.dq_reduce_scatter = (C - 1) * n * H * d;
  w.dkv_reduce_scatter = (R - 1) * 2 * n * Hkv * d;
  w.dkv_permute = Impl::keeps_own_kv(g, rank) ? 0 : 2 * n * Hkv * d;
  return w;
}

}  // namespace DistAttn
