// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file schedule/padding.hpp
/// Any sequence length N on any number of ranks P. Every executor needs its
/// layout filled exactly: P chunks of c tokens (ring, Ulysses, hybrid), c even for
/// zigzag, N a multiple of P for Attention2D. SequencePadding says how long the
/// padded sequence is, how many rows each rank passes, and which of a rank's rows
/// are padding; docs/api.md shows it with every executor.
///
/// The rule (causal attention only): pad at the END of the sequence. Padded keys
/// then come after every real query, so the causal mask hides them and every real
/// row of o, LSE, dq, dk, dv is exact. What the caller does:
///   1. build the executor with chunk() tokens per rank (Attention2D: seq_len =
///      padded_tokens());
///   2. fill local row i of rank r from global token layout(r).position(i) when it
///      is < N; rows at positions >= N are padding: give them finite values
///      (zero_padding() writes zeros) in q, k, v;
///   3. in backward, give padded rows dO = 0 (zero_padding(dout)): their dS and
///      P^T dO vanish, so they add nothing to dk, dv of real keys;
///   4. ignore padded rows of the outputs.
/// Full (non-causal) attention cannot be padded this way (padded keys would enter
/// every row): the constructor then requires N to fill the layout exactly.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/schedule/token_layout.hpp>
#include <DistAttn/schedule/ring_types.hpp>

#include <cstdint>

namespace DistAttn {

/// The token layout of a ring kind: vanilla and balanced are contiguous.
inline TokenLayout::Kind token_layout_kind(RingKind kind) {
  return kind == RingKind::Zigzag ? TokenLayout::Kind::Zigzag : TokenLayout::Kind::Contiguous;
}

class SequencePadding {
 public:
  /// Tokens a layout of `ranks` ranks holds in whole: a multiple of P (2P for
  /// zigzag, whose chunks split in two halves).
  static std::int64_t unit(int ranks, TokenLayout::Kind kind) {
    return kind == TokenLayout::Kind::Zigzag ? 2 * std::int64_t(ranks) : std::int64_t(ranks);
  }
  /// N rounded up to the next multiple of unit().
  static std::int64_t padded_length(std::int64_t tokens, int ranks, TokenLayout::Kind kind) {
    DISTATTN_REQUIRE(ranks > 0, "DistAttn::SequencePadding", "ranks (P) must be positive, got " << ranks);
    const std::int64_t u = unit(ranks, kind);
    return (tokens + u - 1) / u * u;
  }

  /// @param tokens N, the real sequence length (> 0)
  /// @param ranks  P, the ranks the executor's sequence layout spans (the hybrid:
  ///               all its ranks, with the kind of its inner executor's layout)
  /// @param kind   the executor's layout: Contiguous (vanilla, balanced, Ulysses),
  ///               Zigzag, Cyclic (Attention2D)
  /// @param causal false (full attention) accepts only an N that needs no padding
  SequencePadding(std::int64_t tokens, int ranks, TokenLayout::Kind kind, bool causal = true)
      : N_(tokens), P_(ranks), kind_(kind), padded_(padded_length(tokens, ranks, kind)) {
    constexpr const char* where = "DistAttn::SequencePadding";
    DISTATTN_REQUIRE(tokens > 0, where, "tokens (N) must be positive, got " << tokens);
    DISTATTN_REQUIRE(padded_ / ranks <= std::int64_t(1) << 30, where,
                     "tokens per rank " << padded_ / ranks << " is too large");
    DISTATTN_REQUIRE(causal || padded_ == tokens, where,
                     "full (non-causal) attention cannot be padded (padded keys would enter every row): N="
                         << tokens << " must be a multiple of " << unit(ranks, kind) << " for the "
                         << to_string(kind) << " layout on P=" << ranks << " ranks");
  }

  /// N.
  std::int64_t tokens() const { return N_; }
  /// N rounded up to what the layout holds; Attention2D's seq_len.
  std::int64_t padded_tokens() const { return padded_; }
  /// Rows every rank passes: the ring's, Ulysses' and the hybrid's chunk, Attention2D's shard_len().
  int chunk() const { return int(padded_ / P_); }
  int ranks() const { return P_; }
  TokenLayout::Kind kind() const { return kind_; }

  /// Global positions of rank `rank`'s rows (position(i) >= tokens() is padding).
  TokenLayout layout(int rank) const {
    DISTATTN_REQUIRE(rank >= 0 && rank < P_, "DistAttn::SequencePadding::layout",
                     "rank " << rank << " is not in [0, " << P_ << ")");
    TokenLayout t;
    t.kind  = kind_;
    t.rank  = rank;
    t.size  = P_;
    t.chunk = chunk();
    return t;
  }
  /// How many of rank `rank`'s rows hold real tokens.
  int real_rows(int rank) const {
    const TokenLayout l = layout(rank);
    int n               = 0;
    for (std::int64_t i = 0; i < l.chunk; ++i) n += l.position(i) < N_ ? 1 : 0;
    return n;
  }

  /// Zeroes the rows of `x` whose position under `layout` is >= tokens():
  /// [batch, rows, heads, head_dim] tensors (q, k, v, dO) or [batch, heads, rows]
  /// row statistics. Runs on `exec`.
  template <class Exec, class V>
  void zero_padding(const Exec& exec, const TokenLayout& layout, const V& x) const {
    static_assert(int(V::rank) == 4 || int(V::rank) == 3,
                  "zero_padding takes [batch, rows, heads, head_dim] tensors or [batch, heads, rows] statistics");
    constexpr int axis = int(V::rank) == 4 ? 1 : 2;
    DISTATTN_REQUIRE(layout.row_offset + std::int64_t(x.extent(axis)) <= layout.chunk,
                     "DistAttn::SequencePadding::zero_padding",
                     "the view has " << x.extent(axis) << " rows; the layout holds " << layout.chunk - layout.row_offset);
    using T              = typename V::non_const_value_type;
    const std::int64_t N = N_;
    const TokenLayout l  = layout;
    if constexpr (int(V::rank) == 4) {
      const long B = long(x.extent(0)), S = long(x.extent(1)), H = long(x.extent(2)), D = long(x.extent(3));
      Kokkos::parallel_for(
          "DistAttn::SequencePadding::zero_padding", Kokkos::RangePolicy<Exec>(exec, 0, B * S * H),
          KOKKOS_LAMBDA(long idx) {
            const long h = idx % H, i = (idx / H) % S, b = idx / (H * S);
            if (l.position(i) < N) return;
            for (long d = 0; d < D; ++d) x(b, i, h, d) = T(0);
          });
    } else {
      const long B = long(x.extent(0)), H = long(x.extent(1)), S = long(x.extent(2));
      Kokkos::parallel_for(
          "DistAttn::SequencePadding::zero_padding", Kokkos::RangePolicy<Exec>(exec, 0, B * H * S),
          KOKKOS_LAMBDA(long idx) {
            const long i = idx % S, h = (idx / S) % H, b = idx / (S * H);
            if (l.position(i) >= N) x(b, h, i) = T(0);
          });
    }
  }
  /// The same for this padding's own layout of rank `rank`.
  template <class Exec, class V>
  void zero_padding(const Exec& exec, int rank, const V& x) const {
    zero_padding(exec, layout(rank), x);
  }

 private:
  std::int64_t N_;
  int P_;
  TokenLayout::Kind kind_;
  std::int64_t padded_;
};

}  // namespace DistAttn
