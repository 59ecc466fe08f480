// Communicators of the C ABI: from an MPI communicator (by its Fortran handle),
// an existing ncclComm_t, or an NCCL unique id shared by the caller.

#include "c_handles.hpp"

#include <DistAttn/core/kokkos_compat.hpp>

#include <cstring>

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

/// Transfers get an execution-space instance of their own (a stream of their own
/// on CUDA), apart from the instance each attention computes on.
Exec transfer_space() { return compat::partition_space(Exec(), 1)[0]; }

distattn_comm* checked_out(distattn_comm* out, const char* where) {
  DISTATTN_REQUIRE(out != nullptr, where, "argument 'out' is NULL");
  *out = nullptr;
  return out;
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
    checked_out(out, where);
    require_initialized(where);
    int mpi_up = 0;
    MPI_Initialized(&mpi_up);
    DISTATTN_REQUIRE(mpi_up, where, "MPI is not initialized (call MPI_Init first)");
    const MPI_Comm raw = MPI_Comm_f2c(MPI_Fint(mpi_fortran_handle));
    DISTATTN_REQUIRE(raw != MPI_COMM_NULL, where, "argument 'mpi_fortran_handle' is MPI_COMM_NULL");
    CommHolder c;
    c.mpi = std::make_shared<MpiComm>(MpiComm::from_raw(raw, transfer_space()).duplicate());
    publish(out, std::move(c));
  });
}

distattn_status distattn_comm_create_nccl(void* nccl_comm, distattn_comm* out) {
  return guarded([&] {
    constexpr const char* where = "distattn_comm_create_nccl";
    checked_out(out, where);
    require_initialized(where);
#if DISTATTN_ENABLE_NCCL
    DISTATTN_REQUIRE(nccl_comm != nullptr, where, "argument 'nccl_comm' is NULL");
    CommHolder c;
    c.nccl = std::make_shared<NcclComm>(NcclComm::from_raw(static_cast<ncclComm_t>(nccl_comm), transfer_space()));
    publish(out, std::move(c));
#else
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
    checked_out(out, where);
    require_initialized(where);
#if DISTATTN_ENABLE_NCCL
    check_id(id, id_bytes, where);
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
    DISTATTN_REQUIRE(comm != nullptr && rank != nullptr, "distattn_comm_rank", "argument 'comm' or 'rank' is NULL");
    *rank = comm->holder.rank();
  });
}

distattn_status distattn_comm_size(distattn_comm comm, int* size) {
  return guarded([&] {
    DISTATTN_REQUIRE(comm != nullptr && size != nullptr, "distattn_comm_size", "argument 'comm' or 'size' is NULL");
    *size = comm->holder.size();
  });
}

distattn_status distattn_comm_destroy(distattn_comm comm) {
  return guarded([&] { delete comm; });
}

}  // extern "C"
