// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ulysses/ulysses_attention.hpp
/// Ulysses executor (DeepSpeed-Ulysses): sequence parallel outside attention,
/// head parallel inside it. Each rank holds a contiguous chunk of c tokens
/// (rank x: positions [x c, (x+1) c), the vanilla ring's layout,
/// TokenLayout::Kind::Contiguous) with all heads;
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
/// Backward reuses q_h, k_h, v_h only when every rank is given the q, k, v of its
/// last forward with unchanged content (same Views and the same fingerprint,
/// exec/impl/saved_inputs.hpp), and repeats their all-to-all otherwise (the QKV phase
/// of the backward). invalidate_saved_inputs() drops them outright.
///
/// Arguments, padding and errors as for the ring (ring_attention.hpp): checked on
/// every rank and agreed before any message; causal or full attention
/// (ExecutorOptions::causal); causal N may be padded at the end to P c with dO = 0
/// on padded rows: SequencePadding(N, P, TokenLayout::Kind::Contiguous) (schedule/padding.hpp). Any layout is accepted without staging: the all-to-all's
/// packing reads and writes the caller's Views element by element.
///
/// Memory (docs/design/memory.md): q_h, k_h, v_h are one allocation, every other
/// buffer is carved from one workspace that forward and backward share
/// (HeadExchange); memory_plan() lists them before anything is allocated, a pass
/// whose growth does not fit fails on every rank at entry, and a pass of a shape
/// seen before allocates nothing.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>
#include <DistAttn/exec/impl/kernel_documents.hpp>
#include <DistAttn/exec/impl/pass_recorder.hpp>
#include <DistAttn/ulysses/head_exchange.hpp>
#include <DistAttn/schedule/ulysses_types.hpp>

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
  using Exchange = Impl::HeadExchange<T, CommSpace, Exec>;
  using Slice    = typename Exchange::Slice;
  using Reqs     = typename Exchange::Reqs;
  /// q_h, k_h, v_h kept for backward; the one-call attention's state and Delta in the workspace.
  static constexpr typename Exchange::Use kUse{false, true};

  /// @param comm    the ranks (their exec() carries the all-to-alls); must outlive the executor
  /// @param compute instance the attention runs on
  /// @param chunk   tokens per rank, c
  UlyssesAttention(Comm& comm, const Exec& compute, int batch, int chunk, int heads, int kv_heads, int head_dim,
                   const UlyssesOptions& opts = {})
      : comm_(Impl::agree_construction(comm, "DistAttn::UlyssesAttention",
                                       construction_fields(batch, chunk, heads, kv_heads, head_dim, opts),
                                       [&] { check_construction(comm.size(), batch, chunk, heads, kv_heads, head_dim, opts); })),
        compute_(compute), B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim), opts_(opts),
        rec_(compute, opts), x_(comm, compute, rec_, batch, chunk, UlyssesHeads(comm.size(), heads, kv_heads),
                                head_dim, kUse,
                                ulysses_head_groups(UlyssesHeads(comm.size(), heads, kv_heads), opts.head_groups)) {
  }

  const UlyssesStats& stats() const { return rec_.stats(); }
  const UlyssesOptions& options() const { return opts_; }
  const UlyssesHeads& heads() const { return x_.heads(); }
  /// Head groups the all-to-alls are pipelined over.
  int head_groups() const { return x_.groups(); }
  int chunk() const { return c_; }
  /// Forget q_h, k_h, v_h saved by forward (the next backward rebuilds them).
  /// Not needed for safety (backward checks the inputs' content), but saves that
  /// check's read when the caller knows the inputs changed.
  void invalidate_saved_inputs() { saved_.clear(); }
  /// Replaces ExecutorOptions::documents between passes (the contract is there).
  void set_documents(std::vector<std::int64_t> offsets) {
    kdocs_.replace(opts_.documents, std::move(offsets));
    invalidate_saved_inputs();
  }

  /// What forward and backward allocate on this rank, per buffer: q_h|k_h|v_h, then
  /// the pass's workspace (the executor holds the kept tensors plus the larger workspace).
  MemoryPlan memory_plan() const { return x_.memory_plan(); }
  /// The same for P ranks and any extents, without a communicator.
  /// `head_groups` as UlyssesOptions::head_groups (0: the default).
  static MemoryPlan memory_plan(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                int head_groups = 0) {
    const UlyssesHeads h(P, heads, kv_heads);
    return Exchange::memory_plan(batch, chunk, h, head_dim, kUse, ulysses_head_groups(h, head_groups));
  }
  /// Bytes this executor holds now.
  std::size_t held_bytes() const { return x_.held_bytes(); }

  /// O and LSE ([B, H, chunk], accumulation type) of this rank's chunk.
  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::UlyssesAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(comm_, where, config(0), [&] {
      check_inputs(where, q, k, v);
      Impl::check_fwd_args(compute_, where, q, k, v, o, lse, opts_.attn.check_finite);
      check_memory(where, false);
    });
    x_.use_workspace(false);
    // q_h, k_h, v_h are rewritten from here: a pass that fails midway leaves nothing to reuse.
    saved_.clear();
    begin_pass(where);
    // The head side holds the whole sequence in position order.
    rec_.step();
    Reqs first = x_.post_inputs(q, k, v, x_.slice(0));
    pipeline(
        first, [&](const Slice& s) { return x_.post_inputs(q, k, v, s); },
        [&](Reqs& r, const Slice& s) { x_.finish_inputs(r, s); },
        [&](const Slice& s) {
          attention_fwd(compute_, x_.q(s), x_.k(s), x_.v(s), x_.o(s), x_.lse(s), tile_options(), x_.state());
        },
        [&](const Slice& s) { return x_.post_output(s); },
        [&](Reqs& r, const Slice& s) { x_.finish_output(r, o, lse, s); });
    saved_.remember(compute_, q, k, v);
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
      check_memory(where, true);
      agree_.vote(saved_.matches(compute_, q, k, v));
    });
    x_.use_workspace(true);
    const bool reuse = agree_.unanimous();
    if (!reuse) saved_.clear();  // q_h, k_h, v_h are rewritten below
    begin_pass(where);
    rec_.step();
    for (int g = 0; g < x_.groups() && !reuse; ++g) {  // in the forward's group-major layout
      Reqs r = x_.post_inputs(q, k, v, x_.slice(g));
      x_.finish_inputs(r, x_.slice(g));
    }
    if (!reuse) saved_.remember(compute_, q, k, v);  // reused: what was saved still holds
    // Delta from the sequence side's O, so O never travels.
    attention_bwd_delta(compute_, o, dout, x_.seq_delta());
    x_.clear_grads();
    auto post_dout = [&](const Slice& s) { return x_.post_dout(dout, lse, x_.seq_delta(), s); };
    Reqs first     = post_dout(x_.slice(0));
    pipeline(
        first, post_dout, [&](Reqs& r, const Slice& s) { x_.finish_dout(r, s); },
        [&](const Slice& s) {
          attention_bwd_update(compute_, x_.q(s), x_.k(s), x_.v(s), x_.dout(s), x_.lse(s), x_.delta(s), x_.dq(s),
                               x_.dk(s), x_.dv(s), tile_options());
        },
        [&](const Slice& s) { return x_.post_grads(s); },
        [&](Reqs& r, const Slice& s) { x_.finish_grads(r, dq, dk, dv, s); });
    end_pass();
  }

 private:
  std::vector<Impl::ConfigField> config(int pass) const {
    return construction_fields(B_, c_, H_, Hkv_, D_, opts_) + std::vector<Impl::ConfigField>{
                                                                  {"head_groups_used", x_.groups()}, {"pass", pass}};
  }
  static std::vector<Impl::ConfigField> construction_fields(int batch, int chunk, int heads, int kv_heads,
                                                            int head_dim, const UlyssesOptions& opts) {
    return std::vector<Impl::ConfigField>{{"batch", batch},       {"chunk", chunk},
                                          {"heads", heads},       {"kv_heads", kv_heads},
                                          {"head_dim", head_dim}, {"element_bytes", std::int64_t(sizeof(T))},
                                          {"head_groups", opts.head_groups}} +
           Impl::option_fields(opts, head_dim);
  }
  /// Every check a rank's constructor arguments can fail, run inside the
  /// construction agreement (nothing may throw before it).
  static void check_construction(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                 const UlyssesOptions& opts) {
    constexpr const char* where = "DistAttn::UlyssesAttention";
    DISTATTN_REQUIRE(batch > 0 && chunk > 0 && head_dim > 0, where,
                     "extents must be positive (batch=" << batch << ", chunk=" << chunk << ", head_dim=" << head_dim
                                                        << ")");
    check_shared_options(where, opts, std::int64_t(P) * chunk);
    DISTATTN_REQUIRE(opts.head_group == 0 || opts.head_group == kv_heads, where,
                     "head_group=" << opts.head_group << ": Ulysses runs its ranks' heads in one pass (head "
                                   << "chunking is implemented for the ring kinds); use 0");
    const UlyssesHeads h(P, heads, kv_heads);  // throws with the reason when the heads do not split
    ulysses_head_groups(h, opts.head_groups);
  }

  template <class QV, class KV, class VV>
  void check_inputs(const char* where, const QV& q, const KV& k, const VV& v) const {
    Impl::check_executor_extents(where, q, k, B_, c_, H_, Hkv_, D_);
    Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
  }

  AttnOptions tile_options() const {
    AttnOptions ao  = opts_.attn.with_mask(kdocs_.for_kernels(opts_.mask_rule()).on_block({0, 1}, {0, 1}));  // contiguous: natural order
    ao.check_finite = false;
    return ao;
  }

  /// Inside the entry agreement: a pass whose allocations would grow beyond what
  /// this rank may use fails on every rank, naming the need.
  void check_memory(const char* where, bool backward) const {
    const MemoryPlan plan = memory_plan();
    Impl::check_growth_fits<Mem>(where, backward ? "backward" : "forward", backward ? plan.backward : plan.forward,
                                 held_bytes(), opts_.memory_limit_bytes, c_, 1, comm_.size());
  }
  void begin_pass(const char* pass) {
    comm_.depend_on(compute_);
    rec_.begin(UlyssesStats{}, pass);
  }
  void end_pass() { rec_.end("DistAttn::UlyssesAttention: pass done"); }

  /// The head groups' pipeline, in the posting order ulysses_pipeline_seconds
  /// replays: `first` (group 0's inputs) and group 1's inputs travel, then after
  /// each group's compute its results and group g + 2's inputs go out while group
  /// g + 1 computes. Message slots (HeadExchange) are reused only by group g + 2,
  /// after group g was waited on. Steps: one per group's compute (the caller
  /// opened the inputs' step), then the last results. One group: in, compute, out.
  template <class PostIn, class FinishIn, class Compute, class PostOut, class FinishOut>
  void pipeline(Reqs& first, PostIn&& post_in, FinishIn&& finish_in, Compute&& compute, PostOut&& post_out,
                FinishOut&& finish_out) {
    const int G = x_.groups();
    std::vector<Reqs> in(G), out(G);
    in[0] = std::move(first);
    if (G > 1) in[1] = post_in(x_.slice(1));
    finish_in(in[0], x_.slice(0));
    for (int g = 0; g < G; ++g) {
      const Slice s = x_.slice(g);
      rec_.step();
      rec_.timed([&] { compute(s); });
      if (g + 1 == G) break;
      out[g] = post_out(s);
      if (g > 0) finish_out(out[g - 1], x_.slice(g - 1));
      if (g + 2 < G) in[g + 2] = post_in(x_.slice(g + 2));
      finish_in(in[g + 1], x_.slice(g + 1));
    }
    rec_.step();
    out[G - 1] = post_out(x_.slice(G - 1));
    if (G > 1) finish_out(out[G - 2], x_.slice(G - 2));
    finish_out(out[G - 1], x_.slice(G - 1));
  }

  Comm& comm_;
  Exec compute_;
  int B_, c_, H_, Hkv_, D_;
  UlyssesOptions opts_;
  Impl::KernelDocuments<typename Exec::memory_space> kdocs_{opts_.documents};
  Impl::PassRecorder<Exec, UlyssesStats> rec_;
  Exchange x_;
  Impl::EntryAgreement<CommSpace, Exec> agree_;
  Impl::SavedInputs<Exec> saved_;
};

}  // namespace DistAttn
