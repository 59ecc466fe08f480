// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Version queries, the thread-local error message and process setup of the C ABI.

#include "c_handles.hpp"

#include <DistAttn/core/config.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <cstring>
#include <string>
#include <type_traits>

namespace DistAttn::CApi {

namespace {
thread_local std::string last_error;
bool we_initialized_kokkos = false;

/// The int a C caller stored in an enum argument, read without loading it as the
/// C++ enum (a value outside the enumerators would be undefined behaviour).
template <class E>
int enum_value(const E& e) {
  static_assert(std::is_enum<E>::value && sizeof(E) == sizeof(int), "a C enum argument");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}
}  // namespace

void set_last_error(const char* msg) { last_error = msg; }

void require_initialized(const char* where) {
  if (!Kokkos::is_initialized())
    throw NotInitialized(std::string(where) + ": call distattn_initialize() first (Kokkos is not initialized)");
}

}  // namespace DistAttn::CApi

using namespace DistAttn::CApi;

extern "C" {

int distattn_api_version(void) { return DISTATTN_C_API_VERSION; }

const char* distattn_library_version(void) { return DISTATTN_VERSION_STRING; }

const char* distattn_last_error(void) { return last_error.c_str(); }

const char* distattn_status_string(distattn_status status) {
  switch (enum_value(status)) {
    case DISTATTN_SUCCESS: return "success";
    case DISTATTN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case DISTATTN_ERROR_COMMUNICATION: return "communication error";
    case DISTATTN_ERROR_UNSUPPORTED: return "unsupported in this build";
    case DISTATTN_ERROR_OUT_OF_MEMORY: return "out of memory";
    case DISTATTN_ERROR_NOT_INITIALIZED: return "not initialized";
    case DISTATTN_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

int distattn_has_dtype(distattn_dtype dtype) {
  const bool cuda = distattn_is_cuda_build() != 0;
  switch (enum_value(dtype)) {
    case DISTATTN_FP32: return 1;
    case DISTATTN_FP64: return cuda ? 0 : 1;
    case DISTATTN_FP16: return cuda && DistAttn::compat::has_half ? 1 : 0;
    case DISTATTN_BF16: return cuda && DistAttn::compat::has_bhalf ? 1 : 0;
  }
  return 0;
}

int distattn_is_cuda_build(void) {
#ifdef KOKKOS_ENABLE_CUDA
  return 1;
#else
  return 0;
#endif
}

int distattn_has_nccl(void) { return DISTATTN_ENABLE_NCCL ? 1 : 0; }

distattn_status distattn_initialize(void) {
  return guarded([] {
    if (Kokkos::is_initialized()) return;
    int device = -1;
#ifdef KOKKOS_ENABLE_CUDA
    DISTATTN_REQUIRE(cudaGetDevice(&device) == cudaSuccess, "distattn_initialize", "cudaGetDevice failed");
#endif
    DistAttn::compat::initialize_on_device(device);
    we_initialized_kokkos = true;
  });
}

distattn_status distattn_finalize(void) {
  return guarded([] {
    if (!we_initialized_kokkos || !Kokkos::is_initialized()) return;
    Kokkos::finalize();
    we_initialized_kokkos = false;
  });
}

}  // extern "C"
