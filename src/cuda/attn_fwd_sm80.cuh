// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Forward update kernel (docs/design/building_block.md, "The update") on mma.sync tensor cores, FlashAttention-2
// structure: one CTA per (query tile, head, batch); every warp owns 16 or 32 query
// rows (FwdTile::kRowsPerWarp) and keeps their O accumulator and (m, l) in registers
// while the CTA streams K/V tiles through one shared-memory stage each (cp.async):
// V lands under S = Q K^T, the next K under the softmax and O += P V. Two stages of
// each with a tile of lead measured 3-4 % slower (NOTES.md round 12), and their 96 KB
// at d = 128 fit one CTA per SM on A100. 16-row warps also keep their Q fragments in
// registers; 32-row warps (FA2's layout, the sm_80 table's choice for d = 128 and 64)
// re-read Q from shared memory and reuse every K/V fragment for both 16-row blocks.
// Only sm_80 features (tile_size.hpp, namespace sm80, says which targets run it).
//
//   prologue   Q, K[last] -> smem; (16-row warps: Q -> registers)
//   per tile   wait K; issue V; S = Q K^T; mask; online softmax (exp2, log2e folded
//              into the scale; O rescaled only when a row max grew); wait V;
//              issue K[next]; O += P V
//              (FwdTile::kEarlyV: wait V and issue K[next] before the softmax, and
//              rescale O every tile, so that the softmax, the rescale and O += P V
//              are one block without a barrier or a branch, which the compiler
//              interleaves: per entry, as measured, NOTES.md round 10)
//   epilogue   merge (O, m, l) into the incoming state (acc, m, l) and store, or in
//              direct mode (p.o.data set) write the final O and LSE (attn_fwd_epilogue.cuh)
//
// Key tiles are walked from the last admissible one down to the first (0 unless a
// window or documents bound the rows' keys from below: attn_mask.cuh), so the tiles
// that cross the upper ends (the "diagonal" band, and the ragged end of K) come
// first; only tiles that cross an end of some row's key range are masked per element.
//
// State semantics: the loop starts from the empty state and the result is merged
// into the incoming state at the end (building_block.md), which equals folding the tiles
// into it one by one (the merge is associative) and reads the old accumulator once,
// late, instead of holding it in registers for the whole CTA. Rows that see no
// admissible key leave (acc, m, l) untouched; rows whose incoming m is -inf are
// empty, their old acc is ignored. Direct mode has no incoming state: every real
// row is written, rows that see no key as O = 0, LSE = -inf.

#include "attn_fwd_epilogue.cuh"
#include "attn_launch.hpp"
#include "attn_mask.cuh"
#include "attn_mma.cuh"
#include "tile_order.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

#include <climits>
#include <cstdint>

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kNThreads, Cfg::kMinBlocks) attn_fwd_kernel(const AttnFwdParams p) {
  using namespace detail;
  using Ops             = ElemOps<Elem>;
  constexpr int D       = Cfg::kHeadDim;
  constexpr int BM      = Cfg::kBlockM;
  constexpr int BN      = Cfg::kBlockN;
  constexpr int NT      = Cfg::kNThreads;
  constexpr int MT      = Cfg::kRowsPerWarp / 16;  // m16 row blocks per warp
  constexpr bool kQRegs = MT == 1;                 // else Q fragments re-read from smem
  using Tile            = SwizzledTile<D>;
  constexpr uint32_t kQBytes  = BM * D * 2;
  constexpr uint32_t kKVBytes = BN * D * 2;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ  = smem_u32(smem);
  const uint32_t sK  = sQ + kQBytes;
  const uint32_t sV  = sK + kKVBytes;

  // Heaviest query tiles first (causal), over groups of heads (tile_order.cuh).
  const int n_qtiles    = (p.seqlen_q + BM - 1) / BM;
  const GroupedTile order  = grouped_tile(int(blockIdx.x), n_qtiles, p.heads, Cfg::kHeadGroup);
  const int qt   = n_qtiles - 1 - order.rank;
  const int h    = order.head;
  const int b    = blockIdx.y;
  const int hk   = h / (p.heads / p.heads_kv);
  const int q0   = qt * BM;
  const int tid  = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g    = lane >> 2;  // row within the 8-row group
  const int t    = lane & 3;   // column pair within the n8 tile
  const int wrow = warp * 16 * MT;  // first tile row of this warp

  const AttnMaskParams& mk = p.mask;
  const int q_last     = min(q0 + BM, p.seqlen_q) - 1;
  const KeyRange first = row_key_range(mk, p.seqlen_k, q0), last = row_key_range(mk, p.seqlen_k, q_last);
  const int kt_lo      = first.lo / BN;
  const int kt_hi      = (last.hi + BN - 1) / BN;
  if (kt_hi <= kt_lo) {  // no row of the tile sees any key: state unchanged
    if (p.o.data != nullptr) {  // direct mode: these rows still get their (empty) result
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = q0 + wrow + mt * 16 + g + 8 * r;
          if (row < p.seqlen_q) write_empty_row<Elem, D>(p, b, h, row, t);
        }
    }
    return;
  }
  // Smallest upper end over the tile's real rows (the first one's) and largest lower
  // end (the last one's): every key between them is visible to every real row.
  // Padding rows (past seqlen_q) need no mask: their Q is zero-filled, their values
  // stay finite and are never stored. Dense masks have lower ends 0.
  const int lim_min = first.hi, lo_max = last.lo;

  // This thread's rows (mt, r) = wrow + 16 mt + g + 8 r and their key ranges (empty for padding rows).
  int lim[MT][2], lo[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row     = q0 + wrow + mt * 16 + g + 8 * r;
      const KeyRange kr = row < p.seqlen_q ? row_key_range(mk, p.seqlen_k, row) : KeyRange{0, 0};
      lim[mt][r]        = kr.hi;
      lo[mt][r]         = kr.lo;
    }

  const Elem* qg = static_cast<const Elem*>(p.q.data) + p.q.at(b, 0, h);
  const Elem* kg = static_cast<const Elem*>(p.k.data) + p.k.at(b, 0, hk);
  const Elem* vg = static_cast<const Elem*>(p.v.data) + p.v.at(b, 0, hk);

  int kt = kt_hi - 1;
  load_tile_async<BM, D, NT>(sQ, qg, p.q.row_stride, q0, p.seqlen_q, tid, p.head_dim);
  load_tile_async<BN, D, NT>(sK, kg, p.k.row_stride, kt * BN, p.seqlen_k, tid, p.head_dim);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // 16-row warps keep their Q fragments (all of head_dim) in registers.
  uint32_t qf[kQRegs ? D / 16 : 1][4];
  if constexpr (kQRegs) {
    const typename Tile::Lane la = Tile::lane(lane_row_a(lane), lane_chunk_a(lane));
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qf[kk], Tile::addr(sQ, la, wrow, kk * 2));
  }

  float o[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
  float mrow[MT][2], lrow[MT][2];  // running max of scale*log2e*s; this thread's share of the row sum
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    mrow[mt][0] = mrow[mt][1] = -INFINITY;
    lrow[mt][0] = lrow[mt][1] = 0.f;
  }
  const float sl2 = p.scale * kLog2e;

  const typename Tile::Lane la = Tile::lane(lane_row_a(lane), lane_chunk_a(lane));
  const typename Tile::Lane lb = Tile::lane(lane_row_b(lane), lane_chunk_b(lane));
  for (; kt >= kt_lo; --kt) {
    // K[kt] has landed and every warp is done with V[kt+1]: V[kt] may overwrite it.
    load_tile_async<BN, D, NT>(sV, vg, p.v.row_stride, kt * BN, p.seqlen_k, tid, p.head_dim);
    cp_async_commit();

    // S = Q K^T for 16 MT rows x BN keys; every K fragment feeds MT products.
    float s[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (kQRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qa[mt][e] = qf[kk][e];
        } else {
          ldmatrix_x4(qa[mt], Tile::addr(sQ, la, wrow + mt * 16, kk * 2));
        }
      }
#pragma unroll
      for (int nn = 0; nn < BN / 16; ++nn) {
        uint32_t kf[4];
        ldmatrix_x4(kf, Tile::addr(sK, lb, nn * 16, kk * 2));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Ops::mma(s[mt][2 * nn], qa[mt], kf[0], kf[1]);
          Ops::mma(s[mt][2 * nn + 1], qa[mt], kf[2], kf[3]);
        }
      }
    }

    // Waits for V[kt]; once every warp is past S = Q K^T, K[kt-1] may overwrite K[kt].
    auto wait_v_issue_next = [&] {
      cp_async_wait<0>();
      __syncthreads();
      if (kt > kt_lo) {
        load_tile_async<BN, D, NT>(sK, kg, p.k.row_stride, (kt - 1) * BN, p.seqlen_k, tid, p.head_dim);
        cp_async_commit();
      }
    };
    if constexpr (Cfg::kEarlyV) wait_v_issue_next();

    const int k0 = kt * BN;
    if (k0 + BN > lim_min || k0 < lo_max) {  // some (row, key) of this tile is not admissible
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int c = k0 + j * 8 + 2 * t;
          if (c >= lim[mt][0] || c < lo[mt][0]) s[mt][j][0] = -INFINITY;
          if (c + 1 >= lim[mt][0] || c + 1 < lo[mt][0]) s[mt][j][1] = -INFINITY;
          if (c >= lim[mt][1] || c < lo[mt][1]) s[mt][j][2] = -INFINITY;
          if (c + 1 >= lim[mt][1] || c + 1 < lo[mt][1]) s[mt][j][3] = -INFINITY;
        }
    }

    // Online softmax; row (mt, r) lives in one quad.
    float alpha[MT][2];
    bool grew = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * r], s[mt][j][2 * r + 1]));
        mx                = quad_max(mx);
        const float m_new = fmaxf(mrow[mt][r], mx * sl2);
        // Empty-row guard (building_block.md): with m_new = -inf every p and alpha is 0.
        const float m_use = m_new == -INFINITY ? 0.f : m_new;
        alpha[mt][r]      = ex2(mrow[mt][r] - m_use);
        grew              = grew || m_new != mrow[mt][r];
        mrow[mt][r]       = m_new;
        float sum         = 0.f;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          s[mt][j][2 * r]     = ex2(fmaf(s[mt][j][2 * r], sl2, -m_use));
          s[mt][j][2 * r + 1] = ex2(fmaf(s[mt][j][2 * r + 1], sl2, -m_use));
          sum += s[mt][j][2 * r] + s[mt][j][2 * r + 1];
        }
        lrow[mt][r] = lrow[mt][r] * alpha[mt][r] + sum;
      }
    // Rescale O only when some row of the warp got a new max (alpha = 1 otherwise):
    // after the first few tiles of a long row that is rare, and it saves D/2 FMULs
    // per row block (kEarlyV: every tile, no branch between the softmax and P V).
    if (Cfg::kEarlyV || __any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          o[mt][i][0] *= alpha[mt][0];
          o[mt][i][1] *= alpha[mt][0];
          o[mt][i][2] *= alpha[mt][1];
          o[mt][i][3] *= alpha[mt][1];
        }
    }

    if constexpr (!Cfg::kEarlyV) wait_v_issue_next();

    // O += P V: P's C fragments are the A fragments (16-bit), V via ldmatrix.trans;
    // every V fragment feeds MT products.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = Ops::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = Ops::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = Ops::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = Ops::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, Tile::addr(sV, la, kk * 16, dn * 2));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Ops::mma(o[mt][2 * dn], pa[mt], vf[0], vf[1]);
          Ops::mma(o[mt][2 * dn + 1], pa[mt], vf[2], vf[3]);
        }
      }
    }

    cp_async_wait<0>();  // K[kt-1] has landed
    __syncthreads();
  }

  // Epilogue: merge this block's (O, m, l) into the incoming state, row by row (or,
  // in direct mode, finalize it): attn_fwd_epilogue.cuh.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l_loc = quad_sum(lrow[mt][r]);
      const int row     = q0 + wrow + mt * 16 + g + 8 * r;
      if (row >= p.seqlen_q) continue;
      finish_row<Elem, D>(p, b, h, row, t, mrow[mt][r], l_loc,
                          [&](int i) { return make_float2(o[mt][i][2 * r], o[mt][i][2 * r + 1]); });
    }
}

/// Host-side launcher for one tile configuration and element type; returns false
/// (nothing launched) where the device's shared memory per block cannot hold the tile.
template <class Cfg, class Elem>
bool launch_attn_fwd_sm80(const AttnFwdParams& p, cudaStream_t stream) {
  if (!device_smem_fits(Cfg::kSmemBytes)) return false;
  const std::int64_t n_ctas = std::int64_t((p.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM) * p.heads;
  if (n_ctas > INT_MAX) return false;  // past a 1-D grid: the portable kernel runs
  const dim3 grid(unsigned(n_ctas), unsigned(p.batch));
  auto kernel = attn_fwd_kernel<Cfg, Elem>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err == cudaSuccess) {
    kernel<<<grid, Cfg::kNThreads, Cfg::kSmemBytes, stream>>>(p);
    err = cudaGetLastError();
  }
  check_launch(err, "attn_fwd_kernel");
  return true;
}

}  // namespace DistAttn::Impl::cuda
