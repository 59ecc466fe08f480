// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Bad input to public functions gives DistAttn::InvalidArgument naming the
// argument, never a crash or a silently wrong answer.

#include "test_helpers.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace DistAttn::Test {
namespace {

using T   = float;
using Acc = float;

struct Views {
  Tensor4<T, Mem> q, k, v, o;
  RowStats<Acc, Mem> lse;
};

Views make(int Sq, int Sk, int H, int Hkv, int D, int Dk = -1) {
  if (Dk < 0) Dk = D;
  Views w{Tensor4<T, Mem>("q", 1, Sq, H, D), Tensor4<T, Mem>("k", 1, Sk, Hkv, Dk),
          Tensor4<T, Mem>("v", 1, Sk, Hkv, Dk), Tensor4<T, Mem>("o", 1, Sq, H, D),
          RowStats<Acc, Mem>("lse", 1, H, Sq)};
  Kokkos::deep_copy(w.q, 0.5f);
  Kokkos::deep_copy(w.k, 0.25f);
  Kokkos::deep_copy(w.v, 1.0f);
  return w;
}

/// Runs f, expects InvalidArgument whose message contains every fragment.
template <class F>
void expect_invalid(F&& f, std::initializer_list<const char*> fragments) {
  try {
    f();
    FAIL() << "expected DistAttn::InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    for (const char* frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg;
  }
}

TEST(BadInput, HeadDimMismatch) {
  auto w = make(8, 8, 2, 2, 64, 32);
  expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, w.o, w.lse); }, {"attention_fwd", "head_dim"});
}

TEST(BadInput, HeadsNotDivisibleByKvHeads) {
  auto w = make(8, 8, 3, 2, 64);
  expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, w.o, w.lse); }, {"not divisible", "kv heads"});
}

TEST(BadInput, KvShapeMismatch) {
  auto w = make(8, 8, 2, 2, 64);
  Tensor4<T, Mem> v("v", 1, 9, 2, 64);
  expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, v, w.o, w.lse); }, {"'v'", "extent(1)"});
}

TEST(BadInput, OutputShapeMismatch) {
  auto w = make(8, 8, 2, 2, 64);
  Tensor4<T, Mem> o("o", 1, 7, 2, 64);
  expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, o, w.lse); }, {"'o'"});
  RowStats<Acc, Mem> lse("lse", 1, 8, 2);
  expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, w.o, lse); }, {"'lse'"});
}

TEST(BadInput, StateShapeMismatch) {
  auto w  = make(8, 8, 2, 2, 64);
  auto st = make_state<Acc>(Exec(), 1, 9, 2, 64);
  expect_invalid([&] { attention_fwd_update(Exec(), w.q, w.k, w.v, st); }, {"state.acc"});
  auto a = make_state<Acc>(Exec(), 1, 8, 2, 64);
  expect_invalid([&] { attention_merge(Exec(), a, st); }, {"attention_merge", "from.acc"});
}

TEST(BadInput, NonFiniteOrZeroScale) {
  auto w = make(8, 8, 2, 2, 64);
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    AttnOptions opts;
    opts.scale = bad;
    expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, w.o, w.lse, opts); }, {"scale"});
  }
}

TEST(BadInput, NonPositiveMaskStride) {
  auto w = make(8, 8, 2, 2, 64);
  AttnOptions opts;
  opts.mask = Mask::causal({0, 0}, {0, 1});
  expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, w.o, w.lse, opts); }, {"stride"});
}

/// Unsorted document offsets would send the document search astray: a silent
/// wrong answer unless the one-call APIs refuse them.
TEST(BadInput, UnsortedOrUnanchoredDocuments) {
  auto w = make(8, 8, 2, 2, 64);
  Tensor4<T, Mem> dq("dq", 1, 8, 2, 64), dk("dk", 1, 8, 2, 64), dv("dv", 1, 8, 2, 64);
  for (const auto& [offsets, what] : {std::pair<std::vector<std::int64_t>, const char*>{{0, 5, 3, 8}, "decrease"},
                                      {{1, 4, 8}, "first offset"}}) {
    Kokkos::View<std::int64_t*, Mem> dev("offsets", offsets.size());
    Kokkos::deep_copy(dev, Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                               offsets.data(), offsets.size()));
    AttnOptions opts;
    opts.mask = Mask::causal({0, 1}, {0, 1}).with_documents(Documents{dev.data(), int(offsets.size()) - 1});
    expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, w.o, w.lse, opts); }, {"documents", what});
    expect_invalid([&] { attention_bwd(Exec(), w.q, w.k, w.v, w.o, w.o, w.lse, dq, dk, dv, opts); },
                   {"documents", what});
  }
}

TEST(BadInput, NaNInInputs) {
  auto w = make(8, 8, 2, 2, 64);
  auto h = Kokkos::create_mirror_view(w.k);
  Kokkos::deep_copy(h, w.k);
  h(0, 3, 1, 5) = std::nanf("");
  Kokkos::deep_copy(w.k, h);
  expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, w.o, w.lse); }, {"'k'", "NaN"});
  Tensor4<T, Mem> dq("dq", 1, 8, 2, 64), dk("dk", 1, 8, 2, 64), dv("dv", 1, 8, 2, 64);
  expect_invalid([&] { attention_bwd(Exec(), w.q, w.k, w.v, w.o, w.o, w.lse, dq, dk, dv); }, {"'k'", "NaN"});
}

TEST(BadInput, CudaPathWithoutTunedKernel) {
  auto w = make(8, 8, 2, 2, 64);
  AttnOptions opts;
  opts.path = KernelPath::Cuda;
  if (Impl::tuned_attn_avail<Exec, T>::value) GTEST_SKIP() << "a tuned kernel exists for this build";
  expect_invalid([&] { attention_fwd(Exec(), w.q, w.k, w.v, w.o, w.lse, opts); }, {"KernelPath::Cuda"});
}

TEST(BadInput, ViewInWrongMemorySpace) {
  if (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible)
    GTEST_SKIP() << "the default execution space can access host memory: no wrong space exists in this build";
  Tensor4<T, Kokkos::HostSpace> q("q", 1, 8, 2, 64);
  auto w = make(8, 8, 2, 2, 64);
  expect_invalid([&] { attention_fwd(Exec(), q, w.k, w.v, w.o, w.lse); }, {"'q'", "memory space"});
}

}  // namespace
}  // namespace DistAttn::Test
