// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Pieces every schedule's driver run shares: the global test problem (defined
// by hash values at GLOBAL indices, so every schedule and every rank count sees
// the same numbers), gathering per-rank rows to rank 0, and table printing.

#include "common/communicator_choice.hpp"
#include "driver_options.hpp"
#include "sync.hpp"

#include <DistAttn/DistAttn.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/testing/random_fill.hpp>
#include <DistAttn/testing/reference.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace DistAttn::Driver {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem  = Exec::memory_space;

/// Seeds of the four global tensors.
enum : std::uint64_t { kSeedQ = 11, kSeedK = 12, kSeedV = 13, kSeedDO = 14 };

/// Fills local rows i of x with the global tensor's rows pos(i) (positions >= N
/// are padding: zero if zero_padding, else hash values as for real rows).
template <class V>
void fill_global_rows(const Exec& exec, const V& x, std::uint64_t seed, PositionMap pos, long N, bool zero_padding) {
  using T      = typename V::non_const_value_type;
  const long n1 = long(x.extent(1)), n2 = long(x.extent(2)), n3 = long(x.extent(3));
  Kokkos::parallel_for(
      "DistAttn::Driver::fill_global_rows", Kokkos::RangePolicy<Exec>(exec, 0, long(x.extent(0)) * n1 * n2),
      KOKKOS_LAMBDA(long idx) {
        const long h = idx % n2, i = (idx / n2) % n1, b = idx / (n1 * n2);
        const long p = pos.offset + pos.stride * i;
        for (long d = 0; d < n3; ++d) {
          const std::uint64_t g = std::uint64_t(((b * N + p) * n2 + h) * n3 + d);
          x(b, i, h, d)         = (p >= N && zero_padding) ? T(0.0f) : T(float(Testing::hash_uniform(seed, g)));
        }
      });
}

/// The same global tensor on the host, rounded through T, for the reference.
template <class T>
Testing::HostTensor global_host(std::uint64_t seed, long B, long N, long H, long D) {
  Testing::HostTensor x("global", B, N, H, D);
  for (long b = 0; b < B; ++b)
    for (long p = 0; p < N; ++p)
      for (long h = 0; h < H; ++h)
        for (long d = 0; d < D; ++d)
          x(b, p, h, d) = double(T(float(Testing::hash_uniform(seed, std::uint64_t(((b * N + p) * H + h) * D + d)))));
  return x;
}

/// Copies a device tensor to a host fp64 tensor.
template <class V>
Testing::HostTensor to_host_f64(const V& d) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  Testing::HostTensor out("host", d.extent(0), d.extent(1), d.extent(2), d.extent(3));
  for (std::size_t a = 0; a < d.extent(0); ++a)
    for (std::size_t b = 0; b < d.extent(1); ++b)
      for (std::size_t c = 0; c < d.extent(2); ++c)
        for (std::size_t e = 0; e < d.extent(3); ++e) out(a, b, c, e) = double(h(a, b, c, e));
  return out;
}

/// Gathers every rank's local rows (local row i of rank r is at global position
/// pos_of(r, i)) into one global [B, N, H, D] tensor on rank 0; rows at positions
/// >= N are dropped.
template <class PosOf>
Testing::HostTensor gather_rows(const Testing::HostTensor& local, long N, PosOf pos_of, Sync& sync,
                                const char* what) {
  const int rank = sync.rank();
  const long B = long(local.extent(0)), n = long(local.extent(1)), H = long(local.extent(2)),
             D = long(local.extent(3));
  const auto all = sync.gather(local.data(), local.span(), std::string("the gather of ") + what + " for --check");
  Testing::HostTensor g("gathered", B, rank == 0 ? N : 0, H, D);
  if (rank != 0) return g;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const double* src = all[r].data();
    for (long b = 0; b < B; ++b)
      for (long i = 0; i < n; ++i) {
        const long p = long(pos_of(int(r), i));
        if (p >= N) continue;
        for (long h = 0; h < H; ++h)
          for (long d = 0; d < D; ++d) g(b, p, h, d) = src[((b * n + i) * H + h) * D + d];
      }
  }
  return g;
}

/// Tolerance of the driver's --check by element type (relative Frobenius error).
template <class T>
double check_tolerance() {
  if (std::is_same<T, double>::value) return 1e-10;
  if (std::is_same<T, float>::value) return 1e-4;
  return 3e-2;
}

/// Calls f(comm, compute) with the transport --comm asks for, over the job's ranks.
template <class F>
int with_communicator(const Options& o, Sync& sync, F&& f) {
  return Perf::with_communicator<Exec>(o.comm, sync.world(), std::forward<F>(f));
}

/// What every executor the driver builds takes from the command line: the
/// mask's window and documents (the runner sets causality), the
/// testing delay, the opt-in NaN/Inf scan, and a fence at the end of every pass
/// (the driver times passes by the executors' total_s).
inline void set_executor_options(const Options& o, ExecutorOptions& x) {
  x.causal            = o.causal;
  x.window            = o.window;
  x.documents         = o.documents;
  x.recv_delay_ms     = o.delay_ms;
  x.attn.check_finite = o.check_finite;
  x.fence_each_pass   = true;
}

/// The mask the options ask for, as every executor is given it (causality,
/// --window, --docs); its mask_rule() reads the offsets from this object.
inline ExecutorOptions mask_options(const Options& o) {
  ExecutorOptions x;
  set_executor_options(o, x);
  return x;
}

/// Gathers one row of numbers per rank to rank 0.
inline std::vector<std::vector<double>> gather_table(const std::vector<double>& row, Sync& sync) {
  return sync.gather(row.data(), row.size(), "the gather of the result table");
}

}  // namespace DistAttn::Driver
