// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ring attention (vanilla, balanced or zigzag: argv[1]) on any number of MPI
// ranks for any sequence length: the ring example of docs/api.md, checked against
// fp64 (example_check.hpp has the frame and the passes every example shares).
#include <DistAttn/DistAttn.hpp>

#include "example_check.hpp"

#include <string>

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "zigzag";
  return Example::run_program(argc, argv, [&](auto& comm, const auto& compute) {
    using namespace DistAttn;
    using Exec           = Kokkos::DefaultExecutionSpace;
    const RingKind kind  = name == "vanilla" ? RingKind::Vanilla : name == "balanced" ? RingKind::Balanced
                                                                                       : RingKind::Zigzag;
    const std::int64_t N = 1001;  // any length: padded below
    const int B = 1, H = 6, Hkv = 2, D = 40;

    const SequencePadding pad(N, comm.size(), token_layout_kind(kind));
    const TokenLayout rows = pad.layout(comm.rank());  // rows.position(i): global token of local row i

    RingOptions opts;
    opts.kind = kind;
    RingAttention<double, MpiSpace, Exec> ring(comm, compute, B, pad.chunk(), H, Hkv, D, opts);
    return Example::forward_backward_checked(("ring " + name).c_str(), ring, compute, pad, rows, B, H, Hkv, D);
  });
}
