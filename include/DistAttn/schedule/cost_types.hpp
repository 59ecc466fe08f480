#pragma once
/// @file cost_types.hpp
/// Value types of the cost model (cost_model.hpp): the problem, an executor
/// choice, and what is predicted for it. Pure data, no communication.

#include <DistAttn/core/error.hpp>
#include <DistAttn/schedule/tile_throughput.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

namespace DistAttn {

/// One attention call: q [B, N, H, d], k and v [B, N, Hkv, d], split over P ranks.
struct AttnProblem {
  int batch = 1;
  std::int64_t seq_len = 0;  ///< N, before any padding
  int heads = 1;             ///< H
  int kv_heads = 1;          ///< Hkv (divides H)
  int head_dim = 128;        ///< d
  std::string dtype = "bf16";
  bool causal = true;

  int io_bytes() const { return dtype_bytes(dtype); }
  int acc_bytes() const { return accum_bytes(dtype); }
  void check(const char* where) const {
    DISTATTN_REQUIRE(batch >= 1, where, "batch must be >= 1, got " << batch);
    DISTATTN_REQUIRE(seq_len >= 1, where, "seq_len must be >= 1, got " << seq_len);
    DISTATTN_REQUIRE(heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0, where,
                     "heads (" << heads << ") must be a positive multiple of kv_heads (" << kv_heads << ")");
    DISTATTN_REQUIRE(head_dim >= 1, where, "head_dim must be >= 1, got " << head_dim);
    dtype_bytes(dtype);
  }
};

enum class ExecutorKind { RingVanilla, RingBalanced, RingZigzag, Grid2DNO, Grid2DO, Ulysses, Hybrid };

inline const char* to_string(ExecutorKind k) {
  switch (k) {
    case ExecutorKind::RingVanilla: return "ring";
    case ExecutorKind::RingBalanced: return "balanced";
    case ExecutorKind::RingZigzag: return "zigzag";
    case ExecutorKind::Grid2DNO: return "grid2d-no";
    case ExecutorKind::Grid2DO: return "grid2d-o";
    case ExecutorKind::Ulysses: return "ulysses";
    case ExecutorKind::Hybrid: return "hybrid";
  }
  return "?";
}
inline bool is_grid2d(ExecutorKind k) { return k == ExecutorKind::Grid2DNO || k == ExecutorKind::Grid2DO; }
inline bool is_ring(ExecutorKind k) {
  return k == ExecutorKind::RingVanilla || k == ExecutorKind::RingBalanced || k == ExecutorKind::RingZigzag;
}

/// An executor and its shape. Grid2D: rows x cols (product P). Hybrid:
/// Ulysses degree U = ulysses_degree over heads times `inner` (a ring or Attention2D
/// kind, with inner_rows x inner_cols for a grid) on S = P / U ranks.
struct ExecutorChoice {
  ExecutorKind kind = ExecutorKind::RingZigzag;
  int rows = 0, cols = 0;
  int ulysses_degree = 0;
  ExecutorKind inner = ExecutorKind::RingZigzag;
  int inner_rows = 0, inner_cols = 0;
  int head_groups = 0;  ///< Ulysses: head groups its all-to-alls are pipelined over (0 = the executor's default)

  std::string name() const {
    std::ostringstream os;
    os << to_string(kind);
    if (is_grid2d(kind)) os << ' ' << rows << 'x' << cols;
    if (kind == ExecutorKind::Ulysses && head_groups > 0) os << " G" << head_groups;
    if (kind == ExecutorKind::Hybrid) {
      os << " U" << ulysses_degree << '+' << to_string(inner);
      if (is_grid2d(inner)) os << ' ' << inner_rows << 'x' << inner_cols;
    }
    return os.str();
  }
};

/// One pass (forward or backward) of one executor, the slowest rank's view.
struct PassPrediction {
  double seconds = 0;               ///< predicted wall time of the pass
  double compute_only_seconds = 0;  ///< the same schedule with every transfer taking no time (--decompose)
  std::int64_t max_bytes_sent = 0;      ///< most bytes any rank sends in the pass
  std::int64_t max_bytes_received = 0;  ///< most bytes any rank receives in the pass
  int steps = 0;                        ///< schedule steps (ring) or compute phases (others)

  /// Communication the schedule does not hide: time - compute-only time.
  double exposed_seconds() const { return seconds - compute_only_seconds; }
};

struct Prediction {
  ExecutorChoice choice;
  int num_ranks = 0;
  std::int64_t padded_seq_len = 0;  ///< N after the padding the executor needs
  PassPrediction forward, backward;
  std::int64_t workspace_bytes = 0;  ///< per rank, allocated by the executor for both passes
  double total_seconds() const { return forward.seconds + backward.seconds; }
};

/// Appends step times of a pass; keeps the compute-only sum alongside.
struct PassTimeline {
  PassPrediction p;
  /// A step where `compute` runs while `comm` is in flight, then `merge` (which needs both).
  void overlapped(double compute, double comm, double merge = 0) {
    p.seconds += std::max(compute, comm) + merge;
    p.compute_only_seconds += compute + merge;
  }
  /// The same step where the transfer cannot run beside the compute (a CPU rank's
  /// own copies, MachineModel::host_copies): one after the other.
  void serial(double compute, double comm, double merge = 0) {
    p.seconds += compute + comm + merge;
    p.compute_only_seconds += compute + merge;
  }
  void exposed(double comm) { p.seconds += comm; }
  /// A step already reduced over ranks (slowest rank each way).
  void step(double seconds, double compute_only) {
    p.seconds += seconds;
    p.compute_only_seconds += compute_only;
  }
  void local(double compute) {
    p.seconds += compute;
    p.compute_only_seconds += compute;
  }
};

}  // namespace DistAttn
