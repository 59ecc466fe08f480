#pragma once
// Forward update kernel (docs/design/building_block.md, "The update") on Hopper warpgroup MMA (wgmma): the same
// CTA work and state semantics as attn_fwd_sm90.cuh, with both products issued
// per warpgroup from shared memory instead of per warp through ldmatrix.
//
//   CTA        kBlockM = 64 x kWarpGroups query rows of one (batch, head); each
//              warpgroup (128 threads) owns 64 rows, their O and (m, l) in registers
//   prologue   Q, K[last], V[last] -> smem (cp.async, atom layout, see wgmma.cuh)
//   per tile   wait tile; barrier; issue K, V of the next tile into the other stage
//              S = Q K^T    wgmma ss, K-major Q and K, D/16 steps
//              mask, online softmax (exp2), P packed into A registers
//              O += P V     wgmma rs, V read MN-major (transposed), kBlockN/16 steps
//   epilogue   merge (O, m, l) into the incoming state, exactly as the mma.sync
//              kernel does (same register layout per warp), or in direct mode
//              (p.o set) write the final O and LSE (attn_fwd_epilogue.cuh)
//
// WgFwdTile::kPingpong selects the ping-pong schedule instead (see the loop):
// mbarriers instead of the per-tile CTA barrier, and the two warpgroups' products
// issued in turns so that one's softmax runs under the other's products.
//
// One barrier per tile: the next tile's copy is issued right after it, into the
// stage that every warpgroup finished reading in the previous tile (both products
// are waited for before the tile ends), so it overlaps the whole tile's compute.
// The warpgroups are otherwise independent, so one's softmax can run under the
// other's products.

#include "attn_fwd_epilogue.cuh"
#include "attn_launch.hpp"
#include "attn_mma.cuh"
#include "tma.hpp"
#include "wgmma.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kNThreads, Cfg::kMinBlocks) attn_fwd_wgmma_kernel(const AttnFwdParams p, const __grid_constant__ KVTensorMaps tm) {
  using namespace detail;
  using Ops            = ElemOps<Elem>;
  constexpr int D      = Cfg::kHeadDim;
  constexpr int BM     = Cfg::kBlockM;
  constexpr int BN     = Cfg::kBlockN;
  constexpr int NT     = Cfg::kNThreads;
  constexpr int NS     = BN / 2;  // S accumulator floats per thread
  constexpr int NO     = D / 2;   // O accumulator floats per thread
  constexpr uint32_t kQBytes  = BM * D * 2;
  constexpr uint32_t kKVBytes = BN * D * 2;

  extern __shared__ __align__(128) unsigned char smem[];
  // The 128-byte swizzle repeats every 1024 B: tiles start on such a boundary
  // (kSmemBytes carries the 1 KB of slack this rounding may use).
  const uint32_t sQ  = (smem_u32(smem) + 1023u) & ~1023u;
  constexpr int NSTG  = Cfg::kStages;
  const uint32_t sK0 = sQ + kQBytes;  // stages at sK0 + stage * kKVBytes
  const uint32_t sV0 = sK0 + NSTG * kKVBytes;
  const uint32_t sBar = sV0 + NSTG * kKVBytes;  // ping-pong: full[NSTG], empty[NSTG] mbarriers

  const int qt   = int(gridDim.x) - 1 - int(blockIdx.x);  // heaviest causal tiles first
  const int h    = blockIdx.y;
  const int b    = blockIdx.z;
  const int hk   = h / (p.heads / p.heads_kv);
  const int q0   = qt * BM;
  const int tid  = threadIdx.x;
  const int wg   = tid >> 7;         // warpgroup: query rows 64 wg ..
  const int warp = (tid >> 5) & 3;   // warp within the warpgroup: rows + 16 warp
  const int lane = tid & 31;
  const int g    = lane >> 2;
  const int t    = lane & 3;
  const int wrow = wg * 64 + warp * 16;  // this warp's first tile row

  const AttnMaskParams& mk = p.mask;
  const int q_last  = min(q0 + BM, p.seqlen_q) - 1;
  const int lim_max = row_limit(mk.causal, mk.q_offset, mk.q_stride, mk.k_offset, mk.k_stride, p.seqlen_k, q_last);
  const int n_kt    = (lim_max + BN - 1) / BN;
  if (n_kt == 0) {  // no row of the tile sees any key: state unchanged
    if (p.o != nullptr)  // direct mode: these rows still get their (empty) result
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = q0 + wrow + g + 8 * r;
        if (row < p.seqlen_q) write_empty_row<Elem, D>(p, b, h, row, t);
      }
    return;
  }
  const int lim_min = row_limit(mk.causal, mk.q_offset, mk.q_stride, mk.k_offset, mk.k_stride, p.seqlen_k, q0);

  int lim[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = q0 + wrow + g + 8 * r;
    lim[r] = row < p.seqlen_q ? row_limit(mk.causal, mk.q_offset, mk.q_stride, mk.k_offset, mk.k_stride, p.seqlen_k, row)
                              : 0;
  }

  const Elem* qg = static_cast<const Elem*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const Elem* kg = static_cast<const Elem*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const Elem* vg = static_cast<const Elem*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;

  float o[NO];
#pragma unroll
  for (int i = 0; i < NO; ++i) o[i] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const float sl2 = p.scale * kLog2e;
  float s[NS];
  uint32_t pa[BN / 16][4];

  // Key tiles are processed from the last one down: step i handles tile n_kt - 1 - i,
  // whose K sits in stage i % 2 (and, one step later, its V in stage i % 2).
  auto tile_of = [&](int i) { return n_kt - 1 - i; };
  auto issue_s = [&](uint32_t sK) {  // S = Q K^T, this warpgroup's 64 rows x BN keys
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      if constexpr (BN == 128)
        wgmma_ss_m64n128k16<0, 0>(Tag<Elem>{}, s, desc_kmajor<BM>(sQ, wg * 64, kk), desc_kmajor<BN>(sK, 0, kk), kk);
      else
        wgmma_ss_m64n64k16<0, 0>(Tag<Elem>{}, s, desc_kmajor<BM>(sQ, wg * 64, kk), desc_kmajor<BN>(sK, 0, kk), kk);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](uint32_t sV) {  // O += P V, P from registers, V read transposed
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      if constexpr (D == 128)
        wgmma_rs_m64n128k16<1>(Tag<Elem>{}, o, pa[kk], desc_mnmajor<BN>(sV, kk), 1);
      else
        wgmma_rs_m64n64k16<1>(Tag<Elem>{}, o, pa[kk], desc_mnmajor<BN>(sV, kk), 1);
    }
    wgmma_commit();
  };
  // Mask and online softmax of S in place (P, fp32); returns whether O needs the
  // rescale by alpha (some row of the warp got a new max).
  auto softmax = [&](int k0, float (&alpha)[2]) {
    if (k0 + BN > lim_min) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int c = k0 + j * 8 + 2 * t;
        if (c >= lim[0]) s[4 * j + 0] = -INFINITY;
        if (c + 1 >= lim[0]) s[4 * j + 1] = -INFINITY;
        if (c >= lim[1]) s[4 * j + 2] = -INFINITY;
        if (c + 1 >= lim[1]) s[4 * j + 3] = -INFINITY;
      }
    }
    bool grew = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
      mx                = quad_max(mx);
      const float m_new = fmaxf(mrow[r], mx * sl2);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // empty-row guard (building_block.md)
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
  auto load_k = [&](int i, int tid_l) {
    load_atom_tile_async<BN, D, NT>(sK0 + (i & 1) * kKVBytes, kg, p.k_row_stride, tile_of(i) * BN, p.seqlen_k, tid_l, p.head_dim);
  };
  auto load_v = [&](int i, int tid_l) {
    load_atom_tile_async<BN, D, NT>(sV0 + (i & 1) * kKVBytes, vg, p.v_row_stride, tile_of(i) * BN, p.seqlen_k, tid_l, p.head_dim);
  };
  auto wait_tiles = [&] {
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
  };

  if constexpr (Cfg::kPingpong) {
    // Ping-pong schedule. Tile i lives in stage i % 3. Shared memory is handed over
    // with mbarriers instead of CTA barriers, so the warpgroups may drift apart by
    // up to a tile: full[s] completes when all 256 threads' copies of the tile in
    // stage s have landed (each thread waits for its own copies, fences them to the
    // async proxy and arrives, a step after issuing them); empty[s] completes when
    // all 256 threads' products on that tile have been waited for. The products
    // themselves are issued in turns (named barriers 1 and 2): S of warpgroup 0, S of
    // warpgroup 1, P V of warpgroup 0, P V of warpgroup 1, ... so that one warpgroup's
    // softmax runs while the other's product is in the tensor cores.
    const uint32_t full0 = sBar, empty0 = sBar + 8 * NSTG;
    if (tid == 0) {
#pragma unroll
      for (int st = 0; st < NSTG; ++st) {
        mbar_init(full0 + 8 * st, Cfg::kTma ? 1 : NT);
        mbar_init(empty0 + 8 * st, NT);
      }
      mbar_init_fence();
    }
    // One step of a warpgroup on the tile in stage st: its two products in its turns,
    // the softmax in between (under the other warpgroup's product), then the stage
    // released for reuse.
    const int turn_mine = 1 + wg, turn_other = 1 + (wg ^ 1);
    auto step = [&](int i, int st) {
      named_barrier(turn_mine, NT);
      fence_regs(s);
      wgmma_fence();
      issue_s(sK0 + st * kKVBytes);
      named_barrier_arrive(turn_other, NT);
      wgmma_wait<0>();
      fence_regs(s);
      float alpha[2];
      if (softmax(tile_of(i) * BN, alpha)) rescale_o(alpha);
      pack_p();
      named_barrier(turn_mine, NT);
      fence_regs(o);
      fence_regs(pa);
      wgmma_fence();
      issue_pv(sV0 + st * kKVBytes);
      // Balance the turns: warpgroup 1 pre-arrived once, so it skips its last arrive.
      if (!(wg == 1 && i == n_kt - 1)) named_barrier_arrive(turn_other, NT);
      wgmma_wait<0>();
      fence_regs(o);
      mbar_arrive(empty0 + 8 * st);
    };
    if constexpr (Cfg::kTma) {
      // TMA variant: one thread of warpgroup 1 (the one that runs behind, so its
      // wait for a stage to be empty rarely blocks) issues the K/V box copies of a
      // tile and announces their bytes on full[s]; nobody else touches K/V copies.
      constexpr int kProducer = 128;
      auto tma_tile = [&](int i) {
        const int st = i % NSTG;
        const uint32_t bar = full0 + 8 * st;
        mbar_arrive_expect_tx(bar, 2 * kKVBytes);
#pragma unroll
        for (int blk = 0; blk < D / 64; ++blk) {
          tma_load_4d(sK0 + st * kKVBytes + blk * BN * 128, &tm.k, bar, blk * 64, tile_of(i) * BN, hk, b);
          tma_load_4d(sV0 + st * kKVBytes + blk * BN * 128, &tm.v, bar, blk * 64, tile_of(i) * BN, hk, b);
        }
      };
      load_atom_tile_async<BM, D, NT>(sQ, qg, p.q_row_stride, q0, p.seqlen_q, tid, p.head_dim);
      cp_async_commit();
      __syncthreads();  // mbarrier initialization visible
      if (tid == kProducer) {
        tma_tile(0);
        if (n_kt > 1) tma_tile(1);
      }
      cp_async_wait<0>();
      fence_proxy_async();
      __syncthreads();  // Q visible to the tensor cores
      if (wg == 1) named_barrier_arrive(turn_other, NT);  // warpgroup 0 goes first
      for (int i = 0; i < n_kt; ++i) {
        const int st = i % NSTG;
        mbar_wait(full0 + 8 * st, (i / NSTG) & 1);
        if (tid == kProducer && i + 2 < n_kt) {
          const int s2 = (i + 2) % NSTG;
          if (i + 2 >= NSTG) mbar_wait(empty0 + 8 * s2, ((i + 2) / NSTG - 1) & 1);
          tma_tile(i + 2);
        }
        step(i, st);
      }
    } else {
    const AtomTileCopy<BN, D, NT> kv_copy(tid, p.k_row_stride, p.head_dim);
    const AtomTileCopy<BN, D, NT> v_copy(tid, p.v_row_stride, p.head_dim);
    auto load_tile = [&](int i) {  // K and V of step i into stage i % 3
      const int st = i % NSTG, rows = p.seqlen_k - tile_of(i) * BN;
      kv_copy.issue(sK0 + st * kKVBytes, kg + std::int64_t(tile_of(i)) * BN * p.k_row_stride, rows);
      v_copy.issue(sV0 + st * kKVBytes, vg + std::int64_t(tile_of(i)) * BN * p.v_row_stride, rows);
    };
    load_atom_tile_async<BM, D, NT>(sQ, qg, p.q_row_stride, q0, p.seqlen_q, tid, p.head_dim);
    load_tile(0);
    cp_async_commit();
    if (n_kt > 1) load_tile(1);
    cp_async_commit();
    __syncthreads();  // mbarrier initialization visible
    cp_async_wait<1>();
    fence_proxy_async();
    mbar_arrive(full0);
    if (wg == 1) named_barrier_arrive(turn_other, NT);  // warpgroup 0 goes first

    for (int i = 0; i < n_kt; ++i) {
      const int st = i % NSTG;
      if (i + 1 < n_kt) {  // this thread's copies of step i + 1 (issued a step ago)
        cp_async_wait<0>();
        fence_proxy_async();
        mbar_arrive(full0 + 8 * ((i + 1) % NSTG));
      }
      mbar_wait(full0 + 8 * st, (i / NSTG) & 1);
      if (i + 2 < n_kt) {
        const int s2 = (i + 2) % NSTG;
        if (i + 2 >= NSTG) mbar_wait(empty0 + 8 * s2, ((i + 2) / NSTG - 1) & 1);
        load_tile(i + 2);
      }
      cp_async_commit();

      step(i, st);
    }
    }  // cp.async / TMA
  } else {
    // Plain schedule: S, softmax, P V in sequence per tile; K and V of the next
    // tile copied under the whole tile, one CTA barrier per tile. Tensor cores idle
    // during the softmax unless the other warpgroup happens to be in a product.
    // (FA3's intra-warpgroup overlap -- the softmax of S_i under P_{i-1} V_{i-1} --
    // was measured no faster on top of this schedule: NOTES.md runs 7 and 9.)
    load_atom_tile_async<BM, D, NT>(sQ, qg, p.q_row_stride, q0, p.seqlen_q, tid, p.head_dim);
    load_k(0, tid);
    load_v(0, tid);
    cp_async_commit();
    for (int i = 0; i < n_kt; ++i) {
      wait_tiles();
      if (i + 1 < n_kt) {
        const int tid_l = opaque(tid);
        load_k(i + 1, tid_l);
        load_v(i + 1, tid_l);
      }
      cp_async_commit();
      fence_regs(s);
      wgmma_fence();
      issue_s(sK0 + (i & 1) * kKVBytes);
      wgmma_wait<0>();
      fence_regs(s);
      float alpha[2];
      if (softmax(tile_of(i) * BN, alpha)) rescale_o(alpha);
      pack_p();
      fence_regs(o);
      fence_regs(pa);
      wgmma_fence();
      issue_pv(sV0 + (i & 1) * kKVBytes);
      wgmma_wait<0>();
      fence_regs(o);
    }
  }

  // Epilogue: merge this block's (O, m, l) into the incoming state, row by row, or
  // in direct mode (p.o set) write the final O and LSE: attn_fwd_epilogue.cuh.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l_loc = quad_sum(lrow[r]);
    const int row     = q0 + wrow + g + 8 * r;
    if (row >= p.seqlen_q) continue;
    finish_row<Elem, D>(p, b, h, row, t, mrow[r], l_loc,
                        [&](int j) { return make_float2(o[4 * j + 2 * r], o[4 * j + 2 * r + 1]); });
  }
}

template <class Cfg, class Elem>
void launch_attn_fwd_wgmma(const AttnFwdParams& p, cudaStream_t stream) {
  KVTensorMaps tm{};
  if constexpr (Cfg::kTma) {
    constexpr bool bf16 = std::is_same<Elem, __nv_bfloat16>::value;
    if (!encode_tile_tensor_map(&tm.k, p.k, bf16, p.head_dim, p.seqlen_k, p.heads_kv, p.batch, p.k_row_stride,
                              p.k_head_stride, p.k_batch_stride, Cfg::kBlockN) ||
        !encode_tile_tensor_map(&tm.v, p.v, bf16, p.head_dim, p.seqlen_k, p.heads_kv, p.batch, p.v_row_stride,
                              p.v_head_stride, p.v_batch_stride, Cfg::kBlockN)) {
      launch_attn_fwd_wgmma<typename Cfg::WithoutTma, Elem>(p, stream);
      return;
    }
  }
  const int n_qt = (p.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const dim3 grid(unsigned(n_qt), unsigned(p.heads), unsigned(p.batch));
  auto kernel = attn_fwd_wgmma_kernel<Cfg, Elem>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err == cudaSuccess) {
    kernel<<<grid, Cfg::kNThreads, Cfg::kSmemBytes, stream>>>(p, tm);
    err = cudaGetLastError();
  }
  check_launch(err, "attn_fwd_wgmma_kernel");
}

}  // namespace DistAttn::Impl::cuda
