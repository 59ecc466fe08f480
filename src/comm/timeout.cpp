// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/impl/op_info.hpp>
#include <DistAttn/comm/impl/poll.hpp>
#include <DistAttn/comm/timeout.hpp>
#include <DistAttn/core/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

namespace DistAttn {

namespace Impl {

double StepPace::wait_started() {
  std::lock_guard<std::mutex> lock(mutex_);
  gaps_[next_] = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_end_).count();
  next_        = (next_ + 1) % kWindow;
  return longest_locked();
}

void StepPace::wait_ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  last_end_ = std::chrono::steady_clock::now();
}

double StepPace::longest_gap() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return longest_locked();
}

double StepPace::longest_locked() const { return *std::max_element(gaps_.begin(), gaps_.end()); }

}  // namespace Impl

double TimeoutSettings::begin_wait() const {
  if (!pace) return seconds;
  return std::max(seconds, step_multiple * pace->wait_started());
}

void TimeoutSettings::end_wait() const {
  if (pace) pace->wait_ended();
}

std::string TimeoutSettings::describe_budget(double budget) const {
  std::ostringstream os;
  os << "timeout " << Impl::format_seconds(budget) << " = max(DISTATTN_COMM_TIMEOUT " << Impl::format_seconds(seconds)
     << ", DISTATTN_COMM_TIMEOUT_STEPS " << step_multiple << " x longest gap between waits "
     << Impl::format_seconds(pace ? pace->longest_gap() : 0.0) << ")";
  return os.str();
}

namespace {
/// Value of a numeric environment variable, or `def` when unset.
double env_number(const char* name, double def, bool allow_zero) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  char* end      = nullptr;
  const double t = std::strtod(v, &end);
  DISTATTN_REQUIRE(end && *end == '\0' && std::isfinite(t) && (t > 0 || (allow_zero && t == 0)),
                   "DistAttn::TimeoutSettings",
                   "environment variable " << name << "='" << v << "' must be a number "
                                           << (allow_zero ? ">= 0" : "> 0"));
  return t;
}
}  // namespace

TimeoutSettings TimeoutSettings::from_environment() {
  TimeoutSettings s;
  s.seconds       = env_number("DISTATTN_COMM_TIMEOUT", s.seconds, false);
  s.step_multiple = env_number("DISTATTN_COMM_TIMEOUT_STEPS", s.step_multiple, true);
  s.pace          = std::make_shared<Impl::StepPace>();
  if (const char* v = std::getenv("DISTATTN_COMM_TIMEOUT_POLICY"); v && *v) {
    if (std::strcmp(v, "abort") == 0) {
      s.policy = TimeoutPolicy::Abort;
    } else if (std::strcmp(v, "throw") == 0) {
      s.policy = TimeoutPolicy::Throw;
    } else {
      DISTATTN_REQUIRE(false, "DistAttn::TimeoutSettings",
                       "environment variable DISTATTN_COMM_TIMEOUT_POLICY='" << v
                                                                             << "' must be 'abort' or 'throw'");
    }
  }
  return s;
}

std::string to_string(TimeoutPolicy policy) { return policy == TimeoutPolicy::Abort ? "abort" : "throw"; }

namespace Impl {

double PollClock::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void PollClock::pause() {
  // Thresholds: a small message completes within a few microseconds (spin); past
  // that the peer is computing or oversubscribed, so give the core away.
  const double e = elapsed();
  if (e < 50e-6) return;
  if (e < 5e-3) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

void timeout_expired(TimeoutPolicy policy, const std::string& message) {
  if (policy == TimeoutPolicy::Throw) throw CommunicationError(message);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  std::cerr << message << "\nDistAttn: aborting the job (timeout policy 'abort'; set "
            << "DISTATTN_COMM_TIMEOUT_POLICY=throw to throw instead)" << std::endl;
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

std::string describe(const OpInfo& info) {
  std::ostringstream os;
  if (info.peer < 0) {
    os << info.op << " on all ranks (" << info.bytes << " bytes per rank)";
  } else {
    // "irecv", "sendrecv(recv)": the operation's own direction is its last word.
    std::string op(info.op);
    if (!op.empty() && op.back() == ')') op.pop_back();
    const bool incoming = op.size() >= 4 && op.compare(op.size() - 4, 4, "recv") == 0;
    os << info.op << (incoming ? " from" : " to") << " peer " << info.peer << " (tag " << info.tag << ", "
       << info.bytes << " bytes)";
  }
  return os.str();
}

}  // namespace Impl
}  // namespace DistAttn
