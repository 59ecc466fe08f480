// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/nccl/collectives.hpp
/// Collectives of the NCCL transport, enqueued on the communicator's stream.
/// Same semantics and counter convention as comm/mpi/collectives.hpp.

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/comm/impl/view_checks.hpp>
#include <DistAttn/comm/nccl/p2p.hpp>

#include <cstdint>
#include <type_traits>

namespace DistAttn {

namespace Impl {
void nccl_all_gather_bytes(NcclComm& comm, const void* send, void* recv, std::size_t bytes);
void nccl_reduce_scatter_sum(NcclComm& comm, const void* send, void* recv, std::size_t count,
                             ncclDataType_t type);
void nccl_all_reduce_sum(NcclComm& comm, const void* send, void* recv, std::size_t count, ncclDataType_t type);
void nccl_all_to_all_bytes(NcclComm& comm, const void* send, void* recv, std::size_t block_bytes);
void nccl_barrier(NcclComm& comm);

template <class T>
ncclDataType_t nccl_float_type() {
  constexpr bool bf16 = compat::has_bhalf && std::is_same<T, compat::bhalf_t>::value;
  constexpr bool fp16 = compat::has_half && std::is_same<T, compat::half_t>::value;
  static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value || bf16 || fp16,
                "DistAttn::reduce_scatter_sum and all_reduce_sum over NCCL support float, double, bf16 and fp16");
  if constexpr (bf16) return ncclBfloat16;
  else if constexpr (fp16) return ncclFloat16;
  else return std::is_same<T, float>::value ? ncclFloat : ncclDouble;
}
}  // namespace Impl

/// @brief Rank-ordered concatenation (ncclAllGather).
template <class SendView, class RecvView>
Request<NcclSpace> all_gather(Communicator<NcclSpace, Kokkos::Cuda>& comm, const SendView& send_view,
                              const RecvView& recv_view) {
  constexpr const char* where = "DistAttn::all_gather";
  static_assert(std::is_same<Impl::comm_value_t<SendView>, Impl::comm_value_t<RecvView>>::value,
                "DistAttn::all_gather: send and receive Views must have the same value type");
  Impl::require_contiguous(where, "send_view", send_view);
  Impl::require_contiguous(where, "recv_view", recv_view);
  Impl::require_cuda_accessible(where, "send_view", send_view);
  Impl::require_cuda_accessible(where, "recv_view", recv_view);
  const std::size_t P = std::size_t(comm.size()), n = send_view.size();
  DISTATTN_REQUIRE(recv_view.size() == P * n, where,
                   "recv_view has " << recv_view.size() << " elements; expected communicator size " << P
                                    << " x send_view size " << n << " = " << P * n);
  Impl::require_disjoint(where, send_view, recv_view);
  comm.require_usable(where);
  const std::size_t bytes = Impl::byte_size(send_view);
  auto req                = comm.make_request();
  Impl::nccl_all_gather_bytes(comm, send_view.data(), recv_view.data(), bytes);
  req.add_operation({"all_gather", -1, -1, bytes});
  req.extend_view_lifetime(send_view);
  req.extend_view_lifetime(recv_view);
  req.record(comm.stream());
  comm.counters().record_ring(comm.rank(), comm.size(), bytes);
  return req;
}

/// @brief Sum over ranks scattered in rank order (ncclReduceScatter); float/double.
template <class SendView, class RecvView>
Request<NcclSpace> reduce_scatter_sum(Communicator<NcclSpace, Kokkos::Cuda>& comm,
                                      const SendView& send_view, const RecvView& recv_view) {
  constexpr const char* where = "DistAttn::reduce_scatter_sum";
  static_assert(std::is_same<Impl::comm_value_t<SendView>, Impl::comm_value_t<RecvView>>::value,
                "DistAttn::reduce_scatter_sum: send and receive Views must have the same value type");
  const ncclDataType_t type = Impl::nccl_float_type<Impl::comm_value_t<SendView>>();
  Impl::require_contiguous(where, "send_view", send_view);
  Impl::require_contiguous(where, "recv_view", recv_view);
  Impl::require_cuda_accessible(where, "send_view", send_view);
  Impl::require_cuda_accessible(where, "recv_view", recv_view);
  const std::size_t P = std::size_t(comm.size()), m = recv_view.size();
  DISTATTN_REQUIRE(send_view.size() == P * m, where,
                   "send_view has " << send_view.size() << " elements; expected communicator size " << P
                                    << " x recv_view size " << m << " = " << P * m);
  Impl::require_disjoint(where, send_view, recv_view);
  comm.require_usable(where);
  auto req = comm.make_request();
  Impl::nccl_reduce_scatter_sum(comm, send_view.data(), recv_view.data(), m, type);
  const std::size_t bytes = Impl::byte_size(recv_view);
  req.add_operation({"reduce_scatter_sum", -1, -1, bytes});
  req.extend_view_lifetime(send_view);
  req.extend_view_lifetime(recv_view);
  req.record(comm.stream());
  comm.counters().record_ring(comm.rank(), comm.size(), bytes);
  return req;
}

/// @brief Element-wise sum over ranks into every rank's recv_view (ncclAllReduce);
/// float/double; counted like the MPI transport's all_reduce_sum.
template <class SendView, class RecvView>
Request<NcclSpace> all_reduce_sum(Communicator<NcclSpace, Kokkos::Cuda>& comm, const SendView& send_view,
                                  const RecvView& recv_view) {
  constexpr const char* where = "DistAttn::all_reduce_sum";
  static_assert(std::is_same<Impl::comm_value_t<SendView>, Impl::comm_value_t<RecvView>>::value,
                "DistAttn::all_reduce_sum: send and receive Views must have the same value type");
  using T                   = Impl::comm_value_t<SendView>;
  const ncclDataType_t type = Impl::nccl_float_type<T>();
  Impl::require_contiguous(where, "send_view", send_view);
  Impl::require_contiguous(where, "recv_view", recv_view);
  Impl::require_cuda_accessible(where, "send_view", send_view);
  Impl::require_cuda_accessible(where, "recv_view", recv_view);
  const std::size_t n = send_view.size();
  DISTATTN_REQUIRE(recv_view.size() == n, where,
                   "recv_view has " << recv_view.size() << " elements; expected send_view's " << n);
  Impl::require_disjoint(where, send_view, recv_view);
  comm.require_usable(where);
  auto req = comm.make_request();
  Impl::nccl_all_reduce_sum(comm, send_view.data(), recv_view.data(), n, type);
  const std::size_t P     = std::size_t(comm.size());
  const std::size_t block = (n + P - 1) / P * sizeof(T);
  req.add_operation({"all_reduce_sum", -1, -1, n * sizeof(T)});
  req.extend_view_lifetime(send_view);
  req.extend_view_lifetime(recv_view);
  req.record(comm.stream());
  comm.counters().record_ring(comm.rank(), comm.size(), block);
  comm.counters().record_ring(comm.rank(), comm.size(), block);
  return req;
}

/// @brief Personalized exchange as one group of ncclSend/ncclRecv per peer.
template <class SendView, class RecvView>
Request<NcclSpace> all_to_all(Communicator<NcclSpace, Kokkos::Cuda>& comm, const SendView& send_view,
                              const RecvView& recv_view) {
  constexpr const char* where = "DistAttn::all_to_all";
  static_assert(std::is_same<Impl::comm_value_t<SendView>, Impl::comm_value_t<RecvView>>::value,
                "DistAttn::all_to_all: send and receive Views must have the same value type");
  Impl::require_contiguous(where, "send_view", send_view);
  Impl::require_contiguous(where, "recv_view", recv_view);
  Impl::require_cuda_accessible(where, "send_view", send_view);
  Impl::require_cuda_accessible(where, "recv_view", recv_view);
  const std::size_t P = std::size_t(comm.size());
  DISTATTN_REQUIRE(send_view.size() == recv_view.size() && send_view.size() % P == 0, where,
                   "send_view (" << send_view.size() << " elements) and recv_view (" << recv_view.size()
                                 << " elements) must have equal sizes divisible by the communicator size "
                                 << P);
  Impl::require_disjoint(where, send_view, recv_view);
  comm.require_usable(where);
  const std::size_t block = Impl::byte_size(send_view) / P;
  auto req                = comm.make_request();
  Impl::nccl_all_to_all_bytes(comm, send_view.data(), recv_view.data(), block);
  req.add_operation({"all_to_all", -1, -1, block});
  req.extend_view_lifetime(send_view);
  req.extend_view_lifetime(recv_view);
  req.record(comm.stream());
  for (int q = 0; q < comm.size(); ++q) {
    if (q == comm.rank()) continue;
    comm.counters().record_send(q, block);
    comm.counters().record_recv(q, block);
  }
  return req;
}

/// @brief Stream-ordered barrier (a one-int ncclAllReduce); wait() makes it a
/// host barrier, wait(exec) a device-side one.
inline Request<NcclSpace> barrier(Communicator<NcclSpace, Kokkos::Cuda>& comm) {
  comm.require_usable("DistAttn::barrier");
  auto req = comm.make_request();
  Impl::nccl_barrier(comm);
  req.add_operation({"barrier", -1, -1, 0});
  req.record(comm.stream());
  return req;
}

}  // namespace DistAttn
