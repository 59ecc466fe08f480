// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Tensor-memory-accelerator (TMA) descriptors for the tiles the wgmma kernels
// stream (Q, K and V in the forward; Q, dO, K, V in the backward, and the fp32 dq it
// adds to by bulk reductions): a 4-D view
// (head_dim, seq, heads, batch) of the caller's tensor with
// boxes of 64 columns x rows, 128-byte swizzled, which is exactly one column block
// of the atom layout (wgmma.cuh), so TMA writes tiles the wgmma descriptors read
// as they are. Out-of-bounds rows and columns (ragged key tile, head_dim below the
// kernel's) arrive as zeros.
//
// cuTensorMapEncodeTiled is a driver API: it is looked up at run time through the
// runtime (cudaGetDriverEntryPointByVersion), so the library does not link libcuda.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace DistAttn::Impl::cuda {

/// The forward's maps, passed to the kernel as one __grid_constant__ parameter
/// (CUtensorMap carries its own alignment): Q (boxes of 64 columns x the query tile)
/// and K, V (64 columns x the key tile).
struct FwdTensorMaps {
  CUtensorMap q;
  CUtensorMap k;
  CUtensorMap v;
};
/// The warp-specialized backward's maps: Q, dO, K, V (16-bit, 64-column boxes) and
/// the fp32 dq it adds to (32-column boxes).
struct BwdTensorMaps {
  CUtensorMap q;
  CUtensorMap dout;
  CUtensorMap k;
  CUtensorMap v;
  CUtensorMap dq;
};

/// Fills `map` for a [batch, seq, heads, head_dim] 16-bit tensor (strides in
/// elements) with boxes of 64 x box_rows; returns false if the driver lacks the
/// entry point or rejects the layout (the caller then copies with cp.async).
bool encode_tile_tensor_map(CUtensorMap* map, const void* base, bool bf16, int head_dim, int seq, int heads, int batch,
                          std::int64_t row_stride, std::int64_t head_stride, std::int64_t batch_stride, int box_rows);

/// Fills `map` for a [batch, seq, heads, head_dim] fp32 tensor (the dq accumulator)
/// with boxes of 32 columns (128 bytes, 128-byte swizzled) x box_rows, for bulk
/// reductions into it: elements of a box past head_dim or seq are not written.
bool encode_f32_reduce_tensor_map(CUtensorMap* map, void* base, int head_dim, int seq, int heads, int batch,
                                  std::int64_t row_stride, std::int64_t head_stride, std::int64_t batch_stride,
                                  int box_rows);

}  // namespace DistAttn::Impl::cuda
