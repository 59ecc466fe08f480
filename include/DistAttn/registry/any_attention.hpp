// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file registry/any_attention.hpp
/// One door to every executor. make_attention builds the executor an
/// ExecutorChoice names (collectively over `comm`, like each constructor) and
/// returns it behind AnyAttention, one interface for code that picks the
/// executor at run time: the C ABI, the driver, a training loop. The executors'
/// own classes stay available for callers that fix the choice at compile time;
/// both compute the same bits (unit_tests/TestBitwiseOutputs.cpp builds every
/// executor through here and compares with outputs recorded from the classes).

#include <DistAttn/executor/executor_spec.hpp>
#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/comm/impl/entry_agreement.hpp>
#include <DistAttn/hybrid/hybrid_attention.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/token_layout.hpp>
#include <DistAttn/ulysses/ulysses_attention.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace DistAttn {

/// One rank's share of the problem: q [batch, local_seq, heads, head_dim], k and v
/// [batch, local_seq, kv_heads, head_dim]; every executor holds local_seq rows.
struct LocalProblem {
  int batch = 1, local_seq = 0, heads = 1, kv_heads = 1, head_dim = 0;
};

/// What the last forward() or backward() did on this rank, for any executor.
struct PassSummary {
  int tasks = 0, merges = 0, transfers = 0;
  double total_s = 0, compute_s = 0, wait_s = 0;
  std::uint64_t bytes_sent = 0, bytes_received = 0;
};

template <class T, class CommSpace, class Exec>
class AnyAttention {
 public:
  using Acc       = accum_t<T>;
  using Mem       = typename Exec::memory_space;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  /// Any View of these ranks and spaces converts (LayoutRight Tensor4 included).
  using In4      = Kokkos::View<const T****, Kokkos::LayoutStride, Mem, Unmanaged>;
  using Out4     = Kokkos::View<T****, Kokkos::LayoutStride, Mem, Unmanaged>;
  using InStats  = Kokkos::View<const Acc***, Kokkos::LayoutStride, Mem, Unmanaged>;
  using OutStats = Kokkos::View<Acc***, Kokkos::LayoutStride, Mem, Unmanaged>;

  virtual ~AnyAttention() = default;
  virtual void forward(const In4& q, const In4& k, const In4& v, const Out4& o, const OutStats& lse) = 0;
  virtual void backward(const In4& q, const In4& k, const In4& v, const In4& o, const In4& dout, const InStats& lse,
                        const Out4& dq, const Out4& dk, const Out4& dv) = 0;
  /// Where `rank`'s rows sit in the sequence (the decoder layer's RoPE positions).
  virtual TokenLayout token_layout(int rank) const = 0;
  /// Global token position of local row i on `rank`.
  std::int64_t position(int rank, std::int64_t i) const { return token_layout(rank).position(i); }
  /// Drops what a forward kept for its backward (the executors' own rule otherwise).
  virtual void invalidate_saved_inputs() = 0;
  /// Collective: the packed documents of the following passes (global offsets as
  /// ExecutorOptions::documents; empty: one sequence), so that a training loop
  /// keeps one executor while each batch packs its documents differently. Checked
  /// on each rank and agreed (count and hash of the offsets): bad or differing
  /// offsets fail on every rank, naming them. The O and LSE of an earlier forward
  /// belong to the old documents: what the executor kept is dropped, and a
  /// backward before the next forward fails instead of mixing the two masks. The
  /// documents the executor already holds change nothing (after the agreement).
  virtual void set_documents(const std::vector<std::int64_t>& offsets) = 0;
  virtual MemoryPlan memory_plan() const = 0;
  virtual PassSummary last_pass() const = 0;
  /// The options every executor shares (mask, scale, window, documents) as built.
  virtual const ExecutorOptions& options() const = 0;
  const ExecutorChoice& choice() const { return choice_; }
  const LocalProblem& problem() const { return problem_; }
  /// Ranks of the communicator it was built on.
  int num_ranks() const { return ranks_; }

 protected:
  AnyAttention(const ExecutorChoice& c, const LocalProblem& p, int ranks) : choice_(c), problem_(p), ranks_(ranks) {}

 private:
  ExecutorChoice choice_;
  LocalProblem problem_;
  int ranks_;
};

namespace Impl {
template <class T, class CommSpace, class Exec, class E>
class AttentionOf final : public AnyAttention<T, CommSpace, Exec> {
  using Base = AnyAttention<T, CommSpace, Exec>;

 public:
  using Layout = std::function<TokenLayout(const E&, int)>;
  AttentionOf(Communicator<CommSpace, Exec>& comm, const ExecutorChoice& c, const LocalProblem& p,
              std::unique_ptr<E> e, Layout layout)
      : Base(c, p, comm.size()), comm_(comm), e_(std::move(e)), layout_(std::move(layout)) {}

  void forward(const typename Base::In4& q, const typename Base::In4& k, const typename Base::In4& v,
               const typename Base::Out4& o, const typename Base::OutStats& lse) override {
    e_->forward(q, k, v, o, lse);
    documents_changed_ = false;
  }
  void backward(const typename Base::In4& q, const typename Base::In4& k, const typename Base::In4& v,
                const typename Base::In4& o, const typename Base::In4& dout, const typename Base::InStats& lse,
                const typename Base::Out4& dq, const typename Base::Out4& dk, const typename Base::Out4& dv) override {
    // Every rank changed its documents in the same collective call, so all fail here alike.
    DISTATTN_REQUIRE(!documents_changed_, "DistAttn::AnyAttention::backward",
                     "the documents changed (set_documents) after the last forward: o and lse belong to the old "
                     "documents; run forward under the new ones first");
    e_->backward(q, k, v, o, dout, lse, dq, dk, dv);
  }
  TokenLayout token_layout(int rank) const override { return layout_(*e_, rank); }
  void invalidate_saved_inputs() override { e_->invalidate_saved_inputs(); }
  void set_documents(const std::vector<std::int64_t>& offsets) override {
    constexpr const char* where = "DistAttn::AnyAttention::set_documents";
    ExecutorOptions o         = e_->options();
    o.documents               = offsets;
    const std::int64_t tokens = std::int64_t(this->num_ranks()) * this->problem().local_seq;
    Impl::agree_construction(comm_, where,
                             {{"documents", std::int64_t(offsets.size())},
                              {"document_offsets_hash", Impl::offsets_hash(offsets)}},
                             [&] { check_shared_options(where, o, tokens); });
    // Agreed, so every rank sees the same answer: callers may set the documents before
    // every pass (a local "unchanged, skip the call" would leave the ranks in different
    // collectives when their offsets differ), and unchanged ones cost only the agreement.
    if (offsets == e_->options().documents) return;
    e_->set_documents(offsets);
    documents_changed_ = true;
  }
  MemoryPlan memory_plan() const override { return e_->memory_plan(); }
  const ExecutorOptions& options() const override { return e_->options(); }
  PassSummary last_pass() const override {
    const auto& s = e_->stats();
    return {s.tasks, s.merges, s.transfers, s.total_s, s.compute_s, s.wait_s, s.total_sent(), s.total_received()};
  }

 private:
  Communicator<CommSpace, Exec>& comm_;
  std::unique_ptr<E> e_;
  Layout layout_;
  bool documents_changed_ = false;
};

template <class O>
O with_common(const ExecutorOptions& common) {
  O o;
  static_cast<ExecutorOptions&>(o) = common;
  return o;
}

inline HybridInner hybrid_inner(ExecutorKind k) {
  switch (k) {
    case ExecutorKind::RingVanilla: return HybridInner::Vanilla;
    case ExecutorKind::RingBalanced: return HybridInner::Balanced;
    case ExecutorKind::RingZigzag: return HybridInner::Zigzag;
    case ExecutorKind::Grid2DNO: return HybridInner::Grid2DNO;
    case ExecutorKind::Grid2DO: return HybridInner::Grid2DO;
    default: break;
  }
  throw InvalidArgument(std::string("DistAttn::make_attention: the hybrid's inner executor must be a ring or "
                                    "Attention2D kind, got '") +
                        to_string(k) + "'");
}
}  // namespace Impl

/// Builds the executor `choice` names on `comm` (collective: every rank calls it
/// with the same arguments, agreed as each constructor agrees its own). Grid2D:
/// choice.rows x choice.cols (0 x 0: chosen); Ulysses: choice.head_groups;
/// hybrid: choice.ulysses_degree, choice.inner and its inner_rows x inner_cols.
/// `comm` must outlive the executor.
template <class T, class CommSpace, class Exec>
std::unique_ptr<AnyAttention<T, CommSpace, Exec>> make_attention(Communicator<CommSpace, Exec>& comm,
                                                                 const Exec& compute, const LocalProblem& p,
                                                                 const ExecutorChoice& choice,
                                                                 const ExecutorOptions& options = {}) {
  const int B = p.batch, c = p.local_seq, H = p.heads, Hkv = p.kv_heads, D = p.head_dim, P = comm.size();
  // Ranks that name different executors would each enter another constructor's
  // collectives: the choice is agreed first, and a bad choice fails on every rank.
  Impl::agree_construction(comm, "DistAttn::make_attention",
                           {Impl::enum_field("kind", choice.kind), {"rows", choice.rows}, {"cols", choice.cols},
                            {"ulysses_degree", choice.ulysses_degree}, Impl::enum_field("inner", choice.inner),
                            {"inner_rows", choice.inner_rows}, {"inner_cols", choice.inner_cols},
                            {"head_groups", choice.head_groups}},
                           [&] {
                             bool known = false;
                             for (ExecutorKind k : kAllExecutorKinds) known = known || k == choice.kind;
                             DISTATTN_REQUIRE(known, "DistAttn::make_attention",
                                              "unknown executor kind " << int(choice.kind));
                             if (choice.kind == ExecutorKind::Hybrid) Impl::hybrid_inner(choice.inner);
                           });
  auto wrap = [&](auto e, auto layout) {
    using E = typename decltype(e)::element_type;
    return std::unique_ptr<AnyAttention<T, CommSpace, Exec>>(
        new Impl::AttentionOf<T, CommSpace, Exec, E>(comm, choice, p, std::move(e), std::move(layout)));
  };
  // Contiguous chunks (vanilla, balanced, Ulysses), zigzag halves, or cyclic tokens.
  auto layout_of = [P, c](TokenLayout::Kind kind) {
    return [=](const auto&, int r) {
      TokenLayout t;
      t.kind = kind, t.rank = r, t.size = P, t.chunk = c;
      return t;
    };
  };
  switch (choice.kind) {
    case ExecutorKind::RingVanilla:
    case ExecutorKind::RingBalanced:
    case ExecutorKind::RingZigzag: {
      using E = RingAttention<T, CommSpace, Exec>;
      auto o  = Impl::with_common<RingOptions>(options);
      o.kind  = choice.kind == ExecutorKind::RingVanilla    ? RingKind::Vanilla
                : choice.kind == ExecutorKind::RingBalanced ? RingKind::Balanced
                                                            : RingKind::Zigzag;
      return wrap(std::make_unique<E>(comm, compute, B, c, H, Hkv, D, o),
                  layout_of(o.kind == RingKind::Zigzag ? TokenLayout::Kind::Zigzag : TokenLayout::Kind::Contiguous));
    }
    case ExecutorKind::Grid2DNO:
    case ExecutorKind::Grid2DO: {
      using E   = Grid2DAttention<T, CommSpace, Exec>;
      auto o    = Impl::with_common<Grid2DOptions>(options);
      o.variant = choice.kind == ExecutorKind::Grid2DNO ? Grid2DVariant::NO : Grid2DVariant::O;
      return wrap(std::make_unique<E>(comm, choice.rows, choice.cols, compute, B, std::int64_t(P) * c, H, Hkv, D, o),
                  layout_of(TokenLayout::Kind::Cyclic));
    }
    case ExecutorKind::Ulysses: {
      using E       = UlyssesAttention<T, CommSpace, Exec>;
      auto o        = Impl::with_common<UlyssesOptions>(options);
      o.head_groups = choice.head_groups;
      return wrap(std::make_unique<E>(comm, compute, B, c, H, Hkv, D, o), layout_of(TokenLayout::Kind::Contiguous));
    }
    case ExecutorKind::Hybrid: {
      using E          = HybridAttention<T, CommSpace, Exec>;
      auto o           = Impl::with_common<HybridOptions>(options);
      o.ulysses_degree = choice.ulysses_degree;
      o.inner          = Impl::hybrid_inner(choice.inner);
      o.grid_rows      = choice.inner_rows;
      o.grid_cols      = choice.inner_cols;
      return wrap(std::make_unique<E>(comm, compute, B, c, H, Hkv, D, o),
                  [](const E& e, int r) { return e.token_layout(r); });
    }
  }
  throw InvalidArgument("DistAttn::make_attention: unknown executor kind " + std::to_string(int(choice.kind)));
}

}  // namespace DistAttn
