// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/rmsnorm.hpp
/// RMSNorm over the feature axis of a row-major [tokens, features] matrix:
/// y = x * inv * g with inv = 1 / sqrt(mean(x^2) + eps) per row. Every sum runs
/// in a fixed order in one thread, so a recomputation reproduces it bitwise.

#include <DistAttn/core/types.hpp>

namespace DistAttn {

template <class T, class Mem>
using Vector = Kokkos::View<T*, Mem>;

/// y = rmsnorm(x) * g; inv[r] receives the row's 1/rms (kept for backward).
template <class Exec, class XV, class GV, class IV, class YV>
void rmsnorm_forward(const Exec& exec, const XV& x, const GV& g, double eps, const IV& inv, const YV& y) {
  using Acc     = typename IV::non_const_value_type;
  using T       = typename YV::non_const_value_type;
  const long n  = long(x.extent(0)), E = long(x.extent(1));
  const Acc e   = Acc(eps);
  Kokkos::parallel_for(
      "DistAttn::rmsnorm_forward", Kokkos::RangePolicy<Exec>(exec, 0, n), KOKKOS_LAMBDA(long r) {
        Acc ss = 0;
        for (long j = 0; j < E; ++j) ss += Acc(x(r, j)) * Acc(x(r, j));
        const Acc s = Acc(1) / compat::math::sqrt(ss / Acc(E) + e);
        inv(r)      = s;
        for (long j = 0; j < E; ++j) y(r, j) = T(Acc(x(r, j)) * s * Acc(g(j)));
      });
}

/// Given dy, the gradient of y: dx (+)= d(rmsnorm)/dx^T dy and dg = sum_r dy x inv.
/// `accumulate` adds dx to what is there (the residual branch's gradient).
template <class Exec, class XV, class GV, class IV, class DYV, class DXV, class DGV>
void rmsnorm_backward(const Exec& exec, const XV& x, const GV& g, const IV& inv, const DYV& dy, const DXV& dx,
                      const DGV& dg, bool accumulate) {
  using Acc    = typename IV::non_const_value_type;
  using T      = typename DXV::non_const_value_type;
  using GT     = typename DGV::non_const_value_type;
  const long n = long(x.extent(0)), E = long(x.extent(1));
  Kokkos::parallel_for(
      "DistAttn::rmsnorm_backward.dx", Kokkos::RangePolicy<Exec>(exec, 0, n), KOKKOS_LAMBDA(long r) {
        const Acc s = inv(r);
        Acc dot     = 0;
        for (long j = 0; j < E; ++j) dot += Acc(dy(r, j)) * Acc(g(j)) * Acc(x(r, j));
        const Acc c = s * s * s * dot / Acc(E);
        for (long j = 0; j < E; ++j) {
          const Acc d = s * Acc(g(j)) * Acc(dy(r, j)) - Acc(x(r, j)) * c;
          dx(r, j)    = accumulate ? T(Acc(dx(r, j)) + d) : T(d);
        }
      });
  Kokkos::parallel_for(
      "DistAttn::rmsnorm_backward.dg", Kokkos::RangePolicy<Exec>(exec, 0, E), KOKKOS_LAMBDA(long j) {
        Acc acc = 0;
        for (long r = 0; r < n; ++r) acc += Acc(dy(r, j)) * Acc(x(r, j)) * inv(r);
        dg(j) = GT(acc);
      });
}

}  // namespace DistAttn
