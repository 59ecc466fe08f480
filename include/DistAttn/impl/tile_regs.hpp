// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Register-blocked team products of the portable device tile kernels (head_dim up to
// 128, teams of kRegTeam threads). Each thread keeps a fixed block of the product's
// result in registers and reads its operands from team scratch four elements at a
// time, so a shared-memory load feeds 4 x (block rows or columns) FMAs. Kokkos
// Kernels' TeamGemm (the device path before these) keeps C in scratch and reads
// every operand element once per FMA; at the 8- and 16-row tiles that fit Kokkos'
// 48 KB level-0 scratch it ran the d = 128 tile at 4.2 (forward) and 1.8 TF/s
// (backward) on an H100 (docs/kernels/PORTABLE_NOTES.md, "Devices").
//
// Tiles are row-major in scratch with a leading dimension (reg_tile_ld) that is a
// multiple of four elements, for the 4-element loads, and an odd multiple of four,
// so that the eight lanes of a load phase reading eight consecutive rows at one
// column hit eight different groups of four banks.

#include <DistAttn/core/kokkos_compat.hpp>

#include <cstddef>
#include <cstdint>

namespace DistAttn::Impl {

// Products over a compile-time depth unroll fully, so the operand loads take constant
// offsets from one address per row instead of an address computation each.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define DISTATTN_UNROLL _Pragma("unroll")
#else
#define DISTATTN_UNROLL
#endif

/// Threads per team of the register-blocked kernels: the thread maps below divide
/// every tile among exactly this many.
constexpr int kRegTeam = 128;

/// head_dim rounded up to a multiple of four: the staged width (the extra columns are zero).
KOKKOS_INLINE_FUNCTION constexpr int reg_tile_width(int d) { return (d + 3) / 4 * 4; }

/// Leading dimension of a scratch tile of `width` columns (a multiple of 4): the next
/// odd multiple of four above it.
KOKKOS_INLINE_FUNCTION constexpr int reg_tile_ld(int width) { return width + ((width / 4) % 2 == 0 ? 4 : 8); }

template <class Acc>
struct alignas(4 * sizeof(Acc)) Quad {
  Acc v[4];
};

template <class Acc>
KOKKOS_FORCEINLINE_FUNCTION Quad<Acc> load_quad(const Acc* p) {
  return *reinterpret_cast<const Quad<Acc>*>(p);
}

/// Carves `n` elements, aligned for Quad loads, from the team's level-`level` scratch.
template <class Acc, class Member>
KOKKOS_INLINE_FUNCTION Acc* reg_scratch(const Member& team, int level, int n) {
  return static_cast<Acc*>(team.team_scratch(level).get_shmem_aligned(std::size_t(n) * sizeof(Acc), sizeof(Quad<Acc>)));
}

/// Bytes reg_scratch takes for `n` elements (the alignment slack included).
template <class Acc>
constexpr std::size_t reg_scratch_bytes(std::size_t n) {
  return n * sizeof(Acc) + sizeof(Quad<Acc>);
}

template <class T>
struct alignas(2 * sizeof(T)) Pair {
  T x[2];
};

/// Whether a [B, S, H, D] View can be read two elements at a time: unit stride
/// along D, every other stride and D even, the data aligned to a Pair.
template <class V>
bool pairs_readable(const V& v) {
  using T = typename V::non_const_value_type;
  return v.stride(3) == 1 && v.stride(0) % 2 == 0 && v.stride(1) % 2 == 0 && v.stride(2) % 2 == 0 &&
         v.extent(3) % 2 == 0 && reinterpret_cast<std::uintptr_t>(v.data()) % sizeof(Pair<T>) == 0;
}

/// A [rows x width] tile of rows s0.. of head h of a [B, S, H, D] View, read into
/// registers (NP pairs per thread, enough for rows x width <= 256 NP) by load() and
/// written to scratch as Acc by store(). The kernels load the next tile before the
/// products of the current one and store it after them, so the global latency runs
/// under the products: staging straight to scratch left the loads exposed behind
/// every team barrier, the largest stall of the first version of these kernels
/// (docs/kernels/PORTABLE_NOTES.md). Consecutive threads read consecutive pairs of a
/// row, so the loads coalesce; zero beyond `valid` rows and `d` columns.
template <class T, int NP>
struct TileLoader {
  Pair<T> reg[NP];

  template <class Member, class Src>
  KOKKOS_INLINE_FUNCTION void load(const Member& team, const Src& src, bool paired, int valid, int width, int d,
                                   int b, int s0, int h) {
    const T* base = src.data() + std::ptrdiff_t(b) * std::ptrdiff_t(src.stride(0)) +
                    std::ptrdiff_t(h) * std::ptrdiff_t(src.stride(2));
    const std::ptrdiff_t srow = std::ptrdiff_t(src.stride(1)), scol = std::ptrdiff_t(src.stride(3));
    const int w2 = width / 2, nt = team.team_size();
    const int rstep = nt / w2, jstep = nt % w2;
    int r = team.team_rank() / w2, jp = team.team_rank() % w2;
    for (int n = 0; n < NP; ++n) {
      Pair<T> v;
      v.x[0] = v.x[1] = T(0.0f);
      if (r < valid && 2 * jp < d) {
        const T* p = base + std::ptrdiff_t(s0 + r) * srow + std::ptrdiff_t(2 * jp) * scol;
        if (paired) {
          v = *reinterpret_cast<const Pair<T>*>(p);
        } else {
          v.x[0] = p[0];
          if (2 * jp + 1 < d) v.x[1] = p[scol];
        }
      }
      reg[n] = v;
      r += rstep;
      jp += jstep;
      if (jp >= w2) {
        jp -= w2;
        ++r;
      }
    }
  }

  /// dst[r * ld + j] = factor * the tile's (r, j), for r < rows.
  template <class Member, class Acc>
  KOKKOS_INLINE_FUNCTION void store(const Member& team, Acc* dst, int ld, int rows, int width, Acc factor) const {
    const int w2 = width / 2, nt = team.team_size();
    const int rstep = nt / w2, jstep = nt % w2;
    int r = team.team_rank() / w2, jp = team.team_rank() % w2;
    for (int n = 0; n < NP; ++n) {
      if (r < rows) {
        dst[r * ld + 2 * jp]     = Acc(reg[n].x[0]) * factor;
        dst[r * ld + 2 * jp + 1] = Acc(reg[n].x[1]) * factor;
      }
      r += rstep;
      jp += jstep;
      if (jp >= w2) {
        jp -= w2;
        ++r;
      }
    }
  }
};

/// Pairs per thread for a tile of `rows` rows at head_dim up to max_d.
KOKKOS_INLINE_FUNCTION constexpr int loader_pairs(int rows, int max_d) { return rows * max_d / (2 * kRegTeam); }

/// Score-shaped products C = A B^T (A [BR x K], B [BC x K], both row-major, K a
/// multiple of 4): thread t holds C's rows (t / 8) + 16 i and columns (t % 8) + 8 j.
/// The eight lanes of a load phase share their rows (A's loads are broadcasts) and
/// read eight consecutive rows of B.
template <int BR, int BC>
struct ScoreBlock {
  static_assert(BR % 16 == 0 && BC % 8 == 0, "16 row groups x 8 column groups");
  static constexpr int TR = BR / 16;
  static constexpr int TC = BC / 8;
  int r0, c0;

  KOKKOS_INLINE_FUNCTION explicit ScoreBlock(int tid) : r0(tid / 8), c0(tid % 8) {}
  KOKKOS_INLINE_FUNCTION int row(int i) const { return r0 + 16 * i; }
  KOKKOS_INLINE_FUNCTION int col(int j) const { return c0 + 8 * j; }

  /// KD: the depth, when known at compile time (0: kdim).
  template <int KD = 0, class Acc>
  KOKKOS_INLINE_FUNCTION void product(Acc (&c)[TR][TC], const Acc* a, int lda, const Acc* b, int ldb,
                                      int kdim) const {
    for (int i = 0; i < TR; ++i)
      for (int j = 0; j < TC; ++j) c[i][j] = Acc(0);
    const int kn = KD > 0 ? KD : kdim;
    DISTATTN_UNROLL
    for (int k = 0; k < kn; k += 4) step(c, a, lda, b, ldb, k);
  }

  /// Two independent products of the same shape (the backward's S = Q K^T and
  /// dP = dO V^T) in one loop: at the backward's 16-row tiles a thread holds two
  /// results, and one product alone left its loads' latency exposed.
  template <int KD = 0, class Acc>
  KOKKOS_INLINE_FUNCTION void product2(Acc (&c)[TR][TC], const Acc* a, const Acc* b, Acc (&c2)[TR][TC],
                                       const Acc* a2, const Acc* b2, int ld, int kdim) const {
    for (int i = 0; i < TR; ++i)
      for (int j = 0; j < TC; ++j) c[i][j] = c2[i][j] = Acc(0);
    const int kn = KD > 0 ? KD : kdim;
    DISTATTN_UNROLL
    for (int k = 0; k < kn; k += 4) {
      step(c, a, ld, b, ld, k);
      step(c2, a2, ld, b2, ld, k);
    }
  }

 private:
  template <class Acc>
  KOKKOS_FORCEINLINE_FUNCTION void step(Acc (&c)[TR][TC], const Acc* a, int lda, const Acc* b, int ldb,
                                        int k) const {
    Quad<Acc> qa[TR], qb[TC];
    for (int i = 0; i < TR; ++i) qa[i] = load_quad(a + row(i) * lda + k);
    for (int j = 0; j < TC; ++j) qb[j] = load_quad(b + col(j) * ldb + k);
    for (int e = 0; e < 4; ++e)
      for (int i = 0; i < TR; ++i)
        for (int j = 0; j < TC; ++j) c[i][j] += qa[i].v[e] * qb[j].v[e];
  }
};

/// Row-block products C += A B (A [BR x K] row-major, K a multiple of 4; B [K x width]
/// row-major, width <= 128): thread t holds C's rows (t / 16) + 8 i and the columns
/// 4 (t % 16) + 64 u + e (u < 2, e < 4). The eight lanes of a load phase share their
/// rows and read 128 consecutive bytes of a row of B.
template <int BR>
struct RowBlock {
  static_assert(BR % 8 == 0, "8 row groups x 16 column groups");
  static constexpr int OR = BR / 8;
  static constexpr int OC = 8;  // two chunks of four columns
  int r0, c0;

  KOKKOS_INLINE_FUNCTION explicit RowBlock(int tid) : r0(tid / 16), c0(4 * (tid % 16)) {}
  KOKKOS_INLINE_FUNCTION int row(int i) const { return r0 + 8 * i; }
  KOKKOS_INLINE_FUNCTION int col(int u, int e) const { return c0 + 64 * u + e; }

  /// KD: the depth (A's columns), a multiple of 4.
  template <int KD, class Acc>
  KOKKOS_INLINE_FUNCTION void product(Acc (&c)[OR][OC], const Acc* a, int lda, const Acc* b, int ldb,
                                      int width) const {
    // A thread's chunk is wholly inside or outside the width (both multiples of 4);
    // at width <= 64 no thread has a second chunk, so no warp runs it half-empty.
    if (c0 >= width) return;
    const bool hi = c0 + 64 < width;
    DISTATTN_UNROLL
    for (int k = 0; k < KD; k += 4) step(c, a, lda, b, ldb, k, hi);
  }

  /// Two independent products of the same shape (the key pass's dV += P^T dO and
  /// dK += dS^T Q) in one loop, as ScoreBlock::product2.
  template <int KD, class Acc>
  KOKKOS_INLINE_FUNCTION void product2(Acc (&c)[OR][OC], const Acc* a, const Acc* b, Acc (&c2)[OR][OC],
                                       const Acc* a2, const Acc* b2, int lda, int ldb, int width) const {
    if (c0 >= width) return;
    const bool hi = c0 + 64 < width;
    DISTATTN_UNROLL
    for (int k = 0; k < KD; k += 4) {
      step(c, a, lda, b, ldb, k, hi);
      step(c2, a2, lda, b2, ldb, k, hi);
    }
  }

 private:
  template <class Acc>
  KOKKOS_FORCEINLINE_FUNCTION void step(Acc (&c)[OR][OC], const Acc* a, int lda, const Acc* b, int ldb, int k,
                                        bool hi) const {
    Quad<Acc> qa[OR];
    for (int i = 0; i < OR; ++i) qa[i] = load_quad(a + row(i) * lda + k);
    for (int e = 0; e < 4; ++e) {
      const Quad<Acc> b0 = load_quad(b + (k + e) * ldb + c0);
      for (int i = 0; i < OR; ++i)
        for (int x = 0; x < 4; ++x) c[i][x] += qa[i].v[e] * b0.v[x];
      if (hi) {
        const Quad<Acc> b1 = load_quad(b + (k + e) * ldb + c0 + 64);
        for (int i = 0; i < OR; ++i)
          for (int x = 0; x < 4; ++x) c[i][4 + x] += qa[i].v[e] * b1.v[x];
      }
    }
  }
};

}  // namespace DistAttn::Impl
