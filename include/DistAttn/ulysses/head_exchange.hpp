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

  /// One pipeline group: query heads [q0, q0 + nq) and K/V heads [k0, k0 + nk)
  /// of every rank's share.
  struct Slice {
    int q0 = 0, nq = 0, k0 = 0, nk = 0;
  };
  using Reqs = std::vector<Req>;

  /// Group g of G (ulysses_head_groups: G divides L and Lk).
  Slice slice(int g, int G) const {
    const int L = heads_.local_heads(), Lk = heads_.local_kv_heads();
    return Slice{g * (L / G), L / G, g * (Lk / G), Lk / G};
  }
  Slice whole() const { return slice(0, 1); }

  /// q, k, v (sequence side, any layout) -> q(), k(), v(), one all-to-all.
  template <class QV, class KV, class VV>
  void inputs_to_heads(const QV& qc, const KV& kc, const VV& vc) {
    Reqs r = post_inputs(qc, kc, vc, whole());
    finish_inputs(r, whole());
  }
  /// Packs the slice's q, k, v and posts their all-to-all (finish_inputs unpacks).
  template <class QV, class KV, class VV>
  Reqs post_inputs(const QV& qc, const KV& kc, const VV& vc, const Slice& sl) {
    ensure_forward();
    const Slots3 s = qkv_slots(sl);
    const auto send = qkv_region(isend_, sl), recv = qkv_region(irecv_, sl);
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
    const auto recv = qkv_region(irecv_, sl);
    move_tokens<false>(compute_, q(sl), recv, s.a, P(), "DistAttn::ulysses.unpack_q");
    move_tokens<false>(compute_, k(sl), recv, s.b, P(), "DistAttn::ulysses.unpack_k");
    move_tokens<false>(compute_, v(sl), recv, s.c, P(), "DistAttn::ulysses.unpack_v");
  }

  /// Head-side views of one slice. The head-side tensors hold the groups one after
  /// the other (group-major: [G][B, N, L/G, D], statistics [G][B, L/G, N]), so each
  /// group is a contiguous row-major tensor that the tuned kernels read at full
  /// speed; with G = 1 that is q(), k(), ... A pass must use one G throughout.
  auto q(const Slice& s) const { return heads4(qh_, s.q0, s.nq); }
  auto k(const Slice& s) const { return heads4(kh_, s.k0, s.nk); }
  auto v(const Slice& s) const { return heads4(vh_, s.k0, s.nk); }
  auto o(const Slice& s) const { return heads4(oh_, s.q0, s.nq); }
  auto dout(const Slice& s) const { return heads4(doh_, s.q0, s.nq); }
  auto lse(const Slice& s) const { return heads3(lseh_, s.q0, s.nq); }
  auto delta(const Slice& s) const { return heads3(delh_, s.q0, s.nq); }
  auto dq(const Slice& s) const { return heads4(gqh_, s.q0, s.nq); }
  auto dk(const Slice& s) const { return heads4(gkh_, s.k0, s.nk); }
  auto dv(const Slice& s) const { return heads4(gvh_, s.k0, s.nk); }

  /// o(), lse() (head side) -> o, lse (sequence side, any layout).
  template <class OV, class LV>
  void output_from_heads(const OV& o, const LV& lse) {
    Reqs r = post_output(whole());
    finish_output(r, o, lse, whole());
  }
  /// Packs the slice's O and LSE and posts their all-to-alls.
  Reqs post_output(const Slice& sl) {
    const BlockSlot so{q_words(sl), 0}, st{stat_words(sl), 0};
    const auto os = region(osend_, sl, q_words(sl)), ls = region(lsend_, sl, stat_words(sl));
    move_tokens<true>(compute_, o(sl), os, so, P(), "DistAttn::ulysses.pack_o");
    move_token_stats<true>(compute_, lse(sl), ls, st, P(), "DistAttn::ulysses.pack_lse");
    Reqs r;
    post(os, region(orecv_, sl, q_words(sl)), UlyssesPhase::Out, r);
    post(ls, region(lrecv_, sl, stat_words(sl)), UlyssesPhase::Out, r);
    return r;
  }
  template <class OV, class LV>
  void finish_output(Reqs& r, const OV& o, const LV& lse, const Slice& sl) {
    rec_.wait_on(r, true);
    const BlockSlot so{q_words(sl), 0}, st{stat_words(sl), 0};
    unpack_heads(compute_, region(orecv_, sl, q_words(sl)), so, qmap(sl), o, "DistAttn::ulysses.unpack_o");
    move_head_stats<false>(compute_, lse, qmap(sl), region(lrecv_, sl, stat_words(sl)), st,
                           "DistAttn::ulysses.unpack_lse");
  }

  /// dO and two row statistics (LSE, then Delta or any other) -> dout(), lse(), delta().
  template <class DV, class LV, class SV>
  void dout_to_heads(const DV& dc, const LV& lse, const SV& second) {
    Reqs r = post_dout(dc, lse, second, whole());
    finish_dout(r, whole());
  }
  /// Packs the slice's dO, LSE and Delta and posts their all-to-alls.
  template <class DV, class LV, class SV>
  Reqs post_dout(const DV& dc, const LV& lse, const SV& second, const Slice& sl) {
    ensure_backward();
    const std::size_t sw = stat_words(sl);
    const BlockSlot sd{q_words(sl), 0}, s1{2 * sw, 0}, s2{2 * sw, sw};
    const auto ds = region(osend_, sl, q_words(sl)), ss = region(ssend_, sl, 2 * sw);
    pack_heads(compute_, dc, qmap(sl), ds, sd, "DistAttn::ulysses.pack_do");
    move_head_stats<true>(compute_, lse, qmap(sl), ss, s1, "DistAttn::ulysses.pack_lse");
    move_head_stats<true>(compute_, second, qmap(sl), ss, s2, "DistAttn::ulysses.pack_delta");
    Reqs r;
    post(ds, region(orecv_, sl, q_words(sl)), UlyssesPhase::DOut, r);
    post(ss, region(srecv_, sl, 2 * sw), UlyssesPhase::DOut, r);
    return r;
  }
  void finish_dout(Reqs& r, const Slice& sl) {
    rec_.wait_on(r, true);
    const std::size_t sw = stat_words(sl);
    const BlockSlot sd{q_words(sl), 0}, s1{2 * sw, 0}, s2{2 * sw, sw};
    const auto sr = region(srecv_, sl, 2 * sw);
    move_tokens<false>(compute_, dout(sl), region(orecv_, sl, q_words(sl)), sd, P(), "DistAttn::ulysses.unpack_do");
    move_token_stats<false>(compute_, lse(sl), sr, s1, P(), "DistAttn::ulysses.unpack_lse");
    move_token_stats<false>(compute_, delta(sl), sr, s2, P(), "DistAttn::ulysses.unpack_delta");
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
    Reqs r = post_grads(whole());
    finish_grads(r, dq, dk, dv, whole());
  }
  /// Packs the slice's dq, dk, dv and posts their all-to-all.
  Reqs post_grads(const Slice& sl) {
    const Slots3 s = qkv_slots(sl);
    const auto send = qkv_region(gsend_, sl);
    move_tokens<true>(compute_, dq(sl), send, s.a, P(), "DistAttn::ulysses.pack_dq");
    move_tokens<true>(compute_, dk(sl), send, s.b, P(), "DistAttn::ulysses.pack_dk");
    move_tokens<true>(compute_, dv(sl), send, s.c, P(), "DistAttn::ulysses.pack_dv");
    Reqs r;
    post(send, qkv_region(grecv_, sl), UlyssesPhase::Grad, r);
    return r;
  }
  template <class DQV, class DKV, class DVV>
  void finish_grads(Reqs& r, const DQV& dq, const DKV& dk, const DVV& dv, const Slice& sl) {
    rec_.wait_on(r, true);
    const Slots3 s = qkv_slots(sl);
    const auto recv = qkv_region(grecv_, sl);
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
  std::size_t kv_words() const { return kv_words(whole()); }
  std::size_t stat_words() const { return stat_words(whole()); }
  std::size_t q_words(const Slice& s) const { return std::size_t(B_) * c_ * s.nq * D_; }
  std::size_t kv_words(const Slice& s) const { return std::size_t(B_) * c_ * s.nk * D_; }
  std::size_t stat_words(const Slice& s) const { return std::size_t(B_) * s.nq * c_; }
  /// Blocks of [q | k | v] (or [dq | dk | dv]) of one slice.
  Slots3 qkv_slots(const Slice& sl) const {
    const std::size_t nq = q_words(sl), nk = kv_words(sl), blk = nq + 2 * nk;
    return {BlockSlot{blk, 0}, BlockSlot{blk, nq}, BlockSlot{blk, nq + nk}};
  }
  /// A slice's part of a message buffer: the groups before it come first, each
  /// P blocks (one slice over the whole heads is the whole buffer).
  template <class V>
  V region(const V& buf, const Slice& s, std::size_t block) const {
    const std::size_t per_head = block / std::size_t(s.nq);  // elements of one query head in a block
    const std::size_t first = std::size_t(P()) * per_head * s.q0;
    return Kokkos::subview(buf, Kokkos::make_pair(first, first + std::size_t(P()) * block));
  }
  /// [q | k | v] regions: before group g lie its predecessors' q, k and v heads.
  template <class V>
  V qkv_region(const V& buf, const Slice& s) const {
    const std::size_t unit = std::size_t(B_) * c_ * D_;
    const std::size_t first = std::size_t(P()) * unit * (std::size_t(s.q0) + 2 * std::size_t(s.k0));
    const std::size_t len   = std::size_t(P()) * unit * (std::size_t(s.nq) + 2 * std::size_t(s.nk));
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
