// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file schedule/ring_layout.hpp
/// Which global token positions each rank's local rows hold under a ring kind:
/// the one definition the executor, the driver and the tests use.
///
///   Vanilla, Balanced: rank x holds chunk x, positions [x c, (x+1) c).
///   Zigzag: the sequence is cut into 2P half-chunks of c/2 tokens; rank x holds
///           half-chunk x in local rows [0, c/2) and half-chunk 2P-1-x in [c/2, c).
///
/// A rank's rows are `pieces()` affine pieces of `piece_len()` rows each; piece a
/// of rank x is block `block_of(x, a)` of the sequence cut into blocks of that length.
/// A ComputeTask between two ranks' rows is therefore up to pieces()^2 piece blocks;
/// `blocks()` lists the ones the kernels compute, each with its mask.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/schedule/ring_types.hpp>

#include <cstdint>
#include <vector>

namespace DistAttn {

/// Global position of local row i of rank x for P ranks of c tokens (the one
/// formula; callable in kernels, e.g. for rotary embeddings).
KOKKOS_INLINE_FUNCTION std::int64_t ring_position(RingKind kind, int P, std::int64_t c, int x, std::int64_t i) {
  if (kind != RingKind::Zigzag) return std::int64_t(x) * c + i;
  const std::int64_t h = c / 2, block = i < h ? x : 2 * std::int64_t(P) - 1 - x;
  return block * h + i % h;
}

/// Query piece q_piece of a task's query rows against key piece k_piece of its key
/// rows, under `mask` (global positions).
struct PieceBlock {
  int q_piece = 0, k_piece = 0;
  Mask mask;
};

/// How many affine pieces a rank's rows are under `kind` (zigzag: its two halves).
inline int ring_pieces(RingKind kind) { return kind == RingKind::Zigzag ? 2 : 1; }

class RingLayout {
 public:
  RingLayout(int ranks, std::int64_t chunk, RingKind kind) : P_(ranks), c_(chunk), kind_(kind) {
    DISTATTN_REQUIRE(ranks >= 1 && chunk >= 1, "DistAttn::RingLayout",
                     "ranks (" << ranks << ") and chunk (" << chunk << ") must be >= 1");
    DISTATTN_REQUIRE(kind != RingKind::Zigzag || chunk % 2 == 0, "DistAttn::RingLayout",
                     "the zigzag assignment splits each rank's chunk in two halves: chunk ("
                         << chunk << ") must be even; SequencePadding(N, P, TokenLayout::Kind::Zigzag) "
                                     "(DistAttn/schedule/padding.hpp) pads any N to a multiple of 2P");
  }

  int ranks() const { return P_; }
  std::int64_t chunk() const { return c_; }
  RingKind kind() const { return kind_; }
  /// Tokens of all ranks together (the padded sequence length).
  std::int64_t tokens() const { return std::int64_t(P_) * c_; }

  int pieces() const { return ring_pieces(kind_); }
  std::int64_t piece_len() const { return c_ / pieces(); }
  /// Index of rank x's piece a in the sequence cut into piece_len() blocks.
  std::int64_t block_of(int x, int a) const {
    return kind_ == RingKind::Zigzag ? (a == 0 ? x : 2 * std::int64_t(P_) - 1 - x) : x;
  }
  /// Global positions of piece a of rank x.
  PositionMap piece(int x, int a) const { return PositionMap{block_of(x, a) * piece_len(), 1}; }
  /// The piece blocks of `task` the kernels compute, with their masks: `rule` decides
  /// which pieces to skip, `kernel_rule` (the same mask, its documents where the
  /// kernels read them) is what they run under. One whole block per task when a rank
  /// holds one piece (none when the mask empties it); zigzag's half blocks each
  /// skipped, unmasked or masked as their relation says.
  std::vector<PieceBlock> blocks(const ComputeTask& task, const Mask& rule, const Mask& kernel_rule) const {
    if (pieces() == 1) {
      // A window or documents can empty a whole block (dense schedules emit none).
      if (!rule.is_dense() && task.mask(c_, rule).relation(0, c_, 0, c_) == Relation::Skip) return {};
      return {PieceBlock{0, 0, task.mask(c_, kernel_rule)}};
    }
    std::vector<PieceBlock> out;
    const std::int64_t h = piece_len();
    for (int a = 0; a < pieces(); ++a)
      for (int b = 0; b < pieces(); ++b) {
        const PositionMap qp = piece(task.q_chunk, a), kp = piece(task.k_chunk, b);
        switch (rule.on_block(qp, kp).relation(0, h, 0, h)) {
          case Relation::Skip: break;
          case Relation::Full: out.push_back(PieceBlock{a, b, Mask::none()}); break;
          case Relation::Partial: out.push_back(PieceBlock{a, b, kernel_rule.on_block(qp, kp)}); break;
        }
      }
    return out;
  }
  /// Global position of local row i of rank x.
  std::int64_t position(int x, std::int64_t i) const { return ring_position(kind_, P_, c_, x, i); }

 private:
  int P_;
  std::int64_t c_;
  RingKind kind_;
};

}  // namespace DistAttn
