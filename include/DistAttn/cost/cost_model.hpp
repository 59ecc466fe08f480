// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file cost_model.hpp
/// Predicted forward and backward time, exposed communication, bytes and
/// per-rank workspace of every executor for a problem on P ranks, and the
/// ranking of every feasible executor/grid choice (what `--schedule auto` runs).
/// Equations, parameters and limits: docs/design/cost_model.md.
///
///   MachineModel m = nvlink_ib_node_defaults(TileThroughput::load("tiles.txt"));
///   Prediction p = predict(choice, problem, P, m);
///   std::vector<Prediction> r = rank_choices(problem, P, m);   // r.front() is the fastest
///
/// Ranks fill nodes in order (m.gpus_per_node each). Hybrid U x S (HybridAttention):
/// world rank s U + u, so each Ulysses group is U consecutive ranks (inside a node
/// when U divides gpus_per_node) and each sequence group has stride U.

#include <DistAttn/cost/cost_grid2d.hpp>
#include <DistAttn/cost/cost_ring.hpp>
#include <DistAttn/cost/cost_types.hpp>
#include <DistAttn/cost/cost_ulysses.hpp>
#include <DistAttn/schedule/padding.hpp>
#include <DistAttn/core/grid_shape.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace DistAttn {

namespace Impl {
inline std::int64_t padded_to(const AttnProblem& pr, int P, TokenLayout::Kind layout, const char* what) {
  const std::int64_t unit   = SequencePadding::unit(P, layout);
  const std::int64_t padded = SequencePadding::padded_length(pr.seq_len, P, layout);
  DISTATTN_REQUIRE(pr.causal || padded == pr.seq_len, "DistAttn::predict",
                   "full (non-causal) attention cannot be padded: N=" << pr.seq_len << " must be a multiple of "
                                                                      << unit << " for " << what);
  return padded;
}

/// A sequence executor (ring or Attention2D) on P ranks placed by `place`.
inline Prediction predict_sequence(const ExecutorChoice& ch, ExecutorKind kind, int rows, int cols,
                                   const AttnProblem& pr, int P, const MachineModel& m, const RankPlacement& place) {
  Prediction out;
  out.choice = ch;
  out.num_ranks = P;
  if (is_ring(kind)) {
    const RingKind rk = ring_kind_of(kind);
    out.padded_seq_len = ring_padded_len(pr, P, rk);
    const RingSchedule s = ring_schedule_of(pr, P, rk, out.padded_seq_len / P);
    out.forward = predict_ring_pass(s, Pass::Forward, pr, out.padded_seq_len, m, place);
    out.backward = predict_ring_pass(s, Pass::Backward, pr, out.padded_seq_len, m, place);
    out.workspace_bytes = ring_workspace_bytes(rk, pr, out.padded_seq_len / P, P);
    return out;
  }
  DISTATTN_REQUIRE(is_grid2d(kind), "DistAttn::predict", "executor '" << to_string(kind) << "' is not a sequence executor");
  const GridShape shape = choose_grid_shape(P, pr.heads, pr.kv_heads, GridShape{rows, cols});
  out.choice.rows = shape.rows, out.choice.cols = shape.cols;
  out.padded_seq_len = padded_to(pr, P, TokenLayout::Kind::Cyclic, "Attention2D");
  const Grid2DLayout g(shape.rows, shape.cols, out.padded_seq_len);
  const bool o = kind == ExecutorKind::Grid2DO;
  out.forward = predict_grid2d_forward(o, pr, g, m, place);
  out.backward = predict_grid2d_backward(o, pr, g, m, place);
  out.workspace_bytes = grid2d_workspace_bytes(o, pr, shape.rows, shape.cols, g.shard_len());
  return out;
}

inline void add_bytes(PassPrediction& into, const PassPrediction& inner) {
  into.max_bytes_sent += inner.max_bytes_sent;
  into.max_bytes_received += inner.max_bytes_received;
}
}  // namespace Impl

/// The prediction for one choice; throws InvalidArgument naming what does not fit.
inline Prediction predict(const ExecutorChoice& ch, const AttnProblem& pr, int P, const MachineModel& m) {
  constexpr const char* where = "DistAttn::predict";
  pr.check(where);
  m.check(where);
  DISTATTN_REQUIRE(P >= 1, where, "P (ranks) must be >= 1, got " << P);
  const RankPlacement world{0, 1, m.gpus_per_node};
  if (is_ring(ch.kind) || is_grid2d(ch.kind)) {
    return Impl::predict_sequence(ch, ch.kind, ch.rows, ch.cols, pr, P, m, world);
  }
  Prediction out;
  out.choice = ch;
  out.num_ranks = P;
  if (ch.kind == ExecutorKind::Ulysses) {
    UlyssesHeads(P, pr.heads, pr.kv_heads);  // the split rule, with its errors
    AttnProblem padded = pr;
    padded.seq_len = out.padded_seq_len = Impl::padded_to(pr, P, TokenLayout::Kind::Contiguous, "Ulysses");
    out.forward = predict_ulysses_pass(TileDirection::Forward, padded, P, m, world, ch.head_groups);
    out.backward = predict_ulysses_pass(TileDirection::Backward, padded, P, m, world, ch.head_groups);
    out.workspace_bytes = ulysses_workspace_bytes(padded, P, ch.head_groups);
    return out;
  }
  DISTATTN_REQUIRE(ch.kind == ExecutorKind::Hybrid, where, "unknown executor kind " << int(ch.kind));
  const int U = ch.ulysses_degree;
  DISTATTN_REQUIRE(U >= 1 && P % U == 0, where, "Ulysses degree U=" << U << " must be >= 1 and divide P=" << P);
  DISTATTN_REQUIRE(is_ring(ch.inner) || is_grid2d(ch.inner), where,
                   "the hybrid's inner executor must be a ring or Attention2D kind, got '" << to_string(ch.inner) << "'");
  const int S = P / U;
  const UlyssesHeads h(U, pr.heads, pr.kv_heads);
  AttnProblem padded = pr;
  padded.seq_len = out.padded_seq_len = Impl::padded_to(pr, P, TokenLayout::Kind::Zigzag, "the hybrid (2P: zigzag inside)");
  AttnProblem inner = padded;
  inner.heads = h.local_heads(), inner.kv_heads = h.local_kv_heads();
  const Prediction in = Impl::predict_sequence(ch, ch.inner, ch.inner_rows, ch.inner_cols, inner, S, m,
                                               RankPlacement{0, U, m.gpus_per_node, U});
  out.choice.inner_rows = in.choice.rows, out.choice.inner_cols = in.choice.cols;
  const UlyssesSizes z = ulysses_sizes(padded, U, padded.seq_len / P);
  const RankPlacement group{0, 1, m.gpus_per_node};
  auto wrap = [&](PassPrediction p, bool backward) {
    const double reorder = ulysses_reorder_seconds(m, z, pr.batch, backward, UlyssesRole::HybridOuter);
    p.seconds += ulysses_exchange_seconds(m, group, z, pr.batch, backward, UlyssesRole::HybridOuter) + reorder;
    p.compute_only_seconds += reorder;
    const std::int64_t b = std::int64_t(pr.batch) * ulysses_pass_bytes(z, backward, true, UlyssesRole::HybridOuter);
    p.max_bytes_sent += b;
    p.max_bytes_received += b;
    return p;
  };
  out.forward = wrap(in.forward, false);
  out.backward = wrap(in.backward, true);
  // The inner executor's workspace plus the head exchange around it.
  out.workspace_bytes = in.workspace_bytes + head_exchange_workspace_bytes(padded, U, padded.seq_len / P);
  return out;
}

/// Every feasible choice for (problem, P, machine), fastest predicted fwd+bwd first.
/// Feasible: the executor accepts the shapes (after padding) and its workspace
/// fits m.device_memory_bytes when that is set.
struct RankingOptions {
  bool rings = true, grid2d = true, ulysses = true, hybrid = true;
};

inline std::vector<Prediction> rank_choices(const AttnProblem& pr, int P, const MachineModel& m,
                                            const RankingOptions& opt = {}) {
  constexpr const char* where = "DistAttn::rank_choices";
  pr.check(where);
  m.check(where);
  DISTATTN_REQUIRE(P >= 1, where, "P (ranks) must be >= 1, got " << P);
  std::vector<ExecutorChoice> cands;
  auto sequence_choices = [&](int ranks, auto&& add) {
    if (opt.rings)
      for (ExecutorKind k : {ExecutorKind::RingVanilla, ExecutorKind::RingBalanced, ExecutorKind::RingZigzag}) add(k, 0, 0);
    if (opt.grid2d)
      for (int R = 1; R <= ranks; ++R)
        if (ranks % R == 0)
          for (ExecutorKind k : {ExecutorKind::Grid2DNO, ExecutorKind::Grid2DO}) add(k, R, ranks / R);
  };
  sequence_choices(P, [&](ExecutorKind k, int R, int C) {
    ExecutorChoice c;
    c.kind = k, c.rows = R, c.cols = C;
    cands.push_back(c);
  });
  if (opt.ulysses && P > 1) {
    // Every head-group count that splits the heads (ulysses_head_groups drops the
    // rest; heads not divisible by P leave one choice to say why).
    const int L = std::max(1, pr.heads % P == 0 ? pr.heads / P : 1);
    for (int G = 1; G <= L; ++G) {
      if (L % G) continue;
      ExecutorChoice c;
      c.kind = ExecutorKind::Ulysses, c.head_groups = G;
      cands.push_back(c);
    }
  }
  if (opt.hybrid)
    for (int U = 2; U < P; ++U) {
      if (P % U) continue;
      sequence_choices(P / U, [&](ExecutorKind k, int R, int C) {
        ExecutorChoice c;
        c.kind = ExecutorKind::Hybrid, c.ulysses_degree = U, c.inner = k, c.inner_rows = R, c.inner_cols = C;
        cands.push_back(c);
      });
    }
  std::vector<Prediction> out;
  std::string reasons;
  for (const ExecutorChoice& c : cands) {
    try {
      Prediction p = predict(c, pr, P, m);
      DISTATTN_REQUIRE(m.device_memory_bytes == 0 || double(p.workspace_bytes) <= m.device_memory_bytes, where,
                       "workspace " << p.workspace_bytes << " bytes per rank exceeds device_memory_bytes "
                                    << m.device_memory_bytes);
      out.push_back(p);
    } catch (const InvalidArgument& e) {
      if (reasons.size() < 2000) reasons += std::string("\n  ") + c.name() + ": " + e.what();
    }
  }
  DISTATTN_REQUIRE(!out.empty(), where, "no executor fits P=" << P << " and this problem:" << reasons);
  std::stable_sort(out.begin(), out.end(),
                   [](const Prediction& a, const Prediction& b) { return a.total_seconds() < b.total_seconds(); });
  return out;
}

}  // namespace DistAttn
