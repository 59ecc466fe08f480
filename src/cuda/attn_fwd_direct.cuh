#pragma once
// Direct-mode epilogue of the forward kernels (AttnFwdParams::o set): the rows'
// final O and LSE written straight from the registers, instead of a merge into an
// fp32 state that attention_finalize would read back. Shared by every forward
// kernel whose accumulator has the mma C-fragment layout per warp (a thread holds
// columns 8 j + 2 t, +1 of its rows).

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
  Elem* orow = static_cast<Elem*>(p.o) + b * p.o_batch_stride + std::int64_t(row) * p.o_row_stride +
               h * p.o_head_stride;
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
    p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + std::int64_t(row) * p.lse_row_stride] =
        empty ? -INFINITY : (m2 + log2f(l_tot)) * kLn2;
}

/// A row of a query tile that no key reaches (the kernels skip such tiles whole).
template <class Elem, int D>
__device__ __forceinline__ void write_empty_row(const AttnFwdParams& p, int b, int h, int row, int t) {
  write_direct_row<Elem, D>(p, b, h, row, t, -INFINITY, 0.f, [](int) { return make_float2(0.f, 0.f); });
}

}  // namespace DistAttn::Impl::cuda::detail
