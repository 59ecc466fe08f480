// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/nccl/collectives.hpp>

namespace DistAttn::Impl {

NcclGroup::NcclGroup(const char* where) : where_(where) {
  DISTATTN_NCCL_CHECK(ncclGroupStart(), where_);
  open_ = true;
}

NcclGroup::~NcclGroup() {
  if (open_) ncclGroupEnd();
}

void NcclGroup::end() {
  open_ = false;
  DISTATTN_NCCL_CHECK(ncclGroupEnd(), where_);
}

void nccl_send_bytes(NcclComm& comm, const void* data, std::size_t bytes, int peer, int tag, const char* op) {
  DISTATTN_NCCL_CHECK(ncclSend(data, bytes, ncclUint8, peer, comm.comm(), comm.stream()),
                      "DistAttn::" << op << " to peer " << peer << " (tag " << tag << ", " << bytes
                                   << " bytes) on rank " << comm.rank());
}

void nccl_recv_bytes(NcclComm& comm, void* data, std::size_t bytes, int peer, int tag, const char* op) {
  DISTATTN_NCCL_CHECK(ncclRecv(data, bytes, ncclUint8, peer, comm.comm(), comm.stream()),
                      "DistAttn::" << op << " from peer " << peer << " (tag " << tag << ", " << bytes
                                   << " bytes) on rank " << comm.rank());
}

void nccl_all_gather_bytes(NcclComm& comm, const void* send, void* recv, std::size_t bytes) {
  DISTATTN_NCCL_CHECK(ncclAllGather(send, recv, bytes, ncclUint8, comm.comm(), comm.stream()),
                      "DistAttn::all_gather (" << bytes << " bytes per rank) on rank " << comm.rank());
}

void nccl_reduce_scatter_sum(NcclComm& comm, const void* send, void* recv, std::size_t count,
                             ncclDataType_t type) {
  DISTATTN_NCCL_CHECK(ncclReduceScatter(send, recv, count, type, ncclSum, comm.comm(), comm.stream()),
                      "DistAttn::reduce_scatter_sum (" << count << " elements per rank) on rank "
                                                       << comm.rank());
}

void nccl_all_reduce_sum(NcclComm& comm, const void* send, void* recv, std::size_t count, ncclDataType_t type) {
  DISTATTN_NCCL_CHECK(ncclAllReduce(send, recv, count, type, ncclSum, comm.comm(), comm.stream()),
                      "DistAttn::all_reduce_sum (" << count << " elements) on rank " << comm.rank());
}

void nccl_all_to_all_bytes(NcclComm& comm, const void* send, void* recv, std::size_t block_bytes) {
  const auto* s = static_cast<const unsigned char*>(send);
  auto* r       = static_cast<unsigned char*>(recv);
  NcclGroup group("DistAttn::all_to_all");
  for (int q = 0; q < comm.size(); ++q) {
    nccl_recv_bytes(comm, r + std::size_t(q) * block_bytes, block_bytes, q, -1, "all_to_all");
    nccl_send_bytes(comm, s + std::size_t(q) * block_bytes, block_bytes, q, -1, "all_to_all");
  }
  group.end();
}

void nccl_barrier(NcclComm& comm) {
  DISTATTN_NCCL_CHECK(ncclAllReduce(comm.barrier_buffer(), comm.barrier_buffer(), 1, ncclInt32, ncclSum,
                                    comm.comm(), comm.stream()),
                      "DistAttn::barrier on rank " << comm.rank());
}

}  // namespace DistAttn::Impl
