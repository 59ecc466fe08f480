// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run --fit: the longest sequence a schedule can run forward and backward
// on these ranks, from the executors' memory plans (exact: the memory tests hold
// them to what Kokkos allocates) and the driver's own tensors, against each rank's
// free device memory or DISTATTN_MEMORY_LIMIT (on a host build without it, the
// host's available memory shared by its ranks). Nothing is allocated, so the
// answer comes in seconds where trying a length takes minutes. Every run checks
// --seq against the same plan before it allocates (check_memory_before_allocating).

#include "driver_common.hpp"

#include <array>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/core/types.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

/// The search's bound: the executors take int extents.
inline long fit_cap(const FitModel& m) { return long(std::numeric_limits<int>::max()) / m.unit * m.unit; }

/// Bytes of the driver's tensors on a rank of `n` rows: q, k, v, o, dO, dq, dk, dv
/// and LSE, as run_executor allocates them.
template <class T>
std::size_t driver_tensor_bytes(const Options& o, long n) {
  const std::size_t rows = std::size_t(o.batch) * std::size_t(n);
  return rows * std::size_t(o.dim) * (4 * std::size_t(o.heads) + 4 * std::size_t(o.kv_heads)) * sizeof(T) +
         rows * std::size_t(o.heads) * sizeof(accum_t<T>);
}

/// What a rank may use for the driver's tensors and the executor's workspace, and
/// where that number comes from (for the messages).
struct UsableMemory {
  std::size_t bytes = 0;
  std::string source;
};

/// The memory of this host the kernel counts as available for new allocations
/// (MemAvailable in /proc/meminfo; free pages where that cannot be read).
inline std::pair<std::size_t, std::string> host_available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  unsigned long long kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return {std::size_t(kib) * 1024, "MemAvailable in /proc/meminfo"};
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return {pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : 0, "free pages (sysconf)"};
}

/// Per rank: DISTATTN_MEMORY_LIMIT or the device's free memory, whichever is less;
/// on a host build without the variable, this host's available memory divided
/// among the job's ranks on this host. Collective; a malformed
/// DISTATTN_MEMORY_LIMIT fails every rank (AgreedError).
inline UsableMemory usable_memory(Sync& sync) {
  UsableMemory u;
  std::string error;
  std::size_t limit = 0;
  try {
    limit = DistAttn::Impl::memory_limit(0);
  } catch (const InvalidArgument& e) {
    error = e.what();
  }
  sync.agree(error, "the check of DISTATTN_MEMORY_LIMIT");
  // Ranks per host, from the host names (padded to one length).
  std::vector<char> name(MPI_MAX_PROCESSOR_NAME + 1, '\0');
  int len = 0;
  MPI_Get_processor_name(name.data(), &len);
  const auto names   = sync.all_gather(name, "the exchange of host names");
  const auto mine    = std::string(name.data());
  int ranks_here     = 0;
  for (std::size_t r = 0; r < names.size(); r += name.size())
    ranks_here += std::string(&names[r]) == mine ? 1 : 0;
  const std::size_t free_device = compat::free_memory_bytes<Mem>();
  if (free_device != compat::kUnknownFreeMemory) {
    u = {free_device, "free device memory"};
  } else if (limit == 0) {
    const auto [avail, what] = host_available_memory();
    u = {avail / std::size_t(std::max(1, ranks_here)),
         what + " of this host, shared by its " + std::to_string(ranks_here) + " rank(s) of the job; "
         "set DISTATTN_MEMORY_LIMIT to say how much each rank may use"};
  }
  if (limit != 0 && (u.source.empty() || limit < u.bytes)) u = {limit, "DISTATTN_MEMORY_LIMIT"};
  return u;
}

/// What a rank of the model needs at length S: the driver's tensors and the
/// executor's leanest workspace.
template <class T>
std::size_t fit_need(const Options& o, const FitModel& m, long S) {
  return driver_tensor_bytes<T>(o, m.rows_at(S)) + m.workspace_at(S).bytes;
}

/// The longest multiple of the model's unit whose need fits `usable` on every rank
/// (0 if none). Collective: doubling, then bisection; the need grows with S. The
/// executors take int extents, so the search stops below 2^31 tokens.
template <class T>
long longest_fit(const Options& o, const FitModel& m, std::size_t usable, Sync& sync) {
  auto fits = [&](long S) { return sync.min(fit_need<T>(o, m, S) <= usable ? 1 : 0, "the search for the longest sequence that fits") == 1; };
  const long cap = fit_cap(m);
  long lo = 0, hi = m.unit;
  while (hi <= cap && fits(hi)) lo = hi, hi *= 2;
  hi = std::min(hi, cap + m.unit);  // past the search: taken as not fitting, never evaluated
  while (hi - lo > m.unit) {
    const long mid = (lo + hi) / 2 / m.unit * m.unit;
    if (mid <= lo) break;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

/// Before the driver allocates anything: its tensors and the executor's leanest
/// workspace at --seq (the plan --fit uses) must fit every rank's usable memory;
/// otherwise every rank fails together (AgreedError) with the need, what is usable
/// and why, and the longest sequence that fits.
template <class T>
void check_memory_before_allocating(const Options& o, const FitModel& m, Sync& sync) {
  // Kokkos 3.4 allocates 0 bytes for a tensor of a multiple of 2^32 elements, and
  // the driver would write past it: ask Kokkos before allocating.
  const std::size_t rows = std::size_t(m.rows_at(o.seq));
  std::ostringstream span;
  for (const auto& [name, heads] : {std::pair<const char*, int>{"q", o.heads}, {"k", o.kv_heads}}) {
    const std::array<std::size_t, 4> e{std::size_t(o.batch), rows, std::size_t(heads), std::size_t(o.dim)};
    if (span.str().empty() && !compat::layout_right_span_exact(e))
      span << "--seq " << o.seq << " gives each rank a tensor '" << name << "' of [" << e[0] << ", " << e[1] << ", "
           << e[2] << ", " << e[3] << "] = " << e[0] * e[1] * e[2] * e[3]
           << " elements, which this Kokkos cannot allocate whole (Kokkos 3.4 allocates 0 bytes for a View of rank "
              "3 or more whose element count is a multiple of 2^32): change --seq, --heads or --dim";
  }
  sync.agree(span.str(), "the tensor extents check before allocating");
  const UsableMemory u   = usable_memory(sync);
  const std::size_t need = fit_need<T>(o, m, o.seq);
  if (sync.min(need <= u.bytes ? 1 : 0, "the memory check before allocating") == 1) return;
  const long lo = longest_fit<T>(o, m, u.bytes, sync);
  std::ostringstream os;
  if (need > u.bytes) {
    using DistAttn::Impl::gib;
    const FitWorkspace ws = m.workspace_at(o.seq);
    os << "not enough memory for --seq " << o.seq << " with --schedule " << o.schedule << " on " << sync.size()
       << " ranks: this rank needs " << gib(need) << " (the driver's tensors "
       << gib(driver_tensor_bytes<T>(o, m.rows_at(o.seq)));
    if (ws.bytes > 0) os << ", the executor's leanest workspace " << gib(ws.bytes);
    os << "), " << gib(u.bytes) << " is usable (" << u.source << "); ";
    if (lo == 0) {
      os << "no sequence fits: " << m.unit << " tokens need " << fit_need<T>(o, m, m.unit) << " bytes";
    } else {
      const int g = m.workspace_at(lo).kv_heads_per_pass;
      os << "the longest sequence that fits is " << lo << " tokens";
      if (g > 0) os << " (with --head-group " << g << ")";
      if (o.schedule != "local") os << ", as distattn-run --fit says";
    }
  }
  sync.agree(os.str(), "the memory check before allocating");
}

/// Prints, on rank 0, the longest multiple of the model's unit whose tensors and
/// workspace fit on every rank, and what it needs. Returns 0 (2 when nothing fits).
template <class T>
int report_fit(const Options& o, const FitModel& m, Sync& sync) {
  const int rank             = sync.rank();
  const UsableMemory usable  = usable_memory(sync);
  auto need                  = [&](long S) { return fit_need<T>(o, m, S); };
  const long cap             = fit_cap(m);
  const long lo              = longest_fit<T>(o, m, usable.bytes, sync);
  const std::uint64_t least  = sync.min(std::uint64_t(usable.bytes), "--fit's least usable memory");
  if (rank == 0) {
    const double GiB = double(1ull << 30);
    std::printf("# fit %s: usable memory per rank (least of the ranks) %.3f GiB (%llu bytes; rank 0: %s)\n",
                o.schedule.c_str(), double(least) / GiB, static_cast<unsigned long long>(least), usable.source.c_str());
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
