// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The transport a tool's --comm asks for, shared by distattn-run and
// distattn-train: NCCL by default where built for CUDA, MPI otherwise.

#include <DistAttn/comm.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <mpi.h>

#include <string>
#include <type_traits>

namespace DistAttn::Perf {

/// Calls f(comm, compute) with the communicator `name` ("mpi", "nccl", or empty
/// for the default) bound to one execution-space instance, and a second
/// instance for the tiles (distinct streams on GPUs).
template <class Exec, class F>
int with_communicator(const std::string& name, MPI_Comm mpi, F&& f) {
  auto spaces = compat::partition_space(Exec(), 2);
#if DISTATTN_ENABLE_NCCL
  if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
    if (name != "mpi") {
      auto comm = Communicator<NcclSpace, Exec>::from_mpi(mpi, spaces[0]);
      return f(comm, spaces[1]);
    }
  }
#endif
  if (name == "nccl") throw InvalidArgument("--comm nccl: this build has no NCCL backend for this device");
  auto comm = Communicator<MpiSpace, Exec>::from_raw(mpi, spaces[0]);
  return f(comm, spaces[1]);
}

}  // namespace DistAttn::Perf
