// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file attn_bwd_prep_params.hpp
/// Parameter block and host entry point of the CUDA prologue of a fresh backward
/// (attention_bwd_prepare): Delta = rowsum(dO * O) and dq, dk, dv set to zero in one
/// launch, instead of a Delta pass and three fills. Same conventions as
/// attn_params.hpp (strides in elements, unit stride on head_dim).

#include <DistAttn/impl/cuda/attn_params.hpp>

namespace DistAttn::Impl::cuda {

struct AttnBwdPrepParams {
  TensorRows<const void*> o, dout;  // [B, Sq, H, D], element type dtype
  TensorRows<float*> dq;            // [B, Sq, H, D], zeroed
  TensorRows<float*> dk, dv;        // [B, Sk, Hkv, D], zeroed
  StatRows<float*> delta;           // [B, H, Sq], written
  int batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  AttnDType dtype;
};

/// Launches the prologue on `stream` and returns true, or returns false without
/// touching anything where the head_dim (a multiple of 8 up to 128), the alignment
/// (16-byte rows) or the device is not supported; the caller then runs the separate
/// passes. Throws on launch errors.
bool run_attn_bwd_prep(const AttnBwdPrepParams& params, cudaStream_t stream);

}  // namespace DistAttn::Impl::cuda
