#pragma once
/// @file attn_bwd_prep_params.hpp
/// Parameter block and host entry point of the CUDA prologue of a fresh backward
/// (attention_bwd_prepare): Delta = rowsum(dO * O) and dq, dk, dv set to zero in one
/// launch, instead of a Delta pass and three fills. Same conventions as
/// attn_params.hpp (strides in elements, unit stride on head_dim).

#include <DistAttn/impl/cuda/attn_params.hpp>

namespace DistAttn::Impl::cuda {

/// A [batch, seq, heads, head_dim] tensor (P: its data pointer type).
template <class P>
struct TensorRows {
  P data;
  std::int64_t batch_stride, row_stride, head_stride;
  /// Element offset of (b, row i, head h, column 0).
  __host__ __device__ std::int64_t at(int b, int i, int h) const {
    return b * batch_stride + i * row_stride + h * head_stride;
  }
};

struct AttnBwdPrepParams {
  TensorRows<const void*> o, dout;  // [B, Sq, H, D], element type dtype
  TensorRows<float*> dq;            // [B, Sq, H, D], zeroed
  TensorRows<float*> dk, dv;        // [B, Sk, Hkv, D], zeroed
  float* delta;                     // [B, H, Sq], written
  std::int64_t delta_batch_stride, delta_head_stride, delta_row_stride;
  int batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  AttnDType dtype;
};

/// Launches the prologue on `stream` and returns true, or returns false without
/// touching anything where the head_dim (a multiple of 8 up to 128), the alignment
/// (16-byte rows) or the device is not supported; the caller then runs the separate
/// passes. Throws on launch errors.
bool run_attn_bwd_prep(const AttnBwdPrepParams& params, cudaStream_t stream);

}  // namespace DistAttn::Impl::cuda
