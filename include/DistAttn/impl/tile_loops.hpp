// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Element loops of the portable tile kernels, laid out per backend.

#include <DistAttn/core/kokkos_compat.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace DistAttn::Impl {

/// Calls f(r, j) for every element of a rows x cols tile, split across the team.
/// Host teams are one thread: row by row with a plain inner loop over j, which
/// the compiler vectorizes (a flat index costs an integer division per element,
/// which made staging as slow as the products). Devices: by flat index, so
/// consecutive threads touch consecutive columns and global loads coalesce.
template <class Exec, class Member, class F>
KOKKOS_INLINE_FUNCTION void for_each_tile_element(const Member& team, int rows, int cols, const F& f) {
  if constexpr (compat::host_accessible_v<Exec>) {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
      for (int j = 0; j < cols; ++j) f(r, j);
    });
  } else {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](int idx) { f(idx / cols, idx % cols); });
  }
}

/// dst(r, :) = factor * src(b, s0 + r, h, :) for r < valid, 0 for the padding
/// rows up to dst.extent(0). On host backends a row with unit stride is copied
/// through a raw pointer, the one form the compiler vectorizes for any View type.
template <class Exec, class Member, class Tile, class Src, class Acc>
KOKKOS_INLINE_FUNCTION void stage_rows(const Member& team, const Tile& dst, int valid, const Src& src, int b, int s0,
                                       int h, Acc factor) {
  const int cols = int(dst.extent(1));
  if constexpr (compat::host_accessible_v<Exec>) {
    const bool unit = src.stride(3) == 1;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(dst.extent(0))), [&](int r) {
      Acc* d = &dst(r, 0);
      if (r >= valid) {
        for (int j = 0; j < cols; ++j) d[j] = Acc(0);
      } else if (unit) {
        const auto* s = &src(b, s0 + r, h, 0);
        for (int j = 0; j < cols; ++j) d[j] = Acc(s[j]) * factor;
      } else {
        for (int j = 0; j < cols; ++j) d[j] = Acc(src(b, s0 + r, h, j)) * factor;
      }
    });
  } else {
    for_each_tile_element<Exec>(team, int(dst.extent(0)), cols, [&](int r, int j) {
      dst(r, j) = r < valid ? Acc(src(b, s0 + r, h, j)) * factor : Acc(0);
    });
  }
}

/// Largest of x[0, n) and init. Eight running maxima instead of one: a single
/// chain waits on each compare (the compiler may not reorder a float max).
template <class Acc, class X>
KOKKOS_INLINE_FUNCTION Acc row_max(const X& x, int n, Acc init) {
  Acc m[8] = {init, init, init, init, init, init, init, init};
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int u = 0; u < 8; ++u) m[u] = x[c + u] > m[u] ? x[c + u] : m[u];
  for (; c < n; ++c) m[0] = x[c] > m[0] ? x[c] : m[0];
  for (int u = 1; u < 8; ++u) m[0] = m[u] > m[0] ? m[u] : m[0];
  return m[0];
}

/// Sum of x[0, n) in eight running sums (a fixed order, so results are reproducible).
template <class Acc, class X>
KOKKOS_INLINE_FUNCTION Acc row_sum(const X& x, int n) {
  Acc s[8] = {};
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int u = 0; u < 8; ++u) s[u] += x[c + u];
  for (; c < n; ++c) s[0] += x[c];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/// exp(x) for x <= 0 in a form the compiler vectorizes (libm's expf is a call per
/// element, a quarter of the CPU forward): Cephes' range reduction x = n ln2 + r
/// and polynomial, within 1.4 ulp. Below -87.3 (2^-126), -inf included, it gives 0.
/// The cut-off is applied to the bits: float compares and selects may trap, so the
/// compiler keeps them as branches, and a branch stops vectorization.
KOKKOS_INLINE_FUNCTION float exp_poly(float x) {
  std::uint32_t xb;
  std::memcpy(&xb, &x, sizeof xb);
  // All ones where -inf <= x < -87.33654 (negative floats order as their bits;
  // NaNs stay NaN).
  const std::uint32_t tiny = std::uint32_t(0) - std::uint32_t(xb > 0xC2AEAC4Fu && xb <= 0xFF800000u);
  xb &= ~tiny;
  float xs;
  std::memcpy(&xs, &xb, sizeof xs);
  const float fx   = xs * 1.44269504088896341f;
  const float n    = (fx + 12582912.0f) - 12582912.0f;  // round to nearest
  float r          = xs - n * 0.693359375f;
  r                = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p       = p * r + 1.3981999507e-3f;
  p       = p * r + 8.3334519073e-3f;
  p       = p * r + 4.1665795894e-2f;
  p       = p * r + 1.6666665459e-1f;
  p       = p * r + 5.0000001201e-1f;
  p       = p * r * r + r + 1.0f;
  const std::uint32_t sb = std::uint32_t(std::int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &sb, sizeof scale);
  const float e = p * scale;
  std::uint32_t eb;
  std::memcpy(&eb, &e, sizeof eb);
  eb &= ~tiny;
  float out;
  std::memcpy(&out, &eb, sizeof out);
  return out;
}

/// x[c] = exp(x[c]) for c < n, every x[c] <= 0 or -inf (scores minus their row maximum).
/// Host fp32 uses exp_poly; elsewhere the backend's exp (a hardware instruction
/// on GPUs).
template <class Exec, class Acc>
KOKKOS_INLINE_FUNCTION void exp_in_place(Acc* x, int n) {
  if constexpr (compat::host_accessible_v<Exec> && std::is_same<Acc, float>::value) {
    for (int c = 0; c < n; ++c) x[c] = exp_poly(x[c]);
  } else {
    for (int c = 0; c < n; ++c) x[c] = compat::math::exp(x[c]);
  }
}

}  // namespace DistAttn::Impl
