// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/nccl/check.hpp>

namespace DistAttn::Impl {

void throw_nccl_error(const char* call, const std::string& where, ncclResult_t code) {
  std::ostringstream os;
  os << where << ": " << call << " failed: " << ncclGetErrorString(code) << " (ncclResult_t " << int(code)
     << ")";
  if (const char* last = ncclGetLastError(nullptr); last && *last) os << "; NCCL: " << last;
  throw CommunicationError(os.str());
}

void throw_cuda_error(const char* call, const std::string& where, cudaError_t code) {
  std::ostringstream os;
  os << where << ": " << call << " failed: " << cudaGetErrorName(code) << ": " << cudaGetErrorString(code);
  throw CommunicationError(os.str());
}

}  // namespace DistAttn::Impl
