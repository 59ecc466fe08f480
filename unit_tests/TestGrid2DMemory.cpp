// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Attention2D memory on MPI ranks, every grid of 1-4 ranks and both variants:
// the MemoryPlan equals, byte for byte, what forward and backward make Kokkos
// allocate; K_t|V_t survives the workspace's growth (backward sends no
// permutation); a second pass of the same shape allocates nothing; a pass over
// the memory limit fails on every rank before it allocates; head chunking gives
// bitwise the same results, within its plan, chosen automatically under a limit.

#include "executor_memory_helpers.hpp"

#include <DistAttn/grid2d/grid2d_attention.hpp>

#include <cstdlib>
#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using A2D = Grid2DAttention<T, MpiSpace, Exec>;

std::vector<GridShape> grids(int P) {
  std::vector<GridShape> g;
  for (int r = 1; r <= P; ++r)
    if (P % r == 0) g.push_back(GridShape{r, P / r});
  return g;
}

Grid2DOptions grid2d_options(Grid2DVariant variant, std::size_t limit = 0, int head_group = 0) {
  Grid2DOptions o;
  o.variant            = variant;
  o.memory_limit_bytes = limit;
  o.head_group         = head_group;
  return o;
}

std::string what(Grid2DVariant v, GridShape g) {
  return std::string(to_string(v)) + " " + std::to_string(g.rows) + "x" + std::to_string(g.cols) + ", rank " +
         std::to_string(world_rank());
}

using Grid2DMemoryTest = Counting<::testing::TestWithParam<Grid2DVariant>>;

TEST_P(Grid2DMemoryTest, PlanIsWhatKokkosAllocatesAndSecondPassAllocatesNothing) {
  const int B = 2, n = 6, H = 4, Hkv = 2, D = 16, P = world_size();
  const std::int64_t N = std::int64_t(n) * P;
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  Tensors x(B, n, H, Hkv, D);
  for (const GridShape g : grids(P)) {
    const auto opts = grid2d_options(GetParam());
    A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D, opts);
    const MemoryPlan plan = a2d.memory_plan();
    const MemoryPlan same = A2D::memory_plan(g.rows, g.cols, B, N, H, Hkv, D, opts);
    EXPECT_EQ(plan.forward_bytes(), same.forward_bytes());
    EXPECT_EQ(plan.backward_bytes(), same.backward_bytes());
    const std::size_t kept = buffer_bytes(plan.forward, "DistAttn::grid2d.kv_t");
    EXPECT_EQ(kept, buffer_bytes(plan.backward, "DistAttn::grid2d.kv_t"));
    EXPECT_GT(kept, 0u);

    Counter::reset();
    x.forward(a2d);
    // K_t|V_t, the workspace, the entry agreement's all-gather buffers and k, v's fingerprints.
    EXPECT_EQ(Counter::labelled().bytes, plan.forward_bytes() + Entry::buffer_bytes(P) + Saved::buffer_bytes(2))
        << "forward " << what(GetParam(), g);
    EXPECT_EQ(Counter::labelled().allocations, 5u) << what(GetParam(), g);

    Counter::reset();
    x.backward(a2d);
    const std::size_t grown = plan.backward_bytes() > plan.forward_bytes() ? plan.backward_bytes() - kept : 0;
    EXPECT_EQ(Counter::labelled().bytes, grown) << "backward " << what(GetParam(), g);
    EXPECT_EQ(Counter::labelled().live, plan.peak_bytes() + Entry::buffer_bytes(P) + Saved::buffer_bytes(2))
        << what(GetParam(), g);
    // Forward's K_t|V_t is still there after the workspace grew.
    EXPECT_EQ(a2d.stats().received(Grid2DPhase::KvPermute), 0u) << what(GetParam(), g);

    Counter::reset();
    for (int i = 0; i < 2; ++i) {
      x.forward(a2d);
      x.backward(a2d);
    }
    EXPECT_EQ(Counter::all().allocations, 0u)
        << "steady-state passes allocated " << Counter::all().bytes << " bytes (" << Counter::labels() << "), " << what(GetParam(), g);
  }
}

TEST_P(Grid2DMemoryTest, OverTheLimitFailsOnEveryRankBeforeAllocating) {
  const int B = 1, n = 8, H = 4, Hkv = 4, D = 16, P = world_size();
  const std::int64_t N = std::int64_t(n) * P;
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  world.set_timeout(20.0);
  world.set_timeout_policy(TimeoutPolicy::Throw);
  Tensors x(B, n, H, Hkv, D);
  const GridShape g = grids(P).back();
  const MemoryPlan plan = A2D::memory_plan(g.rows, g.cols, B, N, H, Hkv, D, grid2d_options(GetParam()));
  const MemoryPlan smallest = A2D::memory_plan(g.rows, g.cols, B, N, H, Hkv, D, grid2d_options(GetParam(), 0, 1));
  {
    // All heads at once (head_group = kv_heads): no chunking to fall back on.
    A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D,
            grid2d_options(GetParam(), plan.forward_bytes() - 1, Hkv));
    Counter::reset();
    expect_error_on_every_rank([&] { x.forward(a2d); },
                               {"not enough memory", "forward", "largest sequence that fits", "per rank"});
    EXPECT_EQ(Counter::labelled().bytes, Entry::buffer_bytes(P)) << "a buffer was allocated";
  }
  if (plan.backward_bytes() > plan.forward_bytes()) {
    A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D, grid2d_options(GetParam(), plan.forward_bytes(), Hkv));
    x.forward(a2d);
    expect_error_on_every_rank([&] { x.backward(a2d); }, {"not enough memory", "backward"});
  }
  {
    // Only the last rank is short of memory: every rank fails, none waits.
    const bool last = world_rank() == P - 1;
    A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D,
            grid2d_options(GetParam(), last ? plan.forward_bytes() - 1 : 0, Hkv));
    expect_error_on_every_rank([&] { x.forward(a2d); }, {"not enough memory", "forward"});
  }
  // Automatic head chunking fails only below its smallest group (one kv head).
  {
    A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D, grid2d_options(GetParam(), smallest.forward_bytes() - 1));
    Counter::reset();
    expect_error_on_every_rank([&] { x.forward(a2d); }, {"not enough memory", "forward", "largest sequence"});
    EXPECT_EQ(Counter::labelled().bytes, Entry::buffer_bytes(P)) << "a buffer was allocated";
  }
  ::setenv("DISTATTN_MEMORY_LIMIT", std::to_string(smallest.forward_bytes() / 2).c_str(), 1);
  {
    A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D, grid2d_options(GetParam()));
    expect_error_on_every_rank([&] { x.forward(a2d); }, {"not enough memory", "DISTATTN_MEMORY_LIMIT"});
  }
  ::unsetenv("DISTATTN_MEMORY_LIMIT");
  A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D, grid2d_options(GetParam(), plan.peak_bytes()));
  x.forward(a2d);
  x.backward(a2d);
}

TEST_P(Grid2DMemoryTest, HeadGroupMustDivideKvHeads) {
  const int P = world_size();
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  for (const int bad : {-1, 3}) {
    try {
      A2D a2d(world, 0, 0, Exec(), 1, 4L * P, 4, 2, 16, grid2d_options(GetParam(), 0, bad));
      ADD_FAILURE() << "head_group=" << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("head_group (" + std::to_string(bad) + ")"), std::string::npos) << e.what();
    }
  }
}

TEST_P(Grid2DMemoryTest, HeadChunkingGivesBitwiseTheSameResultsInLessMemory) {
  const int B = 2, n = 8, H = 8, Hkv = 4, D = 16, P = world_size();
  const std::int64_t N = std::int64_t(n) * P;
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const std::uint64_t seed = shared_seed();
  for (const GridShape g : grids(P)) {
    Tensors full(B, n, H, Hkv, D, seed);
    A2D all_heads(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D, grid2d_options(GetParam()));
    full.forward(all_heads);
    full.backward(all_heads);
    for (const int group : {1, 2}) {
      Tensors chunked(B, n, H, Hkv, D, seed);
      A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D, grid2d_options(GetParam(), 0, group));
      const MemoryPlan plan = a2d.memory_plan();
      const std::string w   = what(GetParam(), g) + ", head_group " + std::to_string(group);
      EXPECT_LT(plan.peak_bytes(), all_heads.memory_plan().peak_bytes()) << w;
      const std::size_t kept = buffer_bytes(plan.forward, "DistAttn::grid2d.kv_t");
      Counter::reset();
      const std::uint64_t live0 = Counter::labelled().live;
      chunked.forward(a2d);
      EXPECT_EQ(Counter::labelled().bytes, plan.forward_bytes() + Entry::buffer_bytes(P)) << "forward " << w;
      chunked.backward(a2d);
      const std::size_t grown = plan.backward_bytes() > plan.forward_bytes() ? plan.backward_bytes() - kept : 0;
      EXPECT_EQ(Counter::labelled().bytes, plan.forward_bytes() + grown + Entry::buffer_bytes(P)) << "backward " << w;
      EXPECT_EQ(Counter::labelled().live - live0, plan.peak_bytes() + Entry::buffer_bytes(P)) << w;
      expect_same_outputs(full, chunked, w);
    }
    // Under a limit that two kv heads per pass fit and all four do not, the
    // automatic choice stays within it on every rank.
    const MemoryPlan two = A2D::memory_plan(g.rows, g.cols, B, N, H, Hkv, D, grid2d_options(GetParam(), 0, 2));
    ASSERT_LT(two.peak_bytes(), all_heads.memory_plan().peak_bytes());
    {
      Tensors automatic(B, n, H, Hkv, D, seed);
      A2D a2d(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D, grid2d_options(GetParam(), two.peak_bytes()));
      Counter::reset();
      const std::uint64_t live0 = Counter::labelled().live;
      automatic.forward(a2d);
      automatic.backward(a2d);
      EXPECT_EQ(Counter::labelled().live - live0, two.peak_bytes() + Entry::buffer_bytes(P)) << what(GetParam(), g);
      expect_same_outputs(full, automatic, "automatic head chunking, " + what(GetParam(), g));
    }
    // Only rank 0 is limited: every rank takes its smaller group (the messages of
    // a pass must match), with the same results.
    const MemoryPlan one = A2D::memory_plan(g.rows, g.cols, B, N, H, Hkv, D, grid2d_options(GetParam(), 0, 1));
    Tensors uneven(B, n, H, Hkv, D, seed);
    A2D limited(world, g.rows, g.cols, Exec(), B, N, H, Hkv, D,
                grid2d_options(GetParam(), world_rank() == 0 ? one.peak_bytes() : 0));
    uneven.forward(limited);
    uneven.backward(limited);
    expect_same_outputs(full, uneven, "head chunking limited on rank 0, " + what(GetParam(), g));
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, Grid2DMemoryTest, ::testing::Values(Grid2DVariant::NO, Grid2DVariant::O),
                         [](const auto& info) { return std::string(info.param == Grid2DVariant::NO ? "NO" : "O"); });

}  // namespace
}  // namespace DistAttn::Test
