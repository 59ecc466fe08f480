// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// ProcessGrid2D and its rank arithmetic (docs/design/schedules.md §2): the pure
// permutation for every R x C up to 8 x 8, then the real grid on 1x1, 1x2, 2x1,
// 2x2, 1x3, 3x1, 1x4 and 4x1 (skipped where the rank count does not fit):
// row/column sub-communicators, row/column collectives, the K/V transpose.

#include "comm_test_helpers.hpp"

#include <algorithm>
#include <set>
#include <vector>

namespace DistAttn::Test {
namespace {

// ---- pure layout checks (no communication) ---------------------------------

std::set<long> tokens_qp(const GridShape& g, int p, int n_local) {  // Qp: {p + i*P}
  std::set<long> s;
  for (int i = 0; i < n_local; ++i) s.insert(p + long(i) * g.size());
  return s;
}
std::set<long> tokens_kt(const GridShape& g, GridCoord rc, int n_local) {  // Kt(r,c): {C r + c + i P}
  std::set<long> s;
  for (int i = 0; i < n_local; ++i) s.insert(g.cols * rc.row + rc.col + long(i) * g.size());
  return s;
}

TEST(GridShape, PermutationForAllShapesUpTo8x8) {
  const int n_local = 3;
  for (int R = 1; R <= 8; ++R) {
    for (int C = 1; C <= 8; ++C) {
      const GridShape g{R, C};
      const int P = R * C;
      const long N = long(P) * n_local;
      std::vector<int> seen_source(P, 0);
      for (int p = 0; p < P; ++p) {
        const GridCoord rc = g.coord_of(p);
        ASSERT_EQ(g.rank_of(rc), p);
        ASSERT_EQ(rc.row, p % R);
        ASSERT_EQ(rc.col, p / R);
        const int src = g.transpose_source(p), dst = g.transpose_dest(p);
        ASSERT_TRUE(src >= 0 && src < P && dst >= 0 && dst < P) << R << "x" << C << " p=" << p;
        EXPECT_EQ(g.transpose_dest(src), p) << R << "x" << C << " p=" << p;
        EXPECT_EQ(g.transpose_source(dst), p) << R << "x" << C << " p=" << p;
        ++seen_source[src];
        // The shard that arrives from src is exactly Kt(r, c) (schedules.md §2).
        EXPECT_EQ(tokens_qp(g, src, n_local), tokens_kt(g, rc, n_local)) << R << "x" << C << " p=" << p;
        // What p sends lands on dst, whose Kt shard it is.
        EXPECT_EQ(tokens_qp(g, p, n_local), tokens_kt(g, g.coord_of(dst), n_local));
        if (R == C) {
          EXPECT_EQ(src, g.rank_of(GridCoord{rc.col, rc.row})) << "square grids swap (r,c)";
        }
      }
      for (int p = 0; p < P; ++p) EXPECT_EQ(seen_source[p], 1) << "transpose_source is a permutation";
      // Column gather of Kt = Kg(c) = {c + b C}; row gather of Qp = Qg(r) = {r + a R}.
      for (int c = 0; c < C; ++c) {
        std::set<long> kg, expected;
        for (int r = 0; r < R; ++r) {
          auto t = tokens_kt(g, GridCoord{r, c}, n_local);
          kg.insert(t.begin(), t.end());
        }
        for (long b = 0; b < N / C; ++b) expected.insert(c + b * C);
        EXPECT_EQ(kg, expected) << R << "x" << C << " column " << c;
      }
      for (int r = 0; r < R; ++r) {
        std::set<long> qg, expected;
        for (int c = 0; c < C; ++c) {
          auto t = tokens_qp(g, g.rank_of(GridCoord{r, c}), n_local);
          qg.insert(t.begin(), t.end());
        }
        for (long a = 0; a < N / R; ++a) expected.insert(r + a * R);
        EXPECT_EQ(qg, expected) << R << "x" << C << " row " << r;
      }
    }
  }
}

// ---- the grid over real communicators ----------------------------------------

template <class Cfg>
using ProcessGrid = CommTest<Cfg>;
TYPED_TEST_SUITE(ProcessGrid, CommConfigs, CfgNames);

/// Token t's payload: n_feat values that only token t has.
constexpr std::size_t kFeat = 5;

template <class Cfg>
void run_grid(typename Cfg::comm& world, std::uint64_t seed, int R, int C) {
  using Mem   = typename Cfg::exec::memory_space;
  const int P = world.size(), p = world.rank();
  ProcessGrid2D<typename Cfg::space, typename Cfg::exec> grid(world, R, C);
  const auto [r, c] = grid.coords();
  EXPECT_EQ(r, p % R);
  EXPECT_EQ(c, p / R);
  EXPECT_EQ(grid.dims().rows, R);
  EXPECT_EQ(grid.dims().cols, C);
  EXPECT_EQ(grid.world().rank(), p);
  EXPECT_EQ(grid.row().size(), C);
  EXPECT_EQ(grid.row().rank(), c) << "row() is ordered by column";
  EXPECT_EQ(grid.col().size(), R);
  EXPECT_EQ(grid.col().rank(), r) << "col() is ordered by row";
  EXPECT_EQ(grid.transpose_source(), C * r + c);

  // Members: a row gathers the world ranks {r + R j}, a column {i + R c}.
  Kokkos::View<int*, Mem> me("me", 1), row_members("row_members", C), col_members("col_members", R);
  Kokkos::deep_copy(me, p);
  {
    auto a = all_gather(grid.row(), me, row_members);
    auto b = all_gather(grid.col(), me, col_members);
    a.wait();
    b.wait();
  }
  auto hr = host_copy(row_members), hc = host_copy(col_members);
  for (int j = 0; j < C; ++j) EXPECT_EQ(hr(j), r + R * j) << "row member " << j;
  for (int i = 0; i < R; ++i) EXPECT_EQ(hc(i), i + R * c) << "column member " << i;

  // Qp shard: tokens {p + i P}, i < n_local. Transpose: receive Kt(r,c) = {C r + c + i P}.
  const int n_local = 3;
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> qp("qp", n_local, kFeat), kt("kt", n_local, kFeat);
  {
    auto h = Kokkos::create_mirror_view(qp);
    for (int i = 0; i < n_local; ++i)
      for (std::size_t f = 0; f < kFeat; ++f) h(i, f) = value_of<double>(seed, p + long(i) * P, f);
    Kokkos::deep_copy(qp, h);
  }
  fill(kt, seed ^ 13, p);
  grid.world().counters().reset();
  auto treq = transpose_exchange(grid, qp, kt, 5);
  treq.wait();
  auto hkt = host_copy(kt);
  for (int i = 0; i < n_local; ++i)
    for (std::size_t f = 0; f < kFeat; ++f)
      EXPECT_TRUE(same_bytes(hkt(i, f), value_of<double>(seed, C * r + c + long(i) * P, f)))
          << "Kt row " << i << " on rank " << p << " (" << R << "x" << C << ", seed " << seed << ")";
  const std::uint64_t shard_bytes = n_local * kFeat * sizeof(double);
  EXPECT_EQ(grid.world().counters().peer(grid.transpose_dest()).bytes_sent, shard_bytes);
  EXPECT_EQ(grid.world().counters().peer(grid.transpose_source()).bytes_received, shard_bytes);

  // Column all-gather of Kt: shard-major Kg(c), block j = Kt(j, c) = {C j + c + i P}.
  Kokkos::View<double***, Kokkos::LayoutRight, Mem> kg("kg", R, n_local, kFeat);
  grid.col().counters().reset();
  auto greq = all_gather(grid.col(), kt, kg);
  greq.wait();
  auto hkg = host_copy(kg);
  for (int j = 0; j < R; ++j)
    for (int i = 0; i < n_local; ++i)
      for (std::size_t f = 0; f < kFeat; ++f)
        EXPECT_TRUE(same_bytes(hkg(j, i, f), value_of<double>(seed, C * j + c + long(i) * P, f)))
            << "Kg block " << j << " row " << i << " on rank " << p;
  EXPECT_EQ(grid.col().counters().bytes_received(), std::uint64_t(R - 1) * shard_bytes);

  // Row reduce-scatter: rank (r, c) contributes C blocks; block j lands on row rank j.
  const std::size_t m = 7;
  Kokkos::View<double*, Mem> parts("parts", C * m), sum("sum", m);
  fill(parts, seed, p);
  grid.row().counters().reset();
  auto rreq = reduce_scatter_sum(grid.row(), parts, sum);
  rreq.wait();
  auto hs = host_copy(sum);
  for (std::size_t k = 0; k < m; ++k) {
    double expected = 0;
    for (int j = 0; j < C; ++j) expected += value_of<double>(seed, r + R * j, c * m + k);
    EXPECT_NEAR(hs(k), expected, 1e-13 * C) << "row sum element " << k << " on rank " << p;
  }
  EXPECT_EQ(grid.row().counters().bytes_sent(), std::uint64_t(C - 1) * m * sizeof(double));
}

template <class Cfg>
void grid_case(typename Cfg::comm& world, std::uint64_t seed, int R, int C) {
  if (world.size() != R * C)
    GTEST_SKIP() << "a " << R << "x" << C << " grid needs " << R * C << " ranks; running on " << world.size();
  run_grid<Cfg>(world, seed, R, C);
}

#define DISTATTN_GRID_TEST(R, C) \
  TYPED_TEST(ProcessGrid, Grid##R##x##C) { grid_case<TypeParam>(this->world(), this->seed(), R, C); }
DISTATTN_GRID_TEST(1, 1)
DISTATTN_GRID_TEST(1, 2)
DISTATTN_GRID_TEST(2, 1)
DISTATTN_GRID_TEST(2, 2)
DISTATTN_GRID_TEST(1, 3)
DISTATTN_GRID_TEST(3, 1)
DISTATTN_GRID_TEST(1, 4)
DISTATTN_GRID_TEST(4, 1)
#undef DISTATTN_GRID_TEST

TYPED_TEST(ProcessGrid, BadShapeThrowsInvalidArgument) {
  using Grid  = ProcessGrid2D<typename TypeParam::space, typename TypeParam::exec>;
  auto& world = this->world();
  const int P = world.size();
  const std::string p = "P=" + std::to_string(P);
  expect_throw_with<InvalidArgument>([&] { Grid g(world, P + 1, 1); }, {"ProcessGrid2D", p, "R=" + std::to_string(P + 1), "C=1"});
  expect_throw_with<InvalidArgument>([&] { Grid g(world, 0, P); }, {p, "R=0", "C=" + std::to_string(P)});
  expect_throw_with<InvalidArgument>([&] { Grid g(world, -1, -P); }, {p, "R=-1"});
  expect_throw_with<InvalidArgument>([&] { Grid g(world, 2, P); }, {p, "R=2", "C=" + std::to_string(P)});
  // The communicator is still usable afterwards (nothing was posted).
  auto req = barrier(world);
  req.wait();
}

}  // namespace
}  // namespace DistAttn::Test
