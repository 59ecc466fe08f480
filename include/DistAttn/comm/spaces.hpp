// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/spaces.hpp
/// Communication-space tags: they select the transport of a Communicator and a
/// Request, the way Kokkos execution spaces select where a kernel runs.

#include <DistAttn/core/config.hpp>

#include <type_traits>

namespace DistAttn {

/// @brief Host-driven MPI transport. Works with every Kokkos execution space;
/// device Views are staged through host memory unless GPU-aware MPI is enabled.
struct MpiSpace {
  static constexpr const char* name() { return "MPI"; }
};

/// @brief Stream-ordered NCCL transport. Only Communicator<NcclSpace, Kokkos::Cuda>
/// exists, and only in builds with DistAttn_ENABLE_NCCL.
struct NcclSpace {
  static constexpr const char* name() { return "NCCL"; }
};

template <class T>
struct is_communication_space
    : std::integral_constant<bool, std::is_same<T, MpiSpace>::value ||
                                       std::is_same<T, NcclSpace>::value> {};
template <class T>
inline constexpr bool is_communication_space_v = is_communication_space<T>::value;

/// NCCL where it is built (device data never leaves the GPU), MPI otherwise.
#if DISTATTN_ENABLE_NCCL
using DefaultCommunicationSpace = NcclSpace;
#else
using DefaultCommunicationSpace = MpiSpace;
#endif

}  // namespace DistAttn
