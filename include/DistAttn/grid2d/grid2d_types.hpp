// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d/grid2d_types.hpp
/// Options and per-rank instrumentation of the Attention2D executor
/// (grid2d_attention.hpp, docs/design/attention2d.md).

#include <DistAttn/core/types.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/schedule/grid2d_volume.hpp>

#include <array>
#include <cstdint>

namespace DistAttn {

/// @brief Which Attention2D algorithm runs (docs/design/attention2d.md).
enum class Grid2DVariant {
  /// Non-overlapped: library all-gathers, one block call, reduce-scatters (Algs. 1, 3, 7).
  NO,
  /// Overlapped: ring gathers and ring reduce-scatters on sendrecv, interleaved with
  /// the block calls (Algs. 4-6 forward, 8-11 backward with the corrections of attention2d.md decision 7).
  O,
};

inline const char* to_string(Grid2DVariant v) { return v == Grid2DVariant::NO ? "grid2d-no" : "grid2d-o"; }

/// Causal by default; scale, path, testing aids: ExecutorOptions.
struct Grid2DOptions : ExecutorOptions {
  Grid2DVariant variant = Grid2DVariant::O;
};

/// @brief Communication phases; each maps to one entry of grid2d_volume.hpp's
/// Grid2DForwardWords / Grid2DBackwardWords, and to one sub-communicator.
///
///   phase              forward (words field)        backward (words field)       communicator
///   KvPermute          kv_permute                   (only if K_t must be rebuilt) world
///   RowGather          q_allgather                  row_allgather                row
///   ColGather          kv_allgather                 kv_allgather                 col
///   RowReduceScatter   partial_reduce_scatter       dq_reduce_scatter            row
///   ColReduceScatter   -                            dkv_reduce_scatter           col
///   DkvPermute         -                            dkv_permute                  world
enum class Grid2DPhase : int { KvPermute = 0, RowGather, ColGather, RowReduceScatter, ColReduceScatter, DkvPermute };
inline constexpr int kNumGrid2DPhases = 6;

/// @brief The sub-communicators of a ProcessGrid2D.
enum class Grid2DComm : int { World = 0, Row, Col };
inline constexpr int kNumGrid2DComms = 3;

inline const char* to_string(Grid2DPhase p) {
  switch (p) {
    case Grid2DPhase::KvPermute: return "kv_permute";
    case Grid2DPhase::RowGather: return "row_gather";
    case Grid2DPhase::ColGather: return "col_gather";
    case Grid2DPhase::RowReduceScatter: return "row_reduce_scatter";
    case Grid2DPhase::ColReduceScatter: return "col_reduce_scatter";
    case Grid2DPhase::DkvPermute: return "dkv_permute";
  }
  return "?";
}
inline const char* to_string(Grid2DComm c) {
  switch (c) {
    case Grid2DComm::World: return "world";
    case Grid2DComm::Row: return "row";
    case Grid2DComm::Col: return "col";
  }
  return "?";
}
inline constexpr Grid2DComm comm_of(Grid2DPhase p) {
  return (p == Grid2DPhase::KvPermute || p == Grid2DPhase::DkvPermute) ? Grid2DComm::World
         : (p == Grid2DPhase::RowGather || p == Grid2DPhase::RowReduceScatter) ? Grid2DComm::Row
                                                                                : Grid2DComm::Col;
}

/// @brief Per-rank instrumentation of the last forward or backward call.
///
/// bytes_* by phase are the executor's own accounting, taken when a transfer is
/// posted, with the communication layer's convention (comm/counters.hpp: a
/// k-member collective moves (k-1) x the per-rank block; a transfer to oneself is
/// never posted). bytes_* by communicator are read back from the grid's
/// communicators' counters, so the two can be checked against each other.
struct Grid2DStats : PassStats<Grid2DPhase, kNumGrid2DPhases> {
  Grid2DVariant variant = Grid2DVariant::O;
  bool backward = false;
  std::array<std::uint64_t, kNumGrid2DComms> comm_bytes_sent{}, comm_bytes_received{};
};

/// @brief Words per phase of grid2d_volume.hpp laid out like Grid2DStats' phases
/// (forward or backward), so a caller can compare measured bytes with the model.
/// One sequence: multiply by the batch size and the element size. Both variants
/// move exactly these words (docs/design/attention2d.md §4).
inline std::array<std::int64_t, kNumGrid2DPhases> grid2d_words_by_phase(const Grid2DLayout& g, int rank,
                                                                        bool backward,
                                                                        const Grid2DVolumeParams& p) {
  std::array<std::int64_t, kNumGrid2DPhases> w{};
  if (!backward) {
    const auto f = grid2d_no_forward_words(g, rank, p);
    w[std::size_t(Grid2DPhase::KvPermute)]        = f.kv_permute;
    w[std::size_t(Grid2DPhase::RowGather)]        = f.q_allgather;
    w[std::size_t(Grid2DPhase::ColGather)]        = f.kv_allgather;
    w[std::size_t(Grid2DPhase::RowReduceScatter)] = f.partial_reduce_scatter;
  } else {
    const auto b = grid2d_no_backward_words(g, rank, p);
    w[std::size_t(Grid2DPhase::RowGather)]        = b.row_allgather;
    w[std::size_t(Grid2DPhase::ColGather)]        = b.kv_allgather;
    w[std::size_t(Grid2DPhase::RowReduceScatter)] = b.dq_reduce_scatter;
    w[std::size_t(Grid2DPhase::ColReduceScatter)] = b.dkv_reduce_scatter;
    w[std::size_t(Grid2DPhase::DkvPermute)]       = b.dkv_permute;
  }
  return w;
}

}  // namespace DistAttn
