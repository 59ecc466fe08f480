// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Forward building block against the fp64 reference: one-shot, split + merge in
// random order, empty rows, GQA, strided (Attention2D-style) causal masks, odd sizes.

#include "attention_inputs.hpp"

#include <algorithm>
#include <numeric>

namespace DistAttn::Test {
namespace {

template <class T>
class AttentionFwd : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionFwd, ElementTypes);

template <class T>
void check_one_shot(const Shape& s, const Mask& mask, const Mask* host_mask = nullptr) {
  using Acc = accum_t<T>;
  auto in   = make_inputs<T>(s);
  Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq);
  AttnOptions opts;
  opts.mask = mask;
  attention_fwd(Exec(), in.qd, in.kd, in.vd, o, lse, opts);

  HostTensor ro("ro", s.B, s.Sq, s.H, s.D);
  HostStats rl("rl", s.B, s.H, s.Sq);
  Testing::reference_fwd(in.q, in.k, in.v, host_mask ? *host_mask : mask, resolved_scale(opts, s.D), ro, rl);
  const auto ho = to_host(o);
  const auto hl = stats_to_host(lse);
  const double err = Testing::rel_error(ho, ro);
  EXPECT_LE(err, rel_tol<T>()) << type_name<T>() << " seed " << in.seed << " shape B" << s.B << " Sq" << s.Sq
                               << " Sk" << s.Sk << " H" << s.H << "/" << s.Hkv << " D" << s.D;
  double lerr = 0;
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int i = 0; i < s.Sq; ++i) {
        if (std::isinf(rl(b, h, i))) {
          EXPECT_TRUE(std::isinf(hl(b, h, i)) && hl(b, h, i) < 0) << "row " << i << " should be empty";
          continue;
        }
        lerr = std::max(lerr, std::fabs(hl(b, h, i) - rl(b, h, i)));
      }
  // LSE is fp32 for low-precision inputs: absolute error ~ eps(fp32) * |LSE|.
  EXPECT_LE(lerr, (std::is_same<T, double>::value ? 1e-11 : 1e-4)) << "LSE, seed " << in.seed;
}

TYPED_TEST(AttentionFwd, OneShotMatchesReference) {
  using T = TypeParam;
  for (int D : {64, 96, 128}) {
    check_one_shot<T>({2, 33, 33, 4, 4, D}, Mask::none());
    check_one_shot<T>({2, 33, 33, 4, 4, D}, Mask::causal());
  }
}

TYPED_TEST(AttentionFwd, OddSizes) {
  using T = TypeParam;
  check_one_shot<T>({1, 1, 1, 1, 1, 64}, Mask::causal());
  check_one_shot<T>({1, 17, 17, 3, 3, 64}, Mask::causal());
  check_one_shot<T>({1, 17, 40, 2, 1, 32}, Mask::none());
  check_one_shot<T>({1, 1000, 1000, 1, 1, 64}, Mask::causal());
  // An odd head_dim (device tiles read it one element at a time and pad it to 36
  // columns) and one past the register-blocked kernels' 128 (the TeamGemm kernel).
  check_one_shot<T>({1, 45, 45, 2, 1, 33}, Mask::causal());
  check_one_shot<T>({1, 37, 37, 2, 2, 160}, Mask::causal());
}

TYPED_TEST(AttentionFwd, GqaAndMqa) {
  using T = TypeParam;
  check_one_shot<T>({1, 50, 50, 8, 2, 64}, Mask::causal());
  check_one_shot<T>({2, 21, 37, 6, 1, 128}, Mask::none());
}

// Attention2D's cyclic shards: queries r + s*c + i*P against keys with another
// offset, same stride; and a step-like pattern (different strides).
// Key windows and packed documents through the same kernels: tiles outside every
// key interval are skipped, tiles across an interval's end are masked per element.
TYPED_TEST(AttentionFwd, WindowsAndDocuments) {
  using T = TypeParam;
  check_one_shot<T>({1, 45, 45, 2, 1, 64}, Mask::causal().with_window(Window{7, 0}));
  check_one_shot<T>({2, 33, 33, 2, 2, 64}, Mask::none().with_window(Window{5, 9}));
  check_one_shot<T>({1, 40, 40, 2, 2, 64}, Mask::causal({1, 4}, {2, 4}).with_window(Window{9, 0}));
  check_one_shot<T>({1, 30, 30, 1, 1, 32}, Mask::causal({0, 1}, {5, 1}).with_window(Window{2, 0}));  // rows 0..4 see no key
  const PackedDocs docs({0, 10, 11, 30, 45});  // a one-token document among them
  for (const Mask& m : {Mask::causal(), Mask::none(), Mask::causal().with_window(Window{4, 0})}) {
    const Mask host = docs.on_host(m);
    check_one_shot<T>({1, 45, 45, 4, 2, 64}, docs.on_device(m), &host);
  }
}

TYPED_TEST(AttentionFwd, StridedCausalMasks) {
  using T = TypeParam;
  check_one_shot<T>({1, 40, 40, 2, 2, 64}, Mask::causal({1, 4}, {2, 4}));   // strictly lower
  check_one_shot<T>({1, 40, 40, 2, 2, 64}, Mask::causal({3, 4}, {2, 4}));   // lower incl. diagonal
  check_one_shot<T>({1, 25, 50, 2, 1, 64}, Mask::causal({1, 4}, {0, 2}));   // step-like
  check_one_shot<T>({1, 30, 30, 2, 2, 64}, Mask::causal({100, 1}, {0, 1})); // fully visible
}

// Rows whose every key lies in the future: O = 0, LSE = -inf, no NaN anywhere.
TYPED_TEST(AttentionFwd, EmptyRowsGiveZeroAndMinusInf) {
  using T   = TypeParam;
  using Acc = accum_t<T>;
  const Shape s{1, 20, 20, 2, 2, 64};
  auto in = make_inputs<T>(s);
  AttnOptions opts;
  opts.mask = Mask::causal({0, 1}, {5, 1});  // rows 0..4 see no key
  Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq);
  attention_fwd(Exec(), in.qd, in.kd, in.vd, o, lse, opts);
  const auto ho = to_host(o);
  const auto hl = stats_to_host(lse);
  for (int h = 0; h < s.H; ++h)
    for (int i = 0; i < s.Sq; ++i) {
      for (int d = 0; d < s.D; ++d) ASSERT_FALSE(std::isnan(ho(0, i, h, d)));
      if (i < 5) {
        EXPECT_TRUE(std::isinf(hl(0, h, i)) && hl(0, h, i) < 0) << "row " << i;
        for (int d = 0; d < s.D; ++d) EXPECT_EQ(ho(0, i, h, d), 0.0);
      } else {
        EXPECT_TRUE(std::isfinite(hl(0, h, i))) << "row " << i;
      }
    }
  check_one_shot<T>(s, opts.mask);
}

// K/V split into random pieces, each folded into its own fresh state, merged in
// random order (including merges of empty states) = one-shot = reference.
TYPED_TEST(AttentionFwd, SplitAndMergeInRandomOrder) {
  using T   = TypeParam;
  using Acc = accum_t<T>;
  const Shape s{2, 45, 77, 4, 2, 64};
  auto in = make_inputs<T>(s);
  std::mt19937 gen(unsigned(in.seed));
  for (const Mask& base : {Mask::none(), Mask::causal({40, 1}, {0, 1})}) {
    const int pieces = 2 + int(gen() % 5);
    std::vector<int> cuts{0, s.Sk};
    while (int(cuts.size()) < pieces + 1) cuts.push_back(1 + int(gen() % (s.Sk - 1)));
    std::sort(cuts.begin(), cuts.end());
    std::vector<AttnState<Acc, Mem>> states;
    for (std::size_t p = 0; p + 1 < cuts.size(); ++p) {
      auto st = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
      if (cuts[p + 1] > cuts[p]) {
        auto kp = Kokkos::subview(in.kd, Kokkos::ALL, std::make_pair(cuts[p], cuts[p + 1]), Kokkos::ALL, Kokkos::ALL);
        auto vp = Kokkos::subview(in.vd, Kokkos::ALL, std::make_pair(cuts[p], cuts[p + 1]), Kokkos::ALL, Kokkos::ALL);
        AttnOptions opts;
        opts.mask = base;
        opts.mask.k.offset += base.k.stride * cuts[p];
        attention_fwd_update(Exec(), in.qd, kp, vp, st, opts);
      }
      states.push_back(st);
    }
    std::vector<int> order(states.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), gen);
    auto total = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
    for (int idx : order) attention_merge(Exec(), total, states[std::size_t(idx)]);
    Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
    RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq);
    attention_finalize(Exec(), total, o, lse);

    HostTensor ro("ro", s.B, s.Sq, s.H, s.D);
    HostStats rl("rl", s.B, s.H, s.Sq);
    Testing::reference_fwd(in.q, in.k, in.v, base, 1.0 / std::sqrt(double(s.D)), ro, rl);
    EXPECT_LE(Testing::rel_error(to_host(o), ro), rel_tol<T>())
        << type_name<T>() << " seed " << in.seed << " pieces " << pieces;
  }
}

TYPED_TEST(AttentionFwd, BitwiseReproducible) {
  using T   = TypeParam;
  using Acc = accum_t<T>;
  const Shape s{1, 70, 70, 4, 2, 64};
  auto in = make_inputs<T>(s);
  Tensor4<T, Mem> o1("o1", s.B, s.Sq, s.H, s.D), o2("o2", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> l1("l1", s.B, s.H, s.Sq), l2("l2", s.B, s.H, s.Sq);
  AttnOptions opts;
  opts.mask = Mask::causal();
  attention_fwd(Exec(), in.qd, in.kd, in.vd, o1, l1, opts);
  attention_fwd(Exec(), in.qd, in.kd, in.vd, o2, l2, opts);
  const auto h1 = to_host(o1), h2 = to_host(o2);
  for (std::size_t i = 0; i < h1.span(); ++i) ASSERT_EQ(h1.data()[i], h2.data()[i]);
}

}  // namespace
}  // namespace DistAttn::Test
