// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file machine_model.hpp
/// The machine the cost model predicts for: links per level (intra-node,
/// inter-node), GPUs per node, tile throughput, and the transfer-time rules the
/// executor models share (docs/design/cost_model.md has the equations).
///
/// Link time of m bytes on one level: latency + m / bandwidth. Every rank has its
/// own full-duplex link per level (NVLink to the switch; one InfiniBand HCA per GPU,
/// as in DGX/HGX H100 and H200 nodes): what one rank sends and what it receives
/// at the same time do not slow each other down, but two sends on the same level do.

#include <DistAttn/core/error.hpp>
#include <DistAttn/cost/core_balance.hpp>
#include <DistAttn/cost/tile_throughput.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace DistAttn {

enum class LinkLevel { Intra, Inter };
struct ConcurrentTransfers;
inline constexpr int kNumLinkLevels = 2;

struct Link {
  double bandwidth_Bps = 0;  ///< bytes per second, one direction, one rank
  double latency_s = 0;      ///< per transfer (message or collective step)
};

struct MachineModel {
  int gpus_per_node = 8;
  Link intra;
  Link inter;
  TileThroughput tiles;
  /// Device memory per rank; rank_choices drops choices whose workspace exceeds
  /// it (the caller's own tensors come on top). 0 = not checked.
  double device_memory_bytes = 0;
  /// Set by with_shared_cores: `shared_ranks` ranks on `shared_cores` cores, the
  /// tile table already slowed by shared_ranks / shared_cores (0: not shared).
  int shared_ranks = 0;
  double shared_cores = 0;
  /// Set by with_shared_cores (cores > 0): the ranks are CPU processes of one host, and
  /// a message between two of them is a memory copy that the receiving rank's core
  /// makes inside its MPI wait (Open MPI's shared-memory transport copies once, on
  /// the receiver). It takes that core's time: it does not overlap the rank's own
  /// compute, and where ranks share cores it is slowed down like compute.
  bool host_copies = false;

  /// ranks / cores where the ranks share fewer cores, else 1: the slow-down of
  /// every rank's work while all of them have work.
  double core_share() const {
    return shared_cores > 0 && shared_ranks > shared_cores ? double(shared_ranks) / shared_cores : 1.0;
  }
  /// Seconds of a rank's own core spent receiving what `t` holds (host_copies: each
  /// level's transfer time, at the shared slow-down); 0 where transfers run beside
  /// compute (NCCL, a GPU's copy engines).
  double receive_work_seconds(const ConcurrentTransfers& t) const;
  /// The factor on a transfer's time that makes it that copy: core_share() with host_copies, else 1.
  double host_copy_share() const { return host_copies ? core_share() : 1.0; }

  /// The factor on a step's compute when its work keeps only `busy` of the shared
  /// ranks computing (Σ work / the largest, so a rank with a tenth of the largest
  /// work counts a tenth): the others wait for messages and leave their share of
  /// the cores to the busy ones (the vanilla ring's early steps, where the ranks
  /// below the diagonal have no block). 1 where the cores are not shared.
  double busy_scale(double busy) const {
    if (!(shared_cores > 0) || shared_ranks <= shared_cores) return 1.0;
    return std::max(1.0, busy / shared_cores) / (double(shared_ranks) / shared_cores);
  }

  /// A step's compute `t` (the slowest rank's, at the fluid share of `busy`
  /// ranks) where the busy ranks do not divide over the shared cores: the fuller
  /// core holds the step up until the scheduler evens them out (core_balance.hpp,
  /// the table's balance time). `t` where the cores are not shared.
  /// `independent_groups`: the step is one of several groups' that do not wait for
  /// each other (the hybrid's head groups). A group placed on the emptier core runs
  /// ahead instead of idling at the step's end, so nothing prompts the scheduler to
  /// move a rank, and the fuller core sets the pace: the whole-rank share, wherever
  /// the table has a balance time (none: the fluid share everywhere).
  double shared_step_seconds(double t, double busy, bool independent_groups = false) const {
    if (!(shared_cores > 0) || shared_ranks <= shared_cores) return t;
    if (independent_groups && tiles.balance_seconds() > 0) return whole_share_seconds(t, busy, shared_cores);
    return balanced_share_seconds(t, busy, shared_cores, tiles.balance_seconds());
  }
  /// The same with every shared rank busy (Attention2D, Ulysses: no idle steps).
  double shared_step_seconds(double t) const { return shared_step_seconds(t, shared_ranks); }

  const Link& link(LinkLevel l) const { return l == LinkLevel::Intra ? intra : inter; }
  /// Seconds to move `bytes` over one link of level l in one transfer.
  double transfer_seconds(LinkLevel l, double bytes) const {
    if (bytes <= 0) return 0;
    const Link& k = link(l);
    return k.latency_s + (std::isinf(k.bandwidth_Bps) ? 0.0 : bytes / k.bandwidth_Bps);
  }
  void check(const char* where) const {
    DISTATTN_REQUIRE(gpus_per_node >= 1, where, "gpus_per_node must be >= 1, got " << gpus_per_node);
    for (const Link* k : {&intra, &inter}) {
      const char* name = k == &intra ? "intra" : "inter";
      DISTATTN_REQUIRE(k->bandwidth_Bps > 0 && !std::isnan(k->bandwidth_Bps), where,
                       name << "-node bandwidth_Bps must be > 0 (inf allowed), got " << k->bandwidth_Bps);
      DISTATTN_REQUIRE(k->latency_s >= 0 && std::isfinite(k->latency_s), where,
                       name << "-node latency_s must be finite and >= 0, got " << k->latency_s);
    }
    DISTATTN_REQUIRE(device_memory_bytes >= 0, where,
                     "device_memory_bytes must be >= 0 (0 = not checked), got " << device_memory_bytes);
  }
};

/// Defaults of docs/design/cost_model.md ("Parameters"): intra-node = the NCCL
/// point-to-point numbers measured on 2x H200 NVLink (docs/PERFORMANCE.md,
/// "Communication layer": 297.96 GB/s at 256 MiB, 16.41 us for 4 KiB); inter-node =
/// one 400 Gb/s NDR InfiniBand HCA per GPU (line rate 50 GB/s, not measured here),
/// with the same per-transfer latency as the measured NVLink one (an assumption:
/// no inter-node measurement exists yet). 8 GPUs per node.
inline MachineModel nvlink_ib_node_defaults(TileThroughput tiles) {
  MachineModel m;
  m.gpus_per_node = 8;
  m.intra = Link{297.96e9, 16.41e-6};
  m.inter = Link{50.0e9, 16.41e-6};
  m.tiles = std::move(tiles);
  return m;
}

/// `ranks` processes sharing `cores` CPU cores (CPU MPI runs on one host): while
/// every rank computes, each gets cores / ranks of a core, so tile and
/// elementwise rates are divided by max(1, ranks / cores); steps in which fewer
/// ranks compute get some of it back (MachineModel::busy_scale, applied where an
/// executor's model knows which ranks are busy). Their messages are their own
/// copies (MachineModel::host_copies), at any cores > 0, and a call's head factor is the
/// one measured at ranks / cores ranks per core (TileThroughput::head_factor). cores <= 0:
/// GPU ranks, not shared.
inline MachineModel with_shared_cores(MachineModel m, int ranks, double cores) {
  DISTATTN_REQUIRE(ranks >= 1 && std::isfinite(cores), "DistAttn::with_shared_cores",
                   "ranks must be >= 1 and cores finite (got ranks=" << ranks << ", cores=" << cores << ")");
  if (cores > 0) m.host_copies = true;
  if (cores > 0 && ranks > cores) {
    m.tiles = m.tiles.slowed_down(double(ranks) / cores);
    m.tiles.set_core_share(double(ranks) / cores);
    m.shared_ranks = ranks, m.shared_cores = cores;
  }
  return m;
}

/// Which node the ranks of a (sub)communicator sit on: member i is world rank
/// first + i * stride, and world ranks fill nodes in order (gpus_per_node each).
struct RankPlacement {
  int first = 0;
  int stride = 1;
  int gpus_per_node = 8;
  /// Groups running the same schedule at the same time (the hybrid's U head
  /// groups), for counting the busy ranks of a step on shared cores.
  int concurrent_groups = 1;

  int node(int member) const { return (first + member * stride) / gpus_per_node; }
  LinkLevel level(int a, int b) const { return node(a) == node(b) ? LinkLevel::Intra : LinkLevel::Inter; }
  /// The slowest level a ring over these members uses.
  LinkLevel group_level(const std::vector<int>& members) const {
    for (int m : members)
      if (node(m) != node(members.front())) return LinkLevel::Inter;
    return LinkLevel::Intra;
  }
};

/// What one rank has in flight at the same time, per level and direction.
struct ConcurrentTransfers {
  double sent[kNumLinkLevels] = {0, 0};
  double received[kNumLinkLevels] = {0, 0};
  bool any[kNumLinkLevels] = {false, false};

  void send(LinkLevel l, double bytes) { add(sent, l, bytes); }
  void recv(LinkLevel l, double bytes) { add(received, l, bytes); }
  /// Completion time: the busier direction of the slowest level, one latency.
  double seconds(const MachineModel& m) const {
    double t = 0;
    for (int i = 0; i < kNumLinkLevels; ++i)
      if (any[i]) t = std::max(t, m.transfer_seconds(LinkLevel(i), std::max(sent[i], received[i])));
    return t;
  }
  /// The receiving side alone: every level's received bytes, one after the other.
  double receive_seconds(const MachineModel& m) const {
    double t = 0;
    for (int i = 0; i < kNumLinkLevels; ++i)
      if (any[i]) t += m.transfer_seconds(LinkLevel(i), received[i]);
    return t;
  }

 private:
  void add(double* a, LinkLevel l, double bytes) {
    if (bytes <= 0) return;
    a[int(l)] += bytes;
    any[int(l)] = true;
  }
};

inline double MachineModel::receive_work_seconds(const ConcurrentTransfers& t) const {
  return host_copies ? t.receive_seconds(*this) * core_share() : 0.0;
}

/// A ring all-gather or reduce-scatter over k members with `shard_bytes` per
/// member: k - 1 steps, each moving one shard over the group's slowest level.
inline double ring_collective_seconds(const MachineModel& m, LinkLevel l, int k, double shard_bytes) {
  return k <= 1 ? 0.0 : double(k - 1) * m.transfer_seconds(l, shard_bytes);
}

}  // namespace DistAttn
