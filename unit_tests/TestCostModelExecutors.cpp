// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The cost model against the executors themselves, on 1-4 MPI ranks: per-rank
// workspace (ring_workspace_bytes, grid2d_workspace_bytes,
// ulysses_workspace_bytes) against every Kokkos allocation whose label starts
// with the executor's prefix (Kokkos Tools allocation callback) over one forward
// and one backward, and predicted bytes per pass against the executors' counters
// (maximum over ranks).

#include "test_helpers.hpp"

#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/hybrid/hybrid_attention.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/ulysses/ulysses_attention.hpp>
#include <DistAttn/cost/cost_model.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include <mpi.h>

#include <array>
#include <cstring>
#include <utility>
#include <vector>
#include <string>

namespace DistAttn::Test {
namespace {

using T    = float;
using Comm = Communicator<MpiSpace, Exec>;

std::uint64_t g_live = 0, g_peak = 0;
std::vector<const char*> g_prefixes;

bool counted(const char* label) {
  for (const char* p : g_prefixes)
    if (std::strncmp(label, p, std::strlen(p)) == 0) return true;
  return false;
}
void on_alloc(const Kokkos::Tools::SpaceHandle, const char* label, const void*, const std::uint64_t size) {
  if (!counted(label)) return;
  g_live += size;
  g_peak = std::max(g_peak, g_live);
}
void on_free(const Kokkos::Tools::SpaceHandle, const char* label, const void*, const std::uint64_t size) {
  if (counted(label)) g_live -= std::min(g_live, size);
}

/// Peak bytes held under any of `prefixes` while f runs (an executor's workspace
/// grows from forward's layout to backward's, freeing the first).
template <class F>
std::uint64_t allocated(std::vector<const char*> prefixes, F&& f) {
  g_live = g_peak = 0;
  g_prefixes      = std::move(prefixes);
  compat::set_allocation_callbacks(on_alloc, on_free);
  f();
  compat::set_allocation_callbacks(nullptr, nullptr);
  return g_peak;
}

/// Every rank's tensors for one chunk of c tokens.
struct Chunk {
  Tensor4<T, Mem> q, k, v, o, dO, dq, dk, dv;
  RowStats<accum_t<T>, Mem> lse;
  Chunk(int B, int c, int H, int Hkv, int D)
      : q("q", B, c, H, D), k("k", B, c, Hkv, D), v("v", B, c, Hkv, D), o("o", B, c, H, D), dO("do", B, c, H, D),
        dq("dq", B, c, H, D), dk("dk", B, c, Hkv, D), dv("dv", B, c, Hkv, D), lse("lse", B, H, c) {
    Testing::fill_random_device(Exec(), q, 1);
    Testing::fill_random_device(Exec(), k, 2);
    Testing::fill_random_device(Exec(), v, 3);
    Testing::fill_random_device(Exec(), dO, 4);
  }
  /// One forward and one backward; the executor's stats of each pass.
  template <class E>
  std::pair<std::int64_t, std::int64_t> run(E& e) {
    e.forward(q, k, v, o, lse);
    const std::int64_t f = max_over_ranks(e.stats().total_received());
    e.backward(q, k, v, o, dO, lse, dq, dk, dv);
    return {f, max_over_ranks(e.stats().total_received())};
  }
  static std::int64_t max_over_ranks(std::uint64_t b) {
    long long in = static_cast<long long>(b), out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }
};

MachineModel machine(int D) {
  TileThroughput t;
  for (TileDirection dir : {TileDirection::Forward, TileDirection::Backward})
    for (BlockKind kind : {BlockKind::Full, BlockKind::Causal}) t.set({dir, kind, "float", D}, {1e9, 0});
  return nvlink_ib_node_defaults(t);
}

/// The executor's measured (forward, backward) bytes against the prediction; returns the prediction.
Prediction expect_predicted_bytes(const std::pair<std::int64_t, std::int64_t>& measured, const ExecutorChoice& ch,
                                  const AttnProblem& pr, int P) {
  const Prediction p = predict(ch, pr, P, machine(pr.head_dim));
  EXPECT_EQ(measured.first, p.forward.max_bytes_received);
  EXPECT_EQ(measured.second, p.backward.max_bytes_received);
  return p;
}

AttnProblem problem(int B, std::int64_t N, int H, int Hkv, int D) {
  AttnProblem p;
  p.batch = B, p.seq_len = N, p.heads = H, p.kv_heads = Hkv, p.head_dim = D, p.dtype = "float";
  return p;
}

TEST(CostModelExecutors, Ring) {
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = comm.size(), B = 2, c = 8, H = 4, Hkv = 2, D = 16;
  Chunk x(B, c, H, Hkv, D);
  const AttnProblem pr = problem(B, std::int64_t(P) * c, H, Hkv, D);
  for (ExecutorKind k : {ExecutorKind::RingVanilla, ExecutorKind::RingBalanced, ExecutorKind::RingZigzag}) {
    const RingKind kind = ring_kind_of(k);
    SCOPED_TRACE(std::string(to_string(kind)) + " P=" + std::to_string(P));
    RingOptions opts;
    opts.kind = kind;
    std::pair<std::int64_t, std::int64_t> measured;
    // The model plans with the executor's buffer table (schedule/ring_buffers.hpp):
    // it must hold what a forward and a backward allocate.
    const std::uint64_t bytes = allocated({"DistAttn::ring."}, [&] {
      RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), B, c, H, Hkv, D, opts);
      measured = x.run(ring);
    });
    EXPECT_EQ(std::int64_t(bytes), ring_workspace_bytes(kind, pr, c, P));
    ExecutorChoice ch;
    ch.kind = k;
    expect_predicted_bytes(measured, ch, pr, P);
  }
}

TEST(CostModelExecutors, Grid2D) {
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world.size(), B = 1, n = 6, H = 4, Hkv = 2, D = 16;
  Chunk x(B, n, H, Hkv, D);
  const AttnProblem pr = problem(B, std::int64_t(P) * n, H, Hkv, D);
  for (int R = 1; R <= P; ++R) {
    if (P % R) continue;
    for (Grid2DVariant var : {Grid2DVariant::NO, Grid2DVariant::O}) {
      const bool overlapped = var == Grid2DVariant::O;
      SCOPED_TRACE("grid " + std::to_string(R) + "x" + std::to_string(P / R) + (overlapped ? " O" : " NO"));
      Grid2DOptions opts;
      opts.variant = var;
      std::pair<std::int64_t, std::int64_t> measured;
      const std::uint64_t bytes = allocated({"DistAttn::grid2d."}, [&] {
        Grid2DAttention<T, MpiSpace, Exec> a2d(world, R, P / R, Exec(), B, std::int64_t(P) * n, H, Hkv, D, opts);
        measured = x.run(a2d);
      });
      EXPECT_EQ(std::int64_t(bytes), grid2d_workspace_bytes(overlapped, pr, R, P / R, n));
      ExecutorChoice ch;
      ch.kind = overlapped ? ExecutorKind::Grid2DO : ExecutorKind::Grid2DNO, ch.rows = R, ch.cols = P / R;
      expect_predicted_bytes(measured, ch, pr, P);
    }
  }
}

TEST(CostModelExecutors, Ulysses) {
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = comm.size(), B = 2, c = 6, D = 16;
  // Split K/V heads (P divides Hkv) and replicated ones (Hkv divides P), with
  // the default head groups and every group count of 1-3.
  for (const auto& heads : {std::array<int, 2>{12, 12}, {12, 1}, {24, 2}}) {
    const int H = heads[0], Hkv = heads[1];  // not a structured binding: the lambdas below capture them
    if (H % P || !(Hkv % P == 0 || P % Hkv == 0)) continue;
    const UlyssesHeads hd(P, H, Hkv);
    for (int G : {0, 1, 2, 3}) {
      if (G > 0 && (hd.local_heads() % G || hd.local_kv_heads() % G)) continue;
      SCOPED_TRACE("H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv) + " P=" + std::to_string(P) +
                   " G=" + std::to_string(G));
      Chunk x(B, c, H, Hkv, D);
      UlyssesOptions opts;
      opts.head_groups = G;
      std::pair<std::int64_t, std::int64_t> measured;
      int fwd_tasks = 0, bwd_tasks = 0;
      const std::uint64_t bytes = allocated({"DistAttn::ulysses."}, [&] {
        UlyssesAttention<T, MpiSpace, Exec> u(comm, Exec(), B, c, H, Hkv, D, opts);
        measured  = x.run(u);
        bwd_tasks = u.stats().tasks;
        x.run(u);
        u.forward(x.q, x.k, x.v, x.o, x.lse);
        fwd_tasks = u.stats().tasks;
      });
      const AttnProblem pr = problem(B, std::int64_t(P) * c, H, Hkv, D);
      EXPECT_EQ(std::int64_t(bytes), ulysses_workspace_bytes(pr, P, G));
      ExecutorChoice ch;
      ch.kind = ExecutorKind::Ulysses, ch.head_groups = G;
      const Prediction p = expect_predicted_bytes(measured, ch, pr, P);
      // One block call per head group and pass.
      EXPECT_EQ(fwd_tasks, p.forward.steps);
      EXPECT_EQ(bwd_tasks, p.backward.steps);
    }
  }
}

TEST(CostModelExecutors, Hybrid) {
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world.size(), B = 1, c = 4, D = 16;
  const std::pair<HybridInner, ExecutorKind> inners[] = {
      {HybridInner::Vanilla, ExecutorKind::RingVanilla}, {HybridInner::Balanced, ExecutorKind::RingBalanced},
      {HybridInner::Zigzag, ExecutorKind::RingZigzag},   {HybridInner::Grid2DNO, ExecutorKind::Grid2DNO},
      {HybridInner::Grid2DO, ExecutorKind::Grid2DO}};
  for (int U = 2; U <= P; ++U) {
    if (P % U) continue;
    for (const auto& heads : {std::array<int, 2>{12, 12}, {12, 1}}) {
      const int H = heads[0], Hkv = heads[1];
      if (H % U || !(Hkv % U == 0 || U % Hkv == 0)) continue;
      for (auto [inner, kind] : inners) {
        SCOPED_TRACE("U=" + std::to_string(U) + " S=" + std::to_string(P / U) + " " + to_string(inner) +
                     " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv));
        Chunk x(B, c, H, Hkv, D);
        HybridOptions opts;
        opts.ulysses_degree = U, opts.inner = inner;
        std::pair<std::int64_t, std::int64_t> measured;
        const std::uint64_t bytes = allocated({"DistAttn::ulysses.", "DistAttn::ring.", "DistAttn::grid2d."}, [&] {
          HybridAttention<T, MpiSpace, Exec> hy(world, Exec(), B, c, H, Hkv, D, opts);
          measured = x.run(hy);
        });
        ExecutorChoice ch;
        ch.kind = ExecutorKind::Hybrid, ch.ulysses_degree = U, ch.inner = kind;
        const Prediction p = expect_predicted_bytes(measured, ch, problem(B, std::int64_t(P) * c, H, Hkv, D), P);
        EXPECT_EQ(std::int64_t(bytes), p.workspace_bytes);
      }
    }
  }
}

}  // namespace
}  // namespace DistAttn::Test
