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

// key_rows holds every key row some query of a range may see, and no row before
// the first or after the last such row; query_rows likewise for the queries of a
// key range. Kernels skip the rows outside, so a row left out is a wrong result
// and a row let in is wasted work.
TEST(Mask, RowRangesAreTheTightestCover) {
  for_random_cases(11, [](const Case& c) {
    if (c.nq == 0 || c.nk == 0) return;
    std::mt19937 rng(c.nq * 131 + c.nk);
    const int i0 = std::uniform_int_distribution<int>(0, c.nq - 1)(rng);
    const int i1 = std::uniform_int_distribution<int>(i0 + 1, c.nq)(rng);
    int lo = c.nk, hi = 0;
    for (int i = i0; i < i1; ++i)
      for (int j = 0; j < c.nk; ++j)
        if (c.mask.allowed(i, j)) lo = std::min(lo, j), hi = std::max(hi, j + 1);
    const RowRange keys = c.mask.key_rows(c.mask.q(i0), c.mask.q(i1 - 1), c.nk);
    if (lo >= hi)
      ASSERT_TRUE(keys.empty()) << describe(c);
    else
      ASSERT_TRUE(keys.begin == lo && keys.end == hi) << describe(c) << " queries [" << i0 << "," << i1 << ")";

    const int j0 = std::uniform_int_distribution<int>(0, c.nk - 1)(rng);
    const int j1 = std::uniform_int_distribution<int>(j0 + 1, c.nk)(rng);
    lo = c.nq, hi = 0;
    for (int i = 0; i < c.nq; ++i)
      for (int j = j0; j < j1; ++j)
        if (c.mask.allowed(i, j)) lo = std::min(lo, i), hi = std::max(hi, i + 1);
    const RowRange queries = c.mask.query_rows(c.mask.k(j0), c.mask.k(j1 - 1), c.nq);
    if (lo >= hi)
      ASSERT_TRUE(queries.empty()) << describe(c);
    else
      ASSERT_TRUE(queries.begin == lo && queries.end == hi) << describe(c) << " keys [" << j0 << "," << j1 << ")";
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
