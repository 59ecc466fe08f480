// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/request.hpp
/// The request template; each transport provides a specialization
/// (comm/mpi/request.hpp, comm/nccl/request.hpp).

#include <DistAttn/comm/spaces.hpp>

#include <vector>

namespace DistAttn {

/// @brief Handle of a posted operation. Move-only.
///
/// Every specialization offers:
///   wait()            block the host until the operation completed (bounded by the
///                     communicator's timeout), then run completion callbacks such as
///                     copying staged data back to device memory;
///   wait(const E& e)  make execution-space instance e wait for the operation without
///                     blocking the host where the transport allows it (NCCL:
///                     cudaStreamWaitEvent), a host wait otherwise (MPI);
///   test()            non-blocking completion check (runs callbacks on completion);
///   cancel()          give up a pending operation (see the transport for details).
template <class CommSpace>
class Request;

/// @brief Waits for every request in turn (host-blocking).
template <class CommSpace>
void wait_all(std::vector<Request<CommSpace>>& requests) {
  for (auto& r : requests) r.wait();
}

/// @brief Makes instance `exec` wait for every request.
template <class CommSpace, class Exec>
void wait_all(std::vector<Request<CommSpace>>& requests, const Exec& exec) {
  for (auto& r : requests) r.wait(exec);
}

}  // namespace DistAttn
