// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/tensor_arg_from_view.hpp
/// A View as a tuned kernel's argument (impl/cuda/tensor_arg.hpp): the data
/// pointer and the View's own strides, whatever its layout. The one place the
/// CUDA-tuned specializations (impl/cuda/attn_cuda_spec.hpp) turn Views into the
/// kernels' parameter blocks.

#include <DistAttn/impl/cuda/tensor_arg.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>

namespace DistAttn::Impl {

/// The View's strides in elements, 64-bit.
template <class V>
struct Strides {
  std::int64_t s[8] = {};
  explicit Strides(const V& v) {
    std::size_t tmp[8] = {};
    v.stride(tmp);
    for (int r = 0; r < int(V::rank); ++r) s[r] = std::int64_t(tmp[r]);
  }
};

/// A [B, S, H, D] View as a TensorRows with pointer type P.
template <class P, class V>
cuda::TensorRows<P> tensor_rows(const V& v) {
  static_assert(int(V::rank) == 4, "tensor_rows takes a [batch, seq, heads, head_dim] View");
  const Strides<V> st(v);
  return {P(v.data()), st.s[0], st.s[1], st.s[2]};
}

/// A [B, H, S] View of row statistics as a StatRows with pointer type P.
template <class P, class V>
cuda::StatRows<P> stat_rows(const V& v) {
  static_assert(int(V::rank) == 3, "stat_rows takes a [batch, heads, seq] View");
  const Strides<V> st(v);
  return {P(v.data()), st.s[0], st.s[1], st.s[2]};
}

}  // namespace DistAttn::Impl
