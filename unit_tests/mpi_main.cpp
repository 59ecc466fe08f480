// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// GoogleTest main for MPI tests: MPI and Kokkos are initialized once; rank 0
// prints the usual report, other ranks print only their failures (prefixed with
// the rank), and every rank exits non-zero if any rank failed.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace {

/// Failure-only printer for ranks other than 0 (kokkos-fft Test_Main.cpp): the
/// full report of P ranks interleaved would be unreadable, a failure seen by one
/// rank only must not be lost.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::ostringstream os;
    os << "[rank " << rank_ << "] " << (r.file_name() ? r.file_name() : "?") << ':' << r.line_number()
       << ": Failure\n"
       << r.summary() << '\n';
    std::cerr << os.str() << std::flush;
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::ostringstream os;
    os << "[rank " << rank_ << "] [  FAILED  ] " << info.test_suite_name() << '.' << info.name() << '\n';
    std::cerr << os.str() << std::flush;
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  // The tests run on shared GPU hosts, where NVLink multicast can put the GPUs
  // out of service; the library leaves NCCL's environment to its caller.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::initialize(argc, argv);

  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }

  const int rc        = RUN_ALL_TESTS();
  int local_failed    = rc != 0 ? 1 : 0;
  int any_failed      = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !local_failed) {
    std::cerr << "[rank 0] tests passed here but failed on another rank (see [rank N] lines)\n";
  }

  Kokkos::finalize();
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
