// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer/layer_weights.hpp
/// The weights of one decoder layer (or their gradients) in one flat allocation,
/// with a named [in, out] matrix (or vector) view per weight. One buffer means
/// one all-reduce of the gradients and one SGD update per layer.

#include <DistAttn/core/error.hpp>
#include <DistAttn/layer/decoder_config.hpp>
#include <DistAttn/layer/linear.hpp>
#include <DistAttn/layer/rmsnorm.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace DistAttn {

/// Index of each weight in LayerWeights::views(); names are what errors print.
enum class Weight : int { Q = 0, K, V, O, Gate, Up, Down, NormAttn, NormMlp };
inline constexpr int kNumWeights = 9;

inline const char* to_string(Weight w) {
  static constexpr const char* names[kNumWeights] = {"wq",     "wk",   "wv",        "wo",      "w_gate",
                                                     "w_up",   "w_down", "norm_attn", "norm_mlp"};
  return names[int(w)];
}

/// [rows, cols] of a weight; cols == 0 marks a vector of `rows` entries.
struct WeightShape {
  std::int64_t rows = 0, cols = 0;
  std::int64_t size() const { return cols == 0 ? rows : rows * cols; }
};

inline WeightShape weight_shape(const DecoderConfig& c, Weight w) {
  switch (w) {
    case Weight::Q: return {c.hidden, c.q_width()};
    case Weight::K:
    case Weight::V: return {c.hidden, c.kv_width()};
    case Weight::O: return {c.q_width(), c.hidden};
    case Weight::Gate:
    case Weight::Up: return {c.hidden, c.mlp_hidden};
    case Weight::Down: return {c.mlp_hidden, c.hidden};
    case Weight::NormAttn:
    case Weight::NormMlp: return {c.hidden, 0};
  }
  return {};
}

template <class T, class Mem>
class LayerWeights {
 public:
  using UMatrix = Kokkos::View<T**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using UVector = Kokkos::View<T*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  LayerWeights() = default;
  /// Zero-filled weights of `cfg`'s shapes.
  LayerWeights(const DecoderConfig& cfg, const std::string& label) : cfg_(cfg) {
    cfg.validate("DistAttn::LayerWeights");
    std::int64_t total = 0;
    for (int i = 0; i < kNumWeights; ++i) {
      offset_[i] = total;
      total += weight_shape(cfg, Weight(i)).size();
    }
    flat_ = Vector<T, Mem>(label, std::size_t(total));
  }

  const DecoderConfig& config() const { return cfg_; }
  /// Every weight back to back, in Weight order.
  const Vector<T, Mem>& flat() const { return flat_; }
  std::int64_t size() const { return std::int64_t(flat_.extent(0)); }

  UMatrix matrix(Weight w) const {
    const WeightShape s = weight_shape(cfg_, w);
    return UMatrix(flat_.data() + offset_[int(w)], s.rows, s.cols);
  }
  UVector vector(Weight w) const {
    return UVector(flat_.data() + offset_[int(w)], weight_shape(cfg_, w).rows);
  }
  /// Any weight as a flat range of the buffer.
  UVector span(Weight w) const { return UVector(flat_.data() + offset_[int(w)], weight_shape(cfg_, w).size()); }

  /// Copies `src` (a [rows, cols] matrix, or a vector for the norms, any layout
  /// and memory space) into weight w; throws InvalidArgument naming the weight
  /// when the extents differ from the layer's.
  template <class SrcV>
  void assign(Weight w, const SrcV& src) const {
    constexpr const char* where  = "DistAttn::LayerWeights::assign";
    const WeightShape s          = weight_shape(cfg_, w);
    const bool is_vector         = s.cols == 0;
    const std::int64_t got_rows  = std::int64_t(src.extent(0));
    const std::int64_t got_cols  = int(SrcV::rank) == 2 ? std::int64_t(src.extent(1)) : 0;
    DISTATTN_REQUIRE(int(SrcV::rank) == (is_vector ? 1 : 2) && got_rows == s.rows && got_cols == s.cols, where,
                     "weight '" << to_string(w) << "' must be " << shape_text(s) << ", got "
                                << shape_text({got_rows, got_cols}) << " (rank " << int(SrcV::rank) << ")");
    // Copied into this memory space first, then across layouts within it.
    auto tmp = Kokkos::create_mirror_view_and_copy(Mem(), src);
    if constexpr (int(SrcV::rank) == 2)
      Kokkos::deep_copy(matrix(w), tmp);
    else
      Kokkos::deep_copy(vector(w), tmp);
  }

  /// Copies every weight of `src`; its configuration must match this one's.
  void assign(const LayerWeights& src) const {
    constexpr const char* where = "DistAttn::LayerWeights::assign";
    for (int i = 0; i < kNumWeights; ++i) {
      const WeightShape a = weight_shape(cfg_, Weight(i)), b = weight_shape(src.cfg_, Weight(i));
      DISTATTN_REQUIRE(a.rows == b.rows && a.cols == b.cols, where,
                       "weight '" << to_string(Weight(i)) << "' must be " << shape_text(a) << ", got "
                                  << shape_text(b));
    }
    Kokkos::deep_copy(flat_, src.flat_);
  }

  static std::string shape_text(const WeightShape& s) {
    return s.cols == 0 ? "[" + std::to_string(s.rows) + "]"
                       : "[" + std::to_string(s.rows) + ", " + std::to_string(s.cols) + "]";
  }

 private:
  DecoderConfig cfg_{};
  std::array<std::int64_t, kNumWeights> offset_{};
  Vector<T, Mem> flat_;
};

}  // namespace DistAttn
