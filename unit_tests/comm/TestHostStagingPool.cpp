// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The MPI transport's host staging pool: requests are served from their own size
// class only, so a pattern of staged transfers that repeats (the passes of an
// executor) allocates in its first round and never again.

#include <DistAttn/comm/mpi/staging.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <random>
#include <vector>

namespace DistAttn::Test {
namespace {

using Impl::HostBytes;
using Impl::HostStagingPool;

TEST(HostStagingPool, SizeClassesAreAtMostAQuarterOverAndMonotone) {
  std::size_t last = 0;
  for (std::size_t n = 1; n < 70000; n += (n < 300 ? 1 : 97)) {
    const std::size_t c = HostStagingPool::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c, n + n / 4) << "n=" << n;
    EXPECT_GE(c, last) << "n=" << n;
    EXPECT_EQ(HostStagingPool::size_class(c), c) << "a class is its own class, n=" << n;
    last = c;
  }
}

TEST(HostStagingPool, ASmallRequestLeavesALargerClassAlone) {
  auto pool = std::make_shared<HostStagingPool>();
  { auto big = pool->acquire(18432); }
  ASSERT_EQ(pool->free_buffers(), 1u);
  {
    auto small = pool->acquire(768);
    EXPECT_EQ(small->extent(0), 768u);
    EXPECT_EQ(pool->free_buffers(), 1u) << "the 768-byte request took the 18432-byte buffer";
    auto big = pool->acquire(18432);
    EXPECT_EQ(pool->free_buffers(), 0u);
  }
  EXPECT_EQ(pool->free_buffers(), 2u);
}

// Random interleavings of holds and releases over a few message sizes (those of
// a pipelined Ulysses pass and more), each replayed for several rounds: the
// buffers the pool owns after the first round are all it ever owns.
TEST(HostStagingPool, ARepeatingPatternAllocatesOnlyInItsFirstRound) {
  const std::vector<std::size_t> sizes = {384, 512, 768, 1024, 6144, 18432, 100000};
  std::mt19937 rng(20261123);
  for (int pattern = 0; pattern < 50; ++pattern) {
    struct Op {
      bool acquire;
      std::size_t what;  // a size, or which held buffer to release
    };
    std::vector<Op> ops;
    std::size_t held = 0;
    for (int i = 0; i < 60; ++i) {
      if (held > 0 && rng() % 3 == 0) {
        ops.push_back({false, rng() % held});
        --held;
      } else {
        ops.push_back({true, sizes[rng() % sizes.size()]});
        ++held;
      }
    }
    auto pool = std::make_shared<HostStagingPool>();
    std::size_t owned_after_first = 0;
    for (int round = 0; round < 4; ++round) {
      std::vector<std::shared_ptr<HostBytes>> bufs;
      for (const Op& op : ops) {
        if (op.acquire) {
          bufs.push_back(pool->acquire(op.what));
          ASSERT_EQ(bufs.back()->extent(0), op.what);
        } else {
          bufs.erase(bufs.begin() + std::ptrdiff_t(op.what));
        }
      }
      bufs.clear();
      if (round == 0) owned_after_first = pool->free_buffers();
      EXPECT_EQ(pool->free_buffers(), owned_after_first) << "pattern " << pattern << ", round " << round;
    }
  }
}

}  // namespace
}  // namespace DistAttn::Test
