#pragma once
/// @file ulysses/ulysses_pack.hpp
/// The reorders around Ulysses' all-to-alls. A message buffer holds P blocks, one
/// per peer, each block a few tensors at fixed offsets; inside a block a tensor is
/// [B, rows, heads, D] (or statistics [B, heads, rows]) in row-major order.
///
///   sequence side (n own tokens, all heads)  <->  block g: the heads of rank g
///   head side (N = P n tokens, own heads)    <->  block i: the tokens of rank i
///
/// "head" functions move between a sequence-side tensor and per-rank head blocks;
/// "token" functions between a head-side tensor and per-rank token blocks.

#include <DistAttn/core/types.hpp>
#include <DistAttn/ulysses/ulysses_types.hpp>

#include <cstddef>
#include <cstdint>

namespace DistAttn::Impl {

/// Where one tensor sits in every block of a message buffer.
struct BlockSlot {
  std::size_t block = 0;   ///< elements per peer block
  std::size_t offset = 0;  ///< first element of this tensor inside a block
};

/// Which heads of a sequence-side tensor block g carries: [first(g), first(g) + local),
/// `offset` heads into rank g's share (a pipeline group's slice of it).
struct HeadMap {
  int ranks = 1, local = 1, total = 1;
  bool kv = false;
  std::int64_t kv_heads = 1;
  int span = 1;    ///< heads of one rank's whole share
  int offset = 0;  ///< first head of the slice inside that share
  KOKKOS_INLINE_FUNCTION int first(int g) const {
    return (kv ? int(std::int64_t(g) * kv_heads / ranks) : g * span) + offset;
  }
  /// Query heads [offset, offset + count) of every rank's share (count 0: all).
  static HeadMap query(const UlyssesHeads& h, int offset = 0, int count = 0) {
    return HeadMap{h.ranks, count > 0 ? count : h.local_heads(), h.heads, false, 1, h.local_heads(), offset};
  }
  static HeadMap key(const UlyssesHeads& h, int offset = 0, int count = 0) {
    return HeadMap{h.ranks,    count > 0 ? count : h.local_kv_heads(), h.kv_heads, true, h.kv_heads,
                   h.local_kv_heads(), offset};
  }
};

/// buf[g] <- heads first(g) .. of x ([B, n, total, D], any layout), for every g.
template <class Exec, class X, class Buf>
void pack_heads(const Exec& exec, const X& x, const HeadMap& m, const Buf& buf, BlockSlot s, const char* label) {
  const long B = long(x.extent(0)), n = long(x.extent(1)), D = long(x.extent(3)), L = m.local;
  using BT = typename Buf::non_const_value_type;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, long(m.ranks) * B * n * L * D),
      KOKKOS_LAMBDA(long idx) {
        const long d = idx % D, hl = (idx / D) % L, j = (idx / (D * L)) % n, b = (idx / (D * L * n)) % B,
                   g = idx / (D * L * n * B);
        buf(std::size_t(g) * s.block + s.offset + std::size_t(((b * n + j) * L + hl) * D + d)) =
            BT(x(b, j, m.first(int(g)) + hl, d));
      });
}

/// x ([B, n, total, D], any layout) <- the head blocks of every rank; a head that
/// several blocks carry (replicated K/V heads) gets their sum, one that none
/// carries (another pipeline group's) is left as it is.
template <class Exec, class Buf, class X>
void unpack_heads(const Exec& exec, const Buf& buf, BlockSlot s, const HeadMap& m, const X& x, const char* label) {
  const long B = long(x.extent(0)), n = long(x.extent(1)), H = long(x.extent(2)), D = long(x.extent(3));
  const long L = m.local;
  const int P  = m.ranks;
  using XT     = typename X::non_const_value_type;
  using BT     = typename Buf::non_const_value_type;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, B * n * H * D), KOKKOS_LAMBDA(long idx) {
        const long d = idx % D, h = (idx / D) % H, j = (idx / (D * H)) % n, b = idx / (D * H * n);
        BT sum   = 0;
        bool hit = false;
        for (int g = 0; g < P; ++g) {
          const long hl = h - m.first(g);
          if (hl < 0 || hl >= L) continue;
          sum += buf(std::size_t(g) * s.block + s.offset + std::size_t(((b * n + j) * L + hl) * D + d));
          hit = true;
        }
        if (hit) x(b, j, h, d) = XT(sum);
      });
}

// The moves below go both ways (ToBuffer or back), so they are functors: a
// device lambda may not capture a variable first inside `if constexpr`.

/// buf[i] <- rows [i n, (i+1) n) of X ([B, P n, L, D]) for every i (ToBuffer), or the reverse.
template <bool ToBuffer, class X, class Buf>
struct TokenMove {
  X x;
  Buf buf;
  BlockSlot s;
  long B, n, L, D;
  KOKKOS_INLINE_FUNCTION void operator()(long idx) const {
    const long d = idx % D, hl = (idx / D) % L, j = (idx / (D * L)) % n, b = (idx / (D * L * n)) % B,
               i = idx / (D * L * n * B);
    const std::size_t e = std::size_t(i) * s.block + s.offset + std::size_t(((b * n + j) * L + hl) * D + d);
    if constexpr (ToBuffer)
      buf(e) = typename Buf::non_const_value_type(x(b, i * n + j, hl, d));
    else
      x(b, i * n + j, hl, d) = typename X::non_const_value_type(buf(e));
  }
};
template <bool ToBuffer, class Exec, class X, class Buf>
void move_tokens(const Exec& exec, const X& x, const Buf& buf, BlockSlot s, int ranks, const char* label) {
  const long B = long(x.extent(0)), n = long(x.extent(1)) / ranks, L = long(x.extent(2)), D = long(x.extent(3));
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, long(ranks) * B * n * L * D),
                       TokenMove<ToBuffer, X, Buf>{x, buf, s, B, n, L, D});
}

/// Statistics ([B, heads, rows]) between the sequence side's heads and per-rank blocks.
template <bool ToBuffer, class S, class Buf>
struct HeadStatsMove {
  S st;
  Buf buf;
  BlockSlot s;
  HeadMap m;
  long B, n, L;
  KOKKOS_INLINE_FUNCTION void operator()(long idx) const {
    const long j = idx % n, hl = (idx / n) % L, b = (idx / (n * L)) % B, g = idx / (n * L * B);
    const std::size_t e = std::size_t(g) * s.block + s.offset + std::size_t((b * L + hl) * n + j);
    if constexpr (ToBuffer)
      buf(e) = typename Buf::non_const_value_type(st(b, m.first(int(g)) + hl, j));
    else
      st(b, m.first(int(g)) + hl, j) = typename S::non_const_value_type(buf(e));
  }
};
template <bool ToBuffer, class Exec, class S, class Buf>
void move_head_stats(const Exec& exec, const S& st, const HeadMap& m, const Buf& buf, BlockSlot s,
                     const char* label) {
  const long B = long(st.extent(0)), n = long(st.extent(2)), L = m.local;
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, long(m.ranks) * B * L * n),
                       HeadStatsMove<ToBuffer, S, Buf>{st, buf, s, m, B, n, L});
}

/// Statistics ([B, heads, P n]) between the head side's rows and per-rank blocks.
template <bool ToBuffer, class S, class Buf>
struct TokenStatsMove {
  S st;
  Buf buf;
  BlockSlot s;
  long B, L, n;
  KOKKOS_INLINE_FUNCTION void operator()(long idx) const {
    const long j = idx % n, hl = (idx / n) % L, b = (idx / (n * L)) % B, i = idx / (n * L * B);
    const std::size_t e = std::size_t(i) * s.block + s.offset + std::size_t((b * L + hl) * n + j);
    if constexpr (ToBuffer)
      buf(e) = typename Buf::non_const_value_type(st(b, hl, i * n + j));
    else
      st(b, hl, i * n + j) = typename S::non_const_value_type(buf(e));
  }
};
template <bool ToBuffer, class Exec, class S, class Buf>
void move_token_stats(const Exec& exec, const S& st, const Buf& buf, BlockSlot s, int ranks, const char* label) {
  const long B = long(st.extent(0)), L = long(st.extent(1)), n = long(st.extent(2)) / ranks;
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, long(ranks) * B * L * n),
                       TokenStatsMove<ToBuffer, S, Buf>{st, buf, s, B, L, n});
}

}  // namespace DistAttn::Impl
