// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Errors: every public entry point validates its arguments and throws
// DistAttn::Error naming the function and the offending argument.

#include <sstream>
#include <stdexcept>
#include <string>

namespace DistAttn {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// Thrown for argument problems (shapes, types, grids): a caller bug.
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& what) : Error(what) {}
};

/// Thrown when a peer, transport or device fails at run time.
class CommunicationError : public Error {
 public:
  explicit CommunicationError(const std::string& what) : Error(what) {}
};

namespace Impl {
[[noreturn]] void throw_invalid_argument(const char* where, const std::string& msg);
[[noreturn]] void throw_communication_error(const char* where, const std::string& msg);
}  // namespace Impl

}  // namespace DistAttn

/// DISTATTN_REQUIRE(cond, "function", "message " << value): throws InvalidArgument.
#define DISTATTN_REQUIRE(cond, where, msg)                              \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::ostringstream distattn_require_os_;                          \
      distattn_require_os_ << msg;                                      \
      ::DistAttn::Impl::throw_invalid_argument(where,                   \
                                               distattn_require_os_.str()); \
    }                                                                   \
  } while (0)
