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
#include <DistAttn/ring/impl/ring_blocks.hpp>
#include <DistAttn/ring/impl/ring_construction.hpp>
#include <DistAttn/ring/impl/ring_messages.hpp>
#include <DistAttn/ring/impl/ring_workspace.hpp>
#include <DistAttn/ring/ring_options.hpp>
#include <DistAttn/impl/tensor_ops.hpp>
#include <DistAttn/schedule/ring_buffers.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>

#include <array>
#include <utility>
#include <vector>

namespace DistAttn {

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
                                       Impl::ring_construction_fields<T>(batch, chunk, heads, kv_heads, head_dim, opts),
                                       [&] { Impl::check_ring_construction(comm.size(), batch, chunk, heads, kv_heads, head_dim, opts); })),
        compute_(compute), B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim),
        opts_(opts), schedule_(Impl::ring_schedule_for(comm.size(), chunk, opts)), layout_(comm.size(), chunk, opts.kind),
        rec_(compute, opts) {
    plan_ = ws_.plan(schedule_, opts_.head_group > 0 ? opts_.head_group : Hkv_);
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
  /// Replaces ExecutorOptions::documents between passes (the contract is there).
  void set_documents(std::vector<std::int64_t> offsets) {
    kdocs_.replace(opts_.documents, std::move(offsets));
    // The schedule follows the mask (which blocks and rows travel), and so may the slots.
    schedule_    = Impl::ring_schedule_for(comm_.size(), c_, opts_);
    plan_ = ws_.plan(schedule_, opts_.head_group > 0 ? opts_.head_group : Hkv_);
    ws_.relayout();
  }

  /// Workspace bytes forward and backward allocate on each rank, per buffer.
  /// Head chunking (ExecutorOptions::head_group) plans the group's heads plus its staging copies.
  MemoryPlan memory_plan() const { return plan_; }
  /// kv heads per pass of the last pass (head chunking; 0 before the first pass).
  int kv_heads_per_pass() const { return ws_.group(); }
  /// The same for any extents, without a communicator (P ranks, `chunk` tokens each).
  static MemoryPlan memory_plan(int P, int batch, int chunk, int heads, int kv_heads, int head_dim,
                                const RingOptions& opts = {}) {
    const int g = opts.head_group > 0 ? opts.head_group : kv_heads;
    return Workspace::plan(Impl::ring_schedule_for(P, chunk, opts), batch, chunk, heads, kv_heads, head_dim, g);
  }

  /// O and LSE ([B, H, chunk], accumulation type) of this rank's query chunk.
  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::RingAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(comm_, where, config(0), [&] {
      check_inputs(where, q, k, v);
      Impl::check_fwd_args(compute_, where, q, k, v, o, lse, opts_.attn.check_finite);
      agree_.propose(ws_.choose_group(where, Pass::Forward, schedule_, opts_.head_group, opts_.memory_limit_bytes));
    });
    const int g = ws_.use(Pass::Forward, int(agree_.agreed_minimum()), schedule_);
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
      agree_.propose(ws_.choose_group(where, Pass::Backward, schedule_, opts_.head_group, opts_.memory_limit_bytes));
    });
    const int g = ws_.use(Pass::Backward, int(agree_.agreed_minimum()), schedule_);
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
        Msg::recv(b, st.recv_input, buf_.kbuf[s], buf_.vbuf[s]);
      } else if (st.recv_input.active()) {
        Msg::recv(b, st.recv_input, buf_.qbuf[s]);
      }
      if (st.send_input.kind == PayloadKind::KV) {
        Msg::send(b, st.send_input, k, v);
      } else if (st.send_input.active()) {
        Msg::send(b, st.send_input, q);
      }
      b.post(in_reqs[s]);
    };
    auto post_results = [&](int t) {
      const RankStep st = schedule_.forward(x, t);
      const int r = t % 2;
      Batch b(comm_, rec_);
      // The partial was just computed, and slot r was last read by step t-2's merge.
      if (st.send_result.active() || st.recv_result.active()) comm_.depend_on(compute_);
      if (st.send_result.active()) Msg::send(b, st.send_result, buf_.spart[r].acc, buf_.spart[r].m, buf_.spart[r].l);
      if (st.recv_result.active()) {
        Msg::recv(b, st.recv_result, buf_.rpart[r].acc, buf_.rpart[r].m, buf_.rpart[r].l);
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
        Msg::recv(b, st.recv_input, buf_.kbuf[s], buf_.vbuf[s]);
      } else if (st.recv_input.active()) {
        Msg::recv(b, st.recv_input, buf_.qbuf[s], buf_.dobuf[s], buf_.lsebuf[s], buf_.delbuf[s]);
      }
      if (st.send_input.kind == PayloadKind::KV) {
        Msg::send(b, st.send_input, k, v);
      } else if (st.send_input.active()) {
        Msg::send(b, st.send_input, q, dout, lse, buf_.delta);
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
        Msg::send(b, st.send_result, buf_.sdk[s], buf_.sdv[s]);
      } else if (st.send_result.kind == PayloadKind::GradQ) {
        Msg::send(b, st.send_result, buf_.sdq[s]);
      }
      res_info[r] = st.recv_result;
      if (st.recv_result.kind == PayloadKind::GradKV) {
        Msg::recv(b, st.recv_result, buf_.rdk[r], buf_.rdv[r]);
      } else if (st.recv_result.kind == PayloadKind::GradQ) {
        Msg::recv(b, st.recv_result, buf_.rdq[r]);
      }
      b.post(res_reqs[r]);
    };
    auto add_result = [&](int t) {
      if (t < 0) return;
      const int r = t % 2;
      rec_.wait_on(res_reqs[r], res_info[r].active());
      if (!res_info[r].active()) return;
      if (res_info[r].kind == PayloadKind::GradKV) {
        const Impl::RowSpan rows = Impl::travelling_rows(res_info[r], c_);
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
    return Impl::ring_construction_fields<T>(B_, c_, H_, Hkv_, D_, opts_) + std::vector<Impl::ConfigField>{{"pass", pass}};
  }
  template <class QV, class KV, class VV>
  void check_inputs(const char* where, const QV& q, const KV& k, const VV& v) const {
    Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
    Impl::check_executor_extents(where, q, k, B_, c_, H_, Hkv_, D_);
  }

  template <class F>
  void for_each_block(const ComputeTask& task, const Transfer& in, F&& f) const {
    Impl::for_each_ring_block(layout_, task, in, opts_.mask_rule(), kernel_rule(), std::forward<F>(f));
  }
  /// The options' mask with its documents read where the kernels run.
  Mask kernel_rule() const { return kdocs_.for_kernels(opts_.mask_rule()); }
  AttnOptions task_options(const Mask& mask) const { return opts_.attn.for_task(mask); }

  using Msg   = Impl::RingMessages<CommSpace, Exec, RingStats>;
  using Batch = typename Msg::Batch;

  void begin_pass(const char* pass) {
    // Inputs were produced on the caller's instance; our sends read them.
    comm_.depend_on(compute_);
    RingStats fresh;
    fresh.steps = schedule_.num_steps();
    rec_.begin(fresh, pass);
  }
  void end_pass() { rec_.end("DistAttn::RingAttention: pass done"); }

  using Workspace = Impl::RingWorkspace<T, Mem>;

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
  Workspace ws_{B_, c_, H_, Hkv_, D_};
  typename Workspace::Buffers& buf_ = ws_.buf;
};

}  // namespace DistAttn
