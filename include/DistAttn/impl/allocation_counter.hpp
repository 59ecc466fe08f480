// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/allocation_counter.hpp
/// Counts what Kokkos allocates, through the Kokkos Tools allocation callbacks:
/// bytes and allocations since the last reset, bytes live now and their
/// high-water mark. The driver prints the peak per rank; the tests compare an
/// executor's MemoryPlan with what its passes really allocate. Process-wide
/// (the callbacks are): install it once, while no Kokkos Tools library is loaded.

#include <DistAttn/core/kokkos_compat.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace DistAttn::Impl {

struct AllocationCounts {
  std::uint64_t allocations = 0;  ///< since reset()
  std::uint64_t bytes       = 0;  ///< allocated since reset()
  std::uint64_t live        = 0;  ///< allocated and not yet freed
  std::uint64_t peak        = 0;  ///< high-water mark of live since reset()
};

class AllocationCounter {
 public:
  /// Counts every allocation, and separately those whose label starts with
  /// `prefix` and, when `space` is given, that live in the memory space of that
  /// name (e.g. "Cuda": the device buffers, not the MPI transport's host staging).
  static void install(const char* prefix = "DistAttn::", const char* space = nullptr) {
    prefix_ = prefix;
    space_  = space;
    compat::set_allocation_callbacks(&on_alloc, &on_free);
  }
  static void uninstall() { compat::set_allocation_callbacks(nullptr, nullptr); }
  /// Zeroes the counts since reset; live bytes stay, and the peak restarts from them.
  static void reset() {
    for (AllocationCounts* c : {&all_, &labelled_}) {
      c->allocations = 0;
      c->bytes       = 0;
      c->peak        = c->live;
    }
    labels_.clear();
  }
  /// "label (space, bytes)" of the first allocations since reset (at most 8, no
  /// repeats): what a test that expects none names when it fails.
  static const std::string& labels() { return labels_; }
  static const AllocationCounts& all() { return all_; }
  /// Allocations labelled with install()'s prefix (the library's own buffers).
  static const AllocationCounts& labelled() { return labelled_; }

 private:
  static bool matches(const Kokkos::Tools::SpaceHandle& h, const char* label) {
    return label != nullptr && std::strncmp(label, prefix_, std::strlen(prefix_)) == 0 &&
           (space_ == nullptr || std::strcmp(h.name, space_) == 0);
  }
  // Kokkos on CUDA reports its team scratch as a zero-byte allocation at kernel
  // launches that need none: no memory, so not counted.
  static void on_alloc(Kokkos::Tools::SpaceHandle h, const char* label, const void*, std::uint64_t size) {
    if (size == 0) return;
    add(all_, size);
    if (matches(h, label)) add(labelled_, size);
    if (all_.allocations <= 8) {
      const std::string entry = std::string(label ? label : "?") + " (" + h.name + ", " + std::to_string(size) + " B)";
      if (labels_.find(entry) == std::string::npos) labels_ += (labels_.empty() ? "" : "; ") + entry;
    }
  }
  static void on_free(Kokkos::Tools::SpaceHandle h, const char* label, const void*, std::uint64_t size) {
    all_.live -= std::min<std::uint64_t>(all_.live, size);
    if (matches(h, label)) labelled_.live -= std::min<std::uint64_t>(labelled_.live, size);
  }
  static void add(AllocationCounts& c, std::uint64_t size) {
    ++c.allocations;
    c.bytes += size;
    c.live += size;
    c.peak = std::max(c.peak, c.live);
  }

  static inline const char* prefix_ = "DistAttn::";
  static inline const char* space_  = nullptr;
  static inline AllocationCounts all_{}, labelled_{};
  static inline std::string labels_;
};

}  // namespace DistAttn::Impl
