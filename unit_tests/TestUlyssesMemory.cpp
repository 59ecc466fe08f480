// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ulysses and hybrid memory on MPI ranks: the MemoryPlan equals, byte for byte,
// what forward and backward make Kokkos allocate (the hybrid: its head exchange's
// plan plus its inner executor's); a second pass of the same shape allocates
// nothing (Ulysses' one-call forward folds into workspace memory); a pass over
// the memory limit fails on every rank before it allocates.

#include "executor_memory_helpers.hpp"

#include <DistAttn/hybrid/hybrid_attention.hpp>
#include <DistAttn/ulysses/ulysses_attention.hpp>

#include <cstdlib>
#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using Uly    = UlyssesAttention<T, MpiSpace, Exec>;
using Hybrid = HybridAttention<T, MpiSpace, Exec>;

/// Bytes of the head-side tensors kept from forward for backward.
std::size_t kept_bytes(const MemoryLayout& l) {
  std::size_t b = 0;
  for (const char* n : {"q_heads", "k_heads", "v_heads"}) b += buffer_bytes(l, std::string("DistAttn::ulysses.") + n);
  return b;
}

/// Buffers of `l` that share memory with another, by name (the pairs' first names).
std::vector<std::string> overlapping(const MemoryLayout& l) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < l.buffers.size(); ++i)
    for (std::size_t j = i + 1; j < l.buffers.size(); ++j) {
      const auto &a = l.buffers[i], &b = l.buffers[j];
      if (a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes) names.push_back(a.name);
    }
  return names;
}

struct UlyssesShape {
  int heads_per_rank, kv_heads_per_rank, groups;  // groups as UlyssesOptions::head_groups
};

using UlyssesMemoryLimitTest = Counting<>;
class UlyssesMemoryTest : public Counting<::testing::TestWithParam<UlyssesShape>> {};

TEST_P(UlyssesMemoryTest, PlanIsWhatKokkosAllocatesAndSecondPassAllocatesNothing) {
  const int P = world_size(), B = 2, c = 6, H = GetParam().heads_per_rank * P, Hkv = GetParam().kv_heads_per_rank * P,
            D = 16;
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  Tensors x(B, c, H, Hkv, D);
  UlyssesOptions opts;
  opts.head_groups = GetParam().groups;
  Uly uly(comm, Exec(), B, c, H, Hkv, D, opts);
  const MemoryPlan plan = uly.memory_plan();
  EXPECT_EQ(plan.forward_bytes(), Uly::memory_plan(P, B, c, H, Hkv, D, opts.head_groups).forward_bytes());
  EXPECT_EQ(plan.backward_bytes(), Uly::memory_plan(P, B, c, H, Hkv, D, opts.head_groups).backward_bytes());
  const std::size_t kept = kept_bytes(plan.forward);
  EXPECT_EQ(kept, kept_bytes(plan.backward));
  if (uly.head_groups() > 1) {
    // Pipelined, a group's inputs, another's compute and a third's results are in
    // flight at once: nothing in forward shares memory, and in backward only the
    // q|k|v messages, all waited on before dO packs.
    EXPECT_TRUE(overlapping(plan.forward).empty()) << overlapping(plan.forward).front();
    for (const std::string& n : overlapping(plan.backward))
      EXPECT_TRUE(n == "DistAttn::ulysses.qkv_send" || n == "DistAttn::ulysses.qkv_recv") << n;
  }
  Counter::reset();
  x.forward(uly);
  EXPECT_EQ(Counter::labelled().bytes, plan.forward_bytes() + Entry::buffer_bytes(P) + Saved::buffer_bytes(3))
      << "forward, rank " << world_rank();
  EXPECT_EQ(Counter::labelled().allocations, 5u);

  Counter::reset();
  x.backward(uly);
  const std::size_t grown = plan.backward_bytes() > plan.forward_bytes() ? plan.backward_bytes() - kept : 0;
  EXPECT_EQ(Counter::labelled().bytes, grown) << "backward, rank " << world_rank();
  EXPECT_EQ(Counter::labelled().live, plan.peak_bytes() + Entry::buffer_bytes(P) + Saved::buffer_bytes(3));
  // Backward reused forward's q_h, k_h, v_h across the workspace's growth.
  EXPECT_EQ(uly.stats().received(UlyssesPhase::QKV), 0u);

  Counter::reset();
  for (int i = 0; i < 2; ++i) {
    x.forward(uly);
    x.backward(uly);
  }
  EXPECT_EQ(Counter::all().allocations, 0u) << "steady-state passes allocated " << Counter::all().bytes << " bytes (" << Counter::labels() << ")";
}

// Host staging (forced here; the default for device Views without GPU-aware MPI)
// reuses its buffers: steady-state passes allocate nothing, pipelined or not.
TEST_P(UlyssesMemoryTest, StagedTransfersReuseHostBuffers) {
  const int P = world_size(), B = 2, c = 6, H = GetParam().heads_per_rank * P, Hkv = GetParam().kv_heads_per_rank * P,
            D = 16;
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  comm.set_host_staging(HostStaging::Always);
  Tensors x(B, c, H, Hkv, D);
  UlyssesOptions opts;
  opts.head_groups = GetParam().groups;
  Uly uly(comm, Exec(), B, c, H, Hkv, D, opts);
  x.forward(uly);
  x.backward(uly);
  Counter::reset();
  for (int i = 0; i < 2; ++i) {
    x.forward(uly);
    x.backward(uly);
  }
  EXPECT_EQ(Counter::all().allocations, 0u) << "staged passes allocated " << Counter::all().bytes << " bytes ("
                                            << Counter::labels() << "), rank " << world_rank();
  if (P > 1) { EXPECT_GT(comm.staging_pool().free_buffers(), 0u) << "no staged transfer happened"; }
}

INSTANTIATE_TEST_SUITE_P(HeadGroups, UlyssesMemoryTest,
                         ::testing::Values(UlyssesShape{2, 1, 0}, UlyssesShape{4, 4, 2}, UlyssesShape{4, 4, 4}),
                         [](const ::testing::TestParamInfo<UlyssesShape>& i) {
                           return "L" + std::to_string(i.param.heads_per_rank) + "Lk" +
                                  std::to_string(i.param.kv_heads_per_rank) + "G" + std::to_string(i.param.groups);
                         });

TEST_F(UlyssesMemoryLimitTest, OverTheLimitFailsOnEveryRankBeforeAllocating) {
  const int P = world_size(), B = 1, c = 8, H = 2 * P, Hkv = P, D = 16;
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  comm.set_timeout(20.0);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  Tensors x(B, c, H, Hkv, D);
  const MemoryPlan plan = Uly::memory_plan(P, B, c, H, Hkv, D);
  auto limited = [&](std::size_t limit) {
    UlyssesOptions o;
    o.memory_limit_bytes = limit;
    return o;
  };
  {
    Uly uly(comm, Exec(), B, c, H, Hkv, D, limited(plan.forward_bytes() - 1));
    Counter::reset();
    expect_error_on_every_rank([&] { x.forward(uly); },
                               {"not enough memory", "forward", "largest sequence that fits", "per rank"});
    EXPECT_EQ(Counter::labelled().bytes, Entry::buffer_bytes(P)) << "a buffer was allocated";
  }
  if (plan.backward_bytes() > plan.forward_bytes()) {
    Uly uly(comm, Exec(), B, c, H, Hkv, D, limited(plan.forward_bytes()));
    x.forward(uly);
    expect_error_on_every_rank([&] { x.backward(uly); }, {"not enough memory", "backward"});
  }
  {
    Uly uly(comm, Exec(), B, c, H, Hkv, D, limited(world_rank() == P - 1 ? plan.forward_bytes() - 1 : 0));
    expect_error_on_every_rank([&] { x.forward(uly); }, {"not enough memory", "forward"});
  }
  ::setenv("DISTATTN_MEMORY_LIMIT", std::to_string(plan.forward_bytes() / 2).c_str(), 1);
  {
    Uly uly(comm, Exec(), B, c, H, Hkv, D);
    expect_error_on_every_rank([&] { x.forward(uly); }, {"not enough memory", "DISTATTN_MEMORY_LIMIT"});
  }
  ::unsetenv("DISTATTN_MEMORY_LIMIT");
  Uly uly(comm, Exec(), B, c, H, Hkv, D, limited(plan.peak_bytes()));
  x.forward(uly);
  x.backward(uly);
}

HybridOptions hybrid_options(HybridInner inner, std::size_t limit = 0) {
  HybridOptions o;
  o.inner              = inner;
  o.memory_limit_bytes = limit;
  return o;
}

using HybridMemoryTest = Counting<::testing::TestWithParam<HybridInner>>;

TEST_P(HybridMemoryTest, PlanIsWhatKokkosAllocatesAndSecondPassAllocatesNothing) {
  const int P = world_size(), B = 2, c = 4, H = 2 * P, Hkv = P, D = 16;
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  Tensors x(B, c, H, Hkv, D);
  Hybrid hy(world, Exec(), B, c, H, Hkv, D, hybrid_options(GetParam()));
  const MemoryPlan mine = hy.head_exchange_plan(), inner = hy.inner_plan(), all = hy.memory_plan();
  EXPECT_EQ(all.forward_bytes(), mine.forward_bytes() + inner.forward_bytes());
  // The world's entry agreement and the inner executor's over its head group, and
  // the fingerprints of the hybrid's q, k, v, o, lse (and Attention2D's head-side k, v).
  const bool a2d_inner = GetParam() == HybridInner::Grid2DNO || GetParam() == HybridInner::Grid2DO;
  const std::size_t entries = Entry::buffer_bytes(P) + Entry::buffer_bytes(hy.sequence_degree()) +
                              Saved::buffer_bytes(5) + (a2d_inner ? Saved::buffer_bytes(2) : 0);
  const std::string ctx = std::string(to_string(GetParam())) + ", U=" + std::to_string(hy.ulysses_degree()) +
                          ", rank " + std::to_string(world_rank());

  Counter::reset();
  x.forward(hy);
  EXPECT_EQ(Counter::labelled().bytes, all.forward_bytes() + entries) << "forward, " << ctx;

  Counter::reset();
  x.backward(hy);
  EXPECT_EQ(Counter::labelled().live, mine.peak_bytes() + inner.peak_bytes() + entries) << "backward, " << ctx;

  Counter::reset();
  for (int i = 0; i < 2; ++i) {
    x.forward(hy);
    x.backward(hy);
  }
  EXPECT_EQ(Counter::all().allocations, 0u) << "steady-state passes allocated " << Counter::all().bytes << " bytes (" << Counter::labels() << "), "
                                            << ctx;
}

TEST_P(HybridMemoryTest, OverTheLimitFailsOnEveryRankBeforeAllocating) {
  if (GetParam() != HybridInner::Grid2DO) GTEST_SKIP() << "one inner executor suffices: the pre-flight check is the hybrid's, whatever runs inside";
  const int P = world_size(), B = 1, c = 4, H = 2 * P, Hkv = P, D = 16;
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  world.set_timeout(20.0);
  world.set_timeout_policy(TimeoutPolicy::Throw);
  Tensors x(B, c, H, Hkv, D);
  std::size_t need = 0, peak = 0;
  {
    Hybrid hy(world, Exec(), B, c, H, Hkv, D, hybrid_options(GetParam()));
    need = hy.head_exchange_plan().peak_bytes() + hy.inner_plan().forward_bytes();
    peak = hy.head_exchange_plan().peak_bytes() + hy.inner_plan().peak_bytes();
  }
  {
    Hybrid hy(world, Exec(), B, c, H, Hkv, D, hybrid_options(GetParam(), need - 1));
    Counter::reset();
    expect_error_on_every_rank([&] { x.forward(hy); },
                               {"not enough memory", "forward", "largest sequence that fits", "per rank"});
    EXPECT_EQ(Counter::labelled().bytes, Entry::buffer_bytes(P)) << "a buffer was allocated";
  }
  {
    // One rank short of memory: every rank of every head group fails, none waits.
    Hybrid hy(world, Exec(), B, c, H, Hkv, D, hybrid_options(GetParam(), world_rank() == P - 1 ? need - 1 : 0));
    expect_error_on_every_rank([&] { x.forward(hy); }, {"not enough memory", "forward"});
  }
  ::setenv("DISTATTN_MEMORY_LIMIT", std::to_string(need / 2).c_str(), 1);
  {
    Hybrid hy(world, Exec(), B, c, H, Hkv, D, hybrid_options(GetParam()));
    expect_error_on_every_rank([&] { x.forward(hy); }, {"not enough memory", "DISTATTN_MEMORY_LIMIT"});
  }
  ::unsetenv("DISTATTN_MEMORY_LIMIT");
  Hybrid hy(world, Exec(), B, c, H, Hkv, D, hybrid_options(GetParam(), peak));
  x.forward(hy);
  x.backward(hy);
}

INSTANTIATE_TEST_SUITE_P(Inner, HybridMemoryTest,
                         ::testing::Values(HybridInner::Zigzag, HybridInner::Balanced, HybridInner::Grid2DNO,
                                           HybridInner::Grid2DO),
                         [](const auto& info) {
                           std::string n = to_string(info.param);
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace DistAttn::Test
