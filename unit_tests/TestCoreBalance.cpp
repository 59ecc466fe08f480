// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// CPU ranks that do not divide over the shared cores (cost/core_balance.hpp):
// the blend between the fluid share and the fuller core, its fit from calibration
// points, the table's balance line, and where the executors' models apply it.
#include <DistAttn/core/error.hpp>
#include <DistAttn/cost/cost_model.hpp>

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

using namespace DistAttn;

namespace {

TileThroughput tiles_without_passes() {
  TileThroughput t;
  t.set({TileDirection::Forward, BlockKind::Full, "float", 64}, {5e10, 2e-6});
  t.set({TileDirection::Forward, BlockKind::Causal, "float", 64}, {4.5e10, 2e-6});
  t.set({TileDirection::Backward, BlockKind::Full, "float", 64}, {4.8e10, 6e-6});
  t.set({TileDirection::Backward, BlockKind::Causal, "float", 64}, {4.4e10, 6e-6});
  return t;  // no elementwise or copy rate: compute is the block calls alone
}

MachineModel free_links(TileThroughput t) {
  MachineModel m = nvlink_ib_node_defaults(std::move(t));
  m.intra = m.inter = Link{std::numeric_limits<double>::infinity(), 0.0};
  return m;
}

AttnProblem problem(std::int64_t N) {
  AttnProblem p;
  p.seq_len = N, p.heads = 6, p.kv_heads = 6, p.head_dim = 64, p.dtype = "float";
  return p;
}

ExecutorChoice choice(ExecutorKind k, int rows = 0, int cols = 0, int groups = 0) {
  ExecutorChoice c;
  c.kind = k, c.rows = rows, c.cols = cols, c.head_groups = groups;
  return c;
}

}  // namespace

// tau = 0 and whole ranks per core give the fluid share; a tau far above the call
// gives the fuller core's (3 ranks on 2 cores: 2 / 1.5); tau equal to the call
// gives half of the difference.
TEST(CoreBalance, BlendRunsFromFluidToWholeRanksPerCore) {
  const double t = 0.03;  // fluid seconds of 3 ranks on 2 cores: 0.02 alone
  EXPECT_DOUBLE_EQ(balanced_share_seconds(t, 3, 2, 0.0), t);
  EXPECT_DOUBLE_EQ(balanced_share_seconds(t, 4, 2, 0.05), t);
  EXPECT_DOUBLE_EQ(balanced_share_seconds(t, 2, 2, 0.05), t);
  EXPECT_NEAR(balanced_share_seconds(t, 3, 2, 1e12), t * 2 / 1.5, 1e-12);
  EXPECT_NEAR(balanced_share_seconds(t, 3, 2, 0.02), t * (1 + (2 / 1.5 - 1) * 0.5), 1e-15);
  // 9 on 2: 5 on the fuller core against 4.5.
  EXPECT_NEAR(balanced_share_seconds(0.045, 9, 2, 1e12), 0.05, 1e-12);
  // Fewer busy ranks than cores: each has a core.
  EXPECT_DOUBLE_EQ(balanced_share_seconds(0.01, 1.5, 2, 1e12), 0.01);
}

TEST(CoreBalance, FitRecoversTheBalanceTime) {
  for (int ranks : {3, 5, 9}) {
    SCOPED_TRACE(ranks);
    const double tau = 0.012, fluid = ranks / 2.0;
    std::vector<double> alone{0.001, 0.005, 0.02, 0.08}, shared;
    for (double a : alone) shared.push_back(balanced_share_seconds(a * fluid, ranks, 2, tau));
    EXPECT_NEAR(fit_balance_seconds(alone, shared, ranks, 2), tau, 0.01 * tau);  // the search's 1 % steps
  }
  // A scattered point moves the fit less than it would its own tau: 2x at the
  // shortest call (its own tau unbounded) leaves the fit within 2x of the rest's.
  {
    const double tau = 0.012;
    std::vector<double> alone{0.002, 0.005, 0.02, 0.08}, shared;
    for (double a : alone) shared.push_back(balanced_share_seconds(a * 1.5, 3, 2, tau));
    shared[0] = 2 * alone[0];
    const double fit = fit_balance_seconds(alone, shared, 3, 2);
    EXPECT_GT(fit, tau / 2);
    EXPECT_LT(fit, tau * 2);
  }
  // At the fluid ratio (or below it: noise) there is nothing to balance.
  EXPECT_DOUBLE_EQ(fit_balance_seconds({0.01, 0.02}, {0.015, 0.029}, 3, 2), 0.0);
  EXPECT_THROW(fit_balance_seconds({0.01}, {0.02}, 4, 2), InvalidArgument);
  EXPECT_THROW(fit_balance_seconds({0.01, 0.02}, {0.02}, 3, 2), InvalidArgument);
  EXPECT_THROW(fit_balance_seconds({0.01}, {0.0}, 3, 2), InvalidArgument);
}

TEST(CoreBalance, TableKeepsTheBalanceLine) {
  TileThroughput t = tiles_without_passes();
  t.set_balance_seconds(0.0125);
  const TileThroughput back = TileThroughput::from_text(t.to_text());
  EXPECT_DOUBLE_EQ(back.balance_seconds(), 0.0125);
  EXPECT_DOUBLE_EQ(back.slowed_down(3).balance_seconds(), 0.0125);  // a time of the host, not a rate
  EXPECT_EQ(tiles_without_passes().to_text().find("balance"), std::string::npos);
  EXPECT_THROW(TileThroughput::from_text("balance -1\n"), InvalidArgument);
  EXPECT_THROW(TileThroughput::from_text("balance\n"), InvalidArgument);
}

// The hybrid's head groups do not wait for each other, so on 9 ranks over 2 cores
// its inner steps run at the fuller core's pace (5 ranks, against the fluid 4.5)
// whatever the balance time; Ulysses' calls, which every rank waits for, blend.
TEST(CoreBalance, HybridHeadGroupsTakeTheWholeRankShare) {
  AttnProblem pr = problem(576);
  pr.heads = pr.kv_heads = 18;  // Ulysses on 9 ranks needs H % 9 == 0
  ExecutorChoice hybrid;
  hybrid.kind = ExecutorKind::Hybrid, hybrid.ulysses_degree = 3, hybrid.inner = ExecutorKind::RingZigzag;
  auto compute = [&](double tau, const ExecutorChoice& ch) {
    TileThroughput t = tiles_without_passes();
    if (tau > 0) t.set_balance_seconds(tau);
    return predict(ch, pr, 9, with_shared_cores(free_links(t), 9, 2)).backward.compute_only_seconds;
  };
  const double fluid = compute(0, hybrid);
  EXPECT_NEAR(compute(0.01, hybrid), fluid * 5 / 4.5, 1e-9 * fluid);
  EXPECT_NEAR(compute(10, hybrid), fluid * 5 / 4.5, 1e-9 * fluid);
  const ExecutorChoice ulysses = choice(ExecutorKind::Ulysses, 0, 0, 1);
  EXPECT_LT(compute(0.01, ulysses), compute(10, ulysses) * (1 - 1e-6));
  // 6 ranks on 2 cores divide evenly: nothing to pace.
  TileThroughput t = tiles_without_passes();
  t.set_balance_seconds(0.01);
  hybrid.ulysses_degree = 2;
  EXPECT_DOUBLE_EQ(predict(hybrid, pr, 6, with_shared_cores(free_links(t), 6, 2)).backward.compute_only_seconds,
                   predict(hybrid, pr, 6, with_shared_cores(free_links(tiles_without_passes()), 6, 2))
                       .backward.compute_only_seconds);
}

// 3 ranks on 2 cores: every call of a one-call pass (Attention2D-NO, Ulysses with one
// head group) is the blend of its fluid time; with 6 ranks only the steps in which
// an odd number of them compute change.
TEST(CoreBalance, ExecutorsModelsApplyItToEachStep) {
  const double tau = 0.01;
  TileThroughput with = tiles_without_passes();
  with.set_balance_seconds(tau);
  const AttnProblem pr = problem(384);
  const MachineModel plain = free_links(tiles_without_passes()), balanced = free_links(with);
  for (const ExecutorChoice& ch : {choice(ExecutorKind::Grid2DNO, 3, 1), choice(ExecutorKind::Ulysses, 0, 0, 1)}) {
    SCOPED_TRACE(ch.name());
    const double fluid = predict(ch, pr, 3, with_shared_cores(plain, 3, 2)).forward.compute_only_seconds;
    const double got = predict(ch, pr, 3, with_shared_cores(balanced, 3, 2)).forward.compute_only_seconds;
    EXPECT_NEAR(got, fluid * (1 + (2 / 1.5 - 1) * tau / (tau + fluid / 1.5)), 1e-9 * got);
  }
  // 6 ranks on 2 cores: unchanged where every rank computes at every step; the
  // vanilla and balanced rings' steps with 5 or 3 busy ranks are slowed.
  auto idle_steps = [](ExecutorKind k) { return k == ExecutorKind::RingVanilla || k == ExecutorKind::RingBalanced; };
  for (const Prediction& p : rank_choices(pr, 6, with_shared_cores(plain, 6, 2))) {
    SCOPED_TRACE(p.choice.name());
    const double got = predict(p.choice, pr, 6, with_shared_cores(balanced, 6, 2)).backward.seconds;
    if (idle_steps(p.choice.kind))
      EXPECT_GT(got, p.backward.seconds * (1 + 1e-6));
    else if (p.choice.kind == ExecutorKind::Hybrid && idle_steps(p.choice.inner))
      EXPECT_GE(got, p.backward.seconds);  // U = 2 groups of 3: the busy counts stay even
    else
      EXPECT_DOUBLE_EQ(got, p.backward.seconds);
  }
  // Every choice on 3 ranks is at least as slow with the balance time; the ring's
  // steps with one or two busy ranks (each has a core) are not slowed.
  for (const Prediction& p : rank_choices(pr, 3, with_shared_cores(plain, 3, 2))) {
    SCOPED_TRACE(p.choice.name());
    EXPECT_GE(predict(p.choice, pr, 3, with_shared_cores(balanced, 3, 2)).forward.seconds,
              p.forward.seconds * (1 - 1e-12));
  }
}
