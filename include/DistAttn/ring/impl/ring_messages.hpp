// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring/impl/ring_messages.hpp
/// How RingAttention's transfers become messages of a recorded p2p batch: one tag
/// per (payload, step, part), and a token tensor sent whole or, when the masked
/// schedule narrows a transfer to rows of the chunk, as those rows (one contiguous
/// message per batch element, same tag, matched in order).

#include <DistAttn/exec/impl/pass_recorder.hpp>
#include <DistAttn/exec/impl/recorded_batch.hpp>
#include <DistAttn/schedule/ring_types.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <utility>

namespace DistAttn::Impl {

template <class CommSpace, class Exec, class Stats>
struct RingMessages {
  using Batch = RecordedBatch<CommSpace, Exec, PassRecorder<Exec, Stats>>;

  static int tag(const Transfer& tr, int part) { return message_tag(int(tr.kind), tr.step, part); }

  /// The views of one payload, as parts 0, 1, ... of the transfer.
  template <class... V>
  static void recv(Batch& b, const Transfer& tr, const V&... views) {
    int part = 0;
    (one<true>(b, views, tr, part++), ...);
  }
  template <class... V>
  static void send(Batch& b, const Transfer& tr, const V&... views) {
    int part = 0;
    (one<false>(b, views, tr, part++), ...);
  }

 private:
  template <bool Receive, class V>
  static void one(Batch& b, const V& view, const Transfer& tr, int part) {
    auto post = [&](const auto& v) {
      if constexpr (Receive) b.recv(v, tr.peer, tag(tr, part), tr.kind);
      else b.send(v, tr.peer, tag(tr, part), tr.kind);
    };
    if constexpr (V::rank == 4) {
      if (!tr.whole()) {
        for (std::size_t i = 0; i < view.extent(0); ++i)
          post(Kokkos::subview(view, i, std::make_pair(tr.rows_begin, tr.rows_end), Kokkos::ALL, Kokkos::ALL));
        return;
      }
    }
    post(view);
  }
};

}  // namespace DistAttn::Impl
