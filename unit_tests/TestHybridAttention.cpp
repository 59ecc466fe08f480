// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Hybrid head x sequence executor on MPI ranks: every U x S factorization of the
// rank count, every inner sequence executor (ring, balanced, zigzag, Attention2D
// NO and O), MHA and GQA (split and replicated K/V heads), causal and full
// attention, against the fp64 reference; backward without the kept forward
// state; bytes of the head all-to-alls; argument errors.

#include "sequence_problem.hpp"

#include <DistAttn/hybrid/hybrid_attention.hpp>

#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using T    = double;
using Acc  = accum_t<T>;
using Comm = Communicator<MpiSpace, Exec>;
using Hyb  = HybridAttention<T, MpiSpace, Exec>;

const HybridInner kInners[] = {HybridInner::Vanilla, HybridInner::Balanced, HybridInner::Zigzag,
                               HybridInner::Grid2DNO, HybridInner::Grid2DO};

bool supports_full(HybridInner k) { return k != HybridInner::Vanilla && k != HybridInner::Balanced; }

std::string label(HybridInner k, int U, int Hkv) {
  return std::string("hybrid ") + to_string(k) + " U=" + std::to_string(U) + " Hkv=" + std::to_string(Hkv);
}

Outputs<UlyssesStats> run_hybrid(const Problem& p, HybridInner inner, int U) {
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  HybridOptions opts;
  opts.causal         = p.causal;
  opts.inner          = inner;
  opts.ulysses_degree = U;
  Hyb h(world, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
  EXPECT_EQ(h.ulysses_degree() * h.sequence_degree(), p.P);
  auto pos = [&h](int r, std::int64_t i) { return h.position(r, i); };
  auto out = run_rows<T>(h, p, pos);
  expect_rows_match(p, out, pos, label(inner, U, p.Hkv));
  return out;
}

TEST(HybridAttention, EveryFactorizationAndInnerExecutorMatchesReference) {
  const int P = world_size();
  for (int U = 1; U <= P; ++U) {
    if (P % U != 0) continue;
    const int H = 2 * U;
    for (const int Hkv : {H, 1})
      for (const auto inner : kInners)
        for (const bool causal : {true, false}) {
          if (!causal && !supports_full(inner)) continue;
          const auto p = make_problem(1, 4, H, Hkv, 8, causal);  // U c = 4 U is even for zigzag
          run_hybrid(p, inner, U);
        }
  }
}

TEST(HybridAttention, GqaWithKvHeadsSplitOverTheHeadGroups) {
  const int P = world_size();
  for (int U = 2; U <= P; ++U) {
    if (P % U != 0) continue;
    const auto p = make_problem(2, 3, 2 * U, U, 8);  // two query heads per K/V head, one K/V head per group
    run_hybrid(p, HybridInner::Balanced, U);
  }
}

TEST(HybridAttention, BackwardWithoutKeptForwardStateMatches) {
  const int P = world_size();
  const int U = P % 2 == 0 ? 2 : 1;
  const auto p = make_problem(1, 4, 2 * U, 1, 8);
  for (const auto inner : {HybridInner::Zigzag, HybridInner::Grid2DO}) {
    auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
    HybridOptions opts;
    opts.inner          = inner;
    opts.ulysses_degree = U;
    Hyb h(world, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
    auto pos = [&h](int r, std::int64_t i) { return h.position(r, i); };
    auto q = to_device<T>(rows_of(p.q, p.rank, p.c, pos), "q"), k = to_device<T>(rows_of(p.k, p.rank, p.c, pos), "k"),
         v = to_device<T>(rows_of(p.v, p.rank, p.c, pos), "v"), d = to_device<T>(rows_of(p.dout, p.rank, p.c, pos), "d");
    Tensor4<T, Mem> o("o", p.B, p.c, p.H, p.D), dq("dq", p.B, p.c, p.H, p.D), dk("dk", p.B, p.c, p.Hkv, p.D),
        dv("dv", p.B, p.c, p.Hkv, p.D), o2("o2", p.B, p.c, p.H, p.D);
    RowStats<Acc, Mem> lse("lse", p.B, p.H, p.c), l2("l2", p.B, p.H, p.c);
    h.forward(q, k, v, o, lse);
    h.forward(d, k, v, o2, l2);  // overwrites the kept head-side state
    h.backward(q, k, v, o, d, lse, dq, dk, dv);
    Outputs<UlyssesStats> out;
    out.o = to_host(o), out.dq = to_host(dq), out.dk = to_host(dk), out.dv = to_host(dv);
    expect_rows_match(p, out, pos, label(inner, U, p.Hkv) + " not kept");
  }
}

// The head all-to-alls move (U-1) blocks each way; the inner executor's bytes are
// reported under their own phase.
TEST(HybridAttention, HeadAllToAllBytes) {
  const int P = world_size();
  const int U = P;
  const auto p = make_problem(1, 4, 2 * U, U, 8);
  const auto out = run_hybrid(p, HybridInner::Zigzag, U);
  const std::uint64_t n = std::uint64_t(p.B) * p.c, D = std::uint64_t(p.D), peers = std::uint64_t(U - 1);
  EXPECT_EQ(out.fwd.sent(UlyssesPhase::QKV), peers * n * (2 + 2 * 1) * D * sizeof(T));
  EXPECT_EQ(out.fwd.received(UlyssesPhase::Out), peers * (n * 2 * D * sizeof(T) + n * 2 * sizeof(Acc)));
  EXPECT_EQ(out.bwd.received(UlyssesPhase::DOut), peers * n * 2 * D * sizeof(T)) << "kept O and LSE must not travel";
  EXPECT_EQ(out.bwd.received(UlyssesPhase::Grad), peers * n * (2 + 2 * 1) * D * sizeof(Acc));
  EXPECT_EQ(out.fwd.received(UlyssesPhase::Inner), 0u) << "S = 1: the inner ring has no peer";
}

TEST(HybridAttention, RejectsDegreesThatDoNotFit) {
  const int P = world_size();
  auto world  = Comm::from_raw(MPI_COMM_WORLD, Exec());
  HybridOptions opts;
  opts.ulysses_degree = P + 1;
  EXPECT_THROW(Hyb(world, Exec(), 1, 4, 2 * (P + 1), 1, 8, opts), InvalidArgument);
  if (P >= 2) {
    opts.ulysses_degree = P;
    try {
      Hyb(world, Exec(), 1, 4, 2 * P + 1, 1, 8, opts);
      ADD_FAILURE() << "heads not divisible by U accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("divisible"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace DistAttn::Test
