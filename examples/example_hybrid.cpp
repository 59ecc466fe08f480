// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Hybrid U x S parallelism (Ulysses over heads outside, a zigzag ring over the
// sequence inside) for any sequence length: the hybrid example of docs/api.md,
// checked against fp64 (example_check.hpp).
#include <DistAttn/DistAttn.hpp>

#include "example_check.hpp"

int main(int argc, char** argv) {
  return Example::run_program(argc, argv, [&](auto& comm, const auto& compute) {
    using namespace DistAttn;
    using Exec = Kokkos::DefaultExecutionSpace;
    const int B = 1, H = 6, Hkv = 2, D = 40;
    // A multiple of 2P tokens suits every inner executor (zigzag needs U c even).
    const SequencePadding pad(1001, comm.size(), TokenLayout::Kind::Zigzag);

    HybridOptions opts;
    opts.ulysses_degree = comm.size() % 2 == 0 ? 2 : 1;  // U; S = P / U
    opts.inner          = HybridInner::Zigzag;
    HybridAttention<double, MpiSpace, Exec> hyb(comm, compute, B, pad.chunk(), H, Hkv, D, opts);
    // The hybrid's rows follow its inner executor: hyb.token_layout(rank), not pad.layout(rank).
    return Example::forward_backward_checked("hybrid", hyb, compute, pad, hyb.token_layout(comm.rank()), B, H, Hkv,
                                             D);
  });
}
