// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Shared plumbing of the communication tests: the transports under test (typed-
// test configurations), one cached world communicator per configuration, a seed
// shared by all ranks (mpi_test_helpers.hpp), and data that every rank can recompute for every other
// rank (value = hash(seed, owner, index)), so any misrouted byte is detected.

#include <DistAttn/DistAttn.hpp>
#include <DistAttn/comm/impl/poll.hpp>

#include "../mpi_test_helpers.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>

namespace DistAttn::Test {

/// Timeout of the test communicators: long enough for 4 oversubscribed ranks on
/// 2 cores, short enough that a rank that failed an assertion and left a
/// collective makes the others fail instead of hanging ctest.
constexpr double kTestTimeoutSeconds = 60.0;

inline std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Element `index` of the data owned by `owner` (a rank or a token id).
template <class T>
T value_of(std::uint64_t seed, std::int64_t owner, std::size_t index) {
  const std::uint64_t h = splitmix(seed ^ splitmix(std::uint64_t(owner) * 0x100000001B3ull + index));
  const double u        = double(h >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;  // [-1, 1)
  if constexpr (std::is_integral<T>::value) {
    return T(h);
  } else if constexpr (std::is_floating_point<T>::value) {
    return T(u);
  } else {
    return T(float(u));  // Kokkos half types
  }
}

template <class T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Fills a contiguous View in memory order with value_of(seed, owner, offset + i).
template <class View>
void fill(const View& v, std::uint64_t seed, std::int64_t owner, std::size_t offset = 0) {
  using T = std::remove_cv_t<typename View::value_type>;
  auto h  = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < h.size(); ++i) h.data()[i] = value_of<T>(seed, owner, offset + i);
  Kokkos::deep_copy(v, h);
}

/// Host copy of a contiguous View's elements in memory order.
template <class View>
auto host_copy(const View& v) {
  return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
}

/// Number of elements i in [begin, end) whose bytes differ from expected(i).
template <class HostView, class F>
std::size_t mismatches(const HostView& h, std::size_t begin, std::size_t end, F&& expected) {
  std::size_t bad = 0;
  for (std::size_t i = begin; i < end; ++i) bad += same_bytes(h.data()[i], expected(i)) ? 0 : 1;
  return bad;
}

// ---- transports under test -------------------------------------------------

/// MPI on the default execution space (device memory and host staging on GPU builds).
struct MpiDefaultCfg {
  using space = MpiSpace;
  using exec  = Kokkos::DefaultExecutionSpace;
  using comm  = Communicator<space, exec>;
  static constexpr bool is_nccl = false;
  static const char* name() { return "MpiDefault"; }
  static std::string skip_reason() { return ""; }
  static comm make_world() { return comm::from_raw(MPI_COMM_WORLD, exec()).duplicate(); }
};

/// MPI on the host with forced host staging: the staging path on machines without GPU.
struct MpiHostStagedCfg {
  using space = MpiSpace;
  using exec  = Kokkos::DefaultHostExecutionSpace;
  using comm  = Communicator<space, exec>;
  static constexpr bool is_nccl = false;
  static const char* name() { return "MpiHostStaged"; }
  static std::string skip_reason() { return ""; }
  static comm make_world() {
    auto w = comm::from_raw(MPI_COMM_WORLD, exec()).duplicate();
    w.set_host_staging(HostStaging::Always);
    return w;
  }
};

#if DISTATTN_ENABLE_NCCL
/// NCCL on Kokkos::Cuda; needs one GPU per rank on each node.
struct NcclCfg {
  using space = NcclSpace;
  using exec  = Kokkos::Cuda;
  using comm  = Communicator<space, exec>;
  static constexpr bool is_nccl = true;
  static const char* name() { return "Nccl"; }
  static std::string skip_reason();
  static comm make_world() { return comm::from_mpi(MPI_COMM_WORLD, exec()); }
};

inline std::string NcclCfg::skip_reason() {
  static const std::string reason = [] {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local = 0, devices = 0;
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    // Every rank must take the same decision, or the others wait in a collective.
    int skip = local > devices ? 1 : 0, any = 0;
    MPI_Allreduce(&skip, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) return std::string();
    std::ostringstream os;
    os << "NCCL needs one GPU per rank: " << local << " ranks on a node with " << devices << " GPU(s)";
    return os.str();
  }();
  return reason;
}
#define DISTATTN_TEST_NCCL_CFG , ::DistAttn::Test::NcclCfg
#else
#define DISTATTN_TEST_NCCL_CFG
#endif

using CommConfigs = ::testing::Types<MpiDefaultCfg, MpiHostStagedCfg DISTATTN_TEST_NCCL_CFG>;
using MpiConfigs  = ::testing::Types<MpiDefaultCfg, MpiHostStagedCfg>;

struct CfgNames {
  template <class Cfg>
  static std::string GetName(int) {
    return Cfg::name();
  }
};

/// One world communicator per configuration, created on first use and destroyed
/// after the last test (before Kokkos and MPI are finalized).
template <class Cfg>
class WorldCache {
 public:
  static typename Cfg::comm& get() {
    auto& w = slot();
    if (!w) {
      w = std::make_unique<typename Cfg::comm>(Cfg::make_world());
      w->set_timeout(kTestTimeoutSeconds);
      w->set_timeout_policy(TimeoutPolicy::Throw);
    }
    return *w;
  }
  static void reset() { slot().reset(); }

 private:
  static std::unique_ptr<typename Cfg::comm>& slot() {
    static std::unique_ptr<typename Cfg::comm> w;
    return w;
  }
};

class WorldCacheEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    WorldCache<MpiDefaultCfg>::reset();
    WorldCache<MpiHostStagedCfg>::reset();
#if DISTATTN_ENABLE_NCCL
    WorldCache<NcclCfg>::reset();
#endif
  }
};
inline ::testing::Environment* const world_cache_environment =
    ::testing::AddGlobalTestEnvironment(new WorldCacheEnvironment);

/// Fixture: skips where the transport cannot run, hands out the cached world
/// with zeroed counters and a fresh shared seed.
template <class Cfg>
class CommTest : public ::testing::Test {
 protected:
  using comm_type = typename Cfg::comm;
  using exec_type = typename Cfg::exec;
  using mem_type  = typename exec_type::memory_space;

  void SetUp() override {
    const std::string why = Cfg::skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    world_ = &WorldCache<Cfg>::get();
    world_->counters().reset();
    seed_ = shared_seed();
  }
  comm_type& world() { return *world_; }
  std::uint64_t seed() const { return seed_; }
  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }

 private:
  comm_type* world_   = nullptr;
  std::uint64_t seed_ = 0;
};

/// Runs f, expects an exception of type E whose message contains every fragment.
template <class E, class F>
void expect_throw_with(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "missing '" << frag << "' in: " << msg;
  }
}

}  // namespace DistAttn::Test
