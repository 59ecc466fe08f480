// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the C ABI's opaque handles hold (include/DistAttn/c/distattn.h), shared by
// the translation units of src/c/: the type-erased communicator and attention,
// and the per-dtype factories that c_attention_<dtype>.cpp instantiate.

#include <DistAttn/c/distattn.h>
#include <DistAttn/comm.hpp>
#include <DistAttn/core/error.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace DistAttn::CApi {

using Exec = Kokkos::DefaultExecutionSpace;
using MpiComm = Communicator<MpiSpace, Exec>;
#if DISTATTN_ENABLE_NCCL
using NcclComm = Communicator<NcclSpace, Kokkos::Cuda>;
#endif

/// Exactly one of the members is set. Attentions share ownership, so a
/// communicator outlives every executor built on it.
struct CommHolder {
  std::shared_ptr<MpiComm> mpi;
#if DISTATTN_ENABLE_NCCL
  std::shared_ptr<NcclComm> nccl;
#endif
  int rank() const;
  int size() const;
};

/// The C ABI's view of one executor, whatever its element type, transport and kind.
class Attention {
 public:
  virtual ~Attention() = default;
  virtual std::int64_t position(int rank, std::int64_t i) const = 0;
  virtual int comm_size() const = 0;
  virtual void invalidate_saved_inputs() = 0;
  /// Collective: checks `offsets` (num_documents + 1 of them) on each rank, agrees
  /// on them, then hands them to the executor (distattn_attention_set_documents).
  virtual void set_documents(const std::int64_t* cu_seqlens, std::int64_t num_documents) = 0;
  virtual std::int64_t local_seq() const = 0;
  virtual void forward(const distattn_tensor& q, const distattn_tensor& k, const distattn_tensor& v,
                       const distattn_tensor& o, const distattn_tensor& lse, void* stream) = 0;
  virtual void backward(const distattn_tensor& q, const distattn_tensor& k, const distattn_tensor& v,
                        const distattn_tensor& o, const distattn_tensor& dout, const distattn_tensor& lse,
                        const distattn_tensor& dq, const distattn_tensor& dk, const distattn_tensor& dv,
                        void* stream) = 0;
};

/// Builds the executor for element type T (c_attention_impl.hpp; one
/// explicit instantiation per dtype the build has). Collective over `comm`.
template <class T>
std::unique_ptr<Attention> make_attention(const CommHolder& comm, const distattn_attention_config& cfg);

/// The most documents a config or distattn_attention_set_documents may name (as
/// many as ExecutorOptions::documents takes).
constexpr std::int64_t kMaxDocuments = std::int64_t(1) << 30;

/// The caller's num_documents + 1 offsets; empty without documents, and where the
/// count or the pointer cannot be read (check_documents reports those).
std::vector<std::int64_t> read_offsets(const std::int64_t* cu_seqlens, std::int64_t num_documents);

/// Local checks of documents over `tokens` global positions (InvalidArgument
/// naming `offsets_name` or `count_name`); `offsets` is read_offsets' result.
void check_documents(const char* where, const char* offsets_name, const char* count_name,
                     const std::int64_t* cu_seqlens, std::int64_t num_documents,
                     const std::vector<std::int64_t>& offsets, bool causal, std::int64_t tokens);

/// Thrown for what this build lacks (DISTATTN_ERROR_UNSUPPORTED).
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& what) : Error(what) {}
};

/// Thrown before distattn_initialize (DISTATTN_ERROR_NOT_INITIALIZED).
class NotInitialized : public Error {
 public:
  explicit NotInitialized(const std::string& what) : Error(what) {}
};

/// A failure every rank of a collective call agreed on (c_agree.hpp): guarded()
/// returns its status, whatever the exception behind it was on the failing rank.
class AgreedFailure : public Error {
 public:
  AgreedFailure(distattn_status status, const std::string& what) : Error(what), status_(status) {}
  distattn_status status() const { return status_; }

 private:
  distattn_status status_;
};

/// Throws NotInitialized unless Kokkos is running (c_status.cpp).
void require_initialized(const char* where);

/// The thread's last error message (c_status.cpp).
void set_last_error(const char* msg);

/// A failed call's status, with the exception's message kept for distattn_last_error.
inline distattn_status failed(distattn_status status, const char* message) noexcept {
  try {
    set_last_error(message);
  } catch (...) {
  }
  return status;
}

/// What one rank's call came to: a status and, on failure, the message.
struct Outcome {
  distattn_status status = DISTATTN_SUCCESS;
  std::string message;
};

inline Outcome outcome(distattn_status status, const char* message) noexcept {
  Outcome o;
  o.status = status;
  try {
    o.message = message;
  } catch (...) {
  }
  return o;
}

/// Runs f and returns the status and message guarded() would make of it
/// (the local step of a collective call's agreement).
template <class F>
Outcome attempt(F&& f) noexcept {
  try {
    f();
    return Outcome{};
  } catch (const AgreedFailure& e) {
    return outcome(e.status(), e.what());
  } catch (const Unsupported& e) {
    return outcome(DISTATTN_ERROR_UNSUPPORTED, e.what());
  } catch (const NotInitialized& e) {
    return outcome(DISTATTN_ERROR_NOT_INITIALIZED, e.what());
  } catch (const InvalidArgument& e) {
    return outcome(DISTATTN_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const CommunicationError& e) {
    return outcome(DISTATTN_ERROR_COMMUNICATION, e.what());
  } catch (const std::bad_alloc& e) {
    return outcome(DISTATTN_ERROR_OUT_OF_MEMORY, e.what());
  } catch (const std::exception& e) {
    return outcome(DISTATTN_ERROR_INTERNAL, e.what());
  } catch (...) {
    return outcome(DISTATTN_ERROR_INTERNAL, "DistAttn C API: unknown exception");
  }
}

/// Runs f, turning every exception into a status and the thread's message.
template <class F>
distattn_status guarded(F&& f) noexcept {
  const Outcome o = attempt(f);
  if (o.status != DISTATTN_SUCCESS) return failed(o.status, o.message.c_str());
  try {
    set_last_error("");
  } catch (...) {
  }
  return DISTATTN_SUCCESS;
}

}  // namespace DistAttn::CApi

struct distattn_comm_s {
  DistAttn::CApi::CommHolder holder;
};

struct distattn_attention_s {
  std::unique_ptr<DistAttn::CApi::Attention> impl;
};
