// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// make_attention<double> for the C ABI, on host builds (CUDA builds offer fp32, fp16, bf16).

#include "c_attention_impl.hpp"

#ifndef KOKKOS_ENABLE_CUDA
DISTATTN_C_INSTANTIATE(double)
#endif
