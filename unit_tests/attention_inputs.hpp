// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Random attention inputs, rounded to the element type under test so the fp64
// reference sees exactly what the kernel sees.

#include "test_helpers.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace DistAttn::Test {

struct Shape {
  int B, Sq, Sk, H, Hkv, D;
};

template <class T>
struct Inputs {
  HostTensor q, k, v;           // rounded to T, as the kernel sees them
  Tensor4<T, Mem> qd, kd, vd;   // device copies
  std::uint64_t seed;
};

template <class T>
Inputs<T> make_inputs(const Shape& s, double amp = 1.0) {
  Inputs<T> in;
  in.seed = fresh_seed();
  HostTensor q("q", s.B, s.Sq, s.H, s.D), k("k", s.B, s.Sk, s.Hkv, s.D), v("v", s.B, s.Sk, s.Hkv, s.D);
  Testing::fill_random(q, in.seed, amp);
  Testing::fill_random(k, in.seed + 1, amp);
  Testing::fill_random(v, in.seed + 2);
  in.q  = rounded<T>(q);
  in.k  = rounded<T>(k);
  in.v  = rounded<T>(v);
  in.qd = to_device<T>(in.q, "q");
  in.kd = to_device<T>(in.k, "k");
  in.vd = to_device<T>(in.v, "v");
  return in;
}

/// Packed-document offsets where the kernels read them (Mem) and where the fp64
/// reference does (host): the same rule as two masks.
struct PackedDocs {
  std::vector<std::int64_t> host;
  Kokkos::View<std::int64_t*, Mem> dev;
  explicit PackedDocs(std::vector<std::int64_t> offsets)
      : host(std::move(offsets)), dev("doc_offsets", host.size()) {
    auto h = Kokkos::create_mirror_view(dev);
    for (std::size_t i = 0; i < host.size(); ++i) h(i) = host[i];
    Kokkos::deep_copy(dev, h);
  }
  Mask on_device(const Mask& m) const { return m.with_documents(Documents{dev.data(), int(host.size()) - 1}); }
  Mask on_host(const Mask& m) const { return m.with_documents(Documents{host.data(), int(host.size()) - 1}); }
};

}  // namespace DistAttn::Test
