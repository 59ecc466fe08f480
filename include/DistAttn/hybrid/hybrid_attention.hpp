#pragma once
/// @file hybrid/hybrid_attention.hpp
/// Hybrid head x sequence parallelism (USP-style): P = U x S ranks, Ulysses of
/// degree U over heads outside, any of our sequence executors of degree S inside
/// each head group.
///
/// World rank w = s U + u sits in Ulysses group s (ranks s U .. s U + U - 1, one
/// all-to-all communicator each) and head group u (ranks u, U + u, ..., one
/// sequence communicator each). Each rank passes c tokens with all heads; the
/// all-to-all inside the Ulysses group gives it the group's U c tokens for H/U
/// heads (UlyssesHeads(U, H, Hkv) says which, and how K/V heads are replicated),
/// which are the inner executor's rows of rank s: the inner executor (ring kinds
/// or Attention2D, on the head group's communicator) sees a sequence of
/// N = P c tokens, S ranks and H/U heads. So rank w's local row i holds global
/// position inner_position(s, u c + i) (position()).
///
///   forward   q|k|v --all-to-all (U)--> inner.forward --O, LSE all-to-all (U)--> o, lse
///   backward  dO (and O, LSE when forward's are not kept) --all-to-all (U)-->
///             inner.backward --dq|dk|dv fp32 all-to-all (U)--> dq, dk, dv
///
/// Arguments (any layout, no staging: the all-to-all packs them), errors and
/// causality as for the other executors; the
/// inner executor's own rules apply to its sequence (zigzag: U c even;
/// Attention2D: its grid must fit S; full attention: zigzag or Attention2D).

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/impl/executor_inputs.hpp>
#include <DistAttn/impl/pass_recorder.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/ulysses/head_exchange.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace DistAttn {

/// The sequence executor inside each head group.
enum class HybridInner { Vanilla, Balanced, Zigzag, Grid2DNO, Grid2DO };

inline const char* to_string(HybridInner k) {
  switch (k) {
    case HybridInner::Vanilla: return "ring";
    case HybridInner::Balanced: return "balanced";
    case HybridInner::Zigzag: return "zigzag";
    case HybridInner::Grid2DNO: return "grid2d-no";
    case HybridInner::Grid2DO: return "grid2d-o";
  }
  return "?";
}

struct HybridOptions : ExecutorOptions {
  /// U, the Ulysses degree over heads; 0 picks the largest U that divides P and
  /// for which UlyssesHeads accepts the head counts.
  int ulysses_degree = 0;
  HybridInner inner  = HybridInner::Zigzag;
  /// Attention2D inner grid over the S ranks of a head group (0 = choose).
  int grid_rows = 0, grid_cols = 0;
};

/// The Ulysses degree `requested` (or the largest valid one for 0) for P ranks.
inline int hybrid_ulysses_degree(int P, int heads, int kv_heads, int requested) {
  constexpr const char* where = "DistAttn::HybridAttention";
  auto valid = [&](int U) {
    return P % U == 0 && heads % U == 0 && (kv_heads % U == 0 || U % kv_heads == 0);
  };
  if (requested != 0) {
    DISTATTN_REQUIRE(requested >= 1 && P % requested == 0, where,
                     "ulysses_degree U=" << requested << " must divide the number of ranks P=" << P);
    UlyssesHeads(requested, heads, kv_heads);  // throws with the reason when the heads do not split
    return requested;
  }
  for (int U = P; U > 1; --U)
    if (valid(U)) return U;
  return 1;
}

template <class T, class CommSpace, class Exec>
class HybridAttention {
 public:
  using Acc  = accum_t<T>;
  using Mem  = typename Exec::memory_space;
  using Comm = Communicator<CommSpace, Exec>;
  using Ring = RingAttention<T, CommSpace, Exec>;
  using A2D  = Grid2DAttention<T, CommSpace, Exec>;

  /// Collective over `world` (splits it into the two kinds of groups).
  /// @param chunk tokens per rank, c
  HybridAttention(Comm& world, const Exec& compute, int batch, int chunk, int heads, int kv_heads, int head_dim,
                  const HybridOptions& opts = {})
      : world_(world), compute_(compute), B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim),
        opts_(opts), U_(hybrid_ulysses_degree(world.size(), heads, kv_heads, opts.ulysses_degree)),
        S_(world.size() / U_), u_(world.rank() % U_), s_(world.rank() / U_),
        uly_comm_(split(world, s_, u_)), seq_comm_(split(world, u_, s_)), rec_(compute, opts),
        x_(*uly_comm_, compute, rec_, batch, chunk, UlyssesHeads(U_, heads, kv_heads), head_dim) {
    constexpr const char* where = "DistAttn::HybridAttention";
    DISTATTN_REQUIRE(batch > 0 && chunk > 0 && head_dim > 0, where,
                     "extents must be positive (batch=" << batch << ", chunk=" << chunk << ", head_dim=" << head_dim
                                                        << ")");
    const int Hl = x_.heads().local_heads(), Hkl = x_.heads().local_kv_heads();
    const int inner_chunk = U_ * chunk;
    if (is_grid2d()) {
      Grid2DOptions go;
      go.variant = opts.inner == HybridInner::Grid2DNO ? Grid2DVariant::NO : Grid2DVariant::O;
      inner_opts(go);
      a2d_ = std::make_unique<A2D>(*seq_comm_, opts.grid_rows, opts.grid_cols, compute, batch,
                                   std::int64_t(world.size()) * chunk, Hl, Hkl, head_dim, go);
    } else {
      RingOptions ro;
      ro.kind = opts.inner == HybridInner::Vanilla ? RingKind::Vanilla
                : opts.inner == HybridInner::Balanced ? RingKind::Balanced
                                                      : RingKind::Zigzag;
      inner_opts(ro);
      ring_ = std::make_unique<Ring>(*seq_comm_, compute, batch, inner_chunk, Hl, Hkl, head_dim, ro);
    }
  }

  const UlyssesStats& stats() const { return rec_.stats(); }
  int ulysses_degree() const { return U_; }
  int sequence_degree() const { return S_; }
  const UlyssesHeads& heads() const { return x_.heads(); }
  /// Global position of local row i of world rank w.
  std::int64_t position(int w, std::int64_t i) const {
    const int s = w / U_, u = w % U_;
    const std::int64_t t = std::int64_t(u) * c_ + i;  // row of the inner executor's rank s
    if (is_grid2d()) return s + t * S_;
    return RingLayout(S_, std::int64_t(U_) * c_, ring_kind()).position(s, t);
  }

  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::HybridAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(world_, where, config(0), [&] {
      check_inputs(where, q, k, v);
      Impl::check_fwd_args(compute_, where, q, k, v, o, lse, opts_.attn.check_finite);
    });
    begin_pass(where);
    // Steps: sequence -> heads all-to-all, the inner executor's pass, heads -> sequence.
    rec_.step();
    x_.inputs_to_heads(q, k, v);
    rec_.step();
    with_inner([&](auto& inner) {
      inner.forward(x_.q(), x_.k(), x_.v(), x_.o(), x_.lse());
      rec_.absorb(inner.stats(), UlyssesPhase::Inner);
    });
    rec_.step();
    x_.output_from_heads(o, lse);
    saved_.remember(q, k, v, o);
    end_pass();
  }

  template <class QV, class KV, class VV, class OV, class DOV, class LV, class DQV, class DKV, class DVV>
  void backward(const QV& q, const KV& k, const VV& v, const OV& o, const DOV& dout, const LV& lse, const DQV& dq,
                const DKV& dk, const DVV& dv) {
    constexpr const char* where = "DistAttn::HybridAttention::backward";
    Impl::static_check_backward<T, Exec, QV, KV, VV, OV, DOV, LV, DQV, DKV, DVV>();
    agree_.run(world_, where, config(1), [&] {
      check_inputs(where, q, k, v);
      Impl::check_bwd_args(compute_, where, q, k, v, o, dout, lse, dq, dk, dv, opts_.attn.check_finite);
    });
    // Forward's head-side q, k, v, O and LSE are still valid for the same Views.
    const bool reuse = saved_.same(q, k, v, o);
    begin_pass(where);
    rec_.step();
    if (!reuse) {
      x_.inputs_to_heads(q, k, v);
      x_.tensor_to_heads(o);
      // Same buffers, new contents: Attention2D must not reuse its permuted K/V.
      if (a2d_) a2d_->invalidate_saved_kv();
    }
    x_.dout_to_heads(dout, lse, !reuse);
    rec_.step();
    with_inner([&](auto& inner) {
      inner.backward(x_.q(), x_.k(), x_.v(), x_.o(), x_.dout(), x_.lse(), x_.dq(), x_.dk(), x_.dv());
      rec_.absorb(inner.stats(), UlyssesPhase::Inner);
    });
    rec_.step();
    x_.grads_from_heads(dq, dk, dv);
    saved_.remember(q, k, v, o);
    end_pass();
  }

 private:
  static std::unique_ptr<Comm> split(Comm& world, int color, int key) {
    auto c = world.split(color, key);
    DISTATTN_REQUIRE(c.has_value(), "DistAttn::HybridAttention", "communicator split returned no group");
    return std::make_unique<Comm>(std::move(*c));
  }
  bool is_grid2d() const { return opts_.inner == HybridInner::Grid2DNO || opts_.inner == HybridInner::Grid2DO; }
  RingKind ring_kind() const {
    return opts_.inner == HybridInner::Vanilla ? RingKind::Vanilla
           : opts_.inner == HybridInner::Balanced ? RingKind::Balanced
                                                  : RingKind::Zigzag;
  }
  /// The inner executor shares our options; the hybrid's entry already checked the inputs.
  void inner_opts(ExecutorOptions& x) const {
    x                   = opts_;
    x.attn.check_finite = false;
  }
  template <class F>
  void with_inner(F&& f) {
    if (a2d_)
      f(*a2d_);
    else
      f(*ring_);
  }

  std::vector<Impl::ConfigField> config(int pass) const {
    return {{"batch", B_},        {"chunk", c_},          {"heads", H_},
            {"kv_heads", Hkv_},   {"head_dim", D_},       {"ulysses_degree", U_},
            {"inner", int(opts_.inner)}, {"causal", opts_.causal}, {"element_bytes", std::int64_t(sizeof(T))},
            {"pass", pass}};
  }
  template <class QV, class KV, class VV>
  void check_inputs(const char* where, const QV& q, const KV& k, const VV& v) const {
    Impl::check_executor_extents(where, q, k, B_, c_, H_, Hkv_, D_);
    Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
  }
  void begin_pass(const char* pass) {
    world_.depend_on(compute_);
    rec_.begin(UlyssesStats{}, pass);
  }
  void end_pass() { rec_.end("DistAttn::HybridAttention: pass done"); }

  Comm& world_;
  Exec compute_;
  int B_, c_, H_, Hkv_, D_;
  HybridOptions opts_;
  int U_, S_, u_, s_;
  std::unique_ptr<Comm> uly_comm_, seq_comm_;
  Impl::PassRecorder<Exec, UlyssesStats> rec_;
  Impl::HeadExchange<T, CommSpace, Exec> x_;
  Impl::EntryAgreement<CommSpace, Exec> agree_;
  Impl::SavedInputs saved_;
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<A2D> a2d_;
};

}  // namespace DistAttn
