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
/// ceil(x / y) for y > 0 and any sign of x.
KOKKOS_INLINE_FUNCTION constexpr std::int64_t ceil_div(std::int64_t x, std::int64_t y) {
  return x >= 0 ? (x + y - 1) / y : -((-x) / y);
}
}  // namespace Impl

/// Causal allows (i, j) iff q(i) >= k(j); None allows every pair.
struct Mask {
  MaskKind kind = MaskKind::None;
  PositionMap q{};
  PositionMap k{};

  static Mask none() { return Mask{}; }
  static Mask causal(PositionMap qpos = {}, PositionMap kpos = {}) {
    return Mask{MaskKind::Causal, qpos, kpos};
  }
  bool is_causal() const { return kind == MaskKind::Causal; }

  KOKKOS_INLINE_FUNCTION bool allowed(std::int64_t i, std::int64_t j) const {
    return kind == MaskKind::None || q(i) >= k(j);
  }

  /// Queries at positions [qmin, qmax] against keys at positions [kmin, kmax].
  KOKKOS_INLINE_FUNCTION Relation relation_of_positions(std::int64_t qmin, std::int64_t qmax, std::int64_t kmin,
                                                        std::int64_t kmax) const {
    if (kind == MaskKind::None) return Relation::Full;
    if (qmax < kmin) return Relation::Skip;
    return qmin >= kmax ? Relation::Full : Relation::Partial;
  }
  /// Query rows [i0, i1) against key rows [j0, j1), both non-empty.
  KOKKOS_INLINE_FUNCTION Relation relation(std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) const {
    return relation_of_positions(q(i0), q(i1 - 1), k(j0), k(j1 - 1));
  }

  /// The key rows (of nk) that some query at a position in [qmin, qmax] may see:
  /// a kernel walks their tiles (RowRange::tiles) and skips the rest.
  KOKKOS_INLINE_FUNCTION RowRange key_rows(std::int64_t qmin, std::int64_t qmax, int nk) const {
    (void)qmin;
    if (kind == MaskKind::None) return {0, nk};
    if (qmax < k.offset) return {0, 0};
    const std::int64_t last = (qmax - k.offset) / k.stride + 1;
    return {0, int(last < nk ? last : nk)};
  }
  /// The query rows (of nq) that may see some key at a position in [kmin, kmax].
  KOKKOS_INLINE_FUNCTION RowRange query_rows(std::int64_t kmin, std::int64_t kmax, int nq) const {
    (void)kmax;
    if (kind == MaskKind::None) return {0, nq};
    const std::int64_t first = Impl::ceil_div(kmin - q.offset, q.stride);
    return {int(first < 0 ? 0 : first < nq ? first : nq), nq};
  }

  /// Allowed pairs (i < nq, j < nk), in O(log) time: the cost model needs it for
  /// Attention2D's cyclic blocks at N up to millions and P up to thousands, where
  /// summing row by row would dominate the ranking.
  std::int64_t allowed_pairs(std::int64_t nq, std::int64_t nk) const {
    DISTATTN_REQUIRE(nq >= 0 && nk >= 0, "DistAttn::Mask::allowed_pairs",
                     "row counts must be >= 0 (nq=" << nq << ", nk=" << nk << ")");
    DISTATTN_REQUIRE(q.stride >= 1 && k.stride >= 1, "DistAttn::Mask::allowed_pairs",
                     "strides must be >= 1 (query stride " << q.stride << ", key stride " << k.stride << ")");
    if (nq == 0 || nk == 0) return 0;
    if (kind == MaskKind::None) return nq * nk;
    // Row i keeps floor((q(i) - k.offset) / k.stride) + 1 keys, clamped to [0, nk];
    // the count grows with i, so rows split into none / some / all ranges.
    const std::int64_t i0 = std::min(nq, std::max<std::int64_t>(0, Impl::ceil_div(k.offset - q.offset, q.stride)));
    const std::int64_t i1 =
        std::min(nq, std::max(i0, Impl::ceil_div((nk - 1) * k.stride + k.offset - q.offset, q.stride)));
    std::int64_t total = (nq - i1) * nk;
    if (i1 > i0) {
      const std::int64_t b = q.stride * i0 + q.offset - k.offset;  // >= 0 by the choice of i0
      total += Impl::floor_sum(i1 - i0, k.stride, q.stride, b) + (i1 - i0);
    }
    return total;
  }
};

}  // namespace DistAttn
