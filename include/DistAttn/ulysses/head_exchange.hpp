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
/// Every exchange is waited on before the next phase packs, so the message
/// buffers of successive phases share memory.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/impl/pass_recorder.hpp>
#include <DistAttn/ulysses/ulysses_pack.hpp>
#include <DistAttn/ulysses/ulysses_types.hpp>

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

  /// What the executor keeps and adds besides the exchange's own buffers.
  struct Use {
    bool keep_output = false;      ///< o() and lse() outlive forward (the hybrid's inner backward reads them)
    bool state_and_delta = false;  ///< forward state of the one-call attention, sequence-side Delta (Ulysses)
  };

  HeadExchange(Comm& comm, const Exec& compute, Recorder& rec, int batch, int chunk, const UlyssesHeads& heads,
               int head_dim, Use use)
      : comm_(comm), compute_(compute), rec_(rec), B_(batch), c_(chunk), D_(head_dim), heads_(heads), use_(use) {}

  /// Forward's and backward's buffers for these extents: the kept tensors, then the pass's workspace.
  static MemoryPlan memory_plan(int batch, int chunk, const UlyssesHeads& heads, int head_dim, Use use) {
    const Shape s{batch, chunk, head_dim, heads, use};
    Buffers scratch;
    return KeptAndPassWorkspace<Mem>::plan([&](Carver<Mem>& c) { lay_out_kept(c, scratch, s); },
                                           [&](Carver<Mem>& c) { lay_out_forward(c, scratch, s); },
                                           [&](Carver<Mem>& c) { lay_out_backward(c, scratch, s); });
  }
  MemoryPlan memory_plan() const { return memory_plan(B_, c_, heads_, D_, use_); }
  std::size_t held_bytes() const { return mem_.held(); }
  /// Points the buffers at the kept allocation and the workspace in the layout of
  /// forward or backward (growing the workspace if needed; kept tensors survive).
  void use_workspace(bool backward) {
    const Shape s{B_, c_, D_, heads_, use_};
    mem_.use(backward, [&](Carver<Mem>& c) { lay_out_kept(c, b_, s); },
             [&](Carver<Mem>& c) { lay_out_forward(c, b_, s); }, [&](Carver<Mem>& c) { lay_out_backward(c, b_, s); });
  }
  /// Ulysses' forward state and sequence-side Delta [B, H, c] (Use::state_and_delta).
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

  /// q, k, v (sequence side, any layout) -> q(), k(), v(), one all-to-all.
  template <class QV, class KV, class VV>
  void inputs_to_heads(const QV& qc, const KV& kc, const VV& vc) {
    const Slots3 s = qkv_slots();
    pack_heads(compute_, qc, qmap(), b_.isend, s.a, "DistAttn::ulysses.pack_q");
    pack_heads(compute_, kc, kmap(), b_.isend, s.b, "DistAttn::ulysses.pack_k");
    pack_heads(compute_, vc, kmap(), b_.isend, s.c, "DistAttn::ulysses.pack_v");
    exchange(b_.isend, b_.irecv, UlyssesPhase::QKV);
    move_tokens<false>(compute_, b_.qh, b_.irecv, s.a, P(), "DistAttn::ulysses.unpack_q");
    move_tokens<false>(compute_, b_.kh, b_.irecv, s.b, P(), "DistAttn::ulysses.unpack_k");
    move_tokens<false>(compute_, b_.vh, b_.irecv, s.c, P(), "DistAttn::ulysses.unpack_v");
  }

  /// o(), lse() (head side) -> o, lse (sequence side, any layout).
  template <class OV, class LV>
  void output_from_heads(const OV& o, const LV& lse) {
    const BlockSlot so{q_words(), 0}, sl{stat_words(), 0};
    move_tokens<true>(compute_, b_.oh, b_.osend, so, P(), "DistAttn::ulysses.pack_o");
    move_token_stats<true>(compute_, b_.lseh, b_.lsend, sl, P(), "DistAttn::ulysses.pack_lse");
    exchange(b_.osend, b_.orecv, UlyssesPhase::Out);
    exchange(b_.lsend, b_.lrecv, UlyssesPhase::Out);
    unpack_heads(compute_, b_.orecv, so, qmap(), o, "DistAttn::ulysses.unpack_o");
    move_head_stats<false>(compute_, lse, qmap(), b_.lrecv, sl, "DistAttn::ulysses.unpack_lse");
  }

  /// dO and two row statistics (LSE, then Delta or any other) -> dout(), lse(), delta().
  template <class DV, class LV, class SV>
  void dout_to_heads(const DV& dc, const LV& lse, const SV& second) {
    const BlockSlot sd{q_words(), 0}, sl{2 * stat_words(), 0}, s2{2 * stat_words(), stat_words()};
    pack_heads(compute_, dc, qmap(), b_.osend, sd, "DistAttn::ulysses.pack_do");
    move_head_stats<true>(compute_, lse, qmap(), b_.ssend, sl, "DistAttn::ulysses.pack_lse");
    move_head_stats<true>(compute_, second, qmap(), b_.ssend, s2, "DistAttn::ulysses.pack_delta");
    exchange(b_.osend, b_.orecv, UlyssesPhase::DOut);
    exchange(b_.ssend, b_.srecv, UlyssesPhase::DOut);
    move_tokens<false>(compute_, b_.doh, b_.orecv, sd, P(), "DistAttn::ulysses.unpack_do");
    move_token_stats<false>(compute_, b_.lseh, b_.srecv, sl, P(), "DistAttn::ulysses.unpack_lse");
    move_token_stats<false>(compute_, b_.delh, b_.srecv, s2, P(), "DistAttn::ulysses.unpack_delta");
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
  /// layout), one all-to-all; replicated K/V heads' contributions are summed.
  template <class DQV, class DKV, class DVV>
  void grads_from_heads(const DQV& dq, const DKV& dk, const DVV& dv) {
    const Slots3 s = qkv_slots();
    move_tokens<true>(compute_, b_.gqh, b_.gsend, s.a, P(), "DistAttn::ulysses.pack_dq");
    move_tokens<true>(compute_, b_.gkh, b_.gsend, s.b, P(), "DistAttn::ulysses.pack_dk");
    move_tokens<true>(compute_, b_.gvh, b_.gsend, s.c, P(), "DistAttn::ulysses.pack_dv");
    exchange(b_.gsend, b_.grecv, UlyssesPhase::Grad);
    unpack_heads(compute_, b_.grecv, s.a, qmap(), dq, "DistAttn::ulysses.unpack_dq");
    unpack_heads(compute_, b_.grecv, s.b, kmap(), dk, "DistAttn::ulysses.unpack_dk");
    unpack_heads(compute_, b_.grecv, s.c, kmap(), dv, "DistAttn::ulysses.unpack_dv");
  }

 private:
  struct Slots3 {
    BlockSlot a, b, c;
  };
  int P() const { return comm_.size(); }
  HeadMap qmap() const { return HeadMap::query(heads_); }
  HeadMap kmap() const { return HeadMap::key(heads_); }
  /// Elements of one rank's block: its tokens' (or its heads') share of a tensor.
  std::size_t q_words() const { return std::size_t(B_) * c_ * heads_.local_heads() * D_; }
  std::size_t kv_words() const { return std::size_t(B_) * c_ * heads_.local_kv_heads() * D_; }
  std::size_t stat_words() const { return std::size_t(B_) * heads_.local_heads() * c_; }
  /// Blocks of [q | k | v] (or [dq | dk | dv]).
  Slots3 qkv_slots() const {
    const std::size_t nq = q_words(), nk = kv_words(), blk = nq + 2 * nk;
    return {BlockSlot{blk, 0}, BlockSlot{blk, nq}, BlockSlot{blk, nq + nk}};
  }

  /// One all-to-all of `send` (P blocks) into `recv`, waited on by the compute instance.
  template <class V>
  void exchange(const V& send, const V& recv, UlyssesPhase phase) {
    if (rec_.skip_transfers()) return;
    comm_.depend_on(compute_);  // the blocks were packed on compute
    std::vector<Req> reqs;
    reqs.push_back(all_to_all(comm_, send, recv));
    const std::uint64_t bytes =
        std::uint64_t(P() - 1) * (send.size() / std::size_t(P())) * sizeof(typename V::value_type);
    rec_.sent(phase, bytes);
    rec_.received(phase, bytes);
    rec_.posted();
    rec_.wait_on(reqs, true);
  }

  struct Shape {
    int B, c, D;
    UlyssesHeads heads;
    Use use;
  };
  struct Buffers {
    TView qh, kh, vh, oh, doh;
    StatView lseh, delh, seq_delta;
    AccView gqh, gkh, gvh;
    AttnState<Acc, Mem> state;
    Kokkos::View<T*, Mem> isend, irecv, osend, orecv;
    Kokkos::View<Acc*, Mem> lsend, lrecv, ssend, srecv, gsend, grecv;
  };
  static void lay_out_kept(Carver<Mem>& c, Buffers& b, const Shape& s) {
    const int N = s.heads.ranks * s.c, L = s.heads.local_heads(), Lk = s.heads.local_kv_heads();
    c.take(b.qh, "DistAttn::ulysses.q_heads", s.B, N, L, s.D);
    c.take(b.kh, "DistAttn::ulysses.k_heads", s.B, N, Lk, s.D);
    c.take(b.vh, "DistAttn::ulysses.v_heads", s.B, N, Lk, s.D);
    if (s.use.keep_output) lay_out_output(c, b, s);
  }
  static void lay_out_output(Carver<Mem>& c, Buffers& b, const Shape& s) {
    const int N = s.heads.ranks * s.c, L = s.heads.local_heads();
    c.take(b.oh, "DistAttn::ulysses.o_heads", s.B, N, L, s.D);
    c.take(b.lseh, "DistAttn::ulysses.lse_heads", s.B, L, N);
  }
  /// Per-peer blocks of one message: q, k, v (or dq, dk, dv) of one rank.
  static std::size_t qkv_words(const Shape& s) {
    return std::size_t(s.B) * s.c * s.D * (s.heads.local_heads() + 2 * s.heads.local_kv_heads());
  }
  static std::size_t q_words(const Shape& s) { return std::size_t(s.B) * s.c * s.heads.local_heads() * s.D; }
  static std::size_t stat_words(const Shape& s) { return std::size_t(s.B) * s.heads.local_heads() * s.c; }
  static void lay_out_qkv_messages(Carver<Mem>& c, Buffers& b, const Shape& s) {
    const std::size_t in = std::size_t(s.heads.ranks) * qkv_words(s);
    c.take(b.isend, "DistAttn::ulysses.qkv_send", in);
    c.take(b.irecv, "DistAttn::ulysses.qkv_recv", in);
  }
  static void lay_out_o_messages(Carver<Mem>& c, Buffers& b, const Shape& s) {
    const std::size_t P = std::size_t(s.heads.ranks);
    c.take(b.osend, "DistAttn::ulysses.o_send", P * q_words(s));
    c.take(b.orecv, "DistAttn::ulysses.o_recv", P * q_words(s));
  }
  static void lay_out_lse_messages(Carver<Mem>& c, Buffers& b, const Shape& s) {
    const std::size_t P = std::size_t(s.heads.ranks);
    c.take(b.lsend, "DistAttn::ulysses.lse_send", P * stat_words(s));
    c.take(b.lrecv, "DistAttn::ulysses.lse_recv", P * stat_words(s));
  }
  // Phases (each exchange is waited on before the next packs): q|k|v in; the
  // attention (its state); O and LSE out.
  static void lay_out_forward(Carver<Mem>& c, Buffers& b, const Shape& s) {
    if (!s.use.keep_output) lay_out_output(c, b, s);
    const std::size_t m = c.mark();
    lay_out_qkv_messages(c, b, s);
    if (s.use.state_and_delta) {
      c.rewind(m);
      c.state(b.state, "DistAttn::ulysses.state", s.B, s.heads.ranks * s.c, s.heads.local_heads(), s.D);
    }
    c.rewind(m);
    lay_out_o_messages(c, b, s);
    lay_out_lse_messages(c, b, s);
    c.to_end();
  }
  // Phases: q|k|v in again (and the hybrid's O) when forward's are not kept;
  // dO and statistics in, read by the attention; gradients out.
  static void lay_out_backward(Carver<Mem>& c, Buffers& b, const Shape& s) {
    const int N = s.heads.ranks * s.c, L = s.heads.local_heads(), Lk = s.heads.local_kv_heads();
    if (s.use.state_and_delta) c.take(b.seq_delta, "DistAttn::ulysses.delta", s.B, s.heads.heads, s.c);
    if (!s.use.keep_output) c.take(b.lseh, "DistAttn::ulysses.lse_heads", s.B, L, N);
    c.take(b.gqh, "DistAttn::ulysses.dq_heads", s.B, N, L, s.D);
    c.take(b.gkh, "DistAttn::ulysses.dk_heads", s.B, N, Lk, s.D);
    c.take(b.gvh, "DistAttn::ulysses.dv_heads", s.B, N, Lk, s.D);
    const std::size_t m = c.mark();
    lay_out_qkv_messages(c, b, s);
    c.rewind(m);
    c.take(b.doh, "DistAttn::ulysses.do_heads", s.B, N, L, s.D);
    lay_out_o_messages(c, b, s);
    if (s.use.state_and_delta) {
      c.take(b.delh, "DistAttn::ulysses.delta_heads", s.B, L, N);
      const std::size_t two = 2 * std::size_t(s.heads.ranks) * stat_words(s);
      c.take(b.ssend, "DistAttn::ulysses.stats_send", two);
      c.take(b.srecv, "DistAttn::ulysses.stats_recv", two);
    } else {
      lay_out_lse_messages(c, b, s);
    }
    c.rewind(m);
    const std::size_t g = std::size_t(s.heads.ranks) * qkv_words(s);
    c.take(b.gsend, "DistAttn::ulysses.grad_send", g);
    c.take(b.grecv, "DistAttn::ulysses.grad_recv", g);
    c.to_end();
  }

  Comm& comm_;
  Exec compute_;
  Recorder& rec_;
  int B_, c_, D_;
  UlyssesHeads heads_;
  Use use_;
  KeptAndPassWorkspace<Mem> mem_{"DistAttn::ulysses.kept", "DistAttn::ulysses.workspace"};
  Buffers b_;
};

}  // namespace DistAttn::Impl
