// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file schedule/ring_buffers.hpp
/// The ring's workspace as one table: which buffers a pass over a head group
/// holds, as a function of the schedule and the shape. RingAttention binds its
/// Views to it (carving), and its memory_plan() and the cost model
/// (cost/cost_ring.hpp: ring_workspace_bytes) plan with the same code, so the model
/// cannot drift from what the executor allocates (docs/design/memory.md).
///
/// Only the element sizes matter to a plan: the cost model instantiates the table
/// with stand-in elements of the problem's byte sizes (Impl::with_element_sizes in
/// executor/memory_plan.hpp), whose Views are never allocated.

#include <DistAttn/attention.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>

#include <array>

namespace DistAttn {

/// Which optional slots the schedule uses on some rank (the plan is the same on every rank).
struct RingSlots {
  bool q_input = false, partials = false, qbundle = false, grad_q = false, grad_kv = false;

  static RingSlots of(const RingSchedule& sched) {
    RingSlots u;
    for (int x = 0; x < sched.num_ranks(); ++x)
      for (int t = 1; t < sched.num_steps(); ++t) {
        const RankStep f = sched.forward(x, t), b = sched.backward(x, t);
        u.q_input |= f.recv_input.kind == PayloadKind::Q;
        u.partials |= f.recv_result.kind == PayloadKind::Partial || f.send_result.kind == PayloadKind::Partial;
        u.qbundle |= b.recv_input.kind == PayloadKind::QBundle;
        u.grad_q |= b.recv_result.kind == PayloadKind::GradQ || b.send_result.kind == PayloadKind::GradQ;
        u.grad_kv |= b.recv_result.kind == PayloadKind::GradKV || b.send_result.kind == PayloadKind::GradKV;
      }
    return u;
  }
};

/// The extents of one pass: `group` kv heads (and their query heads) at a time.
struct RingShape {
  int B, c, H, Hkv, D;
  RingSlots used;
  bool kv_slots;  // K/V travel at all (more than one step)
  int pieces;     // row pieces per rank (zigzag: its two halves)
  bool grouped;   // fewer kv heads than the executor's: contiguous copies of the group

  static RingShape of(const RingSchedule& sched, int B, int c, int H, int Hkv, int D, int group) {
    return RingShape{B,        c, group * (H / Hkv), group, D, RingSlots::of(sched), sched.num_steps() > 1,
                     ring_pieces(sched.kind()), group < Hkv};
  }
};

/// Everything a ring pass uses besides the caller's tensors: Views into the workspace.
template <class T, class Acc, class Mem>
struct RingBuffers {
  using TView    = Tensor4<T, Mem>;
  using AccView  = Tensor4<Acc, Mem>;
  using StatView = RowStats<Acc, Mem>;
  using State    = AttnState<Acc, Mem>;

  std::array<State, 2> own;  // one per row piece
  std::array<TView, 2> kbuf, vbuf, qbuf, dobuf;
  std::array<StatView, 2> lsebuf, delbuf;
  std::array<State, 2> spart, rpart;
  StatView delta, lseg;
  TView qg, kg, vg, dog;  // contiguous copies of one head group's inputs
  AccView gq, gk, gv;
  std::array<AccView, 2> sdk, sdv, sdq, rdk, rdv, rdq;

  void lay_out_kv(Impl::Carver<Mem>& c, const RingShape& s) {
    if (s.grouped) {
      c.take(qg, "DistAttn::ring.q_group", s.B, s.c, s.H, s.D);
      c.take(kg, "DistAttn::ring.k_group", s.B, s.c, s.Hkv, s.D);
      c.take(vg, "DistAttn::ring.v_group", s.B, s.c, s.Hkv, s.D);
    }
    if (!s.kv_slots) return;
    for (int i = 0; i < 2; ++i) {
      c.take(kbuf[i], "DistAttn::ring.k_slot", s.B, s.c, s.Hkv, s.D);
      c.take(vbuf[i], "DistAttn::ring.v_slot", s.B, s.c, s.Hkv, s.D);
    }
  }
  // One state per row piece (zigzag: per half-chunk), plus the helpers' partial slots.
  void lay_out_forward(Impl::Carver<Mem>& c, const RingShape& s) {
    for (int a = 0; a < s.pieces; ++a)
      c.state(own[a], s.pieces > 1 ? "DistAttn::ring.state_half" : "DistAttn::ring.state", s.B, s.c / s.pieces, s.H, s.D);
    lay_out_kv(c, s);
    for (int i = 0; i < 2 && s.used.q_input; ++i) c.take(qbuf[i], "DistAttn::ring.q_slot", s.B, s.c, s.H, s.D);
    for (int i = 0; i < 2 && s.used.partials; ++i) {
      c.state(spart[i], "DistAttn::ring.partial_send", s.B, s.c, s.H, s.D);
      c.state(rpart[i], "DistAttn::ring.partial_recv", s.B, s.c, s.H, s.D);
    }
  }
  void lay_out_backward(Impl::Carver<Mem>& c, const RingShape& s) {
    c.take(delta, "DistAttn::ring.delta", s.B, s.H, s.c);
    if (s.grouped) {
      c.take(dog, "DistAttn::ring.do_group", s.B, s.c, s.H, s.D);
      c.take(lseg, "DistAttn::ring.lse_group", s.B, s.H, s.c);
    }
    c.take(gq, "DistAttn::ring.dq", s.B, s.c, s.H, s.D);
    c.take(gk, "DistAttn::ring.dk", s.B, s.c, s.Hkv, s.D);
    c.take(gv, "DistAttn::ring.dv", s.B, s.c, s.Hkv, s.D);
    lay_out_kv(c, s);
    for (int i = 0; i < 2 && s.used.qbundle; ++i) {
      c.take(qbuf[i], "DistAttn::ring.q_slot", s.B, s.c, s.H, s.D);
      c.take(dobuf[i], "DistAttn::ring.do_slot", s.B, s.c, s.H, s.D);
      c.take(lsebuf[i], "DistAttn::ring.lse_slot", s.B, s.H, s.c);
      c.take(delbuf[i], "DistAttn::ring.delta_slot", s.B, s.H, s.c);
    }
    for (int i = 0; i < 2 && s.used.grad_kv; ++i) {
      c.take(sdk[i], "DistAttn::ring.dk_send", s.B, s.c, s.Hkv, s.D);
      c.take(sdv[i], "DistAttn::ring.dv_send", s.B, s.c, s.Hkv, s.D);
      c.take(rdk[i], "DistAttn::ring.dk_recv", s.B, s.c, s.Hkv, s.D);
      c.take(rdv[i], "DistAttn::ring.dv_recv", s.B, s.c, s.Hkv, s.D);
    }
    for (int i = 0; i < 2 && s.used.grad_q; ++i) {
      c.take(sdq[i], "DistAttn::ring.dq_send", s.B, s.c, s.H, s.D);
      c.take(rdq[i], "DistAttn::ring.dq_recv", s.B, s.c, s.H, s.D);
    }
  }

  /// Forward's and backward's layouts for `shape`, without allocating.
  static MemoryPlan plan(const RingShape& shape) {
    MemoryPlan p;
    RingBuffers scratch;
    Impl::Carver<Mem> fwd(p.forward), bwd(p.backward);
    scratch.lay_out_forward(fwd, shape);
    scratch.lay_out_backward(bwd, shape);
    return p;
  }
};

}  // namespace DistAttn
