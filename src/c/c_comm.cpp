// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Communicators of the C ABI: from an MPI communicator (by its Fortran handle),
// an existing ncclComm_t, or an NCCL unique id shared by the caller; and the
// agreement step of every collective call (c_agree.hpp).

#include "c_agree.hpp"

#include <DistAttn/core/kokkos_compat.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

namespace DistAttn::CApi {

int CommHolder::rank() const {
#if DISTATTN_ENABLE_NCCL
  if (nccl) return nccl->rank();
#endif
  return mpi->rank();
}

int CommHolder::size() const {
#if DISTATTN_ENABLE_NCCL
  if (nccl) return nccl->size();
#endif
  return mpi->size();
}

namespace {

/// Sets MPI_ERRORS_RETURN on a communicator for the guard's lifetime, then
/// restores the handler it had: MPI errors become return codes, not an abort.
class ErrorsReturn {
 public:
  explicit ErrorsReturn(MPI_Comm comm) : comm_(comm) {
    if (MPI_Comm_get_errhandler(comm_, &old_) != MPI_SUCCESS) return;
    if (MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
      MPI_Errhandler_free(&old_);
      return;
    }
    active_ = true;
  }
  ErrorsReturn(const ErrorsReturn&)            = delete;
  ErrorsReturn& operator=(const ErrorsReturn&) = delete;
  ~ErrorsReturn() {
    if (!active_) return;
    MPI_Comm_set_errhandler(comm_, old_);
    MPI_Errhandler_free(&old_);
  }

 private:
  MPI_Comm comm_;
  MPI_Errhandler old_ = MPI_ERRHANDLER_NULL;
  bool active_        = false;
};

// A rank's record: [0] entry, [1] status, [2] field count, [3, 3 + kFields) the
// fields' bits, then the message (NUL-terminated, truncated to fit).
constexpr int kEntryWord = 0, kStatusWord = 1, kCountWord = 2, kFieldWord = 3;
constexpr int kMsgWord  = kFieldWord + Agreement::kFields;
constexpr int kMsgChars = (Agreement::kWords - kMsgWord) * int(sizeof(std::int64_t)) - 1;
static_assert(kMsgChars >= 512, "DistAttn C API: the agreement's record leaves too little room for a message");

/// `message` without the leading "where: " that DISTATTN_REQUIRE adds.
std::string strip_where(const std::string& message, const char* where) {
  const std::string prefix = std::string(where) + ": ";
  return message.compare(0, prefix.size(), prefix) == 0 ? message.substr(prefix.size()) : message;
}

/// Shortest decimal that reads back as the same double.
std::string real_text(double x) {
  std::ostringstream os;
  if (!std::isfinite(x)) {
    os << x;
    return os.str();
  }
  for (int digits = 6; digits <= 17; ++digits) {
    os.str("");
    os << std::setprecision(digits) << x;
    if (std::stod(os.str()) == x) break;
  }
  return os.str();
}

std::string value_text(const Field& f, std::int64_t bits) {
  switch (f.kind) {
    case FieldKind::Real: {
      double x;
      std::memcpy(&x, &bits, sizeof x);
      return real_text(x);
    }
    case FieldKind::Executor:
      if (const char* n = executor_name(bits)) return n;
      return std::to_string(bits) + " (not a distattn_executor)";
    case FieldKind::Dtype:
      if (const char* n = dtype_name(bits)) return n;
      return std::to_string(bits) + " (not a distattn_dtype)";
    case FieldKind::Int: break;
  }
  return std::to_string(bits);
}

/// "rank 2", "ranks 0-3, 5, 7" (at most 8 runs, then how many more).
std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  std::size_t i = 0;
  int runs      = 0;
  while (i < ranks.size()) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (runs == 8) {
      os << " and " << ranks.size() - i << " more";
      break;
    }
    os << (runs ? ", " : "") << ranks[i];
    if (j > i) os << "-" << ranks[j];
    ++runs;
    i = j + 1;
  }
  return os.str();
}

/// Ranks grouped by the value of word `word` of their records, in order of first appearance.
std::vector<std::pair<std::int64_t, std::vector<int>>> groups(const std::vector<std::int64_t>& all, int P, int word) {
  std::vector<std::pair<std::int64_t, std::vector<int>>> g;
  for (int r = 0; r < P; ++r) {
    const std::int64_t v = all[std::size_t(Agreement::kWords) * r + word];
    auto it = std::find_if(g.begin(), g.end(), [&](const auto& e) { return e.first == v; });
    if (it == g.end())
      g.push_back({v, {r}});
    else
      it->second.push_back(r);
  }
  return g;
}

/// "A on ranks 0-1; B on rank 2" (at most 4 values, then how many more).
template <class Text>
std::string groups_text(const std::vector<std::pair<std::int64_t, std::vector<int>>>& g, Text&& text) {
  std::ostringstream os;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (i == 4) {
      os << "; " << g.size() - i << " other values";
      break;
    }
    os << (i ? "; " : "") << text(g[i].first) << " on " << ranks_text(g[i].second);
  }
  return os.str();
}

}  // namespace

const char* entry_name(std::int64_t entry) {
  switch (entry) {
    case std::int64_t(Entry::CommCreateMpi): return "distattn_comm_create_mpi_f";
    case std::int64_t(Entry::CommCreateNccl): return "distattn_comm_create_nccl";
    case std::int64_t(Entry::AttentionCreate): return "distattn_attention_create";
    case std::int64_t(Entry::Forward): return "distattn_attention_forward";
    case std::int64_t(Entry::Backward): return "distattn_attention_backward";
    case std::int64_t(Entry::SetDocuments): return "distattn_attention_set_documents";
    default: return "an unknown call";
  }
}

const char* executor_name(std::int64_t value) {
  static const char* const names[] = {"DISTATTN_RING_VANILLA", "DISTATTN_RING_BALANCED", "DISTATTN_RING_ZIGZAG",
                                      "DISTATTN_GRID2D_NO",    "DISTATTN_GRID2D_O",      "DISTATTN_ULYSSES",
                                      "DISTATTN_HYBRID"};
  static_assert(sizeof names / sizeof *names == DISTATTN_HYBRID + 1, "a distattn_executor without a name");
  return value >= 0 && value <= DISTATTN_HYBRID ? names[value] : nullptr;
}

const char* dtype_name(std::int64_t value) {
  static const char* const names[] = {"DISTATTN_FP32", "DISTATTN_FP64", "DISTATTN_FP16", "DISTATTN_BF16"};
  static_assert(sizeof names / sizeof *names == DISTATTN_BF16 + 1, "a distattn_dtype without a name");
  return value >= 0 && value <= DISTATTN_BF16 ? names[value] : nullptr;
}

void Agreement::pack(const char* where, Entry entry, const Outcome& own, const std::vector<Field>& fields) {
  if (fields.size() > std::size_t(kFields))
    throw std::logic_error(std::string(where) + ": more values to agree on than Agreement::kFields");
  mine_.assign(kWords, 0);
  mine_[kEntryWord]  = std::int64_t(entry);
  mine_[kStatusWord] = std::int64_t(own.status);
  mine_[kCountWord]  = std::int64_t(fields.size());
  for (std::size_t i = 0; i < fields.size(); ++i) mine_[kFieldWord + i] = fields[i].bits;
  const std::size_t n = std::min(own.message.size(), std::size_t(kMsgChars));
  std::memcpy(reinterpret_cast<char*>(mine_.data() + kMsgWord), own.message.data(), n);
}

void Agreement::exchange(MPI_Comm comm, const TimeoutSettings& timeout, bool callers_comm) {
  constexpr const char* where = "DistAttn C API: agreement of the call";
  std::optional<ErrorsReturn> guard;
  if (callers_comm) guard.emplace(comm);
  DISTATTN_MPI_CHECK(MPI_Comm_rank(comm, &rank_), where);
  DISTATTN_MPI_CHECK(MPI_Comm_size(comm, &size_), where);
  all_.assign(std::size_t(kWords) * size_, 0);
  MPI_Request r = MPI_REQUEST_NULL;
  DISTATTN_MPI_CHECK(MPI_Iallgather(mine_.data(), kWords, MPI_INT64_T, all_.data(), kWords, MPI_INT64_T, comm, &r),
                     where);
  Request<MpiSpace> req(comm, rank_, size_, timeout);
  req.add_operation(r, {"all_gather", -1, -1, sizeof(std::int64_t) * kWords});
  req.wait();
}

#if DISTATTN_ENABLE_NCCL
void Agreement::exchange(NcclComm& comm) {
  rank_ = comm.rank();
  size_ = comm.size();
  if (dsend_.extent(0) == 0 || drecv_.extent(0) != std::size_t(kWords) * size_) {
    dsend_ = Kokkos::View<std::int64_t*, Exec::memory_space>("DistAttn::CApi::agreement.send", kWords);
    drecv_ = Kokkos::View<std::int64_t*, Exec::memory_space>("DistAttn::CApi::agreement.recv",
                                                              std::size_t(kWords) * size_);
  }
  all_.assign(std::size_t(kWords) * size_, 0);
  using HostWords = Kokkos::View<std::int64_t*, decltype(dsend_)::array_layout, Kokkos::HostSpace,
                                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Kokkos::deep_copy(dsend_, HostWords(mine_.data(), mine_.size()));
  all_gather(comm, dsend_, drecv_).wait();
  Kokkos::deep_copy(HostWords(all_.data(), all_.size()), drecv_);
}
#endif

void Agreement::settle(const char* where, const Outcome& own, const std::vector<Field>& fields) const {
  const int P         = size_;
  auto record         = [&](int r) { return all_.data() + std::size_t(kWords) * r; };
  const auto fail     = [&](distattn_status status, const std::string& msg) {
    throw AgreedFailure(status, std::string(where) + ": " + msg);
  };

  // Ranks in different calls (a caller bug that would otherwise mismatch messages).
  const auto calls = groups(all_, P, kEntryWord);
  if (calls.size() > 1)
    fail(DISTATTN_ERROR_INVALID_ARGUMENT,
         "the ranks are in different calls (" +
             groups_text(calls, [](std::int64_t e) { return std::string(entry_name(e)); }) +
             "): every rank of the communicator must make the same collective calls in the same order");

  // A rank whose checks failed: every rank reports the first such rank's status and error.
  int first = -1, failed = 0;
  for (int r = 0; r < P; ++r)
    if (record(r)[kStatusWord] != DISTATTN_SUCCESS) {
      if (first < 0) first = r;
      ++failed;
    }
  if (failed > 0) {
    std::string msg;
    if (first == rank_) {
      msg = own.message;
    } else {
      const char* m = reinterpret_cast<const char*>(record(first) + kMsgWord);
      msg           = std::string(m, strnlen(m, kMsgChars));
    }
    std::ostringstream os;
    os << "rank " << first << " of " << P << ": " << strip_where(msg, where);
    if (failed > 1) {
      os << " (" << failed << " of " << P << " ranks failed";
      if (own.status != DISTATTN_SUCCESS && first != rank_)
        os << "; this rank, " << rank_ << ": " << strip_where(own.message, where);
      os << ")";
    }
    fail(distattn_status(record(first)[kStatusWord]), os.str());
  }

  if (groups(all_, P, kCountWord).size() > 1)
    fail(DISTATTN_ERROR_INTERNAL, "the ranks agree on different numbers of values (mixed DistAttn builds?)");

  // Values that differ: each one with every rank's value.
  std::string clauses;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const auto g = groups(all_, P, kFieldWord + int(i));
    if (g.size() < 2) continue;
    clauses += (clauses.empty() ? "" : ", ") + std::string(fields[i].name) + " differs (" +
               groups_text(g, [&](std::int64_t bits) { return value_text(fields[i], bits); }) + ")";
  }
  if (!clauses.empty())
    fail(DISTATTN_ERROR_INVALID_ARGUMENT, "every rank must pass the same values, but " + clauses);
}

namespace {

/// Transfers get an execution-space instance of their own (a stream of their own
/// on CUDA), apart from the instance each attention computes on.
Exec transfer_space() { return compat::partition_space(Exec(), 1)[0]; }

distattn_comm* checked_out(distattn_comm* out, const char* where) {
  DISTATTN_REQUIRE(out != nullptr, where, "argument 'out' is NULL");
  *out = nullptr;
  return out;
}

/// The caller's communicator from its Fortran handle, checked on this rank alone.
/// MPI_Comm_f2c gives an invalid handle for one MPI does not know (Open MPI: a
/// null pointer), and MPI reports an invalid communicator to MPI_COMM_WORLD's
/// error handler (MPI 4: MPI_COMM_SELF's), fatal by default: both return error
/// codes while the handle is probed.
MPI_Comm mpi_handle(std::int64_t handle, const char* where) {
  DISTATTN_REQUIRE(handle >= std::numeric_limits<MPI_Fint>::min() && handle <= std::numeric_limits<MPI_Fint>::max(),
                   where,
                   "argument 'mpi_fortran_handle' = " << handle
                                                      << " is not an MPI Fortran handle (outside the range of MPI_Fint)");
  const MPI_Comm raw = MPI_Comm_f2c(MPI_Fint(handle));
  DISTATTN_REQUIRE(raw != MPI_COMM_NULL, where, "argument 'mpi_fortran_handle' = " << handle << " is MPI_COMM_NULL");
  int size = 0, inter = 0;
  bool known = raw != MPI_Comm{};
  if (known) {
    ErrorsReturn world(MPI_COMM_WORLD), self(MPI_COMM_SELF);
    known = MPI_Comm_size(raw, &size) == MPI_SUCCESS && MPI_Comm_test_inter(raw, &inter) == MPI_SUCCESS;
  }
  DISTATTN_REQUIRE(known, where,
                   "argument 'mpi_fortran_handle' = "
                       << handle
                       << " is not a communicator MPI knows (freed, or not a handle: pass MPI_Comm_c2f(comm), "
                          "in mpi4py comm.py2f())");
  DISTATTN_REQUIRE(!inter, where,
                   "argument 'mpi_fortran_handle' = " << handle
                                                      << " is an intercommunicator; DistAttn needs an intracommunicator");
  return raw;
}

void publish(distattn_comm* out, CommHolder holder) {
  auto h    = std::make_unique<distattn_comm_s>();
  h->holder = std::move(holder);
  *out      = h.release();
}

#if DISTATTN_ENABLE_NCCL
void check_id(const void* id, size_t id_bytes, const char* where) {
  DISTATTN_REQUIRE(id != nullptr, where, "argument 'id' is NULL");
  DISTATTN_REQUIRE(id_bytes == sizeof(ncclUniqueId), where,
                   "argument 'id_bytes' = " << id_bytes << " must be " << sizeof(ncclUniqueId));
}
#endif

#if !DISTATTN_ENABLE_NCCL
[[noreturn]] void no_nccl(const char* where) {
  throw Unsupported(std::string(where) +
                    ": this DistAttn build has no NCCL backend (configure with -DDistAttn_ENABLE_NCCL=ON on CUDA)");
}
#endif

}  // namespace
}  // namespace DistAttn::CApi

using namespace DistAttn;
using namespace DistAttn::CApi;

extern "C" {

distattn_status distattn_comm_create_mpi_f(int64_t mpi_fortran_handle, distattn_comm* out) {
  return guarded([&] {
    constexpr const char* where = "distattn_comm_create_mpi_f";
    if (out) *out = nullptr;
    // Checked on this rank alone: without MPI, or with a handle MPI does not
    // know, there is no group to agree over.
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    DISTATTN_REQUIRE(up && !down, where, (down ? "MPI is finalized" : "MPI is not initialized (call MPI_Init first)"));
    const MPI_Comm raw = mpi_handle(mpi_fortran_handle, where);
    // Collective over the caller's communicator from here on.
    TimeoutSettings timeout;
    std::string timeout_error;
    try {
      timeout = TimeoutSettings::from_environment();
    } catch (const InvalidArgument& e) {
      timeout_error = e.what();
    }
    Agreement().run(raw, timeout, where, Entry::CommCreateMpi, {}, [&] {
      DISTATTN_REQUIRE(out != nullptr, where, "argument 'out' is NULL");
      require_initialized(where);
      if (!timeout_error.empty()) throw InvalidArgument(timeout_error);
    });
    CommHolder c;
    c.mpi = std::make_shared<MpiComm>(MpiComm::from_raw(raw, transfer_space()).duplicate());
    publish(out, std::move(c));
  });
}

distattn_status distattn_comm_create_nccl(void* nccl_comm, distattn_comm* out) {
  return guarded([&] {
    constexpr const char* where = "distattn_comm_create_nccl";
    if (out) *out = nullptr;
#if DISTATTN_ENABLE_NCCL
    // Checked on this rank alone: without the communicator, or without Kokkos for
    // the agreement's device buffers, there is no agreement.
    DISTATTN_REQUIRE(nccl_comm != nullptr, where, "argument 'nccl_comm' is NULL");
    require_initialized(where);
    CommHolder c;
    c.nccl = std::make_shared<NcclComm>(NcclComm::from_raw(static_cast<ncclComm_t>(nccl_comm), transfer_space()));
    Agreement().run(*c.nccl, where, Entry::CommCreateNccl, {},
                    [&] { DISTATTN_REQUIRE(out != nullptr, where, "argument 'out' is NULL"); });
    publish(out, std::move(c));
#else
    checked_out(out, where);
    (void)nccl_comm;
    no_nccl(where);
#endif
  });
}

size_t distattn_nccl_unique_id_bytes(void) {
#if DISTATTN_ENABLE_NCCL
  return sizeof(ncclUniqueId);
#else
  return 0;
#endif
}

distattn_status distattn_nccl_unique_id(void* id, size_t id_bytes) {
  return guarded([&] {
    constexpr const char* where = "distattn_nccl_unique_id";
#if DISTATTN_ENABLE_NCCL
    check_id(id, id_bytes, where);
    ncclUniqueId u;
    DISTATTN_NCCL_CHECK(ncclGetUniqueId(&u), where);
    std::memcpy(id, &u, sizeof u);
#else
    (void)id, (void)id_bytes;
    no_nccl(where);
#endif
  });
}

distattn_status distattn_comm_create_nccl_id(const void* id, size_t id_bytes, int nranks, int rank,
                                             distattn_comm* out) {
  return guarded([&] {
    constexpr const char* where = "distattn_comm_create_nccl_id";
    // Checked on this rank alone: there is no communicator to agree over yet.
    checked_out(out, where);
    require_initialized(where);
#if DISTATTN_ENABLE_NCCL
    check_id(id, id_bytes, where);
    DISTATTN_REQUIRE(nranks >= 1, where, "argument 'nranks' = " << nranks << " must be positive");
    DISTATTN_REQUIRE(rank >= 0 && rank < nranks, where,
                     "argument 'rank' = " << rank << " must lie in [0, nranks = " << nranks << ")");
    ncclUniqueId u;
    std::memcpy(&u, id, sizeof u);
    CommHolder c;
    c.nccl = std::make_shared<NcclComm>(NcclComm::from_unique_id(u, nranks, rank, transfer_space()));
    publish(out, std::move(c));
#else
    (void)id, (void)id_bytes, (void)nranks, (void)rank;
    no_nccl(where);
#endif
  });
}

distattn_status distattn_comm_rank(distattn_comm comm, int* rank) {
  return guarded([&] {
    DISTATTN_REQUIRE(comm != nullptr, "distattn_comm_rank", "argument 'comm' is NULL");
    DISTATTN_REQUIRE(rank != nullptr, "distattn_comm_rank", "argument 'rank' is NULL");
    *rank = comm->holder.rank();
  });
}

distattn_status distattn_comm_size(distattn_comm comm, int* size) {
  return guarded([&] {
    DISTATTN_REQUIRE(comm != nullptr, "distattn_comm_size", "argument 'comm' is NULL");
    DISTATTN_REQUIRE(size != nullptr, "distattn_comm_size", "argument 'size' is NULL");
    *size = comm->holder.size();
  });
}

distattn_status distattn_comm_destroy(distattn_comm comm) {
  return guarded([&] { delete comm; });
}

}  // extern "C"
