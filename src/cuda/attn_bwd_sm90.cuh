#pragma once
// Backward update kernel (SPEC §1.6) on mma.sync tensor cores, 16-key warps (the
// runner-up of tile_size.hpp; the shipped backward is attn_bwd_ps_sm90.cuh, which
// keeps this kernel's CTA decomposition and semantics). FlashAttention-2 structure
// with the transposed products: one CTA per (key tile, KV head, batch);
// every warp owns 16 keys and keeps their dK and dV accumulators (fp32) in
// registers while the CTA walks the query tiles of every query head of the GQA
// group (so dK/dV come out reduced over the group, written once, no atomics).
//
//   per query tile (Q, dO double-buffered by cp.async; LSE, Delta, key limits too)
//     S^T  = K Q^T                      (warp: 16 keys x kBlockM queries)
//     P^T  = exp2(S^T scale log2e - LSE log2e), masked / empty rows -> 0
//     dV  += P^T dO                     (P^T packed from the C fragments)
//     dP^T = V dO^T
//     dS^T = P^T (dP^T - Delta)
//     dK  += dS^T Q                     and dS^T -> shared memory (16-bit)
//     dQ  += scale dS K                 (warps re-tiled as kDqRows queries x
//                                        kDqCols dims, fp32 red.global.add on the
//                                        caller's dq)
//   epilogue: dk += scale dK, dv += dV  (read-modify-write, this CTA owns the rows)
//
// Precision as FA2: P and dS enter the products rounded to the input type, every
// product accumulates in fp32, LSE/Delta/dQ/dK/dV stay fp32.

#include "attn_launch.hpp"
#include "attn_mma.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kNThreads, Cfg::kMinBlocks) attn_bwd_kernel(const AttnBwdParams p) {
  using namespace detail;
  using Ops        = ElemOps<Elem>;
  constexpr int D  = Cfg::kHeadDim;
  constexpr int BM = Cfg::kBlockM;  // queries per step
  constexpr int BN = Cfg::kBlockN;  // keys per CTA
  constexpr int NT = Cfg::kNThreads;
  constexpr int DQ_ROWS = Cfg::kDqRows;  // dQ warp tile: DQ_ROWS queries x DQ_COLS dims
  constexpr int DQ_COLS = Cfg::kDqCols;
  constexpr int DQ_MT   = DQ_ROWS / 16;
  using TileD      = SwizzledTile<D>;   // K, V, Q, dO: rows of head_dim
  using TileS      = SwizzledTile<BM>;  // dS^T: BN key rows of BM queries
  constexpr uint32_t kKBytes = BN * D * 2;
  constexpr uint32_t kQBytes = BM * D * 2;

  // Byte offsets in dynamic shared memory.
  constexpr uint32_t kOffV     = kKBytes;
  constexpr uint32_t kOffQ     = kOffV + kKBytes;    // 2 stages
  constexpr uint32_t kOffdO    = kOffQ + 2 * kQBytes;  // 2 stages
  constexpr uint32_t kOffdS    = kOffdO + 2 * kQBytes;
  constexpr uint32_t kOffStats = kOffdS + BN * BM * 2;
  static_assert(kOffStats + 2 * 3 * 4 * BM == uint32_t(Cfg::kSmemBytes), "shared-memory plan");

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sK   = smem_u32(smem);
  const uint32_t sV   = sK + kOffV;
  const uint32_t sQ0  = sK + kOffQ;
  const uint32_t sdO0 = sK + kOffdO;
  const uint32_t sdS  = sK + kOffdS;
  float* sLse   = reinterpret_cast<float*>(smem + kOffStats);  // [2][BM], natural log
  float* sDelta = sLse + 2 * BM;                               // [2][BM]
  int* sLim     = reinterpret_cast<int*>(sDelta + 2 * BM);     // [2][BM]

  const int kt   = blockIdx.x;
  const int hk   = blockIdx.y;
  const int b    = blockIdx.z;
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

  const Elem* kg = static_cast<const Elem*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const Elem* vg = static_cast<const Elem*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;
  const float sl2 = p.scale * kLog2e;

  // Query-side loads of step `it` into `stage`, all by cp.async so that nothing is
  // held in registers across the step: Q and dO tiles, and the raw LSE and Delta
  // of the step's queries (threads tid < BM; zero-filled past seqlen_q, where Q and
  // dO are zero too, so padding queries contribute nothing).
  auto issue_q_side = [&](int it, int stage) {
    const int gi = it / per_head;
    const int qt = first_qt + (it - gi * per_head);
    const int h  = hk * G + gi;
    const Elem* qg  = static_cast<const Elem*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
    const Elem* dog = static_cast<const Elem*>(p.dout) + b * p.do_batch_stride + h * p.do_head_stride;
    load_tile_async<BM, D, NT>(sQ0 + stage * kQBytes, qg, p.q_row_stride, qt * BM, p.seqlen_q, tid);
    load_tile_async<BM, D, NT>(sdO0 + stage * kQBytes, dog, p.do_row_stride, qt * BM, p.seqlen_q, tid);
    if (tid < BM) {
      const int i   = qt * BM + tid;
      const bool ok = i < p.seqlen_q;
      const std::int64_t ii = ok ? i : 0;
      cp_async_4(smem_u32(sLse + stage * BM + tid),
                 p.lse + b * p.lse_batch_stride + h * p.lse_head_stride + ii * p.lse_row_stride, ok);
      cp_async_4(smem_u32(sDelta + stage * BM + tid),
                 p.delta + b * p.delta_batch_stride + h * p.delta_head_stride + ii * p.delta_row_stride, ok);
    }
  };
  // Key limit of each query of step `it` (0 for padding queries), plain stores.
  auto store_limits = [&](int it, int stage) {
    if (tid < BM) {
      const int gi = it / per_head;
      const int i  = (first_qt + (it - gi * per_head)) * BM + tid;
      sLim[stage * BM + tid] =
          i < p.seqlen_q ? row_limit(mk.causal, mk.q_offset, mk.q_stride, mk.k_offset, mk.k_stride, p.seqlen_k, i)
                         : 0;
    }
  };

  // Prologue: K, V and the first query step.
  load_tile_async<BN, D, NT>(sK, kg, p.k_row_stride, k0, p.seqlen_k, tid);
  load_tile_async<BN, D, NT>(sV, vg, p.v_row_stride, k0, p.seqlen_k, tid);
  issue_q_side(0, 0);
  cp_async_commit();
  store_limits(0, 0);

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = 0.f;
    dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.f;
  }
  const int kr0 = k0 + warp * 16 + g;  // this thread's key rows kr0, kr0 + 8
  const typename TileD::Lane la  = TileD::lane(lane_row_a(lane), lane_chunk_a(lane));
  const typename TileD::Lane lb  = TileD::lane(lane_row_b(lane), lane_chunk_b(lane));
  const typename TileS::Lane lsb = TileS::lane(lane_row_b(lane), lane_chunk_b(lane));
  const int wq  = warp % (BM / DQ_ROWS);  // dQ warp grid
  const int wd  = warp / (BM / DQ_ROWS);

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

    // Element-wise mask needed iff some real query of the step sees fewer keys than
    // the tile's end; the first query has the smallest limit.
    const bool need_mask = k0 + BN > lim_s[0];

    // S^T = K Q^T
    float s[BM / 8][4];
#pragma unroll
    for (int i = 0; i < BM / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t af[4];
      ldmatrix_x4(af, TileD::addr(sK, la, warp * 16, kk * 2));
#pragma unroll
      for (int nn = 0; nn < BM / 16; ++nn) {
        uint32_t bf[4];
        ldmatrix_x4(bf, TileD::addr(sQ, lb, nn * 16, kk * 2));
        Ops::mma(s[2 * nn], af, bf[0], bf[1]);
        Ops::mma(s[2 * nn + 1], af, bf[2], bf[3]);
      }
    }
    // P^T (in place): columns are queries c, c + 1.
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const int c     = j * 8 + 2 * t;
      const float2 lr = *reinterpret_cast<const float2*>(lse_s + c);
      // LSE in log2 units; an empty row (LSE = -inf) gets +inf, so P = 2^-inf = 0.
      float l2x = lr.x * kLog2e, l2y = lr.y * kLog2e;
      l2x = l2x == -INFINITY ? INFINITY : l2x;
      l2y = l2y == -INFINITY ? INFINITY : l2y;
      s[j][0] = ex2(fmaf(s[j][0], sl2, -l2x));
      s[j][1] = ex2(fmaf(s[j][1], sl2, -l2y));
      s[j][2] = ex2(fmaf(s[j][2], sl2, -l2x));
      s[j][3] = ex2(fmaf(s[j][3], sl2, -l2y));
      if (need_mask) {
        const int2 lm = *reinterpret_cast<const int2*>(lim_s + c);
        if (kr0 >= lm.x) s[j][0] = 0.f;
        if (kr0 >= lm.y) s[j][1] = 0.f;
        if (kr0 + 8 >= lm.x) s[j][2] = 0.f;
        if (kr0 + 8 >= lm.y) s[j][3] = 0.f;
      }
    }
    // dV += P^T dO
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      const uint32_t a[4] = {Ops::pack(s[2 * kk][0], s[2 * kk][1]), Ops::pack(s[2 * kk][2], s[2 * kk][3]),
                             Ops::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             Ops::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, TileD::addr(sdO, la, kk * 16, dn * 2));
        Ops::mma(dv[2 * dn], a, bf[0], bf[1]);
        Ops::mma(dv[2 * dn + 1], a, bf[2], bf[3]);
      }
    }
    // dP^T = V dO^T
    float dp[BM / 8][4];
#pragma unroll
    for (int i = 0; i < BM / 8; ++i) dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t af[4];
      ldmatrix_x4(af, TileD::addr(sV, la, warp * 16, kk * 2));
#pragma unroll
      for (int nn = 0; nn < BM / 16; ++nn) {
        uint32_t bf[4];
        ldmatrix_x4(bf, TileD::addr(sdO, lb, nn * 16, kk * 2));
        Ops::mma(dp[2 * nn], af, bf[0], bf[1]);
        Ops::mma(dp[2 * nn + 1], af, bf[2], bf[3]);
      }
    }
    // dS^T = P^T (dP^T - Delta) (in place in s)
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const float2 dl = *reinterpret_cast<const float2*>(delta_s + j * 8 + 2 * t);
      s[j][0] *= dp[j][0] - dl.x;
      s[j][1] *= dp[j][1] - dl.y;
      s[j][2] *= dp[j][2] - dl.x;
      s[j][3] *= dp[j][3] - dl.y;
    }
    // dK += dS^T Q; the packed dS^T fragments also go to shared memory for dQ.
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      const uint32_t a[4] = {Ops::pack(s[2 * kk][0], s[2 * kk][1]), Ops::pack(s[2 * kk][2], s[2 * kk][3]),
                             Ops::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             Ops::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      // a0: (key g, queries 16kk + 2t..), a1: (key g+8, same), a2/a3: queries + 8.
      const int kr = warp * 16 + g;
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS + TileS::offset(kr, 2 * kk) + 4 * t), "r"(a[0]));
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS + TileS::offset(kr + 8, 2 * kk) + 4 * t), "r"(a[1]));
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS + TileS::offset(kr, 2 * kk + 1) + 4 * t), "r"(a[2]));
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS + TileS::offset(kr + 8, 2 * kk + 1) + 4 * t), "r"(a[3]));
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, TileD::addr(sQ, la, kk * 16, dn * 2));
        Ops::mma(dk[2 * dn], a, bf[0], bf[1]);
        Ops::mma(dk[2 * dn + 1], a, bf[2], bf[3]);
      }
    }
    __syncthreads();  // dS^T complete

    // dQ (BM x D) = dS (BM x BN) K (BN x D); warp (wq, wd) owns DQ_ROWS queries x
    // DQ_COLS of head_dim.
    {
      float dq[DQ_MT][DQ_COLS / 8][4];
#pragma unroll
      for (int mt = 0; mt < DQ_MT; ++mt)
#pragma unroll
        for (int i = 0; i < DQ_COLS / 8; ++i) dq[mt][i][0] = dq[mt][i][1] = dq[mt][i][2] = dq[mt][i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t af[DQ_MT][4];
#pragma unroll
        for (int mt = 0; mt < DQ_MT; ++mt)
          ldmatrix_x4_trans(af[mt], TileS::addr(sdS, lsb, kk * 16, wq * (DQ_ROWS / 8) + mt * 2));
#pragma unroll
        for (int dn = 0; dn < DQ_COLS / 16; ++dn) {
          uint32_t bf[4];
          ldmatrix_x4_trans(bf, TileD::addr(sK, la, kk * 16, wd * (DQ_COLS / 8) + dn * 2));
#pragma unroll
          for (int mt = 0; mt < DQ_MT; ++mt) {
            Ops::mma(dq[mt][2 * dn], af[mt], bf[0], bf[1]);
            Ops::mma(dq[mt][2 * dn + 1], af[mt], bf[2], bf[3]);
          }
        }
      }
      float* dqg = p.dq + b * p.dq_batch_stride + h * p.dq_head_stride + wd * DQ_COLS + 2 * t;
#pragma unroll
      for (int mt = 0; mt < DQ_MT; ++mt) {
        const int qrow = qt * BM + wq * DQ_ROWS + mt * 16 + g;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (qrow + 8 * r < p.seqlen_q) {
            float* rowp = dqg + std::int64_t(qrow + 8 * r) * p.dq_row_stride;
#pragma unroll
            for (int i = 0; i < DQ_COLS / 8; ++i)
              red_add_f32x2(rowp + i * 8, p.scale * dq[mt][i][2 * r], p.scale * dq[mt][i][2 * r + 1]);
          }
        }
      }
    }

    if (has_next) store_limits(it + 1, stage ^ 1);
    cp_async_wait<0>();
    __syncthreads();
  }

  // Epilogue: dk += scale dK, dv += dV for this thread's key rows.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int kr = kr0 + 8 * r;
    if (kr >= p.seqlen_k) continue;
    float* dkp = p.dk + b * p.dk_batch_stride + std::int64_t(kr) * p.dk_row_stride + hk * p.dk_head_stride + 2 * t;
    float* dvp = p.dv + b * p.dv_batch_stride + std::int64_t(kr) * p.dv_row_stride + hk * p.dv_head_stride + 2 * t;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      float2* pk = reinterpret_cast<float2*>(dkp + i * 8);
      float2* pv = reinterpret_cast<float2*>(dvp + i * 8);
      float2 ok = *pk, ov = *pv;
      ok.x = fmaf(p.scale, dk[i][2 * r], ok.x);
      ok.y = fmaf(p.scale, dk[i][2 * r + 1], ok.y);
      ov.x += dv[i][2 * r];
      ov.y += dv[i][2 * r + 1];
      *pk = ok;
      *pv = ov;
    }
  }
}

template <class Cfg, class Elem>
void launch_attn_bwd(const AttnBwdParams& p, cudaStream_t stream) {
  const int n_kt = (p.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const dim3 grid(unsigned(n_kt), unsigned(p.heads_kv), unsigned(p.batch));
  auto kernel = attn_bwd_kernel<Cfg, Elem>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err == cudaSuccess) {
    kernel<<<grid, Cfg::kNThreads, Cfg::kSmemBytes, stream>>>(p);
    err = cudaGetLastError();
  }
  check_launch(err, "attn_bwd_kernel");
}

}  // namespace DistAttn::Impl::cuda
