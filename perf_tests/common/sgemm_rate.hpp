// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The CPU anchor of docs/PERFORMANCE.md: the rate of one square fp32 GEMM
// through KokkosBlas::gemm (the BLAS it was built against: OpenBLAS on the CI
// machine), timed in the same process as the attention numbers it scales.
// Run with OPENBLAS_NUM_THREADS=1 for the one-core rate.

#include "common/timer.hpp"

#include <KokkosBlas3_gemm.hpp>

#include <random>
#include <vector>

namespace DistAttn::Perf {

/// GFLOP/s of C = A B for n x n fp32 matrices on the host: median of `iters` calls.
inline double host_sgemm_gflops(int n, int iters) {
  using M = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
  M a("a", n, n), b("b", n, n), c("c", n, n);
  std::mt19937 gen(12345);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t i = 0; i < a.span(); ++i) {
    a.data()[i] = u(gen);
    b.data()[i] = u(gen);
  }
  KokkosBlas::gemm("N", "N", 1.0f, a, b, 0.0f, c);  // warm-up: thread pool, caches
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    KokkosBlas::gemm("N", "N", 1.0f, a, b, 0.0f, c);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * double(n) * n * n / median(t) * 1e-9;
}

}  // namespace DistAttn::Perf
