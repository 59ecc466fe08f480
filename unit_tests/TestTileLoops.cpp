// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The portable tile's row helpers against float64, on fresh random rows: the
// vectorizable exp (within 2 ulp, exactly 0 at -inf and below 2^-126, NaN kept),
// and the running max / sum that split a row into eight chains.

#include "test_helpers.hpp"

#include <DistAttn/impl/tile_loops.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace DistAttn::Test {
namespace {

TEST(TileLoops, ExpPolyWithinTwoUlpOfFloat64) {
  const auto seed = fresh_seed();
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-87.3f, 0.0f);
  std::vector<float> x(100000);
  for (auto& v : x) v = u(gen);
  x[0] = 0.0f;
  x[1] = -1e-30f;
  std::vector<float> e = x;
  Impl::exp_in_place<Kokkos::Serial>(e.data(), int(e.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(double(x[i]));
    const double ulp = std::nextafter(float(ref), std::numeric_limits<float>::infinity()) - float(ref);
    ASSERT_LE(std::fabs(double(e[i]) - ref), 2 * ulp) << "x = " << x[i] << " seed " << seed;
  }
}

TEST(TileLoops, ExpPolyEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Impl::exp_poly(-inf), 0.0f);
  EXPECT_EQ(Impl::exp_poly(-90.0f), 0.0f);
  EXPECT_EQ(Impl::exp_poly(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(Impl::exp_poly(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(Impl::exp_poly(-std::numeric_limits<float>::quiet_NaN())));
}

TEST(TileLoops, RowMaxAndSumMatchFloat64) {
  const auto seed = fresh_seed();
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> g(0.0, 3.0);
  for (int n : {0, 1, 7, 8, 9, 63, 64, 200}) {
    std::vector<float> x(std::size_t(n) + 1);
    for (auto& v : x) v = float(g(gen));
    const float init = float(g(gen));
    double mx = init, sum = 0;
    for (int c = 0; c < n; ++c) {
      mx = std::max(mx, double(x[c]));
      sum += x[c];
    }
    EXPECT_EQ(Impl::row_max(x.data(), n, init), float(mx)) << "n " << n << " seed " << seed;
    EXPECT_NEAR(Impl::row_sum<float>(x.data(), n), sum, 1e-5 * (1 + n)) << "n " << n << " seed " << seed;
  }
}

}  // namespace
}  // namespace DistAttn::Test
