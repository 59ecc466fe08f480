// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/nccl/p2p.hpp
/// Point-to-point operations of the NCCL transport. Everything is enqueued on
/// the communicator's stream, so data produced there is ready without a fence;
/// data from another stream needs comm.depend_on(producer) first.

#include <DistAttn/comm/impl/view_checks.hpp>
#include <DistAttn/comm/nccl/communicator.hpp>

namespace DistAttn {

namespace Impl {

using NcclComm = Communicator<NcclSpace, Kokkos::Cuda>;

template <class View>
void require_cuda_accessible(const char* where, const char* arg, const View&) {
  static_assert(Kokkos::SpaceAccessibility<Kokkos::Cuda, typename View::memory_space>::accessible,
                "DistAttn NCCL transport: the View's memory must be accessible from Kokkos::Cuda");
  (void)where;
  (void)arg;
}

/// ncclGroupStart/End; the destructor ends an unfinished group without throwing
/// (the exception that left it open is the one worth reporting).
class NcclGroup {
 public:
  explicit NcclGroup(const char* where);
  ~NcclGroup();
  NcclGroup(const NcclGroup&)            = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end();

 private:
  const char* where_;
  bool open_ = false;
};

void nccl_send_bytes(NcclComm& comm, const void* data, std::size_t bytes, int peer, int tag, const char* op);
void nccl_recv_bytes(NcclComm& comm, void* data, std::size_t bytes, int peer, int tag, const char* op);

}  // namespace Impl

/// @brief Enqueues ncclSend of a contiguous device View to `peer`.
template <class SendView>
Request<NcclSpace> isend(Communicator<NcclSpace, Kokkos::Cuda>& comm, const SendView& view, int peer,
                         int tag = 0) {
  constexpr const char* where = "DistAttn::isend";
  Impl::require_contiguous(where, "view", view);
  Impl::require_cuda_accessible(where, "view", view);
  Impl::require_peer(where, "peer", peer, comm.size());
  Impl::require_tag(where, tag);
  comm.require_usable(where);
  auto req                = comm.make_request();
  const std::size_t bytes = Impl::byte_size(view);
  Impl::nccl_send_bytes(comm, view.data(), bytes, peer, tag, "isend");
  req.add_operation({"isend", peer, tag, bytes});
  req.extend_view_lifetime(view);
  req.record(comm.stream());
  comm.counters().record_send(peer, bytes);
  return req;
}

/// @brief Enqueues ncclRecv into a contiguous device View from `peer`.
template <class RecvView>
Request<NcclSpace> irecv(Communicator<NcclSpace, Kokkos::Cuda>& comm, const RecvView& view, int peer,
                         int tag = 0) {
  constexpr const char* where = "DistAttn::irecv";
  static_assert(!std::is_const<typename RecvView::value_type>::value,
                "DistAttn: a receive View must not have a const value type");
  Impl::require_contiguous(where, "view", view);
  Impl::require_cuda_accessible(where, "view", view);
  Impl::require_peer(where, "peer", peer, comm.size());
  Impl::require_tag(where, tag);
  comm.require_usable(where);
  auto req                = comm.make_request();
  const std::size_t bytes = Impl::byte_size(view);
  Impl::nccl_recv_bytes(comm, view.data(), bytes, peer, tag, "irecv");
  req.add_operation({"irecv", peer, tag, bytes});
  req.extend_view_lifetime(view);
  req.record(comm.stream());
  comm.counters().record_recv(peer, bytes);
  return req;
}

/// @brief ncclRecv from `src` and ncclSend to `dst` fused in one NCCL group
/// (required when the peers' sends would otherwise wait for each other).
template <class SendView, class RecvView>
Request<NcclSpace> sendrecv(Communicator<NcclSpace, Kokkos::Cuda>& comm, const SendView& send_view, int dst,
                            const RecvView& recv_view, int src, int tag = 0) {
  constexpr const char* where = "DistAttn::sendrecv";
  static_assert(!std::is_const<typename RecvView::value_type>::value,
                "DistAttn: a receive View must not have a const value type");
  Impl::require_contiguous(where, "send_view", send_view);
  Impl::require_contiguous(where, "recv_view", recv_view);
  Impl::require_cuda_accessible(where, "send_view", send_view);
  Impl::require_cuda_accessible(where, "recv_view", recv_view);
  Impl::require_peer(where, "dst", dst, comm.size());
  Impl::require_peer(where, "src", src, comm.size());
  Impl::require_tag(where, tag);
  comm.require_usable(where);
  auto req                 = comm.make_request();
  const std::size_t sbytes = Impl::byte_size(send_view), rbytes = Impl::byte_size(recv_view);
  {
    Impl::NcclGroup group(where);
    Impl::nccl_recv_bytes(comm, recv_view.data(), rbytes, src, tag, "sendrecv(recv)");
    Impl::nccl_send_bytes(comm, send_view.data(), sbytes, dst, tag, "sendrecv(send)");
    group.end();
  }
  req.add_operation({"sendrecv(recv)", src, tag, rbytes});
  req.add_operation({"sendrecv(send)", dst, tag, sbytes});
  req.extend_view_lifetime(send_view);
  req.extend_view_lifetime(recv_view);
  req.record(comm.stream());
  comm.counters().record_recv(src, rbytes);
  comm.counters().record_send(dst, sbytes);
  return req;
}

}  // namespace DistAttn
