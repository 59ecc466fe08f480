// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/linear.hpp
/// The one seam through which every projection of the decoder layer and its
/// backward runs: KokkosBlas::gemm on row-major [rows, cols] matrices (and
/// KokkosBlas::axpy for the SGD update). On CUDA builds Kokkos Kernels hands
/// gemm to cuBLAS when it was built with KokkosKernels_ENABLE_TPL_CUBLAS=ON
/// (float, double). bf16/fp16 matrices in CUDA memory go to cuBLAS directly
/// (impl/cublas_gemm.hpp; docs/design/decoder_layer.md says why).

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/impl/blas.hpp>

namespace DistAttn {

template <class T, class Mem>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Mem>;

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
