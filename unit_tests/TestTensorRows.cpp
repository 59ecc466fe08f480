// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The tuned kernels' tensor arguments made from Views (impl/tensor_arg_from_view.hpp):
// for every layout a caller may pass, the data pointer and strides must address
// the same element as the View itself, or a kernel reads the wrong rows.

#include "test_helpers.hpp"

#include <DistAttn/impl/tensor_arg_from_view.hpp>

namespace DistAttn::Test {
namespace {

template <class V>
void expect_same_elements(const V& v) {
  const auto t = Impl::tensor_rows<const float*>(v);
  EXPECT_EQ(t.data, v.data());
  for (int b = 0; b < int(v.extent(0)); ++b)
    for (int i = 0; i < int(v.extent(1)); ++i)
      for (int h = 0; h < int(v.extent(2)); ++h)
        for (int d = 0; d < int(v.extent(3)); ++d) {
          const std::int64_t stride_d = std::int64_t(v.stride(3));
          ASSERT_EQ(t.data + t.at(b, i, h) + d * stride_d, &v(b, i, h, d)) << b << ' ' << i << ' ' << h << ' ' << d;
        }
}

TEST(TensorRows, AddressTheViewsElementsInEveryLayout) {
  using H = Kokkos::HostSpace;
  Kokkos::View<float****, Kokkos::LayoutRight, H> right("right", 2, 5, 3, 4);
  Kokkos::View<float****, Kokkos::LayoutLeft, H> left("left", 2, 5, 3, 4);
  expect_same_elements(right);
  expect_same_elements(left);
  // A head range and a row range of a larger tensor: LayoutStride with an offset.
  Kokkos::View<float****, Kokkos::LayoutRight, H> big("big", 2, 9, 6, 4);
  expect_same_elements(Kokkos::subview(big, Kokkos::ALL, std::make_pair(2, 7), std::make_pair(1, 4), Kokkos::ALL));
  // Rows strided by 3 (an Attention2D shard of a position-ordered buffer).
  Kokkos::LayoutStride ls(2, big.stride(0), 3, 3 * big.stride(1), 6, big.stride(2), 4, big.stride(3));
  expect_same_elements(Kokkos::View<float****, Kokkos::LayoutStride, H, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
      big.data() + big.stride(1), ls));
}

TEST(StatRows, AddressTheViewsElementsInEveryLayout) {
  using H = Kokkos::HostSpace;
  Kokkos::View<float***, Kokkos::LayoutRight, H> right("right", 2, 3, 7);
  Kokkos::View<float***, Kokkos::LayoutLeft, H> left("left", 2, 3, 7);
  auto check = [](const auto& v) {
    const auto s = Impl::stat_rows<const float*>(v);
    for (int b = 0; b < int(v.extent(0)); ++b)
      for (int h = 0; h < int(v.extent(1)); ++h)
        for (int i = 0; i < int(v.extent(2)); ++i) ASSERT_EQ(s.data + s.at(b, h, i), &v(b, h, i));
  };
  check(right);
  check(left);
  check(Kokkos::subview(right, Kokkos::ALL, std::make_pair(1, 3), std::make_pair(2, 6)));
}

}  // namespace
}  // namespace DistAttn::Test
