// Hybrid U x S parallelism (Ulysses over heads outside, a zigzag ring over the
// sequence inside) for any sequence length: the hybrid example of docs/api.md,
// checked against fp64 (example_check.hpp).
#include <DistAttn/DistAttn.hpp>

#include "example_check.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);  // DistAttn calls MPI only from this thread
  int status = 1;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    using namespace DistAttn;
    using Exec = Kokkos::DefaultExecutionSpace;
    using Mem  = Exec::memory_space;
    const std::int64_t N = 1001;
    const int B = 1, H = 6, Hkv = 2, D = 40;

    auto inst = split_instances(Exec(), 2);
    auto comm = Communicator<MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, inst[0]);
    // A multiple of 2P tokens suits every inner executor (zigzag needs U c even).
    const SequencePadding pad(N, comm.size(), TokenLayout::Kind::Zigzag);
    HybridOptions opts;
    opts.ulysses_degree = comm.size() % 2 == 0 ? 2 : 1;  // U; S = P / U
    opts.inner          = HybridInner::Zigzag;
    HybridAttention<double, MpiSpace, Exec> hyb(comm, inst[1], B, pad.chunk(), H, Hkv, D, opts);
    const TokenLayout rows = hyb.token_layout(comm.rank());  // the hybrid's own row order

    const int c = pad.chunk();
    Tensor4<double, Mem> q("q", B, c, H, D), k("k", B, c, Hkv, D), v("v", B, c, Hkv, D), o("o", B, c, H, D);
    Tensor4<double, Mem> dout("dout", B, c, H, D), dq("dq", B, c, H, D), dk("dk", B, c, Hkv, D), dv("dv", B, c, Hkv, D);
    RowStats<double, Mem> lse("lse", B, H, c);
    const Example::Problem global(B, N, H, Hkv, D);
    global.fill_inputs(q, k, v, dout, rows);
    pad.zero_padding(inst[1], rows, dout);  // padded rows: dO = 0

    hyb.forward(q, k, v, o, lse);
    hyb.backward(q, k, v, o, dout, lse, dq, dk, dv);
    inst[1].fence();
    status = global.check("hybrid", rows, o, lse, dq, dk, dv);
  }
  MPI_Finalize();
  return status;
}
