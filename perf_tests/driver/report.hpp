// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run's results for people and programs: the verdict line that ends
// every run, the warning before a long fp64 check, and the --json file
// (context: build, hosts, devices, versions, command line; configuration, per-rank compute, wait, bytes and step timeline, medians, check
// errors, verdict; perf_tests/scripts/plot_results.py turns such files into PNGs).

#include "driver_common.hpp"
#include "driver_options.hpp"
#include "run_context.hpp"
#include "sync.hpp"

#include "common/flops.hpp"
#include "common/timer.hpp"

#include <DistAttn/executor/executor_options.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace DistAttn::Driver {

using Json = nlohmann::json;

/// The (query, key) pairs of the global sequence the mask allows, per batch and head.
inline double allowed_pairs(const Options& o) {
  return double(mask_options(o).mask_rule().allowed_pairs(o.seq, o.seq));
}

/// The allowed pairs' share of the N x N square.
inline double allowed_fraction(const Options& o) { return allowed_pairs(o) / (double(o.seq) * double(o.seq)); }

/// The mask beyond causality for the schedule's header line ("" without --window or --docs).
inline std::string mask_summary(const Options& o) {
  if (o.window_arg.empty() && o.docs.empty()) return "";
  std::string s;
  if (!o.window_arg.empty()) s += "  window " + window_text(o.window);
  if (!o.docs.empty()) s += "  docs " + std::to_string(o.documents.size() - 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "  allowed %.4g of the square", allowed_fraction(o));
  return s + buf;
}

/// Forward and backward FLOP of one pass: docs/PERFORMANCE.md's convention (N^2 / 2
/// scores for causal) on a dense mask, the allowed pairs only with --window or --docs.
inline std::pair<double, double> pass_flops(const Options& o) {
  const double N = double(o.seq);
  if (mask_options(o).mask_rule().is_dense())
    return {Perf::attn_fwd_flops(o.batch, o.heads, N, N, o.dim, o.causal),
            Perf::attn_bwd_flops(o.batch, o.heads, N, N, o.dim, o.causal)};
  const double pairs = allowed_pairs(o);
  return {Perf::attn_fwd_flops(o.batch, o.heads, pairs, 1.0, o.dim, false),
          Perf::attn_bwd_flops(o.batch, o.heads, pairs, 1.0, o.dim, false)};
}

/// The run's configuration as given (after --schedule auto has chosen).
inline Json config_json(const Options& o, int P) {
  const auto side = [](std::int64_t x) { return x >= kUnboundedSpan ? Json() : Json(x); };
  return Json{{"window_left", side(o.window.left)}, {"window_right", side(o.window.right)},
              {"docs", o.docs}, {"documents", o.documents.empty() ? 1 : o.documents.size() - 1},
              {"allowed_pair_fraction", allowed_fraction(o)},
              {"schedule", o.schedule}, {"grid", o.grid},         {"ulysses", o.ulysses},
              {"inner", o.inner},       {"dtype", o.dtype},       {"comm", o.comm.empty() ? "default" : o.comm},
              {"ranks", P},             {"seq", o.seq},           {"batch", o.batch},
              {"heads", o.heads},       {"kv_heads", o.kv_heads}, {"dim", o.dim},
              {"causal", o.causal},     {"backward", o.backward}, {"warmup", o.warmup},
              {"iters", o.iters},       {"check", o.check},       {"check_finite", o.check_finite},
              {"head_group", o.head_group}, {"delay_ms", o.delay_ms}, {"progress_s", o.progress_s},
              {"execution_space", Kokkos::DefaultExecutionSpace::name()}};
}

/// One pass's PassStats on this rank: times, counts, bytes (by kind) and steps.
template <class Stats>
Json pass_json(const Stats& s) {
  Json sent = Json::object(), recv = Json::object(), steps = Json::array();
  for (std::size_t k = 0; k < Stats::num_kinds; ++k) {
    const std::string kind = to_string(typename Stats::kind_type(k));
    sent[kind]             = s.bytes_sent[k];
    recv[kind]             = s.bytes_received[k];
  }
  for (const StepTime& t : s.timeline)
    steps.push_back({{"start_s", t.start_s}, {"compute_s", t.compute_s}, {"wait_s", t.wait_s},
                     {"bytes_received", t.bytes_received}});
  return Json{{"total_s", s.total_s},       {"compute_s", s.compute_s},     {"wait_s", s.wait_s},
              {"tasks", s.tasks},           {"merges", s.merges},           {"transfers", s.transfers},
              {"bytes_sent", s.total_sent()}, {"bytes_received", s.total_received()},
              {"bytes_sent_by_kind", sent}, {"bytes_received_by_kind", recv}, {"timeline", steps}};
}

/// Every rank's `mine`, in rank order, on rank 0 (empty elsewhere).
inline Json gather_json(const Json& mine, Sync& sync) {
  const std::string text = mine.dump();
  Json out               = Json::array();
  for (const auto& r : sync.gather(text.data(), text.size(), "the gather of the per-rank JSON records"))
    out.push_back(Json::parse(std::string(r.begin(), r.end())));
  return out;
}

/// fp64 reference work of --check (forward and, with --backward, backward; the
/// reference does every score of the square, masked or not).
inline double reference_flops(const Options& o) {
  const double f = Perf::attn_fwd_flops(o.batch, o.heads, double(o.seq), double(o.seq), o.dim, false);
  return f + (o.backward ? Perf::attn_bwd_flops(o.batch, o.heads, double(o.seq), double(o.seq), o.dim, false) : 0.0);
}

/// Host rate of the fp64 reference (forward + backward FLOP by reference_flops per
/// second) on rank 0, measured with this driver on a shared 2-core CPU machine
/// (docs/PERFORMANCE.md, "fp64 check"); an estimate for the warning only.
constexpr double kReferenceFlopsPerS = 0.5e9;

/// Where --check computes its reference (--reference): "host" (testing/reference.hpp)
/// or "device" (device_reference.hpp); "auto" is device where the default memory
/// space is not the host's.
inline bool reference_on_device(const Options& o) {
  if (o.reference == "auto")
    return !Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;
  return o.reference == "device";
}

/// Estimated seconds of --check's fp64 reference on rank 0's host (0 without --check).
inline double reference_seconds(const Options& o) { return o.check ? reference_flops(o) / kReferenceFlopsPerS : 0.0; }

/// A bound on the seconds of --schedule local on rank 0 (every pass at the fp64
/// reference's host rate, then --check), which the other ranks wait for.
inline double local_run_seconds(const Options& o) {
  const double f = Perf::attn_fwd_flops(o.batch, o.heads, double(o.seq), double(o.seq), o.dim, false);
  const double b = o.backward ? Perf::attn_bwd_flops(o.batch, o.heads, double(o.seq), double(o.seq), o.dim, false) : 0;
  return (o.warmup + o.iters) * (f + b) / kReferenceFlopsPerS + reference_seconds(o);
}

/// The warning before a --check estimated at more than half a minute, or "".
/// The rate is below 1 GFLOP/s, so it is printed with its significant digits
/// (a whole number of GFLOP/s read "~0").
inline std::string slow_check_warning(const Options& o) {
  const double s = reference_seconds(o);
  // No rate of the device reference is measured yet: no estimate for it.
  if (s <= 30 || reference_on_device(o)) return "";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "distattn-run: warning: --check computes the fp64 reference of the whole sequence on rank 0's "
                "host: about %.0f s (%.3g fp64 FLOP at ~%.2g GFLOP/s) after the timed passes\n",
                s, reference_flops(o), kReferenceFlopsPerS * 1e-9);
  return buf;
}

/// Rank 0 says how long --check will take when that is more than half a minute.
inline void warn_if_check_is_slow(const Options& o, int rank) {
  if (rank != 0) return;
  const std::string w = slow_check_warning(o);
  if (!w.empty()) std::fputs(w.c_str(), stderr);
}

/// What a run may claim: PASS only where its results were compared with the fp64
/// reference; a run without --check only finished (DONE), and any failure (of the
/// check, or of an executor's model check) is FAIL.
struct Verdict {
  const char* word;    ///< PASS | DONE | FAIL (the JSON "verdict")
  std::string detail;  ///< what was checked, for people
};
inline Verdict verdict_of(bool checked, int failures) {
  const std::string what = checked ? "checked against fp64" : "not checked";
  if (failures > 0) return {"FAIL", what + "; " + std::to_string(failures) + " failures"};
  return {checked ? "PASS" : "DONE", what};
}

/// Why `path` cannot take the --json file, or "" if it can: checked before the run
/// (the file is opened for appending, which changes nothing, and removed again if
/// this made it). A FIFO or socket would block or fail only when written.
inline std::string json_unwritable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  const std::string name   = "--json '" + path + "'";
  if (fs::is_directory(st)) return name + " is a directory";
  if (fs::is_fifo(st) || fs::is_socket(st)) return name + " is a FIFO or socket, not a file";
  const bool existed = fs::exists(st);
  errno              = 0;
  if (!std::ofstream(path, std::ios::app))
    return name + " cannot be written: " + (errno != 0 ? std::strerror(errno) : "open failed");
  if (!existed) fs::remove(path, ec);
  return "";
}

/// The results of one run as the verdict and the JSON file see them.
struct RunResult {
  std::vector<double> forward_s, backward_s;  ///< per timed iteration, max over ranks
  int failures = 0;                           ///< check or model mismatches, summed over ranks
  Json doc     = Json::object();              ///< rank 0: filled by the runner (ranks, check, ...)
};

/// Rank 0 prints the verdict line and writes --json. Call on every rank; returns
/// this rank's exit status: 1 on rank 0 when the run failed (any check or model
/// mismatch; a count would wrap around at 256) or the file could not be written,
/// else 0.
inline int finish(const Options& o, int P, RunResult& r, int rank) {
  if (rank != 0) return 0;
  const double tf = r.forward_s.empty() ? 0.0 : Perf::median(r.forward_s);
  const double tb = r.backward_s.empty() ? 0.0 : Perf::median(r.backward_s);
  const auto [ff, fb] = pass_flops(o);
  const double tflops_f = tf > 0 ? ff / tf * 1e-12 : 0.0, tflops_b = tb > 0 && o.backward ? fb / tb * 1e-12 : 0.0;
  const Verdict v       = verdict_of(o.check, r.failures);
  std::printf("# verdict: %s (%s)  %s P=%d N=%ld  forward %.4g s (%.4g TFLOP/s)", v.word, v.detail.c_str(),
              o.schedule.c_str(), P, o.seq, tf, tflops_f);
  if (o.backward) std::printf("  backward %.4g s (%.4g TFLOP/s)", tb, tflops_b);
  std::printf("\n");
  std::fflush(stdout);
  const int status = r.failures > 0 ? 1 : 0;
  if (o.json.empty()) return status;
  Json& d        = r.doc;
  d["program"]   = "distattn-run";
  d["context"]   = context_json();
  d["config"]    = config_json(o, P);
  d["median"]    = {{"forward_s", tf}, {"backward_s", o.backward ? tb : 0.0}};
  d["iterations"] = {{"forward_s", r.forward_s}, {"backward_s", o.backward ? r.backward_s : std::vector<double>{}}};
  d["throughput"] = {{"forward_tflops", tflops_f},
                     {"backward_tflops", tflops_b},
                     {"flop_convention", "docs/PERFORMANCE.md"}};
  d["failures"]  = r.failures;
  d["verdict"]   = v.word;
  d["checked"]   = o.check ? "fp64" : "none";
  std::ofstream f(o.json);
  f << d.dump(2) << '\n';
  if (f) return status;
  std::fprintf(stderr, "distattn-run: --json: could not write '%s'\n", o.json.c_str());
  return 1;
}

}  // namespace DistAttn::Driver
