// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d/impl/grid2d_workspace.hpp
/// The Attention2D executor's buffer table as a function of its shape, and the
/// workspace that binds Views to it (docs/design/memory.md). memory_plan(), the
/// head-group choice and the executor's passes all read the same lay-out
/// functions, so what is planned is what a pass carves.
///
/// K_t|V_t, kept from forward for backward, is one allocation; every other buffer
/// of a pass is carved from one workspace that forward and backward share
/// (executor/memory_plan.hpp: KeptAndPassWorkspace).

#include <DistAttn/attention.hpp>
#include <DistAttn/core/grid_shape.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/grid2d/grid2d_types.hpp>
#include <DistAttn/grid2d/impl/grid2d_buffers.hpp>

#include <array>
#include <cstdint>

namespace DistAttn::Impl {

/// The extents of an Attention2D problem on an R x C grid (every kv head).
struct Grid2DExtents {
  int R, C, B;
  std::int64_t N;
  int H, Hkv, D;
  Grid2DVariant variant;
};

/// One pass's extents: `group` kv heads (and their query heads) at a time.
struct Grid2DShape {
  int B, n, H, Hkv, D, R, C;  // H, Hkv: the heads of one pass (a head group)
  Grid2DVariant variant;
  bool permuted;  // some rank's K_t is another rank's K_p (the world permutations run)
  bool grouped;   // fewer kv heads per pass than the executor has: contiguous copies of the group's inputs

  static Grid2DShape of(const Grid2DExtents& e, int group) {
    const GridShape g{e.R, e.C};
    bool permuted = false;
    for (int p = 0; p < e.R * e.C; ++p) permuted |= g.transpose_source(p) != p;
    return Grid2DShape{e.B, int(e.N / (std::int64_t(e.R) * e.C)), group * (e.H / e.Hkv), group, e.D, e.R, e.C,
                       e.variant, permuted, group < e.Hkv};
  }
};

/// Everything a pass uses besides the caller's tensors.
template <class T, class Mem>
struct Grid2DBuffers {
  using Acc     = accum_t<T>;
  using TView   = Tensor4<T, Mem>;
  using AccView = Tensor4<Acc, Mem>;
  // K_t | V_t of this rank (kept for backward) and the gathered, position-ordered Kg, Vg.
  FlatPair4<T, Mem> kvt;
  TView qin, kin, vin;  // contiguous copies of one head group's q, k, v (grouped passes)
  TView kg, vg;
  std::array<FlatPair4<T, Mem>, 2> kvslot;  // O: column ring slots
  Flat<T, Mem> kvraw;                       // NO: rank-ordered column all-gather
  // forward
  TView qg;                                  // NO: position-ordered Qg (also backward NO)
  Flat<T, Mem> qraw;                         // NO: rank-ordered row all-gather
  AttnState<Acc, Mem> stg;                   // NO: partial state of Qg
  std::array<FlatState<Acc, Mem>, 2> shard;  // NO: Alg. 7 accumulate / receive
  AttnState<Acc, Mem> own;                   // O: state of the own queries
  std::array<TView, 2> qslot;                // O: row ring Q slots
  std::array<FlatState<Acc, Mem>, 2> part;   // O: partials in flight
  FlatState<Acc, Mem> precv;                 // O: partial received from the right
  // backward
  FlatPair4<T, Mem> bq;                        // own (q, dO)
  FlatPair3<Acc, Mem> bs;                      // own (LSE, Delta)
  AccView dq;                                  // own dQ (accumulation type)
  FlatPair4<Acc, Mem> dkvg;                    // position-ordered dKg | dVg
  FlatPair4<Acc, Mem> dkvt, dkvp;              // dK_t|dV_t, and after the permutation back
  TView dog;                                   // NO: gathered dO
  RowStats<Acc, Mem> lseg, delg;               // NO: gathered LSE, Delta
  AccView dqg;                                 // NO: dQg
  Flat<T, Mem> rawq;                           // NO: gathered (q, dO) blocks
  Flat<Acc, Mem> raws, rawdq, rawdkv;          // NO: gathered stats, dQ / dKV shards to scatter
  std::array<FlatPair4<T, Mem>, 2> bslotq;     // O: row ring (q, dO) slots
  std::array<FlatPair3<Acc, Mem>, 2> bslots;   // O: row ring (LSE, Delta) slots
  std::array<AccView, 2> dqpart;               // O: dQ partials in flight
  AccView dqrecv;                              // O: dQ partial from the right
  std::array<FlatPair4<Acc, Mem>, 2> dkvpart;  // O: dK/dV partials in flight (Alg. 11)
  FlatPair4<Acc, Mem> dkvrecv;                 // O: dK/dV partial from below
};

/// The buffer table: which buffers a pass of shape `s` carves, in which order.
template <class T, class Mem>
struct Grid2DLayOut {
  using Buffers = Grid2DBuffers<T, Mem>;

  static void kept(Carver<Mem>& c, Buffers& b, const Grid2DShape& s) {
    take_pair4(c, b.kvt, "DistAttn::grid2d.kv_t", s.B, s.n, s.Hkv, s.D);
  }
  static void forward(Carver<Mem>& c, Buffers& b, const Grid2DShape& s) {
    const bool no = s.variant == Grid2DVariant::NO;
    group_inputs(c, b, s, true);
    if (s.R > 1 && (no || s.C > 1)) kg(c, b, s);
    if (no) {
      if (s.R > 1) c.take(b.kvraw, "DistAttn::grid2d.kv_gathered", std::size_t(s.R) * 2 * s.B * s.n * s.Hkv * s.D);
      c.take(b.qg, "DistAttn::grid2d.qg", s.B, s.n * s.C, s.H, s.D);
      if (s.C > 1) {
        c.take(b.qraw, "DistAttn::grid2d.q_gathered", std::size_t(s.C) * s.B * s.n * s.H * s.D);
        for (auto& sh : b.shard) take_flat_state(c, sh, "DistAttn::grid2d.shard", s.B, s.n, s.H, s.D);
      }
      c.state(b.stg, "DistAttn::grid2d.state_g", s.B, s.n * s.C, s.H, s.D);
      return;
    }
    if (s.R > 1) kv_slots(c, b, s);
    c.state(b.own, "DistAttn::grid2d.state", s.B, s.n, s.H, s.D);
    if (s.C > 1) {
      for (auto& q : b.qslot) c.take(q, "DistAttn::grid2d.q_slot", s.B, s.n, s.H, s.D);
      for (auto& p : b.part) take_flat_state(c, p, "DistAttn::grid2d.partial", s.B, s.n, s.H, s.D);
      take_flat_state(c, b.precv, "DistAttn::grid2d.partial_recv", s.B, s.n, s.H, s.D);
    }
  }
  // dK_t/dV_t are dKg/dVg themselves when R == 1; with R > 1 dKg/dVg are dead once
  // dK_t/dV_t are formed, so the permutation back receives into them.
  static void backward(Carver<Mem>& c, Buffers& b, const Grid2DShape& s) {
    const bool no = s.variant == Grid2DVariant::NO;
    group_inputs(c, b, s, false);  // q goes straight into the own bundle
    take_pair4(c, b.bq, "DistAttn::grid2d.q_do", s.B, s.n, s.H, s.D);
    take_pair3(c, b.bs, "DistAttn::grid2d.lse_delta", s.B, s.H, s.n);
    c.take(b.dq, "DistAttn::grid2d.dq", s.B, s.n, s.H, s.D);
    take_pair4(c, b.dkvg, "DistAttn::grid2d.dkv_g", s.B, s.n * s.R, s.Hkv, s.D);
    if (s.R > 1) {
      take_pair4(c, b.dkvt, "DistAttn::grid2d.dkv_t", s.B, s.n, s.Hkv, s.D);
      if (s.permuted) b.dkvp = pair4_within(b.dkvg, s.B, s.n, s.Hkv, s.D);
    } else {
      b.dkvt = b.dkvg;
      if (s.permuted) take_pair4(c, b.dkvp, "DistAttn::grid2d.dkv_p", s.B, s.n, s.Hkv, s.D);
    }
    if (s.R > 1 && (no || s.C > 1)) kg(c, b, s);
    if (no) {
      const std::size_t q = std::size_t(s.B) * s.n * s.H * s.D, kv = std::size_t(s.B) * s.n * s.Hkv * s.D;
      const std::size_t rows = std::size_t(s.B) * s.H * s.n;
      if (s.R > 1) c.take(b.kvraw, "DistAttn::grid2d.kv_gathered", s.R * 2 * kv);
      c.take(b.qg, "DistAttn::grid2d.qg", s.B, s.n * s.C, s.H, s.D);
      c.take(b.dog, "DistAttn::grid2d.dog", s.B, s.n * s.C, s.H, s.D);
      c.take(b.lseg, "DistAttn::grid2d.lseg", s.B, s.H, s.n * s.C);
      c.take(b.delg, "DistAttn::grid2d.deltag", s.B, s.H, s.n * s.C);
      c.take(b.dqg, "DistAttn::grid2d.dqg", s.B, s.n * s.C, s.H, s.D);
      if (s.C > 1) {
        c.take(b.rawq, "DistAttn::grid2d.q_do_gathered", s.C * 2 * q);
        c.take(b.raws, "DistAttn::grid2d.lse_delta_gathered", s.C * 2 * rows);
        c.take(b.rawdq, "DistAttn::grid2d.dq_shards", s.C * q);
      }
      if (s.R > 1) c.take(b.rawdkv, "DistAttn::grid2d.dkv_shards", s.R * 2 * kv);
      return;
    }
    if (s.R > 1) kv_slots(c, b, s);
    if (s.C > 1) {
      for (auto& q : b.bslotq) take_pair4(c, q, "DistAttn::grid2d.q_do_slot", s.B, s.n, s.H, s.D);
      for (auto& st : b.bslots) take_pair3(c, st, "DistAttn::grid2d.lse_delta_slot", s.B, s.H, s.n);
      for (auto& d : b.dqpart) c.take(d, "DistAttn::grid2d.dq_partial", s.B, s.n, s.H, s.D);
      c.take(b.dqrecv, "DistAttn::grid2d.dq_recv", s.B, s.n, s.H, s.D);
    }
    if (s.R > 1) {
      for (auto& d : b.dkvpart) take_pair4(c, d, "DistAttn::grid2d.dkv_partial", s.B, s.n, s.Hkv, s.D);
      take_pair4(c, b.dkvrecv, "DistAttn::grid2d.dkv_recv", s.B, s.n, s.Hkv, s.D);
    }
  }

 private:
  static void kg(Carver<Mem>& c, Buffers& b, const Grid2DShape& s) {
    c.take(b.kg, "DistAttn::grid2d.kg", s.B, s.n * s.R, s.Hkv, s.D);
    c.take(b.vg, "DistAttn::grid2d.vg", s.B, s.n * s.R, s.Hkv, s.D);
  }
  static void kv_slots(Carver<Mem>& c, Buffers& b, const Grid2DShape& s) {
    for (auto& slot : b.kvslot) take_pair4(c, slot, "DistAttn::grid2d.kv_slot", s.B, s.n, s.Hkv, s.D);
  }
  static void group_inputs(Carver<Mem>& c, Buffers& b, const Grid2DShape& s, bool with_q) {
    if (!s.grouped) return;
    if (with_q) c.take(b.qin, "DistAttn::grid2d.q_group", s.B, s.n, s.H, s.D);
    c.take(b.kin, "DistAttn::grid2d.k_group", s.B, s.n, s.Hkv, s.D);
    c.take(b.vin, "DistAttn::grid2d.v_group", s.B, s.n, s.Hkv, s.D);
  }
};

/// K_t|V_t and the pass workspace of one executor, with `buf` pointing into them
/// in the layout of the last pass.
template <class T, class Mem>
class Grid2DWorkspace {
 public:
  using Buffers = Grid2DBuffers<T, Mem>;
  using LayOut  = Grid2DLayOut<T, Mem>;

  explicit Grid2DWorkspace(const Grid2DExtents& e) : e_(e) {}

  /// What a pass over `group` kv heads allocates: K_t|V_t, then forward's and backward's workspace.
  static MemoryPlan plan(const Grid2DExtents& e, int group) {
    const Grid2DShape s = Grid2DShape::of(e, group);
    Buffers scratch;
    return KeptAndPassWorkspace<Mem>::plan([&](Carver<Mem>& c) { LayOut::kept(c, scratch, s); },
                                           [&](Carver<Mem>& c) { LayOut::forward(c, scratch, s); },
                                           [&](Carver<Mem>& c) { LayOut::backward(c, scratch, s); });
  }

  /// Inside the entry agreement: the most kv heads per pass this rank can hold
  /// (executor/memory_plan.hpp); when not even the smallest group fits, every rank
  /// fails naming the need. K_t|V_t and the workspace are two allocations that
  /// only grow, so an automatic choice (head_group 0) reserves the larger of
  /// forward's and backward's layouts: a backward after a forward that fit never
  /// fails for memory. A requested group is checked for this pass alone.
  int choose_group(const char* where, bool backward, int head_group, std::size_t memory_limit) const {
    const bool automatic = head_group == 0;
    auto layout_for      = [&](int g) {
      const MemoryPlan p = plan(e_, g);
      if (automatic) return p.forward_bytes() >= p.backward_bytes() ? p.forward : p.backward;
      return backward ? p.backward : p.forward;
    };
    auto held_after = [&](int g) {
      const std::size_t kept = kept_bytes(Grid2DShape::of(e_, g));
      return mem_.held_after(kept, layout_for(g).total() - kept);
    };
    const char* pass = automatic ? (backward ? "backward (and forward)" : "forward (and backward)")
                                 : (backward ? "backward" : "forward");
    const std::int64_t P = std::int64_t(e_.R) * e_.C;
    return choose_head_group<Mem>(where, pass, e_.Hkv, head_group, held(), memory_limit, int(e_.N / P), 1, P,
                                  layout_for, held_after);
  }

  /// Points buf at K_t|V_t and at the workspace in the layout of the pass over
  /// `group` kv heads (growing them if needed; K_t|V_t survives the growth).
  int use(bool backward, int group) {
    if (group != group_) mem_.relayout();
    group_              = group;
    const Grid2DShape s = Grid2DShape::of(e_, group);
    mem_.use(backward, [&](Carver<Mem>& c) { LayOut::kept(c, buf, s); },
             [&](Carver<Mem>& c) { LayOut::forward(c, buf, s); },
             [&](Carver<Mem>& c) { LayOut::backward(c, buf, s); });
    return group;
  }

  std::size_t held() const { return mem_.held(); }
  /// kv heads per pass of the layout buf holds (0 before the first pass).
  int group() const { return group_; }

  Buffers buf;

 private:
  static std::size_t kept_bytes(const Grid2DShape& s) {
    MemoryLayout l;
    Carver<Mem> c(l);
    Buffers scratch;
    LayOut::kept(c, scratch, s);
    return l.total();
  }

  Grid2DExtents e_;
  int group_ = 0;
  KeptAndPassWorkspace<Mem> mem_{"DistAttn::grid2d.kv_t", "DistAttn::grid2d.workspace"};
};

}  // namespace DistAttn::Impl
