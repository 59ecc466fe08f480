// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A ring job in which one rank fails on purpose, for the fault tests
// (unit_tests/CMakeLists.txt): every rank exchanges a block with its neighbours
// each step, and at step 3 the victim either dies (--fault kill: SIGKILL) or
// stops (--fault stop: SIGSTOP, a hung process that still holds its sockets).
// The job must then end on its own, with a message naming the failed peer.
//
//   mpiexec -n 4 comm_fault_victim --fault kill|stop [--victim R] [--steps N]

#include <DistAttn/DistAttn.hpp>

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    Kokkos::ScopeGuard guard(argc, argv);
    std::string fault = "none";
    int victim = 1, steps = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
      if (std::strcmp(argv[i], "--fault") == 0) fault = argv[i + 1];
      else if (std::strcmp(argv[i], "--victim") == 0) victim = std::atoi(argv[i + 1]);
      else if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    }
    using Exec = Kokkos::DefaultExecutionSpace;
    auto comm  = DistAttn::Communicator<DistAttn::MpiSpace, Exec>::from_raw(MPI_COMM_WORLD).duplicate();
    const int P = comm.size(), r = comm.rank();
    Kokkos::View<double*, Exec::memory_space> out("out", 1 << 12), in("in", 1 << 12);
    for (int step = 0; step < steps; ++step) {
      if (r == victim && step == 3) {
        std::cerr << "rank " << r << ": injecting fault '" << fault << "' at step " << step << std::endl;
        if (fault == "kill") std::raise(SIGKILL);
        if (fault == "stop") std::raise(SIGSTOP);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the step's compute
      Kokkos::deep_copy(out, double(step));
      auto req = DistAttn::sendrecv(comm, out, (r + 1) % P, in, (r + P - 1) % P);
      req.wait();
    }
    if (r == 0) std::cout << "comm_fault_victim: " << steps << " steps, no fault fired" << std::endl;
  }
  MPI_Finalize();
  return 0;
}
