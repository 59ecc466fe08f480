// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file exec/impl/executor_inputs.hpp
/// The entry of every distributed executor's forward() and backward().
///
/// Executors send their callers' tensors as raw bytes and hand them to tiles that
/// assume the building block's row-major layout, so at entry each one:
///  1. checks its arguments locally (static: rank, element type, memory space;
///     dynamic: extents against its configuration, NaN/Inf when asked);
///  2. agrees on the outcome with every peer (EntryAgreement: one small all-gather)
///     before any message is posted. A bad argument on one rank then raises
///     InvalidArgument on all of them, naming the rank and the argument, instead of
///     leaving the others waiting for messages that never come; ranks built with
///     different extents or options are caught the same way;
///  3. stages inputs that are not row-major contiguous (LayoutLeft, the default
///     layout of a View in CUDA memory, or strided subviews) into row-major buffers
///     with Kokkos::deep_copy (StagedInput). Row-major contiguous inputs are used in
///     place, so the common case costs no copy and no memory.

#include <DistAttn/comm.hpp>
#include <DistAttn/impl/attention_checks.hpp>
#include <DistAttn/comm/impl/entry_agreement.hpp>
#include <DistAttn/exec/impl/saved_inputs.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace DistAttn::Impl {

template <class T, class Mem>
using ConstView4 = Kokkos::View<const T****, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T, class Mem>
using ConstView3 = Kokkos::View<const T***, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// True if the View's memory is exactly its extents in row-major order (what a
/// message carries and what the aliasing ConstView4 assumes).
template <class V>
bool is_row_major_contiguous(const V& v) {
  std::size_t expect = 1;
  for (int d = int(V::rank) - 1; d >= 0; --d) {
    if (v.extent(d) > 1 && std::size_t(v.stride(d)) != expect) return false;
    expect *= v.extent(d);
  }
  return true;
}

/// Compile-time part of the entry check for a tensor the executor sends or feeds
/// to its tiles as element type T (q, k, v, dO).
template <class T, class Exec, class V>
constexpr void static_check_input() {
  static_assert(Kokkos::is_view<V>::value && V::rank == 4,
                "DistAttn executors: q, k, v and dO must be rank-4 Views [batch, seq, heads, head_dim]");
  static_assert(std::is_same<typename V::non_const_value_type, T>::value,
                "DistAttn executors: q, k, v and dO must have the executor's element type T");
  static_assert(Kokkos::SpaceAccessibility<Exec, typename V::memory_space>::accessible,
                "DistAttn executors: q, k, v and dO must live in memory the executor's execution space can access");
}

/// Compile-time part of the entry check for an output or an input the executor
/// only reads element by element (o, LSE, dq, dk, dv): any layout and element type.
template <class Exec, class V, int Rank>
constexpr void static_check_output() {
  static_assert(Kokkos::is_view<V>::value && int(V::rank) == Rank,
                "DistAttn executors: o, dq, dk, dv must be rank-4 Views, LSE a rank-3 View [batch, heads, seq]");
  static_assert(Kokkos::SpaceAccessibility<Exec, typename V::memory_space>::accessible,
                "DistAttn executors: outputs must live in memory the executor's execution space can access");
}

/// Compile-time checks of a distributed forward(q, k, v, o, lse).
template <class T, class Exec, class QV, class KV, class VV, class OV, class LV>
constexpr void static_check_forward() {
  static_check_input<T, Exec, QV>();
  static_check_input<T, Exec, KV>();
  static_check_input<T, Exec, VV>();
  static_check_output<Exec, OV, 4>();
  static_check_output<Exec, LV, 3>();
}

/// Compile-time checks of a distributed backward(q, k, v, o, dO, lse, dq, dk, dv).
/// LSE is copied into the executor's statistics type when it is not row-major,
/// so it must hold the accumulation type (what forward writes).
template <class T, class Exec, class QV, class KV, class VV, class OV, class DOV, class LV, class DQV, class DKV,
          class DVV>
constexpr void static_check_backward() {
  static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
  static_check_input<T, Exec, DOV>();
  static_assert(std::is_same<typename LV::non_const_value_type, accum_t<T>>::value,
                "DistAttn executors: backward's lse must hold the accumulation type accum_t<T> (what forward writes)");
  static_check_output<Exec, DQV, 4>();
  static_check_output<Exec, DKV, 4>();
  static_check_output<Exec, DVV, 4>();
}

/// A caller's input as the executor's row-major type: the View itself when it is
/// row-major contiguous, else a row-major copy kept in a buffer that is allocated
/// on first need and reused while the extents stay the same.
template <class T, class Mem>
class StagedInput {
 public:
  template <class Exec, class V>
  ConstView4<T, Mem> get(const Exec& exec, const V& v, const char* label) {
    if (is_row_major_contiguous(v))
      return ConstView4<T, Mem>(v.data(), v.extent(0), v.extent(1), v.extent(2), v.extent(3));
    if (!same_extents(buf4_, v)) {
      check_view_extents(label, "staging copy", std::array<std::size_t, 4>{v.extent(0), v.extent(1), v.extent(2), v.extent(3)});
      buf4_ = Tensor4<T, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), v.extent(0), v.extent(1),
                              v.extent(2), v.extent(3));
    }
    Kokkos::deep_copy(exec, buf4_, v);
    return buf4_;
  }
  /// Row statistics ([batch, heads, seq]) of element type T.
  template <class Exec, class V>
  ConstView3<T, Mem> get_stats(const Exec& exec, const V& v, const char* label) {
    if (is_row_major_contiguous(v)) return ConstView3<T, Mem>(v.data(), v.extent(0), v.extent(1), v.extent(2));
    if (!same_extents(buf3_, v))
      buf3_ = RowStats<T, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), v.extent(0), v.extent(1),
                               v.extent(2));
    Kokkos::deep_copy(exec, buf3_, v);
    return buf3_;
  }

 private:
  template <class A, class V>
  static bool same_extents(const A& a, const V& v) {
    if (a.data() == nullptr) return false;
    for (int d = 0; d < int(V::rank); ++d)
      if (a.extent(d) != v.extent(d)) return false;
    return true;
  }
  Tensor4<T, Mem> buf4_;
  RowStats<T, Mem> buf3_;
};

/// q, k and v of a pass as row-major views, each staged as StagedInput does;
/// `prefix` names the staging buffers (prefix.q_staged, ...).
template <class T, class Mem>
class StagedQKV {
 public:
  explicit StagedQKV(const std::string& prefix)
      : labels_{prefix + ".q_staged", prefix + ".k_staged", prefix + ".v_staged"} {}

  template <class Exec, class QV, class KV, class VV>
  std::array<ConstView4<T, Mem>, 3> get(const Exec& exec, const QV& q, const KV& k, const VV& v) {
    return {stage_[0].get(exec, q, labels_[0].c_str()), stage_[1].get(exec, k, labels_[1].c_str()),
            stage_[2].get(exec, v, labels_[2].c_str())};
  }

 private:
  std::array<StagedInput<T, Mem>, 3> stage_;
  std::array<std::string, 3> labels_;
};

/// q and k against an executor's configuration: q [batch, rows, heads, head_dim],
/// k with `rows` tokens and kv_heads heads (`rows_name` says what rows are).
template <class QV, class KV>
void check_executor_extents(const char* where, const QV& q, const KV& k, int batch, std::int64_t rows, int heads,
                            int kv_heads, int head_dim, const char* rows_name = "chunk") {
  DISTATTN_REQUIRE(std::int64_t(q.extent(0)) == batch && std::int64_t(q.extent(1)) == rows &&
                       std::int64_t(q.extent(2)) == heads && std::int64_t(q.extent(3)) == head_dim,
                   where,
                   "'q' must be [batch=" << batch << ", " << rows_name << "=" << rows << ", heads=" << heads
                                         << ", head_dim=" << head_dim << "] as configured, got [" << q.extent(0)
                                         << ", " << q.extent(1) << ", " << q.extent(2) << ", " << q.extent(3) << "]");
  DISTATTN_REQUIRE(std::int64_t(k.extent(1)) == rows && std::int64_t(k.extent(2)) == kv_heads, where,
                   "'k' must hold " << rows_name << "=" << rows << " tokens and kv_heads=" << kv_heads
                                    << " heads, got " << k.extent(1) << " tokens and " << k.extent(2) << " heads");
}

}  // namespace DistAttn::Impl
