// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/mpi/communicator.hpp
/// Communicator<MpiSpace, Exec>: an MPI communicator plus the execution-space
/// instance that produces and consumes the data it moves.

#include <DistAttn/comm/communicator.hpp>
#include <DistAttn/comm/counters.hpp>
#include <DistAttn/comm/mpi/check.hpp>
#include <DistAttn/comm/mpi/health.hpp>
#include <DistAttn/comm/mpi/request.hpp>
#include <DistAttn/comm/mpi/staging.hpp>
#include <DistAttn/comm/timeout.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <mpi.h>

#include <memory>
#include <optional>
#include <utility>

namespace DistAttn {

namespace mpi {
/// Low-level helpers (non-template, src/comm/mpi_communicator.cpp).
/// MPI_Comm_dup with MPI_ERRORS_RETURN set on the result.
MPI_Comm duplicate_comm(MPI_Comm comm);
/// MPI_Comm_split (negative color -> MPI_UNDEFINED); MPI_COMM_NULL if not a member.
MPI_Comm split_comm(MPI_Comm comm, int color, int key);
/// MPI_Comm_free unless MPI is already finalized; never throws.
void free_comm(MPI_Comm& comm) noexcept;
int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);
}  // namespace mpi

/// @brief MPI communicator bound to an instance of any Kokkos execution space.
///
/// Sends fence exec() first ("data ready"), so data produced by kernels on that
/// instance is complete; data produced on another instance needs depend_on().
template <class Exec>
class Communicator<MpiSpace, Exec> {
 public:
  using communication_space = MpiSpace;
  using execution_space     = Exec;
  using handle_type         = MPI_Comm;
  using request_type        = Request<MpiSpace>;

  /// Wraps `comm` without owning it (never frees it). Timeouts from the environment.
  static Communicator from_raw(MPI_Comm comm, const Exec& exec = Exec()) {
    return Communicator(comm, false, exec, TimeoutSettings::from_environment(), HostStaging::Auto);
  }

  Communicator(Communicator&& o) noexcept
      : comm_(std::exchange(o.comm_, MPI_COMM_NULL)),
        owned_(std::exchange(o.owned_, false)),
        exec_(std::move(o.exec_)),
        rank_(o.rank_),
        size_(o.size_),
        counters_(std::move(o.counters_)),
        timeout_(o.timeout_),
        staging_(o.staging_),
        pool_(std::move(o.pool_)),
        health_(std::move(o.health_)) {}
  Communicator& operator=(Communicator&& o) noexcept {
    if (this != &o) {
      release();
      comm_     = std::exchange(o.comm_, MPI_COMM_NULL);
      owned_    = std::exchange(o.owned_, false);
      exec_     = std::move(o.exec_);
      rank_     = o.rank_;
      size_     = o.size_;
      counters_ = std::move(o.counters_);
      timeout_  = o.timeout_;
      staging_  = o.staging_;
      pool_     = std::move(o.pool_);
      health_   = std::move(o.health_);
    }
    return *this;
  }
  Communicator(const Communicator&)            = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() { release(); }

  /// Collective. An owning copy with its own message space and zeroed counters;
  /// inherits exec, timeout and staging settings.
  Communicator duplicate() const {
    return Communicator(mpi::duplicate_comm(comm_), true, exec_, timeout_, staging_, pool_);
  }
  /// Collective. Ranks with equal color form a communicator, ordered by key
  /// (ties by rank here). A negative color (e.g. MPI_UNDEFINED) gives std::nullopt.
  std::optional<Communicator> split(int color, int key) const {
    MPI_Comm c = mpi::split_comm(comm_, color, key);
    if (c == MPI_COMM_NULL) return std::nullopt;
    return Communicator(c, true, exec_, timeout_, staging_, pool_);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Exec& exec() const { return exec_; }
  /// The raw MPI handle.
  MPI_Comm comm() const { return comm_; }
  bool owns_handle() const { return owned_; }

  CommCounters& counters() { return counters_; }
  const CommCounters& counters() const { return counters_; }

  const TimeoutSettings& timeout_settings() const { return timeout_; }
  /// Seconds a Request::wait() may block; affects requests posted afterwards.
  void set_timeout(double seconds) {
    DISTATTN_REQUIRE(seconds > 0, "DistAttn::Communicator::set_timeout",
                     "argument 'seconds' = " << seconds << " must be > 0");
    timeout_.seconds = seconds;
  }
  void set_timeout_policy(TimeoutPolicy policy) { timeout_.policy = policy; }

  HostStaging host_staging() const { return staging_; }
  void set_host_staging(HostStaging staging) { staging_ = staging; }
  /// The host buffers staged operations reuse (shared with duplicates and splits).
  Impl::HostStagingPool& staging_pool() const { return *pool_; }

  /// Makes the next operations wait for work already enqueued on `producer`.
  /// MPI is host-driven, so this fences `producer` (not the whole device).
  template <class Producer>
  void depend_on(const Producer& producer) const {
    compat::fence(producer, "DistAttn::Communicator<MPI>::depend_on: producer done");
  }

  /// Throws CommunicationError if an earlier wait on this MPI handle timed out,
  /// failed or was cancelled while pending (comm/mpi/health.hpp).
  void require_usable(const char* where) const {
    if (!health_) Impl::throw_communication_error(where, "this communicator was moved from");
    Impl::require_healthy(*health_, where, rank_, size_);
  }
  /// True until a communication error makes the handle unusable (health.hpp).
  bool usable() const { return health_ && !health_->broken(); }

  /// A request bound to this communicator's handle and timeout (for the
  /// transport); every operation starts here, so a broken communicator refuses it.
  Request<MpiSpace> make_request() const {
    require_usable("DistAttn::Communicator<MPI>");
    return Request<MpiSpace>(comm_, rank_, size_, timeout_, health_);
  }

 private:
  Communicator(MPI_Comm comm, bool owned, const Exec& exec, const TimeoutSettings& timeout,
               HostStaging staging, std::shared_ptr<Impl::HostStagingPool> pool = nullptr)
      : comm_(comm),
        owned_(owned),
        exec_(exec),
        timeout_(timeout),
        staging_(staging),
        pool_(pool ? std::move(pool) : std::make_shared<Impl::HostStagingPool>()) {
    rank_   = mpi::comm_rank(comm_);
    size_   = mpi::comm_size(comm_);
    health_ = Impl::mpi_comm_health(comm_);
  }
  void release() noexcept {
    if (owned_) mpi::free_comm(comm_);
    owned_ = false;
    comm_  = MPI_COMM_NULL;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_    = false;
  Exec exec_;
  int rank_ = 0;
  int size_ = 0;
  CommCounters counters_;
  TimeoutSettings timeout_{};
  HostStaging staging_ = HostStaging::Auto;
  std::shared_ptr<Impl::HostStagingPool> pool_;
  std::shared_ptr<Impl::MpiCommHealth> health_;  ///< shared by every wrapper of comm_; null once moved from
};

}  // namespace DistAttn
