// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A call's arithmetic time per head at fewer heads than the table was measured at
// (TileThroughput::head_factor): the interpolation, the table's `heads` lines, and
// that the executors' models charge each call at its own head count.
#include <DistAttn/core/error.hpp>
#include <DistAttn/cost/cost_model.hpp>

#include <gtest/gtest.h>

#include <limits>
#include <string>

using namespace DistAttn;

namespace {

TileThroughput plain_tiles() {
  TileThroughput t;
  for (auto dir : {TileDirection::Forward, TileDirection::Backward})
    for (auto kind : {BlockKind::Full, BlockKind::Causal}) t.set({dir, kind, "float", 64}, TileRate{5e10, 1e-6, 64, true});
  return t;
}

const ShapeClass fwd_causal{TileDirection::Forward, BlockKind::Causal, "float", 64};

}  // namespace

TEST(HeadFactor, InterpolatesInLogHeadsAndClampsOutside) {
  TileThroughput t = plain_tiles();
  EXPECT_DOUBLE_EQ(t.head_factor(9), 1.0);  // no heads lines: every count as measured
  t.set_head_factors({{2, 0.8}, {8, 0.9}, {72, 1.0}});
  EXPECT_DOUBLE_EQ(t.head_factor(1), 0.8);
  EXPECT_DOUBLE_EQ(t.head_factor(2), 0.8);
  EXPECT_NEAR(t.head_factor(4), 0.85, 1e-12);  // halfway in log(heads)
  EXPECT_DOUBLE_EQ(t.head_factor(8), 0.9);
  EXPECT_NEAR(t.head_factor(24), 0.95, 1e-12);
  EXPECT_DOUBLE_EQ(t.head_factor(144), 1.0);
}

TEST(HeadFactor, ScalesTheArithmeticNotTheFixedCost) {
  const TileThroughput plain = plain_tiles();
  TileThroughput t = plain_tiles();
  t.set_head_factors({{2, 0.5}, {72, 1.0}});
  const double pairs = 1e6, fixed = 2 * 1e-6;
  EXPECT_NEAR(t.call_seconds(fwd_causal, 2, pairs) - fixed, 0.5 * (plain.call_seconds(fwd_causal, 2, pairs) - fixed),
              1e-15);
  EXPECT_DOUBLE_EQ(t.call_seconds(fwd_causal, 72, pairs), plain.call_seconds(fwd_causal, 72, pairs));
  // A slower device keeps the factors.
  EXPECT_NEAR(t.slowed_down(4).call_seconds(fwd_causal, 2, pairs), 4 * t.call_seconds(fwd_causal, 2, pairs), 1e-15);
}

// Ulysses calls H/(P G) heads, the ring all H: with factors below 1 at few heads
// only Ulysses' prediction drops, by the factor at its heads per call.
TEST(HeadFactor, UlyssesCallsAtItsHeadsPerGroupTheRingAtAll) {
  AttnProblem pr;
  pr.seq_len = 2304, pr.heads = 72, pr.kv_heads = 72, pr.head_dim = 64, pr.dtype = "float";
  MachineModel plain = nvlink_ib_node_defaults(plain_tiles());
  plain.intra = plain.inter = Link{std::numeric_limits<double>::infinity(), 0.0};
  MachineModel fewer = plain;
  fewer.tiles.set_head_factors({{9, 0.9}, {72, 1.0}});
  for (auto kind : {ExecutorKind::RingZigzag, ExecutorKind::RingVanilla}) {
    ExecutorChoice c;
    c.kind = kind;
    EXPECT_DOUBLE_EQ(predict(c, pr, 2, fewer).forward.seconds, predict(c, pr, 2, plain).forward.seconds);
  }
  ExecutorChoice u;
  u.kind = ExecutorKind::Ulysses;
  u.head_groups = 4;  // 36 heads per rank, 9 per call
  const double f = predict(u, pr, 2, fewer).forward.seconds, p = predict(u, pr, 2, plain).forward.seconds;
  EXPECT_LT(f, 0.91 * p);
  EXPECT_GT(f, 0.89 * p);
}

TEST(HeadFactor, RoundTripsThroughTheTableAndRejectsBadLines) {
  TileThroughput t = plain_tiles();
  t.set_head_factors({{2, 0.88}, {72, 1.0}});
  EXPECT_EQ(TileThroughput::from_text(t.to_text()).head_factors(), t.head_factors());
  // Lines in any order are sorted by head count.
  EXPECT_EQ(TileThroughput::from_text("heads 72 1\nheads 9 0.95\n").head_factors(),
            (std::vector<std::pair<int, double>>{{9, 0.95}, {72, 1.0}}));
  for (const char* bad : {"heads 9\n", "heads 0 1\n", "heads 9 -1\n", "heads 9 1\nheads 9 0.9\n", "heads x 1\n"})
    EXPECT_THROW(TileThroughput::from_text(bad), InvalidArgument) << bad;
}

// Ranks taking turns on a core: each set of counts is measured at some ranks per
// core, and the table answers at its core_share, linear in between, the nearest
// set outside them.
TEST(HeadFactor, AnswersAtTheRunsRanksPerCore) {
  TileThroughput t = plain_tiles();
  t.set_head_factors({{2, 0.9}, {72, 1.0}});
  t.set_head_factors({{2, 0.7}, {72, 1.0}}, 4.5);
  EXPECT_EQ(t.head_factor_shares(), (std::vector<double>{1.0, 4.5}));
  EXPECT_DOUBLE_EQ(t.head_factor(2), 0.9);  // a core each until told otherwise
  t.set_core_share(4.5);
  EXPECT_DOUBLE_EQ(t.head_factor(2), 0.7);
  t.set_core_share(2.75);
  EXPECT_NEAR(t.head_factor(2), 0.8, 1e-12);
  EXPECT_NEAR(t.head_factor(12), 0.9, 1e-12);  // both sets halfway in log(heads)
  t.set_core_share(9);
  EXPECT_DOUBLE_EQ(t.head_factor(2), 0.7);
  // A table with a shared set only answers with it at every share.
  TileThroughput shared_only = plain_tiles();
  shared_only.set_head_factors({{2, 0.7}, {72, 1.0}}, 4.5);
  EXPECT_DOUBLE_EQ(shared_only.head_factor(2), 0.7);
  // Removing a set.
  t.set_head_factors({}, 4.5);
  EXPECT_DOUBLE_EQ(t.head_factor(2), 0.9);
  EXPECT_THROW(t.set_core_share(0.5), InvalidArgument);
  EXPECT_THROW(t.set_head_factors({{2, 0.7}}, 0.5), InvalidArgument);
}

// with_shared_cores sets the share: 9 ranks on 2 cores read the 4.5 set, and
// Ulysses' prediction there follows it while the ring's (all 72 heads) does not.
TEST(HeadFactor, SharedCoresReadTheSetMeasuredAtTheirShare) {
  AttnProblem pr;
  pr.seq_len = 2304, pr.heads = 72, pr.kv_heads = 72, pr.head_dim = 64, pr.dtype = "float";
  MachineModel base = nvlink_ib_node_defaults(plain_tiles());
  base.intra = base.inter = Link{std::numeric_limits<double>::infinity(), 0.0};
  base.tiles.set_head_factors({{1, 1.0}, {72, 1.0}});
  MachineModel shared = base;
  shared.tiles.set_head_factors({{1, 0.8}, {72, 1.0}}, 4.5);
  EXPECT_DOUBLE_EQ(with_shared_cores(shared, 9, 2).tiles.core_share(), 4.5);
  EXPECT_DOUBLE_EQ(with_shared_cores(shared, 2, 2).tiles.core_share(), 1.0);
  EXPECT_DOUBLE_EQ(with_shared_cores(shared, 2, 2).tiles.head_factor(1), 1.0);
  ExecutorChoice u;
  u.kind = ExecutorKind::Ulysses;
  u.head_groups = 8;  // 8 heads per rank, 1 per call
  const double with = predict(u, pr, 9, with_shared_cores(shared, 9, 2)).forward.seconds;
  const double without = predict(u, pr, 9, with_shared_cores(base, 9, 2)).forward.seconds;
  EXPECT_LT(with, 0.85 * without);
  EXPECT_GT(with, 0.75 * without);
  ExecutorChoice r;
  r.kind = ExecutorKind::RingVanilla;
  EXPECT_DOUBLE_EQ(predict(r, pr, 9, with_shared_cores(shared, 9, 2)).forward.seconds,
                   predict(r, pr, 9, with_shared_cores(base, 9, 2)).forward.seconds);
}

TEST(HeadFactor, SetsRoundTripThroughTheTableWithTheirShare) {
  TileThroughput t = plain_tiles();
  t.set_head_factors({{2, 0.88}, {72, 1.0}});
  t.set_head_factors({{1, 0.8}, {8, 0.95}, {72, 1.0}}, 4.5);
  const TileThroughput back = TileThroughput::from_text(t.to_text());
  EXPECT_EQ(back.head_factor_shares(), t.head_factor_shares());
  EXPECT_EQ(back.head_factors(4.5), t.head_factors(4.5));
  EXPECT_EQ(back.head_factors(1), t.head_factors(1));
  EXPECT_EQ(TileThroughput::from_text("heads 2 0.9 4.5\nheads 72 1 4.5\nheads 72 1\n").head_factors(4.5),
            (std::vector<std::pair<int, double>>{{2, 0.9}, {72, 1.0}}));
  for (const char* bad : {"heads 2 0.9 0.5\n", "heads 2 0.9 4.5\nheads 2 0.8 4.5\n"})
    EXPECT_THROW(TileThroughput::from_text(bad), InvalidArgument) << bad;
}
