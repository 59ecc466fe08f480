// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// DistFlashAttn executor on MPI ranks: forward and backward of the vanilla ring,
// the balanced schedule and the zigzag assignment against the fp64 reference of
// the whole sequence, bitwise reproducibility, delayed receives, measured bytes =
// the schedule's volume model, inputs of any layout, full (non-causal) attention,
// and errors raised on every rank together. Every rank builds the (small) global
// problem and the reference itself and checks its own chunk.

#include "sequence_problem.hpp"

#include <DistAttn/grid2d/grid2d_types.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/ring_volume.hpp>

#include <cmath>
#include <vector>

namespace DistAttn::Test {
namespace {

using T   = double;  // fp64 end to end: any schedule error shows far above rounding
using Acc = accum_t<T>;
using Comm = Communicator<MpiSpace, Exec>;

/// One forward and backward with every tensor argument (inputs, outputs, LSE) in layout L.
template <class L = Kokkos::LayoutRight>
Outputs<RingStats> run_ring(const Problem& p, RingKind kind, double delay_ms = 0.0) {
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  RingOptions opts;
  opts.kind          = kind;
  opts.causal        = p.causal;
  opts.recv_delay_ms = delay_ms;
  RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
  return run_rows<T, L>(ring, p, ring_positions(p.P, p.c, kind));
}

class RingAttentionTest : public ::testing::TestWithParam<RingKind> {};

// Chunk lengths that are not multiples of any tile size.
/// Zigzag needs an even chunk (two halves); keep the others odd.
int chunk_len(int c) { return ::testing::TestWithParam<RingKind>::GetParam() == RingKind::Zigzag ? c + 1 : c; }

TEST_P(RingAttentionTest, MhaMatchesReference) {
  const auto p = make_problem(1, chunk_len(37), 2, 2, 64);
  expect_matches_reference(p, run_ring(p, GetParam()), GetParam());
}

TEST_P(RingAttentionTest, GqaMatchesReference) {
  const auto p = make_problem(2, chunk_len(19), 4, 1, 32);
  expect_matches_reference(p, run_ring(p, GetParam()), GetParam());
  const auto p2 = make_problem(1, chunk_len(23), 6, 2, 64);
  expect_matches_reference(p2, run_ring(p2, GetParam()), GetParam());
}

TEST_P(RingAttentionTest, BitwiseReproducibleAndTimingIndependent) {
  const auto p  = make_problem(1, chunk_len(29), 2, 1, 64);
  const auto a  = run_ring(p, GetParam());
  const auto b  = run_ring(p, GetParam());
  const auto cd = run_ring(p, GetParam(), /*delay_ms=*/3.0);
  for (const auto* other : {&b, &cd})
    for (auto pair : {std::make_pair(&a.o, &other->o), std::make_pair(&a.dq, &other->dq),
                      std::make_pair(&a.dk, &other->dk), std::make_pair(&a.dv, &other->dv)})
      for (std::size_t i = 0; i < pair.first->span(); ++i)
        ASSERT_EQ(pair.first->data()[i], pair.second->data()[i]) << "element " << i << " rank " << p.rank;
  expect_matches_reference(p, cd, GetParam(), "delayed");
}

TEST_P(RingAttentionTest, BytesMatchVolumeModel) {
  const auto p   = make_problem(1, 16, 4, 2, 32);
  const auto out = run_ring(p, GetParam());
  RingSchedule sched(p.P, GetParam());
  RingSizes z;
  z.chunk_tokens = p.c, z.heads = p.H, z.kv_heads = p.Hkv, z.head_dim = p.D;
  z.io_bytes = sizeof(T), z.stat_bytes = sizeof(Acc), z.grad_bytes = sizeof(Acc);
  for (auto pass : {Pass::Forward, Pass::Backward}) {
    const RingVolume vol    = ring_volume(sched, p.rank, pass, z);
    const RingStats& st     = pass == Pass::Forward ? out.fwd : out.bwd;
    for (int kind = 0; kind < kNumPayloadKinds; ++kind) {
      EXPECT_EQ(std::int64_t(st.bytes_sent[std::size_t(kind)]), vol.sent_bytes[std::size_t(kind)])
          << to_string(pass) << " sent " << to_string(PayloadKind(kind)) << " rank " << p.rank;
      EXPECT_EQ(std::int64_t(st.bytes_received[std::size_t(kind)]), vol.recv_bytes[std::size_t(kind)])
          << to_string(pass) << " received " << to_string(PayloadKind(kind)) << " rank " << p.rank;
    }
    EXPECT_EQ(st.steps, sched.num_steps());
  }
}

// Column-major (the default layout of a View in CUDA memory) and strided Views
// are staged into row-major buffers: results equal the row-major run's bits.
TEST_P(RingAttentionTest, AnyInputLayoutMatchesRowMajorBitwise) {
  const auto p     = make_problem(1, chunk_len(13), 4, 2, 16);
  const auto right = run_ring(p, GetParam());
  expect_matches_reference(p, right, GetParam(), "LayoutRight");
  const Outputs<RingStats> others[] = {run_ring<Kokkos::LayoutLeft>(p, GetParam()),
                            run_ring<Kokkos::LayoutStride>(p, GetParam())};
  const char* names[]    = {"LayoutLeft", "LayoutStride"};
  for (int i = 0; i < 2; ++i) {
    expect_matches_reference(p, others[i], GetParam(), names[i]);
    EXPECT_EQ(Testing::rel_error(others[i].o, right.o), 0.0) << names[i] << " rank " << p.rank;
    EXPECT_EQ(Testing::rel_error(others[i].dq, right.dq), 0.0) << names[i] << " rank " << p.rank;
    EXPECT_EQ(Testing::rel_error(others[i].dk, right.dk), 0.0) << names[i] << " rank " << p.rank;
    EXPECT_EQ(Testing::rel_error(others[i].dv, right.dv), 0.0) << names[i] << " rank " << p.rank;
  }
}

// Ranks may pass different layouts: each is a local matter.
TEST_P(RingAttentionTest, LayoutsMayDifferBetweenRanks) {
  const auto p   = make_problem(1, chunk_len(9), 2, 1, 8);
  const auto out = p.rank % 3 == 0   ? run_ring<Kokkos::LayoutStride>(p, GetParam())
                   : p.rank % 3 == 1 ? run_ring<Kokkos::LayoutLeft>(p, GetParam())
                                     : run_ring(p, GetParam());
  expect_matches_reference(p, out, GetParam(), "mixed layouts");
}

// Full attention: the zigzag ring visits every chunk; the other schedules skip the
// blocks above the diagonal and must refuse instead of computing causal attention.
TEST_P(RingAttentionTest, FullAttentionIsExactOrRejected) {
  const auto p = make_problem(1, chunk_len(11), 4, 2, 16, /*causal=*/false);
  if (GetParam() == RingKind::Zigzag) {
    expect_matches_reference(p, run_ring(p, GetParam()), GetParam());
    return;
  }
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  RingOptions opts;
  opts.kind   = GetParam();
  opts.causal = false;
  try {
    RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), 1, p.c, 4, 2, 16, opts);
    ADD_FAILURE() << "causal = false accepted by the " << to_string(GetParam()) << " schedule";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Zigzag"), std::string::npos) << e.what();
  }
}

template <class O, class = void>
struct names_a_mask : std::false_type {};
template <class O>
struct names_a_mask<O, std::void_t<decltype(std::declval<O&>().mask)>> : std::true_type {};

// The executors set every tile's mask themselves; their options must not offer a
// mask field they would ignore (RingOptions::causal is the switch).
TEST(RingAttentionOptions, OffersNoMaskToIgnore) {
  EXPECT_TRUE(names_a_mask<AttnOptions>::value);
  EXPECT_FALSE(names_a_mask<TileOptions>::value);
  EXPECT_FALSE(names_a_mask<decltype(RingOptions{}.attn)>::value);
  EXPECT_FALSE(names_a_mask<decltype(Grid2DOptions{}.attn)>::value);
}

// By default a pass does not scan its inputs (an extra read and a host wait per
// pass): NaN in v reaches the output instead of raising. Shapes are still checked.
TEST(RingAttentionOptions, NaNScanIsOptIn) {
  const auto p = make_problem(1, 6, 2, 1, 8);
  auto comm    = Comm::from_raw(MPI_COMM_WORLD, Exec());
  RingOptions opts;
  EXPECT_FALSE(opts.attn.check_finite);
  RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
  auto q = to_device<T>(chunk_of(p.q, p.rank, p.c), "q");
  auto k = to_device<T>(chunk_of(p.k, p.rank, p.c), "k");
  auto v = to_device<T>(chunk_of(p.v, p.rank, p.c), "v");
  Tensor4<T, Mem> o("o", p.B, p.c, p.H, p.D);
  RowStats<Acc, Mem> lse("lse", p.B, p.H, p.c);
  Kokkos::deep_copy(Kokkos::subview(v, 0, 0, 0, 0), std::nan(""));  // every local row sees its key 0
  EXPECT_NO_THROW(ring.forward(q, k, v, o, lse));
  EXPECT_TRUE(std::isnan(to_host(o)(0, 0, 0, 0)));
  Tensor4<T, Mem> qshort("qshort", p.B, p.c - 1, p.H, p.D);
  expect_error_on_every_rank([&] { ring.forward(qshort, k, v, o, lse); }, {"'q'"});
}

// One rank's bad argument (NaN in q, a wrong extent) raises on every rank, naming
// the rank and the argument, before any message is posted; ranks built with
// different extents are reported the same way. The communicator stays usable.
TEST_P(RingAttentionTest, BadArgumentOnOneRankErrorsOnEveryRank) {
  const auto p = make_problem(1, chunk_len(7), 2, 1, 8);
  if (p.P < 2) GTEST_SKIP() << "needs >= 2 ranks";
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  comm.set_timeout(20.0);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  RingOptions opts;
  opts.kind             = GetParam();
  opts.attn.check_finite = true;  // the NaN scan is opt-in
  RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
  const int bad = p.P - 1;
  auto q = to_device<T>(chunk_of(p.q, p.rank, p.c, GetParam()), "q");
  auto k = to_device<T>(chunk_of(p.k, p.rank, p.c, GetParam()), "k");
  auto v = to_device<T>(chunk_of(p.v, p.rank, p.c, GetParam()), "v");
  Tensor4<T, Mem> o("o", p.B, p.c, p.H, p.D);
  RowStats<Acc, Mem> lse("lse", p.B, p.H, p.c);

  auto qnan = to_device<T>(chunk_of(p.q, p.rank, p.c, GetParam()), "q");
  if (p.rank == bad) Kokkos::deep_copy(Kokkos::subview(qnan, 0, 0, 0, 0), std::nan(""));
  expect_error_on_every_rank([&] { ring.forward(qnan, k, v, o, lse); },
                             {"rank " + std::to_string(bad), "'q'", "NaN"});

  Tensor4<T, Mem> qshort("qshort", p.B, p.rank == 0 ? p.c - 1 : p.c, p.H, p.D);
  Tensor4<T, Mem> oshort("oshort", p.B, qshort.extent(1), p.H, p.D);
  RowStats<Acc, Mem> lshort("lshort", p.B, p.H, qshort.extent(1));
  expect_error_on_every_rank([&] { ring.forward(qshort, k, v, oshort, lshort); }, {"rank 0", "'q'"});

  ring.forward(q, k, v, o, lse);  // still usable, and exact
  EXPECT_LE(Testing::rel_error(to_host(o), chunk_of(p.ro, p.rank, p.c, GetParam())), 1e-11);

  // Ranks built with different extents fail at construction, on every rank.
  const int c2 = p.rank == bad ? p.c + 2 : p.c;  // even, like p.c for zigzag
  expect_error_on_every_rank([&] { RingAttention<T, MpiSpace, Exec> odd(comm, Exec(), p.B, c2, p.H, p.Hkv, p.D, opts); },
                             {"configured differently",
                              "chunk differs", std::to_string(p.c + 2) + " on rank " + std::to_string(bad)});
}

TEST(RingAttentionErrors, RejectsWrongChunkShape) {
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), 1, 8, 2, 2, 64);
  Tensor4<T, Mem> q("q", 1, 9, 2, 64), k("k", 1, 8, 2, 64), v("v", 1, 8, 2, 64), o("o", 1, 9, 2, 64);
  RowStats<Acc, Mem> lse("lse", 1, 2, 9);
  EXPECT_THROW(ring.forward(q, k, v, o, lse), InvalidArgument);
  EXPECT_THROW((RingAttention<T, MpiSpace, Exec>(comm, Exec(), 1, 8, 3, 2, 64)), InvalidArgument);
  RingOptions zz;
  zz.kind = RingKind::Zigzag;
  EXPECT_THROW((RingAttention<T, MpiSpace, Exec>(comm, Exec(), 1, 7, 2, 2, 64, zz)), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Kinds, RingAttentionTest,
                         ::testing::Values(RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag),
                         [](const ::testing::TestParamInfo<RingKind>& i) { return std::string(to_string(i.param)); });

}  // namespace
}  // namespace DistAttn::Test
