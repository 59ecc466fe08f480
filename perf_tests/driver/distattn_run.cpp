// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// distattn-run: the project's main job. Generates a causal attention problem,
// runs it with the chosen schedule on the MPI ranks it was started with, checks
// the result against the fp64 reference (--check), and prints a result table.
//
//   mpiexec -n 4 distattn-run --schedule balanced --seq 4096 --heads 8 --kv-heads 2 --dim 64 --check

#include "common/kokkos_args.hpp"
#include "driver_options.hpp"
#include "driver_runs.hpp"
#include "places.hpp"
#include "rank_map.hpp"
#include "run_context.hpp"
#include "sync.hpp"

#include <cstdlib>
#include <DistAttn/DistAttn.hpp>

#include <mpi.h>

#include <iostream>
#include <optional>
#include <sstream>

int main(int argc, char** argv) {
  // NVLink multicast stays off unless the launcher says otherwise: on shared
  // hosts it can put the GPUs out of service. The library itself never sets it.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  // The --json context records the command line as typed, before MPI and Kokkos
  // take their options out of it.
  DistAttn::Driver::start_info().argv.assign(argv, argv + argc);
  DistAttn::Driver::start_info().date = DistAttn::Driver::utc_now_iso8601();
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    DistAttn::Perf::KokkosArgs args(argc, argv);
    Kokkos::ScopeGuard guard(args.kokkos_argc(), args.kokkos_argv());
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    auto say = [rank](const char* what) {
      std::ostringstream os;  // one write: lines of different ranks do not interleave
      os << "distattn-run (rank " << rank << "): " << what << '\n';
      std::cerr << os.str() << std::flush;
    };
    // Errors every rank meets together (the command line and the environment are
    // the same on every rank; AgreedError is agreed) end the job normally with
    // status 2, after each rank said why; any other error may leave ranks waiting
    // for this one, so it aborts the job.
    std::optional<DistAttn::Driver::Sync> sync;
    try {
      sync.emplace(MPI_COMM_WORLD);
    } catch (const std::exception& e) {
      say(e.what());
      rc = 2;
    }
    if (sync) {
      DistAttn::Driver::Options opts;
      bool parsed = false;
      try {
        opts   = DistAttn::Driver::parse_options(args.tool_argc(), args.tool_argv());
        parsed = true;
      } catch (const std::exception& e) {
        say(e.what());
        rc = 2;
      }
      try {
        if (parsed && opts.help) {
          if (rank == 0) DistAttn::Driver::print_usage(std::cout);
        } else if (parsed) {
          using namespace DistAttn::Driver;
          Place mine = this_place();
          if (opts.test_gpu >= 0) mine = {mine.host, "test GPU", "test-gpu-" + std::to_string(opts.test_gpu), opts.test_gpu};
          auto& places = start_info().places = gather_places(mine, *sync);
          if (rank == 0) std::cout << rank_map(places) << std::flush;
          sync->agree(rank == 0 && !opts.allow_shared_gpu ? shared_gpu_error(places) : "",
                      "the check of one rank per GPU");
          rc = run(opts, *sync);
        }
      } catch (const DistAttn::Driver::AgreedError& e) {
        say(e.what());
        rc = 2;
      } catch (const std::exception& e) {
        say(e.what());
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      // A failure on one rank fails the job on every rank. Bounded like every wait of
      // the driver, and MPI_Finalize (a collective too) starts only after it.
      rc = sync->max(rc, "the agreement on the exit status");
    }
  }
  MPI_Finalize();
  return rc;
}
