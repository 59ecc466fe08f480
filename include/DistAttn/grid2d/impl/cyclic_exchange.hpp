// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d/impl/cyclic_exchange.hpp
/// The one all_to_all behind to_cyclic/from_cyclic (grid2d/cyclic_layout.hpp):
/// packing into equal per-peer blocks of ceil(c / P) rows, the exchange, and the
/// row maps of the two layouts. Not part of the API.

#include <DistAttn/comm.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/impl/row_copy.hpp>

#include <cstddef>

namespace DistAttn {

namespace Impl {

/// Tokens of contiguous chunk x congruent to p mod P: x c + j0 + k P for k < count.
struct CyclicRun {
  long j0    = 0;
  long count = 0;
};
KOKKOS_INLINE_FUNCTION CyclicRun cyclic_run(long x, long p, long c, long P) {
  CyclicRun run;
  run.j0    = ((p - x * c) % P + P) % P;
  run.count = run.j0 < c ? (c - 1 - run.j0) / P + 1 : 0;
  return run;
}

template <class V>
constexpr int token_axis() {
  static_assert(int(V::rank) == 4 || int(V::rank) == 3,
                "to_cyclic/from_cyclic take [B, n, X, D] tensors or [B, H, n] row statistics");
  return int(V::rank) == 4 ? 1 : 2;
}

/// Block row r of a rank-4 cyclic (un)pack ([P][B][m][X] rows of D): the tensor
/// row row_of(peer, k) (-1: padding).
template <class RowOf>
struct CyclicRows {
  RowOf row_of;
  long B, m, X, D;
  KOKKOS_INLINE_FUNCTION RowPair operator()(long r) const {
    const long x = r % X, k = (r / X) % m, b = (r / (X * m)) % B, peer = r / (X * m * B);
    return {std::size_t(r * D), b, row_of(peer, k), x};
  }
};

/// Packs `src` into `buf` blocks: block `peer` row k <- src row src_row(peer, k),
/// rows k >= count(peer) zero. Rank-4: block = [B][m][X][D]; rank-3: [B][H][m].
template <class Exec, class SrcV, class Buf, class RowOf>
void cyclic_pack(const Exec& exec, const SrcV& src, const Buf& buf, long m, long P, RowOf row_of) {
  using T = typename Buf::non_const_value_type;
  if constexpr (int(SrcV::rank) == 4) {
    const long B = long(src.extent(0)), X = long(src.extent(2)), D = long(src.extent(3));
    move_rows<true>(exec, "DistAttn::cyclic_pack", P * B * m * X, src, buf, CyclicRows<RowOf>{row_of, B, m, X, D});
  } else {
    const long B = long(src.extent(0)), H = long(src.extent(1));
    Kokkos::parallel_for(
        "DistAttn::cyclic_pack", Kokkos::RangePolicy<Exec>(exec, 0, P * B * H), KOKKOS_LAMBDA(long idx) {
          const long h = idx % H, b = (idx / H) % B, peer = idx / (H * B);
          T* o         = buf.data() + ((peer * B + b) * H + h) * m;
          for (long k = 0; k < m; ++k) {
            const long row = row_of(peer, k);
            o[k]           = row >= 0 ? T(src(b, h, row)) : T(0);
          }
        });
  }
}

/// Inverse of cyclic_pack: dst row dst_row(peer, k) <- block `peer` row k (rows
/// with dst_row < 0 are padding).
template <class Exec, class Buf, class DstV, class RowOf>
void cyclic_unpack(const Exec& exec, const Buf& buf, const DstV& dst, long m, long P, RowOf row_of) {
  using DT = typename DstV::non_const_value_type;
  if constexpr (int(DstV::rank) == 4) {
    const long B = long(dst.extent(0)), X = long(dst.extent(2)), D = long(dst.extent(3));
    move_rows<false>(exec, "DistAttn::cyclic_unpack", P * B * m * X, dst, buf, CyclicRows<RowOf>{row_of, B, m, X, D});
  } else {
    const long B = long(dst.extent(0)), H = long(dst.extent(1));
    Kokkos::parallel_for(
        "DistAttn::cyclic_unpack", Kokkos::RangePolicy<Exec>(exec, 0, P * B * H), KOKKOS_LAMBDA(long idx) {
          const long h = idx % H, b = (idx / H) % B, peer = idx / (H * B);
          const auto* s = buf.data() + ((peer * B + b) * H + h) * m;
          for (long k = 0; k < m; ++k) {
            const long row = row_of(peer, k);
            if (row >= 0) dst(b, h, row) = DT(s[k]);
          }
        });
  }
}

// Row maps (functors, so they work in device code under every Kokkos version).
/// Contiguous rank x: block for peer p row k is chunk row j0 + k P.
struct ContiguousRowOf {
  long x, c, P;
  KOKKOS_INLINE_FUNCTION long operator()(long p, long k) const {
    const CyclicRun run = cyclic_run(x, p, c, P);
    return k < run.count ? run.j0 + k * P : -1;
  }
};
/// Cyclic rank p: block for contiguous peer x row k is cyclic row (x c + j0 + k P - p) / P.
struct CyclicRowOf {
  long p, c, P;
  KOKKOS_INLINE_FUNCTION long operator()(long x, long k) const {
    const CyclicRun run = cyclic_run(x, p, c, P);
    return k < run.count ? (x * c + run.j0 + k * P - p) / P : -1;
  }
};

template <class Exec, class CommSpace, class SrcV, class DstV, class SrcRowOf, class DstRowOf>
void cyclic_exchange(Communicator<CommSpace, Exec>& comm, const SrcV& src, const DstV& dst, SrcRowOf src_row,
                     DstRowOf dst_row, const char* where) {
  static_assert(int(SrcV::rank) == int(DstV::rank), "source and destination must have the same rank");
  constexpr int ax = token_axis<SrcV>();
  for (int d = 0; d < int(SrcV::rank); ++d)
    DISTATTN_REQUIRE(src.extent(d) == dst.extent(d), where,
                     "source extent(" << d << ")=" << src.extent(d) << " != destination extent(" << d
                                      << ")=" << dst.extent(d));
  using T     = typename SrcV::non_const_value_type;
  using Mem   = typename Exec::memory_space;
  const Exec& exec = comm.exec();
  const long P = comm.size(), c = long(src.extent(ax));
  const long m = (c + P - 1) / P;
  std::size_t per_row = 1;
  for (int d = 0; d < int(SrcV::rank); ++d)
    if (d != ax) per_row *= src.extent(d);
  Kokkos::View<T*, Mem> sbuf(Kokkos::view_alloc(Kokkos::WithoutInitializing, "DistAttn::cyclic.send"),
                             std::size_t(P * m) * per_row);
  Kokkos::View<T*, Mem> rbuf(Kokkos::view_alloc(Kokkos::WithoutInitializing, "DistAttn::cyclic.recv"),
                             std::size_t(P * m) * per_row);
  cyclic_pack(exec, src, sbuf, m, P, src_row);
  if (P > 1) {
    auto req = all_to_all(comm, sbuf, rbuf);
    req.wait();
  } else {
    Kokkos::deep_copy(exec, rbuf, sbuf);
  }
  cyclic_unpack(exec, rbuf, dst, m, P, dst_row);
  compat::fence(exec, "DistAttn::cyclic_exchange: done");
}

}  // namespace Impl

}  // namespace DistAttn
