// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Executor memory on MPI ranks: the MemoryPlan equals, byte for byte, what a
// forward and a backward make Kokkos allocate (counted by the Kokkos Tools
// allocation hook); a second pass of the same shape allocates nothing; only the
// slots a schedule uses are planned; a workspace that does not fit the memory
// limit fails on every rank together, before it is allocated.

#include "executor_memory_helpers.hpp"

#include <DistAttn/ring/ring_attention.hpp>

#include <cstdlib>
#include <string>

namespace DistAttn::Test {
namespace {

using Ring = RingAttention<T, MpiSpace, Exec>;

RingOptions ring_options(RingKind kind, std::size_t limit = 0, int head_group = 0) {
  RingOptions opts;
  opts.kind               = kind;
  opts.memory_limit_bytes = limit;
  opts.head_group         = head_group;
  return opts;
}

using RingMemoryTest = Counting<::testing::TestWithParam<RingKind>>;

// Host staging (forced on CPU builds, the default for device Views without
// GPU-aware MPI) reuses its buffers: steady-state passes allocate nothing.
TEST_P(RingMemoryTest, StagedTransfersReuseHostBuffers) {
  const int B = 2, c = 10, H = 4, Hkv = 2, D = 16;
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  comm.set_host_staging(HostStaging::Always);
  Tensors x(B, c, H, Hkv, D);
  Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam()));
  x.forward(ring);
  x.backward(ring);
  Counter::reset();
  for (int i = 0; i < 2; ++i) {
    x.forward(ring);
    x.backward(ring);
  }
  EXPECT_EQ(Counter::all().allocations, 0u) << "staged passes allocated " << Counter::all().bytes << " bytes (" << Counter::labels() << "), rank "
                                            << world_rank();
  EXPECT_GT(comm.staging_pool().free_buffers(), 0u) << "no staged transfer happened";
}

TEST_P(RingMemoryTest, PlanIsWhatKokkosAllocatesAndSecondPassAllocatesNothing) {
  const int B = 2, c = 10, H = 4, Hkv = 2, D = 16, P = world_size();
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  Tensors x(B, c, H, Hkv, D);
  Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam()));
  const MemoryPlan plan = ring.memory_plan();
  const MemoryPlan same = Ring::memory_plan(P, B, c, H, Hkv, D, ring_options(GetParam()));
  EXPECT_EQ(plan.forward_bytes(), same.forward_bytes());
  EXPECT_EQ(plan.backward_bytes(), same.backward_bytes());

  Counter::reset();
  x.forward(ring);
  // The workspace, plus the entry agreement's all-gather buffers on the first call.
  EXPECT_EQ(Counter::labelled().bytes, plan.forward_bytes() + Entry::buffer_bytes(P)) << "forward, rank " << world_rank();
  EXPECT_EQ(Counter::labelled().allocations, 3u);

  Counter::reset();
  x.backward(ring);
  const std::size_t grown = plan.backward_bytes() > plan.forward_bytes() ? plan.backward_bytes() : 0;
  EXPECT_EQ(Counter::labelled().bytes, grown) << "backward, rank " << world_rank();
  EXPECT_EQ(Counter::labelled().live, plan.peak_bytes() + Entry::buffer_bytes(P));

  Counter::reset();
  for (int i = 0; i < 2; ++i) {
    x.forward(ring);
    x.backward(ring);
  }
  EXPECT_EQ(Counter::all().allocations, 0u) << "steady-state passes allocated " << Counter::all().bytes << " bytes (" << Counter::labels() << ")";
}

// One tensor-equivalent: one [B, c, H, D] tensor of the input type.
double tensors(std::size_t bytes, int B, int c, int H, int D) { return double(bytes) / (double(B) * c * H * D * sizeof(T)); }

TEST_P(RingMemoryTest, PlansOnlyTheSlotsTheScheduleUses) {
  const int B = 1, c = 64, H = 8, D = 32;
  for (int P : {1, 2, 4, 8}) {
    const MemoryPlan plan = Ring::memory_plan(P, B, c, H, H, D, ring_options(GetParam()));
    auto has = [](const MemoryLayout& l, const std::string& name) {
      for (const auto& b : l.buffers)
        if (b.name.find(name) != std::string::npos) return true;
      return false;
    };
    const bool helpers = GetParam() == RingKind::Balanced && P > 2;
    EXPECT_EQ(has(plan.forward, "q_slot"), helpers) << "P=" << P;
    EXPECT_EQ(has(plan.forward, "partial"), helpers) << "P=" << P;
    EXPECT_EQ(has(plan.backward, "do_slot"), helpers) << "P=" << P;
    EXPECT_EQ(has(plan.backward, "dq_send"), helpers) << "P=" << P;
    EXPECT_EQ(has(plan.forward, "k_slot"), P > 1) << "P=" << P;
    EXPECT_EQ(has(plan.forward, "ring.state.acc"), GetParam() != RingKind::Zigzag);
    EXPECT_EQ(has(plan.forward, "state_half"), GetParam() == RingKind::Zigzag);
    // fp64 here: accumulators are the input type, so kv slots are 1 tensor each,
    // dq/dk/dv 3, and a P>1 ring without helpers holds 2 (k,v) x 2 slots plus
    // 2 (dk,dv) x 2 send + 2 x 2 receive slots in backward.
    const double bwd = tensors(plan.backward_bytes(), B, c, H, D);
    if (P > 1 && !helpers) { EXPECT_NEAR(bwd, 3 + 4 + 8, 0.2) << "P=" << P; }
  }
}

TEST_P(RingMemoryTest, WorkspaceOverTheLimitFailsOnEveryRankBeforeAllocating) {
  const int B = 1, c = 16, H = 4, Hkv = 4, D = 16;
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  comm.set_timeout(20.0);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  Tensors x(B, c, H, Hkv, D);
  const MemoryPlan plan = Ring::memory_plan(world_size(), B, c, H, Hkv, D, ring_options(GetParam()));
  const MemoryPlan smallest =
      Ring::memory_plan(world_size(), B, c, H, Hkv, D, ring_options(GetParam(), 0, /*head_group=*/1));
  {
    // All heads at once (head_group = kv_heads): no chunking to fall back on.
    Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam(), plan.forward_bytes() - 1, Hkv));
    Counter::reset();
    expect_error_on_every_rank([&] { x.forward(ring); },
                               {"not enough memory", "forward", "largest sequence that fits", "per rank"});
    EXPECT_EQ(Counter::labelled().bytes, Entry::buffer_bytes(world_size())) << "the workspace was allocated";
  }
  if (plan.backward_bytes() > plan.forward_bytes()) {
    // Forward fits, backward does not: it fails at its own entry, on every rank.
    Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam(), plan.forward_bytes(), Hkv));
    x.forward(ring);
    expect_error_on_every_rank([&] { x.backward(ring); }, {"not enough memory", "backward"});
  }
  // The environment variable caps it the same way.
  {
    // Only the last rank is short of memory: every rank still fails, none waits.
    const bool last = world_rank() == world_size() - 1;
    Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam(), last ? plan.forward_bytes() - 1 : 0, Hkv));
    expect_error_on_every_rank([&] { x.forward(ring); }, {"not enough memory", "forward"});
  }
  // Automatic head chunking fails only below its smallest group (one kv head).
  {
    Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam(), smallest.forward_bytes() - 1));
    expect_error_on_every_rank([&] { x.forward(ring); }, {"not enough memory", "forward", "largest sequence"});
  }
  ::setenv("DISTATTN_MEMORY_LIMIT", std::to_string(smallest.forward_bytes() / 2).c_str(), 1);
  {
    Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam()));
    expect_error_on_every_rank([&] { x.forward(ring); }, {"not enough memory", "DISTATTN_MEMORY_LIMIT"});
  }
  ::unsetenv("DISTATTN_MEMORY_LIMIT");
  // Within the limit it runs.
  Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam(), plan.peak_bytes()));
  x.forward(ring);
  x.backward(ring);
}

TEST_P(RingMemoryTest, HeadChunkingGivesBitwiseTheSameResultsInLessMemory) {
  const int B = 2, c = 24, H = 8, Hkv = 4, D = 32, P = world_size();
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const std::uint64_t seed = shared_seed();
  Tensors full(B, c, H, Hkv, D, seed), chunked(B, c, H, Hkv, D, seed), automatic(B, c, H, Hkv, D, seed);
  Ring all_heads(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam()));
  full.forward(all_heads);
  full.backward(all_heads);
  for (int g : {1, 2}) {
    Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam(), 0, g));
    const MemoryPlan plan = ring.memory_plan();
    // One rank has no ring slots to save, only the group's input copies to add.
    if (P > 1) { EXPECT_LT(plan.peak_bytes(), all_heads.memory_plan().peak_bytes()) << "head_group " << g; }
    Counter::reset();
    const std::uint64_t live0 = Counter::labelled().live;
    chunked.forward(ring);
    chunked.backward(ring);
    const std::size_t grown = plan.backward_bytes() > plan.forward_bytes() ? plan.backward_bytes() : 0;
    EXPECT_EQ(Counter::labelled().bytes, plan.forward_bytes() + grown + Entry::buffer_bytes(P)) << "head_group " << g;
    EXPECT_EQ(Counter::labelled().live - live0, plan.peak_bytes() + Entry::buffer_bytes(P)) << "head_group " << g;
    expect_same_outputs(full, chunked, "head_group " + std::to_string(g));
  }
  // Under a limit that two kv heads per pass fit (and, on more than one rank,
  // four do not), the automatic choice stays within it on every rank.
  const MemoryPlan two = Ring::memory_plan(P, B, c, H, Hkv, D, ring_options(GetParam(), 0, 2));
  Ring ring(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam(), two.peak_bytes()));
  const std::uint64_t live0 = Counter::labelled().live;
  automatic.forward(ring);
  automatic.backward(ring);
  EXPECT_LE(Counter::labelled().live - live0, two.peak_bytes() + Entry::buffer_bytes(P));
  expect_same_outputs(full, automatic, "automatic head chunking");

  // Only rank 0 is limited: every rank takes its smaller group (the messages of
  // a pass must match), with the same results.
  Tensors uneven(B, c, H, Hkv, D, seed);
  const MemoryPlan one = Ring::memory_plan(P, B, c, H, Hkv, D, ring_options(GetParam(), 0, 1));
  Ring limited(comm, Exec(), B, c, H, Hkv, D, ring_options(GetParam(), world_rank() == 0 ? one.peak_bytes() : 0));
  uneven.forward(limited);
  uneven.backward(limited);
  expect_same_outputs(full, uneven, "head chunking limited on rank 0");
}

INSTANTIATE_TEST_SUITE_P(Kinds, RingMemoryTest,
                         ::testing::Values(RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace DistAttn::Test
