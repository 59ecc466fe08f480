// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// make_attention<half_t> for the C ABI, on builds with a distinct 16-bit type (CUDA).

#include "c_attention_impl.hpp"

#ifdef KOKKOS_ENABLE_CUDA
DISTATTN_C_INSTANTIATE(DistAttn::compat::half_t)
#endif
