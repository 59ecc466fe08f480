// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file attention.hpp
/// The single-device building block: blockwise exact attention with mergeable
/// partial states (docs/design/building_block.md). Every distributed schedule is written on these calls.
///
///   state = make_state(...)                       empty: acc = 0, m = -inf, l = 0
///   attention_fwd_update(exec, q, k, v, state)    fold one K/V block into the state
///   attention_merge(exec, state, other)           combine states over disjoint key sets
///   attention_finalize(exec, state, o, lse)       O = acc / l, LSE = m + log l
///   attention_bwd_delta(exec, o, dO, delta)       Delta = rowsum(dO * O)
///   attention_bwd_update(exec, q, k, v, dO, lse, delta, dq, dk, dv)   += one block's gradients
///
/// Layout: [batch, seq, heads, head_dim] for tensors, [batch, heads, seq] for
/// row statistics (m, l, LSE, Delta). Statistics are natural-log based.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/attention_checks.hpp>
#include <DistAttn/impl/attn_rowwise.hpp>
#include <DistAttn/impl/attn_spec.hpp>
#include <DistAttn/impl/canonical_views.hpp>

#include <string>

namespace DistAttn {

/// Running forward state of a block of query rows: unnormalized accumulator
/// with row max m and row sum l, all in the accumulation type (building_block.md, Definitions).
template <class Acc, class MemSpace>
struct AttnState {
  Tensor4<Acc, MemSpace> acc;   // [B, S, H, D]
  RowStats<Acc, MemSpace> m;    // [B, H, S]
  RowStats<Acc, MemSpace> l;    // [B, H, S]

  int batch() const { return int(acc.extent(0)); }
  int seq() const { return int(acc.extent(1)); }
  int heads() const { return int(acc.extent(2)); }
  int head_dim() const { return int(acc.extent(3)); }
};

/// Sets a state to the empty state (the merge identity).
template <class Exec, class Acc, class MemSpace>
void reset_state(const Exec& exec, const AttnState<Acc, MemSpace>& st) {
  Kokkos::deep_copy(exec, st.acc, Acc(0));
  Kokkos::deep_copy(exec, st.m, -compat::infinity<Acc>());
  Kokkos::deep_copy(exec, st.l, Acc(0));
}

template <class Acc, class Exec>
AttnState<Acc, typename Exec::memory_space> make_state(const Exec& exec, int batch, int seq, int heads,
                                                        int head_dim, const std::string& label = "state") {
  DISTATTN_REQUIRE(batch >= 0 && seq >= 0 && heads >= 0 && head_dim > 0, "DistAttn::make_state",
                   "invalid extents batch=" << batch << " seq=" << seq << " heads=" << heads
                                            << " head_dim=" << head_dim);
  using M = typename Exec::memory_space;
  AttnState<Acc, M> st{
      Tensor4<Acc, M>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label + ".acc"), batch, seq, heads, head_dim),
      RowStats<Acc, M>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label + ".m"), batch, heads, seq),
      RowStats<Acc, M>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label + ".l"), batch, heads, seq)};
  reset_state(exec, st);
  return st;
}

/// Folds the block (q vs k, v) into `state` (rows of q). Does not scan inputs
/// for NaN (see AttnOptions::check_finite, honoured by the one-call APIs).
template <class Exec, class QV, class KV, class VV, class Acc, class MemSpace>
void attention_fwd_update(const Exec& exec, const QV& q, const KV& k, const VV& v,
                          const AttnState<Acc, MemSpace>& state, const AttnOptions& opts = {}) {
  constexpr const char* where = "DistAttn::attention_fwd_update";
  Impl::check_qkv<Exec>(where, q, k, v, opts);
  Impl::require_accessible<Exec, Tensor4<Acc, MemSpace>>(where, "state");
  Impl::check_same4(where, "q", q, "state.acc", state.acc);
  Impl::check_stats(where, "state.m", state.m, q.extent(0), q.extent(2), q.extent(1));
  Impl::check_stats(where, "state.l", state.l, q.extent(0), q.extent(2), q.extent(1));
  using T = typename QV::non_const_value_type;
  Impl::check_path<Exec>(where, opts, Impl::tuned_attn_avail<Exec, T>::value);
  const double scale = resolved_scale(opts, int(q.extent(3)));
  // One declaration each: a caller may mix memory spaces (check_qkv then throws), so
  // the canonical types may differ.
  auto qc = Impl::canonical_in(q);
  auto kc = Impl::canonical_in(k);
  auto vc = Impl::canonical_in(v);
  auto acc = Impl::canonical_out(state.acc);
  auto m = Impl::canonical_out_stats(state.m), l = Impl::canonical_out_stats(state.l);
  if (opts.path != KernelPath::Portable &&
      Impl::TunedAttnFwdUpdate<Exec, T>::run(exec, qc, kc, vc, acc, m, l, opts.mask, scale))
    return;
  Impl::AttnFwdUpdatePortable<Exec, decltype(qc), decltype(kc), decltype(vc), decltype(acc), decltype(m)> f(
      qc, kc, vc, acc, m, l, opts.mask, scale);
  f.run(exec);
}

/// into <- merge(into, from): both states hold the same query rows, over disjoint key sets.
template <class Exec, class Acc, class MemA, class MemB>
void attention_merge(const Exec& exec, const AttnState<Acc, MemA>& into, const AttnState<Acc, MemB>& from) {
  constexpr const char* where = "DistAttn::attention_merge";
  Impl::require_accessible<Exec, Tensor4<Acc, MemA>>(where, "into");
  Impl::require_accessible<Exec, Tensor4<Acc, MemB>>(where, "from");
  Impl::check_same4(where, "into.acc", into.acc, "from.acc", from.acc);
  Impl::merge_states(exec, into.acc, into.m, into.l, from.acc, from.m, from.l);
}

/// O = acc / l (rows with l = 0 give O = 0) and LSE = m + log l (-inf for empty rows).
template <class Exec, class Acc, class MemSpace, class OV, class LseV>
void attention_finalize(const Exec& exec, const AttnState<Acc, MemSpace>& state, const OV& o, const LseV& lse) {
  constexpr const char* where = "DistAttn::attention_finalize";
  Impl::require_accessible<Exec, OV>(where, "o");
  Impl::require_accessible<Exec, LseV>(where, "lse");
  Impl::check_same4(where, "state.acc", state.acc, "o", o);
  Impl::check_stats(where, "lse", lse, o.extent(0), o.extent(2), o.extent(1));
  Impl::finalize_state(exec, state.acc, state.m, state.l, o, lse);
}

/// Delta = rowsum(dO * O) from the final O: the only use backward makes of O.
template <class Exec, class OV, class DOV, class DeltaV>
void attention_bwd_delta(const Exec& exec, const OV& o, const DOV& dout, const DeltaV& delta) {
  constexpr const char* where = "DistAttn::attention_bwd_delta";
  Impl::require_accessible<Exec, OV>(where, "o");
  Impl::require_accessible<Exec, DOV>(where, "dout");
  Impl::require_accessible<Exec, DeltaV>(where, "delta");
  Impl::check_same4(where, "o", o, "dout", dout);
  Impl::check_stats(where, "delta", delta, o.extent(0), o.extent(2), o.extent(1));
  Impl::compute_delta(exec, o, dout, delta);
}

/// dq += dQ_block, dk += dK_block, dv += dV_block for the block (q vs k, v), with
/// the FINAL lse and delta of the q rows. dq/dk/dv are accumulators (fp32 for
/// low-precision inputs); dk/dv are already reduced over each GQA group.
template <class Exec, class QV, class KV, class VV, class DOV, class LseV, class DeltaV, class GQV, class GKV>
void attention_bwd_update(const Exec& exec, const QV& q, const KV& k, const VV& v, const DOV& dout,
                          const LseV& lse, const DeltaV& delta, const GQV& dq, const GKV& dk, const GKV& dv,
                          const AttnOptions& opts = {}) {
  constexpr const char* where = "DistAttn::attention_bwd_update";
  Impl::check_qkv<Exec>(where, q, k, v, opts);
  Impl::require_accessible<Exec, DOV>(where, "dout");
  Impl::require_accessible<Exec, LseV>(where, "lse");
  Impl::require_accessible<Exec, DeltaV>(where, "delta");
  Impl::require_accessible<Exec, GQV>(where, "dq");
  Impl::require_accessible<Exec, GKV>(where, "dk");
  Impl::check_same4(where, "q", q, "dout", dout);
  Impl::check_same4(where, "q", q, "dq", dq);
  Impl::check_same4(where, "k", k, "dk", dk);
  Impl::check_same4(where, "k", k, "dv", dv);
  Impl::check_stats(where, "lse", lse, q.extent(0), q.extent(2), q.extent(1));
  Impl::check_stats(where, "delta", delta, q.extent(0), q.extent(2), q.extent(1));
  using T = typename QV::non_const_value_type;
  Impl::check_path<Exec>(where, opts, Impl::tuned_attn_avail<Exec, T>::value);
  const double scale = resolved_scale(opts, int(q.extent(3)));
  // One declaration each, as in attention_fwd_update.
  auto qc = Impl::canonical_in(q);
  auto kc = Impl::canonical_in(k);
  auto vc = Impl::canonical_in(v);
  auto doc = Impl::canonical_in(dout);
  auto lc = Impl::canonical_in_stats(lse);
  auto dc = Impl::canonical_in_stats(delta);
  auto gq = Impl::canonical_out(dq);
  auto gk = Impl::canonical_out(dk);
  auto gv = Impl::canonical_out(dv);
  if (opts.path != KernelPath::Portable &&
      Impl::TunedAttnBwdUpdate<Exec, T>::run(exec, qc, kc, vc, doc, lc, dc, gq, gk, gv, opts.mask, scale,
                                             opts.deterministic))
    return;
  Impl::AttnBwdPortable<Exec, decltype(qc), decltype(kc), decltype(vc), decltype(doc), decltype(lc), decltype(dc),
                        decltype(gq), decltype(gk)>
      f(qc, kc, vc, doc, lc, dc, gq, gk, gv, opts.mask, scale);
  f.run(exec);
}

namespace Impl {
/// attention_fwd's checks, then its direct path where a tuned kernel offers it;
/// false when the state path must run.
template <class Exec, class QV, class KV, class VV, class OV, class LseV>
bool attention_fwd_direct(const Exec& exec, const QV& q, const KV& k, const VV& v, const OV& o, const LseV& lse,
                          const AttnOptions& opts) {
  constexpr const char* where = "DistAttn::attention_fwd";
  Impl::check_qkv<Exec>(where, q, k, v, opts);
  Impl::check_same4(where, "q", q, "o", o);
  if (opts.check_finite) {
    Impl::check_finite_qkv(exec, where, q, k, v);
    Impl::check_documents<Exec>(where, opts.mask);
  }
  // The direct path skips attention_finalize, so its checks on o and lse are made here.
  Impl::require_accessible<Exec, OV>(where, "o");
  Impl::require_accessible<Exec, LseV>(where, "lse");
  Impl::check_stats(where, "lse", lse, q.extent(0), q.extent(2), q.extent(1));
  using T = typename QV::non_const_value_type;
  Impl::check_path<Exec>(where, opts, Impl::tuned_attn_avail<Exec, T>::value);
  const double scale = resolved_scale(opts, int(q.extent(3)));
  return opts.path != KernelPath::Portable &&
         Impl::TunedAttnFwdDirect<Exec, T>::run(exec, Impl::canonical_in(q), Impl::canonical_in(k),
                                                Impl::canonical_in(v), Impl::canonical_out(o),
                                                Impl::canonical_out_stats(lse), opts.mask, scale);
}
}  // namespace Impl

/// One-call forward over a whole local sequence: O and LSE ([B, H, S], accumulation type).
/// Where a tuned kernel can finalize in place (TunedAttnFwdDirect) it writes O and
/// LSE itself; otherwise a state is folded and finalized.
template <class Exec, class QV, class KV, class VV, class OV, class LseV>
void attention_fwd(const Exec& exec, const QV& q, const KV& k, const VV& v, const OV& o, const LseV& lse,
                   const AttnOptions& opts = {}) {
  if (Impl::attention_fwd_direct(exec, q, k, v, o, lse, opts)) return;
  using Acc = typename LseV::non_const_value_type;
  auto st = make_state<Acc>(exec, int(q.extent(0)), int(q.extent(1)), int(q.extent(2)), int(q.extent(3)),
                            "DistAttn::attention_fwd");
  attention_fwd_update(exec, q, k, v, st, opts);
  attention_finalize(exec, st, o, lse);
}

/// attention_fwd with the state path's state given by the caller (q's extents;
/// reset here), so the call allocates nothing: executors pass workspace memory.
template <class Exec, class QV, class KV, class VV, class OV, class LseV, class Acc, class M>
void attention_fwd(const Exec& exec, const QV& q, const KV& k, const VV& v, const OV& o, const LseV& lse,
                   const AttnOptions& opts, const AttnState<Acc, M>& st) {
  if (Impl::attention_fwd_direct(exec, q, k, v, o, lse, opts)) return;
  Impl::check_same4("DistAttn::attention_fwd", "q", q, "state", st.acc);
  reset_state(exec, st);
  attention_fwd_update(exec, q, k, v, st, opts);
  attention_finalize(exec, st, o, lse);
}

/// One-call backward: dq, dk, dv (any element type; overwritten) from the forward's O and LSE.
template <class Exec, class QV, class KV, class VV, class OV, class DOV, class LseV, class DQV, class DKV, class DVV>
void attention_bwd(const Exec& exec, const QV& q, const KV& k, const VV& v, const OV& o, const DOV& dout,
                   const LseV& lse, const DQV& dq, const DKV& dk, const DVV& dv, const AttnOptions& opts = {}) {
  constexpr const char* where = "DistAttn::attention_bwd";
  Impl::check_qkv<Exec>(where, q, k, v, opts);
  Impl::check_bwd_args(exec, where, q, k, v, o, dout, lse, dq, dk, dv, opts.check_finite);
  if (opts.check_finite) Impl::check_documents<Exec>(where, opts.mask);
  using Acc = typename LseV::non_const_value_type;
  using M   = typename Exec::memory_space;
  const int B = int(q.extent(0)), S = int(q.extent(1)), H = int(q.extent(2)), D = int(q.extent(3));
  const int Sk = int(k.extent(1)), Hk = int(k.extent(2));
  RowStats<Acc, M> delta(Kokkos::view_alloc(Kokkos::WithoutInitializing, "DistAttn::attention_bwd.delta"), B, H, S);
  attention_bwd_delta(exec, o, dout, delta);
  Tensor4<Acc, M> gq("DistAttn::attention_bwd.dq", B, S, H, D);
  Tensor4<Acc, M> gk("DistAttn::attention_bwd.dk", B, Sk, Hk, D);
  Tensor4<Acc, M> gv("DistAttn::attention_bwd.dv", B, Sk, Hk, D);
  attention_bwd_update(exec, q, k, v, dout, lse, delta, gq, gk, gv, opts);
  Impl::convert4(exec, gq, dq, "DistAttn::attention_bwd.convert_dq");
  Impl::convert4(exec, gk, dk, "DistAttn::attention_bwd.convert_dk");
  Impl::convert4(exec, gv, dv, "DistAttn::attention_bwd.convert_dv");
}

}  // namespace DistAttn
