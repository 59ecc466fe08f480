#pragma once
// Picks the forward kernel that matches a tile entry: FwdTile -> attn_fwd_sm90.cuh
// (mma.sync), WgFwdTile -> attn_fwd_wgmma_sm90.cuh (warpgroup MMA), WsFwdTile ->
// attn_fwd_ws_sm90.cuh (warp-specialized, its Fallback where TMA cannot describe
// the tensors).

#include "attn_fwd_sm90.cuh"
#include "attn_fwd_wgmma_sm90.cuh"
#include "attn_fwd_ws_sm90.cuh"

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
void launch_attn_fwd_any(const AttnFwdParams& p, cudaStream_t stream) {
  if constexpr (Cfg::kWs) {
    if (!launch_attn_fwd_ws<Cfg, Elem>(p, stream)) launch_attn_fwd_any<typename Cfg::Fallback, Elem>(p, stream);
  } else if constexpr (Cfg::kWgmma) launch_attn_fwd_wgmma<Cfg, Elem>(p, stream);
  else launch_attn_fwd<Cfg, Elem>(p, stream);
}

}  // namespace DistAttn::Impl::cuda
