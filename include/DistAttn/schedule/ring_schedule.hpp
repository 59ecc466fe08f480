// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring_schedule.hpp
/// DistFlashAttn schedules for P ranks holding contiguous chunks (docs/design/schedules.md §1),
/// 0-based: rank x owns chunk x.
///
///   Vanilla  (§2.2):   P steps; at step t rank x >= t computes (q_x, kv_{x-t}),
///                      kv fetched straight from its owner (distance t, no wrap).
///   Balanced (§2.3.3): T+1 steps, T = floor(P/2). Step t >= 1: rank x >= t is
///                      "normal" as above; rank x < t "helps" y = x - t + P with
///                      (q_y, kv_x) iff 2t != P, else idles. The printed Alg. 2
///                      guard t != floor(P/2) is wrong for odd P; 2t != P is the
///                      corrected rule.
///   Backward (§2.4):   the mirror of the forward for any P: same blocks at the
///                      same steps; a normal step returns (dk, dv) of chunk x-t to
///                      its owner, a helper step returns dq to y.
///
/// Everything is computed on demand in O(1) (O(steps) for per-rank lists), so
/// the schedule costs nothing to hold even for thousands of ranks.
///
/// Masked (RingSchedule(layout, rule)): communication follows the mask. A task
/// whose blocks the mask empties (RingLayout::blocks) is not computed, and the
/// inputs it would read and the results it would produce are not sent; steps after
/// the last task of any rank are dropped, and a K/V input (backward: its dK/dV
/// result) carries only the key rows the task's allowed pairs reach
/// (Transfer::rows_begin, rows_end). With a causal window W <= chunk a rank then
/// receives the K/V of the W keys before its rows (zigzag: before each half).
/// One bit per (rank, step), computed from the global mask, so every rank that
/// agreed on the options derives the same schedule.

#include <DistAttn/core/error.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/schedule/ring_types.hpp>

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace DistAttn {

class RingSchedule {
 public:
  RingSchedule(int num_ranks, RingKind kind) : num_ranks_(num_ranks), kind_(kind) {
    DISTATTN_REQUIRE(num_ranks >= 1, "DistAttn::RingSchedule", "P (num_ranks) must be >= 1, got " << num_ranks);
    num_steps_ = kind == RingKind::Balanced ? num_ranks / 2 + 1 : num_ranks;
  }
  /// The schedule of `layout`'s ranks and kind under the global mask `rule`
  /// (positions as the layout places them): tasks no allowed pair reaches, their
  /// transfers and trailing empty steps removed. A dense rule gives the plain schedule.
  RingSchedule(const RingLayout& layout, const Mask& rule) : RingSchedule(layout.ranks(), layout.kind()) {
    if (rule.is_dense()) return;
    needed_.assign(std::size_t(num_ranks_) * std::size_t(num_steps_), false);
    kv_rows_.assign(needed_.size(), {0, -1});
    int last = 0;
    for (int t = 0; t < num_steps_; ++t)
      for (int x = 0; x < num_ranks_; ++x) {
        const auto task = plain_task(x, t);
        if (!task) continue;
        const std::vector<PieceBlock> blocks = layout.blocks(*task, rule, rule);
        if (blocks.empty()) continue;
        needed_[slot(x, t)] = true;
        if (!task->own_kv) kv_rows_[slot(x, t)] = key_rows(layout, blocks);
        last = t;
      }
    num_steps_ = last + 1;
  }
  /// Whether the mask removed tasks (RingSchedule(layout, rule) with a window or documents).
  bool masked() const { return !needed_.empty(); }

  int num_ranks() const { return num_ranks_; }
  RingKind kind() const { return kind_; }
  int num_steps() const { return num_steps_; }

  /// Whether ranks x < t work for a later rank at step t.
  bool helps(int t) const { return kind_ == RingKind::Balanced && t >= 1 && 2 * t != num_ranks_; }

  /// The block rank computes at step t (identical in both passes), or nothing.
  std::optional<ComputeTask> task(int rank, int t) const {
    check_rank_step(rank, t, "DistAttn::RingSchedule::task");
    return task_unchecked(rank, t);
  }

  RankStep forward(int rank, int t) const { return step(rank, t, Pass::Forward); }
  RankStep backward(int rank, int t) const { return step(rank, t, Pass::Backward); }

  RankStep step(int rank, int t, Pass pass) const {
    check_rank_step(rank, t, "DistAttn::RingSchedule::step");
    const int P = num_ranks_;
    const bool fwd = pass == Pass::Forward;
    RankStep s;
    s.rank = rank;
    s.step = t;
    s.pass = pass;
    s.compute = task_unchecked(rank, t);
    if (t == 0) return s;  // diagonal block, everything local

    if (kind_ == RingKind::Zigzag) {  // a full ring: K/V from (x-t), gradients back to it
      const int from = (rank - t + P) % P, to = (rank + t) % P;
      s.recv_input = Transfer{PayloadKind::KV, from, from, t};
      s.send_input = Transfer{PayloadKind::KV, to, rank, t};
      if (!fwd) {
        s.send_result = Transfer{PayloadKind::GradKV, from, from, t};
        s.recv_result = Transfer{PayloadKind::GradKV, to, rank, t};
      }
      return without_unneeded(s);
    }

    if (rank >= t) {
      s.recv_input = Transfer{PayloadKind::KV, rank - t, rank - t, t};
      if (!fwd) s.send_result = Transfer{PayloadKind::GradKV, rank - t, rank - t, t};
    } else if (helps(t)) {
      const int y = rank - t + P;
      s.recv_input = Transfer{fwd ? PayloadKind::Q : PayloadKind::QBundle, y, y, t};
      s.send_result = Transfer{fwd ? PayloadKind::Partial : PayloadKind::GradQ, y, y, t};
    }

    if (rank + t < P) {
      s.send_input = Transfer{PayloadKind::KV, rank + t, rank, t};
      // The consumer rank + t >= t is a normal rank working on our k/v chunk.
      if (!fwd) s.recv_result = Transfer{PayloadKind::GradKV, rank + t, rank, t};
    } else if (helps(t)) {
      const int h = rank + t - P;  // h < t: a helper working on our q
      s.send_input = Transfer{fwd ? PayloadKind::Q : PayloadKind::QBundle, h, rank, t};
      s.recv_result = Transfer{fwd ? PayloadKind::Partial : PayloadKind::GradQ, h, rank, t};
    }
    return without_unneeded(s);
  }

  /// Number of blocks the rank computes (same in both passes).
  int num_tasks(int rank) const {
    check_rank(rank, "DistAttn::RingSchedule::num_tasks");
    int n = 0;
    for (int t = 0; t < num_steps_; ++t) n += task_unchecked(rank, t) ? 1 : 0;
    return n;
  }

  /// Last step that contributes to the rank's own outputs: forward, its
  /// (acc, m, l) for chunk `rank` (own blocks and received Partials); backward,
  /// its dq, dk, dv (own blocks, GradQ and GradKV received). The outputs are
  /// final once that step's compute and every result produced up to that step
  /// have been folded in. Forward balanced: min(rank, floor(P/2)) (= [REF]'s
  /// rule, schedules.md §1.3); vanilla: rank.
  int finish_step(int rank, Pass pass = Pass::Forward) const {
    check_rank(rank, "DistAttn::RingSchedule::finish_step");
    int last = 0;
    for (int t = 0; t < num_steps_; ++t) {
      const RankStep s = step(rank, t, pass);
      const bool writes_own = s.compute && (s.compute->own_query || (pass == Pass::Backward && s.compute->own_kv));
      if (writes_own || s.recv_result.active()) last = t;
    }
    return last;
  }

  /// Results the rank receives and folds into its own outputs, in step order:
  /// forward, the helper Partials it merges (schedules.md §1.3 "Merges"); backward,
  /// the GradKV and GradQ contributions it adds.
  std::vector<Transfer> merges(int rank, Pass pass = Pass::Forward) const {
    check_rank(rank, "DistAttn::RingSchedule::merges");
    std::vector<Transfer> out;
    for (int t = 1; t < num_steps_; ++t) {
      const RankStep s = step(rank, t, pass);
      if (s.recv_result.active()) out.push_back(s.recv_result);
    }
    return out;
  }

  /// Empty (rank, step) slots, counted from the schedule itself.
  long long idle_slots() const {
    long long busy = 0;
    for (int x = 0; x < num_ranks_; ++x) busy += num_tasks(x);
    return static_cast<long long>(num_ranks_) * num_steps_ - busy;
  }

  /// schedules.md §1.5 accounting: idle slots / (P * num_steps), from the schedule.
  /// Vanilla (P^2-P)/(2P^2); balanced 0 for odd P, 1/(P+2) for even P.
  double idle_fraction() const {
    return double(idle_slots()) / (double(num_ranks_) * double(num_steps_));
  }

  /// The convention printed in [DFA] (Eq. 2, Fig. 1): balanced 0 for odd P and
  /// 1/(2P) for even P (= P/2 idle units over P^2); vanilla (P^2-P)/(2P^2).
  double idle_fraction_printed() const {
    const double P = num_ranks_;
    if (kind_ == RingKind::Vanilla) return (P * P - P) / (2.0 * P * P);
    if (kind_ == RingKind::Zigzag) return 0.0;  // not in the paper; no empty slot
    return num_ranks_ % 2 == 1 ? 0.0 : 1.0 / (2.0 * P);
  }

 private:
  std::size_t slot(int rank, int t) const { return std::size_t(t) * std::size_t(num_ranks_) + std::size_t(rank); }
  std::optional<ComputeTask> task_unchecked(int rank, int t) const {
    if (masked() && !needed_[slot(rank, t)]) return std::nullopt;
    return plain_task(rank, t);
  }
  /// Step s with the transfers of removed tasks dropped. A step's own input and
  /// result belong to the rank's task; the input it sends and the result it gets
  /// back belong to the task of (rank + t) mod P, the one consumer of its input
  /// at step t in every kind (a normal rank, a helper, the zigzag successor).
  RankStep without_unneeded(RankStep s) const {
    if (!masked()) return s;
    if (!s.compute) s.recv_input = s.send_result = Transfer{};
    const int consumer = (s.rank + s.step) % num_ranks_;
    if (!task_unchecked(consumer, s.step)) s.send_input = s.recv_result = Transfer{};
    // K/V in and dK/dV back carry the rows of the task that reads them.
    const auto rows = [&](Transfer& tr, int x) {
      if (tr.kind != PayloadKind::KV && tr.kind != PayloadKind::GradKV) return;
      std::tie(tr.rows_begin, tr.rows_end) = kv_rows_[slot(x, s.step)];
    };
    rows(s.recv_input, s.rank), rows(s.send_result, s.rank);
    rows(s.send_input, consumer), rows(s.recv_result, consumer);
    return s;
  }
  /// The local key rows [begin, end) the blocks' allowed pairs reach; {0, -1} for
  /// all of them. Each block's key interval is monotone in its query position, so
  /// a block's rows run from the first query's first key to the last query's last.
  static std::pair<std::int64_t, std::int64_t> key_rows(const RingLayout& layout, const std::vector<PieceBlock>& blocks) {
    const std::int64_t len = layout.piece_len(), c = layout.chunk();
    std::int64_t lo = c, hi = 0;
    for (const PieceBlock& b : blocks) {
      const RowRange r = b.mask.key_rows(b.mask.q(0), b.mask.q(len - 1), int(len));
      lo = std::min(lo, b.k_piece * len + r.begin);
      hi = std::max(hi, b.k_piece * len + r.end);
    }
    if (lo == 0 && hi == c) return {0, -1};
    return {lo, hi};
  }
  std::optional<ComputeTask> plain_task(int rank, int t) const {
    if (t == 0) return ComputeTask{rank, rank, true, true, true, false};
    if (kind_ == RingKind::Zigzag) return ComputeTask{rank, (rank - t + num_ranks_) % num_ranks_, true, false, false, false};
    if (rank >= t) return ComputeTask{rank, rank - t, true, false, false, false};
    if (helps(t)) return ComputeTask{rank - t + num_ranks_, rank, false, true, false, true};
    return std::nullopt;
  }

  void check_rank(int rank, const char* where) const {
    DISTATTN_REQUIRE(rank >= 0 && rank < num_ranks_, where,
                     "rank " << rank << " out of range [0, " << num_ranks_ << ")");
  }
  void check_rank_step(int rank, int t, const char* where) const {
    check_rank(rank, where);
    DISTATTN_REQUIRE(t >= 0 && t < num_steps_, where,
                     "step t=" << t << " out of range [0, " << num_steps_ << ") for P=" << num_ranks_ << " ("
                               << to_string(kind_) << ")");
  }

  int num_ranks_;
  RingKind kind_;
  int num_steps_ = 0;
  std::vector<bool> needed_;  // masked: whether (rank, step) computes, at slot(rank, step)
  std::vector<std::pair<std::int64_t, std::int64_t>> kv_rows_;  // masked: the K/V rows its task reads
};

}  // namespace DistAttn
