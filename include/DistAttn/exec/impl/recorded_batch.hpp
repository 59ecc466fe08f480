// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file exec/impl/recorded_batch.hpp
/// A point-to-point batch (comm/p2p_batch.hpp) that counts what it carries in the
/// pass's stats (PassRecorder) and carries nothing when the pass skips transfers
/// (ExecutorOptions::compute_only), so an executor's posting code states only
/// which views go where.

#include <DistAttn/comm/p2p_batch.hpp>

#include <vector>

namespace DistAttn::Impl {

template <class CommSpace, class Exec, class Recorder>
class RecordedBatch {
 public:
  RecordedBatch(Communicator<CommSpace, Exec>& comm, Recorder& rec) : b_(comm), rec_(rec) {}

  /// Receives `view` from `peer`; its bytes count under `kind`.
  template <class V, class Kind>
  void recv(const V& view, int peer, int tag, Kind kind) {
    if (rec_.skip_transfers()) return;
    b_.recv(view, peer, tag);
    rec_.received(kind, view.span() * sizeof(typename V::value_type));
  }
  template <class V, class Kind>
  void send(const V& view, int peer, int tag, Kind kind) {
    if (rec_.skip_transfers()) return;
    b_.send(view, peer, tag);
    rec_.sent(kind, view.span() * sizeof(typename V::value_type));
  }
  /// Posts the batch, if it holds anything, as one more request in `reqs`.
  void post(std::vector<Request<CommSpace>>& reqs) {
    if (b_.empty()) return;
    reqs.push_back(b_.post());
    rec_.posted();
  }

 private:
  P2PBatch<CommSpace, Exec> b_;
  Recorder& rec_;
};

}  // namespace DistAttn::Impl
