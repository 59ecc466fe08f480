#pragma once
/// @file comm/timeout.hpp
/// What a blocking wait does when a peer never answers. A distributed job in
/// which one rank died must not leave the others spinning forever, so every
/// host-side wait is bounded.

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

/// @brief Timeout settings of a communicator; copied into every Request it creates.
struct TimeoutSettings {
  /// Seconds a wait may block, counted from the start of Request::wait().
  double seconds = 600.0;
  TimeoutPolicy policy = TimeoutPolicy::Abort;

  /// Defaults overridden by the environment: DISTATTN_COMM_TIMEOUT (seconds, > 0)
  /// and DISTATTN_COMM_TIMEOUT_POLICY (abort | throw). A malformed value throws
  /// DistAttn::InvalidArgument naming the variable.
  static TimeoutSettings from_environment();
};

/// "abort" or "throw".
std::string to_string(TimeoutPolicy policy);

}  // namespace DistAttn
