// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Distributed test plumbing shared by the executor tests: the world's size and
// rank, a seed every rank agrees on, and the "raises on every rank" check.

#include "test_helpers.hpp"

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace DistAttn::Test {

inline int world_size() {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  return P;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// A fresh seed, the same on every rank (each builds the same global problem).
inline std::uint64_t shared_seed() {
  std::uint64_t s = fresh_seed();
  MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return s;
}

/// Runs `pass` on every rank and expects InvalidArgument on every rank, with all
/// of `words` in the message, within a few seconds. Tests that use it set a short
/// communication timeout with TimeoutPolicy::Throw, so a rank left waiting fails
/// the test with a CommunicationError instead of hanging it.
template <class F>
void expect_error_on_every_rank(F&& pass, const std::vector<std::string>& words) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  try {
    pass();
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    msg = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InvalidArgument, got: " << e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0);
  for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
  int ok = ::testing::Test::HasFailure() ? 0 : 1, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(all, 1) << "another rank did not see the error";
}

}  // namespace DistAttn::Test
