// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kokkos Tools regions of the executors: with push/pop region callbacks
// registered (what space-time-stack or nvtx-connector do when loaded), every
// forward and backward opens one pass region, its schedule steps nest in the
// pass, and the compute and wait phases nest in a step (or in the pass, for work
// outside the steps). The step count matches the schedule, and the per-step
// timeline in the stats has one entry per step region. Every kernel launched in
// a pass is named (DistAttn::..., or Kokkos... for Kokkos' and Kokkos Kernels' own).

#include "sequence_problem.hpp"

#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/hybrid/hybrid_attention.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/ulysses/ulysses_attention.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using T    = double;
using Acc  = accum_t<T>;
using Comm = Communicator<MpiSpace, Exec>;

/// Every region pushed while recording, with the region it was pushed in.
struct Trace {
  struct Event {
    std::string name, parent;
  };
  static std::vector<std::string> stack;
  static std::vector<Event> events;
  static std::vector<std::string> kernels;
  static int unbalanced_pops;
  static void kernel(const char* name, std::uint32_t, std::uint64_t*) { kernels.emplace_back(name); }
  static void push(const char* name) {
    events.push_back({name, stack.empty() ? std::string() : stack.back()});
    stack.emplace_back(name);
  }
  static void pop() {
    if (stack.empty())
      ++unbalanced_pops;
    else
      stack.pop_back();
  }
  /// Records the regions pushed while f() runs.
  template <class F>
  static void record(F&& f) {
    stack.clear();
    events.clear();
    kernels.clear();
    unbalanced_pops = 0;
    Kokkos::Tools::Experimental::set_push_region_callback(&push);
    Kokkos::Tools::Experimental::set_pop_region_callback(&pop);
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(&kernel);
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(&kernel);
    f();
    Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
    Kokkos::Tools::Experimental::set_pop_region_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  }
  static int count(const std::string& name, const std::string& parent) {
    int n = 0;
    for (const auto& e : events) n += e.name == name && e.parent == parent;
    return n;
  }
};
std::vector<std::string> Trace::stack;
std::vector<Trace::Event> Trace::events;
std::vector<std::string> Trace::kernels;
int Trace::unbalanced_pops = 0;

bool is_pass(const std::string& s) {
  auto ends_with = [&](const char* t) {
    const std::string x = t;
    return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  return s.rfind("DistAttn::", 0) == 0 && (ends_with("::forward") || ends_with("::backward"));
}

/// The nesting every executor must show; `pass` names its forward and backward.
void expect_nesting(const std::string& pass, int fwd_steps, int bwd_steps, const std::string& what) {
  EXPECT_TRUE(Trace::stack.empty()) << what << ": " << Trace::stack.size() << " regions left open";
  EXPECT_EQ(Trace::unbalanced_pops, 0) << what;
  EXPECT_EQ(Trace::count(pass + "::forward", ""), 1) << what;
  EXPECT_EQ(Trace::count(pass + "::backward", ""), 1) << what;
  EXPECT_EQ(Trace::count("DistAttn::step", pass + "::forward"), fwd_steps) << what;
  EXPECT_EQ(Trace::count("DistAttn::step", pass + "::backward"), bwd_steps) << what;
  int in_step = 0;
  for (const auto& e : Trace::events) {
    if (e.name == "DistAttn::step") { EXPECT_TRUE(is_pass(e.parent)) << what << ": step inside '" << e.parent << "'"; }
    if (e.name == "DistAttn::compute" || e.name == "DistAttn::wait") {
      EXPECT_TRUE(e.parent == "DistAttn::step" || is_pass(e.parent))
          << what << ": " << e.name << " inside '" << e.parent << "'";
      in_step += e.parent == "DistAttn::step";
    }
    if (is_pass(e.parent) || e.parent == "DistAttn::step") {
      EXPECT_TRUE(e.name == "DistAttn::step" || e.name == "DistAttn::compute" || e.name == "DistAttn::wait" ||
                  is_pass(e.name))
          << what << ": unexpected region '" << e.name << "' in '" << e.parent << "'";
    }
  }
  EXPECT_GT(in_step, 0) << what << ": no phase inside a step";
  EXPECT_FALSE(Trace::kernels.empty()) << what;
  for (const auto& k : Trace::kernels)
    EXPECT_TRUE(k.rfind("DistAttn::", 0) == 0 || k.rfind("Kokkos", 0) == 0)
        << what << ": unnamed kernel '" << k << "'";
}

template <class Stats>
void expect_timeline(const Stats& s, int steps, const std::string& what) {
  ASSERT_EQ(int(s.timeline.size()), steps) << what;
  double compute = 0, wait = 0;
  for (std::size_t i = 0; i < s.timeline.size(); ++i) {
    if (i > 0) { EXPECT_GE(s.timeline[i].start_s, s.timeline[i - 1].start_s) << what; }
    compute += s.timeline[i].compute_s;
    wait += s.timeline[i].wait_s;
  }
  EXPECT_LE(compute, s.compute_s * (1 + 1e-9) + 1e-12) << what;
  EXPECT_LE(wait, s.wait_s * (1 + 1e-9) + 1e-12) << what;
  EXPECT_GT(compute, 0.0) << what;
}

TEST(ProfilingRegions, RingKindsNestPassStepPhase) {
  const auto p = make_problem(1, 6, 2, 1, 8);
  for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag}) {
    auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
    RingOptions opts;
    opts.kind = kind;
    RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
    Outputs<RingStats> out;
    Trace::record([&] { out = run_rows<T>(ring, p, ring_positions(p.P, p.c, kind)); });
    const int steps   = RingSchedule(p.P, kind).num_steps();
    const std::string what = std::string("ring ") + to_string(kind);
    expect_nesting("DistAttn::RingAttention", steps, steps, what);
    expect_timeline(out.fwd, steps, what + " forward");
    expect_timeline(out.bwd, steps, what + " backward");
  }
}

TEST(ProfilingRegions, Grid2DNestPassStepPhase) {
  const int P = world_size();
  for (Grid2DVariant variant : {Grid2DVariant::NO, Grid2DVariant::O}) {
    auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
    Grid2DOptions opts;
    opts.variant = variant;
    Grid2DAttention<T, MpiSpace, Exec> a2d(world, 0, 0, Exec(), 1, 4L * P, 2, 1, 8, opts);
    Tensor4<T, Mem> q("q", 1, 4, 2, 8), k("k", 1, 4, 1, 8), v("v", 1, 4, 1, 8), o("o", 1, 4, 2, 8),
        d("d", 1, 4, 2, 8), dq("dq", 1, 4, 2, 8), dk("dk", 1, 4, 1, 8), dv("dv", 1, 4, 1, 8);
    RowStats<Acc, Mem> lse("lse", 1, 2, 4);
    Kokkos::deep_copy(q, 0.25);
    Kokkos::deep_copy(k, 0.5);
    Kokkos::deep_copy(v, 1.0);
    Kokkos::deep_copy(d, 1.0);
    Grid2DStats sf, sb;
    Trace::record([&] {
      a2d.forward(q, k, v, o, lse);
      sf = a2d.stats();
      a2d.backward(q, k, v, o, d, lse, dq, dk, dv);
      sb = a2d.stats();
    });
    const int R = a2d.rows(), C = a2d.cols();
    // NO: the gather step, then (forward) C - 1 reduce-scatter steps. O: R column
    // steps, C - 1 row steps, and (backward) R - 1 column reduce-scatter steps.
    const bool no = variant == Grid2DVariant::NO;
    const int fwd = no ? C : R + (C - 1);
    const int bwd = no ? 1 : R + (C - 1) + (R - 1);
    const std::string what = std::string("grid2d ") + (no ? "NO" : "O") + " " + std::to_string(R) + "x" +
                             std::to_string(C);
    expect_nesting("DistAttn::Grid2DAttention", fwd, bwd, what);
    expect_timeline(sf, fwd, what + " forward");
    expect_timeline(sb, bwd, what + " backward");
  }
}

TEST(ProfilingRegions, UlyssesAndHybridNestPassStepPhase) {
  const int P  = world_size();
  const auto p = make_problem(1, 4, 2 * P, P, 8);
  {
    auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
    UlyssesAttention<T, MpiSpace, Exec> u(comm, Exec(), p.B, p.c, p.H, p.Hkv, p.D);
    Trace::record([&] { run_rows<T>(u, p, ring_positions(p.P, p.c, RingKind::Vanilla)); });
    expect_nesting("DistAttn::UlyssesAttention", 3, 3, "ulysses");
  }
  {
    // Pipelined over G head groups: the inputs' step, one per group's compute, the last results'.
    const auto pg = make_problem(1, 4, 2 * P, 2 * P, 8);
    auto comm     = Comm::from_raw(MPI_COMM_WORLD, Exec());
    UlyssesOptions opts;
    opts.head_groups = 2;
    UlyssesAttention<T, MpiSpace, Exec> u(comm, Exec(), pg.B, pg.c, pg.H, pg.Hkv, pg.D, opts);
    Outputs<UlyssesStats> out;
    Trace::record([&] { out = run_rows<T>(u, pg, ring_positions(pg.P, pg.c, RingKind::Vanilla)); });
    expect_nesting("DistAttn::UlyssesAttention", 4, 4, "ulysses G=2");
    expect_timeline(out.fwd, 4, "ulysses G=2 forward");
    expect_timeline(out.bwd, 4, "ulysses G=2 backward");
  }
  {
    auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
    HybridOptions opts;
    opts.inner = HybridInner::Balanced;
    HybridAttention<T, MpiSpace, Exec> h(world, Exec(), p.B, p.c, p.H, p.Hkv, p.D, opts);
    Trace::record([&] { run_rows<T>(h, p, [&h](int r, std::int64_t i) { return h.position(r, i); }); });
    expect_nesting("DistAttn::HybridAttention", 3, 3, "hybrid");
    // The inner executor's pass is one of the hybrid's steps.
    EXPECT_EQ(Trace::count("DistAttn::RingAttention::forward", "DistAttn::step"), 1);
    EXPECT_EQ(Trace::count("DistAttn::RingAttention::backward", "DistAttn::step"), 1);
  }
}

}  // namespace
}  // namespace DistAttn::Test
