// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/comm/mpi/health.hpp>
#include <DistAttn/core/error.hpp>

#include <sstream>

namespace DistAttn::Impl {

namespace {
int delete_health(MPI_Comm, int, void* value, void*) {
  delete static_cast<std::shared_ptr<MpiCommHealth>*>(value);
  return MPI_SUCCESS;
}

int health_keyval() {
  // MPI calls are not thread-safe at every thread level: create it once.
  static std::once_flag once;
  static int keyval = MPI_KEYVAL_INVALID;
  std::call_once(once, [] { MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &delete_health, &keyval, nullptr); });
  return keyval;
}
}  // namespace

std::shared_ptr<MpiCommHealth> mpi_comm_health(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return std::make_shared<MpiCommHealth>();
  const int key = health_keyval();
  void* value   = nullptr;
  int found     = 0;
  MPI_Comm_get_attr(comm, key, &value, &found);
  if (found) return *static_cast<std::shared_ptr<MpiCommHealth>*>(value);
  auto* holder = new std::shared_ptr<MpiCommHealth>(std::make_shared<MpiCommHealth>());
  if (MPI_Comm_set_attr(comm, key, holder) != MPI_SUCCESS) {
    // Not shared with other wrappers of the handle, but still guards this one.
    auto h = *holder;
    delete holder;
    return h;
  }
  return *holder;
}

void require_healthy(const MpiCommHealth& health, const char* where, int rank, int size) {
  if (!health.broken()) return;
  std::ostringstream os;
  os << "rank " << rank << " of " << size
     << ": this communicator cannot be used after an earlier communication error on it (" << health.reason()
     << "); its ranks no longer agree on which message comes next, so it refuses every operation. Continue on a "
        "new communicator (MPI_Comm_dup of a healthy one, or Communicator::duplicate() made before the error)";
  throw_communication_error(where, os.str());
}

}  // namespace DistAttn::Impl
