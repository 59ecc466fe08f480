// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Tile-sized fp32 products on the host, one core: how fast each candidate for
// the portable tile's inner products runs at the shapes the tile uses.
//
//   OPENBLAS_NUM_THREADS=1 tile_gemm_perf [--dims 64,128] [--tiles 32,64,128] [--anchor 1024] [-n 5]
//
// Rows: the square SGEMM anchor (KokkosBlas::gemm, n = --anchor), then per head
// size d and tile t the three product shapes of the tile:
//   QK   S[t x t] = Q[t x d] K[t x d]^T     (N,T)
//   PV   O[t x d] += P[t x t] V[t x d]      (N,N)
//   PtdO dV[t x d] += P[t x t]^T dO[t x d]  (T,N)
// Columns: GFLOP/s of KokkosBlas::gemm (the BLAS library behind it),
// KokkosBatched::SerialGemm (Unblocked, Blocked), and the scalar dot-product
// loop the portable tile used before.

#include "common/args.hpp"
#include "common/kokkos_args.hpp"
#include "common/sgemm_rate.hpp"

#include <KokkosBatched_Gemm_Decl.hpp>
#include <KokkosBatched_Gemm_Serial_Impl.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

namespace DistAttn::Perf {
namespace {

using Mat  = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using CMat = Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// Median seconds per call of fn, with enough repeats per sample to last ~2 ms.
template <class F>
double time_call(F&& fn, int samples) {
  fn();
  int reps = 1;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) fn();
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > 2e-3) break;
    reps *= 2;
  }
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  return median(t);
}

template <class TA, class TB>
void row(const char* name, int m, int n, int k, int samples) {
  using namespace KokkosBatched;
  constexpr bool ta = std::is_same<TA, Trans::Transpose>::value;
  constexpr bool tb = std::is_same<TB, Trans::Transpose>::value;
  std::vector<float> abuf(std::size_t(m) * k), bbuf(std::size_t(k) * n), cbuf(std::size_t(m) * n, 0.f);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : abuf) x = u(gen);
  for (auto& x : bbuf) x = u(gen);
  const Mat a(abuf.data(), ta ? k : m, ta ? m : k), b(bbuf.data(), tb ? n : k, tb ? k : n), c(cbuf.data(), m, n);
  const CMat ca = a, cb = b;
  const double flops = 2.0 * m * n * k;
  const char* sa = ta ? "T" : "N";
  const char* sb = tb ? "T" : "N";
  const double blas = flops / time_call([&] { KokkosBlas::gemm(sa, sb, 1.0f, ca, cb, 1.0f, c); }, samples);
  const double unb  = flops / time_call([&] { SerialGemm<TA, TB, Algo::Gemm::Unblocked>::invoke(1.0f, a, b, 1.0f, c); }, samples);
  const double blk  = flops / time_call([&] { SerialGemm<TA, TB, Algo::Gemm::Blocked>::invoke(1.0f, a, b, 1.0f, c); }, samples);
  const double loop = flops / time_call(
                                  [&] {
                                    for (int i = 0; i < m; ++i)
                                      for (int j = 0; j < n; ++j) {
                                        float s = 0.f;
                                        for (int l = 0; l < k; ++l)
                                          s += (ta ? a(l, i) : a(i, l)) * (tb ? b(j, l) : b(l, j));
                                        c(i, j) += s;
                                      }
                                  },
                                  samples);
  std::printf("%6s %5d %5d %5d %10.2f %10.2f %10.2f %10.2f\n", name, m, n, k, blas * 1e-9, unb * 1e-9, blk * 1e-9,
              loop * 1e-9);
}

}  // namespace
}  // namespace DistAttn::Perf

int main(int argc_all, char** argv_all) {
  DistAttn::Perf::KokkosArgs args(argc_all, argv_all);
  Kokkos::ScopeGuard guard(args.kokkos_argc(), args.kokkos_argv());
  const int argc = args.tool_argc();
  char** argv    = args.tool_argv();
  using namespace DistAttn::Perf;
  using KokkosBatched::Trans;
  try {
    std::vector<int> dims{64, 128}, tiles{32, 64, 128};
    int anchor = 1024, samples = 5;
    CLI::App app("Tile-shaped fp32 products through each Kokkos Kernels candidate.", "tile_gemm_perf");
    app.add_option("--dims", dims, "head dims")->delimiter(',')->check(at_least(1))->capture_default_str();
    app.add_option("--tiles", tiles, "tile sizes")->delimiter(',')->check(at_least(1))->capture_default_str();
    app.add_option("--anchor", anchor, "SGEMM anchor size")->check(at_least(1))->capture_default_str();
    app.add_option("-n,--iters", samples, "samples")->check(at_least(1))->capture_default_str();
    if (!parse_command_line(app, argc, argv)) {
      std::cout << app.help();
      return 0;
    }
    std::printf("# tile_gemm_perf  fp32, host, GFLOP/s (median of %d)\n", samples);
    std::printf("# sgemm anchor: KokkosBlas::gemm %d^3: %.2f GFLOP/s\n", anchor, host_sgemm_gflops(anchor, samples));
    std::printf("# shape      m     n     k  KokkosBlas Serial/Unb Serial/Blk   dot-loop\n");
    for (int d : dims)
      for (int t : tiles) {
        row<Trans::NoTranspose, Trans::Transpose>("QK", t, t, d, samples);
        row<Trans::NoTranspose, Trans::NoTranspose>("PV", t, d, t, samples);
        row<Trans::Transpose, Trans::NoTranspose>("PtdO", t, d, t, samples);
      }
  } catch (const std::exception& e) {
    std::cerr << "tile_gemm_perf: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
