// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Point-to-point operations of every transport: ring exchanges with isend/irecv
// and sendrecv, waits on another execution-space instance, depend_on, wait_all,
// split/duplicate, move-only handles. Counters must equal the exact byte counts.

#include "comm_test_helpers.hpp"

#include <DistAttn/comm/p2p_batch.hpp>

#include <vector>

namespace DistAttn::Test {
namespace {

template <class Cfg>
using CommP2P = CommTest<Cfg>;
TYPED_TEST_SUITE(CommP2P, CommConfigs, CfgNames);

/// One ring step: every rank sends `send` to rank+1 and receives from rank-1.
/// MPI posts the receive first; NCCL runs separately posted operations in stream
/// order, so even ranks send first and odd ranks receive first (no cycle).
template <class Cfg, class SendView, class RecvView>
void ring_isend_irecv(typename Cfg::comm& comm, const SendView& send, const RecvView& recv, int tag) {
  const int P = comm.size(), r = comm.rank();
  const int right = (r + 1) % P, left = (r + P - 1) % P;
  if (!Cfg::is_nccl || r % 2 == 1) {
    auto rr = irecv(comm, recv, left, tag);
    auto rs = isend(comm, send, right, tag);
    rs.wait();
    rr.wait();
  } else {
    auto rs = isend(comm, send, right, tag);
    auto rr = irecv(comm, recv, left, tag);
    rs.wait();
    rr.wait();
  }
}

template <class Cfg, class View>
void check_ring(typename Cfg::comm& comm, const View& send, const View& recv, std::uint64_t seed, int tag) {
  using T      = std::remove_cv_t<typename View::value_type>;
  const int P  = comm.size(), r = comm.rank();
  const int left = (r + P - 1) % P, right = (r + 1) % P;
  fill(send, seed, r);
  fill(recv, seed ^ 0x5eed, r);  // anything but the expected values
  comm.counters().reset();
  ring_isend_irecv<Cfg>(comm, send, recv, tag);
  auto h = host_copy(recv);
  EXPECT_EQ(mismatches(h, 0, h.size(), [&](std::size_t i) { return value_of<T>(seed, left, i); }), 0u)
      << "rank " << r << " received wrong data from " << left << " (seed " << seed << ", view "
      << recv.label() << ")";
  const std::uint64_t bytes = send.size() * sizeof(T);
  EXPECT_EQ(comm.counters().bytes_sent(), bytes);
  EXPECT_EQ(comm.counters().bytes_received(), bytes);
  EXPECT_EQ(comm.counters().messages_sent(), 1u);
  EXPECT_EQ(comm.counters().messages_received(), 1u);
  EXPECT_EQ(comm.counters().peer(right).bytes_sent, bytes);
  EXPECT_EQ(comm.counters().peer(left).bytes_received, bytes);
}

template <class Cfg, class T>
void ring_all_shapes(typename Cfg::comm& comm, std::uint64_t seed) {
  using Mem = typename Cfg::exec::memory_space;
  Kokkos::View<T***, Kokkos::LayoutRight, Mem> s3("send3", 3, 5, 7), r3("recv3", 3, 5, 7);
  check_ring<Cfg>(comm, s3, r3, seed, 3);
  Kokkos::View<T**, Kokkos::LayoutLeft, Mem> s2("send2", 11, 4), r2("recv2", 11, 4);
  check_ring<Cfg>(comm, s2, r2, seed + 1, 2);
  Kokkos::View<T*, Mem> s1("send1", 1000), r1("recv1", 1000);
  check_ring<Cfg>(comm, s1, r1, seed + 2, 1);
}

TYPED_TEST(CommP2P, RingIsendIrecv) {
  using Cfg = TypeParam;
  if (Cfg::is_nccl && this->size() == 1)
    GTEST_SKIP() << "NCCL: an unguarded send to oneself waits for a receive queued behind it; "
                    "self-exchange is covered by sendrecv";
  auto& comm = this->world();
  ring_all_shapes<Cfg, float>(comm, this->seed());
  ring_all_shapes<Cfg, double>(comm, this->seed() + 10);
  ring_all_shapes<Cfg, std::int32_t>(comm, this->seed() + 20);
  ring_all_shapes<Cfg, std::int64_t>(comm, this->seed() + 30);
  if constexpr (compat::has_half) ring_all_shapes<Cfg, compat::half_t>(comm, this->seed() + 40);
  if constexpr (compat::has_bhalf) ring_all_shapes<Cfg, compat::bhalf_t>(comm, this->seed() + 50);
}

/// sendrecv with every shift k: send to rank+k, receive from rank-k (different
/// peers for P > 2, oneself for k == 0 mod P).
template <class Cfg, class T>
void sendrecv_shifts(typename Cfg::comm& comm, std::uint64_t seed) {
  using Mem   = typename Cfg::exec::memory_space;
  const int P = comm.size(), r = comm.rank();
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> send("send", 17, 9), recv("recv", 17, 9);
  const std::uint64_t bytes = send.size() * sizeof(T);
  comm.counters().reset();
  const int shifts = P == 1 ? 1 : P - 1;
  for (int k = 1; k <= shifts; ++k) {
    const int dst = (r + k) % P, src = (r - k % P + P) % P;
    fill(send, seed, r, std::size_t(k) * 1000);
    fill(recv, seed ^ 0xbad, r);
    auto req = sendrecv(comm, send, dst, recv, src, k);
    req.wait();
    EXPECT_FALSE(req.pending());
    auto h = host_copy(recv);
    EXPECT_EQ(mismatches(h, 0, h.size(),
                         [&](std::size_t i) { return value_of<T>(seed, src, std::size_t(k) * 1000 + i); }),
              0u)
        << "shift " << k << ": rank " << r << " got wrong data from " << src << " (seed " << seed << ")";
  }
  EXPECT_EQ(comm.counters().bytes_sent(), std::uint64_t(shifts) * bytes);
  EXPECT_EQ(comm.counters().bytes_received(), std::uint64_t(shifts) * bytes);
  EXPECT_EQ(comm.counters().messages_sent(), std::uint64_t(shifts));
  for (int k = 1; k <= shifts; ++k) {
    EXPECT_GE(comm.counters().peer((r + k) % P).bytes_sent, bytes);
    EXPECT_GE(comm.counters().peer((r - k % P + P) % P).bytes_received, bytes);
  }
}

TYPED_TEST(CommP2P, SendRecvShifts) {
  using Cfg  = TypeParam;
  auto& comm = this->world();
  sendrecv_shifts<Cfg, float>(comm, this->seed());
  sendrecv_shifts<Cfg, double>(comm, this->seed() + 1);
  sendrecv_shifts<Cfg, std::int32_t>(comm, this->seed() + 2);
  if constexpr (compat::has_half) sendrecv_shifts<Cfg, compat::half_t>(comm, this->seed() + 3);
  if constexpr (compat::has_bhalf) sendrecv_shifts<Cfg, compat::bhalf_t>(comm, this->seed() + 4);
}

/// The data is visible to another instance after req.wait(other) + other's fence
/// (NCCL: a stream dependency, MPI: a host wait).
TYPED_TEST(CommP2P, WaitOnAnotherInstance) {
  using Cfg   = TypeParam;
  using Mem   = typename Cfg::exec::memory_space;
  auto& comm  = this->world();
  const int P = comm.size(), r = comm.rank();
  auto parts  = compat::partition_space(comm.exec(), 2);
  Kokkos::View<double*, Mem> send("send", 4096), recv("recv", 4096), copy("copy", 4096);
  fill(send, this->seed(), r);
  fill(recv, this->seed() ^ 1, r);
  auto req = sendrecv(comm, send, (r + 1) % P, recv, (r + P - 1) % P);
  req.wait(parts[1]);
  Kokkos::deep_copy(parts[1], copy, recv);  // ordered after the receive on parts[1]
  compat::fence(parts[1], "TestCommP2P: consumer done");
  auto h = host_copy(copy);
  EXPECT_EQ(mismatches(h, 0, h.size(), [&](std::size_t i) { return value_of<double>(this->seed(), (r + P - 1) % P, i); }), 0u);
  req.wait();  // completing an already-consumed request is harmless
}

/// Data produced on another instance is sent correctly after depend_on(producer).
TYPED_TEST(CommP2P, DependOnProducer) {
  using Cfg   = TypeParam;
  using Mem   = typename Cfg::exec::memory_space;
  auto& comm  = this->world();
  const int P = comm.size(), r = comm.rank();
  auto parts  = compat::partition_space(comm.exec(), 2);
  Kokkos::View<float*, Mem> send("send", 1 << 16), recv("recv", 1 << 16);
  Kokkos::View<float*, Mem> source("source", 1 << 16);
  fill(source, this->seed(), r);
  fill(send, this->seed() ^ 2, r);  // stale contents the producer overwrites
  Kokkos::deep_copy(parts[1], send, source);  // asynchronous on the producer instance
  comm.depend_on(parts[1]);
  auto req = sendrecv(comm, send, (r + 1) % P, recv, (r + P - 1) % P);
  req.wait();
  auto h = host_copy(recv);
  EXPECT_EQ(mismatches(h, 0, h.size(), [&](std::size_t i) { return value_of<float>(this->seed(), (r + P - 1) % P, i); }), 0u);
}

/// Several exchanges in flight at once, completed by wait_all; and test() polling.
TYPED_TEST(CommP2P, WaitAllAndTest) {
  using Cfg   = TypeParam;
  using Mem   = typename Cfg::exec::memory_space;
  auto& comm  = this->world();
  const int P = comm.size(), r = comm.rank();
  constexpr int kMessages = 4;
  std::vector<Kokkos::View<int*, Mem>> sends, recvs;
  std::vector<Request<typename Cfg::space>> reqs;
  for (int m = 0; m < kMessages; ++m) {
    sends.emplace_back("send", 100 + m);
    recvs.emplace_back("recv", 100 + m);
    fill(sends.back(), this->seed(), r, std::size_t(m) * 10000);
    fill(recvs.back(), this->seed() ^ 3, r);
  }
  for (int m = 0; m < kMessages; ++m) {
    const int k = 1 + m % (P > 1 ? P - 1 : 1);
    reqs.push_back(sendrecv(comm, sends[m], (r + k) % P, recvs[m], (r - k % P + P) % P, m));
  }
  wait_all(reqs);
  for (int m = 0; m < kMessages; ++m) {
    const int k = 1 + m % (P > 1 ? P - 1 : 1), src = (r - k % P + P) % P;
    auto h      = host_copy(recvs[m]);
    EXPECT_EQ(mismatches(h, 0, h.size(), [&](std::size_t i) { return value_of<int>(this->seed(), src, std::size_t(m) * 10000 + i); }), 0u)
        << "message " << m;
    EXPECT_FALSE(reqs[m].pending());
  }
  auto req = sendrecv(comm, sends[0], (r + 1) % P, recvs[0], (r + P - 1) % P, 99);
  Impl::PollClock clock;
  bool done = false;
  while (!(done = req.test()) && clock.elapsed() < kTestTimeoutSeconds) clock.pause();
  EXPECT_TRUE(done) << "test() never reported completion";
  auto h = host_copy(recvs[0]);
  EXPECT_EQ(mismatches(h, 0, h.size(), [&](std::size_t i) { return value_of<int>(this->seed(), (r + P - 1) % P, i); }), 0u);
}

TYPED_TEST(CommP2P, SplitAndDuplicate) {
  using Cfg   = TypeParam;
  using Mem   = typename Cfg::exec::memory_space;
  auto& comm  = this->world();
  const int P = comm.size(), r = comm.rank();
  // Ranks r % 3 == 2 opt out; the rest split by parity, ordered by descending rank.
  const int color = r % 3 == 2 ? -1 : r % 2;
  auto sub        = comm.split(color, P - 1 - r);
  if (color < 0) {
    EXPECT_FALSE(sub.has_value());
  } else {
    ASSERT_TRUE(sub.has_value());
    int expected_size = 0, expected_rank = 0;
    for (int q = 0; q < P; ++q) {
      if (q % 3 == 2 || q % 2 != color) continue;
      ++expected_size;
      if (q > r) ++expected_rank;
    }
    EXPECT_EQ(sub->size(), expected_size);
    EXPECT_EQ(sub->rank(), expected_rank);
    EXPECT_TRUE(sub->owns_handle());
  }

  auto dup = comm.duplicate();
  EXPECT_EQ(dup.size(), P);
  EXPECT_EQ(dup.rank(), r);
  dup.set_timeout(kTestTimeoutSeconds);
  dup.set_timeout_policy(TimeoutPolicy::Throw);
  Kokkos::View<double*, Mem> send("send", 64), recv("recv", 64);
  fill(send, this->seed(), r);
  auto req = sendrecv(dup, send, (r + 1) % P, recv, (r + P - 1) % P);
  req.wait();
  EXPECT_EQ(dup.counters().bytes_sent(), 64u * sizeof(double));
  EXPECT_EQ(comm.counters().bytes_sent(), 0u) << "counters are per communicator";

  // Moving keeps the handle; the moved-from request is empty and complete.
  auto moved = std::move(dup);
  EXPECT_EQ(moved.rank(), r);
  auto req2 = std::move(req);
  EXPECT_FALSE(req.pending());
  req.wait();
}

static_assert(!std::is_copy_constructible<Communicator<MpiSpace, Kokkos::DefaultHostExecutionSpace>>::value &&
                  std::is_nothrow_move_constructible<Communicator<MpiSpace, Kokkos::DefaultHostExecutionSpace>>::value,
              "Communicator is move-only");
static_assert(!std::is_copy_constructible<Request<MpiSpace>>::value &&
                  std::is_nothrow_move_constructible<Request<MpiSpace>>::value,
              "Request is move-only");

/// MPI tags keep messages apart: two messages received in the opposite order.
TEST(CommP2PMpi, TagsSeparateMessages) {
  auto& comm  = WorldCache<MpiDefaultCfg>::get();
  using Mem   = MpiDefaultCfg::exec::memory_space;
  const int P = comm.size(), r = comm.rank();
  const std::uint64_t seed = shared_seed();
  Kokkos::View<float*, Mem> a("a", 33), b("b", 33), ra("ra", 33), rb("rb", 33);
  fill(a, seed, r, 0);
  fill(b, seed, r, 1000);
  auto recv_b = irecv(comm, rb, (r + P - 1) % P, 2);
  auto recv_a = irecv(comm, ra, (r + P - 1) % P, 1);
  auto send_a = isend(comm, a, (r + 1) % P, 1);
  auto send_b = isend(comm, b, (r + 1) % P, 2);
  send_a.wait();
  send_b.wait();
  recv_a.wait();
  recv_b.wait();
  auto ha = host_copy(ra), hb = host_copy(rb);
  EXPECT_EQ(mismatches(ha, 0, 33, [&](std::size_t i) { return value_of<float>(seed, (r + P - 1) % P, i); }), 0u);
  EXPECT_EQ(mismatches(hb, 0, 33, [&](std::size_t i) { return value_of<float>(seed, (r + P - 1) % P, 1000 + i); }), 0u);
}


// A whole ring step as one P2PBatch, both directions at once and two messages
// per direction (the executors' pattern): on NCCL this is the case that
// deadlocks when the operations are posted one by one.
TYPED_TEST(CommP2P, BatchBothDirections) {
  using Cfg  = TypeParam;
  using Mem  = typename Cfg::exec::memory_space;
  auto& comm = this->world();
  const int P = comm.size(), r = comm.rank();
  const int right = (r + 1) % P, left = (r + P - 1) % P;
  const std::uint64_t seed = this->seed();
  Kokkos::View<float*, Mem> a("a", 257), b("b", 64), ra("ra", 257), rb("rb", 64), c("c", 100), rc("rc", 100);
  fill(a, seed, r);
  fill(b, seed + 1, r);
  fill(c, seed + 2, r);
  fill(ra, seed ^ 1, r);
  fill(rb, seed ^ 2, r);
  fill(rc, seed ^ 3, r);
  comm.counters().reset();
  P2PBatch<typename Cfg::space, typename Cfg::exec> batch(comm);
  EXPECT_TRUE(batch.empty());
  batch.send(a, right, 5);
  batch.send(b, right, 6);
  batch.recv(ra, left, 5);
  batch.recv(rb, left, 6);
  batch.send(c, left, 7);   // the other direction in the same group
  batch.recv(rc, right, 7);
  auto req = batch.post();
  EXPECT_TRUE(batch.empty());
  req.wait();
  auto ha = host_copy(ra), hb = host_copy(rb), hc = host_copy(rc);
  EXPECT_EQ(mismatches(ha, 0, ha.size(), [&](std::size_t i) { return value_of<float>(seed, left, i); }), 0u);
  EXPECT_EQ(mismatches(hb, 0, hb.size(), [&](std::size_t i) { return value_of<float>(seed + 1, left, i); }), 0u);
  EXPECT_EQ(mismatches(hc, 0, hc.size(), [&](std::size_t i) { return value_of<float>(seed + 2, right, i); }), 0u);
  EXPECT_EQ(comm.counters().bytes_sent(), (257u + 64u + 100u) * sizeof(float));
  EXPECT_EQ(comm.counters().messages_received(), 3u);
  Kokkos::View<float**, Kokkos::LayoutStride, Mem> strided(
      a.data(), Kokkos::LayoutStride(16, 2, 8, 1));
  EXPECT_THROW(batch.send(strided, right, 1), InvalidArgument);
  EXPECT_THROW(batch.recv(rb, P, 1), InvalidArgument);
}

}  // namespace
}  // namespace DistAttn::Test
