// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Portable backward tile kernels (docs/design/building_block.md, Definitions), accumulating into fp32 gradients.
//
// Two passes instead of FlashAttention-2's atomic dQ: pass 1 has one team per
// (batch, KV head, key tile) and owns dK/dV of that tile outright (looping over
// the query heads of its GQA group, so the group reduction is free); pass 2 has
// one team per (batch, query head, query tile) and owns dQ. Both recompute P from
// LSE. The cost is one extra Q K^T product per block; the gain is results that are
// bitwise reproducible on every backend and no atomics. Every product is a Kokkos
// Kernels GEMM on whole scratch tiles (tile_gemm.hpp); padding rows are zero.

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/attn_bwd_regtile.hpp>
#include <DistAttn/impl/attn_operands.hpp>
#include <DistAttn/impl/tile_config.hpp>
#include <DistAttn/impl/tile_gemm.hpp>
#include <DistAttn/impl/tile_loops.hpp>

namespace DistAttn::Impl {

template <class Exec, class QV, class KV, class VV, class DOV, class LseV, class DeltaV, class GQV, class GKV>
struct AttnBwdPortable : AttnBwdOperands<QV, KV, VV, DOV, LseV, DeltaV, GQV, GKV> {
  using Base        = AttnBwdOperands<QV, KV, VV, DOV, LseV, DeltaV, GQV, GKV>;
  using Acc         = typename GQV::non_const_value_type;
  using policy_type = Kokkos::TeamPolicy<Exec>;
  using member_type = typename policy_type::member_type;
  using scratch_view =
      Kokkos::View<Acc*, typename Exec::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using tile_view = ScratchTile<Exec, Acc>;
  using Base::q, Base::k, Base::v, Base::dout, Base::lse, Base::delta, Base::dq, Base::dk, Base::dv, Base::mask,
      Base::scale;
  using Base::B, Base::Sq, Base::Sk, Base::H, Base::Hkv, Base::D, Base::group;

  struct KeyPassTag {};
  struct QueryPassTag {};
  // Key pass: q, dO tiles [br x d]; k, v, dk, dv tiles [bc x d]; p, ds [br x bc]; lse, delta.
  static constexpr ScratchShape key_shape{2, 4, 2, 2};
  // Query pass: q, dO, dq tiles [br x d]; k, v tiles [bc x d]; s/p, ds [br x bc]; lse, delta.
  static constexpr ScratchShape query_shape{3, 2, 2, 2};

  int br = 32, bc = 32, level = 0, nqt = 0, nkt = 0;

  using Base::Base;

  static int team_size() {
    if constexpr (compat::host_accessible_v<Exec>) return 1;
    else return 128;
  }

  void run(const Exec& exec) {
    if (B == 0 || Sq == 0 || H == 0 || Sk == 0) return;
    if constexpr (!compat::host_accessible_v<Exec> && sizeof(Acc) == 4) {
      if (run_reg_tile(exec)) return;
    }
    const std::size_t max0 = policy_type::scratch_size_max(0);
    {
      const TileConfig cfg = choose_tiles<Exec, Acc>(key_shape, D, max0);
      br = cfg.br;
      bc = cfg.bc;
      level = cfg.level;
      nqt = (Sq + br - 1) / br;
      nkt = (Sk + bc - 1) / bc;
      Kokkos::TeamPolicy<Exec, KeyPassTag> policy(exec, B * Hkv * nkt, team_size());
      policy.set_scratch_size(level, Kokkos::PerTeam(cfg.bytes));
      Kokkos::parallel_for("DistAttn::attention_bwd_dkdv[Portable]", policy, *this);
    }
    {
      const TileConfig cfg = choose_tiles<Exec, Acc>(query_shape, D, max0);
      br = cfg.br;
      bc = cfg.bc;
      level = cfg.level;
      nqt = (Sq + br - 1) / br;
      nkt = (Sk + bc - 1) / bc;
      Kokkos::TeamPolicy<Exec, QueryPassTag> policy(exec, B * H * nqt, team_size());
      policy.set_scratch_size(level, Kokkos::PerTeam(cfg.bytes));
      Kokkos::parallel_for("DistAttn::attention_bwd_dq[Portable]", policy, *this);
    }
  }

  // Devices, fp32 gradients, head_dim <= 128: the register-blocked kernels
  // (attn_bwd_regtile.hpp); false where they decline, and the TeamGemm kernels below
  // run (and for fp64, whose operand tiles would not fit at 16 rows).
  template <int KBR, int KBC, int QBR, int QBC, int MaxD>
  bool run_reg(const Exec& exec) const {
    AttnBwdRegTile<Exec, QV, KV, VV, DOV, LseV, DeltaV, GQV, GKV, KBR, KBC, QBR, QBC, MaxD> f(*this);
    return f.run(exec);
  }
  bool run_reg_tile(const Exec& exec) const {
    return reg_bwd_wide(D) ? run_reg<16, 32, 32, 16, 64>(exec) : run_reg<16, 16, 16, 16, 128>(exec);
  }

  // P = exp(scale Q K^T - LSE) into ps and dS = P * (dO V^T - Delta) into dss,
  // with masked or padded entries and empty rows (LSE = -inf) giving 0.
  KOKKOS_INLINE_FUNCTION void probs_and_dscores(const member_type& team, const tile_view& qs,
                                                const tile_view& dos, const tile_view& ks, const tile_view& vs,
                                                const scratch_view& lses, const scratch_view& dels,
                                                const tile_view& ps, const tile_view& dss, int q0, int nq, int k0,
                                                int nk, bool elementwise) const {
    TileGemm<Exec, TileN, TileT>::invoke(team, Acc(1), qs, ks, Acc(0), ps);
    TileGemm<Exec, TileN, TileT>::invoke(team, Acc(1), dos, vs, Acc(0), dss);
    team.team_barrier();
    const Acc ninf = -compat::infinity<Acc>();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br), [&](int r) {
      const int cmax = r < nq && lses(r) != ninf ? nk : 0;
      const Acc lr = lses(r), dr = dels(r);
      Acc* pr      = &ps(r, 0);
      Acc* dsr     = &dss(r, 0);
      for (int c = 0; c < cmax; ++c) pr[c] = pr[c] * scale - lr;
      exp_in_place<Exec>(pr, cmax);
      for (int c = 0; c < cmax; ++c) dsr[c] = pr[c] * (dsr[c] - dr);
      if (elementwise)
        for (int c = 0; c < cmax; ++c)
          if (!mask.allowed(q0 + r, k0 + c)) ps(r, c) = dss(r, c) = Acc(0);
      for (int c = cmax; c < bc; ++c) ps(r, c) = dss(r, c) = Acc(0);
    });
  }

  KOKKOS_INLINE_FUNCTION void load_query_side(const member_type& team, const tile_view& qs, const tile_view& dos,
                                              const scratch_view& lses, const scratch_view& dels, int b, int h,
                                              int q0, int nq) const {
    stage_rows<Exec>(team, qs, nq, q, b, q0, h, Acc(1));
    stage_rows<Exec>(team, dos, nq, dout, b, q0, h, Acc(1));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br), [&](int r) {
      lses(r) = r < nq ? Acc(lse(b, h, q0 + r)) : -compat::infinity<Acc>();
      dels(r) = r < nq ? Acc(delta(b, h, q0 + r)) : Acc(0);
    });
  }

  KOKKOS_INLINE_FUNCTION void load_key_side(const member_type& team, const tile_view& ks, const tile_view& vs,
                                            int b, int hk, int k0, int nk) const {
    stage_rows<Exec>(team, ks, nk, k, b, k0, hk, Acc(1));
    stage_rows<Exec>(team, vs, nk, v, b, k0, hk, Acc(1));
  }

  KOKKOS_INLINE_FUNCTION void operator()(KeyPassTag, const member_type& team) const {
    const TeamTile tt = team_tile(team.league_rank(), nkt, Hkv, bc, Sk);
    const int b = tt.b, hk = tt.h, k0 = tt.r0, nk = tt.n;
    const int Dl  = D;

    auto tile = [&](int rows, int cols) { return scratch_tile<Exec, Acc>(team, level, rows, cols); };

    const tile_view qs = tile(br, D), dos = tile(br, D);
    const tile_view ks = tile(bc, D), vs = tile(bc, D);
    const tile_view dks = tile(bc, D), dvs = tile(bc, D);
    const tile_view ps = tile(br, bc), dss = tile(br, bc);
    scratch_view lses(team.team_scratch(level), br), dels(team.team_scratch(level), br);

    load_key_side(team, ks, vs, b, hk, k0, nk);
    for_each_tile_element<Exec>(team, bc, Dl, [&](int c, int j) {
      dks(c, j) = Acc(0);
      dvs(c, j) = Acc(0);
    });
    const std::int64_t kmin = mask.k(k0), kmax = mask.k(k0 + nk - 1);
    const RowRange qts      = mask.query_rows(kmin, kmax, Sq).tiles(br);

    for (int g = 0; g < group; ++g) {
      const int h = hk * group + g;
      for (int qt = qts.begin; qt < qts.end; ++qt) {
        const int q0 = qt * br;
        const int nq = (Sq - q0) < br ? (Sq - q0) : br;
        const Relation rel = mask.relation_of_positions(mask.q(q0), mask.q(q0 + nq - 1), kmin, kmax);
        if (rel == Relation::Skip) continue;
        const bool elementwise = rel == Relation::Partial;
        team.team_barrier();
        load_query_side(team, qs, dos, lses, dels, b, h, q0, nq);
        team.team_barrier();
        probs_and_dscores(team, qs, dos, ks, vs, lses, dels, ps, dss, q0, nq, k0, nk, elementwise);
        team.team_barrier();
        TileGemm<Exec, TileT, TileN>::invoke(team, Acc(1), ps, dos, Acc(1), dvs);   // dV += P^T dO
        TileGemm<Exec, TileT, TileN>::invoke(team, scale, dss, qs, Acc(1), dks);    // dK += scale dS^T Q
      }
    }
    team.team_barrier();
    for_each_tile_element<Exec>(team, nk, Dl, [&](int c, int j) {
      dk(b, k0 + c, hk, j) += dks(c, j);
      dv(b, k0 + c, hk, j) += dvs(c, j);
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(QueryPassTag, const member_type& team) const {
    const TeamTile tt = team_tile(team.league_rank(), nqt, H, br, Sq);
    const int b = tt.b, h = tt.h, hk = h / group, q0 = tt.r0, nq = tt.n;
    const int Dl  = D;

    auto tile = [&](int rows, int cols) { return scratch_tile<Exec, Acc>(team, level, rows, cols); };

    const tile_view qs = tile(br, D), dos = tile(br, D), dqs = tile(br, D);
    const tile_view ks = tile(bc, D), vs = tile(bc, D);
    const tile_view ps = tile(br, bc), dss = tile(br, bc);
    scratch_view lses(team.team_scratch(level), br), dels(team.team_scratch(level), br);

    load_query_side(team, qs, dos, lses, dels, b, h, q0, nq);
    for_each_tile_element<Exec>(team, br, Dl, [&](int r, int j) { dqs(r, j) = Acc(0); });

    const std::int64_t qmin = mask.q(q0), qmax = mask.q(q0 + nq - 1);
    const RowRange kts      = mask.key_rows(qmin, qmax, Sk).tiles(bc);
    for (int kt = kts.begin; kt < kts.end; ++kt) {
      const int k0 = kt * bc;
      const int nk = (Sk - k0) < bc ? (Sk - k0) : bc;
      const Relation rel = mask.relation_of_positions(qmin, qmax, mask.k(k0), mask.k(k0 + nk - 1));
      if (rel == Relation::Skip) continue;
      const bool elementwise = rel == Relation::Partial;
      team.team_barrier();
      load_key_side(team, ks, vs, b, hk, k0, nk);
      team.team_barrier();
      probs_and_dscores(team, qs, dos, ks, vs, lses, dels, ps, dss, q0, nq, k0, nk, elementwise);
      team.team_barrier();
      TileGemm<Exec, TileN, TileN>::invoke(team, scale, dss, ks, Acc(1), dqs);  // dQ += scale dS K
    }
    team.team_barrier();
    for_each_tile_element<Exec>(team, nq, Dl, [&](int r, int j) {
      dq(b, q0 + r, h, j) += dqs(r, j);
    });
  }
};

}  // namespace DistAttn::Impl
