// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Dispatch of distattn-run by schedule and element type.

#include "driver_options.hpp"
#include "run_ring.hpp"
#include "run_auto.hpp"
#include "run_hybrid.hpp"
#include "run_ulysses.hpp"
#if __has_include("run_grid2d.hpp")
#include "run_grid2d.hpp"
#define DISTATTN_DRIVER_HAS_GRID2D 1
#else
#define DISTATTN_DRIVER_HAS_GRID2D 0
#endif

namespace DistAttn::Driver {

template <class T>
int run_typed(const Options& o, Sync& comm) {
  if (o.schedule == "local") {
    if (o.fit) throw InvalidArgument("--fit: --schedule local has no memory plan; choose a distributed schedule");
    return run_local<T>(o, comm);
  }
  if (o.schedule == "ring" || o.schedule == "balanced" || o.schedule == "zigzag") return run_ring<T>(o, comm);
  if (o.schedule == "ulysses") return run_ulysses<T>(o, comm);
  if (o.schedule == "hybrid") return run_hybrid<T>(o, comm);
#if DISTATTN_DRIVER_HAS_GRID2D
  if (o.schedule == "grid2d-no" || o.schedule == "grid2d-o") return run_grid2d<T>(o, comm);
#endif
  throw InvalidArgument("--schedule '" + o.schedule + "' is not one of auto, local, ring, balanced, zigzag, ulysses, hybrid" +
                        (DISTATTN_DRIVER_HAS_GRID2D ? ", grid2d-no, grid2d-o" : ""));
}

/// The run of `o` on the ranks of `comm`: every rank calls it. Returns this rank's
/// exit status; AgreedError where every rank rejects the run together.
inline int run(const Options& o, Sync& comm) {
  const int P = comm.size(), rank = comm.rank();
  comm.agree(o.docs_error, "the check of --docs");
  if (o.ranks > 0 && o.ranks != P)
    throw AgreedError("--ranks " + std::to_string(o.ranks) + " but the job has " + std::to_string(P) +
                          " MPI ranks (start it with mpiexec -n " + std::to_string(o.ranks) + ")");
  // Before any work: rank 0 writes the file at the end.
  if (!o.json.empty()) comm.agree(rank == 0 ? json_unwritable(o.json) : "", "the check of --json");
  if (o.schedule == "auto") {
    const Options pick = choose_schedule(o, comm);
    return o.predict_only ? 0 : run(pick, comm);
  }
  if (rank == 0) print_configuration(std::cout);
  warn_if_check_is_slow(o, rank);
  if (o.dtype == "float") return run_typed<float>(o, comm);
  if (o.dtype == "double") return run_typed<double>(o, comm);
#if defined(KOKKOS_ENABLE_CUDA)
  if (o.dtype == "bf16" && compat::has_bhalf) return run_typed<compat::bhalf_t>(o, comm);
  if (o.dtype == "fp16" && compat::has_half) return run_typed<compat::half_t>(o, comm);
#endif
  throw InvalidArgument("--dtype '" + o.dtype + "' is not available in this build");
}

}  // namespace DistAttn::Driver
