#pragma once
// Host-side glue between attn_dispatch.cu and the per-instantiation translation
// units: one launcher per (direction, head_dim, element type), each defined in its
// own attn_{fwd,bwd}_hdim{64,128}_{bf16,fp16}_sm90.cu so that the heavy kernel
// templates compile in parallel and only once.

#include <DistAttn/impl/cuda/attn_bwd_prep_params.hpp>
#include <DistAttn/impl/cuda/attn_params.hpp>

#include <cuda_runtime_api.h>

namespace DistAttn::Impl::cuda {

/// Throws std::runtime_error naming `what` unless err == cudaSuccess.
void check_launch(cudaError_t err, const char* what);

#define DISTATTN_CUDA_DECLARE_LAUNCHERS(D, TY)                                \
  bool run_attn_fwd_hdim##D##_##TY(const AttnFwdParams& p, cudaStream_t stream); \
  bool run_attn_bwd_hdim##D##_##TY(const AttnBwdParams& p, cudaStream_t stream);

DISTATTN_CUDA_DECLARE_LAUNCHERS(64, bf16)
DISTATTN_CUDA_DECLARE_LAUNCHERS(64, fp16)
DISTATTN_CUDA_DECLARE_LAUNCHERS(128, bf16)
DISTATTN_CUDA_DECLARE_LAUNCHERS(128, fp16)

#undef DISTATTN_CUDA_DECLARE_LAUNCHERS

/// The backward prologue (attn_bwd_prep.cu), after run_attn_bwd_prep's checks.
void launch_attn_bwd_prep(const AttnBwdPrepParams& p, cudaStream_t stream);

}  // namespace DistAttn::Impl::cuda
