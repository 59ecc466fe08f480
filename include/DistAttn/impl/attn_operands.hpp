// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The operands and extents of one building-block call, shared by its kernels (the
// portable team kernels and the register-blocked device kernels they hand off to),
// which derive from these and name the members they use.

#include <DistAttn/core/types.hpp>

namespace DistAttn::Impl {

/// Extents of a block: q [B, Sq, H, D] against k [B, Sk, Hkv, D].
struct AttnExtents {
  int B, Sq, Sk, H, Hkv, D, group;

  template <class QV, class KV>
  AttnExtents(const QV& q, const KV& k)
      : B(int(q.extent(0))), Sq(int(q.extent(1))), Sk(int(k.extent(1))), H(int(q.extent(2))),
        Hkv(int(k.extent(2))), D(int(q.extent(3))), group(int(q.extent(2)) / int(k.extent(2))) {}
};

/// The tile a team owns in a league of batch x heads x n_tiles teams (tile index
/// fastest), and the tile's first row and row count out of `seq` rows of `rows` each.
struct TeamTile {
  int b, h, t, r0, n;
};

KOKKOS_INLINE_FUNCTION TeamTile team_tile(int league_rank, int n_tiles, int heads, int rows, int seq) {
  TeamTile tt;
  tt.t  = league_rank % n_tiles;
  tt.h  = (league_rank / n_tiles) % heads;
  tt.b  = league_rank / (n_tiles * heads);
  tt.r0 = tt.t * rows;
  tt.n  = (seq - tt.r0) < rows ? (seq - tt.r0) : rows;
  return tt;
}

/// Forward update: folds (q vs k, v) into the state (acc, m, l).
template <class QV, class KV, class VV, class AccV, class StatV>
struct AttnFwdOperands : AttnExtents {
  using Acc = typename AccV::non_const_value_type;
  QV q;
  KV k;
  VV v;
  AccV acc;
  StatV m, l;
  Mask mask;
  Acc scale;

  AttnFwdOperands(const QV& q_, const KV& k_, const VV& v_, const AccV& acc_, const StatV& m_, const StatV& l_,
                  const Mask& mask_, double scale_)
      : AttnExtents(q_, k_), q(q_), k(k_), v(v_), acc(acc_), m(m_), l(l_), mask(mask_), scale(Acc(scale_)) {}
};

/// Backward update: dq, dk, dv += the block's gradients, from the final LSE and Delta.
template <class QV, class KV, class VV, class DOV, class LseV, class DeltaV, class GQV, class GKV>
struct AttnBwdOperands : AttnExtents {
  using Acc = typename GQV::non_const_value_type;
  QV q;
  KV k;
  VV v;
  DOV dout;
  LseV lse;
  DeltaV delta;
  GQV dq;
  GKV dk, dv;
  Mask mask;
  Acc scale;

  AttnBwdOperands(const QV& q_, const KV& k_, const VV& v_, const DOV& do_, const LseV& lse_, const DeltaV& delta_,
                  const GQV& dq_, const GKV& dk_, const GKV& dv_, const Mask& mask_, double scale_)
      : AttnExtents(q_, k_), q(q_), k(k_), v(v_), dout(do_), lse(lse_), delta(delta_), dq(dq_), dk(dk_), dv(dv_),
        mask(mask_), scale(Acc(scale_)) {}
};

}  // namespace DistAttn::Impl
