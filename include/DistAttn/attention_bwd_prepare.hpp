// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file attention_bwd_prepare.hpp
/// The prologue of a fresh backward: Delta = rowsum(dO * O) and the gradient
/// accumulators dq, dk, dv set to zero, what a caller of attention_bwd_update needs
/// before the first block. Where a tuned kernel exists it is one pass over the
/// memory instead of a Delta pass and three fills.

#include <DistAttn/attention.hpp>

#if DISTATTN_ENABLE_CUDA_KERNELS && defined(KOKKOS_ENABLE_CUDA)
#include <DistAttn/impl/cuda/attn_bwd_prep_params.hpp>
#endif

namespace DistAttn {

namespace Impl {

/// Tuned prologue (spec-avail seam, as impl/attn_spec.hpp): declines by default.
template <class Exec, class T>
struct TunedAttnBwdPrepare {
  template <class... Args>
  static bool run(const Exec&, Args&&...) { return false; }
};

#if DISTATTN_ENABLE_CUDA_KERNELS && defined(KOKKOS_ENABLE_CUDA)
template <class T>
struct TunedAttnBwdPrepare<Kokkos::Cuda, T> {
  template <class OV, class DOV, class DeltaV, class GQV, class GKV, class GVV>
  static bool run(const Kokkos::Cuda& exec, const OV& o, const DOV& dout, const DeltaV& delta, const GQV& dq,
                  const GKV& dk, const GVV& dv) {
    using namespace cuda_spec;
    if constexpr (!is_tuned_elem_v<T> || !value_is_v<DOV, T> || !value_is_v<DeltaV, float> ||
                  !value_is_v<GQV, float> || !value_is_v<GKV, float> || !value_is_v<GVV, float>) {
      return false;
    } else {
      if (!unit_last(o) || !unit_last(dout) || !unit_last(dq) || !unit_last(dk) || !unit_last(dv)) return false;
      cuda::AttnBwdPrepParams p{};
      p.o     = tensor_rows<const void*>(o);
      p.dout  = tensor_rows<const void*>(dout);
      p.dq    = tensor_rows<float*>(dq);
      p.dk    = tensor_rows<float*>(dk);
      p.dv    = tensor_rows<float*>(dv);
      p.delta = stat_rows<float*>(delta);
      p.batch = int(o.extent(0)), p.seqlen_q = int(o.extent(1)), p.heads = int(o.extent(2));
      p.head_dim = int(o.extent(3)), p.seqlen_k = int(dk.extent(1)), p.heads_kv = int(dk.extent(2));
      p.dtype = dtype_of<T>();
      return cuda::run_attn_bwd_prep(p, exec.cuda_stream());
    }
  }
};
#endif

}  // namespace Impl

/// delta = rowsum(dout * o) (as attention_bwd_delta) and dq = dk = dv = 0, for the
/// query rows of o and the key rows of dk / dv. opts.path selects the kernels as for
/// the other calls (Portable: the separate passes).
template <class Exec, class OV, class DOV, class DeltaV, class GQV, class GKV, class GVV>
void attention_bwd_prepare(const Exec& exec, const OV& o, const DOV& dout, const DeltaV& delta, const GQV& dq,
                           const GKV& dk, const GVV& dv, const AttnOptions& opts = {}) {
  constexpr const char* where = "DistAttn::attention_bwd_prepare";
  Impl::require_accessible<Exec, OV>(where, "o");
  Impl::require_accessible<Exec, DOV>(where, "dout");
  Impl::check_same4(where, "o", o, "dout", dout);
  Impl::require_accessible<Exec, DeltaV>(where, "delta");
  Impl::check_stats(where, "delta", delta, o.extent(0), o.extent(2), o.extent(1));
  Impl::require_accessible<Exec, GQV>(where, "dq");
  Impl::check_same4(where, "o", o, "dq", dq);
  Impl::require_accessible<Exec, GKV>(where, "dk");
  Impl::require_accessible<Exec, GVV>(where, "dv");
  Impl::check_same4(where, "dk", dk, "dv", dv);
  DISTATTN_REQUIRE(dk.extent(0) == o.extent(0) && dk.extent(3) == o.extent(3), where,
                   "dk must have o's batch and head_dim");
  using T = typename OV::non_const_value_type;
  if (opts.path != KernelPath::Portable &&
      Impl::TunedAttnBwdPrepare<Exec, T>::run(exec, o, dout, delta, dq, dk, dv))
    return;
  Impl::compute_delta(exec, o, dout, delta);
  using GQ = typename GQV::non_const_value_type;
  using GK = typename GKV::non_const_value_type;
  using GV = typename GVV::non_const_value_type;
  Kokkos::deep_copy(exec, dq, GQ(0));
  Kokkos::deep_copy(exec, dk, GK(0));
  Kokkos::deep_copy(exec, dv, GV(0));
}

}  // namespace DistAttn
