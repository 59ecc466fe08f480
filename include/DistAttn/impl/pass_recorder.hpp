#pragma once
/// @file impl/pass_recorder.hpp
/// The instrumentation and waiting every executor pass does the same way: device
/// time of the tiles (RegionTimer on the compute instance, read once at the end),
/// host time blocked in waits, bytes by kind, and the testing delay before waits
/// that receive data. One per executor; its stats are the executor's stats().

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/impl/region_timer.hpp>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace DistAttn::Impl {

template <class Exec, class Stats>
class PassRecorder {
 public:
  PassRecorder(const Exec& compute, const ExecutorOptions& opts)
      : compute_(compute), timer_(compute), delay_ms_(opts.recv_delay_ms), skip_(opts.compute_only) {}

  Stats& stats() { return stats_; }
  const Stats& stats() const { return stats_; }
  /// True when transfers are skipped (ExecutorOptions::compute_only).
  bool skip_transfers() const { return skip_; }

  /// Starts a pass: `fresh` becomes the stats (executor-specific fields set).
  void begin(const Stats& fresh) {
    stats_         = fresh;
    inner_compute_ = 0;
    timer_.reset();
    t0_ = std::chrono::steady_clock::now();
  }
  /// Ends a pass: waits for the compute instance, then reads the clocks.
  void end(const char* label) {
    compat::fence(compute_, label);
    stats_.compute_s = timer_.total() + inner_compute_;
    stats_.total_s   = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  /// One building-block call, timed on the compute instance.
  template <class F>
  void timed(F&& f) {
    timer_.begin();
    f();
    timer_.end();
    ++stats_.tasks;
  }
  template <class Kind>
  void sent(Kind k, std::uint64_t bytes) {
    stats_.bytes_sent[std::size_t(k)] += bytes;
  }
  template <class Kind>
  void received(Kind k, std::uint64_t bytes) {
    stats_.bytes_received[std::size_t(k)] += bytes;
  }
  void posted() { ++stats_.transfers; }
  void merged() { ++stats_.merges; }
  /// Adds a nested executor's pass (a hybrid's inner sequence executor): its
  /// tiles, waits and counts, and its bytes under kind `k`.
  template <class Inner, class Kind>
  void absorb(const Inner& inner, Kind k) {
    inner_compute_ += inner.compute_s;
    stats_.wait_s += inner.wait_s;
    stats_.tasks += inner.tasks;
    stats_.merges += inner.merges;
    stats_.transfers += inner.transfers;
    sent(k, inner.total_sent());
    received(k, inner.total_received());
  }

  /// Makes the compute instance wait for `reqs` (host wait on MPI, stream wait on
  /// NCCL) and clears them. `has_receive`: data arrives through them, so the
  /// testing delay applies.
  template <class Req>
  void wait_on(std::vector<Req>& reqs, bool has_receive = true) {
    if (reqs.empty()) return;
    if (has_receive && delay_ms_ > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms_));
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& r : reqs) r.wait(compute_);
    stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    reqs.clear();
  }

 private:
  Exec compute_;
  RegionTimer<Exec> timer_;
  double delay_ms_;
  bool skip_;
  Stats stats_{};
  double inner_compute_ = 0;
  std::chrono::steady_clock::time_point t0_{};
};

/// Message tags of every executor: `stream` names a kind of message (< 32),
/// `part` one tensor of it (< 4), `step` the schedule step that sends it. At most
/// a few steps are in flight, so steps taken mod 256 never collide, and the tag
/// stays within the 32767 every MPI must support. NCCL matches by posting order,
/// which the schedules make identical at both ends.
constexpr int message_tag(int stream, int step = 0, int part = 0) {
  return ((step % 256) * 32 + stream) * 4 + part;
}

}  // namespace DistAttn::Impl
