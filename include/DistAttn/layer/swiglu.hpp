// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/swiglu.hpp
/// The elementwise middle of the SwiGLU MLP: s = silu(gate) * up, and its backward.
/// The projections around it go through layer/linear.hpp.

#include <DistAttn/core/types.hpp>

namespace DistAttn {

namespace Impl {
template <class Acc>
KOKKOS_INLINE_FUNCTION Acc sigmoid(Acc x) {
  return Acc(1) / (Acc(1) + compat::math::exp(-x));
}
}  // namespace Impl

/// s = silu(gate) * up, all [tokens, F].
template <class Exec, class GV, class UV, class SV>
void swiglu_forward(const Exec& exec, const GV& gate, const UV& up, const SV& s) {
  using T      = typename SV::non_const_value_type;
  using Acc    = accum_t<T>;
  const long F = long(s.extent(1));
  Kokkos::parallel_for(
      "DistAttn::swiglu_forward", Kokkos::RangePolicy<Exec>(exec, 0, long(s.extent(0)) * F), KOKKOS_LAMBDA(long idx) {
        const long r = idx / F, j = idx % F;
        const Acc g  = Acc(gate(r, j));
        s(r, j)      = T(g * Impl::sigmoid(g) * Acc(up(r, j)));
      });
}

/// dgate = ds * up * silu'(gate), dup = ds * silu(gate).
template <class Exec, class GV, class UV, class DSV, class DGV, class DUV>
void swiglu_backward(const Exec& exec, const GV& gate, const UV& up, const DSV& ds, const DGV& dgate, const DUV& dup) {
  using T      = typename DGV::non_const_value_type;
  using Acc    = accum_t<T>;
  const long F = long(ds.extent(1));
  Kokkos::parallel_for(
      "DistAttn::swiglu_backward", Kokkos::RangePolicy<Exec>(exec, 0, long(ds.extent(0)) * F),
      KOKKOS_LAMBDA(long idx) {
        const long r = idx / F, j = idx % F;
        const Acc g = Acc(gate(r, j)), sg = Impl::sigmoid(g), d = Acc(ds(r, j));
        dgate(r, j) = T(d * Acc(up(r, j)) * sg * (Acc(1) + g * (Acc(1) - sg)));
        dup(r, j)   = T(d * g * sg);
      });
}

}  // namespace DistAttn
