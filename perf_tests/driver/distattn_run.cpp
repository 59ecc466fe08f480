// distattn-run: the project's main job. Generates a causal attention problem,
// runs it with the chosen schedule on the MPI ranks it was started with, checks
// the result against the fp64 reference (--check), and prints a result table.
//
//   mpiexec -n 4 distattn-run --schedule balanced --seq 4096 --heads 8 --kv-heads 2 --dim 64 --check

#include "driver_options.hpp"
#include "driver_runs.hpp"

#include <DistAttn/DistAttn.hpp>

#include <mpi.h>

#include <iostream>
#include <sstream>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    DistAttn::Driver::Options opts;
    bool parsed = false;
    try {
      opts   = DistAttn::Driver::parse_options(argc, argv);
      parsed = true;
    } catch (const std::exception& e) {
      // Every rank parsed the same command line and failed the same way: no
      // rank waits for another, so the job ends normally with status 2.
      std::ostringstream os;  // one write: lines of different ranks do not interleave
      os << "distattn-run (rank " << rank << "): " << e.what() << '\n';
      std::cerr << os.str() << std::flush;
      rc = 2;
    }
    try {
      if (parsed && opts.help) {
        if (rank == 0) DistAttn::Driver::print_usage(std::cout);
      } else if (parsed) {
        rc = DistAttn::Driver::run(opts, MPI_COMM_WORLD);
      }
    } catch (const std::exception& e) {
      // Other ranks may be blocked in a transfer with this one: abort the job
      // rather than leave them waiting.
      std::cerr << "distattn-run (rank " << rank << "): " << e.what() << std::endl;
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  // A failure on one rank must fail the job on every rank.
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
