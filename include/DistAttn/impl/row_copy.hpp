// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/row_copy.hpp
/// One loop shape for the executors' reorder kernels (Ulysses' packing, the
/// Attention2D interleaves, the cyclic exchange): a tensor moved row by row, a row
/// being the head_dim elements of one (batch, token, head).
///
/// Why a shared shape: a flat index over every element pays four 64-bit
/// divisions per element to find its (b, token, head, d), which on CPU ranks cost
/// more than the attention itself (PERFORMANCE.md, "Executor reorders on CPU ranks"), and a
/// loop with one thread per row makes a GPU warp's stores land on 32 rows at once.
/// Here a row's indices are worked out once (RowFn::row), and its elements are
/// the inner loop: vector lanes on a GPU (a warp's 32 lanes on 32 consecutive
/// elements), a plain loop on host spaces.
///
/// RowFn provides
///   KOKKOS_INLINE_FUNCTION Row row(long r) const;            // r < rows
///   KOKKOS_INLINE_FUNCTION void operator()(const Row&, long e) const;   // e < width

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <climits>
#include <cstddef>
#include <type_traits>

namespace DistAttn::Impl {

/// Device mapping: rows_per_team rows per team, one row per thread, width over
/// vector lanes (a warp on CUDA).
inline constexpr int kRowCopyRowsPerTeam = 8;
inline constexpr int kRowCopyLanes       = 32;

template <class Exec, class RowFn>
struct RowLoop {
  using member_type = typename Kokkos::TeamPolicy<Exec>::member_type;
  RowFn f;
  long rows, width;
  KOKKOS_INLINE_FUNCTION void operator()(const member_type& t) const {
    const long r0 = long(t.league_rank()) * kRowCopyRowsPerTeam;
    const long nr = rows - r0 < kRowCopyRowsPerTeam ? rows - r0 : long(kRowCopyRowsPerTeam);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nr), [&](const long i) {
      const auto row = f.row(r0 + i);
      Kokkos::parallel_for(Kokkos::ThreadVectorRange(t, width), [&](const long e) { f(row, e); });
    });
  }
};

template <class Exec, class RowFn>
struct RowLoopHost {
  RowFn f;
  long width;
  KOKKOS_INLINE_FUNCTION void operator()(const long r) const {
    const auto row = f.row(r);
    for (long e = 0; e < width; ++e) f(row, e);
  }
};

/// f(f.row(r), e) for every r < rows and e < width, on `exec`.
template <class Exec, class RowFn>
void for_each_row(const Exec& exec, const char* label, long rows, long width, const RowFn& f) {
  if (rows <= 0 || width <= 0) return;
  if constexpr (compat::host_accessible_v<Exec>) {
    Kokkos::parallel_for(label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, rows),
                         RowLoopHost<Exec, RowFn>{f, width});
  } else {
    const long league = (rows + kRowCopyRowsPerTeam - 1) / kRowCopyRowsPerTeam;
    DISTATTN_REQUIRE(league <= long(INT_MAX), label, rows << " rows exceed one launch's " << INT_MAX << " teams");
    Kokkos::parallel_for(label,
                         Kokkos::TeamPolicy<Exec>(exec, int(league), kRowCopyRowsPerTeam, kRowCopyLanes),
                         RowLoop<Exec, RowFn>{f, rows, width});
  }
}

/// Where a tensor row and a flat buffer's row meet: buffer element e, tensor
/// row (b, row, h) of a rank-4 [B, S, H, D] view; row < 0 marks a padding row.
struct RowPair {
  std::size_t e;
  long b, row, h;
};

/// A raw pointer as a flat buffer (the interleaves address blocks inside one).
template <class T>
struct FlatPtr {
  T* p;
  KOKKOS_INLINE_FUNCTION T& operator()(std::size_t i) const { return p[i]; }
};

/// Copies every row Map gives between the tensor v and the buffer: ToBuffer
/// writes the buffer (zeros for padding rows), otherwise the tensor (padding
/// rows skipped). Map: KOKKOS_INLINE_FUNCTION RowPair operator()(long r) const.
template <bool ToBuffer, class V, class Buf, class Map>
struct RowMove {
  V v;
  Buf buf;
  Map map;
  KOKKOS_INLINE_FUNCTION RowPair row(long r) const { return map(r); }
  KOKKOS_INLINE_FUNCTION void operator()(const RowPair& w, long d) const {
    if constexpr (ToBuffer) {
      using BT = std::remove_reference_t<decltype(buf(std::size_t(0)))>;
      buf(w.e + std::size_t(d)) = w.row >= 0 ? BT(v(w.b, w.row, w.h, d)) : BT(0);
    } else if (w.row >= 0) {
      v(w.b, w.row, w.h, d) = typename V::non_const_value_type(buf(w.e + std::size_t(d)));
    }
  }
};

/// RowMove over rows r < rows, each v.extent(3) elements long.
template <bool ToBuffer, class Exec, class V, class Buf, class Map>
void move_rows(const Exec& exec, const char* label, long rows, const V& v, const Buf& buf, const Map& map) {
  for_each_row(exec, label, rows, long(v.extent(3)), RowMove<ToBuffer, V, Buf, Map>{v, buf, map});
}

}  // namespace DistAttn::Impl
