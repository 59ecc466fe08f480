#pragma once
/// @file cost_ulysses.hpp
/// Cost model of UlyssesAttention (ulysses/ulysses_attention.hpp): the all-to-alls
/// of ulysses_volume.hpp, each waited for before the next step (nothing overlaps),
/// around one full-sequence block call on the head side:
///   forward  = a2a(q, k, v) + tile + a2a(O) + a2a(LSE)
///   backward = a2a(dO) + a2a(LSE, Delta) + tile + a2a(dq, dk, dv)
/// An all-to-all in which a rank exchanges m bytes evenly with its U - 1 peers
/// costs what those transfers cost in flight together (machine_model.hpp).

#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/schedule/cost_types.hpp>
#include <DistAttn/schedule/causal_pairs.hpp>
#include <DistAttn/schedule/machine_model.hpp>
#include <DistAttn/schedule/ulysses_volume.hpp>

#include <algorithm>
#include <cstdint>

namespace DistAttn {

inline UlyssesSizes ulysses_sizes(const AttnProblem& pr, int degree, std::int64_t tokens_per_rank) {
  UlyssesSizes z;
  z.tokens_per_rank = tokens_per_rank;
  z.degree = degree;
  z.heads = pr.heads, z.kv_heads = pr.kv_heads, z.head_dim = pr.head_dim;
  z.io_bytes = pr.io_bytes(), z.acc_bytes = pr.acc_bytes();
  return z;
}

/// Seconds of one all-to-all in which member 0 of a group (placed by `place`)
/// sends `bytes` spread evenly over its U - 1 peers and receives as much.
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

/// The all-to-alls of one pass over a group of U ranks, one after the other.
inline double ulysses_exchange_seconds(const MachineModel& m, const RankPlacement& place, const UlyssesSizes& z,
                                       int batch, bool backward, UlyssesRole role = UlyssesRole::Ulysses) {
  double t = 0;
  for (const UlyssesExchange& e : ulysses_exchanges(z, backward, true, role))
    t += all_to_all_seconds(m, place, z.degree, double(batch) * e.bytes);
  return t;
}

/// UlyssesAttention on P ranks, one pass; pr.seq_len must be a multiple of P.
inline PassPrediction predict_ulysses_pass(TileDirection dir, const AttnProblem& pr, int P, const MachineModel& m,
                                           const RankPlacement& place) {
  const UlyssesHeads h(P, pr.heads, pr.kv_heads);
  const UlyssesSizes z = ulysses_sizes(pr, P, pr.seq_len / P);
  const bool bwd = dir == TileDirection::Backward;
  const double N = double(pr.seq_len);
  const double pairs = pr.causal ? double(causal_pairs({0, 1}, pr.seq_len, {0, 1}, pr.seq_len)) : N * N;
  const ShapeClass cls{dir, pr.causal ? BlockKind::Causal : BlockKind::Full, pr.dtype, pr.head_dim};
  PassTimeline tl;
  tl.local(m.tiles.call_seconds(cls, double(pr.batch) * h.local_heads(), pairs));
  tl.exposed(ulysses_exchange_seconds(m, place, z, pr.batch, bwd));
  tl.p.steps = 1;
  tl.p.max_bytes_sent = tl.p.max_bytes_received = std::int64_t(pr.batch) * ulysses_pass_bytes(z, bwd);
  return tl.p;
}

/// Bytes Impl::HeadExchange holds per rank after a forward and a backward over U
/// ranks of `tokens_per_rank` tokens each (HeadExchange::memory_plan): the kept
/// head-side tensors plus the larger pass workspace, whose successive message
/// buffers share memory. `ulysses`: UlyssesAttention's use (forward state and
/// sequence-side Delta in the workspace); else the hybrid's (head-side O and LSE kept).
inline std::int64_t head_exchange_workspace_bytes(const AttnProblem& pr, int U, std::int64_t tokens_per_rank,
                                                  bool ulysses = false) {
  const UlyssesHeads h(U, pr.heads, pr.kv_heads);
  const std::int64_t B = pr.batch, N = U * tokens_per_rank, d = pr.head_dim, io = pr.io_bytes(), acc = pr.acc_bytes();
  const std::int64_t L = h.local_heads(), Lk = h.local_kv_heads();
  const std::int64_t q = B * N * L * d, kv = B * N * Lk * d, rows = B * N * L;
  auto r = [](std::int64_t bytes) { return std::int64_t(MemoryLayout::round_up(std::size_t(bytes))); };
  const std::int64_t out  = r(q * io) + r(rows * acc);  // O, LSE on the head side
  const std::int64_t kept = r(q * io) + 2 * r(kv * io) + (ulysses ? 0 : out);
  const std::int64_t qkv_messages = 2 * r((q + 2 * kv) * io);
  std::int64_t fwd = (ulysses ? out : 0) +
                     std::max({qkv_messages, ulysses ? r(q * acc) + 2 * r(rows * acc) : 0,
                               2 * r(q * io) + 2 * r(rows * acc)});
  std::int64_t bwd = (ulysses ? r(B * pr.heads * tokens_per_rank * acc) + r(rows * acc) : 0) + r(q * acc) +
                     2 * r(kv * acc);  // Delta (sequence side), LSE; dq, dk, dv
  const std::int64_t dout = r(q * io) + 2 * r(q * io) +
                            (ulysses ? r(rows * acc) + 2 * r(2 * rows * acc) : 2 * r(rows * acc));
  bwd += std::max({qkv_messages, dout, 2 * r((q + 2 * kv) * acc)});
  return kept + std::max(fwd, bwd);
}

/// UlyssesAttention: its head exchange over all P ranks.
inline std::int64_t ulysses_workspace_bytes(const AttnProblem& pr, int P) {
  return head_exchange_workspace_bytes(pr, P, pr.seq_len / P, /*ulysses=*/true);
}

}  // namespace DistAttn
