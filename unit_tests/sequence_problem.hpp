// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The global problem of the sequence-parallel executor tests (ring kinds,
// Ulysses, hybrid): every rank builds the same small fp64 problem and its
// reference, runs its own rows (RingLayout says which) through an executor and
// checks them.

#include "mpi_test_helpers.hpp"

#include <DistAttn/schedule/ring_layout.hpp>

#include <cmath>
#include <string>

namespace DistAttn::Test {

struct Problem {
  int P, rank, B, c, H, Hkv, D;
  bool causal;
  std::uint64_t seed;
  HostTensor q, k, v, dout;  // global
  HostTensor ro, rdq, rdk, rdv;
  HostStats rl;
};

Problem make_problem(int B, int c, int H, int Hkv, int D, bool causal = true) {
  Problem p{};
  p.causal = causal;
  p.P      = world_size();
  p.rank   = world_rank();
  p.B = B, p.c = c, p.H = H, p.Hkv = Hkv, p.D = D;
  p.seed  = shared_seed();
  const int N = p.P * c;
  p.q    = HostTensor("q", B, N, H, D);
  p.k    = HostTensor("k", B, N, Hkv, D);
  p.v    = HostTensor("v", B, N, Hkv, D);
  p.dout = HostTensor("do", B, N, H, D);
  Testing::fill_random(p.q, p.seed, 1.5);
  Testing::fill_random(p.k, p.seed + 1, 1.5);
  Testing::fill_random(p.v, p.seed + 2);
  Testing::fill_random(p.dout, p.seed + 3);
  p.ro  = HostTensor("ro", B, N, H, D);
  p.rl  = HostStats("rl", B, H, N);
  p.rdq = HostTensor("rdq", B, N, H, D);
  p.rdk = HostTensor("rdk", B, N, Hkv, D);
  p.rdv = HostTensor("rdv", B, N, Hkv, D);
  const double scale = 1.0 / std::sqrt(double(D));
  const Mask mask = causal ? Mask::causal() : Mask::none();
  Testing::reference_fwd(p.q, p.k, p.v, mask, scale, p.ro, p.rl);
  Testing::reference_bwd(p.q, p.k, p.v, p.dout, mask, scale, p.rdq, p.rdk, p.rdv);
  return p;
}

/// Rows of rank `rank`: local row i is global row pos(rank, i).
template <class Pos>
HostTensor rows_of(const HostTensor& g, int rank, int c, const Pos& pos) {
  HostTensor out("rows", g.extent(0), c, g.extent(2), g.extent(3));
  for (int i = 0; i < c; ++i) {
    const auto p = pos(rank, i);
    for (std::size_t b = 0; b < g.extent(0); ++b)
      for (std::size_t h = 0; h < g.extent(2); ++h)
        for (std::size_t d = 0; d < g.extent(3); ++d) out(b, i, h, d) = g(b, p, h, d);
  }
  return out;
}

/// Where a ring kind puts local row i of rank r.
inline auto ring_positions(int P, int c, RingKind kind) {
  return [layout = RingLayout(P, c, kind)](int r, std::int64_t i) { return layout.position(r, i); };
}

/// Rows of rank `rank` under the kind's layout.
inline HostTensor chunk_of(const HostTensor& g, int rank, int c, RingKind kind = RingKind::Vanilla) {
  return rows_of(g, rank, c, ring_positions(int(g.extent(1)) / c, c, kind));
}

template <class Stats>
struct Outputs {
  HostTensor o, dq, dk, dv;
  Stats fwd, bwd;
};

/// One forward and backward of `ex` on this rank's rows of `p` (local row i of
/// rank r is global row pos(r, i)), with every tensor argument in layout L.
template <class T, class L = Kokkos::LayoutRight, class E, class Pos>
auto run_rows(E& ex, const Problem& p, const Pos& pos) {
  using Acc = accum_t<T>;
  auto q    = to_device_as<T, L>(rows_of(p.q, p.rank, p.c, pos), "q");
  auto k    = to_device_as<T, L>(rows_of(p.k, p.rank, p.c, pos), "k");
  auto v    = to_device_as<T, L>(rows_of(p.v, p.rank, p.c, pos), "v");
  auto d    = to_device_as<T, L>(rows_of(p.dout, p.rank, p.c, pos), "do");
  auto o    = alloc_as<T, L>("o", p.B, p.c, p.H, p.D);
  auto dq   = alloc_as<T, L>("dq", p.B, p.c, p.H, p.D);
  auto dk   = alloc_as<T, L>("dk", p.B, p.c, p.Hkv, p.D);
  auto dv   = alloc_as<T, L>("dv", p.B, p.c, p.Hkv, p.D);
  auto lse  = alloc_stats_as<Acc, L>("lse", p.B, p.H, p.c);
  ex.forward(q, k, v, o, lse);
  Outputs<std::decay_t<decltype(ex.stats())>> out;
  out.fwd = ex.stats();
  ex.backward(q, k, v, o, d, lse, dq, dk, dv);
  out.bwd = ex.stats();
  out.o   = to_host(o);
  out.dq  = to_host(dq);
  out.dk  = to_host(dk);
  out.dv  = to_host(dv);
  return out;
}

/// This rank's outputs against the reference rows `pos` gives it.
template <class Out, class Pos>
void expect_rows_match(const Problem& p, const Out& out, const Pos& pos, const std::string& what) {
  const double tol      = 1e-11;
  const std::string ctx = what + (p.causal ? " causal" : " full") + " P=" + std::to_string(p.P) + " rank " +
                          std::to_string(p.rank) + " seed " + std::to_string(p.seed);
  EXPECT_LE(Testing::rel_error(out.o, rows_of(p.ro, p.rank, p.c, pos)), tol) << "O " << ctx;
  EXPECT_LE(Testing::rel_error(out.dq, rows_of(p.rdq, p.rank, p.c, pos)), tol) << "dQ " << ctx;
  EXPECT_LE(Testing::rel_error(out.dk, rows_of(p.rdk, p.rank, p.c, pos)), tol) << "dK " << ctx;
  EXPECT_LE(Testing::rel_error(out.dv, rows_of(p.rdv, p.rank, p.c, pos)), tol) << "dV " << ctx;
}

template <class Out>
void expect_matches_reference(const Problem& p, const Out& out, RingKind kind, const std::string& what = "") {
  expect_rows_match(p, out, ring_positions(p.P, p.c, kind), std::string(to_string(kind)) + " layout " + what);
}

}  // namespace DistAttn::Test
