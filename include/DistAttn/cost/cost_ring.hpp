// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file cost_ring.hpp
/// Cost model of RingAttention (ring/ring_attention.hpp) for the vanilla,
/// balanced and zigzag schedules: time per pass, bytes, workspace.
///
/// What the executor overlaps (ring_attention.hpp, run_forward/run_backward):
/// the inputs of step t+1 are posted before step t's tile runs; the results of
/// step t are posted after it and waited for (and merged or added) after step
/// t+1's tile. So during step t a rank has in flight the inputs of t+1 and the
/// results of t-1, and each step costs, on each rank,
///   max(tiles of step t, those transfers) + the merge of the results of t-1,
/// and the step ends when the slowest rank is done (every rank waits for data
/// from another). After the last step the results of that step are exposed.
/// Every rank of every step is evaluated from RingSchedule itself (O(P * steps)),
/// masked as the executor runs it (ring_schedule_of), so a window or documents
/// price only the K/V and gradients that are sent.

#include <DistAttn/cost/cost_types.hpp>
#include <DistAttn/core/mask.hpp>
#include <DistAttn/cost/machine_model.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/schedule/padding.hpp>
#include <DistAttn/schedule/ring_buffers.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>
#include <DistAttn/schedule/ring_volume.hpp>

#include <algorithm>
#include <vector>

namespace DistAttn {

inline RingKind ring_kind_of(ExecutorKind k) {
  DISTATTN_REQUIRE(is_ring(k), "DistAttn::ring_kind_of", "executor '" << to_string(k) << "' is not a ring kind");
  return k == ExecutorKind::RingVanilla ? RingKind::Vanilla
                                        : (k == ExecutorKind::RingBalanced ? RingKind::Balanced : RingKind::Zigzag);
}

/// N padded as the ring needs it (SequencePadding: a multiple of P, 2P for
/// zigzag). Padding is exact only for causal attention; full attention needs N to fit already.
inline std::int64_t ring_padded_len(const AttnProblem& pr, int P, RingKind kind) {
  constexpr const char* where = "DistAttn::ring_padded_len";
  const std::int64_t unit = SequencePadding::unit(P, token_layout_kind(kind));
  DISTATTN_REQUIRE(pr.causal || kind == RingKind::Zigzag, where,
                   "the " << to_string(kind) << " ring skips every block above the diagonal: full (non-causal) "
                          << "attention needs the zigzag kind");
  const std::int64_t padded = SequencePadding::padded_length(pr.seq_len, P, token_layout_kind(kind));
  DISTATTN_REQUIRE(pr.causal || padded == pr.seq_len, where,
                   "full attention cannot be padded: N=" << pr.seq_len << " must be a multiple of " << unit);
  return padded;
}

inline RingSizes ring_sizes(const AttnProblem& pr, std::int64_t chunk) {
  RingSizes z;
  z.chunk_tokens = chunk;
  z.heads = pr.heads, z.kv_heads = pr.kv_heads, z.head_dim = pr.head_dim;
  z.io_bytes = pr.io_bytes(), z.stat_bytes = pr.acc_bytes(), z.grad_bytes = pr.acc_bytes();
  return z;
}

/// The schedule the executor runs for `pr` on P ranks of c tokens: a window or
/// documents remove the tasks they empty and their transfers (ring_schedule.hpp).
inline RingSchedule ring_schedule_of(const AttnProblem& pr, int P, RingKind kind, std::int64_t c) {
  return pr.dense() ? RingSchedule(P, kind) : RingSchedule(RingLayout(P, c, kind), pr.rule());
}

namespace Impl {
/// Tile seconds of rank x's block at one step (zigzag: its half-blocks, as the
/// executor's for_each_half_block visits them). A window or documents price each
/// (half-)block by its allowed pairs; a dense mask by the block's kind as before.
inline double ring_task_seconds(const RingSchedule& s, int x, int t, TileDirection dir, const AttnProblem& pr,
                                std::int64_t c, const TileThroughput& tiles) {
  const auto task = s.task(x, t);
  if (!task) return 0;
  const double bh = double(pr.batch) * pr.heads;
  if (!pr.dense()) {
    // Each piece of the query rank's rows against each of the key rank's, priced
    // by what the mask allows of it (skipped pieces cost nothing).
    const RingLayout lay(s.num_ranks(), c, s.kind());
    const Mask rule = pr.rule();
    const ShapeClass cls{dir, BlockKind::Causal, pr.dtype, pr.head_dim};
    double seconds = 0;
    for (int a = 0; a < lay.pieces(); ++a)
      for (int b = 0; b < lay.pieces(); ++b)
        seconds += tiles.masked_block_seconds(cls, bh, rule, lay.piece(task->q_chunk, a), lay.piece_len(),
                                              lay.piece(task->k_chunk, b), lay.piece_len());
    return seconds;
  }
  const ShapeClass full{dir, BlockKind::Full, pr.dtype, pr.head_dim};
  const ShapeClass diag{dir, BlockKind::Causal, pr.dtype, pr.head_dim};
  // A square block of n rows, diagonal (causal) or unmasked.
  auto square = [&](const ShapeClass& cls, std::int64_t n) { return tiles.block_seconds(cls, bh, {0, 1}, n, {0, 1}, n); };
  if (s.kind() != RingKind::Zigzag) return square(task->causal ? diag : full, c);
  const std::int64_t h = c / 2;
  if (!pr.causal) return 4 * square(full, h);
  // Own step: the two half-chunk diagonals and the later half against the
  // earlier one; any other step: exactly two unmasked half-blocks.
  if (t == 0) return 2 * square(diag, h) + square(full, h);
  return 2 * square(full, h);
}
}  // namespace Impl

/// One pass of RingAttention on P = s.num_ranks() ranks placed by `place`.
inline PassPrediction predict_ring_pass(const RingSchedule& s, Pass pass, const AttnProblem& pr,
                                        std::int64_t padded_len, const MachineModel& m, const RankPlacement& place) {
  const int P = s.num_ranks(), T = s.num_steps();
  const std::int64_t c = padded_len / P;
  const RingSizes z = ring_sizes(pr, c);
  const TileDirection dir = pass == Pass::Forward ? TileDirection::Forward : TileDirection::Backward;
  const double B = pr.batch;
  auto bytes = [&](const Transfer& tr) { return B * double(transfer_bytes(tr, z)); };
  // A merge (forward) or gradient sum (backward) reads two operands and writes one.
  auto merge_seconds = [&](const Transfer& tr) { return tr.active() ? m.tiles.elementwise_seconds(3 * bytes(tr)) : 0.0; };

  std::vector<double> sent(P, 0.0), received(P, 0.0);
  std::vector<double> compute_x(P), merge_x(P), xfer_x(P), copy_x(P);
  PassTimeline tl;
  tl.p.steps = T;
  for (int t = 0; t <= T; ++t) {
    double work_sum = 0, work_max = 0;
    for (int x = 0; x < P; ++x) {
      ConcurrentTransfers inflight;
      auto add = [&](const Transfer& tr, bool is_send) {
        if (!tr.active()) return;
        const double b = bytes(tr);
        (is_send ? sent : received)[std::size_t(x)] += b;
        if (is_send) inflight.send(place.level(x, tr.peer), b);
        else inflight.recv(place.level(x, tr.peer), b);
      };
      double compute = 0, merge = 0;
      if (t < T) {
        compute = Impl::ring_task_seconds(s, x, t, dir, pr, c, m.tiles);
        if (t + 1 < T) {
          const RankStep next = s.step(x, t + 1, pass);
          add(next.send_input, true);
          add(next.recv_input, false);
        }
      }
      if (t >= 1) {
        const RankStep prev = s.step(x, t - 1, pass);
        add(prev.send_result, true);
        add(prev.recv_result, false);
        merge = merge_seconds(prev.recv_result);
      }
      // CPU ranks copy what they receive with their own cores (host_copies): work, not overlapped.
      const double copy = m.receive_work_seconds(inflight);
      compute_x[std::size_t(x)] = compute, merge_x[std::size_t(x)] = merge, copy_x[std::size_t(x)] = copy;
      xfer_x[std::size_t(x)] = m.host_copies ? 0.0 : inflight.seconds(m);
      work_sum += compute + copy + merge, work_max = std::max(work_max, compute + copy + merge);
    }
    const double busy = work_max > 0 ? work_sum / work_max * place.concurrent_groups : 0.0;
    double scale = work_max > 0 ? m.busy_scale(busy) : 1.0;
    // Busy ranks that do not divide over the cores: the step waits for the fuller core.
    if (work_max > 0)
      scale *= m.shared_step_seconds(scale * work_max, busy, place.concurrent_groups > 1) / (scale * work_max);
    double step_s = 0, step_compute = 0;
    for (std::size_t x = 0; x < std::size_t(P); ++x) {
      const double work = scale * compute_x[x], merge = scale * merge_x[x];
      step_s = std::max(step_s, std::max(work + scale * copy_x[x], xfer_x[x]) + merge);
      step_compute = std::max(step_compute, work + merge);
    }
    tl.step(step_s, step_compute);
  }
  for (int x = 0; x < P; ++x) {
    tl.p.max_bytes_sent = std::max(tl.p.max_bytes_sent, std::int64_t(sent[std::size_t(x)]));
    tl.p.max_bytes_received = std::max(tl.p.max_bytes_received, std::int64_t(received[std::size_t(x)]));
  }
  return tl.p;
}

/// Bytes RingAttention holds per rank with all heads in one pass: the peak of
/// its forward and backward layouts in the shared workspace, planned by the
/// executor's own buffer table (schedule/ring_buffers.hpp).
inline std::int64_t ring_workspace_bytes(RingKind kind, const AttnProblem& pr, std::int64_t c, int P) {
  const RingShape s =
      RingShape::of(ring_schedule_of(pr, P, kind, c), pr.batch, int(c), pr.heads, pr.kv_heads, pr.head_dim, pr.kv_heads);
  return Impl::with_element_sizes(pr.io_bytes(), [&](auto t, auto acc) {
    return std::int64_t(RingBuffers<decltype(t), decltype(acc), Kokkos::HostSpace>::plan(s).peak_bytes());
  });
}

}  // namespace DistAttn
