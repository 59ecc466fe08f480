// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file reference.hpp
/// Float64 host reference for attention forward (O, LSE) and backward (dQ, dK,
/// dV), written as directly as possible from the definitions (docs/design/building_block.md, Definitions),
/// plus helpers to fill inputs and compare results. Used by the tests, the
/// driver's --check and the perf tests' #wrong column.

#include <DistAttn/core/types.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace DistAttn::Testing {

/// The mask's rule written out independently of Mask::allowed (a linear scan for
/// documents, the window as two inequalities), so a bug there cannot hide in both
/// the kernel and its reference.
inline bool reference_allowed(const Mask& mask, std::int64_t i, std::int64_t j) {
  const std::int64_t qpos = mask.q.offset + mask.q.stride * i;
  const std::int64_t kpos = mask.k.offset + mask.k.stride * j;
  if (mask.kind == MaskKind::Causal && kpos > qpos) return false;
  if (kpos < qpos - mask.window.left || kpos > qpos + mask.window.right) return false;
  int dq = 0, dk = 0;  // positions outside every document belong to the nearest end one
  for (int d = 1; d < mask.docs.count; ++d) {
    dq += qpos >= mask.docs.offsets[d] ? 1 : 0;
    dk += kpos >= mask.docs.offsets[d] ? 1 : 0;
  }
  return dq == dk;
}

using HostTensor = Kokkos::View<double****, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostStats  = Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace>;

/// Fills x with independent uniform(-1, 1) values scaled by `amp` (never zeros).
inline void fill_random(const HostTensor& x, std::uint64_t seed, double amp = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-amp, amp);
  double* p = x.data();
  for (std::size_t i = 0; i < x.span(); ++i) p[i] = dist(gen);
}

/// Forward: o = softmax(scale q k^T + mask) v, lse = logsumexp; rows without an
/// admissible key give o = 0, lse = -inf.
inline void reference_fwd(const HostTensor& q, const HostTensor& k, const HostTensor& v, const Mask& mask,
                          double scale, const HostTensor& o, const HostStats& lse) {
  const int B = int(q.extent(0)), Sq = int(q.extent(1)), H = int(q.extent(2)), D = int(q.extent(3));
  const int Sk = int(k.extent(1)), G = H / int(k.extent(2));
  std::vector<double> s(std::size_t(Sk > 0 ? Sk : 1));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Sq; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < Sk; ++j) {
          if (!reference_allowed(mask, i, j)) {
            s[j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double acc = 0;
          for (int d = 0; d < D; ++d) acc += q(b, i, h, d) * k(b, j, h / G, d);
          s[j] = scale * acc;
          mx   = std::max(mx, s[j]);
        }
        for (int d = 0; d < D; ++d) o(b, i, h, d) = 0.0;
        if (mx == -std::numeric_limits<double>::infinity()) {
          lse(b, h, i) = mx;
          continue;
        }
        double sum = 0;
        for (int j = 0; j < Sk; ++j) sum += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
        for (int j = 0; j < Sk; ++j) {
          if (std::isinf(s[j])) continue;
          const double p = std::exp(s[j] - mx) / sum;
          for (int d = 0; d < D; ++d) o(b, i, h, d) += p * v(b, j, h / G, d);
        }
        lse(b, h, i) = mx + std::log(sum);
      }
}

/// Backward from the definitions: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO o)),
/// dQ = scale dS K, dK = scale dS^T Q, with dK/dV summed over each GQA group.
inline void reference_bwd(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& dout,
                          const Mask& mask, double scale, const HostTensor& dq, const HostTensor& dk,
                          const HostTensor& dv) {
  const int B = int(q.extent(0)), Sq = int(q.extent(1)), H = int(q.extent(2)), D = int(q.extent(3));
  const int Sk = int(k.extent(1)), Hk = int(k.extent(2)), G = H / Hk;
  HostTensor o("ref.o", B, Sq, H, D);
  HostStats lse("ref.lse", B, H, Sq);
  reference_fwd(q, k, v, mask, scale, o, lse);
  Kokkos::deep_copy(dq, 0.0);
  Kokkos::deep_copy(dk, 0.0);
  Kokkos::deep_copy(dv, 0.0);
  std::vector<double> p(std::size_t(Sk > 0 ? Sk : 1)), dp(std::size_t(Sk > 0 ? Sk : 1));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Sq; ++i) {
        if (std::isinf(lse(b, h, i))) continue;
        double delta = 0;
        for (int d = 0; d < D; ++d) delta += dout(b, i, h, d) * o(b, i, h, d);
        for (int j = 0; j < Sk; ++j) {
          p[j] = 0;
          if (!reference_allowed(mask, i, j)) continue;
          double s = 0, g = 0;
          for (int d = 0; d < D; ++d) {
            s += q(b, i, h, d) * k(b, j, h / G, d);
            g += dout(b, i, h, d) * v(b, j, h / G, d);
          }
          p[j]  = std::exp(scale * s - lse(b, h, i));
          dp[j] = g;
        }
        for (int j = 0; j < Sk; ++j) {
          if (p[j] == 0) continue;
          const double ds = p[j] * (dp[j] - delta);
          for (int d = 0; d < D; ++d) {
            dv(b, j, h / G, d) += p[j] * dout(b, i, h, d);
            dq(b, i, h, d) += scale * ds * k(b, j, h / G, d);
            dk(b, j, h / G, d) += scale * ds * q(b, i, h, d);
          }
        }
      }
}

/// Relative Frobenius error ||x - ref|| / ||ref|| over a rank-4 host view.
template <class V>
double rel_error(const V& x, const HostTensor& ref) {
  double num = 0, den = 0;
  for (std::size_t a = 0; a < ref.extent(0); ++a)
    for (std::size_t b = 0; b < ref.extent(1); ++b)
      for (std::size_t c = 0; c < ref.extent(2); ++c)
        for (std::size_t d = 0; d < ref.extent(3); ++d) {
          const double e = double(x(a, b, c, d)) - ref(a, b, c, d);
          num += e * e;
          den += ref(a, b, c, d) * ref(a, b, c, d);
        }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

/// Number of elements that are NaN or differ from ref by more than atol + rtol |ref|.
template <class V>
long count_wrong(const V& x, const HostTensor& ref, double atol, double rtol) {
  long bad = 0;
  for (std::size_t a = 0; a < ref.extent(0); ++a)
    for (std::size_t b = 0; b < ref.extent(1); ++b)
      for (std::size_t c = 0; c < ref.extent(2); ++c)
        for (std::size_t d = 0; d < ref.extent(3); ++d) {
          const double val = double(x(a, b, c, d)), r = ref(a, b, c, d);
          if (!(std::fabs(val - r) <= atol + rtol * std::fabs(r))) ++bad;
        }
  return bad;
}

}  // namespace DistAttn::Testing
