#pragma once
/// @file impl/executor_inputs.hpp
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
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>

#include <algorithm>
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
    if (!same_extents(buf4_, v))
      buf4_ = Tensor4<T, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), v.extent(0), v.extent(1),
                              v.extent(2), v.extent(3));
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

/// Which inputs the last forward saw (data pointers): a backward given the same
/// Views may reuse what forward derived from them. Like autograd, it assumes the
/// caller did not modify them in between.
class SavedInputs {
 public:
  template <class... V>
  void remember(const V&... v) {
    ptrs_ = {static_cast<const void*>(v.data())...};
  }
  template <class... V>
  bool same(const V&... v) const {
    return !ptrs_.empty() && ptrs_ == std::vector<const void*>{static_cast<const void*>(v.data())...};
  }
  void clear() { ptrs_.clear(); }

 private:
  std::vector<const void*> ptrs_;
};

/// One named value of an executor's configuration; every rank must hold the same.
struct ConfigField {
  const char* name;
  std::int64_t value;
};

/// The collective step of the entry check (see the file comment). Owns the small
/// buffers of its all-gather, so a pass allocates nothing after the first.
template <class CommSpace, class Exec>
class EntryAgreement {
 public:
  using Comm = Communicator<CommSpace, Exec>;
  using Mem  = typename Exec::memory_space;

  /// Bytes of the all-gather buffers the first run() allocates on a group of P ranks.
  /// A value this rank proposes in the next run() (inside local_checks); after it,
  /// agreed_minimum() is the smallest any rank proposed (max() if none did): how
  /// ranks settle a choice that depends on local state, such as free memory.
  void propose(std::int64_t v) { proposal_ = v; }
  std::int64_t agreed_minimum() const { return agreed_; }

  static constexpr std::size_t buffer_bytes(int P) { return std::size_t(kWords) * sizeof(std::int64_t) * (1 + P); }

  /// Runs `local_checks` (which throws InvalidArgument on a bad argument), then
  /// all-gathers every rank's outcome and configuration. Returns only when every
  /// rank's checks passed and all configurations agree; otherwise throws
  /// InvalidArgument on every rank, prefixed with the failing rank: its own error
  /// on a rank that raised one, the first failing rank's on the others.
  template <class F>
  void run(Comm& comm, const char* where, const std::vector<ConfigField>& config, F&& local_checks) {
    bool own = false;
    std::string own_msg;
    try {
      local_checks();
    } catch (const InvalidArgument& e) {
      own     = true;
      own_msg = e.what();
    }
    DISTATTN_REQUIRE(config.size() <= std::size_t(kFields), where, "too many configuration fields");
    const int P = comm.size();
    if (send_.extent(0) == 0) {
      send_ = Kokkos::View<std::int64_t*, Mem>("DistAttn::entry_check.send", kWords);
      recv_ = Kokkos::View<std::int64_t*, Mem>("DistAttn::entry_check.recv", std::size_t(kWords) * P);
      hs_   = Kokkos::create_mirror_view(send_);  // kept: host mirrors of device buffers are allocations too
      hr_   = Kokkos::create_mirror_view(recv_);
    }
    const auto& hs = hs_;
    Kokkos::deep_copy(hs, std::int64_t(0));
    hs(0) = own ? 1 : 0;
    hs(1)         = std::int64_t(config.size());
    hs(kProposal) = proposal_;
    proposal_     = std::numeric_limits<std::int64_t>::max();
    for (std::size_t i = 0; i < config.size(); ++i) hs(2 + i) = config[i].value;
    const std::size_t n = std::min(own_msg.size(), std::size_t(kMsgChars));
    std::memcpy(reinterpret_cast<char*>(hs.data() + kMsgWord), own_msg.data(), n);
    Kokkos::deep_copy(send_, hs);
    all_gather(comm, send_, recv_).wait();
    const auto& hr = hr_;
    Kokkos::deep_copy(hr, recv_);

    const std::int64_t* mine = hr.data() + std::size_t(kWords) * comm.rank();
    for (int r = 0; r < P; ++r) {
      const std::int64_t* theirs = hr.data() + std::size_t(kWords) * r;
      if (!std::equal(mine + 1, mine + 2 + config.size(), theirs + 1))
        throw_invalid_argument(where, mismatch_message(hr.data(), P, config));
    }
    agreed_ = std::numeric_limits<std::int64_t>::max();
    for (int r = 0; r < P; ++r) agreed_ = std::min(agreed_, hr(std::size_t(kWords) * r + kProposal));
    int first = -1, failed = 0;
    for (int r = 0; r < P; ++r)
      if (hr(std::size_t(kWords) * r) != 0) {
        if (first < 0) first = r;
        ++failed;
      }
    if (failed == 0) return;
    // A failing rank reports its own error (untruncated), the others the first failing rank's.
    const int shown = own ? comm.rank() : first;
    std::string msg = own_msg;
    if (!own) {
      const char* m = reinterpret_cast<const char*>(hr.data() + std::size_t(kWords) * first + kMsgWord);
      msg           = std::string(m, strnlen(m, kMsgChars));
    }
    std::ostringstream os;
    os << "rank " << shown << " rejected its arguments";
    if (failed > 1) os << " (" << failed << " ranks did)";
    os << ": " << msg;
    throw_invalid_argument(where, os.str());
  }

 private:
  // Per rank: [0] status, [1] field count, [2, 2 + kFields) fields, the proposal, then the message.
  static constexpr int kFields   = 14;
  static constexpr int kProposal = 2 + kFields;
  static constexpr int kMsgWord  = 3 + kFields;
  static constexpr int kWords    = 64;
  static constexpr int kMsgChars = (kWords - kMsgWord) * int(sizeof(std::int64_t)) - 1;

  static std::string mismatch_message(const std::int64_t* all, int P, const std::vector<ConfigField>& config) {
    std::ostringstream os;
    os << "ranks were configured differently (every rank must build the executor with the same extents and "
          "options):";
    for (int r = 0; r < P; ++r) {
      const std::int64_t* w = all + std::size_t(kWords) * r;
      os << (r ? ";" : "") << " rank " << r << " has";
      for (std::size_t i = 0; i < config.size(); ++i) os << (i ? ", " : " ") << config[i].name << "=" << w[2 + i];
    }
    return os.str();
  }

  Kokkos::View<std::int64_t*, Mem> send_, recv_;
  typename Kokkos::View<std::int64_t*, Mem>::HostMirror hs_, hr_;
  std::int64_t proposal_ = std::numeric_limits<std::int64_t>::max(), agreed_ = proposal_;
};

}  // namespace DistAttn::Impl
