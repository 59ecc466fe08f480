// A downstream program that knows only find_package(DistAttn): runs one causal
// attention and checks it against a direct fp64 evaluation written here (the
// project's test reference is not installed).
#include <DistAttn/DistAttn.hpp>

#include <cmath>
#include <iostream>
#include <random>
#include <vector>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
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
  return rel < 1e-12 ? 0 : 1;
}
