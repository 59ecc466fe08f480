// Host entry points of the CUDA-tuned attention kernels: validate what the
// kernels assume (head_dim, alignment, a Hopper sm_90 device, positive scale),
// decline (return false) otherwise so the caller falls back to the portable
// kernel, and dispatch on (head_dim, element type) to the instantiation units.
// No synchronization: one kernel launch on the caller's stream (the deterministic
// backward also allocates, clears and frees its semaphores, stream-ordered).

#include "attn_launch.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace DistAttn::Impl::cuda {

void check_launch(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("DistAttn CUDA kernel ") + what + " failed to launch: " +
                             cudaGetErrorString(err));
}

// The kernels are instantiated for head_dim 64 and 128; any other multiple of 8 up
// to 128 runs in the next one up with its columns zero-padded in shared memory
// (loads zero-fill, stores skip the padding): exact, at the padded size's cost.
bool attn_head_dim_supported(int head_dim) { return head_dim >= 8 && head_dim <= 128 && head_dim % 8 == 0; }

namespace {

/// The kernels are built for sm_90a only (wgmma, and mma.sync tuned for Hopper; the
/// binary holds no other machine code), so any other device declines.
bool current_device_is_sm90() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  static std::atomic<int> cache[64];  // 0 unknown, 1 sm_90, 2 other
  if (dev >= 0 && dev < 64) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c != 0) return c == 1;
  }
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const bool ok = major == 9 && minor == 0;
  if (dev >= 0 && dev < 64) cache[dev].store(ok ? 1 : 2, std::memory_order_relaxed);
  return ok;
}

bool aligned(const void* p, std::uintptr_t bytes) { return (reinterpret_cast<std::uintptr_t>(p) % bytes) == 0; }

/// 16-byte cp.async rows: base and every stride a multiple of 8 elements (16 B).
bool vec16_ok(const void* p, std::int64_t s0, std::int64_t s1, std::int64_t s2) {
  return aligned(p, 16) && s0 % 8 == 0 && s1 % 8 == 0 && s2 % 8 == 0;
}

/// float2 accesses on fp32 rows: 8-byte base and even strides.
bool vec8_ok(const void* p, std::int64_t s0, std::int64_t s1, std::int64_t s2) {
  return aligned(p, 8) && s0 % 2 == 0 && s1 % 2 == 0 && s2 % 2 == 0;
}

/// Packed pairs of 16-bit elements (4-byte stores): 4-byte base and even strides.
bool vec4_ok(const void* p, std::int64_t s0, std::int64_t s1, std::int64_t s2) {
  return aligned(p, 4) && s0 % 2 == 0 && s1 % 2 == 0 && s2 % 2 == 0;
}

bool common_ok(int batch, int sq, int sk, int heads, int heads_kv, int head_dim, float scale,
               const AttnMaskParams& mask) {
  if (!attn_head_dim_supported(head_dim)) return false;
  if (!(scale > 0.f) || !std::isfinite(scale)) return false;  // the max trick needs scale > 0
  if (batch < 0 || sq < 0 || sk < 0 || heads < 0 || heads_kv <= 0 || heads % heads_kv != 0) return false;
  if (batch > 65535 || heads > 65535) return false;  // grid y/z
  if (mask.causal && (mask.q_stride <= 0 || mask.k_stride <= 0)) return false;
  return true;
}

}  // namespace

bool run_attn_fwd(const AttnFwdParams& p, cudaStream_t stream) {
  if (!common_ok(p.batch, p.seqlen_q, p.seqlen_k, p.heads, p.heads_kv, p.head_dim, p.scale, p.mask)) return false;
  if (!current_device_is_sm90()) return false;
  const bool direct = p.o != nullptr;
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads == 0) return true;  // no rows
  if (direct && p.lse == nullptr) return false;
  // With no keys an update has nothing to fold, but direct mode still writes its rows.
  if (p.seqlen_k == 0 && !direct) return true;
  if (!vec16_ok(p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride) ||
      !vec16_ok(p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride) ||
      !vec16_ok(p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride))
    return false;
  if (direct ? !vec4_ok(p.o, p.o_batch_stride, p.o_row_stride, p.o_head_stride)
             : !vec8_ok(p.acc, p.acc_batch_stride, p.acc_row_stride, p.acc_head_stride))
    return false;
  const bool bf16 = p.dtype == AttnDType::BF16;
  if (p.head_dim <= 64) return bf16 ? run_attn_fwd_hdim64_bf16(p, stream) : run_attn_fwd_hdim64_fp16(p, stream);
  return bf16 ? run_attn_fwd_hdim128_bf16(p, stream) : run_attn_fwd_hdim128_fp16(p, stream);
}

bool run_attn_bwd(const AttnBwdParams& p, cudaStream_t stream) {
  if (!common_ok(p.batch, p.seqlen_q, p.seqlen_k, p.heads, p.heads_kv, p.head_dim, p.scale, p.mask)) return false;
  if (!current_device_is_sm90()) return false;
  if (p.batch == 0 || p.seqlen_q == 0 || p.seqlen_k == 0 || p.heads == 0) return true;
  if (!vec16_ok(p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride) ||
      !vec16_ok(p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride) ||
      !vec16_ok(p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride) ||
      !vec16_ok(p.dout, p.do_batch_stride, p.do_row_stride, p.do_head_stride) ||
      !vec8_ok(p.dq, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride) ||
      !vec8_ok(p.dk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride) ||
      !vec8_ok(p.dv, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride))
    return false;
  const bool bf16 = p.dtype == AttnDType::BF16;
  if (p.head_dim <= 64) return bf16 ? run_attn_bwd_hdim64_bf16(p, stream) : run_attn_bwd_hdim64_fp16(p, stream);
  return bf16 ? run_attn_bwd_hdim128_bf16(p, stream) : run_attn_bwd_hdim128_fp16(p, stream);
}

bool run_attn_bwd_prep(const AttnBwdPrepParams& p, cudaStream_t stream) {
  if (!attn_head_dim_supported(p.head_dim)) return false;
  if (p.batch < 0 || p.seqlen_q < 0 || p.seqlen_k < 0 || p.heads < 0 || p.heads_kv < 0) return false;
  if (!current_device_is_sm90()) return false;
  auto rows16 = [](const auto& t, std::int64_t multiple) {
    return aligned(t.data, 16) && t.batch_stride % multiple == 0 && t.row_stride % multiple == 0 &&
           t.head_stride % multiple == 0;
  };
  // 16-byte accesses: 8 16-bit or 4 fp32 elements
  if (!rows16(p.o, 8) || !rows16(p.dout, 8) || !rows16(p.dq, 4) || !rows16(p.dk, 4) || !rows16(p.dv, 4)) return false;
  launch_attn_bwd_prep(p, stream);
  return true;
}

}  // namespace DistAttn::Impl::cuda
