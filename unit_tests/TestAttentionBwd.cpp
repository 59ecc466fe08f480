// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Backward building block: one-call backward vs the fp64 reference, and the
// additivity the distributed schedules rely on (sum of per-block calls = whole, from
// attention_bwd_prepare's Delta and cleared accumulators).

#include "attention_inputs.hpp"

namespace DistAttn::Test {
namespace {

template <class T>
class AttentionBwd : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionBwd, ElementTypes);

template <class T>
struct BwdResult {
  HostTensor dq, dk, dv, rdq, rdk, rdv;
  std::uint64_t seed;
};

template <class T>
BwdResult<T> run_bwd(const Shape& s, const Mask& mask, const Mask* host_mask = nullptr) {
  using Acc = accum_t<T>;
  auto in   = make_inputs<T>(s);
  HostTensor dout("dout", s.B, s.Sq, s.H, s.D);
  Testing::fill_random(dout, in.seed + 3);
  dout = rounded<T>(dout);
  auto ddo = to_device<T>(dout, "dout");
  AttnOptions opts;
  opts.mask = mask;
  Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq);
  attention_fwd(Exec(), in.qd, in.kd, in.vd, o, lse, opts);
  Tensor4<T, Mem> dq("dq", s.B, s.Sq, s.H, s.D), dk("dk", s.B, s.Sk, s.Hkv, s.D), dv("dv", s.B, s.Sk, s.Hkv, s.D);
  attention_bwd(Exec(), in.qd, in.kd, in.vd, o, ddo, lse, dq, dk, dv, opts);

  BwdResult<T> r;
  r.seed = in.seed;
  r.dq   = to_host(dq);
  r.dk   = to_host(dk);
  r.dv   = to_host(dv);
  r.rdq  = HostTensor("rdq", s.B, s.Sq, s.H, s.D);
  r.rdk  = HostTensor("rdk", s.B, s.Sk, s.Hkv, s.D);
  r.rdv  = HostTensor("rdv", s.B, s.Sk, s.Hkv, s.D);
  Testing::reference_bwd(in.q, in.k, in.v, dout, host_mask ? *host_mask : mask, resolved_scale(opts, s.D), r.rdq,
                         r.rdk, r.rdv);
  return r;
}

template <class T>
void check_bwd(const Shape& s, const Mask& mask, const Mask* host_mask = nullptr) {
  const auto r   = run_bwd<T>(s, mask, host_mask);
  const auto msg = [&] {
    std::ostringstream os;
    os << type_name<T>() << " seed " << r.seed << " B" << s.B << " Sq" << s.Sq << " Sk" << s.Sk << " H" << s.H
       << "/" << s.Hkv << " D" << s.D;
    return os.str();
  }();
  // Gradients pass through one more rounding of O and of the inputs (dO), so
  // low-precision bounds are twice the forward ones.
  const double tol = (sizeof(T) == 2 ? 2.0 : 1.0) * rel_tol<T>();
  EXPECT_LE(Testing::rel_error(r.dq, r.rdq), tol) << "dq " << msg;
  EXPECT_LE(Testing::rel_error(r.dk, r.rdk), tol) << "dk " << msg;
  EXPECT_LE(Testing::rel_error(r.dv, r.rdv), tol) << "dv " << msg;
}

TYPED_TEST(AttentionBwd, MatchesReference) {
  using T = TypeParam;
  for (int D : {64, 96, 128}) {
    check_bwd<T>({2, 33, 33, 4, 4, D}, Mask::causal());
    check_bwd<T>({1, 33, 20, 2, 2, D}, Mask::none());
  }
}

TYPED_TEST(AttentionBwd, WindowsAndDocuments) {
  using T = TypeParam;
  check_bwd<T>({1, 45, 45, 2, 1, 64}, Mask::causal().with_window(Window{7, 0}));
  check_bwd<T>({2, 33, 33, 2, 2, 64}, Mask::none().with_window(Window{5, 9}));
  check_bwd<T>({1, 40, 40, 2, 2, 64}, Mask::causal({1, 4}, {2, 4}).with_window(Window{9, 0}));
  check_bwd<T>({1, 30, 30, 1, 1, 32}, Mask::causal({0, 1}, {5, 1}).with_window(Window{2, 0}));
  const PackedDocs docs({0, 10, 11, 30, 45});
  for (const Mask& m : {Mask::causal(), Mask::none(), Mask::causal().with_window(Window{4, 0})}) {
    const Mask host = docs.on_host(m);
    check_bwd<T>({1, 45, 45, 4, 2, 64}, docs.on_device(m), &host);
  }
}

TYPED_TEST(AttentionBwd, GqaOddSizesAndStridedMasks) {
  using T = TypeParam;
  check_bwd<T>({1, 17, 17, 8, 2, 64}, Mask::causal());
  check_bwd<T>({1, 1, 1, 1, 1, 64}, Mask::causal());
  check_bwd<T>({2, 29, 41, 6, 1, 64}, Mask::none());
  check_bwd<T>({1, 40, 40, 2, 2, 64}, Mask::causal({1, 4}, {2, 4}));
  check_bwd<T>({1, 25, 50, 2, 1, 64}, Mask::causal({1, 4}, {0, 2}));
  // An odd head_dim and one past the register-blocked kernels' 128, as in the forward test.
  check_bwd<T>({1, 45, 45, 2, 1, 33}, Mask::causal());
  check_bwd<T>({1, 37, 37, 2, 2, 160}, Mask::causal());
}

TYPED_TEST(AttentionBwd, EmptyRowsGiveZeroGradientsWithoutNaN) {
  using T        = TypeParam;
  const Shape s{1, 20, 20, 2, 2, 64};
  const Mask mask = Mask::causal({0, 1}, {5, 1});
  const auto r    = run_bwd<T>(s, mask);
  for (std::size_t i = 0; i < r.dq.span(); ++i) ASSERT_FALSE(std::isnan(r.dq.data()[i]));
  for (std::size_t i = 0; i < r.dk.span(); ++i) ASSERT_FALSE(std::isnan(r.dk.data()[i]));
  for (int i = 0; i < 5; ++i)
    for (int d = 0; d < s.D; ++d) EXPECT_EQ(r.dq(0, i, 0, d), 0.0) << "row " << i;
  check_bwd<T>(s, mask);
}

// Q split in 2 and K/V split in 3 pieces: accumulating every (q piece, kv piece)
// block's gradients gives the whole backward. This is the additivity of docs/design/building_block.md.
TYPED_TEST(AttentionBwd, SumOfBlocksEqualsWhole) {
  using T   = TypeParam;
  using Acc = accum_t<T>;
  const Shape s{1, 37, 37, 4, 2, 64};
  auto in = make_inputs<T>(s);
  HostTensor dout("dout", s.B, s.Sq, s.H, s.D);
  Testing::fill_random(dout, in.seed + 3);
  dout     = rounded<T>(dout);
  auto ddo = to_device<T>(dout, "dout");
  AttnOptions opts;
  opts.mask = Mask::causal();
  Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq), delta("delta", s.B, s.H, s.Sq);
  attention_fwd(Exec(), in.qd, in.kd, in.vd, o, lse, opts);
  // The accumulators start from garbage: attention_bwd_prepare must clear them (and
  // compute Delta) for the sum below to match.
  Tensor4<Acc, Mem> gq("gq", s.B, s.Sq, s.H, s.D), gk("gk", s.B, s.Sk, s.Hkv, s.D), gv("gv", s.B, s.Sk, s.Hkv, s.D);
  for (const auto& g : {gq, gk, gv}) Kokkos::deep_copy(g, Acc(7));
  attention_bwd_prepare(Exec(), o, ddo, delta, gq, gk, gv);

  const std::vector<int> qc{0, 19, s.Sq}, kc{0, 7, 25, s.Sk};
  for (std::size_t a = 0; a + 1 < qc.size(); ++a)
    for (std::size_t c = 0; c + 1 < kc.size(); ++c) {
      const auto qr = std::make_pair(qc[a], qc[a + 1]);
      const auto kr = std::make_pair(kc[c], kc[c + 1]);
      const auto A = Kokkos::ALL;
      AttnOptions bo;
      bo.mask = Mask::causal({qc[a], 1}, {kc[c], 1});
      attention_bwd_update(Exec(), Kokkos::subview(in.qd, A, qr, A, A), Kokkos::subview(in.kd, A, kr, A, A),
                           Kokkos::subview(in.vd, A, kr, A, A), Kokkos::subview(ddo, A, qr, A, A),
                           Kokkos::subview(lse, A, A, qr), Kokkos::subview(delta, A, A, qr),
                           Kokkos::subview(gq, A, qr, A, A), Kokkos::subview(gk, A, kr, A, A),
                           Kokkos::subview(gv, A, kr, A, A), bo);
    }
  HostTensor rdq("rdq", s.B, s.Sq, s.H, s.D), rdk("rdk", s.B, s.Sk, s.Hkv, s.D), rdv("rdv", s.B, s.Sk, s.Hkv, s.D);
  Testing::reference_bwd(in.q, in.k, in.v, dout, opts.mask, resolved_scale(opts, s.D), rdq, rdk, rdv);
  const double tol = (sizeof(T) == 2 ? 2.0 : 1.0) * rel_tol<T>();
  EXPECT_LE(Testing::rel_error(to_host(gq), rdq), tol) << type_name<T>() << " seed " << in.seed;
  EXPECT_LE(Testing::rel_error(to_host(gk), rdk), tol) << type_name<T>() << " seed " << in.seed;
  EXPECT_LE(Testing::rel_error(to_host(gv), rdv), tol) << type_name<T>() << " seed " << in.seed;
}

}  // namespace
}  // namespace DistAttn::Test
