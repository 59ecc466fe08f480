// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Attention objects of the C ABI: config checks agreed on by every rank, then the
// per-dtype factory (c_attention_<dtype>.cpp); passes forwarded to the executor.

#include "c_agree.hpp"

#include <DistAttn/comm/impl/entry_agreement.hpp>
#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/executor/executor_options.hpp>
#include <DistAttn/impl/member_count.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace DistAttn::CApi {
namespace {

// Every field of distattn_attention_config, in declaration order: AGREED(name,
// kind) for what every rank must pass alike (compared bit for bit at create),
// EXEMPT(name) for what may differ per rank. A field the struct gains must be
// added here; the static_assert below fails until it is.
//  - memory_limit_bytes: a bound on this rank's workspace; the executors agree on
//    the head group it leads to (the smallest any rank can afford).
//  - cu_seqlens: a pointer into each rank's own memory; the offsets it points to
//    are agreed through num_documents and their hash (config_fields).
#define DISTATTN_C_CONFIG_FIELDS(AGREED, EXEMPT) \
  AGREED(api_version, Int)                       \
  AGREED(executor, Executor)                     \
  AGREED(dtype, Dtype)                           \
  AGREED(batch, Int)                             \
  AGREED(local_seq, Int)                         \
  AGREED(heads, Int)                             \
  AGREED(kv_heads, Int)                          \
  AGREED(head_dim, Int)                          \
  AGREED(causal, Int)                            \
  AGREED(scale, Real)                            \
  AGREED(grid_rows, Int)                         \
  AGREED(grid_cols, Int)                         \
  AGREED(ulysses_degree, Int)                    \
  AGREED(hybrid_inner, Executor)                 \
  AGREED(head_group, Int)                        \
  AGREED(window_left, Int)                       \
  AGREED(window_right, Int)                      \
  EXEMPT(memory_limit_bytes)                     \
  EXEMPT(cu_seqlens)                             \
  AGREED(num_documents, Int)

/// A field as read from the caller's struct: enums as the int they hold (a C
/// enum may hold any int; as a C++ enum outside its enumerators it is undefined).
template <class T>
using raw_t = std::conditional_t<std::is_enum<T>::value, std::int32_t, T>;

/// The caller's config, every field read as plain data before any is checked.
struct RawConfig {
#define DISTATTN_C_RAW_MEMBER(name, ...) raw_t<decltype(distattn_attention_config::name)> name;
  DISTATTN_C_CONFIG_FIELDS(DISTATTN_C_RAW_MEMBER, DISTATTN_C_RAW_MEMBER)
#undef DISTATTN_C_RAW_MEMBER
};

#define DISTATTN_C_COUNT(...) +1
constexpr std::size_t kListedFields = 0 DISTATTN_C_CONFIG_FIELDS(DISTATTN_C_COUNT, DISTATTN_C_COUNT);
#undef DISTATTN_C_COUNT
static_assert(Impl::member_count<distattn_attention_config>() == kListedFields,
              "distattn_attention_config gained or lost a field: list it in DISTATTN_C_CONFIG_FIELDS "
              "(src/c/c_attention.cpp) as AGREED (every rank must pass the same value: anything that changes "
              "results or communication) or EXEMPT (with the reason), check it in check_config, and extend the "
              "per-field mismatch test in unit_tests/c_api/test_c_api.c");
static_assert(sizeof(RawConfig) == sizeof(distattn_attention_config),
              "RawConfig must mirror distattn_attention_config");

/// Reads the caller's struct field by field as plain data (no enum is loaded).
RawConfig read_config(const distattn_attention_config* c) {
  RawConfig r{};
  const char* base = reinterpret_cast<const char*>(c);
  // A caller built against another version of the header may hand a shorter
  // struct: read nothing past its version, which then fails the checks.
  std::memcpy(&r.api_version, base + offsetof(distattn_attention_config, api_version), sizeof(r.api_version));
  if (r.api_version != DISTATTN_C_API_VERSION) return r;
#define DISTATTN_C_READ(name, ...)                                                                 \
  static_assert(sizeof(r.name) == sizeof(distattn_attention_config::name), "field size differs"); \
  std::memcpy(&r.name, base + offsetof(distattn_attention_config, name), sizeof(r.name));
  DISTATTN_C_CONFIG_FIELDS(DISTATTN_C_READ, DISTATTN_C_READ)
#undef DISTATTN_C_READ
  return r;
}

template <class T>
std::int64_t field_bits(T v) {
  return std::int64_t(v);
}
/// A double's bit pattern, with -0 read as 0 (both mean 1/sqrt(head_dim)).
std::int64_t field_bits(double v) {
  if (v == 0) v = 0;
  std::int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}


/// The values create agrees on: every AGREED field, and the offsets behind
/// cu_seqlens as one hash (the agreement exchanges fixed-size fields).
std::vector<Field> config_fields(const RawConfig& c, const std::vector<std::int64_t>& offsets) {
  std::vector<Field> f;
#define DISTATTN_C_AGREED(name, kind) f.push_back({"config->" #name, field_bits(c.name), FieldKind::kind});
#define DISTATTN_C_EXEMPT(name)
  DISTATTN_C_CONFIG_FIELDS(DISTATTN_C_AGREED, DISTATTN_C_EXEMPT)
#undef DISTATTN_C_AGREED
#undef DISTATTN_C_EXEMPT
  f.push_back({"config->cu_seqlens (hash of the offsets)", Impl::offsets_hash(offsets), FieldKind::Int});
  return f;
}

bool known_executor(std::int64_t e) { return executor_name(e) != nullptr; }

/// Local checks of a config (InvalidArgument naming the field; Unsupported for a
/// dtype the build lacks).
void check_config(const char* where, const RawConfig& c, const std::vector<std::int64_t>& offsets, int P) {
  DISTATTN_REQUIRE(c.api_version == DISTATTN_C_API_VERSION, where,
                   "config->api_version = " << c.api_version << " but the library implements C API version "
                                            << DISTATTN_C_API_VERSION
                                            << " (initialize the config with distattn_attention_config_init)");
  DISTATTN_REQUIRE(known_executor(c.executor), where,
                   "config->executor = " << c.executor << " is not a distattn_executor (" << DISTATTN_RING_VANILLA
                                         << " to " << DISTATTN_HYBRID << ")");
  DISTATTN_REQUIRE(dtype_name(c.dtype) != nullptr, where,
                   "config->dtype = " << c.dtype << " is not a distattn_dtype (" << DISTATTN_FP32 << " to "
                                      << DISTATTN_BF16 << ")");
  DISTATTN_REQUIRE(known_executor(c.hybrid_inner), where,
                   "config->hybrid_inner = " << c.hybrid_inner << " is not a distattn_executor ("
                                             << DISTATTN_RING_VANILLA << " to " << DISTATTN_HYBRID << ")");
  if (!distattn_has_dtype(distattn_dtype(c.dtype)))
    throw Unsupported(std::string(where) + ": config->dtype = " + dtype_name(c.dtype) +
                      " is not available in this build (distattn_has_dtype says which are)");
  auto positive = [&](const char* name, std::int64_t v) {
    DISTATTN_REQUIRE(v > 0, where, "config->" << name << " = " << v << " must be positive");
  };
  positive("batch", c.batch);
  positive("local_seq", c.local_seq);
  positive("heads", c.heads);
  positive("kv_heads", c.kv_heads);
  positive("head_dim", c.head_dim);
  DISTATTN_REQUIRE(c.local_seq <= std::numeric_limits<int>::max() / std::max(P, 1), where,
                   "config->local_seq = " << c.local_seq << " times " << P << " ranks exceeds the int range");
  DISTATTN_REQUIRE(c.heads % c.kv_heads == 0, where,
                   "config->kv_heads = " << c.kv_heads << " must divide config->heads = " << c.heads);
  DISTATTN_REQUIRE(c.causal == 0 || c.causal == 1, where, "config->causal = " << c.causal << " must be 0 or 1");
  DISTATTN_REQUIRE(std::isfinite(c.scale) && c.scale >= 0, where,
                   "config->scale = " << c.scale << " must be finite and >= 0 (0: 1/sqrt(head_dim))");
  auto nonneg = [&](const char* name, int v) {
    DISTATTN_REQUIRE(v >= 0, where, "config->" << name << " = " << v << " must be >= 0 (0: chosen)");
  };
  nonneg("grid_rows", c.grid_rows);
  nonneg("grid_cols", c.grid_cols);
  nonneg("ulysses_degree", c.ulysses_degree);
  nonneg("head_group", c.head_group);
  DISTATTN_REQUIRE(c.window_left >= -1 && c.window_right >= -1, where,
                   "config->window_left = " << c.window_left << ", window_right = " << c.window_right
                                            << ": each must be >= 0 tokens, or -1 for unbounded");
  check_documents(where, "config->cu_seqlens", "config->num_documents", c.cu_seqlens, c.num_documents, offsets,
                  c.causal != 0, c.local_seq * P);
  if (c.executor == DISTATTN_HYBRID)
    DISTATTN_REQUIRE(c.hybrid_inner != DISTATTN_ULYSSES && c.hybrid_inner != DISTATTN_HYBRID, where,
                     "config->hybrid_inner = " << executor_name(c.hybrid_inner)
                                               << " must be a RING_* or GRID2D_* executor");
  if (c.executor == DISTATTN_RING_ZIGZAG)
    DISTATTN_REQUIRE(c.local_seq % 2 == 0, where,
                     "config->local_seq = " << c.local_seq << " must be even for DISTATTN_RING_ZIGZAG (two halves per rank)");
}

/// The checked config as the C struct (every enum field now holds an enumerator).
distattn_attention_config typed(const RawConfig& r) {
  distattn_attention_config c{};
#define DISTATTN_C_TYPED(name, ...) c.name = decltype(c.name)(r.name);
  DISTATTN_C_CONFIG_FIELDS(DISTATTN_C_TYPED, DISTATTN_C_TYPED)
#undef DISTATTN_C_TYPED
  return c;
}

std::unique_ptr<Attention> make(const CommHolder& comm, const distattn_attention_config& c) {
  switch (c.dtype) {
    case DISTATTN_FP32: return make_attention<float>(comm, c);
#ifndef KOKKOS_ENABLE_CUDA
    case DISTATTN_FP64: return make_attention<double>(comm, c);
#else
    case DISTATTN_FP16:
      if constexpr (compat::has_half) return make_attention<compat::half_t>(comm, c);
      break;
    case DISTATTN_BF16:
      if constexpr (compat::has_bhalf) return make_attention<compat::bhalf_t>(comm, c);
      break;
#endif
    default: break;
  }
  throw Unsupported("distattn_attention_create: config->dtype = " + std::to_string(int(c.dtype)) +
                    " is not available in this build (distattn_has_dtype says which are)");
}

Attention& checked(distattn_attention a, const char* where) {
  DISTATTN_REQUIRE(a != nullptr && a->impl, where, "argument 'attn' is NULL");
  return *a->impl;
}

/// A NULL tensor argument becomes one with a NULL data pointer, which the pass's
/// agreed checks report on every rank (a local throw here would leave the other
/// ranks waiting in the agreement).
const distattn_tensor& arg(const distattn_tensor* t) {
  static const distattn_tensor none{};
  return t ? *t : none;
}

/// A pass's entry: a live attention (checked on this rank alone: a NULL handle
/// has no communicator to agree over), then f(attention), which agrees.
template <class F>
distattn_status pass_entry(distattn_attention attn, const char* where, F&& f) {
  return guarded([&] { f(checked(attn, where)); });
}

}  // namespace

std::vector<std::int64_t> read_offsets(const std::int64_t* cu_seqlens, std::int64_t num_documents) {
  if (cu_seqlens == nullptr || num_documents <= 0 || num_documents > kMaxDocuments) return {};
  return {cu_seqlens, cu_seqlens + num_documents + 1};
}

void check_documents(const char* where, const char* offsets_name, const char* count_name,
                     const std::int64_t* cu_seqlens, std::int64_t num_documents,
                     const std::vector<std::int64_t>& offsets, bool causal, std::int64_t tokens) {
  DISTATTN_REQUIRE(num_documents >= 0 && num_documents <= kMaxDocuments, where,
                   count_name << " = " << num_documents << " must lie in [0, " << kMaxDocuments
                              << "]: the documents of " << offsets_name << " (0: none)");
  if (num_documents == 0) return;
  DISTATTN_REQUIRE(cu_seqlens != nullptr, where,
                   offsets_name << " is NULL with " << count_name << " = " << num_documents);
  // The executors' own rule for offsets, reported under the C argument's name.
  ExecutorOptions o;
  o.causal    = causal;
  o.documents = offsets;
  check_shared_options((std::string(where) + ": " + offsets_name).c_str(), o, tokens);
}

}  // namespace DistAttn::CApi

using namespace DistAttn;
using namespace DistAttn::CApi;

extern "C" {

distattn_status distattn_attention_config_init(distattn_attention_config* config) {
  return guarded([&] {
    DISTATTN_REQUIRE(config != nullptr, "distattn_attention_config_init", "argument 'config' is NULL");
    *config              = distattn_attention_config{};
    config->api_version  = DISTATTN_C_API_VERSION;
    config->executor     = DISTATTN_RING_ZIGZAG;
    config->dtype        = DISTATTN_FP32;
    config->causal       = 1;
    config->hybrid_inner = DISTATTN_RING_ZIGZAG;
    config->window_left  = -1;
    config->window_right = -1;
  });
}

distattn_status distattn_attention_create(distattn_comm comm, const distattn_attention_config* config,
                                          distattn_attention* out) {
  return guarded([&] {
    constexpr const char* where = "distattn_attention_create";
    if (out) *out = nullptr;
    // Checked on this rank alone: without a communicator there is no group to agree over.
    DISTATTN_REQUIRE(comm != nullptr, where, "argument 'comm' is NULL");
    // A NULL config takes part in the agreement with zero fields; its rank's checks
    // fail, so every rank reports that.
    const RawConfig c                     = config ? read_config(config) : RawConfig{};
    const std::vector<std::int64_t> offsets = read_offsets(c.cu_seqlens, c.num_documents);
    Agreement().run(comm->holder, where, Entry::AttentionCreate, config_fields(c, offsets), [&] {
      DISTATTN_REQUIRE(out != nullptr, where, "argument 'out' is NULL");
      DISTATTN_REQUIRE(config != nullptr, where, "argument 'config' is NULL");
      require_initialized(where);
      check_config(where, c, offsets, comm->holder.size());
    });
    auto a  = std::make_unique<distattn_attention_s>();
    a->impl = make(comm->holder, typed(c));
    *out    = a.release();
  });
}

distattn_status distattn_attention_destroy(distattn_attention attn) {
  return guarded([&] { delete attn; });
}

distattn_status distattn_attention_invalidate_saved(distattn_attention attn) {
  return guarded([&] { checked(attn, "distattn_attention_invalidate_saved").invalidate_saved_inputs(); });
}

distattn_status distattn_attention_set_documents(distattn_attention attn, const int64_t* cu_seqlens,
                                                int64_t num_documents) {
  return pass_entry(attn, "distattn_attention_set_documents",
                    [&](Attention& a) { a.set_documents(cu_seqlens, num_documents); });
}

distattn_status distattn_attention_positions(distattn_attention attn, int rank, int64_t* positions) {
  return guarded([&] {
    constexpr const char* where = "distattn_attention_positions";
    auto& a = checked(attn, where);
    DISTATTN_REQUIRE(positions != nullptr, where, "argument 'positions' is NULL");
    DISTATTN_REQUIRE(rank >= 0 && rank < a.comm_size(), where,
                     "argument 'rank' = " << rank << " must lie in [0, " << a.comm_size() << ")");
    for (std::int64_t i = 0; i < a.local_seq(); ++i) positions[i] = a.position(rank, i);
  });
}

distattn_status distattn_attention_forward(distattn_attention attn, const distattn_tensor* q,
                                           const distattn_tensor* k, const distattn_tensor* v,
                                           const distattn_tensor* o, const distattn_tensor* lse, void* stream) {
  return pass_entry(attn, "distattn_attention_forward",
                    [&](Attention& a) { a.forward(arg(q), arg(k), arg(v), arg(o), arg(lse), stream); });
}

distattn_status distattn_attention_backward(distattn_attention attn, const distattn_tensor* q,
                                            const distattn_tensor* k, const distattn_tensor* v,
                                            const distattn_tensor* o, const distattn_tensor* dout,
                                            const distattn_tensor* lse, const distattn_tensor* dq,
                                            const distattn_tensor* dk, const distattn_tensor* dv, void* stream) {
  return pass_entry(attn, "distattn_attention_backward", [&](Attention& a) {
    a.backward(arg(q), arg(k), arg(v), arg(o), arg(dout), arg(lse), arg(dq), arg(dk), arg(dv), stream);
  });
}

}  // extern "C"
