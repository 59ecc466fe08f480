#pragma once
/// @file ring/ring_attention.hpp
/// DistFlashAttn executor: runs a RingSchedule (vanilla ring, the balanced helper
/// schedule or the zigzag assignment, any P) on a Communicator, forward and
/// backward (SPEC §2).
///
/// Token layout (what each rank passes in and gets back), chunk = c tokens per rank:
///  - Vanilla, Balanced: rank x holds positions [x*c, (x+1)*c).
///  - Zigzag: the sequence is cut into 2P half-chunks of c/2 tokens; rank x holds
///    half-chunk x in local rows [0, c/2) and half-chunk 2P-1-x in rows [c/2, c)
///    (c must be even).
///
/// Masking: causal by default (RingOptions::causal), from global positions. Full
/// (non-causal) attention needs a ring that visits every chunk: RingKind::Zigzag
/// supports it; the vanilla and balanced schedules skip every block above the
/// diagonal by construction and reject causal = false.
///
/// Padding (the caller's job): a global length N that P does not divide is padded
/// at the END to P*ceil(N/P) (for zigzag, to a multiple of 2P). With causal
/// attention padded keys come after every real query, so real outputs are exact;
/// give padded rows dO = 0 in backward. With full attention padded keys would enter
/// every row: N must then fill the chunks exactly.
///
/// Arguments: q, k, v and dO must have element type T and live in memory Exec can
/// access (checked at compile time). Any layout is accepted: row-major contiguous
/// Views ([batch, seq, heads, head_dim], LayoutRight) are used in place; others
/// (LayoutLeft, the default for CUDA memory, or strided subviews) are copied into
/// row-major staging buffers with Kokkos::deep_copy, which costs one copy and the
/// memory of that tensor. o, LSE ([batch, heads, seq]), dq, dk, dv may have any
/// layout. Every pass first checks its arguments on each rank and agrees on the
/// outcome with all peers before posting a message (impl/executor_inputs.hpp), so a
/// bad argument anywhere raises InvalidArgument on every rank, and ranks built
/// with different extents or options are reported instead of hanging. forward() and
/// backward() are collective over the communicator.
///
/// Overlap (SPEC §2.5): step t+1's inputs are posted on the communicator's
/// instance before step t's tile runs on the compute instance; receives land in
/// one of two slots; a helper's result is sent as soon as it is computed and merged
/// by its owner one step later (merges commute, SPEC §2.3.4). The compute instance
/// waits on requests with Request::wait(compute) — no device-wide synchronize.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/comm/p2p_batch.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/impl/executor_inputs.hpp>
#include <DistAttn/impl/pass_recorder.hpp>
#include <DistAttn/impl/tensor_ops.hpp>
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

  /// @param comm    ranks of the sequence-parallel group; its exec() carries the transfers
  /// @param compute instance the tiles run on (another stream than comm.exec() on GPUs)
  RingAttention(Comm& comm, const Exec& compute, int batch, int chunk, int heads, int kv_heads, int head_dim,
                const RingOptions& opts = {})
      : comm_(comm), compute_(compute), B_(batch), c_(chunk), H_(heads), Hkv_(kv_heads), D_(head_dim),
        opts_(opts), schedule_(comm.size(), opts.kind), layout_(comm.size(), chunk, opts.kind), rec_(compute, opts) {
    constexpr const char* where = "DistAttn::RingAttention";
    DISTATTN_REQUIRE(batch > 0 && chunk > 0 && heads > 0 && kv_heads > 0 && head_dim > 0, where,
                     "extents must be positive (batch=" << batch << ", chunk=" << chunk << ", heads=" << heads
                                                        << ", kv_heads=" << kv_heads << ", head_dim=" << head_dim
                                                        << ")");
    DISTATTN_REQUIRE(heads % kv_heads == 0, where,
                     "heads (" << heads << ") not divisible by kv_heads (" << kv_heads << ")");
    DISTATTN_REQUIRE(opts.recv_delay_ms >= 0, where, "recv_delay_ms must be >= 0");
    DISTATTN_REQUIRE(opts.causal || opts.kind == RingKind::Zigzag, where,
                     "RingOptions::causal = false needs RingKind::Zigzag: the " << to_string(opts.kind)
                         << " schedule skips every block above the diagonal, so it computes causal attention only");
  }

  const RingSchedule& schedule() const { return schedule_; }
  /// Which global positions each rank's rows hold.
  const RingLayout& layout() const { return layout_; }
  const RingStats& stats() const { return rec_.stats(); }
  int chunk() const { return c_; }

  /// O and LSE ([B, H, chunk], accumulation type) of this rank's query chunk.
  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::RingAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(comm_, where, config(0), [&] {
      check_inputs(where, q, k, v);
      Impl::check_same4(where, "q", q, "o", o);
      Impl::check_stats(where, "lse", lse, q.extent(0), q.extent(2), q.extent(1));
      if (opts_.attn.check_finite) Impl::check_finite_qkv(compute_, where, q, k, v);
    });
    run_forward(stage_q_.get(compute_, q, "DistAttn::ring.q_staged"),
                stage_k_.get(compute_, k, "DistAttn::ring.k_staged"),
                stage_v_.get(compute_, v, "DistAttn::ring.v_staged"), o, lse);
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
    });
    run_backward(stage_q_.get(compute_, q, "DistAttn::ring.q_staged"),
                 stage_k_.get(compute_, k, "DistAttn::ring.k_staged"),
                 stage_v_.get(compute_, v, "DistAttn::ring.v_staged"), o,
                 stage_do_.get(compute_, dout, "DistAttn::ring.do_staged"),
                 stage_lse_.get_stats(compute_, lse, "DistAttn::ring.lse_staged"), dq, dk, dv);
  }

 private:
  using CView  = Impl::ConstView4<T, Mem>;
  using CStats = Impl::ConstView3<Acc, Mem>;

  template <class OV, class LV>
  void run_forward(const CView& q, const CView& k, const CView& v, const OV& o, const LV& lse) {
    ensure_forward_workspace();
    begin_pass();
    const int x = comm_.rank(), nsteps = schedule_.num_steps();
    reset_state(compute_, own_);
    // Inputs need two slots (step t computes while t+1 arrives); results need
    // three (t-1 awaits its merge while t and t+1 travel).
    std::array<std::vector<Req>, 2> in_reqs;
    std::array<std::vector<Req>, 3> res_reqs;
    std::array<bool, 3> res_pending{false, false, false};

    // One group per phase: every input of step t, then (after step t's tile)
    // every result of step t. Each rank's communicator sees the same sequence of
    // groups, so NCCL's in-order matching cannot deadlock.
    auto post_inputs = [&](int t) {
      const RankStep st = schedule_.forward(x, t);
      comm_.depend_on(compute_);  // slot t%2 was last read by the tile of step t-2
      const int s = t % 2;
      Batch b(comm_);
      if (st.recv_input.kind == PayloadKind::KV) {
        recv(b, kbuf_[s], st.recv_input, 0);
        recv(b, vbuf_[s], st.recv_input, 1);
      } else if (st.recv_input.active()) {
        recv(b, qbuf_[s], st.recv_input, 0);
      }
      if (st.send_input.kind == PayloadKind::KV) {
        send(b, k, st.send_input, 0);
        send(b, v, st.send_input, 1);
      } else if (st.send_input.active()) {
        send(b, q, st.send_input, 0);
      }
      post(b, in_reqs[s]);
    };
    auto post_results = [&](int t) {
      const RankStep st = schedule_.forward(x, t);
      const int r = t % 3;
      Batch b(comm_);
      if (st.send_result.active()) {
        comm_.depend_on(compute_);  // the partial was just computed
        const int s = t % 2;
        send(b, spart_[s].acc, st.send_result, 0);
        send(b, spart_[s].m, st.send_result, 1);
        send(b, spart_[s].l, st.send_result, 2);
      }
      if (st.recv_result.active()) {
        recv(b, rpart_[r].acc, st.recv_result, 0);
        recv(b, rpart_[r].m, st.recv_result, 1);
        recv(b, rpart_[r].l, st.recv_result, 2);
        res_pending[r] = true;
      }
      post(b, res_reqs[r]);
    };
    // Waits for step t's result group (its send leaves the slot free, its
    // receive is merged): one step after it was posted.
    auto merge_result = [&](int t) {
      if (t < 0) return;
      const int r = t % 3;
      wait_all_on(res_reqs[r], res_pending[r]);
      if (!res_pending[r]) return;
      attention_merge(compute_, own_, rpart_[r]);
      res_pending[r] = false;
      rec_.merged();
    };

    if (nsteps > 1) post_inputs(1);
    if (zigzag()) {
      reset_state(compute_, own_z_[0]);
      reset_state(compute_, own_z_[1]);
      zigzag_fwd(x, x, q, k, v);
    } else {
      timed([&] {
        AttnOptions ao = task_options(schedule_.forward(x, 0).compute->mask(c_));
        attention_fwd_update(compute_, q, k, v, own_, ao);
      });
    }
    for (int t = 1; t < nsteps; ++t) {
      if (t + 1 < nsteps) post_inputs(t + 1);
      const RankStep st = schedule_.forward(x, t);
      const int s       = t % 2;
      wait_all_on(in_reqs[s], st.recv_input.active());
      if (st.compute) {
        const ComputeTask& task = *st.compute;
        const AttnOptions ao    = task_options(task.mask(c_));
        if (zigzag()) {
          zigzag_fwd(x, task.k_chunk, q, kbuf_[s], vbuf_[s]);
        } else if (task.own_query) {
          timed([&] { attention_fwd_update(compute_, q, kbuf_[s], vbuf_[s], own_, ao); });
        } else {
          reset_state(compute_, spart_[s]);
          timed([&] { attention_fwd_update(compute_, qbuf_[s], k, v, spart_[s], ao); });
        }
      }
      post_results(t);
      merge_result(t - 1);  // the partial produced at step t-1 has had a step to travel
    }
    merge_result(nsteps - 1);
    if (zigzag()) {
      for (int a = 0; a < 2; ++a) attention_finalize(compute_, own_z_[a], half(o, a), half_stats(lse, a));
    } else {
      attention_finalize(compute_, own_, o, lse);
    }
    end_pass();
  }

  template <class OV, class DQV, class DKV, class DVV>
  void run_backward(const CView& q, const CView& k, const CView& v, const OV& o, const CView& dout,
                    const CStats& lse, const DQV& dq, const DKV& dk, const DVV& dv) {
    ensure_backward_workspace();
    begin_pass();
    const int x = comm_.rank(), nsteps = schedule_.num_steps();
    attention_bwd_delta(compute_, o, dout, delta_);
    Kokkos::deep_copy(compute_, gq_, Acc(0));
    Kokkos::deep_copy(compute_, gk_, Acc(0));
    Kokkos::deep_copy(compute_, gv_, Acc(0));
    std::array<std::vector<Req>, 2> in_reqs;
    std::array<std::vector<Req>, 3> res_reqs;
    std::array<Transfer, 3> res_info{};

    auto post_inputs = [&](int t) {
      const RankStep st = schedule_.backward(x, t);
      comm_.depend_on(compute_);
      const int s = t % 2;
      Batch b(comm_);
      if (st.recv_input.kind == PayloadKind::KV) {
        recv(b, kbuf_[s], st.recv_input, 0);
        recv(b, vbuf_[s], st.recv_input, 1);
      } else if (st.recv_input.active()) {
        recv(b, qbuf_[s], st.recv_input, 0);
        recv(b, dobuf_[s], st.recv_input, 1);
        recv(b, lsebuf_[s], st.recv_input, 2);
        recv(b, delbuf_[s], st.recv_input, 3);
      }
      if (st.send_input.kind == PayloadKind::KV) {
        send(b, k, st.send_input, 0);
        send(b, v, st.send_input, 1);
      } else if (st.send_input.active()) {
        send(b, q, st.send_input, 0);
        send(b, dout, st.send_input, 1);
        send(b, lse, st.send_input, 2);
        send(b, delta_, st.send_input, 3);
      }
      post(b, in_reqs[s]);
    };
    auto post_results = [&](int t) {
      const RankStep st = schedule_.backward(x, t);
      const int r = t % 3, s = t % 2;
      Batch b(comm_);
      if (st.send_result.active()) comm_.depend_on(compute_);
      if (st.send_result.kind == PayloadKind::GradKV) {
        send(b, sdk_[s], st.send_result, 0);
        send(b, sdv_[s], st.send_result, 1);
      } else if (st.send_result.kind == PayloadKind::GradQ) {
        send(b, sdq_[s], st.send_result, 0);
      }
      res_info[r] = st.recv_result;
      if (st.recv_result.kind == PayloadKind::GradKV) {
        recv(b, rdk_[r], st.recv_result, 0);
        recv(b, rdv_[r], st.recv_result, 1);
      } else if (st.recv_result.kind == PayloadKind::GradQ) {
        recv(b, rdq_[r], st.recv_result, 0);
      }
      post(b, res_reqs[r]);
    };
    auto add_result = [&](int t) {
      if (t < 0) return;
      const int r = t % 3;
      wait_all_on(res_reqs[r], res_info[r].active());
      if (!res_info[r].active()) return;
      if (res_info[r].kind == PayloadKind::GradKV) {
        Impl::add4(compute_, rdk_[r], gk_, "DistAttn::ring_bwd.add_dk");
        Impl::add4(compute_, rdv_[r], gv_, "DistAttn::ring_bwd.add_dv");
      } else {
        Impl::add4(compute_, rdq_[r], gq_, "DistAttn::ring_bwd.add_dq");
      }
      res_info[r] = Transfer{};
      rec_.merged();
    };

    if (nsteps > 1) post_inputs(1);
    if (zigzag()) {
      zigzag_bwd(x, x, q, k, v, dout, lse, gk_, gv_);
    } else {
      timed([&] {
        AttnOptions ao = task_options(schedule_.backward(x, 0).compute->mask(c_));
        attention_bwd_update(compute_, q, k, v, dout, lse, delta_, gq_, gk_, gv_, ao);
      });
    }
    for (int t = 1; t < nsteps; ++t) {
      if (t + 1 < nsteps) post_inputs(t + 1);
      const RankStep st = schedule_.backward(x, t);
      const int s       = t % 2;
      wait_all_on(in_reqs[s], st.recv_input.active());
      if (st.compute) {
        const ComputeTask& task = *st.compute;
        const AttnOptions ao    = task_options(task.mask(c_));
        if (task.own_query) {
          Kokkos::deep_copy(compute_, sdk_[s], Acc(0));
          Kokkos::deep_copy(compute_, sdv_[s], Acc(0));
          if (zigzag()) {
            zigzag_bwd(x, task.k_chunk, q, kbuf_[s], vbuf_[s], dout, lse, sdk_[s], sdv_[s]);
          } else {
            timed([&] {
              attention_bwd_update(compute_, q, kbuf_[s], vbuf_[s], dout, lse, delta_, gq_, sdk_[s], sdv_[s], ao);
            });
          }
        } else {
          Kokkos::deep_copy(compute_, sdq_[s], Acc(0));
          timed([&] {
            attention_bwd_update(compute_, qbuf_[s], k, v, dobuf_[s], lsebuf_[s], delbuf_[s], sdq_[s], gk_, gv_, ao);
          });
        }
      }
      post_results(t);
      add_result(t - 1);
    }
    add_result(nsteps - 1);
    Impl::convert4(compute_, gq_, dq, "DistAttn::ring_bwd.dq");
    Impl::convert4(compute_, gk_, dk, "DistAttn::ring_bwd.dk");
    Impl::convert4(compute_, gv_, dv, "DistAttn::ring_bwd.dv");
    end_pass();
  }

  /// What every rank must agree on; `pass` catches a rank calling forward while another calls backward.
  std::vector<Impl::ConfigField> config(int pass) const {
    return {{"batch", B_},          {"chunk", c_},
            {"heads", H_},          {"kv_heads", Hkv_},
            {"head_dim", D_},       {"kind", int(opts_.kind)},
            {"causal", opts_.causal}, {"element_bytes", std::int64_t(sizeof(T))},
            {"pass", pass}};
  }

  template <class QV, class KV, class VV>
  void check_inputs(const char* where, const QV& q, const KV& k, const VV& v) const {
    Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
    Impl::check_executor_extents(where, q, k, B_, c_, H_, Hkv_, D_);
  }

  bool zigzag() const { return opts_.kind == RingKind::Zigzag; }

  // Zigzag: local rows [0, c/2) are global half-chunk `rank`, rows [c/2, c) are
  // half-chunk 2P-1-rank. A block between two ranks' data is up to four
  // half-blocks; each is skipped, unmasked or causal by its half-chunk ids.
  template <class V>
  auto half(const V& v, int a) const {
    const int h = c_ / 2;
    return Kokkos::subview(v, Kokkos::ALL, std::make_pair(a * h, (a + 1) * h), Kokkos::ALL, Kokkos::ALL);
  }
  template <class V>
  auto half_stats(const V& v, int a) const {
    const int h = c_ / 2;
    return Kokkos::subview(v, Kokkos::ALL, Kokkos::ALL, std::make_pair(a * h, (a + 1) * h));
  }
  template <class F>
  void for_each_half_block(int qrank, int krank, F&& f) const {
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        if (!opts_.causal) {
          f(a, b, Mask::none());
          continue;
        }
        const std::int64_t qb = layout_.block_of(qrank, a), kb = layout_.block_of(krank, b);
        if (kb > qb) continue;  // every key after every query
        f(a, b, kb == qb ? Mask::causal(layout_.piece(qrank, a), layout_.piece(krank, b)) : Mask::none());
      }
  }
  template <class QV, class KV, class VV>
  void zigzag_fwd(int qrank, int krank, const QV& q, const KV& k, const VV& v) {
    for_each_half_block(qrank, krank, [&](int a, int b, const Mask& m) {
      timed([&] { attention_fwd_update(compute_, half(q, a), half(k, b), half(v, b), own_z_[a], task_options(m)); });
    });
  }
  template <class QV, class KV, class VV, class DOV, class LV, class GK>
  void zigzag_bwd(int qrank, int krank, const QV& q, const KV& k, const VV& v, const DOV& dout, const LV& lse,
                  const GK& dk, const GK& dv) {
    for_each_half_block(qrank, krank, [&](int a, int b, const Mask& m) {
      timed([&] {
        attention_bwd_update(compute_, half(q, a), half(k, b), half(v, b), half(dout, a), half_stats(lse, a),
                             half_stats(delta_, a), half(gq_, a), half(dk, b), half(dv, b), task_options(m));
      });
    });
  }

  AttnOptions task_options(const Mask& mask) const {
    AttnOptions ao  = opts_.attn.with_mask(mask);
    ao.check_finite = false;
    return ao;
  }

  static int tag(const Transfer& tr, int part) { return Impl::message_tag(int(tr.kind), tr.step, part); }

  using Batch = P2PBatch<CommSpace, Exec>;

  template <class V>
  void recv(Batch& b, const V& view, const Transfer& tr, int part) {
    if (rec_.skip_transfers()) return;
    b.recv(view, tr.peer, tag(tr, part));
    rec_.received(tr.kind, view.span() * sizeof(typename V::value_type));
  }
  template <class V>
  void send(Batch& b, const V& view, const Transfer& tr, int part) {
    if (rec_.skip_transfers()) return;
    b.send(view, tr.peer, tag(tr, part));
    rec_.sent(tr.kind, view.span() * sizeof(typename V::value_type));
  }
  void post(Batch& b, std::vector<Req>& reqs) {
    if (b.empty()) return;
    reqs.push_back(b.post());
    rec_.posted();
  }
  void wait_all_on(std::vector<Req>& reqs, bool has_receive) { rec_.wait_on(reqs, has_receive); }
  template <class F>
  void timed(F&& f) {
    rec_.timed(std::forward<F>(f));
  }
  void begin_pass() {
    // Inputs were produced on the caller's instance; our sends read them.
    comm_.depend_on(compute_);
    RingStats fresh;
    fresh.steps = schedule_.num_steps();
    rec_.begin(fresh);
  }
  void end_pass() { rec_.end("DistAttn::RingAttention: pass done"); }

  void ensure_forward_workspace() {
    if (fwd_ready_) return;
    own_ = make_state<Acc>(compute_, B_, c_, H_, D_, "DistAttn::ring.state");
    if (zigzag())
      for (int a = 0; a < 2; ++a) own_z_[a] = make_state<Acc>(compute_, B_, c_ / 2, H_, D_, "DistAttn::ring.state_half");
    for (int s = 0; s < 2; ++s) {
      alloc_kv(s);
      if (qbuf_[s].size() == 0) qbuf_[s] = TView("DistAttn::ring.q_slot", B_, c_, H_, D_);
      spart_[s] = make_state<Acc>(compute_, B_, c_, H_, D_, "DistAttn::ring.partial_send");
    }
    for (int r = 0; r < 3; ++r) rpart_[r] = make_state<Acc>(compute_, B_, c_, H_, D_, "DistAttn::ring.partial_recv");
    fwd_ready_ = true;
  }
  void ensure_backward_workspace() {
    if (bwd_ready_) return;
    delta_ = StatView("DistAttn::ring.delta", B_, H_, c_);
    gq_    = AccView("DistAttn::ring.dq", B_, c_, H_, D_);
    gk_    = AccView("DistAttn::ring.dk", B_, c_, Hkv_, D_);
    gv_    = AccView("DistAttn::ring.dv", B_, c_, Hkv_, D_);
    for (int s = 0; s < 2; ++s) {
      alloc_kv(s);
      if (qbuf_[s].size() == 0) qbuf_[s] = TView("DistAttn::ring.q_slot", B_, c_, H_, D_);
      dobuf_[s]  = TView("DistAttn::ring.do_slot", B_, c_, H_, D_);
      lsebuf_[s] = StatView("DistAttn::ring.lse_slot", B_, H_, c_);
      delbuf_[s] = StatView("DistAttn::ring.delta_slot", B_, H_, c_);
      sdk_[s]    = AccView("DistAttn::ring.dk_send", B_, c_, Hkv_, D_);
      sdv_[s]    = AccView("DistAttn::ring.dv_send", B_, c_, Hkv_, D_);
      sdq_[s]    = AccView("DistAttn::ring.dq_send", B_, c_, H_, D_);
    }
    for (int r = 0; r < 3; ++r) {
      rdk_[r] = AccView("DistAttn::ring.dk_recv", B_, c_, Hkv_, D_);
      rdv_[r] = AccView("DistAttn::ring.dv_recv", B_, c_, Hkv_, D_);
      rdq_[r] = AccView("DistAttn::ring.dq_recv", B_, c_, H_, D_);
    }
    bwd_ready_ = true;
  }
  void alloc_kv(int s) {
    if (kbuf_[s].size() != 0) return;
    kbuf_[s] = TView("DistAttn::ring.k_slot", B_, c_, Hkv_, D_);
    vbuf_[s] = TView("DistAttn::ring.v_slot", B_, c_, Hkv_, D_);
  }

  Comm& comm_;
  Exec compute_;
  int B_, c_, H_, Hkv_, D_;
  RingOptions opts_;
  Impl::EntryAgreement<CommSpace, Exec> agree_;
  Impl::StagedInput<T, Mem> stage_q_, stage_k_, stage_v_, stage_do_;
  Impl::StagedInput<Acc, Mem> stage_lse_;
  RingSchedule schedule_;
  RingLayout layout_;
  Impl::PassRecorder<Exec, RingStats> rec_;

  bool fwd_ready_ = false, bwd_ready_ = false;
  State own_;
  std::array<State, 2> own_z_;
  std::array<TView, 2> kbuf_, vbuf_, qbuf_, dobuf_;
  std::array<StatView, 2> lsebuf_, delbuf_;
  std::array<State, 2> spart_;
  std::array<State, 3> rpart_;
  StatView delta_;
  AccView gq_, gk_, gv_;
  std::array<AccView, 2> sdk_, sdv_, sdq_;
  std::array<AccView, 3> rdk_, rdv_, rdq_;
};

}  // namespace DistAttn
