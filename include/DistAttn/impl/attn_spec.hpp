// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The dispatch seam between the portable team kernels and tuned specializations
// (Kokkos Kernels' tpl_spec_avail pattern). The primary templates run the portable
// kernels; a tuned backend specializes `tuned_attn_avail` and the Tuned* structs
// for the execution spaces, element types and head sizes it supports, and may
// still decline at run time (returns false) so the portable path takes over.

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/attn_bwd_portable.hpp>
#include <DistAttn/impl/attn_fwd_portable.hpp>

namespace DistAttn::Impl {

template <class Exec, class T>
struct tuned_attn_avail : std::false_type {};

template <class Exec, class T>
struct TunedAttnFwdUpdate {
  template <class... Args>
  static bool run(const Exec&, Args&&...) { return false; }
};

/// One-call forward straight into the final (o, lse), with no state: a tuned backend
/// may offer it where its kernel can finalize in place; otherwise attention_fwd
/// takes the state path (update, then finalize).
template <class Exec, class T>
struct TunedAttnFwdDirect {
  template <class... Args>
  static bool run(const Exec&, Args&&...) { return false; }
};

template <class Exec, class T>
struct TunedAttnBwdUpdate {
  template <class... Args>
  static bool run(const Exec&, Args&&...) { return false; }
};

inline const char* path_name(KernelPath p) {
  switch (p) {
    case KernelPath::Auto: return "auto";
    case KernelPath::Portable: return "portable";
    case KernelPath::Cuda: return "cuda";
  }
  return "?";
}

}  // namespace DistAttn::Impl

#include <DistAttn/impl/cuda/attn_cuda_spec.hpp>  // CUDA-tuned specializations (empty unless DISTATTN_ENABLE_CUDA_KERNELS)
