#pragma once
/// @file attn_cuda_spec.hpp
/// CUDA-tuned specializations of the dispatch seam of impl/attn_spec.hpp
/// (STYLE §b3, level 2): on Kokkos::Cuda with bf16 or fp16 inputs, the building
/// block's forward and backward updates pack an AttnFwdParams / AttnBwdParams
/// (impl/cuda/attn_params.hpp) and call the kernels compiled into the library from
/// src/cuda/*.cu, on the caller's execution-space stream; the one-call forward may
/// also have the kernel write the final O and LSE directly. They decline (return
/// false, so the portable kernel runs) for anything the kernels do not cover:
/// head_dim not a multiple of 8 up to 128, non-fp32 accumulators, non-unit head_dim stride,
/// misaligned rows, a non-positive scale, or a device without a tuned target
/// (cuda::attn_cuda_arch(): sm_90 and sm_8x have one). The backward's
/// `deterministic` (AttnOptions::deterministic) asks for dq added in a fixed order;
/// it declines where the kernel cannot order them (no TMA descriptors, or the sm80
/// kernels, which add dQ with atomics).
///
/// Included by impl/attn_spec.hpp; empty unless the library was built with
/// DistAttn_ENABLE_CUDA_KERNELS (and so with a CUDA Kokkos).

#include <DistAttn/config.hpp>

#if DISTATTN_ENABLE_CUDA_KERNELS && defined(KOKKOS_ENABLE_CUDA)

#include <DistAttn/core/types.hpp>
#include <DistAttn/impl/cuda/attn_params.hpp>

#include <cstdint>
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
struct Strides {
  std::int64_t s[8] = {};
  explicit Strides(const V& v) {
    std::size_t tmp[8] = {};
    v.stride(tmp);
    for (int r = 0; r < int(V::rank); ++r) s[r] = std::int64_t(tmp[r]);
  }
};

template <class V>
bool unit_last(const V& v) {
  return Strides<V>(v).s[3] == 1;
}

template <class V, class T>
inline constexpr bool value_is_v = std::is_same<typename V::non_const_value_type, T>::value;

inline cuda::AttnMaskParams mask_params(const Mask& mask) {
  cuda::AttnMaskParams mp;
  mp.causal   = mask.kind == MaskKind::Causal ? 1 : 0;
  mp.q_offset = mask.q.offset;
  mp.q_stride = mask.q.stride;
  mp.k_offset = mask.k.offset;
  mp.k_stride = mask.k.stride;
  return mp;
}

/// The forward parameters both forward entry points share: q, k, v, shapes, scale,
/// mask, element type (the caller adds the state or the final outputs).
template <class T, class QV, class KV, class VV>
cuda::AttnFwdParams fwd_params(const QV& q, const KV& k, const VV& v, const Mask& mask, double scale) {
  const Strides<QV> sq(q);
  const Strides<KV> sk(k);
  const Strides<VV> sv(v);
  cuda::AttnFwdParams p{};
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.q_batch_stride = sq.s[0], p.q_row_stride = sq.s[1], p.q_head_stride = sq.s[2];
  p.k_batch_stride = sk.s[0], p.k_row_stride = sk.s[1], p.k_head_stride = sk.s[2];
  p.v_batch_stride = sv.s[0], p.v_row_stride = sv.s[1], p.v_head_stride = sv.s[2];
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
      if (!cuda::attn_head_dim_supported(int(q.extent(3)))) return false;
      if (!unit_last(q) || !unit_last(k) || !unit_last(v) || !unit_last(acc)) return false;
      const Strides<AccV> sa(acc);
      const Strides<StatV> sm(m), sl(l);
      cuda::AttnFwdParams p = fwd_params<T>(q, k, v, mask, scale);
      p.acc = acc.data();
      p.m   = m.data();
      p.l   = l.data();
      p.acc_batch_stride = sa.s[0], p.acc_row_stride = sa.s[1], p.acc_head_stride = sa.s[2];
      p.m_batch_stride = sm.s[0], p.m_head_stride = sm.s[1], p.m_row_stride = sm.s[2];
      p.l_batch_stride = sl.s[0], p.l_head_stride = sl.s[1], p.l_row_stride = sl.s[2];
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
      if (!cuda::attn_head_dim_supported(int(q.extent(3)))) return false;
      if (!unit_last(q) || !unit_last(k) || !unit_last(v) || !unit_last(o)) return false;
      if (o.data() == nullptr) return false;  // null o would mean update mode to the kernels
      const Strides<OV> so(o);
      const Strides<LseV> sl(lse);
      cuda::AttnFwdParams p = fwd_params<T>(q, k, v, mask, scale);  // acc, m, l stay null
      p.o   = o.data();
      p.lse = lse.data();
      p.o_batch_stride = so.s[0], p.o_row_stride = so.s[1], p.o_head_stride = so.s[2];
      p.lse_batch_stride = sl.s[0], p.lse_head_stride = sl.s[1], p.lse_row_stride = sl.s[2];
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
      if (!cuda::attn_head_dim_supported(int(q.extent(3)))) return false;
      if (!unit_last(q) || !unit_last(k) || !unit_last(v) || !unit_last(dout) || !unit_last(dq) ||
          !unit_last(dk) || !unit_last(dv))
        return false;
      const Strides<QV> sq(q);
      const Strides<KV> sk(k);
      const Strides<VV> sv(v);
      const Strides<DOV> sdo(dout);
      const Strides<LseV> sls(lse);
      const Strides<DeltaV> sdl(delta);
      const Strides<GQV> sdq(dq);
      const Strides<GKV> sdk(dk), sdv(dv);
      cuda::AttnBwdParams p{};
      p.q     = q.data();
      p.k     = k.data();
      p.v     = v.data();
      p.dout  = dout.data();
      p.lse   = lse.data();
      p.delta = delta.data();
      p.dq    = dq.data();
      p.dk    = dk.data();
      p.dv    = dv.data();
      p.q_batch_stride = sq.s[0], p.q_row_stride = sq.s[1], p.q_head_stride = sq.s[2];
      p.k_batch_stride = sk.s[0], p.k_row_stride = sk.s[1], p.k_head_stride = sk.s[2];
      p.v_batch_stride = sv.s[0], p.v_row_stride = sv.s[1], p.v_head_stride = sv.s[2];
      p.do_batch_stride = sdo.s[0], p.do_row_stride = sdo.s[1], p.do_head_stride = sdo.s[2];
      p.lse_batch_stride = sls.s[0], p.lse_head_stride = sls.s[1], p.lse_row_stride = sls.s[2];
      p.delta_batch_stride = sdl.s[0], p.delta_head_stride = sdl.s[1], p.delta_row_stride = sdl.s[2];
      p.dq_batch_stride = sdq.s[0], p.dq_row_stride = sdq.s[1], p.dq_head_stride = sdq.s[2];
      p.dk_batch_stride = sdk.s[0], p.dk_row_stride = sdk.s[1], p.dk_head_stride = sdk.s[2];
      p.dv_batch_stride = sdv.s[0], p.dv_row_stride = sdv.s[1], p.dv_head_stride = sdv.s[2];
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
