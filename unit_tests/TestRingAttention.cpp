// DistFlashAttn executor on MPI ranks: forward and backward of the vanilla ring
// and the balanced schedule against the fp64 reference of the whole sequence,
// bitwise reproducibility, delayed receives, and measured bytes = the schedule's
// volume model. Every rank builds the (small) global problem and the reference
// itself and checks its own chunk.

#include "test_helpers.hpp"

#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/ring_volume.hpp>

#include <mpi.h>

namespace DistAttn::Test {
namespace {

using T   = double;  // fp64 end to end: any schedule error shows far above rounding
using Acc = accum_t<T>;
using Comm = Communicator<MpiSpace, Exec>;

struct Problem {
  int P, rank, B, c, H, Hkv, D;
  std::uint64_t seed;
  HostTensor q, k, v, dout;  // global
  HostTensor ro, rdq, rdk, rdv;
  HostStats rl;
};

std::uint64_t shared_seed() {
  std::uint64_t s = fresh_seed();
  MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return s;
}

Problem make_problem(int B, int c, int H, int Hkv, int D) {
  Problem p{};
  MPI_Comm_size(MPI_COMM_WORLD, &p.P);
  MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
  p.B = B, p.c = c, p.H = H, p.Hkv = Hkv, p.D = D;
  p.seed  = shared_seed();
  const int N = p.P * c;
  p.q    = HostTensor("q", B, N, H, D);
  p.k    = HostTensor("k", B, N, Hkv, D);
  p.v    = HostTensor("v", B, N, Hkv, D);
  p.dout = HostTensor("do", B, N, H, D);
  Testing::fill_random(p.q, p.seed, 1.5);
  Testing::fill_random(p.k, p.seed + 1, 1.5);
  Testing::fill_random(p.v, p.seed + 2);
  Testing::fill_random(p.dout, p.seed + 3);
  p.ro  = HostTensor("ro", B, N, H, D);
  p.rl  = HostStats("rl", B, H, N);
  p.rdq = HostTensor("rdq", B, N, H, D);
  p.rdk = HostTensor("rdk", B, N, Hkv, D);
  p.rdv = HostTensor("rdv", B, N, Hkv, D);
  const double scale = 1.0 / std::sqrt(double(D));
  Testing::reference_fwd(p.q, p.k, p.v, Mask::causal(), scale, p.ro, p.rl);
  Testing::reference_bwd(p.q, p.k, p.v, p.dout, Mask::causal(), scale, p.rdq, p.rdk, p.rdv);
  return p;
}

/// Rows of rank `rank`: chunk `rank` (contiguous), or half-chunks rank and
/// 2P-1-rank (zigzag).
HostTensor chunk_of(const HostTensor& g, int rank, int c, RingKind kind = RingKind::Vanilla) {
  const int P = int(g.extent(1)) / c;
  HostTensor out("chunk", g.extent(0), c, g.extent(2), g.extent(3));
  for (int i = 0; i < c; ++i) {
    int pos = rank * c + i;
    if (kind == RingKind::Zigzag) pos = i < c / 2 ? rank * (c / 2) + i : (2 * P - 1 - rank) * (c / 2) + i - c / 2;
    for (std::size_t b = 0; b < g.extent(0); ++b)
      for (std::size_t h = 0; h < g.extent(2); ++h)
        for (std::size_t d = 0; d < g.extent(3); ++d) out(b, i, h, d) = g(b, pos, h, d);
  }
  return out;
}

struct Outputs {
  HostTensor o, dq, dk, dv;
  RingStats fwd, bwd;
};

Outputs run_ring(const Problem& p, RingKind kind, double delay_ms = 0.0) {
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  RingOptions opts;
  opts.kind          = kind;
  opts.recv_delay_ms = delay_ms;
  RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
  auto q = to_device<T>(chunk_of(p.q, p.rank, p.c, kind), "q");
  auto k = to_device<T>(chunk_of(p.k, p.rank, p.c, kind), "k");
  auto v = to_device<T>(chunk_of(p.v, p.rank, p.c, kind), "v");
  auto d = to_device<T>(chunk_of(p.dout, p.rank, p.c, kind), "do");
  Tensor4<T, Mem> o("o", p.B, p.c, p.H, p.D), dq("dq", p.B, p.c, p.H, p.D), dk("dk", p.B, p.c, p.Hkv, p.D),
      dv("dv", p.B, p.c, p.Hkv, p.D);
  RowStats<Acc, Mem> lse("lse", p.B, p.H, p.c);
  ring.forward(q, k, v, o, lse);
  Outputs out;
  out.fwd = ring.stats();
  ring.backward(q, k, v, o, d, lse, dq, dk, dv);
  out.bwd = ring.stats();
  out.o   = to_host(o);
  out.dq  = to_host(dq);
  out.dk  = to_host(dk);
  out.dv  = to_host(dv);
  return out;
}

void expect_matches_reference(const Problem& p, const Outputs& out, RingKind kind, const char* what = "") {
  const double tol = 1e-11;
  const std::string ctx = std::string(to_string(kind)) + " " + what + " P=" + std::to_string(p.P) + " rank " + std::to_string(p.rank) +
                          " seed " + std::to_string(p.seed);
  EXPECT_LE(Testing::rel_error(out.o, chunk_of(p.ro, p.rank, p.c, kind)), tol) << "O " << ctx;
  EXPECT_LE(Testing::rel_error(out.dq, chunk_of(p.rdq, p.rank, p.c, kind)), tol) << "dQ " << ctx;
  EXPECT_LE(Testing::rel_error(out.dk, chunk_of(p.rdk, p.rank, p.c, kind)), tol) << "dK " << ctx;
  EXPECT_LE(Testing::rel_error(out.dv, chunk_of(p.rdv, p.rank, p.c, kind)), tol) << "dV " << ctx;
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
