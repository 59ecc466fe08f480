// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/impl/poll.hpp
/// The bounded polling loop behind every host-side wait.

#include <DistAttn/comm/timeout.hpp>

#include <chrono>
#include <string>

namespace DistAttn::Impl {

/// Paces a polling loop: spins for the first microseconds (latency of small
/// messages), then yields, then sleeps briefly, so that a long wait does not
/// starve other ranks when ranks outnumber cores (CI runs 4 ranks on 2 cores).
class PollClock {
 public:
  PollClock() : start_(std::chrono::steady_clock::now()) {}
  /// Seconds since construction.
  double elapsed() const;
  /// Call once per unsuccessful poll.
  void pause();

 private:
  std::chrono::steady_clock::time_point start_;
};

/// Applies the policy to an expired wait: throws CommunicationError(message) or
/// prints it on stderr and calls MPI_Abort(MPI_COMM_WORLD) (never returns).
[[noreturn]] void timeout_expired(TimeoutPolicy policy, const std::string& message);

/// "1.23 s"
std::string format_seconds(double s);

}  // namespace DistAttn::Impl
