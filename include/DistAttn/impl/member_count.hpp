// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/member_count.hpp
/// The number of members of an aggregate (a base class counts as one): what the
/// guards use that keep a struct's field list and the code that must name every
/// field (the options agreement, the C ABI's config agreement) from drifting apart.

#include <cstddef>
#include <utility>

namespace DistAttn::Impl {

/// Converts to anything. One distinct type per position: nvcc's front end
/// miscounts a pack of one placeholder type.
template <std::size_t>
struct AnyMember {
  template <class T>
  constexpr operator T() const noexcept;
};

template <class T, std::size_t... I>
constexpr auto brace_initializable(std::index_sequence<I...>, int) -> decltype(T{AnyMember<I>{}...}, true) {
  return true;
}
template <class T, std::size_t... I>
constexpr bool brace_initializable(std::index_sequence<I...>, ...) {
  return false;
}

/// An aggregate is brace-initializable from as many values as it has members, no more.
template <class T, std::size_t N = 0>
constexpr std::size_t member_count() {
  if constexpr (brace_initializable<T>(std::make_index_sequence<N + 1>{}, 0))
    return member_count<T, N + 1>();
  else
    return N;
}

}  // namespace DistAttn::Impl
