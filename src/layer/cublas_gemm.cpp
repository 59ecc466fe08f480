// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Row-major 16-bit GEMM through cuBLAS (impl/cublas_gemm.hpp says why).
#include <DistAttn/core/error.hpp>
#include <DistAttn/impl/cublas_gemm.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace DistAttn::Impl {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("DistAttn::linear: ") + what + " failed: " + cublasGetStatusName(s) + " (" +
                cublasGetStatusString(s) + ")");
}

// One handle per host thread, created on first use and kept for the process:
// creating a handle costs milliseconds and allocates its workspace.
cublasHandle_t thread_handle() {
  thread_local cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    check(cublasCreate(&x), "cublasCreate");
    return x;
  }();
  return h;
}

cublasOperation_t op(char t) { return t == 'T' || t == 't' ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

void cublas_gemm_rowmajor(void* stream, Gemm16 type, char ta, char tb, long m, long n, long k, float alpha,
                          const void* a, long lda, const void* b, long ldb, float beta, void* c, long ldc) {
  if (m == 0 || n == 0) return;
  cublasHandle_t h = thread_handle();
  check(cublasSetStream(h, static_cast<cudaStream_t>(stream)), "cublasSetStream");
  const cudaDataType_t dt = type == Gemm16::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same
  // buffers read column-major are the transposes, so swap the operands and keep
  // each one's op.
  check(cublasGemmEx(h, op(tb), op(ta), int(n), int(m), int(k), &alpha, b, dt, int(ldb), a, dt, int(lda), &beta, c, dt,
                     int(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

}  // namespace DistAttn::Impl
