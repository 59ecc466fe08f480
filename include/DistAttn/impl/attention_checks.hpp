// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/attention_checks.hpp
/// Argument checks of the building block (attention.hpp), shared by the
/// distributed executors' entry checks: each throws InvalidArgument naming the
/// function and the argument. Not part of the API.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/attn_rowwise.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>

namespace DistAttn {

namespace Impl {

template <class Exec, class V>
void require_accessible(const char* where, const char* arg) {
  DISTATTN_REQUIRE((Kokkos::SpaceAccessibility<Exec, typename V::memory_space>::accessible), where,
                   "argument '" << arg << "' lives in memory space " << V::memory_space::name()
                                << ", which execution space " << Exec::name() << " cannot access");
}

/// A tensor of `extents` (row-major) that this rank would allocate, against what
/// this Kokkos can allocate whole (compat::layout_right_span_exact).
template <std::size_t R>
void check_view_extents(const char* where, const char* name, const std::array<std::size_t, R>& extents) {
  if (compat::layout_right_span_exact(extents)) return;
  std::ostringstream os;
  std::size_t n = 1;
  for (std::size_t i = 0; i < R; ++i) {
    os << (i ? ", " : "[") << extents[i];
    n *= extents[i];
  }
  DISTATTN_REQUIRE(false, where,
                   "'" << name << "' of extents " << os.str() << "] (" << n
                       << " elements) cannot be allocated whole by this Kokkos (Kokkos 3.4 allocates 0 bytes for a "
                          "View of rank 3 or more whose element count is a multiple of 2^32); change one extent, "
                          "e.g. the tokens per rank");
}

/// A View whose memory does not cover its elements (span below size): what
/// Kokkos 3.4 makes of a tensor of a multiple of 2^32 elements. Writing to it
/// would land past its allocation.
template <class V>
void require_whole(const char* where, const char* arg, const V& v) {
  DISTATTN_REQUIRE(v.size() == 0 || v.span() >= v.size(), where,
                   "argument '" << arg << "' has " << v.size() << " elements but its View spans " << v.span()
                                << " (Kokkos 3.4 allocates 0 bytes for a View of rank 3 or more whose element "
                                   "count is a multiple of 2^32); change one extent, e.g. the tokens per rank");
}

template <class Exec, class QV, class KV, class VV>
void check_qkv(const char* where, const QV& q, const KV& k, const VV& v, const AttnOptions& opts) {
  static_assert(QV::rank == 4 && KV::rank == 4 && VV::rank == 4,
                "q, k, v must be rank-4 Views [batch, seq, heads, head_dim]");
  require_accessible<Exec, QV>(where, "q");
  require_accessible<Exec, KV>(where, "k");
  require_accessible<Exec, VV>(where, "v");
  require_whole(where, "q", q);
  require_whole(where, "k", k);
  require_whole(where, "v", v);
  DISTATTN_REQUIRE(k.extent(0) == q.extent(0), where,
                   "k batch " << k.extent(0) << " != q batch " << q.extent(0));
  for (int dim = 0; dim < 4; ++dim)
    DISTATTN_REQUIRE(v.extent(dim) == k.extent(dim), where,
                     "'v' extent(" << dim << ")=" << v.extent(dim) << " != 'k' extent(" << dim << ")=" << k.extent(dim));
  DISTATTN_REQUIRE(k.extent(3) == q.extent(3), where,
                   "head_dim mismatch: q has " << q.extent(3) << ", k has " << k.extent(3));
  DISTATTN_REQUIRE(q.extent(3) > 0, where, "head_dim must be positive");
  DISTATTN_REQUIRE(k.extent(2) > 0 || q.extent(2) == 0, where, "k has zero kv heads");
  DISTATTN_REQUIRE(k.extent(2) == 0 || q.extent(2) % k.extent(2) == 0, where,
                   "q heads (" << q.extent(2) << ") not divisible by kv heads (" << k.extent(2) << ")");
  const double sc = resolved_scale(opts, int(q.extent(3)));
  DISTATTN_REQUIRE(std::isfinite(sc) && sc != 0.0, where, "scale must be finite and non-zero, got " << opts.scale);
  DISTATTN_REQUIRE(opts.mask.kind == MaskKind::None || (opts.mask.q.stride > 0 && opts.mask.k.stride > 0), where,
                   "mask position strides must be positive (q.stride=" << opts.mask.q.stride
                                                                    << ", k.stride=" << opts.mask.k.stride << ")");
}

template <class Exec, class V>
void check_finite(const Exec& exec, const char* where, const char* arg, const V& x) {
  const long bad = count_nonfinite4(exec, x);
  DISTATTN_REQUIRE(bad == 0, where, "argument '" << arg << "' contains " << bad << " NaN/Inf values");
}

/// The mask's document offsets (in Exec's memory space) start at 0 and do not
/// decrease: unsorted offsets would make the document search return wrong
/// documents, a silent wrong answer. One small copy to the host, so only where
/// the inputs are scanned too (AttnOptions::check_finite).
template <class Exec>
void check_documents(const char* where, const Mask& mask) {
  if (!mask.docs.any()) return;
  using Offsets = Kokkos::View<std::int64_t*, typename Exec::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const auto h = Kokkos::create_mirror_view_and_copy(
      Kokkos::HostSpace(), Offsets(const_cast<std::int64_t*>(mask.docs.offsets), std::size_t(mask.docs.count) + 1));
  DISTATTN_REQUIRE(h(0) == 0, where, "mask documents: the first offset must be 0, got " << h(0));
  for (int d = 1; d <= mask.docs.count; ++d)
    DISTATTN_REQUIRE(h(d) >= h(d - 1), where,
                     "mask documents: offsets must not decrease, got " << h(d - 1) << " then " << h(d) << " at " << d);
}

template <class V, class W>
void check_same4(const char* where, const char* a, const V& x, const char* b, const W& y) {
  require_whole(where, b, y);
  for (int dim = 0; dim < 4; ++dim)
    DISTATTN_REQUIRE(x.extent(dim) == y.extent(dim), where,
                     "'" << b << "' extent(" << dim << ")=" << y.extent(dim) << " does not match '" << a
                         << "' extent(" << dim << ")=" << x.extent(dim));
}

template <class V>
void check_stats(const char* where, const char* arg, const V& s, std::size_t B, std::size_t H, std::size_t S) {
  static_assert(V::rank == 3, "row statistics must be rank-3 Views [batch, heads, seq]");
  require_whole(where, arg, s);
  DISTATTN_REQUIRE(s.extent(0) == B && s.extent(1) == H && s.extent(2) == S, where,
                   "'" << arg << "' must be [batch=" << B << ", heads=" << H << ", seq=" << S << "], got ["
                       << s.extent(0) << ", " << s.extent(1) << ", " << s.extent(2) << "]");
}

template <class Exec, class QV, class KV, class VV>
void check_finite_qkv(const Exec& exec, const char* where, const QV& q, const KV& k, const VV& v) {
  check_finite(exec, where, "q", q);
  check_finite(exec, where, "k", k);
  check_finite(exec, where, "v", v);
}

/// Shapes of a forward call's o and lse against q, and (when `scan`) NaN/Inf in
/// q, k, v: shared by the distributed executors' entry checks.
template <class Exec, class QV, class KV, class VV, class OV, class LV>
void check_fwd_args(const Exec& exec, const char* where, const QV& q, const KV& k, const VV& v, const OV& o,
                    const LV& lse, bool scan) {
  check_same4(where, "q", q, "o", o);
  check_stats(where, "lse", lse, q.extent(0), q.extent(2), q.extent(1));
  if (scan) check_finite_qkv(exec, where, q, k, v);
}

/// Shapes of a backward call's tensors against q and k, and (when `scan`) NaN/Inf
/// in its inputs: shared by attention_bwd and the distributed executors.
template <class Exec, class QV, class KV, class VV, class OV, class DOV, class LV, class DQV, class DKV, class DVV>
void check_bwd_args(const Exec& exec, const char* where, const QV& q, const KV& k, const VV& v, const OV& o,
                    const DOV& dout, const LV& lse, const DQV& dq, const DKV& dk, const DVV& dv, bool scan) {
  check_same4(where, "q", q, "o", o);
  check_same4(where, "q", q, "dout", dout);
  check_same4(where, "q", q, "dq", dq);
  check_same4(where, "k", k, "dk", dk);
  check_same4(where, "k", k, "dv", dv);
  check_stats(where, "lse", lse, q.extent(0), q.extent(2), q.extent(1));
  if (scan) {
    check_finite_qkv(exec, where, q, k, v);
    check_finite(exec, where, "dout", dout);
  }
}

template <class Exec>
void check_path(const char* where, const AttnOptions& opts, bool tuned_available) {
  DISTATTN_REQUIRE(opts.path != KernelPath::Cuda || tuned_available, where,
                   "KernelPath::Cuda requested, but no CUDA-tuned kernel exists for this execution space, "
                   "element type and head_dim");
}

}  // namespace Impl

}  // namespace DistAttn
