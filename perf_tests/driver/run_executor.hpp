// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The part of distattn-run every distributed executor shares: inputs filled from
// the global problem by the executor's token layout, the timing loop (warm-up,
// barrier before every pass, max over ranks, median), one per-rank result table
// built from the executor's PassStats, the compute-only decomposition
// (--decompose) and the fp64 check (--check). What differs between executors is
// handed in as an ExecutorRun.

#include "device_reference.hpp"
#include "driver_common.hpp"
#include "fit.hpp"
#include "progress.hpp"
#include "report.hpp"

#include "common/timer.hpp"

#include <DistAttn/impl/allocation_counter.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <functional>
#include <tuple>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace DistAttn::Driver {

template <class T>
int check_against_reference(const Options& o, const Testing::HostTensor& O, const Testing::HostTensor* dq,
                            const Testing::HostTensor* dk, const Testing::HostTensor* dv, Json* record = nullptr) {
  const long N = o.seq;
  auto q = global_host<T>(kSeedQ, o.batch, N, o.heads, o.dim);
  auto k = global_host<T>(kSeedK, o.batch, N, o.kv_heads, o.dim);
  auto v = global_host<T>(kSeedV, o.batch, N, o.kv_heads, o.dim);
  const ExecutorOptions rule = mask_options(o);  // holds the documents the mask points to
  const Mask mask            = rule.mask_rule();
  const double scale = 1.0 / std::sqrt(double(o.dim));
  Testing::HostTensor ro("ro", o.batch, N, o.heads, o.dim);
  Testing::HostStats rl("rl", o.batch, o.heads, N);
  const long Nb = dq ? N : 0;  // gradients only with a backward
  Testing::HostTensor rdq("rdq", o.batch, Nb, o.heads, o.dim), rdk("rdk", o.batch, Nb, o.kv_heads, o.dim),
      rdv("rdv", o.batch, Nb, o.kv_heads, o.dim), dout;
  if (dq) dout = global_host<T>(kSeedDO, o.batch, N, o.heads, o.dim);
  if (reference_on_device(o)) {
    std::printf("# check: reference by the portable kernels in fp64 on the device (--reference)\n");
    device_reference(q, k, v, dq ? &dout : nullptr, mask, rule.documents, scale, ro, rl, &rdq, &rdk, &rdv);
  } else {
    Testing::reference_fwd(q, k, v, mask, scale, ro, rl);
    if (dq) Testing::reference_bwd(q, k, v, dout, mask, scale, rdq, rdk, rdv);
  }
  const double tol = check_tolerance<T>();
  int bad          = 0;
  auto report      = [&](const char* name, double err) {
    std::printf("# check %-3s rel_error %.3e (tolerance %.1e) %s\n", name, err, tol, err <= tol ? "OK" : "FAILED");
    bad += err <= tol ? 0 : 1;
    if (record) (*record)[name] = {{"rel_error", err}, {"tolerance", tol}, {"ok", err <= tol}};
  };
  report("O", Testing::rel_error(O, ro));
  if (dq) {
    report("dQ", Testing::rel_error(*dq, rdq));
    report("dK", Testing::rel_error(*dk, rdk));
    report("dV", Testing::rel_error(*dv, rdv));
  }
  return bad;
}

/// One executor as the shared runner sees it.
/// @tparam E an executor with forward(q, k, v, o, lse), backward(...), stats()
template <class E>
struct ExecutorRun {
  using Stats = std::decay_t<decltype(std::declval<const E&>().stats())>;
  /// Builds the executor; `compute_only` for the decomposition's second instance.
  std::function<std::unique_ptr<E>(bool compute_only)> make;
  /// Local rows of this rank and the global position of local row i of rank r.
  long local_rows = 0;
  std::function<long(int, long)> position;
  /// This rank's rows as affine pieces: (first row, row count, positions).
  std::vector<std::tuple<int, int, PositionMap>> pieces;
  /// Lines printed above the table (schedule, grid, sizes).
  std::function<void()> describe;
  /// Extra per-rank columns (names, values) after the shared ones.
  std::vector<std::string> extra_names;
  std::function<std::vector<double>(const Stats& fwd, const Stats& bwd)> extra_values;
  /// Executor-specific check after the timed passes (e.g. bytes against a volume
  /// model): its label, and a function returning the failures on this rank.
  std::string after_label;
  std::function<int(const Stats& fwd, const Stats& bwd)> after;
  /// Called after every pass (`backward` tells which) with the executor that ran
  /// it, e.g. to note what the pass chose (its kv heads per pass); optional.
  std::function<void(const E&, bool backward)> after_pass;
  /// --fit: the schedule's unit, rows and leanest workspace at any length.
  FitModel fit;
};

namespace Impl {

template <class Stats>
void append_pass_columns(std::vector<std::string>* names, std::vector<double>* row, const char* pass,
                         const Stats& s) {
  const std::string p = pass;
  if (names) {
    for (const char* n : {"compute(s)", "wait(s)", "total(s)", "tasks", "merges"}) names->push_back(p + ":" + n);
    for (std::size_t k = 0; k < Stats::num_kinds; ++k)
      names->push_back(p + ":" + to_string(typename Stats::kind_type(k)) + "_MB");
  }
  row->insert(row->end(), {s.compute_s, s.wait_s, s.total_s, double(s.tasks), double(s.merges)});
  for (std::size_t k = 0; k < Stats::num_kinds; ++k)
    row->push_back(double(s.bytes_received[k]) / 1e6);
}

}  // namespace Impl

template <class T, class E>
int run_executor(const Options& o, const ExecutorRun<E>& run, const Exec& compute, Sync& sync) {
  using Acc      = accum_t<T>;
  using Stats    = typename ExecutorRun<E>::Stats;
  const int rank = sync.rank();
  if (o.fit) return report_fit<T>(o, run.fit, sync);
  check_memory_before_allocating<T>(o, run.fit, sync);
  const long N = o.seq, n = run.local_rows;
  // Before the allocation hook: Kokkos reports a tool as loaded once any callback is set.
  Progress progress(o.progress_s, rank == 0);
  // Peak memory per rank: every Kokkos allocation from here through the first
  // forward and backward (inputs, outputs, the executor's workspace), through the
  // allocation hook. The library's own count is of its device buffers: the MPI
  // transport's host staging and the entry agreement's host mirrors take no
  // device memory (on host builds the two spaces are one).
  DistAttn::Impl::AllocationCounter::install("DistAttn::", Mem::name());
  DistAttn::Impl::AllocationCounter::reset();
  auto ex      = run.make(false);
  // driver_tensor_bytes (fit.hpp) counts these for --fit.
  Tensor4<T, Mem> q("q", o.batch, n, o.heads, o.dim), k("k", o.batch, n, o.kv_heads, o.dim),
      v("v", o.batch, n, o.kv_heads, o.dim), out("o", o.batch, n, o.heads, o.dim),
      dout("do", o.batch, n, o.heads, o.dim), dq("dq", o.batch, n, o.heads, o.dim),
      dk("dk", o.batch, n, o.kv_heads, o.dim), dv("dv", o.batch, n, o.kv_heads, o.dim);
  RowStats<Acc, Mem> lse("lse", o.batch, o.heads, n);
  for (const auto& [first, count, pm] : run.pieces) {
    const auto rows = std::make_pair(first, first + count);
    const auto A    = Kokkos::ALL;
    fill_global_rows(compute, Kokkos::subview(q, A, rows, A, A), kSeedQ, pm, N, false);
    fill_global_rows(compute, Kokkos::subview(k, A, rows, A, A), kSeedK, pm, N, false);
    fill_global_rows(compute, Kokkos::subview(v, A, rows, A, A), kSeedV, pm, N, false);
    // Padded rows get dO = 0, so they add nothing to dK / dV.
    fill_global_rows(compute, Kokkos::subview(dout, A, rows, A, A), kSeedDO, pm, N, /*zero_padding=*/true);
  }
  compat::fence(compute, "distattn-run: inputs ready");

  // Times forward (and backward) passes of `e`; max over ranks, per iteration.
  auto time_passes = [&](E& e, const auto& o_, const auto& lse_, const auto& dq_, const auto& dk_, const auto& dv_,
                         std::vector<double>& tf, std::vector<double>& tb, Stats& sf, Stats& sb, const char* what) {
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      progress.at(what, it, o.warmup + o.iters);
      const std::string at = std::string(what) + " iteration " + std::to_string(it + 1);
      sync.barrier("the barrier before the forward pass of " + at);
      e.forward(q, k, v, o_, lse_);
      sf = e.stats();
      if (run.after_pass) run.after_pass(e, false);
      if (o.backward) {
        sync.barrier("the barrier before the backward pass of " + at);
        e.backward(q, k, v, out, dout, lse, dq_, dk_, dv_);
        sb = e.stats();
        if (run.after_pass) run.after_pass(e, true);
      }
      if (it == 0 && o.test_stop_rank == rank) {
        std::fprintf(stderr, "distattn-run (rank %d): DISTATTN_DRIVER_TEST_FAULT: stopping (SIGSTOP) after the "
                             "first pass\n", rank);
        std::fflush(stderr);
        std::raise(SIGSTOP);
      }
      // A pass of a shape seen before allocates nothing, so the first forward and
      // backward reach the peak; later passes run without the allocation hook, which
      // would otherwise put Kokkos Tools' host work on every launch being timed.
      if (it == 0) DistAttn::Impl::AllocationCounter::uninstall();
      if (it >= o.warmup) {
        tf.push_back(sync.max(sf.total_s, "the maximum of the forward times of " + at));
        tb.push_back(o.backward ? sync.max(sb.total_s, "the maximum of the backward times of " + at) : 0.0);
      }
    }
  };
  std::vector<double> tf, tb;
  Stats sf{}, sb{};
  time_passes(*ex, out, lse, dq, dk, dv, tf, tb, sf, sb, "timed passes (warm-up first)");
  const int after_failed = sync.sum(run.after ? run.after(sf, sb) : 0, "the sum of the model check's mismatches");
  int rc                 = after_failed;

  // Per-rank instrumentation of the last iteration; a column stays out of the
  // table where it is zero on every rank (a payload kind this schedule never sends).
  std::vector<std::string> names;
  std::vector<double> row;
  Impl::append_pass_columns(&names, &row, "fwd", sf);
  Impl::append_pass_columns(&names, &row, "bwd", sb);
  const std::size_t first_extra = names.size();
  for (const auto& x : run.extra_names) names.push_back(x);
  if (run.extra_values)
    for (double x : run.extra_values(sf, sb)) row.push_back(x);
  names.push_back("sent_MB");
  names.push_back("recv_MB");
  row.push_back(double(sf.total_sent() + sb.total_sent()) / 1e6);
  row.push_back(double(sf.total_received() + sb.total_received()) / 1e6);
  // Kokkos allocations only: NCCL's and the CUDA context's memory are not in them.
  names.push_back("peak_GiB");
  names.push_back("lib_peak_GiB");
  row.push_back(double(DistAttn::Impl::AllocationCounter::all().peak) / double(1ull << 30));
  row.push_back(double(DistAttn::Impl::AllocationCounter::labelled().peak) / double(1ull << 30));
  const auto table = gather_table(row, sync);
  RunResult result;
  result.forward_s  = tf;
  result.backward_s = tb;
  if (!o.json.empty()) {
    Json mine{{"rank", rank}, {"forward", pass_json(sf)}};
    if (o.backward) mine["backward"] = pass_json(sb);
    // Exact bytes beside the GiB columns (the --fit test compares them with the plans).
    mine["peak_bytes"]     = DistAttn::Impl::AllocationCounter::all().peak;
    mine["lib_peak_bytes"] = DistAttn::Impl::AllocationCounter::labelled().peak;
    for (std::size_t i = first_extra; i < names.size(); ++i) mine[names[i]] = row[i];
    result.doc["ranks"] = gather_json(mine, sync);
  }
  if (rank == 0) {
    run.describe();
    std::vector<double> mx(row.size(), 0.0);
    std::vector<bool> shown(row.size(), false);
    for (const auto& t : table)
      for (std::size_t i = 0; i < t.size(); ++i) {
        mx[i] = std::max(mx[i], t[i]);
        shown[i] = shown[i] || t[i] != 0.0;
      }
    std::printf("# per rank, last iteration (MB received by kind; sent equals received over all ranks)\n# rank");
    for (std::size_t i = 0; i < names.size(); ++i)
      if (shown[i]) std::printf(" %*s", int(std::max<std::size_t>(9, names[i].size())), names[i].c_str());
    std::printf("\n");
    auto print_row = [&](const std::string& label, const std::vector<double>& t) {
      std::printf("  %4s", label.c_str());
      for (std::size_t i = 0; i < t.size(); ++i)
        if (shown[i]) std::printf(" %*.5g", int(std::max<std::size_t>(9, names[i].size())), t[i]);
      std::printf("\n");
    };
    for (std::size_t r = 0; r < table.size(); ++r) print_row(std::to_string(r), table[r]);
    print_row("max", mx);
    std::printf("# median over %d iterations (max over ranks): forward %.6f s, backward %.6f s\n", o.iters,
                Perf::median(tf), Perf::median(tb));
    if (run.after)
      std::printf("# %s: %s\n", run.after_label.c_str(),
                  after_failed == 0 ? "OK" : (std::to_string(after_failed) + " MISMATCHES FAILED").c_str());
  }

  if (o.decompose) {
    // The same schedule with every transfer skipped: what the tiles alone cost.
    auto alone = run.make(true);
    Tensor4<T, Mem> o2("o2", o.batch, n, o.heads, o.dim), dq2("dq2", o.batch, n, o.heads, o.dim),
        dk2("dk2", o.batch, n, o.kv_heads, o.dim), dv2("dv2", o.batch, n, o.kv_heads, o.dim);
    RowStats<Acc, Mem> lse2("lse2", o.batch, o.heads, n);
    std::vector<double> cf, cb;
    Stats af{}, ab{};
    time_passes(*alone, o2, lse2, dq2, dk2, dv2, cf, cb, af, ab, "compute-only passes (--decompose)");
    if (rank == 0) {
      const double f = Perf::median(tf), fc = Perf::median(cf), b = Perf::median(tb), bc = Perf::median(cb);
      result.doc["decomposition"] = {{"forward_s", f},
                                     {"forward_compute_only_s", fc},
                                     {"backward_s", o.backward ? b : 0.0},
                                     {"backward_compute_only_s", o.backward ? bc : 0.0}};
      std::printf("# decomposition (median, max over ranks):   time(s)  compute_only(s)  exposed_comm(s)  exposed(%%)\n");
      std::printf("#   forward                              %9.6f        %9.6f        %9.6f     %6.2f\n", f, fc,
                  f - fc, 100.0 * (f - fc) / f);
      if (o.backward)
        std::printf("#   backward                             %9.6f        %9.6f        %9.6f     %6.2f\n", b, bc,
                    b - bc, 100.0 * (b - bc) / b);
    }
  }

  if (o.check) {
    auto go = gather_rows(to_host_f64(out), N, run.position, sync, "O");
    auto gq = gather_rows(to_host_f64(dq), N, run.position, sync, "dQ");
    auto gk = gather_rows(to_host_f64(dk), N, run.position, sync, "dK");
    auto gv = gather_rows(to_host_f64(dv), N, run.position, sync, "dV");
    Json* record = rank == 0 ? &(result.doc["check"] = Json::object()) : nullptr;
    if (rank == 0) rc += check_against_reference<T>(o, go, o.backward ? &gq : nullptr, &gk, &gv, record);
    // The other ranks wait while rank 0 computes the fp64 reference.
    rc = sync.value_from_rank(rc, 0, "the wait for rank 0's fp64 check", reference_seconds(o));
  }
  if (run.after && rank == 0) result.doc["model_check"] = {{"what", run.after_label}, {"mismatches", after_failed}};
  result.failures = rc + o.test_failures;
  return finish(o, sync.size(), result, rank);
}

}  // namespace DistAttn::Driver
