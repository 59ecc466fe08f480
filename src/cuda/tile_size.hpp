// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Tile tables of the CUDA-tuned attention kernels (flash-attention tile_size.h
// style): one commented entry per (direction, head_dim). Every kernel is a
// template over one of these structs; the instantiation TUs pick the entry.
//
// Vocabulary: the mma.sync entries (FwdTile, BwdTilePS) have warps own
// 16-row (m16n8k16) or 32-row blocks of the "M" side of their products; a 32-row
// block feeds every B fragment it loads from shared memory to two mma, which is
// what bounds those kernels (~128 B/clk/SM of ldmatrix). The wgmma entries
// (WsFwdTile, WgBwdTile, WsBwdTile) have warpgroups of 128 threads own 64-row blocks and read
// both operands from shared memory through descriptors (no ldmatrix). Registers are
// the other limit: 255 per thread, 64K per SM; every entry below is spill-free or
// says how many bytes ptxas spills (nvcc 13.0; the mma.sync entries as measured
// for sm_90a, before they became the sm_80 table).

namespace DistAttn::Impl::cuda {

/// Forward: a CTA owns kBlockM query rows of one (batch, head) and walks K/V
/// tiles of kBlockN keys through one shared-memory stage each (cp.async, FA2's
/// pipeline: V lands under Q K^T, the next K under the softmax and P V).
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kMinBlocks_, bool kEarlyV_ = false>
struct FwdTile {
  static constexpr int kHeadDim  = kHeadDim_;
  static constexpr int kBlockM   = kBlockM_;
  static constexpr int kBlockN   = kBlockN_;
  static constexpr int kNWarps   = kNWarps_;
  static constexpr int kNThreads = 32 * kNWarps_;
  static constexpr int kMinBlocks = kMinBlocks_;  // __launch_bounds__ occupancy hint
  // Wait for V (and issue the next K) before the softmax, and rescale O every tile
  // without the warp vote (attn_fwd_sm80.cuh), so that the softmax, the rescale and
  // O += P V are one block the compiler interleaves. Needs registers for both at once:
  // +4-5 % at d = 64; at d = 128 it lost 3-5 % to spills (NOTES.md run 40) and still
  // spills 76 B with one stage (round 12).
  static constexpr bool kEarlyV = kEarlyV_;
  static constexpr bool kWgmma = false;  // -> attn_fwd_sm80.cuh
  static constexpr bool kWs    = false;
  // CTAs launched heaviest query tile first over groups of 4 heads (tile_order.cuh).
  // Against one head at a time, forced sm80 on an H100, causal, 8K / 16K / 32K
  // (NOTES.md round 12): d = 128 +10-11 / +4 / 0 %, d = 64 +4-5 / +1-2 / 0 %; every
  // head at once (32) lost 3 % at 32K, where the CTAs running together read more K/V
  // than L2 holds.
  static constexpr int kHeadGroup = 4;
  // 16 rows per warp: Q fragments stay in registers. 32 rows per warp (FA2's
  // layout): Q is re-read from shared memory, but every K/V fragment feeds two
  // products, so shared-memory bytes per mma drop from 256 to 160.
  static constexpr int kRowsPerWarp = kBlockM / kNWarps;
  static_assert(kRowsPerWarp == 16 || kRowsPerWarp == 32, "16 or 32 query rows per warp");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "mma k/n granularity");
  // Q tile + one K and one V stage, bf16/fp16.
  static constexpr int kSmemBytes = 2 * (kBlockM * kHeadDim + 2 * kBlockN * kHeadDim);
};

/// Backward, FA2's sm80 layout (attn_bwd_sm80.cuh): a CTA owns kBlockN keys of one
/// (batch, KV head) and walks the query tiles of every query head of its GQA group,
/// kBlockM queries at a time; dK and dV stay in registers (fp32), dQ is accumulated
/// with fp32 atomics (red.add). S/dP, dK/dV and dQ each get their own warp grid of
/// 32-row blocks, with P and dS passed through shared memory: one warp per 32 x 32
/// block of S (8 warps for 64 queries x 128 keys, 4 for 64 x 64).
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kMinBlocks_>
struct BwdTilePS {
  static constexpr int kHeadDim   = kHeadDim_;
  static constexpr int kBlockM    = kBlockM_;
  static constexpr int kBlockN    = kBlockN_;
  static constexpr int kNWarps    = kNWarps_;
  static constexpr int kNThreads  = 32 * kNWarps_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr bool kWgmma     = false;
  static constexpr bool kWs        = false;
  // CTAs launched heaviest key tile first, one head at a time (tile_order.cuh):
  // groups of 2-8 heads moved the d = 128 backward by +1-5 % at 8K and -1 % at 16K /
  // 32K, and d = 64 by less than 1 % (NOTES.md round 12).
  static constexpr int kHeadGroup = 1;
  static_assert((kBlockM / 32) * (kBlockN / 32) == kNWarps, "phase-1 grid: one 32x32 block per warp");
  // K, V + 2 stages of Q and dO + P and dS tiles + 2 stages of (LSE, Delta, limit).
  static constexpr int kSmemBytes =
      2 * (2 * kBlockN * kHeadDim + 4 * kBlockM * kHeadDim + 2 * kBlockM * kBlockN) + 2 * 3 * 4 * kBlockM;
};

/// Forward, warp-specialized (attn_fwd_ws_sm90.cuh): a producer warpgroup (Q once,
/// then K and V per kBlockN-key tile by TMA, in separate pipelines of 2 K and 2 V
/// stages) and kConsumerWGs consumer warpgroups of 64 query rows that run FA3's
/// intra-warpgroup overlap (S_i = Q K_i^T and O += P_{i-1} V_{i-1} issued together,
/// the softmax of S_i under them) inside turns that pass from one warpgroup to the
/// next. Needs TMA descriptors of Q, K and V; where the driver cannot make them the
/// launch declines and the portable kernel runs. Registers: 128 x kProducerRegs +
/// 128 x kConsumerWGs x kConsumerRegs <= 64K, each a multiple of 8.
template <int kHeadDim_, int kConsumerWGs_ = 2, int kBlockN_ = 128>
struct WsFwdTile {
  static constexpr int kHeadDim     = kHeadDim_;
  static constexpr int kConsumerWGs = kConsumerWGs_;
  static constexpr int kBlockM      = 64 * kConsumerWGs;
  // Keys per tile: 128 where Q and four 128-key stages fit shared memory (d <= 128);
  // above that the tile shrinks until they do (d = 192: 112, d = 256: 80, FA3's sizes),
  // which also leaves the registers of S and P beside the wider O.
  static constexpr int kBlockN      = kBlockN_;
  // 2 + 2 stages: 3 + 3 and 3 K + 2 V measured 1-8% slower at d = 128 (NOTES.md run 31),
  // and 2-9 % slower or within the spread at d = 64 with three warpgroups (run 78).
  static constexpr int kStagesK   = 2;
  static constexpr int kStagesV   = 2;
  static constexpr int kNThreads  = 128 * (1 + kConsumerWGs);
  static constexpr int kMinBlocks = 1;
  static constexpr bool kWgmma    = true;
  static constexpr bool kWs       = true;
  // Causal: CTAs launched heaviest query tile first over groups of 4 heads
  // (tile_order.cuh): +3 % at 8K and 0-1 % at 16K / 32K (d = 128), +1 % at 8K (d = 64),
  // against one head at a time (NOTES.md round 12). Without a causal mask the kernel
  // goes one head at a time (NOTES.md round 14).
  static constexpr int kHeadGroup = 4;
  static constexpr int kProducerRegs = 24;
  // Three consumers leave 160 registers each: enough at d = 64 (S 64 + O 32 + P 32),
  // not at d = 128 (O alone is 64). Two leave 240: per thread O is d / 2 floats, S
  // kBlockN / 2 and P kBlockN / 4 (d = 256, 80 keys: 128 + 40 + 20).
  static constexpr int kConsumerRegs = kConsumerWGs == 2 ? 240 : 160;
  static_assert(kConsumerWGs == 2 || (kConsumerWGs == 3 && kHeadDim == 64), "2 consumer warpgroups, or 3 at d = 64");
  static_assert(128 * kProducerRegs + 128 * kConsumerWGs * kConsumerRegs <= 65536, "register file");
  // O += P V is one m64n{d} product per k step (wgmma.cuh has n64, n128, n192, n256);
  // S = Q K^T one m64n{kBlockN} (n64, n80, n112, n128). Tiles are 64-column panels of
  // 128-byte swizzle, so d is a multiple of 64; TMA boxes hold at most 256 rows.
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 192 || kHeadDim == 256, "head_dim of a tile");
  static_assert(kBlockN == 64 || kBlockN == 80 || kBlockN == 112 || kBlockN == 128, "key tile of a wgmma shape");
  // Q + the K and V stages, 16-bit, + 1 KB of alignment slack + the mbarriers (Q,
  // full and empty per stage).
  static constexpr int kSmemBytes =
      2 * (kBlockM * kHeadDim + (kStagesK + kStagesV) * kBlockN * kHeadDim) + 1024 + 8 * (1 + 2 * (kStagesK + kStagesV));
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
};

/// Backward on warpgroup MMA (attn_bwd_wgmma_sm90.cuh): two warpgroups of 64 keys
/// (kBlockN = 128) walk query tiles of kBlockM = 64; d = 64 or 128. The
/// warp-specialized kernel's fallback where TMA cannot describe the tensors.
template <int kHeadDim_, int kBlockM_, int kBlockN_>
struct WgBwdTile {
  static constexpr int kHeadDim   = kHeadDim_;
  static constexpr int kBlockM    = kBlockM_;
  static constexpr int kBlockN    = kBlockN_;
  static constexpr int kNWarps    = 8;
  static constexpr int kNThreads  = 256;
  static constexpr int kMinBlocks = 1;
  static constexpr bool kWgmma     = true;
  static constexpr bool kWs        = false;
  // K, V + 2 stages of Q and dO + the dS^T tile (16-bit) + 2 stages of (LSE, Delta,
  // key limit) + 1 KB of alignment slack.
  static constexpr int kSmemBytes =
      2 * (2 * kBlockN * kHeadDim + 4 * kBlockM * kHeadDim + kBlockN * kBlockM) + 2 * 3 * 4 * kBlockM + 1024;
};

/// Backward, warp-specialized (attn_bwd_ws_sm90.cuh): a producer warpgroup (TMA
/// loads; dQ added to dq by bulk tensor reductions) and two consumer warpgroups of
/// 64 keys (kBlockN = 128) walking query tiles of kBlockM (64, or 128 at d = 64);
/// d = 64 or 128. Needs TMA descriptors of Q, dO, K, V and dq; otherwise the
/// launcher takes Fallback.
template <int kHeadDim_, bool kStmatrix_ = false, int kBlockM_ = 64>
struct WsBwdTile {
  static constexpr int kHeadDim   = kHeadDim_;
  // dS^T stored with stmatrix (4 x4 stores per thread and step) instead of 16
  // 4-byte st.shared: per entry, as it measured (NOTES.md runs 23-25).
  static constexpr bool kStmatrix = kStmatrix_;
  static constexpr int kBlockM    = kBlockM_;
  static constexpr int kBlockN    = 128;
  static constexpr int kNThreads  = 384;
  static constexpr bool kWgmma    = true;
  static constexpr bool kWs       = true;
  // CTAs launched heaviest key tile first, one head at a time (tile_order.cuh):
  // groups of 2-8 heads measured within the call-to-call spread at 8K / 16K and 2-7 %
  // slower at 32K (d = 128), where 4 heads' Q and dO (64 MB) no longer fit L2
  // (NOTES.md round 12).
  static constexpr int kHeadGroup = 1;
  using Fallback = WgBwdTile<kHeadDim_, 64, 128>;
  // dS^T stages: at d = 128 a warpgroup's dQ reads the other's dS^T rows, so a second
  // stage lets it write the next step's while those are read; at d = 64 each
  // warpgroup reads only its own rows, after its own dQ product has completed, and
  // 128-query tiles need the room of the second stage.
  static constexpr int kDsStages = kBlockM == 128 ? 1 : 2;
  // K, V + 2 stages of Q and dO + kDsStages of dS^T (16-bit) + 2 fp32 kBlockM x 64 dQ
  // tiles + 2 stages of (LSE, Delta, key range ends) + 5 mbarriers + 1 KB alignment slack.
  static constexpr int kSmemBytes =
      2 * (2 * kBlockN * kHeadDim + 4 * kBlockM * kHeadDim + kDsStages * kBlockN * kBlockM) + 2 * kBlockM * 64 * 4 +
      2 * 4 * 4 * kBlockM + 64 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
};

// ---------------------------------------------------------------------------------
// The tables, one per target (src/CMakeLists.txt compiles each for its own -gencode;
// attn_dispatch.cu picks one by the device's compute capability). Kernel-only
// numbers on an H200 (docs/kernels/NOTES.md, B=1, S=32K, causal, bf16; d=128 with
// H=32, d=64 with H=64), run given per entry.

/// Hopper (sm_90a): warpgroup MMA (wgmma) and TMA.
namespace sm90 {
// fwd: warp-specialized, 128-key tiles, 2 K + 2 V stages, the intra-warpgroup overlap
// inside the ping-pong (NOTES.md run 31, causal bf16, S = 8K / 16K / 32K): d = 128
// 609.2 / 618.4 / 603.0 TF/s against 524.2 / 527.2 / 540.1 for the TMA ping-pong
// kernel it replaced; d = 64 (H = 64) 389.3 / 411.1 / 417.7 against 361.0 / 397.9 /
// 394.7 (a 64-key tile: 333.3 / 357.0 / 370.3).
using FwdTileD128 = WsFwdTile<128>;
// d = 64: three consumer warpgroups, 192-row tiles (FA3's d = 64 shape). Kernel-only,
// H200, H = 64, causal 8K / 16K / 32K (NOTES.md runs 67-68): 473.0-476.6 / 477.3-496.7 /
// 489.7-494.7 TF/s against 395.7-399.9 / 413.8-414.8 / 405.8-412.9 for two warpgroups
// in the same calls; non-causal 515.5-525.9 / 496.5-525.4 / 482.2-483.2 against
// 419.2-420.1 / 420.2-424.4 / 428.9-429.2. Each softmax hides under two other
// warpgroups' products instead of one.
using FwdTileD64  = WsFwdTile<64, 3>;
// d = 192: two consumer warpgroups, 112-key tiles (FA3's d = 192 shape). Q 48 KB + 2 K
// + 2 V stages of 42 KB = 216 KB of the 227; per consumer thread O 96 + S 56 + P 28
// registers, no spill (nvcc 13.0). Not yet measured on a GPU (NOTES.md 2026-11-29).
using FwdTileD192 = WsFwdTile<192, 2, 112>;
// d = 256: two consumer warpgroups, 80-key tiles (FA3's d = 256 shape). Q 64 KB + 4
// stages of 40 KB = 224 KB; O 128 + S 40 + P 20 registers, no spill. attn_cuda_bench
// also times 64-key tiles (192 KB, S 32 + P 16). Not yet measured on a GPU (NOTES.md
// 2026-11-29).
using FwdTileD256 = WsFwdTile<256, 2, 80>;
// bwd: warp-specialized (producer warpgroup with TMA and the dQ bulk reductions, 2
// consumer warpgroups of 64 keys at 224 registers, no spill). S = 32K causal, NOTES.md
// run 30: d = 128 508.5 TF/s against 367.0 for the wgmma kernel before it (now its
// fallback); d = 64 362.8 against 248.7. dS^T by stmatrix for d = 128 only: over runs
// 23-25 +2.3% at S = 32K, +1.2% at 16K, -3.2% at 8K (pairs spread 3-4%); at d = 64 no
// consistent sign.
using BwdTileD128 = WsBwdTile<128, true>;
// d = 64: 128 queries per step (one dS^T stage), so each step's fixed work (barriers,
// the dQ hand-over, the statistics) is spread over twice the products. Kernel-only,
// H200, H = 64, 8K / 16K / 32K (NOTES.md run 70, two rounds): causal 372.9-381.0 /
// 384.6-388.0 / 391.6-393.5 TF/s against 338.1-342.9 / 344.5-347.5 / 352.5-354.9 for
// 64 queries; non-causal 394.3-394.4 / 399.9-400.8 / 404.0-404.8 against 358.2-358.3 /
// 362.0-362.2 / 361.7-364.1.
using BwdTileD64  = WsBwdTile<64, false, 128>;
}  // namespace sm90

/// Ampere/Ada (sm_80 SASS and compute_80 PTX; sm_86 and sm_89 run the sm_80 SASS,
/// Hopper JIT-compiles the PTX when DISTATTN_CUDA_ARCH_PATH=sm80 forces this table):
/// mma.sync, cp.async, ldmatrix. Tuned on an H200 when it was Hopper's table
/// (NOTES.md runs 1-5, built for sm_90a then). Shared memory per block must fit the
/// device's opt-in limit (A100 163 KB, sm_86 / sm_89 99 KB); an entry that does not
/// fit declines at launch and the portable kernel runs.
namespace sm80 {
// fwd d = 128: FA2's 32 rows per warp, 4 warps, 2 CTAs per SM. Q is re-read from
// shared memory each tile, but every K/V fragment feeds two row blocks (192 B of
// ldmatrix per mma instead of 256). 64 KB with one K and one V stage: two CTAs per SM
// on A100 as on Hopper (one on sm_86 / sm_89); the double-buffered 96 KB tile before
// it fitted one on A100. NOTES.md run 54 (H100, JIT-compiled PTX, causal, 8K / 16K /
// 32K): 346.3-349.1 / 361.6-365.4 / 358.1-370.8 TF/s, 1.12-1.16 / 1.06-1.08 / 1.02-1.05x
// FA2 in the same call; the round before ran 285.1 / 320.2 / 339.1 (run 49).
using FwdTileD128 = FwdTile<128, 128, 64, 4, 2>;
// fwd d = 64: 32 rows per warp, 64-key tiles, 2 CTAs/SM, 32 KB; O rescaled every tile
// (kEarlyV). Run 54 (same conditions): 312.9-315.1 / 323.4-324.5 / 319.2-332.7 TF/s
// against FA2's 277.7 / 306.2 / 319.5.
using FwdTileD64 = FwdTile<64, 128, 64, 4, 2, true>;
// bwd: FA2's layout (P, dS through shared memory, 32-row warp blocks in every
// product): ~230 B of ldmatrix per mma instead of ~290. dQ by scalar red.add into a
// fragment-order scratch, one 128-byte line per warp and red, KV heads in chunks under
// 256 MiB of scratch. Numbers: NOTES.md runs 43 and 46, H100, the compute_80 PTX
// JIT-compiled, S = 8K / 16K / 32K causal.
// d = 128: 64 queries x 128 keys, 8 warps, 161.5 KB (fits A100, not sm_86 / sm_89),
// 255 regs (44-52 B spill): 253.7 / 289.1 / 297.7 TF/s, 0.92-0.94x FA2. A 4-warp
// 64 x 64 tile would need 116 KB, so one CTA per SM: not tried.
// d = 64: 64 x 64, 4 warps, 67 KB and 242 regs, so 2 CTAs per SM (A100 and Hopper;
// one on sm_86 / sm_89): 234.0-239.6 / 255.6-256.5 / 262.6-265.0 TF/s, +12-15 % over
// the 8-warp 64 x 128 tile (208.3 / 230.6 / 237.5, 1 CTA per SM) in the same call;
// 128 x 64 with 8 warps: 175-178 / 192-193 / 199-200.
using BwdTileD128 = BwdTilePS<128, 64, 128, 8, 1>;
using BwdTileD64  = BwdTilePS<64, 64, 64, 4, 2>;
}  // namespace sm80

}  // namespace DistAttn::Impl::cuda
