// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/impl/poll.hpp>
#include <DistAttn/comm/mpi/check.hpp>
#include <DistAttn/comm/mpi/request.hpp>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <utility>

namespace DistAttn {

namespace {
bool mpi_usable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}
/// A receive that was matched just before MPI_Cancel still has to land; give it
/// this long before detaching it.
constexpr double kCancelGraceSeconds = 1.0;
}  // namespace

Request<MpiSpace>::Request(Request&& o) noexcept
    : comm_(o.comm_),
      comm_rank_(o.comm_rank_),
      comm_size_(o.comm_size_),
      timeout_(o.timeout_),
      requests_(std::move(o.requests_)),
      info_(std::move(o.info_)),
      callbacks_(std::move(o.callbacks_)),
      keep_alive_(std::move(o.keep_alive_)),
      active_(std::exchange(o.active_, false)),
      health_(std::move(o.health_)) {
  o.requests_.clear();
  o.info_.clear();
  o.callbacks_.clear();
  o.keep_alive_.clear();
}

Request<MpiSpace>& Request<MpiSpace>::operator=(Request&& o) noexcept {
  if (this != &o) {
    release_pending();
    comm_       = o.comm_;
    comm_rank_  = o.comm_rank_;
    comm_size_  = o.comm_size_;
    timeout_    = o.timeout_;
    requests_   = std::move(o.requests_);
    info_       = std::move(o.info_);
    callbacks_  = std::move(o.callbacks_);
    keep_alive_ = std::move(o.keep_alive_);
    active_     = std::exchange(o.active_, false);
    health_     = std::move(o.health_);
    o.requests_.clear();
    o.info_.clear();
    o.callbacks_.clear();
    o.keep_alive_.clear();
  }
  return *this;
}

Request<MpiSpace>::~Request() { release_pending(); }

void Request<MpiSpace>::add_operation(MPI_Request request, const Impl::OpInfo& info) {
  requests_.push_back(request);
  info_.push_back(info);
  active_ = true;
}

void Request<MpiSpace>::add_callback(std::function<void()> callback) {
  callbacks_.push_back(std::move(callback));
  active_ = true;
}

std::string Request<MpiSpace>::describe(bool pending_only) const {
  std::ostringstream os;
  bool first = true;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (pending_only && requests_[i] == MPI_REQUEST_NULL) continue;
    os << (first ? "" : "; ") << Impl::describe(info_[i]);
    first = false;
  }
  return first ? std::string("(nothing)") : os.str();
}

void Request<MpiSpace>::refresh() {
  for (auto& r : requests_) {
    if (r == MPI_REQUEST_NULL) continue;
    int flag = 0;
    MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
  }
}

void Request<MpiSpace>::wait() {
  if (!active_) return;
  const double budget = timeout_.begin_wait();
  Impl::PollClock clock;
  std::vector<MPI_Status> status(requests_.size());
  for (;;) {
    int flag     = 0;
    const int rc = MPI_Testall(int(requests_.size()), requests_.data(), &flag, status.data());
    if (rc != MPI_SUCCESS) {
      // MPI_ERR_IN_STATUS: the per-operation codes say which operation failed.
      std::ostringstream where;
      where << "DistAttn::Request<MPI>::wait on rank " << comm_rank_ << " of " << comm_size_;
      int code = rc;
      for (std::size_t i = 0; rc == MPI_ERR_IN_STATUS && i < status.size(); ++i) {
        if (status[i].MPI_ERROR != MPI_SUCCESS && status[i].MPI_ERROR != MPI_ERR_PENDING) {
          where << ", " << Impl::describe(info_[i]);
          code = status[i].MPI_ERROR;
          break;
        }
      }
      if (rc != MPI_ERR_IN_STATUS) where << ", " << describe(false);
      if (health_) health_->mark_broken("an MPI operation failed in " + where.str());
      Impl::throw_mpi_error("MPI_Testall", where.str(), code);
    }
    if (flag) break;
    const double elapsed = clock.elapsed();
    if (elapsed > budget) {
      refresh();
      // Everything completed since the last test: not a timeout.
      if (std::all_of(requests_.begin(), requests_.end(), [](MPI_Request r) { return r == MPI_REQUEST_NULL; }))
        continue;
      std::ostringstream os;
      os << "DistAttn::Request<MPI>::wait: timed out after " << Impl::format_seconds(elapsed) << " ("
         << timeout_.describe_budget(budget) << ") on rank " << comm_rank_ << " of " << comm_size_ << "; still pending: " << describe(true);
      if (health_) health_->mark_broken("a wait timed out on rank " + std::to_string(comm_rank_) + ": " + describe(true));
      Impl::timeout_expired(timeout_.policy, os.str());
    }
    clock.pause();
  }
  timeout_.end_wait();
  finish();
}

bool Request<MpiSpace>::test() {
  if (!active_) return true;
  int flag = 0;
  DISTATTN_MPI_CHECK(MPI_Testall(int(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE),
                     "DistAttn::Request<MPI>::test on rank " << comm_rank_ << ": " << describe(false));
  if (!flag) return false;
  finish();
  return true;
}

void Request<MpiSpace>::finish() {
  requests_.clear();
  info_.clear();
  auto callbacks = std::move(callbacks_);
  callbacks_.clear();
  active_ = false;
  for (auto& cb : callbacks) cb();
  keep_alive_.clear();
}

void Request<MpiSpace>::cancel() {
  if (!active_) return;
  callbacks_.clear();  // the data did not (all) arrive: nothing to unstage
  const bool pending_ops =
      std::any_of(requests_.begin(), requests_.end(), [](MPI_Request r) { return r != MPI_REQUEST_NULL; });
  if (pending_ops && health_) health_->mark_broken("operations were cancelled while pending on rank " +
                                                   std::to_string(comm_rank_) + ": " + describe(true));
  if (!mpi_usable()) {
    // MPI is gone; it cannot touch the buffers any more either.
    requests_.clear();
    info_.clear();
    keep_alive_.clear();
    active_ = false;
    return;
  }
  // MPI forbids MPI_Cancel and MPI_Request_free on non-blocking collectives
  // (peer < 0): those can only be left to complete.
  for (std::size_t i = 0; i < requests_.size(); ++i)
    if (requests_[i] != MPI_REQUEST_NULL && info_[i].peer >= 0) MPI_Cancel(&requests_[i]);
  Impl::PollClock clock;
  const double grace = std::min(kCancelGraceSeconds, timeout_.seconds);
  for (;;) {
    refresh();
    const bool done = std::all_of(requests_.begin(), requests_.end(),
                                  [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
    if (done || clock.elapsed() > grace) break;
    clock.pause();
  }
  bool detached = false;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    if (info_[i].peer >= 0) MPI_Request_free(&requests_[i]);  // MPI completes it in the background
    detached = true;  // a collective's handle is dropped: it completes with the other ranks
  }
  if (detached) {
    // NOTE: deliberate leak: MPI may still read (a send it could not cancel) or
    // write these buffers, so they must never be freed.
    new std::vector<std::shared_ptr<void>>(std::move(keep_alive_));
  }
  requests_.clear();
  info_.clear();
  keep_alive_.clear();
  active_ = false;
}

void Request<MpiSpace>::release_pending() noexcept {
  if (!active_) return;
  const bool has_ops = std::any_of(requests_.begin(), requests_.end(),
                                   [](MPI_Request r) { return r != MPI_REQUEST_NULL; });
  if (has_ops && mpi_usable()) {
    std::cerr << "DistAttn: warning: Request<MPI> destroyed while pending on rank " << comm_rank_ << " ("
              << describe(true) << "); cancelling it. Call wait() or cancel() first.\n";
  }
  try {
    cancel();
  } catch (...) {
    // A destructor must not throw; cancel() reports nothing that matters here.
  }
}

}  // namespace DistAttn
