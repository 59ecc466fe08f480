// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/mpi/p2p.hpp
/// Point-to-point operations of the MPI transport: isend, irecv, sendrecv.
///
/// Order of work inside each call: validate everything (so a bad argument throws
/// on the calling rank before anything is posted), post receives, fence the
/// communicator's instance with a labelled fence (the data to send is complete;
/// a staged copy to the host is part of the same fence), then post sends.

#include <DistAttn/comm/impl/view_checks.hpp>
#include <DistAttn/comm/mpi/communicator.hpp>

#include <string>

namespace DistAttn {

namespace Impl {

/// Returns the pointer MPI may read: the View itself, or a host copy of it.
template <class Exec, class View>
const void* mpi_send_buffer(const Communicator<MpiSpace, Exec>& comm, const View& v,
                            Request<MpiSpace>& req, const char* fence_label) {
  if (needs_host_staging<View>(comm.host_staging())) {
    auto host = comm.staging_pool().acquire(byte_size(v));
    Kokkos::deep_copy(comm.exec(), *host, as_bytes(v));
    compat::fence(comm.exec(), fence_label);
    req.hold(host);
    return host->data();
  }
  compat::fence(comm.exec(), fence_label);
  req.extend_view_lifetime(v);
  return v.data();
}

/// Returns the pointer MPI may write: the View itself, or a host buffer that a
/// completion callback copies into the View (then fences, so the data is ready
/// when wait() returns).
template <class Exec, class View>
void* mpi_recv_buffer(const Communicator<MpiSpace, Exec>& comm, const View& v, Request<MpiSpace>& req) {
  static_assert(!std::is_const<typename View::value_type>::value,
                "DistAttn: a receive View must not have a const value type");
  req.extend_view_lifetime(v);
  if (needs_host_staging<View>(comm.host_staging())) {
    auto host = comm.staging_pool().acquire(byte_size(v));
    req.add_callback([exec = comm.exec(), dst = as_bytes(v), buf = *host]() {
      Kokkos::deep_copy(exec, dst, buf);
      compat::fence(exec, "DistAttn::Request<MPI>::wait: staged data copied back");
    });
    req.hold(host);
    return host->data();
  }
  return v.data();
}

template <class Exec, class View>
void mpi_post_recv(Communicator<MpiSpace, Exec>& comm, Request<MpiSpace>& req, const View& v, int peer,
                   int tag, const char* op) {
  const std::size_t bytes = byte_size(v);
  void* buf               = mpi_recv_buffer(comm, v, req);
  MpiBytes layout(bytes, op);
  MPI_Request r = MPI_REQUEST_NULL;
  DISTATTN_MPI_CHECK(MPI_Irecv(buf, layout.count(), layout.type(), peer, tag, comm.comm(), &r),
                     "DistAttn::" << op << " from peer " << peer << " (tag " << tag << ", " << bytes
                                  << " bytes)");
  req.add_operation(r, {op, peer, tag, bytes});
  comm.counters().record_recv(peer, bytes);
}

template <class Exec, class View>
void mpi_post_send(Communicator<MpiSpace, Exec>& comm, Request<MpiSpace>& req, const View& v, int peer,
                   int tag, const char* op, const char* fence_label) {
  const std::size_t bytes = byte_size(v);
  const void* buf         = mpi_send_buffer(comm, v, req, fence_label);
  MpiBytes layout(bytes, op);
  MPI_Request r = MPI_REQUEST_NULL;
  DISTATTN_MPI_CHECK(MPI_Isend(buf, layout.count(), layout.type(), peer, tag, comm.comm(), &r),
                     "DistAttn::" << op << " to peer " << peer << " (tag " << tag << ", " << bytes
                                  << " bytes)");
  req.add_operation(r, {op, peer, tag, bytes});
  comm.counters().record_send(peer, bytes);
}

}  // namespace Impl

/// @brief Posts a send of a contiguous View to `peer`.
/// The View must not be modified before the request completes.
/// @param comm communicator; its exec() is fenced before the send
/// @param view contiguous View of trivially copyable values, any rank and layout
/// @param peer destination rank in `comm`
/// @param tag  message tag (>= 0)
template <class Exec, class SendView>
Request<MpiSpace> isend(Communicator<MpiSpace, Exec>& comm, const SendView& view, int peer, int tag = 0) {
  Impl::require_contiguous("DistAttn::isend", "view", view);
  Impl::require_peer("DistAttn::isend", "peer", peer, comm.size());
  Impl::require_tag("DistAttn::isend", tag);
  auto req = comm.make_request();
  Impl::mpi_post_send(comm, req, view, peer, tag, "isend", "DistAttn::isend: data ready");
  return req;
}

/// @brief Posts a receive into a contiguous View from `peer`. The data is in the
/// View once the request has been waited on (staged data is copied back then).
template <class Exec, class RecvView>
Request<MpiSpace> irecv(Communicator<MpiSpace, Exec>& comm, const RecvView& view, int peer, int tag = 0) {
  Impl::require_contiguous("DistAttn::irecv", "view", view);
  Impl::require_peer("DistAttn::irecv", "peer", peer, comm.size());
  Impl::require_tag("DistAttn::irecv", tag);
  auto req = comm.make_request();
  Impl::mpi_post_recv(comm, req, view, peer, tag, "irecv");
  return req;
}

/// @brief One send and one receive posted together (the step of a ring or of the
/// K/V transpose): receive from `src` first, then send to `dst`. The peers may differ
/// and may be this rank. One request covers both.
template <class Exec, class SendView, class RecvView>
Request<MpiSpace> sendrecv(Communicator<MpiSpace, Exec>& comm, const SendView& send_view, int dst,
                           const RecvView& recv_view, int src, int tag = 0) {
  constexpr const char* where = "DistAttn::sendrecv";
  Impl::require_contiguous(where, "send_view", send_view);
  Impl::require_contiguous(where, "recv_view", recv_view);
  Impl::require_peer(where, "dst", dst, comm.size());
  Impl::require_peer(where, "src", src, comm.size());
  Impl::require_tag(where, tag);
  auto req = comm.make_request();
  Impl::mpi_post_recv(comm, req, recv_view, src, tag, "sendrecv(recv)");
  Impl::mpi_post_send(comm, req, send_view, dst, tag, "sendrecv(send)", "DistAttn::sendrecv: data ready");
  return req;
}

}  // namespace DistAttn
