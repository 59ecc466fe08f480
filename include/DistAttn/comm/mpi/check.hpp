// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/mpi/check.hpp
/// DISTATTN_MPI_CHECK(call, where): throws DistAttn::CommunicationError with the
/// call, MPI's error string and `where` when `call` does not return MPI_SUCCESS.
/// `where` may be a string or a << chain ("DistAttn::isend to peer " << peer); it
/// is evaluated only on failure.
///
/// NOTE: MPI reports errors through return codes only on communicators whose error
/// handler is MPI_ERRORS_RETURN. Communicators created by DistAttn (duplicate,
/// split) get it; a handle wrapped with from_raw keeps the caller's handler
/// (MPI_ERRORS_ARE_FATAL on MPI_COMM_WORLD by default: MPI aborts with its own message).

#include <DistAttn/core/error.hpp>

#include <mpi.h>

#include <sstream>
#include <string>

namespace DistAttn::Impl {
[[noreturn]] void throw_mpi_error(const char* call, const std::string& where, int code);
/// MPI's text for an error code.
std::string mpi_error_string(int code);
}  // namespace DistAttn::Impl

#define DISTATTN_MPI_CHECK(call, where)                                                   \
  do {                                                                                    \
    const int distattn_mpi_rc_ = (call);                                                  \
    if (distattn_mpi_rc_ != MPI_SUCCESS) {                                                \
      std::ostringstream distattn_mpi_os_;                                                \
      distattn_mpi_os_ << where;                                                          \
      ::DistAttn::Impl::throw_mpi_error(#call, distattn_mpi_os_.str(), distattn_mpi_rc_); \
    }                                                                                     \
  } while (0)
