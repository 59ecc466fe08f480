#pragma once
// Picks the backward kernel that matches a tile entry: BwdTilePS -> attn_bwd_ps_sm90.cuh
// (mma.sync, P/dS through shared memory), WgBwdTile -> attn_bwd_wgmma_sm90.cuh
// (warpgroup MMA).

#include "attn_bwd_ps_sm90.cuh"
#include "attn_bwd_wgmma_sm90.cuh"

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
void launch_attn_bwd_any(const AttnBwdParams& p, cudaStream_t stream) {
  if constexpr (Cfg::kWgmma) launch_attn_bwd_wgmma<Cfg, Elem>(p, stream);
  else launch_attn_bwd_ps<Cfg, Elem>(p, stream);
}

}  // namespace DistAttn::Impl::cuda
