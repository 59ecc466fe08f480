// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/mpi/staging.hpp
/// Host staging for MPI: without GPU-aware MPI a device pointer must never reach
/// MPI, so device Views travel through host buffers (ArborX's Distributor does
/// the same under ARBORX_ENABLE_GPU_AWARE_MPI). Also the byte-count helper that
/// keeps MPI's int counts valid for messages above 2 GiB.

#include <DistAttn/comm/impl/view_checks.hpp>
#include <DistAttn/core/config.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

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

/// Host staging buffers of one communicator (and its duplicates and splits),
/// reused across operations: a buffer returns to the pool when the last request
/// holding it is destroyed. Requests are rounded up to a size class (four per
/// power of two, so at most 25 % over) and served only from their own class.
/// Serving a small request from a larger class's free buffer (best fit) let the
/// mix of message sizes in pipelined passes (Ulysses' head groups) take a new
/// buffer in a later round; with exact classes each class holds the most it
/// ever held at once, so a pattern of passes that repeats allocates only in its
/// first round. Buffers stay until the communicator family is gone.
class HostStagingPool : public std::enable_shared_from_this<HostStagingPool> {
 public:
  /// A host buffer of exactly `n` bytes (a prefix of a pooled one), held until
  /// the returned pointer and its copies are dropped.
  std::shared_ptr<HostBytes> acquire(std::size_t n) {
    if (n == 0) return std::make_shared<HostBytes>();  // nothing to stage; leave the pool alone
    const std::size_t cls = size_class(n);
    HostBytes whole;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->extent(0) == cls) {
          whole = *it;
          free_.erase(it);
          break;
        }
    }
    if (whole.extent(0) == 0) whole = HostBytes(Kokkos::view_alloc(Kokkos::WithoutInitializing, "DistAttn::host_staging"), cls);
    auto self = shared_from_this();
    return std::shared_ptr<HostBytes>(new HostBytes(Kokkos::subview(whole, std::make_pair(std::size_t(0), n))),
                                      [self, whole](HostBytes* p) {
                                        delete p;
                                        self->release(whole);
                                      });
  }
  /// Buffers now free in the pool (for tests).
  std::size_t free_buffers() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return free_.size();
  }
  /// The bytes a request of `n` bytes is served with: `n` rounded up to a
  /// multiple of a quarter of its largest power of two (n itself below 8).
  static std::size_t size_class(std::size_t n) {
    if (n < 8) return n;
    int top = 0;
    while ((n >> (top + 1)) != 0) ++top;  // 2^top <= n < 2^(top+1)
    const std::size_t step = std::size_t(1) << (top - 2);
    return (n + step - 1) / step * step;
  }

 private:
  void release(const HostBytes& b) {
    if (b.extent(0) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(b);
  }
  mutable std::mutex mutex_;
  std::vector<HostBytes> free_;
};

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
