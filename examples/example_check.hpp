// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the example programs (docs/api.md) share: the program frame (MPI, then
// Kokkos, and one clear message instead of an abort when the library rejects the
// job, e.g. a rank count the executor cannot use), one rank's tensors, forward and
// backward with padded rows' dO zeroed, and, besides the library, a global problem
// with fresh random inputs (identical on every rank), its fp64 reference written
// out here from the definitions (the examples build against an installed DistAttn
// alone) and the comparison of each rank's real rows against it.

#include <DistAttn/DistAttn.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

namespace Example {

using HostTensor = Kokkos::View<double****, Kokkos::LayoutRight, Kokkos::HostSpace>;  // [B, N, heads, D]
using HostStats  = Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace>;   // [B, heads, N]

/// Uniform(-amp, amp) values from `seed`.
inline void fill_random(const HostTensor& x, std::uint64_t seed, double amp = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-amp, amp);
  for (std::size_t i = 0; i < x.span(); ++i) x.data()[i] = dist(gen);
}

/// Causal attention in fp64, straight from the definitions: S = scale q k^T
/// (key j <= query i), P = softmax(S), o = P v, lse = logsumexp(S); backward
/// dV = P^T dO, dP = dO v^T, dS = P (dP - rowsum(dO o)), dQ = scale dS k,
/// dK = scale dS^T q. Query head h reads key/value head h / (H / Hkv).
inline void reference(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& dout,
                      const HostTensor& o, const HostStats& lse, const HostTensor& dq, const HostTensor& dk,
                      const HostTensor& dv) {
  const int B = int(q.extent(0)), N = int(q.extent(1)), H = int(q.extent(2)), D = int(q.extent(3));
  const int G = H / int(k.extent(2));
  const double scale = 1.0 / std::sqrt(double(D));
  Kokkos::deep_copy(dq, 0.0);
  Kokkos::deep_copy(dk, 0.0);
  Kokkos::deep_copy(dv, 0.0);
  std::vector<double> p(static_cast<std::size_t>(N));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < N; ++i) {
        double mx = -INFINITY, sum = 0, delta = 0;
        for (int j = 0; j <= i; ++j) {
          double s = 0;
          for (int d = 0; d < D; ++d) s += q(b, i, h, d) * k(b, j, h / G, d);
          p[j] = scale * s;
          mx   = std::fmax(mx, p[j]);
        }
        for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        lse(b, h, i) = mx + std::log(sum);
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (int j = 0; j <= i; ++j) acc += p[j] / sum * v(b, j, h / G, d);
          o(b, i, h, d) = acc;
          delta += dout(b, i, h, d) * acc;
        }
        for (int j = 0; j <= i; ++j) {
          const double pj = p[j] / sum;
          double dp       = 0;
          for (int d = 0; d < D; ++d) dp += dout(b, i, h, d) * v(b, j, h / G, d);
          const double ds = pj * (dp - delta);
          for (int d = 0; d < D; ++d) {
            dv(b, j, h / G, d) += pj * dout(b, i, h, d);
            dq(b, i, h, d) += scale * ds * k(b, j, h / G, d);
            dk(b, j, h / G, d) += scale * ds * q(b, i, h, d);
          }
        }
      }
}

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
    fill_random(q, seed, 1.5);
    fill_random(k, seed + 1, 1.5);
    fill_random(v, seed + 2);
    fill_random(dout, seed + 3);
    reference(q, k, v, dout, o, lse, dq, dk, dv);
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
  int status = 1, rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    using Exec = Kokkos::DefaultExecutionSpace;
    auto inst  = DistAttn::split_instances(Exec(), 2);
    auto comm  = DistAttn::Communicator<DistAttn::MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, inst[0]);
    try {
      status = body(comm, inst[1]);
    } catch (const DistAttn::InvalidArgument& e) {
      // Every rank rejects a bad argument together (a rank count the executor cannot
      // use, say): one of them says why, and the program ends normally.
      if (rank == 0) std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
      status = 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s (rank %d): %s\n", argv[0], rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 3);  // the other ranks may be waiting for this one
    }
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
