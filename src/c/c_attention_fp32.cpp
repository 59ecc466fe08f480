// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// make_attention<float> for the C ABI (every executor and transport of the build).

#include "c_attention_impl.hpp"

DISTATTN_C_INSTANTIATE(float)
