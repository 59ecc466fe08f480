// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Communication follows the mask: a causal window narrower than a chunk, or
// documents that end at chunk boundaries, leave most of the ring's K/V (and, in
// backward, dK/dV) needed by no rank. The pass's byte counters (RingStats) must
// show that it was not sent, and agree with what ring_volume prices for the
// executor's own schedule.

#include "mpi_test_helpers.hpp"
#include "test_helpers.hpp"

#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/ring_volume.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using T    = double;
using Comm = Communicator<MpiSpace, Exec>;
constexpr int B = 1, C = 12, H = 2, Hkv = 2, D = 8;

struct Bytes {
  std::uint64_t fwd_kv = 0, bwd_kv = 0, bwd_dkv = 0;
};

// One forward and one backward on random inputs; this rank's received bytes, each
// also checked against the volume model of the executor's schedule.
Bytes received(Comm& comm, const RingOptions& opts, const std::string& what) {
  RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), B, C, H, Hkv, D, opts);
  Tensor4<T, Mem> q("q", B, C, H, D), k("k", B, C, Hkv, D), v("v", B, C, Hkv, D), o("o", B, C, H, D);
  Tensor4<T, Mem> dout("do", B, C, H, D), dq("dq", B, C, H, D), dk("dk", B, C, Hkv, D), dv("dv", B, C, Hkv, D);
  RowStats<T, Mem> lse("lse", B, H, C);
  const std::uint64_t seed = shared_seed() + std::uint64_t(world_rank());
  Testing::fill_random_device(Exec(), q, seed);
  Testing::fill_random_device(Exec(), k, seed + 1);
  Testing::fill_random_device(Exec(), v, seed + 2);
  Testing::fill_random_device(Exec(), dout, seed + 3);
  RingSizes z;
  z.chunk_tokens = C, z.heads = H, z.kv_heads = Hkv, z.head_dim = D;
  z.io_bytes = z.stat_bytes = z.grad_bytes = int(sizeof(T));
  const int x = world_rank();
  Bytes r;
  ring.forward(q, k, v, o, lse);
  r.fwd_kv = ring.stats().received(PayloadKind::KV);
  EXPECT_EQ(ring.stats().total_received(),
            std::uint64_t(ring_volume(ring.schedule(), x, Pass::Forward, z).total_bytes_received()))
      << "forward " << what;
  ring.backward(q, k, v, o, dout, lse, dq, dk, dv);
  r.bwd_kv  = ring.stats().received(PayloadKind::KV);
  r.bwd_dkv = ring.stats().received(PayloadKind::GradKV);
  EXPECT_EQ(ring.stats().total_received(),
            std::uint64_t(ring_volume(ring.schedule(), x, Pass::Backward, z).total_bytes_received()))
      << "backward " << what;
  return r;
}

TEST(RingMaskVolume, WindowNarrowerThanAChunkReceivesOneChunkOfKV) {
  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world_size();
  const std::uint64_t chunk_kv = 2ull * B * C * Hkv * D * sizeof(T);  // k and v of one chunk
  for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag}) {
    RingOptions o;
    o.kind   = kind;
    o.window = Window{5, 0};
    const std::string what = std::string(to_string(kind)) + " P=" + std::to_string(P) + " rank " +
                             std::to_string(world_rank());
    const Bytes w = received(comm, o, what);
    // Vanilla and balanced: the rows within 5 tokens of a chunk lie in the chunk
    // before it. Zigzag: each half-chunk's window reaches into one neighbouring
    // half-chunk, held by one rank each side.
    const std::uint64_t most = (kind == RingKind::Zigzag ? std::min(2, P - 1) : std::min(1, P - 1)) * chunk_kv;
    EXPECT_LE(w.fwd_kv, most) << what;
    EXPECT_LE(w.bwd_kv, most) << what;
    // Each rank hands its dK/dV back for what it received, and gets back one chunk's worth.
    EXPECT_LE(w.bwd_dkv, most) << what;
    RingOptions dense_opts;
    dense_opts.kind   = kind;
    const Bytes dense = received(comm, dense_opts, what + " dense");
    // The last rank of a dense causal ring needs every chunk before its own.
    if (world_rank() == P - 1 && kind != RingKind::Balanced) {
      EXPECT_EQ(dense.fwd_kv, std::uint64_t(P - 1) * chunk_kv) << what;
    }
  }
}

TEST(RingMaskVolume, DocumentsAtChunkBoundariesSendNoKV) {
  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world_size();
  for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced}) {
    RingOptions o;
    o.kind = kind;
    for (int x = 0; x <= P; ++x) o.documents.push_back(std::int64_t(x) * C);
    const std::string what = std::string(to_string(kind)) + " P=" + std::to_string(P);
    const Bytes d = received(comm, o, what);
    EXPECT_EQ(d.fwd_kv + d.bwd_kv + d.bwd_dkv, 0u) << what;
  }
}

}  // namespace
}  // namespace DistAttn::Test
