// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Portable forward tile kernel: one team per (batch, query head, query tile).
// The team stages its query tile and running state in scratch, walks the K/V
// tiles the mask admits, and applies the online-softmax update of docs/design/building_block.md ("The update")
// with the empty-row guard of §1.3. State stays unnormalized between calls.
// The two products per K/V tile (Q K^T, P V) are Kokkos Kernels GEMMs
// (tile_gemm.hpp); masking and the softmax update run row by row between them.

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/attn_fwd_regtile.hpp>
#include <DistAttn/impl/attn_operands.hpp>
#include <DistAttn/impl/tile_config.hpp>
#include <DistAttn/impl/tile_gemm.hpp>
#include <DistAttn/impl/tile_loops.hpp>

namespace DistAttn::Impl {

template <class Exec, class QV, class KV, class VV, class AccV, class StatV>
struct AttnFwdUpdatePortable : AttnFwdOperands<QV, KV, VV, AccV, StatV> {
  using Base        = AttnFwdOperands<QV, KV, VV, AccV, StatV>;
  using Acc         = typename AccV::non_const_value_type;
  using policy_type = Kokkos::TeamPolicy<Exec>;
  using member_type = typename policy_type::member_type;
  using scratch_view =
      Kokkos::View<Acc*, typename Exec::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using tile_view = ScratchTile<Exec, Acc>;
  using Base::q, Base::k, Base::v, Base::acc, Base::m, Base::l, Base::mask, Base::scale;
  using Base::B, Base::Sq, Base::Sk, Base::H, Base::Hkv, Base::D, Base::group;

  static constexpr ScratchShape shape{2 /*q, acc*/, 2 /*k, v*/, 1 /*s*/, 2 /*m, l*/};

  int br = 32, bc = 32, nqt = 0, level = 0;

  using Base::Base;

  void run(const Exec& exec) {
    if (B == 0 || Sq == 0 || H == 0 || Sk == 0) return;
    if constexpr (!compat::host_accessible_v<Exec>) {
      if (run_reg_tile(exec)) return;
    }
    const std::size_t max0 = policy_type::scratch_size_max(0);
    const TileConfig cfg   = choose_tiles<Exec, Acc>(shape, D, max0);
    br    = cfg.br;
    bc    = cfg.bc;
    level = cfg.level;
    nqt   = (Sq + br - 1) / br;
    const int league = B * H * nqt;
    policy_type policy = make_policy(exec, league);
    policy.set_scratch_size(level, Kokkos::PerTeam(cfg.bytes));
    Kokkos::parallel_for("DistAttn::attention_fwd_update[Portable]", policy, *this);
  }

  // Devices, head_dim <= 128: the register-blocked kernel (attn_fwd_regtile.hpp);
  // false where it declines, and the TeamGemm kernel below runs.
  template <int BR, int BC, int MaxD, int MinTeams>
  bool run_reg(const Exec& exec) const {
    AttnFwdRegTile<Exec, QV, KV, VV, AccV, StatV, BR, BC, MaxD, MinTeams> f(*this);
    return f.run(exec);
  }
  bool run_reg_tile(const Exec& exec) const {
    if constexpr (sizeof(Acc) > 4) {
      return run_reg<16, 16, 128, 4>(exec);
    } else {
      return reg_fwd_rows_fp32(D) == 64 ? run_reg<64, 32, 64, 3>(exec) : run_reg<32, 32, 128, 4>(exec);
    }
  }

  static policy_type make_policy(const Exec& exec, int league) {
    if constexpr (compat::host_accessible_v<Exec>) {
      return policy_type(exec, league, 1);
    } else {
      return policy_type(exec, league, 128);
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const TeamTile tt = team_tile(team.league_rank(), nqt, H, br, Sq);
    const int b = tt.b, h = tt.h, hk = h / group, q0 = tt.r0, nq = tt.n;

    auto tile = [&](int rows, int cols) { return scratch_tile<Exec, Acc>(team, level, rows, cols); };

    const tile_view qs = tile(br, D);
    const tile_view as = tile(br, D);
    const tile_view ks = tile(bc, D);
    const tile_view vs = tile(bc, D);
    const tile_view ss = tile(br, bc);
    scratch_view ms(team.team_scratch(level), br);
    scratch_view ls(team.team_scratch(level), br);

    const Acc ninf = -compat::infinity<Acc>();
    const int Dl   = D;
    stage_rows<Exec>(team, qs, nq, q, b, q0, h, scale);
    stage_rows<Exec>(team, as, nq, acc, b, q0, h, Acc(1));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br), [&](int r) {
      ms(r) = r < nq ? m(b, h, q0 + r) : ninf;
      ls(r) = r < nq ? l(b, h, q0 + r) : Acc(0);
    });
    team.team_barrier();

    const std::int64_t qmax = mask.q(q0 + nq - 1);
    const std::int64_t qmin = mask.q(q0);
    const RowRange kts      = mask.key_rows(qmin, qmax, Sk).tiles(bc);
    for (int kt = kts.begin; kt < kts.end; ++kt) {
      const int k0 = kt * bc;
      const int nk = (Sk - k0) < bc ? (Sk - k0) : bc;
      const Relation rel = mask.relation_of_positions(qmin, qmax, mask.k(k0), mask.k(k0 + nk - 1));
      if (rel == Relation::Skip) continue;
      const bool elementwise = rel == Relation::Partial;

      // Padding rows of K and V are zero, so the products run on whole tiles.
      stage_rows<Exec>(team, ks, nk, k, b, k0, hk, Acc(1));
      stage_rows<Exec>(team, vs, nk, v, b, k0, hk, Acc(1));
      team.team_barrier();
      TileGemm<Exec, TileN, TileT>::invoke(team, Acc(1), qs, ks, Acc(0), ss);  // S = (scale Q) K^T
      team.team_barrier();

      // Row r of S becomes P = exp(S - m_new) and its accumulator row is rescaled
      // by alpha = exp(m_old - m_new), ready for acc += P V.
      // Columns past cmax (padding, rows past nq) get P = 0; masked scores are
      // -inf, and exp(-inf - mx) is 0 for finite mx, so the exp loop has no branch.
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br), [&](int r) {
        const int cmax = r < nq ? nk : 0;
        if (elementwise)
          for (int c = 0; c < cmax; ++c)
            if (!mask.allowed(q0 + r, k0 + c)) ss(r, c) = ninf;
        const Acc mx = row_max(&ss(r, 0), cmax, ms(r));
        for (int c = cmax; c < bc; ++c) ss(r, c) = Acc(0);
        if (mx == ninf) {  // nothing admissible yet: state stays empty
          for (int c = 0; c < cmax; ++c) ss(r, c) = Acc(0);
          for (int j = 0; j < Dl; ++j) as(r, j) = Acc(0) * as(r, j);
          return;
        }
        const Acc alpha = ms(r) == ninf ? Acc(0) : compat::math::exp(ms(r) - mx);
        Acc* pr = &ss(r, 0);
        for (int c = 0; c < cmax; ++c) pr[c] -= mx;
        exp_in_place<Exec>(pr, cmax);
        const Acc sum = row_sum<Acc>(pr, cmax);
        for (int j = 0; j < Dl; ++j) as(r, j) *= alpha;
        ls(r) = alpha * ls(r) + sum;
        ms(r) = mx;
      });
      team.team_barrier();
      TileGemm<Exec, TileN, TileN>::invoke(team, Acc(1), ss, vs, Acc(1), as);  // acc += P V
      team.team_barrier();
    }

    for_each_tile_element<Exec>(team, nq, Dl, [&](int r, int j) { acc(b, q0 + r, h, j) = as(r, j); });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](int r) {
      m(b, h, q0 + r) = ms(r);
      l(b, h, q0 + r) = ls(r);
    });
  }
};

}  // namespace DistAttn::Impl
