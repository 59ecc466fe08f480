// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Picks the Hopper forward kernel that matches a tile entry of the sm90 table:
// WsFwdTile -> attn_fwd_ws_sm90.cuh (warp-specialized). Returns false (nothing
// launched) where the kernel cannot take the tensors.

#include "attn_fwd_ws_sm90.cuh"

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
bool launch_attn_fwd_any(const AttnFwdParams& p, cudaStream_t stream) {
  static_assert(Cfg::kWs, "the Hopper table's forward entries are warp-specialized");
  return launch_attn_fwd_ws<Cfg, Elem>(p, stream);
}

}  // namespace DistAttn::Impl::cuda
