// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file cost_ulysses.hpp
/// Cost model of UlyssesAttention (ulysses/ulysses_attention.hpp): per head group
/// g of G (ulysses_head_groups) the inputs' all-to-alls in_g, one full-sequence
/// block call c_g on the group's heads, and the results' all-to-alls out_g:
///   forward   in = a2a(q, k, v)           out = a2a(O) + a2a(LSE)
///   backward  in = a2a(dO) + a2a(LSE, Delta)   out = a2a(dq, dk, dv)
/// pipelined as the executor posts them (ulysses_pipeline_seconds). With G = 1:
///   in + c + out, nothing overlapped.
/// An all-to-all in which a rank exchanges m bytes evenly with its U - 1 peers
/// costs what those transfers cost in flight together (machine_model.hpp).

#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/cost/cost_types.hpp>
#include <DistAttn/core/mask.hpp>
#include <DistAttn/cost/machine_model.hpp>
#include <DistAttn/schedule/head_exchange_buffers.hpp>
#include <DistAttn/schedule/ulysses_volume.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

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
/// On CPU ranks (MachineModel::host_copies) that is the time member 0's core spends
/// copying what it receives.
inline double all_to_all_seconds(const MachineModel& m, const RankPlacement& place, int degree, double bytes) {
  if (degree <= 1 || bytes <= 0) return 0;
  ConcurrentTransfers t;
  const double per_peer = bytes / (degree - 1);
  for (int j = 1; j < degree; ++j) {
    t.send(place.level(0, j), per_peer);
    t.recv(place.level(0, j), per_peer);
  }
  return m.host_copies ? m.receive_work_seconds(t) : t.seconds(m);
}

/// Seconds of the reorders around one all-to-all in which a rank sends `bytes`
/// (U - 1 of its U blocks): packing, then unpacking, each read and write all U
/// blocks, on the compute instance at the table's copy rate.
inline double all_to_all_reorder_seconds(const MachineModel& m, int degree, double bytes) {
  if (degree <= 1 || bytes <= 0) return 0;
  return m.tiles.copy_seconds(4.0 * bytes * degree / (degree - 1));
}

/// The all-to-alls of one pass over a group of U ranks, one after the other.
inline double ulysses_exchange_seconds(const MachineModel& m, const RankPlacement& place, const UlyssesSizes& z,
                                       int batch, bool backward, UlyssesRole role = UlyssesRole::Ulysses) {
  double t = 0;
  for (const UlyssesExchange& e : ulysses_exchanges(z, backward, true, role))
    t += all_to_all_seconds(m, place, z.degree, double(batch) * e.bytes);
  return t;
}

/// The packing and unpacking around those all-to-alls.
inline double ulysses_reorder_seconds(const MachineModel& m, const UlyssesSizes& z, int batch, bool backward,
                                      UlyssesRole role = UlyssesRole::Ulysses) {
  double t = 0;
  for (const UlyssesExchange& e : ulysses_exchanges(z, backward, true, role))
    t += all_to_all_reorder_seconds(m, z.degree, double(batch) * e.bytes);
  return t;
}

/// Wall time of the executor's head-group pipeline. The communicator's instance
/// runs the all-to-alls one at a time in posting order: in_0, in_1, then after
/// each group's compute out_g and in_{g+2}; compute g (in order on the compute
/// instance) waits for in_g and for out_{g-2}, whose unpacking was queued before
/// it; in_{g+2} is packed after out_{g-1}'s unpacking. The packing and unpacking
/// run on the compute instance; they are counted in compute (all_to_all_reorder_seconds).
inline double ulysses_pipeline_seconds(const std::vector<double>& in, const std::vector<double>& compute,
                                       const std::vector<double>& out) {
  const std::size_t G = compute.size();
  std::vector<double> in_done(G, 0), out_done(G, 0);
  double link = 0, comp = 0;
  for (std::size_t g = 0; g < std::min<std::size_t>(G, 2); ++g) in_done[g] = link += in[g];
  for (std::size_t g = 0; g < G; ++g) {
    comp = std::max({comp, in_done[g], g >= 2 ? out_done[g - 2] : 0.0}) + compute[g];
    out_done[g] = link = std::max(link, comp) + out[g];
    if (g + 2 < G) in_done[g + 2] = link = std::max({link, comp, g >= 1 ? out_done[g - 1] : 0.0}) + in[g + 2];
  }
  return std::max(comp, out_done[G - 1]);
}

/// UlyssesAttention on P ranks, one pass; pr.seq_len must be a multiple of P.
/// `head_groups` as UlyssesOptions::head_groups (0 = the executor's default).
inline PassPrediction predict_ulysses_pass(TileDirection dir, const AttnProblem& pr, int P, const MachineModel& m,
                                           const RankPlacement& place, int head_groups = 0) {
  const UlyssesHeads h(P, pr.heads, pr.kv_heads);
  const int G = ulysses_head_groups(h, head_groups), Lg = h.local_heads() / G, Lkg = h.local_kv_heads() / G;
  const UlyssesSizes z = ulysses_sizes(pr, P, pr.seq_len / P);
  const bool bwd = dir == TileDirection::Backward;
  const ShapeClass cls{dir, pr.causal ? BlockKind::Causal : BlockKind::Full, pr.dtype, pr.head_dim};
  const double call = m.shared_step_seconds(
      m.tiles.masked_block_seconds(cls, double(pr.batch) * Lg, pr.rule(), {0, 1}, pr.seq_len, {0, 1}, pr.seq_len));
  std::vector<double> in(G, 0), comp(G, call), out(G, 0), copies(G, 0);
  PassPrediction p;
  for (int g = 0; g < G; ++g)
    for (const UlyssesExchange& e : ulysses_slice_exchanges(z, bwd, Lg, Lkg)) {
      const double t = all_to_all_seconds(m, place, z.degree, double(pr.batch) * e.bytes);
      // CPU ranks copy with the core that computes: nothing to pipeline against.
      if (m.host_copies) copies[g] += t;
      else (e.phase == UlyssesPhase::QKV || e.phase == UlyssesPhase::DOut ? in : out)[g] += t;
      comp[g] += all_to_all_reorder_seconds(m, z.degree, double(pr.batch) * e.bytes);
      p.max_bytes_sent += std::int64_t(pr.batch) * e.bytes;
    }
  p.max_bytes_received = p.max_bytes_sent;
  for (int g = 0; g < G; ++g) p.compute_only_seconds += comp[g], comp[g] += copies[g];
  p.seconds = ulysses_pipeline_seconds(in, comp, out);
  p.steps = G;
  return p;
}

/// Bytes Impl::HeadExchange holds per rank after a forward and a backward over U
/// ranks of `tokens_per_rank` tokens each, pipelined over `groups` head groups:
/// the kept head-side tensors plus the larger pass workspace, planned by the
/// exchange's own buffer table (schedule/head_exchange_buffers.hpp). `ulysses`:
/// UlyssesAttention's use (forward state and sequence-side Delta in the workspace);
/// else the hybrid's (head-side O and LSE kept, one group).
inline std::int64_t head_exchange_workspace_bytes(const AttnProblem& pr, int U, std::int64_t tokens_per_rank,
                                                  bool ulysses = false, int groups = 1) {
  Impl::HeadExchangeUse use;
  use.keep_output = !ulysses, use.state_and_delta = ulysses;
  const Impl::HeadExchangeShape s{pr.batch, int(tokens_per_rank), pr.head_dim,
                                  UlyssesHeads(U, pr.heads, pr.kv_heads), use, groups};
  return Impl::with_element_sizes(pr.io_bytes(), [&](auto t, auto acc) {
    return std::int64_t(
        Impl::HeadExchangeBuffers<decltype(t), decltype(acc), Kokkos::HostSpace>::plan(s).peak_bytes());
  });
}

/// UlyssesAttention: its head exchange over all P ranks, pipelined over
/// `head_groups` (as UlyssesOptions::head_groups, 0 = the default).
inline std::int64_t ulysses_workspace_bytes(const AttnProblem& pr, int P, int head_groups = 0) {
  const int G = ulysses_head_groups(UlyssesHeads(P, pr.heads, pr.kv_heads), head_groups);
  return head_exchange_workspace_bytes(pr, P, pr.seq_len / P, /*ulysses=*/true, G);
}

}  // namespace DistAttn
