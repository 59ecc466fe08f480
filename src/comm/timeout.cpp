#include <DistAttn/comm/impl/op_info.hpp>
#include <DistAttn/comm/impl/poll.hpp>
#include <DistAttn/comm/timeout.hpp>
#include <DistAttn/core/error.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

namespace DistAttn {

TimeoutSettings TimeoutSettings::from_environment() {
  TimeoutSettings s;
  if (const char* v = std::getenv("DISTATTN_COMM_TIMEOUT"); v && *v) {
    char* end       = nullptr;
    const double t  = std::strtod(v, &end);
    DISTATTN_REQUIRE(end && *end == '\0' && std::isfinite(t) && t > 0, "DistAttn::TimeoutSettings",
                     "environment variable DISTATTN_COMM_TIMEOUT='" << v
                                                                    << "' is not a positive number of seconds");
    s.seconds = t;
  }
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
    const bool incoming = std::strstr(info.op, "recv") != nullptr;
    os << info.op << (incoming ? " from" : " to") << " peer " << info.peer << " (tag " << info.tag << ", "
       << info.bytes << " bytes)";
  }
  return os.str();
}

}  // namespace Impl
}  // namespace DistAttn
