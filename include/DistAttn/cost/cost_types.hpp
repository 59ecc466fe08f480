// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file cost_types.hpp
/// Value types of the cost model (cost_model.hpp): the problem, an executor
/// choice, and what is predicted for it. Pure data, no communication.

#include <DistAttn/core/error.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/executor/executor_spec.hpp>
#include <DistAttn/cost/tile_throughput.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

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
  /// Key window and packed documents (global offsets, cu_seqlens) as
  /// ExecutorOptions has them: the work is priced in allowed pairs under them
  /// (TileThroughput::masked_block_seconds). Unbounded and empty: dense.
  Window window{};
  std::vector<std::int64_t> documents{};

  /// Causality, window and documents from the options an executor is built with.
  AttnProblem& with_mask_of(const ExecutorOptions& o) {
    causal = o.causal, window = o.window, documents = o.documents;
    return *this;
  }
  /// The global rule (ExecutorOptions::mask_rule); its documents point into this object.
  Mask rule() const {
    ExecutorOptions o;
    o.causal = causal, o.window = window;
    const Mask m = o.mask_rule();
    return documents.empty() ? m : m.with_documents(Documents{documents.data(), int(documents.size()) - 1});
  }
  bool dense() const { return !window.bounded() && documents.empty(); }

  int io_bytes() const { return dtype_bytes(dtype); }
  int acc_bytes() const { return accum_bytes(dtype); }
  void check(const char* where) const {
    DISTATTN_REQUIRE(batch >= 1, where, "batch must be >= 1, got " << batch);
    DISTATTN_REQUIRE(seq_len >= 1, where, "seq_len must be >= 1, got " << seq_len);
    DISTATTN_REQUIRE(heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0, where,
                     "heads (" << heads << ") must be a positive multiple of kv_heads (" << kv_heads << ")");
    DISTATTN_REQUIRE(head_dim >= 1, where, "head_dim must be >= 1, got " << head_dim);
    dtype_bytes(dtype);
    // The window and the documents are checked as an executor checks them.
    ExecutorOptions o;
    o.causal = causal, o.window = window, o.documents = documents;
    check_shared_options(where, o, seq_len);
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
