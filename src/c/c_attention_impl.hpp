// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The executor behind a distattn_attention for one element type T: builds the
// executor the config names, wraps the caller's raw pointers in unmanaged strided
// Views, and orders each pass after the caller's stream. Included by one
// c_attention_<dtype>.cpp per dtype, which instantiates make_attention<T>.

#include "c_agree.hpp"

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/registry/any_attention.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace DistAttn::CApi {

using Mem = Exec::memory_space;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

/// Options every executor shares, from the config.
template <class O>
O executor_options(const distattn_attention_config& c) {
  O o;
  o.causal             = c.causal != 0;
  o.attn.scale         = c.scale;
  o.head_group         = c.head_group;
  o.memory_limit_bytes = c.memory_limit_bytes;
  o.window             = Window{c.window_left < 0 ? kUnboundedSpan : c.window_left,
                    c.window_right < 0 ? kUnboundedSpan : c.window_right};
  // Read at create (checked there): the caller may free the array afterwards.
  if (c.num_documents > 0) o.documents.assign(c.cu_seqlens, c.cu_seqlens + c.num_documents + 1);
  return o;
}

/// Orders a pass after the caller's stream and the caller's stream after the pass
/// (events between the caller's stream and the executor's compute and transfer
/// streams). Host builds take no stream and run the pass to completion.
class StreamOrder {
 public:
  StreamOrder(const Exec& compute, const Exec& transfers) : compute_(compute), transfers_(transfers) {
#ifdef KOKKOS_ENABLE_CUDA
    for (auto* e : {&in_, &out_compute_, &out_transfers_})
      check(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
#endif
  }
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;
  ~StreamOrder() {
#ifdef KOKKOS_ENABLE_CUDA
    for (auto e : {in_, out_compute_, out_transfers_})
      if (e) cudaEventDestroy(e);
#endif
  }

  /// Local check (inside the pass's agreement): host builds take no stream.
  static void check_stream(const char* where, void* stream) {
#ifndef KOKKOS_ENABLE_CUDA
    DISTATTN_REQUIRE(stream == nullptr, where,
                     "argument 'stream' must be NULL: this build computes on the host (" << Exec::name() << ")");
#else
    (void)where, (void)stream;
#endif
  }

  void enter(void* stream) {
#ifdef KOKKOS_ENABLE_CUDA
    const auto s = static_cast<cudaStream_t>(stream);
    check(cudaEventRecord(in_, s), "cudaEventRecord");
    check(cudaStreamWaitEvent(compute_.cuda_stream(), in_, 0), "cudaStreamWaitEvent");
    check(cudaStreamWaitEvent(transfers_.cuda_stream(), in_, 0), "cudaStreamWaitEvent");
#else
    (void)stream;
#endif
  }

  void leave(void* stream) {
#ifdef KOKKOS_ENABLE_CUDA
    const auto s = static_cast<cudaStream_t>(stream);
    check(cudaEventRecord(out_compute_, compute_.cuda_stream()), "cudaEventRecord");
    check(cudaEventRecord(out_transfers_, transfers_.cuda_stream()), "cudaEventRecord");
    check(cudaStreamWaitEvent(s, out_compute_, 0), "cudaStreamWaitEvent");
    check(cudaStreamWaitEvent(s, out_transfers_, 0), "cudaStreamWaitEvent");
#else
    (void)stream;
    compat::fence(compute_, "DistAttn C API: pass done");
    compat::fence(transfers_, "DistAttn C API: pass done");
#endif
  }

 private:
#ifdef KOKKOS_ENABLE_CUDA
  static void check(cudaError_t rc, const char* call) {
    if (rc != cudaSuccess)
      Impl::throw_communication_error("DistAttn C API", std::string(call) + " failed: " + cudaGetErrorString(rc));
  }
  cudaEvent_t in_ = nullptr, out_compute_ = nullptr, out_transfers_ = nullptr;
#endif
  Exec compute_, transfers_;
};

/// One distattn_tensor as an unmanaged strided View (its shape was checked
/// against the configuration); strides all 0 mean row-major.
template <class V>
V strided_view(const distattn_tensor& t) {
  constexpr int R = int(V::rank);
  bool dense      = true;
  for (int d = 0; d < R; ++d) dense = dense && t.strides[d] == 0;
  Kokkos::LayoutStride ls;
  std::int64_t next = 1;
  for (int d = R - 1; d >= 0; --d) {
    ls.dimension[d] = std::size_t(t.shape[d]);
    ls.stride[d]    = std::size_t(dense ? next : t.strides[d]);
    next *= t.shape[d];
  }
  return V(static_cast<typename V::pointer_type>(t.data), ls);
}

/// "[a, b, c, d]" of the first `rank` entries.
inline std::string dims(const std::int64_t* x, int rank) {
  std::string s = "[";
  for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(x[d]);
  return s + "]";
}

/// Local argument check of one tensor (inside the pass's agreement): data, shape
/// against the configuration (`names` says what each extent is), strides.
template <std::size_t R>
void check_tensor(const char* where, const char* name, const distattn_tensor& t,
                  const std::array<std::int64_t, R>& expect, const char* names) {
  DISTATTN_REQUIRE(t.data != nullptr, where, "argument '" << name << "' has a NULL data pointer");
  DISTATTN_REQUIRE(std::equal(expect.begin(), expect.end(), t.shape), where,
                   "argument '" << name << "' has shape " << dims(t.shape, int(R)) << ", the attention was created for "
                                << names << " = " << dims(expect.data(), int(R)));
  bool all_zero = true, all_positive = true;
  for (std::size_t d = 0; d < R; ++d) {
    all_zero     = all_zero && t.strides[d] == 0;
    all_positive = all_positive && t.strides[d] > 0;
  }
  DISTATTN_REQUIRE(all_zero || all_positive, where,
                   "argument '" << name << "' has strides " << dims(t.strides, int(R))
                                << ": strides must be all positive, or all 0 for row-major");
#ifdef KOKKOS_ENABLE_CUDA
  cudaPointerAttributes attr{};
  const bool known = cudaPointerGetAttributes(&attr, t.data) == cudaSuccess;
  if (!known) cudaGetLastError();  // clears the error an unknown pointer leaves
  DISTATTN_REQUIRE(known && (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged), where,
                   "argument '" << name << "' is not CUDA device memory: this build computes on the GPU");
#endif
}

template <class T, class CommSpace, class E>
class TypedAttention final : public Attention {
 public:
  using Acc  = accum_t<T>;
  using Comm = Communicator<CommSpace, Exec>;
  using In4  = Kokkos::View<const T****, Kokkos::LayoutStride, Mem, Unmanaged>;
  using Out4 = Kokkos::View<T****, Kokkos::LayoutStride, Mem, Unmanaged>;
  using InL  = Kokkos::View<const Acc***, Kokkos::LayoutStride, Mem, Unmanaged>;
  using OutL = Kokkos::View<Acc***, Kokkos::LayoutStride, Mem, Unmanaged>;

  /// `make(comm, compute)` builds the executor (collective); `position(e, r, i)` its token layout.
  template <class Make>
  TypedAttention(std::shared_ptr<Comm> comm, const distattn_attention_config& cfg, Make&& make,
                 std::function<std::int64_t(const E&, int, std::int64_t)> position)
      : comm_(std::move(comm)), cfg_(cfg), compute_(compute_space()), order_(compute_, comm_->exec()),
        exec_(make(*comm_, compute_)), position_(std::move(position)) {
    cfg_.cu_seqlens = nullptr;  // the caller's array, copied into the executor at create
  }

  ~TypedAttention() override {
    // Outstanding work on the executor's streams may still read its buffers.
    compat::fence(compute_, "DistAttn C API: destroy");
    compat::fence(comm_->exec(), "DistAttn C API: destroy");
  }

  std::int64_t position(int rank, std::int64_t i) const override { return position_(*exec_, rank, i); }
  int comm_size() const override { return comm_->size(); }
  void invalidate_saved_inputs() override { exec_->invalidate_saved_inputs(); }

  void set_documents(const std::int64_t* cu_seqlens, std::int64_t num_documents) override {
    constexpr const char* where             = "distattn_attention_set_documents";
    const std::vector<std::int64_t> offsets = read_offsets(cu_seqlens, num_documents);
    agree_.run(*comm_, where, Entry::SetDocuments,
               {{"num_documents", num_documents, FieldKind::Int},
                {"cu_seqlens (hash of the offsets)", Impl::offsets_hash(offsets), FieldKind::Int}},
               [&] {
                 require_initialized(where);
                 check_documents(where, "argument 'cu_seqlens'", "argument 'num_documents'", cu_seqlens,
                                 num_documents, offsets, cfg_.causal != 0, cfg_.local_seq * comm_->size());
               });
    exec_->set_documents(offsets);
    cfg_.num_documents = num_documents;
  }
  std::int64_t local_seq() const override { return cfg_.local_seq; }

  void forward(const distattn_tensor& q, const distattn_tensor& k, const distattn_tensor& v, const distattn_tensor& o,
               const distattn_tensor& lse, void* stream) override {
    pass(
        "distattn_attention_forward", Entry::Forward, stream,
        [&](const char* where) {
          check_q(where, "q", q), check_k(where, "k", k), check_k(where, "v", v);
          check_q(where, "o", o), check_lse(where, lse);
        },
        [&] {
          exec_->forward(strided_view<In4>(q), strided_view<In4>(k), strided_view<In4>(v), strided_view<Out4>(o),
                         strided_view<OutL>(lse));
        });
  }

  void backward(const distattn_tensor& q, const distattn_tensor& k, const distattn_tensor& v, const distattn_tensor& o,
                const distattn_tensor& dout, const distattn_tensor& lse, const distattn_tensor& dq,
                const distattn_tensor& dk, const distattn_tensor& dv, void* stream) override {
    pass(
        "distattn_attention_backward", Entry::Backward, stream,
        [&](const char* where) {
          check_q(where, "q", q), check_k(where, "k", k), check_k(where, "v", v);
          check_q(where, "o", o), check_q(where, "dout", dout), check_lse(where, lse);
          check_q(where, "dq", dq), check_k(where, "dk", dk), check_k(where, "dv", dv);
        },
        [&] {
          exec_->backward(strided_view<In4>(q), strided_view<In4>(k), strided_view<In4>(v), strided_view<In4>(o),
                          strided_view<In4>(dout), strided_view<InL>(lse), strided_view<Out4>(dq),
                          strided_view<Out4>(dk), strided_view<Out4>(dv));
        });
  }

 private:
  static Exec compute_space() { return compat::partition_space(Exec(), 1)[0]; }
  void check_q(const char* where, const char* name, const distattn_tensor& t) const {
    check_tensor<4>(where, name, t, {cfg_.batch, cfg_.local_seq, cfg_.heads, cfg_.head_dim},
                    "[batch, local_seq, heads, head_dim]");
  }
  void check_k(const char* where, const char* name, const distattn_tensor& t) const {
    check_tensor<4>(where, name, t, {cfg_.batch, cfg_.local_seq, cfg_.kv_heads, cfg_.head_dim},
                    "[batch, local_seq, kv_heads, head_dim]");
  }
  void check_lse(const char* where, const distattn_tensor& t) const {
    check_tensor<3>(where, "lse", t, {cfg_.batch, cfg_.heads, cfg_.local_seq}, "[batch, heads, local_seq]");
  }

  /// One pass: every rank's argument checks agreed on (Kokkos running, the
  /// stream, the tensors, then ordering the pass after the caller's stream), then
  /// `call`; the caller's stream waits for the pass whether it succeeded or not.
  template <class Checks, class Call>
  void pass(const char* where, Entry entry, void* stream, Checks&& checks, Call&& call) {
    bool entered = false;
    auto leave   = [&] {
      if (!entered) return;
      try {
        order_.leave(stream);
      } catch (...) {
      }
    };
    try {
      agree_.run(*comm_, where, entry, {}, [&] {
        require_initialized(where);
        StreamOrder::check_stream(where, stream);
        checks(where);
        order_.enter(stream);
        entered = true;
      });
      call();
    } catch (...) {
      leave();
      throw;
    }
    order_.leave(stream);
  }

  std::shared_ptr<Comm> comm_;
  distattn_attention_config cfg_;
  Exec compute_;
  StreamOrder order_;
  std::unique_ptr<E> exec_;
  std::function<std::int64_t(const E&, int, std::int64_t)> position_;
  Agreement agree_;
};

/// The C enum's executors are ExecutorKind's, in the same order.
inline ExecutorKind executor_kind(distattn_executor e) {
  static_assert(int(DISTATTN_RING_VANILLA) == int(ExecutorKind::RingVanilla) &&
                    int(DISTATTN_RING_BALANCED) == int(ExecutorKind::RingBalanced) &&
                    int(DISTATTN_RING_ZIGZAG) == int(ExecutorKind::RingZigzag) &&
                    int(DISTATTN_GRID2D_NO) == int(ExecutorKind::Grid2DNO) &&
                    int(DISTATTN_GRID2D_O) == int(ExecutorKind::Grid2DO) &&
                    int(DISTATTN_ULYSSES) == int(ExecutorKind::Ulysses) &&
                    int(DISTATTN_HYBRID) == int(ExecutorKind::Hybrid),
                "distattn_executor and DistAttn::ExecutorKind list the executors in one order");
  return ExecutorKind(int(e));
}

/// The executor `cfg` names, for element type T on communicator `comm` (the registry's make_attention).
template <class T, class CommSpace>
std::unique_ptr<Attention> make_typed(std::shared_ptr<Communicator<CommSpace, Exec>> comm,
                                      const distattn_attention_config& cfg) {
  using Comm = Communicator<CommSpace, Exec>;
  using E    = AnyAttention<T, CommSpace, Exec>;
  ExecutorChoice choice;
  choice.kind = executor_kind(cfg.executor);
  if (is_grid2d(choice.kind)) choice.rows = cfg.grid_rows, choice.cols = cfg.grid_cols;
  if (choice.kind == ExecutorKind::Hybrid) {
    choice.ulysses_degree = cfg.ulysses_degree;
    choice.inner          = executor_kind(cfg.hybrid_inner);
    choice.inner_rows = cfg.grid_rows, choice.inner_cols = cfg.grid_cols;
  }
  const LocalProblem problem{cfg.batch, int(cfg.local_seq), cfg.heads, cfg.kv_heads, cfg.head_dim};
  const auto options = executor_options<ExecutorOptions>(cfg);
  return std::make_unique<TypedAttention<T, CommSpace, E>>(
      comm, cfg, [&](Comm& w, const Exec& x) { return make_attention<T>(w, x, problem, choice, options); },
      [](const E& e, int r, std::int64_t i) { return e.position(r, i); });
}

template <class T>
std::unique_ptr<Attention> make_attention(const CommHolder& comm, const distattn_attention_config& cfg) {
#if DISTATTN_ENABLE_NCCL
  if (comm.nccl) return make_typed<T, NcclSpace>(comm.nccl, cfg);
#endif
  return make_typed<T, MpiSpace>(comm.mpi, cfg);
}

}  // namespace DistAttn::CApi

/// One explicit instantiation per element type the build computes in.
#define DISTATTN_C_INSTANTIATE(T)                                                                       \
  template std::unique_ptr<DistAttn::CApi::Attention> DistAttn::CApi::make_attention<T>(                \
      const DistAttn::CApi::CommHolder&, const distattn_attention_config&);
