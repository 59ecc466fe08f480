// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/nccl/request.hpp
/// Request<NcclSpace>: a CUDA event recorded on the communicator's stream right
/// after the NCCL calls were enqueued.

#include <DistAttn/comm/impl/op_info.hpp>
#include <DistAttn/comm/nccl/check.hpp>
#include <DistAttn/comm/request.hpp>
#include <DistAttn/comm/timeout.hpp>

#include <Kokkos_Core.hpp>

#include <memory>
#include <type_traits>
#include <vector>

namespace DistAttn {

namespace Impl {

/// State shared by a NCCL communicator and its requests: a request that outlives
/// its communicator can still be watched, and an abort by the watchdog keeps the
/// communicator from calling ncclCommDestroy on the aborted handle.
struct NcclCommState {
  ncclComm_t comm = nullptr;
  bool owned      = false;
  bool aborted    = false;
  int rank        = 0;
  int size        = 0;
  int device      = -1;
  /// One device int reduced by barrier().
  int* barrier_buffer = nullptr;
  /// Reused by depend_on(): recorded on the producer's stream, waited on by ours.
  cudaEvent_t dependency_event = nullptr;

  NcclCommState() = default;
  NcclCommState(const NcclCommState&)            = delete;
  NcclCommState& operator=(const NcclCommState&) = delete;
  ~NcclCommState();
  /// ncclCommAbort (once); never throws.
  void abort() noexcept;
};

}  // namespace Impl

/// @brief Handle of NCCL operations enqueued on a stream. Move-only.
///
/// - wait(): host wait on the event, polled with a watchdog: ncclCommGetAsyncError
///   is checked on every poll, and past the communicator's timeout the
///   communicator is aborted (ncclCommAbort) and the policy applies (throw
///   CommunicationError / print and MPI_Abort), naming operation, peer, bytes and
///   elapsed time.
/// - wait(exec): cudaStreamWaitEvent(exec.cuda_stream(), event): exec's later work
///   runs after the operation; the host does not block and there is no watchdog
///   (a later host wait, e.g. a fence, has none either).
/// - cancel(): NCCL cannot cancel one operation; a pending one is ended by
///   aborting the communicator, which is then unusable.
/// - Destruction never blocks: the event is released when it completes
///   (cudaEventDestroy semantics), and the Views it keeps alive may be released
///   early because Kokkos synchronizes the device before freeing CUDA memory.
template <>
class [[nodiscard]] Request<NcclSpace> {
 public:
  Request() = default;
  Request(std::shared_ptr<Impl::NcclCommState> state, const TimeoutSettings& timeout);
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&)            = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  void wait();
  template <class Exec>
  void wait(const Exec& other) {
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      wait_on_stream(other.cuda_stream());
    } else {
      wait();
    }
  }
  /// Makes `stream` wait for the operation (no host block).
  void wait_on_stream(cudaStream_t stream);
  bool test();
  void cancel();
  bool pending() const { return active_; }
  const TimeoutSettings& timeout() const { return timeout_; }

  // -- used by the NCCL transport while posting --
  void add_operation(const Impl::OpInfo& info) { info_.push_back(info); }
  /// Records the completion event on `stream`; call after the NCCL calls.
  void record(cudaStream_t stream);
  template <class View>
  void extend_view_lifetime(const View& v) {
    keep_alive_.push_back(std::make_shared<View>(v));
  }

 private:
  [[noreturn]] void fail(const std::string& why, double elapsed, double budget);
  void release() noexcept;

  std::shared_ptr<Impl::NcclCommState> state_;
  TimeoutSettings timeout_{};
  cudaEvent_t event_ = nullptr;
  std::vector<Impl::OpInfo> info_;
  std::vector<std::shared_ptr<void>> keep_alive_;
  bool active_ = false;
};

}  // namespace DistAttn
