// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The matrix products of the portable tile kernels: C = alpha op(A) op(B) + beta C
// on row-major tiles in team scratch, each done by Kokkos Kernels.
//
// - Host backends with a BLAS behind Kokkos Kernels: KokkosBlas::gemm, which
//   hands the tile to that BLAS. At tile sizes OpenBLAS is 10-20x faster than
//   KokkosBatched::SerialGemm and the old dot-product loop on the CI machine
//   (docs/kernels/PORTABLE_NOTES.md). Host teams are one thread, so each thread
//   makes its own single-tile calls and the results do not depend on scheduling.
// - Host backends without one: KokkosBatched::SerialGemm.
// - Device backends: KokkosBatched::TeamGemm (register-blocked) across the team;
//   the caller puts a team barrier after it before reading C. Only where the
//   register-blocked kernels (tile_regs.hpp, 3-5x faster) decline: head_dim above
//   128, the fp64 backward. On an H100 (bf16,
//   S = 8K, docs/kernels/PORTABLE_NOTES.md) it ran the tile 3.4-4.5x faster than
//   TeamVectorGemm, and 5-16x with the padded rows below. TeamVectorGemm gives C's
//   rows to the team's threads and its columns to vector lanes: with the device
//   teams' vector length of 1 only as many threads as C has rows (32 of 128) worked.

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/impl/tile_config.hpp>

#include <KokkosBatched_Gemm_Decl.hpp>
#include <KokkosBlas3_gemm.hpp>

#include <cstddef>
#include <type_traits>

namespace DistAttn::Impl {

using TileN = KokkosBatched::Trans::NoTranspose;
using TileT = KokkosBatched::Trans::Transpose;

/// Row-major [rows x cols] tile in the team scratch of Exec, rows padded by
/// tile_row_pad<Exec> elements.
template <class Exec, class Acc>
using ScratchTile =
    Kokkos::View<Acc**, Kokkos::LayoutStride, typename Exec::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// A rows x cols tile carved from the team's level-`level` scratch.
template <class Exec, class Acc, class Member>
KOKKOS_INLINE_FUNCTION ScratchTile<Exec, Acc> scratch_tile(const Member& team, int level, int rows, int cols) {
  const int ld = cols + tile_row_pad<Exec>;
  Acc* p = static_cast<Acc*>(
      team.team_scratch(level).get_shmem_aligned(std::size_t(rows) * std::size_t(ld) * sizeof(Acc), 16));
  return ScratchTile<Exec, Acc>(p, Kokkos::LayoutStride(rows, ld, cols, 1));
}

/// Whether Kokkos Kernels forwards a host GEMM of Acc to a BLAS library (its TPL
/// table covers float and double, LayoutRight, HostSpace).
template <class Exec, class Acc>
inline constexpr bool tile_gemm_uses_blas_v =
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
    compat::host_accessible_v<Exec> && (std::is_same<Acc, float>::value || std::is_same<Acc, double>::value);
#else
    false;
#endif

template <class Exec, class TA, class TB>
struct TileGemm {
  template <class Member, class Acc, class AV, class BV, class CV>
  KOKKOS_INLINE_FUNCTION static void invoke(const Member& team, Acc alpha, const AV& A, const BV& B, Acc beta,
                                            const CV& C) {
    using namespace KokkosBatched;
    if constexpr (compat::host_accessible_v<Exec>) {
      (void)team;
      // One-column products (d = 1) stay here: newer Kokkos Kernels turn them into
      // a gemv, which without a BLAS gemv would launch a kernel inside this one.
      if constexpr (tile_gemm_uses_blas_v<Exec, Acc>) {
        if (C.extent(1) > 1) {
          // The TPL table is keyed on HostSpace LayoutRight views: view the scratch
          // as such (host tiles are unpadded, tile_row_pad).
          using HostDev = Kokkos::Device<Exec, Kokkos::HostSpace>;
          using U       = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
          DISTATTN_IF_ON_HOST((
              const Kokkos::View<const Acc**, Kokkos::LayoutRight, HostDev, U> a(A.data(), A.extent(0), A.extent(1));
              const Kokkos::View<const Acc**, Kokkos::LayoutRight, HostDev, U> b(B.data(), B.extent(0), B.extent(1));
              const Kokkos::View<Acc**, Kokkos::LayoutRight, HostDev, U> c(C.data(), C.extent(0), C.extent(1));
              KokkosBlas::gemm(std::is_same<TA, TileT>::value ? "T" : "N",
                               std::is_same<TB, TileT>::value ? "T" : "N", alpha, a, b, beta, c);
              return;))
        }
      }
      SerialGemm<TA, TB, Algo::Gemm::Unblocked>::invoke(alpha, A, B, beta, C);
    } else {
      TeamGemm<Member, TA, TB, Algo::Gemm::Blocked>::invoke(team, alpha, A, B, beta, C);
    }
  }
};

}  // namespace DistAttn::Impl
