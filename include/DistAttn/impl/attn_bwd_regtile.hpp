// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Portable backward tile kernels for devices (head_dim <= 128, fp32 gradients): the
// two passes of attn_bwd_portable.hpp (dK and dV per key tile, then dQ per query
// tile, no atomics, bitwise reproducible), with every product register-blocked
// (tile_regs.hpp) and the gradient being accumulated held in registers for the
// team's whole walk, so scratch holds only operands.
//
// Key pass, per query tile: S = Q K^T and dP = dO V^T in registers (ScoreBlock);
// P and dS = P * (dP - Delta) go to scratch transposed, as the A operands of
// dV += P^T dO and dK += dS^T Q (RowBlock over the key rows). Query pass, per key
// tile: S and dP again, dS to scratch, dQ += dS K. The softmax scale multiplies dK
// and dQ once, when they are added to the caller's gradients.

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/attn_operands.hpp>
#include <DistAttn/impl/tile_regs.hpp>

namespace DistAttn::Impl {

/// Tile rows of the fp32 register-blocked backward at head_dim d: four [rows x d]
/// operand tiles per pass must fit Kokkos' 40,944 bytes of level-0 scratch.
/// Up to d = 64 the key pass runs 16 query x 32 key rows and the query pass
/// 32 x 16; up to 128, 16 x 16 in both.
constexpr bool reg_bwd_wide(int d) { return d <= 64; }

template <class Exec, class QV, class KV, class VV, class DOV, class LseV, class DeltaV, class GQV, class GKV, int KBR,
          int KBC, int QBR, int QBC, int MaxD>
struct AttnBwdRegTile : AttnBwdOperands<QV, KV, VV, DOV, LseV, DeltaV, GQV, GKV> {
  using Base = AttnBwdOperands<QV, KV, VV, DOV, LseV, DeltaV, GQV, GKV>;
  using Acc  = typename GQV::non_const_value_type;
  // Four teams per SM bound the registers (172 without: two teams per SM).
  using Bounds      = Kokkos::LaunchBounds<kRegTeam, 4>;
  using member_type = typename Kokkos::TeamPolicy<Exec, Bounds>::member_type;
  using Base::q, Base::k, Base::v, Base::dout, Base::lse, Base::delta, Base::dq, Base::dk, Base::dv, Base::mask,
      Base::scale;
  using Base::B, Base::Sq, Base::Sk, Base::H, Base::Hkv, Base::D, Base::group;

  struct KeyPassTag {};
  struct QueryPassTag {};

  static constexpr int kLdPT = reg_tile_ld(KBR);  // P^T, dS^T [KBC x KBR]
  static constexpr int kLdDS = reg_tile_ld(QBC);  // dS [QBR x QBC]
  using TQ = typename QV::non_const_value_type;
  using TK = typename KV::non_const_value_type;

  int width, ld;
  bool paired;  // Q, K, V and dO read two elements at a time (pairs_readable)

  explicit AttnBwdRegTile(const Base& a) : Base(a) {
    width  = reg_tile_width(D);
    ld     = reg_tile_ld(width);
    paired = pairs_readable(q) && pairs_readable(k) && pairs_readable(v) && pairs_readable(dout);
  }

  /// Scratch of a pass: four operand tiles (two of br rows, two of bc), one or two
  /// score tiles, and the per-row LSE and Delta.
  static std::size_t pass_bytes(int br, int bc, int n_score, int score_elems, int d) {
    const int l_ = reg_tile_ld(reg_tile_width(d));
    return 2 * reg_scratch_bytes<Acc>(std::size_t(br) * l_) + 2 * reg_scratch_bytes<Acc>(std::size_t(bc) * l_) +
           std::size_t(n_score) * reg_scratch_bytes<Acc>(score_elems) + 2 * reg_scratch_bytes<Acc>(br);
  }
  static std::size_t key_bytes(int d) { return pass_bytes(KBR, KBC, 2, KBC * kLdPT, d); }
  static std::size_t query_bytes(int d) { return pass_bytes(QBR, QBC, 1, QBR * kLdDS, d); }

  /// Both passes, or false (nothing launched) where the backend cannot give a team
  /// kRegTeam threads and the scratch on chip.
  bool run(const Exec& exec) {
    if (D > MaxD) return false;
    const std::size_t max0 = Kokkos::TeamPolicy<Exec>::scratch_size_max(0);
    if (key_bytes(D) > max0 || query_bytes(D) > max0) return false;
    const int nkt = (Sk + KBC - 1) / KBC, nqt = (Sq + QBR - 1) / QBR;
    Kokkos::TeamPolicy<Exec, KeyPassTag, Bounds> kp(exec, B * Hkv * nkt, kRegTeam);
    Kokkos::TeamPolicy<Exec, QueryPassTag, Bounds> qp(exec, B * H * nqt, kRegTeam);
    kp.set_scratch_size(0, Kokkos::PerTeam(key_bytes(D)));
    qp.set_scratch_size(0, Kokkos::PerTeam(query_bytes(D)));
    if (kp.team_size_max(*this, Kokkos::ParallelForTag()) < kRegTeam ||
        qp.team_size_max(*this, Kokkos::ParallelForTag()) < kRegTeam)
      return false;
    Kokkos::parallel_for("DistAttn::attention_bwd_dkdv[Portable]", kp, *this);
    Kokkos::parallel_for("DistAttn::attention_bwd_dq[Portable]", qp, *this);
    return true;
  }

  /// LSE and Delta of rows q0 .. q0 + nq of head h (-inf and 0 past nq).
  KOKKOS_INLINE_FUNCTION void stage_row_stats(const member_type& team, int br, Acc* lses, Acc* dels, int b, int h,
                                              int q0, int nq) const {
    for (int r = team.team_rank(); r < br; r += team.team_size()) {
      lses[r] = r < nq ? Acc(lse(b, h, q0 + r)) : -compat::infinity<Acc>();
      dels[r] = r < nq ? Acc(delta(b, h, q0 + r)) : Acc(0);
    }
  }

  /// P and dS of the thread's score block for query rows q0.. and key rows k0..,
  /// handed to put(row, col, p, ds); masked, padded and empty-row (LSE = -inf)
  /// entries give 0.
  template <int BR, int BC, class Put>
  KOKKOS_INLINE_FUNCTION void probs_and_dscores(const ScoreBlock<BR, BC>& sb, const Acc* qs, const Acc* dos,
                                                const Acc* ks, const Acc* vs, const Acc* lses, const Acc* dels,
                                                int q0, int nq, int k0, int nk, bool elementwise,
                                                const Put& put) const {
    constexpr int TR = ScoreBlock<BR, BC>::TR, TC = ScoreBlock<BR, BC>::TC;
    Acc s[TR][TC], dp[TR][TC];
    if (width == MaxD)
      sb.template product2<MaxD>(s, qs, ks, dp, dos, vs, ld, width);
    else
      sb.product2(s, qs, ks, dp, dos, vs, ld, width);
    const Acc ninf = -compat::infinity<Acc>();
    for (int i = 0; i < TR; ++i) {
      const int r  = sb.row(i);
      const Acc lr = lses[r], dr = dels[r];
      for (int j = 0; j < TC; ++j) {
        const int c      = sb.col(j);
        const bool valid = r < nq && c < nk && lr != ninf && !(elementwise && !mask.allowed(q0 + r, k0 + c));
        const Acc p      = valid ? compat::math::exp(s[i][j] * scale - lr) : Acc(0);
        put(r, c, p, p * (dp[i][j] - dr));
      }
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(KeyPassTag, const member_type& team) const {
    const int nkt = (Sk + KBC - 1) / KBC;
    const TeamTile tt = team_tile(team.league_rank(), nkt, Hkv, KBC, Sk);
    const int b = tt.b, hk = tt.h, k0 = tt.r0, nk = tt.n;

    Acc* ks   = reg_scratch<Acc>(team, 0, KBC * ld);
    Acc* vs   = reg_scratch<Acc>(team, 0, KBC * ld);
    Acc* qs   = reg_scratch<Acc>(team, 0, KBR * ld);
    Acc* dos  = reg_scratch<Acc>(team, 0, KBR * ld);
    Acc* pt   = reg_scratch<Acc>(team, 0, KBC * kLdPT);
    Acc* dst  = reg_scratch<Acc>(team, 0, KBC * kLdPT);
    Acc* lses = reg_scratch<Acc>(team, 0, KBR);
    Acc* dels = reg_scratch<Acc>(team, 0, KBR);

    const ScoreBlock<KBR, KBC> sb(team.team_rank());
    const RowBlock<KBC> rb(team.team_rank());
    constexpr int OR = RowBlock<KBC>::OR, OC = RowBlock<KBC>::OC;
    Acc gk[OR][OC] = {}, gv[OR][OC] = {};

    {
      TileLoader<TK, loader_pairs(KBC, MaxD)> lk, lv;
      lk.load(team, k, paired, nk, width, D, b, k0, hk);
      lv.load(team, v, paired, nk, width, D, b, k0, hk);
      lk.store(team, ks, ld, KBC, width, Acc(1));
      lv.store(team, vs, ld, KBC, width, Acc(1));
    }
    const std::int64_t kmin = mask.k(k0), kmax = mask.k(k0 + nk - 1);
    // The query tiles that see this key tile are a range (positions grow with the
    // index); the team walks them for every head of the group, loading the next
    // tile's Q and dO during the current tile's products.
    const RowRange qts = mask.query_rows(kmin, kmax, Sq).tiles(KBR);
    const int qt0 = qts.begin, per_head = qts.end - qts.begin, n_tiles = group * per_head;
    auto q0_of = [&](int t) { return (qt0 + t % per_head) * KBR; };
    auto h_of  = [&](int t) { return hk * group + t / per_head; };
    auto nq_of = [&](int t) { return (Sq - q0_of(t)) < KBR ? (Sq - q0_of(t)) : KBR; };
    TileLoader<TQ, loader_pairs(KBR, MaxD)> lq, ldo;
    if (n_tiles > 0) {
      lq.load(team, q, paired, nq_of(0), width, D, b, q0_of(0), h_of(0));
      ldo.load(team, dout, paired, nq_of(0), width, D, b, q0_of(0), h_of(0));
    }
    for (int t = 0; t < n_tiles; ++t) {
      const int h = h_of(t), q0 = q0_of(t), nq = nq_of(t);
      const bool elementwise =
          mask.relation_of_positions(mask.q(q0), mask.q(q0 + nq - 1), kmin, kmax) == Relation::Partial;
      team.team_barrier();  // the previous tile's products are done with Q, dO, P^T, dS^T
      lq.store(team, qs, ld, KBR, width, Acc(1));
      ldo.store(team, dos, ld, KBR, width, Acc(1));
      stage_row_stats(team, KBR, lses, dels, b, h, q0, nq);
      if (t + 1 < n_tiles) {
        lq.load(team, q, paired, nq_of(t + 1), width, D, b, q0_of(t + 1), h_of(t + 1));
        ldo.load(team, dout, paired, nq_of(t + 1), width, D, b, q0_of(t + 1), h_of(t + 1));
      }
      team.team_barrier();
      probs_and_dscores(sb, qs, dos, ks, vs, lses, dels, q0, nq, k0, nk, elementwise,
                        [&](int r, int c, Acc p, Acc ds) {
                          pt[c * kLdPT + r]  = p;
                          dst[c * kLdPT + r] = ds;
                        });
      team.team_barrier();
      rb.template product2<KBR>(gv, pt, dos, gk, dst, qs, kLdPT, ld, width);  // dV += P^T dO, dK += dS^T Q
    }
    for (int i = 0; i < OR; ++i)
      for (int x = 0; x < OC; ++x) {
        const int c = rb.row(i), j = rb.col(x / 4, x % 4);
        if (c < nk && j < D) {
          dk(b, k0 + c, hk, j) += scale * gk[i][x];
          dv(b, k0 + c, hk, j) += gv[i][x];
        }
      }
  }

  KOKKOS_INLINE_FUNCTION void operator()(QueryPassTag, const member_type& team) const {
    const int nqt = (Sq + QBR - 1) / QBR;
    const TeamTile tt = team_tile(team.league_rank(), nqt, H, QBR, Sq);
    const int b = tt.b, h = tt.h, hk = h / group, q0 = tt.r0, nq = tt.n;

    Acc* qs   = reg_scratch<Acc>(team, 0, QBR * ld);
    Acc* dos  = reg_scratch<Acc>(team, 0, QBR * ld);
    Acc* ks   = reg_scratch<Acc>(team, 0, QBC * ld);
    Acc* vs   = reg_scratch<Acc>(team, 0, QBC * ld);
    Acc* dss  = reg_scratch<Acc>(team, 0, QBR * kLdDS);
    Acc* lses = reg_scratch<Acc>(team, 0, QBR);
    Acc* dels = reg_scratch<Acc>(team, 0, QBR);

    const ScoreBlock<QBR, QBC> sb(team.team_rank());
    const RowBlock<QBR> rb(team.team_rank());
    constexpr int OR = RowBlock<QBR>::OR, OC = RowBlock<QBR>::OC;
    Acc gq[OR][OC] = {};

    {
      TileLoader<TQ, loader_pairs(QBR, MaxD)> lq, ldo;
      lq.load(team, q, paired, nq, width, D, b, q0, h);
      ldo.load(team, dout, paired, nq, width, D, b, q0, h);
      lq.store(team, qs, ld, QBR, width, Acc(1));
      ldo.store(team, dos, ld, QBR, width, Acc(1));
    }
    stage_row_stats(team, QBR, lses, dels, b, h, q0, nq);
    const std::int64_t qmin = mask.q(q0), qmax = mask.q(q0 + nq - 1);
    // The key tiles this query tile sees are a range; the next one's K and V load
    // during the current one's products.
    const RowRange kts = mask.key_rows(qmin, qmax, Sk).tiles(QBC);
    auto admitted      = [&](int kt) { return kt < kts.end; };
    auto rows_of       = [&](int kt) { return (Sk - kt * QBC) < QBC ? (Sk - kt * QBC) : QBC; };
    TileLoader<TK, loader_pairs(QBC, MaxD)> lk, lv;
    if (admitted(kts.begin)) {
      lk.load(team, k, paired, rows_of(kts.begin), width, D, b, kts.begin * QBC, hk);
      lv.load(team, v, paired, rows_of(kts.begin), width, D, b, kts.begin * QBC, hk);
    }
    for (int kt = kts.begin; admitted(kt); ++kt) {
      const int k0 = kt * QBC;
      const int nk = rows_of(kt);
      const bool elementwise =
          mask.relation_of_positions(qmin, qmax, mask.k(k0), mask.k(k0 + nk - 1)) == Relation::Partial;
      team.team_barrier();  // the previous tile's product is done with K and dS
      lk.store(team, ks, ld, QBC, width, Acc(1));
      lv.store(team, vs, ld, QBC, width, Acc(1));
      if (admitted(kt + 1)) {
        lk.load(team, k, paired, rows_of(kt + 1), width, D, b, k0 + QBC, hk);
        lv.load(team, v, paired, rows_of(kt + 1), width, D, b, k0 + QBC, hk);
      }
      team.team_barrier();
      probs_and_dscores(sb, qs, dos, ks, vs, lses, dels, q0, nq, k0, nk, elementwise,
                        [&](int r, int c, Acc, Acc ds) { dss[r * kLdDS + c] = ds; });
      team.team_barrier();
      rb.template product<QBC>(gq, dss, kLdDS, ks, ld, width);  // dQ += dS K
    }
    for (int i = 0; i < OR; ++i)
      for (int x = 0; x < OC; ++x) {
        const int r = rb.row(i), j = rb.col(x / 4, x % 4);
        if (r < nq && j < D) dq(b, q0 + r, h, j) += scale * gq[i][x];
      }
  }
};

}  // namespace DistAttn::Impl
