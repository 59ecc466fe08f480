// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/timeout.hpp
/// What a blocking wait does when a peer never answers. A distributed job in
/// which one rank died or stopped must not leave the others spinning forever, so
/// every host-side wait is bounded.
///
/// The bound of one wait (docs/design/communication.md, "Timeout"):
///
///     budget = max(seconds, step_multiple * longest_gap)
///
/// where longest_gap is the longest time this rank spent between two consecutive
/// waits of its communicator, over its last 32 waits (its own compute per step). A peer that works on a
/// step of similar size answers within a few such gaps, so the budget grows with
/// the problem instead of failing large runs, while small runs keep the floor:
/// with the defaults (30 s, 10 x) a stuck peer ends a job whose steps take under
/// 3 s within a minute.

#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

namespace DistAttn {

/// @brief Reaction to a wait that exceeded its timeout.
enum class TimeoutPolicy {
  /// Print the diagnostic on stderr and MPI_Abort the whole job (default: in a
  /// production run the other ranks would otherwise hang in their next collective).
  Abort,
  /// Throw DistAttn::CommunicationError; the operation stays pending and can be
  /// cancelled (Request::cancel) — for tests and for callers that can recover.
  Throw,
};

namespace Impl {
/// Longest of the recent gaps between consecutive waits of one communicator (and
/// its duplicates), measured on this rank: the expected step time the budget
/// derives from. Only the last kWindow gaps count, so that a long pause between
/// passes (I/O, checkpointing) does not inflate the budget for good.
class StepPace {
 public:
  static constexpr int kWindow = 32;
  StepPace() : last_end_(std::chrono::steady_clock::now()) {}
  /// Called when a wait starts: records the gap since the previous wait ended;
  /// returns longest_gap().
  double wait_started();
  /// Called when a wait ends.
  void wait_ended();
  double longest_gap() const;

 private:
  double longest_locked() const;
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point last_end_;
  std::array<double, kWindow> gaps_{};
  int next_ = 0;
};
}  // namespace Impl

/// @brief Timeout settings of a communicator; copied into every Request it creates
/// (the copies share one step pace).
struct TimeoutSettings {
  /// Floor of the budget, in seconds, counted from the start of Request::wait().
  double seconds = 30.0;
  /// Budget in multiples of the longest gap between waits (0: the floor alone).
  double step_multiple = 10.0;
  TimeoutPolicy policy = TimeoutPolicy::Abort;
  /// Shared by the communicator, its duplicates and their requests; null: floor only.
  std::shared_ptr<Impl::StepPace> pace;

  /// Seconds the wait starting now may block (records the start with the pace).
  double begin_wait() const;
  /// Records the end of a wait with the pace.
  void end_wait() const;
  /// "timeout 30.00 s = max(DISTATTN_COMM_TIMEOUT ..., DISTATTN_COMM_TIMEOUT_STEPS ...)"
  /// for the diagnostic of an expired wait.
  std::string describe_budget(double budget) const;

  /// Defaults overridden by the environment: DISTATTN_COMM_TIMEOUT (seconds, > 0),
  /// DISTATTN_COMM_TIMEOUT_STEPS (multiple, >= 0) and DISTATTN_COMM_TIMEOUT_POLICY
  /// (abort | throw). A malformed value throws DistAttn::InvalidArgument naming
  /// the variable.
  static TimeoutSettings from_environment();
};

/// "abort" or "throw".
std::string to_string(TimeoutPolicy policy);

}  // namespace DistAttn
