// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The mask of AttnMaskParams (attn_params.hpp) on the device, as admissible local key
// ranges: core/mask.hpp's Mask::key_range and query_rows, translated from positions
// to row indices (that header needs Kokkos, which the kernels do not see). For every
// query row the admissible keys are one interval [lo, hi) of local rows, and both
// ends are non-decreasing in the row: a tile loop walks the key tiles of
// [lo(first row), hi(last row)), and a tile [k0, k0 + BN) needs no per-element test
// for rows [a, b] when k0 >= lo(b) and k0 + BN <= hi(a).

#include "attn_mma.cuh"

#include <DistAttn/impl/cuda/attn_params.hpp>

#include <cstdint>

namespace DistAttn::Impl::cuda::detail {

/// Admissible local key rows [lo, hi) of one query row; empty when lo >= hi.
struct KeyRange {
  int lo, hi;
};

/// ceil(x / y) for y > 0 and any sign of x.
__device__ __forceinline__ std::int64_t ceil_div_signed(std::int64_t x, std::int64_t y) {
  return x >= 0 ? (x + y - 1) / y : -((-x) / y);
}

/// Local rows r (of n) with map(r) >= pos, as the first such row: ceil((pos - off) /
/// stride), clamped to [0, n].
__device__ __forceinline__ int first_row_at(std::int64_t pos, std::int64_t off, std::int64_t stride, int n) {
  const std::int64_t r = ceil_div_signed(pos - off, stride);
  return r < 0 ? 0 : r > std::int64_t(n) ? n : int(r);
}

/// [first position, one past the last) of the document holding position p
/// (Documents::bounds_of: one binary search; the first and the last document are
/// open on their outer side).
__device__ __forceinline__ void doc_bounds(const AttnMaskParams& mk, std::int64_t p, std::int64_t& b,
                                           std::int64_t& e) {
  int lo = 0, hi = mk.doc_count - 1;  // the last d with offsets[d] <= p, or 0
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (__ldg(mk.doc_offsets + mid) <= p) lo = mid;
    else hi = mid - 1;
  }
  b = lo == 0 ? -kAttnUnboundedSpan : __ldg(mk.doc_offsets + lo);
  e = lo == mk.doc_count - 1 ? kAttnUnboundedSpan : __ldg(mk.doc_offsets + lo + 1);
}

/// Admissible key rows of query row i, clamped to [0, seqlen_k]. A dense mask gives
/// [0, row_limit): the same integers as the kernels computed before windows and
/// documents, so their dense results stay bit for bit.
__device__ __forceinline__ KeyRange row_key_range(const AttnMaskParams& mk, int seqlen_k, int i) {
  if (mk.dense())
    return {0, row_limit(mk.causal, mk.q_offset, mk.q_stride, mk.k_offset, mk.k_stride, seqlen_k, i)};
  const std::int64_t p = mk.q_offset + mk.q_stride * std::int64_t(i);
  std::int64_t plo = p - mk.window_left, phi = p + (mk.causal ? 0 : mk.window_right) + 1;
  if (mk.doc_count > 0) {
    std::int64_t b, e;
    doc_bounds(mk, p, b, e);
    plo = plo > b ? plo : b;
    phi = phi < e ? phi : e;
  }
  return {first_row_at(plo, mk.k_offset, mk.k_stride, seqlen_k),
          first_row_at(phi, mk.k_offset, mk.k_stride, seqlen_k)};
}

/// The query rows [begin, end) (of seqlen_q) that may see a key row in [j0, j1),
/// j0 < j1 <= seqlen_k (Mask::query_rows: two document searches, no search over
/// rows): a superset of the rows whose range meets [j0, j1), exact on positions.
__device__ __forceinline__ KeyRange query_rows_of_keys(const AttnMaskParams& mk, int seqlen_q, int j0, int j1) {
  const std::int64_t kmin = mk.k_offset + mk.k_stride * std::int64_t(j0);
  const std::int64_t kmax = mk.k_offset + mk.k_stride * std::int64_t(j1 - 1);
  // A query at position p sees keys up to p + right and down to p - left.
  std::int64_t lo = kmin - (mk.causal ? 0 : mk.window_right), hi = kmax + mk.window_left;
  if (mk.doc_count > 0) {
    std::int64_t b, e, b2, e2;
    doc_bounds(mk, kmin, b, e);
    doc_bounds(mk, kmax, b2, e2);
    lo = lo > b ? lo : b;
    hi = hi < e2 - 1 ? hi : e2 - 1;
  }
  return {first_row_at(lo, mk.q_offset, mk.q_stride, seqlen_q),
          first_row_at(hi + 1, mk.q_offset, mk.q_stride, seqlen_q)};
}

}  // namespace DistAttn::Impl::cuda::detail
