// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Row-wise kernels on attention states: merge (docs/design/building_block.md / A2D AttnFix),
// finalize to (O, LSE), backward preprocessing Delta = rowsum(dO * O), and
// conversions between accumulator and I/O types.

#include <DistAttn/core/types.hpp>

namespace DistAttn::Impl {

// Element-wise kernels walk the [B, S, H, D] tensors in memory order (one
// thread per element, consecutive threads on consecutive addresses) and re-read
// the row statistics, which stay in cache: a thread per row looping over D would
// make every warp touch 32 rows H*D elements apart.
struct Index4 {
  long S, H, D;
  KOKKOS_INLINE_FUNCTION void operator()(long idx, int& b, int& i, int& h, int& j) const {
    j = int(idx % D);
    idx /= D;
    h = int(idx % H);
    idx /= H;
    i = int(idx % S);
    b = int(idx / S);
  }
};

/// Elements of the last dimension one index covers. Host threads take a whole row:
/// its index is split once, not once per element (four 64-bit divisions per element
/// cost more than the arithmetic, e.g. the CPU merge ran at 1.6 GB/s), and the
/// element loop vectorizes. Devices keep one thread per element.
template <class Exec>
long elements_per_index(long D) {
  return compat::host_accessible_v<Exec> && D > 0 ? D : 1;
}

/// into <- merge(into, from) for every (b, h, row); both states cover the same rows.
/// Two kernels: the accumulator first (it needs the old maxima), then m and l.
template <class Exec, class AccA, class StatA, class AccB, class StatB>
void merge_states(const Exec& exec, const AccA& acc_a, const StatA& m_a, const StatA& l_a,
                  const AccB& acc_b, const StatB& m_b, const StatB& l_b) {
  using Acc     = typename AccA::non_const_value_type;
  const long B = long(acc_a.extent(0)), S = long(acc_a.extent(1)), H = long(acc_a.extent(2)),
             D = long(acc_a.extent(3));
  const long per = elements_per_index<Exec>(D);
  const Index4 ix{S, H, D / per};
  Kokkos::parallel_for(
      "DistAttn::attention_merge.acc",
      Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, B * S * H * (D / per)), KOKKOS_LAMBDA(long idx) {
        int b, i, h, j0;
        ix(idx, b, i, h, j0);
        const Acc ninf = -compat::infinity<Acc>();
        const Acc ma = m_a(b, h, i), mb = Acc(m_b(b, h, i));
        const Acc mm = ma > mb ? ma : mb;
        if (mm == ninf) return;  // both empty: exp(-inf - -inf) would be NaN
        const Acc ea = ma == ninf ? Acc(0) : compat::math::exp(ma - mm);
        const Acc eb = mb == ninf ? Acc(0) : compat::math::exp(mb - mm);
        for (int j = j0; j < j0 + int(per); ++j) acc_a(b, i, h, j) = ea * acc_a(b, i, h, j) + eb * Acc(acc_b(b, i, h, j));
      });
  Kokkos::parallel_for(
      "DistAttn::attention_merge.stats", Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, B * H * S),
      KOKKOS_LAMBDA(long idx) {
        const int i = int(idx % S), h = int((idx / S) % H), b = int(idx / (S * H));
        const Acc ninf = -compat::infinity<Acc>();
        const Acc ma = m_a(b, h, i), mb = Acc(m_b(b, h, i));
        const Acc mm = ma > mb ? ma : mb;
        if (mm == ninf) return;
        const Acc ea = ma == ninf ? Acc(0) : compat::math::exp(ma - mm);
        const Acc eb = mb == ninf ? Acc(0) : compat::math::exp(mb - mm);
        l_a(b, h, i) = ea * l_a(b, h, i) + eb * Acc(l_b(b, h, i));
        m_a(b, h, i) = mm;
      });
}

/// O = acc / l and LSE = m + log(l); rows with l == 0 give O = 0, LSE = -inf.
template <class Exec, class AccV, class StatV, class OV, class LseV>
void finalize_state(const Exec& exec, const AccV& acc, const StatV& m, const StatV& l, const OV& o,
                    const LseV& lse) {
  using Acc   = typename AccV::non_const_value_type;
  using OT    = typename OV::non_const_value_type;
  using LT    = typename LseV::non_const_value_type;
  const long B = long(acc.extent(0)), S = long(acc.extent(1)), H = long(acc.extent(2)), D = long(acc.extent(3));
  // Four integer divisions per element were 7-9% of the CPU forward.
  const long per_item = elements_per_index<Exec>(D);
  const Index4 ix{S, H, D / per_item};
  Kokkos::parallel_for(
      "DistAttn::attention_finalize.o",
      Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, B * S * H * (D / per_item)),
      KOKKOS_LAMBDA(long idx) {
        int b, i, h, j0;
        ix(idx, b, i, h, j0);
        const Acc li = l(b, h, i);
        for (int j = j0; j < j0 + int(per_item); ++j)
          o(b, i, h, j) = li > Acc(0) ? OT(acc(b, i, h, j) / li) : OT(0.0f);
      });
  Kokkos::parallel_for(
      "DistAttn::attention_finalize.lse", Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, B * H * S),
      KOKKOS_LAMBDA(long idx) {
        const int i = int(idx % S), h = int((idx / S) % H), b = int(idx / (S * H));
        const Acc li = l(b, h, i);
        lse(b, h, i) = li > Acc(0) ? LT(m(b, h, i) + compat::math::log(li)) : -compat::infinity<LT>();
      });
}

/// Delta(b, h, i) = sum_j dO(b, i, h, j) * O(b, i, h, j), in the accumulation type.
template <class Exec, class OV, class DOV, class DeltaV>
void compute_delta(const Exec& exec, const OV& o, const DOV& dout, const DeltaV& delta) {
  using Acc   = typename DeltaV::non_const_value_type;
  const int B = int(o.extent(0));
  const int S = int(o.extent(1));
  const int H = int(o.extent(2));
  const int D = int(o.extent(3));
  Kokkos::parallel_for(
      "DistAttn::attention_bwd_delta", Kokkos::RangePolicy<Exec>(exec, 0, B * H * S), KOKKOS_LAMBDA(int idx) {
        // heads fastest: neighbouring threads read neighbouring D-vectors
        const int h = idx % H, i = (idx / H) % S, b = idx / (S * H);
        Acc s = Acc(0);
        for (int j = 0; j < D; ++j) s += Acc(o(b, i, h, j)) * Acc(dout(b, i, h, j));
        delta(b, h, i) = s;
      });
}

/// dst = src element-wise with conversion (same extents, any rank-4 layouts).
template <class Exec, class SrcV, class DstV>
void convert4(const Exec& exec, const SrcV& src, const DstV& dst, const char* label) {
  using DT     = typename DstV::non_const_value_type;
  const long n0 = long(src.extent(0)), n1 = long(src.extent(1)), n2 = long(src.extent(2)),
             n3 = long(src.extent(3));
  const long per = elements_per_index<Exec>(n3);
  const Index4 ix{n1, n2, n3 / per};
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<long>>(exec, 0, n0 * n1 * n2 * (n3 / per)),
      KOKKOS_LAMBDA(long idx) {
        int a, b, c, j0;
        ix(idx, a, b, c, j0);
        for (int j = j0; j < j0 + int(per); ++j) dst(a, b, c, j) = DT(src(a, b, c, j));
      });
}

/// Number of NaN/Inf elements in a rank-4 view.
template <class Exec, class V>
long count_nonfinite4(const Exec& exec, const V& x) {
  const int n0 = int(x.extent(0)), n1 = int(x.extent(1)), n2 = int(x.extent(2)), n3 = int(x.extent(3));
  using CT     = accum_t<typename V::non_const_value_type>;
  long bad     = 0;
  Kokkos::parallel_reduce(
      "DistAttn::check_finite", Kokkos::RangePolicy<Exec>(exec, 0, n0 * n1 * n2),
      KOKKOS_LAMBDA(int idx, long& cnt) {
        const int c = idx % n2, b = (idx / n2) % n1, a = idx / (n1 * n2);
        for (int j = 0; j < n3; ++j) {
          const CT val = CT(x(a, b, c, j));
          if (!compat::math::isfinite(val)) ++cnt;
        }
      },
      bad);
  return bad;
}

}  // namespace DistAttn::Impl
