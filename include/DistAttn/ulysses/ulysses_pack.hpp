// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
#include <DistAttn/impl/row_copy.hpp>
#include <DistAttn/schedule/ulysses_types.hpp>

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

/// Block row r of the head blocks: block g carries heads first(g) .. of every
/// (b, token) of a sequence-side tensor [B, n, total, D].
struct HeadRows {
  BlockSlot s;
  HeadMap m;
  long B, n, L, D;
  KOKKOS_INLINE_FUNCTION RowPair operator()(long r) const {
    const long hl = r % L, j = (r / L) % n, b = (r / (L * n)) % B, g = r / (L * n * B);
    return {std::size_t(g) * s.block + s.offset + std::size_t(((b * n + j) * L + hl) * D), b, j,
            m.first(int(g)) + hl};
  }
};

/// buf[g] <- heads first(g) .. of x ([B, n, total, D], any layout), for every g.
template <class Exec, class X, class Buf>
void pack_heads(const Exec& exec, const X& x, const HeadMap& m, const Buf& buf, BlockSlot s, const char* label) {
  const long B = long(x.extent(0)), n = long(x.extent(1)), L = m.local, D = long(x.extent(3));
  move_rows<true>(exec, label, long(m.ranks) * B * n * L, x, buf, HeadRows{s, m, B, n, L, D});
}

/// The blocks g0 .. g1 - 1 that carry head h of row (b, j): first(g) is monotone in g.
struct HeadUnpackRow {
  long b, j, h;
  int g0, g1;
};

/// x ([B, n, total, D], any layout) <- the head blocks of every rank; a head that
/// several blocks carry (replicated K/V heads) gets their sum, one that none
/// carries (another pipeline group's) is left as it is.
template <class Buf, class X>
struct HeadUnpack {
  Buf buf;
  X x;
  BlockSlot s;
  HeadMap m;
  long n, H, L, D;
  KOKKOS_INLINE_FUNCTION HeadUnpackRow row(long r) const {
    HeadUnpackRow w{0, 0, r % H, 0, 0};
    w.j = (r / H) % n;
    w.b = r / (H * n);
    int g = 0;
    while (g < m.ranks && m.first(g) + L <= w.h) ++g;
    w.g0 = w.g1 = g;
    while (w.g1 < m.ranks && m.first(w.g1) <= w.h) ++w.g1;
    return w;
  }
  KOKKOS_INLINE_FUNCTION void operator()(const HeadUnpackRow& w, long d) const {
    if (w.g0 == w.g1) return;
    typename Buf::non_const_value_type sum = 0;
    for (int g = w.g0; g < w.g1; ++g)
      sum += buf(std::size_t(g) * s.block + s.offset + std::size_t(((w.b * n + w.j) * L + w.h - m.first(g)) * D + d));
    x(w.b, w.j, w.h, d) = typename X::non_const_value_type(sum);
  }
};
template <class Exec, class Buf, class X>
void unpack_heads(const Exec& exec, const Buf& buf, BlockSlot s, const HeadMap& m, const X& x, const char* label) {
  const long B = long(x.extent(0)), n = long(x.extent(1)), H = long(x.extent(2)), D = long(x.extent(3));
  // Every head in at most one block (query heads; K/V heads unless replicated):
  // the inverse of pack_heads, a plain row copy per block row. The summing loop
  // below ran at 2.5 GB/s on CPU ranks, unvectorized.
  bool disjoint = true;
  for (int g = 0; g + 1 < m.ranks; ++g) disjoint = disjoint && m.first(g + 1) >= m.first(g) + m.local;
  if (disjoint) {
    move_rows<false>(exec, label, long(m.ranks) * B * n * m.local, x, buf, HeadRows{s, m, B, n, long(m.local), D});
    return;
  }
  for_each_row(exec, label, B * n * H, D, HeadUnpack<Buf, X>{buf, x, s, m, n, H, long(m.local), D});
}

/// Block row r of the token blocks: block i carries rows [i n, (i+1) n) of a
/// head-side tensor [B, P n, L, D].
struct TokenRows {
  BlockSlot s;
  long B, n, L, D;
  KOKKOS_INLINE_FUNCTION RowPair operator()(long r) const {
    const long hl = r % L, j = (r / L) % n, b = (r / (L * n)) % B, i = r / (L * n * B);
    return {std::size_t(i) * s.block + s.offset + std::size_t(((b * n + j) * L + hl) * D), b, i * n + j, hl};
  }
};

/// buf[i] <- rows [i n, (i+1) n) of X ([B, P n, L, D]) for every i (ToBuffer), or the reverse.
template <bool ToBuffer, class Exec, class X, class Buf>
void move_tokens(const Exec& exec, const X& x, const Buf& buf, BlockSlot s, int ranks, const char* label) {
  const long B = long(x.extent(0)), n = long(x.extent(1)) / ranks, L = long(x.extent(2)), D = long(x.extent(3));
  move_rows<ToBuffer>(exec, label, long(ranks) * B * n * L, x, buf, TokenRows{s, B, n, L, D});
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
