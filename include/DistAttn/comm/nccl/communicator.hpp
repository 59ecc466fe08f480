// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/nccl/communicator.hpp
/// Communicator<NcclSpace, Kokkos::Cuda>: a blocking NCCL communicator whose
/// operations are enqueued on exec().cuda_stream().
///
/// NOTE: the library never changes the process environment: whether NCCL uses
/// NVLink multicast (NVLS) is the launcher's choice (NCCL_NVLS_ENABLE), as for
/// every other NCCL communicator of the application. On shared hosts, where NVLS
/// collectives can put the GPUs out of service, the project's driver, tests and
/// scripts set NCCL_NVLS_ENABLE=0 (docs/design/communication.md). DistAttn never
/// calls cuMulticastCreate.

#include <DistAttn/comm/communicator.hpp>
#include <DistAttn/comm/counters.hpp>
#include <DistAttn/comm/nccl/check.hpp>
#include <DistAttn/comm/nccl/request.hpp>
#include <DistAttn/comm/timeout.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <memory>
#include <optional>
#include <type_traits>

namespace DistAttn {

/// @brief NCCL communicator bound to a Kokkos::Cuda instance (its stream).
///
/// Creation is blocking (non-blocking NCCL communicators return ncclInProgress
/// before work is on the stream). NCCL matches point-to-point messages in posting
/// order per peer; tags only appear in diagnostics. Separately posted isend/irecv
/// run in stream order, so a cycle of them (every rank sends first) deadlocks: use
/// sendrecv, which groups them.
template <>
class Communicator<NcclSpace, Kokkos::Cuda> {
 public:
  using communication_space = NcclSpace;
  using execution_space     = Kokkos::Cuda;
  using handle_type         = ncclComm_t;
  using request_type        = Request<NcclSpace>;

  /// Collective over `mpi_comm`: rank 0 makes the unique id (ncclGetUniqueId),
  /// MPI_Bcast shares it, every rank calls ncclCommInitRankConfig (blocking) on
  /// exec's device. NCCL rank == MPI rank. Owning.
  static Communicator from_mpi(MPI_Comm mpi_comm, const Kokkos::Cuda& exec = Kokkos::Cuda());
  /// Collective over the `nranks` callers of one id (from ncclGetUniqueId on one
  /// of them, shared by any means): ncclCommInitRankConfig (blocking) on exec's
  /// device. Owning.
  static Communicator from_unique_id(const ncclUniqueId& id, int nranks, int rank,
                                     const Kokkos::Cuda& exec = Kokkos::Cuda());
  /// Wraps an existing NCCL communicator without owning it.
  static Communicator from_raw(ncclComm_t comm, const Kokkos::Cuda& exec = Kokkos::Cuda());

  Communicator(Communicator&&) noexcept            = default;
  Communicator& operator=(Communicator&&) noexcept = default;
  Communicator(const Communicator&)                = delete;
  Communicator& operator=(const Communicator&)     = delete;
  ~Communicator()                                  = default;

  /// Collective (ncclCommSplit with one color). Owning, zeroed counters.
  Communicator duplicate() const;
  /// Collective (ncclCommSplit). A negative color gives std::nullopt.
  std::optional<Communicator> split(int color, int key) const;

  int rank() const { return state_->rank; }
  int size() const { return state_->size; }
  const Kokkos::Cuda& exec() const { return exec_; }
  cudaStream_t stream() const { return exec_.cuda_stream(); }
  /// The raw NCCL handle.
  ncclComm_t comm() const { return state_->comm; }
  bool owns_handle() const { return state_->owned; }

  CommCounters& counters() { return counters_; }
  const CommCounters& counters() const { return counters_; }

  const TimeoutSettings& timeout_settings() const { return timeout_; }
  void set_timeout(double seconds);
  void set_timeout_policy(TimeoutPolicy policy) { timeout_.policy = policy; }

  /// Makes the next operations wait for work already enqueued on `producer`
  /// without a host or device-wide sync: an event recorded on the producer's
  /// stream, waited on by ours. A host producer is fenced.
  template <class Producer>
  void depend_on(const Producer& producer) const {
    if constexpr (std::is_same<Producer, Kokkos::Cuda>::value) {
      depend_on_stream(producer.cuda_stream());
    } else {
      compat::fence(producer, "DistAttn::Communicator<NCCL>::depend_on: producer done");
    }
  }
  void depend_on_stream(cudaStream_t producer) const;

  /// ncclCommAbort: ends pending operations; the communicator is unusable afterwards.
  void abort();
  bool aborted() const { return state_->aborted; }
  /// Throws CommunicationError if the communicator was aborted or moved from.
  void require_usable(const char* where) const;

  Request<NcclSpace> make_request() const { return Request<NcclSpace>(state_, timeout_); }
  int* barrier_buffer() const { return state_->barrier_buffer; }

 private:
  Communicator(std::shared_ptr<Impl::NcclCommState> state, const Kokkos::Cuda& exec,
               const TimeoutSettings& timeout)
      : state_(std::move(state)), exec_(exec), timeout_(timeout) {}
  static Communicator adopt(ncclComm_t comm, bool owned, const Kokkos::Cuda& exec,
                            const TimeoutSettings& timeout);

  std::shared_ptr<Impl::NcclCommState> state_;
  Kokkos::Cuda exec_;
  CommCounters counters_;
  TimeoutSettings timeout_{};
};

}  // namespace DistAttn
