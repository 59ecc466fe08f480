// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/p2p_batch.hpp
/// @brief Several sends and receives posted as one group, completed by one Request.
///
/// Why: on NCCL, point-to-point calls posted one by one run in stream order, so
/// a ring in which every rank first sends and then receives deadlocks; the
/// calls of one step must sit inside one ncclGroupStart/End. On MPI the batch
/// posts every receive before any send (and fences the communicator's instance
/// once), which is the order that lets rendezvous messages start at once.
///
///   P2PBatch<CommSpace, Exec> b(comm);
///   b.recv(kslot, left, tag); b.send(k, right, tag);
///   Request<CommSpace> r = b.post();   // nothing is posted before this
///
/// Views must be contiguous and stay alive and unmodified until the request
/// completed (the request keeps them alive).

#include <DistAttn/comm/communicator.hpp>
#include <DistAttn/comm/impl/view_checks.hpp>
#include <DistAttn/comm/mpi/p2p.hpp>
#if DISTATTN_ENABLE_NCCL
#include <DistAttn/comm/nccl/p2p.hpp>
#endif

#include <functional>
#include <vector>

namespace DistAttn {

template <class CommSpace, class Exec>
class P2PBatch;

template <class Exec>
class P2PBatch<MpiSpace, Exec> {
 public:
  using Comm = Communicator<MpiSpace, Exec>;
  explicit P2PBatch(Comm& comm) : comm_(comm) {}

  template <class View>
  void send(const View& v, int peer, int tag) {
    check("send", v, peer, tag);
    sends_.push_back([this, v, peer, tag](Request<MpiSpace>& req) {
      Impl::mpi_post_send(comm_, req, v, peer, tag, "batch(send)", "DistAttn::P2PBatch: data ready");
    });
  }
  template <class View>
  void recv(const View& v, int peer, int tag) {
    check("recv", v, peer, tag);
    recvs_.push_back([this, v, peer, tag](Request<MpiSpace>& req) {
      Impl::mpi_post_recv(comm_, req, v, peer, tag, "batch(recv)");
    });
  }
  bool empty() const { return sends_.empty() && recvs_.empty(); }

  /// Posts everything (receives first) and returns the one request covering it.
  Request<MpiSpace> post() {
    auto req = comm_.make_request();
    for (auto& f : recvs_) f(req);
    for (auto& f : sends_) f(req);
    sends_.clear();
    recvs_.clear();
    return req;
  }

 private:
  template <class View>
  void check(const char* what, const View& v, int peer, int tag) const {
    Impl::require_contiguous("DistAttn::P2PBatch", what, v);
    Impl::require_peer("DistAttn::P2PBatch", "peer", peer, comm_.size());
    Impl::require_tag("DistAttn::P2PBatch", tag);
  }
  Comm& comm_;
  std::vector<std::function<void(Request<MpiSpace>&)>> sends_, recvs_;
};

#if DISTATTN_ENABLE_NCCL
template <>
class P2PBatch<NcclSpace, Kokkos::Cuda> {
 public:
  using Comm = Communicator<NcclSpace, Kokkos::Cuda>;
  explicit P2PBatch(Comm& comm) : comm_(comm) {}

  template <class View>
  void send(const View& v, int peer, int tag) {
    check("send", v, peer, tag);
    const std::size_t bytes = Impl::byte_size(v);
    ops_.push_back([this, v, peer, tag, bytes](Request<NcclSpace>& req) {
      Impl::nccl_send_bytes(comm_, v.data(), bytes, peer, tag, "batch(send)");
      req.add_operation({"batch(send)", peer, tag, bytes});
      req.extend_view_lifetime(v);
      comm_.counters().record_send(peer, bytes);
    });
  }
  template <class View>
  void recv(const View& v, int peer, int tag) {
    check("recv", v, peer, tag);
    const std::size_t bytes = Impl::byte_size(v);
    ops_.push_back([this, v, peer, tag, bytes](Request<NcclSpace>& req) {
      Impl::nccl_recv_bytes(comm_, v.data(), bytes, peer, tag, "batch(recv)");
      req.add_operation({"batch(recv)", peer, tag, bytes});
      req.extend_view_lifetime(v);
      comm_.counters().record_recv(peer, bytes);
    });
  }
  bool empty() const { return ops_.empty(); }

  /// One NCCL group; the request's event is recorded after ncclGroupEnd, when
  /// the group's work is really on the stream.
  Request<NcclSpace> post() {
    comm_.require_usable("DistAttn::P2PBatch::post");
    auto req = comm_.make_request();
    if (!ops_.empty()) {
      Impl::NcclGroup group("DistAttn::P2PBatch::post");
      for (auto& f : ops_) f(req);
      group.end();
    }
    req.record(comm_.stream());
    ops_.clear();
    return req;
  }

 private:
  template <class View>
  void check(const char* what, const View& v, int peer, int tag) const {
    Impl::require_contiguous("DistAttn::P2PBatch", what, v);
    Impl::require_cuda_accessible("DistAttn::P2PBatch", what, v);
    Impl::require_peer("DistAttn::P2PBatch", "peer", peer, comm_.size());
    Impl::require_tag("DistAttn::P2PBatch", tag);
  }
  Comm& comm_;
  std::vector<std::function<void(Request<NcclSpace>&)>> ops_;
};
#endif

}  // namespace DistAttn
