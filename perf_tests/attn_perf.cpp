// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Single-device attention perf test (nccl-tests-style table).
//
//   attn_perf -b 1024 -e 8192 -f 2 --heads 32 --kv-heads 32 --dim 128 --dtype bf16 --causal 1
//             --dir both -w 2 -n 10 -c 1 [-J out.json] [--path auto|portable|cuda] [--sgemm 2048]
//             [--bwd-prep fused|separate]
//
// time = median over -n iterations after -w warm-ups (CUDA events on GPUs) of the
// library calls: forward = attention_fwd; backward = attention_bwd_prepare (Delta and
// the zeroed fp32 dq/dk/dv in one pass where a tuned kernel exists; --bwd-prep
// separate: attention_bwd_delta and three fills instead) and attention_bwd_update;
// TFLOP/s uses docs/PERFORMANCE.md's conventions; #wrong counts output elements
// outside the dtype's tolerance against the fp64 reference (forward: sampled rows
// of two heads at any size; backward: every element, only for S <= 2048, "-" beyond).
// --sgemm N times an N^3 fp32 KokkosBlas::gemm on the host before and after the
// table (the CPU anchor of docs/PERFORMANCE.md) and adds each row's rate as a
// fraction of the first.

#include <DistAttn/DistAttn.hpp>
#include <DistAttn/testing/random_fill.hpp>
#include <DistAttn/testing/reference.hpp>

#include "common/args.hpp"
#include "common/kokkos_args.hpp"

#include <nlohmann/json.hpp>
#include "common/flops.hpp"
#include "common/sgemm_rate.hpp"
#include "common/timer.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>

namespace DistAttn::Perf {
namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem  = Exec::memory_space;

struct Config {
  long b_min = 256, b_max = 1024;
  double factor = 2.0;
  int batch = 1, heads = 4, kv_heads = 4, dim = 64, warmup = 2, iters = 5, sgemm = 0;
  double sgemm_gflops = 0;
  bool causal = true, check = true, fwd = true, bwd = true, fused_prep = true;
  std::string dtype = "float", json, path = "auto";
};

template <class T>
constexpr double wrong_tol() {
  if constexpr (std::is_same<T, double>::value) return 1e-9;
  else if constexpr (std::is_same<T, float>::value) return 1e-4;
  else if constexpr (std::is_same<T, compat::half_t>::value) return 1e-2;
  else return 4e-2;
}

template <class V>
Testing::HostTensor host_copy(const V& d) {
  Kokkos::View<typename V::non_const_value_type****, Kokkos::LayoutRight, Mem> tmp(
      "tmp", d.extent(0), d.extent(1), d.extent(2), d.extent(3));
  Kokkos::deep_copy(tmp, d);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tmp);
  Testing::HostTensor out("host", d.extent(0), d.extent(1), d.extent(2), d.extent(3));
  for (std::size_t i = 0; i < h.span(); ++i) out.data()[i] = double(h.data()[i]);
  return out;
}

/// Forward check on sampled rows of heads {0, H-1}: exact fp64 attention of those rows.
template <class T>
long check_fwd_sampled(const Tensor4<T, Mem>& q, const Tensor4<T, Mem>& k, const Tensor4<T, Mem>& v,
                       const Tensor4<T, Mem>& o, const Config& c, double scale) {
  const int S = int(q.extent(1)), G = c.heads / c.kv_heads;
  long wrong  = 0;
  for (int h : {0, c.heads - 1}) {
    const auto A = Kokkos::ALL;
    auto hq = host_copy(Kokkos::subview(q, A, A, std::make_pair(h, h + 1), A));
    auto ho = host_copy(Kokkos::subview(o, A, A, std::make_pair(h, h + 1), A));
    auto hk = host_copy(Kokkos::subview(k, A, A, std::make_pair(h / G, h / G + 1), A));
    auto hv = host_copy(Kokkos::subview(v, A, A, std::make_pair(h / G, h / G + 1), A));
    const int samples = std::min(S, 24);
    for (int sidx = 0; sidx < samples; ++sidx) {
      const int i = int((long(sidx) * 7919 + 13) % S);
      Testing::HostTensor rq("rq", c.batch, 1, 1, c.dim), ro("ro", c.batch, 1, 1, c.dim);
      Testing::HostStats rl("rl", c.batch, 1, 1);
      for (int b = 0; b < c.batch; ++b)
        for (int d = 0; d < c.dim; ++d) rq(b, 0, 0, d) = hq(b, i, 0, d);
      const Mask m = c.causal ? Mask::causal({i, 1}, {0, 1}) : Mask::none();
      Testing::reference_fwd(rq, hk, hv, m, scale, ro, rl);
      auto orow = Kokkos::subview(ho, A, std::make_pair(i, i + 1), A, A);
      wrong += Testing::count_wrong(orow, ro, wrong_tol<T>(), wrong_tol<T>());
    }
  }
  return wrong;
}

template <class T>
long check_bwd_full(const Tensor4<T, Mem>& q, const Tensor4<T, Mem>& k, const Tensor4<T, Mem>& v,
                    const Tensor4<T, Mem>& dout, const Tensor4<T, Mem>& dq, const Tensor4<T, Mem>& dk,
                    const Tensor4<T, Mem>& dv, const Mask& mask, double scale) {
  auto hq = host_copy(q), hk = host_copy(k), hv = host_copy(v), hdo = host_copy(dout);
  Testing::HostTensor rdq("rdq", q.extent(0), q.extent(1), q.extent(2), q.extent(3));
  Testing::HostTensor rdk("rdk", k.extent(0), k.extent(1), k.extent(2), k.extent(3));
  Testing::HostTensor rdv("rdv", k.extent(0), k.extent(1), k.extent(2), k.extent(3));
  Testing::reference_bwd(hq, hk, hv, hdo, mask, scale, rdq, rdk, rdv);
  // Gradients are sums over S terms: scale the absolute part of the tolerance by
  // their typical magnitude.
  const double tol = 2 * wrong_tol<T>();
  return Testing::count_wrong(host_copy(dq), rdq, tol, tol) + Testing::count_wrong(host_copy(dk), rdk, tol, tol) +
         Testing::count_wrong(host_copy(dv), rdv, tol, tol);
}

template <class T>
void run(const Config& c, nlohmann::json& json) {
  using Acc = accum_t<T>;
  Exec exec;
  AttnOptions opts;
  opts.mask         = c.causal ? Mask::causal() : Mask::none();
  opts.check_finite = false;  // timed region = kernels only
  opts.path = c.path == "portable" ? KernelPath::Portable : (c.path == "cuda" ? KernelPath::Cuda : KernelPath::Auto);
  for (long S = c.b_min; S <= c.b_max; S = std::max(S + 1, long(double(S) * c.factor))) {
    Tensor4<T, Mem> q("q", c.batch, S, c.heads, c.dim), k("k", c.batch, S, c.kv_heads, c.dim),
        v("v", c.batch, S, c.kv_heads, c.dim), o("o", c.batch, S, c.heads, c.dim);
    RowStats<Acc, Mem> lse("lse", c.batch, c.heads, S);
    const std::uint64_t seed = std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    Testing::fill_random_device(exec, q, seed);
    Testing::fill_random_device(exec, k, seed + 1);
    Testing::fill_random_device(exec, v, seed + 2);
    const double scale = resolved_scale(opts, c.dim);

    EventTimer<Exec> timer(exec);
    auto time_it = [&](auto&& fn) { return median_seconds(timer, c.warmup, c.iters, fn); };
    // The one-call API as users call it: on the tuned path it writes O and LSE
    // directly; otherwise it runs make_state + attention_fwd_update + finalize.
    auto fwd = [&] { attention_fwd(exec, q, k, v, o, lse, opts); };
    double tf = 0, tb = 0;
    std::string wf = "-", wb = "-";
    if (c.fwd || c.bwd) {
      tf = time_it(fwd);
      if (c.check) wf = std::to_string(check_fwd_sampled<T>(q, k, v, o, c, scale));
    }
    if (c.bwd) {
      Tensor4<T, Mem> dout("dout", c.batch, S, c.heads, c.dim);
      Testing::fill_random_device(exec, dout, seed + 3);
      RowStats<Acc, Mem> delta("delta", c.batch, c.heads, S);
      Tensor4<Acc, Mem> gq("gq", c.batch, S, c.heads, c.dim), gk("gk", c.batch, S, c.kv_heads, c.dim),
          gv("gv", c.batch, S, c.kv_heads, c.dim);
      auto bwd = [&] {
        if (c.fused_prep) {
          attention_bwd_prepare(exec, o, dout, delta, gq, gk, gv, opts);
        } else {
          attention_bwd_delta(exec, o, dout, delta);
          Kokkos::deep_copy(exec, gq, Acc(0));
          Kokkos::deep_copy(exec, gk, Acc(0));
          Kokkos::deep_copy(exec, gv, Acc(0));
        }
        attention_bwd_update(exec, q, k, v, dout, lse, delta, gq, gk, gv, opts);
      };
      tb = time_it(bwd);
      if (c.check && S <= 2048) {
        Tensor4<T, Mem> dq("dq", c.batch, S, c.heads, c.dim), dk("dk", c.batch, S, c.kv_heads, c.dim),
            dv("dv", c.batch, S, c.kv_heads, c.dim);
        Impl::convert4(exec, gq, dq, "cvt");
        Impl::convert4(exec, gk, dk, "cvt");
        Impl::convert4(exec, gv, dv, "cvt");
        wb = std::to_string(check_bwd_full<T>(q, k, v, dout, dq, dk, dv, opts.mask, scale));
      }
    }
    const double ff = attn_fwd_flops(c.batch, c.heads, double(S), double(S), c.dim, c.causal);
    const double fb = attn_bwd_flops(c.batch, c.heads, double(S), double(S), c.dim, c.causal);
    const double rf = c.sgemm > 0 ? ff / tf * 1e-9 / c.sgemm_gflops : 0.0;
    const double rb = c.sgemm > 0 && c.bwd ? fb / tb * 1e-9 / c.sgemm_gflops : 0.0;
    char line[256];
    std::snprintf(line, sizeof line, "%9ld %3d %4d %4d %4d %6s %6d %12.1f %9.4f %7s %12.1f %9.4f %7s", S, c.batch,
                  c.heads, c.kv_heads, c.dim, c.dtype.c_str(), int(c.causal), tf * 1e6, ff / tf * 1e-12, wf.c_str(),
                  c.bwd ? tb * 1e6 : 0.0, c.bwd ? fb / tb * 1e-12 : 0.0, wb.c_str());
    std::cout << line;
    if (c.sgemm > 0) {
      std::snprintf(line, sizeof line, " %8.3f %8.3f", rf, rb);
      std::cout << line;
    }
    std::cout << std::endl;
    nlohmann::json row{{"seq", S},         {"batch", c.batch},   {"heads", c.heads},
                       {"kv_heads", c.kv_heads}, {"dim", c.dim}, {"dtype", c.dtype},
                       {"causal", int(c.causal)}, {"fwd_us", tf * 1e6}, {"fwd_tflops", ff / tf * 1e-12},
                       {"fwd_wrong", wf}};
    if (c.bwd) {
      row["bwd_us"]     = tb * 1e6;
      row["bwd_tflops"] = fb / tb * 1e-12;
      row["bwd_wrong"]  = wb;
    }
    if (c.sgemm > 0) {
      row["sgemm_gflops"] = c.sgemm_gflops;
      row["fwd_x_sgemm"]  = rf;
      if (c.bwd) row["bwd_x_sgemm"] = rb;
    }
    json.push_back(row);
    if (wf != "-" && wf != "0") throw Error("forward check failed at S=" + std::to_string(S) + ": " + wf + " wrong");
    if (wb != "-" && wb != "0") throw Error("backward check failed at S=" + std::to_string(S) + ": " + wb + " wrong");
  }
}

}  // namespace
}  // namespace DistAttn::Perf

int main(int argc_all, char** argv_all) {
  DistAttn::Perf::KokkosArgs args(argc_all, argv_all);
  Kokkos::ScopeGuard guard(args.kokkos_argc(), args.kokkos_argv());
  const int argc = args.tool_argc();
  char** argv    = args.tool_argv();
  using namespace DistAttn::Perf;
  try {
    Config c;
    int causal = 1, check = 1;
    std::string dir = "both", bwd_prep = "fused";
    CLI::App app("Single-device attention timings against the fp64 reference.", "attn_perf");
    add_length(app, "-b,--min-seq", c.b_min, "first sequence length");
    add_length(app, "-e,--max-seq", c.b_max, "last sequence length");
    app.add_option("-f,--step-factor", c.factor, "sequence length factor per row")
        ->check(CLI::Range(1.0, 1024.0))->capture_default_str();
    app.add_option("--batch", c.batch, "batch size")->check(at_least(1))->capture_default_str();
    app.add_option("--heads", c.heads, "query heads")->check(at_least(1))->capture_default_str();
    app.add_option("--kv-heads", c.kv_heads, "key/value heads (default: --heads)")->check(at_least(1));
    app.add_option("--dim", c.dim, "head dimension")->check(at_least(1))->capture_default_str();
    app.add_option("-w,--warmup", c.warmup, "warm-up iterations")->check(at_least(0))->capture_default_str();
    app.add_option("-n,--iters", c.iters, "timed iterations")->check(at_least(1))->capture_default_str();
    app.add_option("--causal", causal, "causal mask")->check(CLI::Range(0, 1))->capture_default_str();
    app.add_option("-c,--check", check, "count wrong elements")->check(CLI::Range(0, 1))->capture_default_str();
    app.add_option("--dir", dir, "passes")->check(CLI::IsMember({"fwd", "bwd", "both"}))->capture_default_str();
    app.add_option("--dtype", c.dtype, "element type")->check(CLI::IsMember(dtype_choices()))->capture_default_str();
    app.add_option("-J,--json", c.json, "also write the rows to this JSON file");
    app.add_option("--path", c.path, "kernel path")->check(CLI::IsMember({"auto", "portable", "cuda"}))->capture_default_str();
    app.add_option("--bwd-prep", bwd_prep, "backward prologue: one fused pass, or the Delta pass and three fills")
        ->check(CLI::IsMember({"fused", "separate"}))->capture_default_str();
    app.add_option("--sgemm", c.sgemm, "time a host SGEMM of this size as the anchor (0: none)")->check(at_least(0));
    if (!parse_command_line(app, argc, argv)) {
      std::cout << app.help();
      return 0;
    }
    if (app.count("--kv-heads") == 0) c.kv_heads = c.heads;
    c.causal = causal != 0;
    c.check  = check != 0;
    c.fused_prep = bwd_prep == "fused";
    c.fwd    = dir == "fwd" || dir == "both";
    c.bwd    = dir == "bwd" || dir == "both";
    if (c.b_max < c.b_min)
      throw DistAttn::InvalidArgument("-e/--max-seq " + std::to_string(c.b_max) + " must be >= -b/--min-seq " +
                                      std::to_string(c.b_min));

    DistAttn::print_configuration(std::cout);
    if (c.sgemm > 0) {
      c.sgemm_gflops = host_sgemm_gflops(c.sgemm, 5);
      std::cout << "# sgemm anchor: KokkosBlas::gemm fp32 " << c.sgemm << "^3 on the host: " << c.sgemm_gflops
                << " GFLOP/s (x_sgemm columns: row rate / this)\n";
    }
    std::cout << "# test attn_perf  dtype " << c.dtype << "  causal " << c.causal << "  b " << c.batch << " h "
              << c.heads << " h_kv " << c.kv_heads << " d " << c.dim << "  warmup " << c.warmup << " iters "
              << c.iters << " check " << c.check << " path " << c.path << " bwd-prep " << bwd_prep << "\n#\n"
              << "#     seq   b    h h_kv    d  dtype causal     fwd_time  fwd_TF/s  #wrong     bwd_time  bwd_TF/s  #wrong"
              << (c.sgemm > 0 ? "  fwd_x_sg bwd_x_sg\n" : "\n")
              << "#     (T)                                          (us)                          (us)\n";
    nlohmann::json json = nlohmann::json::array();
    if (c.dtype == "float") run<float>(c, json);
    else if (c.dtype == "double") run<double>(c, json);
#if defined(KOKKOS_ENABLE_CUDA)
    else if (c.dtype == "bf16" && DistAttn::compat::has_bhalf) run<DistAttn::compat::bhalf_t>(c, json);
    else if (c.dtype == "fp16" && DistAttn::compat::has_half) run<DistAttn::compat::half_t>(c, json);
#endif
    else throw DistAttn::InvalidArgument("--dtype '" + c.dtype + "' has no instantiation");
    if (!c.json.empty()) {
      std::ofstream f(c.json);
      f << json.dump(2) << '\n';
    }
    if (c.sgemm > 0)
      std::cout << "# sgemm anchor after the table: " << host_sgemm_gflops(c.sgemm, 5) << " GFLOP/s\n";
    std::cout << "# Out of bounds values : 0 OK\n# Test concluded: attn_perf\n";
  } catch (const std::exception& e) {
    std::cerr << "attn_perf: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
