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

/// Runs on N communicators; `comm_of` maps a phase to the index of its communicator.
template <class CommSpace, class Exec, class Recorder, class Phase, std::size_t N>
class PhasedPosts {
 public:
  using Comm  = Communicator<CommSpace, Exec>;
  using Req   = Request<CommSpace>;
  using Comms = std::array<Comm*, N>;

  PhasedPosts(const Exec& compute, Recorder& rec, const Comms& comms, int (*comm_of)(Phase))
      : compute_(compute), rec_(rec), comms_(comms), comm_of_(comm_of) {}

  template <class SV, class RV>
  void sendrecv(std::vector<Req>& reqs, Phase p, const SV& send, int dst, const RV& recv, int src, int tag) {
    post(reqs, p, byte_size(send), byte_size(recv),
         [&](Comm& c) { return DistAttn::sendrecv(c, send, dst, recv, src, tag); });
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
    post(reqs, p, b, b, [&](Comm& c) { return DistAttn::reduce_scatter_sum(c, send, recv); });
  }
  /// Every request posted here receives data, so waiting on it may take the
  /// pass's receive delay (ExecutorOptions::recv_delay_ms).
  void wait(std::vector<Req>& reqs) { rec_.wait_on(reqs, true); }

  /// Bytes each communicator carries from begin_pass() to end_pass(), from its
  /// own counters (what the per-phase counts cannot show: which link carried them).
  void begin_pass() {
    for (std::size_t i = 0; i < N; ++i) {
      sent0_[i] = comms_[i]->counters().bytes_sent();
      recv0_[i] = comms_[i]->counters().bytes_received();
    }
  }
  void end_pass(std::array<std::uint64_t, N>& sent, std::array<std::uint64_t, N>& received) const {
    for (std::size_t i = 0; i < N; ++i) {
      sent[i]     = comms_[i]->counters().bytes_sent() - sent0_[i];
      received[i] = comms_[i]->counters().bytes_received() - recv0_[i];
    }
  }

 private:
  Comm& comm(Phase p) const { return *comms_[std::size_t(comm_of_(p))]; }
  std::uint64_t others(Phase p) const { return std::uint64_t(comm(p).size() - 1); }
  template <class F>
  void post(std::vector<Req>& reqs, Phase p, std::uint64_t sent, std::uint64_t received, F&& start) {
    if (rec_.skip_transfers()) return;
    Comm& c = comm(p);
    c.depend_on(compute_);
    reqs.push_back(start(c));
    rec_.sent(p, sent);
    rec_.received(p, received);
    rec_.posted();
  }

  Exec compute_;
  Recorder& rec_;
  Comms comms_;
  int (*comm_of_)(Phase);
  std::array<std::uint64_t, N> sent0_{}, recv0_{};
};

}  // namespace DistAttn::Impl
