// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring_types.hpp
/// Value types describing one rank's work at one step of a DistFlashAttn ring
/// schedule (docs/design/schedules.md §1). Pure data: no communication, no kernels.
///
/// Chunk x = token positions [x*c, (x+1)*c) and is owned by rank x.
/// At step t, input payloads travel x -> (x + t) mod P and results travel the
/// other way, x -> (x - t) mod P (schedules.md §1.1), so every rank has at most one
/// input send, one input receive, one result send and one result receive per step.

#include <DistAttn/core/types.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace DistAttn {

enum class RingKind {
  Vanilla,   ///< [DFA] Alg. 1 (schedules.md §1.2): P steps, rank x busy for x+1 of them
  Balanced,  ///< [DFA] Alg. 2, corrected (schedules.md §1.3): floor(P/2)+1 steps, helpers when 2t != P
  /// Two-halves ("zigzag") chunk assignment (schedules.md, "Zigzag assignment"): the sequence is
  /// cut into 2P half-chunks and rank x holds half-chunks x and 2P-1-x, so a plain
  /// ring with wrap-around (P steps, K/V from (x-t) mod P) gives every rank the
  /// same causal work at every step, for any P. In ComputeTask and Transfer,
  /// q_chunk / k_chunk / chunk then name the RANK whose two halves are meant.
  Zigzag,
};

enum class Pass { Forward, Backward };

/// What one message carries. Sizes and dtypes: see ring_volume.hpp.
enum class PayloadKind {
  None,
  KV,       ///< k and v of one chunk (kv_heads heads); input in both passes
  Q,        ///< q of one chunk; forward input of a helper
  QBundle,  ///< q, dO, LSE, Delta of one chunk; backward input of a helper
  Partial,  ///< helper's unnormalized state (acc, m, l) for one query chunk; forward result
  GradKV,   ///< partial (dk, dv) for one key chunk; backward result of a normal step
  GradQ,    ///< partial dq for one query chunk; backward result of a helper step
};
inline constexpr int kNumPayloadKinds = 7;

/// One message as seen from one end.
struct Transfer {
  PayloadKind kind = PayloadKind::None;
  /// The rank at the other end (sender for receives, receiver for sends).
  int peer = -1;
  /// The chunk the tensors belong to. Inputs: always the sender's own chunk.
  /// Results: the chunk whose owner folds it in (query chunk for Partial/GradQ,
  /// key chunk for GradKV) — so the receiver of a result always owns `chunk`.
  int chunk = -1;
  /// Step whose compute consumes it (inputs) or produces it (results). When
  /// to post it is the executor's business (inputs may be prefetched during
  /// step-1, results exchanged during step+1).
  int step = -1;
  /// Local rows [rows_begin, rows_end) of the chunk that travel; rows_end < 0: all
  /// of them. A masked schedule (ring_schedule.hpp) sends the K/V, and returns the
  /// dK/dV, of only the key rows some allowed pair of the consumer's task reaches.
  std::int64_t rows_begin = 0, rows_end = -1;

  bool active() const { return kind != PayloadKind::None; }
  bool whole() const { return rows_end < 0; }
  /// Rows of a chunk of c that travel.
  std::int64_t rows(std::int64_t c) const { return whole() ? c : rows_end - rows_begin; }
};

inline bool operator==(const Transfer& a, const Transfer& b) {
  return a.kind == b.kind && a.peer == b.peer && a.chunk == b.chunk && a.step == b.step &&
         a.rows_begin == b.rows_begin && a.rows_end == b.rows_end;
}
inline bool operator!=(const Transfer& a, const Transfer& b) { return !(a == b); }

/// One block computation: query chunk q_chunk against key/value chunk k_chunk.
/// Forward and backward compute the same blocks at the same steps (§2.4 mirror).
struct ComputeTask {
  int q_chunk = -1;
  int k_chunk = -1;
  /// q (and in backward dO, LSE, Delta) is the rank's own chunk; false for a
  /// helper, which works on a received Q / QBundle.
  bool own_query = true;
  /// k, v are the rank's own chunk; false when they arrived as a KV payload.
  bool own_kv = true;
  /// Lower-triangular causal mask inside the block. True only for q_chunk ==
  /// k_chunk; every other computed block has all keys before all queries and
  /// needs no mask.
  bool causal = false;
  /// The query-side output starts empty instead of accumulating into the rank's
  /// own running state: forward, a helper's fresh (acc, m, l) shipped as Partial;
  /// backward, a fresh dq shipped as GradQ. Equal to !own_query. (The key-side
  /// backward output is fresh and shipped as GradKV iff !own_kv.)
  bool fresh_state = false;

  /// The global mask `rule` on this block, with global token positions so that
  /// block skipping and element masking need no further context. Off the
  /// diagonal a dense causal block has every key before every query: no mask.
  Mask mask(std::int64_t chunk_tokens, const Mask& rule) const {
    if (rule.is_dense() && !causal) return Mask::none();
    return rule.on_block(PositionMap{std::int64_t(q_chunk) * chunk_tokens, 1},
                         PositionMap{std::int64_t(k_chunk) * chunk_tokens, 1});
  }
};

inline bool operator==(const ComputeTask& a, const ComputeTask& b) {
  return a.q_chunk == b.q_chunk && a.k_chunk == b.k_chunk && a.own_query == b.own_query &&
         a.own_kv == b.own_kv && a.causal == b.causal && a.fresh_state == b.fresh_state;
}

/// Everything rank `rank` does at step `step` of one pass.
struct RankStep {
  int rank = -1;
  int step = -1;
  Pass pass = Pass::Forward;
  /// Empty when the rank idles at this step.
  std::optional<ComputeTask> compute;
  /// Input this step's compute needs, from (rank - step) mod P: KV (normal
  /// step), Q / QBundle (helper step). Inactive at step 0 and when idle.
  Transfer recv_input;
  /// Input the rank provides for the compute of rank (rank + step) mod P at the
  /// same step: its own KV if rank + step < P, else (helping steps only) its
  /// own Q / QBundle to the helper.
  Transfer send_input;
  /// Result of this step's compute that belongs to another rank, to
  /// (rank - step) mod P: Partial (forward helper), GradKV (backward normal
  /// step, to the key chunk's owner), GradQ (backward helper).
  Transfer send_result;
  /// Result produced at this step by rank (rank + step) mod P that this rank
  /// must merge (Partial, with the §1.3 merge) or add (GradKV, GradQ) into its
  /// own outputs before finalizing them.
  Transfer recv_result;
};

inline const char* to_string(RingKind k) {
  return k == RingKind::Vanilla ? "vanilla" : (k == RingKind::Balanced ? "balanced" : "zigzag");
}
inline const char* to_string(Pass p) { return p == Pass::Forward ? "forward" : "backward"; }
inline const char* to_string(PayloadKind k) {
  switch (k) {
    case PayloadKind::None: return "none";
    case PayloadKind::KV: return "kv";
    case PayloadKind::Q: return "q";
    case PayloadKind::QBundle: return "q-bundle";
    case PayloadKind::Partial: return "partial";
    case PayloadKind::GradKV: return "dkv";
    case PayloadKind::GradQ: return "dq";
  }
  return "?";
}

}  // namespace DistAttn
