// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Forward kernel, warp-specialized, with FlashAttention-3's intra-warpgroup overlap
// layered on the ping-pong schedule (FA3's Hopper forward structure, our own code).
// A CTA owns 64 x kConsumerWGs query rows of one (batch, head) and walks their key
// tiles; update mode merges the result into the incoming state, direct mode writes the
// final O and LSE (attn_fwd_epilogue.cuh). 128 x (1 + kConsumerWGs) threads:
//
//   producer warpgroup (setmaxnreg.dec): one thread brings Q once and then, per key
//     tile, K and V by TMA into separate pipelines (kStagesK K stages, kStagesV V
//     stages, each with a full and an empty mbarrier), K of tile i before V of tile
//     i - 1, since V is consumed a step after K;
//   two (d = 128, 192, 256) or three (d = 64) consumer warpgroups (setmaxnreg.inc),
//     64 query rows each. Step i of a warpgroup, in its turn (named barriers 1 + warpgroup, so
//     the warpgroups' products take the tensor cores one after another):
//         S_i = Q K_i^T              (ss)   issued
//         O  += P_{i-1} V_{i-1}      (rs)   issued right behind it
//     with O rescaled by step i - 1's row maxima between the two issues; then, out of
//     its turn, S_i waited for and K_i released, the softmax of S_i run while
//     P_{i-1} V_{i-1} and the other warpgroups' products are in the tensor cores,
//     P V waited for and V_{i-1} released, and P_i packed. The tail rescales O and
//     issues the last P V.
//
// Why both: the ping-pong alone (the kernel this one replaced) hides a warpgroup's
// softmax only under the other warpgroup's single product, shorter than the softmax
// at d = 128 (NOTES.md run 30: tensor pipe 59% busy, 28% barrier stalls); the
// overlap alone, on a schedule that keeps both warpgroups in lockstep, only moved
// the wait (NOTES.md run 27). Here a turn carries two products, and the softmax has
// the rest of its own turn plus the other warpgroups' whole turns to run under
// (NOTES.md run 31: this kernel's producer with the plain ping-pong turns ran no
// faster than the kernel it replaced; the overlap is the gain).
//
// Rescale order: step i + 1 computes O = O * alpha_i + P_i V_i with alpha_i =
// 2^(m_{i-1} - m_i): O held the products up to P_{i-1} V_{i-1}, relative to m_{i-1},
// and P_i was formed against m_i.

#include "attn_fwd_epilogue.cuh"
#include "attn_launch.hpp"
#include "attn_mask.cuh"
#include "attn_mma.cuh"
#include "tile_order.cuh"
#include "tma.hpp"
#include "wgmma.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

#include <climits>
#include <cstdint>

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kNThreads, 1)
    attn_fwd_ws_kernel(const AttnFwdParams p, const __grid_constant__ FwdTensorMaps tm) {
  using namespace detail;
  using Ops  = ElemOps<Elem>;
  constexpr int D  = Cfg::kHeadDim;
  constexpr int NWG = Cfg::kConsumerWGs;
  constexpr int BM  = Cfg::kBlockM;
  constexpr int BN = Cfg::kBlockN;
  constexpr int NK = Cfg::kStagesK;
  constexpr int NV = Cfg::kStagesV;
  constexpr int NS = BN / 2;  // S accumulator floats per thread
  constexpr int NO = D / 2;   // O accumulator floats per thread
  constexpr uint32_t kQBytes  = BM * D * 2;
  constexpr uint32_t kKVBytes = BN * D * 2;
  static_assert(BN % 16 == 0 && D % 64 == 0, "16-key P steps, 64-column panels");

  extern __shared__ __align__(128) unsigned char smem[];
  // Tiles start on a 1024-byte boundary (the 128-byte swizzle period).
  const uint32_t sQ  = (smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t sK0 = sQ + kQBytes;             // K stage s at sK0 + s * kKVBytes
  const uint32_t sV0 = sK0 + NK * kKVBytes;      // V stage s at sV0 + s * kKVBytes
  const uint32_t sBar = sV0 + NV * kKVBytes;     // barQ, fullK[NK], emptyK[NK], fullV[NV], emptyV[NV]
  const uint32_t barQ = sBar;
  auto full_k  = [&](int s) { return sBar + 8 + 8 * s; };
  auto empty_k = [&](int s) { return sBar + 8 + 8 * NK + 8 * s; };
  auto full_v  = [&](int s) { return sBar + 8 + 16 * NK + 8 * s; };
  auto empty_v = [&](int s) { return sBar + 8 + 16 * NK + 8 * NV + 8 * s; };

  // Heaviest causal tiles first, over groups of heads (tile_order.cuh). Without a
  // causal mask every tile is as heavy, and one head at a time lets the CTAs in flight
  // share one head's K and V: +2 % at 32K on an H200, the same at 8K (NOTES.md round 14).
  const int n_qtiles   = (p.seqlen_q + BM - 1) / BM;
  const GroupedTile order =
      grouped_tile(int(blockIdx.x), n_qtiles, p.heads, p.mask.causal ? Cfg::kHeadGroup : 1);
  const int qt  = n_qtiles - 1 - order.rank;
  const int h   = order.head;
  const int b   = blockIdx.y;
  const int hk  = h / (p.heads / p.heads_kv);
  const int q0  = qt * BM;
  const int tid = threadIdx.x;

  const AttnMaskParams& mk = p.mask;
  const int q_last = min(q0 + BM, p.seqlen_q) - 1;
  // The rows' key ranges grow with the row (attn_mask.cuh): the CTA walks the key
  // tiles of [lo(q0), hi(q_last)) and skips the rest.
  const KeyRange first = row_key_range(mk, p.seqlen_k, q0), last = row_key_range(mk, p.seqlen_k, q_last);
  const int kt_lo = first.lo / BN;
  const int kt_hi = (last.hi + BN - 1) / BN;
  const int n_kt  = kt_hi > kt_lo ? kt_hi - kt_lo : 0;
  if (n_kt == 0) {  // no row of the tile sees any key: state unchanged
    if (p.o.data != nullptr && tid >= 128) {  // direct mode: the consumers' rows still get their (empty) result
      const int ct = tid - 128, lane = ct & 31;
      const int row0 = q0 + (ct >> 7) * 64 + ((ct >> 5) & 3) * 16 + (lane >> 2);
#pragma unroll
      for (int r = 0; r < 2; ++r)
        if (row0 + 8 * r < p.seqlen_q) write_empty_row<Elem, D>(p, b, h, row0 + 8 * r, lane & 3);
    }
    return;
  }
  // Key tiles are processed from the last one down (masked tiles first): step i
  // handles tile kt_hi - 1 - i, its K in K stage i % NK and its V in V stage i % NV.
  auto tile_of = [&](int i) { return kt_hi - 1 - i; };

  if (tid == 0) {
    mbar_init(barQ, 1);
#pragma unroll
    for (int s = 0; s < NK; ++s) {
      mbar_init(full_k(s), 1);
      mbar_init(empty_k(s), 128 * NWG);
    }
#pragma unroll
    for (int s = 0; s < NV; ++s) {
      mbar_init(full_v(s), 1);
      mbar_init(empty_v(s), 128 * NWG);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (tid < 128) {  // producer warpgroup: one thread issues every copy
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (tid == 0) {
      mbar_arrive_expect_tx(barQ, kQBytes);
#pragma unroll
      for (int blk = 0; blk < D / 64; ++blk) tma_load_4d(sQ + blk * BM * 128, &tm.q, barQ, blk * 64, q0, h, b);
      // Tile of step i into stage i % n of a pipeline of n stages, once its previous
      // use has been released.
      auto load = [&](int i, const CUtensorMap* map, uint32_t stage0, int n, auto full, auto empty) {
        const int st = i % n;
        if (i >= n) mbar_wait(empty(st), (i / n - 1) & 1);
        mbar_arrive_expect_tx(full(st), kKVBytes);
#pragma unroll
        for (int blk = 0; blk < D / 64; ++blk)
          tma_load_4d(stage0 + st * kKVBytes + blk * BN * 128, map, full(st), blk * 64, tile_of(i) * BN, hk, b);
      };
      auto load_k = [&](int i) { load(i, &tm.k, sK0, NK, full_k, empty_k); };
      auto load_v = [&](int i) { load(i, &tm.v, sV0, NV, full_v, empty_v); };
      load_k(0);  // V of a tile is consumed a step after its K
      for (int i = 1; i < n_kt; ++i) {
        load_k(i);
        load_v(i - 1);
      }
      load_v(n_kt - 1);
    }
    return;  // the CTA (and its barriers) lives on until the consumers finish
  }

  setmaxnreg_inc<Cfg::kConsumerRegs>();
  const int ct   = tid - 128;
  const int cw   = ct >> 7;         // consumer warpgroup: query rows 64 cw ..
  const int warp = (ct >> 5) & 3;   // rows + 16 warp
  const int lane = ct & 31;
  const int g    = lane >> 2;
  const int t    = lane & 3;
  const int wrow = cw * 64 + warp * 16;

  // A tile [k0, k0 + BN) is admissible for every row of the CTA iff k0 >= lo(q_last)
  // and k0 + BN <= hi(q0); only the others are masked per element. Dense masks have
  // lo = 0 everywhere, so their test and their masked elements are the ones before.
  const int lim_min = first.hi, lo_max = last.lo;
  int lim[2], lo[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row      = q0 + wrow + g + 8 * r;
    const KeyRange kr  = row < p.seqlen_q ? row_key_range(mk, p.seqlen_k, row) : KeyRange{0, 0};
    lim[r]             = kr.hi;
    lo[r]              = kr.lo;
  }

  float o[NO];
#pragma unroll
  for (int i = 0; i < NO; ++i) o[i] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const float sl2 = p.scale * kLog2e;
  float s[NS];
  uint32_t pa[BN / 16][4];

  auto issue_s = [&](uint32_t sK) {  // S = Q K^T, this warpgroup's 64 rows x BN keys
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<BN, 0, 0>(Tag<Elem>{}, s, desc_kmajor<BM>(sQ, cw * 64, kk), desc_kmajor<BN>(sK, 0, kk), kk);
    wgmma_commit();
  };
  auto issue_pv = [&](uint32_t sV) {  // O += P V, P from registers, V read transposed
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) wgmma_rs<D, 1>(Tag<Elem>{}, o, pa[kk], desc_mnmajor<BN>(sV, kk), 1);
    wgmma_commit();
  };
  // Mask and online softmax of S in place (P, fp32). Returns whether O needs the rescale (a row of the warp got a
  // new max).
  auto softmax = [&](int k0, float (&alpha)[2]) {
    if (k0 + BN > lim_min || k0 < lo_max) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int c = k0 + j * 8 + 2 * t;
        if (c >= lim[0] || c < lo[0]) s[4 * j + 0] = -INFINITY;
        if (c + 1 >= lim[0] || c + 1 < lo[0]) s[4 * j + 1] = -INFINITY;
        if (c >= lim[1] || c < lo[1]) s[4 * j + 2] = -INFINITY;
        if (c + 1 >= lim[1] || c + 1 < lo[1]) s[4 * j + 3] = -INFINITY;
      }
    }
    bool grew = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The row maximum as a tree (5 dependent steps, not 16): during a softmax this
      // warp is often the only one issuing on its SM sub-partition, so a chain's latency
      // is exposed. +1.6-3.6 % at d = 128, S >= 16K, and +1-3 % at d = 64 in most pairs
      // (NOTES.md runs 88-89); the maximum, and so every bit, is the same in any order.
      // Halving folds (an odd count keeps its middle entry for the next fold: 80- and
      // 112-key tiles have 5 and 7 blocks of 16 keys).
      float t8[BN / 16];
#pragma unroll
      for (int q = 0; q < BN / 16; ++q)
        t8[q] = fmaxf(fmaxf(s[8 * q + 2 * r], s[8 * q + 2 * r + 1]), fmaxf(s[8 * q + 4 + 2 * r], s[8 * q + 5 + 2 * r]));
#pragma unroll
      for (int n = BN / 16; n > 1; n = (n + 1) / 2)
#pragma unroll
        for (int q = 0; q < n / 2; ++q) t8[q] = fmaxf(t8[q], t8[q + (n + 1) / 2]);
      const float mx    = quad_max(t8[0]);
      const float m_new = fmaxf(mrow[r], mx * sl2);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // empty-row guard (docs/design/building_block.md)
      alpha[r]          = ex2(mrow[r] - m_use);
      grew              = grew || m_new != mrow[r];
      mrow[r]           = m_new;
      float sum         = 0.f;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        s[4 * j + 2 * r]     = ex2(fmaf(s[4 * j + 2 * r], sl2, -m_use));
        s[4 * j + 2 * r + 1] = ex2(fmaf(s[4 * j + 2 * r + 1], sl2, -m_use));
        sum += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
      }
      lrow[r] = lrow[r] * alpha[r] + sum;
    }
    return __any_sync(0xffffffffu, grew);
  };
  auto rescale_o = [&](const float (&alpha)[2]) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j + 0] *= alpha[0];
      o[4 * j + 1] *= alpha[0];
      o[4 * j + 2] *= alpha[1];
      o[4 * j + 3] *= alpha[1];
    }
  };
  auto pack_p = [&] {  // the S accumulators of keys 16 kk.. are the A operand of step kk
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = Ops::pack(s[8 * kk + 0], s[8 * kk + 1]);
      pa[kk][1] = Ops::pack(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = Ops::pack(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = Ops::pack(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };

  // Turns: consumer warpgroup 0 goes first (the last warpgroup pre-arrives on its
  // barrier); every turn ends with an arrive on the next warpgroup's barrier, and the
  // last warpgroup skips its last one so the counts balance.
  const int turn_mine = 1 + cw, turn_next = 1 + (cw + 1) % NWG;
  const bool last_wg = cw == NWG - 1;
  if (last_wg) named_barrier_arrive(turn_next, 256);
  mbar_wait(barQ, 0);

  // Step 0: S_0 alone.
  mbar_wait(full_k(0), 0);
  named_barrier(turn_mine, 256);
  fence_regs(s);
  wgmma_fence();
  issue_s(sK0);
  if (!(last_wg && n_kt == 1)) named_barrier_arrive(turn_next, 256);
  wgmma_wait<0>();
  fence_regs(s);
  mbar_arrive(empty_k(0));
  float alpha_prev[2] = {1.f, 1.f};
  bool grew_prev      = false;
  {
    float alpha[2];
    softmax(tile_of(0) * BN, alpha);  // O is still 0: no rescale
  }
  pack_p();

  for (int i = 1; i < n_kt; ++i) {
    const int sk = i % NK, sv = (i - 1) % NV;
    mbar_wait(full_k(sk), (i / NK) & 1);
    mbar_wait(full_v(sv), ((i - 1) / NV) & 1);
    named_barrier(turn_mine, 256);
    fence_regs(s);
    fence_regs(o);
    fence_regs(pa);
    wgmma_fence();
    issue_s(sK0 + sk * kKVBytes);
    // O takes the previous softmax's rescale here, under S_i in the tensor cores, not
    // after P_{i-1} V_{i-1} completes (FA3's position; the same operations in the same
    // order, so the same bits): +1-4 % (NOTES.md run 79).
    if (grew_prev) rescale_o(alpha_prev);
    fence_regs(o);
    wgmma_fence();
    issue_pv(sV0 + sv * kKVBytes);
    if (!(last_wg && i == n_kt - 1)) named_barrier_arrive(turn_next, 256);
    wgmma_wait<1>();  // S_i in; P_{i-1} V_{i-1} may still run
    fence_regs(s);
    mbar_arrive(empty_k(sk));
    float alpha[2];
    const bool grew = softmax(tile_of(i) * BN, alpha);
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(pa);  // P_{i-1}'s registers stay untouched until its product is done
    mbar_arrive(empty_v(sv));
    grew_prev     = grew;
    alpha_prev[0] = alpha[0];
    alpha_prev[1] = alpha[1];
    pack_p();
  }

  // Tail: P_{n-1} V_{n-1}, outside the turns (the other warpgroups' products may
  // run beside it).
  {
    const int sv = (n_kt - 1) % NV;
    mbar_wait(full_v(sv), ((n_kt - 1) / NV) & 1);
    if (grew_prev) rescale_o(alpha_prev);
    fence_regs(o);
    fence_regs(pa);
    wgmma_fence();
    issue_pv(sV0 + sv * kKVBytes);
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(pa);
    mbar_arrive(empty_v(sv));
  }

  // Epilogue: merge into the incoming state, or write the final O and LSE (direct mode).
  // The mode is tested once, outside the rows: tested per row (finish_row), both
  // epilogues' addresses stay live beside O, which at d = 256 with 80-key tiles cost
  // 4 bytes of spill (nvcc 13.0).
  auto rows = [&](auto finish) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l_loc = quad_sum(lrow[r]);
      const int row     = q0 + wrow + g + 8 * r;
      if (row >= p.seqlen_q) continue;
      finish(row, mrow[r], l_loc, [&](int j) { return make_float2(o[4 * j + 2 * r], o[4 * j + 2 * r + 1]); });
    }
  };
  if (p.o.data != nullptr)
    rows([&](int row, float m2, float l, auto get) { write_direct_row<Elem, D>(p, b, h, row, t, m2, l, get); });
  else
    rows([&](int row, float m2, float l, auto get) { merge_state_row<D>(p, b, h, row, t, m2, l, get); });
}

/// Launches the warp-specialized forward; returns false (nothing launched) when TMA
/// cannot describe Q, K or V (a zero or >= 2^40-byte stride, a driver without the
/// encoder): the tuned path then declines and the portable kernel runs.
template <class Cfg, class Elem>
bool launch_attn_fwd_ws(const AttnFwdParams& p, cudaStream_t stream) {
  FwdTensorMaps tm{};
  constexpr bool bf16 = std::is_same<Elem, __nv_bfloat16>::value;
  if (!encode_tile_tensor_map(&tm.q, p.q.data, bf16, p.head_dim, p.seqlen_q, p.heads, p.batch, p.q.row_stride,
                              p.q.head_stride, p.q.batch_stride, Cfg::kBlockM) ||
      !encode_tile_tensor_map(&tm.k, p.k.data, bf16, p.head_dim, p.seqlen_k, p.heads_kv, p.batch, p.k.row_stride,
                              p.k.head_stride, p.k.batch_stride, Cfg::kBlockN) ||
      !encode_tile_tensor_map(&tm.v, p.v.data, bf16, p.head_dim, p.seqlen_k, p.heads_kv, p.batch, p.v.row_stride,
                              p.v.head_stride, p.v.batch_stride, Cfg::kBlockN))
    return false;
  const std::int64_t n_ctas = std::int64_t((p.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM) * p.heads;
  if (n_ctas > INT_MAX) return false;  // past a 1-D grid: the portable kernel runs
  const dim3 grid(unsigned(n_ctas), unsigned(p.batch));
  auto kernel = attn_fwd_ws_kernel<Cfg, Elem>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err == cudaSuccess) {
    kernel<<<grid, Cfg::kNThreads, Cfg::kSmemBytes, stream>>>(p, tm);
    err = cudaGetLastError();
  }
  check_launch(err, "attn_fwd_ws_kernel");
  return true;
}

}  // namespace DistAttn::Impl::cuda
