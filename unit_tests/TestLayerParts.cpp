// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The parts of the decoder layer on one process against float64 host loops
// written from the definitions: the linear seam (KokkosBlas::gemm for float and
// double, cuBLAS for bf16/fp16 on CUDA builds; all three products), RMSNorm, RoPE and SwiGLU forward and backward.
// Backward formulas are checked against central differences of the host forward.

#include "test_helpers.hpp"

#include <DistAttn/layer/linear.hpp>
#include <DistAttn/layer/rmsnorm.hpp>
#include <DistAttn/layer/rope.hpp>
#include <DistAttn/layer/swiglu.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using HostMatrix = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>;

template <class T>
Matrix<T, Mem> random_matrix(long rows, long cols, std::uint64_t seed) {
  Matrix<T, Mem> m("m", rows, cols);
  auto h = Kokkos::create_mirror_view(m);
  for (long i = 0; i < rows * cols; ++i) h.data()[i] = T(Testing::hash_uniform(seed, std::uint64_t(i)));
  Kokkos::deep_copy(m, h);
  return m;
}

template <class V>
HostMatrix host(const V& d) {
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  HostMatrix h("h", d.extent(0), d.extent(1));
  for (std::size_t i = 0; i < d.extent(0); ++i)
    for (std::size_t j = 0; j < d.extent(1); ++j) h(i, j) = double(m(i, j));
  return h;
}

/// max |a - b| / max |b|
double rel_err(const HostMatrix& a, const HostMatrix& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.span(); ++i) {
    num = std::max(num, std::abs(a.data()[i] - b.data()[i]));
    den = std::max(den, std::abs(b.data()[i]));
  }
  return num / den;
}

HostMatrix host_matmul(const HostMatrix& a, bool ta, const HostMatrix& b, bool tb) {
  const std::size_t m = ta ? a.extent(1) : a.extent(0), k = ta ? a.extent(0) : a.extent(1);
  const std::size_t n = tb ? b.extent(0) : b.extent(1);
  HostMatrix c("c", m, n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) s += (ta ? a(p, i) : a(i, p)) * (tb ? b(j, p) : b(p, j));
      c(i, j) = s;
    }
  return c;
}

template <class T>
class LinearTest : public ::testing::Test {};
#if defined(KOKKOS_ENABLE_CUDA)
// 16-bit matrices take the cuBLAS branch of the seam; the host reference uses
// the rounded inputs, so only the output rounding is left in the error.
using LinearTypes = ::testing::Types<float, double, compat::bhalf_t, compat::half_t>;
#else
using LinearTypes = ::testing::Types<float, double>;
#endif
TYPED_TEST_SUITE(LinearTest, LinearTypes);

TYPED_TEST(LinearTest, ForwardAndBothGradientsMatchHostProducts) {
  using T                 = TypeParam;
  const std::uint64_t seed = fresh_seed();
  const long n = 37, in = 19, out = 23;  // odd sizes: no blocking hides an index error
  auto x = random_matrix<T>(n, in, seed), w = random_matrix<T>(in, out, seed + 1);
  auto dy = random_matrix<T>(n, out, seed + 2);
  Matrix<T, Mem> y("y", n, out), dx("dx", n, in), dw("dw", in, out);
  linear_forward(Exec(), x, w, y);
  linear_backward_input(Exec(), dy, w, dx);
  linear_backward_weight(Exec(), x, dy, dw);
  const double tol = rel_tol<T>();
  EXPECT_LT(rel_err(host(y), host_matmul(host(x), false, host(w), false)), tol) << "seed " << seed;
  EXPECT_LT(rel_err(host(dx), host_matmul(host(dy), false, host(w), true)), tol) << "seed " << seed;
  EXPECT_LT(rel_err(host(dw), host_matmul(host(x), true, host(dy), false)), tol) << "seed " << seed;
  // accumulate adds to what is there
  auto y0 = host(y);
  linear_forward(Exec(), x, w, y, /*accumulate=*/true);
  auto y2 = host(y);
  for (std::size_t i = 0; i < y0.span(); ++i) y0.data()[i] *= 2;
  EXPECT_LT(rel_err(y2, y0), tol) << "seed " << seed;
}

/// Central difference of scalar f along each entry of `x` (host, fp64).
HostMatrix numeric_grad(HostMatrix x, const std::function<double(const HostMatrix&)>& f) {
  HostMatrix g("g", x.extent(0), x.extent(1));
  const double h = 1e-6;
  for (std::size_t i = 0; i < x.span(); ++i) {
    const double keep = x.data()[i];
    x.data()[i]       = keep + h;
    const double fp   = f(x);
    x.data()[i]       = keep - h;
    const double fm   = f(x);
    x.data()[i]       = keep;
    g.data()[i]       = (fp - fm) / (2 * h);
  }
  return g;
}

double dot(const HostMatrix& a, const HostMatrix& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.span(); ++i) s += a.data()[i] * b.data()[i];
  return s;
}

HostMatrix host_rmsnorm(const HostMatrix& x, const HostMatrix& g, double eps) {
  HostMatrix y("y", x.extent(0), x.extent(1));
  const std::size_t E = x.extent(1);
  for (std::size_t r = 0; r < x.extent(0); ++r) {
    double ss = 0;
    for (std::size_t j = 0; j < E; ++j) ss += x(r, j) * x(r, j);
    const double s = 1.0 / std::sqrt(ss / double(E) + eps);
    for (std::size_t j = 0; j < E; ++j) y(r, j) = x(r, j) * s * g(0, j);
  }
  return y;
}

TEST(LayerParts, RmsNormForwardAndBackward) {
  const std::uint64_t seed = fresh_seed();
  const long n = 5, E = 12;
  const double eps = 1e-5;
  auto x = random_matrix<double>(n, E, seed), dy = random_matrix<double>(n, E, seed + 1);
  auto g2 = random_matrix<double>(1, E, seed + 2);
  Vector<double, Mem> g("g", E), inv("inv", n), dg("dg", E);
  Kokkos::deep_copy(g, Kokkos::subview(g2, 0, Kokkos::ALL));
  Matrix<double, Mem> y("y", n, E), dx("dx", n, E);
  rmsnorm_forward(Exec(), x, g, eps, inv, y);
  rmsnorm_backward(Exec(), x, g, inv, dy, dx, dg, false);
  const auto hx = host(x), hdy = host(dy), hg = host(g2);
  EXPECT_LT(rel_err(host(y), host_rmsnorm(hx, hg, eps)), 1e-13) << "seed " << seed;
  const auto ndx = numeric_grad(hx, [&](const HostMatrix& xx) { return dot(host_rmsnorm(xx, hg, eps), hdy); });
  EXPECT_LT(rel_err(host(dx), ndx), 1e-8) << "seed " << seed;
  const auto ndg = numeric_grad(hg, [&](const HostMatrix& gg) { return dot(host_rmsnorm(hx, gg, eps), hdy); });
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> dg2(dg.data(), 1, E);
  EXPECT_LT(rel_err(host(dg2), ndg), 1e-8) << "seed " << seed;
}

TEST(LayerParts, SwiGluForwardAndBackward) {
  const std::uint64_t seed = fresh_seed();
  const long n = 4, F = 9;
  auto gate = random_matrix<double>(n, F, seed), up = random_matrix<double>(n, F, seed + 1);
  auto ds = random_matrix<double>(n, F, seed + 2);
  Matrix<double, Mem> s("s", n, F), dgate("dg", n, F), dup("du", n, F);
  swiglu_forward(Exec(), gate, up, s);
  swiglu_backward(Exec(), gate, up, ds, dgate, dup);
  auto f = [](const HostMatrix& g, const HostMatrix& u) {
    HostMatrix r("r", g.extent(0), g.extent(1));
    for (std::size_t i = 0; i < g.span(); ++i)
      r.data()[i] = g.data()[i] / (1 + std::exp(-g.data()[i])) * u.data()[i];
    return r;
  };
  const auto hg = host(gate), hu = host(up), hds = host(ds);
  EXPECT_LT(rel_err(host(s), f(hg, hu)), 1e-14) << "seed " << seed;
  EXPECT_LT(rel_err(host(dgate), numeric_grad(hg, [&](const HostMatrix& g) { return dot(f(g, hu), hds); })), 1e-8);
  EXPECT_LT(rel_err(host(dup), numeric_grad(hu, [&](const HostMatrix& u) { return dot(f(hg, u), hds); })), 1e-8);
}

/// RoPE at the positions of every layout: matches the host rotation, the inverse
/// undoes it, and scores of a rotated pair depend only on their distance. With
/// packed documents a position counts from its document's first token.
TEST(LayerParts, RopeFollowsTheLayoutPositions) {
  const std::uint64_t seed = fresh_seed();
  const int heads = 3, D = 8, c = 6, P = 4, B = 2;
  const double theta = 10000.0;
  const std::vector<std::int64_t> offsets = {0, 5, 7, 8, 19, 24};  // documents across ranks, one of length 1
  Kokkos::View<std::int64_t*, Mem> dev_offsets("offsets", offsets.size());
  Kokkos::deep_copy(dev_offsets, Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                     offsets.data(), offsets.size()));
  for (bool packed : {false, true}) {
    const Documents docs = packed ? Documents{dev_offsets.data(), int(offsets.size()) - 1} : Documents{};
    const auto rotary_position = [&](std::int64_t p) {
      if (!packed) return p;
      return p - *(std::upper_bound(offsets.begin(), offsets.end(), p) - 1);
    };
    for (auto kind : {TokenLayout::Kind::Contiguous, TokenLayout::Kind::Zigzag, TokenLayout::Kind::Cyclic}) {
      TokenLayout t;
      t.kind = kind, t.rank = 1, t.size = P, t.chunk = c;
      const std::string what = std::string(to_string(kind)) + (packed ? " packed" : "") + " (seed " +
                               std::to_string(seed) + ")";
      auto x   = random_matrix<double>(B * c, heads * D, seed);
      auto hx0 = host(x);
      rope_apply(Exec(), x, heads, D, t, theta, +1, docs);
      const auto hx = host(x);
      HostMatrix ref("ref", B * c, heads * D);
      for (int r = 0; r < B * c; ++r)
        for (int h = 0; h < heads; ++h)
          for (int j = 0; j < D / 2; ++j) {
            const double ang = double(rotary_position(t.position(r % c))) * std::pow(theta, -2.0 * j / D);
            const double a = hx0(r, h * D + j), b = hx0(r, h * D + j + D / 2);
            ref(r, h * D + j)         = a * std::cos(ang) - b * std::sin(ang);
            ref(r, h * D + j + D / 2) = b * std::cos(ang) + a * std::sin(ang);
          }
      EXPECT_LT(rel_err(hx, ref), 1e-13) << what;
      rope_apply(Exec(), x, heads, D, t, theta, -1, docs);
      EXPECT_LT(rel_err(host(x), hx0), 1e-13) << what << " inverse";
    }
  }
  // Positions of rank 1 of 4, chunk 6: contiguous 6..11, zigzag 3,4,5 and 18,19,20, cyclic 1,5,9,...
  TokenLayout z;
  z.kind = TokenLayout::Kind::Zigzag, z.rank = 1, z.size = 4, z.chunk = 6;
  EXPECT_EQ(z.position(0), 3);
  EXPECT_EQ(z.position(3), 18);
  z.kind = TokenLayout::Kind::Cyclic;
  EXPECT_EQ(z.position(2), 9);
  z.kind = TokenLayout::Kind::Contiguous;
  EXPECT_EQ(z.position(5), 11);
}

}  // namespace
}  // namespace DistAttn::Test
