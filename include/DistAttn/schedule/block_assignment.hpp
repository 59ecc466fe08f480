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
    check_rank(r, "DistAttn::BlockAssignment::position");
    DISTATTN_REQUIRE(i >= 0 && i < blocks_per_rank() * block_tokens, "DistAttn::BlockAssignment::position",
                     "row i=" << i << " is not in [0, " << blocks_per_rank() * block_tokens << ")");
    return blocks[std::size_t(r)][std::size_t(i / block_tokens)] * block_tokens + i % block_tokens;
  }
  /// Rank r's rows as global token ranges, adjacent blocks merged.
  std::vector<TokenRange> ranges(int r) const {
    check_rank(r, "DistAttn::BlockAssignment::ranges");
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

 private:
  void check_rank(int r, const char* where) const {
    DISTATTN_REQUIRE(r >= 0 && std::size_t(r) < blocks.size(), where,
                     "rank r=" << r << " is not in [0, " << blocks.size() << ")");
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

namespace Impl {
/// Allowed pairs of the query rows at positions [a, c) against the keys at
/// [0, n) under `rule` on global positions: within one document [b, e) a row p
/// sees keys [max(p - L, b, 0), min(p + R + 1, e, n)), each end linear in p up to
/// one break, so each piece of the rows in one document is two arithmetic sums.
/// Mask::allowed_pairs counts any strided block; this is its contiguous case in
/// O(1) per document, which the balancer needs for 10k documents in microseconds.
/// `d` is the document of position a on entry and of position c - 1 on return, so a
/// walk over consecutive blocks never searches.
inline std::int64_t contiguous_pairs(const Mask& rule, std::int64_t a, std::int64_t c, std::int64_t n, int& d) {
  const std::int64_t s = rule.right_span() + 1, L = rule.window.left;
  std::int64_t total = 0;
  const Documents& docs = rule.docs;
  for (std::int64_t pa = a;; ++d) {
    // Document d's ends, open on the outer sides of the first and the last.
    const std::int64_t b = d == 0 ? 0 : docs.offsets[d], e = d >= docs.count - 1 ? n : std::min(docs.offsets[d + 1], n);
    const std::int64_t pc = std::min(c, e);
    const auto clamp = [&](std::int64_t x) { return std::min(pc, std::max(pa, x)); };
    const std::int64_t t = clamp(e - s), u = clamp(b + L);  // rows from t see up to e; from u start past b
    total += (t - pa) * (pa + t - 1) / 2 + (t - pa) * s + e * (pc - t);  // sum of the ends
    total -= b * (u - pa) + (pc - u) * (u + pc - 1) / 2 - (pc - u) * L;  // minus the starts
    if (pc >= c) return total;
    pa = pc;
  }
}

/// A rule on global positions whose documents (if any) are sorted offsets from 0 to at most `tokens`.
inline void check_rule(const Mask& rule, std::int64_t tokens, const char* where) {
  DISTATTN_REQUIRE(rule.q.offset == 0 && rule.q.stride == 1 && rule.k.offset == 0 && rule.k.stride == 1, where,
                   "rule must be on global positions (identity position maps)");
  if (const Documents& d = rule.docs; d.any()) {
    DISTATTN_REQUIRE(d.offsets[0] == 0 && d.offsets[d.count] <= tokens, where,
                     "rule.docs: the offsets must start at 0 and end at most at tokens (" << tokens << "), got "
                                                                                           << d.offsets[0] << " and "
                                                                                           << d.offsets[d.count]);
    for (int i = 1; i <= d.count; ++i)
      DISTATTN_REQUIRE(d.offsets[i] >= d.offsets[i - 1], where,
                       "rule.docs: offsets must not decrease, got " << d.offsets[i - 1] << " then " << d.offsets[i]
                                                                    << " at " << i);
  }
}
}  // namespace Impl

/// Allowed pairs of each block's rows against all `tokens` keys under `rule`
/// (global positions), in O(blocks + documents).
inline std::vector<std::int64_t> block_work(const Mask& rule, std::int64_t tokens, std::int64_t block_tokens) {
  DISTATTN_REQUIRE(block_tokens >= 1 && tokens >= block_tokens && tokens % block_tokens == 0, "DistAttn::block_work",
                   "tokens (" << tokens << ") must be a positive multiple of block_tokens (" << block_tokens << ")");
  Impl::check_rule(rule, tokens, "DistAttn::block_work");
  std::vector<std::int64_t> w(std::size_t(tokens / block_tokens));
  int d = rule.docs.any() ? rule.docs.of(0) : 0;
  for (std::size_t b = 0; b < w.size(); ++b)
    w[b] = Impl::contiguous_pairs(rule, std::int64_t(b) * block_tokens, std::int64_t(b + 1) * block_tokens, tokens, d);
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

/// Swaps a block of the slowest rank with one of the least loaded while that lowers
/// the larger of the two: each time the swap that brings them nearest an even
/// split. Each rank's blocks are kept sorted by (work, index), so the partner of a
/// block is a binary search: O(k log k) a swap.
inline void refine_by_swaps(const std::vector<std::int64_t>& w, std::vector<std::vector<std::int64_t>>& blocks,
                            std::vector<std::int64_t>& load) {
  const auto work    = [&](std::int64_t b) { return w[std::size_t(b)]; };
  // The order greedy_blocks hands its blocks out in, reversed: work up, index down.
  const auto by_work = [&](std::int64_t a, std::int64_t b) { return work(a) != work(b) ? work(a) < work(b) : a > b; };
  for (auto& bl : blocks) std::reverse(bl.begin(), bl.end());
  // One swap per rank at most: LPT leaves the slowest rank within a block of the
  // mean, and further swaps gain less than 0.01 % on the benchmark documents.
  for (std::size_t iter = 0; iter < blocks.size(); ++iter) {
    const auto M = std::size_t(std::max_element(load.begin(), load.end()) - load.begin());
    const auto m = std::size_t(std::min_element(load.begin(), load.end()) - load.begin());
    const std::int64_t gap = load[M] - load[m];
    auto& mine = blocks[M];
    auto& theirs = blocks[m];
    // Swapping a for b moves d = w[a] - w[b] from M to m: better for 0 < d < gap, best at d = gap / 2.
    std::int64_t best = gap;  // |gap - 2 d| of the best swap so far
    std::size_t best_a = 0, best_b = 0;
    for (std::size_t ia = 0; ia < mine.size(); ++ia) {
      const auto it = std::lower_bound(theirs.begin(), theirs.end(), work(mine[ia]) - gap / 2,
                                       [&](std::int64_t b, std::int64_t v) { return work(b) < v; });
      for (auto jt : {it, it == theirs.begin() ? theirs.end() : std::prev(it)}) {
        if (jt == theirs.end()) continue;
        const std::int64_t d = work(mine[ia]) - work(*jt), miss = gap > 2 * d ? gap - 2 * d : 2 * d - gap;
        if (d > 0 && d < gap && miss < best) best = miss, best_a = ia, best_b = std::size_t(jt - theirs.begin());
      }
    }
    if (best == gap) return;
    const std::int64_t a = mine[best_a], b = theirs[best_b], d = work(a) - work(b);
    mine.erase(mine.begin() + std::ptrdiff_t(best_a));
    theirs.erase(theirs.begin() + std::ptrdiff_t(best_b));
    mine.insert(std::lower_bound(mine.begin(), mine.end(), b, by_work), b);
    theirs.insert(std::lower_bound(theirs.begin(), theirs.end(), a, by_work), a);
    load[M] -= d;
    load[m] += d;
  }
}

/// Longest processing time first, at most k blocks per rank.
inline std::vector<std::vector<std::int64_t>> greedy_blocks(const std::vector<std::int64_t>& w, int P, std::int64_t k) {
  // Work down, index up, as one integer (max - work) B + index where that fits
  // (N^2 < 2^62; the comparison is then a single one), else as pairs.
  const std::int64_t B = std::int64_t(w.size()), top = *std::max_element(w.begin(), w.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> order(w.size());
  if (top < (std::int64_t(1) << 62) / B) {
    std::vector<std::int64_t> keys(w.size());
    for (std::int64_t b = 0; b < B; ++b) keys[std::size_t(b)] = (top - w[std::size_t(b)]) * B + b;
    std::sort(keys.begin(), keys.end());
    for (std::size_t i = 0; i < keys.size(); ++i) order[i] = {keys[i] / B - top, keys[i] % B};
  } else {
    for (std::size_t b = 0; b < w.size(); ++b) order[b] = {-w[b], std::int64_t(b)};
    std::sort(order.begin(), order.end());
  }
  // Ranks with room, least loaded (then lowest index) on top.
  using Entry = std::pair<std::int64_t, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> room;
  for (int r = 0; r < P; ++r) room.push({0, r});
  std::vector<std::vector<std::int64_t>> blocks(static_cast<std::size_t>(P));
  for (auto& bl : blocks) bl.reserve(std::size_t(k));
  std::vector<std::int64_t> load(std::size_t(P), 0);
  for (const auto& [minus_work, b] : order) {
    const int r = room.top().second;
    room.pop();
    blocks[std::size_t(r)].push_back(b);
    load[std::size_t(r)] -= minus_work;
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
  Impl::check_rule(rule, tokens, where);
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
