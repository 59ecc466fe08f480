// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ulysses executor on MPI ranks: forward and backward against the fp64 reference
// of the whole sequence for MHA, GQA with K/V heads split over the ranks and with
// K/V heads replicated (fewer K/V heads than ranks), causal and full attention,
// inputs of any layout, backward with and without the inputs saved by forward,
// measured bytes = the all-to-all volumes, and argument errors on every rank.

#include "sequence_problem.hpp"

#include <DistAttn/ulysses/ulysses_attention.hpp>

#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using T    = double;
using Acc  = accum_t<T>;
using Comm = Communicator<MpiSpace, Exec>;
using Uly  = UlyssesAttention<T, MpiSpace, Exec>;

template <class L = Kokkos::LayoutRight>
Outputs<UlyssesStats> run_ulysses(const Problem& p, int head_groups = 0) {
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  UlyssesOptions opts;
  opts.causal      = p.causal;
  opts.head_groups = head_groups;
  Uly u(comm, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
  return run_rows<T, L>(u, p, ring_positions(p.P, p.c, RingKind::Vanilla));
}

/// K/V head counts that exercise every assignment at this P: one per query head
/// (split), P (split, GQA), and 1 (every K/V head replicated to all ranks).
std::vector<int> kv_head_cases(int H, int P) {
  std::vector<int> v{H, 1};
  if (P != H && P != 1 && H % P == 0) v.push_back(P);
  if (P % 2 == 0 && H % 2 == 0) v.push_back(2);  // replicated to P/2 ranks each
  return v;
}

TEST(UlyssesAttention, MatchesReferenceForEveryHeadAssignment) {
  const int P = world_size(), H = 2 * P;
  for (const bool causal : {true, false})
    for (const int Hkv : kv_head_cases(H, P)) {
      const auto p = make_problem(2, 7, H, Hkv, 16, causal);
      expect_matches_reference(p, run_ulysses(p), RingKind::Vanilla, "ulysses Hkv=" + std::to_string(Hkv));
    }
}

TEST(UlyssesAttention, AnyInputLayoutMatchesRowMajorBitwise) {
  const int P      = world_size();
  const auto p     = make_problem(1, 5, 2 * P, 1, 8);
  const auto right = run_ulysses(p);
  for (const auto& other : {run_ulysses<Kokkos::LayoutLeft>(p), run_ulysses<Kokkos::LayoutStride>(p)}) {
    expect_matches_reference(p, other, RingKind::Vanilla, "ulysses any layout");
    EXPECT_EQ(Testing::rel_error(other.o, right.o), 0.0);
    EXPECT_EQ(Testing::rel_error(other.dq, right.dq), 0.0);
    EXPECT_EQ(Testing::rel_error(other.dk, right.dk), 0.0);
    EXPECT_EQ(Testing::rel_error(other.dv, right.dv), 0.0);
  }
}

// Forward a different problem in between: backward must redo the all-to-all of
// q, k, v instead of using the saved head-side copies.
TEST(UlyssesAttention, BackwardWithoutSavedInputsMatches) {
  const int P  = world_size();
  const auto p = make_problem(1, 6, 2 * P, 2 * P, 8);  // two head groups
  auto comm    = Comm::from_raw(MPI_COMM_WORLD, Exec());
  Uly u(comm, Exec(), p.B, p.c, p.H, p.Hkv, p.D);
  const auto kind = RingKind::Vanilla;
  auto q = to_device<T>(chunk_of(p.q, p.rank, p.c, kind), "q"), k = to_device<T>(chunk_of(p.k, p.rank, p.c, kind), "k"),
       v = to_device<T>(chunk_of(p.v, p.rank, p.c, kind), "v"), d = to_device<T>(chunk_of(p.dout, p.rank, p.c, kind), "d");
  Tensor4<T, Mem> o("o", p.B, p.c, p.H, p.D), dq("dq", p.B, p.c, p.H, p.D), dk("dk", p.B, p.c, p.Hkv, p.D),
      dv("dv", p.B, p.c, p.Hkv, p.D);
  RowStats<Acc, Mem> lse("lse", p.B, p.H, p.c);
  u.forward(q, k, v, o, lse);
  auto q2 = to_device<T>(chunk_of(p.dout, p.rank, p.c, kind), "q2");  // any other inputs
  Tensor4<T, Mem> o2("o2", p.B, p.c, p.H, p.D);
  RowStats<Acc, Mem> l2("l2", p.B, p.H, p.c);
  u.forward(q2, k, v, o2, l2);
  u.backward(q, k, v, o, d, lse, dq, dk, dv);
  EXPECT_GT(u.stats().received(UlyssesPhase::QKV) + (P == 1 ? 1 : 0), 0u) << "q, k, v were not exchanged again";
  Outputs<UlyssesStats> out;
  out.o = to_host(o), out.dq = to_host(dq), out.dk = to_host(dk), out.dv = to_host(dv);
  expect_matches_reference(p, out, kind, "ulysses not saved");
}

// Every all-to-all moves (P-1) blocks of this rank's share each way.
TEST(UlyssesAttention, BytesMatchTheAllToAllVolumes) {
  const int P = world_size(), H = 2 * P;
  for (const int Hkv : kv_head_cases(H, P)) {
    const auto p          = make_problem(2, 4, H, Hkv, 8);
    const auto out        = run_ulysses(p);
    const UlyssesHeads hd(P, H, Hkv);
    const std::uint64_t n = std::uint64_t(p.B) * p.c, D = std::uint64_t(p.D), L = hd.local_heads(),
                        Lk = hd.local_kv_heads(), peers = std::uint64_t(P - 1);
    const std::uint64_t qkv = peers * n * (L + 2 * Lk) * D * sizeof(T);
    const std::uint64_t out_b = peers * (n * L * D * sizeof(T) + n * L * sizeof(Acc));
    const std::uint64_t dout  = peers * (n * L * D * sizeof(T) + 2 * n * L * sizeof(Acc));
    const std::uint64_t grad  = peers * n * (L + 2 * Lk) * D * sizeof(Acc);
    EXPECT_EQ(out.fwd.sent(UlyssesPhase::QKV), qkv) << "Hkv " << Hkv;
    EXPECT_EQ(out.fwd.received(UlyssesPhase::Out), out_b) << "Hkv " << Hkv;
    EXPECT_EQ(out.bwd.received(UlyssesPhase::QKV), 0u) << "saved q, k, v must be reused";
    EXPECT_EQ(out.bwd.sent(UlyssesPhase::DOut), dout) << "Hkv " << Hkv;
    EXPECT_EQ(out.bwd.received(UlyssesPhase::Grad), grad) << "Hkv " << Hkv;
  }
}

// Pipelining over head groups reorders only whole heads' work and messages: every
// valid group count gives the one-group result bit for bit, and the same bytes.
TEST(UlyssesAttention, HeadGroupsMatchOneGroupBitwise) {
  const int P = world_size(), H = 4 * P;
  for (const bool causal : {true, false})
    for (const int Hkv : {H, 2 * P, P, 1}) {
      const auto p   = make_problem(2, 5, H, Hkv, 8, causal);
      const auto one = run_ulysses(p, 1);
      const UlyssesHeads hd(P, H, Hkv);
      for (const int G : {2, 4}) {
        if (hd.local_kv_heads() % G != 0) {
          EXPECT_THROW(ulysses_head_groups(hd, G), InvalidArgument) << "Hkv " << Hkv << " G " << G;
          continue;
        }
        const std::string what = "Hkv=" + std::to_string(Hkv) + " G=" + std::to_string(G) +
                                 (causal ? " causal" : " full");
        EXPECT_EQ(ulysses_head_groups(hd, G), G) << what;
        const auto out = run_ulysses(p, G);
        expect_matches_reference(p, out, RingKind::Vanilla, "ulysses " + what);
        EXPECT_EQ(Testing::rel_error(out.o, one.o), 0.0) << what;
        EXPECT_EQ(Testing::rel_error(out.dq, one.dq), 0.0) << what;
        EXPECT_EQ(Testing::rel_error(out.dk, one.dk), 0.0) << what;
        EXPECT_EQ(Testing::rel_error(out.dv, one.dv), 0.0) << what;
        EXPECT_EQ(out.fwd.total_sent(), one.fwd.total_sent()) << what;
        EXPECT_EQ(out.bwd.total_received(), one.bwd.total_received()) << what;
        if (P > 1) {
          // one all-to-all of q|k|v and two of O, LSE per group; dO and LSE|Delta, then grads
          EXPECT_EQ(out.fwd.transfers, 3 * G) << what;
          EXPECT_EQ(out.bwd.transfers, 3 * G) << what;
        }
      }
    }
}

TEST(UlyssesAttention, RejectsHeadGroupsThatDoNotSplit) {
  const int P = world_size();
  auto comm   = Comm::from_raw(MPI_COMM_WORLD, Exec());
  UlyssesOptions opts;
  opts.head_groups = 3;  // 2 query heads per rank
  try {
    Uly u(comm, Exec(), 1, 4, 2 * P, P, 8, opts);
    ADD_FAILURE() << "head_groups=3 accepted for 2 heads per rank";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("head_groups"), std::string::npos) << e.what();
  }
  opts.head_groups = -1;
  EXPECT_THROW(Uly(comm, Exec(), 1, 4, 2 * P, P, 8, opts), InvalidArgument);
}

TEST(UlyssesAttention, RejectsHeadsThatDoNotSplit) {
  const int P = world_size();
  if (P < 2) GTEST_SKIP() << "every head count splits over one rank";
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  try {
    Uly u(comm, Exec(), 1, 4, 2 * P + 1, 1, 8);
    ADD_FAILURE() << "heads not divisible by P accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("divisible by the number of ranks"), std::string::npos) << e.what();
  }
  if (P >= 3 && (2 * P) % 3 == 0 && P % 3 != 0) {
    EXPECT_THROW(Uly(comm, Exec(), 1, 4, 2 * P, 3, 8), InvalidArgument);  // 3 K/V heads over P ranks
  }
}

TEST(UlyssesAttention, BadArgumentOnOneRankErrorsOnEveryRank) {
  const int P = world_size();
  if (P < 2) GTEST_SKIP() << "needs >= 2 ranks";
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  comm.set_timeout(20.0);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  UlyssesOptions opts;
  opts.attn.check_finite = true;  // the NaN scan is opt-in
  Uly u(comm, Exec(), 1, 4, 2 * P, P, 8, opts);
  Tensor4<T, Mem> q("q", 1, 4, 2 * P, 8), k("k", 1, 4, P, 8), v("v", 1, 4, P, 8), o("o", 1, 4, 2 * P, 8);
  RowStats<Acc, Mem> lse("lse", 1, 2 * P, 4);
  if (world_rank() == P - 1) Kokkos::deep_copy(Kokkos::subview(v, 0, 3, 0, 1), std::nan(""));
  expect_error_on_every_rank([&] { u.forward(q, k, v, o, lse); }, {"rank " + std::to_string(P - 1), "'v'"});
}

}  // namespace
}  // namespace DistAttn::Test
