// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Prologue of a fresh backward, one launch: Delta = rowsum(dO * O) for every query
// row, and the fp32 gradient accumulators dq, dk, dv set to zero. Memory-bound: every
// byte is read or written once, in 16-byte accesses (the dispatch checks the
// alignment), heads fastest so that neighbouring rows are neighbouring in memory for
// the [batch, seq, heads, head_dim] layout.

#include "attn_launch.hpp"

#include <DistAttn/impl/cuda/attn_bwd_prep_params.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace DistAttn::Impl::cuda {

namespace {

__device__ __forceinline__ float2 to_float2(__nv_bfloat162 x) { return __bfloat1622float2(x); }
__device__ __forceinline__ float2 to_float2(__half2 x) { return __half22float2(x); }

/// Dot product of 8 packed 16-bit pairs-of-two (one 16-byte load of each tensor).
template <class Pair>
__device__ __forceinline__ float dot8(uint4 a, uint4 b) {
  const uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 x = to_float2(*reinterpret_cast<const Pair*>(&av[e]));
    const float2 y = to_float2(*reinterpret_cast<const Pair*>(&bv[e]));
    s = fmaf(x.x, y.x, s);
    s = fmaf(x.y, y.y, s);
  }
  return s;
}

__device__ __forceinline__ void zero8(float* p) {
  reinterpret_cast<float4*>(p)[0] = make_float4(0.f, 0.f, 0.f, 0.f);
  reinterpret_cast<float4*>(p)[1] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// 16 lanes per row (lane c of the group owns columns [8 c, 8 c + 8), head_dim <= 128).
// Rows [0, rows_q) are query rows (Delta and dq), the next rows_k key rows (dk, dv).
// Each warp takes two rows per round and every lane runs the same rounds, so the
// shuffles of the Delta sum see the whole warp.
template <class Pair>
__global__ void __launch_bounds__(256) attn_bwd_prep_kernel(const AttnBwdPrepParams p) {
  const std::int64_t rows_q = std::int64_t(p.batch) * p.seqlen_q * p.heads;
  const std::int64_t rows   = rows_q + std::int64_t(p.batch) * p.seqlen_k * p.heads_kv;
  const int c               = 8 * (threadIdx.x & 15);
  const bool col            = c < p.head_dim;
  const std::int64_t warps  = std::int64_t(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t w = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32; 2 * w < rows; w += warps) {
    const std::int64_t r = 2 * w + ((threadIdx.x >> 4) & 1);
    float s              = 0.f;
    if (r < rows_q) {
      const int h = int(r % p.heads), i = int((r / p.heads) % p.seqlen_q), b = int(r / (std::int64_t(p.heads) * p.seqlen_q));
      if (col) {
        const uint4 x = *reinterpret_cast<const uint4*>(static_cast<const char*>(p.o.data) + 2 * (p.o.at(b, i, h) + c));
        const uint4 y =
            *reinterpret_cast<const uint4*>(static_cast<const char*>(p.dout.data) + 2 * (p.dout.at(b, i, h) + c));
        s = dot8<Pair>(x, y);
        zero8(p.dq.data + p.dq.at(b, i, h) + c);
      }
    } else if (r < rows && col) {
      const std::int64_t rk = r - rows_q;
      const int h = int(rk % p.heads_kv), j = int((rk / p.heads_kv) % p.seqlen_k);
      const int b = int(rk / (std::int64_t(p.heads_kv) * p.seqlen_k));
      zero8(p.dk.data + p.dk.at(b, j, h) + c);
      zero8(p.dv.data + p.dv.at(b, j, h) + c);
    }
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 15) == 0 && r < rows_q) {
      const int h = int(r % p.heads), i = int((r / p.heads) % p.seqlen_q), b = int(r / (std::int64_t(p.heads) * p.seqlen_q));
      p.delta.data[p.delta.at(b, h, i)] = s;
    }
  }
}

}  // namespace

void launch_attn_bwd_prep(const AttnBwdPrepParams& p, cudaStream_t stream) {
  const std::int64_t rows =
      std::int64_t(p.batch) * p.seqlen_q * p.heads + std::int64_t(p.batch) * p.seqlen_k * p.heads_kv;
  if (rows == 0) return;
  // 16 rows per 256-thread block and round; enough blocks to fill the device a few
  // times over, the rest by the grid-stride loop.
  const std::int64_t blocks = std::min<std::int64_t>((rows + 15) / 16, 8192);
  if (p.dtype == AttnDType::BF16)
    attn_bwd_prep_kernel<__nv_bfloat162><<<unsigned(blocks), 256, 0, stream>>>(p);
  else
    attn_bwd_prep_kernel<__half2><<<unsigned(blocks), 256, 0, stream>>>(p);
  check_launch(cudaGetLastError(), "attn_bwd_prep_kernel");
}

}  // namespace DistAttn::Impl::cuda
