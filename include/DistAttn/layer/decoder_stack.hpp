// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/decoder_stack.hpp
/// L decoder layers with sequence parallelism and a checkpoint policy
/// (docs/design/decoder_layer.md).
///
/// Every rank of `comm` holds its own tokens, in the layout of the attention
/// executor it is given (TokenLayout), and a full copy of every weight. The
/// executor is shared by all layers. Weight gradients are summed over `comm` with
/// one all_reduce_sum per layer, so after backward() every rank holds the
/// gradient of the whole sequence.
///
/// What backward() recomputes depends on the CheckpointPolicy:
///   None           nothing (every layer's activations were kept);
///   LayerBoundary  the whole layer from its saved input, attention forward included;
///   RematAware     the projections and the MLP from the saved input and O/LSE;
///                  the attention backward runs from the saved O and LSE.
/// The same kernels run on the same inputs either way, so the gradients are
/// bitwise identical across policies. attention_forward_calls() counts, per
/// layer, the executor forwards since the last forward(): 1, 2 and 1.
///
/// Packed documents are the executor's (ExecutorOptions::documents): attention
/// stays within each document and RoPE positions restart at each document's first
/// token, so a packed batch trains as its documents would one by one.

#include <DistAttn/comm.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>
#include <DistAttn/layer/attention_executor.hpp>
#include <DistAttn/layer/decoder_layer.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace DistAttn {

template <class T, class CommSpace, class Exec, class Attn>
class DecoderStack {
 public:
  using Layer   = DecoderLayer<T, Exec>;
  using Mem     = typename Layer::Mem;
  using Acc     = typename Layer::Acc;
  using Weights = typename Layer::Weights;
  using Acts    = typename Layer::Acts;
  using Scratch = typename Layer::Scratch;
  using Comm    = Communicator<CommSpace, Exec>;
  using UMatrix = Kokkos::View<T**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  /// @param comm   the sequence-parallel group (the executor's ranks); weight
  ///               gradients are summed over it
  /// @param attn   attention executor built for this rank's tokens (not owned)
  /// @param batch  sequences per step; every rank holds `chunk` tokens of each
  DecoderStack(Comm& comm, Attn& attn, const Exec& exec, const DecoderConfig& cfg, int layers, int batch,
               CheckpointPolicy policy)
      : comm_(comm), attn_(attn), exec_(exec), cfg_(cfg), L_(layers), B_(batch), policy_(policy),
        layout_(checked_layout(comm, attn, cfg, layers, batch)),
        layer_(cfg, batch, layout_, exec, attn.options().documents),
        calls_(std::size_t(layers), 0) {
    const int c = layout_.local_rows();
    for (int l = 0; l < L_; ++l) {
      weights_.emplace_back(cfg, "DistAttn::stack.weights");
      grads_.emplace_back(cfg, "DistAttn::stack.grads");
      inputs_.emplace_back("DistAttn::stack.layer_input", std::size_t(B_) * c, cfg.hidden);
    }
    reduced_ = Vector<T, Mem>("DistAttn::stack.reduced_grads", std::size_t(weights_[0].size()));
    scratch_ = Scratch(cfg, B_, c);
    if (policy_ == CheckpointPolicy::None) {
      for (int l = 0; l < L_; ++l) acts_.emplace_back(cfg, B_, c, true);
    } else {
      acts_.emplace_back(cfg, B_, c, policy_ == CheckpointPolicy::LayerBoundary);
      if (policy_ == CheckpointPolicy::RematAware)
        for (int l = 0; l < L_; ++l) {
          saved_o_.emplace_back("DistAttn::stack.saved_o", std::size_t(B_) * c, cfg.q_width());
          saved_lse_.emplace_back("DistAttn::stack.saved_lse", B_, cfg.heads, c);
        }
    }
  }

  int layers() const { return L_; }
  CheckpointPolicy policy() const { return policy_; }
  const TokenLayout& layout() const { return layout_; }
  const DecoderConfig& config() const { return cfg_; }
  /// Layer l's weights (a full copy on every rank; set them alike on all ranks).
  const Weights& weights(int l) const { return weights_.at(std::size_t(l)); }
  /// Layer l's weight gradients of the last backward(), summed over the ranks.
  const Weights& gradients(int l) const { return grads_.at(std::size_t(l)); }
  /// Executor forward calls per layer since the last forward().
  const std::vector<int>& attention_forward_calls() const { return calls_; }

  /// Bytes kept from forward for backward (saved inputs and activations), and all
  /// bytes the stack holds (plus weights, gradients and backward scratch); the
  /// executor's own buffers are not included.
  std::size_t saved_bytes() const {
    std::size_t b = 0;
    for (const auto& x : inputs_) b += x.span() * sizeof(T);
    if (policy_ == CheckpointPolicy::None)
      for (const auto& a : acts_) b += a.bytes();
    for (const auto& o : saved_o_) b += o.span() * sizeof(T);
    for (const auto& s : saved_lse_) b += s.span() * sizeof(Acc);
    return b;
  }
  std::size_t held_bytes() const {
    std::size_t b = saved_bytes() + scratch_.bytes() + reduced_.span() * sizeof(T);
    if (policy_ != CheckpointPolicy::None) b += acts_[0].bytes();
    for (int l = 0; l < L_; ++l) b += std::size_t(weights_[l].size() + grads_[l].size()) * sizeof(T);
    return b;
  }

  /// out = the stack applied to x; both [batch, chunk, hidden] row-major, this
  /// rank's tokens in the executor's layout. Collective over comm.
  template <class XV, class ZV>
  void forward(const XV& x, const ZV& out) {
    check_entry("DistAttn::DecoderStack::forward", 0, "x", x, "out", out);
    std::fill(calls_.begin(), calls_.end(), 0);
    Kokkos::deep_copy(exec_, inputs_[0], flat(x));
    for (int l = 0; l < L_; ++l) {
      Acts& a = acts_for(l);
      layer_.pre_attention(inputs_[l], weights_[l], a);
      attend(l, a);
      const UMatrix z = l + 1 < L_ ? UMatrix(inputs_[l + 1].data(), rows(), cfg_.hidden) : flat(out);
      layer_.post_attention(inputs_[l], weights_[l], a);
      layer_.output(weights_[l], a, z);
    }
    compat::fence(exec_, "DistAttn::DecoderStack::forward done");
  }

  /// dx = the gradient of the stack's input given dout, the gradient of its output
  /// (both [batch, chunk, hidden]); fills gradients(l) summed over the ranks.
  /// Must follow a forward() on the same tokens. Collective over comm.
  template <class DZV, class DXV>
  void backward(const DZV& dout, const DXV& dx) {
    check_entry("DistAttn::DecoderStack::backward", 1, "dout", dout, "dx", dx);
    const UMatrix g = flat(dx);
    Kokkos::deep_copy(exec_, g, flat(dout));
    for (int l = L_ - 1; l >= 0; --l) {
      Acts& a = acts_for(l);
      if (policy_ != CheckpointPolicy::None) {
        layer_.pre_attention(inputs_[l], weights_[l], a);
        if (policy_ == CheckpointPolicy::LayerBoundary)
          attend(l, a);
        else
          forget_saved_inputs(attn_);  // k, v were recomputed, not made by the executor's forward
        layer_.post_attention(inputs_[l], weights_[l], a);
      }
      layer_.backward(attn_, inputs_[l], weights_[l], a, g, g, grads_[l], scratch_);
      // The gradients (and the copy out of reduced_ of the layer before) were
      // queued on exec_; the communicator's instance must not read them earlier.
      comm_.depend_on(exec_);
      all_reduce_sum(comm_, grads_[l].flat(), reduced_).wait(exec_);
      Kokkos::deep_copy(exec_, grads_[l].flat(), reduced_);
    }
    compat::fence(exec_, "DistAttn::DecoderStack::backward done");
  }

  /// Plain SGD on every rank's copy: w -= lr * gradient.
  void sgd_step(double lr) {
    for (int l = 0; l < L_; ++l) Impl::axpy(exec_, T(-lr), grads_[l].flat(), weights_[l].flat());
    compat::fence(exec_, "DistAttn::DecoderStack::sgd_step done");
  }

 private:
  static TokenLayout checked_layout(Comm& comm, Attn& attn, const DecoderConfig& cfg, int layers, int batch) {
    constexpr const char* where = "DistAttn::DecoderStack";
    cfg.validate(where);
    DISTATTN_REQUIRE(layers > 0 && batch > 0, where,
                     "layers (" << layers << ") and batch (" << batch << ") must be positive");
    check_executor_heads(attn, cfg, where);
    return token_layout(attn, comm, where);
  }

  int rows() const { return B_ * layout_.local_rows(); }

  /// Checks both activations on this rank and agrees on the outcome (and on the
  /// configuration) with every rank before any message of the pass.
  template <class A, class B>
  void check_entry(const char* where, int pass, const char* name_a, const A& a, const char* name_b, const B& b) {
    agree_.run(comm_, where, config_fields(pass), [&] {
      check_tokens(where, name_a, a);
      check_tokens(where, name_b, b);
    });
  }

  template <class V>
  void check_tokens(const char* where, const char* name, const V& v) const {
    static_assert(int(V::rank) == 3, "DistAttn::DecoderStack: activations are [batch, tokens, hidden] Views");
    static_assert(std::is_same<typename V::non_const_value_type, T>::value,
                  "DistAttn::DecoderStack: activations must have the stack's element type");
    DISTATTN_REQUIRE(int(v.extent(0)) == B_ && int(v.extent(1)) == layout_.local_rows() && int(v.extent(2)) == cfg_.hidden,
                     where,
                     "'" << name << "' must be [batch=" << B_ << ", tokens=" << layout_.local_rows()
                         << " (this rank's share, as the attention executor was built), hidden=" << cfg_.hidden
                         << "], got [" << v.extent(0) << ", " << v.extent(1) << ", " << v.extent(2) << "]");
    DISTATTN_REQUIRE(Impl::is_row_major_contiguous(v), where, "'" << name << "' must be row-major contiguous");
  }

  template <class V>
  UMatrix flat(const V& v) const {
    return UMatrix(v.data(), rows(), cfg_.hidden);
  }

  Acts& acts_for(int l) {
    if (policy_ == CheckpointPolicy::None) return acts_[std::size_t(l)];
    if (policy_ == CheckpointPolicy::RematAware) {
      acts_[0].o   = saved_o_[std::size_t(l)];
      acts_[0].lse = saved_lse_[std::size_t(l)];
    }
    return acts_[0];
  }

  /// The executor's forward, reported with the layer's shapes when the executor
  /// rejects them (it raises the error on every rank together).
  void attend(int l, const Acts& a) {
    try {
      layer_.attend(attn_, a);
    } catch (const InvalidArgument& e) {
      Impl::throw_invalid_argument("DistAttn::DecoderStack",
                                   std::string("the attention executor rejected the layer's q, k, v (heads=") +
                                       std::to_string(cfg_.heads) + ", kv_heads=" + std::to_string(cfg_.kv_heads) +
                                       ", head_dim=" + std::to_string(cfg_.head_dim) +
                                       ", tokens=" + std::to_string(layout_.local_rows()) + "): " + e.what());
    }
    ++calls_[std::size_t(l)];
  }

  std::vector<Impl::ConfigField> config_fields(int pass) const {
    return {{"hidden", cfg_.hidden},     {"heads", cfg_.heads},      {"kv_heads", cfg_.kv_heads},
            {"head_dim", cfg_.head_dim}, {"mlp_hidden", cfg_.mlp_hidden}, {"layers", L_},
            {"batch", B_},               {"chunk", layout_.local_rows()},   {"policy", int(policy_)},
            {"pass", pass}};
  }

  Comm& comm_;
  Attn& attn_;
  Exec exec_;
  DecoderConfig cfg_;
  int L_, B_;
  CheckpointPolicy policy_;
  TokenLayout layout_;
  Layer layer_;
  std::vector<int> calls_;
  Impl::EntryAgreement<CommSpace, Exec> agree_;
  std::vector<Weights> weights_, grads_;
  std::vector<Matrix<T, Mem>> inputs_;  // layer l's input; inputs_[l+1] is layer l's output
  std::vector<Acts> acts_;              // one per layer (None) or one shared set
  std::vector<Matrix<T, Mem>> saved_o_;
  std::vector<RowStats<Acc, Mem>> saved_lse_;
  Scratch scratch_;
  Vector<T, Mem> reduced_;
};

}  // namespace DistAttn
