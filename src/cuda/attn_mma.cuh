// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Raw PTX building blocks shared by the tuned attention kernels: mma.sync
// m16n8k16 (bf16/fp16 in, fp32 accumulate), ldmatrix (plain and transposed),
// cp.async with zero fill, ex2.approx, and the XOR-swizzled shared-memory tile
// layout. Only src/cuda/*.cu include this file.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA), lane = 4 * g + t:
//   A (16x16, row): a0 = (g, 2t..2t+1)  a1 = (g+8, 2t..)  a2 = (g, 8+2t..)  a3 = (g+8, 8+2t..)
//   B (16x8, col):  b0 = (k 2t..2t+1, n g)   b1 = (k 8+2t.., n g)
//   C (16x8):       c0,c1 = (g, 2t..2t+1)    c2,c3 = (g+8, 2t..2t+1)
// so the C fragments of two adjacent n8 tiles, packed to 16 bit, are exactly the A
// fragment of the next product (the FA2 register reuse of P).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace DistAttn::Impl::cuda::detail {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2   = 0.6931471805599453f;

template <class Elem>
struct ElemOps;

template <>
struct ElemOps<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct ElemOps<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// 16-byte global->shared copy; `valid == false` writes 16 zero bytes instead
/// (src-size 0), so padded rows never carry garbage (0 * NaN would poison P V).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_size));
}

/// 4-byte global->shared copy (statistics rows); zero-filled when !valid.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  const int src_size = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_size));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// Fire-and-forget add of an fp32 pair to global memory (no return value, so no
/// round trip, unlike atom); the vector form needs sm_90, so only the Hopper kernels
/// use it.
__device__ __forceinline__ void red_add_f32x2(float* addr, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(a), "f"(b) : "memory");
}

/// Fire-and-forget add of one fp32 value to global memory.
__device__ __forceinline__ void red_add_f32(float* addr, float a) {
  asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(addr), "f"(a) : "memory");
}

/// x, hidden from the optimizer (an asm volatile move): per-thread values derived
/// from it inside a loop body (ldmatrix lane addresses, cp.async offsets) are
/// recomputed there, a few integer ops, instead of being hoisted out of the loop and
/// kept live across it; at 255 registers that is what turns into spills.
__device__ __forceinline__ int opaque(int x) {
  int y;
  asm volatile("mov.b32 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

/// 2^x; ex2.approx(-inf) = +0, which is what masked scores need.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return x;
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

/// Shared-memory tile of 16-bit elements with kCols per row, stored row-major in
/// 16-byte chunks with the chunk index XOR-swizzled by the row. ldmatrix reads 8
/// consecutive rows (starting at a multiple of 8) at one logical chunk per 8x8
/// matrix; the swizzle puts those 8 reads in 8 distinct 16-byte bank groups, so
/// every ldmatrix, every 16-byte cp.async store and every 4-byte fragment store
/// (8 rows x 4 lanes at one chunk) is conflict-free:
///   rows of >= 128 B (d = 64, 128; 64-query dS tiles): chunk ^ (row % 8);
///   rows of 64 B (32-query dS tiles): chunk ^ ((row / 2) % 4), two rows per 128 B.
template <int kCols>
struct SwizzledTile {
  static_assert(kCols % 64 == 0 || kCols == 32, "rows must span 64 B or a multiple of 128 B");
  static constexpr int kChunks   = kCols / 8;
  static constexpr int kRowBytes = kCols * 2;
  static __device__ __forceinline__ int swz(int row) { return kCols == 32 ? ((row >> 1) & 3) : (row & 7); }
  /// Byte offset of (row, 16-byte chunk).
  static __device__ __forceinline__ uint32_t offset(int row, int chunk) {
    return uint32_t(row * kRowBytes + ((chunk ^ swz(row)) << 4));
  }

  /// ldmatrix addressing split into a per-thread part, computed once, and a
  /// compile-time part: lane row lr in [0, 16) and lane chunk lc in {0, 1} on top of
  /// a row block r0 (multiple of 8) and an even chunk c0. Since c0 + lc == c0 ^ lc
  /// and (r0 + lr) % 8 == lr % 8, the swizzled chunk is c0 ^ y with y = lc ^ swz(lr):
  /// one XOR with a constant per load, no per-(r0, c0) address registers.
  struct Lane {
    uint32_t row_off;
    uint32_t y;
  };
  static __device__ __forceinline__ Lane lane(int lr, int lc) {
    return Lane{uint32_t(lr * kRowBytes), uint32_t(lc ^ swz(lr))};
  }
  static __device__ __forceinline__ uint32_t addr(uint32_t base, const Lane& ln, int r0, int c0) {
    return base + ln.row_off + uint32_t(r0 * kRowBytes) + ((uint32_t(c0) ^ ln.y) << 4);
  }
};

/// The two lane patterns of an x4 ldmatrix over a 16x16 block (lane = 8 m + i,
/// matrix m = 0..3 gets its row addresses from lanes 8m..8m+7):
///  - kLaneA: m = (row half, chunk) = (m & 1, m >> 1). A operands (non-trans) and
///    B operands read with .trans from [k][n] storage: regs {a0, a1, a2, a3}, or
///    {b0, b1} of n-tile 0 then of n-tile 1.
///  - kLaneB: m = (m >> 1, m & 1). B operands (non-trans) from [n][k] storage:
///    {b0, b1} of n-tile 0 (rows 0-7) then n-tile 1 (rows 8-15); also A operands
///    read with .trans from [k][m] storage.
__device__ __forceinline__ int lane_row_a(int lane) { return (lane & 7) + ((lane >> 3) & 1) * 8; }
__device__ __forceinline__ int lane_chunk_a(int lane) { return lane >> 4; }
__device__ __forceinline__ int lane_row_b(int lane) { return (lane & 7) + (lane >> 4) * 8; }
__device__ __forceinline__ int lane_chunk_b(int lane) { return (lane >> 3) & 1; }

/// Issues cp.async copies of a kRows x kCols tile whose row r lives at
/// g + (row0 + r) * row_stride; rows at or past `rows_valid`, and columns at or past
/// `cols_valid` (a head_dim below kCols, padded with zeros), are zero-filled.
/// Each thread keeps one 16-byte column chunk and steps down the rows by
/// kThreads / kChunks (a multiple of 8, so the swizzle of its rows is one value).
/// Per copy that is a 64-bit add of a precomputed step and a compare with a constant.
/// The form before multiplied each row index by the stride, which the forward at 255
/// registers reloaded from the constant bank per row: ~17 integer instructions per
/// copy (NOTES.md rounds 10 and 12).
template <int kRows, int kCols, int kThreads, class Elem>
__device__ __forceinline__ void load_tile_async(uint32_t s_base, const Elem* g, std::int64_t row_stride, int row0,
                                                int rows_valid, int tid, int cols_valid = kCols) {
  using Tile              = SwizzledTile<kCols>;
  constexpr int kChunks   = Tile::kChunks;
  static_assert(kThreads % kChunks == 0 && (kRows * kChunks) % kThreads == 0, "tile copy must split evenly over the CTA");
  constexpr int kRowStep = kThreads / kChunks;
  static_assert(kRowStep % 8 == 0 || kRows <= kRowStep, "rows of one thread share their swizzle");
  const unsigned ut       = unsigned(tid);
  const int c             = int(ut % unsigned(kChunks));
  const int r             = int(ut / unsigned(kChunks));
  const int rows_left     = c * 8 < cols_valid ? rows_valid - row0 - r : 0;  // rows this thread copies
  const uint32_t s_off    = s_base + Tile::offset(r, c);
  const Elem* src         = g + (std::int64_t(row0 + r) * row_stride + c * 8);
  const std::int64_t step = std::int64_t(kRowStep) * row_stride;
#pragma unroll
  for (int it = 0; it < kRows / kRowStep; ++it) {
    const bool ok = it * kRowStep < rows_left;
    cp_async_16(s_off + uint32_t(it * kRowStep * Tile::kRowBytes), ok ? src : g, ok);
    src += step;
  }
}

/// Number of keys row i may see: key j is admissible iff j < row_limit(i).
/// Causal: q_pos(i) >= k_pos(j)  <=>  j <= (q_pos(i) - k_offset) / k_stride. The
/// limit is non-decreasing in i because q_stride > 0, which is what tile skipping
/// relies on. Clamped to [0, seqlen_k], so padded keys are always masked.
__device__ __forceinline__ int row_limit(int causal, std::int64_t q_off, std::int64_t q_str, std::int64_t k_off,
                                         std::int64_t k_str, int seqlen_k, int i) {
  if (!causal) return seqlen_k;
  const std::int64_t num = q_off + q_str * std::int64_t(i) - k_off;
  if (num < 0) return 0;
  const std::int64_t lim = num / k_str + 1;
  return lim < std::int64_t(seqlen_k) ? int(lim) : seqlen_k;
}

}  // namespace DistAttn::Impl::cuda::detail
