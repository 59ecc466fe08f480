// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/counters.hpp>

#include <ostream>

namespace DistAttn {

std::ostream& operator<<(std::ostream& os, const PeerTraffic& t) {
  return os << "{sent " << t.bytes_sent << " B in " << t.messages_sent << " msgs, received "
            << t.bytes_received << " B in " << t.messages_received << " msgs}";
}

PeerTraffic CommCounters::peer(int rank) const {
  auto it = by_peer_.find(rank);
  return it == by_peer_.end() ? PeerTraffic{} : it->second;
}

void CommCounters::reset() {
  total_ = PeerTraffic{};
  by_peer_.clear();
}

void CommCounters::record_send(int peer, std::uint64_t bytes, std::uint64_t messages) {
  auto& p = by_peer_[peer];
  p.bytes_sent += bytes;
  p.messages_sent += messages;
  total_.bytes_sent += bytes;
  total_.messages_sent += messages;
}

void CommCounters::record_recv(int peer, std::uint64_t bytes, std::uint64_t messages) {
  auto& p = by_peer_[peer];
  p.bytes_received += bytes;
  p.messages_received += messages;
  total_.bytes_received += bytes;
  total_.messages_received += messages;
}

void CommCounters::record_ring(int rank, int size, std::uint64_t bytes_per_step) {
  if (size < 2) return;
  const std::uint64_t steps = std::uint64_t(size - 1);
  record_send((rank + 1) % size, steps * bytes_per_step, steps);
  record_recv((rank + size - 1) % size, steps * bytes_per_step, steps);
}

}  // namespace DistAttn
