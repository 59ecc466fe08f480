// Attention objects of the C ABI: config checks agreed on by every rank, then the
// per-dtype factory (c_attention_<dtype>.cpp); passes forwarded to the executor.

#include "c_agree.hpp"

#include <DistAttn/core/kokkos_compat.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace DistAttn::CApi {
namespace {

bool known_executor(int e) { return e >= DISTATTN_RING_VANILLA && e <= DISTATTN_HYBRID; }

/// Local checks of a config (InvalidArgument naming the field).
void check_config(const char* where, const distattn_attention_config& c, int P) {
  DISTATTN_REQUIRE(c.api_version == DISTATTN_C_API_VERSION, where,
                   "config->api_version = " << c.api_version << " but the library implements C API version "
                                            << DISTATTN_C_API_VERSION
                                            << " (initialize the config with distattn_attention_config_init)");
  DISTATTN_REQUIRE(known_executor(c.executor), where, "config->executor = " << int(c.executor) << " is not a distattn_executor");
  DISTATTN_REQUIRE(c.dtype >= DISTATTN_FP32 && c.dtype <= DISTATTN_BF16, where,
                   "config->dtype = " << int(c.dtype) << " is not a distattn_dtype");
  if (!distattn_has_dtype(c.dtype))
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
  if (c.executor == DISTATTN_HYBRID)
    DISTATTN_REQUIRE(known_executor(c.hybrid_inner) && c.hybrid_inner != DISTATTN_ULYSSES &&
                         c.hybrid_inner != DISTATTN_HYBRID,
                     where, "config->hybrid_inner = " << int(c.hybrid_inner) << " must be a RING_* or GRID2D_* executor");
  if (c.executor == DISTATTN_RING_ZIGZAG)
    DISTATTN_REQUIRE(c.local_seq % 2 == 0, where,
                     "config->local_seq = " << c.local_seq << " must be even for DISTATTN_RING_ZIGZAG (two halves per rank)");
}

/// The values create agrees on.
std::vector<Field> config_fields(const distattn_attention_config& c) {
  return {{"config->api_version", c.api_version, FieldKind::Int},
          {"config->executor", c.executor, FieldKind::Executor},
          {"config->dtype", c.dtype, FieldKind::Dtype},
          {"config->batch", c.batch, FieldKind::Int},
          {"config->local_seq", c.local_seq, FieldKind::Int},
          {"config->heads", c.heads, FieldKind::Int},
          {"config->kv_heads", c.kv_heads, FieldKind::Int},
          {"config->head_dim", c.head_dim, FieldKind::Int},
          {"config->causal", c.causal, FieldKind::Int},
          {"config->grid_rows", c.grid_rows, FieldKind::Int},
          {"config->grid_cols", c.grid_cols, FieldKind::Int},
          {"config->ulysses_degree", c.ulysses_degree, FieldKind::Int},
          {"config->hybrid_inner", c.hybrid_inner, FieldKind::Executor},
          {"config->head_group", c.head_group, FieldKind::Int}};
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
    const distattn_attention_config c = config ? *config : distattn_attention_config{};
    Agreement().run(comm->holder, where, Entry::AttentionCreate, config_fields(c), [&] {
      DISTATTN_REQUIRE(out != nullptr, where, "argument 'out' is NULL");
      DISTATTN_REQUIRE(config != nullptr, where, "argument 'config' is NULL");
      require_initialized(where);
      check_config(where, c, comm->holder.size());
    });
    auto a  = std::make_unique<distattn_attention_s>();
    a->impl = make(comm->holder, c);
    *out    = a.release();
  });
}

distattn_status distattn_attention_destroy(distattn_attention attn) {
  return guarded([&] { delete attn; });
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
