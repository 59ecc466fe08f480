// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file attn_params.hpp
/// Plain-old-data parameter blocks of the CUDA-tuned tile kernels (flash-attention's
/// flash.h style) and the host entry points compiled into the library from
/// src/cuda/*.cu. This header is the whole interface between the Kokkos side
/// (impl/cuda/attn_cuda_spec.hpp) and the raw CUDA side: it includes neither Kokkos
/// nor any .cuh, so user translation units never see the kernels.
///
/// Conventions (both directions):
///  - All strides are in elements, 64-bit. Tensors are [batch, seq, heads, head_dim]
///    with unit stride on head_dim; statistics are [batch, heads, seq].
///  - m, l and LSE cross this boundary in natural-log units (docs/design/building_block.md); the kernels
///    work internally in base 2 with log2(e) folded into the scale.
///  - The mask is described by affine positions: query row i sits at
///    q_offset + q_stride * i, key row j at k_offset + k_stride * j (building_block.md,
///    "The mask model"; both strides > 0), and (i, j) is allowed iff k_pos(j) lies in
///    core/mask.hpp's Mask::key_range(q_pos(i)): causal (q_pos >= k_pos), a key window
///    and packed documents, each optional.

#include <DistAttn/impl/cuda/tensor_arg.hpp>

#include <cstdint>

#include <cuda_runtime_api.h>

namespace DistAttn::Impl::cuda {

/// Element type of Q, K, V (and dO). Accumulators and statistics are always fp32.
enum class AttnDType : int { BF16 = 0, FP16 = 1 };

/// core/mask.hpp's kUnboundedSpan (attn_cuda_spec.hpp checks that they agree): a
/// window side this wide is no bound.
inline constexpr std::int64_t kAttnUnboundedSpan = std::int64_t(1) << 60;

/// core/mask.hpp's Mask in plain data: causal or not, affine positions, a key window
/// [p - window_left, p + window_right] (kAttnUnboundedSpan: that side open) and
/// packed documents (doc_count + 1 sorted offsets in device memory; doc_count == 0:
/// none). Dense (no window, no documents) is what every tuned kernel takes; only the
/// kernels attn_masks_beyond_dense names take the rest. The window and the
/// documents default to none, so {causal, q_offset, q_stride, k_offset, k_stride}
/// still spells a dense mask.
struct AttnMaskParams {
  int causal;
  std::int64_t q_offset, q_stride;
  std::int64_t k_offset, k_stride;
  std::int64_t window_left = kAttnUnboundedSpan, window_right = kAttnUnboundedSpan;
  const std::int64_t* doc_offsets = nullptr;
  int doc_count                   = 0;

  __host__ __device__ constexpr bool dense() const {
    return doc_count == 0 && window_left >= kAttnUnboundedSpan && window_right >= kAttnUnboundedSpan;
  }
};

/// Forward update: folds softmax(scale Q K^T + mask) V of one K/V block into the
/// running state (acc, m, l) of the query rows, which may already hold other blocks.
///
/// Direct mode, iff o != nullptr: the block is the whole key set of the rows, and
/// the kernel writes the finalized O (element type of Q, acc / l; 0 for a row with
/// no admissible key) and LSE (m + log l; -inf for such a row) instead, as if the
/// state had started empty and been finalized. acc, m, l and their strides are
/// then unused and may be null. This saves the one-call forward the fp32 state's
/// allocation, its reset and the finalize pass over it.
struct AttnFwdParams {
  TensorRows<const void*> q, k, v;
  TensorRows<float*> acc;  // [B, Sq, H, D] unnormalized accumulator, read and written
  StatRows<float*> m;     // running max (natural log units), read and written
  StatRows<float*> l;     // running sum, read and written
  TensorRows<void*> o;     // direct mode: finalized output, written; else null
  StatRows<float*> lse;   // direct mode: natural-log LSE, written

  int batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  float scale;  // softmax scale (natural units), must be > 0
  AttnMaskParams mask;
  AttnDType dtype;
};

/// Backward update: dq += dQ_block, dk += dK_block, dv += dV_block (fp32
/// accumulators; dk/dv reduced over each GQA group) from the FINAL lse and delta.
struct AttnBwdParams {
  TensorRows<const void*> q, k, v, dout;
  StatRows<const float*> lse;    // natural log; -inf marks an empty row
  StatRows<const float*> delta;  // rowsum(dO * O)
  TensorRows<float*> dq;          // [B, Sq, H, D]
  TensorRows<float*> dk, dv;      // [B, Sk, Hkv, D]

  int batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  float scale;
  AttnMaskParams mask;
  AttnDType dtype;
  /// Nonzero: dq receives the key tiles' contributions in a fixed order, so the
  /// result is bitwise the same from run to run (run_attn_bwd declines where the
  /// kernel cannot guarantee that).
  int deterministic;
};

/// The tuned kernel family a device runs (src/cuda/tile_size.hpp has one table per
/// target): sm90 on compute capability 9.0 (wgmma, TMA), sm80 on 8.x (mma.sync,
/// cp.async, ldmatrix; sm_80 machine code, which sm_86 and sm_89 run too), none
/// elsewhere (the portable kernel runs). The environment variable
/// DISTATTN_CUDA_ARCH_PATH, read once per process, overrides that: `sm80` runs the
/// sm80 kernels on any device of compute capability 8.0 or more (on Hopper the driver
/// JIT-compiles their compute_80 PTX: how the sm80 path is tested here), `portable`
/// declines every tuned kernel, `auto` or unset chooses by compute capability; any
/// other value throws std::invalid_argument naming the variable.
enum class AttnCudaArch : int { none = 0, sm80 = 80, sm90 = 90 };

/// The family the current CUDA device runs (AttnCudaArch::none when there is none).
AttnCudaArch attn_cuda_arch();

/// The direction of a tuned kernel.
enum class AttnDir : int { fwd, bwd };

/// Whether a tuned kernel of the current device's table (attn_cuda_arch()) runs this
/// head_dim in direction `dir`: multiples of 8 up to the widest entry (the Hopper
/// forward: 256, natively 64, 128, 192 and 256; otherwise 128, natively 64 and 128),
/// the others zero-padded to the next entry up.
bool attn_head_dim_supported(int head_dim, AttnDir dir);

/// Whether the family's kernels of direction `dir` apply key windows and packed
/// documents (masks that are not AttnMaskParams::dense()): both of sm90 (the
/// backward's warp-specialized kernel; not its wgmma fallback where TMA cannot
/// describe the tensors, nor a deterministic run), sm80's forward only.
/// run_attn_fwd / run_attn_bwd decline such masks wherever they are not applied.
bool attn_masks_beyond_dense(AttnCudaArch arch, AttnDir dir);

/// Launches the forward update (or, with params.o set, the direct forward) on
/// `stream` and returns true, or returns false without touching anything when the
/// shape, alignment, device or mode is not supported (the caller then runs the
/// portable kernel, or the state path). Throws on launch errors.
bool run_attn_fwd(const AttnFwdParams& params, cudaStream_t stream);

/// Backward counterpart of run_attn_fwd; same contract.
bool run_attn_bwd(const AttnBwdParams& params, cudaStream_t stream);

}  // namespace DistAttn::Impl::cuda
