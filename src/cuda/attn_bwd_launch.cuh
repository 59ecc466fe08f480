#pragma once
// Picks the backward kernel that matches a tile entry: BwdTilePS -> attn_bwd_ps_sm90.cuh
// (mma.sync, P/dS through shared memory), WgBwdTile -> attn_bwd_wgmma_sm90.cuh
// (warpgroup MMA), WsBwdTile -> attn_bwd_ws_sm90.cuh (warp-specialized, its
// Fallback entry where TMA cannot describe the tensors).

#include "attn_bwd_ps_sm90.cuh"
#include "attn_bwd_wgmma_sm90.cuh"
#include "attn_bwd_ws_sm90.cuh"

namespace DistAttn::Impl::cuda {

/// Returns false without launching only when a deterministic run was asked for and
/// the kernel that would run cannot give one (only the warp-specialized kernel
/// orders its dQ additions; the others add with atomics).
template <class Cfg, class Elem>
bool launch_attn_bwd_any(const AttnBwdParams& p, cudaStream_t stream) {
  if constexpr (Cfg::kWs) {
    if (launch_attn_bwd_ws<Cfg, Elem>(p, stream)) return true;
    return launch_attn_bwd_any<typename Cfg::Fallback, Elem>(p, stream);
  } else {
    if (p.deterministic) return false;
    if constexpr (Cfg::kWgmma) launch_attn_bwd_wgmma<Cfg, Elem>(p, stream);
    else launch_attn_bwd_ps<Cfg, Elem>(p, stream);
    return true;
  }
}

}  // namespace DistAttn::Impl::cuda
