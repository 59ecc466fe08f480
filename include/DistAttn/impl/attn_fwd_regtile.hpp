// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Portable forward tile kernel for devices (head_dim <= 128): one team of kRegTeam
// threads per (batch, query head, query tile), the same online-softmax update as
// attn_fwd_portable.hpp, with both products register-blocked (tile_regs.hpp).
//
// The accumulator rows live in registers (RowBlock's layout) for the team's whole
// walk over the key tiles, so scratch holds only the operands: Q, one tile that is K
// and then V, and P. That is what lets a 32-row fp32 tile fit Kokkos' level-0
// scratch at d = 128, against 16 rows when the accumulator was staged too.
//
// Per key tile: stage K; S = Q K^T in registers (ScoreBlock), masked; the row
// maxima through scratch (each row's maximum is split over the 8 threads of its
// score block); P = exp(S - m) to scratch, the accumulator rows rescaled; stage V
// over K; acc += P V. Row sums stay per thread until the end of the tile, where the
// thread that owns the row's statistics adds them up.

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/attn_operands.hpp>
#include <DistAttn/impl/tile_regs.hpp>

namespace DistAttn::Impl {

/// Query rows per team of the fp32 register-blocked forward (32 key rows): 64 up to
/// d = 64 (more reuse of each staged K/V row), 32 up to 128, what fits Kokkos'
/// 40,944 bytes of level-0 scratch per team. fp64 runs 16 x 16 in the same scratch.
constexpr int reg_fwd_rows_fp32(int d) { return d <= 64 ? 64 : 32; }

template <class Exec, class QV, class KV, class VV, class AccV, class StatV, int BR, int BC, int MaxD, int MinTeams>
struct AttnFwdRegTile : AttnFwdOperands<QV, KV, VV, AccV, StatV> {
  using Base        = AttnFwdOperands<QV, KV, VV, AccV, StatV>;
  using Acc         = typename AccV::non_const_value_type;
  // MinTeams per SM bounds the registers: without it the unrolled products took 255 and
  // two teams (8 warps) per SM, too few to hide the barriers and the loads.
  using policy_type = Kokkos::TeamPolicy<Exec, Kokkos::LaunchBounds<kRegTeam, MinTeams>>;
  using member_type = typename policy_type::member_type;
  using SB          = ScoreBlock<BR, BC>;
  using RB          = RowBlock<BR>;
  using Base::q, Base::k, Base::v, Base::acc, Base::m, Base::l, Base::mask, Base::scale;
  using Base::B, Base::Sq, Base::Sk, Base::H, Base::D, Base::group;
  static constexpr int TR = SB::TR, TC = SB::TC, OR = RB::OR, OC = RB::OC;
  static constexpr int kLdP = reg_tile_ld(BC);
  using QLoader  = TileLoader<typename QV::non_const_value_type, loader_pairs(BR, MaxD)>;
  using KVLoader = TileLoader<typename KV::non_const_value_type, loader_pairs(BC, MaxD)>;

  int width, ld, nqt;
  bool paired;  // Q, K and V read two elements at a time (pairs_readable)

  explicit AttnFwdRegTile(const Base& a) : Base(a) {
    width  = reg_tile_width(D);
    ld     = reg_tile_ld(width);
    nqt    = (Sq + BR - 1) / BR;
    paired = pairs_readable(q) && pairs_readable(k) && pairs_readable(v);
  }

  /// Team scratch: Q [BR x ld], K then V [BC x ld], P [BR x kLdP], two [BR x 8]
  /// partial-row arrays, the row maximum and sum.
  static std::size_t scratch_bytes(int d) {
    const int l_ = reg_tile_ld(reg_tile_width(d));
    return reg_scratch_bytes<Acc>(std::size_t(BR) * l_) + reg_scratch_bytes<Acc>(std::size_t(BC) * l_) +
           reg_scratch_bytes<Acc>(std::size_t(BR) * kLdP) + 2 * reg_scratch_bytes<Acc>(std::size_t(BR) * 8) +
           2 * reg_scratch_bytes<Acc>(BR);
  }

  /// Launches the kernel; false (nothing launched) where the backend cannot give a
  /// team kRegTeam threads and the scratch on chip.
  bool run(const Exec& exec) {
    const std::size_t bytes = scratch_bytes(D);
    if (D > MaxD || bytes > policy_type::scratch_size_max(0)) return false;
    policy_type policy(exec, B * H * nqt, kRegTeam);
    policy.set_scratch_size(0, Kokkos::PerTeam(bytes));
    if (policy.team_size_max(*this, Kokkos::ParallelForTag()) < kRegTeam) return false;
    Kokkos::parallel_for("DistAttn::attention_fwd_update[Portable]", policy, *this);
    return true;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const TeamTile tt = team_tile(team.league_rank(), nqt, H, BR, Sq);
    const int b = tt.b, h = tt.h, hk = h / group, q0 = tt.r0, nq = tt.n;
    const int tid = team.team_rank();

    Acc* qs   = reg_scratch<Acc>(team, 0, BR * ld);
    Acc* kvs  = reg_scratch<Acc>(team, 0, BC * ld);
    Acc* ps   = reg_scratch<Acc>(team, 0, BR * kLdP);
    Acc* pmax = reg_scratch<Acc>(team, 0, BR * 8);
    Acc* psum = reg_scratch<Acc>(team, 0, BR * 8);
    Acc* ms   = reg_scratch<Acc>(team, 0, BR);
    Acc* ls   = reg_scratch<Acc>(team, 0, BR);

    const Acc ninf = -compat::infinity<Acc>();
    const SB sb(tid);
    const RB rb(tid);

    {
      QLoader lq;
      lq.load(team, q, paired, nq, width, D, b, q0, h);
      lq.store(team, qs, ld, BR, width, scale);
    }
    Acc o[OR][OC];
    for (int i = 0; i < OR; ++i)
      for (int x = 0; x < OC; ++x) {
        const int r = rb.row(i), j = rb.col(x / 4, x % 4);
        o[i][x] = r < nq && j < D ? acc(b, q0 + r, h, j) : Acc(0);
      }
    if (tid < BR) {
      ms[tid] = tid < nq ? m(b, h, q0 + tid) : ninf;
      ls[tid] = tid < nq ? l(b, h, q0 + tid) : Acc(0);
    }

    const std::int64_t qmax = mask.q(q0 + nq - 1);
    const std::int64_t qmin = mask.q(q0);
    // The key tiles the mask admits are a range (positions grow with the index); the
    // next tile's K loads during the current one's products.
    const RowRange kts = mask.key_rows(qmin, qmax, Sk).tiles(BC);
    auto admitted      = [&](int kt) { return kt < kts.end; };
    auto rows_of       = [&](int kt) { return (Sk - kt * BC) < BC ? (Sk - kt * BC) : BC; };
    KVLoader lkv;
    if (admitted(kts.begin)) lkv.load(team, k, paired, rows_of(kts.begin), width, D, b, kts.begin * BC, hk);
    for (int kt = kts.begin; admitted(kt); ++kt) {
      const int k0 = kt * BC;
      const int nk = rows_of(kt);
      const bool elementwise =
          mask.relation_of_positions(qmin, qmax, mask.k(k0), mask.k(k0 + nk - 1)) == Relation::Partial;

      team.team_barrier();  // the previous P V is done with P and V
      lkv.store(team, kvs, ld, BC, width, Acc(1));
      lkv.load(team, v, paired, nk, width, D, b, k0, hk);  // lands during S and the softmax
      team.team_barrier();

      Acc s[TR][TC];
      if (width == MaxD)
        sb.template product<MaxD>(s, qs, ld, kvs, ld, width);  // (scale Q) K^T
      else
        sb.product(s, qs, ld, kvs, ld, width);
      for (int i = 0; i < TR; ++i) {
        const int r = sb.row(i);
        Acc mx      = ninf;
        for (int j = 0; j < TC; ++j) {
          const int c = sb.col(j);
          if (c >= nk || (elementwise && !mask.allowed(q0 + r, k0 + c))) s[i][j] = ninf;
          mx = s[i][j] > mx ? s[i][j] : mx;
        }
        pmax[r * 8 + sb.c0] = mx;
      }
      team.team_barrier();

      // The new maximum of row r, from the old one and the 8 partial maxima.
      auto row_max_of = [&](int r) {
        Acc mx = ms[r];
        for (int g = 0; g < 8; ++g) mx = pmax[r * 8 + g] > mx ? pmax[r * 8 + g] : mx;
        return mx;
      };
      // exp(m_old - m_new); 0 from an empty state (m_old = -inf), and for a row that
      // is still empty (m_new = -inf), whose accumulator row becomes 0 * itself.
      auto rescale_of = [&](int r, Acc mx) {
        return (mx == ninf || ms[r] == ninf) ? Acc(0) : compat::math::exp(ms[r] - mx);
      };
      for (int i = 0; i < TR; ++i) {
        const int r  = sb.row(i);
        const Acc mx = row_max_of(r);
        Acc sum      = Acc(0);
        for (int j = 0; j < TC; ++j) {
          const Acc p = mx == ninf ? Acc(0) : compat::math::exp(s[i][j] - mx);
          ps[r * kLdP + sb.col(j)] = p;
          sum += p;
        }
        psum[r * 8 + sb.c0] = sum;
      }
      for (int i = 0; i < OR; ++i) {
        const int r     = rb.row(i);
        const Acc alpha = rescale_of(r, row_max_of(r));
        for (int x = 0; x < OC; ++x) o[i][x] *= alpha;
      }
      team.team_barrier();  // K, the old maxima and the partial maxima read; P written

      if (tid < BR) {
        const Acc mx = row_max_of(tid);
        if (mx != ninf) {  // a row with nothing admissible yet keeps its empty state
          Acc sum = Acc(0);
          for (int g = 0; g < 8; ++g) sum += psum[tid * 8 + g];
          ls[tid] = rescale_of(tid, mx) * ls[tid] + sum;
          ms[tid] = mx;
        }
      }
      lkv.store(team, kvs, ld, BC, width, Acc(1));
      if (admitted(kt + 1)) lkv.load(team, k, paired, rows_of(kt + 1), width, D, b, k0 + BC, hk);  // lands during P V
      team.team_barrier();
      rb.template product<BC>(o, ps, kLdP, kvs, ld, width);  // acc += P V
    }

    for (int i = 0; i < OR; ++i)
      for (int x = 0; x < OC; ++x) {
        const int r = rb.row(i), j = rb.col(x / 4, x % 4);
        if (r < nq && j < D) acc(b, q0 + r, h, j) = o[i][x];
      }
    if (tid < nq) {  // the thread that kept row tid's statistics
      m(b, h, q0 + tid) = ms[tid];
      l(b, h, q0 + tid) = ls[tid];
    }
  }
};

}  // namespace DistAttn::Impl
