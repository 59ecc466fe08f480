#pragma once
/// @file ulysses/head_exchange.hpp
/// The all-to-alls between sequence shards and head shards that the Ulysses and
/// hybrid executors share, with their buffers and head-side tensors. Sequence
/// side: rank g's c own tokens with all heads; head side: the U c tokens of the
/// group with the heads UlyssesHeads gives rank g, in group-rank order (rank i's
/// tokens are rows [i c, (i+1) c)). The packing kernels read and write the
/// sequence side element by element, so callers' Views of any layout need no staging.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
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

  HeadExchange(Comm& comm, const Exec& compute, Recorder& rec, int batch, int chunk, const UlyssesHeads& heads,
               int head_dim)
      : comm_(comm), compute_(compute), rec_(rec), B_(batch), c_(chunk), D_(head_dim), heads_(heads) {}

  const UlyssesHeads& heads() const { return heads_; }
  /// Head-side tensors: [B, U c, local heads, D] and statistics [B, local heads, U c].
  const TView& q() const { return qh_; }
  const TView& k() const { return kh_; }
  const TView& v() const { return vh_; }
  const TView& o() const { return oh_; }
  const TView& dout() const { return doh_; }
  const StatView& lse() const { return lseh_; }
  const StatView& delta() const { return delh_; }
  const AccView& dq() const { return gqh_; }
  const AccView& dk() const { return gkh_; }
  const AccView& dv() const { return gvh_; }

  /// q, k, v (sequence side, any layout) -> q(), k(), v(), one all-to-all.
  template <class QV, class KV, class VV>
  void inputs_to_heads(const QV& qc, const KV& kc, const VV& vc) {
    ensure_forward();
    const Slots3 s = qkv_slots();
    pack_heads(compute_, qc, qmap(), isend_, s.a, "DistAttn::ulysses.pack_q");
    pack_heads(compute_, kc, kmap(), isend_, s.b, "DistAttn::ulysses.pack_k");
    pack_heads(compute_, vc, kmap(), isend_, s.c, "DistAttn::ulysses.pack_v");
    exchange(isend_, irecv_, UlyssesPhase::QKV);
    move_tokens<false>(compute_, qh_, irecv_, s.a, P(), "DistAttn::ulysses.unpack_q");
    move_tokens<false>(compute_, kh_, irecv_, s.b, P(), "DistAttn::ulysses.unpack_k");
    move_tokens<false>(compute_, vh_, irecv_, s.c, P(), "DistAttn::ulysses.unpack_v");
  }

  /// o(), lse() (head side) -> o, lse (sequence side, any layout).
  template <class OV, class LV>
  void output_from_heads(const OV& o, const LV& lse) {
    const BlockSlot so{q_words(), 0}, sl{stat_words(), 0};
    move_tokens<true>(compute_, oh_, osend_, so, P(), "DistAttn::ulysses.pack_o");
    move_token_stats<true>(compute_, lseh_, lsend_, sl, P(), "DistAttn::ulysses.pack_lse");
    exchange(osend_, orecv_, UlyssesPhase::Out);
    exchange(lsend_, lrecv_, UlyssesPhase::Out);
    unpack_heads(compute_, orecv_, so, qmap(), o, "DistAttn::ulysses.unpack_o");
    move_head_stats<false>(compute_, lse, qmap(), lrecv_, sl, "DistAttn::ulysses.unpack_lse");
  }

  /// dO and two row statistics (LSE, then Delta or any other) -> dout(), lse(), delta().
  template <class DV, class LV, class SV>
  void dout_to_heads(const DV& dc, const LV& lse, const SV& second) {
    ensure_backward();
    const BlockSlot sd{q_words(), 0}, sl{2 * stat_words(), 0}, s2{2 * stat_words(), stat_words()};
    pack_heads(compute_, dc, qmap(), osend_, sd, "DistAttn::ulysses.pack_do");
    move_head_stats<true>(compute_, lse, qmap(), ssend_, sl, "DistAttn::ulysses.pack_lse");
    move_head_stats<true>(compute_, second, qmap(), ssend_, s2, "DistAttn::ulysses.pack_delta");
    exchange(osend_, orecv_, UlyssesPhase::DOut);
    exchange(ssend_, srecv_, UlyssesPhase::DOut);
    move_tokens<false>(compute_, doh_, orecv_, sd, P(), "DistAttn::ulysses.unpack_do");
    move_token_stats<false>(compute_, lseh_, srecv_, sl, P(), "DistAttn::ulysses.unpack_lse");
    move_token_stats<false>(compute_, delh_, srecv_, s2, P(), "DistAttn::ulysses.unpack_delta");
  }

  /// dO -> dout(), and with `with_lse` LSE -> lse() (the hybrid: its inner executor
  /// derives Delta itself, and lse() is still the forward's when it was kept).
  template <class DV, class LV>
  void dout_to_heads(const DV& dc, const LV& lse, bool with_lse) {
    ensure_backward();
    const BlockSlot sd{q_words(), 0}, sl{stat_words(), 0};
    pack_heads(compute_, dc, qmap(), osend_, sd, "DistAttn::ulysses.pack_do");
    exchange(osend_, orecv_, UlyssesPhase::DOut);
    move_tokens<false>(compute_, doh_, orecv_, sd, P(), "DistAttn::ulysses.unpack_do");
    if (!with_lse) return;
    move_head_stats<true>(compute_, lse, qmap(), lsend_, sl, "DistAttn::ulysses.pack_lse");
    exchange(lsend_, lrecv_, UlyssesPhase::DOut);
    move_token_stats<false>(compute_, lseh_, lrecv_, sl, P(), "DistAttn::ulysses.unpack_lse");
  }

  /// A sequence-side tensor with the query heads -> o() (the hybrid's O for its inner backward).
  template <class OV>
  void tensor_to_heads(const OV& oc) {
    const BlockSlot so{q_words(), 0};
    pack_heads(compute_, oc, qmap(), osend_, so, "DistAttn::ulysses.pack_o");
    exchange(osend_, orecv_, UlyssesPhase::DOut);
    move_tokens<false>(compute_, oh_, orecv_, so, P(), "DistAttn::ulysses.unpack_o");
  }

  /// Zeroes dq(), dk(), dv() for a backward that accumulates into them.
  void clear_grads() {
    ensure_backward();
    Kokkos::deep_copy(compute_, gqh_, Acc(0));
    Kokkos::deep_copy(compute_, gkh_, Acc(0));
    Kokkos::deep_copy(compute_, gvh_, Acc(0));
  }

  /// dq(), dk(), dv() (fp32, head side) -> dq, dk, dv (sequence side, any type and
  /// layout), one all-to-all; replicated K/V heads' contributions are summed.
  template <class DQV, class DKV, class DVV>
  void grads_from_heads(const DQV& dq, const DKV& dk, const DVV& dv) {
    const Slots3 s = qkv_slots();
    move_tokens<true>(compute_, gqh_, gsend_, s.a, P(), "DistAttn::ulysses.pack_dq");
    move_tokens<true>(compute_, gkh_, gsend_, s.b, P(), "DistAttn::ulysses.pack_dk");
    move_tokens<true>(compute_, gvh_, gsend_, s.c, P(), "DistAttn::ulysses.pack_dv");
    exchange(gsend_, grecv_, UlyssesPhase::Grad);
    unpack_heads(compute_, grecv_, s.a, qmap(), dq, "DistAttn::ulysses.unpack_dq");
    unpack_heads(compute_, grecv_, s.b, kmap(), dk, "DistAttn::ulysses.unpack_dk");
    unpack_heads(compute_, grecv_, s.c, kmap(), dv, "DistAttn::ulysses.unpack_dv");
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

  void ensure_forward() {
    if (qh_.size() != 0) return;
    const int N = P() * c_, L = heads_.local_heads(), Lk = heads_.local_kv_heads();
    qh_   = TView("DistAttn::ulysses.q_heads", B_, N, L, D_);
    kh_   = TView("DistAttn::ulysses.k_heads", B_, N, Lk, D_);
    vh_   = TView("DistAttn::ulysses.v_heads", B_, N, Lk, D_);
    oh_   = TView("DistAttn::ulysses.o_heads", B_, N, L, D_);
    lseh_ = StatView("DistAttn::ulysses.lse_heads", B_, L, N);
    const std::size_t in = std::size_t(P()) * (q_words() + 2 * kv_words());
    isend_ = Kokkos::View<T*, Mem>("DistAttn::ulysses.qkv_send", in);
    irecv_ = Kokkos::View<T*, Mem>("DistAttn::ulysses.qkv_recv", in);
    osend_ = Kokkos::View<T*, Mem>("DistAttn::ulysses.o_send", std::size_t(P()) * q_words());
    orecv_ = Kokkos::View<T*, Mem>("DistAttn::ulysses.o_recv", std::size_t(P()) * q_words());
    lsend_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.lse_send", std::size_t(P()) * stat_words());
    lrecv_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.lse_recv", std::size_t(P()) * stat_words());
  }
  void ensure_backward() {
    ensure_forward();
    if (doh_.size() != 0) return;
    const int N = P() * c_, L = heads_.local_heads(), Lk = heads_.local_kv_heads();
    doh_   = TView("DistAttn::ulysses.do_heads", B_, N, L, D_);
    delh_  = StatView("DistAttn::ulysses.delta_heads", B_, L, N);
    gqh_   = AccView("DistAttn::ulysses.dq_heads", B_, N, L, D_);
    gkh_   = AccView("DistAttn::ulysses.dk_heads", B_, N, Lk, D_);
    gvh_   = AccView("DistAttn::ulysses.dv_heads", B_, N, Lk, D_);
    ssend_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.stats_send", std::size_t(P()) * 2 * stat_words());
    srecv_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.stats_recv", std::size_t(P()) * 2 * stat_words());
    const std::size_t g = std::size_t(P()) * (q_words() + 2 * kv_words());
    gsend_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.grad_send", g);
    grecv_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.grad_recv", g);
  }

  Comm& comm_;
  Exec compute_;
  Recorder& rec_;
  int B_, c_, D_;
  UlyssesHeads heads_;
  TView qh_, kh_, vh_, oh_, doh_;
  StatView lseh_, delh_;
  AccView gqh_, gkh_, gvh_;
  Kokkos::View<T*, Mem> isend_, irecv_, osend_, orecv_;
  Kokkos::View<Acc*, Mem> lsend_, lrecv_, ssend_, srecv_, gsend_, grecv_;
};

}  // namespace DistAttn::Impl
