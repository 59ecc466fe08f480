// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A downstream program that knows only find_package(DistAttn) and the umbrella
// header: runs one causal attention and checks it against a direct fp64
// evaluation written here (the project's test reference is not installed), then
// runs every distributed executor the build has on one rank (MPI_COMM_SELF) and
// checks each against that single-device result.
#include <DistAttn/DistAttn.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#if DISTATTN_ENABLE_MPI
/// Largest |o - ref| of each executor type on one rank; every type named through the umbrella header.
template <class Exec, class View, class Stats>
double every_executor(const View& q, const View& k, const View& v, const View& ref) {
  using namespace DistAttn;
  const int B = int(q.extent(0)), S = int(q.extent(1)), H = int(q.extent(2)), D = int(q.extent(3));
  auto inst = split_instances(Exec(), 2);
  auto comm = Communicator<MpiSpace, Exec>::from_raw(MPI_COMM_SELF, inst[0]);
  View o("o", B, S, H, D);
  Stats lse("lse", B, H, S);
  double worst = 0;
  auto check   = [&](auto&& attn) {
    attn.forward(q, k, v, o, lse);
    inst[1].fence();
    auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), o);
    auto hr = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ref);
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) worst = std::max(worst, std::abs(ho(0, s, h, d) - hr(0, s, h, d)));
  };
  for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag}) {
    RingOptions ro;
    ro.kind = kind;
    check(RingAttention<double, MpiSpace, Exec>(comm, inst[1], B, S, H, H, D, ro));
  }
  for (Grid2DVariant variant : {Grid2DVariant::NO, Grid2DVariant::O}) {
    Grid2DOptions go;
    go.variant = variant;
    check(Grid2DAttention<double, MpiSpace, Exec>(comm, 1, 1, inst[1], B, S, H, H, D, go));
  }
  check(UlyssesAttention<double, MpiSpace, Exec>(comm, inst[1], B, S, H, H, D));
  check(HybridAttention<double, MpiSpace, Exec>(comm, inst[1], B, S, H, H, D));
  return worst;
}
#endif

/// Single-device attention against fp64, then every executor against it; the exit status.
int run() {
  using namespace DistAttn;
  using Exec = Kokkos::DefaultExecutionSpace;
  const int B = 1, S = 24, H = 2, D = 64;
  Tensor4<double, Exec::memory_space> q("q", B, S, H, D), k("k", B, S, H, D), v("v", B, S, H, D), o("o", B, S, H, D);
  RowStats<double, Exec::memory_space> lse("lse", B, H, S);
  auto hq = Kokkos::create_mirror_view(q), hk = Kokkos::create_mirror_view(k), hv = Kokkos::create_mirror_view(v);
  std::mt19937_64 gen(std::random_device{}());
  std::normal_distribution<double> normal;
  for (int s = 0; s < S; ++s)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d) {
        hq(0, s, h, d) = normal(gen);
        hk(0, s, h, d) = normal(gen);
        hv(0, s, h, d) = normal(gen);
      }
  Kokkos::deep_copy(q, hq);
  Kokkos::deep_copy(k, hk);
  Kokkos::deep_copy(v, hv);
  AttnOptions opts;
  opts.mask = Mask::causal();
  attention_fwd(Exec(), q, k, v, o, lse, opts);
  auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), o);
  double err = 0, norm = 0;
  const double scale = 1.0 / std::sqrt(double(D));
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < S; ++i) {
      std::vector<double> p(i + 1);
      double m = -INFINITY, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += hq(0, i, h, d) * hk(0, j, h, d);
        p[j] = dot * scale;
        m    = std::max(m, p[j]);
      }
      for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - m));
      for (int d = 0; d < D; ++d) {
        double ref = 0;
        for (int j = 0; j <= i; ++j) ref += p[j] / sum * hv(0, j, h, d);
        err += (ho(0, i, h, d) - ref) * (ho(0, i, h, d) - ref);
        norm += ref * ref;
      }
    }
  const double rel = std::sqrt(err / norm);
  std::cout << "consumer: DistAttn " << version() << " rel error " << rel << '\n';
  int status = rel < 1e-12 ? 0 : 1;
#if DISTATTN_ENABLE_MPI
  const double worst = every_executor<Exec, decltype(q), decltype(lse)>(q, k, v, o);
  std::cout << "consumer: every executor on one rank, max |o - attention_fwd| " << worst << '\n';
  if (!(worst < 1e-12)) status = 1;
#endif
  return status;
}

int main(int argc, char** argv) {
#if DISTATTN_ENABLE_MPI
  MPI_Init(&argc, &argv);  // DistAttn calls MPI from this thread only
#endif
  int status = 1;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    status = run();
  }
#if DISTATTN_ENABLE_MPI
  MPI_Finalize();
#endif
  return status;
}
