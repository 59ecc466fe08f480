// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file schedule/block_assignment.hpp
/// Which token blocks each rank holds when packed documents (and windows) make the
/// plain contiguous or zigzag split unbalanced (docs/design/block_balance.md).
///
/// The sequence of N tokens is cut into B = k P blocks of `block_tokens` each and
/// every rank gets exactly k of them (equal tokens: equal memory). The work of a
/// block is the allowed (query, key) pairs of its rows against every key under the
/// global mask rule (Mask::allowed_pairs); a rank's work is the sum over its
/// blocks, and the assignment minimises the slowest rank's work. Everything is
/// integer and tie-broken by index, so every rank computes the same assignment
/// from the same rule.
///
///   Mask rule = options.mask_rule();              // causal, window, documents
///   const std::int64_t n = balance_padded_length(N, P, 512);
///   BlockAssignment a = assign_blocks(rule, n, P, 512, BlockStrategy::Greedy);
///   a.blocks[r]      // rank r's global block indices, sorted
///   a.ranges(r)      // the same as global token ranges
///   a.balance()      // slowest rank's work / mean

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/mask.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

namespace DistAttn {

/// How blocks go to ranks.
///   Contiguous  rank r holds blocks [r k, (r+1) k): the plain split.
///   Zigzag      the ring's zigzag in blocks: rank r holds half-chunk r and
///               half-chunk 2P-1-r of the sequence (k even).
///   HeadTail    per document, as PyTorch's per-document balancer: each document's
///               blocks are paired head with tail (first with last, second with
///               second to last, ...), and the pairs of all documents, in order, are
///               dealt to the ranks back and forth (0..P-1, P-1..0, ...) (k even).
///   Greedy      longest processing time first with equal counts: blocks by work,
///               largest first, each to the least loaded rank that has room; then
///               swaps between the slowest rank and another while that lowers the
///               larger of the two.
enum class BlockStrategy { Contiguous, Zigzag, HeadTail, Greedy };

inline const char* to_string(BlockStrategy s) {
  switch (s) {
    case BlockStrategy::Contiguous: return "contiguous";
    case BlockStrategy::Zigzag: return "zigzag";
    case BlockStrategy::HeadTail: return "head-tail";
    case BlockStrategy::Greedy: return "greedy";
  }
  return "?";
}

/// Global token positions [begin, end).
struct TokenRange {
  std::int64_t begin = 0, end = 0;
};

struct BlockAssignment {
  int ranks                 = 1;
  std::int64_t block_tokens = 1;
  /// Per rank, its global block indices in increasing order (k each).
  std::vector<std::vector<std::int64_t>> blocks;
  /// Per rank, the allowed pairs of its rows against every key.
  std::vector<std::int64_t> work;

  std::int64_t blocks_per_rank() const { return blocks.empty() ? 0 : std::int64_t(blocks.front().size()); }
  /// Global position of local row i of rank r: rows follow the rank's blocks in order.
  std::int64_t position(int r, std::int64_t i) const {
    return blocks[std::size_t(r)][std::size_t(i / block_tokens)] * block_tokens + i % block_tokens;
  }
  /// Rank r's rows as global token ranges, adjacent blocks merged.
  std::vector<TokenRange> ranges(int r) const {
    std::vector<TokenRange> out;
    for (const std::int64_t b : blocks[std::size_t(r)]) {
      if (!out.empty() && out.back().end == b * block_tokens) out.back().end += block_tokens;
      else out.push_back({b * block_tokens, (b + 1) * block_tokens});
    }
    return out;
  }
  std::int64_t max_work() const { return work.empty() ? 0 : *std::max_element(work.begin(), work.end()); }
  /// Slowest rank's work over the mean (1 = perfect; 1 when there is no work).
  double balance() const {
    const double total = double(std::accumulate(work.begin(), work.end(), std::int64_t(0)));
    return total > 0 ? double(max_work()) * double(ranks) / total : 1.0;
  }
};

/// N rounded up to whole blocks, an even number per rank (the zigzag and
/// head-tail pairings need pairs): a multiple of 2 P block_tokens. The tokens past
/// N are padding, after the last document as SequencePadding puts them.
inline std::int64_t balance_padded_length(std::int64_t tokens, int ranks, std::int64_t block_tokens) {
  DISTATTN_REQUIRE(tokens >= 1 && ranks >= 1 && block_tokens >= 1, "DistAttn::balance_padded_length",
                   "tokens (" << tokens << "), ranks (" << ranks << ") and block_tokens (" << block_tokens
                              << ") must be >= 1");
  const std::int64_t unit = 2 * std::int64_t(ranks) * block_tokens;
  return (tokens + unit - 1) / unit * unit;
}

/// Allowed pairs of each block's rows against all `tokens` keys under `rule`
/// (global positions). O(blocks + documents) closed-form counts.
inline std::vector<std::int64_t> block_work(const Mask& rule, std::int64_t tokens, std::int64_t block_tokens) {
  DISTATTN_REQUIRE(block_tokens >= 1 && tokens >= block_tokens && tokens % block_tokens == 0, "DistAttn::block_work",
                   "tokens (" << tokens << ") must be a positive multiple of block_tokens (" << block_tokens << ")");
  std::vector<std::int64_t> w(std::size_t(tokens / block_tokens));
  for (std::size_t b = 0; b < w.size(); ++b)
    w[b] = rule.at(PositionMap{std::int64_t(b) * block_tokens, 1}, PositionMap{0, 1}).allowed_pairs(block_tokens, tokens);
  return w;
}

namespace Impl {
/// Index i of a sequence dealt back and forth over P slots: 0..P-1, then P-1..0, ...
inline int back_and_forth(std::int64_t i, int P) {
  const int slot = int(i % P);
  return (i / P) % 2 == 0 ? slot : P - 1 - slot;
}

/// Per-document head-tail order of the blocks: each run of blocks starting in one
/// document as first, last, second, second to last, ...
inline std::vector<std::int64_t> head_tail_order(const Mask& rule, std::int64_t B, std::int64_t block_tokens) {
  std::vector<std::int64_t> order;
  order.reserve(std::size_t(B));
  std::int64_t first = 0;
  const auto doc = [&](std::int64_t b) { return rule.docs.any() ? rule.docs.of(b * block_tokens) : 0; };
  while (first < B) {
    std::int64_t last = first + 1;
    const int d       = doc(first);
    while (last < B && doc(last) == d) ++last;
    for (std::int64_t lo = first, hi = last - 1; lo <= hi; ++lo, --hi) {
      order.push_back(lo);
      if (hi != lo) order.push_back(hi);
    }
    first = last;
  }
  return order;
}

/// Moves blocks between the slowest rank and the others: one swap at a time, the
/// one that brings the pair of ranks nearest an even split, while the slowest rank's
/// work drops. Each rank's blocks are kept sorted by (work, index) so the partner
/// for a block is a binary search.
inline void refine_by_swaps(const std::vector<std::int64_t>& w, std::vector<std::vector<std::int64_t>>& blocks,
                            std::vector<std::int64_t>& load) {
  const int P       = int(blocks.size());
  const auto by_work = [&](std::int64_t a, std::int64_t b) { return w[std::size_t(a)] != w[std::size_t(b)] ? w[std::size_t(a)] < w[std::size_t(b)] : a < b; };
  for (auto& bl : blocks) std::sort(bl.begin(), bl.end(), by_work);
  for (int iter = 0; iter < 64 * P; ++iter) {
    const int M = int(std::max_element(load.begin(), load.end()) - load.begin());
    // Best swap: block a of M against block b of r with 0 < w[a] - w[b] < gap, the
    // new larger load max(load[M] - d, load[r] + d) as small as possible.
    std::int64_t best_max = load[std::size_t(M)];
    int best_r = -1;
    std::size_t best_a = 0, best_b = 0;
    for (int r = 0; r < P; ++r) {
      const std::int64_t gap = load[std::size_t(M)] - load[std::size_t(r)];
      if (r == M || gap <= 1) continue;
      const auto& mine = blocks[std::size_t(M)];
      const auto& theirs = blocks[std::size_t(r)];
      for (std::size_t ia = 0; ia < mine.size(); ++ia) {
        const std::int64_t wa = w[std::size_t(mine[ia])], ideal = wa - gap / 2;
        // The first of r's blocks with work >= ideal, and the one before it.
        const auto it = std::lower_bound(theirs.begin(), theirs.end(), ideal,
                                         [&](std::int64_t b, std::int64_t v) { return w[std::size_t(b)] < v; });
        for (auto jt : {it, it == theirs.begin() ? theirs.end() : std::prev(it)}) {
          if (jt == theirs.end()) continue;
          const std::int64_t d = wa - w[std::size_t(*jt)];
          if (d <= 0 || d >= gap) continue;
          const std::int64_t m = std::max(load[std::size_t(M)] - d, load[std::size_t(r)] + d);
          if (m < best_max) best_max = m, best_r = r, best_a = ia, best_b = std::size_t(jt - theirs.begin());
        }
      }
    }
    if (best_r < 0) return;
    auto& mine = blocks[std::size_t(M)];
    auto& theirs = blocks[std::size_t(best_r)];
    const std::int64_t a = mine[best_a], b = theirs[best_b], d = w[std::size_t(a)] - w[std::size_t(b)];
    mine.erase(mine.begin() + std::ptrdiff_t(best_a));
    theirs.erase(theirs.begin() + std::ptrdiff_t(best_b));
    mine.insert(std::lower_bound(mine.begin(), mine.end(), b, by_work), b);
    theirs.insert(std::lower_bound(theirs.begin(), theirs.end(), a, by_work), a);
    load[std::size_t(M)] -= d;
    load[std::size_t(best_r)] += d;
  }
}

/// Longest processing time first, at most k blocks per rank.
inline std::vector<std::vector<std::int64_t>> greedy_blocks(const std::vector<std::int64_t>& w, int P, std::int64_t k) {
  std::vector<std::int64_t> order(w.size());
  std::iota(order.begin(), order.end(), std::int64_t(0));
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return w[std::size_t(a)] != w[std::size_t(b)] ? w[std::size_t(a)] > w[std::size_t(b)] : a < b;
  });
  // Ranks with room, least loaded (then lowest index) on top.
  using Entry = std::pair<std::int64_t, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> room;
  for (int r = 0; r < P; ++r) room.push({0, r});
  std::vector<std::vector<std::int64_t>> blocks(static_cast<std::size_t>(P));
  std::vector<std::int64_t> load(std::size_t(P), 0);
  for (const std::int64_t b : order) {
    const int r = room.top().second;
    room.pop();
    blocks[std::size_t(r)].push_back(b);
    load[std::size_t(r)] += w[std::size_t(b)];
    if (std::int64_t(blocks[std::size_t(r)].size()) < k) room.push({load[std::size_t(r)], r});
  }
  refine_by_swaps(w, blocks, load);
  return blocks;
}
}  // namespace Impl

/// Blocks of `block_tokens` of a sequence of `tokens` (a multiple of ranks *
/// block_tokens; 2 ranks * block_tokens for Zigzag and HeadTail:
/// balance_padded_length) to `ranks` ranks, k = tokens / (ranks * block_tokens)
/// each, by `strategy`, priced under `rule` on global positions
/// (ExecutorOptions::mask_rule()).
inline BlockAssignment assign_blocks(const Mask& rule, std::int64_t tokens, int ranks, std::int64_t block_tokens,
                                     BlockStrategy strategy) {
  constexpr const char* where = "DistAttn::assign_blocks";
  DISTATTN_REQUIRE(ranks >= 1, where, "ranks must be >= 1, got " << ranks);
  DISTATTN_REQUIRE(block_tokens >= 1, where, "block_tokens must be >= 1, got " << block_tokens);
  DISTATTN_REQUIRE(rule.q.offset == 0 && rule.q.stride == 1 && rule.k.offset == 0 && rule.k.stride == 1, where,
                   "rule must be on global positions (identity position maps)");
  const bool pairs = strategy == BlockStrategy::Zigzag || strategy == BlockStrategy::HeadTail;
  const std::int64_t unit = (pairs ? 2 : 1) * std::int64_t(ranks) * block_tokens;
  DISTATTN_REQUIRE(tokens >= unit && tokens % unit == 0, where,
                   "tokens (" << tokens << ") must be a positive multiple of " << (pairs ? "2 * " : "")
                              << "ranks * block_tokens = " << unit << " for the " << to_string(strategy)
                              << " strategy (balance_padded_length rounds up)");
  BlockAssignment a;
  a.ranks = ranks, a.block_tokens = block_tokens;
  const std::int64_t B = tokens / block_tokens, k = B / ranks;
  const std::vector<std::int64_t> w = block_work(rule, tokens, block_tokens);
  a.blocks.assign(std::size_t(ranks), {});
  switch (strategy) {
    case BlockStrategy::Contiguous:
      for (std::int64_t b = 0; b < B; ++b) a.blocks[std::size_t(b / k)].push_back(b);
      break;
    case BlockStrategy::Zigzag:
      for (std::int64_t b = 0; b < B; ++b) a.blocks[std::size_t(Impl::back_and_forth(b / (k / 2), ranks))].push_back(b);
      break;
    case BlockStrategy::HeadTail: {
      const std::vector<std::int64_t> order = Impl::head_tail_order(rule, B, block_tokens);
      for (std::int64_t i = 0; i < B; ++i)
        a.blocks[std::size_t(Impl::back_and_forth(i / 2, ranks))].push_back(order[std::size_t(i)]);
      break;
    }
    case BlockStrategy::Greedy: a.blocks = Impl::greedy_blocks(w, ranks, k); break;
  }
  a.work.assign(std::size_t(ranks), 0);
  for (int r = 0; r < ranks; ++r) {
    auto& bl = a.blocks[std::size_t(r)];
    std::sort(bl.begin(), bl.end());
    for (const std::int64_t b : bl) a.work[std::size_t(r)] += w[std::size_t(b)];
  }
  return a;
}

}  // namespace DistAttn
