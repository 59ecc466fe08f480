// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The cost model under windows and documents (AttnProblem::window, ::documents;
// TileThroughput::masked_block_seconds): blocks priced by their allowed pairs
// against brute force, skipped blocks free, the ring's compute against a
// brute-force count of every rank's allowed pairs, masks that allow what dense
// allows priced as dense, the ranking following the mask, and bad masks refused.
#include <DistAttn/core/error.hpp>
#include <DistAttn/cost/cost_model.hpp>

#include "mask_test_helpers.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace DistAttn;

namespace {

constexpr int kDim = 64;

/// One rate per class, no overhead, optionally whole tiles: seconds are pairs
/// times a known factor.
TileThroughput rate_tiles(double full_rate, double causal_rate, std::int64_t tile_rows = 0) {
  TileThroughput t;
  for (TileDirection dir : {TileDirection::Forward, TileDirection::Backward}) {
    t.set({dir, BlockKind::Full, "bf16", kDim}, {full_rate, 0.0, tile_rows});
    t.set({dir, BlockKind::Causal, "bf16", kDim}, {causal_rate, 0.0, tile_rows});
  }
  return t;
}

AttnProblem problem(std::int64_t N, bool causal = true) {
  AttnProblem p;
  p.seq_len = N, p.heads = 8, p.kv_heads = 2, p.head_dim = kDim, p.causal = causal;
  return p;
}

using Testing::brute_pairs;

std::vector<std::int64_t> random_docs(std::mt19937& rng, std::int64_t N) {
  return Testing::random_documents(rng, N, 9);
}

TEST(CostMasks, BlocksArePricedByTheirAllowedPairs) {
  const TileThroughput t = rate_tiles(1.0, 1.0);
  const ShapeClass cls{TileDirection::Forward, BlockKind::Causal, "bf16", kDim};
  const double per_pair = block_flops(TileDirection::Forward, 1.0, kDim, 1.0);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> off(0, 80), stride(1, 4), len(1, 24), span(0, 30), pick(0, 2);
  for (int it = 0; it < 3000; ++it) {
    AttnProblem pr = problem(200, it % 2 == 0);
    const int what = pick(rng);
    if (what != 1) pr.window = Window{span(rng), span(rng)};
    if (what != 0) pr.documents = random_docs(rng, 200);
    const Mask rule = pr.rule();
    const PositionMap q{off(rng), stride(rng)}, k{off(rng), stride(rng)};
    const std::int64_t nq = len(rng), nk = len(rng);
    const double seconds = t.masked_block_seconds(cls, 1.0, rule, q, nq, k, nk);
    ASSERT_EQ(seconds, double(brute_pairs(rule.at(q, k), nq, nk)) * per_pair) << "case " << it;
  }
}

TEST(CostMasks, SkippedBlocksAreFreeAndWholeBlocksUnmasked) {
  const TileThroughput t = rate_tiles(2.0, 1.0);  // a full call runs at twice the masked rate
  const ShapeClass cls{TileDirection::Forward, BlockKind::Causal, "bf16", kDim};
  const double per_pair = block_flops(TileDirection::Forward, 1.0, kDim, 1.0);
  AttnProblem pr = problem(64);
  pr.documents = {0, 32, 64};
  const Mask rule = pr.rule();
  // Queries of the second document against keys of the first: nothing allowed.
  EXPECT_EQ(t.masked_block_seconds(cls, 1.0, rule, {32, 1}, 16, {0, 1}, 16), 0.0);
  // Later queries of the first document against its earlier keys: every pair, at the full rate.
  EXPECT_EQ(t.masked_block_seconds(cls, 1.0, rule, {16, 1}, 16, {0, 1}, 16), 16 * 16 * per_pair / 2.0);
  // The diagonal block: its staircase, at the masked rate.
  EXPECT_EQ(t.masked_block_seconds(cls, 1.0, rule, {0, 1}, 16, {0, 1}, 16), 16 * 17 / 2 * per_pair);
}

/// Forward compute of the ring kind on P ranks under pr's mask, from the schedule
/// and a brute-force count of each rank's allowed pairs: per step the slowest rank.
double brute_ring_compute(RingKind kind, const AttnProblem& pr, int P, double per_pair) {
  const RingSchedule s(P, kind);
  const std::int64_t N = ring_padded_len(pr, P, kind), c = N / P;
  const RingLayout lay(P, c, kind);
  const Mask rule = pr.rule();
  double total = 0;
  for (int t = 0; t < s.num_steps(); ++t) {
    std::int64_t slowest = 0;
    for (int x = 0; x < P; ++x) {
      const auto task = s.task(x, t);
      if (!task) continue;
      std::int64_t pairs = 0;
      for (std::int64_t i = 0; i < c; ++i)
        for (std::int64_t j = 0; j < c; ++j)
          pairs += rule.allowed(lay.position(task->q_chunk, i), lay.position(task->k_chunk, j)) ? 1 : 0;
      slowest = std::max(slowest, pairs);
    }
    total += double(slowest) * per_pair;
  }
  return total;
}

TEST(CostMasks, RingComputeIsTheSlowestRanksAllowedPairs) {
  MachineModel m = nvlink_ib_node_defaults(rate_tiles(1e12, 1e12));
  const double per_pair = block_flops(TileDirection::Forward, 8.0, kDim, 1.0) / 1e12;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> span(0, 90);
  for (int it = 0; it < 60; ++it) {
    const int P = 1 + it % 5;
    AttnProblem pr = problem(4 * P * (3 + it % 4));
    if (it % 3 != 1) pr.documents = random_docs(rng, pr.seq_len);
    if (it % 3 != 0) pr.window = Window{span(rng), 0};
    for (ExecutorKind k : {ExecutorKind::RingVanilla, ExecutorKind::RingBalanced, ExecutorKind::RingZigzag}) {
      ExecutorChoice ch;
      ch.kind = k;
      const Prediction p = predict(ch, pr, P, m);
      const double expect = brute_ring_compute(ring_kind_of(k), pr, P, per_pair);
      EXPECT_NEAR(p.forward.compute_only_seconds, expect, 1e-12 * expect) << to_string(k) << " P=" << P << " case " << it;
    }
  }
}

// Communication follows the mask: with a causal window W narrower than a chunk the
// ring prices the K/V of W tokens per rank (zigzag: of W before each half), where
// the dense vanilla ring's last rank receives P - 1 chunks; the bytes are those
// of the executor's masked schedule (ring_volume over ring_schedule_of).
TEST(CostMasks, RingBytesFollowTheMask) {
  const MachineModel m = nvlink_ib_node_defaults(rate_tiles(1e12, 1e12));
  for (int P : {2, 3, 4, 6}) {
    AttnProblem pr = problem(256 * P);
    const std::int64_t c = 256;
    const double kv = double(pr.batch) * double(payload_bytes(PayloadKind::KV, ring_sizes(pr, c)));
    ExecutorChoice ch;
    ch.kind = ExecutorKind::RingVanilla;
    EXPECT_EQ(double(predict(ch, pr, P, m).forward.max_bytes_received), (P - 1) * kv) << "dense P=" << P;
    pr.window = Window{100, 0};
    for (ExecutorKind k : {ExecutorKind::RingVanilla, ExecutorKind::RingBalanced, ExecutorKind::RingZigzag}) {
      ch.kind = k;
      const Prediction p = predict(ch, pr, P, m);
      const int pieces = k == ExecutorKind::RingZigzag ? std::min(2, P - 1) : 1;
      EXPECT_EQ(double(p.forward.max_bytes_received), pieces * kv * 100 / 256) << to_string(k) << " P=" << P;
      const RingSchedule s = ring_schedule_of(pr, P, ring_kind_of(k), c);
      std::int64_t most = 0;
      for (int x = 0; x < P; ++x)
        most = std::max(most, ring_volume(s, x, Pass::Backward, ring_sizes(pr, c)).total_bytes_received());
      EXPECT_EQ(double(p.backward.max_bytes_received), double(pr.batch) * double(most)) << to_string(k) << " P=" << P;
    }
  }
}

/// Every prediction of `a` and `b` (same choices) agrees to rounding.
void expect_same_prices(const AttnProblem& a, const AttnProblem& b, int P, const MachineModel& m, const char* what) {
  for (const Prediction& p : rank_choices(a, P, m)) {
    const Prediction q = predict(p.choice, b, P, m);
    SCOPED_TRACE(std::string(what) + " " + p.choice.name() + " P=" + std::to_string(P) + " N=" +
                 std::to_string(a.seq_len));
    for (auto [x, y] : {std::pair{p.forward.seconds, q.forward.seconds}, {p.backward.seconds, q.backward.seconds},
                        {p.forward.compute_only_seconds, q.forward.compute_only_seconds},
                        {p.backward.compute_only_seconds, q.backward.compute_only_seconds}})
      EXPECT_NEAR(x, y, 1e-12 * x);
    EXPECT_EQ(p.forward.max_bytes_sent, q.forward.max_bytes_sent);
    EXPECT_EQ(p.workspace_bytes, q.workspace_bytes);
  }
}

TEST(CostMasks, MasksThatAllowEverythingDenseAllowsPriceAsDense) {
  // A window as long as the sequence and one document are no restriction: the
  // masked pricing must then give the dense numbers, whole-tile tables included.
  TileThroughput tiles = rate_tiles(4e11, 3e11);
  for (std::int64_t rows : {std::int64_t(0), std::int64_t(64)}) {
    TileThroughput t = rows ? rate_tiles(4e11, 3e11, rows) : tiles;
    t.set_elementwise_bytes_per_s(2e12);
    t.set_copy_bytes_per_s(3e12);
    const MachineModel m = nvlink_ib_node_defaults(t);
    for (bool causal : {true, false})
      for (int P : {1, 2, 3, 4, 6})
        for (std::int64_t N : {std::int64_t(12 * 64), std::int64_t(12 * 256)}) {
          const AttnProblem dense = problem(N, causal);
          AttnProblem window = dense, docs = dense;
          window.window = Window{N, N};
          docs.documents = {0, N};
          expect_same_prices(dense, window, P, m, "window");
          expect_same_prices(dense, docs, P, m, "one document");
        }
  }
}

TEST(CostMasks, RankingFollowsTheMask) {
  const MachineModel m = nvlink_ib_node_defaults(rate_tiles(4e11, 3e11));
  AttnProblem dense = problem(8 * 512), docs = dense;
  for (std::int64_t d = 0; d <= 8 * 512; d += 256) docs.documents.push_back(d);  // 16 documents
  for (int P : {2, 4, 8}) {
    const auto ranked = rank_choices(docs, P, m);
    for (const Prediction& p : ranked) {
      EXPECT_EQ(p.total_seconds(), predict(p.choice, docs, P, m).total_seconds()) << p.choice.name();
      // Sixteen documents keep an eighth of the causal work or less.
      EXPECT_LT(p.forward.compute_only_seconds, predict(p.choice, dense, P, m).forward.compute_only_seconds)
          << p.choice.name() << " P=" << P;
    }
  }
}

TEST(CostMasks, BadMasksNameTheArgument) {
  const MachineModel m = nvlink_ib_node_defaults(rate_tiles(4e11, 3e11));
  ExecutorChoice ch;
  ch.kind = ExecutorKind::RingZigzag;
  const auto message = [&](const AttnProblem& pr) {
    try {
      predict(ch, pr, 2, m);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  AttnProblem pr = problem(64);
  pr.window = Window{-1, 0};
  EXPECT_NE(message(pr).find("window"), std::string::npos) << message(pr);
  pr = problem(64);
  pr.documents = {0, 40, 30, 64};
  EXPECT_NE(message(pr).find("documents"), std::string::npos) << message(pr);
  pr.documents = {4, 64};
  EXPECT_NE(message(pr).find("documents"), std::string::npos) << message(pr);
  pr.documents = {0, 65};
  EXPECT_NE(message(pr).find("documents"), std::string::npos) << message(pr);
  ExecutorOptions o;
  o.window = Window{16, 0};
  o.documents = {0, 32, 64};
  const AttnProblem from = AttnProblem(problem(64)).with_mask_of(o);
  EXPECT_EQ(from.window.left, 16);
  EXPECT_EQ(from.documents, o.documents);
}

}  // namespace
