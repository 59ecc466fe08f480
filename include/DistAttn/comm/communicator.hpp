// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/communicator.hpp
/// The communicator template; each transport provides a specialization
/// (comm/mpi/communicator.hpp, comm/nccl/communicator.hpp).

#include <DistAttn/comm/spaces.hpp>

#include <Kokkos_Core.hpp>

namespace DistAttn {

/// @brief A group of ranks bound to an execution-space instance.
///
/// Every specialization offers: static from_raw(handle, exec) (non-owning);
/// duplicate() and split(color, key) -> std::optional (owning; a negative color,
/// e.g. MPI_UNDEFINED, yields std::nullopt); rank(), size(), exec(), comm() (the raw
/// handle), counters(), timeout settings and depend_on(producer_exec). It is
/// move-only and frees its handle only if it created it.
/// @tparam CommSpace MpiSpace or NcclSpace
/// @tparam Exec      execution space whose instance orders the communication
template <class CommSpace = DefaultCommunicationSpace, class Exec = Kokkos::DefaultExecutionSpace>
class Communicator;

}  // namespace DistAttn
