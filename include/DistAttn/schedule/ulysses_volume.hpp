// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ulysses_volume.hpp
/// Exact bytes each rank sends (and, the all-to-alls being symmetric, receives)
/// in UlyssesAttention (ulysses/ulysses_attention.hpp), per pass and all-to-all,
/// for degree U (the hybrid U x S runs them inside each group of U ranks).
///
/// Before: rank u holds n tokens of every head. After the all-to-all: U n tokens
/// of L = H/U query heads and Lk K/V heads, as UlyssesHeads (ulysses_types.hpp)
/// assigns them: Lk = Hkv/U when U divides Hkv, else (U divisible by Hkv) the one
/// K/V head its query heads read, replicated on U/Hkv ranks. A rank keeps its own
/// block, so each all-to-all moves U-1 of its U blocks. Per rank and sequence:
///   forward   qkv    (U-1) n (L + 2 Lk) d      io dtype    q, k, v to the head side
///             out    (U-1) n L d               io dtype    O back
///             lse    (U-1) n L                 fp32        LSE back
///   backward  dout   (U-1) n L d               io dtype    dO to the head side
///             stats  (U-1) 2 n L               fp32        LSE and Delta (made where O lives)
///             grad   (U-1) n (L + 2 Lk) d      fp32        dq, dk, dv back (replicas' dK/dV summed there)
///             qkv    as forward, only when the backward gets other q, k, v than the
///                    last forward (a training step reuses them: 0)
/// Inside HybridAttention (Impl::HeadExchange) the backward sends dO alone: LSE is
/// still on the head side from the forward and the inner executor makes Delta.

#include <DistAttn/core/error.hpp>
#include <DistAttn/schedule/ulysses_types.hpp>

#include <cstdint>
#include <vector>

namespace DistAttn {

struct UlyssesSizes {
  std::int64_t tokens_per_rank = 0;  ///< n = N / U before the all-to-all (N / P in the hybrid)
  int degree = 1;                    ///< U
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 1;
  int io_bytes = 2;
  int acc_bytes = 4;  ///< LSE, Delta and gradients
};

/// One all-to-all: bytes a rank sends (= receives).
struct UlyssesExchange {
  UlyssesPhase phase = UlyssesPhase::QKV;
  std::int64_t bytes = 0;
};

namespace Impl {
inline void check_ulysses_sizes(const UlyssesSizes& z, const char* where) {
  DISTATTN_REQUIRE(z.tokens_per_rank >= 0, where, "tokens_per_rank must be >= 0, got " << z.tokens_per_rank);
  DISTATTN_REQUIRE(z.head_dim >= 1, where, "head_dim must be >= 1, got " << z.head_dim);
  DISTATTN_REQUIRE(z.io_bytes >= 1 && z.acc_bytes >= 1, where,
                   "element sizes must be >= 1 (io_bytes=" << z.io_bytes << ", acc_bytes=" << z.acc_bytes << ")");
}
}  // namespace Impl

/// Who runs the all-to-alls: UlyssesAttention, or HybridAttention around its inner executor.
enum class UlyssesRole { Ulysses, HybridOuter };

/// The all-to-alls of one head slice: `nq` query heads and `nk` K/V heads of each
/// rank's share (a pipeline group, or the whole share), in the executor's order
/// (each group's inputs, then its results; see ulysses_exchanges for `reuse_qkv`).
inline std::vector<UlyssesExchange> ulysses_slice_exchanges(const UlyssesSizes& z, bool backward, int nq, int nk,
                                                            bool reuse_qkv = true,
                                                            UlyssesRole role = UlyssesRole::Ulysses) {
  Impl::check_ulysses_sizes(z, "DistAttn::ulysses_exchanges");
  const std::int64_t peers = z.degree - 1, n = z.tokens_per_rank, d = z.head_dim, L = nq, Lk = nk;
  const std::int64_t qkv = peers * n * (L + 2 * Lk) * d;
  std::vector<UlyssesExchange> x;
  if (!backward) {
    x.push_back({UlyssesPhase::QKV, qkv * z.io_bytes});
    x.push_back({UlyssesPhase::Out, peers * n * L * d * z.io_bytes});
    x.push_back({UlyssesPhase::Out, peers * n * L * z.acc_bytes});
    return x;
  }
  if (!reuse_qkv) x.push_back({UlyssesPhase::QKV, qkv * z.io_bytes});
  x.push_back({UlyssesPhase::DOut, peers * n * L * d * z.io_bytes});
  if (role == UlyssesRole::Ulysses) x.push_back({UlyssesPhase::DOut, peers * 2 * n * L * z.acc_bytes});
  x.push_back({UlyssesPhase::Grad, qkv * z.acc_bytes});
  return x;
}

/// The all-to-alls of one pass over the whole head share, in the executor's order
/// (each waited for before the next step). `reuse_qkv`: the backward has the
/// head-side q, k, v (and in the hybrid O, LSE) of the forward, as when given the same Views.
inline std::vector<UlyssesExchange> ulysses_exchanges(const UlyssesSizes& z, bool backward, bool reuse_qkv = true,
                                                      UlyssesRole role = UlyssesRole::Ulysses) {
  const UlyssesHeads h(z.degree, z.heads, z.kv_heads);
  return ulysses_slice_exchanges(z, backward, h.local_heads(), h.local_kv_heads(), reuse_qkv, role);
}

inline std::int64_t ulysses_pass_bytes(const UlyssesSizes& z, bool backward, bool reuse_qkv = true,
                                       UlyssesRole role = UlyssesRole::Ulysses) {
  std::int64_t b = 0;
  for (const UlyssesExchange& e : ulysses_exchanges(z, backward, reuse_qkv, role)) b += e.bytes;
  return b;
}

}  // namespace DistAttn
