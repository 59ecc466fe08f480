// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/impl/poll.hpp>
#include <DistAttn/comm/nccl/request.hpp>

#include <algorithm>
#include <sstream>
#include <utility>

namespace DistAttn {

namespace {
constexpr double kCancelGraceSeconds = 1.0;
}

Request<NcclSpace>::Request(std::shared_ptr<Impl::NcclCommState> state, const TimeoutSettings& timeout)
    : state_(std::move(state)), timeout_(timeout) {
  DISTATTN_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                      "DistAttn::Request<NCCL>: creating the completion event");
}

Request<NcclSpace>::Request(Request&& o) noexcept
    : state_(std::move(o.state_)),
      timeout_(o.timeout_),
      event_(std::exchange(o.event_, nullptr)),
      info_(std::move(o.info_)),
      keep_alive_(std::move(o.keep_alive_)),
      active_(std::exchange(o.active_, false)) {}

Request<NcclSpace>& Request<NcclSpace>::operator=(Request&& o) noexcept {
  if (this != &o) {
    release();
    if (event_) cudaEventDestroy(event_);
    state_      = std::move(o.state_);
    timeout_    = o.timeout_;
    event_      = std::exchange(o.event_, nullptr);
    info_       = std::move(o.info_);
    keep_alive_ = std::move(o.keep_alive_);
    active_     = std::exchange(o.active_, false);
  }
  return *this;
}

Request<NcclSpace>::~Request() {
  release();
  // Safe on a pending event: its resources are released once it completes.
  if (event_) cudaEventDestroy(event_);
}

void Request<NcclSpace>::release() noexcept {
  active_ = false;
  info_.clear();
  keep_alive_.clear();
}

void Request<NcclSpace>::record(cudaStream_t stream) {
  DISTATTN_CUDA_CHECK(cudaEventRecord(event_, stream), "DistAttn::Request<NCCL>: recording the completion event");
  active_ = true;
}

void Request<NcclSpace>::fail(const std::string& why, double elapsed, double budget) {
  std::ostringstream os;
  os << "DistAttn::Request<NCCL>::wait: " << why << " after " << Impl::format_seconds(elapsed) << " ("
     << timeout_.describe_budget(budget) << ")";
  if (state_) os << " on rank " << state_->rank << " of " << state_->size;
  os << "; pending:";
  for (const auto& i : info_) os << ' ' << Impl::describe(i) << ';';
  os << " the communicator was aborted (ncclCommAbort)";
  if (state_) state_->abort();
  release();
  Impl::timeout_expired(timeout_.policy, os.str());
}

void Request<NcclSpace>::wait() {
  if (!active_) return;
  const double budget = timeout_.begin_wait();
  Impl::PollClock clock;
  for (;;) {
    const cudaError_t q = cudaEventQuery(event_);
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) {
      std::ostringstream where;
      where << "DistAttn::Request<NCCL>::wait";
      for (const auto& i : info_) where << ", " << Impl::describe(i);
      release();
      Impl::throw_cuda_error("cudaEventQuery", where.str(), q);
    }
    // The watchdog: NCCL reports peer or network failures asynchronously.
    if (state_ && state_->comm && !state_->aborted) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(state_->comm, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        fail(std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async), clock.elapsed(),
             budget);
      }
    }
    const double elapsed = clock.elapsed();
    if (elapsed > budget) fail("timed out", elapsed, budget);
    clock.pause();
  }
  timeout_.end_wait();
  release();
}

void Request<NcclSpace>::wait_on_stream(cudaStream_t stream) {
  if (!active_) return;
  DISTATTN_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0), "DistAttn::Request<NCCL>::wait(exec)");
}

bool Request<NcclSpace>::test() {
  if (!active_) return true;
  const cudaError_t q = cudaEventQuery(event_);
  if (q == cudaSuccess) {
    release();
    return true;
  }
  if (q != cudaErrorNotReady) {
    release();
    Impl::throw_cuda_error("cudaEventQuery", "DistAttn::Request<NCCL>::test", q);
  }
  return false;
}

void Request<NcclSpace>::cancel() {
  if (!active_) return;
  if (cudaEventQuery(event_) != cudaSuccess && state_) {
    state_->abort();  // NCCL has no per-operation cancel
    Impl::PollClock clock;
    while (cudaEventQuery(event_) == cudaErrorNotReady &&
           clock.elapsed() < std::min(kCancelGraceSeconds, timeout_.seconds))
      clock.pause();
  }
  release();
}

}  // namespace DistAttn
