// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Backward update kernel, warp-specialized (FlashAttention-3's Hopper backward
// structure, our own code): one CTA per (key tile of 128, KV head, batch) walks the
// query tiles of every query head of the GQA group, 64 queries per step (128 at
// d = 64), with three warpgroups:
//
//   producer warpgroup (56 registers after setmaxnreg.dec):
//     warp 0  K, V once, then per step Q and dO by TMA, LSE and Delta by plain loads
//             and the rows' admissible key ranges, into one of 2 stages, announced on full[stage]
//             (32 arrivals + the TMA bytes), reused once empty[stage] has an arrival
//             from each of the 256 consumer threads;
//     warp 1  dQ writer: once a consumer warpgroup has put its scaled fp32 dQ tile
//             into shared memory, adds it to dq with one tensor bulk reduction
//             (cp.reduce.async.bulk.tensor .add) per 32 columns, so neither
//             atomics nor their issue slots stay in the consumers' loop;
//   two consumer warpgroups (224 registers), 64 keys each, the products of
//     attn_bwd_wgmma_sm90.cuh in the transposed layout (S^T, dP^T with keys as
//     rows; dV += P^T dO, dK += dS^T Q from registers; dQ = dS K from dS^T in
//     shared memory). The only CTA-wide wait left in the loop is the dS^T exchange
//     between the two consumer warpgroups (named barrier of 256 threads); dS^T has
//     2 stages so that a warpgroup may write the next one while the other still
//     reads this one (1 at d = 64, where neither reads the other's). Per step:
//     S^T, dP^T issued; P (masked only where the tile crosses an end of a row's
//     key range),
//     dS; dV issued; dS^T exchange; dQ then dK issued; dQ waited for (dK still
//     running) and handed to the writer; dK waited for and the stage released.
//
// dQ split: d = 128, warpgroup w owns dQ columns [64 w, 64 w + 64) over all 128 keys
// (needs the other warpgroup's dS^T rows: the 256-thread exchange); d = 64, each
// warpgroup owns all 64 columns over its own 64 keys and both partial tiles are
// added to the same dq rows (only a warpgroup-local wait before dQ).
//
// Deterministic mode (semaphore != nullptr): the writer of key tile kt waits until
// the (batch, head, query tile) semaphore reads kt before adding its dQ tile, waits
// for the additions to complete and then increments it, so dq receives the key
// tiles' contributions in key-tile order (for d = 64, warpgroup 1 first adds
// warpgroup 0's partial tile to its own in shared memory) whatever the schedule: bitwise reproducible. Every
// key tile below kt contributes to every query tile kt does (the row limits are
// non-decreasing), and CTAs start in linear blockIdx order, in which key tile kt - 1
// of a head comes before kt (tile_order.cuh: for any group size), so the waits always
// end. That chain holds for dense masks only: under a window or documents the key
// tiles that meet a query tile need not start at tile 0, nor be contiguous, so
// run_attn_bwd declines a deterministic call with such a mask. The grid is
// heads-fastest there (one group of every head), so that the CTAs running together
// form many short chains (NOTES.md run 23).
//
// Measured slower and removed (NOTES.md runs 22, 24, 26, 28): issuing the next
// step's S^T / dP^T before waiting for dK (the stage then goes back a step later and
// the copies land late); issuing dV before the dS math (consumer spills at d = 128);
// dQ split by keys at d = 128 (no exchange, but twice the reduction bytes); the
// default grid heads-fastest (less Q / dO sharing in L2).

#include "attn_launch.hpp"
#include "attn_mask.cuh"
#include "attn_mma.cuh"
#include "tile_order.cuh"
#include "tma.hpp"
#include "wgmma.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

#include <climits>

namespace DistAttn::Impl::cuda {

namespace detail {

/// dq[box at (c0, c1, c2, c3)] += the fp32 box at shared address `src` (async proxy,
/// bulk-group completion).
__device__ __forceinline__ void tma_reduce_add_4d(const void* tmap, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          reinterpret_cast<std::uint64_t>(tmap)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/// The shared-memory sources of every committed bulk group have been read.
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
/// Every committed bulk group has completed (its global writes performed).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

}  // namespace detail

template <class Cfg, class Elem>
__global__ void __launch_bounds__(384, 1)
    attn_bwd_ws_kernel(const AttnBwdParams p, const __grid_constant__ BwdTensorMaps tm, int* const semaphore) {
  using namespace detail;
  using Ops       = ElemOps<Elem>;
  constexpr int D  = Cfg::kHeadDim;
  constexpr int BM = Cfg::kBlockM;  // queries per step
  constexpr int BN = 128;           // keys per CTA, 64 per consumer warpgroup
  static_assert(D == 64 || D == 128, "d 64 or 128");
  static_assert(BM == 64 || (BM == 128 && D == 64), "64 queries per step, or 128 at d = 64");
  constexpr int NQS = 2;  // Q / dO / statistics stages (3 fit at d = 64 only, and measured slower there)
  constexpr int NSC = BM / 2;
  constexpr int NKV = D / 2;
  constexpr bool kDqSplitKeys = D == 64;
  constexpr int NDS = Cfg::kDsStages;
  constexpr int NMQ = BM / 64;  // 64-query blocks of dQ (the M side of its product)
  constexpr uint32_t kKBytes  = BN * D * 2;
  constexpr uint32_t kQBytes  = BM * D * 2;
  constexpr uint32_t kSBytes  = BN * BM * 2;
  constexpr uint32_t kDqBytes = BM * 64 * 4;  // BM x 64 fp32 dQ per warpgroup

  constexpr uint32_t kOffV     = kKBytes;
  constexpr uint32_t kOffQ     = kOffV + kKBytes;
  constexpr uint32_t kOffdO    = kOffQ + NQS * kQBytes;
  constexpr uint32_t kOffdS    = kOffdO + NQS * kQBytes;  // NDS stages
  constexpr uint32_t kOffdQ    = kOffdS + NDS * kSBytes;   // one tile per consumer warpgroup
  constexpr uint32_t kOffStats = kOffdQ + 2 * kDqBytes;
  constexpr uint32_t kOffBar   = kOffStats + NQS * 4 * 4 * BM;
  static_assert(kOffBar + 8 * (1 + 2 * NQS) + 1024 <= uint32_t(Cfg::kSmemBytes), "shared-memory plan");

  // Named barriers (0 is __syncthreads): dS^T exchange, dQ tile empty / full per
  // consumer warpgroup (128 consumers + the 32 writer threads), per-warpgroup dS^T,
  // deterministic d = 64: warpgroup 0's partial dQ tile complete for warpgroup 1.
  constexpr int kBarPdS = 1, kBarDqEmpty = 2, kBarDqFull = 4, kBarWgDs = 6, kBarDqSum = 8;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = (smem_u32(smem) + 1023u) & ~1023u;
  unsigned char* const smem_a = smem + (base - smem_u32(smem));
  const uint32_t sK   = base;
  const uint32_t sV   = base + kOffV;
  const uint32_t sQ0  = base + kOffQ;
  const uint32_t sdO0 = base + kOffdO;
  const uint32_t sdS0 = base + kOffdS;
  const uint32_t sdQ0 = base + kOffdQ;
  float* sLse   = reinterpret_cast<float*>(smem_a + kOffStats);  // [NQS][BM], natural log
  float* sDelta = sLse + NQS * BM;
  int* sLim     = reinterpret_cast<int*>(sDelta + NQS * BM);  // rows' key ranges [sLo, sLim)
  int* sLo      = sLim + NQS * BM;
  const uint32_t bar_kv = base + kOffBar;
  auto bar_full  = [&](int s) { return base + kOffBar + 8 + 8 * s; };
  auto bar_empty = [&](int s) { return base + kOffBar + 8 + 8 * NQS + 8 * s; };

  // Key tile 0 sees every query under a causal mask: heaviest first, over groups of
  // heads (tile_order.cuh). Deterministic runs take one group of every head
  // (heads-fastest): the CTAs that run together then belong to several heads' short
  // semaphore chains instead of one head's long one.
  const GroupedTile order = grouped_tile(int(blockIdx.x), (p.seqlen_k + BN - 1) / BN, p.heads_kv,
                                      semaphore != nullptr ? p.heads_kv : Cfg::kHeadGroup);
  const int kt  = order.rank;
  const int hk  = order.head;
  const int b   = blockIdx.y;
  const int G   = p.heads / p.heads_kv;
  const int k0  = kt * BN;
  const int tid = threadIdx.x;
  const AttnMaskParams& mk = p.mask;

  // Query rows [i0, i1) may see this key tile (attn_mask.cuh): their query tiles.
  int i0 = 0, i1 = p.seqlen_q;
  if (mk.dense()) {
    if (mk.causal) {
      const std::int64_t need = mk.k_offset + mk.k_stride * std::int64_t(k0) - mk.q_offset;
      if (need > 0) {
        const std::int64_t c = (need + mk.q_stride - 1) / mk.q_stride;
        i0 = c < std::int64_t(p.seqlen_q) ? int(c) : p.seqlen_q;
      }
    }
  } else {
    const KeyRange rows = query_rows_of_keys(mk, p.seqlen_q, k0, min(k0 + BN, p.seqlen_k));
    i0 = rows.lo;
    i1 = rows.hi;
  }
  const int n_qt     = (p.seqlen_q + BM - 1) / BM;
  const int first_qt = i0 / BM;
  const int per_head = i0 >= i1 ? 0 : (i1 + BM - 1) / BM - first_qt;
  const int n_iter   = G * per_head;
  if (n_iter == 0) return;  // no query sees this key tile: gradients unchanged

  auto q_tile = [&](int it, int& qt, int& h) {
    const int gi = it / per_head;
    qt           = first_qt + (it - gi * per_head);
    h            = hk * G + gi;
  };

  if (tid == 0) {
    mbar_init(bar_kv, 1);
#pragma unroll
    for (int s = 0; s < NQS; ++s) {
      mbar_init(bar_full(s), 32);
      mbar_init(bar_empty(s), 256);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (tid < 128) {  // producer warpgroup
    setmaxnreg_dec<56>();  // 24 or 32 spill the producer loop (ptxas, 24-32 B at 40)
    const int warp = tid >> 5, lane = tid & 31;
    if (warp == 0) {
      if (lane == 0) {
        mbar_arrive_expect_tx(bar_kv, 2 * kKBytes);
#pragma unroll
        for (int blk = 0; blk < D / 64; ++blk) {
          tma_load_4d(sK + blk * BN * 128, &tm.k, bar_kv, blk * 64, k0, hk, b);
          tma_load_4d(sV + blk * BN * 128, &tm.v, bar_kv, blk * 64, k0, hk, b);
        }
      }
      for (int it = 0; it < n_iter; ++it) {
        const int s = it % NQS;
        int qt, h;
        q_tile(it, qt, h);
        // The statistics are loaded before the wait for the stage, so their latency
        // runs under it.
        float lse_r[BM / 32], delta_r[BM / 32];
#pragma unroll
        for (int r = 0; r < BM / 32; ++r) {
          const int i   = qt * BM + lane + 32 * r;
          const bool ok = i < p.seqlen_q;
          const std::int64_t ii = ok ? i : 0;
          lse_r[r]   = ok ? p.lse.data[p.lse.at(b, h, ii)] : 0.f;
          delta_r[r] = ok ? p.delta.data[p.delta.at(b, h, ii)] : 0.f;
        }
        if (it >= NQS) mbar_wait(bar_empty(s), ((it / NQS) - 1) & 1);
#pragma unroll
        for (int r = 0; r < BM / 32; ++r) {
          sLse[s * BM + lane + 32 * r]   = lse_r[r];
          sDelta[s * BM + lane + 32 * r] = delta_r[r];
          // The key ranges after the wait: held across it, they spill the producer
          // at d = 64 (ptxas, 56 registers). Rows past the end: empty, and (beyond a
          // dense mask) a lower end no row exceeds, so the tile's last row bounds
          // every lower end.
          const int i       = qt * BM + lane + 32 * r;
          const KeyRange kr = i < p.seqlen_q ? row_key_range(mk, p.seqlen_k, i)
                                             : KeyRange{mk.dense() ? 0 : p.seqlen_k, 0};
          sLim[s * BM + lane + 32 * r] = kr.hi;
          sLo[s * BM + lane + 32 * r]  = kr.lo;
        }
        if (lane == 0) {
          const uint32_t bar = bar_full(s);
          mbar_arrive_expect_tx(bar, 2 * kQBytes);
#pragma unroll
          for (int blk = 0; blk < D / 64; ++blk) {
            tma_load_4d(sQ0 + s * kQBytes + blk * BM * 128, &tm.q, bar, blk * 64, qt * BM, h, b);
            tma_load_4d(sdO0 + s * kQBytes + blk * BM * 128, &tm.dout, bar, blk * 64, qt * BM, h, b);
          }
        } else {
          mbar_arrive(bar_full(s));
        }
      }
    } else if (warp == 1) {  // dQ writer
      for (int it = 0; it < n_iter; ++it) {
        int qt, h;
        q_tile(it, qt, h);
        int* sem = semaphore != nullptr ? semaphore + (std::int64_t(b) * p.heads + h) * n_qt + qt : nullptr;
        if (sem != nullptr && lane == 0) {
          int v;
          do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(sem) : "memory");
          } while (v != kt);
          asm volatile("fence.proxy.async.global;\n" ::: "memory");
        }
#pragma unroll
        for (int w = 0; w < 2; ++w) {
          // Deterministic d = 64: warpgroup 1's tile holds the sum of both partials.
          if (kDqSplitKeys && sem != nullptr && w == 0) continue;
          named_barrier(kBarDqFull + w, 160);  // warpgroup w's dQ tile is in shared memory
          if (lane == 0) {
            const int c0 = kDqSplitKeys ? 0 : 64 * w;
#pragma unroll
            for (int blk = 0; blk < 2; ++blk)
              tma_reduce_add_4d(&tm.dq, sdQ0 + w * kDqBytes + blk * (kDqBytes / 2), c0 + 32 * blk, qt * BM, h, b);
            bulk_commit();
          }
        }
        if (lane == 0) bulk_wait_read();
        __syncwarp();
        if (it + 1 < n_iter) {  // the consumers may overwrite the tiles
#pragma unroll
          for (int w = 0; w < 2; ++w)
            if (!(kDqSplitKeys && sem != nullptr && w == 0)) named_barrier_arrive(kBarDqEmpty + w, 160);
        }
        if (sem != nullptr && lane == 0) {  // the next key tile may add once ours have landed
          bulk_wait_all();
          asm volatile("fence.proxy.async.global;\n" ::: "memory");
          __threadfence();
          asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(sem) : "memory");
        }
      }
      if (lane == 0) bulk_wait_read();  // shared memory stays valid until the last reads
    }
    return;
  }

  // ---- consumer warpgroups
  setmaxnreg_inc<224>();  // 128 x 56 + 256 x 224 = 384 x 168, what the launch holds (no spill at 128 queries either)
  const int ctid = tid - 128;
  const int wg   = ctid >> 7;
  const int warp = (ctid >> 5) & 3;
  const int lane = ctid & 31;
  const int g    = lane >> 2;
  const int t    = lane & 3;
  const int krow = wg * 64 + warp * 16 + g;  // key rows krow, krow + 8 (CTA-local)
  const float sl2 = p.scale * kLog2e;

  float dk[NKV], dv[NKV], st[NSC], dpt[NSC], dq[NMQ][32];
  uint32_t pa[BM / 16][4], sa[BM / 16][4];
#pragma unroll
  for (int i = 0; i < NKV; ++i) dk[i] = dv[i] = 0.f;

  auto issue_sdp = [&](int s) {
    const uint32_t sQ = sQ0 + s * kQBytes, sdO = sdO0 + s * kQBytes;
    fence_regs(st);
    fence_regs(dpt);
    wgmma_fence();
    // S^T = K Q^T and dP^T = V dO^T: 64 keys x BM queries per warpgroup.
    auto product = [&](float (&acc)[NSC], uint32_t sA, uint32_t sB) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        if constexpr (BM == 128)
          wgmma_ss_m64n128k16<0, 0>(Tag<Elem>{}, acc, desc_kmajor<BN>(sA, wg * 64, kk), desc_kmajor<BM>(sB, 0, kk), kk);
        else
          wgmma_ss_m64n64k16<0, 0>(Tag<Elem>{}, acc, desc_kmajor<BN>(sA, wg * 64, kk), desc_kmajor<BM>(sB, 0, kk), kk);
      }
      wgmma_commit();
    };
    product(st, sK, sQ);
    product(dpt, sV, sdO);
  };
  // P^T in place; this thread's elements: key rows k0 + krow (+ 8), queries 8 j + 2 t + e.
  auto compute_p = [&](int s) {
    const float* lse_s = sLse + s * BM;
    const int* lim_s   = sLim + s * BM;
    const int* lo_s    = sLo + s * BM;
    // Both ends of the rows' key ranges are non-decreasing in the row: only a tile
    // that crosses the first row's upper end (the diagonal band, the ragged key end)
    // or the last row's lower end (a window, a document start) needs the mask. Dense
    // masks have lower ends 0: the test and the masked elements are the ones before.
    const int kw0        = k0 + wg * 64;
    const bool need_mask = kw0 + 64 > lim_s[0] || kw0 < lo_s[BM - 1];
    const int kr0 = k0 + krow, kr1 = kr0 + 8;
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const float2 ls = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t);
      float l2[2]     = {ls.x * kLog2e, ls.y * kLog2e};
#pragma unroll
      for (int e = 0; e < 2; ++e) l2[e] = l2[e] == -INFINITY ? INFINITY : l2[e];  // empty row: P = 0
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        st[4 * j + e]     = ex2(fmaf(st[4 * j + e], sl2, -l2[e]));
        st[4 * j + 2 + e] = ex2(fmaf(st[4 * j + 2 + e], sl2, -l2[e]));
      }
      if (need_mask) {
        const int2 lm = *reinterpret_cast<const int2*>(lim_s + 8 * j + 2 * t);
        const int2 ll = *reinterpret_cast<const int2*>(lo_s + 8 * j + 2 * t);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int lq = e == 0 ? lm.x : lm.y, lw = e == 0 ? ll.x : ll.y;
          if (kr0 >= lq || kr0 < lw) st[4 * j + e] = 0.f;
          if (kr1 >= lq || kr1 < lw) st[4 * j + 2 + e] = 0.f;
        }
      }
    }
  };
  // P^T packed as the A operand of dV (step kk holds queries 16 kk ..).
  auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) pa[kk][e] = Ops::pack(st[8 * kk + 2 * e], st[8 * kk + 2 * e + 1]);
  };
  auto issue_dv = [&](uint32_t sdO) {  // dV += P^T dO
    fence_regs(dv);
    fence_regs(pa);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      if constexpr (D == 128) wgmma_rs_m64n128k16<1>(Tag<Elem>{}, dv, pa[kk], desc_mnmajor<BM>(sdO, kk), 1);
      else wgmma_rs_m64n64k16<1>(Tag<Elem>{}, dv, pa[kk], desc_mnmajor<BM>(sdO, kk), 1);
    }
    wgmma_commit();
  };
  // dS^T = P^T (dP^T - Delta), packed as the A operand of dK and stored [key][query]
  // for dQ.
  auto compute_ds = [&](int s, int ds) {
    const float* delta_s = sDelta + s * BM;
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const float2 de = *reinterpret_cast<const float2*>(delta_s + 8 * j + 2 * t);
      dpt[4 * j + 0]  = st[4 * j + 0] * (dpt[4 * j + 0] - de.x);
      dpt[4 * j + 1]  = st[4 * j + 1] * (dpt[4 * j + 1] - de.y);
      dpt[4 * j + 2]  = st[4 * j + 2] * (dpt[4 * j + 2] - de.x);
      dpt[4 * j + 3]  = st[4 * j + 3] * (dpt[4 * j + 3] - de.y);
    }
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int idx = 8 * kk + 2 * e;
        sa[kk][e]     = Ops::pack(dpt[idx], dpt[idx + 1]);
      }
    }
    const uint32_t sdS = sdS0 + ds * kSBytes;
    if constexpr (Cfg::kStmatrix) {
      // sa[kk][0..3] are the four 8 x 8 blocks (rows +0 / +8, queries 16 kk + 0 / 8)
      // of stmatrix's fragment layout: lane l gives the address of row l % 8 of block l / 8.
      const int mi = lane >> 3, row = wg * 64 + warp * 16 + (lane & 7) + 8 * (mi & 1);
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                         sdS + atom_offset<BN>(row, 2 * kk + (mi >> 1))),
                     "r"(sa[kk][0]), "r"(sa[kk][1]), "r"(sa[kk][2]), "r"(sa[kk][3])
                     : "memory");
    } else {
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = 2 * kk + (e >> 1), row = krow + 8 * (e & 1);
          asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS + atom_offset<BN>(row, j) + 4 * t), "r"(sa[kk][e]));
        }
    }
  };

  mbar_wait(bar_kv, 0);
  for (int it = 0; it < n_iter; ++it) {
    const int s = it % NQS, ds = it % NDS;  // Q / dO stage, dS^T stage
    const uint32_t sQ = sQ0 + s * kQBytes, sdO = sdO0 + s * kQBytes, sdS = sdS0 + ds * kSBytes;
    mbar_wait(bar_full(s), (it / NQS) & 1);
    issue_sdp(s);
    wgmma_wait<1>();
    fence_regs(st);
    compute_p(s);
    pack_p();
    wgmma_wait<0>();
    fence_regs(dpt);
    compute_ds(s, ds);
    issue_dv(sdO);
    // dS^T rows that dQ reads are complete (async-proxy visible).
    fence_proxy_async();
    if constexpr (kDqSplitKeys) named_barrier(kBarWgDs + wg, 128);
    else named_barrier(kBarPdS, 256);
    // dQ = dS K (dS^T and K both MN-major)
    fence_regs(dq);
    wgmma_fence();
    if constexpr (kDqSplitKeys) {  // this warpgroup's 64 keys, every query block
#pragma unroll
      for (int m = 0; m < NMQ; ++m)
#pragma unroll
        for (int kk = 0; kk < 64 / 16; ++kk)
          wgmma_ss_m64n64k16<1, 1>(Tag<Elem>{}, dq[m], desc_mnmajor<BN>(sdS + wg * 8192, kk, m),
                                   desc_mnmajor<BN>(sK + wg * 8192, kk), kk);
    } else {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
        wgmma_ss_m64n64k16<1, 1>(Tag<Elem>{}, dq[0], desc_mnmajor<BN>(sdS, kk), desc_mnmajor<BN>(sK, kk, wg), kk);
    }
    wgmma_commit();
    // dK += dS^T Q
    fence_regs(dk);
    fence_regs(sa);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      if constexpr (D == 128) wgmma_rs_m64n128k16<1>(Tag<Elem>{}, dk, sa[kk], desc_mnmajor<BM>(sQ, kk), 1);
      else wgmma_rs_m64n64k16<1>(Tag<Elem>{}, dk, sa[kk], desc_mnmajor<BM>(sQ, kk), 1);
    }
    wgmma_commit();
    wgmma_wait<1>();  // dV and dQ done, dK may still run
    fence_regs(dq);
    fence_regs(dv);
    fence_regs(pa);
    // scale dQ into this warpgroup's tile: 2 boxes of 32 columns x 64 rows, 128-byte
    // swizzled (the tensor map's layout): row r, 16-byte chunk c at c ^ (r % 8).
    // Deterministic d = 64: warpgroup 0's partial goes to its tile, warpgroup 1 adds
    // it to its own (the thread with the same index holds the same elements) and only
    // tile 1 is added to dq; both warpgroups sync around that hand-over.
    const bool det_sum = kDqSplitKeys && semaphore != nullptr;
    if (it > 0 && !(det_sum && wg == 0)) named_barrier(kBarDqEmpty + wg, 160);  // the writer read the last tile
    auto store_dq = [&](bool add_tile0) {
      const uint32_t sdQ = sdQ0 + wg * kDqBytes;
#pragma unroll
      for (int m = 0; m < NMQ; ++m)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = 64 * m + warp * 16 + g + 8 * r;
          const int c   = 2 * (j & 3) + (t >> 1);
          const uint32_t o = (j >> 2) * (kDqBytes / 2) + row * 128 + ((c ^ (row & 7)) << 4) + (t & 1) * 8;
          float x = p.scale * dq[m][4 * j + 2 * r], y = p.scale * dq[m][4 * j + 2 * r + 1];
          if (add_tile0) {
            float x0, y0;
            asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(x0), "=f"(y0) : "r"(sdQ0 + o) : "memory");
            x = x0 + x;
            y = y0 + y;
          }
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(sdQ + o), "f"(x), "f"(y) : "memory");
        }
    };
    if (det_sum) {
      if (wg == 0) store_dq(false);
      named_barrier(kBarDqSum, 256);  // tile 0 complete
      if (wg == 1) store_dq(true);
      named_barrier(kBarDqSum, 256);  // tile 0 read: free for the next step
    } else {
      store_dq(false);
    }
    fence_proxy_async();
    if (!(det_sum && wg == 0)) named_barrier_arrive(kBarDqFull + wg, 160);
    wgmma_wait<0>();
    fence_regs(dk);
    fence_regs(sa);
    mbar_arrive(bar_empty(s));
  }

  // Epilogue: dk += scale dK, dv += dV for this thread's key rows (this CTA owns them).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int kr = k0 + krow + 8 * r;
    if (kr >= p.seqlen_k) continue;
    float* dkp = p.dk.data + p.dk.at(b, kr, hk) + 2 * t;
    float* dvp = p.dv.data + p.dv.at(b, kr, hk) + 2 * t;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      if (j * 8 >= p.head_dim) break;  // zero padding of a head_dim below D
      float2* pk = reinterpret_cast<float2*>(dkp + j * 8);
      float2* pv = reinterpret_cast<float2*>(dvp + j * 8);
      float2 ok = *pk, ov = *pv;
      ok.x = fmaf(p.scale, dk[4 * j + 2 * r], ok.x);
      ok.y = fmaf(p.scale, dk[4 * j + 2 * r + 1], ok.y);
      ov.x += dv[4 * j + 2 * r];
      ov.y += dv[4 * j + 2 * r + 1];
      *pk = ok;
      *pv = ov;
    }
  }
}

/// Launches the warp-specialized backward; returns false without launching when a
/// tensor map cannot be made (strides or alignment TMA cannot describe), so the
/// caller can take another kernel.
template <class Cfg, class Elem>
bool launch_attn_bwd_ws(const AttnBwdParams& p, cudaStream_t stream) {
  constexpr bool bf16 = std::is_same<Elem, __nv_bfloat16>::value;
  BwdTensorMaps tm{};
  if (!encode_tile_tensor_map(&tm.q, p.q.data, bf16, p.head_dim, p.seqlen_q, p.heads, p.batch, p.q.row_stride,
                              p.q.head_stride, p.q.batch_stride, Cfg::kBlockM) ||
      !encode_tile_tensor_map(&tm.dout, p.dout.data, bf16, p.head_dim, p.seqlen_q, p.heads, p.batch, p.dout.row_stride,
                              p.dout.head_stride, p.dout.batch_stride, Cfg::kBlockM) ||
      !encode_tile_tensor_map(&tm.k, p.k.data, bf16, p.head_dim, p.seqlen_k, p.heads_kv, p.batch, p.k.row_stride,
                              p.k.head_stride, p.k.batch_stride, 128) ||
      !encode_tile_tensor_map(&tm.v, p.v.data, bf16, p.head_dim, p.seqlen_k, p.heads_kv, p.batch, p.v.row_stride,
                              p.v.head_stride, p.v.batch_stride, 128) ||
      !encode_f32_reduce_tensor_map(&tm.dq, p.dq.data, p.head_dim, p.seqlen_q, p.heads, p.batch, p.dq.row_stride,
                                    p.dq.head_stride, p.dq.batch_stride, Cfg::kBlockM))
    return false;
  const int n_kt = (p.seqlen_k + 127) / 128;
  const int n_qt = (p.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
  if (std::int64_t(n_kt) * p.heads_kv > INT_MAX) return false;  // past a 1-D grid: another kernel runs
  int* sem       = nullptr;
  cudaError_t err = cudaSuccess;
  if (p.deterministic) {
    const std::size_t bytes = sizeof(int) * std::size_t(p.batch) * p.heads * n_qt;
    err = cudaMallocAsync(reinterpret_cast<void**>(&sem), bytes, stream);
    if (err == cudaSuccess) err = cudaMemsetAsync(sem, 0, bytes, stream);
    check_launch(err, "attn_bwd_ws_kernel (semaphores)");
  }
  const dim3 grid(unsigned(n_kt * p.heads_kv), unsigned(p.batch));
  auto kernel = attn_bwd_ws_kernel<Cfg, Elem>;
  err         = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err == cudaSuccess) {
    kernel<<<grid, 384, Cfg::kSmemBytes, stream>>>(p, tm, sem);
    err = cudaGetLastError();
  }
  if (sem != nullptr) {
    const cudaError_t e2 = cudaFreeAsync(sem, stream);
    if (err == cudaSuccess) err = e2;
  }
  check_launch(err, "attn_bwd_ws_kernel");
  return true;
}

}  // namespace DistAttn::Impl::cuda
