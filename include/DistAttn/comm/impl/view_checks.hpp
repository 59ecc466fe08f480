// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/impl/view_checks.hpp
/// Argument checks shared by the transports: a message is the bytes of one
/// contiguous View, so every View must be contiguous and its element type must
/// be copyable byte-wise.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <cstddef>
#include <sstream>
#include <string>
#include <type_traits>

namespace DistAttn::Impl {

template <class View>
using comm_value_t = std::remove_cv_t<typename View::value_type>;

/// Kokkos' 16-bit float wrappers are trivially copyable (defaulted copy), so
/// trivially_copyable covers float, double, integers, half_t, bhalf_t and PODs.
template <class View>
inline constexpr bool is_transferable_view_v =
    Kokkos::is_view<View>::value && std::is_trivially_copyable<comm_value_t<View>>::value;

template <class View>
std::string describe_view(const View& v) {
  std::ostringstream os;
  os << "View '" << v.label() << "' (rank " << unsigned(View::rank) << ", extents [";
  for (unsigned d = 0; d < unsigned(View::rank); ++d) os << (d ? ", " : "") << v.extent(d);
  os << "], strides [";
  for (unsigned d = 0; d < unsigned(View::rank); ++d) os << (d ? ", " : "") << v.stride(d);
  os << "])";
  return os.str();
}

/// Throws InvalidArgument unless the View's elements occupy one gap-free block.
template <class View>
void require_contiguous(const char* where, const char* arg, const View& v) {
  static_assert(Kokkos::is_view<View>::value, "DistAttn communication takes Kokkos::View arguments");
  static_assert(std::is_trivially_copyable<comm_value_t<View>>::value,
                "DistAttn communication: the View's value type must be trivially copyable");
  DISTATTN_REQUIRE(v.span_is_contiguous() && v.span() == v.size(), where,
                   "argument '" << arg << "' is not contiguous: " << describe_view(v)
                                << "; pass a contiguous View (copy a strided subview into one first)");
}

template <class View>
std::size_t byte_size(const View& v) {
  return v.size() * sizeof(comm_value_t<View>);
}

inline void require_peer(const char* where, const char* arg, int peer, int size) {
  DISTATTN_REQUIRE(peer >= 0 && peer < size, where,
                   "argument '" << arg << "' = " << peer << " is not a rank of this communicator (size "
                                << size << ")");
}

inline void require_tag(const char* where, int tag) {
  DISTATTN_REQUIRE(tag >= 0, where, "argument 'tag' = " << tag << " must be >= 0");
}

/// Collectives cannot work in place here: the send and receive Views must not overlap.
template <class A, class B>
void require_disjoint(const char* where, const A& a, const B& b) {
  const auto* a0 = reinterpret_cast<const unsigned char*>(a.data());
  const auto* b0 = reinterpret_cast<const unsigned char*>(b.data());
  const std::size_t na = byte_size(a), nb = byte_size(b);
  const bool overlap = na > 0 && nb > 0 && a0 < b0 + nb && b0 < a0 + na;
  DISTATTN_REQUIRE(!overlap, where,
                   "send View '" << a.label() << "' and receive View '" << b.label()
                                 << "' overlap; in-place operation is not supported");
}

}  // namespace DistAttn::Impl
