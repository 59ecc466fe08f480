// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring/ring_options.hpp
/// RingAttention's options and per-pass statistics (ring/ring_attention.hpp).

#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/schedule/ring_types.hpp>

namespace DistAttn {

/// Causal by default; full attention (causal = false) needs RingKind::Zigzag.
struct RingOptions : ExecutorOptions {
  RingKind kind = RingKind::Balanced;
};

/// Per-rank instrumentation of the last forward or backward call; bytes by payload kind.
struct RingStats : PassStats<PayloadKind, kNumPayloadKinds> {
  int steps = 0;
};

}  // namespace DistAttn
