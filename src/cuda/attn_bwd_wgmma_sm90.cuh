// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Backward update kernel on Hopper warpgroup MMA (wgmma), FlashAttention-3's
// "swapped" layout: the same CTA work and semantics as the mma.sync kernels (one
// CTA per (key tile, KV head, batch), the query tiles of every head of the GQA
// group, dK/dV in registers, dQ by fp32 red.add), but every product is issued by
// a warpgroup from shared memory. Each of the two warpgroups owns 64 keys, so the
// transposed scores come out with keys as rows and feed dV and dK straight from
// registers:
//
//   S^T  = K Q^T,  dP^T = V dO^T      wgmma ss, K-major, 64 keys x BM queries
//   P^T  = exp2(S^T scale log2e - LSE log2e), dS^T = P^T (dP^T - Delta)
//   dV  += P^T dO,  dK += dS^T Q      wgmma rs (P^T, dS^T packed into A registers),
//                                     dO and Q read MN-major, 64 keys x d
//   dS^T -> shared memory; barrier
//   dQ   = dS K                       wgmma ss, dS^T and K both read MN-major;
//                                     d = 128: warpgroup w makes dQ[:, 64 w ..] over
//                                     all keys; d = 64: over its own 64 keys only
//   dq  += scale dQ                   red.global.add.v2.f32
//
// Shared memory (d = 128): K, V 32 KB each, Q and dO 2 x 16 KB each (the next query
// tile is copied while this one computes), dS^T 16 KB, statistics. Two CTA barriers
// per step (tiles landed; dS^T complete), every product waited for before the next
// is issued. Measured no faster (NOTES.md runs 7 and 12, code at commit 4c0878b):
// one barrier per step with S^T / dP^T of the next step queued behind dQ (3 Q/dO
// stages); dQ split by keys for d = 128 (no CTA barrier, twice the atomics); dQ
// added by bulk row reductions from shared memory instead of red.v2.

#include "attn_launch.hpp"
#include "attn_mma.cuh"
#include "wgmma.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kNThreads, Cfg::kMinBlocks) attn_bwd_wgmma_kernel(const AttnBwdParams p) {
  using namespace detail;
  using Ops       = ElemOps<Elem>;
  constexpr int D  = Cfg::kHeadDim;
  constexpr int BM = Cfg::kBlockM;  // queries per step (the N of S^T)
  constexpr int BN = Cfg::kBlockN;  // keys per CTA, 64 per warpgroup
  constexpr int NT = Cfg::kNThreads;
  static_assert(BM == 64 && BN == 128 && (D == 64 || D == 128) && NT == 256, "64 queries x 2 x 64 keys, d 64 or 128");
  constexpr int NQS = 2;       // Q/dO/statistics stages
  constexpr int NSC = BM / 2;  // S^T / dP^T floats per thread
  constexpr int NKV = D / 2;   // dK / dV floats per thread
  // dQ: d = 128 splits head_dim between the warpgroups (each sums over all BN keys,
  // after a CTA barrier for the other's dS^T rows); d = 64 splits the keys (each
  // sums over its own 64, needs only its own dS^T rows, and both add into dq: the
  // same atomic bytes per step as d = 128). 64 x 64 floats per warpgroup either way.
  constexpr bool kDqSplitKeys = D == 64;
  constexpr int NDQ = 32;
  constexpr uint32_t kKBytes = BN * D * 2;
  constexpr uint32_t kQBytes = BM * D * 2;
  constexpr uint32_t kSBytes = BN * BM * 2;

  constexpr uint32_t kOffV     = kKBytes;
  constexpr uint32_t kOffQ     = kOffV + kKBytes;        // NQS stages
  constexpr uint32_t kOffdO    = kOffQ + NQS * kQBytes;  // NQS stages
  constexpr uint32_t kOffdS    = kOffdO + NQS * kQBytes;
  constexpr uint32_t kOffStats = kOffdS + kSBytes;
  static_assert(kOffStats + NQS * 3 * 4 * BM + 1024 == uint32_t(Cfg::kSmemBytes), "shared-memory plan");

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = (smem_u32(smem) + 1023u) & ~1023u;  // 128-byte swizzle: 1 KB aligned tiles
  unsigned char* const smem_a = smem + (base - smem_u32(smem));
  const uint32_t sK   = base;
  const uint32_t sV   = base + kOffV;
  const uint32_t sQ0  = base + kOffQ;
  const uint32_t sdO0 = base + kOffdO;
  const uint32_t sdS  = base + kOffdS;
  float* sLse   = reinterpret_cast<float*>(smem_a + kOffStats);  // [NQS][BM], natural log
  float* sDelta = sLse + NQS * BM;                               // [NQS][BM]
  int* sLim     = reinterpret_cast<int*>(sDelta + NQS * BM);     // [NQS][BM]

  const int kt   = blockIdx.x;
  const int hk   = blockIdx.y;
  const int b    = blockIdx.z;
  const int G    = p.heads / p.heads_kv;
  const int k0   = kt * BN;
  const int tid  = threadIdx.x;
  const int wg   = tid >> 7;
  const int warp = (tid >> 5) & 3;
  const int lane = tid & 31;
  const int g    = lane >> 2;
  const int t    = lane & 3;
  const int krow = wg * 64 + warp * 16 + g;  // this thread's key rows krow, krow + 8 (CTA-local)
  const AttnMaskParams& mk = p.mask;

  int i0 = 0;  // first query that sees key k0
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

  auto q_tile = [&](int it, int& qt, int& h) {
    const int gi = it / per_head;
    qt           = first_qt + (it - gi * per_head);
    h            = hk * G + gi;
  };
  auto issue_q_side = [&](int it, int stage, int tid_l) {
    int qt, h;
    q_tile(it, qt, h);
    const Elem* qg  = static_cast<const Elem*>(p.q.data) + p.q.at(b, 0, h);
    const Elem* dog = static_cast<const Elem*>(p.dout.data) + p.dout.at(b, 0, h);
    load_atom_tile_async<BM, D, NT>(sQ0 + stage * kQBytes, qg, p.q.row_stride, qt * BM, p.seqlen_q, tid_l,
                                    p.head_dim);
    load_atom_tile_async<BM, D, NT>(sdO0 + stage * kQBytes, dog, p.dout.row_stride, qt * BM, p.seqlen_q, tid_l,
                                    p.head_dim);
    if (tid_l < BM) {
      const int i   = qt * BM + tid_l;
      const bool ok = i < p.seqlen_q;
      const std::int64_t ii = ok ? i : 0;
      cp_async_4(smem_u32(sLse + stage * BM + tid_l),
                 p.lse.data + p.lse.at(b, h, ii), ok);
      cp_async_4(smem_u32(sDelta + stage * BM + tid_l),
                 p.delta.data + p.delta.at(b, h, ii), ok);
    }
  };
  auto store_limits = [&](int it, int stage) {
    if (tid < BM) {
      int qt, h;
      q_tile(it, qt, h);
      const int i = qt * BM + tid;
      sLim[stage * BM + tid] =
          i < p.seqlen_q ? row_limit(mk.causal, mk.q_offset, mk.q_stride, mk.k_offset, mk.k_stride, p.seqlen_k, i)
                         : 0;
    }
  };

  float dk[NKV], dv[NKV], st[NSC], dpt[NSC], dq[NDQ];
  uint32_t pa[BM / 16][4], sa[BM / 16][4];
#pragma unroll
  for (int i = 0; i < NKV; ++i) dk[i] = dv[i] = 0.f;

  // S^T and dP^T, 64 keys x BM queries per warpgroup, in two commit groups so the
  // exponentials start while dP^T is still in the tensor cores.
  auto issue_sdp = [&](int stage) {
    const uint32_t sQ = sQ0 + stage * kQBytes, sdO = sdO0 + stage * kQBytes;
    fence_regs(st);
    fence_regs(dpt);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss_m64n64k16<0, 0>(Tag<Elem>{}, st, desc_kmajor<BN>(sK, wg * 64, kk), desc_kmajor<BM>(sQ, 0, kk), kk);
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss_m64n64k16<0, 0>(Tag<Elem>{}, dpt, desc_kmajor<BN>(sV, wg * 64, kk), desc_kmajor<BM>(sdO, 0, kk), kk);
    wgmma_commit();
  };
  // P^T in place; thread's elements: key rows k0 + krow (+ 8), queries 8 j + 2 t + e.
  auto compute_p = [&](int stage) {
    const float* lse_s = sLse + stage * BM;
    const int* lim_s   = sLim + stage * BM;
    const bool need_mask = k0 + BN > lim_s[0];
    const int kr0 = k0 + krow, kr1 = kr0 + 8;
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const float2 ls = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t);
      float l2[2]     = {ls.x * kLog2e, ls.y * kLog2e};
#pragma unroll
      for (int e = 0; e < 2; ++e) l2[e] = l2[e] == -INFINITY ? INFINITY : l2[e];  // empty row: P = 0
      const int2 lm = *reinterpret_cast<const int2*>(lim_s + 8 * j + 2 * t);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int lq = e == 0 ? lm.x : lm.y;
        float x0     = ex2(fmaf(st[4 * j + e], sl2, -l2[e]));
        float x1     = ex2(fmaf(st[4 * j + 2 + e], sl2, -l2[e]));
        if (need_mask && kr0 >= lq) x0 = 0.f;
        if (need_mask && kr1 >= lq) x1 = 0.f;
        st[4 * j + e]     = x0;
        st[4 * j + 2 + e] = x1;
      }
    }
  };
  // dS^T = P^T (dP^T - Delta), then P^T and dS^T packed as A operands (K = queries:
  // step kk holds queries 16 kk ..) and dS^T stored [key][query] for dQ.
  auto compute_ds = [&](int stage) {
    const float* delta_s = sDelta + stage * BM;
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
        const int idx = 8 * kk + 2 * e;  // (j = 2 kk + e / 2, r = e % 2)
        pa[kk][e]     = Ops::pack(st[idx], st[idx + 1]);
        sa[kk][e]     = Ops::pack(dpt[idx], dpt[idx + 1]);
      }
    }
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = 2 * kk + (e >> 1), row = krow + 8 * (e & 1);
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS + atom_offset<BN>(row, j) + 4 * t), "r"(sa[kk][e]));
      }
  };
  auto issue_dkdv = [&](int stage) {  // dV += P^T dO, dK += dS^T Q
    const uint32_t sQ = sQ0 + stage * kQBytes, sdO = sdO0 + stage * kQBytes;
    fence_regs(dv);
    fence_regs(dk);
    fence_regs(pa);
    fence_regs(sa);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      if constexpr (D == 128) wgmma_rs_m64n128k16<1>(Tag<Elem>{}, dv, pa[kk], desc_mnmajor<BM>(sdO, kk), 1);
      else wgmma_rs_m64n64k16<1>(Tag<Elem>{}, dv, pa[kk], desc_mnmajor<BM>(sdO, kk), 1);
    }
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      if constexpr (D == 128) wgmma_rs_m64n128k16<1>(Tag<Elem>{}, dk, sa[kk], desc_mnmajor<BM>(sQ, kk), 1);
      else wgmma_rs_m64n64k16<1>(Tag<Elem>{}, dk, sa[kk], desc_mnmajor<BM>(sQ, kk), 1);
    }
    wgmma_commit();
  };
  auto issue_dq = [&] {  // dQ = dS K: dS^T and K both read MN-major
    fence_regs(dq);
    wgmma_fence();
    if constexpr (kDqSplitKeys) {  // own 64 keys, all 64 columns
#pragma unroll
      for (int kk = 0; kk < 64 / 16; ++kk)
        wgmma_ss_m64n64k16<1, 1>(Tag<Elem>{}, dq, desc_mnmajor<BN>(sdS + wg * 8192, kk),
                                 desc_mnmajor<BN>(sK + wg * 8192, kk), kk);
    } else {  // all BN keys, columns 64 wg ..
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
        wgmma_ss_m64n64k16<1, 1>(Tag<Elem>{}, dq, desc_mnmajor<BN>(sdS, kk), desc_mnmajor<BN>(sK, kk, wg), kk);
    }
    wgmma_commit();
  };
  // dS^T of the rows issue_dq reads is complete: the whole CTA's, or this warpgroup's.
  auto sync_ds = [&] {
    fence_proxy_async();
    if constexpr (kDqSplitKeys) named_barrier(1 + wg, 128);
    else __syncthreads();
  };
  auto store_dq = [&](int it) {  // dq rows qt BM + 16 warp + g (+ 8), columns 64 wg + 8 j + 2 t
    int qt, h;
    q_tile(it, qt, h);
    const int c0 = kDqSplitKeys ? 0 : wg * 64;  // first column of this warpgroup's dQ
    float* dqg   = p.dq.data + p.dq.at(b, 0, h) + c0 + 2 * t;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int qrow = qt * BM + warp * 16 + g + 8 * r;
      if (qrow < p.seqlen_q) {
        float* rowp = dqg + std::int64_t(qrow) * p.dq.row_stride;
#pragma unroll
        for (int j = 0; j < NDQ / 4; ++j)
          if (c0 + j * 8 < p.head_dim)  // zero padding of a head_dim below D
            red_add_f32x2(rowp + j * 8, p.scale * dq[4 * j + 2 * r], p.scale * dq[4 * j + 2 * r + 1]);
      }
    }
  };

  load_atom_tile_async<BN, D, NT>(sK, kg, p.k.row_stride, k0, p.seqlen_k, tid, p.head_dim);
  load_atom_tile_async<BN, D, NT>(sV, vg, p.v.row_stride, k0, p.seqlen_k, tid, p.head_dim);
  issue_q_side(0, 0, tid);
  cp_async_commit();
  store_limits(0, 0);

  for (int it = 0; it < n_iter; ++it) {
    const int stage = it & 1;
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();  // this step's tiles landed; every warpgroup is done with the other stage
    if (it + 1 < n_iter) {
      issue_q_side(it + 1, stage ^ 1, opaque(tid));
      store_limits(it + 1, stage ^ 1);
    }
    cp_async_commit();
    issue_sdp(stage);
    wgmma_wait<1>();
    fence_regs(st);
    compute_p(stage);
    wgmma_wait<0>();
    fence_regs(dpt);
    compute_ds(stage);
    issue_dkdv(stage);
    sync_ds();
    issue_dq();
    wgmma_wait<0>();
    fence_regs(dq);
    fence_regs(dv);
    fence_regs(dk);
    fence_regs(pa);
    fence_regs(sa);
    store_dq(it);
  }

  // Epilogue: dk += scale dK, dv += dV for this thread's key rows.
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

template <class Cfg, class Elem>
void launch_attn_bwd_wgmma(const AttnBwdParams& p, cudaStream_t stream) {
  const int n_kt = (p.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const dim3 grid(unsigned(n_kt), unsigned(p.heads_kv), unsigned(p.batch));
  auto kernel = attn_bwd_wgmma_kernel<Cfg, Elem>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err == cudaSuccess) {
    kernel<<<grid, Cfg::kNThreads, Cfg::kSmemBytes, stream>>>(p);
    err = cudaGetLastError();
  }
  check_launch(err, "attn_bwd_wgmma_kernel");
}

}  // namespace DistAttn::Impl::cuda
