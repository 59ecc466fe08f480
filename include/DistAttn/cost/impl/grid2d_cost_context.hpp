// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file cost/impl/grid2d_cost_context.hpp
/// What the Attention2D cost model (cost/cost_grid2d.hpp) computes its
/// passes from: the link level of each collective, the slowest rank's block call
/// per step, and the rings of the O variant. Not part of the API.

#include <DistAttn/core/mask.hpp>
#include <DistAttn/cost/cost_types.hpp>
#include <DistAttn/schedule/grid2d_layout.hpp>
#include <DistAttn/cost/machine_model.hpp>

#include <algorithm>

namespace DistAttn {

namespace Impl {
struct Grid2DCostContext {
  const AttnProblem& pr;
  const Grid2DLayout& g;
  const MachineModel& m;
  const RankPlacement& place;
  LinkLevel row_level = LinkLevel::Intra, col_level = LinkLevel::Intra, permute_level = LinkLevel::Intra;
  Mask rule;  ///< pr's global rule (its documents point into pr)

  Grid2DCostContext(const AttnProblem& p, const Grid2DLayout& l, const MachineModel& mm, const RankPlacement& pl)
      : pr(p), g(l), m(mm), place(pl), rule(p.rule()) {
    for (int r = 0; r < g.rows(); ++r)
      if (place.group_level(g.row_members(r)) == LinkLevel::Inter) row_level = LinkLevel::Inter;
    for (int c = 0; c < g.cols(); ++c)
      if (place.group_level(g.col_members(c)) == LinkLevel::Inter) col_level = LinkLevel::Inter;
    for (int p = 0; p < g.num_ranks(); ++p) {
      const GridCoord rc = g.coord(p);
      if (place.level(p, g.transpose_source(rc.row, rc.col)) == LinkLevel::Inter) permute_level = LinkLevel::Inter;
    }
  }

  double n() const { return double(g.shard_len()); }
  /// Tile seconds of a block call of query rows at `q` against keys at `k`.
  /// Priced under the problem's rule: a window or documents count allowed pairs.
  double block(TileDirection dir, PositionMap q, std::int64_t nq, PositionMap k, std::int64_t nk) const {
    const ShapeClass cls{dir, pr.causal ? BlockKind::Causal : BlockKind::Full, pr.dtype, pr.head_dim};
    return m.tiles.masked_block_seconds(cls, double(pr.batch) * pr.heads, rule, q, nq, k, nk);
  }
  /// The slowest rank's block at one step: f(r, c) gives that rank's seconds.
  /// Every rank computes at every step (on shared cores, MachineModel::shared_step_seconds).
  template <class F>
  double slowest(F&& f) const {
    double t = 0;
    for (int p = 0; p < g.num_ranks(); ++p) {
      const GridCoord rc = g.coord(p);
      t = std::max(t, f(rc.row, rc.col));
    }
    return m.shared_step_seconds(t, m.shared_ranks, place.concurrent_groups > 1);
  }
  /// One transfer: the link's time, or on CPU ranks (host_copies) the receiver's
  /// copy at the shared cores' slow-down.
  double send(LinkLevel l, double bytes) const { return m.transfer_seconds(l, bytes) * m.host_copy_share(); }
  /// compute while comm is in flight, then merge; one after the other on CPU ranks.
  void step(PassTimeline& tl, double compute, double comm, double merge = 0) const {
    if (m.host_copies) tl.serial(compute, comm, merge);
    else tl.overlapped(compute, comm, merge);
  }
  /// Two things at once, or one after the other on CPU ranks.
  double beside(double a, double b) const { return m.host_copies ? a + b : std::max(a, b); }
  /// Two transfers in flight together from one rank.
  double together(LinkLevel la, double ta, LinkLevel lb, double tb) const {
    return la == lb || m.host_copies ? ta + tb : std::max(ta, tb);
  }
  /// A row collective (C members, row_shard bytes each) with a column one (R members) in flight together.
  double row_and_column(double row_shard, double col_shard) const {
    return together(row_level, collective(row_level, g.cols(), row_shard), col_level,
                    collective(col_level, g.rows(), col_shard));
  }
  /// A ring all-gather or reduce-scatter's transfers (ring_collective_seconds), on CPU ranks their copies.
  double collective(LinkLevel l, int k, double shard) const {
    return ring_collective_seconds(m, l, k, shard) * m.host_copy_share();
  }
  /// A sum reduce-scatter over k members with `shard` result bytes each: k - 1 ring
  /// steps, each the link's transfer or the table's reduce rate, whichever is slower.
  double reduce_scatter(LinkLevel l, int k, double shard) const {
    return std::max(collective(l, k, shard), k <= 1 ? 0.0 : (k - 1) * m.tiles.reduce_seconds(shard));
  }
  /// The row and column reduce-scatters in flight together.
  double row_and_column_reduce(double row_shard, double col_shard) const {
    return together(row_level, reduce_scatter(row_level, g.cols(), row_shard), col_level,
                    reduce_scatter(col_level, g.rows(), col_shard));
  }
  /// NO: the slowest rank's one call, gathered queries Qg against gathered keys Kg.
  double gathered_block(TileDirection dir) const {
    return slowest([&](int r, int c) { return block(dir, g.qg(r), g.row_gather_len(), g.kg(c), g.col_gather_len()); });
  }
  /// O: the slowest rank's call on the query block of column c + i against Kg.
  double row_ring_block(TileDirection dir, int i) const {
    return slowest([&](int r, int c) {
      return block(dir, g.qp(r, (c + i) % g.cols()), g.shard_len(), g.kg(c), g.col_gather_len());
    });
  }
  /// O: the column ring, R steps; block i + 1 (kv_shard bytes) travels while block i is computed.
  PassTimeline column_ring(TileDirection dir, double kv_shard) const {
    const int R = g.rows();
    PassTimeline col;
    for (int i = 1; i <= R; ++i) {
      const double comp = slowest([&](int r, int c) {
        return block(dir, g.qp(r, c), g.shard_len(), g.kt((r + i - 1) % R, c), g.shard_len());
      });
      step(col, comp, i < R ? send(col_level, kv_shard) : 0.0);
    }
    return col;
  }
  /// Merge (forward) or sum (backward) of `bytes` of state: two reads, one write.
  double merge(double bytes) const { return m.tiles.elementwise_seconds(3 * bytes); }
  /// A reorder (interleave into position order, a shard cut out of it): one read, one write.
  double copy(double bytes) const { return m.tiles.copy_seconds(2 * bytes); }
  /// Zeroing or resetting `bytes`: one write.
  double fill(double bytes) const { return m.tiles.copy_seconds(bytes); }
};
}  // namespace Impl

}  // namespace DistAttn
