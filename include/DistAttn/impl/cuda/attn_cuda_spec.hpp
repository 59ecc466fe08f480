// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file attn_cuda_spec.hpp
/// CUDA-tuned specializations of the dispatch seam of impl/attn_spec.hpp
/// (STYLE §b3, level 2): on Kokkos::Cuda with bf16 or fp16 inputs, the building
/// block's forward and backward updates pack an AttnFwdParams / AttnBwdParams
/// (impl/cuda/attn_params.hpp) and call the kernels compiled into the library from
/// src/cuda/*.cu, on the caller's execution-space stream; the one-call forward may
/// also have the kernel write the final O and LSE directly. They decline (return
/// false, so the portable kernel runs) for anything the kernels do not cover:
/// head_dim not a multiple of 8 up to the widest of the device's table for the
/// direction (cuda::attn_head_dim_supported), non-fp32 accumulators, non-unit head_dim stride,
/// misaligned rows, a non-positive scale, or a device without a tuned target
/// (cuda::attn_cuda_arch(): sm_90 and sm_8x have one). Key windows and packed
/// documents run on the sm90 kernels and the sm80 forward (cuda::attn_masks_beyond_dense)
/// and decline on the sm80 backward. The backward's `deterministic` (AttnOptions::deterministic) asks for
/// dq added in a fixed order; it declines where the kernel cannot order them (no TMA
/// descriptors, the sm80 kernels, which add dQ with atomics, or a window or documents).
///
/// Included by impl/attn_spec.hpp; empty unless the library was built with
/// DistAttn_ENABLE_CUDA_KERNELS (and so with a CUDA Kokkos).

#include <DistAttn/core/config.hpp>

#if DISTATTN_ENABLE_CUDA_KERNELS && defined(KOKKOS_ENABLE_CUDA)

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/cuda/attn_params.hpp>
#include <DistAttn/impl/kernel_notice.hpp>
#include <DistAttn/impl/tensor_arg_from_view.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace DistAttn::Impl {

namespace cuda_spec {

/// Element types with a tuned kernel (only where Kokkos gives them distinct types).
template <class T>
inline constexpr bool is_tuned_elem_v =
    (compat::has_bhalf && std::is_same<T, compat::bhalf_t>::value) ||
    (compat::has_half && std::is_same<T, compat::half_t>::value);

template <class T>
constexpr cuda::AttnDType dtype_of() {
  return std::is_same<T, compat::half_t>::value ? cuda::AttnDType::FP16 : cuda::AttnDType::BF16;
}

template <class V>
bool unit_last(const V& v) {
  return Strides<V>(v).s[3] == 1;
}

template <class V, class T>
inline constexpr bool value_is_v = std::is_same<typename V::non_const_value_type, T>::value;

static_assert(cuda::kAttnUnboundedSpan == kUnboundedSpan, "an open window side means the same to the kernels");

/// What the tuned kernels of direction `dir` on this device's family do not handle
/// in this mask, or empty: the sm80 backward knows dense causal and full masks only.
inline std::string mask_not_covered(const Mask& mask, cuda::AttnDir dir) {
  if (mask.is_dense() || cuda::attn_masks_beyond_dense(cuda::attn_cuda_arch(), dir)) return {};
  return std::string(mask.docs.any() ? "packed documents" : "key windows") + " in the sm80 " +
         (dir == cuda::AttnDir::bwd ? "backward" : "forward");
}

/// Whether the tuned kernels of direction `dir` cover this head_dim and mask: a
/// head_dim may have a tuned forward but no tuned backward (Hopper, 192 and 256), and
/// a mask they cannot apply runs on the portable kernels rather than silently
/// unmasked; the first decline of each kind says so, naming the direction
/// (impl/kernel_notice.hpp).
template <class QV>
bool covered(const QV& q, const Mask& mask, cuda::AttnDir dir) {
  const int d = int(q.extent(3));
  if (!cuda::attn_head_dim_supported(d, dir)) {
    note_portable_fallback("head_dim " + std::to_string(d) + (dir == cuda::AttnDir::bwd ? " in the backward" : ""));
    return false;
  }
  const std::string why = mask_not_covered(mask, dir);
  if (!why.empty()) {
    note_portable_fallback(why);
    return false;
  }
  return true;
}

/// The mask in the kernels' terms; documents pass their offsets' pointer, which the
/// executors point into device memory on a GPU (core/mask.hpp, Documents).
inline cuda::AttnMaskParams mask_params(const Mask& mask) {
  cuda::AttnMaskParams mp;
  mp.causal       = mask.is_causal() ? 1 : 0;
  mp.q_offset     = mask.q.offset;
  mp.q_stride     = mask.q.stride;
  mp.k_offset     = mask.k.offset;
  mp.k_stride     = mask.k.stride;
  mp.window_left  = mask.window.left;
  mp.window_right = mask.window.right;
  mp.doc_offsets  = mask.docs.offsets;
  mp.doc_count    = mask.docs.count;
  return mp;
}

/// The forward parameters both forward entry points share: q, k, v, shapes, scale,
/// mask, element type (the caller adds the state or the final outputs).
template <class T, class QV, class KV, class VV>
cuda::AttnFwdParams fwd_params(const QV& q, const KV& k, const VV& v, const Mask& mask, double scale) {
  cuda::AttnFwdParams p{};
  p.q = tensor_rows<const void*>(q);
  p.k = tensor_rows<const void*>(k);
  p.v = tensor_rows<const void*>(v);
  p.batch    = int(q.extent(0));
  p.seqlen_q = int(q.extent(1));
  p.heads    = int(q.extent(2));
  p.head_dim = int(q.extent(3));
  p.seqlen_k = int(k.extent(1));
  p.heads_kv = int(k.extent(2));
  p.scale    = float(scale);
  p.mask     = mask_params(mask);
  p.dtype    = dtype_of<T>();
  return p;
}

}  // namespace cuda_spec

template <class T>
struct tuned_attn_avail<Kokkos::Cuda, T> : std::bool_constant<cuda_spec::is_tuned_elem_v<T>> {};

template <class T>
struct TunedAttnFwdUpdate<Kokkos::Cuda, T> {
  template <class QV, class KV, class VV, class AccV, class StatV>
  static bool run(const Kokkos::Cuda& exec, const QV& q, const KV& k, const VV& v, const AccV& acc,
                  const StatV& m, const StatV& l, const Mask& mask, double scale) {
    using namespace cuda_spec;
    if constexpr (!is_tuned_elem_v<T> || !value_is_v<KV, T> || !value_is_v<VV, T> || !value_is_v<AccV, float> ||
                  !value_is_v<StatV, float>) {
      return false;
    } else {
      if (!covered(q, mask, cuda::AttnDir::fwd)) return false;
      if (!unit_last(q) || !unit_last(k) || !unit_last(v) || !unit_last(acc)) return false;
      cuda::AttnFwdParams p = fwd_params<T>(q, k, v, mask, scale);
      p.acc = tensor_rows<float*>(acc);
      p.m   = stat_rows<float*>(m);
      p.l   = stat_rows<float*>(l);
      return cuda::run_attn_fwd(p, exec.cuda_stream());
    }
  }
};

/// Direct mode of the forward kernel (AttnFwdParams::o): O in the element type and
/// fp32 LSE written by the kernel itself; declines wherever the update would.
template <class T>
struct TunedAttnFwdDirect<Kokkos::Cuda, T> {
  template <class QV, class KV, class VV, class OV, class LseV>
  static bool run(const Kokkos::Cuda& exec, const QV& q, const KV& k, const VV& v, const OV& o, const LseV& lse,
                  const Mask& mask, double scale) {
    using namespace cuda_spec;
    if constexpr (!is_tuned_elem_v<T> || !value_is_v<KV, T> || !value_is_v<VV, T> || !value_is_v<OV, T> ||
                  !value_is_v<LseV, float>) {
      return false;
    } else {
      if (!covered(q, mask, cuda::AttnDir::fwd)) return false;
      if (!unit_last(q) || !unit_last(k) || !unit_last(v) || !unit_last(o)) return false;
      if (o.data() == nullptr) return false;  // null o would mean update mode to the kernels
      cuda::AttnFwdParams p = fwd_params<T>(q, k, v, mask, scale);  // acc, m, l stay null
      p.o   = tensor_rows<void*>(o);
      p.lse = stat_rows<float*>(lse);
      return cuda::run_attn_fwd(p, exec.cuda_stream());
    }
  }
};

template <class T>
struct TunedAttnBwdUpdate<Kokkos::Cuda, T> {
  template <class QV, class KV, class VV, class DOV, class LseV, class DeltaV, class GQV, class GKV>
  static bool run(const Kokkos::Cuda& exec, const QV& q, const KV& k, const VV& v, const DOV& dout,
                  const LseV& lse, const DeltaV& delta, const GQV& dq, const GKV& dk, const GKV& dv,
                  const Mask& mask, double scale, bool deterministic = false) {
    using namespace cuda_spec;
    if constexpr (!is_tuned_elem_v<T> || !value_is_v<KV, T> || !value_is_v<VV, T> || !value_is_v<DOV, T> ||
                  !value_is_v<LseV, float> || !value_is_v<DeltaV, float> || !value_is_v<GQV, float> || !value_is_v<GKV, float>) {
      return false;
    } else {
      if (!covered(q, mask, cuda::AttnDir::bwd)) return false;
      if (deterministic && !mask.is_dense()) {
        note_portable_fallback("a deterministic backward with key windows or packed documents");
        return false;
      }
      if (!unit_last(q) || !unit_last(k) || !unit_last(v) || !unit_last(dout) || !unit_last(dq) ||
          !unit_last(dk) || !unit_last(dv))
        return false;
      cuda::AttnBwdParams p{};
      p.q     = tensor_rows<const void*>(q);
      p.k     = tensor_rows<const void*>(k);
      p.v     = tensor_rows<const void*>(v);
      p.dout  = tensor_rows<const void*>(dout);
      p.lse   = stat_rows<const float*>(lse);
      p.delta = stat_rows<const float*>(delta);
      p.dq    = tensor_rows<float*>(dq);
      p.dk    = tensor_rows<float*>(dk);
      p.dv    = tensor_rows<float*>(dv);
      p.batch    = int(q.extent(0));
      p.seqlen_q = int(q.extent(1));
      p.heads    = int(q.extent(2));
      p.head_dim = int(q.extent(3));
      p.seqlen_k = int(k.extent(1));
      p.heads_kv = int(k.extent(2));
      p.scale    = float(scale);
      p.mask     = mask_params(mask);
      p.dtype    = dtype_of<T>();
      p.deterministic = deterministic ? 1 : 0;
      return cuda::run_attn_bwd(p, exec.cuda_stream());
    }
  }
};

}  // namespace DistAttn::Impl

#endif  // DISTATTN_ENABLE_CUDA_KERNELS && KOKKOS_ENABLE_CUDA
