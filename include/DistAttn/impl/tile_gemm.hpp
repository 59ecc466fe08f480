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
// - Device backends: KokkosBatched::TeamVectorGemm across the team; the caller
//   puts a team barrier after it before reading C.

#include <DistAttn/core/kokkos_compat.hpp>

#include <KokkosBatched_Gemm_Decl.hpp>
#include <KokkosBlas3_gemm.hpp>

#include <type_traits>

namespace DistAttn::Impl {

using TileN = KokkosBatched::Trans::NoTranspose;
using TileT = KokkosBatched::Trans::Transpose;

/// Row-major [rows x cols] tile in the team scratch of Exec.
template <class Exec, class Acc>
using ScratchTile =
    Kokkos::View<Acc**, Kokkos::LayoutRight, typename Exec::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

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
          // The TPL table is keyed on HostSpace views: view the scratch as such.
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
      TeamVectorGemm<Member, TA, TB, Algo::Gemm::Unblocked>::invoke(team, alpha, A, B, beta, C);
    }
  }
};

}  // namespace DistAttn::Impl
