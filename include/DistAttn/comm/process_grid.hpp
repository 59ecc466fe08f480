// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/process_grid.hpp
/// ProcessGrid2D: the R x C grid of Attention2D with its row and column
/// sub-communicators (docs/design/communication.md, "Process grid"). Backend-neutral: it only uses the
/// Communicator interface, so it works for MpiSpace and NcclSpace alike.

#include <DistAttn/comm/communicator.hpp>
#include <DistAttn/comm/impl/entry_agreement.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/grid_shape.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace DistAttn {

/// @brief R x C process grid over a communicator of P = R*C ranks.
///
/// World rank p sits at (r, c) with p = r + R*c (column-major), so that in the
/// 1D cyclic layout rank p holds tokens {p + i*P} = Qp(r, c) (docs/design/schedules.md §2).
/// row(): the ranks with the same r, ordered by c (row rank == c).
/// col(): the ranks with the same c, ordered by r (col rank == r).
/// The grid owns duplicates of `world`, so its traffic has its own message space
/// and its own counters.
template <class CommSpace, class Exec>
class ProcessGrid2D {
 public:
  using communicator_type = Communicator<CommSpace, Exec>;

  /// Collective over `world`. Throws InvalidArgument naming P, R and C on every
  /// rank unless every rank passes the same R and C with R >= 1, C >= 1 and
  /// R*C == P (agreed before the communicator is duplicated, so a rank with bad
  /// arguments cannot leave the others blocked in the duplicate).
  ProcessGrid2D(const communicator_type& world, int rows, int cols)
      : shape_(agreed_shape(world, rows, cols)),
        coords_(shape_.coord_of(world.rank())),
        world_(world.duplicate()),
        row_(member_of(world_.split(coords_.row, coords_.col), "row")),
        col_(member_of(world_.split(coords_.col, coords_.row), "column")) {}

  GridShape dims() const { return shape_; }
  GridCoord coords() const { return coords_; }

  /// The grid's own duplicate of the world communicator (transpose traffic).
  communicator_type& world() { return world_; }
  const communicator_type& world() const { return world_; }
  /// Ranks with this rank's r, ordered by c.
  communicator_type& row() { return row_; }
  const communicator_type& row() const { return row_; }
  /// Ranks with this rank's c, ordered by r.
  communicator_type& col() { return col_; }
  const communicator_type& col() const { return col_; }

  /// World rank whose Qp shard this rank needs as its Kt shard: C*r + c.
  int transpose_source() const { return shape_.transpose_source(world_.rank()); }
  /// World rank that needs this rank's Qp shard as its Kt shard.
  int transpose_dest() const { return shape_.transpose_dest(world_.rank()); }

 private:
  static GridShape agreed_shape(const communicator_type& world, int R, int C) {
    // The agreement's all-gather only adds its bytes to the caller's counters.
    Impl::agree_construction(const_cast<communicator_type&>(world), "DistAttn::ProcessGrid2D",
                             {{"rows", R}, {"cols", C}}, [&] { checked_shape(world.size(), R, C); });
    return GridShape{R, C};
  }
  static GridShape checked_shape(int P, int R, int C) {
    DISTATTN_REQUIRE(R >= 1 && C >= 1 && std::int64_t(R) * std::int64_t(C) == std::int64_t(P),
                     "DistAttn::ProcessGrid2D",
                     "cannot arrange P=" << P << " ranks as an R x C grid with R=" << R << ", C=" << C
                                         << " (need R >= 1, C >= 1 and R*C == P)");
    return GridShape{R, C};
  }
  static communicator_type member_of(std::optional<communicator_type>&& c, const char* what) {
    if (!c) {
      Impl::throw_communication_error("DistAttn::ProcessGrid2D",
                                      std::string("this rank is not in its own ") + what + " communicator");
    }
    return std::move(*c);
  }

  GridShape shape_;
  GridCoord coords_;
  communicator_type world_;
  communicator_type row_;
  communicator_type col_;
};

/// @brief The K/V redistribution of Attention2D: sends this rank's Qp-layout
/// shard to transpose_dest() and receives its Kt shard from transpose_source(),
/// on grid.world(). Both Views must have the same size on all ranks.
template <class CommSpace, class Exec, class SendView, class RecvView>
auto transpose_exchange(ProcessGrid2D<CommSpace, Exec>& grid, const SendView& send_view,
                        const RecvView& recv_view, int tag = 0) {
  return sendrecv(grid.world(), send_view, grid.transpose_dest(), recv_view, grid.transpose_source(), tag);
}

}  // namespace DistAttn
