// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Picks the Hopper backward kernel that matches a tile entry of the sm90 table:
// WsBwdTile -> attn_bwd_ws_sm90.cuh (warp-specialized, its Fallback entry where TMA
// cannot describe the tensors), WgBwdTile -> attn_bwd_wgmma_sm90.cuh (warpgroup MMA).

#include "attn_bwd_wgmma_sm90.cuh"
#include "attn_bwd_ws_sm90.cuh"

namespace DistAttn::Impl::cuda {

/// Returns false without launching only when the kernel that would run cannot take
/// the call: a deterministic run (only the warp-specialized kernel orders its dQ
/// additions; the wgmma kernel adds with atomics), or a key window or documents
/// (only the warp-specialized kernel applies them).
template <class Cfg, class Elem>
bool launch_attn_bwd_any(const AttnBwdParams& p, cudaStream_t stream) {
  if constexpr (Cfg::kWs) {
    if (launch_attn_bwd_ws<Cfg, Elem>(p, stream)) return true;
    if (!p.mask.dense()) return false;
    return launch_attn_bwd_any<typename Cfg::Fallback, Elem>(p, stream);
  } else {
    static_assert(Cfg::kWgmma, "the Hopper table's backward entries use wgmma");
    if (p.deterministic) return false;
    launch_attn_bwd_wgmma<Cfg, Elem>(p, stream);
    return true;
  }
}

}  // namespace DistAttn::Impl::cuda
