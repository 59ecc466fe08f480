// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cost_calibrate: times the building block on this device for the cost model's
// shape classes (cost/tile_throughput.hpp) and writes the table it loads.
//
//   [mpiexec -n K] cost_calibrate -o tiles.txt [--dtypes float,double] [--dims 64,128] [--heads 4]
//                  [--sizes 128,384,768] [-w 1 -n 5]
//
// Per class (fwd/bwd x full/causal x dtype x head_dim) it times
// attention_fwd_update / attention_bwd_update on one square block at each size
// (medians over -n runs) and fits  time = overhead + FLOPs / rate  to the points
// (fit_tile_rate; FLOP convention of docs/PERFORMANCE.md; causal counts kept pairs, and
// on host spaces both kinds count the whole tiles the portable kernels run, Impl::host_tile_rows).
// Use the head count of the runs the table is for: on CPU ranks the rate falls
// as the heads' data outgrows the caches (72 heads run ~12 % slower than 4).
//
// Started on K MPI ranks, every rank runs the same call at the same moment and the
// time from the barrier before it to the barrier after it is the one fitted: ranks
// that share a host's memory bandwidth and caches (or, oversubscribed, its cores)
// run slower together than one alone, and the executors wait for the slowest.
// Calibrate with as many ranks per host as the runs will have.
// It also times attention_merge for the memory-bound passes (elementwise rate),
// a row reorder for the executors' packing and interleaving (copy rate), and, on
// 2+ ranks of a host build, the MPI backend's sum reduce-scatter (reduce rate).
//
//   mpiexec --oversubscribe -n K cost_calibrate -o tiles.txt --balance-cores C [--heads 72 --sizes ...]
//
// with K ranks that do not divide over the host's C cores (3 on 2) measures only the
// scheduler's balance time (cost/core_balance.hpp) and adds it to the existing
// table: one forward call per size, timed with the first C ranks alone and with all K.
//
//   [mpiexec -n K] cost_calibrate -o tiles.txt --heads 72 --head-counts 2,9,36 [--sizes ... -n ...]
//
// measures only how much faster per head a call over fewer heads runs than one over
// --heads (TileThroughput::head_factor) and adds the `heads` lines to the existing table,
// recorded at K / --cores ranks per core where K is larger (--oversubscribe), so that
// a table holds the factors of ranks that take turns on a core beside those of ranks
// with a core each.
#include <DistAttn/DistAttn.hpp>
#include <DistAttn/grid2d/impl/grid2d_buffers.hpp>
#include <DistAttn/cost/core_balance.hpp>
#include <DistAttn/cost/tile_throughput.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include "common/args.hpp"
#include "common/kokkos_args.hpp"
#include "common/timer.hpp"

#if DISTATTN_ENABLE_MPI
#include <mpi.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace DistAttn;
using namespace DistAttn::Perf;
using Exec = Kokkos::DefaultExecutionSpace;
using Mem  = Exec::memory_space;

namespace {

struct Config {
  int heads = 4, warmup = 1, iters = 5;
  int ranks = 1;  ///< MPI ranks timing at once
  std::vector<int> sizes{128, 384, 768};
};

/// The median time of fn. On several ranks each timed call starts together on every
/// rank and ends when the last rank's call ends, as an executor's step does: a rank's
/// own elapsed time would miss the time it waited for a core. Ranks outnumbering
/// cores run a call shorter than a scheduler time slice without sharing, one after
/// another, and only the barrier-to-barrier time shows that.
template <class F>
double median_seconds(const Exec& exec, const Config& c, F&& fn) {
#if DISTATTN_ENABLE_MPI
  if (c.ranks > 1) {
    for (int i = 0; i < c.warmup; ++i) fn();
    exec.fence();
    std::vector<double> t;
    for (int i = 0; i < c.iters; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      fn();
      exec.fence();
      MPI_Barrier(MPI_COMM_WORLD);
      t.push_back(MPI_Wtime() - t0);
    }
    double m = Perf::median(t);
    MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
  }
#endif
  EventTimer<Exec> timer(exec);
  return Perf::median_seconds(timer, c.warmup, c.iters, fn);
}

using Seconds2x2 = std::array<std::array<double, 2>, 2>;  ///< [direction][block kind]

/// Seconds of one call for each direction and block kind at block size S.
template <class T>
Seconds2x2 time_block(const Exec& exec, const Config& c, int S, int d) {
  Seconds2x2 out{};
  using Acc = accum_t<T>;
  const int H = c.heads;
  Tensor4<T, Mem> q("q", 1, S, H, d), k("k", 1, S, H, d), v("v", 1, S, H, d), o("o", 1, S, H, d), dout("do", 1, S, H, d);
  Tensor4<Acc, Mem> dq("dq", 1, S, H, d), dk("dk", 1, S, H, d), dv("dv", 1, S, H, d);
  RowStats<Acc, Mem> lse("lse", 1, H, S), delta("delta", 1, H, S);
  Testing::fill_random_device(exec, q, 11);
  Testing::fill_random_device(exec, k, 12);
  Testing::fill_random_device(exec, v, 13);
  Testing::fill_random_device(exec, dout, 14);
  auto state = make_state<Acc>(exec, 1, S, H, d, "calibrate.state");
  for (int kind = 0; kind < 2; ++kind) {
    AttnOptions ao;
    ao.mask = kind == 0 ? Mask::none() : Mask::causal();
    ao.check_finite = false;
    attention_fwd(exec, q, k, v, o, lse, ao);
    attention_bwd_delta(exec, o, dout, delta);
    out[0][kind] = median_seconds(exec, c, [&] { attention_fwd_update(exec, q, k, v, state, ao); });
    out[1][kind] = median_seconds(exec, c, [&] {
      attention_bwd_update(exec, q, k, v, dout, lse, delta, dq, dk, dv, ao);
    });
  }
  return out;
}

template <class T>
void calibrate(const Exec& exec, const Config& c, const std::string& dtype, int d, TileThroughput& table,
               std::ostream& log) {
  std::vector<Seconds2x2> t;
  for (int S : c.sizes) t.push_back(time_block<T>(exec, c, S, d));
  for (int dir = 0; dir < 2; ++dir)
    for (int kind = 0; kind < 2; ++kind) {
      const TileDirection td = dir == 0 ? TileDirection::Forward : TileDirection::Backward;
      const ShapeClass cls{td, kind == 0 ? BlockKind::Full : BlockKind::Causal, dtype, d};
      // Host kernels compute whole tiles, so their rate is fitted per tile pair
      // (tile_throughput.hpp); the tuned device kernels' per kept pair.
      const std::int64_t tile_rows = compat::host_accessible_v<Exec> ? Impl::host_tile_rows(d) : 0;
      TileThroughput shape;
      shape.set(cls, TileRate{1, 0, tile_rows});
      std::vector<double> flops, seconds;
      for (std::size_t i = 0; i < c.sizes.size(); ++i) {
        const int S = c.sizes[i];
        flops.push_back(block_flops(td, c.heads, d, shape.block_pairs(cls, {0, 1}, S, {0, 1}, S)));
        seconds.push_back(t[i][dir][kind]);
      }
      TileRate r = fit_tile_rate(flops, seconds);
      r.tile_rows = tile_rows;
      // Host kernels pay their fixed cost per head (TileRate::overhead_per_head).
      if (compat::host_accessible_v<Exec>) r.overhead_s /= c.heads, r.overhead_per_head = true;
      table.set(cls, r);
      log << "# " << TileThroughput::describe(cls) << ":";
      for (std::size_t i = 0; i < c.sizes.size(); ++i) {
        const double model = r.overhead_s * (r.overhead_per_head ? c.heads : 1) + flops[i] / r.flops_per_s;
        log << " S=" << c.sizes[i] << " " << seconds[i] * 1e3 << " ms (fit " << std::showpos
            << std::lround(100 * (model - seconds[i]) / seconds[i]) << std::noshowpos << " %)";
      }
      log << " -> " << r.flops_per_s * 1e-9 << " GFLOP/s, overhead " << r.overhead_s * 1e6 << " us"
          << (r.overhead_per_head ? " per head" : "") << "\n";
    }
}

/// 16 Mi elements of head_dim d: 4096 rows of 8 * 128 / d heads (the executors' rows
/// are of the table's head dims, and the row loops' per-row work depends on d).
inline int calibration_heads(int d) { return d >= 8 * 128 ? 1 : 8 * 128 / d; }

/// The merge rate, on two non-empty states (an empty row is skipped whole: made by
/// make_state alone, the merge would read two statistics per row and nothing else).
template <class T>
double merge_bytes_per_s(const Exec& exec, const Config& c, int d) {
  using Acc = accum_t<T>;
  const int S = 4096, H = calibration_heads(d);
  auto a = make_state<Acc>(exec, 1, S, H, d, "calibrate.merge_a");
  auto b = make_state<Acc>(exec, 1, S, H, d, "calibrate.merge_b");
  Kokkos::deep_copy(exec, a.acc, Acc(1));
  Kokkos::deep_copy(exec, a.m, Acc(0));
  Kokkos::deep_copy(exec, a.l, Acc(1));
  Kokkos::deep_copy(exec, b.acc, Acc(1));
  Kokkos::deep_copy(exec, b.m, Acc(-0.5));
  Kokkos::deep_copy(exec, b.l, Acc(1));
  const double t = median_seconds(exec, c, [&] { attention_merge(exec, a, b); });
  return 3.0 * double(S) * H * (d + 2) * sizeof(Acc) / t;
}

/// The reorder rate: one of the executors' row copies (Impl::deinterleave_rows,
/// a position-ordered tensor cut into two contiguous shards), bytes read +
/// written per second.
template <class T>
double copy_bytes_per_s(const Exec& exec, const Config& c, int d) {
  using Mem = typename Exec::memory_space;
  const int S = 4096, H = calibration_heads(d);
  const std::size_t shard = std::size_t(S) * H * d;
  Tensor4<T, Mem> src("calibrate.copy_src", 1, 2 * S, H, d);
  Kokkos::View<T*, Mem> dst("calibrate.copy_dst", 2 * shard);
  const double t = median_seconds(exec, c, [&] {
    Impl::deinterleave_rows(exec, src, 0, 2, 2, dst.data(), shard, "calibrate.copy");
  });
  return 2.0 * double(2 * shard) * sizeof(T) / t;
}

#if DISTATTN_ENABLE_MPI
/// A barrier whose waiting ranks sleep: a rank spinning in MPI_Barrier stays
/// runnable, and the scheduler may leave it a core of its own while two timed
/// ranks share the other (seen as "alone" calls taking 2x, 2026-11-23).
void sleeping_barrier() {
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  for (int done = 0; MPI_Test(&r, &done, MPI_STATUS_IGNORE), !done;) usleep(100);
}

/// Median seconds of fn on the ranks below `callers` (the others only wait), from
/// the barrier before to the barrier after, max over ranks. `spin`: ranks done
/// early wait in MPI_Barrier, polling as the executors' waits do, and keep
/// competing for the cores with the ranks still computing.
template <class F>
double median_seconds_on(const Exec& exec, const Config& c, int callers, bool spin, int rank, F&& fn) {
  std::vector<double> t;
  for (int i = 0; i < c.warmup + c.iters; ++i) {
    sleeping_barrier();
    const double t0 = MPI_Wtime();
    if (rank < callers) fn(), exec.fence();
    if (spin) MPI_Barrier(MPI_COMM_WORLD);
    else sleeping_barrier();
    if (i >= c.warmup) t.push_back(MPI_Wtime() - t0);
  }
  double m = Perf::median(t);
  MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

/// The balance time of K = c.ranks ranks on `cores` cores: a full forward call of
/// each size (float, head_dim d) timed with ranks [0, cores) calling it alone (the
/// others asleep: the table's condition) and with every rank calling it and
/// waiting as an executor's ranks do, fitted by fit_balance_seconds.
double balance_seconds(const Exec& exec, const Config& c, int cores, int d, int rank, std::ostream& log) {
  std::vector<double> alone, shared;
  for (int S : c.sizes) {
    const int H = c.heads;
    Tensor4<float, Mem> q("q", 1, S, H, d), k("k", 1, S, H, d), v("v", 1, S, H, d);
    Testing::fill_random_device(exec, q, 11);
    Testing::fill_random_device(exec, k, 12);
    Testing::fill_random_device(exec, v, 13);
    auto state = make_state<float>(exec, 1, S, H, d, "calibrate.balance_state");
    AttnOptions ao;
    ao.check_finite = false;
    auto call = [&] { attention_fwd_update(exec, q, k, v, state, ao); };
    alone.push_back(median_seconds_on(exec, c, cores, false, rank, call));
    shared.push_back(median_seconds_on(exec, c, c.ranks, true, rank, call));
    log << "# balance: S=" << S << " " << c.ranks << " ranks " << shared.back() * 1e3 << " ms, " << cores
        << " alone " << alone.back() * 1e3 << " ms (" << shared.back() / alone.back() << "x)\n";
  }
  return fit_balance_seconds(alone, shared, c.ranks, cores);
}
#endif

#if DISTATTN_ENABLE_MPI
/// The MPI backend's sum reduce-scatter (what Attention2D-NO's backward runs) on
/// every rank, `mib` MiB of float result per rank: result bytes per ring step per
/// second, (K - 1) * result bytes / time.
double reduce_bytes_per_s(const Exec& exec, const Config& c, int mib) {
  using Mem = typename Exec::memory_space;
  auto comm = Communicator<MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, exec);
  const std::size_t m = std::size_t(mib) << 18;  // floats
  Kokkos::View<float*, Mem> send("calibrate.reduce_send", std::size_t(c.ranks) * m), recv("calibrate.reduce_recv", m);
  Kokkos::deep_copy(exec, send, 1.0f);
  const double t = median_seconds(exec, c, [&] { reduce_scatter_sum(comm, send, recv).wait(); });
  return double(c.ranks - 1) * double(m) * sizeof(float) / t;
}
#endif

/// The tile table of this device: every class of `dtypes` x `dims`, the elementwise
/// and copy rates and (MPI ranks of a host build) the reduce rate, written to `outpath`.
void write_table(const Exec& exec, const Config& c, const std::vector<std::string>& dtypes,
                 const std::vector<int>& dims, int reduce_mib, int rank, const std::string& outpath,
                 std::ostream& log) {
  TileThroughput table;
  for (const auto& dt : dtypes)
    for (int d : dims) {
      if (dt == "float") calibrate<float>(exec, c, dt, d, table, log);
      else if (dt == "double") calibrate<double>(exec, c, dt, d, table, log);
#if defined(KOKKOS_ENABLE_CUDA)
      else if (dt == "bf16" && compat::has_bhalf) calibrate<compat::bhalf_t>(exec, c, dt, d, table, log);
      else if (dt == "fp16" && compat::has_half) calibrate<compat::half_t>(exec, c, dt, d, table, log);
#endif
      else DISTATTN_REQUIRE(false, "cost_calibrate", "--dtypes: '" << dt << "' is not available in this build");
    }
  // One rate each for the table, measured at its smallest head dim (the most rows per byte).
  const int dmin = *std::min_element(dims.begin(), dims.end());
  table.set_elementwise_bytes_per_s(merge_bytes_per_s<float>(exec, c, dmin));
  table.set_copy_bytes_per_s(copy_bytes_per_s<float>(exec, c, dmin));
#if DISTATTN_ENABLE_MPI
  // CPU ranks reduce through MPI; GPU runs through NCCL, which this would not time.
  if (c.ranks > 1 && reduce_mib > 0 && compat::host_accessible_v<Exec>)
    table.set_reduce_bytes_per_s(reduce_bytes_per_s(exec, c, reduce_mib));
#else
  (void)reduce_mib;
#endif
  if (rank != 0) return;
  std::ostringstream head;
  head << "# DistAttn cost-model tile throughput, measured by perf_tests/cost_calibrate on " << Exec::name()
       << " (heads " << c.heads << ", block sizes";
  for (int S : c.sizes) head << ' ' << S;
  head << ", " << c.ranks << " rank" << (c.ranks > 1 ? "s at once, barrier to barrier" : "") << ")\n";
  std::ofstream f(outpath);
  DISTATTN_REQUIRE(f.good(), "cost_calibrate", "cannot write '" << outpath << "'");
  f << head.str() << table.to_text();
  std::cout << head.str() << table.to_text();
}

/// Rewrites the table at `path` with the lines `drop` accepts replaced by `lines` at
/// the end; every other line and comment is kept as it is.
template <class Drop>
void replace_lines(const std::string& path, Drop drop, const std::string& lines) {
  std::ifstream in(path);
  std::ostringstream kept;
  for (std::string line; std::getline(in, line);)
    if (!drop(line)) kept << line << '\n';
  in.close();
  std::ofstream out(path);
  out << kept.str() << lines;
  DISTATTN_REQUIRE(out.good(), "cost_calibrate", "cannot write '" << path << "'");
}

/// The table's `record` lines and their `# record` comment replaced by `lines`.
void replace_records(const std::string& path, const std::string& record, const std::string& lines) {
  replace_lines(
      path, [&](const std::string& l) { return l.rfind(record, 0) == 0 || l.rfind("# " + record, 0) == 0; }, lines);
}

/// Ranks per core of a `heads` line or of its comment ("# heads at R ranks per core:",
/// "# heads:" = 1); 0 for any other line.
double heads_line_share(const std::string& line) {
  std::istringstream ls(line);
  std::string word;
  int h = 0;
  double f = 0, share = 1;
  if (line.rfind("heads ", 0) == 0) {
    ls >> word >> h >> f;
    if (!(ls >> share)) share = 1;
    return share;
  }
  if (line.rfind("# heads at ", 0) == 0) {
    ls.seekg(11);
    return ls >> share ? share : 0.0;
  }
  return line.rfind("# heads:", 0) == 0 ? 1.0 : 0.0;
}

/// Seconds per head of the four calls at block size S with `heads` heads.
template <class T>
double seconds_per_head(const Exec& exec, Config c, int heads, int S, int d) {
  c.heads = heads;
  const Seconds2x2 t = time_block<T>(exec, c, S, d);
  return (t[0][0] + t[0][1] + t[1][0] + t[1][1]) / heads;
}

/// The head factors (TileThroughput::head_factor) at `counts` heads per call against
/// the table's --heads, at the largest --sizes block, added to the table at `outpath`
/// in place of the heads lines it had. Each count is timed right after the table's
/// head count, so that a drift of the machine between them cancels.
void add_head_factors(const Exec& exec, const Config& c, std::vector<int> counts, int d, double cores, int rank,
                      const std::string& outpath, std::ostream& log) {
  TileThroughput table = TileThroughput::load(outpath);  // an existing, valid table, before spending the time
  // Rounded as the table writes it, so that a later run at the same share replaces these lines.
  std::ostringstream rounded;
  rounded.precision(6);
  rounded << std::scientific << std::max(1.0, c.ranks / cores);
  const double share = std::stod(rounded.str());
  const int S = c.sizes.back();
  std::vector<std::pair<int, double>> f{{c.heads, 1.0}};
  for (int h : counts) {
    const double base = seconds_per_head<float>(exec, c, c.heads, S, d), at = seconds_per_head<float>(exec, c, h, S, d);
    f.emplace_back(h, at / base);
    log << "# heads " << h << ": " << at * 1e3 << " ms per head, " << c.heads << ": " << base * 1e3 << " ms -> "
        << at / base << "\n";
  }
  std::sort(f.begin(), f.end());
  if (rank != 0) return;
  table.set_head_factors(f, share);
  std::ostringstream lines;
  lines << "# heads" << (share != 1 ? " at " + rounded.str() + " ranks per core" : std::string()) << ": float, d "
        << d << ", S " << S << ", " << c.ranks << " rank(s) at once";
  if (compat::host_accessible_v<Exec>) lines << " on " << cores << " core(s)";
  lines << '\n' << table.head_factors_text(share);
  replace_lines(outpath, [&](const std::string& l) { return heads_line_share(l) == share; }, lines.str());
  log << lines.str();
}

#if DISTATTN_ENABLE_MPI
/// The balance time of this host, added to the table at `outpath` in place of the
/// balance line it had (the table's other lines and comments are kept as they are).
void add_balance(const Exec& exec, const Config& c, int cores, int d, int rank, const std::string& outpath,
                 std::ostream& log) {
  TileThroughput::load(outpath);  // an existing, valid table, before spending the time
  const double tau = balance_seconds(exec, c, cores, d, rank, log);
  if (rank != 0) return;
  std::ostringstream lines;
  lines << "# balance: " << c.ranks << " ranks on " << cores << " cores, heads " << c.heads << ", sizes";
  for (int S : c.sizes) lines << ' ' << S;
  lines << "\nbalance " << tau << '\n';
  replace_records(outpath, "balance", lines.str());
  log << "balance " << tau << '\n';
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int rank = 0, ranks = 1;
#if DISTATTN_ENABLE_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
#endif
  DistAttn::Perf::KokkosArgs args(argc, argv);
  Kokkos::initialize(args.kokkos_argc(), args.kokkos_argv());
  argc = args.tool_argc();
  argv = args.tool_argv();
  int rc = 0;
  std::ostringstream discard;
  std::ostream& log = rank == 0 ? std::cout : discard;
  try {
    Config c;
    std::string outpath;
    std::vector<std::string> dtypes{"float", "double"};
    std::vector<int> dims{64, 128}, sizes{128, 384, 768};
    int reduce_mib = 16, balance_cores = 0;
    double head_cores = 0;
    std::vector<int> head_counts;
    CLI::App app("Times the building block per shape class and writes the cost model's tile table.",
                 "cost_calibrate");
    app.add_option("--heads", c.heads, "heads")->check(at_least(1))->capture_default_str();
    app.add_option("-w,--warmup", c.warmup, "warm-up calls")->check(at_least(0))->capture_default_str();
    app.add_option("-n,--iters", c.iters, "timed calls")->check(at_least(1))->capture_default_str();
    app.add_option("-o,--out", outpath, "tile table to write")->required();
    app.add_option("--dtypes", dtypes, "element types")->delimiter(',')->check(CLI::IsMember(dtype_choices()))
        ->capture_default_str();
    app.add_option("--dims", dims, "head dims")->delimiter(',')->check(at_least(1))->capture_default_str();
    app.add_option("--reduce-mib", reduce_mib,
                   "on 2+ MPI ranks of a host build: time the MPI sum reduce-scatter with this many MiB of result "
                   "per rank (0: skip)")
        ->check(at_least(0))
        ->capture_default_str();
    app.add_option("--balance-cores", balance_cores,
                   "this host's cores, fewer than the MPI ranks and not dividing them: measure only the scheduler's "
                   "balance time and add it to the existing table at -o")
        ->check(at_least(1));
    app.add_option("--head-counts", head_counts,
                   "heads per call other than --heads (as Ulysses and the hybrid call): measure only the arithmetic "
                   "time per head at each against --heads (float, the first --dims, the largest --sizes) and add it "
                   "to the existing table at -o")
        ->delimiter(',')
        ->check(at_least(1));
    app.add_option("--cores", head_cores,
                   "with --head-counts: the cores the MPI ranks share (default: this host's on a host build, one "
                   "per rank on a GPU build); more ranks than cores records the factors at ranks / cores ranks per "
                   "core")
        ->check(CLI::PositiveNumber);
    app.add_option("--sizes", sizes, "two or more increasing block sizes")->delimiter(',')->check(at_least(1))
        ->capture_default_str();
    if (!parse_command_line(app, argc, argv)) {
      log << app.help();
      Kokkos::finalize();
#if DISTATTN_ENABLE_MPI
      MPI_Finalize();
#endif
      return 0;
    }
    DISTATTN_REQUIRE(sizes.size() >= 2 && std::is_sorted(sizes.begin(), sizes.end()) &&
                         std::adjacent_find(sizes.begin(), sizes.end()) == sizes.end() && sizes[0] > 0,
                     "cost_calibrate", "--sizes must be two or more increasing block sizes, e.g. 128,384,768");
    DISTATTN_REQUIRE(c.iters >= 1 && c.heads >= 1, "cost_calibrate", "-n and --heads must be >= 1");
    c.sizes = sizes;
    c.ranks = ranks;
    DISTATTN_REQUIRE(balance_cores == 0 || ranks > balance_cores, "cost_calibrate",
                     "--balance-cores " << balance_cores << " needs more MPI ranks than that, got " << ranks);
    DISTATTN_REQUIRE(balance_cores == 0 || head_counts.empty(), "cost_calibrate",
                     "--balance-cores and --head-counts are separate runs");
    DISTATTN_REQUIRE(head_cores == 0 || !head_counts.empty(), "cost_calibrate",
                     "--cores " << head_cores << " applies to --head-counts only (--balance-cores names its own)");
    Exec exec;
    if (!head_counts.empty()) {
      DISTATTN_REQUIRE(std::find(head_counts.begin(), head_counts.end(), c.heads) == head_counts.end(), "cost_calibrate",
                       "--head-counts must not repeat --heads " << c.heads);
      double cores = head_cores;
      if (!(cores > 0)) cores = compat::host_accessible_v<Exec> ? double(std::thread::hardware_concurrency()) : ranks;
      add_head_factors(exec, c, head_counts, dims.front(), cores, rank, outpath, log);
    } else
#if DISTATTN_ENABLE_MPI
    if (balance_cores > 0)
      add_balance(exec, c, balance_cores, dims.front(), rank, outpath, log);
    else
#endif
      write_table(exec, c, dtypes, dims, reduce_mib, rank, outpath, log);
  } catch (const std::exception& e) {
    std::cerr << "cost_calibrate (rank " << rank << "): " << e.what() << "\n";
    rc = 1;
  }
  Kokkos::finalize();
#if DISTATTN_ENABLE_MPI
  // A rank that failed stops everyone: the others could be waiting in a barrier.
  if (rc != 0 && ranks > 1) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
#endif
  return rc;
}
