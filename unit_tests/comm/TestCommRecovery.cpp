// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A communicator whose wait timed out is never used again as if nothing had
// happened (issue #35, item 2). Before the fix, with TimeoutPolicy::Throw, a
// retry on the same MPI communicator returned success (on all 3 ranks of
// agreement_np3 with the refusal disabled): the ranks could receive the late
// rank's stale sends, which carry the same tags, as their data. Now every rank gets CommunicationError for every
// later use, through the same executor or a new one, and a new communicator
// works and gives the right answer.

#include "../executor_memory_helpers.hpp"

#include <DistAttn/ring/ring_attention.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

namespace DistAttn::Test {
namespace {

using Ring = RingAttention<T, MpiSpace, Exec>;

constexpr int kB = 1, kC = 8, kH = 2, kHkv = 1, kD = 8;
constexpr double kTimeout = 1.0;

/// An owning communicator on a fresh MPI duplicate of the world, bounded by
/// kTimeout alone (no multiple of the step time: the late rank's sleep would
/// stretch its own budget) and throwing on expiry.
std::unique_ptr<Comm> fresh_comm() {
  setenv("DISTATTN_COMM_TIMEOUT_STEPS", "0", 1);
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  auto c     = std::make_unique<Comm>(world.duplicate());
  c->set_timeout(kTimeout);
  c->set_timeout_policy(TimeoutPolicy::Throw);
  return c;
}

/// Runs `f`; returns the message of the CommunicationError it threw ("" if none).
template <class F>
std::string communication_error(F&& f) {
  try {
    f();
  } catch (const CommunicationError& e) {
    return e.what();
  }
  return "";
}

int all_ranks_min(int v) {
  int m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return m;
}

TEST(CommRecovery, NoRankReusesATimedOutCommunicator) {
  const int P = world_size(), rank = world_rank(), late = P - 1;
  if (P < 2) GTEST_SKIP() << "needs two ranks";
  RingOptions opts;
  opts.kind = RingKind::Balanced;
  Tensors x(kB, kC, kH, kHkv, kD), expected(kB, kC, kH, kHkv, kD);
  Kokkos::deep_copy(expected.q, x.q);
  Kokkos::deep_copy(expected.k, x.k);
  Kokkos::deep_copy(expected.v, x.v);
  {
    auto good = fresh_comm();
    Ring ring(*good, Exec(), kB, kC, kH, kHkv, kD, opts);
    expected.forward(ring);
  }

  auto comm = fresh_comm();
  Ring ring(*comm, Exec(), kB, kC, kH, kHkv, kD, opts);
  // The late rank sleeps past the others' timeout before its forward.
  if (rank == late) std::this_thread::sleep_for(std::chrono::duration<double>(2.5 * kTimeout));
  const std::string first = communication_error([&] { x.forward(ring); });
  EXPECT_NE(first, "") << "rank " << rank << ": the pass with a late rank did not fail";
  MPI_Barrier(MPI_COMM_WORLD);

  // Every later use fails on every rank: the same executor, a new one, a raw operation.
  const std::string again = communication_error([&] { x.forward(ring); });
  EXPECT_NE(again, "") << "rank " << rank << ": a second pass on the same executor succeeded";
  const std::string rebuilt = communication_error([&] { Ring other(*comm, Exec(), kB, kC, kH, kHkv, kD, opts); });
  EXPECT_NE(rebuilt, "") << "rank " << rank << ": a new executor on the broken communicator was built";
  EXPECT_FALSE(comm->usable());
  EXPECT_NE(again.find("cannot be used after an earlier communication error"), std::string::npos) << again;
  EXPECT_EQ(all_ranks_min(::testing::Test::HasFailure() ? 0 : 1), 1) << "another rank used the communicator";
  MPI_Barrier(MPI_COMM_WORLD);

  // A new communicator recovers, with the right answer.
  auto renewed = fresh_comm();
  Ring ok(*renewed, Exec(), kB, kC, kH, kHkv, kD, opts);
  x.forward(ok);
  auto o = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x.o);
  auto e = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), expected.o);
  for (std::size_t i = 0; i < o.span(); ++i) ASSERT_EQ(o.data()[i], e.data()[i]) << "element " << i;
}

TEST(CommRecovery, AnotherWrapperOfTheSameHandleRefusesToo) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  auto comm = fresh_comm();
  // Rank 0 waits for a message nobody sends: its wait times out.
  Kokkos::View<double*, Mem> buf("buf", 4);
  if (world_rank() == 0) {
    auto req = irecv(*comm, buf, 1, 7);
    EXPECT_THROW(req.wait(), CommunicationError);
    req.cancel();
    auto other = Comm::from_raw(comm->comm(), Exec());
    EXPECT_FALSE(other.usable());
    EXPECT_THROW((void)isend(other, buf, 1, 8), CommunicationError);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace DistAttn::Test
