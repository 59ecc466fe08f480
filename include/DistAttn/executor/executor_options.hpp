// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file executor/executor_options.hpp
/// Options and per-pass instrumentation every distributed executor shares;
/// each executor's own options and stats extend these (RingOptions, Grid2DOptions,
/// RingStats, Grid2DStats).

#include <DistAttn/core/types.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace DistAttn {

struct ExecutorOptions {
  /// Causal (global token positions) or full attention.
  bool causal = true;
  /// Key window in tokens (core/mask.hpp): a query sees keys at most `left`
  /// positions before its own and `right` after (right is clipped to 0 when
  /// causal). Unbounded by default; {W, 0} is the causal sliding window of width W.
  Window window{};
  /// Packed documents: global offsets (cu_seqlens: the first 0, non-decreasing, the
  /// last N, or for causal attention at most N with the padded tail after it); a
  /// query sees keys of its own document only. Empty: one sequence.
  /// Every executor's set_documents(offsets) replaces them for the following passes
  /// and drops what a forward kept. It is local and unchecked: AnyAttention::
  /// set_documents checks the offsets and agrees on them first; a direct caller must
  /// pass checked offsets alike on every rank (each pass's agreement compares their hash).
  std::vector<std::int64_t> documents{};
  /// scale, kernel path and check_finite; the executor sets every tile's mask.
  /// check_finite is off here: set attn.check_finite to scan q, k, v (and dO)
  /// for NaN/Inf at the entry of every pass (an extra read and a host wait).
  TileOptions attn = TileOptions::unchecked();
  /// Wait for the compute instance at the end of every forward()/backward(), so
  /// that stats().total_s is the pass's wall time (the driver and perf tests set
  /// it). Off: a pass returns once its work is queued (on GPUs the tiles may still
  /// run), and reading stats() waits only for the clocks of its tiles. Either way
  /// the outputs are ready in the compute instance's order (as the inputs must be):
  /// work queued on it afterwards sees them; other instances must fence it first.
  bool fence_each_pass = false;
  /// Testing aid: sleep this long before every wait on requests that receive
  /// data, so results must not depend on message timing.
  double recv_delay_ms = 0.0;
  /// Skip all transfers (results are then garbage): measures compute alone for
  /// the "exposed communication" decomposition of the perf tests.
  bool compute_only = false;
  /// Bytes the executor's workspace may use on each rank; 0: the device's free
  /// memory, capped by the environment variable DISTATTN_MEMORY_LIMIT when set
  /// (host backends have no free-memory query: there only a limit is checked).
  std::size_t memory_limit_bytes = 0;
  /// Head chunking: kv heads per pass (their query heads go along); must divide
  /// kv_heads. 0: all heads when their workspace fits, else the largest group that
  /// fits on every rank. A group costs a contiguous copy of its inputs, and its
  /// messages are heads/group times smaller and more numerous.
  int head_group = 0;

  /// The global mask these options ask for: causality and the window, on global
  /// token positions (executors place it on each block with Mask::on_block).
  /// The documents are read from this object's host vector.
  Mask mask_rule() const {
    const Mask m = (causal ? Mask::causal() : Mask::none()).with_window(window);
    return documents.empty() ? m : m.with_documents(Documents{documents.data(), int(documents.size()) - 1});
  }
};

/// The checks of the shared options every executor makes when it is built, over a
/// global sequence of n tokens (padding included).
inline void check_shared_options(const char* where, const ExecutorOptions& o, std::int64_t n) {
  DISTATTN_REQUIRE(o.recv_delay_ms >= 0, where, "recv_delay_ms must be >= 0, got " << o.recv_delay_ms);
  DISTATTN_REQUIRE(o.window.left >= 0 && o.window.right >= 0, where,
                   "window sides must be >= 0 tokens, got left=" << o.window.left << ", right=" << o.window.right);
  const auto& d = o.documents;
  if (d.empty()) return;
  DISTATTN_REQUIRE(d.size() >= 2 && d.size() - 1 <= std::size_t(1) << 30, where,
                   "documents: " << d.size() << " offsets; give the first (0) and one past each document's end");
  DISTATTN_REQUIRE(d.front() == 0, where, "documents: the first offset must be 0, got " << d.front());
  for (std::size_t i = 1; i < d.size(); ++i)
    DISTATTN_REQUIRE(d[i] >= d[i - 1], where,
                     "documents: offsets must not decrease, got " << d[i - 1] << " then " << d[i] << " at " << i);
  DISTATTN_REQUIRE(d.back() == n || (o.causal && d.back() < n), where,
                   "documents: the last offset must be the sequence length " << n << (o.causal ? " (or less: a padded tail)" : "")
                                                                           << ", got " << d.back());
}

/// One schedule step of a pass on this rank (PassStats::timeline): when it began
/// (host clock, seconds since the pass began), the time its tiles ran on the
/// compute instance, the time the host blocked in its waits, and the bytes of the
/// receives this rank posted in it.
struct StepTime {
  double start_s = 0, compute_s = 0, wait_s = 0;
  std::uint64_t bytes_received = 0;
};

/// @brief What one forward() or backward() did on this rank.
/// @tparam Kind what bytes are counted by (payload kind, communication phase)
template <class Kind, std::size_t NumKinds>
struct PassStats {
  int tasks     = 0;  ///< building-block calls (forward/backward updates)
  int merges    = 0;  ///< merges of partial states (forward) / gradient additions (backward)
  int transfers = 0;  ///< posted groups of messages or collectives
  double total_s = 0, compute_s = 0, wait_s = 0;
  std::array<std::uint64_t, NumKinds> bytes_sent{}, bytes_received{};
  /// The pass's schedule steps in order (a nested executor's are not included).
  std::vector<StepTime> timeline;

  using kind_type                         = Kind;
  static constexpr std::size_t num_kinds = NumKinds;
  std::uint64_t sent(Kind k) const { return bytes_sent[std::size_t(k)]; }
  std::uint64_t received(Kind k) const { return bytes_received[std::size_t(k)]; }
  std::uint64_t total_sent() const { return sum(bytes_sent); }
  std::uint64_t total_received() const { return sum(bytes_received); }

 private:
  static std::uint64_t sum(const std::array<std::uint64_t, NumKinds>& a) {
    std::uint64_t s = 0;
    for (auto b : a) s += b;
    return s;
  }
};

}  // namespace DistAttn
