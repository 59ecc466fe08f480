// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file exec/impl/pass_recorder.hpp
/// The instrumentation and waiting every executor pass does the same way: device
/// time of the tiles (RegionTimer on the compute instance, read once at the end),
/// host time blocked in waits, bytes by kind, and the testing delay before waits
/// that receive data. One per executor; its stats are the executor's stats().
///
/// It also marks the pass for profilers, as Kokkos Tools regions (shown by
/// space-time-stack, nvtx-connector and Nsight Systems; docs/design/profiling.md):
///   pass  "DistAttn::<Executor>::forward" / "::backward"   begin() .. end()
///   step  "DistAttn::step"                                  step() .. next step() / end_steps() / end()
///   phase "DistAttn::compute" (timed), "DistAttn::wait" (wait_on)
/// Phases nest in the open step, or in the pass where the executor does work
/// outside its steps (entry staging, finalisation).

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/impl/region_timer.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

namespace DistAttn::Impl {

template <class Exec, class Stats>
class PassRecorder {
 public:
  PassRecorder(const Exec& compute, const ExecutorOptions& opts)
      : compute_(compute),
        timer_(compute),
        delay_ms_(opts.recv_delay_ms),
        skip_(opts.compute_only),
        fence_(opts.fence_each_pass) {}

  /// The last pass's stats; reading them waits for its timed tiles when the pass
  /// did not (ExecutorOptions::fence_each_pass off).
  Stats& stats() {
    settle();
    return stats_;
  }
  const Stats& stats() const {
    settle();
    return stats_;
  }
  /// The stats for the executor to fill in, without waiting for the tile clocks.
  Stats& fields() { return stats_; }
  /// True when transfers are skipped (ExecutorOptions::compute_only).
  bool skip_transfers() const { return skip_; }

  /// Starts a pass named `pass` (its profiling region): `fresh` becomes the
  /// stats (executor-specific fields set).
  void begin(const Stats& fresh, const char* pass) {
    step_region_.reset();  // left open by a pass that threw
    pass_region_.reset();
    pass_region_.emplace(pass);
    stats_         = fresh;
    inner_compute_ = 0;
    pending_       = false;
    step_regions_.clear();
    timer_.reset();
    t0_ = std::chrono::steady_clock::now();
  }
  /// Ends a pass. With ExecutorOptions::fence_each_pass it waits for the compute
  /// instance, so total_s is the pass's wall time; otherwise total_s is the host
  /// time of the call and the work may still run (GPU) when it returns.
  void end(const char* label) {
    if (fence_) compat::fence(compute_, label);
    pending_       = true;
    stats_.total_s = seconds_since(t0_);
    end_steps();
    pass_region_.reset();
    if (fence_) settle();
  }
  /// Starts the next step of the pass's schedule (ends the previous one).
  void step() {
    end_steps();
    step_region_.emplace("DistAttn::step");
    StepTime st;
    st.start_s = seconds_since(t0_);
    stats_.timeline.push_back(st);
    step_open_ = {timer_.count(), stats_.wait_s, stats_.total_received(), inner_compute_};
  }
  /// Ends the last step: what follows (finalisation) belongs to the pass.
  void end_steps() {
    if (!step_region_) return;
    step_region_.reset();
    StepTime& st      = stats_.timeline.back();
    st.wait_s         = stats_.wait_s - step_open_.wait_s;
    st.bytes_received = stats_.total_received() - step_open_.bytes_received;
    // The tiles' clocks are read with the pass's (settle): remember which are ours.
    step_regions_.push_back({step_open_.first_region, timer_.count(), inner_compute_ - step_open_.inner_compute});
  }
  /// One building-block call, timed on the compute instance.
  template <class F>
  void timed(F&& f) {
    compat::ScopedRegion region("DistAttn::compute");
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
    compat::ScopedRegion region("DistAttn::wait");
    if (has_receive && delay_ms_ > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms_));
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& r : reqs) r.wait(compute_);
    stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    reqs.clear();
  }

 private:
  /// Reads the tile clocks of a finished pass once (on GPUs this waits for them).
  void settle() const {
    if (!pending_) return;
    const std::vector<double> d = timer_.durations();
    stats_.compute_s            = inner_compute_;
    for (double x : d) stats_.compute_s += x;
    for (std::size_t i = 0; i < step_regions_.size(); ++i) {
      double c = step_regions_[i].inner_compute;
      for (std::size_t r = step_regions_[i].first; r < step_regions_[i].last && r < d.size(); ++r) c += d[r];
      stats_.timeline[i].compute_s = c;
    }
    pending_ = false;
  }
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  struct StepOpen {
    std::size_t first_region = 0;
    double wait_s            = 0;
    std::uint64_t bytes_received = 0;
    double inner_compute     = 0;
  };
  struct StepRegions {
    std::size_t first = 0, last = 0;
    double inner_compute = 0;
  };

  Exec compute_;
  mutable RegionTimer<Exec> timer_;
  double delay_ms_;
  bool skip_;
  bool fence_;
  mutable Stats stats_{};
  mutable bool pending_ = false;
  double inner_compute_ = 0;
  std::optional<compat::ScopedRegion> pass_region_, step_region_;
  StepOpen step_open_{};
  std::vector<StepRegions> step_regions_;
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
