// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// GoogleTest main for single-process tests: Kokkos is initialized once.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::initialize(argc, argv);
  int rc = RUN_ALL_TESTS();
  Kokkos::finalize();
  return rc;
}
