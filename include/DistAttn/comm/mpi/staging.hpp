#pragma once
/// @file comm/mpi/staging.hpp
/// Host staging for MPI: without GPU-aware MPI a device pointer must never reach
/// MPI, so device Views travel through host buffers (ArborX's Distributor does
/// the same under ARBORX_ENABLE_GPU_AWARE_MPI). Also the byte-count helper that
/// keeps MPI's int counts valid for messages above 2 GiB.

#include <DistAttn/comm/impl/view_checks.hpp>
#include <DistAttn/config.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <mpi.h>

#include <cstddef>
#include <string>

namespace DistAttn {

/// @brief When the MPI transport copies a View through host memory.
enum class HostStaging {
  /// Only Views the host cannot access, and only without GPU-aware MPI.
  Auto,
  /// Every View, host memory included: exercises the staging path on machines
  /// without a GPU (tests) and measures its cost.
  Always,
};

namespace Impl {

using HostBytes = Kokkos::View<unsigned char*, Kokkos::HostSpace>;

template <class View>
inline constexpr bool host_accessible_view_v =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename View::memory_space>::accessible;

template <class View>
bool needs_host_staging(HostStaging policy) {
  if (policy == HostStaging::Always) return true;
  return !host_accessible_view_v<View> && !DISTATTN_ENABLE_GPU_AWARE_MPI;
}

/// The View's bytes as an unmanaged byte View in its own memory space.
template <class View>
auto as_bytes(const View& v) {
  using Mem = typename View::memory_space;
  using Bytes = Kokkos::View<unsigned char*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  // const_cast: only the receive side writes through it, and receive Views are non-const.
  return Bytes(reinterpret_cast<unsigned char*>(const_cast<comm_value_t<View>*>(v.data())), byte_size(v));
}

// FIXME(perf): staging buffers are allocated per operation; a per-communicator
// pool would take the allocation out of ring steps on GPU builds without GPU-aware MPI.
inline HostBytes make_host_bytes(const std::string& label, std::size_t n) {
  return HostBytes(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n);
}

/// Describes `bytes` bytes as (count, datatype) with count <= INT_MAX: MPI_BYTE
/// when it fits, a contiguous block type otherwise. The derived type is freed
/// in the destructor, which MPI allows while operations using it are pending.
class MpiBytes {
 public:
  MpiBytes(std::size_t bytes, const char* where);
  ~MpiBytes();
  MpiBytes(const MpiBytes&)            = delete;
  MpiBytes& operator=(const MpiBytes&) = delete;
  int count() const { return count_; }
  MPI_Datatype type() const { return type_; }

 private:
  int count_          = 0;
  MPI_Datatype type_  = MPI_BYTE;
  bool derived_       = false;
};

}  // namespace Impl
}  // namespace DistAttn
