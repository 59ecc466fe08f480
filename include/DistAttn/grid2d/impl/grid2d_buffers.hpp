// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d/impl/grid2d_buffers.hpp
/// Workspace pieces and local reorder kernels of the Attention2D executor.
///
/// Gathered buffers (Qg, Kg and everything that travels with them) are kept in
/// POSITION order (docs/design/attention2d.md decision 2): local row a of Qg(r) is token r + a R, local row b
/// of Kg(c) is token c + b C, so one affine PositionMap describes each and a whole
/// gathered block is one building-block call. A rank-ordered all-gather delivers
/// shard-major blocks instead ("block j" = shard of grid column/row j, rows i);
/// `interleave_*` moves block j row i to position-order row j + i*nb and
/// `deinterleave_*` is the inverse (used to cut a position-ordered buffer into
/// the contiguous shards a reduce-scatter sends). `row_block` views one shard of a
/// position-ordered buffer in place as a LayoutStride View (stride nb rows).

#include <DistAttn/attention.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>
#include <DistAttn/impl/row_copy.hpp>

#include <cstddef>
#include <string>

namespace DistAttn::Impl {

template <class T, class Mem>
using Flat = Kokkos::View<T*, Mem>;
template <class T, class Mem>
using Strided4 = Kokkos::View<T****, Kokkos::LayoutStride, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// Two tensors of one message (K|V, q|dO, dK|dV) in one allocation: `a` is the
/// first half of `flat`, `b` the second; `flat` is what travels.
template <class T, class Mem>
struct FlatPair4 {
  Flat<T, Mem> flat;
  Tensor4<T, Mem> a, b;
};
/// Two row-statistics tensors of one message (LSE|Delta) in one allocation.
template <class T, class Mem>
struct FlatPair3 {
  Flat<T, Mem> flat;
  RowStats<T, Mem> a, b;
};
/// A partial forward state (acc, m, l) in one allocation, so a ring step is one message.
template <class Acc, class Mem>
struct FlatState {
  Flat<Acc, Mem> flat;
  AttnState<Acc, Mem> st;
};

/// Carves (or plans) a FlatPair4 of two [B, S, H, D] tensors: one buffer, so a pair is one message.
template <class Mem, class T>
void take_pair4(Carver<Mem>& c, FlatPair4<T, Mem>& p, const char* name, int B, int S, int H, int D) {
  const std::size_t one = std::size_t(B) * S * H * D;
  c.take(p.flat, name, 2 * one);
  if (!c.carving()) return;
  p.a = Tensor4<T, Mem>(p.flat.data(), B, S, H, D);
  p.b = Tensor4<T, Mem>(p.flat.data() + one, B, S, H, D);
}

/// Carves (or plans) a FlatPair3 of two [B, H, S] row statistics.
template <class Mem, class T>
void take_pair3(Carver<Mem>& c, FlatPair3<T, Mem>& p, const char* name, int B, int H, int S) {
  const std::size_t one = std::size_t(B) * H * S;
  c.take(p.flat, name, 2 * one);
  if (!c.carving()) return;
  p.a = RowStats<T, Mem>(p.flat.data(), B, H, S);
  p.b = RowStats<T, Mem>(p.flat.data() + one, B, H, S);
}

/// Carves (or plans) a partial state (acc [B, S, H, D], m, l [B, H, S]) as one buffer.
template <class Mem, class Acc>
void take_flat_state(Carver<Mem>& c, FlatState<Acc, Mem>& s, const char* name, int B, int S, int H, int D) {
  const std::size_t nacc = std::size_t(B) * S * H * D, nrow = std::size_t(B) * H * S;
  c.take(s.flat, name, nacc + 2 * nrow);
  if (!c.carving()) return;
  s.st.acc = Tensor4<Acc, Mem>(s.flat.data(), B, S, H, D);
  s.st.m   = RowStats<Acc, Mem>(s.flat.data() + nacc, B, H, S);
  s.st.l   = RowStats<Acc, Mem>(s.flat.data() + nacc + nrow, B, H, S);
}

/// The first two [B, S, H, D] tensors of a larger FlatPair4's buffer, as a pair:
/// a buffer that is dead by the time the pair is used lends it its memory.
template <class T, class Mem>
FlatPair4<T, Mem> pair4_within(const FlatPair4<T, Mem>& host, int B, int S, int H, int D) {
  const std::size_t one = std::size_t(B) * S * H * D;
  FlatPair4<T, Mem> p;
  if (host.flat.data() == nullptr) return p;
  p.flat = Flat<T, Mem>(host.flat.data(), 2 * one);
  p.a    = Tensor4<T, Mem>(p.flat.data(), B, S, H, D);
  p.b    = Tensor4<T, Mem>(p.flat.data() + one, B, S, H, D);
  return p;
}

/// Rows blk, blk + nb, blk + 2 nb, ... of a position-ordered [B, nb*n, X, D] tensor,
/// viewed in place as [B, n, X, D] (LayoutStride): the shard of grid row/column blk.
template <class T, class Mem>
Strided4<T, Mem> row_block(const Tensor4<T, Mem>& g, int blk, int nb) {
  const std::size_t n = g.extent(1) / std::size_t(nb);
  Kokkos::LayoutStride ls(g.extent(0), g.stride(0), n, std::size_t(nb) * g.stride(1), g.extent(2), g.stride(2),
                          g.extent(3), g.stride(3));
  return Strided4<T, Mem>(g.data() + std::size_t(blk) * g.stride(1), ls);
}

/// Row r of contiguous [B, n, X, D] blocks k < count, block k at k*bs: row
/// (first + k) + i*nb of a position-ordered tensor.
struct InterleaveRows {
  long bs, B, n, X, D, first, nb;
  KOKKOS_INLINE_FUNCTION RowPair operator()(long r) const {
    const long x = r % X, i = (r / X) % n, b = (r / (X * n)) % B, k = r / (X * n * B);
    return {std::size_t(k * bs + ((b * n + i) * X + x) * D), b, (first + k) + i * nb, x};
  }
};

/// Scatters blocks into a position-ordered tensor: for k < count, the contiguous
/// [B, n, X, D] block at src + k*block_stride becomes rows (first + k) + i*nb of
/// dst [B, nb*n, X, D] (n = dst.extent(1) / nb).
template <class Exec, class S, class DstV>
void interleave_rows(const Exec& exec, const S* src, std::size_t block_stride, int first, int count, int nb,
                     const DstV& dst, const char* label) {
  const long B = long(dst.extent(0)), X = long(dst.extent(2)), D = long(dst.extent(3));
  const long n = long(dst.extent(1)) / nb;
  move_rows<false>(exec, label, long(count) * B * n * X, dst, FlatPtr<const S>{src},
                   InterleaveRows{long(block_stride), B, n, X, D, long(first), long(nb)});
}

/// Inverse of interleave_rows: for k < count, rows (first + k) + i*nb of src
/// [B, nb*n, X, D] go to the contiguous [B, n, X, D] block at dst + k*block_stride.
template <class Exec, class SrcV, class DT>
void deinterleave_rows(const Exec& exec, const SrcV& src, int first, int count, int nb, DT* dst,
                       std::size_t block_stride, const char* label) {
  const long B = long(src.extent(0)), X = long(src.extent(2)), D = long(src.extent(3));
  const long n = long(src.extent(1)) / nb;
  move_rows<true>(exec, label, long(count) * B * n * X, src, FlatPtr<DT>{dst},
                  InterleaveRows{long(block_stride), B, n, X, D, long(first), long(nb)});
}

/// interleave_rows of K|V blocks: for k < count, the [K | V] block at src + k*block_stride
/// (K and V of `words` each) puts its K rows into kg and its V rows into vg.
template <class Exec, class S, class DstV>
void interleave_kv_rows(const Exec& exec, const S* src, std::size_t words, std::size_t block_stride, int first,
                        int count, int nb, const DstV& kg, const DstV& vg, const char* label) {
  interleave_rows(exec, src, block_stride, first, count, nb, kg, label);
  interleave_rows(exec, src + words, block_stride, first, count, nb, vg, label);
}

/// The inverse for one K|V pair: rows first + i*nb of kg and vg into dst.a and dst.b.
template <class Exec, class SrcV, class Pair>
void deinterleave_kv_rows(const Exec& exec, const SrcV& kg, const SrcV& vg, int first, int nb, const Pair& dst,
                          const char* label) {
  deinterleave_rows(exec, kg, first, 1, nb, dst.a.data(), 0, label);
  deinterleave_rows(exec, vg, first, 1, nb, dst.b.data(), 0, label);
}

/// Row statistics version of interleave_rows: block k is [B, H, n] at
/// src + k*block_stride; dst is [B, H, nb*n], dst(b, h, (first+k) + i*nb) = block(b, h, i).
template <class Exec, class S, class DstV>
void interleave_stats(const Exec& exec, const S* src, std::size_t block_stride, int first, int count, int nb,
                      const DstV& dst, const char* label) {
  using DT      = typename DstV::non_const_value_type;
  const long B  = long(dst.extent(0)), H = long(dst.extent(1));
  const long n  = long(dst.extent(2)) / nb;
  const long bs = long(block_stride);
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec>(exec, 0, long(count) * B * H), KOKKOS_LAMBDA(long idx) {
        const long h = idx % H, b = (idx / H) % B, k = idx / (H * B);
        const S* s   = src + k * bs + (b * H + h) * n;
        for (long i = 0; i < n; ++i) dst(b, h, (first + k) + i * nb) = DT(s[i]);
      });
}

/// Inverse of interleave_stats (overwrites the destination blocks).
template <class Exec, class SrcV, class DT>
void deinterleave_stats(const Exec& exec, const SrcV& src, int first, int count, int nb, DT* dst,
                        std::size_t block_stride, const char* label) {
  const long B  = long(src.extent(0)), H = long(src.extent(1));
  const long n  = long(src.extent(2)) / nb;
  const long bs = long(block_stride);
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec>(exec, 0, long(count) * B * H), KOKKOS_LAMBDA(long idx) {
        const long h = idx % H, b = (idx / H) % B, k = idx / (H * B);
        DT* o        = dst + k * bs + (b * H + h) * n;
        for (long i = 0; i < n; ++i) o[i] = DT(src(b, h, (first + k) + i * nb));
      });
}

/// The shard of grid column `blk` of a position-ordered state [B, nb*n, H, D]
/// copied into the contiguous state `dst` [B, n, H, D] (acc, m and l).
template <class Exec, class Acc, class Mem>
void get_state_block(const Exec& exec, const AttnState<Acc, Mem>& src, int blk, int nb,
                     const AttnState<Acc, Mem>& dst) {
  deinterleave_rows(exec, src.acc, blk, 1, nb, dst.acc.data(), 0, "DistAttn::grid2d.get_state_block.acc");
  deinterleave_stats(exec, src.m, blk, 1, nb, dst.m.data(), 0, "DistAttn::grid2d.get_state_block.m");
  deinterleave_stats(exec, src.l, blk, 1, nb, dst.l.data(), 0, "DistAttn::grid2d.get_state_block.l");
}

}  // namespace DistAttn::Impl
