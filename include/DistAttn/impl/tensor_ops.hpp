// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Element-wise helpers the schedules need between tile calls.

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/attn_rowwise.hpp>

namespace DistAttn::Impl {

/// y += x for rank-4 views of equal extents (gradient partials are plain sums, docs/design/building_block.md).
template <class Exec, class X, class Y>
void add4(const Exec& exec, const X& x, const Y& y, const char* label) {
  using YT      = typename Y::non_const_value_type;
  const long n0 = long(y.extent(0)), n1 = long(y.extent(1)), n2 = long(y.extent(2)), n3 = long(y.extent(3));
  const long per = elements_per_index<Exec>(n3);
  const Index4 ix{n1, n2, n3 / per};
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, n0 * n1 * n2 * (n3 / per)),
      KOKKOS_LAMBDA(long idx) {
        int a, b, c, j0;
        ix(idx, a, b, c, j0);
        for (int j = j0; j < j0 + int(per); ++j) y(a, b, c, j) += YT(x(a, b, c, j));
      });
}

/// Unmanaged rank-4 view over a slice of a flat buffer, so several tensors of one
/// message (K and V; acc, m, l) can share one allocation.
template <class T, class MemSpace>
using Unmanaged4 = Kokkos::View<T****, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T, class MemSpace>
using Unmanaged3 = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace DistAttn::Impl
