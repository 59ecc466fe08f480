// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file schedule/ulysses_types.hpp
/// Options, head assignment and instrumentation of the Ulysses executor
/// (ulysses_attention.hpp): all-to-all from sequence shards to head shards.

#include <DistAttn/core/error.hpp>
#include <DistAttn/executor/executor_options.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

namespace DistAttn {

struct UlyssesOptions : ExecutorOptions {
  /// Head groups the all-to-alls are pipelined over (ulysses_head_groups): group
  /// g + 1 travels while group g computes. 0 = the default, 1 = no pipelining.
  int head_groups = 0;
};

/// @brief Which heads rank g works on after the all-to-all.
///
/// Query heads are split evenly: rank g holds heads [g H/P, (g+1) H/P), so P must
/// divide H. K/V heads follow their query heads (query head h reads K/V head
/// h / (H / Hkv)):
///  - Hkv divisible by P: rank g holds K/V heads [g Hkv/P, (g+1) Hkv/P);
///  - P divisible by Hkv (fewer K/V heads than ranks): K/V head g Hkv / P is
///    replicated to the P / Hkv ranks whose query heads read it, each holding that
///    one head; their dK/dV contributions are summed when they travel back.
/// Other combinations cannot give every rank whole K/V heads and are rejected.
struct UlyssesHeads {
  int ranks = 1, heads = 1, kv_heads = 1;

  UlyssesHeads(int P, int H, int Hkv) : ranks(P), heads(H), kv_heads(Hkv) {
    constexpr const char* where = "DistAttn::UlyssesAttention";
    DISTATTN_REQUIRE(P >= 1 && H >= 1 && Hkv >= 1 && H % Hkv == 0, where,
                     "heads (" << H << ") must be a positive multiple of kv_heads (" << Hkv << ")");
    DISTATTN_REQUIRE(H % P == 0, where,
                     "heads (" << H << ") must be divisible by the number of ranks P=" << P
                               << ": Ulysses gives every rank H/P whole heads (use the hybrid executor or a "
                                  "sequence executor for this P)");
    DISTATTN_REQUIRE(Hkv % P == 0 || P % Hkv == 0, where,
                     "kv_heads (" << Hkv << ") and the number of ranks P=" << P
                                  << " must divide one another: each rank needs whole K/V heads");
  }
  int local_heads() const { return heads / ranks; }
  int local_kv_heads() const { return kv_heads >= ranks ? kv_heads / ranks : 1; }
  int first_head(int g) const { return g * local_heads(); }
  int first_kv_head(int g) const { return int(std::int64_t(g) * kv_heads / ranks); }
  /// Ranks that hold each K/V head (1 unless K/V heads are replicated).
  int kv_replicas() const { return kv_heads >= ranks ? 1 : ranks / kv_heads; }
};

/// @brief The head groups G a Ulysses pass is pipelined over.
///
/// Each rank's L = H/P query heads and Lk K/V heads split into G groups of L/G
/// and Lk/G (each group's query heads read exactly its K/V heads); each group's
/// inputs travel, compute and return as their own all-to-alls, so group g + 1's
/// inputs (and group g - 1's results) are in flight while group g computes. G
/// must divide Lk: a K/V head's dK/dV is one sum over all its query heads inside
/// a single call, and splitting that sum over calls would change its rounding.
/// So with one K/V head per rank (Hkv <= P) nothing is pipelined. Heads are
/// independent in every kernel, so results are bitwise those of G = 1.
/// Largest default group count: past a few groups the per-call and per-message
/// overheads outweigh the smaller exposed first and last exchanges.
inline constexpr int kDefaultUlyssesHeadGroups = 4;

/// G for `requested` (0 = the largest valid G <= kDefaultUlyssesHeadGroups).
/// Valid: G divides both L and Lk.
inline int ulysses_head_groups(const UlyssesHeads& h, int requested) {
  constexpr const char* where = "DistAttn::UlyssesOptions::head_groups";
  const int L = h.local_heads(), Lk = h.local_kv_heads();
  auto valid = [&](int G) { return G >= 1 && L % G == 0 && Lk % G == 0; };
  int G = requested;
  if (G == 0) {
    G = 1;
    for (int g = std::min(L, kDefaultUlyssesHeadGroups); g > 1; --g)
      if (valid(g)) {
        G = g;
        break;
      }
  }
  DISTATTN_REQUIRE(requested >= 0, where, "head_groups must be >= 0 (0 = default), got " << requested);
  DISTATTN_REQUIRE(valid(G), where,
                   "head_groups=" << G << " must divide the " << L << " query heads and the " << Lk
                                  << " K/V heads per rank");
  return G;
}

/// @brief What travels, each as one all-to-all.
enum class UlyssesPhase : int {
  QKV = 0,  ///< forward: q, k, v to head shards (backward, when not saved from forward)
  Out,      ///< forward: O and LSE back to sequence shards
  DOut,     ///< backward: dO with LSE and Delta (hybrid: with O and LSE) to head shards
  Grad,     ///< backward: dQ, dK, dV (fp32) back to sequence shards
  Inner,    ///< hybrid only: the sequence executor inside each head group
};
inline constexpr int kNumUlyssesPhases = 5;

inline const char* to_string(UlyssesPhase p) {
  switch (p) {
    case UlyssesPhase::QKV: return "qkv";
    case UlyssesPhase::Out: return "out";
    case UlyssesPhase::DOut: return "dout";
    case UlyssesPhase::Grad: return "grad";
    case UlyssesPhase::Inner: return "inner";
  }
  return "?";
}

/// Instrumentation of the Ulysses and hybrid executors.
struct UlyssesStats : PassStats<UlyssesPhase, kNumUlyssesPhases> {};

}  // namespace DistAttn
