// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run's own collectives: the barrier before every pass, maxima and sums
// over ranks, agreement on a check, and gathers to rank 0 (result table, JSON,
// --check). A raw MPI_Barrier or MPI_Allreduce waits forever for a rank that
// stopped; these run on the library's point-to-point requests (P2PBatch), so every
// wait is bounded by the library's timeout rule (comm/timeout.hpp:
// DISTATTN_COMM_TIMEOUT, DISTATTN_COMM_TIMEOUT_STEPS times the longest gap between
// this communicator's waits, here about one pass). Each rank hears from the others
// directly, so a wait that expires lists the ranks it still waits for; the driver
// then prints that on the ranks that waited and ends the job (MPI_Abort). A call
// costs 2 (P - 1) messages of a few bytes per rank, between passes.

#include <DistAttn/comm.hpp>
#include <DistAttn/comm/p2p_batch.hpp>
#include <DistAttn/core/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace DistAttn::Driver {

/// An error every rank raises together (Sync::agree): the job can end normally.
class AgreedError : public InvalidArgument {
 public:
  explicit AgreedError(const std::string& what) : InvalidArgument(what) {}
};

class Sync {
 public:
  using HostExec = Kokkos::DefaultHostExecutionSpace;
  using Comm     = Communicator<MpiSpace, HostExec>;

  /// Collective (once, at start-up): a duplicate of `world`, so that the driver's
  /// messages never meet the executors'. Timeout settings from the environment
  /// (a malformed DISTATTN_COMM_TIMEOUT* throws before anything is posted).
  explicit Sync(MPI_Comm world) : world_(world), comm_(Comm::from_raw(world, HostExec()).duplicate()) {
    comm_.set_timeout_policy(TimeoutPolicy::Throw);  // wait() adds what the driver was doing, then aborts
  }
  Sync(const Sync&)            = delete;
  Sync& operator=(const Sync&) = delete;

  /// The job's communicator, for the executors.
  MPI_Comm world() const { return world_; }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }

  /// Every rank's `mine` (the same length on every rank) in rank order, on every rank.
  template <class T>
  std::vector<T> all_gather(const std::vector<T>& mine, const std::string& what) {
    const int P = size(), me = rank();
    const std::size_t n = mine.size();
    std::vector<T> all(std::size_t(P) * n);
    std::copy(mine.begin(), mine.end(), all.begin() + std::ptrdiff_t(std::size_t(me) * n));
    P2PBatch<MpiSpace, HostExec> batch(comm_);
    const int tag = next_tag();
    for (int q = 0; q < P; ++q)
      if (q != me) {
        batch.recv(host_view(all.data() + std::size_t(q) * n, n), q, tag);
        batch.send(host_view(mine.data(), n), q, tag);
      }
    wait(batch, what);
    return all;
  }
  void barrier(const std::string& what) { all_gather(std::vector<char>{1}, what); }
  template <class T>
  T max(T v, const std::string& what) {
    const auto a = all_gather(std::vector<T>{v}, what);
    return *std::max_element(a.begin(), a.end());
  }
  template <class T>
  T min(T v, const std::string& what) {
    const auto a = all_gather(std::vector<T>{v}, what);
    return *std::min_element(a.begin(), a.end());
  }
  template <class T>
  T sum(T v, const std::string& what) {
    T s{};
    for (const T& x : all_gather(std::vector<T>{v}, what)) s += x;
    return s;
  }

  /// `data` (`n` values, any n per rank) of every rank on rank 0, in rank order
  /// (rank 0's own included); empty elsewhere.
  template <class T>
  std::vector<std::vector<T>> gather(const T* data, std::size_t n, const std::string& what) {
    const int P = size(), me = rank();
    std::vector<std::uint64_t> counts(me == 0 ? std::size_t(P) : 1, std::uint64_t(n));
    P2PBatch<MpiSpace, HostExec> sizes(comm_);
    int tag = next_tag();
    for (int q = 1; q < P; ++q)
      if (me == 0) sizes.recv(host_view(&counts[std::size_t(q)], 1), q, tag);
    if (me != 0) sizes.send(host_view(counts.data(), 1), 0, tag);
    wait(sizes, what);
    std::vector<std::vector<T>> out;
    P2PBatch<MpiSpace, HostExec> batch(comm_);
    tag = next_tag();
    if (me == 0) {
      out.resize(std::size_t(P));
      out[0].assign(data, data + n);
      for (int q = 1; q < P; ++q) {
        out[std::size_t(q)].resize(std::size_t(counts[std::size_t(q)]));
        batch.recv(host_view(out[std::size_t(q)].data(), out[std::size_t(q)].size()), q, tag);
      }
    } else {
      batch.send(host_view(data, n), 0, tag);
    }
    wait(batch, what);
    return out;
  }

  /// Rank `root`'s `v` on every rank. The others may wait for it while `root`
  /// works alone: `expected_s` is how long that work may take (the gap between
  /// waits the budget is a multiple of; 0: the usual budget).
  template <class T>
  std::vector<T> from_rank(std::vector<T> v, int root, const std::string& what, double expected_s = 0) {
    const int P = size(), me = rank();
    const std::vector<std::uint64_t> n{v.size()};
    std::vector<std::uint64_t> count = n;
    P2PBatch<MpiSpace, HostExec> sizes(comm_), batch(comm_);
    int tag = next_tag();
    for (int q = 0; q < P; ++q)
      if (me == root && q != root) sizes.send(host_view(n.data(), 1), q, tag);
    if (me != root) sizes.recv(host_view(count.data(), 1), root, tag);
    const TimeoutSettings usual = comm_.timeout_settings();
    if (expected_s > 0) comm_.set_timeout(std::max(usual.seconds, usual.step_multiple * expected_s));
    wait(sizes, what);
    comm_.set_timeout(usual.seconds);
    v.resize(std::size_t(count[0]));
    tag = next_tag();
    for (int q = 0; q < P; ++q)
      if (me == root && q != root) batch.send(host_view(v.data(), v.size()), q, tag);
    if (me != root) batch.recv(host_view(v.data(), v.size()), root, tag);
    wait(batch, what);
    return v;
  }
  template <class T>
  T value_from_rank(T v, int root, const std::string& what, double expected_s = 0) {
    return from_rank(std::vector<T>{v}, root, what, expected_s)[0];
  }

  /// A check every rank makes, agreed: when `error` is not empty on some rank,
  /// every rank throws AgreedError with the first such rank's text, naming it
  /// ("rank 0 reports: ...").
  void agree(const std::string& error, const std::string& what) {
    const auto failed = all_gather(std::vector<int>{error.empty() ? 0 : 1}, what);
    const auto first  = std::find(failed.begin(), failed.end(), 1);
    if (first == failed.end()) return;
    const int root = int(first - failed.begin());
    const auto text = from_rank(std::vector<char>(error.begin(), error.end()), root, what);
    const long others = std::count(failed.begin(), failed.end(), 1) - 1;
    std::ostringstream os;
    os << "rank " << root;
    if (others > 0) os << " (and " << others << " other rank" << (others > 1 ? "s" : "") << ")";
    os << " reports: " << std::string(text.begin(), text.end());
    throw AgreedError(os.str());
  }

 private:
  template <class T>
  static auto host_view(T* p, std::size_t n) {
    return Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(p, n);
  }
  int next_tag() { return 1 + int(calls_++ % 30000); }
  /// Posts `batch` and waits; a wait past the timeout ends the job, naming what
  /// the driver was doing and (the library's message) the ranks still pending.
  void wait(P2PBatch<MpiSpace, HostExec>& batch, const std::string& what) {
    auto req = batch.post();
    try {
      req.wait();
    } catch (const CommunicationError& e) {
      std::ostringstream os;  // one write: lines of different ranks do not interleave
      os << "distattn-run (rank " << rank() << "): timed out in " << what
         << ", waiting for the ranks still pending below (stopped, dead or stuck in a pass): " << e.what() << '\n';
      std::cerr << os.str() << std::flush;
      // Not an exception: unwinding would tear down executors and communicators
      // whose peers may never answer.
      MPI_Abort(world_, 2);
    }
  }

  MPI_Comm world_;
  Comm comm_;
  unsigned long calls_ = 0;
};

}  // namespace DistAttn::Driver
