#pragma once
/// @file layer/linear.hpp
/// The one seam through which every projection of the decoder layer and its
/// backward runs: KokkosBlas::gemm on row-major [rows, cols] matrices (and
/// KokkosBlas::axpy for the SGD update). On CUDA builds Kokkos Kernels hands
/// gemm to cuBLAS when it was built with KokkosKernels_ENABLE_TPL_CUBLAS=ON
/// (float, double). bf16/fp16 matrices in CUDA memory go to cuBLAS directly
/// (impl/cublas_gemm.hpp; docs/design/decoder_layer.md says why).

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>
#if defined(KOKKOS_ENABLE_CUDA)
#include <DistAttn/impl/cublas_gemm.hpp>
#endif

#include <KokkosBlas1_axpby.hpp>
#include <algorithm>
#include <type_traits>
#include <KokkosBlas3_gemm.hpp>

namespace DistAttn {

template <class T, class Mem>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;

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

/// y = x w (+ y when accumulate): x [n, in], w [in, out], y [n, out].
template <class Exec, class XV, class WV, class YV>
void linear_forward(const Exec& exec, const XV& x, const WV& w, const YV& y, bool accumulate = false) {
  using T = typename YV::non_const_value_type;
  Impl::gemm(exec, "N", "N", T(1), x, w, accumulate ? T(1) : T(0), y);
}

/// dx = dy w^T (+ dx when accumulate): the input gradient of linear_forward.
template <class Exec, class DYV, class WV, class DXV>
void linear_backward_input(const Exec& exec, const DYV& dy, const WV& w, const DXV& dx, bool accumulate = false) {
  using T = typename DXV::non_const_value_type;
  Impl::gemm(exec, "N", "T", T(1), dy, w, accumulate ? T(1) : T(0), dx);
}

/// dw = x^T dy (overwritten): the weight gradient of linear_forward.
template <class Exec, class XV, class DYV, class DWV>
void linear_backward_weight(const Exec& exec, const XV& x, const DYV& dy, const DWV& dw) {
  using T = typename DWV::non_const_value_type;
  Impl::gemm(exec, "T", "N", T(1), x, dy, T(0), dw);
}

}  // namespace DistAttn
