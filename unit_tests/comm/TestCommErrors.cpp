// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Failure behaviour: bad arguments throw InvalidArgument naming the argument
// before anything is posted (so no rank hangs), and a peer that never answers
// makes wait() fail after the timeout with a message that names the operation,
// peer, tag, bytes and elapsed time instead of hanging.

#include "comm_test_helpers.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

namespace DistAttn::Test {
namespace {

template <class Cfg>
using CommErrors = CommTest<Cfg>;
TYPED_TEST_SUITE(CommErrors, CommConfigs, CfgNames);

TYPED_TEST(CommErrors, NonContiguousViewThrows) {
  using Mem   = typename TypeParam::exec::memory_space;
  auto& comm  = this->world();
  const int P = comm.size(), r = comm.rank();
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> a("matrix", 8, 6);
  auto strided = Kokkos::subview(a, Kokkos::ALL, std::make_pair(0, 3));  // rows with gaps
  Kokkos::View<double*, Mem> ok("ok", 24), gathered("gathered", 24 * P);
  ASSERT_FALSE(strided.span_is_contiguous());
  expect_throw_with<InvalidArgument>([&] { auto q = isend(comm, strided, (r + 1) % P); },
                                     {"DistAttn::isend", "'view'", "not contiguous", "matrix"});
  expect_throw_with<InvalidArgument>([&] { auto q = irecv(comm, strided, (r + P - 1) % P); },
                                     {"DistAttn::irecv", "'view'", "not contiguous"});
  expect_throw_with<InvalidArgument>(
      [&] { auto q = sendrecv(comm, strided, (r + 1) % P, ok, (r + P - 1) % P); },
      {"DistAttn::sendrecv", "'send_view'", "not contiguous"});
  expect_throw_with<InvalidArgument>(
      [&] { auto q = sendrecv(comm, ok, (r + 1) % P, strided, (r + P - 1) % P); },
      {"'recv_view'", "not contiguous"});
  expect_throw_with<InvalidArgument>([&] { auto q = all_gather(comm, strided, gathered); },
                                     {"DistAttn::all_gather", "'send_view'", "not contiguous"});
  EXPECT_EQ(comm.counters().total(), PeerTraffic{}) << "nothing may be posted or counted";
  // Still usable: a real exchange goes through.
  Kokkos::View<double*, Mem> in("in", 24);
  fill(ok, this->seed(), r);
  auto req = sendrecv(comm, ok, (r + 1) % P, in, (r + P - 1) % P);
  req.wait();
  auto h = host_copy(in);
  EXPECT_EQ(mismatches(h, 0, h.size(), [&](std::size_t i) { return value_of<double>(this->seed(), (r + P - 1) % P, i); }), 0u);
}

TYPED_TEST(CommErrors, BadPeerAndSizeThrow) {
  using Mem   = typename TypeParam::exec::memory_space;
  auto& comm  = this->world();
  const int P = comm.size();
  Kokkos::View<float*, Mem> v("v", 16), w("w", 16 * P + 1), x("x", 16 * P);
  expect_throw_with<InvalidArgument>([&] { auto q = isend(comm, v, P); },
                                     {"DistAttn::isend", "'peer' = " + std::to_string(P), "size " + std::to_string(P)});
  expect_throw_with<InvalidArgument>([&] { auto q = irecv(comm, v, -1); }, {"DistAttn::irecv", "'peer' = -1"});
  expect_throw_with<InvalidArgument>([&] { auto q = sendrecv(comm, v, 0, x, P + 3); }, {"'src' = " + std::to_string(P + 3)});
  expect_throw_with<InvalidArgument>([&] { auto q = isend(comm, v, 0, -5); }, {"'tag' = -5"});
  expect_throw_with<InvalidArgument>([&] { auto q = all_gather(comm, v, w); },
                                     {"DistAttn::all_gather", std::to_string(16 * P + 1), "expected"});
  expect_throw_with<InvalidArgument>([&] { auto q = reduce_scatter_sum(comm, w, v); },
                                     {"DistAttn::reduce_scatter_sum", "send_view"});
  expect_throw_with<InvalidArgument>(
      [&] { auto q = all_gather(comm, Kokkos::subview(x, std::make_pair(0, 16)), x); }, {"overlap"});
  expect_throw_with<InvalidArgument>([&] { comm.set_timeout(0); }, {"set_timeout", "'seconds'"});
}

/// Rank 0 waits for a message nobody sends: with a 1 s timeout and policy Throw,
/// wait() throws CommunicationError naming the operation; the receive is then
/// cancelled, and the communicator refuses every later operation on that rank
/// (its peers no longer agree on which message comes next: comm/mpi/health.hpp).
template <class Cfg>
void mpi_timeout_case(std::uint64_t /*seed*/) {
  using Mem   = typename Cfg::exec::memory_space;
  auto comm   = Cfg::make_world();  // private message space, fresh step pace (budget = the floor)
  const int r = comm.rank();
  comm.set_timeout(1.0);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  constexpr int kTag = 4242;
  Kokkos::View<float*, Mem> buf("timeout_buf", 16);
  if (r == 0) {
    auto req         = irecv(comm, buf, 1, kTag);
    const auto start = std::chrono::steady_clock::now();
    expect_throw_with<CommunicationError>([&] { req.wait(); },
                                          {"timed out after", "irecv from peer 1", "tag 4242", "64 bytes",
                                           "rank 0 of"});
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 1.0);
    EXPECT_LT(waited, 10.0) << "the timeout must bound the wait";
    EXPECT_TRUE(req.pending()) << "after a Throw timeout the request is still pending";
    req.cancel();
    EXPECT_FALSE(req.pending());
    EXPECT_FALSE(comm.usable());
    expect_throw_with<CommunicationError>([&] { auto s = isend(comm, buf, 1, kTag); },
                                          {"cannot be used after an earlier communication error", "timed out"});
  } else {
    EXPECT_TRUE(comm.usable()) << "rank " << r << " saw no error of its own";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

template <class Cfg>
using CommTimeoutMpi = CommTest<Cfg>;
TYPED_TEST_SUITE(CommTimeoutMpi, MpiConfigs, CfgNames);

TYPED_TEST(CommTimeoutMpi, PeerNeverSends) {
  if (this->size() < 2) GTEST_SKIP() << "needs 2 ranks (rank 1 must stay silent), running on " << this->size();
  mpi_timeout_case<TypeParam>(this->seed());
}

#if DISTATTN_ENABLE_NCCL
/// NCCL: the watchdog aborts the communicator (a private one on its own stream,
/// so the aborted kernel cannot block the shared stream of the other tests).
TEST(CommTimeoutNccl, PeerNeverSends) {
  const std::string why = NcclCfg::skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks, running on " << world_size();
  auto streams = compat::partition_space(Kokkos::Cuda(), 1);
  auto comm    = NcclCfg::comm::from_mpi(MPI_COMM_WORLD, streams[0]);
  comm.set_timeout(1.0);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  Kokkos::View<float*, Kokkos::CudaSpace> buf("timeout_buf", 16), other("other", 16);
  // NCCL connects a pair of ranks on their first operation, inside the host call
  // and outside any watchdog; connect 0 <-> 1 first so that the unmatched
  // receive below is enqueued and only its completion never comes.
  if (comm.rank() < 2) {
    auto warm = sendrecv(comm, other, 1 - comm.rank(), buf, 1 - comm.rank());
    warm.wait();
  }
  if (comm.rank() == 0) {
    auto req = irecv(comm, buf, 1, 4242);
    expect_throw_with<CommunicationError>([&] { req.wait(); },
                                          {"timed out after", "irecv from peer 1", "64 bytes", "ncclCommAbort"});
    EXPECT_TRUE(comm.aborted());
    expect_throw_with<CommunicationError>([&] { auto q = isend(comm, buf, 1); }, {"aborted"});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (comm.rank() != 0) comm.abort();  // its peer is gone; do not wait in ncclCommDestroy
}
#endif

TEST(CommTimeoutSettings, EnvironmentIsParsed) {
  const char* old_t = std::getenv("DISTATTN_COMM_TIMEOUT");
  const char* old_p = std::getenv("DISTATTN_COMM_TIMEOUT_POLICY");
  const std::string saved_t = old_t ? old_t : "", saved_p = old_p ? old_p : "";
  setenv("DISTATTN_COMM_TIMEOUT", "2.5", 1);
  setenv("DISTATTN_COMM_TIMEOUT_POLICY", "throw", 1);
  auto s = TimeoutSettings::from_environment();
  EXPECT_DOUBLE_EQ(s.seconds, 2.5);
  EXPECT_EQ(s.policy, TimeoutPolicy::Throw);
  setenv("DISTATTN_COMM_TIMEOUT", "ten", 1);
  expect_throw_with<InvalidArgument>([] { TimeoutSettings::from_environment(); }, {"DISTATTN_COMM_TIMEOUT='ten'"});
  setenv("DISTATTN_COMM_TIMEOUT", "-3", 1);
  expect_throw_with<InvalidArgument>([] { TimeoutSettings::from_environment(); }, {"DISTATTN_COMM_TIMEOUT='-3'"});
  setenv("DISTATTN_COMM_TIMEOUT", "5", 1);
  setenv("DISTATTN_COMM_TIMEOUT_POLICY", "ignore", 1);
  expect_throw_with<InvalidArgument>([] { TimeoutSettings::from_environment(); }, {"DISTATTN_COMM_TIMEOUT_POLICY='ignore'"});
  setenv("DISTATTN_COMM_TIMEOUT_POLICY", "throw", 1);
  setenv("DISTATTN_COMM_TIMEOUT_STEPS", "0", 1);
  EXPECT_DOUBLE_EQ(TimeoutSettings::from_environment().step_multiple, 0.0) << "0 turns the derived budget off";
  setenv("DISTATTN_COMM_TIMEOUT_STEPS", "-1", 1);
  expect_throw_with<InvalidArgument>([] { TimeoutSettings::from_environment(); },
                                     {"DISTATTN_COMM_TIMEOUT_STEPS='-1'", ">= 0"});
  setenv("DISTATTN_COMM_TIMEOUT_STEPS", "4x", 1);
  expect_throw_with<InvalidArgument>([] { TimeoutSettings::from_environment(); }, {"DISTATTN_COMM_TIMEOUT_STEPS='4x'"});
  unsetenv("DISTATTN_COMM_TIMEOUT");
  unsetenv("DISTATTN_COMM_TIMEOUT_POLICY");
  unsetenv("DISTATTN_COMM_TIMEOUT_STEPS");
  auto d = TimeoutSettings::from_environment();
  EXPECT_DOUBLE_EQ(d.seconds, 30.0) << "a stuck peer must end a job of short steps within a minute";
  EXPECT_DOUBLE_EQ(d.step_multiple, 10.0);
  EXPECT_EQ(d.policy, TimeoutPolicy::Abort) << "production default: abort the job, never hang";
  if (old_t) setenv("DISTATTN_COMM_TIMEOUT", saved_t.c_str(), 1);
  if (old_p) setenv("DISTATTN_COMM_TIMEOUT_POLICY", saved_p.c_str(), 1);
}

/// The budget is max(floor, multiple x longest gap between waits).
TEST(CommTimeoutSettings, BudgetFollowsTheLongestGap) {
  TimeoutSettings s;
  s.seconds       = 0.5;
  s.step_multiple = 10.0;
  s.pace          = std::make_shared<Impl::StepPace>();
  EXPECT_DOUBLE_EQ(s.begin_wait(), 0.5) << "no gap yet: the floor";
  s.end_wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // one "step" of compute
  const double after_step = s.begin_wait();
  EXPECT_GE(after_step, 2.0);
  EXPECT_LT(after_step, 10.0);
  s.end_wait();
  EXPECT_DOUBLE_EQ(s.begin_wait(), after_step) << "a short gap must not shrink the budget";
  s.end_wait();
  for (int i = 0; i < Impl::StepPace::kWindow; ++i) {
    s.begin_wait();
    s.end_wait();
  }
  EXPECT_LT(s.begin_wait(), 1.0) << "the long gap left the window: back near the floor";
  s.end_wait();
  s.step_multiple = 0.0;
  EXPECT_DOUBLE_EQ(s.begin_wait(), 0.5) << "multiple 0: the floor alone";
  EXPECT_NE(s.describe_budget(0.5).find("DISTATTN_COMM_TIMEOUT_STEPS"), std::string::npos);
}

/// A peer whose step takes longer than the floor is no fault: rank 0 learns its
/// own step time (0.4 s), so its wait for rank 1's 2 s step gets 10 x 0.4 s,
/// although the floor is 0.5 s.
template <class Cfg>
void slow_step_case(std::uint64_t seed) {
  using Mem = typename Cfg::exec::memory_space;
  {
    auto comm   = Cfg::make_world();  // a fresh step pace
    const int r = comm.rank();
    comm.set_timeout(r == 0 ? 0.5 : kTestTimeoutSeconds);
    comm.set_timeout_policy(TimeoutPolicy::Throw);
    Kokkos::View<float*, Mem> out("out", 16), in("in", 16);
    fill(out, seed, r);
    if (r < 2) {
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));  // rank 0's step
      auto a = sendrecv(comm, out, 1 - r, in, 1 - r);
      a.wait();
      if (r == 1) std::this_thread::sleep_for(std::chrono::seconds(2));  // rank 1's slower step
      const auto start = std::chrono::steady_clock::now();
      auto b           = sendrecv(comm, out, 1 - r, in, 1 - r);
      EXPECT_NO_THROW(b.wait()) << "a step 5x this rank's own is legitimate";
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (r == 0) { EXPECT_GT(waited, 1.0) << "rank 0 must have waited for rank 1's step"; }
      auto h = host_copy(in);
      EXPECT_EQ(mismatches(h, 0, 16, [&](std::size_t i) { return value_of<float>(seed, 1 - r, i); }), 0u);
    }
    auto done = barrier(comm);
    done.wait();
  }
}

TYPED_TEST(CommTimeoutMpi, BudgetCoversASlowStep) {
  if (this->size() < 2) GTEST_SKIP() << "needs 2 ranks, running on " << this->size();
  slow_step_case<TypeParam>(this->seed());
}

}  // namespace
}  // namespace DistAttn::Test
