// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Shared test plumbing: moving fp64 host tensors to device tensors of any
// element type and back, fresh random seeds, and the tolerance table.

#include <DistAttn/DistAttn.hpp>
#include <DistAttn/testing/reference.hpp>

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace DistAttn::Test {

using Exec     = Kokkos::DefaultExecutionSpace;
using Mem      = Exec::memory_space;
using Testing::HostStats;
using Testing::HostTensor;

/// A fresh seed per call, printed in failure messages so a failure can be replayed.
inline std::uint64_t fresh_seed() {
  static std::random_device rd;
  return (std::uint64_t(rd()) << 32) ^ rd();
}

template <class T>
Tensor4<T, Mem> to_device(const HostTensor& h, const std::string& label) {
  Tensor4<T, Mem> d(label, h.extent(0), h.extent(1), h.extent(2), h.extent(3));
  auto m = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < h.span(); ++i) m.data()[i] = T(h.data()[i]);
  Kokkos::deep_copy(d, m);
  return d;
}

/// Device tensors in a chosen layout, for the executors' any-layout inputs:
/// LayoutRight, LayoutLeft, or LayoutStride (every other head of a wider
/// tensor, so the View is not contiguous).
template <class T, class L>
using View4 = Kokkos::View<T****, L, Mem>;
template <class T, class L>
using View3 = Kokkos::View<T***, L, Mem>;

template <class T, class L>
View4<T, L> alloc_as(const std::string& label, std::size_t b, std::size_t s, std::size_t h, std::size_t d) {
  if constexpr (std::is_same<L, Kokkos::LayoutStride>::value) {
    Tensor4<T, Mem> wide(label, b, s, 2 * h, d);
    return Kokkos::subview(wide, Kokkos::ALL, Kokkos::ALL, std::make_pair(std::size_t(0), h), Kokkos::ALL);
  } else {
    return View4<T, L>(label, b, s, h, d);
  }
}

template <class T, class L>
View3<T, L> alloc_stats_as(const std::string& label, std::size_t b, std::size_t h, std::size_t s) {
  if constexpr (std::is_same<L, Kokkos::LayoutStride>::value) {
    RowStats<T, Mem> wide(label, b, 2 * h, s);
    return Kokkos::subview(wide, Kokkos::ALL, std::make_pair(std::size_t(0), h), Kokkos::ALL);
  } else {
    return View3<T, L>(label, b, h, s);
  }
}

/// Host to device goes through a row-major tensor: a host mirror of a strided
/// device View is contiguous, and deep_copy cannot cross spaces and layouts at once.
template <class T, class L>
View4<T, L> to_device_as(const HostTensor& h, const std::string& label) {
  auto d = alloc_as<T, L>(label, h.extent(0), h.extent(1), h.extent(2), h.extent(3));
  Kokkos::deep_copy(d, to_device<T>(h, label));
  return d;
}

template <class L>
const char* layout_name() {
  if constexpr (std::is_same<L, Kokkos::LayoutRight>::value) return "LayoutRight";
  else if constexpr (std::is_same<L, Kokkos::LayoutLeft>::value) return "LayoutLeft";
  else return "LayoutStride";
}

/// Rounds a host tensor to T and back, so a reference sees exactly the kernel's inputs.
template <class T>
HostTensor rounded(const HostTensor& h) {
  HostTensor r("rounded", h.extent(0), h.extent(1), h.extent(2), h.extent(3));
  for (std::size_t i = 0; i < h.span(); ++i) r.data()[i] = double(T(h.data()[i]));
  return r;
}

/// Device to host likewise through a row-major tensor in the View's own space.
template <class V>
HostTensor to_host(const V& v) {
  Tensor4<typename V::non_const_value_type, typename V::memory_space> d("row_major", v.extent(0), v.extent(1),
                                                                         v.extent(2), v.extent(3));
  Kokkos::deep_copy(d, v);
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  HostTensor h("host", d.extent(0), d.extent(1), d.extent(2), d.extent(3));
  for (std::size_t a = 0; a < d.extent(0); ++a)
    for (std::size_t b = 0; b < d.extent(1); ++b)
      for (std::size_t c = 0; c < d.extent(2); ++c)
        for (std::size_t e = 0; e < d.extent(3); ++e) h(a, b, c, e) = double(m(a, b, c, e));
  return h;
}

template <class V>
HostStats stats_to_host(const V& v) {
  RowStats<typename V::non_const_value_type, typename V::memory_space> d("row_major", v.extent(0), v.extent(1),
                                                                          v.extent(2));
  Kokkos::deep_copy(d, v);
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  HostStats h("host", d.extent(0), d.extent(1), d.extent(2));
  for (std::size_t a = 0; a < d.extent(0); ++a)
    for (std::size_t b = 0; b < d.extent(1); ++b)
      for (std::size_t c = 0; c < d.extent(2); ++c) h(a, b, c) = double(m(a, b, c));
  return h;
}

/// Relative-error bounds against the fp64 reference. fp32: the kernel's sums run
/// over at most a few thousand terms of size <= 1 with fp32 rounding (2^-24 ~ 6e-8
/// each), so observed errors sit near 1e-7..1e-6; 2e-5 leaves an order of
/// magnitude while any indexing or masking bug gives errors of order 1. fp64
/// likewise at 1e-12. 16-bit types are checked against a reference fed the same
/// rounded inputs; their bound comes from the O/dX rounding to 8 (bf16) or 11 (fp16)
/// mantissa bits.
template <class T>
constexpr double rel_tol() {
  if constexpr (std::is_same<T, double>::value) return 1e-12;
  else if constexpr (std::is_same<T, float>::value) return 2e-5;
  else if constexpr (sizeof(T) == 2 && std::is_same<T, compat::half_t>::value) return 2e-3;
  else return 1.6e-2;
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same<T, double>::value) return "double";
  else if constexpr (std::is_same<T, float>::value) return "float";
  else if constexpr (std::is_same<T, compat::half_t>::value) return "half";
  else return "bhalf";
}

/// Element types this build supports on the default execution space.
#if defined(KOKKOS_ENABLE_CUDA)
#define DISTATTN_TEST_16BIT_TYPES , ::DistAttn::compat::bhalf_t, ::DistAttn::compat::half_t
#else
#define DISTATTN_TEST_16BIT_TYPES
#endif
using ElementTypes = ::testing::Types<float, double DISTATTN_TEST_16BIT_TYPES>;

/// Expects f() to throw InvalidArgument whose message contains every word.
template <class F>
void expect_invalid_argument_mentioning(F&& f, const std::vector<std::string>& words) {
  try {
    f();
    ADD_FAILURE() << "no InvalidArgument thrown";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
  }
}

}  // namespace DistAttn::Test
