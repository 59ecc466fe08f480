#pragma once
/// @file ulysses_volume.hpp
/// Exact words each rank sends (and, the all-to-alls being symmetric, receives)
/// in Ulysses head parallelism of degree U, per pass, for one sequence with all
/// heads (multiply by the batch size). The hybrid U x S schedule runs these
/// all-to-alls inside each group of U ranks, with n = N / (U S).
///
/// Before: rank u holds n tokens of every head. After the all-to-all: U n tokens
/// of H/U query heads and of its KV heads. Query head h uses KV head h / (H/Hkv).
///
/// KV heads (GQA):
///   Hkv % U == 0   each rank gets Hkv/U KV heads, none replicated;
///   U % Hkv == 0   (Hkv < U) each rank gets the one KV head its H/U query heads
///                  use; every KV head is replicated on U/Hkv ranks (each sender
///                  sends the same KV rows to each of them), and in backward their
///                  dK, dV partials are summed by the token owner;
///   otherwise      rejected (no uneven split).
/// H % U == 0 is required (the query heads split evenly).
///
/// Per rank, with lkv = max(Hkv/U, 1) KV heads per rank:
///   forward   q in       (U-1) n (H/U) d          io dtype
///             k, v in    (U-1) 2 n lkv d          io dtype
///             o out      (U-1) n (H/U) d          io dtype
///             LSE out    (U-1) n (H/U)            fp32 (accumulation type)
///   backward  q, dO in   (U-1) 2 n (H/U) d        io dtype
///             LSE, Delta (U-1) 2 n (H/U)          fp32 (Delta = rowsum(dO o) made where o lives)
///             k, v in    (U-1) 2 n lkv d          io dtype
///             dq out     (U-1) n (H/U) d          gradient dtype (fp32)
///             dk, dv out (U-1) 2 n lkv d          gradient dtype (fp32)

#include <DistAttn/core/error.hpp>

#include <cstdint>

namespace DistAttn {

struct UlyssesSizes {
  std::int64_t tokens_per_rank = 0;  ///< n = N / P before the all-to-all
  int degree = 1;                    ///< U, ranks in the all-to-all
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 1;
  int io_bytes = 2;
  int stat_bytes = 4;
  int grad_bytes = 4;
};

/// Heads each rank computes after the all-to-all (checks the split rule above).
struct UlyssesHeads {
  int query = 0;      ///< H / U
  int kv = 0;         ///< max(Hkv / U, 1)
  int replicas = 1;   ///< ranks holding each KV head: max(U / Hkv, 1)
};

inline UlyssesHeads ulysses_heads(int degree, int heads, int kv_heads) {
  constexpr const char* where = "DistAttn::ulysses_heads";
  DISTATTN_REQUIRE(degree >= 1, where, "Ulysses degree U must be >= 1, got " << degree);
  DISTATTN_REQUIRE(heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0, where,
                   "heads (" << heads << ") must be a positive multiple of kv_heads (" << kv_heads << ")");
  DISTATTN_REQUIRE(heads % degree == 0, where,
                   "heads (" << heads << ") must be divisible by the Ulysses degree U=" << degree);
  DISTATTN_REQUIRE(kv_heads % degree == 0 || degree % kv_heads == 0, where,
                   "kv_heads (" << kv_heads << ") and the Ulysses degree U=" << degree
                                << " must divide one another (KV heads are split, or replicated U/kv_heads times)");
  UlyssesHeads h;
  h.query = heads / degree;
  h.kv = kv_heads >= degree ? kv_heads / degree : 1;
  h.replicas = kv_heads >= degree ? 1 : degree / kv_heads;
  return h;
}

struct UlyssesForwardWords {
  std::int64_t q_in = 0, kv_in = 0, o_out = 0, lse_out = 0;
  std::int64_t total() const { return q_in + kv_in + o_out + lse_out; }
};
struct UlyssesBackwardWords {
  std::int64_t q_do_in = 0, stats_in = 0, kv_in = 0, dq_out = 0, dkv_out = 0;
  std::int64_t total() const { return q_do_in + stats_in + kv_in + dq_out + dkv_out; }
};

namespace Impl {
inline void check_ulysses_sizes(const UlyssesSizes& z, const char* where) {
  DISTATTN_REQUIRE(z.tokens_per_rank >= 0, where, "tokens_per_rank must be >= 0, got " << z.tokens_per_rank);
  DISTATTN_REQUIRE(z.head_dim >= 1, where, "head_dim must be >= 1, got " << z.head_dim);
  DISTATTN_REQUIRE(z.io_bytes >= 1 && z.stat_bytes >= 1 && z.grad_bytes >= 1, where,
                   "element sizes must be >= 1 (io_bytes=" << z.io_bytes << ", stat_bytes=" << z.stat_bytes
                                                           << ", grad_bytes=" << z.grad_bytes << ")");
}
}  // namespace Impl

inline UlyssesForwardWords ulysses_forward_words(const UlyssesSizes& z) {
  Impl::check_ulysses_sizes(z, "DistAttn::ulysses_forward_words");
  const UlyssesHeads h = ulysses_heads(z.degree, z.heads, z.kv_heads);
  const std::int64_t peers = z.degree - 1, n = z.tokens_per_rank, d = z.head_dim;
  UlyssesForwardWords w;
  w.q_in = peers * n * h.query * d;
  w.kv_in = peers * 2 * n * h.kv * d;
  w.o_out = peers * n * h.query * d;
  w.lse_out = peers * n * h.query;
  return w;
}

inline UlyssesBackwardWords ulysses_backward_words(const UlyssesSizes& z) {
  Impl::check_ulysses_sizes(z, "DistAttn::ulysses_backward_words");
  const UlyssesHeads h = ulysses_heads(z.degree, z.heads, z.kv_heads);
  const std::int64_t peers = z.degree - 1, n = z.tokens_per_rank, d = z.head_dim;
  UlyssesBackwardWords w;
  w.q_do_in = peers * 2 * n * h.query * d;
  w.stats_in = peers * 2 * n * h.query;
  w.kv_in = peers * 2 * n * h.kv * d;
  w.dq_out = peers * n * h.query * d;
  w.dkv_out = peers * 2 * n * h.kv * d;
  return w;
}

/// Bytes in (before the local attention) and out (after it), per rank and pass.
struct UlyssesBytes {
  std::int64_t in = 0, out = 0;
  std::int64_t total() const { return in + out; }
};
inline UlyssesBytes ulysses_forward_bytes(const UlyssesSizes& z) {
  const UlyssesForwardWords w = ulysses_forward_words(z);
  return {(w.q_in + w.kv_in) * z.io_bytes, w.o_out * z.io_bytes + w.lse_out * z.stat_bytes};
}
inline UlyssesBytes ulysses_backward_bytes(const UlyssesSizes& z) {
  const UlyssesBackwardWords w = ulysses_backward_words(z);
  return {(w.q_do_in + w.kv_in) * z.io_bytes + w.stats_in * z.stat_bytes, (w.dq_out + w.dkv_out) * z.grad_bytes};
}

}  // namespace DistAttn
