// Attention2D (argv[1]: "no" or "o", the overlapped variant) on an R x C grid
// of MPI ranks for any sequence length: the Attention2D example of docs/api.md,
// checked against fp64 (example_check.hpp).
#include <DistAttn/DistAttn.hpp>

#include "example_check.hpp"

#include <string>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);  // DistAttn calls MPI only from this thread
  int status = 1;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    using namespace DistAttn;
    using Exec = Kokkos::DefaultExecutionSpace;
    using Mem  = Exec::memory_space;
    const std::string name = argc > 1 ? argv[1] : "no";
    const std::int64_t N   = 1001;
    const int B = 1, H = 6, Hkv = 2, D = 40;

    auto inst = split_instances(Exec(), 2);
    auto comm = Communicator<MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, inst[0]);
    // The cyclic layout: local row i of rank p is token p + i P.
    const SequencePadding pad(N, comm.size(), TokenLayout::Kind::Cyclic);
    const TokenLayout rows = pad.layout(comm.rank());

    Grid2DOptions opts;
    opts.variant = name == "o" ? Grid2DVariant::O : Grid2DVariant::NO;
    // rows = cols = 0: the grid shape is chosen from P and the head counts.
    Grid2DAttention<double, MpiSpace, Exec> a2d(comm, 0, 0, inst[1], B, pad.padded_tokens(), H, Hkv, D, opts);

    const int n = a2d.shard_len();  // == pad.chunk()
    Tensor4<double, Mem> q("q", B, n, H, D), k("k", B, n, Hkv, D), v("v", B, n, Hkv, D), o("o", B, n, H, D);
    Tensor4<double, Mem> dout("dout", B, n, H, D), dq("dq", B, n, H, D), dk("dk", B, n, Hkv, D), dv("dv", B, n, Hkv, D);
    RowStats<double, Mem> lse("lse", B, H, n);
    const Example::Problem global(B, N, H, Hkv, D);
    global.fill_inputs(q, k, v, dout, rows);
    pad.zero_padding(inst[1], rows, dout);  // padded rows: dO = 0

    a2d.forward(q, k, v, o, lse);
    a2d.backward(q, k, v, o, dout, lse, dq, dk, dv);
    inst[1].fence();
    status = global.check(("attention2d " + name).c_str(), rows, o, lse, dq, dk, dv);
  }
  MPI_Finalize();
  return status;
}
