// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The agreement step of the C ABI's collective calls (docs/design/c_abi.md,
// "Errors on every rank"). Every rank runs its local checks, then one small
// all-gather gives each rank every rank's outcome, which call it is in, and the
// values that must be equal on all of them (the config at create). The call goes
// on only when every rank's checks passed and every value agrees; otherwise it
// fails on every rank with one status and a message that names the rank and its
// error, or the fields that differ with each rank's value. Implemented in c_comm.cpp.

#include "c_handles.hpp"

#include <cstdint>
#include <vector>

namespace DistAttn::CApi {

/// How a value prints in a mismatch message.
enum class FieldKind { Int, Real, Executor, Dtype };

/// A value every rank must hold alike: its name in messages ("config->scale"),
/// its bits (a double's bit pattern for Real) and how it prints.
struct Field {
  const char* name;
  std::int64_t bits;
  FieldKind kind;
};

/// The C ABI's collective calls: ranks in different ones fail, naming them.
enum class Entry : std::int64_t {
  CommCreateMpi   = 1,
  CommCreateNccl  = 2,
  AttentionCreate = 3,
  Forward         = 4,
  Backward        = 5,
  SetDocuments    = 6,
};

/// "distattn_attention_forward" for Entry::Forward ("an unknown call" if none).
const char* entry_name(std::int64_t entry);
/// "DISTATTN_RING_ZIGZAG" for 2, "DISTATTN_FP64" for 1; nullptr outside the enumeration.
const char* executor_name(std::int64_t value);
const char* dtype_name(std::int64_t value);

/// The agreement of one collective call. Holds the all-gather's buffers, so an
/// attention's passes allocate them once.
class Agreement {
 public:
  static constexpr int kFields = 24;   ///< values per call at most
  static constexpr int kWords  = 128;  ///< one rank's record: 1 KiB

  /// Runs `checks` (which throw on a bad argument) on this rank, then agrees over
  /// `comm`. Returns when every rank's checks passed and `fields` agree; else
  /// throws AgreedFailure on every rank. A failure of the all-gather itself
  /// (transport, timeout) throws on the ranks that see it.
  template <class F>
  void run(MpiComm& comm, const char* where, Entry entry, const std::vector<Field>& fields, F&& checks) {
    const Outcome own = attempt(checks);
    pack(where, entry, own, fields);
    exchange(comm.comm(), comm.timeout_settings(), false);
    settle(where, own, fields);
  }

  /// The same over a caller's MPI communicator (before DistAttn duplicated it):
  /// its error handler returns MPI errors while the all-gather runs.
  template <class F>
  void run(MPI_Comm comm, const TimeoutSettings& timeout, const char* where, Entry entry,
           const std::vector<Field>& fields, F&& checks) {
    const Outcome own = attempt(checks);
    pack(where, entry, own, fields);
    exchange(comm, timeout, true);
    settle(where, own, fields);
  }

#if DISTATTN_ENABLE_NCCL
  /// Over NCCL the all-gather runs on device buffers: Kokkos must be running on
  /// this rank (else it fails here alone, NOT_INITIALIZED).
  template <class F>
  void run(NcclComm& comm, const char* where, Entry entry, const std::vector<Field>& fields, F&& checks) {
    require_initialized(where);
    const Outcome own = attempt(checks);
    pack(where, entry, own, fields);
    exchange(comm);
    settle(where, own, fields);
  }
#endif

  /// Over whichever transport `comm` holds.
  template <class F>
  void run(const CommHolder& comm, const char* where, Entry entry, const std::vector<Field>& fields, F&& checks) {
#if DISTATTN_ENABLE_NCCL
    if (comm.nccl) return run(*comm.nccl, where, entry, fields, checks);
#endif
    run(*comm.mpi, where, entry, fields, checks);
  }

 private:
  void pack(const char* where, Entry entry, const Outcome& own, const std::vector<Field>& fields);
  void exchange(MPI_Comm comm, const TimeoutSettings& timeout, bool callers_comm);
#if DISTATTN_ENABLE_NCCL
  void exchange(NcclComm& comm);
  Kokkos::View<std::int64_t*, Exec::memory_space> dsend_, drecv_;
#endif
  void settle(const char* where, const Outcome& own, const std::vector<Field>& fields) const;

  std::vector<std::int64_t> mine_, all_;
  int rank_ = 0, size_ = 1;
};

}  // namespace DistAttn::CApi
