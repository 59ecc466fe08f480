#pragma once
// Tile tables of the CUDA-tuned attention kernels (flash-attention tile_size.h
// style): one commented entry per (direction, head_dim). Every kernel is a
// template over one of these structs; the instantiation TUs pick the entry.
//
// Vocabulary: warps own 16-row (m16n8k16) or 32-row blocks of the "M" side of their
// products; a 32-row block feeds every B fragment it loads from shared memory to two
// mma, which is what bounds these kernels (~128 B/clk/SM of ldmatrix). Registers are
// the other limit: 255 per thread, 64K per SM; every entry below is spill-free or
// says how many bytes ptxas spills (sm_90a, nvcc 13.0).

namespace DistAttn::Impl::cuda {

/// Forward: a CTA owns kBlockM query rows of one (batch, head) and walks K/V
/// tiles of kBlockN keys, double-buffered in shared memory (cp.async).
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kMinBlocks_, bool kRebuildAddr_ = false>
struct FwdTile {
  static constexpr int kHeadDim  = kHeadDim_;
  static constexpr int kBlockM   = kBlockM_;
  static constexpr int kBlockN   = kBlockN_;
  static constexpr int kNWarps   = kNWarps_;
  static constexpr int kNThreads = 32 * kNWarps_;
  static constexpr int kMinBlocks = kMinBlocks_;  // __launch_bounds__ occupancy hint
  // Rebuild the per-thread addresses (ldmatrix lane parts, cp.async offsets) inside
  // the key loop from an opaque copy of the thread index instead of letting them be
  // hoisted and kept live across it: frees registers (the 64-key d = 128 tile goes
  // from 144 B of spill to 8 B) for a few integer ops per tile. Not a free win:
  // NOTES.md runs 4 and 5 measured it slower for the d = 64 tile, hence per entry.
  static constexpr bool kRebuildAddr = kRebuildAddr_;
  // 16 rows per warp: Q fragments stay in registers. 32 rows per warp (FA2's
  // layout): Q is re-read from shared memory, but every K/V fragment feeds two
  // products, so shared-memory bytes per mma drop from 256 to 160.
  static constexpr int kRowsPerWarp = kBlockM / kNWarps;
  static_assert(kRowsPerWarp == 16 || kRowsPerWarp == 32, "16 or 32 query rows per warp");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "mma k/n granularity");
  // Q tile + 2 stages of K + 2 stages of V, bf16/fp16.
  static constexpr int kSmemBytes = 2 * (kBlockM * kHeadDim + 4 * kBlockN * kHeadDim);
};

/// Backward: a CTA owns kBlockN keys of one (batch, KV head) and walks the query
/// tiles of every query head of its GQA group, kBlockM queries at a time. dK and
/// dV stay in registers (fp32) for the whole CTA, so they are written once and
/// already reduced over the group; dQ is accumulated with fp32 atomics (red.add).
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kMinBlocks_, int kDqRows_ = 16>
struct BwdTile {
  static constexpr int kHeadDim  = kHeadDim_;
  static constexpr int kBlockM   = kBlockM_;  // queries per inner tile
  static constexpr int kBlockN   = kBlockN_;  // keys per CTA
  static constexpr int kNWarps   = kNWarps_;
  static constexpr int kNThreads = 32 * kNWarps_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr bool kPdSInSmem = false;  // -> attn_bwd_sm90.cuh
  static_assert(kBlockN == 16 * kNWarps, "one 16-key mma block per warp");
  // dQ product (kBlockM x d): warps tile it as (kBlockM / kDqRows) query blocks x
  // kDqSplit slices of head_dim. 32-row blocks reuse every K fragment twice.
  static constexpr int kDqRows  = kDqRows_;
  static_assert(kDqRows % 16 == 0 && kBlockM % kDqRows == 0 && kNWarps % (kBlockM / kDqRows) == 0, "dQ warp grid");
  static constexpr int kDqSplit = kNWarps / (kBlockM / kDqRows);
  static constexpr int kDqCols  = kHeadDim / kDqSplit;
  static_assert(kDqCols % 16 == 0, "dQ slice granularity");
  // K, V (once) + 2 stages of Q and dO + dS^T tile (16-bit) + 2 stages of
  // (LSE, Delta, key limit) per query.
  static constexpr int kSmemBytes =
      2 * (2 * kBlockN * kHeadDim + 4 * kBlockM * kHeadDim + kBlockN * kBlockM) + 2 * 3 * 4 * kBlockM;
};

/// Backward, FA2's sm80 layout (attn_bwd_ps_sm90.cuh): same CTA work as BwdTile, but
/// S/dP, dK/dV and dQ each get their own warp grid of 32-row blocks, with P and dS
/// passed through shared memory. 8 warps for 64 queries x 128 keys.
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kMinBlocks_>
struct BwdTilePS {
  static constexpr int kHeadDim   = kHeadDim_;
  static constexpr int kBlockM    = kBlockM_;
  static constexpr int kBlockN    = kBlockN_;
  static constexpr int kNWarps    = kNWarps_;
  static constexpr int kNThreads  = 32 * kNWarps_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr bool kPdSInSmem = true;  // -> attn_bwd_ps_sm90.cuh
  static_assert((kBlockM / 32) * (kBlockN / 32) == kNWarps, "phase-1 grid: one 32x32 block per warp");
  // K, V + 2 stages of Q and dO + P and dS tiles + 2 stages of (LSE, Delta, limit).
  static constexpr int kSmemBytes =
      2 * (2 * kBlockN * kHeadDim + 4 * kBlockM * kHeadDim + 2 * kBlockM * kBlockN) + 2 * 3 * 4 * kBlockM;
};

// ---------------------------------------------------------------------------------
// The tables. Kernel-only numbers on an H200 (docs/kernels/NOTES.md, run 2, B=1,
// S=32K, causal, bf16; d=128 with H=32, d=64 with H=64).
//
// DISTATTN_CUDA_TILES_ALT selects the runner-up table. It exists so that one device
// run can put two candidate tables through the unit tests (a second test binary
// built with -DDISTATTN_CUDA_TILES_ALT); the library is never built with it.
#if !defined(DISTATTN_CUDA_TILES_ALT)

// fwd d = 128: FA2's 32 rows per warp, 4 warps, 2 CTAs per SM. Q is re-read from
// shared memory each tile, but every K/V fragment feeds two row blocks (192 B of
// ldmatrix per mma instead of 256). 32-key tiles keep it spill-free at 254 regs; the
// 64-key version spills 144 B and ran 303 TF/s. 322.7 TF/s (vs 292.1 for 16-row
// warps with Q in registers, 268.3 for 8 x 16-row warps in one CTA).
// With the addresses rebuilt per tile (kRebuildAddr) the 64-key tile spills 8 B
// instead of 144 and is the fastest: 335.4 TF/s (NOTES.md run 5; same run: 322.9 for
// the 32-key tile above, 326.2 for the spill-free rebuilt 48-key one).
using FwdTileD128 = FwdTile<128, 128, 64, 4, 2, true>;
// fwd d = 64: 32 rows per warp, 64-key tiles, 238 regs, 2 CTAs/SM: 302.5 TF/s (vs
// 286.7 for 8 x 16-row warps). Rebuilt addresses (220 regs) ran 282.7 against 302.6
// in the same run (NOTES.md run 5): off here.
using FwdTileD64 = FwdTile<64, 128, 64, 4, 2>;
// bwd: FA2's layout (P, dS through shared memory, 32-row warp blocks in every
// product): ~230 B of ldmatrix per mma instead of ~290. 128 keys per CTA halve the
// Q/dO re-reads and dQ atomics against 64 (the 64-key, 2-CTA variant ran 220).
// d = 128: 178 KB smem, 255 regs (48 B spill): 269.9 TF/s (vs 246.4 / 239.4 for the
// 16-key-warp kernel with 32 / 16-row dQ tiles). d = 64: 219.5 (vs 218.8).
using BwdTileD128 = BwdTilePS<128, 64, 128, 8, 1>;
using BwdTileD64  = BwdTilePS<64, 64, 128, 8, 1>;

#else

// Runner-up: 16-row warps with Q in registers (fwd), 16-key warps with 32 x 32 dQ
// warp tiles (bwd); unit-tested in the same device runs.
using FwdTileD128 = FwdTile<128, 64, 64, 4, 2>;
using FwdTileD64  = FwdTile<64, 128, 64, 8, 2>;
using BwdTileD128 = BwdTile<128, 64, 128, 8, 1, 32>;
using BwdTileD64  = BwdTile<64, 64, 128, 8, 1, 32>;

#endif

}  // namespace DistAttn::Impl::cuda
