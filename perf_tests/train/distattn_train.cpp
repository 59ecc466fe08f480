// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// distattn-train: training steps of an L-layer decoder stack (issue #13) on MPI
// ranks, for each checkpoint policy with the same executor, weights and data:
// forward, loss (mean squared error to a fixed random target), backward, SGD.
// Prints a progress line per step and one summary row per policy: step time
// (median over steps of the maximum over ranks; also CPU time), tokens/s, model
// TFLOP/s, attention forwards per layer, and memory per rank. Policies must give
// identical losses (their gradients are bitwise identical) when the attention
// kernels are deterministic (CPU builds, or --deterministic), and losses within a
// tolerance of the element type otherwise (the tuned GPU backward adds dQ with
// atomics, so its last bits vary from run to run); the run fails otherwise.

#include "common/communicator_choice.hpp"
#include "common/kokkos_args.hpp"
#include "common/timer.hpp"
#include "train_options.hpp"

#include <cstdlib>
#include <DistAttn/layer.hpp>
#include <DistAttn/testing/layer_init.hpp>

#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

namespace DistAttn::Train {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem  = Exec::memory_space;

struct PolicyResult {
  CheckpointPolicy policy;
  std::vector<double> step_s, cpu_s, losses;
  std::vector<int> calls;
  std::size_t saved_bytes = 0, held_bytes = 0, peak_bytes = 0;
};

double max_over_ranks(double v) {
  double m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

/// CPU seconds (user + system) this process has used: on a shared machine the
/// wall time includes other jobs' time slices, the CPU time much less of them.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// Peak memory of this rank: device memory in use on CUDA builds (sampled after
/// each step), else the process's peak resident set (monotonic over the run).
std::size_t memory_in_use() {
#if defined(KOKKOS_ENABLE_CUDA)
  std::size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  return total_b - free_b;
#else
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return std::size_t(u.ru_maxrss) * 1024;
#endif
}

/// Model FLOPs of one step (forward + backward, no recomputation counted): the
/// linear layers 2 FLOPs per weight per token forward and twice that backward;
/// attention by perf_tests/common/flops.hpp's causal convention (backward 2.5x).
double model_flops(const Options& o) {
  const DecoderConfig& c = o.cfg;
  const double tokens    = double(o.batch) * double(o.seq);
  const double weights   = double(c.hidden) * (2.0 * c.q_width() + 2.0 * c.kv_width() + 3.0 * c.mlp_hidden);
  const double linear    = 3.0 * 2.0 * weights * tokens;
  const double attn_fwd  = 4.0 * o.batch * c.heads * double(o.seq) * double(o.seq) * c.head_dim * 0.5;
  return o.layers * (linear + 3.5 * attn_fwd);
}

/// loss = sum((out - target)^2) / (2 count) over all ranks; dout = (out - target) / count.
template <class V>
double mse_loss(const V& out, const V& target, const V& dout, double count) {
  using T        = typename V::non_const_value_type;
  const long n   = long(out.span());
  const T* po    = out.data();
  const T* pt    = target.data();
  T* pd          = dout.data();
  const T inv    = T(1.0 / count);
  double local   = 0;
  Kokkos::parallel_reduce(
      "DistAttn::Train::mse_loss", Kokkos::RangePolicy<Exec>(0, n),
      KOKKOS_LAMBDA(long i, double& acc) {
        const T d = po[i] - pt[i];
        pd[i]     = d * inv;
        acc += double(d) * double(d);
      },
      local);
  double total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return total / (2.0 * count);
}

template <class T, class CommSpace, class Attn>
PolicyResult run_policy(const Options& o, Communicator<CommSpace, Exec>& comm, const Exec& compute, Attn& attn,
                        CheckpointPolicy policy) {
  using X3 = Kokkos::View<T***, Kokkos::LayoutRight, Mem>;
  DecoderStack<T, CommSpace, Exec, Attn> stack(comm, attn, compute, o.cfg, o.layers, o.batch, policy);
  for (int l = 0; l < o.layers; ++l) Testing::fill_layer_weights(Exec(), stack.weights(l), 1000 + l);
  const int c = stack.layout().chunk;
  X3 x("x", o.batch, c, o.cfg.hidden), target("target", o.batch, c, o.cfg.hidden);
  X3 out("out", o.batch, c, o.cfg.hidden), dout("dout", o.batch, c, o.cfg.hidden), dx("dx", o.batch, c, o.cfg.hidden);
  // Inputs and targets are seeded by rank: any data will do for timing, and the
  // same on every policy.
  Kokkos::View<T*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> xf(x.data(), x.span()), tf(target.data(), x.span());
  Testing::fill_random_flat(Exec(), xf, 77 + comm.rank(), 1.0);
  Testing::fill_random_flat(Exec(), tf, 99 + comm.rank(), 1.0);
  const double count = double(o.batch) * double(o.seq) * o.cfg.hidden;

  PolicyResult r;
  r.policy = policy;
  const double flops = model_flops(o), tokens = double(o.batch) * double(o.seq);
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    compat::global_fence("DistAttn::Train: step start");
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0   = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    Kokkos::Profiling::pushRegion("DistAttn::Train::step");
    stack.forward(x, out);
    const double loss = mse_loss(out, target, dout, count);
    stack.backward(dout, dx);
    stack.sgd_step(o.lr);
    Kokkos::Profiling::popRegion();
    compat::global_fence("DistAttn::Train: step end");
    const double dt  = max_over_ranks(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    const double cpu = max_over_ranks(cpu_seconds() - c0);
    r.peak_bytes    = std::max(r.peak_bytes, memory_in_use());
    const bool timed = s >= o.warmup;
    if (timed) {
      r.step_s.push_back(dt);
      r.cpu_s.push_back(cpu);
      r.losses.push_back(loss);
    }
    if (comm.rank() == 0)
      std::printf("[%s] step %d/%d%s  loss %.6e  %.3f s (cpu %.3f s)  %.0f tokens/s  %.4f TFLOP/s\n",
                  to_string(policy), timed ? s - o.warmup + 1 : s + 1, timed ? o.steps : o.warmup,
                  timed ? "" : " (warm-up)", loss, dt, cpu, tokens / dt, flops / dt * 1e-12);
    std::fflush(stdout);
  }
  r.calls       = stack.attention_forward_calls();
  r.saved_bytes = stack.saved_bytes();
  r.held_bytes  = stack.held_bytes();
  return r;
}

/// 0 (bitwise) where every kernel is deterministic; else a few units of the
/// element type's rounding, which run-to-run differences of the atomically added
/// dQ grow to over a few steps.
template <class T>
double loss_tolerance(const Options& o) {
#if defined(KOKKOS_ENABLE_CUDA)
  if (!o.deterministic) return Impl::is_16bit_v<T> ? 2e-2 : std::is_same<T, float>::value ? 1e-4 : 1e-10;
#endif
  (void)o;
  return 0;
}

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) d = std::max(d, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-300));
  return d;
}

int expected_calls(CheckpointPolicy p) { return p == CheckpointPolicy::LayerBoundary ? 2 : 1; }

template <class T, class CommSpace, class Attn>
int run_all(const Options& o, Communicator<CommSpace, Exec>& comm, const Exec& compute, Attn& attn) {
  std::vector<PolicyResult> results;
  for (auto p : o.policies) results.push_back(run_policy<T>(o, comm, compute, attn, p));
  int bad = 0;
  if (comm.rank() == 0) {
    std::printf("\n# distattn-train: %s, P=%d, N=%ld, B=%d, L=%d, E=%d, H=%d, Hkv=%d, d=%d, F=%d, %s, comm %s\n",
                o.schedule.c_str(), comm.size(), o.seq, o.batch, o.layers, o.cfg.hidden, o.cfg.heads, o.cfg.kv_heads,
                o.cfg.head_dim, o.cfg.mlp_hidden, o.dtype.c_str(),
                std::is_same<CommSpace, MpiSpace>::value ? "MPI" : "NCCL");
    std::printf("# %-15s %10s %10s %10s %10s %9s %10s %10s %10s\n", "policy", "step_ms", "cpu_ms", "tokens/s",
                "TFLOP/s", "attn_fwd", "saved_MiB", "stack_MiB", "peak_MiB");
  }
  const double flops = model_flops(o), tokens = double(o.batch) * double(o.seq);
  for (const auto& r : results) {
    const double med  = Perf::median(r.step_s);
    const double peak = max_over_ranks(double(r.peak_bytes)), held = max_over_ranks(double(r.held_bytes));
    const double saved = max_over_ranks(double(r.saved_bytes));
    bool calls_ok      = true;
    for (int c : r.calls) calls_ok = calls_ok && c == expected_calls(r.policy);
    if (!calls_ok) ++bad;
    if (comm.rank() == 0)
      std::printf("  %-15s %10.1f %10.1f %10.0f %10.4f %9d %10.2f %10.2f %10.2f%s\n", to_string(r.policy), med * 1e3,
                  Perf::median(r.cpu_s) * 1e3, tokens / med, flops / med * 1e-12, r.calls.empty() ? 0 : r.calls[0],
                  saved / 1048576.0, held / 1048576.0, peak / 1048576.0,
                  calls_ok ? "" : "  WRONG attention forward count");
  }
  const double tol = loss_tolerance<T>(o);
  double worst     = 0;
  for (const auto& r : results) {
    const double d = max_relative_difference(r.losses, results[0].losses);
    worst          = std::max(worst, d);
    if (d > tol) {
      ++bad;
      if (comm.rank() == 0)
        std::printf("# %s: losses differ from %s's by %.3e relative (allowed %.1e)\n", to_string(r.policy),
                    to_string(results[0].policy), d, tol);
    }
  }
  if (comm.rank() == 0 && results.size() > 1 && bad == 0) {
    if (tol == 0) std::printf("# losses identical across policies: yes\n");
    else std::printf("# losses across policies within %.1e relative (largest difference %.3e; non-deterministic kernels)\n", tol, worst);
  }
  return bad;
}

template <class T, class CommSpace>
int run_with_comm(const Options& o, Communicator<CommSpace, Exec>& comm, const Exec& compute) {
  const int P = comm.size();
  DISTATTN_REQUIRE(o.seq % P == 0, "distattn-train", "--seq (" << o.seq << ") must be a multiple of the ranks (" << P << ")");
  const int chunk = int(o.seq / P);
  if (o.schedule == "grid2d-no" || o.schedule == "grid2d-o") {
    Grid2DOptions g;
    g.variant            = o.schedule == "grid2d-no" ? Grid2DVariant::NO : Grid2DVariant::O;
    g.attn.deterministic = o.deterministic;
    Grid2DAttention<T, CommSpace, Exec> attn(comm, 0, 0, compute, o.batch, o.seq, o.cfg.heads, o.cfg.kv_heads,
                                             o.cfg.head_dim, g);
    return run_all<T>(o, comm, compute, attn);
  }
  RingOptions r;
  r.attn.deterministic = o.deterministic;
  if (o.schedule == "ring") r.kind = RingKind::Vanilla;
  else if (o.schedule == "balanced") r.kind = RingKind::Balanced;
  else if (o.schedule == "zigzag") r.kind = RingKind::Zigzag;
  else throw InvalidArgument("--schedule: '" + o.schedule + "' is not ring, balanced, zigzag, grid2d-no or grid2d-o");
  RingAttention<T, CommSpace, Exec> attn(comm, compute, o.batch, chunk, o.cfg.heads, o.cfg.kv_heads, o.cfg.head_dim, r);
  return run_all<T>(o, comm, compute, attn);
}

template <class T, class CommSpace>
int run_with(const Options& o, Communicator<CommSpace, Exec>& comm, const Exec& compute) {
  if constexpr (Impl::is_16bit_v<T> && std::is_same<CommSpace, MpiSpace>::value) {
    // MPI has no 16-bit floating sum for the weight-gradient all-reduce.
    throw InvalidArgument("--dtype " + o.dtype + " needs --comm nccl (MPI has no 16-bit sum)");
  } else {
    return run_with_comm<T>(o, comm, compute);
  }
}

template <class T>
int run(const Options& o) {
  return Perf::with_communicator<Exec>(o.comm, MPI_COMM_WORLD,
                                       [&](auto& comm, const Exec& compute) { return run_with<T>(o, comm, compute); });
}

/// The run for --dtype (the choices were checked against this build's types).
int run_dtype(const Options& o) {
  if (o.dtype == "double") return run<double>(o);
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (compat::has_bhalf)
    if (o.dtype == "bf16") return run<compat::bhalf_t>(o);
  if constexpr (compat::has_half)
    if (o.dtype == "fp16") return run<compat::half_t>(o);
#endif
  if (o.dtype == "float") return run<float>(o);
  throw InvalidArgument("--dtype '" + o.dtype + "' is not available in this build");
}

}  // namespace DistAttn::Train

int main(int argc, char** argv) {
  // NVLink multicast stays off unless the launcher says otherwise: on shared
  // hosts it can put the GPUs out of service. The library itself never sets it.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  MPI_Init(&argc, &argv);
  int rank = 0, rc = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  DistAttn::Perf::KokkosArgs args(argc, argv);
  Kokkos::initialize(args.kokkos_argc(), args.kokkos_argv());
  try {
    const auto o = DistAttn::Train::parse_options(args.tool_argc(), args.tool_argv());
    if (o.help) {
      if (rank == 0) DistAttn::Train::print_usage(std::cout);
    } else {
      rc = DistAttn::Train::run_dtype(o) != 0 ? 1 : 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "distattn-train (rank " << rank << "): " << e.what() << "\n";
    rc = 2;
  }
  Kokkos::finalize();
  MPI_Finalize();
  return rc;
}
