#pragma once
// Picks the forward kernel that matches a tile entry: WsFwdTile ->
// attn_fwd_ws_sm90.cuh (warp-specialized, the shipped table), FwdTile ->
// attn_fwd_sm90.cuh (mma.sync, the runner-up table of tile_size.hpp). Returns false
// (nothing launched) where the kernel cannot take the tensors.

#include "attn_fwd_sm90.cuh"
#include "attn_fwd_ws_sm90.cuh"

namespace DistAttn::Impl::cuda {

template <class Cfg, class Elem>
bool launch_attn_fwd_any(const AttnFwdParams& p, cudaStream_t stream) {
  if constexpr (Cfg::kWs) return launch_attn_fwd_ws<Cfg, Elem>(p, stream);
  else {
    launch_attn_fwd<Cfg, Elem>(p, stream);
    return true;
  }
}

}  // namespace DistAttn::Impl::cuda
