#pragma once
/// @file impl/blas.hpp
/// gemm and axpy on an execution-space instance, for every Kokkos Kernels
/// version (layer/linear.hpp's seam). Not part of the API.

#include <DistAttn/core/kokkos_compat.hpp>

#include <KokkosBlas1_axpby.hpp>
#include <KokkosBlas3_gemm.hpp>

namespace DistAttn {

namespace Impl {

/// C = alpha op(A) op(B) + beta C on `exec`. Kokkos Kernels before 4.2 has no
/// instance argument: its gemm runs on the default instance, so the caller's
/// instance is fenced before and after (a no-op on the Serial backend).
template <class Exec, class AV, class BV, class CV>
void gemm(const Exec& exec, const char* ta, const char* tb, typename CV::const_value_type alpha, const AV& a,
          const BV& b, typename CV::const_value_type beta, const CV& c) {
#if DISTATTN_KOKKOSBLAS_TAKES_SPACE
  KokkosBlas::gemm(exec, ta, tb, alpha, a, b, beta, c);
#else
  compat::fence(exec, "DistAttn::gemm: inputs ready");
  KokkosBlas::gemm(ta, tb, alpha, a, b, beta, c);
  compat::global_fence("DistAttn::gemm: done");
#endif
}

/// y += alpha x for rank-1 Views (the SGD update), with the same instance rule as gemm.
template <class Exec, class XV, class YV>
void axpy(const Exec& exec, typename YV::const_value_type alpha, const XV& x, const YV& y) {
#if DISTATTN_KOKKOSBLAS_TAKES_SPACE
  KokkosBlas::axpy(exec, alpha, x, y);
#else
  compat::fence(exec, "DistAttn::axpy: inputs ready");
  KokkosBlas::axpy(alpha, x, y);
  compat::global_fence("DistAttn::axpy: done");
#endif
}

}  // namespace Impl

}  // namespace DistAttn
