// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file impl/cublas_gemm.hpp
/// cuBLAS GEMM for 16-bit row-major matrices on a CUDA stream. Kokkos Kernels
/// (4.6) sends only float/double/complex gemm to cuBLAS and runs bf16/fp16 in
/// its own kernel without tensor cores, so layer/linear.hpp routes 16-bit
/// matrices here (docs/design/decoder_layer.md). Compiled only in CUDA builds.

namespace DistAttn::Impl {

enum class Gemm16 { BF16, FP16 };

/// C = alpha op(A) op(B) + beta C with row-major A, B, C (leading dimensions are
/// row strides in elements), fp32 accumulation and fp32 alpha/beta, on `stream`
/// (a cudaStream_t). `ta`/`tb` are 'N' or 'T'. Throws DistAttn::Error with the
/// cuBLAS status on failure.
void cublas_gemm_rowmajor(void* stream, Gemm16 type, char ta, char tb, long m, long n, long k, float alpha,
                          const void* a, long lda, const void* b, long ldb, float beta, void* c, long ldc);

}  // namespace DistAttn::Impl
