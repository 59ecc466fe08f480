// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file instances.hpp
/// The execution-space instances an executor runs on. A distributed executor
/// takes two: the communicator's (its exec(), which carries the transfers) and
/// `compute` (the tiles), so that transfers overlap compute:
///
///   auto inst = DistAttn::split_instances(Kokkos::DefaultExecutionSpace(), 2);
///   auto comm = DistAttn::Communicator<DistAttn::MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, inst[0]);
///   DistAttn::RingAttention<float, DistAttn::MpiSpace, Exec> ring(comm, inst[1], ...);

#include <DistAttn/core/kokkos_compat.hpp>

#include <vector>

namespace DistAttn {

/// n instances of `exec`'s space that may run concurrently: distinct CUDA streams
/// on CUDA (Kokkos::Experimental::partition_space, Kokkos 4), copies of `exec` on
/// host backends and on Kokkos 3, where they simply run in order.
template <class Exec>
std::vector<Exec> split_instances(const Exec& exec, int n) {
  return compat::partition_space(exec, n);
}

}  // namespace DistAttn
