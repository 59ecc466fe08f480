// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file executor/executor_spec.hpp
/// The one list of executors: their kinds, names and shapes (ExecutorChoice).
/// make_attention (registry/any_attention.hpp) builds what a choice names, the
/// cost model prices it, the C ABI's enum follows its order and the driver takes
/// its names (the Python binding still keeps its own table).

#include <array>
#include <sstream>
#include <string>

namespace DistAttn {

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

/// Every kind, in the order of the C ABI's distattn_executor values.
inline constexpr std::array<ExecutorKind, 7> kAllExecutorKinds = {
    ExecutorKind::RingVanilla, ExecutorKind::RingBalanced, ExecutorKind::RingZigzag, ExecutorKind::Grid2DNO,
    ExecutorKind::Grid2DO,     ExecutorKind::Ulysses,      ExecutorKind::Hybrid};

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

}  // namespace DistAttn
