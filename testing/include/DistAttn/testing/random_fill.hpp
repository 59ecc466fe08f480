// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file random_fill.hpp
/// Fills device tensors with reproducible uniform(-amp, amp) values from a
/// counter-based hash (splitmix64 of seed and index): no generator state, any
/// element type, and the same values on every backend for the same seed.

#include <DistAttn/core/types.hpp>

#include <cstdint>

namespace DistAttn::Testing {

KOKKOS_INLINE_FUNCTION double hash_uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;  // [-1, 1)
}

/// Element i (in row-major order of the extents) gets hash_uniform(seed, i) * amp.
template <class Exec, class V>
void fill_random_device(const Exec& exec, const V& x, std::uint64_t seed, double amp = 1.0) {
  using T      = typename V::non_const_value_type;
  const long n0 = long(x.extent(0)), n1 = long(x.extent(1)), n2 = long(x.extent(2)), n3 = long(x.extent(3));
  Kokkos::parallel_for(
      "DistAttn::Testing::fill_random_device", Kokkos::RangePolicy<Exec>(exec, 0, n0 * n1 * n2),
      KOKKOS_LAMBDA(long idx) {
        const long c = idx % n2, b = (idx / n2) % n1, a = idx / (n1 * n2);
        for (long j = 0; j < n3; ++j)
          x(a, b, c, j) = T(float(amp * hash_uniform(seed, std::uint64_t(idx * n3 + j))));
      });
}

}  // namespace DistAttn::Testing
