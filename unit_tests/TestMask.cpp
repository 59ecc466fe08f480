// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The mask's queries (core/mask.hpp) against brute force over random strided
// position maps: what kernels skip, what they test per element, and what the
// cost model counts must all agree with allowed(i, j).

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/mask.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

namespace DistAttn {
namespace {

struct Case {
  Mask mask;
  int nq, nk;
};

template <class F>
void for_random_cases(unsigned seed, F&& f) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> off(-40, 60), stride(1, 9), len(0, 30), kind(0, 1);
  for (int it = 0; it < 3000; ++it) {
    const PositionMap q{off(rng), stride(rng)}, k{off(rng), stride(rng)};
    const Mask m = kind(rng) ? Mask::causal(q, k) : Mask{MaskKind::None, q, k};
    f(Case{m, len(rng), len(rng)});
  }
}

std::string describe(const Case& c) {
  return std::string(c.mask.is_causal() ? "causal" : "none") + " q={" + std::to_string(c.mask.q.offset) + "," +
         std::to_string(c.mask.q.stride) + "} nq=" + std::to_string(c.nq) + " k={" +
         std::to_string(c.mask.k.offset) + "," + std::to_string(c.mask.k.stride) + "} nk=" + std::to_string(c.nk);
}

TEST(Mask, AllowedPairsMatchBruteForce) {
  for_random_cases(7, [](const Case& c) {
    std::int64_t brute = 0;
    for (int i = 0; i < c.nq; ++i)
      for (int j = 0; j < c.nk; ++j) brute += c.mask.allowed(i, j) ? 1 : 0;
    ASSERT_EQ(c.mask.allowed_pairs(c.nq, c.nk), brute) << describe(c);
  });
  EXPECT_EQ(Mask::causal().allowed_pairs(4000000, 4000000), std::int64_t(4000000) * 4000001 / 2);
  EXPECT_THROW(Mask::causal({0, 0}, {0, 1}).allowed_pairs(4, 4), InvalidArgument);
}

/// The rows of the `cover` side that meet some row of [r0, r1) on the other side,
/// by brute force: allowed(i, j) with i a query row when cover_keys, else a key row.
RowRange brute_cover(const Case& c, bool cover_keys, int r0, int r1) {
  const int n = cover_keys ? c.nk : c.nq;
  int lo = n, hi = 0;
  for (int r = r0; r < r1; ++r)
    for (int x = 0; x < n; ++x)
      if (cover_keys ? c.mask.allowed(r, x) : c.mask.allowed(x, r)) lo = std::min(lo, x), hi = std::max(hi, x + 1);
  return lo < hi ? RowRange{lo, hi} : RowRange{};
}

// key_rows holds every key row some query of a range may see, and no row before
// the first or after the last such row; query_rows likewise for the queries of a
// key range. Kernels skip the rows outside, so a row left out is a wrong result
// and a row let in is wasted work.
TEST(Mask, RowRangesAreTheTightestCover) {
  for_random_cases(11, [](const Case& c) {
    if (c.nq == 0 || c.nk == 0) return;
    std::mt19937 rng(c.nq * 131 + c.nk);
    for (bool keys : {true, false}) {
      const int n  = keys ? c.nq : c.nk;
      const int r0 = std::uniform_int_distribution<int>(0, n - 1)(rng);
      const int r1 = std::uniform_int_distribution<int>(r0 + 1, n)(rng);
      const RowRange want = brute_cover(c, keys, r0, r1);
      const RowRange got  = keys ? c.mask.key_rows(c.mask.q(r0), c.mask.q(r1 - 1), c.nk)
                                 : c.mask.query_rows(c.mask.k(r0), c.mask.k(r1 - 1), c.nq);
      if (want.empty())
        ASSERT_TRUE(got.empty()) << describe(c) << (keys ? " queries [" : " keys [") << r0 << "," << r1 << ")";
      else
        ASSERT_TRUE(got.begin == want.begin && got.end == want.end)
            << describe(c) << (keys ? " queries [" : " keys [") << r0 << "," << r1 << "): got [" << got.begin << ","
            << got.end << "), want [" << want.begin << "," << want.end << ")";
    }
  });
}

TEST(Mask, RelationOfABlockMatchesItsPairs) {
  for_random_cases(13, [](const Case& c) {
    if (c.nq == 0 || c.nk == 0) return;
    std::int64_t allowed = 0;
    for (int i = 0; i < c.nq; ++i)
      for (int j = 0; j < c.nk; ++j) allowed += c.mask.allowed(i, j) ? 1 : 0;
    const Relation want = allowed == 0 ? Relation::Skip
                          : allowed == std::int64_t(c.nq) * c.nk ? Relation::Full
                                                                  : Relation::Partial;
    ASSERT_EQ(int(c.mask.relation(0, c.nq, 0, c.nk)), int(want)) << describe(c);
  });
}

TEST(Mask, TilesOfARowRange) {
  const RowRange all{0, 10}, some{5, 8}, none{10, 10};
  EXPECT_EQ(all.tiles(4).begin, 0);
  EXPECT_EQ(all.tiles(4).end, 3);
  EXPECT_EQ(some.tiles(4).begin, 1);
  EXPECT_EQ(some.tiles(4).end, 2);
  EXPECT_TRUE(none.tiles(4).empty());
  EXPECT_EQ(none.tiles(4).begin, 3);  // past the last tile, as a kernel's loop expects
}

}  // namespace
}  // namespace DistAttn
