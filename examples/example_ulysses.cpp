// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ulysses (all-to-all over heads) on P MPI ranks, P dividing the query heads,
// for any sequence length: the Ulysses example of docs/api.md, checked against
// fp64 (example_check.hpp).
#include <DistAttn/DistAttn.hpp>

#include "example_check.hpp"

int main(int argc, char** argv) {
  return Example::run_program(argc, argv, [&](auto& comm, const auto& compute) {
    using namespace DistAttn;
    using Exec = Kokkos::DefaultExecutionSpace;
    const int B = 1, H = 6, Hkv = 1, D = 40;  // P must divide H; Hkv and P must divide one another
    // Contiguous chunks: rank x holds tokens [x c, (x+1) c).
    const SequencePadding pad(1001, comm.size(), TokenLayout::Kind::Contiguous);
    UlyssesAttention<double, MpiSpace, Exec> uly(comm, compute, B, pad.chunk(), H, Hkv, D);
    return Example::forward_backward_checked("ulysses", uly, compute, pad, pad.layout(comm.rank()), B, H, Hkv, D);
  });
}
