// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/core/error.hpp>

namespace DistAttn::Impl {

void throw_invalid_argument(const char* where, const std::string& msg) {
  throw InvalidArgument(std::string(where) + ": " + msg);
}

void throw_communication_error(const char* where, const std::string& msg) {
  throw CommunicationError(std::string(where) + ": " + msg);
}

}  // namespace DistAttn::Impl
