// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file core/mask.hpp
/// The one place a mask is defined. A mask is a rule on global token positions,
/// never a dense matrix: local row i of a block sits at position q(i) (keys:
/// k(j)), affine maps that cover contiguous chunks (offset x*c, stride 1) and
/// Attention2D's cyclic shards (offset r, stride P) alike. Kernels, schedules and
/// the cost model ask the mask the questions below instead of testing its kind,
/// so a new kind of mask changes this file and the places a user passes one.
///
/// Every query relies on positions growing with the row index (stride >= 1).

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace DistAttn {

/// Global token position of local row i: offset + stride * i. Contiguous ring
/// chunks use (x*c, 1); Attention2D's cyclic shards use (r + s*c, P).
struct PositionMap {
  std::int64_t offset = 0;
  std::int64_t stride = 1;
  KOKKOS_INLINE_FUNCTION constexpr std::int64_t operator()(std::int64_t i) const {
    return offset + stride * i;
  }
};

enum class MaskKind { None, Causal };

/// How a block of (query, key) pairs meets a mask: nothing allowed (the block is
/// skipped), everything allowed (no per-element test), or some (tested per element).
enum class Relation { Skip, Full, Partial };

/// Rows [begin, end) of a block; empty when begin >= end.
struct RowRange {
  int begin = 0, end = 0;
  KOKKOS_INLINE_FUNCTION constexpr bool empty() const { return begin >= end; }
  /// The tiles of t rows that hold these rows: [first, last) tile indices,
  /// (n, n) with n = ceil(end / t) when empty.
  KOKKOS_INLINE_FUNCTION constexpr RowRange tiles(int t) const {
    return empty() ? RowRange{(end + t - 1) / t, (end + t - 1) / t} : RowRange{begin / t, (end + t - 1) / t};
  }
};

namespace Impl {
/// sum_{i=0}^{n-1} floor((a i + b) / m) for n, m >= 1 and a, b >= 0 (the
/// Euclid-like reduction; every step shrinks (a, m) like a gcd).
inline std::int64_t floor_sum(std::int64_t n, std::int64_t m, std::int64_t a, std::int64_t b) {
  std::int64_t ans = 0;
  while (true) {
    if (a >= m) {
      ans += (n - 1) * n / 2 * (a / m);
      a %= m;
    }
    if (b >= m) {
      ans += n * (b / m);
      b %= m;
    }
    const std::int64_t y_max = a * n + b;
    if (y_max < m) break;
    n = y_max / m;
    b = y_max % m;
    std::swap(m, a);
  }
  return ans;
}
/// floor(x / y) for y > 0 and any sign of x.
KOKKOS_INLINE_FUNCTION constexpr std::int64_t floor_div(std::int64_t x, std::int64_t y) {
  return x >= 0 ? x / y : -((-x + y - 1) / y);
}
/// ceil(x / y) for y > 0 and any sign of x.
KOKKOS_INLINE_FUNCTION constexpr std::int64_t ceil_div(std::int64_t x, std::int64_t y) {
  return x >= 0 ? (x + y - 1) / y : -((-x) / y);
}
}  // namespace Impl

/// Far beyond any position yet small enough that position +- it never overflows.
inline constexpr std::int64_t kUnboundedSpan = std::int64_t(1) << 60;

/// A key window in tokens: the query at position p may see keys at positions
/// [p - left, p + right]. Causal attention clips right to 0, so the causal sliding
/// window of width W is {W, 0} on a causal mask and a local bidirectional window is
/// {L, R} on an unmasked one.
struct Window {
  std::int64_t left  = kUnboundedSpan;
  std::int64_t right = kUnboundedSpan;
  KOKKOS_INLINE_FUNCTION constexpr bool bounded() const { return left < kUnboundedSpan || right < kUnboundedSpan; }
};

/// Packed documents: document d holds positions [offsets[d], offsets[d+1]), and a
/// query sees keys of its own document only. The offsets (count + 1 of them,
/// sorted, the first 0) are not owned: the pointer must be readable where the
/// mask is asked, so a kernel's mask points into device memory and a schedule's
/// into host memory. count == 0 means one unbounded document.
struct Documents {
  const std::int64_t* offsets = nullptr;
  int count                   = 0;

  KOKKOS_INLINE_FUNCTION constexpr bool any() const { return count > 0; }
  /// The document holding position p; positions before the first document belong
  /// to the first and after the last to the last, so every position has one.
  KOKKOS_INLINE_FUNCTION int of(std::int64_t p) const {
    int lo = 0, hi = count - 1;  // the last d with offsets[d] <= p, or 0
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= p) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
  /// [first position, one past the last) of p's document, unbounded on the open
  /// side of the first and the last document (and both sides without documents):
  /// one search for both ends.
  KOKKOS_INLINE_FUNCTION Kokkos::pair<std::int64_t, std::int64_t> bounds_of(std::int64_t p) const {
    // A local copy: binding the namespace constant to a reference (Kokkos::pair's
    // constructor, a ternary with an lvalue) odr-uses it, which device code cannot.
    const std::int64_t unbounded = kUnboundedSpan;
    if (count == 0) return {-unbounded, unbounded};
    const int d = of(p);
    return {d == 0 ? -unbounded : offsets[d], d == count - 1 ? unbounded : offsets[d + 1]};
  }
};

/// The allowed (query, key) pairs: causal or not, an optional key window, optional
/// documents, on positions given by q and k. For every query position p the keys
/// it may see form one interval of positions, key_range(p), and both
/// ends grow with p; every query below rests on that.
struct Mask {
  MaskKind kind = MaskKind::None;
  PositionMap q{};
  PositionMap k{};
  Window window{};
  Documents docs{};

  static Mask none(PositionMap qpos = {}, PositionMap kpos = {}) { return Mask{MaskKind::None, qpos, kpos}; }
  static Mask causal(PositionMap qpos = {}, PositionMap kpos = {}) {
    return Mask{MaskKind::Causal, qpos, kpos};
  }
  bool is_causal() const { return kind == MaskKind::Causal; }
  /// Dense causal or dense full: no window, no documents (the tuned CUDA kernels'
  /// parameter set, and every path that predates windows and documents).
  KOKKOS_INLINE_FUNCTION constexpr bool is_dense() const { return !window.bounded() && !docs.any(); }

  /// The same rule on other position maps (a block of a schedule, a shard of a grid).
  Mask at(PositionMap qpos, PositionMap kpos) const {
    Mask m = *this;
    m.q    = qpos;
    m.k    = kpos;
    return m;
  }
  /// This rule on a block whose rows sit at qpos and kpos. A dense rule gives the
  /// masks executors built before windows and documents existed (causal at the
  /// block's positions, or no mask at all), so their outputs stay bit for bit.
  Mask on_block(PositionMap qpos, PositionMap kpos) const {
    if (is_dense()) return kind == MaskKind::Causal ? Mask::causal(qpos, kpos) : Mask::none();
    return at(qpos, kpos);
  }
  Mask with_window(Window w) const {
    DISTATTN_REQUIRE(w.left >= 0 && w.right >= 0, "DistAttn::Mask::with_window",
                     "window sides must be >= 0 tokens (left=" << w.left << ", right=" << w.right << ")");
    Mask m   = *this;
    m.window = Window{std::min(w.left, kUnboundedSpan), std::min(w.right, kUnboundedSpan)};
    return m;
  }
  Mask with_documents(Documents d) const {
    DISTATTN_REQUIRE(d.count >= 0 && (d.count == 0 || d.offsets != nullptr), "DistAttn::Mask::with_documents",
                     "documents need count + 1 offsets (count=" << d.count << ")");
    Mask m = *this;
    m.docs = d;
    return m;
  }

  /// How far right of its own position a query may look.
  KOKKOS_INLINE_FUNCTION constexpr std::int64_t right_span() const {
    return kind == MaskKind::Causal ? 0 : window.right;
  }
  /// Key positions [lo, hi) the query at position p may see: the window clipped
  /// to p's document.
  KOKKOS_INLINE_FUNCTION Kokkos::pair<std::int64_t, std::int64_t> key_range(std::int64_t p) const {
    std::int64_t lo = p - window.left, hi = p + right_span() + 1;
    if (docs.any()) {
      const auto d = docs.bounds_of(p);
      lo           = lo > d.first ? lo : d.first;
      hi           = hi < d.second ? hi : d.second;
    }
    return {lo, hi};
  }

  KOKKOS_INLINE_FUNCTION bool allowed(std::int64_t i, std::int64_t j) const {
    if (kind == MaskKind::None && is_dense()) return true;
    const auto r          = key_range(q(i));
    const std::int64_t kp = k(j);
    return kp >= r.first && kp < r.second;
  }

  /// Queries at positions [qmin, qmax] against keys at positions [kmin, kmax]:
  /// Full and Skip are exact; Partial may hold no allowed pair when positions are
  /// strided and a window or document boundary falls between them.
  KOKKOS_INLINE_FUNCTION Relation relation_of_positions(std::int64_t qmin, std::int64_t qmax, std::int64_t kmin,
                                                        std::int64_t kmax) const {
    if (kind == MaskKind::None && is_dense()) return Relation::Full;
    const auto first = key_range(qmin), last = key_range(qmax);
    if (kmax < first.first || kmin >= last.second) return Relation::Skip;
    return (kmin >= last.first && kmax < first.second) ? Relation::Full : Relation::Partial;
  }
  /// Query rows [i0, i1) against key rows [j0, j1), both non-empty.
  KOKKOS_INLINE_FUNCTION Relation relation(std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) const {
    return relation_of_positions(q(i0), q(i1 - 1), k(j0), k(j1 - 1));
  }

  /// The key rows (of nk) that some query at a position in [qmin, qmax] may see:
  /// a kernel walks their tiles (RowRange::tiles) and skips the rest.
  KOKKOS_INLINE_FUNCTION RowRange key_rows(std::int64_t qmin, std::int64_t qmax, int nk) const {
    if (kind == MaskKind::None && is_dense()) return {0, nk};
    return rows_between(k, key_range(qmin).first, key_range(qmax).second - 1, nk);
  }
  /// The query rows (of nq) that may see some key at a position in [kmin, kmax]:
  /// those whose key interval reaches kmin and starts by kmax.
  KOKKOS_INLINE_FUNCTION RowRange query_rows(std::int64_t kmin, std::int64_t kmax, int nq) const {
    if (kind == MaskKind::None && is_dense()) return {0, nq};
    std::int64_t lo = kmin - right_span(), hi = kmax + window.left;
    if (docs.any()) {
      const std::int64_t b = docs.bounds_of(kmin).first, e = docs.bounds_of(kmax).second - 1;
      lo = lo > b ? lo : b;
      hi = hi < e ? hi : e;
    }
    return rows_between(q, lo, hi, nq);
  }
  /// The key tiles of bn rows that query rows [i0, i1) visit (the tile loop's bounds).
  KOKKOS_INLINE_FUNCTION RowRange key_tiles(std::int64_t i0, std::int64_t i1, int nk, int bn) const {
    return key_rows(q(i0), q(i1 - 1), nk).tiles(bn);
  }

  /// Allowed pairs (i < nq, j < nk), in O(documents * log) time: the cost model
  /// needs it for Attention2D's cyclic blocks at N up to millions and P up to
  /// thousands, where summing row by row would dominate the ranking.
  std::int64_t allowed_pairs(std::int64_t nq, std::int64_t nk) const;

 private:
  /// Rows r (of n) with lo <= map(r) <= hi.
  KOKKOS_INLINE_FUNCTION static RowRange rows_between(PositionMap map, std::int64_t lo, std::int64_t hi, int n) {
    const std::int64_t first = Impl::ceil_div(lo - map.offset, map.stride);
    const std::int64_t last  = Impl::floor_div(hi - map.offset, map.stride) + 1;
    const auto clamp         = [n](std::int64_t x) { return int(x < 0 ? 0 : x > n ? n : x); };
    const int b = clamp(first), e = clamp(last);
    return b < e ? RowRange{b, e} : RowRange{e, e};
  }
};

namespace Impl {
/// The sum over rows i in [i0, i1) of the number of keys j < nk at a position
/// k(j) <= a * i + c, for a >= 0: rows where that bound lies below every key add
/// nothing, rows where it lies past the last key add nk, and the rows between
/// are one floor sum.
inline std::int64_t keys_at_most(PositionMap k, std::int64_t nk, std::int64_t i0, std::int64_t i1, std::int64_t a,
                                 std::int64_t c) {
  if (i1 <= i0 || nk == 0) return 0;
  const std::int64_t c0 = c - k.offset, top = (nk - 1) * k.stride;
  if (a == 0) return (i1 - i0) * (c0 < 0 ? 0 : c0 >= top ? nk : c0 / k.stride + 1);
  const auto clamp       = [](std::int64_t x, std::int64_t lo, std::int64_t hi) { return std::min(hi, std::max(lo, x)); };
  const std::int64_t ia  = clamp(ceil_div(-c0, a), i0, i1);       // first row whose bound reaches the first key
  const std::int64_t ib  = clamp(ceil_div(top - c0, a), ia, i1);  // first row whose bound reaches the last key
  std::int64_t total     = (i1 - ib) * nk;
  if (ib > ia) total += (ib - ia) + floor_sum(ib - ia, k.stride, a, a * ia + c0);
  return total;
}
}  // namespace Impl

inline std::int64_t Mask::allowed_pairs(std::int64_t nq, std::int64_t nk) const {
  DISTATTN_REQUIRE(nq >= 0 && nk >= 0, "DistAttn::Mask::allowed_pairs",
                   "row counts must be >= 0 (nq=" << nq << ", nk=" << nk << ")");
  DISTATTN_REQUIRE(q.stride >= 1 && k.stride >= 1, "DistAttn::Mask::allowed_pairs",
                   "strides must be >= 1 (query stride " << q.stride << ", key stride " << k.stride << ")");
  if (nq == 0 || nk == 0) return 0;
  if (kind == MaskKind::None && is_dense()) return nq * nk;
  // Within one document [b, e) the last key position p may see, min(p + R, e - 1),
  // and the first, max(p - L, b), are each linear in the row up to one break, so a
  // row's count (keys at most the last minus keys before the first) sums in four
  // pieces.
  const std::int64_t R = right_span(), L = window.left;
  const int d0 = docs.any() ? docs.of(q(0)) : 0, d1 = docs.any() ? docs.of(q(nq - 1)) : 0;
  const auto row_at = [&](std::int64_t p, std::int64_t lo, std::int64_t hi) {  // first row at position >= p
    return std::min(hi, std::max(lo, Impl::ceil_div(p - q.offset, q.stride)));
  };
  std::int64_t total = 0;
  for (int d = d0; d <= d1; ++d) {
    const std::int64_t b = d == 0 ? -kUnboundedSpan : docs.offsets[d];
    const std::int64_t e = !docs.any() || d == docs.count - 1 ? kUnboundedSpan : docs.offsets[d + 1];
    const std::int64_t r0 = row_at(b, 0, nq), r1 = row_at(e, r0, nq);
    const std::int64_t rh = row_at(e - R, r0, r1);  // from here p + R reaches past the document
    const std::int64_t rl = row_at(b + L, r0, r1);  // from here p - L is inside the document
    total += Impl::keys_at_most(k, nk, r0, rh, q.stride, q.offset + R) + Impl::keys_at_most(k, nk, rh, r1, 0, e - 1);
    total -= Impl::keys_at_most(k, nk, r0, rl, 0, b - 1) +
             Impl::keys_at_most(k, nk, rl, r1, q.stride, q.offset - L - 1);
  }
  return total;
}

}  // namespace DistAttn
