// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d/impl/grid2d_construction.hpp
/// The Attention2D executor's construction checks and its process grid: every
/// check a rank's arguments can fail runs inside the construction agreement
/// (comm/impl/entry_agreement.hpp), before the collective grid construction, so
/// a bad argument on one rank fails every rank instead of hanging the others.

#include <DistAttn/comm/impl/entry_agreement.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/grid_shape.hpp>
#include <DistAttn/exec/impl/executor_config.hpp>
#include <DistAttn/grid2d/grid2d_types.hpp>
#include <DistAttn/schedule/padding.hpp>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace DistAttn::Impl {

/// Padding is exact only where padded keys can never be attended to.
inline std::string grid2d_pad_advice(std::int64_t N, int P, bool causal) {
  const std::int64_t padded = SequencePadding::padded_length(N, P, TokenLayout::Kind::Cyclic);
  std::ostringstream os;
  if (causal)
    os << "Pad the sequence at its end to N=" << padded << " with DistAttn::SequencePadding(N, P, "
       << "TokenLayout::Kind::Cyclic) (DistAttn/schedule/padding.hpp): padded keys come after every real query, "
          "so real rows stay exact; it zeroes the padded rows, which need dO = 0 in backward";
  else
    os << "With full (non-causal) attention padding is not exact, because padded keys would enter every "
          "row: choose N divisible by P";
  return os.str();
}

/// The extents and options of an executor over P ranks.
inline void check_grid2d_sizes(int P, int batch, std::int64_t seq_len, int heads, int kv_heads, int head_dim,
                               const Grid2DOptions& opts) {
  constexpr const char* where = "DistAttn::Grid2DAttention";
  DISTATTN_REQUIRE(batch > 0 && heads > 0 && kv_heads > 0 && head_dim > 0, where,
                   "extents must be positive (batch=" << batch << ", heads=" << heads << ", kv_heads=" << kv_heads
                                                      << ", head_dim=" << head_dim << ")");
  check_heads(where, heads, kv_heads, opts.head_group);
  DISTATTN_REQUIRE(seq_len > 0 && seq_len % P == 0, where,
                   "sequence length N=" << seq_len << " must be a positive multiple of the number of ranks P=" << P
                                        << " (the cyclic layout gives every rank N/P tokens). "
                                        << grid2d_pad_advice(seq_len, P, opts.causal));
  DISTATTN_REQUIRE(seq_len / P <= std::int64_t(1) << 30, where, "N/P=" << seq_len / P << " is too large");
  check_shared_options(where, opts, seq_len);
}

template <class T>
std::vector<ConfigField> grid2d_fields(int batch, std::int64_t seq_len, int heads, int kv_heads, int head_dim,
                                       const Grid2DOptions& opts) {
  return executor_fields<T>(batch, {"seq_len", seq_len}, heads, kv_heads, head_dim, enum_field("variant", opts.variant),
                            opts);
}

/// Agrees the arguments over `world`, then builds the R x C grid collectively;
/// rows or cols 0 lets choose_grid_shape pick that side.
template <class T, class Grid, class Comm>
std::unique_ptr<Grid> make_agreed_grid(Comm& world, int rows, int cols, int batch, std::int64_t seq_len, int heads,
                                       int kv_heads, int head_dim, const Grid2DOptions& opts) {
  GridShape shape{rows, cols};
  agree_construction(world, "DistAttn::Grid2DAttention",
                     grid2d_fields<T>(batch, seq_len, heads, kv_heads, head_dim, opts) +
                         std::vector<ConfigField>{{"rows", rows}, {"cols", cols}},
                     [&] {
                       check_grid2d_sizes(world.size(), batch, seq_len, heads, kv_heads, head_dim, opts);
                       DISTATTN_REQUIRE(rows >= 0 && cols >= 0, "DistAttn::Grid2DAttention",
                                        "grid rows (R=" << rows << ") and cols (C=" << cols
                                                        << ") must be >= 0 (0 = choose)");
                       if (rows == 0 || cols == 0) shape = choose_grid_shape(world.size(), heads, kv_heads, shape);
                     });
  return std::make_unique<Grid>(world, shape.rows, shape.cols);
}

/// The same agreement for a grid the caller built.
template <class T, class Grid>
Grid& agreed_grid(Grid& grid, int batch, std::int64_t seq_len, int heads, int kv_heads, int head_dim,
                  const Grid2DOptions& opts) {
  agree_construction(grid.world(), "DistAttn::Grid2DAttention",
                     grid2d_fields<T>(batch, seq_len, heads, kv_heads, head_dim, opts), [&] {
                       check_grid2d_sizes(grid.dims().rows * grid.dims().cols, batch, seq_len, heads, kv_heads,
                                          head_dim, opts);
                     });
  return grid;
}

}  // namespace DistAttn::Impl
