// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring/ring_attention.hpp
/// DistFlashAttn executor: runs a RingSchedule (vanilla ring, the balanced helper
/// schedule or the zigzag assignment, any P) on a Communicator, forward and
/// backward (docs/design/ring_executor.md, docs/design/schedules.md §1).
///
/// Token layout (what each rank passes in and gets back), chunk = c tokens per
/// rank; local row i of rank x is global token ring_position(kind, P, c, x, i)
/// (schedule/ring_layout.hpp, also layout().position(x, i)):
///  - Vanilla, Balanced: rank x holds positions [x*c, (x+1)*c)
///    (TokenLayout::Kind::Contiguous).
///  - Zigzag: the sequence is cut into 2P half-chunks of c/2 tokens; rank x holds
///    half-chunk x (positions [x*c/2, (x+1)*c/2)) in local rows [0, c/2) and
///    half-chunk 2P-1-x in rows [c/2, c) (c must be even; TokenLayout::Kind::Zigzag).
///
/// Masking: causal by default (RingOptions::causal), from global positions. Full
/// (non-causal) attention needs a ring that visits every chunk: RingKind::Zigzag
/// supports it; the vanilla and balanced schedules skip every block above the
/// diagonal by construction and reject causal = false.
///
/// Padding: for a global length N that P chunks (zigzag: 2P half-chunks) do not
/// fill, SequencePadding(N, P, token_layout_kind(kind)) (schedule/padding.hpp) gives the
/// chunk and which rows are padding: padded at the END, exact for causal
/// attention; padded rows get zeros and dO = 0. With full attention padded keys
/// would enter every row: N must then fill the chunks exactly.
///
/// Arguments: q, k, v and dO must have element type T and live in memory Exec can
/// access (checked at compile time). Any layout is accepted: row-major contiguous
/// Views ([batch, seq, heads, head_dim], LayoutRight) are used in place; others
/// (LayoutLeft, the default for CUDA memory, or strided subviews) are copied into
/// row-major staging buffers with Kokkos::deep_copy, which costs one copy and the
/// memory of that tensor. o, LSE ([batch, heads, seq]), dq, dk, dv may have any
/// layout. Every pass first checks its arguments on each rank and agrees on the
/// outcome with all peers before posting a message (exec/impl/executor_inputs.hpp), so a
/// bad argument anywhere raises InvalidArgument on every rank, and ranks built
/// with different extents or options are reported instead of hanging. forward() and
/// backward() are collective over the communicator.
///
/// Overlap (ring_executor.md "Steps and overlap"): step t+1's inputs are posted on the communicator's
/// instance before step t's tile runs on the compute instance; receives land in
/// one of two slots; a helper's result is sent as soon as it is computed and merged
/// by its owner one step later (merges commute, schedules.md §1.1). The compute instance
/// waits on requests with Request::wait(compute) — no device-wide synchronize.
///
/// Communication follows the mask (RingSchedule(layout, rule)): with a window or
/// documents, a block the mask empties is neither computed nor fed, so a rank
/// receives only the K/V (backward: returns only the dK/dV) some allowed pair needs.
///
/// Memory (docs/design/memory.md): a pass allocates only the slots its schedule
/// uses on some rank (zigzag and vanilla never receive queries or partial states),
/// in one workspace that forward and backward share (executor/memory_plan.hpp);
/// memory_plan() says how much before anything is allocated, and a pass whose
/// workspace does not fit fails on every rank at entry.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/exec/impl/executor_config.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>
#include <DistAttn/exec/impl/kernel_documents.hpp>
#include <DistAttn/impl/head_groups.hpp>
#include <DistAttn/exec/impl/pass_recorder.hpp>
#include <DistAttn/exec/impl/recorded_batch.hpp>
#include <DistAttn/exec/impl/row_pieces.hpp>
#include <DistAttn/impl/tensor_ops.hpp>
#include <DistAttn/schedule/ring_buffers.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>

#include <array>
#include <utility>
#include <vector>

namespace DistAttn {

/// Causal by default; full attention (causal = false) needs RingKind::Zigzag.
struct RingOptions : ExecutorOptions {
  RingKind kind = RingKind::Balanced;
};

/// Per-rank instrumentation of the last forward or backward call; bytes by payload kind.
struct RingStats : PassStats<PayloadKind, kNumPayloadKinds> {
  int steps = 0;
};

template <class T, class CommSpace, class Exec>
class RingAttention {
 public:
  using Acc      = accum_t<T>;
  using Mem      = typename Exec::memory_space;
  using Comm     = Communicator<CommSpace, Exec>;
  using Req      = Request<CommSpace>;
  using TView    = Tensor4<T, Mem>;
  using AccView  = Tensor4<Acc, Mem>;
  using StatView = RowStats<Acc, Mem>;
  using State    = AttnState<Acc, Mem>;

  /// @param comm    ranks of the sequence-parallel group; its exec() carries the
  ///                transfers. Taken as `Comm&` like every executor: it must outlive the executor
  /// @param compute instance the tiles run on (another stream than comm.exec() on GPUs)
  RingAttention(Comm& comm, const Exec& compute, int batch, int chunk, int heads, int kv_heads, int head_dim,
                const RingOptions& opts = {})
      : comm_(Impl::agree_construction(comm, "DistAttn::RingAttention",
                                       construction_fields(batch, chunk, heads, kv_heads, head_dim, opts),
                                       [&] { check_construction(comm.size(), batch, chunk, heads, kv_heads, head_dim, opts); })),
        compute_(compute), B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim),
        opts_(opts), schedule_(schedule_for(comm.size(), chunk, opts)), layout_(comm.size(), chunk, opts.kind),
        rec_(compute, opts) {
    plan_ = memory_plan(comm.size(), B_, c_, H_, Hkv_, D_, opts_);
  }

  const RingSchedule& schedule() const { return schedule_; }
  /// Which global positions each rank's rows hold.
  const RingLayout& layout() const { return layout_; }
  const RingStats& stats() const { return rec_.stats(); }
  const RingOptions& options() const { return opts_; }
  int chunk() const { return c_; }

  /// Bytes this executor's workspace holds now.
  std::size_t held_bytes() const { return ws_.held(); }
  /// Every executor offers it; the ring keeps nothing of a forward's inputs for
  /// its backward, so there is nothing to drop.
  void invalidate_saved_inputs() {}
  /// Replaces the packed documents (ExecutorOptions::documents) for the following
  /// passes and drops what a forward kept. Local and unchecked:
  /// AnyAttention::set_documents checks the offsets and agrees on them first; a
  /// direct caller must pass checked offsets alike on every rank (each pass's
  /// agreement compares their hash).
  void set_documents(std::vector<std::int64_t> offsets) {
    opts_.documents = std::move(offsets);
    kdocs_          = Impl::KernelDocuments<Mem>(opts_.documents);
    // The schedule follows the mask (which blocks and rows travel), and so may the slots.
    schedule_    = schedule_for(comm_.size(), c_, opts_);
    plan_        = memory_plan(comm_.size(), B_, c_, H_, Hkv_, D_, opts_);
    carved_pass_ = -1;
  }

  /// Workspace bytes forward and backward allocate on each rank, per buffer.
  /// Head chunking (ExecutorOptions::head_group) plans the group's heads plus its staging copies.
  MemoryPlan memory_plan() const { return plan_; }
  /// kv heads per pass of the last pass (head chunking; 0 before the first pass).
  int kv_heads_per_pass() const { return carved_group_; }
  /// The same for any extents, without a communicator (P ranks, `chunk` tokens each).
  static MemoryPlan memory_plan(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                const RingOptions& opts = {}) {
    const int g = opts.head_group > 0 ? opts.head_group : kv_heads;
    return Buffers::plan(RingShape::of(schedule_for(P, chunk, opts), batch, chunk, heads, kv_heads, head_dim, g));
  }

  /// O and LSE ([B, H, chunk], accumulation type) of this rank's query chunk.
  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::RingAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(comm_, where, config(0), [&] {
      check_inputs(where, q, k, v);
      Impl::check_fwd_args(compute_, where, q, k, v, o, lse, opts_.attn.check_finite);
      agree_.propose(choose_group(where, Pass::Forward));
    });
    const int g = use_workspace(Pass::Forward, int(agree_.agreed_minimum()));
    begin_pass(where);
    const auto in = staged_.get(compute_, q, k, v);
    if (g == Hkv_) {
      run_forward(in[0], in[1], in[2], o, lse);
    } else {
      Impl::for_each_head_group(H_, Hkv_, g, [&](auto qh, auto kh) {
        copy_group(in, qh, kh);
        run_forward(buf_.qg, buf_.kg, buf_.vg, Impl::head_range(o, qh), Impl::stat_head_range(lse, qh));
      });
    }
    end_pass();
  }

  /// dq, dk, dv (overwritten) of this rank's chunk from its q, k, v, the forward's o and lse, and dO.
  template <class QV, class KV, class VV, class OV, class DOV, class LV, class DQV, class DKV, class DVV>
  void backward(const QV& q, const KV& k, const VV& v, const OV& o, const DOV& dout, const LV& lse, const DQV& dq,
                const DKV& dk, const DVV& dv) {
    constexpr const char* where = "DistAttn::RingAttention::backward";
    Impl::static_check_backward<T, Exec, QV, KV, VV, OV, DOV, LV, DQV, DKV, DVV>();
    agree_.run(comm_, where, config(1), [&] {
      check_inputs(where, q, k, v);
      Impl::check_bwd_args(compute_, where, q, k, v, o, dout, lse, dq, dk, dv, opts_.attn.check_finite);
      agree_.propose(choose_group(where, Pass::Backward));
    });
    const int g = use_workspace(Pass::Backward, int(agree_.agreed_minimum()));
    begin_pass(where);
    const auto in     = staged_.get(compute_, q, k, v);
    const CView dos   = stage_do_.get(compute_, dout, "DistAttn::ring.do_staged");
    const CStats lses = stage_lse_.get_stats(compute_, lse, "DistAttn::ring.lse_staged");
    if (g == Hkv_) {
      run_backward(in[0], in[1], in[2], o, dos, lses, dq, dk, dv);
    } else {
      Impl::for_each_head_group(H_, Hkv_, g, [&](auto qh, auto kh) {
        copy_group(in, qh, kh);
        Kokkos::deep_copy(compute_, buf_.dog, Impl::head_range(dos, qh));
        Kokkos::deep_copy(compute_, buf_.lseg, Impl::stat_head_range(lses, qh));
        run_backward(buf_.qg, buf_.kg, buf_.vg, Impl::head_range(o, qh), buf_.dog, buf_.lseg, Impl::head_range(dq, qh),
                     Impl::head_range(dk, kh), Impl::head_range(dv, kh));
      });
    }
    end_pass();
  }

 private:
  using CView  = Impl::ConstView4<T, Mem>;
  using CStats = Impl::ConstView3<Acc, Mem>;

  template <class OV, class LV>
  void run_forward(const CView& q, const CView& k, const CView& v, const OV& o, const LV& lse) {
    const int x = comm_.rank(), nsteps = schedule_.num_steps();
    for (int a = 0; a < layout_.pieces(); ++a) reset_state(compute_, buf_.own[a]);
    // Inputs need two slots (step t computes while t+1 arrives), results too:
    // step t-1's result is merged before step t+1's is posted.
    std::array<std::vector<Req>, 2> in_reqs;
    std::array<std::vector<Req>, 2> res_reqs;
    std::array<bool, 2> res_pending{false, false};

    // One group per phase: every input of step t, then (after step t's tile)
    // every result of step t. Each rank's communicator sees the same sequence of
    // groups, so NCCL's in-order matching cannot deadlock.
    auto post_inputs = [&](int t) {
      const RankStep st = schedule_.forward(x, t);
      comm_.depend_on(compute_);  // slot t%2 was last read by the tile of step t-2
      const int s = t % 2;
      Batch b(comm_, rec_);
      if (st.recv_input.kind == PayloadKind::KV) {
        recv(b, buf_.kbuf[s], st.recv_input, 0);
        recv(b, buf_.vbuf[s], st.recv_input, 1);
      } else if (st.recv_input.active()) {
        recv(b, buf_.qbuf[s], st.recv_input, 0);
      }
      if (st.send_input.kind == PayloadKind::KV) {
        send(b, k, st.send_input, 0);
        send(b, v, st.send_input, 1);
      } else if (st.send_input.active()) {
        send(b, q, st.send_input, 0);
      }
      b.post(in_reqs[s]);
    };
    auto post_results = [&](int t) {
      const RankStep st = schedule_.forward(x, t);
      const int r = t % 2;
      Batch b(comm_, rec_);
      // The partial was just computed, and slot r was last read by step t-2's merge.
      if (st.send_result.active() || st.recv_result.active()) comm_.depend_on(compute_);
      if (st.send_result.active()) {
        const int s = t % 2;
        send(b, buf_.spart[s].acc, st.send_result, 0);
        send(b, buf_.spart[s].m, st.send_result, 1);
        send(b, buf_.spart[s].l, st.send_result, 2);
      }
      if (st.recv_result.active()) {
        recv(b, buf_.rpart[r].acc, st.recv_result, 0);
        recv(b, buf_.rpart[r].m, st.recv_result, 1);
        recv(b, buf_.rpart[r].l, st.recv_result, 2);
        res_pending[r] = true;
      }
      b.post(res_reqs[r]);
    };
    // Waits for step t's result group (its send leaves the slot free, its
    // receive is merged): one step after it was posted.
    auto merge_result = [&](int t) {
      if (t < 0) return;
      const int r = t % 2;
      rec_.wait_on(res_reqs[r], res_pending[r]);
      if (!res_pending[r]) return;
      attention_merge(compute_, buf_.own[0], buf_.rpart[r]);  // partials travel only where a rank holds one piece
      res_pending[r] = false;
      rec_.merged();
    };

    rec_.step();
    if (nsteps > 1) post_inputs(1);
    if (const auto own = schedule_.forward(x, 0).compute) forward_task(*own, Transfer{}, q, k, v, 0);
    for (int t = 1; t < nsteps; ++t) {
      rec_.step();
      if (t + 1 < nsteps) post_inputs(t + 1);
      const RankStep st = schedule_.forward(x, t);
      const int s       = t % 2;
      rec_.wait_on(in_reqs[s], st.recv_input.active());
      if (st.compute) forward_task(*st.compute, st.recv_input, q, k, v, s);
      post_results(t);
      merge_result(t - 1);  // the partial produced at step t-1 has had a step to travel
    }
    merge_result(nsteps - 1);
    rec_.end_steps();
    Impl::for_each_row_piece(layout_.pieces(), layout_.piece_len(), [&](int a, auto rows) {
      attention_finalize(compute_, buf_.own[a], rows.tokens(o), rows.stats(lse));
    });
  }

  /// One task's blocks into its query-side state: the rank's own (one per row piece),
  /// or a helper's fresh partial in send slot s. Inputs not the rank's own are in slot s.
  void forward_task(const ComputeTask& task, const Transfer& in, const CView& q, const CView& k, const CView& v, int s) {
    const CView qq = task.own_query ? q : CView(buf_.qbuf[s]);
    const CView kk = task.own_kv ? k : CView(buf_.kbuf[s]);
    const CView vv = task.own_kv ? v : CView(buf_.vbuf[s]);
    if (task.fresh_state) reset_state(compute_, buf_.spart[s]);
    for_each_block(task, in, [&](const PieceBlock& blk, auto qr, auto kr) {
      State& st = task.fresh_state ? buf_.spart[s] : buf_.own[blk.q_piece];
      rec_.timed([&] { attention_fwd_update(compute_, qr.tokens(qq), kr.tokens(kk), kr.tokens(vv), st, task_options(blk.mask)); });
    });
  }

  template <class OV, class DQV, class DKV, class DVV>
  void run_backward(const CView& q, const CView& k, const CView& v, const OV& o, const CView& dout,
                    const CStats& lse, const DQV& dq, const DKV& dk, const DVV& dv) {
    const int x = comm_.rank(), nsteps = schedule_.num_steps();
    attention_bwd_delta(compute_, o, dout, buf_.delta);
    Kokkos::deep_copy(compute_, buf_.gq, Acc(0));
    Kokkos::deep_copy(compute_, buf_.gk, Acc(0));
    Kokkos::deep_copy(compute_, buf_.gv, Acc(0));
    std::array<std::vector<Req>, 2> in_reqs;
    std::array<std::vector<Req>, 2> res_reqs;
    std::array<Transfer, 2> res_info{};

    auto post_inputs = [&](int t) {
      const RankStep st = schedule_.backward(x, t);
      comm_.depend_on(compute_);
      const int s = t % 2;
      Batch b(comm_, rec_);
      if (st.recv_input.kind == PayloadKind::KV) {
        recv(b, buf_.kbuf[s], st.recv_input, 0);
        recv(b, buf_.vbuf[s], st.recv_input, 1);
      } else if (st.recv_input.active()) {
        recv(b, buf_.qbuf[s], st.recv_input, 0);
        recv(b, buf_.dobuf[s], st.recv_input, 1);
        recv(b, buf_.lsebuf[s], st.recv_input, 2);
        recv(b, buf_.delbuf[s], st.recv_input, 3);
      }
      if (st.send_input.kind == PayloadKind::KV) {
        send(b, k, st.send_input, 0);
        send(b, v, st.send_input, 1);
      } else if (st.send_input.active()) {
        send(b, q, st.send_input, 0);
        send(b, dout, st.send_input, 1);
        send(b, lse, st.send_input, 2);
        send(b, buf_.delta, st.send_input, 3);
      }
      b.post(in_reqs[s]);
    };
    auto post_results = [&](int t) {
      const RankStep st = schedule_.backward(x, t);
      const int r = t % 2, s = t % 2;
      Batch b(comm_, rec_);
      // The gradients were just computed, and slot r was last read by step t-2's addition.
      if (st.send_result.active() || st.recv_result.active()) comm_.depend_on(compute_);
      if (st.send_result.kind == PayloadKind::GradKV) {
        send(b, buf_.sdk[s], st.send_result, 0);
        send(b, buf_.sdv[s], st.send_result, 1);
      } else if (st.send_result.kind == PayloadKind::GradQ) {
        send(b, buf_.sdq[s], st.send_result, 0);
      }
      res_info[r] = st.recv_result;
      if (st.recv_result.kind == PayloadKind::GradKV) {
        recv(b, buf_.rdk[r], st.recv_result, 0);
        recv(b, buf_.rdv[r], st.recv_result, 1);
      } else if (st.recv_result.kind == PayloadKind::GradQ) {
        recv(b, buf_.rdq[r], st.recv_result, 0);
      }
      b.post(res_reqs[r]);
    };
    auto add_result = [&](int t) {
      if (t < 0) return;
      const int r = t % 2;
      rec_.wait_on(res_reqs[r], res_info[r].active());
      if (!res_info[r].active()) return;
      if (res_info[r].kind == PayloadKind::GradKV) {
        const Impl::RowSpan rows = travelling_rows(res_info[r]);
        Impl::add4(compute_, rows.tokens(buf_.rdk[r]), rows.tokens(buf_.gk), "DistAttn::ring_bwd.add_dk");
        Impl::add4(compute_, rows.tokens(buf_.rdv[r]), rows.tokens(buf_.gv), "DistAttn::ring_bwd.add_dv");
      } else {
        Impl::add4(compute_, buf_.rdq[r], buf_.gq, "DistAttn::ring_bwd.add_dq");
      }
      res_info[r] = Transfer{};
      rec_.merged();
    };

    rec_.step();
    if (nsteps > 1) post_inputs(1);
    if (const auto own = schedule_.backward(x, 0).compute) backward_task(*own, Transfer{}, q, k, v, dout, lse, 0);
    for (int t = 1; t < nsteps; ++t) {
      rec_.step();
      if (t + 1 < nsteps) post_inputs(t + 1);
      const RankStep st = schedule_.backward(x, t);
      const int s       = t % 2;
      rec_.wait_on(in_reqs[s], st.recv_input.active());
      if (st.compute) backward_task(*st.compute, st.recv_input, q, k, v, dout, lse, s);
      post_results(t);
      add_result(t - 1);
    }
    add_result(nsteps - 1);
    rec_.end_steps();
    Impl::convert4(compute_, buf_.gq, dq, "DistAttn::ring_bwd.dq");
    Impl::convert4(compute_, buf_.gk, dk, "DistAttn::ring_bwd.dk");
    Impl::convert4(compute_, buf_.gv, dv, "DistAttn::ring_bwd.dv");
  }

  /// One task's blocks: query gradients into the rank's own dq or a fresh GradQ in
  /// send slot s, key gradients into its own dk, dv or a fresh GradKV in slot s.
  void backward_task(const ComputeTask& task, const Transfer& in, const CView& q, const CView& k, const CView& v,
                     const CView& dout, const CStats& lse, int s) {
    const bool oq      = task.own_query;
    const CView qq     = oq ? q : CView(buf_.qbuf[s]);
    const CView dd     = oq ? dout : CView(buf_.dobuf[s]);
    const CStats ll    = oq ? lse : CStats(buf_.lsebuf[s]);
    const StatView del = oq ? buf_.delta : buf_.delbuf[s];
    const AccView gq   = oq ? buf_.gq : buf_.sdq[s];
    const CView kk     = task.own_kv ? k : CView(buf_.kbuf[s]);
    const CView vv     = task.own_kv ? v : CView(buf_.vbuf[s]);
    const AccView gk = task.own_kv ? buf_.gk : buf_.sdk[s], gv = task.own_kv ? buf_.gv : buf_.sdv[s];
    if (!task.own_kv) {
      Kokkos::deep_copy(compute_, gk, Acc(0));
      Kokkos::deep_copy(compute_, gv, Acc(0));
    }
    if (!oq) Kokkos::deep_copy(compute_, gq, Acc(0));
    for_each_block(task, in, [&](const PieceBlock& blk, auto qr, auto kr) {
      rec_.timed([&] {
        attention_bwd_update(compute_, qr.tokens(qq), kr.tokens(kk), kr.tokens(vv), qr.tokens(dd), qr.stats(ll),
                             qr.stats(del), qr.tokens(gq), kr.tokens(gk), kr.tokens(gv), task_options(blk.mask));
      });
    });
  }

  /// What every rank must agree on; `pass` catches a rank calling forward while another calls backward.
  std::vector<Impl::ConfigField> config(int pass) const {
    return construction_fields(B_, c_, H_, Hkv_, D_, opts_) + std::vector<Impl::ConfigField>{{"pass", pass}};
  }
  static std::vector<Impl::ConfigField> construction_fields(int batch, int chunk, int heads, int kv_heads,
                                                            int head_dim, const RingOptions& opts) {
    return Impl::executor_fields<T>(batch, {"chunk", chunk}, heads, kv_heads, head_dim, Impl::enum_field("kind", opts.kind),
                                    opts);
  }
  /// Every check a rank's constructor arguments can fail, run inside the
  /// construction agreement (nothing may throw before it).
  static void check_construction(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                 const RingOptions& opts) {
    constexpr const char* where = "DistAttn::RingAttention";
    DISTATTN_REQUIRE(batch > 0 && chunk > 0 && heads > 0 && kv_heads > 0 && head_dim > 0, where,
                     "extents must be positive (batch=" << batch << ", chunk=" << chunk << ", heads=" << heads
                                                        << ", kv_heads=" << kv_heads << ", head_dim=" << head_dim
                                                        << ")");
    Impl::check_heads(where, heads, kv_heads, opts.head_group);
    check_shared_options(where, opts, std::int64_t(P) * chunk);
    DISTATTN_REQUIRE(opts.causal || opts.kind == RingKind::Zigzag, where,
                     "RingOptions::causal = false needs RingKind::Zigzag: the " << to_string(opts.kind)
                         << " schedule skips every block above the diagonal, so it computes causal attention only");
    schedule_for(P, chunk, opts);  // the layout and the schedule check their own arguments
  }

  template <class QV, class KV, class VV>
  void check_inputs(const char* where, const QV& q, const KV& k, const VV& v) const {
    Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
    Impl::check_executor_extents(where, q, k, B_, c_, H_, Hkv_, D_);
  }

  /// f(block, q_rows, k_rows) for the task's blocks. K/V that arrived as part of a
  /// chunk (`in`, a masked schedule's rows) narrow each block's keys to the rows
  /// that came, with the mask moved along: the rest of the slot holds stale data.
  template <class F>
  void for_each_block(const ComputeTask& task, const Transfer& in, F&& f) const {
    const auto blocks = layout_.blocks(task, opts_.mask_rule(), kernel_rule());
    if (task.own_kv || in.whole()) {
      Impl::for_each_piece_block(layout_.pieces(), layout_.piece_len(), blocks, std::forward<F>(f));
      return;
    }
    const std::int64_t len = layout_.piece_len();
    for (PieceBlock blk : blocks) {
      const std::int64_t begin = std::max(in.rows_begin, blk.k_piece * len);
      const std::int64_t end   = std::min(in.rows_end, (blk.k_piece + 1) * len);
      if (begin >= end) continue;  // the schedule's rows hold every key the block allows
      blk.mask.k.offset += (begin - blk.k_piece * len) * blk.mask.k.stride;
      const Impl::RowSpan keys{begin, end};
      if (layout_.pieces() == 1) f(blk, Impl::AllRows{}, keys);
      else f(blk, Impl::RowPiece{blk.q_piece, len}, keys);
    }
  }
  /// The rows of a chunk a transfer carries.
  Impl::RowSpan travelling_rows(const Transfer& tr) const {
    return tr.whole() ? Impl::RowSpan{0, c_} : Impl::RowSpan{tr.rows_begin, tr.rows_end};
  }

  /// The options' mask with its documents read where the kernels run.
  Mask kernel_rule() const { return kdocs_.for_kernels(opts_.mask_rule()); }
  AttnOptions task_options(const Mask& mask) const { return opts_.attn.for_task(mask); }

  static int tag(const Transfer& tr, int part) { return Impl::message_tag(int(tr.kind), tr.step, part); }

  using Batch = Impl::RecordedBatch<CommSpace, Exec, Impl::PassRecorder<Exec, RingStats>>;

  /// A token tensor travels whole, or as the transfer's rows: one contiguous
  /// message per batch element (same tag, matched in order).
  template <class V>
  static void recv(Batch& b, const V& view, const Transfer& tr, int part) {
    if constexpr (V::rank == 4) {
      if (!tr.whole()) {
        for (std::size_t i = 0; i < view.extent(0); ++i) b.recv(batch_rows(view, i, tr), tr.peer, tag(tr, part), tr.kind);
        return;
      }
    }
    b.recv(view, tr.peer, tag(tr, part), tr.kind);
  }
  template <class V>
  static void send(Batch& b, const V& view, const Transfer& tr, int part) {
    if constexpr (V::rank == 4) {
      if (!tr.whole()) {
        for (std::size_t i = 0; i < view.extent(0); ++i) b.send(batch_rows(view, i, tr), tr.peer, tag(tr, part), tr.kind);
        return;
      }
    }
    b.send(view, tr.peer, tag(tr, part), tr.kind);
  }
  template <class V>
  static auto batch_rows(const V& view, std::size_t i, const Transfer& tr) {
    return Kokkos::subview(view, i, std::make_pair(tr.rows_begin, tr.rows_end), Kokkos::ALL, Kokkos::ALL);
  }
  void begin_pass(const char* pass) {
    // Inputs were produced on the caller's instance; our sends read them.
    comm_.depend_on(compute_);
    RingStats fresh;
    fresh.steps = schedule_.num_steps();
    rec_.begin(fresh, pass);
  }
  void end_pass() { rec_.end("DistAttn::RingAttention: pass done"); }

  using Buffers = RingBuffers<T, Acc, Mem>;

  /// The schedule every rank derives from the agreed options: the mask removes the
  /// tasks it empties and their transfers (communication follows the mask).
  static RingSchedule schedule_for(int P, int chunk, const RingOptions& opts) {
    return RingSchedule(RingLayout(P, chunk, opts.kind), opts.mask_rule());
  }

  const MemoryLayout& layout_of(const MemoryPlan& p, Pass pass) const {
    return pass == Pass::Forward ? p.forward : p.backward;
  }
  MemoryPlan plan_for(int group) const {
    RingOptions o = opts_;
    o.head_group  = group;
    return memory_plan(comm_.size(), B_, c_, H_, Hkv_, D_, o);
  }
  /// Inside the entry agreement: the most kv heads per pass whose workspace this
  /// rank can hold (ExecutorOptions::head_group when set; all when they fit). When
  /// not even the smallest group fits, it fails every rank with the need.
  int choose_group(const char* where, Pass pass) const {
    return Impl::choose_head_group<Mem>(where, pass == Pass::Forward ? "forward" : "backward", Hkv_, opts_.head_group,
                                        ws_.held(), opts_.memory_limit_bytes, c_, layout_.pieces(), comm_.size(),
                                        [&](int g) { return layout_of(plan_for(g), pass); },
                                        [&](int g) { return std::max(ws_.held(), layout_of(plan_for(g), pass).total()); });
  }
  /// Points buf_ at the workspace in the layout of `pass` over `group` kv heads
  /// (growing it if needed; forward's and backward's layouts overlap).
  int use_workspace(Pass pass, int group) {
    if (carved_pass_ == int(pass) && carved_group_ == group) return group;
    const RingShape s = RingShape::of(schedule_, B_, c_, H_, Hkv_, D_, group);
    ws_.carve("DistAttn::ring.workspace", [&](Impl::Carver<Mem>& c) {
      pass == Pass::Forward ? buf_.lay_out_forward(c, s) : buf_.lay_out_backward(c, s);
    });
    carved_pass_  = int(pass);
    carved_group_ = group;
    return group;
  }
  /// One head group of q, k, v into the group's contiguous buffers.
  void copy_group(const std::array<CView, 3>& in, std::pair<int, int> qh, std::pair<int, int> kh) {
    Kokkos::deep_copy(compute_, buf_.qg, Impl::head_range(in[0], qh));
    Kokkos::deep_copy(compute_, buf_.kg, Impl::head_range(in[1], kh));
    Kokkos::deep_copy(compute_, buf_.vg, Impl::head_range(in[2], kh));
  }

  Comm& comm_;
  Exec compute_;
  int B_, c_, H_, Hkv_, D_;
  RingOptions opts_;
  Impl::KernelDocuments<Mem> kdocs_{opts_.documents};
  Impl::EntryAgreement<CommSpace, Exec> agree_;
  Impl::StagedQKV<T, Mem> staged_{"DistAttn::ring"};
  Impl::StagedInput<T, Mem> stage_do_;
  Impl::StagedInput<Acc, Mem> stage_lse_;
  RingSchedule schedule_;
  RingLayout layout_;
  Impl::PassRecorder<Exec, RingStats> rec_;

  MemoryPlan plan_;
  Impl::Workspace<Mem> ws_;
  int carved_pass_ = -1, carved_group_ = 0;  // whose layout buf_ holds
  Buffers buf_;
};

}  // namespace DistAttn
