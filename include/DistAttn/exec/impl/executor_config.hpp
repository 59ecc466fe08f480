// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file exec/impl/executor_config.hpp
/// What the sequence-parallel executors check and agree on at construction: the
/// head extents every one of them takes, and the configuration fields the ranks
/// compare (comm/impl/entry_agreement.hpp). One place, so that two executors
/// reject the same bad heads with the same words and agree on the same fields.

#include <DistAttn/comm/impl/entry_agreement.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/executor/executor_options.hpp>

#include <cstdint>
#include <vector>

namespace DistAttn::Impl {

/// heads a multiple of kv_heads, and the requested head group a divisor of kv_heads.
inline void check_heads(const char* where, int heads, int kv_heads, int head_group) {
  DISTATTN_REQUIRE(heads % kv_heads == 0, where,
                   "heads (" << heads << ") not divisible by kv_heads (" << kv_heads << ")");
  DISTATTN_REQUIRE(head_group >= 0 && (head_group == 0 || kv_heads % head_group == 0), where,
                   "head_group (" << head_group << ") must be 0 (automatic) or divide kv_heads (" << kv_heads << ")");
}

/// The fields every rank of an executor over T must share: its extents (`tokens`
/// names how it counts the sequence: chunk, seq_len), its `kind`, the element size
/// and the options that change what a pass computes.
template <class T>
std::vector<ConfigField> executor_fields(int batch, ConfigField tokens, int heads, int kv_heads, int head_dim,
                                         ConfigField kind, const ExecutorOptions& opts) {
  return std::vector<ConfigField>{{"batch", batch},       tokens, {"heads", heads}, {"kv_heads", kv_heads},
                                  {"head_dim", head_dim}, kind,   {"element_bytes", std::int64_t(sizeof(T))}} +
         option_fields(opts, head_dim);
}

}  // namespace DistAttn::Impl
