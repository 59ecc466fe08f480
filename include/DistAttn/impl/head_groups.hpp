// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Head chunking (ExecutorOptions::head_group): an executor runs a pass over a
// group of kv heads and their query heads. Heads are dimension 2 of the
// (B, N, H, D) tensors and dimension 1 of the (B, H, N) row statistics.

#include <Kokkos_Core.hpp>
#include <utility>

namespace DistAttn::Impl {

/// Calls f(query head range, kv head range) for each group of `group` kv heads
/// (group divides kv_heads; the query heads of kv head h are h*r .. h*r+r-1).
template <class F>
void for_each_head_group(int heads, int kv_heads, int group, F&& f) {
  const int r = heads / kv_heads;
  for (int h = 0; h < kv_heads; h += group) f(std::make_pair(h * r, (h + group) * r), std::make_pair(h, h + group));
}

/// The heads h of a (B, N, H, D) tensor.
template <class V>
auto head_range(const V& v, std::pair<int, int> h) {
  return Kokkos::subview(v, Kokkos::ALL, Kokkos::ALL, h, Kokkos::ALL);
}

/// The heads h of a (B, H, N) row statistic (LSE, Delta).
template <class V>
auto stat_head_range(const V& v, std::pair<int, int> h) {
  return Kokkos::subview(v, Kokkos::ALL, h, Kokkos::ALL);
}

}  // namespace DistAttn::Impl
