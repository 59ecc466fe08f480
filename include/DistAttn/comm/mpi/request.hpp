// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/mpi/request.hpp
/// Request<MpiSpace>: one or more MPI requests posted together (a sendrecv holds
/// two), the completion callbacks that unstage received data, and the Views that
/// must outlive the operation.

#include <DistAttn/comm/impl/op_info.hpp>
#include <DistAttn/comm/mpi/health.hpp>
#include <DistAttn/comm/request.hpp>
#include <DistAttn/comm/timeout.hpp>

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace DistAttn {

/// @brief Handle of posted MPI operations. Move-only; an empty (default or
/// moved-from) request is complete.
///
/// - wait(): bounded MPI_Testall loop (communicator's timeout, counted from the
///   start of wait()), then the completion callbacks (copy staged receive buffers
///   back to device memory and fence the communicator's instance, so the data is
///   ready when wait() returns). On expiry: TimeoutPolicy::Throw throws
///   CommunicationError naming operation, peer, tag, bytes and elapsed time and
///   leaves the request pending; TimeoutPolicy::Abort prints that and MPI_Aborts.
///   An expired or failed wait marks the communicator unusable (health.hpp).
/// - wait(exec): MPI has no stream semantics, so this is wait().
/// - cancel(): MPI_Cancel on pending point-to-point operations (the communicator
///   is then unusable: its peers' matching messages are left over). Receives cancel at
///   once; a send MPI cannot cancel is detached (MPI_Request_free) and its buffers
///   are kept alive for good, so MPI never reads freed memory. MPI forbids
///   cancelling collectives: a pending one is detached the same way and completes
///   when the other ranks take part. Callbacks do not run.
/// - Destroying a pending request cancels it the same way and warns on stderr:
///   it is a caller bug, but it must neither block nor let MPI write freed memory.
template <>
class [[nodiscard]] Request<MpiSpace> {
 public:
  Request() = default;
  Request(MPI_Comm comm, int comm_rank, int comm_size, const TimeoutSettings& timeout,
          std::shared_ptr<Impl::MpiCommHealth> health = nullptr)
      : comm_(comm), comm_rank_(comm_rank), comm_size_(comm_size), timeout_(timeout), health_(std::move(health)) {}
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&)            = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  /// Blocks until every operation completed, then runs the completion callbacks.
  void wait();
  /// MPI cannot make an execution-space instance wait: a host wait.
  template <class Exec>
  void wait(const Exec& /*other*/) {
    wait();
  }
  /// True once complete (callbacks have then run); never blocks.
  bool test();
  /// Gives up whatever is still pending (see the class comment).
  void cancel();
  /// True while operations or callbacks are outstanding.
  bool pending() const { return active_; }
  const TimeoutSettings& timeout() const { return timeout_; }

  // -- used by the MPI transport while posting --
  void add_operation(MPI_Request request, const Impl::OpInfo& info);
  /// Runs on completion, in the order added (unstaging, unpacking).
  void add_callback(std::function<void()> callback);
  /// Keeps a View (or any copyable handle) alive until completion.
  template <class View>
  void extend_view_lifetime(const View& v) {
    keep_alive_.push_back(std::make_shared<View>(v));
    active_ = true;
  }
  /// Keeps a shared handle (a pooled staging buffer) until completion.
  template <class T>
  void hold(std::shared_ptr<T> p) {
    keep_alive_.push_back(std::move(p));
    active_ = true;
  }

 private:
  void finish();
  void release_pending() noexcept;
  /// MPI_Test on each request so that only the unfinished ones stay non-null.
  void refresh();
  std::string describe(bool pending_only) const;

  MPI_Comm comm_  = MPI_COMM_NULL;
  int comm_rank_  = 0;
  int comm_size_  = 0;
  TimeoutSettings timeout_{};
  std::vector<MPI_Request> requests_;
  std::vector<Impl::OpInfo> info_;
  std::vector<std::function<void()>> callbacks_;
  std::vector<std::shared_ptr<void>> keep_alive_;
  bool active_ = false;
  std::shared_ptr<Impl::MpiCommHealth> health_;  ///< the communicator's; null: not tracked
};

}  // namespace DistAttn
