// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/kernel_notice.hpp
/// One line on stderr, once per process and reason, when the tuned kernels decline
/// a call and the portable kernels run it: on a GPU those are one to two orders of
/// magnitude slower, and a user whose head_dim or mask the tuned kernels do not
/// cover should hear so on the first call rather than find it in a profile.

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

namespace DistAttn::Impl {

/// Says that the portable kernels run instead of the tuned ones because of
/// `reason` (what the tuned kernels do not handle), the first time only; returns
/// whether it spoke.
inline bool note_portable_fallback(const std::string& reason) {
  static std::mutex mu;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mu);
  if (!said.insert(reason).second) return false;
  std::fprintf(stderr,
               "DistAttn: the tuned CUDA kernels do not handle %s; the portable kernels run these calls "
               "(far slower on GPUs)\n",
               reason.c_str());
  return true;
}

}  // namespace DistAttn::Impl
