#pragma once
/// @file ulysses/ulysses_attention.hpp
/// Ulysses executor (DeepSpeed-Ulysses): sequence parallel outside attention,
/// head parallel inside it. Each rank holds a contiguous chunk of c tokens
/// (rank x: positions [x c, (x+1) c), the vanilla ring's layout) with all heads;
/// one all-to-all turns that into the whole sequence N = P c for H/P heads
/// (UlyssesHeads says which, and how K/V heads are replicated when there are
/// fewer than P), the local full-sequence attention runs, and an all-to-all
/// brings O and LSE back.
///
///   forward   q|k|v --all-to-all--> q_h, k_h, v_h (kept for backward)
///             attention_fwd(q_h, k_h, v_h) -> o_h, lse_h
///             o_h, lse_h --all-to-all--> o, lse
///   backward  Delta = rowsum(dO * O) on the sequence side (O never travels)
///             dO, LSE|Delta --all-to-all--> head side
///             attention_bwd_update -> dq_h, dk_h, dv_h (fp32)
///             dq|dk|dv --all-to-all--> dq, dk, dv (replicated K/V heads summed)
///
/// Backward reuses q_h, k_h, v_h when given the same q, k, v Views (data
/// pointers) as the last forward, and repeats their all-to-all otherwise (the QKV
/// phase of the backward); like autograd it assumes they were not modified.
///
/// Arguments, layouts, padding and errors as for the ring (ring_attention.hpp):
/// any layout, staged when not row-major; checked on every rank and agreed
/// before any message; causal (RingOptions-style `causal`) or full attention;
/// causal N may be padded at the end to P c with dO = 0 on padded rows.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/impl/executor_inputs.hpp>
#include <DistAttn/impl/pass_recorder.hpp>
#include <DistAttn/ulysses/ulysses_pack.hpp>
#include <DistAttn/ulysses/ulysses_types.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace DistAttn {

template <class T, class CommSpace, class Exec>
class UlyssesAttention {
 public:
  using Acc      = accum_t<T>;
  using Mem      = typename Exec::memory_space;
  using Comm     = Communicator<CommSpace, Exec>;
  using Req      = Request<CommSpace>;
  using TView    = Tensor4<T, Mem>;
  using AccView  = Tensor4<Acc, Mem>;
  using StatView = RowStats<Acc, Mem>;

  /// @param comm    the ranks (their exec() carries the all-to-alls)
  /// @param compute instance the attention runs on
  /// @param chunk   tokens per rank, c
  UlyssesAttention(Comm& comm, const Exec& compute, int batch, int chunk, int heads, int kv_heads, int head_dim,
                   const UlyssesOptions& opts = {})
      : comm_(comm), compute_(compute), B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim), opts_(opts),
        heads_(comm.size(), heads, kv_heads), rec_(compute, opts) {
    constexpr const char* where = "DistAttn::UlyssesAttention";
    DISTATTN_REQUIRE(batch > 0 && chunk > 0 && head_dim > 0, where,
                     "extents must be positive (batch=" << batch << ", chunk=" << chunk << ", head_dim=" << head_dim
                                                        << ")");
    DISTATTN_REQUIRE(opts.recv_delay_ms >= 0, where, "recv_delay_ms must be >= 0");
  }

  const UlyssesStats& stats() const { return rec_.stats(); }
  const UlyssesHeads& heads() const { return heads_; }
  int chunk() const { return c_; }
  /// Forget q_h, k_h, v_h saved by forward (the next backward rebuilds them).
  void invalidate_saved_inputs() { saved_ = false; }

  /// O and LSE ([B, H, chunk], accumulation type) of this rank's chunk.
  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::UlyssesAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(comm_, where, config(0), [&] {
      check_inputs(where, q, k, v);
      Impl::check_same4(where, "q", q, "o", o);
      Impl::check_stats(where, "lse", lse, q.extent(0), q.extent(2), q.extent(1));
      if (opts_.attn.check_finite) Impl::check_finite_qkv(compute_, where, q, k, v);
    });
    const auto qc = stage_q_.get(compute_, q, "DistAttn::ulysses.q_staged");
    const auto kc = stage_k_.get(compute_, k, "DistAttn::ulysses.k_staged");
    const auto vc = stage_v_.get(compute_, v, "DistAttn::ulysses.v_staged");
    begin_pass();
    scatter_inputs(qc, kc, vc);
    saved_ = true, saved_q_ = q.data(), saved_k_ = k.data(), saved_v_ = v.data();
    // The head side holds the whole sequence in position order.
    rec_.timed([&] { attention_fwd(compute_, qh_, kh_, vh_, oh_, lseh_, tile_options()); });

    const Impl::BlockSlot so{out_block(), 0};
    const Impl::BlockSlot sl{lse_block(), 0};
    Impl::move_tokens<true>(compute_, oh_, osend_, so, P(), "DistAttn::ulysses.pack_o");
    Impl::move_token_stats<true>(compute_, lseh_, lsend_, sl, P(), "DistAttn::ulysses.pack_lse");
    exchange(osend_, orecv_, UlyssesPhase::Out);
    exchange(lsend_, lrecv_, UlyssesPhase::Out);
    Impl::unpack_heads(compute_, orecv_, so, Impl::HeadMap::query(heads_), o, "DistAttn::ulysses.unpack_o");
    Impl::move_head_stats<false>(compute_, lse, Impl::HeadMap::query(heads_), lrecv_, sl,
                                 "DistAttn::ulysses.unpack_lse");
    end_pass();
  }

  /// dq, dk, dv (overwritten) of this rank's chunk from its q, k, v, the forward's o and lse, and dO.
  template <class QV, class KV, class VV, class OV, class DOV, class LV, class DQV, class DKV, class DVV>
  void backward(const QV& q, const KV& k, const VV& v, const OV& o, const DOV& dout, const LV& lse, const DQV& dq,
                const DKV& dk, const DVV& dv) {
    constexpr const char* where = "DistAttn::UlyssesAttention::backward";
    Impl::static_check_backward<T, Exec, QV, KV, VV, OV, DOV, LV, DQV, DKV, DVV>();
    agree_.run(comm_, where, config(1), [&] {
      check_inputs(where, q, k, v);
      Impl::check_bwd_args(compute_, where, q, k, v, o, dout, lse, dq, dk, dv, opts_.attn.check_finite);
    });
    const bool reuse = saved_ && saved_q_ == static_cast<const void*>(q.data()) &&
                       saved_k_ == static_cast<const void*>(k.data()) &&
                       saved_v_ == static_cast<const void*>(v.data());
    const auto qc = stage_q_.get(compute_, q, "DistAttn::ulysses.q_staged");
    const auto kc = stage_k_.get(compute_, k, "DistAttn::ulysses.k_staged");
    const auto vc = stage_v_.get(compute_, v, "DistAttn::ulysses.v_staged");
    const auto dc = stage_do_.get(compute_, dout, "DistAttn::ulysses.do_staged");
    begin_pass();
    if (!reuse) scatter_inputs(qc, kc, vc);
    saved_ = true, saved_q_ = q.data(), saved_k_ = k.data(), saved_v_ = v.data();
    ensure_backward();
    const auto qmap = Impl::HeadMap::query(heads_), kmap = Impl::HeadMap::key(heads_);

    // dO and (LSE, Delta) to the head side; Delta from the sequence side's O.
    attention_bwd_delta(compute_, o, dc, delta_);
    const Impl::BlockSlot sd{out_block(), 0};
    const Impl::BlockSlot sl{2 * lse_block(), 0}, sdl{2 * lse_block(), lse_block()};
    Impl::pack_heads(compute_, dc, qmap, osend_, sd, "DistAttn::ulysses.pack_do");
    Impl::move_head_stats<true>(compute_, lse, qmap, ssend_, sl, "DistAttn::ulysses.pack_lse");
    Impl::move_head_stats<true>(compute_, delta_, qmap, ssend_, sdl, "DistAttn::ulysses.pack_delta");
    exchange(osend_, orecv_, UlyssesPhase::DOut);
    exchange(ssend_, srecv_, UlyssesPhase::DOut);
    Impl::move_tokens<false>(compute_, doh_, orecv_, sd, P(), "DistAttn::ulysses.unpack_do");
    Impl::move_token_stats<false>(compute_, lseh_, srecv_, sl, P(), "DistAttn::ulysses.unpack_lse");
    Impl::move_token_stats<false>(compute_, delh_, srecv_, sdl, P(), "DistAttn::ulysses.unpack_delta");

    Kokkos::deep_copy(compute_, gqh_, Acc(0));
    Kokkos::deep_copy(compute_, gkh_, Acc(0));
    Kokkos::deep_copy(compute_, gvh_, Acc(0));
    rec_.timed([&] {
      attention_bwd_update(compute_, qh_, kh_, vh_, doh_, lseh_, delh_, gqh_, gkh_, gvh_, tile_options());
    });

    // fp32 gradients back: one block per rank = [dq | dk | dv] of its tokens.
    const std::size_t nq = q_words(), nk = kv_words();
    const Impl::BlockSlot gq{nq + 2 * nk, 0}, gk{nq + 2 * nk, nq}, gv{nq + 2 * nk, nq + nk};
    Impl::move_tokens<true>(compute_, gqh_, gsend_, gq, P(), "DistAttn::ulysses.pack_dq");
    Impl::move_tokens<true>(compute_, gkh_, gsend_, gk, P(), "DistAttn::ulysses.pack_dk");
    Impl::move_tokens<true>(compute_, gvh_, gsend_, gv, P(), "DistAttn::ulysses.pack_dv");
    exchange(gsend_, grecv_, UlyssesPhase::Grad);
    Impl::unpack_heads(compute_, grecv_, gq, qmap, dq, "DistAttn::ulysses.unpack_dq");
    Impl::unpack_heads(compute_, grecv_, gk, kmap, dk, "DistAttn::ulysses.unpack_dk");
    Impl::unpack_heads(compute_, grecv_, gv, kmap, dv, "DistAttn::ulysses.unpack_dv");
    end_pass();
  }

 private:
  int P() const { return comm_.size(); }
  /// Elements of one rank's block: its tokens' (or its heads') share of a tensor.
  std::size_t q_words() const { return std::size_t(B_) * c_ * heads_.local_heads() * D_; }
  std::size_t kv_words() const { return std::size_t(B_) * c_ * heads_.local_kv_heads() * D_; }
  std::size_t out_block() const { return q_words(); }
  std::size_t lse_block() const { return std::size_t(B_) * heads_.local_heads() * c_; }

  std::vector<Impl::ConfigField> config(int pass) const {
    return {{"batch", B_},      {"chunk", c_},     {"heads", H_},           {"kv_heads", Hkv_},
            {"head_dim", D_},   {"causal", opts_.causal}, {"element_bytes", std::int64_t(sizeof(T))},
            {"pass", pass}};
  }

  template <class QV, class KV, class VV>
  void check_inputs(const char* where, const QV& q, const KV& k, const VV& v) const {
    Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
    DISTATTN_REQUIRE(int(q.extent(0)) == B_ && int(q.extent(1)) == c_ && int(q.extent(2)) == H_ &&
                         int(q.extent(3)) == D_,
                     where,
                     "'q' must be [" << B_ << ", " << c_ << ", " << H_ << ", " << D_ << "] as configured, got ["
                                     << q.extent(0) << ", " << q.extent(1) << ", " << q.extent(2) << ", "
                                     << q.extent(3) << "]");
    DISTATTN_REQUIRE(int(k.extent(1)) == c_ && int(k.extent(2)) == Hkv_, where,
                     "'k' must hold " << c_ << " tokens and " << Hkv_ << " kv heads, got " << k.extent(1)
                                      << " tokens and " << k.extent(2) << " heads");
  }

  AttnOptions tile_options() const {
    AttnOptions ao  = opts_.attn.with_mask(opts_.causal ? Mask::causal() : Mask::none());
    ao.check_finite = false;
    return ao;
  }

  /// q, k, v (sequence side) -> q_h, k_h, v_h (head side), one all-to-all.
  template <class CV>
  void scatter_inputs(const CV& qc, const CV& kc, const CV& vc) {
    ensure_forward();
    const std::size_t nq = q_words(), nk = kv_words();
    const Impl::BlockSlot sq{nq + 2 * nk, 0}, sk{nq + 2 * nk, nq}, sv{nq + 2 * nk, nq + nk};
    const auto qmap = Impl::HeadMap::query(heads_), kmap = Impl::HeadMap::key(heads_);
    Impl::pack_heads(compute_, qc, qmap, isend_, sq, "DistAttn::ulysses.pack_q");
    Impl::pack_heads(compute_, kc, kmap, isend_, sk, "DistAttn::ulysses.pack_k");
    Impl::pack_heads(compute_, vc, kmap, isend_, sv, "DistAttn::ulysses.pack_v");
    exchange(isend_, irecv_, UlyssesPhase::QKV);
    Impl::move_tokens<false>(compute_, qh_, irecv_, sq, P(), "DistAttn::ulysses.unpack_q");
    Impl::move_tokens<false>(compute_, kh_, irecv_, sk, P(), "DistAttn::ulysses.unpack_k");
    Impl::move_tokens<false>(compute_, vh_, irecv_, sv, P(), "DistAttn::ulysses.unpack_v");
  }

  /// One all-to-all of `send` (P blocks) into `recv`, waited on by the compute instance.
  template <class V>
  void exchange(const V& send, const V& recv, UlyssesPhase phase) {
    if (rec_.skip_transfers()) return;
    comm_.depend_on(compute_);  // the blocks were packed on compute
    std::vector<Req> reqs;
    reqs.push_back(all_to_all(comm_, send, recv));
    const std::uint64_t bytes = std::uint64_t(P() - 1) * (send.size() / std::size_t(P())) * sizeof(typename V::value_type);
    rec_.sent(phase, bytes);
    rec_.received(phase, bytes);
    rec_.posted();
    rec_.wait_on(reqs, true);
  }

  void begin_pass() {
    comm_.depend_on(compute_);
    rec_.begin(UlyssesStats{});
  }
  void end_pass() { rec_.end("DistAttn::UlyssesAttention: pass done"); }

  void ensure_forward() {
    if (qh_.size() != 0) return;
    const int N = P() * c_, L = heads_.local_heads(), Lk = heads_.local_kv_heads();
    qh_    = TView("DistAttn::ulysses.q_heads", B_, N, L, D_);
    kh_    = TView("DistAttn::ulysses.k_heads", B_, N, Lk, D_);
    vh_    = TView("DistAttn::ulysses.v_heads", B_, N, Lk, D_);
    oh_    = TView("DistAttn::ulysses.o_heads", B_, N, L, D_);
    lseh_  = StatView("DistAttn::ulysses.lse_heads", B_, L, N);
    const std::size_t in = std::size_t(P()) * (q_words() + 2 * kv_words());
    isend_ = Kokkos::View<T*, Mem>("DistAttn::ulysses.qkv_send", in);
    irecv_ = Kokkos::View<T*, Mem>("DistAttn::ulysses.qkv_recv", in);
    osend_ = Kokkos::View<T*, Mem>("DistAttn::ulysses.o_send", std::size_t(P()) * out_block());
    orecv_ = Kokkos::View<T*, Mem>("DistAttn::ulysses.o_recv", std::size_t(P()) * out_block());
    lsend_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.lse_send", std::size_t(P()) * lse_block());
    lrecv_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.lse_recv", std::size_t(P()) * lse_block());
  }
  void ensure_backward() {
    if (doh_.size() != 0) return;
    const int N = P() * c_, L = heads_.local_heads(), Lk = heads_.local_kv_heads();
    doh_   = TView("DistAttn::ulysses.do_heads", B_, N, L, D_);
    delh_  = StatView("DistAttn::ulysses.delta_heads", B_, L, N);
    delta_ = StatView("DistAttn::ulysses.delta", B_, H_, c_);
    gqh_   = AccView("DistAttn::ulysses.dq_heads", B_, N, L, D_);
    gkh_   = AccView("DistAttn::ulysses.dk_heads", B_, N, Lk, D_);
    gvh_   = AccView("DistAttn::ulysses.dv_heads", B_, N, Lk, D_);
    ssend_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.stats_send", std::size_t(P()) * 2 * lse_block());
    srecv_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.stats_recv", std::size_t(P()) * 2 * lse_block());
    const std::size_t g = std::size_t(P()) * (q_words() + 2 * kv_words());
    gsend_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.grad_send", g);
    grecv_ = Kokkos::View<Acc*, Mem>("DistAttn::ulysses.grad_recv", g);
  }

  Comm& comm_;
  Exec compute_;
  int B_, c_, H_, Hkv_, D_;
  UlyssesOptions opts_;
  UlyssesHeads heads_;
  Impl::PassRecorder<Exec, UlyssesStats> rec_;
  Impl::EntryAgreement<CommSpace, Exec> agree_;
  Impl::StagedInput<T, Mem> stage_q_, stage_k_, stage_v_, stage_do_;

  bool saved_ = false;
  const void *saved_q_ = nullptr, *saved_k_ = nullptr, *saved_v_ = nullptr;
  TView qh_, kh_, vh_, oh_, doh_;
  StatView lseh_, delh_, delta_;
  AccView gqh_, gkh_, gvh_;
  Kokkos::View<T*, Mem> isend_, irecv_, osend_, orecv_;
  Kokkos::View<Acc*, Mem> lsend_, lrecv_, ssend_, srecv_, gsend_, grecv_;
};

}  // namespace DistAttn
