// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d/cyclic_layout.hpp
/// Conversion between the contiguous layout of the ring schedules and the 1D
/// cyclic layout of Attention2D, so a caller can switch schedules.
///
///   contiguous: rank x holds tokens [x c, (x + 1) c)     (c = N/P, local row j <-> token x c + j)
///   cyclic:     rank p holds tokens { p + i P : i < c }   (local row i <-> token p + i P)
///
/// Both are [B, c, X, D] tensors (token axis 1) or [B, H, c] row statistics
/// (token axis 2) with the same extents on every rank. One all_to_all: rank x
/// sends rank p the tokens of its chunk congruent to p mod P, in increasing
/// order, padded to m = ceil(c / P) rows per block (blocks must be equal; the
/// padding is 0 bytes when P^2 divides N).

#include <DistAttn/comm.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/grid2d/impl/cyclic_exchange.hpp>

namespace DistAttn {

/// @brief Contiguous chunk (rank x: tokens [x c, (x+1) c)) -> cyclic shard
/// (rank p: tokens {p + i P}). Collective over `comm`; runs on comm.exec() and
/// returns when `cyclic` is complete. Inputs produced on another instance need
/// comm.depend_on(producer) first.
/// @param contiguous [B, c, X, D] or [B, H, c], c = N/P, same extents on every rank
/// @param cyclic     same extents and value type (any layout)
template <class Exec, class CommSpace, class SrcV, class DstV>
void to_cyclic(Communicator<CommSpace, Exec>& comm, const SrcV& contiguous, const DstV& cyclic) {
  const long P = comm.size(), c = long(contiguous.extent(Impl::token_axis<SrcV>()));
  Impl::cyclic_exchange(comm, contiguous, cyclic, Impl::ContiguousRowOf{long(comm.rank()), c, P},
                        Impl::CyclicRowOf{long(comm.rank()), c, P}, "DistAttn::to_cyclic");
}

/// @brief Inverse of to_cyclic: cyclic shard -> contiguous chunk.
template <class Exec, class CommSpace, class SrcV, class DstV>
void from_cyclic(Communicator<CommSpace, Exec>& comm, const SrcV& cyclic, const DstV& contiguous) {
  const long P = comm.size(), c = long(cyclic.extent(Impl::token_axis<SrcV>()));
  Impl::cyclic_exchange(comm, cyclic, contiguous, Impl::CyclicRowOf{long(comm.rank()), c, P},
                        Impl::ContiguousRowOf{long(comm.rank()), c, P}, "DistAttn::from_cyclic");
}

}  // namespace DistAttn
