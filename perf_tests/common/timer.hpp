// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Device-side timing: CUDA events on the execution space's stream where the
// backend is CUDA, a fence plus a host clock elsewhere. Medians, not means.

#include <DistAttn/core/kokkos_compat.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace DistAttn::Perf {

template <class Exec>
class EventTimer {
 public:
  explicit EventTimer(const Exec& exec) : exec_(exec) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      cudaEventCreate(&start_);
      cudaEventCreate(&stop_);
    }
#endif
  }
  ~EventTimer() {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      cudaEventDestroy(start_);
      cudaEventDestroy(stop_);
    }
#endif
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start() {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      cudaEventRecord(start_, exec_.cuda_stream());
      return;
    }
#endif
    compat::fence(exec_, "DistAttn::Perf::EventTimer::start");
    t0_ = std::chrono::steady_clock::now();
  }
  /// Elapsed seconds since start(); waits for the work in between.
  double stop() {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      cudaEventRecord(stop_, exec_.cuda_stream());
      cudaEventSynchronize(stop_);
      float ms = 0;
      cudaEventElapsedTime(&ms, start_, stop_);
      return double(ms) * 1e-3;
    }
#endif
    compat::fence(exec_, "DistAttn::Perf::EventTimer::stop");
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  Exec exec_;
  std::chrono::steady_clock::time_point t0_{};
#if defined(KOKKOS_ENABLE_CUDA)
  cudaEvent_t start_{}, stop_{};
#endif
};

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Median seconds of `iters` timed calls of fn after `warmup` untimed ones.
template <class Exec, class F>
double median_seconds(EventTimer<Exec>& timer, int warmup, int iters, F&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    timer.start();
    fn();
    t.push_back(timer.stop());
  }
  return median(t);
}

}  // namespace DistAttn::Perf
