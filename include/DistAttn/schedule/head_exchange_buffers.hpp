// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file schedule/head_exchange_buffers.hpp
/// The head exchange's memory as one table (Impl::HeadExchange, which the Ulysses
/// and hybrid executors share): the head-side tensors kept from forward to backward
/// and each pass's workspace, as functions of the shape. HeadExchange binds its
/// Views to it, and its memory_plan() and the cost model (cost/cost_ulysses.hpp:
/// head_exchange_workspace_bytes) plan with the same code; the cost model uses
/// stand-in elements of the problem's sizes (Impl::with_element_sizes).

#include <DistAttn/attention.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/schedule/ulysses_types.hpp>

#include <algorithm>
#include <cstddef>

namespace DistAttn::Impl {

/// What the executor keeps and adds besides the exchange's own buffers.
struct HeadExchangeUse {
  bool keep_output = false;      ///< o() and lse() outlive forward (the hybrid's inner backward reads them)
  bool state_and_delta = false;  ///< forward state of the one-call attention, sequence-side Delta (Ulysses)
};

struct HeadExchangeShape {
  int B, c, D;
  UlyssesHeads heads;
  HeadExchangeUse use;
  int G = 1;  ///< head groups
};

template <class T, class Acc, class Mem>
struct HeadExchangeBuffers {
  using TView    = Tensor4<T, Mem>;
  using AccView  = Tensor4<Acc, Mem>;
  using StatView = RowStats<Acc, Mem>;
  using Shape    = HeadExchangeShape;

  // Views into the kept allocation and the workspace.
  TView qh, kh, vh, oh, doh;
  StatView lseh, delh, seq_delta;
  AccView gqh, gkh, gvh;
  AttnState<Acc, Mem> state;
  Kokkos::View<T*, Mem> isend, irecv, osend, orecv;
  Kokkos::View<Acc*, Mem> lsend, lrecv, ssend, srecv, gsend, grecv;

  /// Group slots of each message buffer: two while groups pipeline, else one.
  static int slots(int groups) { return std::min(groups, 2); }
  void lay_out_kept(Carver<Mem>& c, const Shape& s) {
    const int N = s.heads.ranks * s.c, L = s.heads.local_heads(), Lk = s.heads.local_kv_heads();
    c.take(qh, "DistAttn::ulysses.q_heads", s.B, N, L, s.D);
    c.take(kh, "DistAttn::ulysses.k_heads", s.B, N, Lk, s.D);
    c.take(vh, "DistAttn::ulysses.v_heads", s.B, N, Lk, s.D);
    if (s.use.keep_output) lay_out_output(c, s);
  }
  void lay_out_output(Carver<Mem>& c, const Shape& s) {
    const int N = s.heads.ranks * s.c, L = s.heads.local_heads();
    c.take(oh, "DistAttn::ulysses.o_heads", s.B, N, L, s.D);
    c.take(lseh, "DistAttn::ulysses.lse_heads", s.B, L, N);
  }
  /// One group slot of a message, all ranks' blocks: q, k, v (or dq, dk, dv), O, or
  /// one row statistic of the group's L/G query and Lk/G K/V heads.
  static std::size_t qkv_words(const Shape& s) {
    return std::size_t(s.heads.ranks) * s.B * s.c * s.D * (s.heads.local_heads() + 2 * s.heads.local_kv_heads()) /
           s.G;
  }
  static std::size_t q_words(const Shape& s) {
    return std::size_t(s.heads.ranks) * s.B * s.c * s.heads.local_heads() * s.D / s.G;
  }
  static std::size_t stat_words(const Shape& s) {
    return std::size_t(s.heads.ranks) * s.B * s.heads.local_heads() * s.c / s.G;
  }
  /// A message buffer of slots(G) group slots of `words` elements each.
  template <class V>
  static void take_message(Carver<Mem>& c, V& v, const char* name, const Shape& s, std::size_t words) {
    c.take(v, name, std::size_t(slots(s.G)) * words);
  }
  void lay_out_qkv_messages(Carver<Mem>& c, const Shape& s) {
    take_message(c, isend, "DistAttn::ulysses.qkv_send", s, qkv_words(s));
    take_message(c, irecv, "DistAttn::ulysses.qkv_recv", s, qkv_words(s));
  }
  void lay_out_o_messages(Carver<Mem>& c, const Shape& s) {
    take_message(c, osend, "DistAttn::ulysses.o_send", s, q_words(s));
    take_message(c, orecv, "DistAttn::ulysses.o_recv", s, q_words(s));
  }
  void lay_out_lse_messages(Carver<Mem>& c, const Shape& s) {
    take_message(c, lsend, "DistAttn::ulysses.lse_send", s, stat_words(s));
    take_message(c, lrecv, "DistAttn::ulysses.lse_recv", s, stat_words(s));
  }
  /// Starts a later phase of a pass: over the earlier phases' buffers with one
  /// group (each exchange is waited on before the next phase packs), after them
  /// when groups pipeline (one group's inputs, another's compute and a third's
  /// results are live at once).
  static void next_phase(Carver<Mem>& c, std::size_t mark, const Shape& s) {
    if (s.G == 1) c.rewind(mark);
  }
  // Phases: q|k|v in; the attention (its state, one group's heads); O and LSE out.
  void lay_out_forward(Carver<Mem>& c, const Shape& s) {
    if (!s.use.keep_output) lay_out_output(c, s);
    const std::size_t m = c.mark();
    lay_out_qkv_messages(c, s);
    if (s.use.state_and_delta) {
      next_phase(c, m, s);
      c.state(state, "DistAttn::ulysses.state", s.B, s.heads.ranks * s.c, s.heads.local_heads() / s.G, s.D);
    }
    next_phase(c, m, s);
    lay_out_o_messages(c, s);
    lay_out_lse_messages(c, s);
    c.to_end();
  }
  // Phases: q|k|v in again (and the hybrid's O) when forward's are not kept, one
  // group after the other, all waited on before dO packs; then dO and statistics
  // in, read by the attention, and gradients out (pipelined over the groups).
  void lay_out_backward(Carver<Mem>& c, const Shape& s) {
    const int N = s.heads.ranks * s.c, L = s.heads.local_heads(), Lk = s.heads.local_kv_heads();
    if (s.use.state_and_delta) c.take(seq_delta, "DistAttn::ulysses.delta", s.B, s.heads.heads, s.c);
    if (!s.use.keep_output) c.take(lseh, "DistAttn::ulysses.lse_heads", s.B, L, N);
    c.take(gqh, "DistAttn::ulysses.dq_heads", s.B, N, L, s.D);
    c.take(gkh, "DistAttn::ulysses.dk_heads", s.B, N, Lk, s.D);
    c.take(gvh, "DistAttn::ulysses.dv_heads", s.B, N, Lk, s.D);
    const std::size_t m = c.mark();
    lay_out_qkv_messages(c, s);
    c.rewind(m);
    c.take(doh, "DistAttn::ulysses.do_heads", s.B, N, L, s.D);
    lay_out_o_messages(c, s);
    if (s.use.state_and_delta) {
      c.take(delh, "DistAttn::ulysses.delta_heads", s.B, L, N);
      take_message(c, ssend, "DistAttn::ulysses.stats_send", s, 2 * stat_words(s));
      take_message(c, srecv, "DistAttn::ulysses.stats_recv", s, 2 * stat_words(s));
    } else {
      lay_out_lse_messages(c, s);
    }
    next_phase(c, m, s);
    take_message(c, gsend, "DistAttn::ulysses.grad_send", s, qkv_words(s));
    take_message(c, grecv, "DistAttn::ulysses.grad_recv", s, qkv_words(s));
    c.to_end();
  }

  /// Forward's and backward's buffers for `shape`: the kept tensors, then the pass's workspace.
  static MemoryPlan plan(const Shape& shape) {
    HeadExchangeBuffers scratch;
    return KeptAndPassWorkspace<Mem>::plan([&](Carver<Mem>& c) { scratch.lay_out_kept(c, shape); },
                                           [&](Carver<Mem>& c) { scratch.lay_out_forward(c, shape); },
                                           [&](Carver<Mem>& c) { scratch.lay_out_backward(c, shape); });
  }
};

}  // namespace DistAttn::Impl
