// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/nccl/check.hpp
/// DISTATTN_NCCL_CHECK(call, where) and DISTATTN_CUDA_CHECK(call, where): throw
/// DistAttn::CommunicationError with the call, the library's error text and
/// `where` (a string or a << chain, evaluated only on failure).

#include <DistAttn/core/config.hpp>
#include <DistAttn/core/error.hpp>

#if !DISTATTN_ENABLE_NCCL
#error "DistAttn/comm/nccl/*.hpp needs DistAttn configured with DistAttn_ENABLE_NCCL=ON"
#endif

#include <cuda_runtime.h>
#include <nccl.h>

#include <sstream>
#include <string>

// ncclCommSplit (2.18) and ncclCommInitRankConfig/ncclConfig_t (2.14).
#if NCCL_VERSION_CODE < 21800
#error "DistAttn's NCCL transport needs NCCL >= 2.18"
#endif

namespace DistAttn::Impl {
[[noreturn]] void throw_nccl_error(const char* call, const std::string& where, ncclResult_t code);
[[noreturn]] void throw_cuda_error(const char* call, const std::string& where, cudaError_t code);
}  // namespace DistAttn::Impl

#define DISTATTN_NCCL_CHECK(call, where)                                                     \
  do {                                                                                       \
    const ncclResult_t distattn_nccl_rc_ = (call);                                           \
    if (distattn_nccl_rc_ != ncclSuccess) {                                                  \
      std::ostringstream distattn_nccl_os_;                                                  \
      distattn_nccl_os_ << where;                                                            \
      ::DistAttn::Impl::throw_nccl_error(#call, distattn_nccl_os_.str(), distattn_nccl_rc_); \
    }                                                                                        \
  } while (0)

#define DISTATTN_CUDA_CHECK(call, where)                                                     \
  do {                                                                                       \
    const cudaError_t distattn_cuda_rc_ = (call);                                            \
    if (distattn_cuda_rc_ != cudaSuccess) {                                                  \
      std::ostringstream distattn_cuda_os_;                                                  \
      distattn_cuda_os_ << where;                                                            \
      ::DistAttn::Impl::throw_cuda_error(#call, distattn_cuda_os_.str(), distattn_cuda_rc_); \
    }                                                                                        \
  } while (0)
