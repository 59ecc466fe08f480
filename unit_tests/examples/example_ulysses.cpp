// Ulysses (all-to-all over heads) on P MPI ranks, P dividing the query heads,
// for any sequence length: the Ulysses example of docs/api.md, checked against
// fp64 (example_check.hpp).
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
    const int B = 1, H = 6, Hkv = 1, D = 40;  // P must divide H; Hkv and P must divide one another

    auto inst = split_instances(Exec(), 2);
    auto comm = Communicator<MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, inst[0]);
    // Contiguous chunks: rank x holds tokens [x c, (x+1) c).
    const SequencePadding pad(N, comm.size(), TokenLayout::Kind::Contiguous);
    const TokenLayout rows = pad.layout(comm.rank());
    UlyssesAttention<double, MpiSpace, Exec> uly(comm, inst[1], B, pad.chunk(), H, Hkv, D);

    const int c = pad.chunk();
    Tensor4<double, Mem> q("q", B, c, H, D), k("k", B, c, Hkv, D), v("v", B, c, Hkv, D), o("o", B, c, H, D);
    Tensor4<double, Mem> dout("dout", B, c, H, D), dq("dq", B, c, H, D), dk("dk", B, c, Hkv, D), dv("dv", B, c, Hkv, D);
    RowStats<double, Mem> lse("lse", B, H, c);
    const Example::Problem global(B, N, H, Hkv, D);
    global.fill_inputs(q, k, v, dout, rows);
    pad.zero_padding(inst[1], rows, dout);  // padded rows: dO = 0

    uly.forward(q, k, v, o, lse);
    uly.backward(q, k, v, o, dout, lse, dq, dk, dv);
    inst[1].fence();
    status = global.check("ulysses", rows, o, lse, dq, dk, dv);
  }
  MPI_Finalize();
  return status;
}
