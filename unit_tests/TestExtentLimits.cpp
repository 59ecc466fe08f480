// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A tensor of a multiple of 2^32 elements (issue #35, item 8). Kokkos 3.4 gives a
// View of rank 3 or more with such an element count a span of 0, so it is
// allocated with 0 bytes; the driver then wrote past it (SIGSEGV with --seq 4194304
// --heads 1 --kv-heads 1 --dim 4096 on 4 ranks). The library rejects such a View
// by name at every executor's entry, on every rank, before anything writes to it.

#include "executor_memory_helpers.hpp"

#include <DistAttn/ring/ring_attention.hpp>

#include <array>

namespace DistAttn::Test {
namespace {

TEST(ExtentLimits, KokkosSpanAndTheLibrarysCheckAgree) {
  const std::array<std::size_t, 4> fine{2, 8, 3, 16}, wrapped{1, std::size_t(1) << 20, 1, 4096};
  EXPECT_TRUE(compat::layout_right_span_exact(fine));
  // Unmanaged: the mapping alone, no allocation.
  Kokkos::View<char****, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> v(nullptr, wrapped[0],
                                                                                           wrapped[1], wrapped[2],
                                                                                           wrapped[3]);
  EXPECT_EQ(compat::layout_right_span_exact(wrapped), v.span() >= v.size()) << "span " << v.span();
  EXPECT_THROW(Impl::check_view_extents("test", "q", std::array<std::size_t, 4>{1, std::size_t(1) << 62, 8, 8}),
               InvalidArgument);  // overflows size_t
}

TEST(ExtentLimits, ExecutorRejectsATensorKokkosAllocatedWithZeroBytes) {
  const int c = 1 << 20, D = 4096;
  if (compat::layout_right_span_exact(std::array<std::size_t, 4>{1, std::size_t(c), 1, std::size_t(D)}))
    GTEST_SKIP() << "this Kokkos allocates [1, 2^20, 1, 4096] whole";
  auto comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  comm.set_timeout(20.0);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  RingAttention<T, MpiSpace, Exec> ring(comm, Exec(), 1, c, 1, 1, D);
  // 2^32 elements each, 0 bytes each on this Kokkos.
  Tensor4<T, Mem> q(Kokkos::view_alloc(Kokkos::WithoutInitializing, "q"), 1, c, 1, D);
  Tensor4<T, Mem> k(Kokkos::view_alloc(Kokkos::WithoutInitializing, "k"), 1, c, 1, D);
  Tensor4<T, Mem> v(Kokkos::view_alloc(Kokkos::WithoutInitializing, "v"), 1, c, 1, D);
  Tensor4<T, Mem> o(Kokkos::view_alloc(Kokkos::WithoutInitializing, "o"), 1, c, 1, D);
  RowStats<Acc, Mem> lse("lse", 1, 1, c);
  ASSERT_LT(q.span(), q.size());
  expect_error_on_every_rank([&] { ring.forward(q, k, v, o, lse); }, {"'q'", "4294967296 elements", "2^32"});
}

}  // namespace
}  // namespace DistAttn::Test
