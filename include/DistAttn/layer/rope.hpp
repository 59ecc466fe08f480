// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/rope.hpp
/// Rotary position embedding (RoPE) in the Llama "rotate half" convention: in
/// every head, channels j and j + D/2 are rotated by angle pos * theta^(-2j/D).
/// Positions come from the rank's TokenLayout, so a token gets the same rotation
/// whichever rank and executor holds it. With packed documents a token's position
/// is counted from its document's first token: a document then gets the rotations
/// it would get as a sequence of its own, as packed training's position ids do.
/// Scores depend only on distances, so this changes no exact result; it keeps the
/// angles as small as a lone document's, which low-precision types feel.

#include <DistAttn/core/mask.hpp>
#include <DistAttn/schedule/token_layout.hpp>

namespace DistAttn {

/// Rotates x ([batch * chunk, heads * head_dim], row-major, row b*chunk + i is
/// local token i of sequence b) in place; direction -1 applies the inverse
/// rotation, which is also the backward of direction +1 (rotations are orthogonal).
/// `docs` (offsets readable in Exec's memory space) restarts positions per document.
template <class Exec, class XV>
void rope_apply(const Exec& exec, const XV& x, int heads, int head_dim, const TokenLayout& layout, double theta,
                int direction = 1, const Documents& docs = {}) {
  using T          = typename XV::non_const_value_type;
  using Acc        = accum_t<T>;
  const long n     = long(x.extent(0)), half = head_dim / 2, D = head_dim, c = layout.local_rows();
  const double lt  = compat::math::log(theta);
  const double sgn = direction >= 0 ? 1.0 : -1.0;
  Kokkos::parallel_for(
      "DistAttn::rope_apply", Kokkos::RangePolicy<Exec>(exec, 0, n * heads), KOKKOS_LAMBDA(long idx) {
        const long r = idx / heads, h = idx % heads;
        const std::int64_t p = layout.position(r % c);
        const double pos     = double(docs.any() ? p - docs.offsets[docs.of(p)] : p);
        for (long j = 0; j < half; ++j) {
          const double ang = sgn * pos * compat::math::exp(-lt * double(2 * j) / double(D));
          const Acc cs = Acc(compat::math::cos(ang)), sn = Acc(compat::math::sin(ang));
          const Acc a = Acc(x(r, h * D + j)), b = Acc(x(r, h * D + j + half));
          x(r, h * D + j)        = T(a * cs - b * sn);
          x(r, h * D + j + half) = T(b * cs + a * sn);
        }
      });
}

}  // namespace DistAttn
