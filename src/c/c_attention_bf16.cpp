// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// make_attention<bhalf_t> for the C ABI, on builds with a distinct bfloat16 type (CUDA).

#include "c_attention_impl.hpp"

#if defined(KOKKOS_ENABLE_CUDA) && DISTATTN_KOKKOS_HAS_BHALF_NAME
DISTATTN_C_INSTANTIATE(DistAttn::compat::bhalf_t)
#endif
