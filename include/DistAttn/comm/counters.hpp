// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/counters.hpp
/// Traffic counters of one communicator, for checking the communication volume
/// of a schedule against its cost model (docs/design/communication.md, "Counters").
///
/// Convention (docs/design/communication.md):
///   - point-to-point: the bytes and messages posted, attributed to the peer
///     (a message to oneself counts too);
///   - collectives: what this rank sends and receives under the textbook ring
///     algorithm on the rank-ordered ring, whatever the transport really does.
///     all_gather of n bytes per rank: (P-1)*n bytes and P-1 messages sent to
///     rank+1 and received from rank-1; reduce_scatter_sum with n-byte result
///     blocks: the same; all_to_all with n-byte blocks: n bytes and one message to
///     and from every other rank; all_reduce_sum of n elements: a reduce-scatter
///     and an all-gather of ceil(n/P)-element blocks, 2(P-1) steps; barrier: nothing.
///     With P == 1 nothing is counted.
/// Counts are taken when an operation is posted, not when it completes.

#include <cstdint>
#include <iosfwd>
#include <map>

namespace DistAttn {

/// @brief Bytes and messages exchanged with one peer (or in total).
struct PeerTraffic {
  std::uint64_t bytes_sent        = 0;
  std::uint64_t bytes_received    = 0;
  std::uint64_t messages_sent     = 0;
  std::uint64_t messages_received = 0;

  friend bool operator==(const PeerTraffic& a, const PeerTraffic& b) {
    return a.bytes_sent == b.bytes_sent && a.bytes_received == b.bytes_received &&
           a.messages_sent == b.messages_sent && a.messages_received == b.messages_received;
  }
  friend bool operator!=(const PeerTraffic& a, const PeerTraffic& b) { return !(a == b); }
};

std::ostream& operator<<(std::ostream& os, const PeerTraffic& t);

/// @brief Per-communicator traffic counters. Peers are ranks of that communicator.
/// Not thread-safe, like the communicator that owns them.
class CommCounters {
 public:
  std::uint64_t bytes_sent() const { return total_.bytes_sent; }
  std::uint64_t bytes_received() const { return total_.bytes_received; }
  std::uint64_t messages_sent() const { return total_.messages_sent; }
  std::uint64_t messages_received() const { return total_.messages_received; }
  const PeerTraffic& total() const { return total_; }

  /// Traffic with one peer; all zero if there was none.
  PeerTraffic peer(int rank) const;
  const std::map<int, PeerTraffic>& by_peer() const { return by_peer_; }

  void reset();

  /// Called by the transports when an operation is posted.
  void record_send(int peer, std::uint64_t bytes, std::uint64_t messages = 1);
  void record_recv(int peer, std::uint64_t bytes, std::uint64_t messages = 1);
  /// A ring collective on `size` ranks: P-1 steps of `bytes_per_step` to rank+1
  /// and from rank-1 (nothing when size < 2).
  void record_ring(int rank, int size, std::uint64_t bytes_per_step);

 private:
  PeerTraffic total_{};
  std::map<int, PeerTraffic> by_peer_;
};

}  // namespace DistAttn
