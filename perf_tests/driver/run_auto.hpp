#pragma once
// distattn-run --schedule auto --tiles FILE: the cost model (schedule/cost_model.hpp)
// ranks every executor and grid for this P and problem; the ranking is printed
// with its predicted times and the first choice the driver can run is run.

#include "driver_options.hpp"
#include "sync.hpp"

#include <DistAttn/schedule/cost_model.hpp>

#include <cstdio>
#include <string>

namespace DistAttn::Driver {

/// The driver's options that run `c` (schedule, grid, Ulysses degree, inner executor).
inline Options options_for(const Options& o, const ExecutorChoice& c) {
  Options x  = o;
  x.schedule = to_string(c.kind);
  x.grid.clear();
  if (is_grid2d(c.kind)) x.grid = std::to_string(c.rows) + "x" + std::to_string(c.cols);
  if (c.kind == ExecutorKind::Ulysses) x.ulysses_groups = c.head_groups;
  if (c.kind == ExecutorKind::Hybrid) {
    x.ulysses = c.ulysses_degree;
    x.inner   = to_string(c.inner);
    if (is_grid2d(c.inner)) x.grid = std::to_string(c.inner_rows) + "x" + std::to_string(c.inner_cols);
  }
  return x;
}

/// Whether the driver runs `c` for this N without padding it cannot do.
inline bool driver_runs(const ExecutorChoice& c, long N, int P) {
  if (is_grid2d(c.kind)) return N % P == 0;
  if (c.kind == ExecutorKind::Hybrid) return N % (c.inner == ExecutorKind::RingZigzag ? 2L * P : long(P)) == 0;
  return true;
}

/// The ranking for this job, printed on rank 0; returns the options of the choice to run.
inline Options choose_schedule(const Options& o, Sync& comm) {
  DISTATTN_REQUIRE(!o.machine.tiles.empty(), "distattn-run",
                   "--schedule auto needs --tiles FILE, the cost model's tile table for this device "
                   "(perf_tests/data/tiles_*.txt, or measure one with cost_calibrate)");
  const int P = comm.size(), rank = comm.rank();
  AttnProblem pr;
  pr.batch = o.batch, pr.seq_len = o.seq, pr.heads = o.heads, pr.kv_heads = o.kv_heads, pr.head_dim = o.dim;
  pr.dtype = o.dtype, pr.causal = o.causal;
  const MachineModel m = Perf::make_machine(o.machine, P);
  const auto ranked    = rank_choices(pr, P, m);
  const Prediction* pick = nullptr;
  for (const auto& p : ranked)
    if (driver_runs(p.choice, o.seq, P)) {
      pick = &p;
      break;
    }
  DISTATTN_REQUIRE(pick != nullptr, "distattn-run", "--schedule auto: no ranked choice runs with --seq " << o.seq);
  if (rank == 0) {
    std::printf("# schedule auto: cost model ranking for P=%d (tiles %s); predicted seconds, slowest rank\n", P,
                o.machine.tiles.c_str());
    std::printf("# machine: intra-node %.4g GB/s, inter-node %.4g GB/s, latency %.4g us, %d ranks per node%s\n",
                m.intra.bandwidth_Bps * 1e-9, m.inter.bandwidth_Bps * 1e-9, m.intra.latency_s * 1e6,
                m.gpus_per_node, Perf::shared_cores_note(o.machine, P).c_str());
    std::printf("#   %-28s %10s %10s %10s %10s %12s\n", "choice", "fwd", "bwd", "total", "exposed", "workspace_MB");
    int shown = 0;
    for (const auto& p : ranked) {
      if (shown++ == o.auto_show) break;
      std::printf("#   %-28s %10.4g %10.4g %10.4g %10.4g %12.1f%s\n", p.choice.name().c_str(), p.forward.seconds,
                  p.backward.seconds, p.total_seconds(),
                  p.forward.exposed_seconds() + p.backward.exposed_seconds(), double(p.workspace_bytes) / 1e6,
                  &p == pick ? "   <- runs" : "");
    }
  }
  return options_for(o, pick->choice);
}

}  // namespace DistAttn::Driver
