// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring/impl/ring_blocks.hpp
/// The piece blocks a ring task computes and the rows of its operands they read,
/// when K/V arrived as part of a chunk: a masked schedule sends only the key rows
/// the receiving block's allowed pairs reach, so each block's keys narrow to the
/// rows that came, with the mask moved along (the rest of the slot holds stale data).

#include <DistAttn/exec/impl/row_pieces.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/schedule/ring_types.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace DistAttn::Impl {

/// The rows of a chunk of `chunk` tokens that a transfer carries.
inline RowSpan travelling_rows(const Transfer& tr, std::int64_t chunk) {
  return tr.whole() ? RowSpan{0, chunk} : RowSpan{tr.rows_begin, tr.rows_end};
}

/// f(block, q_rows, k_rows) for the task's blocks under `rule` (its documents on the
/// host; `kernel_rule` the same mask where the kernels read it). `in`: how the
/// task's K/V arrived (whole, or rows of the chunk).
template <class F>
void for_each_ring_block(const RingLayout& layout, const ComputeTask& task, const Transfer& in, const Mask& rule,
                         const Mask& kernel_rule, F&& f) {
  const auto blocks = layout.blocks(task, rule, kernel_rule);
  if (task.own_kv || in.whole()) {
    for_each_piece_block(layout.pieces(), layout.piece_len(), blocks, std::forward<F>(f));
    return;
  }
  const std::int64_t len = layout.piece_len();
  for (PieceBlock blk : blocks) {
    const std::int64_t begin = std::max(in.rows_begin, blk.k_piece * len);
    const std::int64_t end   = std::min(in.rows_end, (blk.k_piece + 1) * len);
    if (begin >= end) continue;  // the schedule's rows hold every key the block allows
    blk.mask.k.offset += (begin - blk.k_piece * len) * blk.mask.k.stride;
    const RowSpan keys{begin, end};
    if (layout.pieces() == 1) f(blk, AllRows{}, keys);
    else f(blk, RowPiece{blk.q_piece, len}, keys);
  }
}

}  // namespace DistAttn::Impl
