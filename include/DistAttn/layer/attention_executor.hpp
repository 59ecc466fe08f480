// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/attention_executor.hpp
/// What the decoder layer needs to know about the attention executor it is given
/// (RingAttention of any kind, Grid2DAttention NO/O, or any executor behind
/// AnyAttention from make_attention): where its tokens sit
/// (TokenLayout), a check of the extents it was built with, and how to tell it
/// that k and v were recomputed rather than produced by its own forward.

#include <DistAttn/registry/any_attention.hpp>
#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/layer/decoder_config.hpp>
#include <DistAttn/schedule/token_layout.hpp>
#include <DistAttn/ring/ring_attention.hpp>

namespace DistAttn {

template <class T, class CommSpace, class Exec>
TokenLayout token_layout(const RingAttention<T, CommSpace, Exec>& attn, const Communicator<CommSpace, Exec>& comm,
                         const char* where) {
  DISTATTN_REQUIRE(comm.size() == attn.schedule().num_ranks(), where,
                   "the layer's communicator has " << comm.size() << " ranks, the ring executor's schedule "
                                                   << attn.schedule().num_ranks());
  TokenLayout t;
  t.kind  = attn.schedule().kind() == RingKind::Zigzag ? TokenLayout::Kind::Zigzag : TokenLayout::Kind::Contiguous;
  t.rank  = comm.rank();
  t.size  = comm.size();
  t.chunk = attn.chunk();
  return t;
}

template <class T, class CommSpace, class Exec>
TokenLayout token_layout(const Grid2DAttention<T, CommSpace, Exec>& attn,
                         const Communicator<CommSpace, Exec>& comm, const char* where) {
  const int P = attn.rows() * attn.cols(), p = attn.coords().row + attn.rows() * attn.coords().col;
  DISTATTN_REQUIRE(comm.size() == P && comm.rank() == p, where,
                   "the layer's communicator (rank " << comm.rank() << " of " << comm.size()
                                                     << ") is not the world the Attention2D grid was built on (rank "
                                                     << p << " of " << P << ")");
  TokenLayout t;
  t.kind  = TokenLayout::Kind::Cyclic;
  t.rank  = p;
  t.size  = P;
  t.chunk = attn.shard_len();
  return t;
}

template <class T, class CommSpace, class Exec>
TokenLayout token_layout(const AnyAttention<T, CommSpace, Exec>& attn, const Communicator<CommSpace, Exec>& comm,
                         const char* where) {
  DISTATTN_REQUIRE(comm.size() == attn.num_ranks(), where,
                   "the layer's communicator has " << comm.size() << " ranks, the " << attn.choice().name()
                                                   << " executor was built on " << attn.num_ranks());
  return attn.token_layout(comm.rank());
}

/// The ring executor checks heads and head_dim at its own entry (the layer
/// reports that error with its configuration); Attention2D says them up front.
template <class T, class CommSpace, class Exec>
void check_executor_heads(const RingAttention<T, CommSpace, Exec>&, const DecoderConfig&, const char*) {}

template <class T, class CommSpace, class Exec>
void check_executor_heads(const Grid2DAttention<T, CommSpace, Exec>& attn, const DecoderConfig& cfg,
                          const char* where) {
  const auto p = attn.volume_params();
  DISTATTN_REQUIRE(p.heads == cfg.heads && p.kv_heads == cfg.kv_heads && p.head_dim == cfg.head_dim, where,
                   "the Attention2D executor was built for heads=" << p.heads << ", kv_heads=" << p.kv_heads
                                                                    << ", head_dim=" << p.head_dim
                                                                    << "; the layer has heads=" << cfg.heads
                                                                    << ", kv_heads=" << cfg.kv_heads
                                                                    << ", head_dim=" << cfg.head_dim);
}

template <class T, class CommSpace, class Exec>
void check_executor_heads(const AnyAttention<T, CommSpace, Exec>& attn, const DecoderConfig& cfg, const char* where) {
  const LocalProblem& p = attn.problem();
  DISTATTN_REQUIRE(p.heads == cfg.heads && p.kv_heads == cfg.kv_heads && p.head_dim == cfg.head_dim, where,
                   "the " << attn.choice().name() << " executor was built for heads=" << p.heads
                          << ", kv_heads=" << p.kv_heads << ", head_dim=" << p.head_dim
                          << "; the layer has heads=" << cfg.heads << ", kv_heads=" << cfg.kv_heads
                          << ", head_dim=" << cfg.head_dim);
}

/// Called before a backward whose k and v were recomputed, not produced by the
/// executor's last forward: spares Attention2D checking the K_t/V_t it saved
/// from another layer (the check would find them changed and permute again).
template <class Attn>
void forget_saved_inputs(Attn& attn) {
  attn.invalidate_saved_inputs();
}

}  // namespace DistAttn
