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
/// The all-to-alls are pipelined over head groups (UlyssesOptions::head_groups,
/// ulysses_head_groups): group g + 1's inputs and group g - 1's results travel on
/// the communicator's instance while group g computes on `compute`. Heads are
/// independent, so the results are bitwise those of one group.
///
/// Backward reuses q_h, k_h, v_h when given the same q, k, v Views (data
/// pointers) as the last forward, and repeats their all-to-all otherwise (the QKV
/// phase of the backward); like autograd it assumes they were not modified.
///
/// Arguments, padding and errors as for the ring (ring_attention.hpp): checked on
/// every rank and agreed before any message; causal or full attention
/// (ExecutorOptions::causal); causal N may be padded at the end to P c with dO = 0
/// on padded rows. Any layout is accepted without staging: the all-to-all's
/// packing reads and writes the caller's Views element by element.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/impl/executor_inputs.hpp>
#include <DistAttn/impl/pass_recorder.hpp>
#include <DistAttn/ulysses/head_exchange.hpp>
#include <DistAttn/ulysses/ulysses_types.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace DistAttn {

template <class T, class CommSpace, class Exec>
class UlyssesAttention {
 public:
  using Acc  = accum_t<T>;
  using Mem  = typename Exec::memory_space;
  using Comm = Communicator<CommSpace, Exec>;

  /// @param comm    the ranks (their exec() carries the all-to-alls)
  /// @param compute instance the attention runs on
  /// @param chunk   tokens per rank, c
  UlyssesAttention(Comm& comm, const Exec& compute, int batch, int chunk, int heads, int kv_heads, int head_dim,
                   const UlyssesOptions& opts = {})
      : comm_(comm), compute_(compute), B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim), opts_(opts),
        rec_(compute, opts), x_(comm, compute, rec_, batch, chunk, UlyssesHeads(comm.size(), heads, kv_heads),
                                head_dim),
        groups_(ulysses_head_groups(x_.heads(), opts.head_groups)) {
    constexpr const char* where = "DistAttn::UlyssesAttention";
    DISTATTN_REQUIRE(batch > 0 && chunk > 0 && head_dim > 0, where,
                     "extents must be positive (batch=" << batch << ", chunk=" << chunk << ", head_dim=" << head_dim
                                                        << ")");
    DISTATTN_REQUIRE(opts.recv_delay_ms >= 0, where, "recv_delay_ms must be >= 0");
  }

  const UlyssesStats& stats() const { return rec_.stats(); }
  const UlyssesHeads& heads() const { return x_.heads(); }
  /// Head groups the all-to-alls are pipelined over.
  int head_groups() const { return groups_; }
  int chunk() const { return c_; }
  /// Forget q_h, k_h, v_h saved by forward (the next backward rebuilds them).
  void invalidate_saved_inputs() { saved_.clear(); }

  /// O and LSE ([B, H, chunk], accumulation type) of this rank's chunk.
  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::UlyssesAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(comm_, where, config(0), [&] {
      check_inputs(where, q, k, v);
      Impl::check_fwd_args(compute_, where, q, k, v, o, lse, opts_.attn.check_finite);
    });
    begin_pass();
    const int G = groups_;
    std::vector<Reqs> in(G), out(G);
    in[0] = x_.post_inputs(q, k, v, x_.slice(0, G));
    for (int g = 0; g < G; ++g) {
      const Slice s = x_.slice(g, G);
      if (g + 1 < G) in[g + 1] = x_.post_inputs(q, k, v, x_.slice(g + 1, G));
      x_.finish_inputs(in[g], s);
      // The head side holds the whole sequence in position order.
      rec_.timed([&] { attention_fwd(compute_, x_.q(s), x_.k(s), x_.v(s), x_.o(s), x_.lse(s), tile_options()); });
      out[g] = x_.post_output(s);
      if (g > 0) x_.finish_output(out[g - 1], o, lse, x_.slice(g - 1, G));
    }
    x_.finish_output(out[G - 1], o, lse, x_.slice(G - 1, G));
    saved_.remember(q, k, v);
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
    const bool reuse = saved_.same(q, k, v);
    const int G      = groups_;
    begin_pass();
    for (int g = 0; g < G && !reuse; ++g) {  // in the forward's group-major layout
      Reqs r = x_.post_inputs(q, k, v, x_.slice(g, G));
      x_.finish_inputs(r, x_.slice(g, G));
    }
    saved_.remember(q, k, v);
    // Delta from the sequence side's O, so O never travels.
    ensure_delta();
    attention_bwd_delta(compute_, o, dout, delta_);
    std::vector<Reqs> in(G), out(G);
    x_.clear_grads();
    in[0] = x_.post_dout(dout, lse, delta_, x_.slice(0, G));
    for (int g = 0; g < G; ++g) {
      const Slice s = x_.slice(g, G);
      if (g + 1 < G) in[g + 1] = x_.post_dout(dout, lse, delta_, x_.slice(g + 1, G));
      x_.finish_dout(in[g], s);
      rec_.timed([&] {
        attention_bwd_update(compute_, x_.q(s), x_.k(s), x_.v(s), x_.dout(s), x_.lse(s), x_.delta(s), x_.dq(s),
                             x_.dk(s), x_.dv(s), tile_options());
      });
      out[g] = x_.post_grads(s);
      if (g > 0) x_.finish_grads(out[g - 1], dq, dk, dv, x_.slice(g - 1, G));
    }
    x_.finish_grads(out[G - 1], dq, dk, dv, x_.slice(G - 1, G));
    end_pass();
  }

 private:
  std::vector<Impl::ConfigField> config(int pass) const {
    return {{"batch", B_},        {"chunk", c_},     {"heads", H_},           {"kv_heads", Hkv_},
            {"head_dim", D_},     {"causal", opts_.causal}, {"element_bytes", std::int64_t(sizeof(T))},
            {"head_groups", groups_}, {"pass", pass}};
  }

  template <class QV, class KV, class VV>
  void check_inputs(const char* where, const QV& q, const KV& k, const VV& v) const {
    Impl::check_executor_extents(where, q, k, B_, c_, H_, Hkv_, D_);
    Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
  }

  AttnOptions tile_options() const {
    AttnOptions ao  = opts_.attn.with_mask(opts_.causal ? Mask::causal() : Mask::none());
    ao.check_finite = false;
    return ao;
  }

  void ensure_delta() {
    if (delta_.size() == 0) delta_ = RowStats<Acc, Mem>("DistAttn::ulysses.delta", B_, H_, c_);
  }
  void begin_pass() {
    comm_.depend_on(compute_);
    rec_.begin(UlyssesStats{});
  }
  void end_pass() { rec_.end("DistAttn::UlyssesAttention: pass done"); }

  Comm& comm_;
  Exec compute_;
  int B_, c_, H_, Hkv_, D_;
  UlyssesOptions opts_;
  Impl::PassRecorder<Exec, UlyssesStats> rec_;
  using Exchange = Impl::HeadExchange<T, CommSpace, Exec>;
  using Slice    = typename Exchange::Slice;
  using Reqs     = typename Exchange::Reqs;
  Exchange x_;
  int groups_;
  Impl::EntryAgreement<CommSpace, Exec> agree_;
  Impl::SavedInputs saved_;
  RowStats<Acc, Mem> delta_;
};

}  // namespace DistAttn
