// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/mpi/collectives.hpp
/// Collectives of the MPI transport, posted as MPI-3 non-blocking collectives so
/// that they return a Request like the point-to-point operations. Every rank of
/// the communicator must call them in the same order with matching sizes.

#include <DistAttn/comm/impl/view_checks.hpp>
#include <DistAttn/comm/mpi/p2p.hpp>

#include <climits>
#include <cstdint>
#include <type_traits>

namespace DistAttn {

namespace Impl {

template <class A, class B>
inline constexpr bool same_value_type_v = std::is_same<comm_value_t<A>, comm_value_t<B>>::value;

template <class T>
MPI_Datatype mpi_float_type() {
  static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value,
                "DistAttn::reduce_scatter_sum and all_reduce_sum support float and double values");
  return std::is_same<T, float>::value ? MPI_FLOAT : MPI_DOUBLE;
}

/// Entry checks of the sum collectives: one float or double value type, contiguous
/// Views. Returns the MPI type of the values.
template <class SendView, class RecvView>
MPI_Datatype mpi_sum_views(const char* where, const SendView& send_view, const RecvView& recv_view) {
  static_assert(same_value_type_v<SendView, RecvView>,
                "DistAttn::reduce_scatter_sum / all_reduce_sum: send and receive Views must have the same value type");
  require_contiguous(where, "send_view", send_view);
  require_contiguous(where, "recv_view", recv_view);
  return mpi_float_type<comm_value_t<SendView>>();
}

}  // namespace Impl

/// @brief Rank-ordered concatenation: block q of `recv_view` (send_view.size()
/// elements, in memory order) is rank q's `send_view`.
/// @param send_view contiguous, n elements
/// @param recv_view contiguous, size() * n elements of the same value type, disjoint from send_view
template <class Exec, class SendView, class RecvView>
Request<MpiSpace> all_gather(Communicator<MpiSpace, Exec>& comm, const SendView& send_view,
                             const RecvView& recv_view) {
  constexpr const char* where = "DistAttn::all_gather";
  static_assert(Impl::same_value_type_v<SendView, RecvView>,
                "DistAttn::all_gather: send and receive Views must have the same value type");
  Impl::require_contiguous(where, "send_view", send_view);
  Impl::require_contiguous(where, "recv_view", recv_view);
  const std::size_t P = std::size_t(comm.size()), n = send_view.size();
  DISTATTN_REQUIRE(recv_view.size() == P * n, where,
                   "recv_view has " << recv_view.size() << " elements; expected communicator size " << P
                                    << " x send_view size " << n << " = " << P * n);
  Impl::require_disjoint(where, send_view, recv_view);
  const std::size_t bytes = Impl::byte_size(send_view);
  auto req                = comm.make_request();
  void* rbuf              = Impl::mpi_recv_buffer(comm, recv_view, req);
  const void* sbuf = Impl::mpi_send_buffer(comm, send_view, req, "DistAttn::all_gather: data ready");
  Impl::MpiBytes layout(bytes, where);
  MPI_Request r = MPI_REQUEST_NULL;
  DISTATTN_MPI_CHECK(MPI_Iallgather(sbuf, layout.count(), layout.type(), rbuf, layout.count(),
                                    layout.type(), comm.comm(), &r),
                     where << " (" << bytes << " bytes per rank, " << P << " ranks)");
  req.add_operation(r, {"all_gather", -1, -1, bytes});
  comm.counters().record_ring(comm.rank(), comm.size(), bytes);
  return req;
}

/// @brief Sum over ranks, scattered in rank order: `recv_view` of rank q receives
/// the sum over all ranks of block q (elements [q*m, (q+1)*m), m = recv_view.size())
/// of their `send_view`. float and double only.
template <class Exec, class SendView, class RecvView>
Request<MpiSpace> reduce_scatter_sum(Communicator<MpiSpace, Exec>& comm, const SendView& send_view,
                                     const RecvView& recv_view) {
  constexpr const char* where = "DistAttn::reduce_scatter_sum";
  const MPI_Datatype type     = Impl::mpi_sum_views(where, send_view, recv_view);
  const std::size_t P = std::size_t(comm.size()), m = recv_view.size();
  DISTATTN_REQUIRE(send_view.size() == P * m, where,
                   "send_view has " << send_view.size() << " elements; expected communicator size " << P
                                    << " x recv_view size " << m << " = " << P * m);
  DISTATTN_REQUIRE(m <= std::size_t(INT_MAX), where,
                   "recv_view has " << m << " elements; MPI counts are limited to " << INT_MAX);
  Impl::require_disjoint(where, send_view, recv_view);
  auto req   = comm.make_request();
  void* rbuf = Impl::mpi_recv_buffer(comm, recv_view, req);
  const void* sbuf =
      Impl::mpi_send_buffer(comm, send_view, req, "DistAttn::reduce_scatter_sum: data ready");
  MPI_Request r = MPI_REQUEST_NULL;
  DISTATTN_MPI_CHECK(
      MPI_Ireduce_scatter_block(sbuf, rbuf, int(m), type, MPI_SUM, comm.comm(), &r),
      where << " (" << m << " elements per rank, " << P << " ranks)");
  const std::size_t bytes = Impl::byte_size(recv_view);
  req.add_operation(r, {"reduce_scatter_sum", -1, -1, bytes});
  comm.counters().record_ring(comm.rank(), comm.size(), bytes);
  return req;
}

/// @brief Element-wise sum over ranks: every rank's `recv_view` receives the sum
/// of all ranks' `send_view` (equal sizes). float and double only. Counted as the
/// ring algorithm: a reduce-scatter and an all-gather of ceil(n/P)-element blocks.
template <class Exec, class SendView, class RecvView>
Request<MpiSpace> all_reduce_sum(Communicator<MpiSpace, Exec>& comm, const SendView& send_view,
                                 const RecvView& recv_view) {
  constexpr const char* where = "DistAttn::all_reduce_sum";
  using T                     = Impl::comm_value_t<SendView>;
  const MPI_Datatype type     = Impl::mpi_sum_views(where, send_view, recv_view);
  const std::size_t n = send_view.size();
  DISTATTN_REQUIRE(recv_view.size() == n, where,
                   "recv_view has " << recv_view.size() << " elements; expected send_view's " << n);
  DISTATTN_REQUIRE(n <= std::size_t(INT_MAX), where,
                   "send_view has " << n << " elements; MPI counts are limited to " << INT_MAX);
  Impl::require_disjoint(where, send_view, recv_view);
  auto req   = comm.make_request();
  void* rbuf = Impl::mpi_recv_buffer(comm, recv_view, req);
  const void* sbuf = Impl::mpi_send_buffer(comm, send_view, req, "DistAttn::all_reduce_sum: data ready");
  MPI_Request r    = MPI_REQUEST_NULL;
  DISTATTN_MPI_CHECK(MPI_Iallreduce(sbuf, rbuf, int(n), type, MPI_SUM, comm.comm(), &r),
                     where << " (" << n << " elements, " << comm.size() << " ranks)");
  const std::size_t P     = std::size_t(comm.size());
  const std::size_t block = (n + P - 1) / P * sizeof(T);
  req.add_operation(r, {"all_reduce_sum", -1, -1, n * sizeof(T)});
  comm.counters().record_ring(comm.rank(), comm.size(), block);
  comm.counters().record_ring(comm.rank(), comm.size(), block);
  return req;
}

/// @brief Personalized exchange: block q of this rank's `send_view` lands in block
/// `rank()` of rank q's `recv_view`; blocks are size()/P elements in memory order.
template <class Exec, class SendView, class RecvView>
Request<MpiSpace> all_to_all(Communicator<MpiSpace, Exec>& comm, const SendView& send_view,
                             const RecvView& recv_view) {
  constexpr const char* where = "DistAttn::all_to_all";
  static_assert(Impl::same_value_type_v<SendView, RecvView>,
                "DistAttn::all_to_all: send and receive Views must have the same value type");
  Impl::require_contiguous(where, "send_view", send_view);
  Impl::require_contiguous(where, "recv_view", recv_view);
  const std::size_t P = std::size_t(comm.size());
  DISTATTN_REQUIRE(send_view.size() == recv_view.size() && send_view.size() % P == 0, where,
                   "send_view (" << send_view.size() << " elements) and recv_view (" << recv_view.size()
                                 << " elements) must have equal sizes divisible by the communicator size "
                                 << P);
  Impl::require_disjoint(where, send_view, recv_view);
  const std::size_t block = Impl::byte_size(send_view) / P;
  auto req                = comm.make_request();
  void* rbuf              = Impl::mpi_recv_buffer(comm, recv_view, req);
  const void* sbuf = Impl::mpi_send_buffer(comm, send_view, req, "DistAttn::all_to_all: data ready");
  Impl::MpiBytes layout(block, where);
  MPI_Request r = MPI_REQUEST_NULL;
  DISTATTN_MPI_CHECK(MPI_Ialltoall(sbuf, layout.count(), layout.type(), rbuf, layout.count(),
                                   layout.type(), comm.comm(), &r),
                     where << " (" << block << " bytes per block, " << P << " ranks)");
  req.add_operation(r, {"all_to_all", -1, -1, block});
  for (int q = 0; q < comm.size(); ++q) {
    if (q == comm.rank()) continue;
    comm.counters().record_send(q, block);
    comm.counters().record_recv(q, block);
  }
  return req;
}

/// @brief Non-blocking barrier (MPI_Ibarrier); the host passes it in wait().
/// Does not fence exec(): it orders ranks, not device work.
template <class Exec>
Request<MpiSpace> barrier(Communicator<MpiSpace, Exec>& comm) {
  auto req      = comm.make_request();
  MPI_Request r = MPI_REQUEST_NULL;
  DISTATTN_MPI_CHECK(MPI_Ibarrier(comm.comm(), &r), "DistAttn::barrier");
  req.add_operation(r, {"barrier", -1, -1, 0});
  return req;
}

}  // namespace DistAttn
