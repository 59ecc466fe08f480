// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file grid2d/grid2d_attention.hpp
/// Attention2D executor (docs/design/attention2d.md): exact attention on an
/// R x C process grid, non-overlapped (NO) and overlapped (O) variants, forward
/// and backward.
///
/// Token layout (docs/design/schedules.md §2): every caller tensor is in the 1D
/// cyclic layout: world rank p = r + R c holds tokens {p + i P : i < N/P} of q, k,
/// v, o, LSE, dO, dq, dk and dv, local row i being token p + i P
/// (TokenLayout::Kind::Cyclic). dk/dv are permuted back from the K_t layout at the
/// end of backward, so the caller never sees K_t. Use to_cyclic/from_cyclic
/// (cyclic_layout.hpp) to switch from/to the contiguous layout of the ring.
///
/// Padding: N must be a multiple of P. For any other N of causal attention,
/// SequencePadding(N, P, TokenLayout::Kind::Cyclic) (schedule/padding.hpp) gives the
/// padded seq_len and which rows are padding (zero them, dO = 0 on them).
///
/// What happens on rank (r, c) (docs/design/attention2d.md has the diagrams):
///
///   forward NO   K_p,V_p --world permute--> K_t,V_t (kept for backward)
///                Q_p --row all-gather--> Qg ; K_t,V_t --col all-gather--> Kg,Vg
///                (Qg vs Kg) one block call -> (acc, m, l) of Qg
///                ring reduce-scatter along the row with AttnFix merges (Alg. 7) -> finalize
///   forward O    permute as NO; fetch Q of column c+1 in the background;
///                column ring of K_t/V_t blocks, each folded into Q_p's state (Alg. 5);
///                row ring: Q blocks of the other columns against Kg, their partial
///                states reduce-scattered along the same ring (Alg. 6); AttnFix; finalize
///   backward NO  row all-gather of (q, dO) and (LSE, Delta); col all-gather K_t/V_t;
///                one backward block call; row reduce-scatter(sum) of dQg; column
///                reduce-scatter(sum) of dKg/dVg; dK_t/dV_t --world permute back--> dk, dv
///   backward O   Algs. 8-11, corrected (attention2d.md decision 7: reduce-scatter dQ and dK/dV;
///                the own block's locally accumulated dK_1/dV_1 is added; dK/dV permuted back)
///
/// Overlap: transfers are posted on the communicators (their exec() instance)
/// before the block call they hide behind runs on `compute`; received data is
/// consumed after Request::wait(compute); slots are double-buffered and
/// comm.depend_on(compute) precedes every post that reuses a slot or sends data
/// produced on `compute`. There is no device-wide synchronize.
///
/// Memory (docs/design/memory.md, grid2d/impl/grid2d_workspace.hpp): memory_plan()
/// lists K_t|V_t and the workspace before anything is allocated, a pass whose
/// growth does not fit fails on every rank at entry, and a pass of a shape seen
/// before allocates nothing.

#include <DistAttn/attention.hpp>
#include <DistAttn/comm.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>
#include <DistAttn/exec/impl/kernel_documents.hpp>
#include <DistAttn/exec/impl/pass_recorder.hpp>
#include <DistAttn/exec/impl/phased_posts.hpp>
#include <DistAttn/grid2d/grid2d_types.hpp>
#include <DistAttn/grid2d/impl/grid2d_buffers.hpp>
#include <DistAttn/grid2d/impl/grid2d_construction.hpp>
#include <DistAttn/grid2d/impl/grid2d_workspace.hpp>
#include <DistAttn/grid2d/impl/kv_transpose.hpp>
#include <DistAttn/impl/head_groups.hpp>
#include <DistAttn/impl/tensor_ops.hpp>
#include <DistAttn/schedule/grid2d_layout.hpp>

#include <array>
#include <memory>
#include <utility>
#include <vector>

namespace DistAttn {

/// @brief Attention2D executor for one (batch, N, heads, kv_heads, head_dim) problem.
/// @tparam T         element type of q, k, v, o, dO (accumulation in accum_t<T>)
/// @tparam CommSpace MpiSpace or NcclSpace
/// @tparam Exec      execution space of the compute instance and the communicators
///
/// The executor keeps K_t, V_t from forward for backward (Alg. 1 line 8,
/// "SaveForBackprop"): backward reuses them only when every rank is given the k
/// and v of its last forward with unchanged content (same Views and the same
/// fingerprint, exec/impl/saved_inputs.hpp), and rebuilds them with one more
/// permutation otherwise (reported as the KvPermute phase of the backward).
/// invalidate_saved_inputs() drops them outright.
template <class T, class CommSpace, class Exec>
class Grid2DAttention {
 public:
  using Acc      = accum_t<T>;
  using Mem      = typename Exec::memory_space;
  using Comm     = Communicator<CommSpace, Exec>;
  using Grid     = ProcessGrid2D<CommSpace, Exec>;
  using Req      = Request<CommSpace>;
  using TView    = Tensor4<T, Mem>;
  using AccView  = Tensor4<Acc, Mem>;

  /// @param grid     R x C process grid (not owned; must outlive the executor)
  /// @param compute  instance the block calls run on (another stream than the communicators' on GPUs)
  /// @param seq_len  global sequence length N; must be a multiple of P = R*C
  Grid2DAttention(Grid& grid, const Exec& compute, int batch, std::int64_t seq_len, int heads, int kv_heads,
                  int head_dim, const Grid2DOptions& opts = {})
      : Grid2DAttention(nullptr, &Impl::agreed_grid<T>(grid, batch, seq_len, heads, kv_heads, head_dim, opts), compute,
                        batch, seq_len, heads, kv_heads, head_dim, opts) {}

  /// Builds (collectively over `world`) and owns an R x C grid. rows = cols = 0
  /// lets choose_grid_shape pick it from P, heads and kv_heads (schedules.md §2.1);
  /// one of them 0 fixes the other side. Like every executor it takes the
  /// communicator as `Comm&` (the grid duplicates it; it need not outlive the executor).
  Grid2DAttention(Comm& world, int rows, int cols, const Exec& compute, int batch, std::int64_t seq_len,
                  int heads, int kv_heads, int head_dim, const Grid2DOptions& opts = {})
      : Grid2DAttention(Impl::make_agreed_grid<T, Grid>(world, rows, cols, batch, seq_len, heads, kv_heads, head_dim, opts),
                        nullptr, compute, batch, seq_len, heads, kv_heads, head_dim, opts) {}

  Grid2DAttention(const Grid2DAttention&)            = delete;
  Grid2DAttention& operator=(const Grid2DAttention&) = delete;

  const Grid2DLayout& layout() const { return layout_; }
  Grid& grid() { return *grid_; }
  GridCoord coords() const { return GridCoord{r_, c_}; }
  int rows() const { return R_; }
  int cols() const { return C_; }
  /// kv heads per pass of the last pass (head chunking; 0 before the first pass).
  int kv_heads_per_pass() const { return ws_.group(); }
  /// Tokens per rank, N/P.
  int shard_len() const { return n_; }
  const Grid2DOptions& options() const { return opts_; }
  /// Instrumentation of the last forward() or backward().
  const Grid2DStats& stats() const { return rec_.stats(); }
  /// The volume-model parameters that describe what this executor sends:
  /// (acc, m, l) partials, LSE + Delta (not O) in the backward gather.
  Grid2DVolumeParams volume_params() const {
    return {H_, Hkv_, D_, /*fwd_stats_per_row=*/2, /*bwd_stats_per_row=*/1, /*bwd_gather_o=*/false};
  }
  /// Forget K_t, V_t saved by forward (the next backward rebuilds them). Not
  /// needed for safety (backward checks k and v's content), but saves that
  /// check's read when the caller knows they changed.
  void invalidate_saved_inputs() { saved_.clear(); }
  /// Replaces ExecutorOptions::documents between passes (the contract is there).
  void set_documents(std::vector<std::int64_t> offsets) {
    kdocs_.replace(opts_.documents, std::move(offsets));
    invalidate_saved_inputs();
  }
  /// Bytes this executor holds now (K_t|V_t and the workspace).
  std::size_t held_bytes() const { return ws_.held(); }

  /// What forward and backward allocate on this rank, per buffer: K_t|V_t, then
  /// the pass's workspace (the executor holds K_t|V_t plus the larger workspace).
  /// Head chunking (ExecutorOptions::head_group) plans the group's heads plus its staging copies.
  MemoryPlan memory_plan() const { return memory_plan(R_, C_, B_, N_, H_, Hkv_, D_, opts_); }
  /// The same for any R x C grid and extents, without a communicator.
  static MemoryPlan memory_plan(int rows, int cols, int batch, std::int64_t seq_len, int heads, int kv_heads,
                                int head_dim, const Grid2DOptions& opts = {}) {
    return Impl::Grid2DWorkspace<T, Mem>::plan({rows, cols, batch, seq_len, heads, kv_heads, head_dim, opts.variant},
                                               opts.head_group > 0 ? opts.head_group : kv_heads);
  }

  /// o ([B, N/P, H, D]) and lse ([B, H, N/P]) of this rank's cyclic shard.
  /// q, k, v (and dO in backward) must have element type T and live in memory Exec
  /// can access (checked at compile time). Row-major contiguous Views are used in
  /// place; any other layout (LayoutLeft, strided) is copied into a row-major
  /// staging buffer with Kokkos::deep_copy first. o, lse, dq, dk, dv may have any
  /// layout. Collective over the grid: arguments are checked on every rank and the
  /// outcome agreed before any message is posted (exec/impl/executor_inputs.hpp), so a
  /// bad argument on one rank raises InvalidArgument on all of them.
  template <class QV, class KV, class VV, class OV, class LV>
  void forward(const QV& q, const KV& k, const VV& v, const OV& o, const LV& lse) {
    constexpr const char* where = "DistAttn::Grid2DAttention::forward";
    Impl::static_check_forward<T, Exec, QV, KV, VV, OV, LV>();
    agree_.run(grid_->world(), where, config(0), [&] {
      Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
      Impl::check_executor_extents(where, q, k, B_, n_, H_, Hkv_, D_, "N/P");
      Impl::check_fwd_args(compute_, where, q, k, v, o, lse, opts_.attn.check_finite);
      agree_.propose(ws_.choose_group(where, false, opts_.head_group, opts_.memory_limit_bytes));
    });
    const int g = ws_.use(false, int(agree_.agreed_minimum()));
    const auto in = staged_.get(compute_, q, k, v);
    const CView &qc = in[0], &kc = in[1], &vc = in[2];
    saved_.clear();  // K_t|V_t is rewritten from here: a pass that fails midway leaves nothing to reuse
    begin_pass(where, false);
    if (g == Hkv_) {
      run_forward(qc, kc, vc, o, lse);
    } else {
      Impl::for_each_head_group(H_, Hkv_, g, [&](auto qh, auto kh) {
        Kokkos::deep_copy(compute_, buf_.qin, Impl::head_range(qc, qh));
        copy_kv_group(kc, vc, kh);
        run_forward(CView(buf_.qin), CView(buf_.kin), CView(buf_.vin), Impl::head_range(o, qh),
                    Impl::stat_head_range(lse, qh));
      });
    }
    // K_t|V_t holds the last group's heads only when grouped: backward then permutes again.
    remember_kv(g, k, v);
    end_pass();
  }

  /// dq, dk, dv (overwritten, cyclic layout like q, k, v) from q, k, v, the
  /// forward's o and lse, and dO.
  template <class QV, class KV, class VV, class OV, class DOV, class LV, class DQV, class DKV, class DVV>
  void backward(const QV& q, const KV& k, const VV& v, const OV& o, const DOV& dout, const LV& lse, const DQV& dq,
                const DKV& dk, const DVV& dv) {
    constexpr const char* where = "DistAttn::Grid2DAttention::backward";
    Impl::static_check_backward<T, Exec, QV, KV, VV, OV, DOV, LV, DQV, DKV, DVV>();
    agree_.run(grid_->world(), where, config(1), [&] {
      Impl::check_qkv<Exec>(where, q, k, v, opts_.attn.with_mask(Mask::none()));
      Impl::check_executor_extents(where, q, k, B_, n_, H_, Hkv_, D_, "N/P");
      Impl::check_bwd_args(compute_, where, q, k, v, o, dout, lse, dq, dk, dv, opts_.attn.check_finite);
      agree_.propose(ws_.choose_group(where, true, opts_.head_group, opts_.memory_limit_bytes));
      agree_.vote(saved_.matches(compute_, k, v));
    });
    const int g = ws_.use(true, int(agree_.agreed_minimum()));
    const auto in = staged_.get(compute_, q, k, v);
    const CView &qc = in[0], &kc = in[1], &vc = in[2];
    begin_pass(where, true);
    const bool reused = g == Hkv_ && agree_.unanimous();
    if (!reused) saved_.clear();  // K_t|V_t is rewritten below
    if (g == Hkv_) {
      if (!reused) transpose_.forward(kc, vc, buf_.kvt);
      run_backward(qc, o, dout, lse, dq, dk, dv);
    } else {
      Impl::for_each_head_group(H_, Hkv_, g, [&](auto qh, auto kh) {
        copy_kv_group(kc, vc, kh);
        transpose_.forward(CView(buf_.kin), CView(buf_.vin), buf_.kvt);
        run_backward(Impl::head_range(qc, qh), Impl::head_range(o, qh), Impl::head_range(dout, qh),
                     Impl::stat_head_range(lse, qh), Impl::head_range(dq, qh), Impl::head_range(dk, kh),
                     Impl::head_range(dv, kh));
      });
    }
    if (!reused) remember_kv(g, k, v);  // reused: what was saved still holds
    end_pass();
  }

 private:
  using CView = Impl::ConstView4<T, Mem>;

  /// K_t|V_t holds every head of k and v only when the pass ran them in one group.
  template <class KV, class VV>
  void remember_kv(int group, const KV& k, const VV& v) {
    group == Hkv_ ? saved_.remember(compute_, k, v) : saved_.clear();
  }

  template <class OV, class LV>
  void run_forward(const CView& qc, const CView& kc, const CView& vc, const OV& o, const LV& lse) {
    transpose_.forward(kc, vc, buf_.kvt);
    opts_.variant == Grid2DVariant::NO ? forward_no(qc, o, lse) : forward_o(qc, o, lse);
  }
  /// One pass's backward once K_t|V_t holds its heads.
  template <class QV, class OV, class DOV, class LV, class DQV, class DKV, class DVV>
  void run_backward(const QV& qc, const OV& o, const DOV& dout, const LV& lse, const DQV& dq, const DKV& dk,
                    const DVV& dv) {
    // The own query-side bundle: (q, dO) in T and (LSE, Delta) in Acc, one
    // message each. Delta = rowsum(dO * O) replaces O (attention2d.md decision 4).
    Kokkos::deep_copy(compute_, buf_.bq.a, qc);
    Kokkos::deep_copy(compute_, buf_.bq.b, dout);
    Kokkos::deep_copy(compute_, buf_.bs.a, lse);
    attention_bwd_delta(compute_, o, dout, buf_.bs.b);
    opts_.variant == Grid2DVariant::NO ? backward_no() : backward_o();
    transpose_.backward(buf_.dkvt, buf_.dkvp, dk, dv);
    Impl::convert4(compute_, buf_.dq, dq, "DistAttn::grid2d.convert_dq");
  }

  /// One head group of k, v into the group's contiguous buffers (what the permutation sends).
  void copy_kv_group(const CView& kc, const CView& vc, std::pair<int, int> kh) {
    Kokkos::deep_copy(compute_, buf_.kin, Impl::head_range(kc, kh));
    Kokkos::deep_copy(compute_, buf_.vin, Impl::head_range(vc, kh));
  }
  // Message streams (Impl::message_tag): one per kind of message, so concurrent
  // rings on the same communicator (Q blocks and partials on a row) never cross-match.
  enum Tag : int { kTagPermuteK = 1, kTagPermuteV, kTagQ, kTagQStats, kTagKV, kTagPartial, kTagDQ, kTagDKV, kTagDKVBack };

  Grid2DAttention(std::unique_ptr<Grid> owned, Grid* external, const Exec& compute, int batch,
                  std::int64_t seq_len, int heads, int kv_heads, int head_dim, const Grid2DOptions& opts)
      : owned_grid_(std::move(owned)), grid_(owned_grid_ ? owned_grid_.get() : external), compute_(compute),
        B_(batch), H_(heads), Hkv_(kv_heads), D_(head_dim), N_(seq_len), R_(grid_->dims().rows),
        C_(grid_->dims().cols), r_(grid_->coords().row), c_(grid_->coords().col),
        n_(int(seq_len / (std::int64_t(R_) * C_))), layout_(R_, C_, seq_len), opts_(opts), rec_(compute, opts),
        posts_(compute, rec_, {&grid_->world(), &grid_->row(), &grid_->col()}, &comm_index),
        ws_({R_, C_, B_, N_, H_, Hkv_, D_, opts.variant}) {}

  /// What every rank must agree on; `pass` catches a rank calling forward while another calls backward.
  std::vector<Impl::ConfigField> config(int pass) const {
    return Impl::grid2d_fields<T>(B_, N_, H_, Hkv_, D_, opts_) +
           std::vector<Impl::ConfigField>{{"rows", R_}, {"cols", C_}, {"pass", pass}};
  }

  int left() const { return (c_ + C_ - 1) % C_; }   // row ring: send to
  int right() const { return (c_ + 1) % C_; }       // row ring: receive from
  int up() const { return (r_ + R_ - 1) % R_; }     // column ring: send to
  int down() const { return (r_ + 1) % R_; }        // column ring: receive from
  // Extents of the current pass's head group.
  int group_heads() const { return ws_.group() * (H_ / Hkv_); }
  std::size_t q_words() const { return std::size_t(B_) * n_ * group_heads() * D_; }  // one Q shard
  std::size_t kv_words() const { return std::size_t(B_) * n_ * ws_.group() * D_; }        // one K (or V) shard
  std::size_t row_words() const { return std::size_t(B_) * group_heads() * n_; }     // one stats shard

  /// The options of the block call of queries at `qpos` against keys at `kpos`.
  AttnOptions task(PositionMap qpos, PositionMap kpos) const {
    return opts_.attn.for_task(kdocs_.for_kernels(opts_.mask_rule()).on_block(qpos, kpos));
  }

  // ---- transfers and instrumentation ----------------------------------------------

  static int comm_index(Grid2DPhase p) { return int(comm_of(p)); }
  template <class SV, class RV>
  void post_sendrecv(std::vector<Req>& reqs, Grid2DPhase p, const SV& send, int dst, const RV& recv, int src, Tag tag) {
    posts_.sendrecv(reqs, p, send, dst, recv, src, Impl::message_tag(tag));
  }

  void begin_pass(const char* pass, bool backward) {
    // Inputs were produced on the caller's (compute) instance; our sends read them.
    grid_->world().depend_on(compute_);
    Grid2DStats fresh;
    fresh.variant  = opts_.variant;
    fresh.backward = backward;
    rec_.begin(fresh, pass);
    posts_.begin_pass();
  }
  void end_pass() {
    rec_.end("DistAttn::Grid2DAttention: pass done");
    posts_.end_pass(rec_.fields().comm_bytes_sent, rec_.fields().comm_bytes_received);
  }

  /// The position-ordered Kg, Vg: the gathered buffers, or K_t, V_t themselves when R == 1.
  const TView& kg() const { return R_ > 1 ? buf_.kg : buf_.kvt.a; }
  const TView& vg() const { return R_ > 1 ? buf_.vg : buf_.kvt.b; }

  /// Algs. 5 and 9: the column ring. Step i (1-based) hands `tile` the K_t|V_t
  /// block of grid row (r + i - 1) mod R: our own first, block i >= 2 arriving in
  /// slot i % 2 while block i - 1 is worked on. Each block also fills its rows of
  /// Kg/Vg for the row ring.
  template <class F>
  void column_ring(F&& tile) {
    std::vector<Req> hk;
    for (int i = 1; i <= R_; ++i) {
      rec_.step();
      const auto& cur = i == 1 ? buf_.kvt : buf_.kvslot[i % 2];
      if (i > 1) posts_.wait(hk);
      if (i < R_) post_sendrecv(hk, Grid2DPhase::ColGather, cur.flat, up(), buf_.kvslot[(i + 1) % 2].flat, down(), kTagKV);
      const int krow = (r_ + i - 1) % R_;
      rec_.timed([&] { tile(cur, krow); });
      if (C_ > 1 && R_ > 1)
        Impl::interleave_kv_rows(compute_, cur.a.data(), kv_words(), 0, krow, 1, R_, buf_.kg, buf_.vg, "DistAttn::grid2d.put_kv");
    }
  }

  // ---- forward NO (Alg. 1 + Alg. 7; attention2d.md §2) -----------------------------

  template <class OV, class LV>
  void forward_no(const CView& qc, const OV& o, const LV& lse) {
    rec_.step();  // the gathers and the one tile
    std::vector<Req> reqs;
    if (C_ > 1) posts_.all_gather(reqs, Grid2DPhase::RowGather, qc, buf_.qraw);
    if (R_ > 1) posts_.all_gather(reqs, Grid2DPhase::ColGather, buf_.kvt.flat, buf_.kvraw);
    posts_.wait(reqs);
    // Rank-ordered blocks -> position order (attention2d.md decision 2).
    Impl::interleave_rows(compute_, C_ > 1 ? buf_.qraw.data() : qc.data(), q_words(), 0, C_, C_, buf_.qg,
                          "DistAttn::grid2d.interleave_q");
    if (R_ > 1)  // rank-ordered blocks -> position order
      Impl::interleave_kv_rows(compute_, buf_.kvraw.data(), kv_words(), 2 * kv_words(), 0, R_, R_, buf_.kg, buf_.vg,
                               "DistAttn::grid2d.interleave_kv");
    reset_state(compute_, buf_.stg);
    rec_.timed([&] {
      attention_fwd_update(compute_, buf_.qg, kg(), vg(), buf_.stg, task(layout_.qg(r_), layout_.kg(c_)));
    });
    if (C_ == 1) {
      attention_finalize(compute_, buf_.stg, o, lse);
      return;
    }
    // Alg. 7: ring reduce-scatter with AttnFix. S accumulates the shard destined
    // to column c + i and travels left; after C - 1 steps it is column c's own.
    auto& S  = buf_.shard[0];
    auto& Rv = buf_.shard[1];
    Impl::get_state_block(compute_, buf_.stg, (c_ + 1) % C_, C_, S.st);
    for (int i = 2; i <= C_; ++i) {
      rec_.step();
      post_sendrecv(reqs, Grid2DPhase::RowReduceScatter, S.flat, left(), Rv.flat, right(), kTagPartial);
      posts_.wait(reqs);
      Impl::get_state_block(compute_, buf_.stg, (c_ + i) % C_, C_, S.st);
      attention_merge(compute_, S.st, Rv.st);
      rec_.merged();
    }
    attention_finalize(compute_, S.st, o, lse);
  }

  // ---- forward O (Algs. 4-6; attention2d.md §2) -------------------------------------

  template <class OV, class LV>
  void forward_o(const CView& qc, const OV& o, const LV& lse) {
    std::vector<Req> hq, hs;
    // Alg. 4 line 4: fetch the right neighbour's Q in the background.
    if (C_ > 1) post_sendrecv(hq, Grid2DPhase::RowGather, qc, left(), buf_.qslot[0], right(), kTagQ);
    reset_state(compute_, buf_.own);
    column_ring([&](const auto& kv, int krow) {  // Alg. 5
      attention_fwd_update(compute_, qc, kv.a, kv.b, buf_.own, task(layout_.qp(r_, c_), layout_.kt(krow, c_)));
    });
    if (C_ > 1) {
      posts_.wait(hq);  // Alg. 4 line 6
      // Alg. 6: iteration i works on the Q block of column (c + i) mod C against
      // the whole Kg (one call: the step-like mask is position-based), adds the
      // partial of the same block received from the right and passes it left.
      for (int i = 1; i <= C_ - 1; ++i) {
        rec_.step();
        const int qcol   = (c_ + i) % C_;
        const TView& qn  = buf_.qslot[(i - 1) % 2];
        if (i > 1) posts_.wait(hq);
        if (i < C_ - 1) post_sendrecv(hq, Grid2DPhase::RowGather, qn, left(), buf_.qslot[i % 2], right(), kTagQ);
        auto& part = buf_.part[i % 2];
        reset_state(compute_, part.st);
        rec_.timed([&] {
          attention_fwd_update(compute_, qn, kg(), vg(), part.st, task(layout_.qp(r_, qcol), layout_.kg(c_)));
        });
        if (i > 1) {
          posts_.wait(hs);
          attention_merge(compute_, part.st, buf_.precv.st);
          rec_.merged();
        }
        post_sendrecv(hs, Grid2DPhase::RowReduceScatter, part.flat, left(), buf_.precv.flat, right(), kTagPartial);
      }
      // The last partial from the right is our own queries over every key column
      // but ours (Alg. 6 trace); Alg. 4 line 8 adds column c.
      posts_.wait(hs);
      attention_merge(compute_, buf_.own, buf_.precv.st);
      rec_.merged();
    }
    attention_finalize(compute_, buf_.own, o, lse);
  }

  // ---- backward NO (Alg. 3 corrected; attention2d.md decision 7) -------------------

  void backward_no() {
    rec_.step();  // the gathers and the one tile
    std::vector<Req> reqs;
    if (C_ > 1) {
      posts_.all_gather(reqs, Grid2DPhase::RowGather, buf_.bq.flat, buf_.rawq);
      posts_.all_gather(reqs, Grid2DPhase::RowGather, buf_.bs.flat, buf_.raws);
    }
    if (R_ > 1) posts_.all_gather(reqs, Grid2DPhase::ColGather, buf_.kvt.flat, buf_.kvraw);
    posts_.wait(reqs);
    const T* tq   = C_ > 1 ? buf_.rawq.data() : buf_.bq.flat.data();
    const Acc* ts = C_ > 1 ? buf_.raws.data() : buf_.bs.flat.data();
    const std::size_t sq = q_words(), ss = row_words();
    Impl::interleave_rows(compute_, tq, 2 * sq, 0, C_, C_, buf_.qg, "DistAttn::grid2d.interleave_q");
    Impl::interleave_rows(compute_, tq + sq, 2 * sq, 0, C_, C_, buf_.dog, "DistAttn::grid2d.interleave_do");
    Impl::interleave_stats(compute_, ts, 2 * ss, 0, C_, C_, buf_.lseg, "DistAttn::grid2d.interleave_lse");
    Impl::interleave_stats(compute_, ts + ss, 2 * ss, 0, C_, C_, buf_.delg, "DistAttn::grid2d.interleave_delta");
    if (R_ > 1)  // rank-ordered blocks -> position order
      Impl::interleave_kv_rows(compute_, buf_.kvraw.data(), kv_words(), 2 * kv_words(), 0, R_, R_, buf_.kg, buf_.vg,
                               "DistAttn::grid2d.interleave_kv");
    Kokkos::deep_copy(compute_, buf_.dqg, Acc(0));
    Kokkos::deep_copy(compute_, buf_.dkvg.flat, Acc(0));
    rec_.timed([&] {
      attention_bwd_update(compute_, buf_.qg, kg(), vg(), buf_.dog, buf_.lseg, buf_.delg, buf_.dqg, buf_.dkvg.a, buf_.dkvg.b,
                           task(layout_.qg(r_), layout_.kg(c_)));
    });
    // Alg. 3 line 7 (corrected: dQ_g): rank-ordered shards, library reduce-scatter.
    if (C_ > 1) {
      Impl::deinterleave_rows(compute_, buf_.dqg, 0, C_, C_, buf_.rawdq.data(), sq, "DistAttn::grid2d.shard_dq");
      posts_.reduce_scatter(reqs, Grid2DPhase::RowReduceScatter, buf_.rawdq, buf_.dq);
    } else {
      Kokkos::deep_copy(compute_, buf_.dq, buf_.dqg);
    }
    // Alg. 3 line 8 (corrected: dK_g, dV_g): block j = [dK_t(j, c) | dV_t(j, c)].
    if (R_ > 1) {
      const std::size_t skv = kv_words();
      Impl::deinterleave_rows(compute_, buf_.dkvg.a, 0, R_, R_, buf_.rawdkv.data(), 2 * skv, "DistAttn::grid2d.shard_dk");
      Impl::deinterleave_rows(compute_, buf_.dkvg.b, 0, R_, R_, buf_.rawdkv.data() + skv, 2 * skv,
                              "DistAttn::grid2d.shard_dv");
      posts_.reduce_scatter(reqs, Grid2DPhase::ColReduceScatter, buf_.rawdkv, buf_.dkvt.flat);
    }
    posts_.wait(reqs);
  }

  // ---- backward O (Algs. 8-11 corrected; attention2d.md decision 7) -----------------

  void backward_o() {
    std::vector<Req> hq, hs;
    // Alg. 8 line 5: fetch the right neighbour's query bundle in the background.
    if (C_ > 1) {
      post_sendrecv(hq, Grid2DPhase::RowGather, buf_.bq.flat, left(), buf_.bslotq[0].flat, right(), kTagQ);
      post_sendrecv(hq, Grid2DPhase::RowGather, buf_.bs.flat, left(), buf_.bslots[0].flat, right(), kTagQStats);
    }
    Kokkos::deep_copy(compute_, buf_.dq, Acc(0));
    Kokkos::deep_copy(compute_, buf_.dkvg.flat, Acc(0));
    // Alg. 9: column ring of K_t/V_t blocks against the own query bundle; dK/dV
    // contributions accumulate in place in the position-ordered dKg/dVg.
    column_ring([&](const auto& kv, int krow) {
      attention_bwd_update(compute_, buf_.bq.a, kv.a, kv.b, buf_.bq.b, buf_.bs.a, buf_.bs.b, buf_.dq,
                           Impl::row_block(buf_.dkvg.a, krow, R_), Impl::row_block(buf_.dkvg.b, krow, R_),
                           task(layout_.qp(r_, c_), layout_.kt(krow, c_)));
    });
    if (C_ == 1) {
      // No other query blocks: Alg. 11 degenerates to the column reduce-scatter alone.
      column_scatter_dkv(nullptr, nullptr, c_, buf_.dq);
      return;
    }
    posts_.wait(hq);  // Alg. 8 line 7
    // Alg. 10: query bundles of the other columns travel the row ring; their dQ
    // partials are reduce-scattered along the same ring; the last one overlaps
    // with the column reduce-scatter of dK/dV (Alg. 11).
    for (int i = 1; i <= C_ - 1; ++i) {
      rec_.step();
      const int qcol = (c_ + i) % C_;
      const auto& bq = buf_.bslotq[(i - 1) % 2];
      const auto& bs = buf_.bslots[(i - 1) % 2];
      if (i > 1) posts_.wait(hq);
      if (i < C_ - 1) {
        post_sendrecv(hq, Grid2DPhase::RowGather, bq.flat, left(), buf_.bslotq[i % 2].flat, right(), kTagQ);
        post_sendrecv(hq, Grid2DPhase::RowGather, bs.flat, left(), buf_.bslots[i % 2].flat, right(), kTagQStats);
      }
      const AccView& dqp = buf_.dqpart[i % 2];
      Kokkos::deep_copy(compute_, dqp, Acc(0));
      if (i < C_ - 1) {
        rec_.timed([&] {
          attention_bwd_update(compute_, bq.a, kg(), vg(), bq.b, bs.a, bs.b, dqp, buf_.dkvg.a, buf_.dkvg.b,
                               task(layout_.qp(r_, qcol), layout_.kg(c_)));
        });
      } else {
        column_scatter_dkv(&bq, &bs, qcol, dqp);
      }
      if (i > 1) {
        posts_.wait(hs);
        Impl::add4(compute_, buf_.dqrecv, dqp, "DistAttn::grid2d.add_dq");
        rec_.merged();
      }
      post_sendrecv(hs, Grid2DPhase::RowReduceScatter, dqp, left(), buf_.dqrecv, right(), kTagDQ);
    }
    posts_.wait(hs);
    // Alg. 8 line 9: own dQ = own-column part (Alg. 9) + the other columns' (ring).
    Impl::add4(compute_, buf_.dqrecv, buf_.dq, "DistAttn::grid2d.add_dq");
    rec_.merged();
  }

  /// Alg. 11 (CmptSctrBwd): backward of the last query block (bq, bs of column
  /// qcol; none when C == 1) against the K_t blocks one at a time, overlapped with
  /// the column ring reduce-scatter of dK/dV. Leaves this rank's dK_t/dV_t in buf_.dkvt.
  void column_scatter_dkv(const Impl::FlatPair4<T, Mem>* bq, const Impl::FlatPair3<Acc, Mem>* bs, int qcol,
                          const AccView& dqp) {
    if (R_ == 1) {
      if (bq) {
        rec_.timed([&] {
          attention_bwd_update(compute_, bq->a, kg(), vg(), bq->b, bs->a, bs->b, dqp, buf_.dkvg.a, buf_.dkvg.b,
                               task(layout_.qp(r_, qcol), layout_.kg(c_)));
        });
      }
      return;  // dK_t/dV_t are dKg/dVg themselves when R == 1
    }
    std::vector<Req> hd;
    // Step i (2..R) works on block i = K_t of grid row (r + i - 1) mod R: the
    // partial starts as the block's locally accumulated dK_i/dV_i (earlier query
    // blocks), gets the last query block's contribution, then the partial from
    // below for the same block, and goes up.
    for (int i = 2; i <= R_; ++i) {
      rec_.step();
      const int krow = (r_ + i - 1) % R_;
      auto& part     = buf_.dkvpart[i % 2];
      Impl::deinterleave_kv_rows(compute_, buf_.dkvg.a, buf_.dkvg.b, krow, R_, part, "DistAttn::grid2d.take_dkv");
      if (bq) {
        rec_.timed([&] {
          attention_bwd_update(compute_, bq->a, Impl::row_block(buf_.kg, krow, R_), Impl::row_block(buf_.vg, krow, R_), bq->b,
                               bs->a, bs->b, dqp, part.a, part.b, task(layout_.qp(r_, qcol), layout_.kt(krow, c_)));
        });
      }
      if (i > 2) {
        posts_.wait(hd);
        Impl::add4(compute_, buf_.dkvrecv.a, part.a, "DistAttn::grid2d.add_dk");
        Impl::add4(compute_, buf_.dkvrecv.b, part.b, "DistAttn::grid2d.add_dv");
        rec_.merged();
      }
      post_sendrecv(hd, Grid2DPhase::ColReduceScatter, part.flat, up(), buf_.dkvrecv.flat, down(), kTagDKV);
    }
    // Own block (lines 15-18, corrected): fresh contribution + locally accumulated
    // dK_1/dV_1 + the reduced partial of the other grid rows.
    Impl::deinterleave_kv_rows(compute_, buf_.dkvg.a, buf_.dkvg.b, r_, R_, buf_.dkvt, "DistAttn::grid2d.take_dkv");
    if (bq) {
      rec_.timed([&] {
        attention_bwd_update(compute_, bq->a, Impl::row_block(buf_.kg, r_, R_), Impl::row_block(buf_.vg, r_, R_), bq->b,
                             bs->a, bs->b, dqp, buf_.dkvt.a, buf_.dkvt.b,
                             task(layout_.qp(r_, qcol), layout_.kt(r_, c_)));
      });
    }
    posts_.wait(hd);
    Impl::add4(compute_, buf_.dkvrecv.a, buf_.dkvt.a, "DistAttn::grid2d.add_dk");
    Impl::add4(compute_, buf_.dkvrecv.b, buf_.dkvt.b, "DistAttn::grid2d.add_dv");
    rec_.merged();
  }

  std::unique_ptr<Grid> owned_grid_;
  Grid* grid_;
  Exec compute_;
  int B_, H_, Hkv_, D_;
  std::int64_t N_;
  int R_, C_, r_, c_, n_;
  Grid2DLayout layout_;
  Grid2DOptions opts_;
  Impl::KernelDocuments<Mem> kdocs_{opts_.documents};
  Impl::PassRecorder<Exec, Grid2DStats> rec_;
  Impl::EntryAgreement<CommSpace, Exec> agree_;
  Impl::StagedQKV<T, Mem> staged_{"DistAttn::grid2d"};
  using Posts = Impl::PhasedPosts<CommSpace, Exec, Impl::PassRecorder<Exec, Grid2DStats>, Grid2DPhase, kNumGrid2DComms>;
  Posts posts_;  // on the world, row and column communicators (indexed by Grid2DComm)
  Impl::KvTranspose<Grid, Posts, Exec> transpose_{*grid_, posts_, compute_, Impl::message_tag(kTagPermuteK),
                                                  Impl::message_tag(kTagPermuteV), Impl::message_tag(kTagDKVBack)};
  Impl::SavedInputs<Exec> saved_;
  Impl::Grid2DWorkspace<T, Mem> ws_;
  typename Impl::Grid2DWorkspace<T, Mem>::Buffers& buf_ = ws_.buf;
};

}  // namespace DistAttn
