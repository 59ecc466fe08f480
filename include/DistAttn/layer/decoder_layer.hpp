// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/decoder_layer.hpp
/// Forward and backward of one Llama-style decoder layer on this rank's tokens
/// (docs/design/decoder_layer.md):
///
///   h1 = rmsnorm(x) g1;  q, k, v = h1 Wq, h1 Wk, h1 Wv;  q, k = rope(q), rope(k)
///   o, lse = attention(q, k, v)                              (the executor: collective)
///   y = x + o Wo;  h2 = rmsnorm(y) g2;  s = silu(h2 Wg) * (h2 Wu);  z = y + s Wd
///
/// The forward is split where the checkpoint policies cut it: pre_attention()
/// (x -> q, k, v), attend() (the executor's forward), post_attention() (x, o ->
/// y, ..., s) and output() (-> z). backward() needs every activation of LayerActivations; a policy that did
/// not keep them calls the first (and second) part again before it. All matrices
/// are row-major [batch * tokens, width]; row b*chunk + i is local token i of
/// sequence b, as the executors' [batch, tokens, heads, head_dim] tensors.

#include <DistAttn/exec/impl/kernel_documents.hpp>
#include <DistAttn/impl/tensor_ops.hpp>
#include <DistAttn/layer/layer_weights.hpp>
#include <DistAttn/layer/linear.hpp>
#include <DistAttn/layer/rmsnorm.hpp>
#include <DistAttn/layer/rope.hpp>
#include <DistAttn/layer/swiglu.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace DistAttn {

/// One layer's forward intermediates (the layer input x is held by the caller).
template <class T, class Mem>
struct LayerActivations {
  using Acc = accum_t<T>;
  Vector<Acc, Mem> inv1, inv2;            // 1/rms of x and of y, per token
  Matrix<T, Mem> h1, q, k, v, o, y, h2;  // q and k after RoPE
  Matrix<T, Mem> gate, up, s;            // [n, F]
  RowStats<Acc, Mem> lse;                // [batch, heads, tokens]

  /// with_attention_output = false leaves o and lse empty (the caller points them
  /// at storage it keeps per layer).
  LayerActivations(const DecoderConfig& c, int batch, int chunk, bool with_attention_output) {
    const std::size_t n = std::size_t(batch) * chunk;
    const std::string p = "DistAttn::layer.";
    inv1 = Vector<Acc, Mem>(p + "inv1", n);
    inv2 = Vector<Acc, Mem>(p + "inv2", n);
    h1   = Matrix<T, Mem>(p + "h1", n, c.hidden);
    q    = Matrix<T, Mem>(p + "q", n, c.q_width());
    k    = Matrix<T, Mem>(p + "k", n, c.kv_width());
    v    = Matrix<T, Mem>(p + "v", n, c.kv_width());
    y    = Matrix<T, Mem>(p + "y", n, c.hidden);
    h2   = Matrix<T, Mem>(p + "h2", n, c.hidden);
    gate = Matrix<T, Mem>(p + "gate", n, c.mlp_hidden);
    up   = Matrix<T, Mem>(p + "up", n, c.mlp_hidden);
    s    = Matrix<T, Mem>(p + "s", n, c.mlp_hidden);
    if (with_attention_output) {
      o   = Matrix<T, Mem>(p + "o", n, c.q_width());
      lse = RowStats<Acc, Mem>(p + "lse", batch, c.heads, chunk);
    }
  }
  LayerActivations() = default;

  std::size_t bytes() const {
    std::size_t b = 0;
    for (const auto* m : {&h1, &q, &k, &v, &o, &y, &h2, &gate, &up, &s}) b += m->span() * sizeof(T);
    return b + (inv1.span() + inv2.span() + lse.span()) * sizeof(Acc);
  }
};

/// Backward temporaries shared by every layer of a stack.
template <class T, class Mem>
struct LayerGradScratch {
  Matrix<T, Mem> dy, dh, ds, dgate, dup, dout_attn, dq, dk, dv;

  LayerGradScratch(const DecoderConfig& c, int batch, int chunk) {
    const std::size_t n = std::size_t(batch) * chunk;
    const std::string p = "DistAttn::layer_grad.";
    dy        = Matrix<T, Mem>(p + "dy", n, c.hidden);
    dh        = Matrix<T, Mem>(p + "dh", n, c.hidden);
    ds        = Matrix<T, Mem>(p + "ds", n, c.mlp_hidden);
    dgate     = Matrix<T, Mem>(p + "dgate", n, c.mlp_hidden);
    dup       = Matrix<T, Mem>(p + "dup", n, c.mlp_hidden);
    dout_attn = Matrix<T, Mem>(p + "do", n, c.q_width());
    dq        = Matrix<T, Mem>(p + "dq", n, c.q_width());
    dk        = Matrix<T, Mem>(p + "dk", n, c.kv_width());
    dv        = Matrix<T, Mem>(p + "dv", n, c.kv_width());
  }
  LayerGradScratch() = default;

  std::size_t bytes() const {
    std::size_t b = 0;
    for (const auto* m : {&dy, &dh, &ds, &dgate, &dup, &dout_attn, &dq, &dk, &dv}) b += m->span() * sizeof(T);
    return b;
  }
};

template <class T, class Exec>
class DecoderLayer {
 public:
  using Mem     = typename Exec::memory_space;
  using Acc     = accum_t<T>;
  using Weights = LayerWeights<T, Mem>;
  using Acts    = LayerActivations<T, Mem>;
  using Scratch = LayerGradScratch<T, Mem>;
  using View4   = Impl::Unmanaged4<T, Mem>;

  /// `documents`: the attention executor's global document offsets (empty: one
  /// sequence); RoPE counts positions from each document's start.
  DecoderLayer(const DecoderConfig& cfg, int batch, const TokenLayout& layout, const Exec& exec,
               const std::vector<std::int64_t>& documents = {})
      : cfg_(cfg), B_(batch), layout_(layout), exec_(exec), doc_copy_(documents), docs_(doc_copy_.documents()) {}

  /// x -> h1, q, k, v (q, k rotated).
  template <class XV>
  void pre_attention(const XV& x, const Weights& w, const Acts& a) const {
    rmsnorm_forward(exec_, x, w.vector(Weight::NormAttn), cfg_.rms_eps, a.inv1, a.h1);
    linear_forward(exec_, a.h1, w.matrix(Weight::Q), a.q);
    linear_forward(exec_, a.h1, w.matrix(Weight::K), a.k);
    linear_forward(exec_, a.h1, w.matrix(Weight::V), a.v);
    rope_apply(exec_, a.q, cfg_.heads, cfg_.head_dim, layout_, cfg_.rope_theta, +1, docs_);
    rope_apply(exec_, a.k, cfg_.kv_heads, cfg_.head_dim, layout_, cfg_.rope_theta, +1, docs_);
  }

  /// o, lse = attention(q, k, v) through the executor (collective over its ranks).
  template <class Attn>
  void attend(Attn& attn, const Acts& a) const {
    attn.forward(heads4(a.q, cfg_.heads), heads4(a.k, cfg_.kv_heads), heads4(a.v, cfg_.kv_heads),
                 heads4(a.o, cfg_.heads), a.lse);
  }

  /// x, o -> y, h2, gate, up, s: what backward needs of the rest of the layer.
  template <class XV>
  void post_attention(const XV& x, const Weights& w, const Acts& a) const {
    Kokkos::deep_copy(exec_, a.y, x);
    linear_forward(exec_, a.o, w.matrix(Weight::O), a.y, /*accumulate=*/true);
    rmsnorm_forward(exec_, a.y, w.vector(Weight::NormMlp), cfg_.rms_eps, a.inv2, a.h2);
    linear_forward(exec_, a.h2, w.matrix(Weight::Gate), a.gate);
    linear_forward(exec_, a.h2, w.matrix(Weight::Up), a.up);
    swiglu_forward(exec_, a.gate, a.up, a.s);
  }

  /// The layer output z = y + s Wd (a recomputation for backward skips it).
  template <class ZV>
  void output(const Weights& w, const Acts& a, const ZV& z) const {
    Kokkos::deep_copy(exec_, z, a.y);
    linear_forward(exec_, a.s, w.matrix(Weight::Down), z, /*accumulate=*/true);
  }

  /// Given dz (the gradient of z), writes dx and every weight gradient of this
  /// rank's tokens into g (overwritten; the caller sums them over ranks).
  /// dx may be the same View as dz.
  template <class Attn, class XV, class DZV, class DXV>
  void backward(Attn& attn, const XV& x, const Weights& w, const Acts& a, const DZV& dz, const DXV& dx,
                const Weights& g, const Scratch& t) const {
    // MLP: z = y + s Wd, s = silu(h2 Wg) * (h2 Wu), h2 = rmsnorm(y) g2.
    linear_backward_weight(exec_, a.s, dz, g.matrix(Weight::Down));
    linear_backward_input(exec_, dz, w.matrix(Weight::Down), t.ds);
    swiglu_backward(exec_, a.gate, a.up, t.ds, t.dgate, t.dup);
    linear_backward_weight(exec_, a.h2, t.dgate, g.matrix(Weight::Gate));
    linear_backward_weight(exec_, a.h2, t.dup, g.matrix(Weight::Up));
    linear_backward_input(exec_, t.dgate, w.matrix(Weight::Gate), t.dh);
    linear_backward_input(exec_, t.dup, w.matrix(Weight::Up), t.dh, /*accumulate=*/true);
    Kokkos::deep_copy(exec_, t.dy, dz);
    rmsnorm_backward(exec_, a.y, w.vector(Weight::NormMlp), a.inv2, t.dh, t.dy, g.vector(Weight::NormMlp), true);
    // Attention: y = x + o Wo, o = attention(rope(h1 Wq), rope(h1 Wk), h1 Wv).
    linear_backward_weight(exec_, a.o, t.dy, g.matrix(Weight::O));
    linear_backward_input(exec_, t.dy, w.matrix(Weight::O), t.dout_attn);
    attn.backward(heads4(a.q, cfg_.heads), heads4(a.k, cfg_.kv_heads), heads4(a.v, cfg_.kv_heads),
                  heads4(a.o, cfg_.heads), heads4(t.dout_attn, cfg_.heads), a.lse, heads4(t.dq, cfg_.heads),
                  heads4(t.dk, cfg_.kv_heads), heads4(t.dv, cfg_.kv_heads));
    rope_apply(exec_, t.dq, cfg_.heads, cfg_.head_dim, layout_, cfg_.rope_theta, -1, docs_);
    rope_apply(exec_, t.dk, cfg_.kv_heads, cfg_.head_dim, layout_, cfg_.rope_theta, -1, docs_);
    linear_backward_weight(exec_, a.h1, t.dq, g.matrix(Weight::Q));
    linear_backward_weight(exec_, a.h1, t.dk, g.matrix(Weight::K));
    linear_backward_weight(exec_, a.h1, t.dv, g.matrix(Weight::V));
    linear_backward_input(exec_, t.dq, w.matrix(Weight::Q), t.dh);
    linear_backward_input(exec_, t.dk, w.matrix(Weight::K), t.dh, true);
    linear_backward_input(exec_, t.dv, w.matrix(Weight::V), t.dh, true);
    Kokkos::deep_copy(exec_, dx, t.dy);
    rmsnorm_backward(exec_, x, w.vector(Weight::NormAttn), a.inv1, t.dh, dx, g.vector(Weight::NormAttn), true);
  }

  const DecoderConfig& config() const { return cfg_; }
  const TokenLayout& layout() const { return layout_; }

 private:
  /// [n, heads * D] as the executors' [batch, tokens, heads, D] (same memory).
  View4 heads4(const Matrix<T, Mem>& m, int heads) const {
    return View4(m.data(), B_, layout_.local_rows(), heads, cfg_.head_dim);
  }

  DecoderConfig cfg_;
  int B_;
  TokenLayout layout_;
  Exec exec_;
  Impl::KernelDocuments<Mem> doc_copy_;
  Documents docs_;  // doc_copy_'s offsets
};

}  // namespace DistAttn
