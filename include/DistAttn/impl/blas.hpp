// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/blas.hpp
/// gemm and axpy on an execution-space instance, for every Kokkos Kernels
/// version (layer/linear.hpp's seam). Not part of the API. bf16/fp16 matrices
/// in CUDA memory go to cuBLAS directly (impl/cublas_gemm.hpp says why).

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>
#if defined(KOKKOS_ENABLE_CUDA)
#include <DistAttn/impl/cublas_gemm.hpp>
#endif

#include <KokkosBlas1_axpby.hpp>
#include <KokkosBlas3_gemm.hpp>
#include <algorithm>
#include <type_traits>

namespace DistAttn {

namespace Impl {

template <class T>
constexpr bool is_16bit_v = (compat::has_bhalf && std::is_same<T, compat::bhalf_t>::value) ||
                            (compat::has_half && std::is_same<T, compat::half_t>::value);

/// C = alpha op(A) op(B) + beta C on `exec`. Kokkos Kernels before 4.2 has no
/// instance argument: its gemm runs on the default instance, so the caller's
/// instance is fenced before and after (a no-op on the Serial backend).
template <class Exec, class AV, class BV, class CV>
void gemm(const Exec& exec, const char* ta, const char* tb, typename CV::const_value_type alpha, const AV& a,
          const BV& b, typename CV::const_value_type beta, const CV& c) {
#if defined(KOKKOS_ENABLE_CUDA)
  using T = typename CV::non_const_value_type;
  if constexpr (is_16bit_v<T> && std::is_same<Exec, Kokkos::Cuda>::value) {
    DISTATTN_REQUIRE(a.stride(1) == 1 && b.stride(1) == 1 && c.stride(1) == 1, "DistAttn::linear",
                     "16-bit matrices must have contiguous rows (LayoutRight)");
    const long k = (*ta == 'N' || *ta == 'n') ? long(a.extent(1)) : long(a.extent(0));
    // cuBLAS wants a leading dimension >= the row length even for one-row views.
    auto ld = [](const auto& v) { return std::max<long>({long(v.stride(0)), long(v.extent(1)), 1L}); };
    cublas_gemm_rowmajor(exec.cuda_stream(), std::is_same<T, compat::bhalf_t>::value ? Gemm16::BF16 : Gemm16::FP16,
                         *ta, *tb, long(c.extent(0)), long(c.extent(1)), k, float(alpha), a.data(), ld(a), b.data(),
                         ld(b), float(beta), c.data(), ld(c));
  } else
#endif
  {
#if DISTATTN_KOKKOSBLAS_TAKES_SPACE
    KokkosBlas::gemm(exec, ta, tb, alpha, a, b, beta, c);
#else
    compat::fence(exec, "DistAttn::gemm: inputs ready");
    KokkosBlas::gemm(ta, tb, alpha, a, b, beta, c);
    compat::global_fence("DistAttn::gemm: done");
#endif
  }
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
