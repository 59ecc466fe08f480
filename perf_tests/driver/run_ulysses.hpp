// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run for the Ulysses executor (--schedule ulysses): contiguous chunks,
// one all-to-all to head shards and back per tensor group.

#include "run_executor.hpp"

#include <DistAttn/ulysses/ulysses_attention.hpp>

#include <cstdio>
#include <memory>

namespace DistAttn::Driver {

template <class T, class CommSpace>
int run_ulysses_with(const Options& o, Communicator<CommSpace, Exec>& comm, const Exec& compute, Sync& sync) {
  using Uly    = UlyssesAttention<T, CommSpace, Exec>;
  const int P  = comm.size(), rank = comm.rank();
  const long N = o.seq;
  const int c  = int((N + P - 1) / P);  // padded at the end: exact for causal
  DISTATTN_REQUIRE(o.causal || N % P == 0, "distattn-run",
                   "--causal 0: --seq " << N << " must be a multiple of the " << P
                                        << " ranks: padded keys would enter every row of full attention");
  UlyssesOptions uo;
  set_executor_options(o, uo);
  uo.head_groups = o.ulysses_groups;
  const RingLayout layout(P, c, RingKind::Vanilla);

  ExecutorRun<Uly> run;
  run.make = [&](bool compute_only) {
    UlyssesOptions x = uo;
    x.compute_only   = compute_only;
    return std::make_unique<Uly>(comm, compute, o.batch, c, o.heads, o.kv_heads, o.dim, x);
  };
  run.local_rows = c;
  run.fit.unit    = P;
  run.fit.rows_at = [P](long S) { return (S + P - 1) / P; };
  run.fit.workspace_at = [&o, P](long S) {
    return FitWorkspace{
        Uly::memory_plan(P, o.batch, int((S + P - 1) / P), o.heads, o.kv_heads, o.dim, o.ulysses_groups).peak_bytes(),
        0};
  };
  run.position   = [layout](int r, long i) { return long(layout.position(r, i)); };
  run.pieces.emplace_back(0, c, layout.piece(rank, 0));
  run.describe = [&] {
    const UlyssesHeads h(P, o.heads, o.kv_heads);
    std::printf("# comm %s\n", std::is_same<CommSpace, MpiSpace>::value ? "MPI" : "NCCL");
    std::printf("# schedule ulysses  ranks %d  seq %ld (chunk %d%s)  b %d h %d h_kv %d d %d  dtype %s causal %d%s\n", P,
                N, c, long(c) * P != N ? ", padded" : "", o.batch, o.heads, o.kv_heads, o.dim, o.dtype.c_str(),
                int(o.causal), mask_summary(o).c_str());
    std::printf("# heads per rank %d, kv heads per rank %d (each kv head on %d rank(s)); pipelined over %d head "
                "group(s)\n",
                h.local_heads(), h.local_kv_heads(), h.kv_replicas(), ulysses_head_groups(h, o.ulysses_groups));
  };
  return run_executor<T>(o, run, compute, sync);
}

template <class T>
int run_ulysses(const Options& o, Sync& sync) {
  return with_communicator(o, sync, [&](auto& comm, const Exec& compute) { return run_ulysses_with<T>(o, comm, compute, sync); });
}

}  // namespace DistAttn::Driver
