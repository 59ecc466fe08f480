// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring_volume.hpp
/// Communication volume model of the ring schedules, per rank and per pass, for
/// one sequence ("head-set": all heads of one batch element; multiply by the
/// batch size). Executors compare their measured counters with these numbers.
///
/// Assumptions (words = tensor elements; bytes = words * element size):
///   KV       k, v of one chunk, un-replicated kv_heads (GQA expands locally):
///            2 c kv_heads d words, io dtype.
///   Q        c heads d words, io dtype.
///   QBundle  q and dO (2 c heads d, io dtype) + LSE and Delta (2 c heads,
///            fp32). Delta = rowsum(dO * O) is shipped instead of O (docs/design/building_block.md).
///   Partial  acc [c, heads, d] + m, l [heads, c], all fp32 (building_block.md: helper
///            states are unnormalized and merged in fp32): c heads (d + 2) words.
///   GradKV   dk, dv of one chunk, already summed over each GQA group:
///            2 c kv_heads d words, gradient dtype (fp32 by default).
///   GradQ    c heads d words, gradient dtype.
/// Received words equal sent words summed over ranks; per rank they differ.

#include <DistAttn/core/error.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>

#include <array>
#include <cstdint>

namespace DistAttn {

struct RingSizes {
  std::int64_t chunk_tokens = 0;  ///< c = N / P
  int heads = 1;                  ///< query heads
  int kv_heads = 1;               ///< key/value heads (divides heads)
  int head_dim = 1;               ///< d
  int io_bytes = 2;               ///< element size of q, k, v, dO
  int stat_bytes = 4;             ///< element size of acc, m, l, LSE, Delta (fp32)
  int grad_bytes = 4;             ///< element size of shipped dq, dk, dv partials
};

namespace Impl {
inline void check_ring_sizes(const RingSizes& z, const char* where) {
  DISTATTN_REQUIRE(z.chunk_tokens >= 0, where, "chunk_tokens must be >= 0, got " << z.chunk_tokens);
  DISTATTN_REQUIRE(z.heads >= 1 && z.kv_heads >= 1 && z.heads % z.kv_heads == 0, where,
                   "heads (" << z.heads << ") must be a positive multiple of kv_heads (" << z.kv_heads << ")");
  DISTATTN_REQUIRE(z.head_dim >= 1, where, "head_dim must be >= 1, got " << z.head_dim);
  DISTATTN_REQUIRE(z.io_bytes >= 1 && z.stat_bytes >= 1 && z.grad_bytes >= 1, where,
                   "element sizes must be >= 1 (io_bytes=" << z.io_bytes << ", stat_bytes=" << z.stat_bytes
                                                           << ", grad_bytes=" << z.grad_bytes << ")");
}
}  // namespace Impl

/// Words of one payload of the given kind.
inline std::int64_t payload_words(PayloadKind kind, const RingSizes& z) {
  Impl::check_ring_sizes(z, "DistAttn::payload_words");
  const std::int64_t c = z.chunk_tokens, H = z.heads, Hkv = z.kv_heads, d = z.head_dim;
  switch (kind) {
    case PayloadKind::None: return 0;
    case PayloadKind::KV: return 2 * c * Hkv * d;
    case PayloadKind::Q: return c * H * d;
    case PayloadKind::QBundle: return 2 * c * H * d + 2 * c * H;
    case PayloadKind::Partial: return c * H * d + 2 * c * H;
    case PayloadKind::GradKV: return 2 * c * Hkv * d;
    case PayloadKind::GradQ: return c * H * d;
  }
  return 0;
}

/// Bytes of one payload of the given kind (mixed dtypes for QBundle).
inline std::int64_t payload_bytes(PayloadKind kind, const RingSizes& z) {
  Impl::check_ring_sizes(z, "DistAttn::payload_bytes");
  const std::int64_t c = z.chunk_tokens, H = z.heads, Hkv = z.kv_heads, d = z.head_dim;
  switch (kind) {
    case PayloadKind::None: return 0;
    case PayloadKind::KV: return 2 * c * Hkv * d * z.io_bytes;
    case PayloadKind::Q: return c * H * d * z.io_bytes;
    case PayloadKind::QBundle: return 2 * c * H * d * z.io_bytes + 2 * c * H * z.stat_bytes;
    case PayloadKind::Partial: return (c * H * d + 2 * c * H) * z.stat_bytes;
    case PayloadKind::GradKV: return 2 * c * Hkv * d * z.grad_bytes;
    case PayloadKind::GradQ: return c * H * d * z.grad_bytes;
  }
  return 0;
}

/// Words and bytes of one message: its payload over the rows it carries (a masked
/// schedule sends part of a chunk's K/V and dK/dV, Transfer::rows).
inline std::int64_t transfer_words(const Transfer& tr, const RingSizes& z) {
  RingSizes part    = z;
  part.chunk_tokens = tr.rows(z.chunk_tokens);
  return payload_words(tr.kind, part);
}
inline std::int64_t transfer_bytes(const Transfer& tr, const RingSizes& z) {
  RingSizes part    = z;
  part.chunk_tokens = tr.rows(z.chunk_tokens);
  return payload_bytes(tr.kind, part);
}

/// Messages, words and bytes one rank sends and receives in one pass, by kind.
struct RingVolume {
  using PerKind = std::array<std::int64_t, kNumPayloadKinds>;
  PerKind sent_count{}, recv_count{};
  PerKind sent_words{}, recv_words{};
  PerKind sent_bytes{}, recv_bytes{};

  static int idx(PayloadKind k) { return static_cast<int>(k); }
  std::int64_t words_sent(PayloadKind k) const { return sent_words[idx(k)]; }
  std::int64_t words_received(PayloadKind k) const { return recv_words[idx(k)]; }
  std::int64_t bytes_sent(PayloadKind k) const { return sent_bytes[idx(k)]; }
  std::int64_t bytes_received(PayloadKind k) const { return recv_bytes[idx(k)]; }
  std::int64_t messages_sent(PayloadKind k) const { return sent_count[idx(k)]; }
  std::int64_t messages_received(PayloadKind k) const { return recv_count[idx(k)]; }

  static std::int64_t sum(const PerKind& a) {
    std::int64_t s = 0;
    for (auto v : a) s += v;
    return s;
  }
  std::int64_t total_words_sent() const { return sum(sent_words); }
  std::int64_t total_words_received() const { return sum(recv_words); }
  std::int64_t total_bytes_sent() const { return sum(sent_bytes); }
  std::int64_t total_bytes_received() const { return sum(recv_bytes); }
};

/// Volume of `rank` over a whole pass, by walking the schedule's transfers.
inline RingVolume ring_volume(const RingSchedule& s, int rank, Pass pass, const RingSizes& z) {
  Impl::check_ring_sizes(z, "DistAttn::ring_volume");
  DISTATTN_REQUIRE(rank >= 0 && rank < s.num_ranks(), "DistAttn::ring_volume",
                   "rank " << rank << " out of range [0, " << s.num_ranks() << ")");
  RingVolume v;
  auto add = [&](const Transfer& tr, RingVolume::PerKind& count, RingVolume::PerKind& words,
                 RingVolume::PerKind& bytes) {
    if (!tr.active()) return;
    const int i = RingVolume::idx(tr.kind);
    count[i] += 1;
    words[i] += transfer_words(tr, z);
    bytes[i] += transfer_bytes(tr, z);
  };
  for (int t = 0; t < s.num_steps(); ++t) {
    const RankStep st = s.step(rank, t, pass);
    add(st.send_input, v.sent_count, v.sent_words, v.sent_bytes);
    add(st.send_result, v.sent_count, v.sent_words, v.sent_bytes);
    add(st.recv_input, v.recv_count, v.recv_words, v.recv_bytes);
    add(st.recv_result, v.recv_count, v.recv_words, v.recv_bytes);
  }
  return v;
}

/// Mean and maximum over ranks of the words one rank receives in a pass: the
/// numbers to hold against Attention2D's per-rank counts (grid2d_volume.hpp).
struct RingWordsSummary {
  double mean_received = 0;
  std::int64_t max_received = 0;
  int max_rank = 0;
};

inline RingWordsSummary ring_received_words_summary(const RingSchedule& s, Pass pass, const RingSizes& z) {
  RingWordsSummary r;
  double total = 0;
  for (int x = 0; x < s.num_ranks(); ++x) {
    const std::int64_t w = ring_volume(s, x, pass, z).total_words_received();
    total += double(w);
    if (w > r.max_received) {
      r.max_received = w;
      r.max_rank = x;
    }
  }
  r.mean_received = total / s.num_ranks();
  return r;
}

}  // namespace DistAttn
