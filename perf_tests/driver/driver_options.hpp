// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Options of distattn-run. Defaults finish in seconds on 2 CPU cores.

#include "common/args.hpp"
#include "common/machine_args.hpp"
#include "mask_options.hpp"

#include <DistAttn/executor/executor_spec.hpp>

#include <cctype>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

namespace DistAttn::Driver {

struct Options {
  std::string schedule = "balanced";  // auto | local | ring | balanced | zigzag | ulysses | hybrid | grid2d-no | grid2d-o
  std::string grid;                   // "RxC" for grid2d-* (and a grid2d inner executor), empty = auto
  int ulysses = 0;                    // hybrid: Ulysses degree U (0 = largest that fits)
  std::string inner = "zigzag";       // hybrid: ring | balanced | zigzag | grid2d-no | grid2d-o
  std::string dtype = "float";
  std::string comm;  // mpi | nccl; empty = nccl where built, else mpi
  int ranks = -1;  // -1: whatever mpiexec started
  long seq = 2048;
  int batch = 1, heads = 4, kv_heads = 2, dim = 64;
  bool causal = true, check = false, backward = true, print_schedule = false, help = false;
  int warmup = 1, iters = 3;
  double delay_ms = 0.0;  // injected receive delay (tests the waits, not speed)
  int head_group  = 0;    // ring kinds, grid2d: kv heads per pass (0 = all that fit)
  Perf::MachineArgs machine;  // --schedule auto: the cost model's machine (tile table, links, shared cores)
  int auto_show   = 8;        // --schedule auto: how many ranked choices to print
  bool predict_only = false;  // --schedule auto: print the ranking, run nothing
  bool fit = false;           // print the longest sequence that fits, run nothing
  int ulysses_groups = 0;     // ulysses: head groups the all-to-alls are pipelined over (0 = default)
  bool decompose = false;  // also time the schedule with transfers disabled (exposed communication)
  bool check_finite = false;  // executors scan their inputs for NaN/Inf on every pass
  std::string reference = "auto";  // where --check's reference runs: auto, host, device
  std::string json;           // write the results to this file (rank 0)
  double progress_s = 10.0;   // seconds between progress lines on stderr (0: none)
  int test_stop_rank = -1;    // DISTATTN_DRIVER_TEST_FAULT=stop:R (tests only; see read_test_fault)
  int test_failures  = 0;     // DISTATTN_DRIVER_TEST_FAULT=fail:N
  int test_gpu       = -1;    // DISTATTN_DRIVER_TEST_FAULT=gpu:N
  bool allow_shared_gpu = false;  // run even where two ranks share a GPU
  std::string window_arg;             // --window L[,R] as given (empty: unbounded)
  Window window{};                    // from --window
  std::string docs;                   // --docs as given (empty: one sequence)
  std::vector<std::int64_t> documents;  // global document offsets from --docs (empty: none)
  std::string docs_error;  // why --docs could not be read here: agreed across ranks before the run (run())
};

/// Faults the driver's own tests inject through the environment (no option: they
/// are not part of the interface), DISTATTN_DRIVER_TEST_FAULT=
///   stop:R  rank R stops itself (SIGSTOP) after its first forward and backward,
///           before the driver's next collective: the others must end the job, naming R;
///   fail:N  the run counts N more failures, as if N comparisons had failed;
///   gpu:N   every rank reports GPU N of its host as its own (the shared-GPU
///           check on a machine without GPUs).
inline void read_test_fault(Options& o) {
  const char* v = std::getenv("DISTATTN_DRIVER_TEST_FAULT");
  if (v == nullptr || *v == 0) return;
  const std::string s = v;
  const auto colon    = s.find(':');
  const std::string kind = s.substr(0, colon), number = colon == std::string::npos ? "" : s.substr(colon + 1);
  std::size_t used = 0;
  int n            = -1;
  try {
    if (!number.empty() && std::isdigit(static_cast<unsigned char>(number[0]))) n = std::stoi(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != number.size() || (kind != "stop" && kind != "fail" && kind != "gpu"))
    throw InvalidArgument("environment variable DISTATTN_DRIVER_TEST_FAULT='" + s +
                          "' is not stop:RANK, fail:COUNT or gpu:DEVICE");
  (kind == "stop" ? o.test_stop_rank : kind == "fail" ? o.test_failures : o.test_gpu) = n;
}

/// "RxC" with R, C >= 1.
inline std::string check_grid(const std::string& g) {
  std::size_t r = 0, c = 0;
  const auto x  = g.find('x');
  try {
    if (x != std::string::npos && std::stoi(g.substr(0, x), &r) >= 1 && r == x &&
        std::stoi(g.substr(x + 1), &c) >= 1 && x + 1 + c == g.size())
      return "";
  } catch (const std::exception&) {
  }
  return "'" + g + "' is not RxC with R, C >= 1 (e.g. 2x3)";
}

/// --schedule: the executors of the registry (executor/executor_spec.hpp), the
/// cost model's pick, and one device alone.
inline std::vector<std::string> schedule_names() {
  std::vector<std::string> n{"auto", "local"};
  for (ExecutorKind k : kAllExecutorKinds) n.push_back(to_string(k));
  return n;
}
/// --inner: the kinds a hybrid can run inside each head group.
inline std::vector<std::string> inner_names() {
  std::vector<std::string> n;
  for (ExecutorKind k : kAllExecutorKinds)
    if (is_ring(k) || is_grid2d(k)) n.push_back(to_string(k));
  return n;
}

/// The option table, bound to `o`.
inline void add_options(CLI::App& app, Options& o, int& causal) {
  using Perf::at_least;
  app.add_option("--schedule", o.schedule, "execution schedule")
      ->check(CLI::IsMember(schedule_names()))
      ->capture_default_str();
  app.add_option("--grid", o.grid, "process grid RxC for grid2d-* (default: chosen from P and heads)")
      ->check(CLI::Validator(check_grid, "RxC"));
  app.add_option("--ulysses", o.ulysses, "hybrid: Ulysses degree over heads (default 0: the largest that fits)")
      ->check(at_least(0));
  app.add_option("--inner", o.inner, "hybrid: the sequence executor inside each head group")
      ->check(CLI::IsMember(inner_names()))
      ->capture_default_str();
  app.add_option("--head-group", o.head_group, "ring kinds, grid2d-no/grid2d-o: kv heads per pass (default 0: all heads that fit)")
      ->check(at_least(0));
  Perf::add_machine_options(app, o.machine, false);
  app.add_flag("--predict-only", o.predict_only, "auto: print the cost model's ranking and run nothing");
  app.add_flag("--fit", o.fit,
               "print the longest sequence (multiple of the schedule's unit) whose tensors and workspace fit in "
               "every rank's free device memory or DISTATTN_MEMORY_LIMIT, from the memory plans; run nothing");
  app.add_option("--ulysses-groups", o.ulysses_groups,
                 "ulysses: head groups its all-to-alls are pipelined over (default 0: up to 4)")
      ->check(at_least(0));
  app.add_option("--auto-show", o.auto_show, "auto: ranked choices to print")->check(at_least(1))
      ->capture_default_str();
  app.add_option("--ranks", o.ranks, "expected number of MPI ranks (error if different)")->check(at_least(1));
  app.add_flag("--allow-shared-gpu", o.allow_shared_gpu,
               "run even where two ranks of a host share one GPU (refused by default: a binding that did not take; "
               "also DISTATTN_ALLOW_SHARED_GPU=1)");
  Perf::add_length(app, "--seq", o.seq, "global sequence length");
  app.add_option("--batch", o.batch, "batch size")->check(at_least(1))->capture_default_str();
  app.add_option("--heads", o.heads, "query heads")->check(at_least(1))->capture_default_str();
  app.add_option("--kv-heads", o.kv_heads, "key/value heads (default min(heads, 2))")->check(at_least(1));
  app.add_option("--dim", o.dim, "head dimension")->check(at_least(1))->capture_default_str();
  app.add_option("--dtype", o.dtype, "element type")->check(CLI::IsMember(Perf::dtype_choices()))->capture_default_str();
  app.add_option("--comm", o.comm, "transport (default nccl where built, else mpi)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  app.add_option("--causal", causal, "causal mask")->check(CLI::Range(0, 1))->capture_default_str();
  app.add_option("--window", o.window_arg,
                 "key window in tokens: a query at position p sees keys in [p - L, p + R]; L alone is the causal "
                 "sliding window (R = 0); R matters with --causal 0 (default: unbounded)")
      ->check(CLI::Validator(check_window, "L[,R]"));
  app.add_option("--docs", o.docs,
                 "packed documents: a file of one document length per line, summing to --seq, or dist:lognormal8k:SEED "
                 "(log-normal lengths, mean 8192 tokens, capped to sum to --seq); a query sees keys of its own "
                 "document only (default: one sequence)");
  app.add_flag("--fwd-only{false}", o.backward, "skip the backward pass");
  app.add_flag("--check", o.check, "gather results and compare with the fp64 reference");
  app.add_option("--reference", o.reference,
                 "where --check's fp64 reference runs: host (a plain loop), device (the library's portable "
                 "kernels in fp64 on the GPU of CUDA builds) or auto (device where memory is not the host's)")
      ->check(CLI::IsMember({"auto", "host", "device"}))
      ->capture_default_str();
  app.add_option("-w,--warmup", o.warmup, "warm-up iterations")->check(at_least(0))->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed iterations")->check(at_least(1))->capture_default_str();
  app.add_option("--delay-ms", o.delay_ms, "sleep before every receive completes (testing aid)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--print-schedule", o.print_schedule, "draw the schedule table on rank 0");
  app.add_flag("--check-finite", o.check_finite,
               "executors scan q, k, v (and dO) for NaN/Inf on every pass (costs a read and a host wait)");
  app.add_option("--json", o.json,
                 "write configuration, per-rank compute, wait, bytes and step timeline, medians and the verdict "
                 "to this file (perf_tests/scripts/plot_results.py plots it)");
  app.add_option("--progress", o.progress_s, "seconds between progress lines on stderr from rank 0 (0: none)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  // A callback, not add_flag(name, o.progress_s): CLI11 takes a flag bound to a
  // number for a counter and zeroes it when the flag is defined.
  app.add_flag_callback("--no-progress", [&o] { o.progress_s = 0; }, "no progress lines (same as --progress 0)");
  app.add_flag("--decompose", o.decompose,
               "also time the schedule with communication disabled and report exposed communication = time - "
               "compute-only time");
}

constexpr const char* kAbout = "Exact causal attention over the MPI ranks of the job.";
constexpr const char* kName  = "distattn-run";
constexpr const char* kStart = "Start: mpiexec -n P distattn-run [OPTIONS]";

inline void print_usage(std::ostream& os) {
  Options o;
  int causal = 1;
  CLI::App app(kAbout, kName);
  add_options(app, o, causal);
  Perf::add_kokkos_help(app);
  app.footer(kStart);
  os << app.help();
}

/// Throws InvalidArgument naming the option and its valid range or choices.
inline Options parse_options(int argc, char** argv) {
  Options o;
  int causal = 1;
  CLI::App app(kAbout, kName);
  add_options(app, o, causal);
  o.help   = !Perf::parse_command_line(app, argc, argv);
  o.causal = causal != 0;
  read_test_fault(o);
  if (!o.window_arg.empty()) o.window = parse_window(o.window_arg);
  if (!o.docs.empty()) {
    try {
      o.documents = read_docs(o.docs, o.seq);
    } catch (const InvalidArgument& e) {
      o.docs_error = e.what();
    }
  }
  // The same as --allow-shared-gpu, for test suites and scripts that start more
  // ranks than GPUs on purpose (ctest's *_mpi driver tests on GPU builds).
  const char* shared = std::getenv("DISTATTN_ALLOW_SHARED_GPU");
  if (shared != nullptr && *shared != 0 && std::string(shared) != "0") o.allow_shared_gpu = true;
  if (app.count("--kv-heads") == 0) o.kv_heads = o.heads < 2 ? o.heads : 2;
  if (o.heads % o.kv_heads != 0)
    throw InvalidArgument("--kv-heads " + std::to_string(o.kv_heads) + " must divide --heads " +
                          std::to_string(o.heads) + " (grouped-query attention)");
  return o;
}

}  // namespace DistAttn::Driver
