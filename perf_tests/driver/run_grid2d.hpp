// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run for Attention2D (--schedule grid2d-no | grid2d-o, --grid RxC).
//
// Every rank holds its cyclic shard: tokens {p + i P} of the same global problem
// the other schedules see. The shared runner (run_executor.hpp) times and
// checks it; here: the layout, the per-communicator bytes, and the check of the
// measured bytes against grid2d_volume.hpp's model.

#include "run_executor.hpp"

#include <DistAttn/grid2d/grid2d_attention.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

namespace DistAttn::Driver {

/// "RxC" -> {R, C}; empty -> {0, 0} (choose_grid_shape).
inline GridShape parse_grid(const std::string& s) {
  if (s.empty()) return GridShape{0, 0};
  const auto x = s.find_first_of("xX");
  int R = -1, C = -1;
  try {
    if (x != std::string::npos) {
      std::size_t a = 0, b = 0;
      R = std::stoi(s.substr(0, x), &a);
      C = std::stoi(s.substr(x + 1), &b);
      if (a != x || b != s.size() - x - 1) R = C = -1;
    }
  } catch (const std::exception&) {
    R = C = -1;
  }
  if (R < 1 || C < 1) throw InvalidArgument("--grid '" + s + "' must be RxC with positive R and C, e.g. 2x3");
  return GridShape{R, C};
}

template <class T, class CommSpace>
int run_grid2d_with(const Options& o, Communicator<CommSpace, Exec>& world, const Exec& compute, Sync& sync) {
  using Acc    = accum_t<T>;
  using A2D    = Grid2DAttention<T, CommSpace, Exec>;
  const int P  = world.size(), rank = world.rank();
  const long N = o.seq;
  DISTATTN_REQUIRE(N % P == 0, "distattn-run",
                   "--seq N=" << N << " must be a multiple of the number of ranks P=" << P
                              << " for the grid2d schedules (cyclic layout: N/P tokens per rank)");
  const GridShape req = parse_grid(o.grid);
  Grid2DOptions go;
  go.variant       = o.schedule == "grid2d-no" ? Grid2DVariant::NO : Grid2DVariant::O;
  set_executor_options(o, go);
  go.head_group    = o.head_group;
  A2D* timed_a2d   = nullptr;  // the instance whose bytes are checked against the model

  ExecutorRun<A2D> run;
  run.make = [&](bool compute_only) {
    Grid2DOptions x  = go;
    x.compute_only   = compute_only;
    auto a           = std::make_unique<A2D>(world, req.rows, req.cols, compute, o.batch, N, o.heads, o.kv_heads,
                                   o.dim, x);
    if (!compute_only) timed_a2d = a.get();
    return a;
  };
  run.local_rows = N / P;
  run.fit.unit    = P;
  run.fit.rows_at = [P](long S) { return S / P; };
  run.fit.workspace_at = [&o, go, req, P](long S) {
    const GridShape shape = req.rows > 0 && req.cols > 0 ? req : choose_grid_shape(P, o.heads, o.kv_heads, req);
    return leanest_workspace(o.kv_heads, go.head_group, [&](int g) {
      Grid2DOptions x = go;
      x.head_group    = g;
      return A2D::memory_plan(shape.rows, shape.cols, o.batch, S, o.heads, o.kv_heads, o.dim, x);
    });
  };
  run.position   = [P](int r, long i) { return long(r) + long(P) * i; };
  run.pieces.emplace_back(0, int(N / P), PositionMap{long(rank), long(P)});
  run.describe = [&] {
    std::printf("# schedule %s  ranks %d  grid %dx%d  seq %ld (shard %ld, cyclic)  b %d h %d h_kv %d d %d  dtype %s "
                "causal %d%s\n",
                o.schedule.c_str(), P, timed_a2d->rows(), timed_a2d->cols(), N, N / P, o.batch, o.heads, o.kv_heads,
                o.dim, o.dtype.c_str(), int(o.causal), mask_summary(o).c_str());
    std::printf("# kv heads per pass: %d of %d\n", timed_a2d->kv_heads_per_pass(), o.kv_heads);
  };
  run.extra_names = {"world_MB", "row_MB", "col_MB"};
  run.extra_values = [](const Grid2DStats& sf, const Grid2DStats& sb) {
    std::vector<double> v;
    for (int c = 0; c < kNumGrid2DComms; ++c)
      v.push_back(double(sf.comm_bytes_received[std::size_t(c)] + sb.comm_bytes_received[std::size_t(c)]) / 1e6);
    return v;
  };
  // Measured bytes vs the model (exact where T and the accumulation type have the
  // same size; the model counts words, 16-bit runs mix 2- and 4-byte words).
  // The model's backward reuses the forward's K_t|V_t, which the executor does only
  // when neither pass chunked heads: after a chunked forward K_t|V_t holds the last
  // group's heads alone, and a chunked backward permutes each group's K and V again.
  // Either way the backward then moves the forward's kv_permute words once more.
  int fwd_group = 0, bwd_group = 0;  // kv heads per pass of the last forward and backward
  run.after_pass = [&](const A2D& a, bool bwd) {
    if (&a == timed_a2d) (bwd ? bwd_group : fwd_group) = a.kv_heads_per_pass();
  };
  if (sizeof(T) == sizeof(Acc)) {
    run.after_label = "bytes vs grid2d_volume.hpp model (per rank and phase)";
    run.after       = [&](const Grid2DStats& sf, const Grid2DStats& sb) {
      int mismatch = 0;
      const auto params = timed_a2d->volume_params();
      for (const bool bwd : {false, true}) {
        if (bwd && !o.backward) continue;
        const Grid2DStats& st = bwd ? sb : sf;
        auto words            = grid2d_words_by_phase(timed_a2d->layout(), rank, bwd, params);
        const std::size_t kv  = std::size_t(Grid2DPhase::KvPermute);
        if (bwd && (fwd_group < o.kv_heads || bwd_group < o.kv_heads))
          words[kv] = grid2d_words_by_phase(timed_a2d->layout(), rank, false, params)[kv];
        for (int ph = 0; ph < kNumGrid2DPhases; ++ph) {
          const auto expect = std::uint64_t(words[std::size_t(ph)]) * std::uint64_t(o.batch) * sizeof(T);
          if (st.bytes_received[std::size_t(ph)] != expect || st.bytes_sent[std::size_t(ph)] != expect) ++mismatch;
        }
      }
      return mismatch;
    };
  }
  return run_executor<T>(o, run, compute, sync);
}

/// Attention2D run of distattn-run for element type T.
template <class T>
int run_grid2d(const Options& o, Sync& sync) {
  // Two instances: transfers on one, block calls on the other (distinct streams on GPUs).
  return with_communicator(o, sync, [&](auto& comm, const Exec& compute) { return run_grid2d_with<T>(o, comm, compute, sync); });
}

/// Attention2D run of distattn-run, element type from --dtype.
inline int run_grid2d(const Options& o, Sync& sync) {
  if (o.dtype == "float") return run_grid2d<float>(o, sync);
  if (o.dtype == "double") return run_grid2d<double>(o, sync);
#if defined(KOKKOS_ENABLE_CUDA)
  if (o.dtype == "bf16" && compat::has_bhalf) return run_grid2d<compat::bhalf_t>(o, sync);
  if (o.dtype == "fp16" && compat::has_half) return run_grid2d<compat::half_t>(o, sync);
#endif
  throw InvalidArgument("--dtype '" + o.dtype + "' is not available in this build");
}

}  // namespace DistAttn::Driver
