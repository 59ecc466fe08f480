// cost_calibrate: times the building block on this device for the cost model's
// shape classes (schedule/tile_throughput.hpp) and writes the table it loads.
//
//   cost_calibrate -o tiles.txt [--dtypes float,double] [--dims 64,128] [--heads 4]
//                  [--sizes 128,384] [-w 1 -n 5]
//
// Per class (fwd/bwd x full/causal x dtype x head_dim) it times
// attention_fwd_update / attention_bwd_update on one square block at two sizes
// (medians over -n runs) and fits  time = overhead + FLOPs / rate  through the
// two points (FLOP convention of docs/PERFORMANCE.md; causal counts kept pairs, and
// on host spaces both kinds count the whole tiles the portable kernels run, Impl::host_tile_rows).
// If the fit gives a negative overhead, overhead = 0 and rate = the larger block's.
// It also times attention_merge for the memory-bound passes (elementwise rate)
// and a row reorder for the executors' packing and interleaving (copy rate).
#include <DistAttn/DistAttn.hpp>
#include <DistAttn/impl/grid2d_buffers.hpp>
#include <DistAttn/schedule/tile_throughput.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include "common/args.hpp"
#include "common/timer.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace DistAttn;
using namespace DistAttn::Perf;
using Exec = Kokkos::DefaultExecutionSpace;
using Mem  = Exec::memory_space;

namespace {

struct Config {
  int heads = 4, warmup = 1, iters = 5;
  std::vector<int> sizes{128, 384};
};

template <class F>
double median_seconds(const Exec& exec, const Config& c, F&& fn) {
  EventTimer<Exec> timer(exec);
  return Perf::median_seconds(timer, c.warmup, c.iters, fn);
}

/// Seconds of one call for each direction and block kind at block size S.
template <class T>
void time_block(const Exec& exec, const Config& c, int S, int d, double out[2][2]) {
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
}

template <class T>
void calibrate(const Exec& exec, const Config& c, const std::string& dtype, int d, TileThroughput& table) {
  const int s1 = c.sizes[0], s2 = c.sizes[1];
  double t1[2][2], t2[2][2];
  time_block<T>(exec, c, s1, d, t1);
  time_block<T>(exec, c, s2, d, t2);
  for (int dir = 0; dir < 2; ++dir)
    for (int kind = 0; kind < 2; ++kind) {
      const TileDirection td = dir == 0 ? TileDirection::Forward : TileDirection::Backward;
      const ShapeClass cls{td, kind == 0 ? BlockKind::Full : BlockKind::Causal, dtype, d};
      // Host kernels compute whole tiles, so their rate is fitted per tile pair
      // (tile_throughput.hpp); the tuned device kernels' per kept pair.
      const std::int64_t tile_rows = compat::host_accessible_v<Exec> ? Impl::host_tile_rows(d) : 0;
      TileThroughput shape;
      shape.set(cls, TileRate{1, 0, tile_rows});
      auto pairs = [&](int S) { return shape.block_pairs(cls, {0, 1}, S, {0, 1}, S); };
      const double f1 = block_flops(td, c.heads, d, pairs(s1)), f2 = block_flops(td, c.heads, d, pairs(s2));
      TileRate r;
      r.flops_per_s = (f2 - f1) / (t2[dir][kind] - t1[dir][kind]);
      r.overhead_s = t1[dir][kind] - f1 / r.flops_per_s;
      if (!(r.flops_per_s > 0) || r.overhead_s < 0) r = TileRate{f2 / t2[dir][kind], 0.0};
      r.tile_rows = tile_rows;
      table.set(cls, r);
      std::cout << "# " << TileThroughput::describe(cls) << ": " << t1[dir][kind] * 1e3 << " ms at S=" << s1 << ", "
                << t2[dir][kind] * 1e3 << " ms at S=" << s2 << " -> " << r.flops_per_s * 1e-9 << " GFLOP/s, overhead "
                << r.overhead_s * 1e6 << " us\n";
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

}  // namespace

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  int rc = 0;
  try {
    Config c;
    std::string outpath;
    std::vector<std::string> dtypes{"float", "double"};
    std::vector<int> dims{64, 128}, sizes{128, 384};
    CLI::App app("Times the building block per shape class and writes the cost model's tile table.",
                 "cost_calibrate");
    app.add_option("--heads", c.heads, "heads")->check(at_least(1))->capture_default_str();
    app.add_option("-w,--warmup", c.warmup, "warm-up calls")->check(at_least(0))->capture_default_str();
    app.add_option("-n,--iters", c.iters, "timed calls")->check(at_least(1))->capture_default_str();
    app.add_option("-o,--out", outpath, "tile table to write")->required();
    app.add_option("--dtypes", dtypes, "element types")->delimiter(',')->check(CLI::IsMember(dtype_choices()))
        ->capture_default_str();
    app.add_option("--dims", dims, "head dims")->delimiter(',')->check(at_least(1))->capture_default_str();
    app.add_option("--sizes", sizes, "two increasing block sizes")->delimiter(',')->check(at_least(1))
        ->capture_default_str();
    if (!parse_command_line(app, argc, argv)) {
      std::cout << app.help();
      Kokkos::finalize();
      return 0;
    }
    DISTATTN_REQUIRE(sizes.size() == 2 && sizes[0] > 0 && sizes[1] > sizes[0], "cost_calibrate",
                     "--sizes must be two increasing block sizes, e.g. 128,384");
    DISTATTN_REQUIRE(c.iters >= 1 && c.heads >= 1, "cost_calibrate", "-n and --heads must be >= 1");
    c.sizes = sizes;
    Exec exec;
    TileThroughput table;
    for (const auto& dt : dtypes)
      for (int d : dims) {
        if (dt == "float") calibrate<float>(exec, c, dt, d, table);
        else if (dt == "double") calibrate<double>(exec, c, dt, d, table);
#if defined(KOKKOS_ENABLE_CUDA)
        else if (dt == "bf16" && compat::has_bhalf) calibrate<compat::bhalf_t>(exec, c, dt, d, table);
        else if (dt == "fp16" && compat::has_half) calibrate<compat::half_t>(exec, c, dt, d, table);
#endif
        else DISTATTN_REQUIRE(false, "cost_calibrate", "--dtypes: '" << dt << "' is not available in this build");
      }
    // One rate each for the table, measured at its smallest head dim (the most rows per byte).
    const int dmin = *std::min_element(dims.begin(), dims.end());
    table.set_elementwise_bytes_per_s(merge_bytes_per_s<float>(exec, c, dmin));
    table.set_copy_bytes_per_s(copy_bytes_per_s<float>(exec, c, dmin));
    std::ofstream f(outpath);
    DISTATTN_REQUIRE(f.good(), "cost_calibrate", "cannot write '" << outpath << "'");
    f << "# DistAttn cost-model tile throughput, measured by perf_tests/cost_calibrate on "
      << Exec::name() << " (heads " << c.heads << ", block sizes " << sizes[0] << " and " << sizes[1] << ")\n"
      << table.to_text();
    std::cout << table.to_text();
  } catch (const std::exception& e) {
    std::cerr << "cost_calibrate: " << e.what() << "\n";
    rc = 1;
  }
  Kokkos::finalize();
  return rc;
}
