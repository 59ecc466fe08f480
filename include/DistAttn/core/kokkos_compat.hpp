// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The one place that knows which Kokkos version is in use. Debian 12 ships Kokkos
// 3.4.01 (Serial, C++14 build); GPU builds use Kokkos 4.6.x. Nothing else in
// DistAttn may test KOKKOS_VERSION: add a shim here instead.

#include <Kokkos_Core.hpp>
#if KOKKOS_VERSION >= 40100
#include <Kokkos_Profiling_ScopedRegion.hpp>
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <array>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#if KOKKOS_VERSION >= 30700
#define DISTATTN_KOKKOS_MATH_NS Kokkos
#else
#define DISTATTN_KOKKOS_MATH_NS Kokkos::Experimental
#endif

// bhalf_t appeared in 3.6. Where a backend has no native 16-bit type, Kokkos
// aliases half_t/bhalf_t to float, so overloads or instantiations on both collide:
// DISTATTN_HAS_HALF / DISTATTN_HAS_BHALF are 1 only for distinct types.
#if KOKKOS_VERSION >= 30600
#define DISTATTN_KOKKOS_HAS_BHALF_NAME 1
#else
#define DISTATTN_KOKKOS_HAS_BHALF_NAME 0
#endif

// KokkosBlas::gemm and ::axpy take an execution-space instance as their first argument in the
// Kokkos Kernels that go with Kokkos >= 4.2 (both are released together); before,
// they run on the default instance only (Debian's 3.4.01). layer/linear.hpp is the
// one caller.
#if KOKKOS_VERSION >= 40200
#define DISTATTN_KOKKOSBLAS_TAKES_SPACE 1
#else
#define DISTATTN_KOKKOSBLAS_TAKES_SPACE 0
#endif

namespace DistAttn {
namespace compat {

namespace math {
using DISTATTN_KOKKOS_MATH_NS::cos;
using DISTATTN_KOKKOS_MATH_NS::exp;
using DISTATTN_KOKKOS_MATH_NS::fabs;
using DISTATTN_KOKKOS_MATH_NS::fmax;
using DISTATTN_KOKKOS_MATH_NS::isfinite;
using DISTATTN_KOKKOS_MATH_NS::isinf;
using DISTATTN_KOKKOS_MATH_NS::isnan;
using DISTATTN_KOKKOS_MATH_NS::log;
using DISTATTN_KOKKOS_MATH_NS::log1p;
using DISTATTN_KOKKOS_MATH_NS::sin;
using DISTATTN_KOKKOS_MATH_NS::sqrt;
}  // namespace math

using half_t = Kokkos::Experimental::half_t;
#if DISTATTN_KOKKOS_HAS_BHALF_NAME
using bhalf_t = Kokkos::Experimental::bhalf_t;
#else
using bhalf_t = float;  // placeholder; DISTATTN_HAS_BHALF is 0
#endif

template <class T>
inline constexpr bool is_distinct_16bit_v =
    !std::is_same<T, float>::value && sizeof(T) == 2;
inline constexpr bool has_half  = is_distinct_16bit_v<half_t>;
inline constexpr bool has_bhalf = DISTATTN_KOKKOS_HAS_BHALF_NAME && is_distinct_16bit_v<bhalf_t>;

/// +inf of float or double, callable in device code: std::numeric_limits' members
/// are host functions to nvcc (warning #20013 on every kernel that used them).
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T infinity() {
  static_assert(std::is_floating_point<T>::value, "compat::infinity<T>: T must be float or double");
  return std::is_same<T, float>::value ? T(__builtin_huge_valf()) : T(__builtin_huge_val());
}

/// Labelled fences exist from 3.5 on; older versions get the plain fence.
template <class Exec>
inline void fence(const Exec& exec, const std::string& label) {
#if KOKKOS_VERSION >= 30500
  exec.fence(label);
#else
  (void)label;
  exec.fence();
#endif
}

inline void global_fence(const std::string& label) {
#if KOKKOS_VERSION >= 30500
  Kokkos::fence(label);
#else
  (void)label;
  Kokkos::fence();
#endif
}

/// Kokkos::initialize on GPU `device` (-1: Kokkos's own choice): for callers that
/// start Kokkos themselves (the C ABI) after the host program picked a device.
inline void initialize_on_device(int device) {
#if KOKKOS_VERSION >= 30700
  Kokkos::InitializationSettings settings;
  if (device >= 0) settings.set_device_id(device);
  Kokkos::initialize(settings);
#else
  Kokkos::InitArguments args;
  args.device_id = device;
  Kokkos::initialize(args);
#endif
}

/// Two instances of an execution space that may run concurrently (distinct CUDA
/// streams on CUDA); on host backends or old Kokkos, copies of the same instance.
template <class Exec>
inline std::vector<Exec> partition_space(const Exec& exec, int n) {
#if KOKKOS_VERSION >= 40000
  std::vector<int> weights(static_cast<size_t>(n), 1);
  return Kokkos::Experimental::partition_space(exec, weights);
#else
  return std::vector<Exec>(static_cast<size_t>(n), exec);
#endif
}

/// Kokkos::kokkos_swap arrived in 4.3; before that Kokkos::swap (3.x) or std::swap.
template <class T>
KOKKOS_INLINE_FUNCTION void swap(T& a, T& b) {
  T tmp = a;
  a     = b;
  b     = tmp;
}

/// Whether this execution space can dereference host memory.
template <class Exec>
inline constexpr bool host_accessible_v =
    Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible;

/// free_memory_bytes's answer where the backend cannot say (host memory).
inline constexpr std::size_t kUnknownFreeMemory = std::numeric_limits<std::size_t>::max();

/// Free bytes of the device behind memory space Mem (cudaMemGetInfo on CUDA
/// builds), or kUnknownFreeMemory for host spaces.
template <class Mem>
inline std::size_t free_memory_bytes() {
#ifdef KOKKOS_ENABLE_CUDA
  if (std::is_same<Mem, Kokkos::CudaSpace>::value || std::is_same<Mem, Kokkos::CudaUVMSpace>::value) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return free_b;
  }
#endif
  return kUnknownFreeMemory;
}

/// Kokkos Tools allocation callbacks (same signature in 3.4 and 4.x): called with
/// the space, the View's label, the pointer and the data bytes of every
/// allocation and deallocation Kokkos makes. nullptr removes a callback.
using AllocationCallback = void (*)(Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t);
inline void set_allocation_callbacks(AllocationCallback on_alloc, AllocationCallback on_free) {
  Kokkos::Tools::Experimental::set_allocate_data_callback(on_alloc);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(on_free);
}

/// A Kokkos Tools region (pushRegion/popRegion) for the lifetime of the object:
/// Kokkos::Profiling::ScopedRegion from 4.1 on; before, the same two calls.
#if KOKKOS_VERSION >= 40100
using ScopedRegion = Kokkos::Profiling::ScopedRegion;
#else
class ScopedRegion {
 public:
  explicit ScopedRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;
};
#endif

/// True if Kokkos allocates and indexes a LayoutRight View of these extents over
/// all of its elements. Kokkos 3.4 computes the span of a View of rank 3 or more
/// whose element count is a multiple of 2^32 as 0, so such a View is allocated
/// with 0 bytes and every write lands past it; asking Kokkos itself (its required
/// allocation size) catches that and any other version's limit alike.
template <std::size_t Rank>
inline bool layout_right_span_exact(const std::array<std::size_t, Rank>& extents) {
  static_assert(Rank >= 1 && Rank <= 4, "layout_right_span_exact: rank 1 to 4");
  std::size_t n = 1;
  for (std::size_t e : extents) {
    if (e != 0 && n > std::numeric_limits<std::size_t>::max() / e) return false;
    n *= e;
  }
  if (n == 0) return true;
  using V = Kokkos::View<typename std::conditional<
                             Rank == 1, char*,
                             typename std::conditional<Rank == 2, char**,
                                                       typename std::conditional<Rank == 3, char***, char****>::type>::type>::type,
                         Kokkos::LayoutRight, Kokkos::HostSpace>;
  std::size_t e[4] = {0, 0, 0, 0};
  for (std::size_t i = 0; i < Rank; ++i) e[i] = extents[i];
  std::size_t req = 0;
  if constexpr (Rank == 1) req = V::required_allocation_size(e[0]);
  if constexpr (Rank == 2) req = V::required_allocation_size(e[0], e[1]);
  if constexpr (Rank == 3) req = V::required_allocation_size(e[0], e[1], e[2]);
  if constexpr (Rank == 4) req = V::required_allocation_size(e[0], e[1], e[2], e[3]);
  return req >= n;
}

}  // namespace compat
}  // namespace DistAttn

// Kokkos::printf arrived in 4.2; device-side printing is for debugging only.
#if KOKKOS_VERSION >= 40200
#define DISTATTN_DEVICE_PRINTF(...) Kokkos::printf(__VA_ARGS__)
#else
#define DISTATTN_DEVICE_PRINTF(...) printf(__VA_ARGS__)
#endif

// KOKKOS_IF_ON_HOST / KOKKOS_IF_ON_DEVICE came with 3.6.
#ifdef KOKKOS_IF_ON_HOST
#define DISTATTN_IF_ON_HOST(code) KOKKOS_IF_ON_HOST(code)
#define DISTATTN_IF_ON_DEVICE(code) KOKKOS_IF_ON_DEVICE(code)
#else
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define DISTATTN_IF_ON_HOST(code)
#define DISTATTN_IF_ON_DEVICE(code) \
  { DISTATTN_IMPL_STRIP_PARENS code }
#else
#define DISTATTN_IF_ON_HOST(code) \
  { DISTATTN_IMPL_STRIP_PARENS code }
#define DISTATTN_IF_ON_DEVICE(code)
#endif
#define DISTATTN_IMPL_STRIP_PARENS(...) __VA_ARGS__
#endif
