// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run for the hybrid executor (--schedule hybrid --ulysses U --inner KIND):
// Ulysses of degree U over heads, the inner sequence executor over P / U ranks.

#include "run_executor.hpp"
#include "run_grid2d.hpp"  // parse_grid

#include <DistAttn/hybrid/hybrid_attention.hpp>

#include <cstdio>
#include <memory>

namespace DistAttn::Driver {

inline HybridInner parse_inner(const std::string& s) {
  for (const auto k : {HybridInner::Vanilla, HybridInner::Balanced, HybridInner::Zigzag, HybridInner::Grid2DNO,
                       HybridInner::Grid2DO})
    if (s == to_string(k)) return k;
  throw InvalidArgument("--inner '" + s + "' is not one of ring, balanced, zigzag, grid2d-no, grid2d-o");
}

template <class T, class CommSpace>
int run_hybrid_with(const Options& o, Communicator<CommSpace, Exec>& comm, const Exec& compute, Sync& sync) {
  using Hyb    = HybridAttention<T, CommSpace, Exec>;
  const int P  = comm.size();
  const long N = o.seq;
  HybridOptions ho;
  set_executor_options(o, ho);
  ho.inner          = parse_inner(o.inner);
  ho.ulysses_degree = o.ulysses;
  const GridShape g = parse_grid(o.grid);
  ho.grid_rows = g.rows, ho.grid_cols = g.cols;
  const int U = hybrid_ulysses_degree(P, o.heads, o.kv_heads, o.ulysses);
  // The driver fills every chunk (zigzag: U c even), so no padding enters.
  const long unit = ho.inner == HybridInner::Zigzag ? 2L * P : long(P);
  DISTATTN_REQUIRE(N % unit == 0, "distattn-run",
                   "--schedule hybrid --inner " << o.inner << ": --seq " << N << " must be a multiple of " << unit);
  const int c = int(N / P);
  const Hyb* timed = nullptr;

  ExecutorRun<Hyb> run;
  run.make = [&](bool compute_only) {
    HybridOptions x = ho;
    x.compute_only  = compute_only;
    auto h          = std::make_unique<Hyb>(comm, compute, o.batch, c, o.heads, o.kv_heads, o.dim, x);
    if (!compute_only) timed = h.get();
    return h;
  };
  run.local_rows = c;
  run.fit.unit    = unit;
  run.fit.rows_at = [P](long S) { return S / P; };
  run.fit.workspace_at = [&o, ho, P](long S) {
    return FitWorkspace{Hyb::leanest_peak_bytes(P, o.batch, int(S / P), o.heads, o.kv_heads, o.dim, ho), 0};
  };
  run.position   = [&timed](int r, long i) { return long(timed->position(r, i)); };
  run.describe   = [&] {
    std::printf("# comm %s\n", std::is_same<CommSpace, MpiSpace>::value ? "MPI" : "NCCL");
    std::printf("# schedule hybrid  ranks %d = U %d x S %d  inner %s  seq %ld (chunk %d)  b %d h %d h_kv %d d %d  "
                "dtype %s causal %d%s\n",
                P, U, P / U, o.inner.c_str(), N, c, o.batch, o.heads, o.kv_heads, o.dim, o.dtype.c_str(),
                int(o.causal), mask_summary(o).c_str());
  };
  // Pieces of this rank's rows: one affine run per maximal stretch of consecutive positions.
  auto h = run.make(false);
  const int rank = comm.rank();
  for (int i = 0; i < c;) {
    int j = i + 1;
    const long p0 = long(h->position(rank, i));
    const long stride = c > i + 1 ? long(h->position(rank, i + 1)) - p0 : 1;
    while (j < c && long(h->position(rank, j)) == p0 + stride * (j - i)) ++j;
    run.pieces.emplace_back(i, j - i, PositionMap{p0, stride});
    i = j;
  }
  h.reset();
  timed = nullptr;
  return run_executor<T>(o, run, compute, sync);
}

template <class T>
int run_hybrid(const Options& o, Sync& sync) {
  return with_communicator(o, sync, [&](auto& comm, const Exec& compute) { return run_hybrid_with<T>(o, comm, compute, sync); });
}

}  // namespace DistAttn::Driver
