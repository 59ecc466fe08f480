// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring/impl/ring_workspace.hpp
/// RingAttention's one workspace: its buffers laid out by the ring's buffer table
/// (schedule/ring_buffers.hpp) for the pass and head group that runs, the plan that
/// says how much before anything is allocated, and the head group a pass can afford.

#include <DistAttn/core/types.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/schedule/ring_buffers.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>

#include <algorithm>
#include <cstddef>

namespace DistAttn::Impl {

template <class T, class Mem>
class RingWorkspace {
 public:
  using Buffers = RingBuffers<T, accum_t<T>, Mem>;

  RingWorkspace(int batch, int chunk, int heads, int kv_heads, int head_dim)
      : B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim) {}

  /// Forward's and backward's layouts over `group` kv heads of `sched`, without allocating.
  static MemoryPlan plan(const RingSchedule& sched, int B, int c, int H, int Hkv, int D, int group) {
    return Buffers::plan(RingShape::of(sched, B, c, H, Hkv, D, group));
  }
  MemoryPlan plan(const RingSchedule& sched, int group) const { return plan(sched, B_, c_, H_, Hkv_, D_, group); }

  std::size_t held() const { return ws_.held(); }
  /// kv heads of the layout buf holds (0 before the first pass).
  int group() const { return carved_group_; }
  /// The next use() lays the buffers out again (the schedule changed).
  void relayout() { carved_pass_ = -1; }

  /// Inside the entry agreement: the most kv heads per pass whose workspace this
  /// rank can hold (`requested` when set; all when they fit). When not even the
  /// smallest group fits, it fails every rank with the need.
  int choose_group(const char* where, Pass pass, const RingSchedule& sched, int requested, std::size_t limit) const {
    auto layout = [&](int g) {
      const MemoryPlan p = plan(sched, g);
      return pass == Pass::Forward ? p.forward : p.backward;
    };
    return choose_head_group<Mem>(where, pass == Pass::Forward ? "forward" : "backward", Hkv_, requested, ws_.held(),
                                  limit, c_, ring_pieces(sched.kind()), sched.num_ranks(), layout,
                                  [&](int g) { return std::max(ws_.held(), layout(g).total()); });
  }
  /// Points buf at the workspace in the layout of `pass` over `group` kv heads
  /// (growing it if needed; forward's and backward's layouts overlap).
  int use(Pass pass, int group, const RingSchedule& sched) {
    if (carved_pass_ == int(pass) && carved_group_ == group) return group;
    const RingShape s = RingShape::of(sched, B_, c_, H_, Hkv_, D_, group);
    ws_.carve("DistAttn::ring.workspace", [&](Carver<Mem>& c) {
      pass == Pass::Forward ? buf.lay_out_forward(c, s) : buf.lay_out_backward(c, s);
    });
    carved_pass_  = int(pass);
    carved_group_ = group;
    return group;
  }

  Buffers buf;

 private:
  int B_, c_, H_, Hkv_, D_;
  Workspace<Mem> ws_;
  int carved_pass_ = -1, carved_group_ = 0;  // whose layout buf holds
};

}  // namespace DistAttn::Impl
