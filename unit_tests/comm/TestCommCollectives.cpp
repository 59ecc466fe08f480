// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Collectives of every transport: all_gather (rank-ordered concatenation),
// reduce_scatter_sum (rank-ordered blocks), all_reduce_sum, all_to_all, barrier; counters follow
// the ring convention of comm/counters.hpp exactly.

#include "comm_test_helpers.hpp"

#include <cmath>

namespace DistAttn::Test {
namespace {

template <class Cfg>
using CommCollectives = CommTest<Cfg>;
TYPED_TEST_SUITE(CommCollectives, CommConfigs, CfgNames);

template <class Comm>
void expect_ring_counters(const Comm& comm, std::uint64_t bytes_per_step) {
  const int P = comm.size(), r = comm.rank();
  const std::uint64_t steps = std::uint64_t(P - 1);
  const auto& c             = comm.counters();
  EXPECT_EQ(c.bytes_sent(), steps * bytes_per_step);
  EXPECT_EQ(c.bytes_received(), steps * bytes_per_step);
  EXPECT_EQ(c.messages_sent(), steps);
  EXPECT_EQ(c.messages_received(), steps);
  if (P > 1) {
    EXPECT_EQ(c.peer((r + 1) % P).bytes_sent, steps * bytes_per_step);
    EXPECT_EQ(c.peer((r + P - 1) % P).bytes_received, steps * bytes_per_step);
  }
}

template <class Cfg, class T>
void all_gather_case(typename Cfg::comm& comm, std::uint64_t seed) {
  using Mem   = typename Cfg::exec::memory_space;
  const int P = comm.size(), r = comm.rank();
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> send("send", 4, 3);
  Kokkos::View<T***, Kokkos::LayoutRight, Mem> recv("recv", P, 4, 3);
  fill(send, seed, r);
  fill(recv, seed ^ 7, r);
  comm.counters().reset();
  auto req = all_gather(comm, send, recv);
  req.wait();
  auto h             = host_copy(recv);
  const std::size_t n = send.size();
  for (int q = 0; q < P; ++q)
    EXPECT_EQ(mismatches(h, q * n, (q + 1) * n, [&](std::size_t i) { return value_of<T>(seed, q, i - q * n); }), 0u)
        << "block " << q << " on rank " << r << " (seed " << seed << ")";
  expect_ring_counters(comm, n * sizeof(T));
}

TYPED_TEST(CommCollectives, AllGather) {
  using Cfg = TypeParam;
  all_gather_case<Cfg, float>(this->world(), this->seed());
  all_gather_case<Cfg, double>(this->world(), this->seed() + 1);
  all_gather_case<Cfg, std::int32_t>(this->world(), this->seed() + 2);
  if constexpr (compat::has_bhalf) all_gather_case<Cfg, compat::bhalf_t>(this->world(), this->seed() + 3);
}

/// Every element j of h must be the sum over ranks q of term(q, j), within tol.
template <class T, class H, class Term>
void expect_rank_sums(const H& h, int P, double tol, Term term, int rank, std::uint64_t seed) {
  std::size_t bad = 0;
  double worst    = 0;
  for (std::size_t j = 0; j < h.size(); ++j) {
    double expected = 0;
    for (int q = 0; q < P; ++q) expected += double(term(q, j));
    const double err = std::abs(double(h(j)) - expected);
    worst            = std::max(worst, err);
    bad += err > tol ? 1 : 0;
  }
  EXPECT_EQ(bad, 0u) << "worst error " << worst << " > " << tol << " on rank " << rank << " (seed " << seed << ")";
}

template <class Cfg, class T>
void reduce_scatter_case(typename Cfg::comm& comm, std::uint64_t seed, double tol) {
  using Mem   = typename Cfg::exec::memory_space;
  const int P = comm.size(), r = comm.rank();
  const std::size_t m = 257;  // odd, so block boundaries are not aligned to anything
  Kokkos::View<T*, Mem> send("send", P * m), recv("recv", m);
  fill(send, seed, r);
  fill(recv, seed ^ 9, r);
  comm.counters().reset();
  auto req = reduce_scatter_sum(comm, send, recv);
  req.wait();
  expect_rank_sums<T>(host_copy(recv), P, tol, [&](int q, std::size_t j) { return value_of<T>(seed, q, r * m + j); },
                      r, seed);
  expect_ring_counters(comm, m * sizeof(T));
}

TYPED_TEST(CommCollectives, ReduceScatterSum) {
  using Cfg   = TypeParam;
  const int P = this->size();
  // Sums of P terms in [-1, 1): rounding error <= P * eps; wrong blocks give O(1).
  reduce_scatter_case<Cfg, float>(this->world(), this->seed(), 4.0 * P * 6e-8);
  reduce_scatter_case<Cfg, double>(this->world(), this->seed() + 1, 4.0 * P * 1.2e-16);
}

template <class Cfg, class T>
void all_reduce_case(typename Cfg::comm& comm, std::uint64_t seed, double tol) {
  using Mem   = typename Cfg::exec::memory_space;
  const int P = comm.size(), r = comm.rank();
  const std::size_t n = 301;  // not a multiple of any P tested: the counted blocks round up
  Kokkos::View<T*, Mem> send("send", n), recv("recv", n);
  fill(send, seed, r);
  fill(recv, seed ^ 5, r);
  comm.counters().reset();
  auto req = all_reduce_sum(comm, send, recv);
  req.wait();
  expect_rank_sums<T>(host_copy(recv), P, tol, [&](int q, std::size_t j) { return value_of<T>(seed, q, j); }, r,
                      seed);
  const std::uint64_t block = (n + P - 1) / P * sizeof(T), steps = 2 * std::uint64_t(P - 1);
  const auto& c             = comm.counters();
  EXPECT_EQ(c.bytes_sent(), steps * block);
  EXPECT_EQ(c.bytes_received(), steps * block);
  EXPECT_EQ(c.messages_sent(), steps);
}

TYPED_TEST(CommCollectives, AllReduceSum) {
  using Cfg   = TypeParam;
  const int P = this->size();
  all_reduce_case<Cfg, float>(this->world(), this->seed(), 4.0 * P * 6e-8);
  all_reduce_case<Cfg, double>(this->world(), this->seed() + 1, 4.0 * P * 1.2e-16);
}

template <class Cfg, class T>
void all_to_all_case(typename Cfg::comm& comm, std::uint64_t seed) {
  using Mem   = typename Cfg::exec::memory_space;
  const int P = comm.size(), r = comm.rank();
  const std::size_t b = 13;
  Kokkos::View<T**, Kokkos::LayoutRight, Mem> send("send", P, b), recv("recv", P, b);
  fill(send, seed, r);  // block q = elements [q*b, (q+1)*b) goes to rank q
  fill(recv, seed ^ 11, r);
  comm.counters().reset();
  auto req = all_to_all(comm, send, recv);
  req.wait();
  auto h = host_copy(recv);
  for (int s = 0; s < P; ++s)
    EXPECT_EQ(mismatches(h, s * b, (s + 1) * b, [&](std::size_t i) { return value_of<T>(seed, s, r * b + (i - s * b)); }), 0u)
        << "block from rank " << s << " on rank " << r << " (seed " << seed << ")";
  const auto& c = comm.counters();
  EXPECT_EQ(c.bytes_sent(), std::uint64_t(P - 1) * b * sizeof(T));
  EXPECT_EQ(c.bytes_received(), std::uint64_t(P - 1) * b * sizeof(T));
  EXPECT_EQ(c.messages_sent(), std::uint64_t(P - 1));
  for (int q = 0; q < P; ++q)
    EXPECT_EQ(c.peer(q).bytes_sent, q == r ? 0u : b * sizeof(T)) << "peer " << q;
}

TYPED_TEST(CommCollectives, AllToAll) {
  using Cfg = TypeParam;
  all_to_all_case<Cfg, double>(this->world(), this->seed());
  all_to_all_case<Cfg, std::int64_t>(this->world(), this->seed() + 1);
}

TYPED_TEST(CommCollectives, BarrierCountsNothing) {
  auto& comm = this->world();
  for (int i = 0; i < 3; ++i) {
    auto req = barrier(comm);
    req.wait();
  }
  EXPECT_EQ(comm.counters().total(), PeerTraffic{});
  comm.counters().record_send(0, 5);
  comm.counters().reset();
  EXPECT_EQ(comm.counters().total(), PeerTraffic{});
  EXPECT_TRUE(comm.counters().by_peer().empty());
}

}  // namespace
}  // namespace DistAttn::Test
