// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/canonical_views.hpp
/// The one View type each kind of tile-kernel argument has inside the library.
/// The API takes Views of any layout (LayoutRight, LayoutLeft, subviews,
/// strided shards); at its boundary they become unmanaged LayoutStride Views of
/// the same element type and memory space, so the tile kernels (portable and
/// tuned) are instantiated once per (execution space, element types), not once
/// per caller View type. The portable kernels test the unit head_dim stride at
/// run time (tile_loops.hpp), so the general layout costs them nothing there.

#include <Kokkos_Core.hpp>

namespace DistAttn::Impl {

template <class V, class Data>
using CanonicalView =
    Kokkos::View<Data, Kokkos::LayoutStride, typename V::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// A read-only [B, S, H, D] argument.
template <class V>
CanonicalView<V, const typename V::non_const_value_type****> canonical_in(const V& v) {
  static_assert(int(V::rank) == 4, "a [batch, seq, heads, head_dim] View");
  return v;
}
/// A written [B, S, H, D] argument.
template <class V>
CanonicalView<V, typename V::non_const_value_type****> canonical_out(const V& v) {
  static_assert(int(V::rank) == 4, "a [batch, seq, heads, head_dim] View");
  return v;
}
/// A read-only [B, H, S] row-statistics argument.
template <class V>
CanonicalView<V, const typename V::non_const_value_type***> canonical_in_stats(const V& v) {
  static_assert(int(V::rank) == 3, "a [batch, heads, seq] View");
  return v;
}
/// A written [B, H, S] row-statistics argument.
template <class V>
CanonicalView<V, typename V::non_const_value_type***> canonical_out_stats(const V& v) {
  static_assert(int(V::rank) == 3, "a [batch, heads, seq] View");
  return v;
}

}  // namespace DistAttn::Impl
