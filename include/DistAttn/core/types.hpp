// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Vocabulary types of the building block: tensor layouts and options (masks: core/mask.hpp).
//
// Layouts (all LayoutRight, i.e. row-major):
//   Q, K, V, O, dQ, dK, dV, acc : [batch, seq, heads, head_dim]
//   m, l, LSE, Delta             : [batch, heads, seq]        (accumulator type)
// K/V carry kv_heads heads; query head h reads KV head h / (heads / kv_heads).

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/core/mask.hpp>

#include <cstdint>
#include <type_traits>

namespace DistAttn {

/// Accumulation type: fp32 for fp32/bf16/fp16 inputs, fp64 for fp64 inputs.
template <class T>
using accum_t = std::conditional_t<std::is_same<std::remove_cv_t<T>, double>::value, double, float>;

template <class T, class MemSpace = Kokkos::DefaultExecutionSpace::memory_space>
using Tensor4 = Kokkos::View<T****, Kokkos::LayoutRight, MemSpace>;
template <class T, class MemSpace = Kokkos::DefaultExecutionSpace::memory_space>
using RowStats = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace>;

/// Which implementation runs a tile. Auto picks the CUDA-tuned kernel where one
/// exists for the shape and type, the portable Kokkos kernel otherwise.
enum class KernelPath { Auto, Portable, Cuda };

inline const char* to_string(KernelPath p) {
  switch (p) {
    case KernelPath::Auto: return "auto";
    case KernelPath::Portable: return "portable";
    case KernelPath::Cuda: return "cuda";
  }
  return "?";
}

struct AttnOptions {
  /// Softmax scale; 0 means the default 1/sqrt(head_dim).
  double scale = 0.0;
  Mask mask{};
  KernelPath path = KernelPath::Auto;
  /// Scan inputs for NaN/Inf and throw (one extra read of Q, K, V), and check
  /// that the mask's document offsets start at 0 and do not decrease. The
  /// per-block building-block calls never scan; the one-call APIs do when set.
  bool check_finite = true;
  /// Backward: add the dQ contributions of the key tiles in a fixed order, so
  /// gradients are bitwise the same from run to run on the GPU (the CUDA-tuned
  /// kernel; its cost next to the default is in docs/PERFORMANCE.md).
  bool deterministic = false;
};

/// AttnOptions without the mask, for the distributed executors: they derive every
/// tile's mask from global token positions (their options' `causal` switch), so a
/// mask set here could only be ignored. Naming `mask` on it does not compile.
struct TileOptions : AttnOptions {
  /// Defaults with check_finite off: what the distributed executors start from,
  /// since a scan reads Q, K, V (and dO) once more and waits for its count on
  /// every pass (cost in docs/PERFORMANCE.md).
  static TileOptions unchecked() {
    TileOptions t;
    t.check_finite = false;
    return t;
  }
  /// These options with a mask chosen by the executor.
  AttnOptions with_mask(const Mask& m) const {
    AttnOptions a = *this;
    a.mask        = m;
    return a;
  }
  /// The options of one tile of a pass: its mask, and no finiteness scan, since
  /// the pass's entry scanned the caller's inputs once already (when asked to).
  AttnOptions for_task(const Mask& m) const {
    AttnOptions a  = with_mask(m);
    a.check_finite = false;
    return a;
  }

 private:
  using AttnOptions::mask;
};

inline double resolved_scale(const AttnOptions& opts, int head_dim) {
  return opts.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : opts.scale;
}

}  // namespace DistAttn
