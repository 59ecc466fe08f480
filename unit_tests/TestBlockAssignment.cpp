// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The document-aware block assignment (schedule/block_assignment.hpp): every block
// once, exactly k per rank, work against a brute-force count of allowed pairs, the
// zigzag strategy against the ring's own layout, determinism, errors, and the
// balance on the benchmark documents (DistAttn_BENCH_DOCS_DIR).

#include <DistAttn/core/error.hpp>
#include <DistAttn/schedule/block_assignment.hpp>
#include <DistAttn/schedule/ring_layout.hpp>

#include "mask_test_helpers.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace DistAttn {
namespace {

constexpr BlockStrategy kAll[] = {BlockStrategy::Contiguous, BlockStrategy::Zigzag, BlockStrategy::HeadTail,
                                  BlockStrategy::Greedy};

/// A rule and the offsets its documents point into.
struct Rule {
  std::vector<std::int64_t> offsets;
  Mask mask;
  Rule(bool causal, std::vector<std::int64_t> docs, Window w = {}) : offsets(std::move(docs)) {
    mask = (causal ? Mask::causal() : Mask::none()).with_window(w);
    if (!offsets.empty()) mask = mask.with_documents(Documents{offsets.data(), int(offsets.size()) - 1});
  }
  Rule(const Rule&) = delete;
};

using Testing::brute_pairs;

std::vector<std::int64_t> random_docs(std::mt19937& rng, std::int64_t last) {
  return Testing::random_documents(rng, last, 12);
}

void expect_valid(const BlockAssignment& a, const std::vector<std::int64_t>& w, std::int64_t B, const char* what) {
  ASSERT_EQ(int(a.blocks.size()), a.ranks) << what;
  std::vector<int> seen(std::size_t(B), 0);
  for (int r = 0; r < a.ranks; ++r) {
    const auto& bl = a.blocks[std::size_t(r)];
    EXPECT_EQ(std::int64_t(bl.size()), B / a.ranks) << what << " rank " << r;
    EXPECT_TRUE(std::is_sorted(bl.begin(), bl.end())) << what << " rank " << r;
    std::int64_t work = 0;
    for (const std::int64_t b : bl) ++seen[std::size_t(b)], work += w[std::size_t(b)];
    EXPECT_EQ(a.work[std::size_t(r)], work) << what << " rank " << r;
  }
  for (std::int64_t b = 0; b < B; ++b) EXPECT_EQ(seen[std::size_t(b)], 1) << what << " block " << b;
}

TEST(BlockAssignment, BlockWorkIsTheBruteForceCount) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> span(0, 40), pick(0, 3);
  for (int it = 0; it < 200; ++it) {
    const std::int64_t bs = 1 + it % 9, B = 2 + it % 11, n = bs * B;
    const int what = pick(rng);  // 0: dense, 1: window, 2: documents, 3: both
    std::vector<std::int64_t> docs;
    if (what >= 2) docs = random_docs(rng, n - (it % 2) * (n / 3));  // sometimes a padded tail after the last
    const Rule rule(it % 2 == 0, docs, what % 2 ? Window{span(rng), span(rng)} : Window{});
    const auto w = block_work(rule.mask, n, bs);
    for (std::int64_t b = 0; b < B; ++b) ASSERT_EQ(w[std::size_t(b)], brute_pairs(rule.mask.at({b * bs, 1}, {0, 1}), bs, n)) << it;
  }
}

TEST(BlockAssignment, EveryBlockOnceAndKPerRank) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> span(0, 300);
  for (int it = 0; it < 120; ++it) {
    const int P = 1 + it % 6;
    const std::int64_t bs = 16 + 8 * (it % 5), k = 2 * (1 + it % 4), n = bs * k * P;
    const Rule rule(it % 3 != 0, random_docs(rng, n), it % 2 ? Window{span(rng), span(rng)} : Window{});
    const auto w = block_work(rule.mask, n, bs);
    for (const BlockStrategy s : kAll) {
      const BlockAssignment a = assign_blocks(rule.mask, n, P, bs, s);
      expect_valid(a, w, n / bs, to_string(s));
      EXPECT_EQ(a.blocks_per_rank(), k);
    }
  }
}

TEST(BlockAssignment, GreedyIsNeverWorseThanTheSplits) {
  std::mt19937 rng(5);
  for (int it = 0; it < 100; ++it) {
    const int P = 2 + it % 7;
    const std::int64_t bs = 64, n = bs * 8 * P;
    const Rule rule(true, random_docs(rng, n));
    const auto g = assign_blocks(rule.mask, n, P, bs, BlockStrategy::Greedy).max_work();
    for (const BlockStrategy s : {BlockStrategy::Contiguous, BlockStrategy::Zigzag, BlockStrategy::HeadTail})
      EXPECT_LE(g, assign_blocks(rule.mask, n, P, bs, s).max_work()) << to_string(s) << " it " << it;
  }
}

TEST(BlockAssignment, ZigzagWithTwoBlocksIsTheRingsZigzag) {
  for (int P = 1; P <= 7; ++P) {
    const std::int64_t bs = 6, c = 2 * bs;
    const Rule rule(true, {});
    const BlockAssignment a = assign_blocks(rule.mask, c * P, P, bs, BlockStrategy::Zigzag);
    const RingLayout ring(P, c, RingKind::Zigzag);
    for (int r = 0; r < P; ++r)
      for (std::int64_t i = 0; i < c; ++i) EXPECT_EQ(a.position(r, i), ring.position(r, i)) << "P=" << P;
  }
}

TEST(BlockAssignment, HeadTailPairsEachDocumentsEnds) {
  // Two documents of 8 and 4 blocks on 2 ranks: pairs (0,7) (1,6) (2,5) (3,4) (8,11) (9,10)
  // dealt 0, 1, 1, 0, 0, 1.
  const Rule rule(true, {0, 8, 12});
  const BlockAssignment a = assign_blocks(rule.mask, 12, 2, 1, BlockStrategy::HeadTail);
  EXPECT_EQ(a.blocks[0], (std::vector<std::int64_t>{0, 3, 4, 7, 8, 11}));
  EXPECT_EQ(a.blocks[1], (std::vector<std::int64_t>{1, 2, 5, 6, 9, 10}));
  // A one-token block's causal work is its position in its document plus one.
  EXPECT_EQ(a.work[0], 1 + 4 + 5 + 8 + 1 + 4);
  EXPECT_EQ(a.work[1], 2 + 3 + 6 + 7 + 2 + 3);
}

TEST(BlockAssignment, RangesMergeAdjacentBlocks) {
  BlockAssignment a;
  a.ranks = 1, a.block_tokens = 10;
  a.blocks = {{0, 1, 4, 6, 7}};
  const auto r = a.ranges(0);
  ASSERT_EQ(r.size(), 3u);
  const std::vector<std::int64_t> ends{r[0].begin, r[0].end, r[1].begin, r[1].end, r[2].begin, r[2].end};
  EXPECT_EQ(ends, (std::vector<std::int64_t>{0, 20, 40, 50, 60, 80}));
  EXPECT_EQ(a.position(0, 25), 45);
}

TEST(BlockAssignment, SameInputsSameAssignment) {
  std::mt19937 rng(3);
  const Rule rule(true, random_docs(rng, 4096), Window{300, 0});
  for (const BlockStrategy s : kAll) {
    const BlockAssignment a = assign_blocks(rule.mask, 4096, 4, 64, s), b = assign_blocks(rule.mask, 4096, 4, 64, s);
    EXPECT_EQ(a.blocks, b.blocks) << to_string(s);
    EXPECT_EQ(a.work, b.work) << to_string(s);
  }
}

TEST(BlockAssignment, BadInputNamesTheArgument) {
  const Rule rule(true, {});
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { assign_blocks(rule.mask, 64, 0, 8, BlockStrategy::Greedy); }).find("ranks"), std::string::npos);
  EXPECT_NE(message([&] { assign_blocks(rule.mask, 64, 2, 0, BlockStrategy::Greedy); }).find("block_tokens"),
            std::string::npos);
  EXPECT_NE(message([&] { assign_blocks(rule.mask, 72, 3, 8, BlockStrategy::Zigzag); }).find("2 * ranks"),
            std::string::npos);
  EXPECT_NE(message([&] { assign_blocks(rule.mask, 60, 2, 8, BlockStrategy::Greedy); }).find("tokens"),
            std::string::npos);
  EXPECT_NE(message([&] { assign_blocks(rule.mask.at({1, 1}, {0, 1}), 64, 2, 8, BlockStrategy::Greedy); })
                .find("rule"),
            std::string::npos);
  EXPECT_NE(message([&] { balance_padded_length(0, 2, 8); }).find("tokens"), std::string::npos);
  for (const std::vector<std::int64_t>& bad : {std::vector<std::int64_t>{0, 40, 30, 64},
                                               std::vector<std::int64_t>{8, 64}, std::vector<std::int64_t>{0, 72}}) {
    const Rule docs(true, bad);
    EXPECT_NE(message([&] { assign_blocks(docs.mask, 64, 2, 8, BlockStrategy::Greedy); }).find("rule.docs"),
              std::string::npos);
    EXPECT_NE(message([&] { block_work(docs.mask, 64, 8); }).find("rule.docs"), std::string::npos);
  }
  const BlockAssignment a = assign_blocks(rule.mask, 64, 2, 8, BlockStrategy::Greedy);
  EXPECT_NE(message([&] { a.ranges(2); }).find("rank r=2"), std::string::npos);
  EXPECT_NE(message([&] { a.position(-1, 0); }).find("rank r=-1"), std::string::npos);
  EXPECT_NE(message([&] { a.position(0, 32); }).find("row i=32"), std::string::npos);
}

/// Offsets of a benchmark file (one document length per line), or empty when absent.
std::vector<std::int64_t> read_docs(const std::string& name) {
  const std::string path = std::string(DISTATTN_BENCH_DOCS_DIR) + "/" + name;
  std::ifstream f(path);
  std::vector<std::int64_t> off{0};
  for (std::int64_t len = 0; f >> len;) off.push_back(off.back() + len);
  return off.size() > 1 ? off : std::vector<std::int64_t>{};
}

TEST(BlockAssignment, BalancedOnTheBenchmarkDocuments) {
  const char* files[] = {"docs_lognormal8k_seed1_128k.txt", "docs_one64k_plus_2k_128k.txt",
                         "docs_lognormal8k_seed1_256k.txt", "docs_lognormal8k_seed1_1m.txt"};
  int found = 0;
  for (const char* name : files) {
    const Rule rule(true, read_docs(name));
    if (rule.offsets.empty()) continue;
    ++found;
    const std::int64_t N = rule.offsets.back(), bs = N >= (1 << 20) ? 2048 : 512;
    for (int P : {2, 3, 4, 8}) {
      const std::int64_t n = balance_padded_length(N, P, bs);
      std::printf("%-34s P=%d block=%lld k=%lld:", name, P, (long long)bs, (long long)(n / bs / P));
      for (const BlockStrategy s : kAll) std::printf(" %s %.4f", to_string(s), assign_blocks(rule.mask, n, P, bs, s).balance());
      const std::int64_t nz = balance_padded_length(N, P, 1);  // the ring's zigzag: 2P half-chunks
      std::printf(" (ring zigzag %.4f)\n", assign_blocks(rule.mask, nz, P, nz / (2 * P), BlockStrategy::Zigzag).balance());
      EXPECT_LE(assign_blocks(rule.mask, n, P, bs, BlockStrategy::Greedy).balance(), 1.05) << name << " P=" << P;
    }
  }
  if (found == 0) GTEST_SKIP() << "no benchmark documents in " << DISTATTN_BENCH_DOCS_DIR;
}

}  // namespace
}  // namespace DistAttn
