// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Backward update kernel, "P/dS through shared memory" layout (FlashAttention-2's
// sm80 backward): one CTA per (key tile, KV head, batch), query tiles of every head
// of the GQA group, dK/dV in registers, dQ by fp32 red.add; each product gets its
// own warp grid so that every fragment loaded from shared memory feeds two m16
// blocks:
//
//   phase 1  S = Q K^T, dP = dO V^T   warps 2 (32 queries) x 4 (32 keys)
//            P = exp2(S scale log2e - LSE log2e), dS = P (dP - Delta)
//            P, dS -> shared memory (16-bit, [query][key])
//   phase 2  dV += P^T dO, dK += dS^T Q   warps 4 (32 keys) x 2 (d/2)
//   phase 3  dQ += scale dS K             warps 2 (32 queries) x 4 (d/4)
//
// Shared-memory bytes per mma (d = 128): ~230 against ~290 for the 16-key-warp
// kernel, for 16 KB more shared memory (the P tile) and the P/dS stores.
//
// dQ goes to a zeroed fp32 scratch tile per (batch, head, query tile) in the order
// the warps hold their fragments (DqFragOrder), so that each red.add of a warp covers
// one whole 128-byte line; a second kernel adds the scratch into dq (FA2's dq_accum).
// The KV heads are launched in chunks whose scratch stays under a cap (256 MiB,
// DISTATTN_SM80_DQ_SCRATCH_MIB), so the transient memory grows with the sequence
// only beyond one KV head's share.
// Straight into dq, each scalar red.add touched 8 rows at a stride (8 half-used
// sectors; sm_80 has no vector red to halve that): 0.69x FA2 instead of 0.90x
// (NOTES.md round 9).

#include "attn_launch.hpp"
#include "attn_mma.cuh"
#include "tile_order.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

namespace DistAttn::Impl::cuda {

/// Where phase 3 leaves thread `tid`'s j-th dQ value of a query tile in the scratch
/// tile (j * kNThreads + tid: one line per warp and j), and the inverse, for the
/// kernel that adds the scratch into dq. Thread tid of warp w = w3d W3Q + w3q holds
/// rows 32 w3q + 16 mt + 8 r + g and columns C3 w3d + 8 i + 2 t + e, lane = 4 g + t,
/// as j = ((mt 2 + r) C3 / 8 + i) 2 + e.
template <class Cfg>
struct DqFragOrder {
  static constexpr int NT = Cfg::kNThreads, BM = Cfg::kBlockM, D = Cfg::kHeadDim;
  static constexpr int W3Q = BM / 32, W3D = Cfg::kNWarps / W3Q, C3 = D / W3D;
  static constexpr int kTile = BM * D;  // floats per (batch, head, query tile)
  static_assert(kTile == NT * 2 * 2 * (C3 / 8) * 2, "every thread holds the same number of dQ values");
  static __host__ __device__ constexpr int j(int mt, int r, int i, int e) { return ((mt * 2 + r) * (C3 / 8) + i) * 2 + e; }
  /// Scratch offset of (row, col) inside a tile.
  static __device__ __forceinline__ int offset(int row, int col) {
    const int w3q = row / 32, mt = (row % 32) / 16, r = (row % 16) / 8, g = row % 8;
    const int w3d = col / C3, i = (col % C3) / 8, t = (col % 8) / 2, e = col % 2;
    const int tid = 32 * (w3d * W3Q + w3q) + 4 * g + t;
    return j(mt, r, i, e) * NT + tid;
  }
};

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kNThreads, Cfg::kMinBlocks)
    attn_bwd_ps_kernel(const AttnBwdParams p, float* __restrict__ dq_scratch, const int hk0, const int nhk) {
  using namespace detail;
  using Ops        = ElemOps<Elem>;
  constexpr int D  = Cfg::kHeadDim;
  constexpr int BM = Cfg::kBlockM;  // queries per step
  constexpr int BN = Cfg::kBlockN;  // keys per CTA
  constexpr int NT = Cfg::kNThreads;
  constexpr int W1M = BM / 32, W1N = BN / 32;                        // phase-1 warp grid
  constexpr int W2K = BN / 32, W2D = Cfg::kNWarps / W2K, C2 = D / W2D;  // phase 2
  constexpr int W3Q = BM / 32, W3D = Cfg::kNWarps / W3Q, C3 = D / W3D;  // phase 3
  static_assert(W1M * W1N == Cfg::kNWarps && C2 % 16 == 0 && C3 % 16 == 0, "warp grids");
  using TileD = SwizzledTile<D>;   // K, V, Q, dO: rows of head_dim
  using TileP = SwizzledTile<BN>;  // P, dS: BM query rows of BN keys
  constexpr uint32_t kKBytes = BN * D * 2;
  constexpr uint32_t kQBytes = BM * D * 2;
  constexpr uint32_t kPBytes = BM * BN * 2;

  constexpr uint32_t kOffV     = kKBytes;
  constexpr uint32_t kOffQ     = kOffV + kKBytes;      // 2 stages
  constexpr uint32_t kOffdO    = kOffQ + 2 * kQBytes;  // 2 stages
  constexpr uint32_t kOffP     = kOffdO + 2 * kQBytes;
  constexpr uint32_t kOffdS    = kOffP + kPBytes;
  constexpr uint32_t kOffStats = kOffdS + kPBytes;
  static_assert(kOffStats + 2 * 3 * 4 * BM == uint32_t(Cfg::kSmemBytes), "shared-memory plan");

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sK   = smem_u32(smem);
  const uint32_t sV   = sK + kOffV;
  const uint32_t sQ0  = sK + kOffQ;
  const uint32_t sdO0 = sK + kOffdO;
  const uint32_t sP   = sK + kOffP;
  const uint32_t sdS  = sK + kOffdS;
  float* sLse   = reinterpret_cast<float*>(smem + kOffStats);  // [2][BM], natural log
  float* sDelta = sLse + 2 * BM;                               // [2][BM]
  int* sLim     = reinterpret_cast<int*>(sDelta + 2 * BM);     // [2][BM]

  // This launch covers KV heads hk0 .. hk0 + nhk - 1. Key tile 0 sees every query
  // under a causal mask: heaviest first, over groups of heads (tile_order.cuh).
  const GroupedTile order = grouped_tile(int(blockIdx.x), (p.seqlen_k + BN - 1) / BN, nhk, Cfg::kHeadGroup);
  const int kt   = order.rank;
  const int hk   = hk0 + order.head;
  const int b    = blockIdx.y;
  const int G    = p.heads / p.heads_kv;
  const int k0   = kt * BN;
  const int tid  = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g    = lane >> 2;
  const int t    = lane & 3;
  const AttnMaskParams& mk = p.mask;

  // First query that sees key k0 (and so any key of this tile): q_pos(i) >= k_pos(k0).
  int i0 = 0;
  if (mk.causal) {
    const std::int64_t need = mk.k_offset + mk.k_stride * std::int64_t(k0) - mk.q_offset;
    if (need > 0) {
      const std::int64_t c = (need + mk.q_stride - 1) / mk.q_stride;
      i0 = c < std::int64_t(p.seqlen_q) ? int(c) : p.seqlen_q;
    }
  }
  const int n_qt     = (p.seqlen_q + BM - 1) / BM;
  const int first_qt = i0 / BM;
  const int per_head = i0 >= p.seqlen_q ? 0 : n_qt - first_qt;
  const int n_iter   = G * per_head;
  if (n_iter == 0) return;  // no query sees this key tile: gradients unchanged

  const Elem* kg = static_cast<const Elem*>(p.k.data) + p.k.at(b, 0, hk);
  const Elem* vg = static_cast<const Elem*>(p.v.data) + p.v.at(b, 0, hk);
  const float sl2 = p.scale * kLog2e;

  // Query-side loads of step `it` (Q, dO, raw LSE and Delta; zero-filled past
  // seqlen_q), all by cp.async, and the per-query key limits by plain stores.
  auto issue_q_side = [&](int it, int stage) {
    const int gi = it / per_head;
    const int qt = first_qt + (it - gi * per_head);
    const int h  = hk * G + gi;
    const Elem* qg  = static_cast<const Elem*>(p.q.data) + p.q.at(b, 0, h);
    const Elem* dog = static_cast<const Elem*>(p.dout.data) + p.dout.at(b, 0, h);
    load_tile_async<BM, D, NT>(sQ0 + stage * kQBytes, qg, p.q.row_stride, qt * BM, p.seqlen_q, tid, p.head_dim);
    load_tile_async<BM, D, NT>(sdO0 + stage * kQBytes, dog, p.dout.row_stride, qt * BM, p.seqlen_q, tid, p.head_dim);
    if (tid < BM) {
      const int i   = qt * BM + tid;
      const bool ok = i < p.seqlen_q;
      const std::int64_t ii = ok ? i : 0;
      cp_async_4(smem_u32(sLse + stage * BM + tid),
                 p.lse.data + p.lse.at(b, h, ii), ok);
      cp_async_4(smem_u32(sDelta + stage * BM + tid),
                 p.delta.data + p.delta.at(b, h, ii), ok);
    }
  };
  auto store_limits = [&](int it, int stage) {
    if (tid < BM) {
      const int gi = it / per_head;
      const int i  = (first_qt + (it - gi * per_head)) * BM + tid;
      sLim[stage * BM + tid] =
          i < p.seqlen_q ? row_limit(mk.causal, mk.q_offset, mk.q_stride, mk.k_offset, mk.k_stride, p.seqlen_k, i)
                         : 0;
    }
  };

  load_tile_async<BN, D, NT>(sK, kg, p.k.row_stride, k0, p.seqlen_k, tid, p.head_dim);
  load_tile_async<BN, D, NT>(sV, vg, p.v.row_stride, k0, p.seqlen_k, tid, p.head_dim);
  issue_q_side(0, 0);
  cp_async_commit();
  store_limits(0, 0);

  // Warp coordinates of the three phases.
  const int w1m = warp % W1M, w1n = warp / W1M;  // queries 32 w1m.., keys 32 w1n..
  const int w2k = warp % W2K, w2d = warp / W2K;  // keys 32 w2k.., dims C2 w2d..
  const int w3q = warp % W3Q, w3d = warp / W3Q;  // queries 32 w3q.., dims C3 w3d..
  const typename TileD::Lane la  = TileD::lane(lane_row_a(lane), lane_chunk_a(lane));
  const typename TileD::Lane lb  = TileD::lane(lane_row_b(lane), lane_chunk_b(lane));
  const typename TileP::Lane lpa = TileP::lane(lane_row_a(lane), lane_chunk_a(lane));
  const typename TileP::Lane lpb = TileP::lane(lane_row_b(lane), lane_chunk_b(lane));
  // P/dS fragment stores: row w1m*32 + 16 mt + 8 r + g (row % 8 == g), chunk 4 w1n + nt;
  // 4 w1n + nt == (4 w1n) ^ nt, so the swizzled chunk is ((4 w1n) ^ g) ^ nt.
  const uint32_t st_row = uint32_t((w1m * 32 + g) * TileP::kRowBytes + 4 * t);
  const uint32_t st_xor = uint32_t(((w1n * 4) ^ g) << 4);

  float dk[2][C2 / 8][4], dv[2][C2 / 8][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int i = 0; i < C2 / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[mt][i][e] = dv[mt][i][e] = 0.f;

  cp_async_wait<0>();
  __syncthreads();

  for (int it = 0; it < n_iter; ++it) {
    const int stage      = it & 1;
    const uint32_t sQ    = sQ0 + stage * kQBytes;
    const uint32_t sdO   = sdO0 + stage * kQBytes;
    const float* lse_s   = sLse + stage * BM;
    const float* delta_s = sDelta + stage * BM;
    const int* lim_s     = sLim + stage * BM;
    const int gi         = it / per_head;
    const int qt         = first_qt + (it - gi * per_head);
    const int h          = hk * G + gi;

    const bool has_next = it + 1 < n_iter;
    if (has_next) issue_q_side(it + 1, stage ^ 1);
    cp_async_commit();
    const bool need_mask = k0 + BN > lim_s[0];

    // ---- phase 1: S and dP for 32 queries x 32 keys per warp
    float sc[2][4][4], dp[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) sc[mt][i][e] = dp[mt][i][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) ldmatrix_x4(qa[mt], TileD::addr(sQ, la, w1m * 32 + mt * 16, kk * 2));
#pragma unroll
      for (int nn = 0; nn < 2; ++nn) {
        uint32_t kb[4];
        ldmatrix_x4(kb, TileD::addr(sK, lb, w1n * 32 + nn * 16, kk * 2));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          Ops::mma(sc[mt][2 * nn], qa[mt], kb[0], kb[1]);
          Ops::mma(sc[mt][2 * nn + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }
    // P (in place), rows (mt, r): query w1m*32 + 16 mt + g + 8 r; keys k0 + 32 w1n + 8 nt + 2t + e.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int qr = w1m * 32 + mt * 16 + g + 8 * r;
        float l2     = lse_s[qr] * kLog2e;
        l2           = l2 == -INFINITY ? INFINITY : l2;  // empty row: P = 0
        const int lim = lim_s[qr];
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = sc[mt][nt][2 * r + e];
            x        = ex2(fmaf(x, sl2, -l2));
            if (need_mask && k0 + w1n * 32 + nt * 8 + 2 * t + e >= lim) x = 0.f;
          }
      }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t oa[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) ldmatrix_x4(oa[mt], TileD::addr(sdO, la, w1m * 32 + mt * 16, kk * 2));
#pragma unroll
      for (int nn = 0; nn < 2; ++nn) {
        uint32_t vb[4];
        ldmatrix_x4(vb, TileD::addr(sV, lb, w1n * 32 + nn * 16, kk * 2));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          Ops::mma(dp[mt][2 * nn], oa[mt], vb[0], vb[1]);
          Ops::mma(dp[mt][2 * nn + 1], oa[mt], vb[2], vb[3]);
        }
      }
    }
    // dS = P (dP - Delta); P and dS -> shared memory as 16-bit [query][key].
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int qr      = w1m * 32 + mt * 16 + g + 8 * r;
        const float delta = delta_s[qr];
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const float p0 = sc[mt][nt][2 * r], p1 = sc[mt][nt][2 * r + 1];
          // == TileP::offset(qr, 4 w1n + nt) + 4 t, with the per-thread part hoisted.
          const uint32_t off = st_row + uint32_t((mt * 16 + 8 * r) * TileP::kRowBytes) + (st_xor ^ uint32_t(nt << 4));
          asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sP + off), "r"(Ops::pack(p0, p1)));
          asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS + off),
                       "r"(Ops::pack(p0 * (dp[mt][nt][2 * r] - delta), p1 * (dp[mt][nt][2 * r + 1] - delta))));
        }
      }
    __syncthreads();  // P, dS complete

    // ---- phase 2: dV += P^T dO, dK += dS^T Q for 32 keys x C2 dims per warp
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t pa[2][4], sa[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        ldmatrix_x4_trans(pa[mt], TileP::addr(sP, lpb, kk * 16, w2k * 4 + mt * 2));
        ldmatrix_x4_trans(sa[mt], TileP::addr(sdS, lpb, kk * 16, w2k * 4 + mt * 2));
      }
#pragma unroll
      for (int dn = 0; dn < C2 / 16; ++dn) {
        uint32_t ob[4], qb[4];
        ldmatrix_x4_trans(ob, TileD::addr(sdO, la, kk * 16, w2d * (C2 / 8) + dn * 2));
        ldmatrix_x4_trans(qb, TileD::addr(sQ, la, kk * 16, w2d * (C2 / 8) + dn * 2));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          Ops::mma(dv[mt][2 * dn], pa[mt], ob[0], ob[1]);
          Ops::mma(dv[mt][2 * dn + 1], pa[mt], ob[2], ob[3]);
          Ops::mma(dk[mt][2 * dn], sa[mt], qb[0], qb[1]);
          Ops::mma(dk[mt][2 * dn + 1], sa[mt], qb[2], qb[3]);
        }
      }
    }

    // ---- phase 3: dQ += scale dS K for 32 queries x C3 dims per warp
    {
      float dq[2][C3 / 8][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int i = 0; i < C3 / 8; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) dq[mt][i][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t da[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) ldmatrix_x4(da[mt], TileP::addr(sdS, lpa, w3q * 32 + mt * 16, kk * 2));
#pragma unroll
        for (int dn = 0; dn < C3 / 16; ++dn) {
          uint32_t kb[4];
          ldmatrix_x4_trans(kb, TileD::addr(sK, la, kk * 16, w3d * (C3 / 8) + dn * 2));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            Ops::mma(dq[mt][2 * dn], da[mt], kb[0], kb[1]);
            Ops::mma(dq[mt][2 * dn + 1], da[mt], kb[2], kb[3]);
          }
        }
      }
      using Order = DqFragOrder<Cfg>;
      const int chunk_heads = nhk * G;  // the scratch holds this launch's query heads
      float* acc = dq_scratch + ((std::int64_t(b) * chunk_heads + (h - hk0 * G)) * n_qt + qt) * Order::kTile + tid;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int i = 0; i < C3 / 8; ++i)
#pragma unroll
            for (int e = 0; e < 2; ++e) red_add_f32(acc + Order::j(mt, r, i, e) * NT, p.scale * dq[mt][i][2 * r + e]);
    }

    if (has_next) store_limits(it + 1, stage ^ 1);
    cp_async_wait<0>();
    __syncthreads();
  }

  // Epilogue: dk += scale dK, dv += dV for keys k0 + 32 w2k + 16 mt + g + 8 r.
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int kr = k0 + w2k * 32 + mt * 16 + g + 8 * r;
      if (kr >= p.seqlen_k) continue;
      float* dkp = p.dk.data + p.dk.at(b, kr, hk) + w2d * C2 + 2 * t;
      float* dvp = p.dv.data + p.dv.at(b, kr, hk) + w2d * C2 + 2 * t;
#pragma unroll
      for (int i = 0; i < C2 / 8; ++i) {
        if (w2d * C2 + i * 8 >= p.head_dim) break;  // zero padding of a head_dim below D
        float2* pk = reinterpret_cast<float2*>(dkp + i * 8);
        float2* pv = reinterpret_cast<float2*>(dvp + i * 8);
        float2 ok = *pk, ov = *pv;
        ok.x = fmaf(p.scale, dk[mt][i][2 * r], ok.x);
        ok.y = fmaf(p.scale, dk[mt][i][2 * r + 1], ok.y);
        ov.x += dv[mt][i][2 * r];
        ov.y += dv[mt][i][2 * r + 1];
        *pk = ok;
        *pv = ov;
      }
    }
}

/// dq += the scratch tiles of attn_bwd_ps_kernel: one block per (query tile, query
/// head h0 + blockIdx.y, batch), dq rows read and written in order (the gathers from the
/// 32 KB scratch tile stay in L1 / L2). Rows past seqlen_q and columns past head_dim
/// (zero padding) are left out.
template <class Cfg>
__global__ void __launch_bounds__(256) attn_bwd_dq_add_kernel(const AttnBwdParams p, const float* __restrict__ scratch,
                                                               const int h0) {
  using Order   = DqFragOrder<Cfg>;
  const int qt = blockIdx.x, hl = blockIdx.y, b = blockIdx.z, h = h0 + hl;
  const int n_qt = gridDim.x;
  const float* acc = scratch + ((std::int64_t(b) * gridDim.y + hl) * n_qt + qt) * Order::kTile;
  const int rows   = min(Cfg::kBlockM, p.seqlen_q - qt * Cfg::kBlockM);
  float* dqt       = p.dq.data + p.dq.at(b, std::int64_t(qt) * Cfg::kBlockM, h);
  for (int x = threadIdx.x; x < rows * Cfg::kHeadDim; x += blockDim.x) {
    const int row = x / Cfg::kHeadDim, col = x % Cfg::kHeadDim;
    if (col < p.head_dim) dqt[std::int64_t(row) * p.dq.row_stride + col] += acc[Order::offset(row, col)];
  }
}

/// Host-side launcher; returns false (nothing launched) where a deterministic run
/// was asked for (dQ is added with atomics) or the device's shared memory per block
/// cannot hold the tile. dQ goes through a stream-ordered fp32 scratch of one KV
/// head's padded dq (B x G query heads x query tiles x kBlockM x d floats) times as
/// many KV heads as fit in sm80_dq_scratch_cap() (256 MiB: at S = 32K, H = 32,
/// d = 128 two launches of 16 KV heads, 4096 CTAs each), at least one; the KV heads
/// run in chunks of that many. Where it cannot be allocated the call throws, naming
/// its size.
template <class Cfg, class Elem>
bool launch_attn_bwd_sm80(const AttnBwdParams& p, cudaStream_t stream) {
  if (p.deterministic || !device_smem_fits(Cfg::kSmemBytes)) return false;
  const int n_kt = (p.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int n_qt = (p.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
  if (n_kt == 0 || n_qt == 0 || p.heads == 0 || p.batch == 0) return true;  // no gradient to add
  if (std::int64_t(n_kt) * p.heads_kv > INT_MAX) return false;  // past a 1-D grid: the portable kernel runs
  const int G = p.heads / p.heads_kv;
  const std::size_t per_kv_head =
      sizeof(float) * std::size_t(p.batch) * std::size_t(G) * std::size_t(n_qt) * DqFragOrder<Cfg>::kTile;
  const int chunk = int(std::clamp<std::size_t>(sm80_dq_scratch_cap() / per_kv_head, 1, std::size_t(p.heads_kv)));
  const std::size_t bytes = per_kv_head * std::size_t(chunk);
  float* scratch  = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&scratch), bytes, stream);
  if (err != cudaSuccess) {
    const std::string what = "attn_bwd_ps_kernel (its dQ scratch of " + std::to_string(bytes >> 20) + " MiB)";
    check_launch(err, what.c_str());
  }
  auto kernel = attn_bwd_ps_kernel<Cfg, Elem>;
  err         = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  for (int hk0 = 0; hk0 < p.heads_kv && err == cudaSuccess; hk0 += chunk) {
    const int nh = std::min(chunk, p.heads_kv - hk0);
    err          = cudaMemsetAsync(scratch, 0, per_kv_head * std::size_t(nh), stream);
    if (err != cudaSuccess) break;
    kernel<<<dim3(unsigned(n_kt * nh), unsigned(p.batch)), Cfg::kNThreads, Cfg::kSmemBytes, stream>>>(p, scratch,
                                                                                                   hk0, nh);
    err = cudaGetLastError();
    if (err != cudaSuccess) break;
    attn_bwd_dq_add_kernel<Cfg><<<dim3(unsigned(n_qt), unsigned(nh * G), unsigned(p.batch)), 256, 0, stream>>>(
        p, scratch, hk0 * G);
    err = cudaGetLastError();
  }
  const cudaError_t e2 = cudaFreeAsync(scratch, stream);
  if (err == cudaSuccess) err = e2;
  check_launch(err, "attn_bwd_ps_kernel");
  return true;
}

}  // namespace DistAttn::Impl::cuda
