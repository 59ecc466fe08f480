// A downstream program that knows only find_package(DistAttn): runs one
// causal attention and checks it against the shipped reference.
#include <DistAttn/DistAttn.hpp>
#include <DistAttn/testing/reference.hpp>

#include <iostream>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  using namespace DistAttn;
  using Exec = Kokkos::DefaultExecutionSpace;
  const int B = 1, S = 24, H = 2, D = 64;
  Testing::HostTensor q("q", B, S, H, D), k("k", B, S, H, D), v("v", B, S, H, D), ro("ro", B, S, H, D);
  Testing::HostStats rl("rl", B, H, S);
  Testing::fill_random(q, 1);
  Testing::fill_random(k, 2);
  Testing::fill_random(v, 3);
  Tensor4<double, Exec::memory_space> dq("q", B, S, H, D), dk("k", B, S, H, D), dv("v", B, S, H, D),
      o("o", B, S, H, D);
  RowStats<double, Exec::memory_space> lse("lse", B, H, S);
  Kokkos::deep_copy(dq, q);
  Kokkos::deep_copy(dk, k);
  Kokkos::deep_copy(dv, v);
  AttnOptions opts;
  opts.mask = Mask::causal();
  attention_fwd(Exec(), dq, dk, dv, o, lse, opts);
  Testing::reference_fwd(q, k, v, opts.mask, 1.0 / 8.0, ro, rl);
  auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), o);
  const double err = Testing::rel_error(ho, ro);
  std::cout << "consumer: DistAttn " << version() << " rel error " << err << '\n';
  return err < 1e-12 ? 0 : 1;
}
