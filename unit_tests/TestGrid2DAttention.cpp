// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Attention2D executor on MPI ranks (issue #5): forward and backward of the NO
// and O variants against the fp64 reference of the whole sequence on every grid
// R x C that fits the rank count (1x1, 1x2, 2x1, 2x2, 1x3, 3x1, 2x3, 3x2, 3x3 and
// the other factorizations), MHA and GQA, causal and not; bitwise
// reproducibility and independence of message timing; measured bytes = the
// volume model of grid2d_volume.hpp per phase; the contiguous <-> cyclic
// conversion; argument errors. Every rank builds the (small) global problem and
// the reference itself and checks its own cyclic shard.

#include "mpi_test_helpers.hpp"

#include <DistAttn/grid2d/cyclic_layout.hpp>
#include <DistAttn/grid2d/grid2d_attention.hpp>

#include <mpi.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

namespace DistAttn {
// Readable test parameters in gtest's failure messages.
inline void PrintTo(Grid2DVariant v, std::ostream* os) { *os << to_string(v); }
}  // namespace DistAttn

namespace DistAttn::Test {
namespace {

using Comm = Communicator<MpiSpace, Exec>;

/// Every R x C with R*C == P.
std::vector<GridShape> all_grids(int P) {
  std::vector<GridShape> g;
  for (int R = 1; R <= P; ++R)
    if (P % R == 0) g.push_back(GridShape{R, P / R});
  return g;
}

struct Problem {
  int P = 1, rank = 0, B = 1, H = 1, Hkv = 1, D = 32;
  long N = 0;
  bool causal = true;
  std::uint64_t seed = 0;
  HostTensor q, k, v, dout;    // global, rounded to the element type under test
  HostTensor ro, rdq, rdk, rdv;
  HostStats rl;
};

template <class T>
Problem make_problem(int B, long N, int H, int Hkv, int D, bool causal) {
  Problem p;
  p.P = world_size(), p.rank = world_rank();
  p.B = B, p.N = N, p.H = H, p.Hkv = Hkv, p.D = D, p.causal = causal;
  p.seed = shared_seed();
  p.q    = HostTensor("q", B, N, H, D);
  p.k    = HostTensor("k", B, N, Hkv, D);
  p.v    = HostTensor("v", B, N, Hkv, D);
  p.dout = HostTensor("do", B, N, H, D);
  Testing::fill_random(p.q, p.seed, 1.5);
  Testing::fill_random(p.k, p.seed + 1, 1.5);
  Testing::fill_random(p.v, p.seed + 2);
  Testing::fill_random(p.dout, p.seed + 3);
  p.q = rounded<T>(p.q), p.k = rounded<T>(p.k), p.v = rounded<T>(p.v), p.dout = rounded<T>(p.dout);
  p.ro  = HostTensor("ro", B, N, H, D);
  p.rl  = HostStats("rl", B, H, N);
  p.rdq = HostTensor("rdq", B, N, H, D);
  p.rdk = HostTensor("rdk", B, N, Hkv, D);
  p.rdv = HostTensor("rdv", B, N, Hkv, D);
  const double scale = 1.0 / std::sqrt(double(D));
  const Mask mask    = causal ? Mask::causal() : Mask::none();
  Testing::reference_fwd(p.q, p.k, p.v, mask, scale, p.ro, p.rl);
  Testing::reference_bwd(p.q, p.k, p.v, p.dout, mask, scale, p.rdq, p.rdk, p.rdv);
  return p;
}

/// Rows {rank + i P} of a global [B, N, X, D] tensor: the cyclic shard Qp.
HostTensor shard_of(const HostTensor& g, int rank, int P) {
  const long n = long(g.extent(1)) / P;
  HostTensor out("shard", g.extent(0), n, g.extent(2), g.extent(3));
  for (std::size_t b = 0; b < g.extent(0); ++b)
    for (long i = 0; i < n; ++i)
      for (std::size_t h = 0; h < g.extent(2); ++h)
        for (std::size_t d = 0; d < g.extent(3); ++d) out(b, i, h, d) = g(b, rank + i * P, h, d);
  return out;
}
HostStats stats_shard_of(const HostStats& g, int rank, int P) {
  const long n = long(g.extent(2)) / P;
  HostStats out("shard", g.extent(0), g.extent(1), n);
  for (std::size_t b = 0; b < g.extent(0); ++b)
    for (std::size_t h = 0; h < g.extent(1); ++h)
      for (long i = 0; i < n; ++i) out(b, h, i) = g(b, h, rank + i * P);
  return out;
}
double stats_rel_error(const HostStats& x, const HostStats& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.span(); ++i) {
    const double e = x.data()[i] - ref.data()[i];
    num += e * e;
    den += ref.data()[i] * ref.data()[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

struct Outputs {
  HostTensor o, dq, dk, dv;
  HostStats lse;
  Grid2DStats fwd, bwd;
  GridShape dims;
  GridCoord coords;
};

struct RunConfig {
  Grid2DVariant variant = Grid2DVariant::O;
  GridShape grid{};  // {0, 0}: choose_grid_shape
  double delay_ms = 0.0;
  bool forward = true;  // false: backward alone, from the reference's O and LSE
};

/// One forward and backward; with L other than LayoutRight every tensor argument
/// (inputs, outputs, LSE) is in layout L (forward runs then, cfg.forward is ignored).
template <class T, class L = Kokkos::LayoutRight>
Outputs run_grid2d(const Problem& p, const RunConfig& cfg) {
  using Acc  = accum_t<T>;
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  Grid2DOptions opts;
  opts.variant       = cfg.variant;
  opts.causal        = p.causal;
  opts.recv_delay_ms = cfg.delay_ms;
  Grid2DAttention<T, MpiSpace, Exec> a2d(world, cfg.grid.rows, cfg.grid.cols, Exec(), p.B, p.N, p.H, p.Hkv, p.D,
                                         opts);
  const int n = int(p.N / p.P);
  auto q      = to_device_as<T, L>(shard_of(p.q, p.rank, p.P), "q");
  auto k      = to_device_as<T, L>(shard_of(p.k, p.rank, p.P), "k");
  auto v      = to_device_as<T, L>(shard_of(p.v, p.rank, p.P), "v");
  auto d      = to_device_as<T, L>(shard_of(p.dout, p.rank, p.P), "do");
  auto o      = alloc_as<T, L>("o", p.B, n, p.H, p.D);
  auto dq     = alloc_as<T, L>("dq", p.B, n, p.H, p.D);
  auto dk     = alloc_as<T, L>("dk", p.B, n, p.Hkv, p.D);
  auto dv     = alloc_as<T, L>("dv", p.B, n, p.Hkv, p.D);
  auto lse    = alloc_stats_as<Acc, L>("lse", p.B, p.H, n);
  Outputs out;
  if (cfg.forward || !std::is_same<L, Kokkos::LayoutRight>::value) {
    a2d.forward(q, k, v, o, lse);
    out.fwd = a2d.stats();
  } else if constexpr (std::is_same<L, Kokkos::LayoutRight>::value) {
    o           = to_device<T>(shard_of(p.ro, p.rank, p.P), "o");
    auto lseh   = stats_shard_of(p.rl, p.rank, p.P);
    auto lsem   = Kokkos::create_mirror_view(lse);
    for (std::size_t i = 0; i < lseh.span(); ++i) lsem.data()[i] = Acc(lseh.data()[i]);
    Kokkos::deep_copy(lse, lsem);
  }
  a2d.backward(q, k, v, o, d, lse, dq, dk, dv);
  out.bwd    = a2d.stats();
  out.o      = to_host(o);
  out.lse    = stats_to_host(lse);
  out.dq     = to_host(dq);
  out.dk     = to_host(dk);
  out.dv     = to_host(dv);
  out.dims   = a2d.grid().dims();
  out.coords = a2d.grid().coords();
  return out;
}

std::string context(const Problem& p, const RunConfig& cfg, const Outputs& out) {
  return std::string(to_string(cfg.variant)) + " grid " + std::to_string(out.dims.rows) + "x" +
         std::to_string(out.dims.cols) + " B=" + std::to_string(p.B) + " N=" + std::to_string(p.N) +
         " H=" + std::to_string(p.H) + " Hkv=" + std::to_string(p.Hkv) + " d=" + std::to_string(p.D) +
         (p.causal ? " causal" : " full") + " rank " + std::to_string(p.rank) + " seed " + std::to_string(p.seed);
}

void expect_matches_reference(const Problem& p, const RunConfig& cfg, const Outputs& out, double tol) {
  const std::string ctx = context(p, cfg, out);
  EXPECT_LE(Testing::rel_error(out.o, shard_of(p.ro, p.rank, p.P)), tol) << "O " << ctx;
  EXPECT_LE(stats_rel_error(out.lse, stats_shard_of(p.rl, p.rank, p.P)), tol) << "LSE " << ctx;
  EXPECT_LE(Testing::rel_error(out.dq, shard_of(p.rdq, p.rank, p.P)), tol) << "dQ " << ctx;
  EXPECT_LE(Testing::rel_error(out.dk, shard_of(p.rdk, p.rank, p.P)), tol) << "dK " << ctx;
  EXPECT_LE(Testing::rel_error(out.dv, shard_of(p.rdv, p.rank, p.P)), tol) << "dV " << ctx;
}

constexpr double kTolDouble = 1e-11;

class Grid2DAttentionTest : public ::testing::TestWithParam<Grid2DVariant> {};

// Every grid of the rank count, MHA (with batch 2) and GQA, causal and not; N = 2*P*3.
TEST_P(Grid2DAttentionTest, MatchesReferenceOnEveryGrid) {
  const int P = world_size();
  struct Heads {
    int B, H, Hkv, D;
  };
  for (const Heads hd : {Heads{2, 2, 2, 32}, Heads{1, 4, 1, 64}})
    for (const bool causal : {true, false}) {
      const auto p = make_problem<double>(hd.B, 6L * P, hd.H, hd.Hkv, hd.D, causal);
      for (const GridShape g : all_grids(P)) {
        RunConfig cfg;
        cfg.variant = GetParam();
        cfg.grid    = g;
        const auto out = run_grid2d<double>(p, cfg);
        ASSERT_EQ(out.dims.rows, g.rows);
        ASSERT_EQ(out.dims.cols, g.cols);
        expect_matches_reference(p, cfg, out, kTolDouble);
      }
    }
}

TEST_P(Grid2DAttentionTest, BitwiseReproducibleAndTimingIndependent) {
  const int P   = world_size();
  const auto p  = make_problem<double>(1, 6L * P, 4, 2, 32, true);
  RunConfig cfg;
  cfg.variant  = GetParam();
  const auto a = run_grid2d<double>(p, cfg);
  const auto b = run_grid2d<double>(p, cfg);
  cfg.delay_ms = 2.0;
  const auto c = run_grid2d<double>(p, cfg);
  for (const auto* other : {&b, &c}) {
    for (auto pair : {std::make_pair(&a.o, &other->o), std::make_pair(&a.dq, &other->dq),
                      std::make_pair(&a.dk, &other->dk), std::make_pair(&a.dv, &other->dv)})
      for (std::size_t i = 0; i < pair.first->span(); ++i)
        ASSERT_EQ(pair.first->data()[i], pair.second->data()[i]) << "element " << i << " rank " << p.rank;
    for (std::size_t i = 0; i < a.lse.span(); ++i) ASSERT_EQ(a.lse.data()[i], other->lse.data()[i]);
  }
  expect_matches_reference(p, cfg, c, kTolDouble);
}

// Measured bytes per phase (sent and received, forward and backward) equal the
// model of grid2d_volume.hpp with the executor's volume_params(), on every grid;
// the per-communicator counters of the comm layer agree with the phases.
TEST_P(Grid2DAttentionTest, BytesMatchVolumeModel) {
  const int P = world_size();
  const auto p = make_problem<double>(2, 6L * P, 4, 2, 32, true);
  for (const GridShape g : all_grids(P)) {
    RunConfig cfg;
    cfg.variant    = GetParam();
    cfg.grid       = g;
    const auto out = run_grid2d<double>(p, cfg);
    const Grid2DLayout layout(g.rows, g.cols, p.N);
    Grid2DVolumeParams vp;
    vp.heads = p.H, vp.kv_heads = p.Hkv, vp.head_dim = p.D;  // defaults: (acc, m, l) forward; LSE + Delta backward
    for (const bool bwd : {false, true}) {
      const Grid2DStats& st = bwd ? out.bwd : out.fwd;
      const auto words      = grid2d_words_by_phase(layout, p.rank, bwd, vp);
      std::array<std::uint64_t, kNumGrid2DComms> by_comm{};
      for (int ph = 0; ph < kNumGrid2DPhases; ++ph) {
        const auto expect = std::uint64_t(words[std::size_t(ph)]) * std::uint64_t(p.B) * sizeof(double);
        const std::string what = std::string(bwd ? "backward " : "forward ") + to_string(Grid2DPhase(ph)) + " " +
                                 context(p, cfg, out);
        EXPECT_EQ(st.bytes_received[std::size_t(ph)], expect) << "received, " << what;
        EXPECT_EQ(st.bytes_sent[std::size_t(ph)], expect) << "sent, " << what;
        by_comm[std::size_t(comm_of(Grid2DPhase(ph)))] += st.bytes_sent[std::size_t(ph)];
      }
      for (int cm = 0; cm < kNumGrid2DComms; ++cm) {
        EXPECT_EQ(st.comm_bytes_sent[std::size_t(cm)], by_comm[std::size_t(cm)])
            << to_string(Grid2DComm(cm)) << (bwd ? " backward " : " forward ") << context(p, cfg, out);
        EXPECT_EQ(st.comm_bytes_received[std::size_t(cm)], by_comm[std::size_t(cm)])
            << to_string(Grid2DComm(cm)) << (bwd ? " backward " : " forward ") << context(p, cfg, out);
      }
    }
  }
}

// Backward without a preceding forward rebuilds K_t (one more permutation, shown
// as the backward's KvPermute phase) and is still exact.
TEST_P(Grid2DAttentionTest, BackwardAloneRebuildsKt) {
  const int P  = world_size();
  const auto p = make_problem<double>(1, 6L * P, 2, 1, 32, true);
  RunConfig cfg;
  cfg.variant     = GetParam();
  cfg.forward     = false;
  const auto out  = run_grid2d<double>(p, cfg);
  const std::string ctx = context(p, cfg, out);
  EXPECT_LE(Testing::rel_error(out.dq, shard_of(p.rdq, p.rank, p.P)), kTolDouble) << "dQ " << ctx;
  EXPECT_LE(Testing::rel_error(out.dk, shard_of(p.rdk, p.rank, p.P)), kTolDouble) << "dK " << ctx;
  EXPECT_LE(Testing::rel_error(out.dv, shard_of(p.rdv, p.rank, p.P)), kTolDouble) << "dV " << ctx;
  const Grid2DLayout layout(out.dims.rows, out.dims.cols, p.N);
  Grid2DVolumeParams vp;
  vp.heads = p.H, vp.kv_heads = p.Hkv, vp.head_dim = p.D;
  const auto fwd_words = grid2d_no_forward_words(layout, p.rank, vp);
  EXPECT_EQ(out.bwd.received(Grid2DPhase::KvPermute), std::uint64_t(fwd_words.kv_permute) * sizeof(double)) << ctx;
}

INSTANTIATE_TEST_SUITE_P(Variants, Grid2DAttentionTest, ::testing::Values(Grid2DVariant::NO, Grid2DVariant::O),
                         [](const ::testing::TestParamInfo<Grid2DVariant>& i) {
                           return std::string(i.param == Grid2DVariant::NO ? "NO" : "O");
                         });

TEST(Grid2DAttentionFloat, MatchesReference) {
  const int P = world_size();
  const auto p = make_problem<float>(1, 6L * P, 4, 2, 64, true);
  for (const auto variant : {Grid2DVariant::NO, Grid2DVariant::O}) {
    RunConfig cfg;
    cfg.variant    = variant;
    const auto out = run_grid2d<float>(p, cfg);
    expect_matches_reference(p, cfg, out, rel_tol<float>());
  }
}

TEST(Grid2DAttentionShape, ZeroRowsAndColsUseChooseGridShape) {
  const int P = world_size();
  auto world  = Comm::from_raw(MPI_COMM_WORLD, Exec());
  for (const int kv : {8, 2, 1}) {
    Grid2DAttention<double, MpiSpace, Exec> a2d(world, 0, 0, Exec(), 1, 6L * P, 8, kv, 32);
    const GridShape want = choose_grid_shape(P, 8, kv);
    EXPECT_EQ(a2d.rows(), want.rows) << "kv_heads " << kv;
    EXPECT_EQ(a2d.cols(), want.cols) << "kv_heads " << kv;
  }
}

TEST(Grid2DAttentionErrors, RejectsBadConfigurationAndShapes) {
  const int P = world_size();
  auto world  = Comm::from_raw(MPI_COMM_WORLD, Exec());
  using A2D   = Grid2DAttention<double, MpiSpace, Exec>;
  if (P > 1)
    expect_invalid_argument_mentioning([&] { A2D(world, 0, 0, Exec(), 1, 6L * P + 1, 2, 2, 32); },
                                       {"N=" + std::to_string(6 * P + 1), "P=" + std::to_string(P)});
  expect_invalid_argument_mentioning([&] { A2D(world, P + 1, 1, Exec(), 1, 6L * P, 2, 2, 32); },
                                     {"P=" + std::to_string(P), "R=" + std::to_string(P + 1)});
  expect_invalid_argument_mentioning([&] { A2D(world, 0, 0, Exec(), 1, 6L * P, 3, 2, 32); }, {"kv_heads"});

  A2D a2d(world, 0, 0, Exec(), 1, 6L * P, 2, 2, 32);
  const int n = 6;
  Tensor4<double, Mem> q("q", 1, n, 2, 32), k("k", 1, n, 2, 32), v("v", 1, n, 2, 32), o("o", 1, n, 2, 32),
      qbad("qbad", 1, n + 1, 2, 32);
  RowStats<double, Mem> lse("lse", 1, 2, n);
  expect_invalid_argument_mentioning([&] { a2d.forward(qbad, k, v, o, lse); }, {"'q'"});
  RowStats<double, Mem> lse_bad("lse", 1, 2, n + 1);
  expect_invalid_argument_mentioning([&] { a2d.forward(q, k, v, o, lse_bad); }, {"'lse'"});
}

// N not divisible by P: padding at the end is exact for causal attention only, and
// the error must say so instead of advising padding for full attention.
TEST(Grid2DAttentionErrors, PaddingAdviceMatchesTheMask) {
  const int P = world_size();
  if (P < 2) GTEST_SKIP() << "every N is a multiple of P = 1";
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  using A2D  = Grid2DAttention<double, MpiSpace, Exec>;
  const long N = 6L * P + 1, padded = 6L * P + P;
  expect_invalid_argument_mentioning([&] { A2D(world, 0, 0, Exec(), 1, N, 2, 2, 32); },
                                     {"Pad the sequence at its end to N=" + std::to_string(padded), "dO = 0",
                                      "SequencePadding", "schedule/padding.hpp"});
  Grid2DOptions full;
  full.causal = false;
  try {
    A2D(world, 0, 0, Exec(), 1, N, 2, 2, 32, full);
    ADD_FAILURE() << "no InvalidArgument thrown";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("padding is not exact"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("Pad the sequence"), std::string::npos) << msg;
  }
}

// Column-major and strided Views are staged into row-major buffers: the results
// equal the row-major run's bits, on every grid variant.
TEST_P(Grid2DAttentionTest, AnyInputLayoutMatchesRowMajorBitwise) {
  const int P  = world_size();
  const auto p = make_problem<double>(1, 4L * P, 4, 2, 16, true);
  RunConfig cfg;
  cfg.variant      = GetParam();
  const auto right = run_grid2d<double>(p, cfg);
  expect_matches_reference(p, cfg, right, kTolDouble);
  const Outputs others[] = {run_grid2d<double, Kokkos::LayoutLeft>(p, cfg),
                            run_grid2d<double, Kokkos::LayoutStride>(p, cfg)};
  for (const auto& other : others) {
    expect_matches_reference(p, cfg, other, kTolDouble);
    EXPECT_EQ(Testing::rel_error(other.o, right.o), 0.0) << context(p, cfg, other);
    EXPECT_EQ(Testing::rel_error(other.dq, right.dq), 0.0) << context(p, cfg, other);
    EXPECT_EQ(Testing::rel_error(other.dk, right.dk), 0.0) << context(p, cfg, other);
    EXPECT_EQ(Testing::rel_error(other.dv, right.dv), 0.0) << context(p, cfg, other);
  }
}

// NaN in q on the last rank only: every rank raises, naming that rank and 'q',
// before any message is posted (a short timeout turns a regression into a failure).
TEST(Grid2DAttentionErrors, BadArgumentOnOneRankErrorsOnEveryRank) {
  const int P = world_size(), rank = world_rank();
  if (P < 2) GTEST_SKIP() << "needs >= 2 ranks";
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  world.set_timeout(20.0);
  world.set_timeout_policy(TimeoutPolicy::Throw);
  using A2D = Grid2DAttention<double, MpiSpace, Exec>;
  Grid2DOptions opts;
  opts.attn.check_finite = true;  // the NaN scan is opt-in
  A2D a2d(world, 0, 0, Exec(), 1, 2L * P, 2, 2, 8, opts);
  Tensor4<double, Mem> q("q", 1, 2, 2, 8), k("k", 1, 2, 2, 8), v("v", 1, 2, 2, 8), o("o", 1, 2, 2, 8);
  RowStats<double, Mem> lse("lse", 1, 2, 2);
  if (rank == P - 1) Kokkos::deep_copy(Kokkos::subview(q, 0, 1, 1, 3), std::nan(""));
  expect_error_on_every_rank([&] { a2d.forward(q, k, v, o, lse); }, {"rank " + std::to_string(P - 1), "'q'"});
}

// to_cyclic / from_cyclic against the definitions, for N with and without P^2 | N.
TEST(CyclicLayout, ConvertsBothWaysForTensorsAndStats) {
  const int P = world_size(), rank = world_rank();
  auto world  = Comm::from_raw(MPI_COMM_WORLD, Exec());
  for (const long c : {long(P) * 2, 5L, 7L}) {
    const long N = c * P;
    HostTensor g("g", 2, N, 3, 4);
    Testing::fill_random(g, shared_seed());
    HostStats gs("gs", 2, 3, N);
    for (std::size_t i = 0; i < gs.span(); ++i) gs.data()[i] = g.data()[i];
    auto chunk = Kokkos::subview(g, Kokkos::ALL, std::make_pair(rank * c, (rank + 1) * c), Kokkos::ALL, Kokkos::ALL);
    HostTensor hc("hc", 2, c, 3, 4);
    Kokkos::deep_copy(hc, chunk);
    auto dc = to_device<double>(hc, "contiguous");
    Tensor4<double, Mem> cyc("cyc", 2, c, 3, 4), back("back", 2, c, 3, 4);
    to_cyclic(world, dc, cyc);
    EXPECT_EQ(Testing::rel_error(to_host(cyc), shard_of(g, rank, P)), 0.0) << "c=" << c;
    from_cyclic(world, cyc, back);
    EXPECT_EQ(Testing::rel_error(to_host(back), hc), 0.0) << "c=" << c;

    RowStats<double, Mem> sc("sc", 2, 3, c), scyc("scyc", 2, 3, c), sback("sback", 2, 3, c);
    auto scm = Kokkos::create_mirror_view(sc);
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 3; ++h)
        for (long j = 0; j < c; ++j) scm(b, h, j) = gs(b, h, rank * c + j);
    Kokkos::deep_copy(sc, scm);
    to_cyclic(world, sc, scyc);
    EXPECT_EQ(stats_rel_error(stats_to_host(scyc), stats_shard_of(gs, rank, P)), 0.0) << "stats c=" << c;
    from_cyclic(world, scyc, sback);
    EXPECT_EQ(stats_rel_error(stats_to_host(sback), stats_to_host(sc)), 0.0) << "stats c=" << c;
  }
}

}  // namespace
}  // namespace DistAttn::Test
