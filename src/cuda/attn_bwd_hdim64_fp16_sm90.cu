// Generated-style instantiation unit: bwd kernel, head_dim 64, fp16, sm_90a.
// One translation unit per (direction, head_dim, element type) so the kernels
// compile in parallel; the tile entry comes from tile_size.hpp.
#include "attn_bwd_launch.cuh"
#include "tile_size.hpp"

namespace DistAttn::Impl::cuda {

bool run_attn_bwd_hdim64_fp16(const AttnBwdParams& p, cudaStream_t stream) {
  return launch_attn_bwd_any<BwdTileD64, __half>(p, stream);
}

}  // namespace DistAttn::Impl::cuda
