// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d/impl/kv_transpose.hpp
/// The world permutation between the caller's cyclic layout of k, v (K_p) and the
/// grid's K_t (schedules.md §2, communication.md "Process grid"): forward sends
/// k and v to the rank whose K_t they are, backward sends dK_t, dV_t back, so the
/// caller never sees K_t. Fixed points of the permutation copy locally.

#include <DistAttn/grid2d/grid2d_types.hpp>
#include <DistAttn/impl/tensor_ops.hpp>

#include <vector>

namespace DistAttn::Impl {

/// `Posts` is the executor's PhasedPosts over Grid2DPhase.
template <class Grid, class Posts, class Exec>
struct KvTranspose {
  Grid& grid;
  Posts& posts;
  Exec compute;
  int tag_k, tag_v, tag_back;  // message tags (exec/impl/pass_recorder.hpp: message_tag)

  /// k, v (K_p, V_p) -> kvt (K_t | V_t).
  template <class CV, class Pair>
  void forward(const CV& k, const CV& v, const Pair& kvt) const {
    if (fixed()) {
      Kokkos::deep_copy(compute, kvt.a, k);
      Kokkos::deep_copy(compute, kvt.b, v);
      return;
    }
    std::vector<typename Posts::Req> reqs;
    posts.sendrecv(reqs, Grid2DPhase::KvPermute, k, grid.transpose_dest(), kvt.a, grid.transpose_source(), tag_k);
    posts.sendrecv(reqs, Grid2DPhase::KvPermute, v, grid.transpose_dest(), kvt.b, grid.transpose_source(), tag_v);
    posts.wait(reqs);
  }

  /// dK_t|dV_t (dkvt) -> dk, dv in the caller's layout (Alg. 3 line 9; added
  /// after Alg. 8 too: attention2d.md decision 1); dkvp receives them.
  template <class Pair, class DKV, class DVV>
  void backward(const Pair& dkvt, const Pair& dkvp, const DKV& dk, const DVV& dv) const {
    if (!fixed()) {
      // Our K_t is the K_p of transpose_source(): its gradient goes back there;
      // ours comes from the rank whose K_t is our K_p.
      std::vector<typename Posts::Req> reqs;
      posts.sendrecv(reqs, Grid2DPhase::DkvPermute, dkvt.flat, grid.transpose_source(), dkvp.flat,
                     grid.transpose_dest(), tag_back);
      posts.wait(reqs);
    }
    const Pair& mine = fixed() ? dkvt : dkvp;
    convert4(compute, mine.a, dk, "DistAttn::grid2d.convert_dk");
    convert4(compute, mine.b, dv, "DistAttn::grid2d.convert_dv");
  }

 private:
  bool fixed() const { return grid.transpose_source() == grid.world().rank(); }
};

}  // namespace DistAttn::Impl
