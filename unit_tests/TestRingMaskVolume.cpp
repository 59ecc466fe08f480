// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Communication follows the mask: a causal window narrower than a chunk, or
// documents that end at chunk boundaries, leave most of the ring's K/V (and, in
// backward, dK/dV) needed by no rank. The pass's byte counters (RingStats) must
// show that it was not sent, and agree with what ring_volume prices for the
// executor's own schedule; the rows that do travel give the fp64 reference's results.

#include "mpi_test_helpers.hpp"
#include "test_helpers.hpp"

#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/ring_volume.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
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

TEST(RingMaskVolume, WindowNarrowerThanAChunkReceivesTheWindowsKV) {
  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world_size();
  const std::uint64_t row_kv = 2ull * B * Hkv * D * sizeof(T);  // k and v of one token
  const int W = 5;
  for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag}) {
    RingOptions o;
    o.kind   = kind;
    o.window = Window{W, 0};
    const std::string what = std::string(to_string(kind)) + " P=" + std::to_string(P) + " rank " +
                             std::to_string(world_rank());
    const Bytes w = received(comm, o, what);
    // Vanilla and balanced: the W keys before a chunk lie in the chunk before it.
    // Zigzag: each half-chunk's W keys before it lie in one neighbouring
    // half-chunk, held by one rank each side. Only those rows travel.
    const std::uint64_t most = (kind == RingKind::Zigzag ? std::min(2, P - 1) : std::min(1, P - 1)) * W * row_kv;
    EXPECT_LE(w.fwd_kv, most) << what;
    EXPECT_LE(w.bwd_kv, most) << what;
    // Each rank hands its dK/dV back for what it received, and gets back one chunk's worth.
    EXPECT_LE(w.bwd_dkv, most) << what;
    RingOptions dense_opts;
    dense_opts.kind   = kind;
    const Bytes dense = received(comm, dense_opts, what + " dense");
    // The last rank of a dense causal ring needs every chunk before its own.
    if (world_rank() == P - 1 && kind != RingKind::Balanced) {
      EXPECT_EQ(dense.fwd_kv, std::uint64_t(P - 1) * C * row_kv) << what;
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

// The rows that travel are the ones the kernels read: against the fp64 reference
// of the whole sequence with two sequences in the batch (one message per batch
// element) and one kv head per pass (the head-group copies travel), GQA 2:1.
TEST(RingMaskVolume, PartialChunksMatchTheReference) {
  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world_size(), Bn = 2, Hq = 4, N = P * C;
  std::vector<std::int64_t> docs{0};
  for (std::int64_t x : {5, 17, 18, 30, 41})
    if (x < N) docs.push_back(x);
  docs.push_back(N);
  HostTensor q("q", Bn, N, Hq, D), k("k", Bn, N, Hkv, D), v("v", Bn, N, Hkv, D), dout("do", Bn, N, Hq, D);
  const std::uint64_t seed = shared_seed();
  Testing::fill_random(q, seed, 1.5), Testing::fill_random(k, seed + 1, 1.5);
  Testing::fill_random(v, seed + 2), Testing::fill_random(dout, seed + 3);
  for (const auto& [window, with_docs] : {std::pair{Window{5, 0}, false}, std::pair{Window{3, 0}, true},
                                          std::pair{Window{14, 0}, false}})
    for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag}) {
      RingOptions o;
      o.kind       = kind;
      o.window     = window;
      o.head_group = 1;
      if (with_docs) o.documents = docs;
      HostTensor go("o", Bn, N, Hq, D), gdq("dq", Bn, N, Hq, D), gdk("dk", Bn, N, Hkv, D), gdv("dv", Bn, N, Hkv, D);
      HostStats glse("lse", Bn, Hq, N);
      const double scale = 1.0 / std::sqrt(double(D));
      Testing::reference_fwd(q, k, v, o.mask_rule(), scale, go, glse);
      Testing::reference_bwd(q, k, v, dout, o.mask_rule(), scale, gdq, gdk, gdv);
      const RingLayout lay(P, C, kind);
      const auto rows = [&](const HostTensor& g) {
        HostTensor out("rows", g.extent(0), C, g.extent(2), g.extent(3));
        for (std::size_t b = 0; b < g.extent(0); ++b)
          for (int i = 0; i < C; ++i)
            for (std::size_t h = 0; h < g.extent(2); ++h)
              for (std::size_t d = 0; d < g.extent(3); ++d) out(b, i, h, d) = g(b, lay.position(world_rank(), i), h, d);
        return out;
      };
      RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), Bn, C, Hq, Hkv, D, o);
      const auto lq = to_device<T>(rows(q), "q"), lk = to_device<T>(rows(k), "k"), lv = to_device<T>(rows(v), "v");
      const auto ldo = to_device<T>(rows(dout), "do");
      Tensor4<T, Mem> lo("o", Bn, C, Hq, D), dq("dq", Bn, C, Hq, D), dk("dk", Bn, C, Hkv, D), dv("dv", Bn, C, Hkv, D);
      RowStats<T, Mem> lse("lse", Bn, Hq, C);
      ring.forward(lq, lk, lv, lo, lse);
      ring.backward(lq, lk, lv, lo, ldo, lse, dq, dk, dv);
      Exec().fence();
      const std::string what = std::string(to_string(kind)) + " window " + std::to_string(window.left) +
                               (with_docs ? " documents" : "") + " P=" + std::to_string(P) + " seed " +
                               std::to_string(seed);
      EXPECT_LE(Testing::rel_error(to_host(lo), rows(go)), 1e-12) << "o " << what;
      EXPECT_LE(Testing::rel_error(to_host(dq), rows(gdq)), 1e-11) << "dq " << what;
      EXPECT_LE(Testing::rel_error(to_host(dk), rows(gdk)), 1e-11) << "dk " << what;
      EXPECT_LE(Testing::rel_error(to_host(dv), rows(gdv)), 1e-11) << "dv " << what;
      const auto hl = stats_to_host(lse);
      double lerr = 0;
      for (int b = 0; b < Bn; ++b)
        for (int h = 0; h < Hq; ++h)
          for (int i = 0; i < C; ++i) lerr = std::max(lerr, std::fabs(hl(b, h, i) - glse(b, h, lay.position(world_rank(), i))));
      EXPECT_LE(lerr, 1e-11) << "lse " << what;
    }
}

}  // namespace
}  // namespace DistAttn::Test
