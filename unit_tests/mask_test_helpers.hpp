// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the tests of mask-priced work share: a brute-force count of allowed pairs
// and random document offsets.

#include <DistAttn/core/mask.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace DistAttn::Testing {

/// Allowed pairs of nq query rows and nk key rows of m, one by one.
inline std::int64_t brute_pairs(const Mask& m, std::int64_t nq, std::int64_t nk) {
  std::int64_t c = 0;
  for (std::int64_t i = 0; i < nq; ++i)
    for (std::int64_t j = 0; j < nk; ++j) c += m.allowed(i, j) ? 1 : 0;
  return c;
}

/// Offsets of 1 to max_cuts + 1 documents over [0, last]; some may be empty.
inline std::vector<std::int64_t> random_documents(std::mt19937& rng, std::int64_t last, int max_cuts) {
  std::uniform_int_distribution<int> count(1, max_cuts);
  std::uniform_int_distribution<std::int64_t> cut(0, last);
  std::vector<std::int64_t> d{0, last};
  for (int i = count(rng); i > 0; --i) d.push_back(cut(rng));
  std::sort(d.begin(), d.end());
  return d;
}

}  // namespace DistAttn::Testing
