// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ulysses/head_exchange.hpp
/// The all-to-alls between sequence shards and head shards that the Ulysses and
/// hybrid executors share, with their buffers and head-side tensors. Sequence
/// side: rank g's c own tokens with all heads; head side: the U c tokens of the
/// group with the heads UlyssesHeads gives rank g, in group-rank order (rank i's
/// tokens are rows [i c, (i+1) c)). The packing kernels read and write the
/// sequence side element by element, so callers' Views of any layout need no staging.
///
/// Memory (docs/design/memory.md): the head-side tensors that outlive a pass (q, k,
/// v, and for the hybrid o and LSE) are one allocation; everything else is carved
/// from one workspace that forward and backward share (executor/memory_plan.hpp).
/// With one head group every exchange is waited on before the next phase packs,
/// so the message buffers of successive phases share memory. Pipelined over G > 1
/// groups (UlyssesAttention), group g + 1's inputs and group g - 1's results are in
/// flight while group g computes: each message buffer then holds two group slots
/// (group g uses slot g mod 2; group g + 2 packs only after group g was waited on
/// and unpacked) and the buffers of a pass's phases, the forward state included,
/// are disjoint. The head-side tensors stay whole, group-major.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/exec/impl/pass_recorder.hpp>
#include <DistAttn/ulysses/ulysses_pack.hpp>
#include <DistAttn/schedule/head_exchange_buffers.hpp>
#include <DistAttn/schedule/ulysses_types.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace DistAttn::Impl {

template <class T, class CommSpace, class Exec>
class HeadExchange {
 public:
  using Acc      = accum_t<T>;
  using Mem      = typename Exec::memory_space;
  using Comm     = Communicator<CommSpace, Exec>;
  using Req      = Request<CommSpace>;
  using TView    = Tensor4<T, Mem>;
  using AccView  = Tensor4<Acc, Mem>;
  using StatView = RowStats<Acc, Mem>;
  using Recorder = PassRecorder<Exec, UlyssesStats>;

  using Use     = HeadExchangeUse;
  using Shape   = HeadExchangeShape;
  using Buffers = HeadExchangeBuffers<T, Acc, Mem>;

  /// `groups`: the head groups a pass is pipelined over (ulysses_head_groups; 1: none).
  HeadExchange(Comm& comm, const Exec& compute, Recorder& rec, int batch, int chunk, const UlyssesHeads& heads,
               int head_dim, Use use, int groups = 1)
      : comm_(comm), compute_(compute), rec_(rec), B_(batch), c_(chunk), D_(head_dim), heads_(heads), use_(use),
        G_(groups) {}

  /// Forward's and backward's buffers for these extents: the kept tensors, then the pass's workspace.
  static MemoryPlan memory_plan(int batch, int chunk, const UlyssesHeads& heads, int head_dim, Use use,
                                int groups = 1) {
    return Buffers::plan(Shape{batch, chunk, head_dim, heads, use, groups});
  }
  MemoryPlan memory_plan() const { return memory_plan(B_, c_, heads_, D_, use_, G_); }
  std::size_t held_bytes() const { return mem_.held(); }
  /// Points the buffers at the kept allocation and the workspace in the layout of
  /// forward or backward (growing the workspace if needed; kept tensors survive).
  void use_workspace(bool backward) {
    const Shape s{B_, c_, D_, heads_, use_, G_};
    mem_.use(backward, [&](Carver<Mem>& c) { b_.lay_out_kept(c, s); }, [&](Carver<Mem>& c) { b_.lay_out_forward(c, s); },
             [&](Carver<Mem>& c) { b_.lay_out_backward(c, s); });
  }
  /// Ulysses' forward state (one head group's extents) and sequence-side Delta [B, H, c] (Use::state_and_delta).
  const AttnState<Acc, Mem>& state() const { return b_.state; }
  const StatView& seq_delta() const { return b_.seq_delta; }

  const UlyssesHeads& heads() const { return heads_; }
  /// Head-side tensors: [B, U c, local heads, D] and statistics [B, local heads, U c].
  const TView& q() const { return b_.qh; }
  const TView& k() const { return b_.kh; }
  const TView& v() const { return b_.vh; }
  const TView& o() const { return b_.oh; }
  const TView& dout() const { return b_.doh; }
  const StatView& lse() const { return b_.lseh; }
  const StatView& delta() const { return b_.delh; }
  const AccView& dq() const { return b_.gqh; }
  const AccView& dk() const { return b_.gkh; }
  const AccView& dv() const { return b_.gvh; }

  /// One pipeline group: query heads [q0, q0 + nq) and K/V heads [k0, k0 + nk)
  /// of every rank's share.
  struct Slice {
    int q0 = 0, nq = 0, k0 = 0, nk = 0;
  };
  using Reqs = std::vector<Req>;

  int groups() const { return G_; }
  /// Group g of groups() (G divides L and Lk).
  Slice slice(int g) const {
    const int L = heads_.local_heads(), Lk = heads_.local_kv_heads();
    return Slice{g * (L / G_), L / G_, g * (Lk / G_), Lk / G_};
  }
  /// All heads: the one group of an exchange that does not pipeline (the calls below without a Slice).
  Slice whole() const {
    DISTATTN_REQUIRE(G_ == 1, "DistAttn::Impl::HeadExchange",
                     "a whole-head exchange needs groups=1, got " << G_ << " (use the per-slice calls)");
    return slice(0);
  }

  /// Head-side views of one slice. The head-side tensors hold the groups one after
  /// the other (group-major: [G][B, N, L/G, D], statistics [G][B, L/G, N]), so each
  /// group is a contiguous row-major tensor that the tuned kernels read at full
  /// speed; with G = 1 that is q(), k(), ...
  auto q(const Slice& s) const { return heads4(b_.qh, s.q0, s.nq); }
  auto k(const Slice& s) const { return heads4(b_.kh, s.k0, s.nk); }
  auto v(const Slice& s) const { return heads4(b_.vh, s.k0, s.nk); }
  auto o(const Slice& s) const { return heads4(b_.oh, s.q0, s.nq); }
  auto dout(const Slice& s) const { return heads4(b_.doh, s.q0, s.nq); }
  auto lse(const Slice& s) const { return heads3(b_.lseh, s.q0, s.nq); }
  auto delta(const Slice& s) const { return heads3(b_.delh, s.q0, s.nq); }
  auto dq(const Slice& s) const { return heads4(b_.gqh, s.q0, s.nq); }
  auto dk(const Slice& s) const { return heads4(b_.gkh, s.k0, s.nk); }
  auto dv(const Slice& s) const { return heads4(b_.gvh, s.k0, s.nk); }

  /// q, k, v (sequence side, any layout) -> q(), k(), v(), one all-to-all (G = 1).
  template <class QV, class KV, class VV>
  void inputs_to_heads(const QV& qc, const KV& kc, const VV& vc) {
    Reqs r = post_inputs(qc, kc, vc, whole());
    finish_inputs(r, whole());
  }
  /// Packs the slice's q, k, v and posts their all-to-all (finish_inputs unpacks).
  template <class QV, class KV, class VV>
  Reqs post_inputs(const QV& qc, const KV& kc, const VV& vc, const Slice& sl) {
    const Slots3 s = qkv_slots(sl);
    const auto send = region(b_.isend, sl, s.a.block), recv = region(b_.irecv, sl, s.a.block);
    pack_heads(compute_, qc, qmap(sl), send, s.a, "DistAttn::ulysses.pack_q");
    pack_heads(compute_, kc, kmap(sl), send, s.b, "DistAttn::ulysses.pack_k");
    pack_heads(compute_, vc, kmap(sl), send, s.c, "DistAttn::ulysses.pack_v");
    Reqs r;
    post(send, recv, UlyssesPhase::QKV, r);
    return r;
  }
  void finish_inputs(Reqs& r, const Slice& sl) {
    rec_.wait_on(r, true);
    const Slots3 s = qkv_slots(sl);
    const auto recv = region(b_.irecv, sl, s.a.block);
    move_tokens<false>(compute_, q(sl), recv, s.a, P(), "DistAttn::ulysses.unpack_q");
    move_tokens<false>(compute_, k(sl), recv, s.b, P(), "DistAttn::ulysses.unpack_k");
    move_tokens<false>(compute_, v(sl), recv, s.c, P(), "DistAttn::ulysses.unpack_v");
  }

  /// o(), lse() (head side) -> o, lse (sequence side, any layout) (G = 1).
  template <class OV, class LV>
  void output_from_heads(const OV& o, const LV& lse) {
    Reqs r = post_output(whole());
    finish_output(r, o, lse, whole());
  }
  /// Packs the slice's O and LSE and posts their all-to-alls.
  Reqs post_output(const Slice& sl) {
    const BlockSlot so{q_words(sl), 0}, st{stat_words(sl), 0};
    // Separate declarations: O travels in T, LSE in Acc (the same type only for fp64).
    const auto os = region(b_.osend, sl, so.block);
    const auto ls = region(b_.lsend, sl, st.block);
    move_tokens<true>(compute_, o(sl), os, so, P(), "DistAttn::ulysses.pack_o");
    move_token_stats<true>(compute_, lse(sl), ls, st, P(), "DistAttn::ulysses.pack_lse");
    Reqs r;
    post(os, region(b_.orecv, sl, so.block), UlyssesPhase::Out, r);
    post(ls, region(b_.lrecv, sl, st.block), UlyssesPhase::Out, r);
    return r;
  }
  template <class OV, class LV>
  void finish_output(Reqs& r, const OV& o, const LV& lse, const Slice& sl) {
    rec_.wait_on(r, true);
    const BlockSlot so{q_words(sl), 0}, st{stat_words(sl), 0};
    unpack_heads(compute_, region(b_.orecv, sl, so.block), so, qmap(sl), o, "DistAttn::ulysses.unpack_o");
    move_head_stats<false>(compute_, lse, qmap(sl), region(b_.lrecv, sl, st.block), st,
                           "DistAttn::ulysses.unpack_lse");
  }

  /// dO and two row statistics (LSE, then Delta or any other) -> dout(), lse(), delta() (G = 1).
  template <class DV, class LV, class SV>
  void dout_to_heads(const DV& dc, const LV& lse, const SV& second) {
    Reqs r = post_dout(dc, lse, second, whole());
    finish_dout(r, whole());
  }
  /// Packs the slice's dO, LSE and Delta and posts their all-to-alls.
  template <class DV, class LV, class SV>
  Reqs post_dout(const DV& dc, const LV& lse, const SV& second, const Slice& sl) {
    const std::size_t sw = stat_words(sl);
    const BlockSlot sd{q_words(sl), 0}, s1{2 * sw, 0}, s2{2 * sw, sw};
    const auto ds = region(b_.osend, sl, sd.block);
    const auto ss = region(b_.ssend, sl, s1.block);
    pack_heads(compute_, dc, qmap(sl), ds, sd, "DistAttn::ulysses.pack_do");
    move_head_stats<true>(compute_, lse, qmap(sl), ss, s1, "DistAttn::ulysses.pack_lse");
    move_head_stats<true>(compute_, second, qmap(sl), ss, s2, "DistAttn::ulysses.pack_delta");
    Reqs r;
    post(ds, region(b_.orecv, sl, sd.block), UlyssesPhase::DOut, r);
    post(ss, region(b_.srecv, sl, s1.block), UlyssesPhase::DOut, r);
    return r;
  }
  void finish_dout(Reqs& r, const Slice& sl) {
    rec_.wait_on(r, true);
    const std::size_t sw = stat_words(sl);
    const BlockSlot sd{q_words(sl), 0}, s1{2 * sw, 0}, s2{2 * sw, sw};
    const auto sr = region(b_.srecv, sl, s1.block);
    move_tokens<false>(compute_, dout(sl), region(b_.orecv, sl, sd.block), sd, P(), "DistAttn::ulysses.unpack_do");
    move_token_stats<false>(compute_, lse(sl), sr, s1, P(), "DistAttn::ulysses.unpack_lse");
    move_token_stats<false>(compute_, delta(sl), sr, s2, P(), "DistAttn::ulysses.unpack_delta");
  }

  /// dO -> dout(), and with `with_lse` LSE -> lse() (the hybrid: its inner executor
  /// derives Delta itself, and lse() is still the forward's when it was kept).
  template <class DV, class LV>
  void dout_to_heads(const DV& dc, const LV& lse, bool with_lse) {
    const BlockSlot sd{q_words(), 0}, sl{stat_words(), 0};
    pack_heads(compute_, dc, qmap(), b_.osend, sd, "DistAttn::ulysses.pack_do");
    exchange(b_.osend, b_.orecv, UlyssesPhase::DOut);
    move_tokens<false>(compute_, b_.doh, b_.orecv, sd, P(), "DistAttn::ulysses.unpack_do");
    if (!with_lse) return;
    move_head_stats<true>(compute_, lse, qmap(), b_.lsend, sl, "DistAttn::ulysses.pack_lse");
    exchange(b_.lsend, b_.lrecv, UlyssesPhase::DOut);
    move_token_stats<false>(compute_, b_.lseh, b_.lrecv, sl, P(), "DistAttn::ulysses.unpack_lse");
  }

  /// A sequence-side tensor with the query heads -> o() (the hybrid's O for its inner backward).
  template <class OV>
  void tensor_to_heads(const OV& oc) {
    const BlockSlot so{q_words(), 0};
    pack_heads(compute_, oc, qmap(), b_.osend, so, "DistAttn::ulysses.pack_o");
    exchange(b_.osend, b_.orecv, UlyssesPhase::DOut);
    move_tokens<false>(compute_, b_.oh, b_.orecv, so, P(), "DistAttn::ulysses.unpack_o");
  }

  /// Zeroes dq(), dk(), dv() for a backward that accumulates into them.
  void clear_grads() {
    Kokkos::deep_copy(compute_, b_.gqh, Acc(0));
    Kokkos::deep_copy(compute_, b_.gkh, Acc(0));
    Kokkos::deep_copy(compute_, b_.gvh, Acc(0));
  }

  /// dq(), dk(), dv() (fp32, head side) -> dq, dk, dv (sequence side, any type and
  /// layout), one all-to-all; replicated K/V heads' contributions are summed (G = 1).
  template <class DQV, class DKV, class DVV>
  void grads_from_heads(const DQV& dq, const DKV& dk, const DVV& dv) {
    Reqs r = post_grads(whole());
    finish_grads(r, dq, dk, dv, whole());
  }
  /// Packs the slice's dq, dk, dv and posts their all-to-all.
  Reqs post_grads(const Slice& sl) {
    const Slots3 s = qkv_slots(sl);
    const auto send = region(b_.gsend, sl, s.a.block);
    move_tokens<true>(compute_, dq(sl), send, s.a, P(), "DistAttn::ulysses.pack_dq");
    move_tokens<true>(compute_, dk(sl), send, s.b, P(), "DistAttn::ulysses.pack_dk");
    move_tokens<true>(compute_, dv(sl), send, s.c, P(), "DistAttn::ulysses.pack_dv");
    Reqs r;
    post(send, region(b_.grecv, sl, s.a.block), UlyssesPhase::Grad, r);
    return r;
  }
  template <class DQV, class DKV, class DVV>
  void finish_grads(Reqs& r, const DQV& dq, const DKV& dk, const DVV& dv, const Slice& sl) {
    rec_.wait_on(r, true);
    const Slots3 s = qkv_slots(sl);
    const auto recv = region(b_.grecv, sl, s.a.block);
    unpack_heads(compute_, recv, s.a, qmap(sl), dq, "DistAttn::ulysses.unpack_dq");
    unpack_heads(compute_, recv, s.b, kmap(sl), dk, "DistAttn::ulysses.unpack_dk");
    unpack_heads(compute_, recv, s.c, kmap(sl), dv, "DistAttn::ulysses.unpack_dv");
  }

 private:
  struct Slots3 {
    BlockSlot a, b, c;
  };
  int P() const { return comm_.size(); }
  HeadMap qmap() const { return HeadMap::query(heads_); }
  HeadMap kmap() const { return HeadMap::key(heads_); }
  HeadMap qmap(const Slice& s) const { return HeadMap::query(heads_, s.q0, s.nq); }
  HeadMap kmap(const Slice& s) const { return HeadMap::key(heads_, s.k0, s.nk); }
  /// Elements of one rank's block: its tokens' (or its heads') share of a tensor.
  std::size_t q_words() const { return q_words(whole()); }
  std::size_t stat_words() const { return stat_words(whole()); }
  std::size_t q_words(const Slice& s) const { return std::size_t(B_) * c_ * s.nq * D_; }
  std::size_t kv_words(const Slice& s) const { return std::size_t(B_) * c_ * s.nk * D_; }
  std::size_t stat_words(const Slice& s) const { return std::size_t(B_) * s.nq * c_; }
  /// Blocks of [q | k | v] (or [dq | dk | dv]) of one slice.
  Slots3 qkv_slots(const Slice& sl) const {
    const std::size_t nq = q_words(sl), nk = kv_words(sl), blk = nq + 2 * nk;
    return {BlockSlot{blk, 0}, BlockSlot{blk, nq}, BlockSlot{blk, nq + nk}};
  }
  /// The slice's slot of a message buffer of P blocks of `block` elements per
  /// group slot: group g's is slot g mod slots(G) (the whole buffer for G = 1).
  template <class V>
  V region(const V& buf, const Slice& s, std::size_t block) const {
    const std::size_t len = std::size_t(P()) * block, first = len * std::size_t((s.q0 / s.nq) % Buffers::slots(G_));
    DISTATTN_REQUIRE(first + len <= buf.extent(0), "DistAttn::Impl::HeadExchange",
                     "a head group's message does not fit its slot (groups=" << G_ << ")");
    return Kokkos::subview(buf, Kokkos::make_pair(first, first + len));
  }
  /// Heads [first, first + count) of a group-major head-side tensor.
  template <class V>
  static auto heads4(const V& x, int first, int count) {
    using U = Kokkos::View<typename V::value_type****, Kokkos::LayoutRight, typename V::memory_space,
                           Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const std::size_t B = x.extent(0), N = x.extent(1), D = x.extent(3);
    return U(x.data() + B * N * std::size_t(first) * D, B, N, std::size_t(count), D);
  }
  template <class V>
  static auto heads3(const V& x, int first, int count) {
    using U = Kokkos::View<typename V::value_type***, Kokkos::LayoutRight, typename V::memory_space,
                           Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const std::size_t B = x.extent(0), N = x.extent(2);
    return U(x.data() + B * std::size_t(first) * N, B, std::size_t(count), N);
  }

  /// Posts one all-to-all of `send` (P blocks) into `recv` after what compute has
  /// queued (the packing), on the communicator's instance; adds it to `reqs`.
  template <class V>
  void post(const V& send, const V& recv, UlyssesPhase phase, Reqs& reqs) {
    if (rec_.skip_transfers()) return;
    comm_.depend_on(compute_);  // the blocks were packed on compute
    reqs.push_back(all_to_all(comm_, send, recv));
    const std::uint64_t bytes =
        std::uint64_t(P() - 1) * (send.size() / std::size_t(P())) * sizeof(typename V::value_type);
    rec_.sent(phase, bytes);
    rec_.received(phase, bytes);
    rec_.posted();
  }
  /// One all-to-all, waited on by the compute instance.
  template <class V>
  void exchange(const V& send, const V& recv, UlyssesPhase phase) {
    Reqs r;
    post(send, recv, phase, r);
    rec_.wait_on(r, true);
  }

  Comm& comm_;
  Exec compute_;
  Recorder& rec_;
  int B_, c_, D_;
  UlyssesHeads heads_;
  Use use_;
  int G_;
  KeptAndPassWorkspace<Mem> mem_{"DistAttn::ulysses.kept", "DistAttn::ulysses.workspace"};
  Buffers b_;
};

}  // namespace DistAttn::Impl
