// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Attention2D (argv[1]: "no" or "o", the overlapped variant) on an R x C grid
// of MPI ranks for any sequence length: the Attention2D example of docs/api.md,
// checked against fp64 (example_check.hpp).
#include <DistAttn/DistAttn.hpp>

#include "example_check.hpp"

#include <string>

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "no";
  return Example::run_program(argc, argv, [&](auto& comm, const auto& compute) {
    using namespace DistAttn;
    using Exec = Kokkos::DefaultExecutionSpace;
    const int B = 1, H = 6, Hkv = 2, D = 40;
    // The cyclic layout: local row i of rank p is token p + i P.
    const SequencePadding pad(1001, comm.size(), TokenLayout::Kind::Cyclic);

    Grid2DOptions opts;
    opts.variant = name == "o" ? Grid2DVariant::O : Grid2DVariant::NO;
    // rows = cols = 0: the grid shape is chosen from P and the head counts; N/P rows per rank.
    Grid2DAttention<double, MpiSpace, Exec> a2d(comm, 0, 0, compute, B, pad.padded_tokens(), H, Hkv, D, opts);
    return Example::forward_backward_checked(("attention2d " + name).c_str(), a2d, compute, pad,
                                             pad.layout(comm.rank()), B, H, Hkv, D);
  });
}
