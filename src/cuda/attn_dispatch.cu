// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host entry points of the CUDA-tuned attention kernels: validate what the
// kernels assume (head_dim, alignment, a device with a tile table, positive scale),
// decline (return false) otherwise so the caller falls back to the portable
// kernel, and dispatch on (target, head_dim, element type) to the instantiation
// units of attn_kernels.inc.
// No synchronization: one kernel launch on the caller's stream (the deterministic
// backward also allocates, clears and frees its semaphores, stream-ordered).

#include "attn_launch.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace DistAttn::Impl::cuda {

void check_launch(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("DistAttn CUDA kernel ") + what + " failed to launch: " +
                             cudaGetErrorString(err));
}

namespace {

/// DISTATTN_CUDA_ARCH_PATH (attn_params.hpp): -1 auto, 0 portable, 80 sm80. Read
/// once; a bad value throws on every call (the static stays uninitialized).
int forced_arch() {
  static const int forced = [] {
    const char* e = std::getenv("DISTATTN_CUDA_ARCH_PATH");
    if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return -1;
    if (std::strcmp(e, "sm80") == 0) return 80;
    if (std::strcmp(e, "portable") == 0) return 0;
    throw std::invalid_argument(std::string("DISTATTN_CUDA_ARCH_PATH='") + e +
                                "': expected auto, sm80 or portable");
  }();
  return forced;
}

/// A per-device attribute, cached (devices 0-63): 0 stands for "not yet read", so
/// the attributes cached here are positive. Returns 0 when it cannot be read.
int cached_attribute(std::atomic<int> (&cache)[64], int (*read)(int dev)) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (dev >= 0 && dev < 64) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c != 0) return c;
  }
  const int v = read(dev);
  if (v > 0 && dev >= 0 && dev < 64) cache[dev].store(v, std::memory_order_relaxed);
  return v;
}

/// Compute capability as 10 major + minor (90 for sm_90); 0 when unknown.
int compute_capability() {
  static std::atomic<int> cache[64];
  return cached_attribute(cache, [](int dev) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return 10 * major + minor;
  });
}

/// One launcher of attn_kernels.inc and what it is for.
template <class P>
struct KernelEntry {
  AttnCudaArch arch;
  AttnDType dtype;
  int head_dim;
  bool (*run)(const P&, cudaStream_t);
};

constexpr AttnDType kDType_bf16 = AttnDType::BF16;
constexpr AttnDType kDType_fp16 = AttnDType::FP16;

#define DISTATTN_CUDA_KERNEL(TARGET, DIR, D, TY) DISTATTN_CUDA_ENTRY_##DIR(TARGET, DIR, D, TY)
#define DISTATTN_CUDA_ENTRY(TARGET, DIR, D, TY) \
  {AttnCudaArch::TARGET, kDType_##TY, D, run_attn_##DIR##_hdim##D##_##TY##_##TARGET},
#define DISTATTN_CUDA_ENTRY_fwd DISTATTN_CUDA_ENTRY
#define DISTATTN_CUDA_ENTRY_bwd(TARGET, DIR, D, TY)
constexpr KernelEntry<AttnFwdParams> kFwdKernels[] = {
#include "attn_kernels.inc"
};
#undef DISTATTN_CUDA_ENTRY_fwd
#undef DISTATTN_CUDA_ENTRY_bwd
#define DISTATTN_CUDA_ENTRY_fwd(TARGET, DIR, D, TY)
#define DISTATTN_CUDA_ENTRY_bwd DISTATTN_CUDA_ENTRY
constexpr KernelEntry<AttnBwdParams> kBwdKernels[] = {
#include "attn_kernels.inc"
};
#undef DISTATTN_CUDA_ENTRY_fwd
#undef DISTATTN_CUDA_ENTRY_bwd
#undef DISTATTN_CUDA_ENTRY
#undef DISTATTN_CUDA_KERNEL

/// Runs the current target's kernel of the smallest head_dim that holds p.head_dim
/// (a smaller head_dim runs zero-padded); false when there is none or it declines.
template <class P, std::size_t N>
bool run_listed(const KernelEntry<P> (&kernels)[N], const P& p, cudaStream_t stream) {
  const AttnCudaArch arch = attn_cuda_arch();
  const KernelEntry<P>* best = nullptr;
  for (const KernelEntry<P>& e : kernels)
    if (e.arch == arch && e.dtype == p.dtype && e.head_dim >= p.head_dim && (best == nullptr || e.head_dim < best->head_dim))
      best = &e;
  return best != nullptr && best->run(p, stream);
}

bool aligned(const void* p, std::uintptr_t bytes) { return (reinterpret_cast<std::uintptr_t>(p) % bytes) == 0; }

/// A tensor's base aligned to `bytes` and every stride a multiple of `multiple` elements.
template <class P>
bool rows_aligned(const TensorRows<P>& t, std::uintptr_t bytes, std::int64_t multiple) {
  return aligned(t.data, bytes) && t.batch_stride % multiple == 0 && t.row_stride % multiple == 0 &&
         t.head_stride % multiple == 0;
}
/// 16-byte cp.async rows of 16-bit elements: 16-byte base, strides of 8 elements.
template <class P>
bool vec16_ok(const TensorRows<P>& t) { return rows_aligned(t, 16, 8); }
/// float2 accesses on fp32 rows: 8-byte base and even strides.
template <class P>
bool vec8_ok(const TensorRows<P>& t) { return rows_aligned(t, 8, 2); }
/// Packed pairs of 16-bit elements (4-byte stores): 4-byte base and even strides.
template <class P>
bool vec4_ok(const TensorRows<P>& t) { return rows_aligned(t, 4, 2); }

bool common_ok(AttnDir dir, int batch, int sq, int sk, int heads, int heads_kv, int head_dim, float scale,
               const AttnMaskParams& mask) {
  if (!attn_head_dim_supported(head_dim, dir)) return false;
  if (!(scale > 0.f) || !std::isfinite(scale)) return false;  // the max trick needs scale > 0
  if (batch < 0 || sq < 0 || sk < 0 || heads < 0 || heads_kv <= 0 || heads % heads_kv != 0) return false;
  if (batch > 65535 || heads > 65535) return false;  // grid y/z
  if ((mask.causal || !mask.dense()) && (mask.q_stride <= 0 || mask.k_stride <= 0)) return false;
  if (mask.doc_count < 0 || (mask.doc_count > 0 && mask.doc_offsets == nullptr)) return false;
  if (mask.window_left < 0 || mask.window_right < 0) return false;
  // Windows and documents only where the family applies them (attn_params.hpp).
  return mask.dense() || attn_masks_beyond_dense(attn_cuda_arch(), dir);
}

/// The widest head_dim of a table's entries for `arch` (for none: of every entry, so
/// that a device without a tuned target declines later, as unsupported, not here).
template <class P, std::size_t N>
int widest_head_dim(const KernelEntry<P> (&kernels)[N], AttnCudaArch arch) {
  int widest = 0;
  for (const KernelEntry<P>& e : kernels)
    if (arch == AttnCudaArch::none || e.arch == arch) widest = e.head_dim > widest ? e.head_dim : widest;
  return widest;
}

}  // namespace

// The kernels are instantiated for the head_dims of attn_kernels.inc (64 and 128; the
// Hopper forward also 192 and 256); any other multiple of 8 up to the widest entry of
// the device's table for the direction runs in the next one up with its columns
// zero-padded in shared memory (loads zero-fill, stores skip the padding): exact, at
// the padded size's cost.
bool attn_head_dim_supported(int head_dim, AttnDir dir) {
  const AttnCudaArch arch = attn_cuda_arch();
  const int widest = dir == AttnDir::fwd ? widest_head_dim(kFwdKernels, arch) : widest_head_dim(kBwdKernels, arch);
  return head_dim >= 8 && head_dim <= widest && head_dim % 8 == 0;
}

bool attn_masks_beyond_dense(AttnCudaArch arch, AttnDir dir) {
  return arch == AttnCudaArch::sm90 || (arch == AttnCudaArch::sm80 && dir == AttnDir::fwd);
}

AttnCudaArch attn_cuda_arch() {
  const int forced = forced_arch();
  if (forced == 0) return AttnCudaArch::none;
  const int cc = compute_capability();
  if (forced == 80) return cc >= 80 ? AttnCudaArch::sm80 : AttnCudaArch::none;
  if (cc == 90) return AttnCudaArch::sm90;
  if (cc >= 80 && cc < 90) return AttnCudaArch::sm80;
  return AttnCudaArch::none;
}

bool device_smem_fits(int bytes) {
  static std::atomic<int> cache[64];
  const int optin = cached_attribute(cache, [](int dev) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return v;
  });
  return bytes <= optin;
}

std::size_t sm80_dq_scratch_cap() {
  const char* e = std::getenv("DISTATTN_SM80_DQ_SCRATCH_MIB");
  if (e == nullptr || *e == '\0') return std::size_t(256) << 20;
  char* end     = nullptr;
  const long v  = std::strtol(e, &end, 10);
  if (*end != '\0' || v < 1 || v > (1L << 20))
    throw std::invalid_argument(std::string("DISTATTN_SM80_DQ_SCRATCH_MIB='") + e +
                                "': expected a whole number of MiB from 1 to 1048576");
  return std::size_t(v) << 20;
}

bool run_attn_fwd(const AttnFwdParams& p, cudaStream_t stream) {
  if (!common_ok(AttnDir::fwd, p.batch, p.seqlen_q, p.seqlen_k, p.heads, p.heads_kv, p.head_dim, p.scale, p.mask))
    return false;
  if (attn_cuda_arch() == AttnCudaArch::none) return false;
  const bool direct = p.o.data != nullptr;
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads == 0) return true;  // no rows
  if (direct && p.lse.data == nullptr) return false;
  // With no keys an update has nothing to fold, but direct mode still writes its rows.
  if (p.seqlen_k == 0 && !direct) return true;
  if (!vec16_ok(p.q) || !vec16_ok(p.k) || !vec16_ok(p.v)) return false;
  if (direct ? !vec4_ok(p.o) : !vec8_ok(p.acc)) return false;
  return run_listed(kFwdKernels, p, stream);
}

bool run_attn_bwd(const AttnBwdParams& p, cudaStream_t stream) {
  if (!common_ok(AttnDir::bwd, p.batch, p.seqlen_q, p.seqlen_k, p.heads, p.heads_kv, p.head_dim, p.scale, p.mask))
    return false;
  if (attn_cuda_arch() == AttnCudaArch::none) return false;
  // The deterministic dQ order rests on dense masks (attn_bwd_ws_sm90.cuh).
  if (p.deterministic && !p.mask.dense()) return false;
  if (p.batch == 0 || p.seqlen_q == 0 || p.seqlen_k == 0 || p.heads == 0) return true;
  if (!vec16_ok(p.q) || !vec16_ok(p.k) || !vec16_ok(p.v) || !vec16_ok(p.dout) || !vec8_ok(p.dq) ||
      !vec8_ok(p.dk) || !vec8_ok(p.dv))
    return false;
  return run_listed(kBwdKernels, p, stream);
}

bool run_attn_bwd_prep(const AttnBwdPrepParams& p, cudaStream_t stream) {
  if (!attn_head_dim_supported(p.head_dim, AttnDir::bwd)) return false;  // the backward's prologue
  if (p.batch < 0 || p.seqlen_q < 0 || p.seqlen_k < 0 || p.heads < 0 || p.heads_kv < 0) return false;
  if (attn_cuda_arch() == AttnCudaArch::none) return false;
  // 16-byte accesses: 8 16-bit or 4 fp32 elements
  if (!vec16_ok(p.o) || !vec16_ok(p.dout) || !rows_aligned(p.dq, 16, 4) || !rows_aligned(p.dk, 16, 4) ||
      !rows_aligned(p.dv, 16, 4))
    return false;
  launch_attn_bwd_prep(p, stream);
  return true;
}

}  // namespace DistAttn::Impl::cuda
