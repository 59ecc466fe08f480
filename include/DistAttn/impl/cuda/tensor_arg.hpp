// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/cuda/tensor_arg.hpp
/// How a tensor crosses into the CUDA-tuned kernels (impl/cuda/attn_params.hpp,
/// attn_bwd_prep_params.hpp): its data and three strides in elements. Plain data
/// with no Kokkos and no CUDA headers, so both sides include it;
/// impl/tensor_arg_from_view.hpp makes one from a View.

#include <cstdint>

#if defined(__CUDACC__)
#define DISTATTN_HOST_DEVICE __host__ __device__
#else
#define DISTATTN_HOST_DEVICE
#endif

namespace DistAttn::Impl::cuda {

/// A [batch, seq, heads, head_dim] tensor (P: its data pointer type); head_dim
/// has unit stride, which the Kokkos side checks.
template <class P>
struct TensorRows {
  P data = nullptr;
  std::int64_t batch_stride = 0, row_stride = 0, head_stride = 0;
  /// Element offset of (b, row i, head h, column 0).
  DISTATTN_HOST_DEVICE std::int64_t at(std::int64_t b, std::int64_t i, std::int64_t h) const {
    return b * batch_stride + i * row_stride + h * head_stride;
  }
};

/// A [batch, heads, seq] row-statistics tensor.
template <class P>
struct StatRows {
  P data = nullptr;
  std::int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
  /// Element offset of (b, head h, row i).
  DISTATTN_HOST_DEVICE std::int64_t at(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return b * batch_stride + h * head_stride + i * row_stride;
  }
};

}  // namespace DistAttn::Impl::cuda
