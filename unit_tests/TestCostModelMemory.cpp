// The cost model's per-rank workspace (ring_workspace_bytes,
// grid2d_workspace_bytes) against what the executors really allocate: every
// Kokkos allocation whose label starts with the executor's prefix is counted
// through the Kokkos Tools allocation callback over one forward and one backward.

#include "test_helpers.hpp"

#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/cost_model.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include <mpi.h>

#include <cstring>
#include <string>

namespace DistAttn::Test {
namespace {

using T    = float;
using Comm = Communicator<MpiSpace, Exec>;

std::uint64_t g_bytes = 0;
const char* g_prefix  = "";

void count_allocation(const Kokkos::Tools::SpaceHandle, const char* label, const void*, const std::uint64_t size) {
  if (std::strncmp(label, g_prefix, std::strlen(g_prefix)) == 0) g_bytes += size;
}

/// Bytes allocated under `prefix` while f runs.
template <class F>
std::uint64_t allocated(const char* prefix, F&& f) {
  g_bytes  = 0;
  g_prefix = prefix;
  Kokkos::Tools::Experimental::set_allocate_data_callback(count_allocation);
  f();
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  return g_bytes;
}

AttnProblem problem(int B, std::int64_t N, int H, int Hkv, int D) {
  AttnProblem p;
  p.batch = B, p.seq_len = N, p.heads = H, p.kv_heads = Hkv, p.head_dim = D, p.dtype = "float";
  return p;
}

TEST(CostModelMemory, RingWorkspaceIsWhatTheExecutorAllocates) {
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = comm.size(), B = 2, c = 8, H = 4, Hkv = 2, D = 16;
  Tensor4<T, Mem> q("q", B, c, H, D), k("k", B, c, Hkv, D), v("v", B, c, Hkv, D), o("o", B, c, H, D), dO("do", B, c, H, D);
  Tensor4<T, Mem> dq("dq", B, c, H, D), dk("dk", B, c, Hkv, D), dv("dv", B, c, Hkv, D);
  RowStats<accum_t<T>, Mem> lse("lse", B, H, c);
  Testing::fill_random_device(Exec(), q, 1);
  Testing::fill_random_device(Exec(), k, 2);
  Testing::fill_random_device(Exec(), v, 3);
  Testing::fill_random_device(Exec(), dO, 4);
  for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag}) {
    SCOPED_TRACE(std::string(to_string(kind)) + " P=" + std::to_string(P));
    RingOptions opts;
    opts.kind = kind;
    const std::uint64_t bytes = allocated("DistAttn::ring.", [&] {
      RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), B, c, H, Hkv, D, opts);
      ring.forward(q, k, v, o, lse);
      ring.backward(q, k, v, o, dO, lse, dq, dk, dv);
    });
    EXPECT_EQ(std::int64_t(bytes), ring_workspace_bytes(kind, problem(B, std::int64_t(P) * c, H, Hkv, D), c));
  }
}

TEST(CostModelMemory, Grid2DWorkspaceIsWhatTheExecutorAllocates) {
  auto world = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world.size(), B = 1, n = 6, H = 4, Hkv = 2, D = 16;
  Tensor4<T, Mem> q("q", B, n, H, D), k("k", B, n, Hkv, D), v("v", B, n, Hkv, D), o("o", B, n, H, D), dO("do", B, n, H, D);
  Tensor4<T, Mem> dq("dq", B, n, H, D), dk("dk", B, n, Hkv, D), dv("dv", B, n, Hkv, D);
  RowStats<accum_t<T>, Mem> lse("lse", B, H, n);
  Testing::fill_random_device(Exec(), q, 1);
  Testing::fill_random_device(Exec(), k, 2);
  Testing::fill_random_device(Exec(), v, 3);
  Testing::fill_random_device(Exec(), dO, 4);
  for (int R = 1; R <= P; ++R) {
    if (P % R) continue;
    for (Grid2DVariant var : {Grid2DVariant::NO, Grid2DVariant::O}) {
      const bool overlapped = var == Grid2DVariant::O;
      SCOPED_TRACE("grid " + std::to_string(R) + "x" + std::to_string(P / R) + (overlapped ? " O" : " NO"));
      Grid2DOptions opts;
      opts.variant = var;
      bool fixed_point = false;
      const std::uint64_t bytes = allocated("DistAttn::grid2d.", [&] {
        Grid2DAttention<T, MpiSpace, Exec> a2d(world, R, P / R, Exec(), B, std::int64_t(P) * n, H, Hkv, D, opts);
        const GridCoords rc = a2d.coords();
        fixed_point = a2d.layout().transpose_source(rc.row, rc.col) == world.rank();
        a2d.forward(q, k, v, o, lse);
        a2d.backward(q, k, v, o, dO, lse, dq, dk, dv);
      });
      // The model counts the buffer a rank needs when the permutation moves its K/V.
      const std::int64_t kept = fixed_point && P > 1 ? 2 * std::int64_t(B) * n * Hkv * D * 4 : 0;
      EXPECT_EQ(std::int64_t(bytes) + kept,
                grid2d_workspace_bytes(overlapped, problem(B, std::int64_t(P) * n, H, Hkv, D), R, P / R, n));
    }
  }
}

}  // namespace
}  // namespace DistAttn::Test
