// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every option that changes what a pass computes is agreed across ranks, and
// every constructor that communicates agrees its arguments first (issue #35,
// items 3 and 6). Before: a rank with another softmax scale made every output of
// zigzag, Attention2D, Ulysses and the hybrid silently wrong; a rank whose own
// Attention2D or hybrid constructor threw left the others blocked forever in
// MPI_Comm_dup / MPI_Comm_split.

#include "executor_memory_helpers.hpp"

#include <DistAttn/registry/any_attention.hpp>
#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/impl/member_count.hpp>
#include <DistAttn/hybrid/hybrid_attention.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/ulysses/ulysses_attention.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace DistAttn::Test {
namespace {

// ---- the options structs' fields, counted so that a new one cannot be forgotten ----

using Impl::member_count;

// A failure here means an options struct gained a field. If it changes what a
// pass computes or whether it communicates, add it to Impl::option_fields
// (ExecutorOptions, AttnOptions) or to the executor's construction_fields, and
// to the table of the test below; then update the count.
static_assert(member_count<AttnOptions>() == 5, "AttnOptions changed: see the comment above");
static_assert(member_count<ExecutorOptions>() == 9, "ExecutorOptions changed: see the comment above");
static_assert(member_count<RingOptions>() == 2, "RingOptions changed: see the comment above");
static_assert(member_count<Grid2DOptions>() == 2, "Grid2DOptions changed: see the comment above");
static_assert(member_count<UlyssesOptions>() == 2, "UlyssesOptions changed: see the comment above");
static_assert(member_count<HybridOptions>() == 5, "HybridOptions changed: see the comment above");

using Ring   = RingAttention<T, MpiSpace, Exec>;
using Uly    = UlyssesAttention<T, MpiSpace, Exec>;
using Hybrid = HybridAttention<T, MpiSpace, Exec>;
using A2D    = Grid2DAttention<T, MpiSpace, Exec>;

class AgreementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = std::make_unique<Comm>(Comm::from_raw(MPI_COMM_WORLD, Exec()));
    comm_->set_timeout(10.0);
    comm_->set_timeout_policy(TimeoutPolicy::Throw);
  }
  std::unique_ptr<Comm> comm_;
};

/// One result-changing option and how the last rank sets it differently.
struct Mutation {
  const char* field;
  std::function<void(ExecutorOptions&)> apply;
};

/// Every field Impl::option_fields lists, and ExecutorOptions' fields it leaves
/// out on purpose (timing or a rank's own budget: they must not fail).
std::vector<Mutation> agreed_mutations() {
  return {{"causal", [](ExecutorOptions& o) { o.causal = !o.causal; }},
          {"window_left", [](ExecutorOptions& o) { o.window.left = 3; }},
          {"window_right", [](ExecutorOptions& o) { o.window.right = 2; }},
          {"documents", [](ExecutorOptions& o) { o.documents = {0, 1, std::int64_t(4) * world_size()}; }},  // N = kC P
          {"scale", [](ExecutorOptions& o) { o.attn.scale = 0.5; }},
          {"kernel_path", [](ExecutorOptions& o) { o.attn.path = KernelPath::Portable; }},
          {"check_finite", [](ExecutorOptions& o) { o.attn.check_finite = !o.attn.check_finite; }},
          {"deterministic", [](ExecutorOptions& o) { o.attn.deterministic = !o.attn.deterministic; }},
          {"compute_only", [](ExecutorOptions& o) { o.compute_only = !o.compute_only; }},
          {"head_group", [](ExecutorOptions& o) { o.head_group = 1; }}};
}
std::vector<Mutation> free_mutations() {
  return {{"fence_each_pass", [](ExecutorOptions& o) { o.fence_each_pass = !o.fence_each_pass; }},
          {"recv_delay_ms", [](ExecutorOptions& o) { o.recv_delay_ms = 1.0; }},
          {"memory_limit_bytes", [](ExecutorOptions& o) { o.memory_limit_bytes = std::size_t(1) << 40; }}};
}
// (window is one field with two rows in the agreed table, one per side)
static_assert(member_count<ExecutorOptions>() - 1 + member_count<AttnOptions>() - 1 == 9 + 3,
              "every ExecutorOptions/AttnOptions field but attn and mask is in one table above");

constexpr int kB = 1, kC = 4, kD = 8;
int heads() { return 2 * world_size(); }
int kv_heads() { return world_size(); }

/// Builds an executor with `opts` (the last rank's mutated by `m`), and runs a
/// forward when no error is expected.
template <class Opts, class Make>
void build_and_run(Make make, Opts opts, const Mutation& m, bool expect_error) {
  if (world_rank() == world_size() - 1) m.apply(opts);
  if (expect_error) {
    expect_error_on_every_rank([&] { make(opts); }, {m.field, "differs", "rank " + std::to_string(world_size() - 1)});
  } else {
    auto ex = make(opts);
    Tensors x(kB, kC, heads(), kv_heads(), kD);
    x.forward(*ex);
  }
}

void for_each_kind(Comm& comm, const Mutation& m, bool expect_error) {
  const int P = world_size();
  SCOPED_TRACE(m.field);
  {
    SCOPED_TRACE("ring");
    RingOptions ro;
    ro.kind = RingKind::Zigzag;  // the kind that also runs full attention
    build_and_run(
        [&](const RingOptions& o) { return std::make_unique<Ring>(comm, Exec(), kB, kC, heads(), kv_heads(), kD, o); },
        ro, m, expect_error);
  }
  {
    SCOPED_TRACE("ulysses");
    build_and_run(
        [&](const UlyssesOptions& o) { return std::make_unique<Uly>(comm, Exec(), kB, kC, heads(), kv_heads(), kD, o); },
        UlyssesOptions{}, m, expect_error);
  }
  {
    SCOPED_TRACE("grid2d");
    build_and_run(
        [&](const Grid2DOptions& o) {
          return std::make_unique<A2D>(comm, 0, 0, Exec(), kB, std::int64_t(P) * kC, heads(), kv_heads(), kD, o);
        },
        Grid2DOptions{}, m, expect_error);
  }
  {
    SCOPED_TRACE("hybrid");
    build_and_run(
        [&](const HybridOptions& o) {
          return std::make_unique<Hybrid>(comm, Exec(), kB, kC, heads(), kv_heads(), kD, o);
        },
        HybridOptions{}, m, expect_error);
  }
}

TEST_F(AgreementTest, EveryResultChangingOptionIsAgreed) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  for (const Mutation& m : agreed_mutations()) for_each_kind(*comm_, m, true);
}

TEST_F(AgreementTest, TimingAndBudgetOptionsMayDiffer) {
  for (const Mutation& m : free_mutations()) for_each_kind(*comm_, m, false);
}

TEST_F(AgreementTest, MismatchNamesTheFieldTheRanksAndTheValues) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int last = world_size() - 1;
  RingOptions o;
  o.kind = world_rank() == last ? RingKind::Zigzag : RingKind::Balanced;
  o.attn.scale = world_rank() == last ? 0.25 : 0.0;
  const std::string others = last == 1 ? "on rank 0" : "on ranks 0, 1";
  // kD = 8: the default scale resolves to 1/sqrt(8).
  expect_error_on_every_rank([&] { Ring(*comm_, Exec(), kB, kC, heads(), kv_heads(), kD, o); },
                             {"kind differs: balanced " + others + "; zigzag on rank " + std::to_string(last),
                              "scale differs: 0.25 on rank " + std::to_string(last), "0.35355339059327"});
}

// ---- the registry: ranks naming different executors fail before any constructor ----

TEST_F(AgreementTest, MakeAttentionWithRanksNamingDifferentExecutors) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int last = world_size() - 1;
  ExecutorChoice c;
  c.kind = world_rank() == last ? ExecutorKind::Ulysses : ExecutorKind::RingZigzag;
  const LocalProblem p{kB, kC, heads(), kv_heads(), kD};
  expect_error_on_every_rank([&] { make_attention<T>(*comm_, Exec(), p, c); },
                             {"DistAttn::make_attention", "kind differs", "ulysses on rank " + std::to_string(last)});
}

TEST_F(AgreementTest, MakeAttentionWithAHybridInsideAHybrid) {
  ExecutorChoice c;
  c.kind  = ExecutorKind::Hybrid;
  c.inner = world_rank() == 0 ? ExecutorKind::Hybrid : ExecutorKind::RingZigzag;
  const LocalProblem p{kB, kC, heads(), kv_heads(), kD};
  expect_error_on_every_rank([&] { make_attention<T>(*comm_, Exec(), p, c); },
                             {"DistAttn::make_attention", "inner"});
}

// ---- constructors that communicate: one rank's bad argument fails every rank ----

TEST_F(AgreementTest, Grid2DConstructorWithOneBadRank) {
  const int P = world_size();
  const int rows = world_rank() == 0 ? P + 1 : 0;  // an impossible grid on rank 0 alone
  expect_error_on_every_rank(
      [&] { A2D(*comm_, rows, 0, Exec(), kB, std::int64_t(P) * kC, heads(), kv_heads(), kD); },
      {"DistAttn::Grid2DAttention"});
}

TEST_F(AgreementTest, Grid2DConstructorWithOneRankRejectingItsExtents) {
  const int P = world_size();
  const int batch = world_rank() == 0 ? 0 : kB;
  expect_error_on_every_rank(
      [&] { A2D(*comm_, 0, 0, Exec(), batch, std::int64_t(P) * kC, heads(), kv_heads(), kD); }, {"batch"});
}

TEST_F(AgreementTest, ProcessGridWithOneBadRank) {
  const int P = world_size();
  const int rows = world_rank() == 0 ? P + 1 : P;
  expect_error_on_every_rank([&] { ProcessGrid2D<MpiSpace, Exec>(*comm_, rows, 1); }, {"DistAttn::ProcessGrid2D"});
}

TEST_F(AgreementTest, HybridConstructorWithOneBadRank) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  HybridOptions o;
  o.ulysses_degree = world_rank() == 0 ? world_size() + 1 : 0;  // does not divide P on rank 0
  expect_error_on_every_rank([&] { Hybrid(*comm_, Exec(), kB, kC, heads(), kv_heads(), kD, o); },
                             {"DistAttn::HybridAttention", "ulysses_degree"});
}

TEST_F(AgreementTest, HybridConstructorWithOneRanksBadHeads) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  // Same fields everywhere but heads: rank 0's do not split into its Ulysses groups.
  const int h = world_rank() == 0 ? heads() + 1 : heads();
  expect_error_on_every_rank([&] { Hybrid(*comm_, Exec(), kB, kC, h, kv_heads(), kD); }, {"heads"});
}

TEST_F(AgreementTest, RingAndUlyssesConstructorsWithOneBadRank) {
  const int d = world_rank() == 0 ? 0 : kD;
  expect_error_on_every_rank([&] { Ring(*comm_, Exec(), kB, kC, heads(), kv_heads(), d); }, {"head_dim"});
  expect_error_on_every_rank([&] { Uly(*comm_, Exec(), kB, kC, heads(), kv_heads(), d); }, {"head_dim"});
}

}  // namespace
}  // namespace DistAttn::Test
