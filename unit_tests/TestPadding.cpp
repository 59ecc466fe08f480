// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// SequencePadding (schedule/padding.hpp): for every layout, rank count and length, the
// padded layout covers [0, padded) once, its first N positions are the real
// tokens, zero_padding zeroes exactly the padded rows, and full attention is
// refused padding. The executors' results at a padded N against fp64 are checked
// by the example programs (examples/).
#include <gtest/gtest.h>

#include "test_helpers.hpp"

#include <DistAttn/schedule/padding.hpp>

#include <vector>

using namespace DistAttn;
using namespace DistAttn::Test;

namespace {

const TokenLayout::Kind kKinds[] = {TokenLayout::Kind::Contiguous, TokenLayout::Kind::Zigzag,
                                    TokenLayout::Kind::Cyclic};

TEST(SequencePadding, EveryPositionOnceAndRealTokensFirst) {
  for (auto kind : kKinds)
    for (int P = 1; P <= 7; ++P)
      for (std::int64_t N : {std::int64_t(1), std::int64_t(P), std::int64_t(2 * P + 1), std::int64_t(1001)}) {
        const SequencePadding pad(N, P, kind);
        const std::int64_t unit = kind == TokenLayout::Kind::Zigzag ? 2 * P : P;
        SCOPED_TRACE(std::string(to_string(kind)) + " P=" + std::to_string(P) + " N=" + std::to_string(N));
        EXPECT_EQ(pad.padded_tokens() % unit, 0);
        EXPECT_GE(pad.padded_tokens(), N);
        EXPECT_LT(pad.padded_tokens(), N + unit);
        EXPECT_EQ(std::int64_t(pad.chunk()) * P, pad.padded_tokens());
        std::vector<int> seen(std::size_t(pad.padded_tokens()), 0);
        std::int64_t real = 0;
        for (int r = 0; r < P; ++r) {
          const TokenLayout l = pad.layout(r);
          for (std::int64_t i = 0; i < pad.chunk(); ++i) {
            const std::int64_t g = l.position(i);
            ASSERT_GE(g, 0);
            ASSERT_LT(g, pad.padded_tokens());
            ++seen[std::size_t(g)];
          }
          real += pad.real_rows(r);
        }
        for (int s : seen) EXPECT_EQ(s, 1);
        EXPECT_EQ(real, N);
      }
}

TEST(SequencePadding, ZeroPaddingZeroesExactlyThePaddedRows) {
  const std::int64_t N = 23;
  for (auto kind : kKinds)
    for (int P : {2, 3, 5}) {
      const SequencePadding pad(N, P, kind);
      for (int r = 0; r < P; ++r) {
        const int c = pad.chunk();
        Tensor4<double, Mem> x("x", 2, c, 3, 4);
        RowStats<double, Mem> s("s", 2, 3, c);
        Kokkos::deep_copy(x, 1.0);
        Kokkos::deep_copy(s, 1.0);
        pad.zero_padding(Exec(), r, x);
        pad.zero_padding(Exec(), r, s);
        auto hx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
        auto hs = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), s);
        const TokenLayout l = pad.layout(r);
        for (int i = 0; i < c; ++i) {
          const double want = l.position(i) < N ? 1.0 : 0.0;
          for (int b = 0; b < 2; ++b)
            for (int h = 0; h < 3; ++h) {
              EXPECT_EQ(hs(b, h, i), want) << to_string(kind) << " P=" << P << " rank " << r << " row " << i;
              for (int d = 0; d < 4; ++d) EXPECT_EQ(hx(b, i, h, d), want);
            }
        }
      }
    }
}

TEST(SequencePadding, FullAttentionIsNotPaddedAndBadArgumentsAreNamed) {
  expect_invalid_argument_mentioning([] { SequencePadding(1001, 3, TokenLayout::Kind::Cyclic, false); },
                                     {"full (non-causal)", "N=1001", "multiple of 3"});
  expect_invalid_argument_mentioning([] { SequencePadding(1005, 3, TokenLayout::Kind::Zigzag, false); },
                                     {"N=1005", "multiple of 6", "zigzag"});
  EXPECT_EQ(SequencePadding(1002, 3, TokenLayout::Kind::Cyclic, false).chunk(), 334);
  expect_invalid_argument_mentioning([] { SequencePadding(0, 3, TokenLayout::Kind::Cyclic); }, {"tokens (N)"});
  expect_invalid_argument_mentioning([] { SequencePadding(10, 0, TokenLayout::Kind::Cyclic); }, {"ranks (P)"});
  const SequencePadding pad(10, 3, TokenLayout::Kind::Contiguous);
  expect_invalid_argument_mentioning([&] { pad.layout(3); }, {"rank 3"});
  Tensor4<double, Mem> wrong("wrong", 1, pad.chunk() + 1, 1, 1);
  expect_invalid_argument_mentioning([&] { pad.zero_padding(Exec(), 0, wrong); }, {"rows"});
}

}  // namespace
