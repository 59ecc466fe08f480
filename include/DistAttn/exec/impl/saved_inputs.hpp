// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file exec/impl/saved_inputs.hpp
/// What lets a backward reuse what its forward derived from the inputs (Ulysses'
/// head-side q, k, v; Attention2D's K_t, V_t), and the rule that keeps that reuse
/// from ever giving a wrong gradient.
///
/// A caller may compute new data into the buffers of the last forward (C and
/// Fortran codes, selective recomputation, a caching allocator handing the same
/// address back), so the same data pointers prove nothing. The rule: backward
/// reuses only when every input has the same pointer, the same extents and the
/// same content fingerprint as in the forward, on every rank (the executor
/// agrees the vote). The fingerprint is one read of the inputs: the sum over
/// their 8-byte words (elements, for non-contiguous Views) of a 64-bit mix of
/// (bits, index). The mix is a bijection, so a change of any one word always
/// changes the sum; a change of several collides with probability about 2^-64. invalidate_saved_inputs() on every executor
/// drops the saved state outright.

#include <DistAttn/core/kokkos_compat.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace DistAttn::Impl {

/// splitmix64's finalizer: a bijection of 64-bit words.
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// Element `i` (row-major index) with bits `bits` as one fingerprint term.
KOKKOS_INLINE_FUNCTION std::uint64_t fingerprint_term(std::uint64_t bits, std::uint64_t i) {
  return mix64(bits ^ mix64(i + 0x9E3779B97F4A7C15ULL));
}

template <class T>
KOKKOS_INLINE_FUNCTION std::uint64_t element_bits(const T& x) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t), "fingerprint: elements of at most 8 bytes");
  // Bytes, not memcpy: valid in device code on every backend (char may alias anything).
  const unsigned char* p = reinterpret_cast<const unsigned char*>(&x);
  std::uint64_t b        = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) b |= std::uint64_t(p[i]) << (8 * i);
  return b;
}

/// Element `i` (row-major order) of a rank-3 or rank-4 View of extents n[0..3]
/// (n[0] = 1 for rank 3).
template <class V>
KOKKOS_INLINE_FUNCTION const typename V::value_type& row_major_element(const V& v, std::uint64_t i,
                                                                       const std::uint64_t (&n)[4]) {
  const std::uint64_t d = i % n[3];
  i /= n[3];
  const std::uint64_t h = i % n[2];
  i /= n[2];
  if constexpr (V::rank == 3) {
    return v(i, h, d);
  } else {
    return v(i / n[1], i % n[1], h, d);
  }
}

/// Starts the fingerprint of the rank-3 or rank-4 View `v` into `out` on `exec`.
/// Contiguous data (the common case) is hashed as 8-byte words in memory order: a
/// pass as fast as a copy's read. Anything else element by element in row-major
/// order. A View hashes the same way each time; SavedInputs also compares the
/// strides, so two ways of hashing never meet.
template <class Exec, class V, class Out>
void fingerprint_async(const Exec& exec, const V& v, const Out& out) {
  static_assert(V::rank == 3 || V::rank == 4, "fingerprint: rank-3 or rank-4 Views");
  const std::size_t bytes = v.size() * sizeof(typename V::value_type);
  if (v.span() == v.size() && v.span_is_contiguous() && bytes % 8 == 0 &&
      reinterpret_cast<std::uintptr_t>(v.data()) % 8 == 0) {
    const std::uint64_t* words = reinterpret_cast<const std::uint64_t*>(v.data());
    Kokkos::parallel_reduce(
        "DistAttn::saved_inputs.fingerprint",
        Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(exec, 0, std::int64_t(bytes / 8)),
        KOKKOS_LAMBDA(std::int64_t i, std::uint64_t& acc) { acc += fingerprint_term(words[i], std::uint64_t(i)); },
        Kokkos::Sum<std::uint64_t, typename Exec::memory_space>(out));
    return;
  }
  constexpr int o = 4 - int(V::rank);
  std::uint64_t n[4] = {1, 1, 1, 1};
  for (int r = 0; r < int(V::rank); ++r) n[o + r] = v.extent(r);
  const std::uint64_t total = n[0] * n[1] * n[2] * n[3];
  Kokkos::parallel_reduce(
      "DistAttn::saved_inputs.fingerprint",
      Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(exec, 0, std::int64_t(total)),
      KOKKOS_LAMBDA(std::int64_t i, std::uint64_t& acc) {
        acc += fingerprint_term(element_bits(row_major_element(v, std::uint64_t(i), n)), std::uint64_t(i));
      },
      Kokkos::Sum<std::uint64_t, typename Exec::memory_space>(out));
}

/// The inputs a forward saw (pointers, extents, strides, fingerprints), for its backward.
template <class Exec>
class SavedInputs {
 public:
  using Mem = typename Exec::memory_space;

  /// Bytes of the fingerprints' buffer, allocated by the first remember() of
  /// `inputs` Views (what a pass allocates outside the executor's memory plan).
  static constexpr std::size_t buffer_bytes(int inputs) { return 2 * std::size_t(inputs) * sizeof(std::uint64_t); }

  /// Records `v...` as what the forward derived its saved state from. The
  /// fingerprints are computed on `exec` without a host wait.
  template <class... V>
  void remember(const Exec& exec, const V&... v) {
    constexpr std::size_t n = sizeof...(V);
    if (fp_.extent(0) != 2 * n) fp_ = Kokkos::View<std::uint64_t*, Mem>("DistAttn::saved_inputs.fingerprints", 2 * n);
    ids_ = {identity(v)...};
    compute(exec, 0, v...);
    valid_ = true;
  }
  /// True if `v...` are the remembered inputs with unchanged content (waits for
  /// `exec`). Only this rank's answer: executors agree on it before acting.
  template <class... V>
  bool matches(const Exec& exec, const V&... v) {
    constexpr std::size_t n = sizeof...(V);
    if (!valid_ || ids_ != std::vector<Identity>{identity(v)...}) return false;
    compute(exec, n, v...);
    std::vector<std::uint64_t> h(2 * n);
    Kokkos::deep_copy(exec, Kokkos::View<std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(h.data(), 2 * n),
                      fp_);
    exec.fence();
    return std::equal(h.begin(), h.begin() + n, h.begin() + n);
  }
  void clear() { valid_ = false; }
  bool valid() const { return valid_; }

 private:
  struct Identity {
    const void* data;
    std::size_t extents[4], strides[4];
    bool operator==(const Identity& o) const {
      return data == o.data && std::equal(extents, extents + 4, o.extents) &&
             std::equal(strides, strides + 4, o.strides);
    }
    bool operator!=(const Identity& o) const { return !(*this == o); }
  };
  template <class V>
  static Identity identity(const V& v) {
    Identity id{static_cast<const void*>(v.data()), {0, 0, 0, 0}, {0, 0, 0, 0}};
    for (int r = 0; r < int(V::rank); ++r) {
      id.extents[r] = v.extent(r);
      id.strides[r] = std::size_t(v.stride(r));
    }
    return id;
  }
  template <class... V>
  void compute(const Exec& exec, std::size_t first, const V&... v) {
    std::size_t i = first;
    (fingerprint_async(exec, v, typename Kokkos::Sum<std::uint64_t, Mem>::result_view_type(fp_.data() + i++)), ...);
  }

  std::vector<Identity> ids_;
  Kokkos::View<std::uint64_t*, Mem> fp_;
  bool valid_ = false;
};

}  // namespace DistAttn::Impl
