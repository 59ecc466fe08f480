// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Epilogues of the forward kernels, shared by every forward kernel whose
// accumulator has the mma C-fragment layout per warp (a thread holds columns
// 8 j + 2 t, +1 of its rows; the four threads of a quad together hold a row):
//  - update mode: the block's (O, m, l) merged into the incoming fp32 state;
//  - direct mode (AttnFwdParams::o set): the rows' final O and LSE written straight
//    from the registers, instead of a merge into a state that attention_finalize
//    would read back.

#include "attn_mma.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

#include <cstdint>

namespace DistAttn::Impl::cuda::detail {

/// Finalizes one query row: O = acc / l as packed 16-bit pairs, and (lane t == 0 of
/// the quad) LSE = m + log l in natural log. m2 is the row max in the kernels'
/// base-2 scaled units, l_tot the row sum already reduced over the quad, and
/// get(j) the thread's unnormalized float2 at columns 8 j + 2 t. A row that saw no
/// admissible key (m2 = -inf) gives O = 0 and LSE = -inf, as finalize does.
template <class Elem, int D, class Get>
__device__ __forceinline__ void write_direct_row(const AttnFwdParams& p, int b, int h, int row, int t, float m2,
                                                 float l_tot, Get get) {
  const bool empty = m2 == -INFINITY || !(l_tot > 0.f);
  const float inv  = empty ? 0.f : 1.f / l_tot;
  Elem* orow = static_cast<Elem*>(p.o.data) + p.o.at(b, row, h);
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    if (j * 8 >= p.head_dim) break;  // zero padding of a head_dim below D
    const float2 v = get(j);
    // The select, not inv = 0 alone: an empty row's O is 0 even where a non-finite V
    // made its accumulator NaN (0 * Inf), as on the state path, which never touches it.
    *reinterpret_cast<uint32_t*>(orow + j * 8 + 2 * t) =
        ElemOps<Elem>::pack(empty ? 0.f : v.x * inv, empty ? 0.f : v.y * inv);
  }
  if (t == 0)
    p.lse.data[p.lse.at(b, h, row)] =
        empty ? -INFINITY : (m2 + log2f(l_tot)) * kLn2;
}

/// Update mode: merges one row's block result (O unnormalized, row max m2 in base-2
/// scaled units, row sum l_loc) into the incoming (acc, m, l). The loop starts from
/// the empty state and the result is merged at the end (docs/design/building_block.md, Definitions): equal to folding
/// the tiles into the state one by one, reading the old accumulator once. A row that
/// saw nothing leaves the state untouched; an incoming m = -inf marks an empty state
/// whose acc is ignored.
template <int D, class Get>
__device__ __forceinline__ void merge_state_row(const AttnFwdParams& p, int b, int h, int row, int t, float m2,
                                                float l_loc, Get get) {
  if (m2 == -INFINITY) return;  // nothing admissible: state unchanged
  const std::int64_t mi = p.m.at(b, h, row);
  const std::int64_t li = p.l.at(b, h, row);
  const float m_in   = p.m.data[mi];
  const float m_in2  = m_in * kLog2e;  // -inf stays -inf
  const float l_in   = p.l.data[li];
  const float m_new2 = fmaxf(m_in2, m2);
  const float e_in   = m_in2 == -INFINITY ? 0.f : ex2(m_in2 - m_new2);
  const float e_loc  = ex2(m2 - m_new2);
  float* accrow = p.acc.data + p.acc.at(b, row, h);
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    if (j * 8 >= p.head_dim) break;  // zero padding of a head_dim below D
    float2* ptr    = reinterpret_cast<float2*>(accrow + j * 8 + 2 * t);
    const float2 v = get(j);
    float2 val     = make_float2(e_loc * v.x, e_loc * v.y);
    if (e_in != 0.f) {
      const float2 old = *ptr;
      val.x            = fmaf(e_in, old.x, val.x);
      val.y            = fmaf(e_in, old.y, val.y);
    }
    *ptr = val;
  }
  if (t == 0) {
    // Keep the incoming m bit for bit when it stays the max (no drift over calls).
    p.m.data[mi] = m_in2 >= m2 ? m_in : m_new2 * kLn2;
    p.l.data[li] = fmaf(e_in, l_in, e_loc * l_loc);
  }
}

/// One row's epilogue in either mode (rows past seqlen_q are the caller's to skip).
template <class Elem, int D, class Get>
__device__ __forceinline__ void finish_row(const AttnFwdParams& p, int b, int h, int row, int t, float m2,
                                           float l_loc, Get get) {
  if (p.o.data != nullptr) write_direct_row<Elem, D>(p, b, h, row, t, m2, l_loc, get);  // empty rows written too
  else merge_state_row<D>(p, b, h, row, t, m2, l_loc, get);
}

/// A row of a query tile that no key reaches (the kernels skip such tiles whole).
template <class Elem, int D>
__device__ __forceinline__ void write_empty_row(const AttnFwdParams& p, int b, int h, int row, int t) {
  write_direct_row<Elem, D>(p, b, h, row, t, -INFINITY, 0.f, [](int) { return make_float2(0.f, 0.f); });
}

}  // namespace DistAttn::Impl::cuda::detail
