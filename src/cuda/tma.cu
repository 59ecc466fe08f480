// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host side of tma.hpp.

#include "tma.hpp"

#include <cudaTypedefs.h>

#include <atomic>

namespace DistAttn::Impl::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static std::atomic<PFN_cuTensorMapEncodeTiled_v12000> fn{nullptr};
  static std::atomic<bool> looked{false};
  if (!looked.load(std::memory_order_acquire)) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      p = nullptr;
    cudaGetLastError();
    fn.store(reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p), std::memory_order_release);
    looked.store(true, std::memory_order_release);
  }
  return fn.load(std::memory_order_acquire);
}

}  // namespace

bool encode_tile_tensor_map(CUtensorMap* map, const void* base, bool bf16, int head_dim, int seq, int heads, int batch,
                          std::int64_t row_stride, std::int64_t head_stride, std::int64_t batch_stride, int box_rows) {
  const auto fn = encode_fn();
  if (fn == nullptr || seq <= 0 || heads <= 0 || batch <= 0) return false;
  // TMA: global strides are bytes, multiples of 16, below 2^40; the base 16-byte aligned.
  const std::int64_t s[3] = {row_stride * 2, head_stride * 2, batch_stride * 2};
  for (std::int64_t x : s)
    if (x <= 0 || x % 16 != 0 || x >= (std::int64_t(1) << 40)) return false;
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0) return false;
  const cuuint64_t dims[4]    = {cuuint64_t(head_dim), cuuint64_t(seq), cuuint64_t(heads), cuuint64_t(batch)};
  const cuuint64_t strides[3] = {cuuint64_t(s[0]), cuuint64_t(s[1]), cuuint64_t(s[2])};
  const cuuint32_t box[4]     = {64, cuuint32_t(box_rows), 1, 1};
  const cuuint32_t estr[4]    = {1, 1, 1, 1};
  const CUresult r = fn(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                        const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

bool encode_f32_reduce_tensor_map(CUtensorMap* map, void* base, int head_dim, int seq, int heads, int batch,
                                  std::int64_t row_stride, std::int64_t head_stride, std::int64_t batch_stride,
                                  int box_rows) {
  const auto fn = encode_fn();
  if (fn == nullptr || seq <= 0 || heads <= 0 || batch <= 0) return false;
  const std::int64_t s[3] = {row_stride * 4, head_stride * 4, batch_stride * 4};
  for (std::int64_t x : s)
    if (x <= 0 || x % 16 != 0 || x >= (std::int64_t(1) << 40)) return false;
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0) return false;
  const cuuint64_t dims[4]    = {cuuint64_t(head_dim), cuuint64_t(seq), cuuint64_t(heads), cuuint64_t(batch)};
  const cuuint64_t strides[3] = {cuuint64_t(s[0]), cuuint64_t(s[1]), cuuint64_t(s[2])};
  const cuuint32_t box[4]     = {32, cuuint32_t(box_rows), 1, 1};
  const cuuint32_t estr[4]    = {1, 1, 1, 1};
  const CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, base, dims, strides, box, estr,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

}  // namespace DistAttn::Impl::cuda
