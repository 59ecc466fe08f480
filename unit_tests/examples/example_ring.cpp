// Ring attention (vanilla, balanced or zigzag: argv[1]) on any number of MPI
// ranks for any sequence length: the ring example of docs/api.md, checked against
// fp64 (example_check.hpp).
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
    const std::string name = argc > 1 ? argv[1] : "zigzag";
    const RingKind kind    = name == "vanilla" ? RingKind::Vanilla : name == "balanced" ? RingKind::Balanced
                                                                                          : RingKind::Zigzag;
    const std::int64_t N = 1001;  // any length: padded below
    const int B = 1, H = 6, Hkv = 2, D = 40;

    // One instance carries the transfers, the other the tiles.
    auto inst = split_instances(Exec(), 2);
    auto comm = Communicator<MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, inst[0]);
    const SequencePadding pad(N, comm.size(), token_layout_kind(kind));
    const TokenLayout rows = pad.layout(comm.rank());  // rows.position(i): global token of local row i

    RingOptions opts;
    opts.kind = kind;
    RingAttention<double, MpiSpace, Exec> ring(comm, inst[1], B, pad.chunk(), H, Hkv, D, opts);

    const int c = pad.chunk();
    Tensor4<double, Mem> q("q", B, c, H, D), k("k", B, c, Hkv, D), v("v", B, c, Hkv, D), o("o", B, c, H, D);
    Tensor4<double, Mem> dout("dout", B, c, H, D), dq("dq", B, c, H, D), dk("dk", B, c, Hkv, D), dv("dv", B, c, Hkv, D);
    RowStats<double, Mem> lse("lse", B, H, c);
    const Example::Problem global(B, N, H, Hkv, D);
    global.fill_inputs(q, k, v, dout, rows);
    pad.zero_padding(inst[1], rows, dout);  // padded rows: dO = 0 (their q, k, v may be anything finite)

    ring.forward(q, k, v, o, lse);
    ring.backward(q, k, v, o, dout, lse, dq, dk, dv);
    inst[1].fence();  // the results are complete on the compute instance
    status = global.check(("ring " + name).c_str(), rows, o, lse, dq, dk, dv);
  }
  MPI_Finalize();
  return status;
}
