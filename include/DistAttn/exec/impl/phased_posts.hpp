// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file exec/impl/phased_posts.hpp
/// Posting for executors that run on several communicators (a process grid's
/// world, rows and columns): each transfer names its phase, the phase picks the
/// communicator, and the bytes count under the phase in the pass's stats
/// (PassRecorder). Like RecordedBatch for point-to-point batches, it carries
/// nothing when the pass skips transfers (ExecutorOptions::compute_only), so the
/// executor's code states only which views go where.
///
/// Every post first makes the communicator wait for the compute instance: sends
/// read data produced there, and a receive slot may still be read by a tile.

#include <DistAttn/comm.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace DistAttn::Impl {

/// `CommOf` maps a phase to the communicator it runs on (a callable Phase -> Comm&).
template <class CommSpace, class Exec, class Recorder, class Phase, class CommOf>
class PhasedPosts {
 public:
  using Comm = Communicator<CommSpace, Exec>;
  using Req  = Request<CommSpace>;

  PhasedPosts(const Exec& compute, Recorder& rec, CommOf comm_of) : compute_(compute), rec_(rec), comm_of_(comm_of) {}

  template <class SV, class RV>
  void sendrecv(std::vector<Req>& reqs, Phase p, const SV& send, int dst, const RV& recv, int src, int tag) {
    post(reqs, p, byte_size(send), byte_size(recv), [&](Comm& c) { return DistAttn::sendrecv(c, send, dst, recv, src, tag); });
  }
  /// Every rank receives the other size-1 ranks' `send`.
  template <class SV, class RV>
  void all_gather(std::vector<Req>& reqs, Phase p, const SV& send, const RV& recv) {
    const std::uint64_t b = others(p) * byte_size(send);
    post(reqs, p, b, b, [&](Comm& c) { return DistAttn::all_gather(c, send, recv); });
  }
  /// Every rank sends the other size-1 ranks their shard and receives its own `recv` from each.
  template <class SV, class RV>
  void reduce_scatter(std::vector<Req>& reqs, Phase p, const SV& send, const RV& recv) {
    const std::uint64_t b = others(p) * byte_size(recv);
    post(reqs, p, b, b, [&](Comm& c) { return reduce_scatter_sum(c, send, recv); });
  }

 private:
  std::uint64_t others(Phase p) { return std::uint64_t(comm_of_(p).size() - 1); }
  template <class F>
  void post(std::vector<Req>& reqs, Phase p, std::uint64_t sent, std::uint64_t received, F&& start) {
    if (rec_.skip_transfers()) return;
    Comm& comm = comm_of_(p);
    comm.depend_on(compute_);
    reqs.push_back(start(comm));
    rec_.sent(p, sent);
    rec_.received(p, received);
    rec_.posted();
  }

  Exec compute_;
  Recorder& rec_;
  CommOf comm_of_;
};

/// Bytes each of N communicators carried during a pass, from their own counters
/// (what PassStats' per-phase counts cannot show: which link carried them).
template <std::size_t N>
class CommBytes {
 public:
  template <class Comm>
  void begin(const std::array<Comm*, N>& comms) {
    for (std::size_t i = 0; i < N; ++i) {
      sent0_[i] = comms[i]->counters().bytes_sent();
      recv0_[i] = comms[i]->counters().bytes_received();
    }
  }
  template <class Comm>
  void end(const std::array<Comm*, N>& comms, std::array<std::uint64_t, N>& sent,
           std::array<std::uint64_t, N>& received) const {
    for (std::size_t i = 0; i < N; ++i) {
      sent[i]     = comms[i]->counters().bytes_sent() - sent0_[i];
      received[i] = comms[i]->counters().bytes_received() - recv0_[i];
    }
  }

 private:
  std::array<std::uint64_t, N> sent0_{}, recv0_{};
};

}  // namespace DistAttn::Impl
