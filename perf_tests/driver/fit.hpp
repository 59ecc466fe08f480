#pragma once
// distattn-run --fit: the longest sequence a schedule can run forward and backward
// on these ranks, from the executors' memory plans (exact: the memory tests hold
// them to what Kokkos allocates) and the driver's own tensors, against each rank's
// free device memory or DISTATTN_MEMORY_LIMIT. Nothing is allocated, so the
// answer comes in seconds where trying a length takes minutes.

#include "driver_common.hpp"

#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/core/types.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>

namespace DistAttn::Driver {

/// An executor's leanest workspace at one length: its peak bytes on this rank and
/// the kv heads per pass that give it (0 where the schedule does not chunk heads).
struct FitWorkspace {
  std::size_t bytes = 0;
  int kv_heads_per_pass = 0;
};

/// What --fit needs of a schedule (set by each run_*.hpp).
struct FitModel {
  /// Multiple of this many tokens: the lengths the schedule runs unpadded.
  long unit = 1;
  /// Local rows of this rank at global length S.
  std::function<long(long S)> rows_at;
  /// The executor's workspace peak on this rank at S in its leanest configuration
  /// (ring kinds and Attention2D: the kv heads per pass that need least, unless
  /// --head-group says; the hybrid's inner executor likewise).
  std::function<FitWorkspace(long S)> workspace_at;
};

/// The leanest of an executor's plans over its kv heads per pass (`plan_for(g)`;
/// `requested` alone when non-zero), as a FitWorkspace.
template <class PlanFor>
FitWorkspace leanest_workspace(int kv_heads, int requested, PlanFor&& plan_for) {
  const auto [g, plan] = DistAttn::Impl::leanest_head_group(kv_heads, requested, plan_for);
  return {plan.peak_bytes(), g};
}

/// Bytes of the driver's tensors on a rank of `n` rows: q, k, v, o, dO, dq, dk, dv
/// and LSE, as run_executor allocates them.
template <class T>
std::size_t driver_tensor_bytes(const Options& o, long n) {
  const std::size_t rows = std::size_t(o.batch) * std::size_t(n);
  return rows * std::size_t(o.dim) * (4 * std::size_t(o.heads) + 4 * std::size_t(o.kv_heads)) * sizeof(T) +
         rows * std::size_t(o.heads) * sizeof(accum_t<T>);
}

/// Prints, on rank 0, the longest multiple of the model's unit whose tensors and
/// workspace fit on every rank, and what it needs. Returns 0 (2 when nothing fits).
template <class T>
int report_fit(const Options& o, const FitModel& m, Sync& sync) {
  const int rank            = sync.rank();
  const std::size_t usable  = DistAttn::Impl::usable_bytes<Mem>(0, 0);
  const bool known          = usable != compat::kUnknownFreeMemory;
  if (sync.min(known ? 1 : 0, "--fit's agreement on the memory query") == 0)
    throw AgreedError("--fit: this build's memory space has no free-memory query; set DISTATTN_MEMORY_LIMIT "
                          "(bytes per rank) to ask what fits in that much");
  auto need = [&](long S) { return driver_tensor_bytes<T>(o, m.rows_at(S)) + m.workspace_at(S).bytes; };
  auto fits = [&](long S) { return sync.min(need(S) <= usable ? 1 : 0, "--fit's search") == 1; };
  // Doubling, then bisection over multiples of the unit; need grows with S. The
  // executors take int extents, so the search stops below 2^31 tokens.
  const long cap = long(std::numeric_limits<int>::max()) / m.unit * m.unit;
  long lo = 0, hi = m.unit;
  while (hi <= cap && fits(hi)) lo = hi, hi *= 2;
  hi = std::min(hi, cap + m.unit);  // past the search: taken as not fitting, never evaluated
  while (hi - lo > m.unit) {
    const long mid = (lo + hi) / 2 / m.unit * m.unit;
    if (mid <= lo) break;
    (fits(mid) ? lo : hi) = mid;
  }
  const std::uint64_t least = sync.min(std::uint64_t(usable), "--fit's least usable memory");
  if (rank == 0) {
    const double GiB = double(1ull << 30);
    std::printf("# fit %s: usable memory per rank (least of the ranks) %.3f GiB (%llu bytes)\n", o.schedule.c_str(),
                double(least) / GiB, static_cast<unsigned long long>(least));
    if (lo == 0) {
      std::printf("# fit %s: no sequence fits: %ld tokens need %zu bytes per rank\n", o.schedule.c_str(), m.unit,
                  need(m.unit));
    } else {
      const std::size_t at = need(lo), tensors = driver_tensor_bytes<T>(o, m.rows_at(lo));
      const FitWorkspace ws = m.workspace_at(lo);
      std::printf("# fit %s: longest sequence %ld tokens (multiple of %ld); rank 0 needs %zu bytes (%.3f GiB: "
                  "tensors %.3f, workspace %.3f); ",
                  o.schedule.c_str(), lo, m.unit, at, double(at) / GiB, double(tensors) / GiB, double(ws.bytes) / GiB);
      if (lo < cap)
        std::printf("%ld tokens would need %zu bytes\n", lo + m.unit, need(lo + m.unit));
      else
        std::printf("the search stops there (the executors' extents are int)\n");
      std::printf("# fit %s: workspace_bytes %zu\n", o.schedule.c_str(), ws.bytes);
      if (ws.kv_heads_per_pass > 0)
        std::printf("# fit %s: with %d of %d kv heads per pass (--head-group %d)\n", o.schedule.c_str(),
                    ws.kv_heads_per_pass, o.kv_heads, ws.kv_heads_per_pass);
    }
  }
  return lo == 0 ? 2 : 0;
}

}  // namespace DistAttn::Driver
