// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// FLOP conventions of docs/PERFORMANCE.md: forward 4*B*H*Sq*Sk*d (two GEMMs),
// halved for a causal square problem; backward counts 2.5x the forward.

namespace DistAttn::Perf {

inline double attn_fwd_flops(double B, double H, double Sq, double Sk, double d, bool causal) {
  return 4.0 * B * H * Sq * Sk * d * (causal ? 0.5 : 1.0);
}
inline double attn_bwd_flops(double B, double H, double Sq, double Sk, double d, bool causal) {
  return 2.5 * attn_fwd_flops(B, H, Sq, Sk, d, causal);
}

}  // namespace DistAttn::Perf
