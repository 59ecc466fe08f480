// Failure behaviour: bad arguments throw InvalidArgument naming the argument
// before anything is posted (so no rank hangs), and a peer that never answers
// makes wait() fail after the timeout with a message that names the operation,
// peer, tag, bytes and elapsed time instead of hanging.

#include "comm_test_helpers.hpp"

#include <cstdlib>

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
/// cancelled, and a later message with the same tag is not swallowed by it.
template <class Cfg>
void mpi_timeout_case(typename Cfg::comm& world, std::uint64_t seed) {
  using Mem   = typename Cfg::exec::memory_space;
  auto comm   = world.duplicate();  // private message space for this test
  const int r = comm.rank();
  // Only rank 0's wait is meant to expire; the others wait for it in a barrier.
  comm.set_timeout(r == 0 ? 1.0 : kTestTimeoutSeconds);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  constexpr int kTag = 4242;
  Kokkos::View<float*, Mem> buf("timeout_buf", 16);
  fill(buf, seed ^ 17, r);
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
  }
  {
    auto b = barrier(comm);  // rank 1 sends only after rank 0 cancelled
    b.wait();
  }
  if (r == 1) {
    Kokkos::View<float*, Mem> msg("msg", 16);
    fill(msg, seed, 1);
    auto s = isend(comm, msg, 0, kTag);
    s.wait();
  } else if (r == 0) {
    auto req = irecv(comm, buf, 1, kTag);
    req.wait();
    auto h = host_copy(buf);
    EXPECT_EQ(mismatches(h, 0, 16, [&](std::size_t i) { return value_of<float>(seed, 1, i); }), 0u)
        << "the message after the cancelled receive was lost or corrupted";
  }
  auto b = barrier(comm);
  b.wait();
}

template <class Cfg>
using CommTimeoutMpi = CommTest<Cfg>;
TYPED_TEST_SUITE(CommTimeoutMpi, MpiConfigs, CfgNames);

TYPED_TEST(CommTimeoutMpi, PeerNeverSends) {
  if (this->size() < 2) GTEST_SKIP() << "needs 2 ranks (rank 1 must stay silent), running on " << this->size();
  mpi_timeout_case<TypeParam>(this->world(), this->seed());
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
  unsetenv("DISTATTN_COMM_TIMEOUT");
  unsetenv("DISTATTN_COMM_TIMEOUT_POLICY");
  auto d = TimeoutSettings::from_environment();
  EXPECT_DOUBLE_EQ(d.seconds, 600.0);
  EXPECT_EQ(d.policy, TimeoutPolicy::Abort) << "production default: abort the job, never hang";
  if (old_t) setenv("DISTATTN_COMM_TIMEOUT", saved_t.c_str(), 1);
  if (old_p) setenv("DISTATTN_COMM_TIMEOUT_POLICY", saved_p.c_str(), 1);
}

}  // namespace
}  // namespace DistAttn::Test
