// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Cost model (cost/cost_model.hpp): its byte and step counts against the
// volume models the executors' counters are tested against (ring_volume,
// grid2d_volume) and against brute-force enumeration (causal pairs, Ulysses
// all-to-all), its limits (no communication cost -> compute only), scaling
// laws, the ranking's order, and its errors.
#include <DistAttn/core/error.hpp>
#include <DistAttn/cost/cost_model.hpp>

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace DistAttn;

namespace {

// The error text names the argument (checked as a substring of what()).
#define EXPECT_CONTAINS(text, part)                                        \
  do {                                                                    \
    const std::string expect_contains_text_ = (text);                      \
    EXPECT_NE(expect_contains_text_.find(part), std::string::npos)        \
        << "expected '" << (part) << "' in: " << expect_contains_text_;  \
  } while (0)

TileThroughput test_tiles(const std::string& dtype = "bf16", int d = 64) {
  TileThroughput t;
  t.set({TileDirection::Forward, BlockKind::Full, dtype, d}, {4e11, 5e-6});
  t.set({TileDirection::Forward, BlockKind::Causal, dtype, d}, {3e11, 5e-6});
  t.set({TileDirection::Backward, BlockKind::Full, dtype, d}, {2.5e11, 8e-6});
  t.set({TileDirection::Backward, BlockKind::Causal, dtype, d}, {2e11, 8e-6});
  t.set_elementwise_bytes_per_s(2e12);
  t.set_copy_bytes_per_s(3e12);
  return t;
}

MachineModel test_machine(const std::string& dtype = "bf16", int d = 64) {
  return nvlink_ib_node_defaults(test_tiles(dtype, d));
}

AttnProblem problem(std::int64_t N, int H, int Hkv, int d = 64, const std::string& dtype = "bf16", int B = 1) {
  AttnProblem p;
  p.batch = B, p.seq_len = N, p.heads = H, p.kv_heads = Hkv, p.head_dim = d, p.dtype = dtype;
  return p;
}

ExecutorChoice ring_choice(ExecutorKind k) {
  ExecutorChoice c;
  c.kind = k;
  return c;
}
ExecutorChoice grid_choice(ExecutorKind k, int R, int C) {
  ExecutorChoice c;
  c.kind = k, c.rows = R, c.cols = C;
  return c;
}

}  // namespace

// Whole-tile work as the portable kernels' loops visit it: every query tile
// against the key tiles up to the first that starts after its last row.
TEST(CostModel, TilePairsMatchTheKernelLoop) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> off(-40, 60), stride(1, 9), len(0, 40), tile(1, 9);
  for (int it = 0; it < 3000; ++it) {
    const PositionMap q{off(rng), stride(rng)}, k{off(rng), stride(rng)};
    const std::int64_t nq = len(rng), nk = len(rng), t = tile(rng);
    std::int64_t causal = 0, full = 0;
    for (std::int64_t q0 = 0; q0 < nq; q0 += t)
      for (std::int64_t k0 = 0; k0 < nk; k0 += t) {
        full += t * t;
        if (k(k0) <= q(std::min(q0 + t, nq) - 1)) causal += t * t;
      }
    ASSERT_EQ(tile_pairs(Mask::causal(q, k), nq, nk, t), causal)
        << "q={" << q.offset << "," << q.stride << "} nq=" << nq << " k={" << k.offset << "," << k.stride << "} nk=" << nk
        << " t=" << t;
    ASSERT_EQ(tile_pairs(Mask{MaskKind::None, q, k}, nq, nk, t), full);
    ASSERT_EQ(tile_pairs(Mask::causal(q, k), nq, nk, 1), Mask::causal(q, k).allowed_pairs(nq, nk));
  }
  // A table with tile rows charges a 72-row block as a 128-row one; without, as 72 rows.
  TileThroughput tiles = test_tiles("float", 64);
  const ShapeClass full{TileDirection::Forward, BlockKind::Full, "float", 64};
  const double exact = tiles.block_seconds(full, 8, {0, 1}, 72, {0, 1}, 72);
  EXPECT_DOUBLE_EQ(exact, tiles.call_seconds(full, 8, 72.0 * 72));
  tiles.set(full, TileRate{tiles.rate(full).flops_per_s, tiles.rate(full).overhead_s, 64});
  EXPECT_DOUBLE_EQ(tiles.block_seconds(full, 8, {0, 1}, 72, {0, 1}, 72), tiles.call_seconds(full, 8, 128.0 * 128));
  EXPECT_DOUBLE_EQ(tiles.block_seconds(full, 8, {0, 1}, 128, {0, 1}, 128), tiles.call_seconds(full, 8, 128.0 * 128));
  EXPECT_THROW(tile_pairs(Mask::causal(), 4, 4, 0), InvalidArgument);
}

TEST(CostModel, RingBytesAndStepsEqualRingVolume) {
  for (int P = 1; P <= 12; ++P)
    for (ExecutorKind k : {ExecutorKind::RingVanilla, ExecutorKind::RingBalanced, ExecutorKind::RingZigzag})
      for (auto [H, Hkv, d, B] : {std::array<int, 4>{4, 2, 64, 1}, {8, 8, 64, 3}, {6, 1, 64, 2}}) {
        SCOPED_TRACE("P=" + std::to_string(P) + " " + to_string(k) + " H=" + std::to_string(H));
        const AttnProblem pr = problem(std::int64_t(2 * P) * 37, H, Hkv, d, "bf16", B);
        const Prediction p = predict(ring_choice(k), pr, P, test_machine());
        const RingSchedule s(P, ring_kind_of(k));
        const RingSizes z = ring_sizes(pr, pr.seq_len / P);
        std::int64_t fs = 0, fr = 0, bs = 0, br = 0;
        for (int x = 0; x < P; ++x) {
          fs = std::max(fs, ring_volume(s, x, Pass::Forward, z).total_bytes_sent());
          fr = std::max(fr, ring_volume(s, x, Pass::Forward, z).total_bytes_received());
          bs = std::max(bs, ring_volume(s, x, Pass::Backward, z).total_bytes_sent());
          br = std::max(br, ring_volume(s, x, Pass::Backward, z).total_bytes_received());
        }
        EXPECT_EQ(p.forward.max_bytes_sent, B * fs);
        EXPECT_EQ(p.forward.max_bytes_received, B * fr);
        EXPECT_EQ(p.backward.max_bytes_sent, B * bs);
        EXPECT_EQ(p.backward.max_bytes_received, B * br);
        EXPECT_EQ(p.forward.steps, s.num_steps());
        EXPECT_EQ(p.backward.steps, s.num_steps());
      }
}

TEST(CostModel, Grid2DBytesEqualGrid2DVolume) {
  for (int P : {1, 2, 3, 4, 6, 8, 9, 12, 16})
    for (int R = 1; R <= P; ++R) {
      if (P % R) continue;
      const int C = P / R;
      for (auto [H, Hkv] : {std::array<int, 2>{4, 2}, {8, 8}, {6, 1}}) {
        SCOPED_TRACE("grid " + std::to_string(R) + "x" + std::to_string(C) + " H=" + std::to_string(H));
        // float: every element is 4 bytes, so bytes = 4 x words for every phase.
        const AttnProblem pr = problem(std::int64_t(P) * 12, H, Hkv, 32, "float", 2);
        const Grid2DLayout g(R, C, pr.seq_len);
        const Grid2DVolumeParams vp = grid2d_executor_volume_params(pr);
        std::int64_t fmax = 0, bmax = 0;
        for (int x = 0; x < P; ++x) {
          const Grid2DPhaseBytes b = grid2d_phase_bytes(g, x, pr);
          const std::int64_t fw = grid2d_no_forward_words(g, x, vp).total();
          const std::int64_t bw = grid2d_no_backward_words(g, x, vp).total();
          EXPECT_EQ(std::int64_t(b.forward_total()), 2 * 4 * fw);
          EXPECT_EQ(std::int64_t(b.backward_total()), 2 * 4 * bw);
          fmax = std::max(fmax, 8 * fw);
          bmax = std::max(bmax, 8 * bw);
        }
        for (ExecutorKind k : {ExecutorKind::Grid2DNO, ExecutorKind::Grid2DO}) {
          const Prediction p = predict(grid_choice(k, R, C), pr, P, test_machine("float", 32));
          EXPECT_EQ(p.forward.max_bytes_received, fmax);
          EXPECT_EQ(p.backward.max_bytes_sent, bmax);
          EXPECT_EQ(p.choice.rows, R);
          EXPECT_EQ(p.choice.cols, C);
        }
      }
    }
  // bf16: q, k, v, dO travel in 2 bytes, partials, statistics and gradients in 4.
  const AttnProblem pr = problem(64, 4, 2, 16, "bf16", 1);
  const Grid2DLayout g(2, 4, 64);
  const Grid2DPhaseBytes b = grid2d_phase_bytes(g, 1, pr);
  const std::int64_t n = 8;
  EXPECT_EQ(b.q_gather, 3 * n * 4 * 16 * 2);
  EXPECT_EQ(b.partial_scatter, 3 * n * 4 * (16 + 2) * 4);
  EXPECT_EQ(b.bundle_gather, 3 * n * 4 * (2 * 16 * 2 + 2 * 4));
  EXPECT_EQ(b.dkv_scatter, 1 * 2 * n * 2 * 16 * 4);
}

TEST(CostModel, UlyssesBytesMatchPerPeerEnumeration) {
  for (int U = 1; U <= 16; ++U)
    for (int H : {16, 32, 48})
      for (int Hkv : {1, 2, 4, 8, 16}) {
        if (H % Hkv || H % U || !(Hkv % U == 0 || U % Hkv == 0)) {
          if (H % Hkv == 0) { EXPECT_THROW(UlyssesHeads(U, H, Hkv), InvalidArgument); }
          continue;
        }
        SCOPED_TRACE("U=" + std::to_string(U) + " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv));
        UlyssesSizes z;
        z.tokens_per_rank = 5, z.degree = U, z.heads = H, z.kv_heads = Hkv, z.head_dim = 8, z.io_bytes = 2;
        z.acc_bytes = 4;
        // Rank 0 sends to each peer j the rows of j's query heads and of every
        // K/V head those query heads read.
        const int G = H / Hkv, hq = H / U;
        std::int64_t q = 0, kv = 0, rows = 0;
        for (int j = 1; j < U; ++j) {
          std::set<int> kvh;
          for (int h = j * hq; h < (j + 1) * hq; ++h) kvh.insert(h / G);
          q += z.tokens_per_rank * hq * z.head_dim;
          kv += 2 * z.tokens_per_rank * std::int64_t(kvh.size()) * z.head_dim;
          rows += z.tokens_per_rank * hq;
        }
        const auto f = ulysses_exchanges(z, false), b = ulysses_exchanges(z, true);
        ASSERT_EQ(f.size(), 3u);
        EXPECT_EQ(f[0].bytes, 2 * (q + kv));
        EXPECT_EQ(f[1].bytes, 2 * q);
        EXPECT_EQ(f[2].bytes, 4 * rows);
        ASSERT_EQ(b.size(), 3u);
        EXPECT_EQ(b[0].bytes, 2 * q);
        EXPECT_EQ(b[1].bytes, 4 * 2 * rows);
        EXPECT_EQ(b[2].bytes, 4 * (q + kv));
        EXPECT_EQ(ulysses_pass_bytes(z, true, false), ulysses_pass_bytes(z, true) + 2 * (q + kv));
      }
}

// The head groups' all-to-alls add up to the unpipelined ones; G must divide the
// query and the K/V heads per rank.
TEST(CostModel, UlyssesGroupExchangesSumToTheWholePass) {
  for (int U : {1, 2, 4, 8})
    for (int Hkv : {1, 2, 8, 16}) {
      const int H = 16;
      if (!(Hkv % U == 0 || U % Hkv == 0)) continue;
      const UlyssesHeads h(U, H, Hkv);
      UlyssesSizes z;
      z.tokens_per_rank = 7, z.degree = U, z.heads = H, z.kv_heads = Hkv, z.head_dim = 8;
      for (int G = 1; G <= h.local_heads(); ++G) {
        if (h.local_heads() % G || h.local_kv_heads() % G) {
          EXPECT_THROW(ulysses_head_groups(h, G), InvalidArgument);
          continue;
        }
        SCOPED_TRACE("U=" + std::to_string(U) + " Hkv=" + std::to_string(Hkv) + " G=" + std::to_string(G));
        for (bool bwd : {false, true}) {
          EXPECT_EQ(ulysses_head_groups(h, G), G);
          std::int64_t sum = 0;
          for (int g = 0; g < G; ++g)
            for (const auto& e : ulysses_slice_exchanges(z, bwd, h.local_heads() / G, h.local_kv_heads() / G))
              sum += e.bytes;
          EXPECT_EQ(sum, ulysses_pass_bytes(z, bwd));
        }
      }
    }
}

// The pipeline as the executor posts it, worked by hand: links in0, in1 at once;
// out_g and in_{g+2} after compute g; compute g after in_g and out_{g-2}.
TEST(CostModel, UlyssesPipelineFollowsThePostingOrder) {
  EXPECT_DOUBLE_EQ(ulysses_pipeline_seconds({1}, {2}, {1}), 4.0);           // nothing overlaps
  EXPECT_DOUBLE_EQ(ulysses_pipeline_seconds({1, 1}, {2, 2}, {1, 1}), 6.0);  // in1, out0 hide behind compute
  // in: 1 2 | 3; out0 4 (after c0 = 3), in2 5, c1 = 3..5, out1 6, c2 = max(5, in2 5, out0 4)..7, out2 8
  EXPECT_DOUBLE_EQ(ulysses_pipeline_seconds({1, 1, 1}, {2, 2, 2}, {1, 1, 1}), 8.0);
  // Communication-bound: the link is busy throughout, 3 in + 3 out = 6 x 3 s
  EXPECT_DOUBLE_EQ(ulysses_pipeline_seconds({3, 3, 3}, {1, 1, 1}, {3, 3, 3}), 18.0 + 0.0);
  // Predicted exposed communication shrinks with more groups when compute dominates.
  MachineModel m = test_machine();
  const AttnProblem pr = problem(1 << 16, 16, 16);
  ExecutorChoice one, four;
  one.kind = four.kind = ExecutorKind::Ulysses, one.head_groups = 1, four.head_groups = 4;
  const Prediction p1 = predict(one, pr, 4, m), p4 = predict(four, pr, 4, m);
  EXPECT_EQ(p1.forward.steps, 1);
  EXPECT_EQ(p4.forward.steps, 4);
  EXPECT_EQ(p4.forward.max_bytes_sent, p1.forward.max_bytes_sent);
  EXPECT_LT(p4.forward.exposed_seconds(), p1.forward.exposed_seconds());
  EXPECT_LT(p4.backward.exposed_seconds(), p1.backward.exposed_seconds());
}

// The reorders around Ulysses' all-to-alls (pack and unpack: each reads and
// writes all P blocks) and Attention2D-NO's (gathered blocks into position
// order, gradients cut into shards, the gathered accumulators zeroed) are
// compute on the copy rate: what the model adds for them, worked from
// the tensors each rank moves.
TEST(CostModel, ReordersArePricedAtTheElementwiseRate) {
  MachineModel m = test_machine();
  m.intra = m.inter = Link{std::numeric_limits<double>::infinity(), 0.0};
  MachineModel none = m;
  none.tiles.set_copy_bytes_per_s(0);
  const double r = m.tiles.copy_bytes_per_s();
  const int P = 4, H = 16, Hkv = 8, d = 64;
  const AttnProblem pr = problem(4096, H, Hkv, d);
  const double io = 2, acc = 4, n = 4096.0 / P, L = H / P, Lk = Hkv / P;
  auto added = [&](const ExecutorChoice& c, bool bwd) {
    const Prediction with = predict(c, pr, P, m), without = predict(c, pr, P, none);
    const PassPrediction &a = bwd ? with.backward : with.forward, &b = bwd ? without.backward : without.forward;
    EXPECT_NEAR(a.compute_only_seconds - b.compute_only_seconds, a.seconds - b.seconds, 1e-12);
    return a.seconds - b.seconds;
  };
  for (int G : {1, 2}) {
    SCOPED_TRACE("ulysses G" + std::to_string(G));
    ExecutorChoice u;
    u.kind = ExecutorKind::Ulysses, u.head_groups = G;
    const double fwd = P * n * ((L + 2 * Lk) * d * io + L * d * io + L * acc);
    const double bwd = P * n * (L * d * io + 2 * L * acc + (L + 2 * Lk) * d * acc);
    EXPECT_NEAR(added(u, false), 4 * fwd / r, 1e-9 * fwd / r);
    EXPECT_NEAR(added(u, true), 4 * bwd / r, 1e-9 * bwd / r);
  }
  {
    SCOPED_TRACE("grid2d-no 4x1");  // R = 4 row blocks, C = 1: no partial merges
    const double R = 4, C = 1;
    const double q = n * H * d * io, kv = 2 * n * Hkv * d * io, partial = n * H * (d + 2) * acc;
    const double bundle = n * H * (2 * d * io + 2 * acc), dq = n * H * d * acc, dkv = 2 * n * Hkv * d * acc;
    const double fwd = 2 * (C * q + R * kv) + C * partial;
    const double bwd = 2 * (C * bundle + R * kv) + (C * dq + R * dkv) + 2 * (C * dq + R * dkv);
    EXPECT_NEAR(added(grid_choice(ExecutorKind::Grid2DNO, 4, 1), false), fwd / r, 1e-9 * fwd / r);
    EXPECT_NEAR(added(grid_choice(ExecutorKind::Grid2DNO, 4, 1), true), bwd / r, 1e-9 * bwd / r);
  }
}

// P ranks on C < P cores: every rank's compute takes P / C times as long while all
// compute; a ring step in which only b of them compute takes max(1, b / C) times.
TEST(CostModel, SharedCoresSlowComputeByRanksPerCore) {
  const MachineModel m = test_machine();
  const AttnProblem pr = problem(4096, 8, 2);
  for (const Prediction& p : rank_choices(pr, 6, m)) {
    SCOPED_TRACE(p.choice.name());
    const Prediction s = predict(p.choice, pr, 6, with_shared_cores(m, 6, 2));
    // Vanilla and balanced rings have steps with idle ranks (balanced: its last, for even P).
    auto idle_steps = [](ExecutorKind k) { return k == ExecutorKind::RingVanilla || k == ExecutorKind::RingBalanced; };
    if (idle_steps(p.choice.kind) || (p.choice.kind == ExecutorKind::Hybrid && idle_steps(p.choice.inner)))
      EXPECT_LT(s.forward.compute_only_seconds, 3 * p.forward.compute_only_seconds * (1 - 1e-9));
    else
      EXPECT_NEAR(s.forward.compute_only_seconds, 3 * p.forward.compute_only_seconds,
                  1e-9 * s.forward.compute_only_seconds);
    // A core each: the compute is not slowed, only the copies stop overlapping it (HostCopies below).
    const Prediction own = predict(p.choice, pr, 6, with_shared_cores(m, 6, 8));
    EXPECT_DOUBLE_EQ(own.forward.compute_only_seconds, p.forward.compute_only_seconds);
    EXPECT_GE(own.forward.seconds, p.forward.seconds * (1 - 1e-12));
  }
  // The vanilla ring, 6 ranks on 2 cores: step t has the 6 - t ranks at or below the
  // diagonal busy, so its full blocks take 2.5, 2, 1.5, 1, 1 times as long.
  MachineModel free_links = m;
  free_links.intra = free_links.inter = Link{std::numeric_limits<double>::infinity(), 0.0};
  free_links.tiles.set_elementwise_bytes_per_s(0);
  const std::int64_t c = (pr.seq_len + 5) / 6;  // N padded to a multiple of P
  const double diag = free_links.tiles.call_seconds({TileDirection::Forward, BlockKind::Causal, "bf16", 64},
                                                    pr.heads, double(c) * (c + 1) / 2);
  const double full = free_links.tiles.call_seconds({TileDirection::Forward, BlockKind::Full, "bf16", 64},
                                                    pr.heads, double(c) * c);
  const double vanilla =
      predict(ring_choice(ExecutorKind::RingVanilla), pr, 6, with_shared_cores(free_links, 6, 2)).forward.seconds;
  EXPECT_NEAR(vanilla, 3 * diag + (2.5 + 2 + 1.5 + 1 + 1) * full, 1e-9 * vanilla);
  EXPECT_THROW(with_shared_cores(m, 0, 2), InvalidArgument);
}

// CPU ranks copy what they receive with their own cores, after their tile: zigzag's
// forward receives one K/V chunk for each of its P - 1 later steps, every rank the
// same, so each step costs its tiles plus that copy, at the cores' slow-down when shared.
TEST(CostModel, HostCopiesDoNotOverlapCompute) {
  const MachineModel m = test_machine();
  const AttnProblem pr = problem(4096, 8, 2);
  const ExecutorChoice zz = ring_choice(ExecutorKind::RingZigzag);
  for (const double cores : {6.0, 2.0}) {
    SCOPED_TRACE(cores);
    const MachineModel cpu = with_shared_cores(m, 6, cores);
    ASSERT_TRUE(cpu.host_copies);
    const Prediction p = predict(zz, pr, 6, cpu);
    const double chunk = double(p.forward.max_bytes_received) / 5;
    const double copies = 5 * m.transfer_seconds(LinkLevel::Intra, chunk) * (6 / std::min(6.0, cores));
    EXPECT_NEAR(p.forward.exposed_seconds(), copies, 1e-9 * p.forward.seconds);
  }
  // On GPUs (no with_shared_cores) the same transfers hide behind the tiles.
  const Prediction gpu = predict(zz, pr, 6, m);
  EXPECT_LT(gpu.forward.exposed_seconds(), predict(zz, pr, 6, with_shared_cores(m, 6, 6)).forward.exposed_seconds());
  // Ulysses: the all-to-alls are copies too, so pipelining over head groups hides nothing:
  // with no per-transfer latency, one group and two expose the same time.
  MachineModel no_latency = m;
  no_latency.intra.latency_s = no_latency.inter.latency_s = 0;
  const MachineModel cpu = with_shared_cores(no_latency, 2, 2);
  ExecutorChoice u;
  u.kind = ExecutorKind::Ulysses;
  u.head_groups = 1;
  const AttnProblem mha = problem(4096, 8, 8);
  const double one = predict(u, mha, 2, cpu).forward.exposed_seconds();
  u.head_groups = 2;
  EXPECT_NEAR(predict(u, mha, 2, cpu).forward.exposed_seconds(), one, 1e-9 * one);
  EXPECT_GT(one, 0);
}

TEST(CostModel, NoCommunicationCostMeansComputeOnly) {
  MachineModel m = test_machine();
  m.intra = m.inter = Link{std::numeric_limits<double>::infinity(), 0.0};
  const AttnProblem pr = problem(4096, 8, 2);
  for (int P : {2, 4, 6, 16})
    for (const Prediction& p : rank_choices(pr, P, m)) {
      SCOPED_TRACE(p.choice.name() + " P=" + std::to_string(P));
      EXPECT_NEAR(p.forward.exposed_seconds(), 0.0, 1e-12 * p.forward.seconds);
      EXPECT_NEAR(p.backward.exposed_seconds(), 0.0, 1e-12 * p.backward.seconds);
    }
  // The vanilla ring's slowest rank computes the diagonal then P-1 full blocks.
  const int P = 8;
  const std::int64_t c = pr.seq_len / P;
  const double bh = pr.heads, diag = double(c) * (c + 1) / 2;
  const double expect = m.tiles.call_seconds({TileDirection::Forward, BlockKind::Causal, "bf16", 64}, bh, diag) +
                        (P - 1) * m.tiles.call_seconds({TileDirection::Forward, BlockKind::Full, "bf16", 64}, bh,
                                                       double(c) * c);
  m.tiles.set_elementwise_bytes_per_s(0);
  m.tiles.set_copy_bytes_per_s(0);
  EXPECT_DOUBLE_EQ(predict(ring_choice(ExecutorKind::RingVanilla), pr, P, m).forward.seconds, expect);
}

TEST(CostModel, SlowerLinksNeverPredictFaster) {
  const AttnProblem pr = problem(1 << 15, 8, 2);
  MachineModel fast = test_machine(), slow = fast;
  slow.inter.bandwidth_Bps /= 4;
  slow.intra.latency_s *= 3;
  for (int P : {4, 16, 32}) {
    const auto a = rank_choices(pr, P, fast);
    for (const Prediction& p : a) {
      SCOPED_TRACE(p.choice.name());
      const Prediction q = predict(p.choice, pr, P, slow);
      EXPECT_GE(q.total_seconds(), p.total_seconds());
      EXPECT_GE(q.forward.seconds, q.forward.compute_only_seconds);
      EXPECT_GE(q.backward.seconds, q.backward.compute_only_seconds);
      AttnProblem longer = pr;
      longer.seq_len *= 2;
      EXPECT_GT(predict(p.choice, longer, P, fast).total_seconds(), p.total_seconds());
    }
  }
}

TEST(CostModel, Attention2DTrafficFallsAsSqrtPRingStaysN) {
  const AttnProblem pr = problem(std::int64_t(1) << 20, 32, 8, 128);
  const MachineModel m = nvlink_ib_node_defaults(test_tiles("bf16", 128));
  for (int s : {4, 8, 16}) {
    const int P = s * s;
    const auto a = predict(grid_choice(ExecutorKind::Grid2DNO, s, s), pr, P, m);
    const auto b = predict(grid_choice(ExecutorKind::Grid2DNO, 2 * s, 2 * s), pr, 4 * P, m);
    const double ratio = double(a.forward.max_bytes_received) / double(b.forward.max_bytes_received);
    // (s-1)/s^2 against (2s-1)/(4 s^2), plus the permutation's 1/P share.
    EXPECT_GT(ratio, 1.7) << "P=" << P;
    EXPECT_LT(ratio, 2.1) << "P=" << P;
    const auto ra = predict(ring_choice(ExecutorKind::RingVanilla), pr, P, m);
    const auto rb = predict(ring_choice(ExecutorKind::RingVanilla), pr, 4 * P, m);
    const double rr = double(ra.forward.max_bytes_received) / double(rb.forward.max_bytes_received);
    EXPECT_GT(rr, 0.9) << "P=" << P;
    EXPECT_LT(rr, 1.0) << "P=" << P;
  }
}

TEST(CostModel, RankingIsSortedAndStartsAtTheArgmin) {
  const MachineModel m = test_machine();
  for (int P : {2, 3, 8, 12}) {
    const AttnProblem pr = problem(std::int64_t(P) * 2048, 8, 4);
    const auto r = rank_choices(pr, P, m);
    ASSERT_FALSE(r.empty());
    for (std::size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].total_seconds(), r[i].total_seconds());
    double best = std::numeric_limits<double>::infinity();
    for (const Prediction& p : r) best = std::min(best, predict(p.choice, pr, P, m).total_seconds());
    EXPECT_DOUBLE_EQ(r.front().total_seconds(), best);
    // The vanilla ring leaves ranks idle; with P > 2 something balanced must beat it.
    if (P > 2) { EXPECT_NE(r.front().choice.kind, ExecutorKind::RingVanilla); }
  }
  // Every grid shape and hybrid factorisation is offered.
  const auto r = rank_choices(problem(12 * 64, 12, 4), 12, m);
  std::set<std::string> names;
  for (const Prediction& p : r) names.insert(p.choice.name());
  for (const char* n : {"grid2d-no 3x4", "grid2d-o 12x1", "ulysses G1", "hybrid U2+zigzag", "hybrid U4+grid2d-o 1x3"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(CostModel, BadParametersGiveClearErrors) {
  const MachineModel m = test_machine();
  const AttnProblem pr = problem(1024, 8, 2);
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_CONTAINS(message([&] { predict(ring_choice(ExecutorKind::RingZigzag), pr, 0, m); }), ("P (ranks)"));
  EXPECT_CONTAINS(message([&] { predict(ring_choice(ExecutorKind::RingZigzag), problem(1024, 8, 3), 4, m); }),
              ("kv_heads"));
  EXPECT_CONTAINS(message([&] { predict(ring_choice(ExecutorKind::RingZigzag), problem(1024, 8, 2, 64, "int8"), 4, m); }),
              ("dtype 'int8'"));
  MachineModel bad = m;
  bad.inter.bandwidth_Bps = -1;
  EXPECT_CONTAINS(message([&] { predict(ring_choice(ExecutorKind::RingZigzag), pr, 4, bad); }), ("inter-node bandwidth"));
  EXPECT_CONTAINS(message([&] { predict(ring_choice(ExecutorKind::RingZigzag), problem(1024, 8, 2, 96), 4, m); }),
              ("no calibrated tile throughput for (fwd, causal, bf16, d=96)"));
  EXPECT_CONTAINS(message([&] { predict(grid_choice(ExecutorKind::Grid2DO, 3, 2), pr, 4, m); }),
              ("does not equal P=4"));
  AttnProblem full = pr;
  full.causal = false;
  EXPECT_CONTAINS(message([&] { predict(ring_choice(ExecutorKind::RingBalanced), full, 4, m); }), ("zigzag"));
  ExecutorChoice u;
  u.kind = ExecutorKind::Ulysses;
  EXPECT_CONTAINS(message([&] { predict(u, pr, 16, m); }), ("divisible by the number of ranks P=16"));
  ExecutorChoice h;
  h.kind = ExecutorKind::Hybrid, h.ulysses_degree = 3;
  EXPECT_CONTAINS(message([&] { predict(h, pr, 8, m); }), ("must be >= 1 and divide P=8"));
  // Choices whose workspace does not fit the device are dropped, with the reason.
  MachineModel small = m;
  const auto all = rank_choices(pr, 4, m);
  std::int64_t largest = 0;
  for (const Prediction& p : all) largest = std::max(largest, p.workspace_bytes);
  small.device_memory_bytes = double(largest) - 1;
  const auto fitting        = rank_choices(pr, 4, small);
  EXPECT_LT(fitting.size(), all.size()) << "the choice with the largest workspace must be dropped";
  for (const Prediction& p : fitting) EXPECT_LT(double(p.workspace_bytes), small.device_memory_bytes);
  small.device_memory_bytes = 1;
  EXPECT_CONTAINS(message([&] { rank_choices(pr, 4, small); }), ("exceeds device_memory_bytes"));
  // A problem no executor fits lists why for each.
  EXPECT_CONTAINS(message([&] { rank_choices(problem(1024, 8, 2, 96), 4, m); }), ("no executor fits P=4"));
}

TEST(CostModel, TileTableRoundTripsAndRejectsBadLines) {
  const TileThroughput t = test_tiles();
  const TileThroughput u = TileThroughput::from_text(t.to_text());
  const ShapeClass c{TileDirection::Backward, BlockKind::Causal, "bf16", 64};
  EXPECT_DOUBLE_EQ(u.rate(c).flops_per_s, t.rate(c).flops_per_s);
  EXPECT_DOUBLE_EQ(u.rate(c).overhead_s, t.rate(c).overhead_s);
  EXPECT_DOUBLE_EQ(u.elementwise_bytes_per_s(), 2e12);
  EXPECT_DOUBLE_EQ(u.copy_bytes_per_s(), 3e12);
  TileThroughput tiled = t;
  tiled.set(c, TileRate{1e12, 0, 64});
  EXPECT_EQ(TileThroughput::from_text(tiled.to_text()).rate(c).tile_rows, 64);
  EXPECT_EQ(u.rate(c).tile_rows, 0);
  // The reduce-scatter rate round-trips; absent, it is 0 (the link's transfer).
  TileThroughput reduced = t;
  reduced.set_reduce_bytes_per_s(7e8);
  EXPECT_DOUBLE_EQ(TileThroughput::from_text(reduced.to_text()).reduce_bytes_per_s(), 7e8);
  EXPECT_EQ(u.reduce_bytes_per_s(), 0.0);
  // A per-head overhead round-trips and is charged once per batch x head.
  TileThroughput per_head = t;
  per_head.set(c, TileRate{1e12, 1e-5, 64, true});
  const TileThroughput ph = TileThroughput::from_text(per_head.to_text());
  EXPECT_TRUE(ph.rate(c).overhead_per_head);
  EXPECT_FALSE(u.rate(c).overhead_per_head);
  EXPECT_DOUBLE_EQ(ph.call_seconds(c, 8, 1e6) - ph.call_seconds(c, 8, 0.5e6), 2.5 * 4 * 8 * 64 * 0.5e6 / 1e12);
  EXPECT_NEAR(ph.call_seconds(c, 8, 1.0), 8 * 1e-5 + 2.5 * 4 * 8 * 64 / 1e12, 1e-18);
  EXPECT_NEAR(ph.slowed_down(2).call_seconds(c, 8, 1.0), 2 * ph.call_seconds(c, 8, 1.0), 1e-18);
  auto message = [&](const std::string& text) {
    try {
      TileThroughput::from_text(text, "tiles.txt");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_CONTAINS(message("# ok\ntile fwd full bf16 64 1e12\n"), ("tiles.txt:2: expected 'tile"));
  EXPECT_CONTAINS(message("tile sideways full bf16 64 1e12 0\n"), ("direction 'sideways'"));
  EXPECT_CONTAINS(message("tile fwd full bf16 64 -5 0\n"), ("flops_per_s must be finite and > 0"));
  EXPECT_CONTAINS(message("tiles fwd\n"), ("unknown record 'tiles'"));
  EXPECT_CONTAINS(message("# rates\ncopy fast\n"), ("tiles.txt:2: expected 'copy <bytes_per_s>'"));
  EXPECT_CONTAINS(message("balance\n"), ("tiles.txt:1: expected 'balance <seconds>'"));
  EXPECT_CONTAINS(message("tile fwd full bf16 64 1e12 0 -64\n"), ("tile_rows must be >= 0"));
  EXPECT_CONTAINS(message("tile fwd full bf16 64 1e12 0 64 per_call\n"), ("'per_call' after tile_rows"));
  // Trailing junk on any record is an error naming the line.
  EXPECT_CONTAINS(message("# ok\ntile fwd full bf16 64 1e12 0 64 per_head extra\n"), ("tiles.txt:2: unexpected 'extra'"));
  EXPECT_CONTAINS(message("tile fwd full bf16 64 1e12 0 sixty-four\n"), ("tiles.txt:1: unexpected 'sixty-four'"));
  EXPECT_CONTAINS(message("tile fwd full bf16 64 1e12 0x\n"), ("tiles.txt:1: unexpected 'x'"));
  EXPECT_CONTAINS(message("copy 1e9 fast\n"), ("tiles.txt:1: unexpected 'fast'"));
  EXPECT_CONTAINS(message("elementwise 1e9GB\n"), ("tiles.txt:1: unexpected 'GB'"));
  EXPECT_CONTAINS(message("\nbalance 0.5 s\n"), ("tiles.txt:2: unexpected 's'"));
  EXPECT_CONTAINS(message("heads 2 0.9 1.5 x\n"), ("tiles.txt:1: unexpected 'x'"));
  EXPECT_CONTAINS(message("heads 2 0.9 shared\n"), ("tiles.txt:1: unexpected 'shared'"));
  EXPECT_THROW(TileThroughput::load("/nonexistent/tiles.txt"), InvalidArgument);
}

/// load() of what is not a readable regular file fails at once, naming the path:
/// a FIFO must not block, a directory or a read error must not read as an empty table.
TEST(CostModel, TileTableLoadRefusesNonFilesAndReadErrors) {
  auto message = [](const std::string& path) {
    try {
      TileThroughput::load(path);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  char dir[] = "/tmp/distattn_tiles_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/tiles.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_CONTAINS(message(fifo), ("'" + fifo + "' is not a regular file"));
  EXPECT_CONTAINS(message(dir), ("'" + std::string(dir) + "' is not a regular file"));
  ::unlink(fifo.c_str());
  ::rmdir(dir);
  // /proc/self/mem is a regular file whose read at offset 0 fails (EIO).
  if (::access("/proc/self/mem", R_OK) == 0)
    EXPECT_CONTAINS(message("/proc/self/mem"), ("error reading tile throughput file '/proc/self/mem'"));
}

TEST(CostModel, TileRateFitRecoversTheCallModelAndWeighsRelativeError) {
  const std::vector<double> flops{1e8, 1e9, 1e10};
  std::vector<double> seconds;
  for (double f : flops) seconds.push_back(1e-3 + f / 5e10);
  const TileRate exact = fit_tile_rate(flops, seconds);
  EXPECT_NEAR(exact.flops_per_s / 5e10, 1.0, 1e-9);
  EXPECT_NEAR(exact.overhead_s, 1e-3, 1e-12);
  EXPECT_EQ(exact.tile_rows, 0);
  // The largest block 20 % slow: an unweighted fit follows it and misses the
  // smallest block by 60 %; the relative weighting keeps every point near.
  seconds[2] *= 1.2;
  const TileRate noisy = fit_tile_rate(flops, seconds);
  for (std::size_t i = 0; i < flops.size(); ++i) {
    const double rel = (noisy.overhead_s + flops[i] / noisy.flops_per_s - seconds[i]) / seconds[i];
    EXPECT_LT(std::abs(rel), i == 0 ? 0.02 : 0.1) << "point " << i;
  }
  // Blocks that run slower per FLOP as they grow give a negative intercept: clamped
  // to 0, the rate then lies between the points' own rates.
  const TileRate clamped = fit_tile_rate({1e9, 2e9}, {1.0, 2.5});
  EXPECT_EQ(clamped.overhead_s, 0.0);
  EXPECT_GT(clamped.flops_per_s, 2e9 / 2.5);
  EXPECT_LT(clamped.flops_per_s, 1e9 / 1.0);
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_CONTAINS(message([] { fit_tile_rate({1e9}, {1.0}); }), ("at least two"));
  EXPECT_CONTAINS(message([] { fit_tile_rate({1e9, 2e9}, {1.0, 0.0}); }), ("point 1 must have"));
  EXPECT_CONTAINS(message([] { fit_tile_rate({1e9, 2e9}, {1.0}); }), ("equal count"));
}

// Attention2D-NO's backward ends with a row reduce-scatter of dQ and a column one of
// dK/dV: with a reduce rate below the link's, each of the k - 1 steps costs
// shard / rate; compute and the forward are untouched.
TEST(CostModel, ReduceRatePricesAttention2DNOReduceScatters) {
  MachineModel m = test_machine();
  m.intra = Link{std::numeric_limits<double>::infinity(), 0.0};
  const AttnProblem pr = problem(4096, 8, 8);
  const ExecutorChoice ch = grid_choice(ExecutorKind::Grid2DNO, 2, 2);
  const Prediction base = predict(ch, pr, 4, m);
  MachineModel slow = m;
  slow.tiles.set_reduce_bytes_per_s(1e9);
  const Prediction r = predict(ch, pr, 4, slow);
  const double n = 4096.0 / 4, acc = 4;
  const double dq = n * 8 * 64 * acc, dkv = 2 * n * 8 * 64 * acc;
  // Row (2 members) and column (2 members) on the same level: their times add.
  EXPECT_NEAR(r.backward.seconds - base.backward.seconds, (dq + dkv) / 1e9, 1e-9 * r.backward.seconds);
  EXPECT_DOUBLE_EQ(r.backward.compute_only_seconds, base.backward.compute_only_seconds);
  EXPECT_DOUBLE_EQ(r.forward.seconds, base.forward.seconds);
}
