// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run for the DistFlashAttn schedules (--schedule ring|balanced) and
// the single-device baseline (--schedule local, rank 0 only).

#include "run_executor.hpp"

#include <DistAttn/exec/impl/kernel_documents.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/ring_format.hpp>

#include "common/timer.hpp"

#include <iostream>

namespace DistAttn::Driver {

template <class T>
int run_local(const Options& o, Sync& sync) {
  using Acc      = accum_t<T>;
  const int rank = sync.rank();
  int rc         = 0;
  // Rank 0 holds the whole problem's tensors (the building block takes no workspace).
  FitModel whole;
  whole.rows_at      = [rank](long S) { return rank == 0 ? S : 0L; };
  whole.workspace_at = [](long) { return FitWorkspace{}; };
  check_memory_before_allocating<T>(o, whole, sync);
  RunResult result;
  if (rank == 0) {
    Exec exec;
    const long N = o.seq;
    Tensor4<T, Mem> q("q", o.batch, N, o.heads, o.dim), k("k", o.batch, N, o.kv_heads, o.dim),
        v("v", o.batch, N, o.kv_heads, o.dim), out("o", o.batch, N, o.heads, o.dim),
        dout("do", o.batch, N, o.heads, o.dim), dq("dq", o.batch, N, o.heads, o.dim),
        dk("dk", o.batch, N, o.kv_heads, o.dim), dv("dv", o.batch, N, o.kv_heads, o.dim);
    RowStats<Acc, Mem> lse("lse", o.batch, o.heads, N);
    fill_global_rows(exec, q, kSeedQ, {0, 1}, N, false);
    fill_global_rows(exec, k, kSeedK, {0, 1}, N, false);
    fill_global_rows(exec, v, kSeedV, {0, 1}, N, false);
    fill_global_rows(exec, dout, kSeedDO, {0, 1}, N, false);
    const ExecutorOptions rule = mask_options(o);
    const DistAttn::Impl::KernelDocuments<Mem> docs(rule.documents);
    AttnOptions ao;
    ao.mask = docs.for_kernels(rule.mask_rule());
    Perf::EventTimer<Exec> timer(exec);
    std::vector<double> tf, tb;
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      timer.start();
      attention_fwd(exec, q, k, v, out, lse, ao);
      const double f = timer.stop();
      double b       = 0;
      if (o.backward) {
        timer.start();
        attention_bwd(exec, q, k, v, out, dout, lse, dq, dk, dv, ao);
        b = timer.stop();
      }
      if (it >= o.warmup) {
        tf.push_back(f);
        tb.push_back(b);
      }
    }
    std::printf("# schedule local  seq %ld  b %d h %d h_kv %d d %d  dtype %s causal %d%s\n", N, o.batch, o.heads,
                o.kv_heads, o.dim, o.dtype.c_str(), int(o.causal), mask_summary(o).c_str());
    std::printf("#   fwd_time(s)   bwd_time(s)\n    %10.6f    %10.6f\n", Perf::median(tf), Perf::median(tb));
    result.forward_s  = tf;
    result.backward_s = tb;
    result.doc["ranks"] = Json::array();  // one device, no executor passes
    if (o.check) {
      auto ho = to_host_f64(out), hq = to_host_f64(dq), hk = to_host_f64(dk), hv = to_host_f64(dv);
      rc = check_against_reference<T>(o, ho, o.backward ? &hq : nullptr, &hk, &hv,
                                      &(result.doc["check"] = Json::object()));
    }
  }
  // The other ranks wait while rank 0 runs and checks alone.
  rc = sync.value_from_rank(rc, 0, "the wait for rank 0's --schedule local run", local_run_seconds(o));
  result.failures = rc + o.test_failures;
  return finish(o, 1, result, rank);
}

template <class T, class CommSpace>
int run_ring_with(const Options& o, Communicator<CommSpace, Exec>& comm, const Exec& compute, Sync& sync) {
  using Ring   = RingAttention<T, CommSpace, Exec>;
  const int P  = comm.size(), rank = comm.rank();
  const long N = o.seq;
  const bool zz = o.schedule == "zigzag";
  // Padded at the end (exact for causal; see ring_attention.hpp); zigzag needs
  // 2P equal half-chunks.
  const int c = zz ? 2 * int((N + 2 * P - 1) / (2 * P)) : int((N + P - 1) / P);
  DISTATTN_REQUIRE(o.causal || zz, "distattn-run",
                   "--causal 0 needs --schedule zigzag: the " << o.schedule
                                                               << " schedule computes causal attention only");
  DISTATTN_REQUIRE(o.causal || N % (zz ? 2L * P : long(P)) == 0, "distattn-run",
                   "--causal 0: --seq " << N << " must be a multiple of " << 2L * P
                                        << " (2 x ranks): padded keys would enter every row of full attention");
  RingOptions ro;
  ro.kind          = o.schedule == "ring" ? RingKind::Vanilla : (zz ? RingKind::Zigzag : RingKind::Balanced);
  set_executor_options(o, ro);
  ro.head_group    = o.head_group;
  const RingLayout layout(P, c, ro.kind);
  if (o.print_schedule && rank == 0) std::cout << to_string(RingSchedule(layout, ro.mask_rule()), Pass::Forward) << '\n';

  Ring* timed_ring = nullptr;  // the instance of the timed passes
  ExecutorRun<Ring> run;
  run.make = [&](bool compute_only) {
    RingOptions x    = ro;
    x.compute_only   = compute_only;
    auto r           = std::make_unique<Ring>(comm, compute, o.batch, c, o.heads, o.kv_heads, o.dim, x);
    if (!compute_only) timed_ring = r.get();
    return r;
  };
  run.local_rows = c;
  run.fit.unit   = zz ? 2L * P : long(P);
  run.fit.rows_at = [P, zz](long S) { return zz ? 2 * ((S + 2 * P - 1) / (2 * P)) : (S + P - 1) / P; };
  run.fit.workspace_at = [&o, &run, ro, P](long S) {
    return leanest_workspace(o.kv_heads, ro.head_group, [&](int g) {
      RingOptions x = ro;
      x.head_group  = g;
      return Ring::memory_plan(P, o.batch, int(run.fit.rows_at(S)), o.heads, o.kv_heads, o.dim, x);
    });
  };
  run.position   = [layout](int r, long i) { return long(layout.position(r, i)); };
  for (int a = 0; a < layout.pieces(); ++a)
    run.pieces.emplace_back(int(a * layout.piece_len()), int(layout.piece_len()), layout.piece(rank, a));
  run.describe = [&] {
    const RingSchedule& sched = timed_ring->schedule();
    std::printf("# comm %s\n", std::is_same<CommSpace, MpiSpace>::value ? "MPI" : "NCCL");
    std::printf("# schedule %s  ranks %d  steps %d  seq %ld (chunk %d%s)  b %d h %d h_kv %d d %d  dtype %s causal %d%s\n",
                o.schedule.c_str(), P, sched.num_steps(), N, c, long(c) * P != N ? ", padded" : "", o.batch, o.heads,
                o.kv_heads, o.dim, o.dtype.c_str(), int(o.causal), mask_summary(o).c_str());
    std::printf("# idle fraction: %.4f (docs/design/schedules.md 1.5 accounting), %.4f (paper's convention)\n", sched.idle_fraction(),
                sched.idle_fraction_printed());
    std::printf("# kv heads per pass: %d of %d\n", timed_ring->kv_heads_per_pass(), o.kv_heads);
  };
  return run_executor<T>(o, run, compute, sync);
}

template <class T>
int run_ring(const Options& o, Sync& sync) {
  // Two instances: transfers on one, tiles on the other (distinct streams on GPUs).
  return with_communicator(o, sync, [&](auto& comm, const Exec& compute) { return run_ring_with<T>(o, comm, compute, sync); });
}

}  // namespace DistAttn::Driver
