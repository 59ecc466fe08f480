// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/mpi/health.hpp
/// Whether an MPI communicator's message stream can still be trusted.
///
/// After a wait timed out (TimeoutPolicy::Throw), failed, or was cancelled with
/// operations pending, this rank and its peers no longer agree on which message
/// comes next: a late peer's sends of the abandoned pass carry the same tags as
/// the next pass's, and would be received as its data. So the first such event
/// marks the communicator broken, and every later operation on it, through any
/// Communicator wrapping the same MPI handle, throws CommunicationError instead
/// of communicating. A peer that saw no error of its own then times out in its
/// next operation (its partners refuse to take part) and is marked in turn:
/// every rank ends with an error, none with wrong data. Duplicates made earlier
/// have their own message space and stay usable; the remedy is a new
/// communicator (MPI_Comm_dup of a healthy parent).

#include <mpi.h>

#include <memory>
#include <mutex>
#include <string>

namespace DistAttn::Impl {

class MpiCommHealth {
 public:
  /// Records the first reason only: later errors follow from it.
  void mark_broken(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_) reason_ = reason;
    broken_ = true;
  }
  bool broken() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return broken_;
  }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return reason_;
  }

 private:
  mutable std::mutex mutex_;
  bool broken_ = false;
  std::string reason_;
};

/// The health record of `comm`, kept as an MPI attribute of the handle so that
/// every Communicator wrapping it shares one (duplicates start healthy).
std::shared_ptr<MpiCommHealth> mpi_comm_health(MPI_Comm comm);

/// Throws CommunicationError from `where` if `health` is broken, with the reason.
void require_healthy(const MpiCommHealth& health, const char* where, int rank, int size);

}  // namespace DistAttn::Impl
