// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The mask's queries (core/mask.hpp) against brute force over random strided
// position maps: what kernels skip, what they test per element, and what the
// cost model counts must all agree with allowed(i, j).

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/mask.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace DistAttn {
namespace {

struct Case {
  Mask mask;
  int nq, nk;
  std::shared_ptr<std::vector<std::int64_t>> offsets;  // what mask.docs points into
  /// Dense masks and contiguous positions get exact row ranges and relations;
  /// a window or documents over strided positions only a safe cover.
  bool exact_keys() const { return mask.is_dense() || mask.q.stride == 1; }
  bool exact_queries() const { return mask.is_dense() || mask.k.stride == 1; }
};

/// Random strided maps, causal or not; from the second third on with a window,
/// documents or both (offsets over the positions the maps reach, negative ones
/// included, so first and last documents are open-ended as the mask defines).
template <class F>
void for_random_cases(unsigned seed, F&& f) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> off(-40, 60), stride(1, 9), len(0, 30), kind(0, 1), span(0, 25), ndocs(1, 6),
      cut(-50, 300), unit(0, 2);
  for (int it = 0; it < 6000; ++it) {
    PositionMap q{off(rng), stride(rng)}, k{off(rng), stride(rng)};
    if (it % 3 == 2) q.stride = k.stride = 1;
    Mask m = kind(rng) ? Mask::causal(q, k) : Mask::none(q, k);
    auto offsets = std::make_shared<std::vector<std::int64_t>>();
    if (it >= 2000) {
      const int what = unit(rng);  // 0: window, 1: documents, 2: both
      if (what != 1) m = m.with_window(Window{span(rng), span(rng)});
      if (what != 0) {
        const int n = ndocs(rng);
        for (int d = 0; d <= n; ++d) offsets->push_back(cut(rng));
        std::sort(offsets->begin(), offsets->end());
        m = m.with_documents(Documents{offsets->data(), n});
      }
    }
    f(Case{m, len(rng), len(rng), offsets});
  }
}

std::string describe(const Case& c) {
  std::string s = std::string(c.mask.is_causal() ? "causal" : "none") + " q={" + std::to_string(c.mask.q.offset) +
                  "," + std::to_string(c.mask.q.stride) + "} nq=" + std::to_string(c.nq) + " k={" +
                  std::to_string(c.mask.k.offset) + "," + std::to_string(c.mask.k.stride) +
                  "} nk=" + std::to_string(c.nk);
  if (c.mask.window.bounded())
    s += " window={" + std::to_string(c.mask.window.left) + "," + std::to_string(c.mask.window.right) + "}";
  if (c.mask.docs.any()) {
    s += " docs={";
    for (std::int64_t o : *c.offsets) s += std::to_string(o) + " ";
    s += "}";
  }
  return s;
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
      const bool exact = keys ? c.exact_keys() : c.exact_queries();
      if (want.empty())
        ASSERT_TRUE(got.empty() || !exact) << describe(c) << (keys ? " queries [" : " keys [") << r0 << "," << r1 << ")";
      else if (exact)
        ASSERT_TRUE(got.begin == want.begin && got.end == want.end)
            << describe(c) << (keys ? " queries [" : " keys [") << r0 << "," << r1 << "): got [" << got.begin << ","
            << got.end << "), want [" << want.begin << "," << want.end << ")";
      else
        ASSERT_TRUE(got.begin <= want.begin && got.end >= want.end)
            << describe(c) << (keys ? " queries [" : " keys [") << r0 << "," << r1 << "): got [" << got.begin << ","
            << got.end << "), which leaves out part of [" << want.begin << "," << want.end << ")";
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
    const Relation got = c.mask.relation(0, c.nq, 0, c.nk);
    // Full is always exact; Skip is exact where positions are contiguous or the
    // mask dense, and elsewhere never claimed for a block that holds a pair.
    if (c.exact_keys() && c.exact_queries()) ASSERT_EQ(int(got), int(want)) << describe(c);
    else if (want == Relation::Skip) ASSERT_NE(int(got), int(Relation::Full)) << describe(c);
    else ASSERT_EQ(int(got), int(want == Relation::Full ? Relation::Full : Relation::Partial)) << describe(c);
  });
}

// The closed forms at sizes brute force cannot reach: a causal sliding window
// over 4M tokens, and packed documents with full attention inside each.
TEST(Mask, WindowAndDocumentCounts) {
  const std::int64_t n = 4000000, w = 4096;
  EXPECT_EQ(Mask::causal().with_window(Window{w, 0}).allowed_pairs(n, n), n + w * (w + 1) / 2 + (n - 1 - w) * w);
  EXPECT_EQ(Mask::none().with_window(Window{3, 5}).allowed_pairs(100, 100), 100 * 9 - (1 + 2 + 3) - (1 + 2 + 3 + 4 + 5));
  const std::vector<std::int64_t> offsets{0, 3, 8, 10};
  const Documents docs{offsets.data(), 3};
  EXPECT_EQ(Mask::none().with_documents(docs).allowed_pairs(10, 10), 9 + 25 + 4);
  EXPECT_EQ(Mask::causal().with_documents(docs).allowed_pairs(10, 10), 6 + 15 + 3);
  EXPECT_EQ(docs.of(0), 0);
  EXPECT_EQ(docs.of(3), 1);
  EXPECT_EQ(docs.of(7), 1);
  EXPECT_EQ(docs.of(9), 2);
  const Mask m = Mask::causal().with_documents(docs).with_window(Window{2, 0});
  EXPECT_EQ(m.key_range(3).first, 3);  // a document's first token sees only itself
  EXPECT_EQ(m.key_range(3).second, 4);
  EXPECT_EQ(m.key_range(7).first, 5);  // the window, inside the document
  EXPECT_EQ(m.key_range(7).second, 8);
  EXPECT_THROW(Mask::causal().with_window(Window{-1, 0}), InvalidArgument);
  EXPECT_THROW(Mask::none().with_documents(Documents{nullptr, 2}), InvalidArgument);
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
