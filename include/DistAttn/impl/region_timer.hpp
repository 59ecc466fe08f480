// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Sums the device time of many regions on one execution-space instance without
// synchronizing between them: CUDA events on the instance's stream (read once,
// at total()), a fence plus a host clock on host backends where work is synchronous anyway.

#include <DistAttn/core/kokkos_compat.hpp>

#include <chrono>
#include <vector>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace DistAttn::Impl {

template <class Exec>
class RegionTimer {
 public:
  explicit RegionTimer(const Exec& exec) : exec_(exec) {}
  ~RegionTimer() {
#if defined(KOKKOS_ENABLE_CUDA)
    for (auto& e : events_) cudaEventDestroy(e);
#endif
  }
  RegionTimer(const RegionTimer&) = delete;
  RegionTimer& operator=(const RegionTimer&) = delete;

  void begin() {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      cudaEventRecord(event(2 * used_), exec_.cuda_stream());
      return;
    }
#endif
    t0_ = std::chrono::steady_clock::now();
  }
  void end() {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      cudaEventRecord(event(2 * used_ + 1), exec_.cuda_stream());
      ++used_;
      return;
    }
#endif
    compat::fence(exec_, "DistAttn::RegionTimer::end");
    host_durations_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }
  /// Seconds spent in all regions since the last reset (waits for the last region).
  double total() {
    double s = 0;
    for (double d : durations()) s += d;
    return s;
  }
  /// Seconds of each region since the last reset, in order (waits for the last one).
  std::vector<double> durations() {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      std::vector<double> d(used_);
      for (std::size_t i = 0; i < used_; ++i) {
        cudaEventSynchronize(events_[2 * i + 1]);
        float ms = 0;
        cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]);
        d[i] = double(ms) * 1e-3;
      }
      return d;
    }
#endif
    return host_durations_;
  }
  /// Regions begun since the last reset.
  std::size_t count() const {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) return used_;
#endif
    return host_durations_.size();
  }
  void reset() {
    used_ = 0;
    host_durations_.clear();
  }

 private:
#if defined(KOKKOS_ENABLE_CUDA)
  cudaEvent_t event(std::size_t i) {
    while (events_.size() <= i) {
      cudaEvent_t e;
      cudaEventCreate(&e);
      events_.push_back(e);
    }
    return events_[i];
  }
  std::vector<cudaEvent_t> events_;
#endif
  Exec exec_;
  std::size_t used_ = 0;
  std::vector<double> host_durations_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace DistAttn::Impl
