#pragma once
/// @file causal_pairs.hpp
/// Exact number of (query, key) pairs a causal block keeps, for query and key
/// rows at arithmetic-progression positions (PositionMap), in O(log) time: the
/// cost model needs it for Attention2D's cyclic blocks at N up to millions and
/// P up to thousands, where summing row by row would dominate the ranking.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace DistAttn {

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
inline std::int64_t ceil_div(std::int64_t x, std::int64_t y) { return x >= 0 ? (x + y - 1) / y : -((-x) / y); }
}  // namespace Impl

/// Pairs (i < nq, j < nk) with key position k(j) <= query position q(i).
inline std::int64_t causal_pairs(PositionMap q, std::int64_t nq, PositionMap k, std::int64_t nk) {
  DISTATTN_REQUIRE(nq >= 0 && nk >= 0, "DistAttn::causal_pairs",
                   "row counts must be >= 0 (nq=" << nq << ", nk=" << nk << ")");
  DISTATTN_REQUIRE(q.stride >= 1 && k.stride >= 1, "DistAttn::causal_pairs",
                   "strides must be >= 1 (query stride " << q.stride << ", key stride " << k.stride << ")");
  if (nq == 0 || nk == 0) return 0;
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

/// Pairs a kernel that computes whole t x t tiles spends on the block: every
/// tile counts t * t pairs, partial last tiles included, and a causal block's
/// query tile visits the key tiles up to the last one that any of its rows keeps
/// (the portable kernels' loops, impl/attn_fwd_portable.hpp). O(nq / t).
inline std::int64_t tile_pairs(PositionMap q, std::int64_t nq, PositionMap k, std::int64_t nk, bool causal,
                               std::int64_t t) {
  DISTATTN_REQUIRE(nq >= 0 && nk >= 0 && t >= 1, "DistAttn::tile_pairs",
                   "row counts must be >= 0 and the tile >= 1 (nq=" << nq << ", nk=" << nk << ", t=" << t << ")");
  DISTATTN_REQUIRE(q.stride >= 1 && k.stride >= 1, "DistAttn::tile_pairs",
                   "strides must be >= 1 (query stride " << q.stride << ", key stride " << k.stride << ")");
  if (nq == 0 || nk == 0) return 0;
  const std::int64_t nqt = (nq + t - 1) / t, nkt = (nk + t - 1) / t;
  if (!causal) return nqt * nkt * t * t;
  std::int64_t tiles = 0;
  for (std::int64_t i = 0; i < nqt; ++i) {
    const std::int64_t qmax = q(std::min((i + 1) * t, nq) - 1);
    if (qmax >= k.offset) tiles += std::min(nkt, (qmax - k.offset) / (k.stride * t) + 1);
  }
  return tiles * t * t;
}

}  // namespace DistAttn
