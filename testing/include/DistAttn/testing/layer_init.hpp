// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file testing/layer_init.hpp
/// Reproducible decoder-layer weights for tests and the training driver: every
/// rank that passes the same seed gets the same full copy (hash_uniform of the
/// flat index). Projections are uniform(-1, 1) / sqrt(fan-in), which keeps the
/// activations of a deep stack of order one; norm gains are 1 +- 0.1.

#include <DistAttn/layer/layer_weights.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include <cmath>

namespace DistAttn::Testing {

/// Fills a rank-1 View with hash_uniform(seed, i) * amp + shift.
template <class Exec, class V>
void fill_random_flat(const Exec& exec, const V& x, std::uint64_t seed, double amp, double shift = 0.0) {
  using T = typename V::non_const_value_type;
  Kokkos::parallel_for(
      "DistAttn::Testing::fill_random_flat", Kokkos::RangePolicy<Exec>(exec, 0, long(x.extent(0))),
      KOKKOS_LAMBDA(long i) { x(i) = T(shift + amp * hash_uniform(seed, std::uint64_t(i))); });
}

template <class Exec, class T, class Mem>
void fill_layer_weights(const Exec& exec, const LayerWeights<T, Mem>& w, std::uint64_t seed) {
  for (int i = 0; i < kNumWeights; ++i) {
    const Weight id       = Weight(i);
    const WeightShape s   = weight_shape(w.config(), id);
    const bool norm       = s.cols == 0;
    const std::uint64_t k = seed + 0x51ED27ull * std::uint64_t(i + 1);
    if (norm)
      fill_random_flat(exec, w.span(id), k, 0.1, 1.0);
    else
      fill_random_flat(exec, w.span(id), k, 1.0 / std::sqrt(double(s.rows)));
  }
}

}  // namespace DistAttn::Testing
