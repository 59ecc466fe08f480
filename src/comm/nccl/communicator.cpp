// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/mpi/check.hpp>
#include <DistAttn/comm/nccl/communicator.hpp>

#include <iostream>

namespace DistAttn {

namespace Impl {

NcclCommState::~NcclCommState() {
  // Teardown after the CUDA runtime started unloading returns errors; nothing to
  // report from a destructor, so results are ignored.
  if (device >= 0) cudaSetDevice(device);
  if (dependency_event) cudaEventDestroy(dependency_event);
  if (barrier_buffer) cudaFree(barrier_buffer);
  if (owned && comm && !aborted) ncclCommDestroy(comm);
}

void NcclCommState::abort() noexcept {
  if (comm && !aborted) {
    ncclCommAbort(comm);
    aborted = true;
  }
}

}  // namespace Impl

Communicator<NcclSpace, Kokkos::Cuda> Communicator<NcclSpace, Kokkos::Cuda>::adopt(
    ncclComm_t comm, bool owned, const Kokkos::Cuda& exec, const TimeoutSettings& timeout) {
  constexpr const char* where = "DistAttn::Communicator<NCCL>";
  auto st                     = std::make_shared<Impl::NcclCommState>();
  st->comm                    = comm;  // from here on the state destroys it if owned
  st->owned                   = owned;
  DISTATTN_NCCL_CHECK(ncclCommUserRank(comm, &st->rank), where);
  DISTATTN_NCCL_CHECK(ncclCommCount(comm, &st->size), where);
  DISTATTN_NCCL_CHECK(ncclCommCuDevice(comm, &st->device), where);
  DISTATTN_REQUIRE(st->device == exec.cuda_device(), where,
                   "the NCCL communicator lives on device " << st->device
                                                            << " but the Kokkos::Cuda instance on device "
                                                            << exec.cuda_device());
  DISTATTN_CUDA_CHECK(cudaSetDevice(st->device), where);
  DISTATTN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&st->barrier_buffer), sizeof(int)), where);
  DISTATTN_CUDA_CHECK(cudaMemset(st->barrier_buffer, 0, sizeof(int)), where);
  DISTATTN_CUDA_CHECK(cudaEventCreateWithFlags(&st->dependency_event, cudaEventDisableTiming), where);
  return Communicator(std::move(st), exec, timeout);
}

Communicator<NcclSpace, Kokkos::Cuda> Communicator<NcclSpace, Kokkos::Cuda>::from_mpi(
    MPI_Comm mpi_comm, const Kokkos::Cuda& exec) {
  constexpr const char* where = "DistAttn::Communicator<NCCL>::from_mpi";
  int rank = 0, size = 0;
  DISTATTN_MPI_CHECK(MPI_Comm_rank(mpi_comm, &rank), where);
  DISTATTN_MPI_CHECK(MPI_Comm_size(mpi_comm, &size), where);
  // Rank 0's failure travels with the id, so that no rank waits in
  // ncclCommInitRank for an id that will never come.
  struct {
    int ok;
    ncclUniqueId id;
    char error[256];
  } msg{};
  if (rank == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&msg.id);
    msg.ok                = rc == ncclSuccess;
    if (!msg.ok) std::strncpy(msg.error, ncclGetErrorString(rc), sizeof msg.error - 1);
  }
  DISTATTN_MPI_CHECK(MPI_Bcast(&msg, int(sizeof msg), MPI_BYTE, 0, mpi_comm), where << " (broadcast of the NCCL id)");
  if (!msg.ok) {
    Impl::throw_communication_error(where, std::string("ncclGetUniqueId failed on rank 0: ") + msg.error);
  }
  return from_unique_id(msg.id, size, rank, exec);
}

Communicator<NcclSpace, Kokkos::Cuda> Communicator<NcclSpace, Kokkos::Cuda>::from_unique_id(
    const ncclUniqueId& id, int nranks, int rank, const Kokkos::Cuda& exec) {
  constexpr const char* where = "DistAttn::Communicator<NCCL>::from_unique_id";
  DISTATTN_REQUIRE(nranks >= 1 && rank >= 0 && rank < nranks, where,
                   "argument 'rank' = " << rank << " must lie in [0, nranks = " << nranks << ")");
  const TimeoutSettings timeout = TimeoutSettings::from_environment();
  DISTATTN_CUDA_CHECK(cudaSetDevice(exec.cuda_device()), where);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking     = 1;
  ncclComm_t comm     = nullptr;
  DISTATTN_NCCL_CHECK(ncclCommInitRankConfig(&comm, nranks, id, rank, &config),
                      where << " on rank " << rank << " of " << nranks << ", device " << exec.cuda_device());
  return adopt(comm, true, exec, timeout);
}

Communicator<NcclSpace, Kokkos::Cuda> Communicator<NcclSpace, Kokkos::Cuda>::from_raw(
    ncclComm_t comm, const Kokkos::Cuda& exec) {
  DISTATTN_REQUIRE(comm != nullptr, "DistAttn::Communicator<NCCL>::from_raw", "argument 'comm' is null");
  return adopt(comm, false, exec, TimeoutSettings::from_environment());
}

Communicator<NcclSpace, Kokkos::Cuda> Communicator<NcclSpace, Kokkos::Cuda>::duplicate() const {
  auto c = split(0, rank());
  if (!c) Impl::throw_communication_error("DistAttn::Communicator<NCCL>::duplicate", "ncclCommSplit returned no communicator");
  return std::move(*c);
}

std::optional<Communicator<NcclSpace, Kokkos::Cuda>> Communicator<NcclSpace, Kokkos::Cuda>::split(
    int color, int key) const {
  constexpr const char* where = "DistAttn::Communicator<NCCL>::split";
  require_usable(where);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking     = 1;
  ncclComm_t out      = nullptr;
  DISTATTN_NCCL_CHECK(ncclCommSplit(state_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &out, &config),
                      where << "(color " << color << ", key " << key << ") on rank " << rank());
  if (out == nullptr) return std::nullopt;
  return adopt(out, true, exec_, timeout_);
}

void Communicator<NcclSpace, Kokkos::Cuda>::set_timeout(double seconds) {
  DISTATTN_REQUIRE(seconds > 0, "DistAttn::Communicator::set_timeout",
                   "argument 'seconds' = " << seconds << " must be > 0");
  timeout_.seconds = seconds;
}

void Communicator<NcclSpace, Kokkos::Cuda>::depend_on_stream(cudaStream_t producer) const {
  constexpr const char* where = "DistAttn::Communicator<NCCL>::depend_on";
  require_usable(where);
  if (producer == stream()) return;  // stream order already
  DISTATTN_CUDA_CHECK(cudaEventRecord(state_->dependency_event, producer), where);
  DISTATTN_CUDA_CHECK(cudaStreamWaitEvent(stream(), state_->dependency_event, 0), where);
}

void Communicator<NcclSpace, Kokkos::Cuda>::abort() {
  if (state_) state_->abort();
}

void Communicator<NcclSpace, Kokkos::Cuda>::require_usable(const char* where) const {
  if (!state_ || !state_->comm) Impl::throw_communication_error(where, "the communicator was moved from");
  if (state_->aborted) {
    Impl::throw_communication_error(where, "the NCCL communicator was aborted (ncclCommAbort) after an "
                                           "error or timeout; create a new one");
  }
}

}  // namespace DistAttn
