// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/mpi/communicator.hpp>

namespace DistAttn::mpi {

namespace {
/// Owned communicators report errors as return codes, so DISTATTN_MPI_CHECK can
/// name the operation and peer instead of MPI aborting with a generic message.
void errors_return(MPI_Comm comm, const char* where) {
  DISTATTN_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), where);
}
}  // namespace

MPI_Comm duplicate_comm(MPI_Comm comm) {
  MPI_Comm out = MPI_COMM_NULL;
  DISTATTN_MPI_CHECK(MPI_Comm_dup(comm, &out), "DistAttn::Communicator<MPI>::duplicate");
  errors_return(out, "DistAttn::Communicator<MPI>::duplicate");
  return out;
}

MPI_Comm split_comm(MPI_Comm comm, int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  DISTATTN_MPI_CHECK(MPI_Comm_split(comm, color < 0 ? MPI_UNDEFINED : color, key, &out),
                     "DistAttn::Communicator<MPI>::split(color " << color << ", key " << key << ")");
  if (out != MPI_COMM_NULL) errors_return(out, "DistAttn::Communicator<MPI>::split");
  return out;
}

void free_comm(MPI_Comm& comm) noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  comm = MPI_COMM_NULL;
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  DISTATTN_MPI_CHECK(MPI_Comm_rank(comm, &r), "DistAttn::Communicator<MPI>::rank");
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 0;
  DISTATTN_MPI_CHECK(MPI_Comm_size(comm, &s), "DistAttn::Communicator<MPI>::size");
  return s;
}

}  // namespace DistAttn::mpi
