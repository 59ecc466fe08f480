// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
/// position inner_position(s, u c + i): token_layout(w).position(i).
///
/// Padding: SequencePadding(N, P, TokenLayout::Kind::Zigzag) (schedule/padding.hpp) gives a
/// chunk c that suits every inner kind (U c even); token_layout(w) says which of
/// rank w's rows are padding (positions >= N), and zero_padding takes it.
///
///   forward   q|k|v --all-to-all (U)--> inner.forward --O, LSE all-to-all (U)--> o, lse
///   backward  dO (and O, LSE when forward's are not kept) --all-to-all (U)-->
///             inner.backward --dq|dk|dv fp32 all-to-all (U)--> dq, dk, dv
///
/// Arguments (any layout, no staging: the all-to-all packs them), errors and
/// causality as for the other executors; the
/// inner executor's own rules apply to its sequence (zigzag: U c even;
/// Attention2D: its grid must fit S; full attention: zigzag or Attention2D).
///
/// Memory (docs/design/memory.md): the head exchange's kept tensors (q, k, v, O,
/// LSE on the head side) and its workspace (HeadExchange), plus the inner
/// executor's own. The entry checks both together on every rank of the world, so
/// an inner executor that would not fit fails every rank before anything is
/// allocated; the inner executor gets what the head exchange leaves of the
/// memory limit.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>
#include <DistAttn/exec/impl/pass_recorder.hpp>
#include <DistAttn/schedule/padding.hpp>
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
  /// Forward's head-side O and LSE are kept for the inner backward; the inner executor has its own states.
  static constexpr typename Impl::HeadExchange<T, CommSpace, Exec>::Use kUse{true, false};

  /// Collective over `world` (splits it into the two kinds of groups); `world`
  /// must outlive the executor.
  /// @param chunk tokens per rank, c
  HybridAttention(Comm& world, const Exec& compute, int batch, int chunk, int heads, int kv_heads, int head_dim,
                  const HybridOptions& opts = {})
      : world_(Impl::agree_construction(world, "DistAttn::HybridAttention",
                                        construction_fields(batch, chunk, heads, kv_heads, head_dim, opts),
                                        [&] { check_construction(world.size(), batch, chunk, heads, kv_heads, head_dim, opts); })),
        compute_(compute), B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim),
        opts_(opts), U_(hybrid_ulysses_degree(world.size(), heads, kv_heads, opts.ulysses_degree)),
        S_(world.size() / U_), u_(world.rank() % U_), s_(world.rank() / U_),
        uly_comm_(split(world, s_, u_)), seq_comm_(split(world, u_, s_)), rec_(compute, opts),
        x_(*uly_comm_, compute, rec_, batch, chunk, UlyssesHeads(U_, heads, kv_heads), head_dim, kUse) {
    const int Hl = x_.heads().local_heads(), Hkl = x_.heads().local_kv_heads();
    const int inner_chunk = U_ * chunk;
    if (is_grid2d()) {
      Grid2DOptions go;
      go.variant = grid2d_variant(opts.inner);
      inner_opts(go);
      a2d_ = std::make_unique<A2D>(*seq_comm_, opts.grid_rows, opts.grid_cols, compute, batch,
                                   std::int64_t(world.size()) * chunk, Hl, Hkl, head_dim, go);
    } else {
      RingOptions ro;
      inner_opts(ro);
      ro.kind = ring_kind(opts.inner);
      ring_ = std::make_unique<Ring>(*seq_comm_, compute, batch, inner_chunk, Hl, Hkl, head_dim, ro);
    }
  }

  /// What forward and backward allocate on this rank, per buffer: the head
  /// exchange's (kept tensors, then its workspace), then the inner executor's.
  /// The executor holds the peak of each part: head_exchange_plan().peak_bytes() +
  /// inner_plan().peak_bytes().
  MemoryPlan memory_plan() const {
    MemoryPlan p = head_exchange_plan();
    const MemoryPlan in = inner_plan();
    p.forward.append(in.forward);
    p.backward.append(in.backward);
    return p;
  }
  MemoryPlan head_exchange_plan() const { return x_.memory_plan(); }
  /// For P ranks and these extents, the inner executor's smallest plan (over the
  /// kv heads per pass head chunking may choose: Impl::leanest_head_group), and
  /// the least the executor can hold per rank: the head exchange's peak plus that plan's.
  static MemoryPlan smallest_inner_plan(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                        const HybridOptions& opts = {}) {
    const int U = hybrid_ulysses_degree(P, heads, kv_heads, opts.ulysses_degree), S = P / U;
    const UlyssesHeads h(U, heads, kv_heads);
    const int Hl = h.local_heads(), Hkl = h.local_kv_heads();
    auto plan = [&](int group) {
      if (is_grid2d(opts.inner)) {
        Grid2DOptions go;
        go.variant    = grid2d_variant(opts.inner);
        go.causal     = opts.causal;
        go.head_group = group;
        const GridShape g = choose_grid_shape(S, Hl, Hkl, GridShape{opts.grid_rows, opts.grid_cols});
        return A2D::memory_plan(g.rows, g.cols, batch, std::int64_t(P) * chunk, Hl, Hkl, head_dim, go);
      }
      RingOptions ro;
      ro.kind       = ring_kind(opts.inner);
      ro.causal     = opts.causal;
      ro.head_group = group;
      return Ring::memory_plan(S, batch, U * chunk, Hl, Hkl, head_dim, ro);
    };
    return Impl::leanest_head_group(Hkl, opts.head_group, plan).second;
  }
  static std::size_t leanest_peak_bytes(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                        const HybridOptions& opts = {}) {
    const int U = hybrid_ulysses_degree(P, heads, kv_heads, opts.ulysses_degree);
    const std::size_t mine = Impl::HeadExchange<T, CommSpace, Exec>::memory_plan(
                                 batch, chunk, UlyssesHeads(U, heads, kv_heads), head_dim, kUse)
                                 .peak_bytes();
    return mine + smallest_inner_plan(P, batch, chunk, heads, kv_heads, head_dim, opts).peak_bytes();
  }
  /// The inner executor's plan (all heads per pass unless its head_group says otherwise).
  MemoryPlan inner_plan() const { return a2d_ ? a2d_->memory_plan() : ring_->memory_plan(); }
  std::size_t held_bytes() const { return x_.held_bytes() + (a2d_ ? a2d_->held_bytes() : ring_->held_bytes()); }

  const UlyssesStats& stats() const { return rec_.stats(); }
  const HybridOptions& options() const { return opts_; }
  /// Forget the head-side q, k, v, O and LSE saved by forward (the next backward
  /// rebuilds them). Not needed for safety (backward checks the inputs' content),
  /// but saves that check's read when the caller knows the inputs changed.
  void invalidate_saved_inputs() {
    saved_.clear();
    if (a2d_) a2d_->invalidate_saved_inputs();
  }
  /// Replaces ExecutorOptions::documents between passes (the contract is there), its
  /// inner executor's too; drops the head-side O and LSE a forward kept.
  void set_documents(const std::vector<std::int64_t>& offsets) {
    opts_.documents = offsets;
    with_inner([&](auto& e) { e.set_documents(offsets); });
    invalidate_saved_inputs();
  }
  int ulysses_degree() const { return U_; }
  int sequence_degree() const { return S_; }
  const UlyssesHeads& heads() const { return x_.heads(); }
  /// Where world rank w's rows sit: rows [u c, (u+1) c) of the inner executor's
  /// rank s, whose layout is the inner kind's over S ranks of U c tokens.
  TokenLayout token_layout(int w) const {
    TokenLayout t;
    t.kind       = is_grid2d() ? TokenLayout::Kind::Cyclic : token_layout_kind(ring_kind(opts_.inner));
    t.rank       = w / U_;
    t.size       = S_;
    t.chunk      = U_ * c_;
    t.row_offset = std::int64_t(w % U_) * c_;
    t.rows       = c_;
    return t;
  }
  /// Global position of local row i of world rank w.
  std::int64_t position(int w, std::int64_t i) const { return token_layout(w).position(i); }

  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::HybridAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(world_, where, config(0), [&] {
      check_inputs(where, q, k, v);
      Impl::check_fwd_args(compute_, where, q, k, v, o, lse, opts_.attn.check_finite);
      check_memory(where, false);
    });
    x_.use_workspace(false);
    saved_.clear();  // the head side is rewritten from here: a pass that fails midway leaves nothing to reuse
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
    saved_.remember(compute_, q, k, v, o, lse);
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
      check_memory(where, true);
      agree_.vote(saved_.matches(compute_, q, k, v, o, lse));
    });
    x_.use_workspace(true);
    // Forward's head-side q, k, v, O and LSE are still valid on every rank.
    const bool reuse = agree_.unanimous();
    begin_pass(where);
    rec_.step();
    if (!reuse) {
      saved_.clear();  // the head side is rewritten below
      x_.inputs_to_heads(q, k, v);
      x_.tensor_to_heads(o);
      // Same buffers, new contents: spare Attention2D checking its permuted K/V.
      if (a2d_) a2d_->invalidate_saved_inputs();
    }
    x_.dout_to_heads(dout, lse, !reuse);
    rec_.step();
    with_inner([&](auto& inner) {
      inner.backward(x_.q(), x_.k(), x_.v(), x_.o(), x_.dout(), x_.lse(), x_.dq(), x_.dk(), x_.dv());
      rec_.absorb(inner.stats(), UlyssesPhase::Inner);
    });
    rec_.step();
    x_.grads_from_heads(dq, dk, dv);
    if (!reuse) saved_.remember(compute_, q, k, v, o, lse);  // reused: what was saved still holds
    end_pass();
  }

 private:
  static std::unique_ptr<Comm> split(Comm& world, int color, int key) {
    auto c = world.split(color, key);
    DISTATTN_REQUIRE(c.has_value(), "DistAttn::HybridAttention", "communicator split returned no group");
    return std::make_unique<Comm>(std::move(*c));
  }
  bool is_grid2d() const { return is_grid2d(opts_.inner); }
  static bool is_grid2d(HybridInner inner) { return inner == HybridInner::Grid2DNO || inner == HybridInner::Grid2DO; }
  static Grid2DVariant grid2d_variant(HybridInner inner) {
    return inner == HybridInner::Grid2DNO ? Grid2DVariant::NO : Grid2DVariant::O;
  }
  static RingKind ring_kind(HybridInner inner) {
    return inner == HybridInner::Vanilla ? RingKind::Vanilla
           : inner == HybridInner::Balanced ? RingKind::Balanced
                                            : RingKind::Zigzag;
  }
  /// The inner executor shares our options; the hybrid's entry already checked the
  /// inputs, and the inner executor may use what the head exchange leaves of the limit.
  void inner_opts(ExecutorOptions& x) const {
    x                   = opts_;
    x.attn.check_finite = false;
    const std::size_t limit = Impl::memory_limit(opts_.memory_limit_bytes);
    const std::size_t mine  = x_.memory_plan().peak_bytes();
    if (limit != 0) x.memory_limit_bytes = limit > mine ? limit - mine : 1;
  }
  /// The inner executor's smallest plan for this executor's extents.
  MemoryPlan smallest_inner_plan() const { return smallest_inner_plan(world_.size(), B_, c_, H_, Hkv_, D_, opts_); }
  /// Inside the world's entry agreement: the head exchange's peak (what inner_opts
  /// leaves the inner executor is reckoned from it) and the inner executor's
  /// smallest pass together must fit, so that no head group fails alone.
  void check_memory(const char* where, bool backward) const {
    const MemoryPlan mine = head_exchange_plan();
    MemoryLayout need     = mine.forward_bytes() >= mine.backward_bytes() ? mine.forward : mine.backward;
    const MemoryPlan in   = smallest_inner_plan();
    need.append(backward ? in.backward : in.forward);
    Impl::check_growth_fits<Mem>(where, backward ? "backward" : "forward", need, held_bytes(),
                                 opts_.memory_limit_bytes, c_, 1, world_.size());
  }
  template <class F>
  void with_inner(F&& f) {
    if (a2d_)
      f(*a2d_);
    else
      f(*ring_);
  }

  std::vector<Impl::ConfigField> config(int pass) const {
    return construction_fields(B_, c_, H_, Hkv_, D_, opts_) +
           std::vector<Impl::ConfigField>{{"ulysses_degree_used", U_}, {"pass", pass}};
  }
  static std::vector<Impl::ConfigField> construction_fields(int batch, int chunk, int heads, int kv_heads,
                                                            int head_dim, const HybridOptions& opts) {
    return std::vector<Impl::ConfigField>{{"batch", batch},
                                          {"chunk", chunk},
                                          {"heads", heads},
                                          {"kv_heads", kv_heads},
                                          {"head_dim", head_dim},
                                          {"element_bytes", std::int64_t(sizeof(T))},
                                          {"ulysses_degree", opts.ulysses_degree},
                                          Impl::enum_field("inner", opts.inner),
                                          {"grid_rows", opts.grid_rows},
                                          {"grid_cols", opts.grid_cols}} +
           Impl::option_fields(opts, head_dim);
  }
  /// What a rank's constructor arguments can fail before the splits, run inside
  /// the construction agreement. The inner executor agrees its own over the head
  /// group; the ranks hold the same arguments by then, so all fail alike.
  static void check_construction(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                 const HybridOptions& opts) {
    constexpr const char* where = "DistAttn::HybridAttention";
    DISTATTN_REQUIRE(batch > 0 && chunk > 0 && head_dim > 0, where,
                     "extents must be positive (batch=" << batch << ", chunk=" << chunk << ", head_dim=" << head_dim
                                                        << ")");
    const int U = hybrid_ulysses_degree(P, heads, kv_heads, opts.ulysses_degree);
    UlyssesHeads(U, heads, kv_heads);  // throws with the reason when the heads do not split
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
  Impl::SavedInputs<Exec> saved_;
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<A2D> a2d_;
};

}  // namespace DistAttn
