// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring/impl/ring_construction.hpp
/// What RingAttention's ranks check and agree on when it is built, and the
/// schedule every rank derives from the agreed options.

#include <DistAttn/core/error.hpp>
#include <DistAttn/exec/impl/executor_config.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>
#include <DistAttn/ring/ring_options.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>

#include <cstdint>
#include <vector>

namespace DistAttn::Impl {

/// The mask removes the tasks it empties and their transfers (communication follows the mask).
inline RingSchedule ring_schedule_for(int P, int chunk, const RingOptions& opts) {
  return RingSchedule(RingLayout(P, chunk, opts.kind), opts.mask_rule());
}

template <class T>
std::vector<ConfigField> ring_construction_fields(int batch, int chunk, int heads, int kv_heads, int head_dim,
                                                  const RingOptions& opts) {
  return executor_fields<T>(batch, {"chunk", chunk}, heads, kv_heads, head_dim, enum_field("kind", opts.kind), opts);
}

/// Every check a rank's constructor arguments can fail, run inside the
/// construction agreement (nothing may throw before it).
inline void check_ring_construction(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                    const RingOptions& opts) {
  constexpr const char* where = "DistAttn::RingAttention";
  DISTATTN_REQUIRE(batch > 0 && chunk > 0 && heads > 0 && kv_heads > 0 && head_dim > 0, where,
                   "extents must be positive (batch=" << batch << ", chunk=" << chunk << ", heads=" << heads
                                                      << ", kv_heads=" << kv_heads << ", head_dim=" << head_dim << ")");
  check_heads(where, heads, kv_heads, opts.head_group);
  check_shared_options(where, opts, std::int64_t(P) * chunk);
  DISTATTN_REQUIRE(opts.causal || opts.kind == RingKind::Zigzag, where,
                   "RingOptions::causal = false needs RingKind::Zigzag: the " << to_string(opts.kind)
                       << " schedule skips every block above the diagonal, so it computes causal attention only");
  ring_schedule_for(P, chunk, opts);  // the layout and the schedule check their own arguments
}

}  // namespace DistAttn::Impl
