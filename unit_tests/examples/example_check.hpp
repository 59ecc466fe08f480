// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the example programs (docs/api.md) share: the program frame (MPI, then
// Kokkos), one rank's tensors, forward and backward with padded rows' dO zeroed,
// and, besides the library, a global problem with fresh random inputs (identical on
// every rank), its fp64 reference and the comparison of each rank's real rows
// against it.

#include <DistAttn/DistAttn.hpp>
#include <DistAttn/testing/reference.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

namespace Example {

using DistAttn::Testing::HostStats;
using DistAttn::Testing::HostTensor;

struct Problem {
  std::int64_t N;
  HostTensor q, k, v, dout, o, dq, dk, dv;  // global inputs and fp64 reference
  HostStats lse;

  /// Causal attention over N tokens; the seed is drawn on rank 0 and shared.
  Problem(int B, std::int64_t tokens, int H, int Hkv, int D)
      : N(tokens), q("q", B, N, H, D), k("k", B, N, Hkv, D), v("v", B, N, Hkv, D), dout("do", B, N, H, D),
        o("o", B, N, H, D), dq("dq", B, N, H, D), dk("dk", B, N, Hkv, D), dv("dv", B, N, Hkv, D),
        lse("lse", B, H, N) {
    std::uint64_t seed = std::random_device{}();
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    DistAttn::Testing::fill_random(q, seed, 1.5);
    DistAttn::Testing::fill_random(k, seed + 1, 1.5);
    DistAttn::Testing::fill_random(v, seed + 2);
    DistAttn::Testing::fill_random(dout, seed + 3);
    const double scale = 1.0 / std::sqrt(double(D));
    DistAttn::Testing::reference_fwd(q, k, v, DistAttn::Mask::causal(), scale, o, lse);
    DistAttn::Testing::reference_bwd(q, k, v, dout, DistAttn::Mask::causal(), scale, dq, dk, dv);
  }

  /// Local row i of `x` <- global token layout.position(i). Rows past N (padding)
  /// get 0.75: padded queries then attend to real keys, so a padded dO that is not
  /// zeroed reaches dk, dv (and a padded key that is not masked reaches o).
  template <class V>
  static void fill(const V& x, const HostTensor& global, const DistAttn::TokenLayout& layout) {
    auto h = Kokkos::create_mirror_view(x);
    for (std::size_t i = 0; i < x.extent(1); ++i) {
      const std::int64_t g = layout.position(std::int64_t(i));
      for (std::size_t b = 0; b < x.extent(0); ++b)
        for (std::size_t hd = 0; hd < x.extent(2); ++hd)
          for (std::size_t d = 0; d < x.extent(3); ++d)
            h(b, i, hd, d) = g < std::int64_t(global.extent(1)) ? global(b, g, hd, d) : 0.75;
    }
    Kokkos::deep_copy(x, h);
  }
  template <class V>
  void fill_inputs(const V& lq, const V& lk, const V& lv, const V& ldout, const DistAttn::TokenLayout& layout) const {
    fill(lq, q, layout);
    fill(lk, k, layout);
    fill(lv, v, layout);
    fill(ldout, dout, layout);
  }

  /// Largest relative error (max |x - ref| / max |ref|) of this rank's real rows
  /// over all ranks and outputs; rank 0 prints it. Returns the exit status.
  template <class V, class L>
  int check(const char* name, const DistAttn::TokenLayout& layout, const V& lo, const L& llse, const V& ldq,
            const V& ldk, const V& ldv) const {
    double err = 0;
    auto tensor = [&](const V& x, const HostTensor& ref) {
      auto h      = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < h.extent(1); ++i) {
        const std::int64_t g = layout.position(std::int64_t(i));
        if (g >= N) continue;
        for (std::size_t b = 0; b < h.extent(0); ++b)
          for (std::size_t hd = 0; hd < h.extent(2); ++hd)
            for (std::size_t d = 0; d < h.extent(3); ++d) {
              const double r = ref(b, g, hd, d), e = std::fabs(double(h(b, i, hd, d)) - r);
              diff = std::isnan(e) ? INFINITY : std::fmax(diff, e);
              norm = std::fmax(norm, std::fabs(r));
            }
      }
      err = std::fmax(err, diff / norm);
    };
    tensor(lo, o);
    tensor(ldq, dq);
    tensor(ldk, dk);
    tensor(ldv, dv);
    auto hl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), llse);
    for (std::size_t i = 0; i < hl.extent(2); ++i) {
      const std::int64_t g = layout.position(std::int64_t(i));
      if (g >= N) continue;
      for (std::size_t b = 0; b < hl.extent(0); ++b)
        for (std::size_t hd = 0; hd < hl.extent(1); ++hd) {
          const double e = std::fabs(hl(b, hd, i) - lse(b, hd, g));
          err            = std::isnan(e) ? INFINITY : std::fmax(err, e);
        }
    }
    double worst = 0;
    MPI_Allreduce(&err, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int rank = 0, P = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const bool ok = worst < 1e-10;
    if (rank == 0)
      std::printf("%s: N=%lld on P=%d ranks, max relative error of o, lse, dq, dk, dv against fp64: %.3g %s\n", name,
                  static_cast<long long>(N), P, worst, ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  }
};

/// The frame of every DistAttn program: MPI before Kokkos and after it, two
/// instances of the default execution space (the first carries the transfers, the
/// second the tiles: two streams on GPUs) and an MPI communicator over all ranks.
/// Calls body(comm, compute), which returns the exit status.
template <class F>
int run_program(int argc, char** argv, F&& body) {
  MPI_Init(&argc, &argv);  // DistAttn calls MPI only from this thread
  int status = 1;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    using Exec = Kokkos::DefaultExecutionSpace;
    auto inst  = DistAttn::split_instances(Exec(), 2);
    auto comm  = DistAttn::Communicator<DistAttn::MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, inst[0]);
    status     = body(comm, inst[1]);
  }
  MPI_Finalize();
  return status;
}

/// One rank's tensors for `pad`'s rows (placed by `rows`), filled from a fresh
/// global problem; forward and backward of `attn`; the check against fp64.
template <class Attn, class Exec>
int forward_backward_checked(const char* name, Attn& attn, const Exec& compute, const DistAttn::SequencePadding& pad,
                             const DistAttn::TokenLayout& rows, int B, int H, int Hkv, int D) {
  using namespace DistAttn;
  using Mem   = typename Exec::memory_space;
  const int c = pad.chunk();
  Tensor4<double, Mem> q("q", B, c, H, D), k("k", B, c, Hkv, D), v("v", B, c, Hkv, D), o("o", B, c, H, D);
  Tensor4<double, Mem> dout("dout", B, c, H, D), dq("dq", B, c, H, D), dk("dk", B, c, Hkv, D), dv("dv", B, c, Hkv, D);
  RowStats<double, Mem> lse("lse", B, H, c);
  const Problem global(B, pad.tokens(), H, Hkv, D);
  global.fill_inputs(q, k, v, dout, rows);  // local row i <- global token rows.position(i)
  pad.zero_padding(compute, rows, dout);    // padded rows: dO = 0 (their q, k, v may be anything finite)

  attn.forward(q, k, v, o, lse);
  attn.backward(q, k, v, o, dout, lse, dq, dk, dv);
  compute.fence();  // the results are complete on the compute instance
  return global.check(name, rows, o, lse, dq, dk, dv);
}

}  // namespace Example
