#pragma once
// Portable forward tile kernel: one team per (batch, query head, query tile).
// The team stages its query tile and running state in scratch, walks the K/V
// tiles the mask admits, and applies the online-softmax update of SPEC §1.4
// with the empty-row guard of §1.3. State stays unnormalized between calls.

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/tile_config.hpp>

namespace DistAttn::Impl {

template <class Exec, class QV, class KV, class VV, class AccV, class StatV>
struct AttnFwdUpdatePortable {
  using Acc         = typename AccV::non_const_value_type;
  using policy_type = Kokkos::TeamPolicy<Exec>;
  using member_type = typename policy_type::member_type;
  using scratch_view =
      Kokkos::View<Acc*, typename Exec::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  static constexpr ScratchShape shape{2 /*q, acc*/, 2 /*k, v*/, 1 /*s*/, 3 /*m, l, alpha*/};

  QV q;
  KV k;
  VV v;
  AccV acc;
  StatV m, l;
  Mask mask;
  Acc scale;
  int B, Sq, Sk, H, Hkv, D, group, br, bc, nqt, level;

  AttnFwdUpdatePortable(const QV& q_, const KV& k_, const VV& v_, const AccV& acc_, const StatV& m_,
                        const StatV& l_, const Mask& mask_, double scale_)
      : q(q_), k(k_), v(v_), acc(acc_), m(m_), l(l_), mask(mask_), scale(Acc(scale_)) {
    B     = int(q.extent(0));
    Sq    = int(q.extent(1));
    H     = int(q.extent(2));
    D     = int(q.extent(3));
    Sk    = int(k.extent(1));
    Hkv   = int(k.extent(2));
    group = H / Hkv;
  }

  void run(const Exec& exec) {
    if (B == 0 || Sq == 0 || H == 0 || Sk == 0) return;
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

  static policy_type make_policy(const Exec& exec, int league) {
    if constexpr (compat::host_accessible_v<Exec>) {
      return policy_type(exec, league, 1);
    } else {
      return policy_type(exec, league, 128);
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int lid = team.league_rank();
    const int qt  = lid % nqt;
    const int h   = (lid / nqt) % H;
    const int b   = lid / (nqt * H);
    const int hk  = h / group;
    const int q0  = qt * br;
    const int nq  = (Sq - q0) < br ? (Sq - q0) : br;

    scratch_view qs(team.team_scratch(level), br * D);
    scratch_view as(team.team_scratch(level), br * D);
    scratch_view ks(team.team_scratch(level), bc * D);
    scratch_view vs(team.team_scratch(level), bc * D);
    scratch_view ss(team.team_scratch(level), br * bc);
    scratch_view ms(team.team_scratch(level), br);
    scratch_view ls(team.team_scratch(level), br);
    scratch_view al(team.team_scratch(level), br);

    const Acc ninf = -compat::infinity<Acc>();
    const int Dl   = D;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br * Dl), [&](int idx) {
      const int r = idx / Dl, j = idx % Dl;
      if (r < nq) {
        qs(idx) = Acc(q(b, q0 + r, h, j)) * scale;
        as(idx) = acc(b, q0 + r, h, j);
      } else {
        qs(idx) = Acc(0);
        as(idx) = Acc(0);
      }
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br), [&](int r) {
      ms(r) = r < nq ? m(b, h, q0 + r) : ninf;
      ls(r) = r < nq ? l(b, h, q0 + r) : Acc(0);
    });
    team.team_barrier();

    const bool causal = mask.kind == MaskKind::Causal;
    const std::int64_t qmax = mask.q(q0 + nq - 1);
    const std::int64_t qmin = mask.q(q0);
    const int nkt = (Sk + bc - 1) / bc;
    for (int kt = 0; kt < nkt; ++kt) {
      const int k0 = kt * bc;
      const int nk = (Sk - k0) < bc ? (Sk - k0) : bc;
      const std::int64_t kmin = mask.k(k0);
      const std::int64_t kmax = mask.k(k0 + nk - 1);
      // Positions grow with the index, so once a tile starts after the last
      // query every later tile does too.
      if (causal && qmax < kmin) break;
      const bool elementwise = causal && !(qmin >= kmax);

      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, bc * Dl), [&](int idx) {
        const int c = idx / Dl, j = idx % Dl;
        if (c < nk) {
          ks(idx) = Acc(k(b, k0 + c, hk, j));
          vs(idx) = Acc(v(b, k0 + c, hk, j));
        } else {
          ks(idx) = Acc(0);
          vs(idx) = Acc(0);
        }
      });
      team.team_barrier();

      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br * bc), [&](int idx) {
        const int r = idx / bc, c = idx % bc;
        Acc s = ninf;
        if (r < nq && c < nk && (!elementwise || mask.allowed(q0 + r, k0 + c))) {
          s = Acc(0);
          for (int j = 0; j < Dl; ++j) s += qs(r * Dl + j) * ks(c * Dl + j);
        }
        ss(idx) = s;
      });
      team.team_barrier();

      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br), [&](int r) {
        Acc mx = ms(r);
        for (int c = 0; c < bc; ++c) mx = ss(r * bc + c) > mx ? ss(r * bc + c) : mx;
        if (mx == ninf) {  // nothing admissible yet: state stays empty
          al(r) = Acc(0);
          for (int c = 0; c < bc; ++c) ss(r * bc + c) = Acc(0);
          return;
        }
        const Acc alpha = ms(r) == ninf ? Acc(0) : compat::math::exp(ms(r) - mx);
        Acc sum = Acc(0);
        for (int c = 0; c < bc; ++c) {
          const Acc s = ss(r * bc + c);
          const Acc p = s == ninf ? Acc(0) : compat::math::exp(s - mx);
          ss(r * bc + c) = p;
          sum += p;
        }
        al(r) = alpha;
        ls(r) = alpha * ls(r) + sum;
        ms(r) = mx;
      });
      team.team_barrier();

      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, br * Dl), [&](int idx) {
        const int r = idx / Dl, j = idx % Dl;
        Acc a = al(r) * as(idx);
        for (int c = 0; c < nk; ++c) a += ss(r * bc + c) * vs(c * Dl + j);
        as(idx) = a;
      });
      team.team_barrier();
    }

    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * Dl), [&](int idx) {
      const int r = idx / Dl, j = idx % Dl;
      acc(b, q0 + r, h, j) = as(idx);
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](int r) {
      m(b, h, q0 + r) = ms(r);
      l(b, h, q0 + r) = ls(r);
    });
  }
};

}  // namespace DistAttn::Impl
