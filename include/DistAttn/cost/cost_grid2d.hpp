// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file cost_grid2d.hpp
/// Cost model of Grid2DAttention (grid2d/grid2d_attention.hpp), NO and O
/// variants, on an R x C grid: time per pass, bytes, workspace.
///
/// What the executor does (docs/design/attention2d.md):
///   forward NO   K/V permutation, then the row all-gather of Q and the column
///                all-gather of K/V together, one block call, then C-1 ring steps
///                of the partial reduce-scatter, each waited for and merged:
///                nothing overlaps.
///   forward O    permutation; column ring of R K/V blocks (block i+1 travels
///                while block i is computed; Q of the next column is fetched
///                meanwhile); row ring of C-1 steps (the next Q block and the
///                previous partial travel while a Q block meets the gathered K/V),
///                the last partial exposed.
///   backward NO  row all-gather (q, dO, LSE, Delta) with the column all-gather
///                of K/V; one block call; the row reduce-scatter of dQ with the
///                column reduce-scatter of dK/dV; the dK/dV permutation back.
///   backward O   column ring as forward; row ring of C-2 steps; in the last,
///                the last query block meets the K/V blocks one at a time while
///                the dK/dV partials go up the column ring (Alg. 11); the last dQ
///                and dK/dV partials and the permutation back exposed.
/// Forward and backward words are grid2d_volume.hpp's. K/V saved by the forward
/// are reused by the backward (no second permutation), as a training step does.
/// Two collectives in flight together on the same level share its bandwidth
/// (their times add); on different levels they overlap (the longer counts).

#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/cost/impl/grid2d_cost_context.hpp>
#include <DistAttn/cost/cost_types.hpp>
#include <DistAttn/core/mask.hpp>
#include <DistAttn/schedule/grid2d_layout.hpp>
#include <DistAttn/schedule/grid2d_volume.hpp>
#include <DistAttn/cost/machine_model.hpp>

#include <algorithm>
#include <vector>

namespace DistAttn {

/// The volume parameters Grid2DAttention::volume_params() reports: (acc, m, l)
/// partials, LSE + Delta (not O) in the backward gather.
inline Grid2DVolumeParams grid2d_executor_volume_params(const AttnProblem& pr) {
  Grid2DVolumeParams p;
  p.heads = pr.heads, p.kv_heads = pr.kv_heads, p.head_dim = pr.head_dim;
  p.fwd_stats_per_row = 2, p.bwd_stats_per_row = 1, p.bwd_gather_o = false;
  return p;
}

/// Bytes per phase of one rank: grid2d_volume's words times each phase's element size.
struct Grid2DPhaseBytes {
  double kv_permute = 0, q_gather = 0, kv_gather = 0, partial_scatter = 0;             // forward
  double bundle_gather = 0, kv_gather_bwd = 0, dq_scatter = 0, dkv_scatter = 0, dkv_permute = 0;  // backward
  double forward_total() const { return kv_permute + q_gather + kv_gather + partial_scatter; }
  double backward_total() const { return bundle_gather + kv_gather_bwd + dq_scatter + dkv_scatter + dkv_permute; }
};

inline Grid2DPhaseBytes grid2d_phase_bytes(const Grid2DLayout& g, int rank, const AttnProblem& pr) {
  const Grid2DVolumeParams vp = grid2d_executor_volume_params(pr);
  const Grid2DForwardWords f = grid2d_no_forward_words(g, rank, vp);
  const Grid2DBackwardWords b = grid2d_no_backward_words(g, rank, vp);
  const double io = pr.io_bytes(), acc = pr.acc_bytes(), B = pr.batch;
  // The backward row gather carries (q, dO) in the io dtype and (LSE, Delta),
  // one word per row and head each, in the accumulation type.
  const double stats = double(g.cols() - 1) * double(g.shard_len()) * pr.heads * (1 + vp.bwd_stats_per_row);
  Grid2DPhaseBytes r;
  r.kv_permute = B * f.kv_permute * io;
  r.q_gather = B * f.q_allgather * io;
  r.kv_gather = B * f.kv_allgather * io;
  r.partial_scatter = B * f.partial_reduce_scatter * acc;
  r.bundle_gather = B * ((b.row_allgather - stats) * io + stats * acc);
  r.kv_gather_bwd = B * b.kv_allgather * io;
  r.dq_scatter = B * b.dq_reduce_scatter * acc;
  r.dkv_scatter = B * b.dkv_reduce_scatter * acc;
  r.dkv_permute = B * b.dkv_permute * acc;
  return r;
}

inline PassPrediction predict_grid2d_forward(bool overlapped, const AttnProblem& pr, const Grid2DLayout& g,
                                             const MachineModel& m, const RankPlacement& place) {
  const Impl::Grid2DCostContext x(pr, g, m, place);
  const int R = g.rows(), C = g.cols();
  const double B = pr.batch, io = pr.io_bytes(), acc = pr.acc_bytes(), n = x.n();
  const double q_shard = B * n * pr.heads * pr.head_dim * io, kv_shard = B * 2 * n * pr.kv_heads * pr.head_dim * io;
  const double partial = B * n * pr.heads * (pr.head_dim + 2) * acc;
  const TileDirection F = TileDirection::Forward;
  PassTimeline tl;
  tl.exposed(R > 1 && C > 1 ? x.send(x.permute_level, kv_shard) : 0.0);
  if (!overlapped) {
    tl.exposed(x.row_and_column(q_shard, kv_shard));
    // The gathered blocks into position order, the gathered state reset, the first shard cut out of it.
    tl.local(x.copy(C * q_shard + (R > 1 ? R * kv_shard : 0.0)) + x.fill(C * partial) +
             (C > 1 ? x.copy(partial) : 0.0));
    tl.local(x.gathered_block(F));
    for (int i = 2; i <= C; ++i) x.step(tl, 0, x.send(x.row_level, partial), x.copy(partial) + x.merge(partial));
    tl.p.steps = 1;
  } else {
    // Column ring, with the first Q block of the row ring fetched alongside.
    const PassTimeline col = x.column_ring(F, kv_shard);
    const double qfetch = C > 1 ? x.send(x.row_level, q_shard) : 0.0;
    tl.step(x.beside(col.p.seconds, qfetch), col.p.compute_only_seconds);
    for (int i = 1; i <= C - 1; ++i) {
      const double comp = x.row_ring_block(F, i);
      const double comm = (i < C - 1 ? x.send(x.row_level, q_shard) : 0.0) + (i > 1 ? x.send(x.row_level, partial) : 0.0);
      x.step(tl, comp, comm, i > 1 ? x.merge(partial) : 0.0);
    }
    if (C > 1) x.step(tl, 0, x.send(x.row_level, partial), x.merge(partial));
    if (C > 1 && R > 1) tl.local(x.copy(R * kv_shard));  // the column ring's blocks into Kg, Vg
    tl.p.steps = R + C - 1;
  }
  for (int p = 0; p < g.num_ranks(); ++p) {
    const std::int64_t b = std::int64_t(grid2d_phase_bytes(g, p, pr).forward_total());
    tl.p.max_bytes_sent = std::max(tl.p.max_bytes_sent, b);
    tl.p.max_bytes_received = std::max(tl.p.max_bytes_received, b);
  }
  return tl.p;
}

inline PassPrediction predict_grid2d_backward(bool overlapped, const AttnProblem& pr, const Grid2DLayout& g,
                                              const MachineModel& m, const RankPlacement& place) {
  const Impl::Grid2DCostContext x(pr, g, m, place);
  const int R = g.rows(), C = g.cols();
  const double B = pr.batch, io = pr.io_bytes(), acc = pr.acc_bytes(), n = x.n(), H = pr.heads, d = pr.head_dim;
  const double bundle = B * n * H * (2 * d * io + 2 * acc), kv_shard = B * 2 * n * pr.kv_heads * d * io;
  const double dq = B * n * H * d * acc, dkv = B * 2 * n * pr.kv_heads * d * acc;
  const TileDirection W = TileDirection::Backward;
  PassTimeline tl;
  if (!overlapped) {
    tl.exposed(x.row_and_column(bundle, kv_shard));
    // Gathered bundles and K/V into position order, the gathered gradients zeroed;
    // after the call, the gradients cut into the shards the reduce-scatters send.
    tl.local(x.copy(C * bundle + (R > 1 ? R * kv_shard : 0.0)) + x.fill(C * dq + R * dkv));
    tl.local(x.gathered_block(W));
    tl.local(x.copy(C * dq + (R > 1 ? R * dkv : 0.0)));
    tl.exposed(x.row_and_column_reduce(dq, dkv));
    tl.p.steps = 1;
  } else {
    const PassTimeline col = x.column_ring(W, kv_shard);
    tl.step(x.beside(col.p.seconds, C > 1 ? x.send(x.row_level, bundle) : 0.0), col.p.compute_only_seconds);
    for (int i = 1; i <= C - 2; ++i) {
      const double comp = x.row_ring_block(W, i);
      const double comm = x.send(x.row_level, bundle) + (i > 1 ? x.send(x.row_level, dq) : 0.0);
      x.step(tl, comp, comm, i > 1 ? x.merge(dq) : 0.0);
    }
    // Alg. 11: the last query block (none when C == 1) against one K/V block per
    // step while the dK/dV partials go up the column; the dQ partial of the step
    // before travels during its first step.
    const int qi = C - 1;
    auto last_block = [&](int krow_off) {
      if (C == 1) return 0.0;
      return x.slowest([&](int r, int c) {
        return x.block(W, g.qp(r, (c + qi) % C), g.shard_len(), g.kt((r + krow_off) % R, c), g.shard_len());
      });
    };
    double pending_dq = C > 2 ? x.send(x.row_level, dq) : 0.0;
    const double dq_merge = C > 2 ? x.merge(dq) : 0.0;
    if (R == 1) {
      x.step(tl, last_block(0), pending_dq, dq_merge);
    } else {
      for (int i = 2; i <= R; ++i) {
        const double comm = x.together(x.row_level, pending_dq, x.col_level, i > 2 ? x.send(x.col_level, dkv) : 0.0);
        x.step(tl, last_block(i - 1), comm, (i > 2 ? x.merge(dkv) : 0.0) + (i == 2 ? dq_merge : 0.0));
        pending_dq = 0;
      }
      x.step(tl, last_block(0), x.send(x.col_level, dkv), x.merge(dkv));
    }
    if (C > 1) x.step(tl, 0, x.send(x.row_level, dq), x.merge(dq));
    // The column ring's blocks into Kg, Vg; every dK/dV block cut out of dKg, dVg.
    tl.local((C > 1 && R > 1 ? x.copy(R * kv_shard) : 0.0) + (R > 1 ? x.copy(R * dkv) : 0.0));
    tl.p.steps = R + C - 1;
  }
  tl.exposed(R > 1 && C > 1 ? x.send(x.permute_level, dkv) : 0.0);
  for (int p = 0; p < g.num_ranks(); ++p) {
    const std::int64_t b = std::int64_t(grid2d_phase_bytes(g, p, pr).backward_total());
    tl.p.max_bytes_sent = std::max(tl.p.max_bytes_sent, b);
    tl.p.max_bytes_received = std::max(tl.p.max_bytes_received, b);
  }
  return tl.p;
}

/// Bytes Grid2DAttention holds per rank after a forward and a backward: K_t|V_t
/// plus the larger of its forward and backward workspace layouts
/// (Grid2DAttention::memory_plan, executor/memory_plan.hpp); every buffer is
/// rounded up to MemoryLayout::kAlign.
inline std::int64_t grid2d_workspace_bytes(bool overlapped, const AttnProblem& pr, int R, int C, std::int64_t n) {
  const std::int64_t B = pr.batch, H = pr.heads, Hkv = pr.kv_heads, d = pr.head_dim;
  const std::int64_t io = pr.io_bytes(), acc = pr.acc_bytes();
  const std::int64_t q = B * n * H * d, kv = B * n * Hkv * d, rows = B * H * n;
  auto r     = [](std::int64_t bytes) { return std::int64_t(MemoryLayout::round_up(std::size_t(bytes))); };
  auto state = [&](std::int64_t k) { return r(k * q * acc) + 2 * r(k * rows * acc); };  // k shards' rows
  const std::int64_t kept = r(2 * kv * io);                                               // K_t | V_t
  const std::int64_t kg   = R > 1 && (!overlapped || C > 1) ? 2 * r(R * kv * io) : 0;     // Kg, Vg
  std::int64_t fwd = kg, bwd = kg;
  bwd += r(2 * q * io) + r(2 * rows * acc) + r(q * acc) + r(2 * R * kv * acc);  // (q, dO), (LSE, Delta), dQ, dKg|dVg
  if (R > 1) bwd += r(2 * kv * acc);  // dK_t|dV_t (dKg|dVg itself when R == 1)
  if (!overlapped) {
    if (R > 1) fwd += r(R * 2 * kv * io), bwd += r(R * 2 * kv * io);             // gathered K/V, rank order
    fwd += r(C * q * io) + state(C);                                              // Qg, its state
    if (C > 1) fwd += r(C * q * io) + 2 * r(q * acc + 2 * rows * acc);            // gathered Q, two shard states
    bwd += 2 * r(C * q * io) + 2 * r(C * rows * acc) + r(C * q * acc);            // Qg, dOg, LSEg, Deltag, dQg
    if (C > 1) bwd += r(C * 2 * q * io) + r(C * 2 * rows * acc) + r(C * q * acc); // rank-ordered gathers, dQ shards
    if (R > 1) bwd += r(R * 2 * kv * acc);                                        // dK/dV shards
  } else {
    if (R > 1) fwd += 2 * r(2 * kv * io), bwd += 2 * r(2 * kv * io);              // column ring slots
    fwd += state(1);                                                              // own state
    if (C > 1) fwd += 2 * r(q * io) + 3 * r(q * acc + 2 * rows * acc);            // Q slots, partials, partial in
    if (C > 1) bwd += 2 * r(2 * q * io) + 2 * r(2 * rows * acc) + 3 * r(q * acc); // bundle slots, dQ partials, in
    if (R > 1) bwd += 3 * r(2 * kv * acc);                                        // dK/dV partials, partial in
  }
  return kept + std::max(fwd, bwd);
}

}  // namespace DistAttn
