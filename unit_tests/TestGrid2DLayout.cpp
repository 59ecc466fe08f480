// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Attention2D layouts (docs/design/schedules.md §2, §3) against brute force:
// token sets are enumerated from their definitions by filtering positions, and
// masks are checked against pos_q >= pos_k for every local pair.
#include <DistAttn/core/error.hpp>
#include <DistAttn/schedule/grid2d_layout.hpp>
#include <DistAttn/core/grid_shape.hpp>
#include <DistAttn/schedule/grid2d_volume.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using namespace DistAttn;

namespace {

// classes[res] = tokens t in [0, N) with t mod m == res, ascending.
std::vector<std::vector<std::int64_t>> residue_classes(std::int64_t N, std::int64_t m) {
  std::vector<std::vector<std::int64_t>> v(m);
  for (std::int64_t t = 0; t < N; ++t) v[t % m].push_back(t);
  return v;
}

std::vector<std::int64_t> expand(PositionMap pm, std::int64_t len) {
  std::vector<std::int64_t> v(len);
  for (std::int64_t i = 0; i < len; ++i) v[i] = pm(i);
  return v;
}

void check_grid(int R, int C, bool check_shard_masks) {
  const int P = R * C;
  const std::int64_t N = 2 * std::int64_t(P);
  SCOPED_TRACE("R=" + std::to_string(R) + " C=" + std::to_string(C));
  const Grid2DLayout g(R, C, N);
  ASSERT_EQ(g.num_ranks(), P);
  ASSERT_EQ(g.shard_len(), N / P);
  ASSERT_EQ(g.row_gather_len(), N / R);
  ASSERT_EQ(g.col_gather_len(), N / C);

  // Qp and Kt partition the sequence; Qp of rank p is {p + iP} (the 1D cyclic layout).
  std::vector<int> seen_q(N, 0), seen_k(N, 0), seen_src(P, 0);
  const auto mod_p = residue_classes(N, P);
  const auto mod_r = residue_classes(N, R);
  const auto mod_c = residue_classes(N, C);
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) {
      const int p = g.rank(r, c);
      ASSERT_EQ(p, r + R * c);
      ASSERT_TRUE(g.coord(p) == (GridCoord{r, c}));
      const auto qp = expand(g.qp(r, c), g.shard_len());
      const auto kt = expand(g.kt(r, c), g.shard_len());
      ASSERT_EQ(qp, mod_p[p]);
      for (auto t : qp) ++seen_q[t];
      for (auto t : kt) {
        ASSERT_TRUE(t >= 0 && t < N);
        ++seen_k[t];
      }
      // Kt(r,c) is a subset of Kg(c) and of row-major rank C r + c's residue class.
      ASSERT_EQ(kt, mod_p[std::size_t(C) * r + c]);

      // Permutation: the source's Qp is exactly our Kt, and its destination is us.
      const int src = g.transpose_source(r, c);
      ASSERT_TRUE(src >= 0 && src < P);
      ++seen_src[src];
      const GridCoord sc = g.coord(src);
      EXPECT_EQ(expand(g.qp(sc.row, sc.col), g.shard_len()), kt);
      EXPECT_EQ(g.transpose_dest(sc.row, sc.col), p);
      if (R == C) {
        EXPECT_EQ(src, g.rank(c, r)) << "square grid: pairwise swap";
      }
    }
  for (std::int64_t t = 0; t < N; ++t) {
    ASSERT_EQ(seen_q[t], 1) << "Qp token " << t;
    ASSERT_EQ(seen_k[t], 1) << "Kt token " << t;
  }
  for (int p = 0; p < P; ++p) ASSERT_EQ(seen_src[p], 1) << "permutation not a bijection at " << p;

  // Gathered sets: Qg(r) = tokens = r mod R, Kg(c) = tokens = c mod C, position
  // ordered, and equal to the unions of their shards at the documented rows.
  std::vector<std::vector<std::int64_t>> qg(R), kg(C);
  for (int r = 0; r < R; ++r) {
    qg[r] = mod_r[r];
    ASSERT_EQ(expand(g.qg(r), g.row_gather_len()), qg[r]);
    for (int c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < g.shard_len(); ++i)
        ASSERT_EQ(qg[r][g.row_gather_index(c, i)], g.qp(r, c)(i));
  }
  for (int c = 0; c < C; ++c) {
    kg[c] = mod_c[c];
    ASSERT_EQ(expand(g.kg(c), g.col_gather_len()), kg[c]);
    for (int j = 0; j < R; ++j)
      for (std::int64_t i = 0; i < g.shard_len(); ++i)
        ASSERT_EQ(kg[c][g.col_gather_index(j, i)], g.kt(j, c)(i));
  }

  // Every score pair owned exactly once; the gathered mask is the causal rule.
  // Loop order keeps one row of `owners` hot: query token outermost.
  std::vector<int> owners(std::size_t(N) * N, -1);
  for (int r = 0; r < R; ++r) {
    std::vector<Mask> masks;
    for (int c = 0; c < C; ++c) {
      masks.push_back(g.gathered_mask(r, c));
      ASSERT_EQ(masks.back().kind, MaskKind::Causal);
    }
    const auto& qs = qg[r];
    for (std::size_t a = 0; a < qs.size(); ++a) {
      int* row = &owners[std::size_t(qs[a]) * N];
      for (int c = 0; c < C; ++c) {
        const int p = r + R * c;
        const auto& ks = kg[c];
        for (std::size_t b = 0; b < ks.size(); ++b) {
          int& o = row[ks[b]];
          if (o != -1) FAIL() << "pair (" << qs[a] << "," << ks[b] << ") owned by " << o << " and " << p;
          o = p;
          if (masks[c].allowed(std::int64_t(a), std::int64_t(b)) != (qs[a] >= ks[b]))
            FAIL() << "gathered mask (r=" << r << ", c=" << c << ") wrong at a=" << a << " b=" << b;
        }
      }
    }
  }
  // pair_owner is a closed formula; a sparse sample of pairs suffices for it.
  const std::int64_t sample = P <= 64 ? 1 : 7;
  for (std::int64_t i = 0; i < N; ++i) {
    const int* row = &owners[std::size_t(i) * N];
    for (std::int64_t j = 0; j < N; ++j)
      if (row[j] == -1) FAIL() << "pair (" << i << "," << j << ") owned by nobody";
    for (std::int64_t j = i % sample; j < N; j += sample)
      if (g.pair_owner(i, j) != row[j]) FAIL() << "pair_owner(" << i << "," << j << ")";
  }

  if (!check_shard_masks) return;
  for (int r = 0; r < R; ++r)
    for (int qc = 0; qc < C; ++qc) {
      const auto& qs = mod_p[std::size_t(r) + std::size_t(R) * qc];
      for (int j = 0; j < R; ++j)
        for (int c = 0; c < C; ++c) {
          const auto& ks = mod_p[std::size_t(C) * j + c];
          const Mask m = g.shard_mask(r, qc, j, c);
          for (std::size_t a = 0; a < qs.size(); ++a)
            for (std::size_t b = 0; b < ks.size(); ++b)
              if (m.allowed(std::int64_t(a), std::int64_t(b)) != (qs[a] >= ks[b]))
                FAIL() << "shard mask Qp(" << r << "," << qc << ") vs Kt(" << j << "," << c << ") at " << a << ","
                       << b;
        }
    }
}

}  // namespace

TEST(Grid2DLayout, AllGridsUpTo32x32) {
  for (int R = 1; R <= 32; ++R)
    for (int C = 1; C <= 32; ++C) {
      // Shard-mask checks visit P^2 shard pairs; the affine rule is the same
      // for every grid, so the small ones cover it.
      check_grid(R, C, R * C <= 128);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Grid2DLayout, SpecExample2x2) {
  // The 2 x 2 example of schedules.md §2: N = 8 on 2 x 2, scores 10/10/10/6 with p_{0,1} = 6.
  const Grid2DLayout g(2, 2, 8);
  int work[2][2] = {};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c) {
      const Mask m = g.gathered_mask(r, c);
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) work[r][c] += m.allowed(a, b) ? 1 : 0;
    }
  EXPECT_EQ(work[0][0], 10);
  EXPECT_EQ(work[1][0], 10);
  EXPECT_EQ(work[1][1], 10);
  EXPECT_EQ(work[0][1], 6);
  // Rank 1 = (1,0) holds Qp = {1, 5} and Kt = {2, 6} (from rank 2 = (0,1)).
  EXPECT_EQ(g.qp(1, 0).offset, 1);
  EXPECT_EQ(g.kt(1, 0).offset, 2);
  EXPECT_EQ(g.transpose_source(1, 0), 2);
  EXPECT_EQ(g.transpose_dest(1, 0), 2);
}

TEST(Grid2DLayout, NonSquarePermutation) {
  // 2 x 3: fixed points are exactly the ranks p with C r + c == p.
  const Grid2DLayout g(2, 3, 12);
  int fixed = 0;
  for (int p = 0; p < 6; ++p) {
    const GridCoord rc = g.coord(p);
    if (g.transpose_source(rc.row, rc.col) == p) ++fixed;
  }
  EXPECT_EQ(fixed, 2);  // ranks 0 and 5
  // (1,0) is rank 1 and needs Kt = {3, 9}: rank 3's Qp, rank 3 = (1,1).
  EXPECT_EQ(g.transpose_source(1, 0), 3);
  EXPECT_EQ(g.kt(1, 0).offset, 3);
  EXPECT_EQ(g.row_members(1), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(g.col_members(2), (std::vector<int>{4, 5}));
}

TEST(Grid2DLayout, BadInput) {
  try {
    Grid2DLayout(3, 4, 30);
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("N=30"), std::string::npos) << w;
    EXPECT_NE(w.find("P=R*C=12"), std::string::npos) << w;
  }
  EXPECT_THROW(Grid2DLayout(0, 4, 8), InvalidArgument);
  EXPECT_THROW(Grid2DLayout(2, 2, 0), InvalidArgument);
  const Grid2DLayout g(2, 2, 8);
  EXPECT_THROW(g.qp(2, 0), InvalidArgument);
  EXPECT_THROW(g.coord(4), InvalidArgument);
  EXPECT_THROW(g.pair_owner(8, 0), InvalidArgument);
}

TEST(Grid2DShape, MinimisesForwardVolume) {
  const int configs[][2] = {{1, 1}, {8, 8}, {32, 8}, {32, 1}, {12, 4}, {64, 8}, {40, 8}};
  for (int P = 1; P <= 1024; ++P)
    for (const auto& hk : configs) {
      const int H = hk[0], Hkv = hk[1], G = H / Hkv;
      const GridShape s = choose_grid_shape(P, H, Hkv);
      ASSERT_EQ(s.rows * s.cols, P) << "P=" << P;
      // Brute force over all factorizations with the §3.12 model in words.
      const double d = 128, N = 1 << 20;
      auto vol = [&](int R, int C) { return ((C - 1) * 2.0 * G * d + (R - 1) * 2.0 * d) * N / P; };
      const double chosen = vol(s.rows, s.cols);
      for (int R = 1; R <= P; ++R) {
        if (P % R) continue;
        const int C = P / R;
        ASSERT_GE(vol(R, C), chosen) << "P=" << P << " G=" << G << " better " << R << "x" << C;
        if (vol(R, C) == chosen) {
          ASSERT_GE(std::abs(R - C), std::abs(s.rows - s.cols)) << "tie not broken towards square, P=" << P;
        }
      }
    }
  EXPECT_TRUE(choose_grid_shape(16, 8, 8) == (GridShape{4, 4}));
  EXPECT_TRUE(choose_grid_shape(64, 32, 32) == (GridShape{8, 8}));
  EXPECT_TRUE(choose_grid_shape(16, 32, 8) == (GridShape{8, 2}));  // G = 4: cost 1*4+7 = 11 < 3*4+3 = 15
  EXPECT_TRUE(choose_grid_shape(8, 1, 1) == (GridShape{4, 2}));    // tie 4x2 / 2x4 -> more rows
  EXPECT_TRUE(choose_grid_shape(7, 1, 1) == (GridShape{7, 1}));
  EXPECT_TRUE(choose_grid_shape(16, 8, 8, {2, 0}) == (GridShape{2, 8}));
  EXPECT_TRUE(choose_grid_shape(16, 8, 8, {0, 2}) == (GridShape{8, 2}));
  EXPECT_TRUE(choose_grid_shape(16, 8, 8, {16, 1}) == (GridShape{16, 1}));
  EXPECT_THROW(choose_grid_shape(16, 8, 8, {3, 0}), InvalidArgument);
  EXPECT_THROW(choose_grid_shape(16, 8, 8, {2, 2}), InvalidArgument);
  EXPECT_THROW(choose_grid_shape(16, 6, 4), InvalidArgument);
  EXPECT_THROW(choose_grid_shape(0, 8, 8), InvalidArgument);
}

// The square-grid table of schedules.md §3 (one head of dimension Hs, s x s grid, ring collectives).
TEST(Grid2DVolume, MatchesSpecTableOnSquareGrids) {
  for (int s = 1; s <= 8; ++s) {
    const std::int64_t P = s * s, N = 4 * P * 3, Hs = 64;
    const Grid2DLayout g(s, s, N);
    Grid2DVolumeParams a2d;  // [A2D] as printed: (M, D) stats, gather O
    a2d.head_dim = int(Hs);
    a2d.fwd_stats_per_row = 2;
    a2d.bwd_stats_per_row = 2;
    a2d.bwd_gather_o = true;
    for (int r = 0; r < s; ++r)
      for (int c = 0; c < s; ++c) {
        const int p = g.rank(r, c);
        const auto f = grid2d_no_forward_words(g, p, a2d);
        EXPECT_EQ(f.kv_permute, r == c ? 0 : 2 * N * Hs / P);
        EXPECT_EQ(f.q_allgather, (s - 1) * N * Hs / P);
        EXPECT_EQ(f.kv_allgather, 2 * (s - 1) * N * Hs / P);
        EXPECT_EQ(f.partial_reduce_scatter, (s - 1) * (N * Hs + 2 * N) / P);
        const auto b = grid2d_no_backward_words(g, p, a2d);
        EXPECT_EQ(b.row_allgather, (s - 1) * (3 * N * Hs + 2 * N) / P);
        EXPECT_EQ(b.kv_allgather, 2 * (s - 1) * N * Hs / P);
        EXPECT_EQ(b.dq_reduce_scatter, (s - 1) * N * Hs / P);
        EXPECT_EQ(b.dkv_reduce_scatter, 2 * (s - 1) * N * Hs / P);
        EXPECT_EQ(b.dkv_permute, r == c ? 0 : 2 * N * Hs / P);
        // LSE variant of the forward row: (s-1)(NH + N)/P.
        Grid2DVolumeParams lse = a2d;
        lse.fwd_stats_per_row = 1;
        EXPECT_EQ(grid2d_no_forward_words(g, p, lse).partial_reduce_scatter, (s - 1) * (N * Hs + N) / P);
        // Library default (Delta + LSE): q, dO, Delta, LSE.
        Grid2DVolumeParams def;
        def.head_dim = int(Hs);
        EXPECT_EQ(grid2d_no_backward_words(g, p, def).row_allgather, (s - 1) * (2 * N * Hs + 2 * N) / P);
      }
  }
}

TEST(Grid2DVolume, GeneralGridGQA) {
  // 4 x 2, N = 64, 32 heads / 8 kv heads, d = 16: n = 8 tokens per shard.
  const Grid2DLayout g(4, 2, 64);
  Grid2DVolumeParams p;
  p.heads = 32;
  p.kv_heads = 8;
  p.head_dim = 16;
  int zero_permute = 0;
  for (int rank = 0; rank < 8; ++rank) {
    const auto f = grid2d_no_forward_words(g, rank, p);
    EXPECT_EQ(f.q_allgather, 1 * 8 * 32 * 16);
    EXPECT_EQ(f.kv_allgather, 3 * 2 * 8 * 8 * 16);
    EXPECT_EQ(f.partial_reduce_scatter, 1 * 8 * 32 * (16 + 2));
    const auto b = grid2d_no_backward_words(g, rank, p);
    EXPECT_EQ(b.row_allgather, 1 * 8 * 32 * (2 * 16 + 1 + 1));
    EXPECT_EQ(b.dkv_reduce_scatter, 3 * 2 * 8 * 8 * 16);
    EXPECT_EQ(b.total(), b.row_allgather + b.kv_allgather + b.dq_reduce_scatter + b.dkv_reduce_scatter +
                             b.dkv_permute);
    if (f.kv_permute == 0) ++zero_permute;
    else EXPECT_EQ(f.kv_permute, 2 * 8 * 8 * 16);
  }
  // Fixed points of p -> (p / C) + R (p % C) on 4 x 2: p = 0 and 7 only.
  EXPECT_EQ(zero_permute, 2);
  Grid2DVolumeParams bad;
  bad.heads = 5;
  bad.kv_heads = 2;
  EXPECT_THROW(grid2d_no_forward_words(g, 0, bad), InvalidArgument);
}
