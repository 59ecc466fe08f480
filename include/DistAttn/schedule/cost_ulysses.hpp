#pragma once
/// @file cost_ulysses.hpp
/// Cost model of Ulysses head parallelism (all-to-all over heads, local
/// full-sequence attention, all-to-all back; the mirror in backward), with the
/// byte counts of ulysses_volume.hpp, and the pieces the hybrid U x S model uses.
///
/// Pipelining: the pass is cut into G head groups; the all-to-all bringing in
/// group g+1 and the one returning group g-1 travel while group g is computed:
///   T = in(1) + sum_g max(compute(g), in(g+1) + out(g-1)) + out(G),
/// each group moving 1/G of the pass's bytes. All-to-all time on one rank: one
/// latency plus, per level, the bytes it exchanges with peers on that level
/// (every peer gets an equal share) over that level's bandwidth; levels overlap.

#include <DistAttn/schedule/cost_types.hpp>
#include <DistAttn/schedule/causal_pairs.hpp>
#include <DistAttn/schedule/machine_model.hpp>
#include <DistAttn/schedule/ulysses_volume.hpp>

#include <algorithm>

namespace DistAttn {

inline UlyssesSizes ulysses_sizes(const AttnProblem& pr, int degree, std::int64_t tokens_per_rank) {
  UlyssesSizes z;
  z.tokens_per_rank = tokens_per_rank;
  z.degree = degree;
  z.heads = pr.heads, z.kv_heads = pr.kv_heads, z.head_dim = pr.head_dim;
  z.io_bytes = pr.io_bytes(), z.stat_bytes = pr.acc_bytes(), z.grad_bytes = pr.acc_bytes();
  return z;
}

/// Seconds of one all-to-all in which rank 0 of the group (members placed by
/// `place`) sends `bytes` spread evenly over its U - 1 peers (and receives as much).
inline double all_to_all_seconds(const MachineModel& m, const RankPlacement& place, int degree, double bytes) {
  if (degree <= 1 || bytes <= 0) return 0;
  ConcurrentTransfers t;
  const double per_peer = bytes / (degree - 1);
  for (int j = 1; j < degree; ++j) {
    t.send(place.level(0, j), per_peer);
    t.recv(place.level(0, j), per_peer);
  }
  return t.seconds(m);
}

/// Ulysses on P ranks, one pass: G head groups per rank (0 = one per local query head).
inline PassPrediction predict_ulysses_pass(TileDirection dir, const AttnProblem& pr, int P, int groups,
                                           const MachineModel& m, const RankPlacement& place) {
  const UlyssesHeads h = ulysses_heads(P, pr.heads, pr.kv_heads);
  const std::int64_t n = pr.seq_len / P;
  const UlyssesSizes z = ulysses_sizes(pr, P, n);
  const UlyssesBytes b = dir == TileDirection::Forward ? ulysses_forward_bytes(z) : ulysses_backward_bytes(z);
  const int G = groups > 0 ? groups : h.query;
  DISTATTN_REQUIRE(G <= h.query && h.query % G == 0, "DistAttn::predict_ulysses_pass",
                   "pipeline groups G=" << G << " must divide the " << h.query << " query heads per rank");
  const double B = pr.batch, N = double(pr.seq_len);
  const double pairs = pr.causal ? double(causal_pairs({0, 1}, pr.seq_len, {0, 1}, pr.seq_len)) : N * N;
  const ShapeClass cls{dir, pr.causal ? BlockKind::Causal : BlockKind::Full, pr.dtype, pr.head_dim};
  const double comp = m.tiles.call_seconds(cls, B * h.query / G, pairs);
  const double in = all_to_all_seconds(m, place, P, B * b.in / G), out = all_to_all_seconds(m, place, P, B * b.out / G);
  PassTimeline tl;
  tl.exposed(in);
  for (int g = 0; g < G; ++g) tl.overlapped(comp, (g + 1 < G ? in : 0.0) + (g > 0 ? out : 0.0));
  tl.exposed(out);
  tl.p.steps = G;
  tl.p.max_bytes_sent = tl.p.max_bytes_received = std::int64_t(B * b.total());
  return tl.p;
}

/// What Ulysses must hold per rank for both passes, the head-sharded full-sequence
/// tensors (q, k, v, o, LSE, the fp32 forward state; dO, Delta, dq, dk, dv), plus a
/// packed send and receive buffer of one group's all-to-all. An estimate for the
/// executor to be checked against: it does not exist yet.
inline std::int64_t ulysses_workspace_bytes(const AttnProblem& pr, int P, int groups) {
  const UlyssesHeads h = ulysses_heads(P, pr.heads, pr.kv_heads);
  const int G = groups > 0 ? groups : h.query;
  const std::int64_t B = pr.batch, N = pr.seq_len, d = pr.head_dim, io = pr.io_bytes(), acc = pr.acc_bytes();
  const std::int64_t q = B * N * h.query * d, kv = B * N * h.kv * d, rows = B * N * h.query;
  std::int64_t w = (2 * q + 2 * kv) * io + rows * acc + (q + 2 * rows) * acc;  // q, o, k, v; LSE; state
  w += q * io + rows * acc + (q + 2 * kv) * acc;                               // dO; Delta; dq, dk, dv
  const UlyssesBytes bb = ulysses_backward_bytes(ulysses_sizes(pr, P, N / P));
  w += 2 * B * std::max(bb.in, bb.out) / G;                                    // packed send + receive
  return w;
}

}  // namespace DistAttn
