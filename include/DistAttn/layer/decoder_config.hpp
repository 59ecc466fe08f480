// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/decoder_config.hpp
/// Shapes of a Llama-style decoder layer and the checkpoint policies of a stack
/// of them (docs/design/decoder_layer.md).

#include <DistAttn/core/error.hpp>

#include <cstdint>

namespace DistAttn {

/// @brief One decoder layer: RMSNorm -> Q/K/V (GQA) -> RoPE -> attention -> Wo ->
/// residual -> RMSNorm -> SwiGLU MLP -> residual. Weights are stored [in, out], so
/// a projection is y = x W.
struct DecoderConfig {
  int hidden     = 0;  ///< model width E
  int heads      = 0;  ///< query heads H
  int kv_heads   = 0;  ///< key/value heads (H for plain multi-head attention)
  int head_dim   = 0;  ///< D; even (RoPE rotates pairs of channels)
  int mlp_hidden = 0;  ///< F, width of the SwiGLU gate and up projections
  double rms_eps    = 1e-5;
  double rope_theta = 10000.0;

  int q_width() const { return heads * head_dim; }
  int kv_width() const { return kv_heads * head_dim; }

  /// Throws InvalidArgument naming the first bad field.
  void validate(const char* where) const {
    DISTATTN_REQUIRE(hidden > 0 && heads > 0 && kv_heads > 0 && head_dim > 0 && mlp_hidden > 0, where,
                     "DecoderConfig extents must be positive (hidden=" << hidden << ", heads=" << heads
                                                                       << ", kv_heads=" << kv_heads
                                                                       << ", head_dim=" << head_dim
                                                                       << ", mlp_hidden=" << mlp_hidden << ")");
    DISTATTN_REQUIRE(heads % kv_heads == 0, where,
                     "DecoderConfig: heads (" << heads << ") not divisible by kv_heads (" << kv_heads << ")");
    DISTATTN_REQUIRE(head_dim % 2 == 0, where,
                     "DecoderConfig: head_dim (" << head_dim << ") must be even for the rotary embedding");
    DISTATTN_REQUIRE(rms_eps > 0 && rope_theta > 0, where,
                     "DecoderConfig: rms_eps (" << rms_eps << ") and rope_theta (" << rope_theta
                                                << ") must be positive");
  }
};

/// @brief What a stack keeps between forward and backward (docs/design/decoder_layer.md, [DFA] §3.3).
enum class CheckpointPolicy {
  /// Every activation is kept; backward recomputes nothing.
  None,
  /// Only each layer's input is kept; backward reruns the whole layer, attention
  /// forward and its communication included (the HuggingFace habit).
  LayerBoundary,
  /// Each layer's input, attention output O and LSE are kept; backward recomputes
  /// the projections and the MLP but runs no attention forward.
  RematAware,
};

inline const char* to_string(CheckpointPolicy p) {
  switch (p) {
    case CheckpointPolicy::None: return "none";
    case CheckpointPolicy::LayerBoundary: return "layer-boundary";
    case CheckpointPolicy::RematAware: return "remat-aware";
  }
  return "?";
}

}  // namespace DistAttn
