// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// CUDA-tuned tile kernels (src/cuda) against the fp64 reference and against the
// portable kernels, for bf16 and fp16, head_dim 64 and 128 (and the zero-padded
// head_dims below 128); on Hopper the forward also at 192 and 256 (WideHeadDims).
//
// Accuracy rule (flash-attention's): with fresh random inputs, the tuned kernel's
// max abs error against the fp64 reference must not exceed twice the error of a
// naive implementation in the same precision (every matmul output, the softmax and
// every gradient rounded to the element type, as a PyTorch bf16/fp16 reference
// does) plus a small atol. NaN never passes. Tuned vs portable: the fp32 states
// (acc, m, l) and gradients agree to the element type's tolerance.
//
// Every tuned call goes through Impl::TunedAttn*Update::run (or the forward's
// TunedAttnFwdDirect::run) directly and asserts that it ran (returned true), so a
// kernel that silently declined cannot make a test pass on the portable path.
//
// Both tuned paths run this binary: ctest cuda_kernels on the device's own path
// (sm90 on Hopper), cuda_kernels_sm80 with DISTATTN_CUDA_ARCH_PATH=sm80 (the
// mma.sync kernels; on Hopper the driver JIT-compiles their compute_80 PTX).
// CudaKernelsPath checks that each run is on the path it is named for.

#include "attention_inputs.hpp"

#include <DistAttn/attention_bwd_prepare.hpp>
#include <DistAttn/impl/attn_spec.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using Acc   = float;
using State = AttnState<Acc, Mem>;

template <class T>
class CudaKernels : public ::testing::Test {};
using TunedTypes = ::testing::Types<compat::bhalf_t, compat::half_t>;
TYPED_TEST_SUITE(CudaKernels, TunedTypes);

constexpr double kInf = std::numeric_limits<double>::infinity();

template <class T>
double rnd(double x) {
  return double(T(float(x)));
}

using Impl::cuda::AttnCudaArch;

AttnCudaArch tuned_arch() { return Impl::cuda::attn_cuda_arch(); }

// The tuned family is the device's (sm90 on compute capability 9.0, sm80 on 8.x) or
// the one DISTATTN_CUDA_ARCH_PATH forces, so a run named for a path tests that path.
TEST(CudaKernelsPath, FollowsDeviceOrEnvironment) {
  int dev = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), cudaSuccess);
  const char* env        = std::getenv("DISTATTN_CUDA_ARCH_PATH");
  const std::string path = env != nullptr ? env : "";
  AttnCudaArch expected  = AttnCudaArch::none;
  if (path == "sm80") expected = major >= 8 ? AttnCudaArch::sm80 : AttnCudaArch::none;
  else if (path == "" || path == "auto")
    expected = (major == 9 && minor == 0) ? AttnCudaArch::sm90 : major == 8 ? AttnCudaArch::sm80 : AttnCudaArch::none;
  const AttnCudaArch got = tuned_arch();
  EXPECT_EQ(int(got), int(expected)) << "compute capability " << major << "." << minor
                                     << ", DISTATTN_CUDA_ARCH_PATH='" << path << "'";
  EXPECT_NE(int(got), int(AttnCudaArch::none)) << "these tests need a tuned path";
  std::printf("# tuned CUDA path: sm%d (compute capability %d.%d)\n", int(got), major, minor);
}

// ---------------------------------------------------------------------------------
// Error measures

/// max |x - ref|; +inf when x holds a NaN anywhere (so NaN never passes).
double max_abs_err(const HostTensor& x, const HostTensor& ref) {
  double e = 0;
  for (std::size_t i = 0; i < ref.span(); ++i) {
    const double d = std::fabs(x.data()[i] - ref.data()[i]);
    if (std::isnan(x.data()[i]) || std::isnan(d)) return kInf;
    e = std::max(e, d);
  }
  return e;
}

double max_abs(const HostTensor& x) {
  double e = 0;
  for (std::size_t i = 0; i < x.span(); ++i) e = std::max(e, std::fabs(x.data()[i]));
  return e;
}

long count_nan(const HostTensor& x) {
  long n = 0;
  for (std::size_t i = 0; i < x.span(); ++i) n += std::isnan(x.data()[i]) ? 1 : 0;
  return n;
}

template <class T>
HostTensor rounded_to(const HostTensor& x) {
  HostTensor r("rounded", x.extent(0), x.extent(1), x.extent(2), x.extent(3));
  for (std::size_t i = 0; i < x.span(); ++i) r.data()[i] = rnd<T>(x.data()[i]);
  return r;
}

/// The flash-attention rule. Returns a message on failure, empty on success.
std::string rule_check(const char* what, const HostTensor& ours, const HostTensor& naive, const HostTensor& ref) {
  const double e_ours  = max_abs_err(ours, ref);
  const double e_naive = max_abs_err(naive, ref);
  const double atol    = 1e-6 + 1e-4 * max_abs(ref);
  if (e_ours <= 2.0 * e_naive + atol) return {};
  std::ostringstream os;
  os << what << ": max error " << e_ours << " > 2 x naive " << e_naive << " + atol " << atol;
  return os.str();
}

// ---------------------------------------------------------------------------------
// Naive same-precision implementations (host, every intermediate rounded to T)

/// P[b][h][i][j] of a naive implementation: S = round(scale q k^T), P = round(softmax(S)).
/// Rows without an admissible key are all zero.
template <class T>
std::vector<double> naive_probs(const HostTensor& q, const HostTensor& k, const Mask& mask, double scale) {
  const int B = int(q.extent(0)), Sq = int(q.extent(1)), H = int(q.extent(2)), D = int(q.extent(3));
  const int Sk = int(k.extent(1)), G = H / int(k.extent(2));
  std::vector<double> P(std::size_t(B) * H * Sq * Sk, 0.0);
  std::vector<double> sc(static_cast<std::size_t>(Sk));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Sq; ++i) {
        double mx = -kInf;
        for (int j = 0; j < Sk; ++j) {
          sc[std::size_t(j)] = -kInf;
          if (!Testing::reference_allowed(mask, i, j)) continue;
          double acc = 0;
          for (int d = 0; d < D; ++d) acc += q(b, i, h, d) * k(b, j, h / G, d);
          sc[std::size_t(j)] = rnd<T>(scale * acc);
          mx                 = std::max(mx, sc[std::size_t(j)]);
        }
        if (mx == -kInf) continue;
        double sum = 0;
        for (int j = 0; j < Sk; ++j) sum += sc[std::size_t(j)] == -kInf ? 0.0 : std::exp(sc[std::size_t(j)] - mx);
        const std::size_t base = ((std::size_t(b) * H + h) * Sq + i) * Sk;
        for (int j = 0; j < Sk; ++j)
          P[base + std::size_t(j)] = sc[std::size_t(j)] == -kInf ? 0.0 : rnd<T>(std::exp(sc[std::size_t(j)] - mx) / sum);
      }
  return P;
}

template <class T>
HostTensor naive_fwd(const HostTensor& q, const HostTensor& k, const HostTensor& v, const Mask& mask, double scale) {
  const int B = int(q.extent(0)), Sq = int(q.extent(1)), H = int(q.extent(2)), D = int(q.extent(3));
  const int Sk = int(k.extent(1)), G = H / int(k.extent(2));
  const auto P = naive_probs<T>(q, k, mask, scale);
  HostTensor o("naive.o", B, Sq, H, D);
  std::vector<double> acc(static_cast<std::size_t>(D));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Sq; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const double* row = &P[((std::size_t(b) * H + h) * Sq + i) * Sk];
        for (int j = 0; j < Sk; ++j)
          if (row[j] != 0.0)
            for (int d = 0; d < D; ++d) acc[d] += row[j] * v(b, j, h / G, d);
        for (int d = 0; d < D; ++d) o(b, i, h, d) = rnd<T>(acc[d]);
      }
  return o;
}

template <class T>
void naive_bwd(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& dout,
               const Mask& mask, double scale, HostTensor& dq, HostTensor& dk, HostTensor& dv) {
  const int B = int(q.extent(0)), Sq = int(q.extent(1)), H = int(q.extent(2)), D = int(q.extent(3));
  const int Sk = int(k.extent(1)), Hk = int(k.extent(2)), G = H / Hk;
  const auto P   = naive_probs<T>(q, k, mask, scale);
  const auto o   = naive_fwd<T>(q, k, v, mask, scale);
  dq             = HostTensor("naive.dq", B, Sq, H, D);
  dk             = HostTensor("naive.dk", B, Sk, Hk, D);
  dv             = HostTensor("naive.dv", B, Sk, Hk, D);
  std::vector<double> dkh(std::size_t(Sk) * D), dvh(std::size_t(Sk) * D), dqa(static_cast<std::size_t>(D));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      std::fill(dkh.begin(), dkh.end(), 0.0);
      std::fill(dvh.begin(), dvh.end(), 0.0);
      for (int i = 0; i < Sq; ++i) {
        const double* row = &P[((std::size_t(b) * H + h) * Sq + i) * Sk];
        double delta      = 0;
        for (int d = 0; d < D; ++d) delta += dout(b, i, h, d) * o(b, i, h, d);
        std::fill(dqa.begin(), dqa.end(), 0.0);
        for (int j = 0; j < Sk; ++j) {
          if (!Testing::reference_allowed(mask, i, j) || row[j] == 0.0) continue;
          double dp = 0;
          for (int d = 0; d < D; ++d) dp += dout(b, i, h, d) * v(b, j, h / G, d);
          const double ds = rnd<T>(row[j] * (rnd<T>(dp) - delta));
          for (int d = 0; d < D; ++d) {
            dqa[d] += ds * k(b, j, h / G, d);
            dkh[std::size_t(j) * D + d] += ds * q(b, i, h, d);
            dvh[std::size_t(j) * D + d] += row[j] * dout(b, i, h, d);
          }
        }
        for (int d = 0; d < D; ++d) dq(b, i, h, d) = rnd<T>(scale * dqa[d]);
      }
      // Per-head gradients rounded, then summed over the group (K/V repeated per head).
      for (int j = 0; j < Sk; ++j)
        for (int d = 0; d < D; ++d) {
          dk(b, j, h / G, d) = rnd<T>(dk(b, j, h / G, d) + rnd<T>(scale * dkh[std::size_t(j) * D + d]));
          dv(b, j, h / G, d) = rnd<T>(dv(b, j, h / G, d) + rnd<T>(dvh[std::size_t(j) * D + d]));
        }
    }
}

// ---------------------------------------------------------------------------------
// Calls

/// Folds (q, k, v) into st on the tuned path (asserting that it ran) or the portable one.
template <class T, class QV, class KV, class VV>
void fwd_update(const QV& q, const KV& k, const VV& v, const State& st, const Mask& mask, KernelPath path) {
  AttnOptions opts;
  opts.mask = mask;
  opts.path = path;
  if (path == KernelPath::Cuda) {
    const double scale = resolved_scale(opts, int(q.extent(3)));
    const bool ran = Impl::TunedAttnFwdUpdate<Exec, T>::run(Exec(), q, k, v, st.acc, st.m, st.l, mask, scale);
    ASSERT_TRUE(ran) << "the CUDA-tuned forward declined this case";
  } else {
    attention_fwd_update(Exec(), q, k, v, st, opts);
  }
}

template <class T, class QV, class KV, class VV, class DOV, class SV, class GQ, class GK>
void bwd_update(const QV& q, const KV& k, const VV& v, const DOV& dout, const SV& lse, const SV& delta, const GQ& dq,
                const GK& dk, const GK& dv, const Mask& mask, KernelPath path, bool deterministic = false) {
  AttnOptions opts;
  opts.mask = mask;
  opts.path = path;
  if (path == KernelPath::Cuda) {
    const double scale = resolved_scale(opts, int(q.extent(3)));
    const bool ran     = Impl::TunedAttnBwdUpdate<Exec, T>::run(Exec(), q, k, v, dout, lse, delta, dq, dk, dv, mask,
                                                                scale, deterministic);
    ASSERT_TRUE(ran) << "the CUDA-tuned backward declined this case";
  } else {
    attention_bwd_update(Exec(), q, k, v, dout, lse, delta, dq, dk, dv, opts);
  }
}

struct HostState {
  HostTensor acc;
  HostStats m, l;
};

HostState state_to_host(const State& st) { return {to_host(st.acc), stats_to_host(st.m), stats_to_host(st.l)}; }

/// Tuned vs portable states: same empty rows, m and l to fp32 noise, acc to the
/// element type's tolerance (the tuned kernel rounds P to T before P V).
template <class T>
void expect_states_agree(const HostState& a, const HostState& b, const std::string& ctx) {
  long bad_m = 0, bad_l = 0;
  for (std::size_t i = 0; i < a.m.span(); ++i) {
    const double ma = a.m.data()[i], mb = b.m.data()[i], la = a.l.data()[i], lb = b.l.data()[i];
    if (std::isinf(mb)) {
      bad_m += (ma == mb) ? 0 : 1;
      bad_l += (la == 0.0 && lb == 0.0) ? 0 : 1;
      continue;
    }
    bad_m += std::fabs(ma - mb) <= 1e-4 + 1e-5 * std::fabs(mb) ? 0 : 1;
    bad_l += std::fabs(la - lb) <= 2e-4 * std::fabs(lb) ? 0 : 1;
  }
  EXPECT_EQ(bad_m, 0) << "rows whose m differs, " << ctx;
  EXPECT_EQ(bad_l, 0) << "rows whose l differs, " << ctx;
  EXPECT_EQ(count_nan(a.acc), 0) << ctx;
  EXPECT_LE(Testing::rel_error(a.acc, b.acc), rel_tol<T>()) << "acc, " << ctx;
}

template <class T>
std::string describe(const Shape& s, const Mask& m, std::uint64_t seed) {
  std::ostringstream os;
  os << type_name<T>() << " seed " << seed << " B" << s.B << " Sq" << s.Sq << " Sk" << s.Sk << " H" << s.H << "/"
     << s.Hkv << " D" << s.D << " mask " << (m.kind == MaskKind::Causal ? "causal" : "none") << " q(" << m.q.offset
     << "," << m.q.stride << ") k(" << m.k.offset << "," << m.k.stride << ")";
  if (m.window.bounded()) os << " window " << m.window.left << "," << m.window.right;
  if (m.docs.any()) {
    os << " documents";
    for (int d = 0; d <= m.docs.count; ++d) os << (d == 0 ? " " : ",") << m.docs.offsets[d];
  }
  return os.str();
}

// ---------------------------------------------------------------------------------
// Forward

/// A final (O, LSE) against the fp64 reference (ro, rl) and the naive O: the rule,
/// no NaN, empty rows (reference LSE = -inf) exactly O = 0 and LSE = -inf, and LSE
/// to 2e-4.
void expect_final_ok(const HostTensor& ho, const HostStats& hl, const HostTensor& naive, const HostTensor& ro,
                     const HostStats& rl, const std::string& ctx) {
  const std::string msg = rule_check("O", ho, naive, ro);
  EXPECT_TRUE(msg.empty()) << msg << ", " << ctx;
  EXPECT_EQ(count_nan(ho), 0) << ctx;
  double lerr = 0;
  long bad_empty = 0, bad_empty_o = 0;
  for (std::size_t b = 0; b < rl.extent(0); ++b)
    for (std::size_t h = 0; h < rl.extent(1); ++h)
      for (std::size_t i = 0; i < rl.extent(2); ++i) {
        const double lse = hl(b, h, i), ref = rl(b, h, i);
        if (std::isinf(ref)) {
          bad_empty += (std::isinf(lse) && lse < 0) ? 0 : 1;
          for (std::size_t d = 0; d < ho.extent(3); ++d) bad_empty_o += ho(b, i, h, d) == 0.0 ? 0 : 1;
          continue;
        }
        const double e = std::fabs(lse - ref);
        lerr           = std::isnan(e) ? kInf : std::max(lerr, e);
      }
  EXPECT_EQ(bad_empty, 0) << "empty rows must give LSE = -inf, " << ctx;
  EXPECT_EQ(bad_empty_o, 0) << "empty rows must give O = 0, " << ctx;
  EXPECT_LE(lerr, 2e-4) << "LSE, " << ctx;
}

/// One-shot forward on both paths: rule against fp64, states tuned vs portable,
/// empty rows O = 0 and LSE = -inf, no NaN; then the same final checks on the
/// tuned kernel's direct mode (O and LSE written by the kernel, no state). The
/// kernels take `mask`; the host references take `host_mask` where given (the same
/// rule with its document offsets in host memory, PackedDocs::on_host).
template <class T>
void check_fwd(const Shape& s, const Mask& mask, const Mask* host_mask = nullptr) {
  const Mask& hmask      = host_mask != nullptr ? *host_mask : mask;
  auto in                = make_inputs<T>(s);
  const std::string ctx  = describe<T>(s, hmask, in.seed);
  const double scale     = 1.0 / std::sqrt(double(s.D));
  auto tuned             = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
  auto port              = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
  fwd_update<T>(in.qd, in.kd, in.vd, tuned, mask, KernelPath::Cuda);
  fwd_update<T>(in.qd, in.kd, in.vd, port, mask, KernelPath::Portable);
  expect_states_agree<T>(state_to_host(tuned), state_to_host(port), ctx);

  Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq);
  attention_finalize(Exec(), tuned, o, lse);

  HostTensor ro("ro", s.B, s.Sq, s.H, s.D);
  HostStats rl("rl", s.B, s.H, s.Sq);
  Testing::reference_fwd(in.q, in.k, in.v, hmask, scale, ro, rl);
  const auto naive = naive_fwd<T>(in.q, in.k, in.v, hmask, scale);
  expect_final_ok(to_host(o), stats_to_host(lse), naive, ro, rl, ctx);

  // Direct mode into outputs pre-filled with NaN: a row the kernel leaves unwritten
  // (an empty one, say) fails the NaN, LSE and empty-row checks.
  Tensor4<T, Mem> od("od", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lsed("lsed", s.B, s.H, s.Sq);
  Kokkos::deep_copy(od, T(std::numeric_limits<float>::quiet_NaN()));
  Kokkos::deep_copy(lsed, std::numeric_limits<Acc>::quiet_NaN());
  const bool ran = Impl::TunedAttnFwdDirect<Exec, T>::run(Exec(), in.qd, in.kd, in.vd, od, lsed, mask, scale);
  ASSERT_TRUE(ran) << "the CUDA-tuned direct forward declined this case, " << ctx;
  expect_final_ok(to_host(od), stats_to_host(lsed), naive, ro, rl, ctx + " direct");
}

TYPED_TEST(CudaKernels, ForwardMatchesReferenceAndPortable) {
  using T = TypeParam;
  for (int D : {64, 128}) {
    check_fwd<T>({2, 300, 300, 4, 4, D}, Mask::causal());
    check_fwd<T>({1, 257, 190, 4, 2, D}, Mask::none());  // GQA, ragged tiles, Sq != Sk
    check_fwd<T>({1, 190, 257, 6, 3, D}, Mask::causal({67, 1}, {0, 1}));
    check_fwd<T>({1, 1, 1, 1, 1, D}, Mask::causal());
    check_fwd<T>({1, 3, 200, 2, 1, D}, Mask::none());
  }
}

// Attention2D cyclic shards and step-like patterns (docs/design/building_block.md, "The mask model").
TYPED_TEST(CudaKernels, ForwardStridedMasks) {
  using T = TypeParam;
  for (int D : {64, 128}) {
    check_fwd<T>({1, 160, 160, 2, 2, D}, Mask::causal({1, 4}, {2, 4}));    // strictly lower
    check_fwd<T>({1, 160, 160, 2, 2, D}, Mask::causal({3, 4}, {2, 4}));    // lower incl. diagonal
    check_fwd<T>({1, 100, 200, 2, 1, D}, Mask::causal({1, 4}, {0, 2}));    // step-like
    check_fwd<T>({1, 130, 130, 2, 2, D}, Mask::causal({1000, 1}, {0, 1})); // fully visible
    check_fwd<T>({1, 150, 300, 2, 2, D}, Mask::causal({0, 3}, {5, 1}));    // rows 0, 1 empty
  }
}

// Long enough for many query and key tiles, skipped tiles and the masked band.
TYPED_TEST(CudaKernels, ForwardLongCausal) {
  using T = TypeParam;
  check_fwd<T>({1, 1031, 1031, 2, 1, 128}, Mask::causal());
  check_fwd<T>({1, 700, 1100, 2, 2, 64}, Mask::causal({400, 1}, {0, 1}));
}

// Rows whose every key lies in the future: O = 0, LSE = -inf, state untouched.
TYPED_TEST(CudaKernels, ForwardEmptyRowsAndFullyMaskedBlocks) {
  using T = TypeParam;
  for (int D : {64, 128}) {
    check_fwd<T>({1, 40, 40, 2, 2, D}, Mask::causal({0, 1}, {5, 1}));  // rows 0..4 see no key

    // A block entirely in the future of the query rows leaves a populated state bit for bit.
    const Shape s{1, 70, 90, 2, 1, D};
    auto in = make_inputs<T>(s);
    auto st = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
    fwd_update<T>(in.qd, in.kd, in.vd, st, Mask::causal({100, 1}, {0, 1}), KernelPath::Cuda);
    const auto before = state_to_host(st);
    fwd_update<T>(in.qd, in.kd, in.vd, st, Mask::causal({0, 1}, {500, 1}), KernelPath::Cuda);
    const auto after = state_to_host(st);
    long changed = 0;
    for (std::size_t i = 0; i < before.acc.span(); ++i) changed += before.acc.data()[i] != after.acc.data()[i];
    for (std::size_t i = 0; i < before.m.span(); ++i)
      changed += (before.m.data()[i] != after.m.data()[i]) + (before.l.data()[i] != after.l.data()[i]);
    EXPECT_EQ(changed, 0) << "a fully masked block changed the state, " << type_name<T>() << " D" << D;
  }
}

// K/V split into pieces (LayoutStride subviews), folded one after the other into the
// SAME state, mixing tuned and portable calls: equals the one-shot reference.
TYPED_TEST(CudaKernels, ForwardSplitUpdatesFoldIntoOneState) {
  using T = TypeParam;
  for (int D : {64, 128}) {
    const Shape s{2, 150, 333, 4, 2, D};
    auto in = make_inputs<T>(s);
    std::mt19937 gen(unsigned(in.seed));
    for (const Mask& base : {Mask::none(), Mask::causal({200, 1}, {0, 1})}) {
      std::vector<int> cuts{0, s.Sk, 1 + int(gen() % (s.Sk - 1)), 1 + int(gen() % (s.Sk - 1))};
      std::sort(cuts.begin(), cuts.end());
      std::vector<int> order{0, 1, 2};
      std::shuffle(order.begin(), order.end(), gen);
      auto tuned = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
      auto port  = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
      for (int n = 0; n < 3; ++n) {
        const int piece = order[std::size_t(n)];
        const int a = cuts[std::size_t(piece)], e = cuts[std::size_t(piece) + 1];
        if (e == a) continue;
        const auto A = Kokkos::ALL;
        auto kp = Kokkos::subview(in.kd, A, std::make_pair(a, e), A, A);
        auto vp = Kokkos::subview(in.vd, A, std::make_pair(a, e), A, A);
        Mask m  = base;
        m.k.offset += base.k.stride * a;
        // The second fold goes through the portable kernel: the tuned kernel must
        // read and extend a state written by anyone.
        fwd_update<T>(in.qd, kp, vp, tuned, m, n == 1 ? KernelPath::Portable : KernelPath::Cuda);
        fwd_update<T>(in.qd, kp, vp, port, m, KernelPath::Portable);
      }
      const std::string ctx = describe<T>(s, base, in.seed) + " cuts " + std::to_string(cuts[1]) + "," +
                              std::to_string(cuts[2]);
      expect_states_agree<T>(state_to_host(tuned), state_to_host(port), ctx);
      Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
      RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq);
      attention_finalize(Exec(), tuned, o, lse);
      const double scale = 1.0 / std::sqrt(double(D));
      HostTensor ro("ro", s.B, s.Sq, s.H, s.D);
      HostStats rl("rl", s.B, s.H, s.Sq);
      Testing::reference_fwd(in.q, in.k, in.v, base, scale, ro, rl);
      const std::string msg = rule_check("O", to_host(o), naive_fwd<T>(in.q, in.k, in.v, base, scale), ro);
      EXPECT_TRUE(msg.empty()) << msg << ", " << ctx;
    }
  }
}

// Q, K, V as strided subviews of larger tensors (rows of a longer sequence, a subset
// of heads), and the state's statistics as subviews of longer rows.
TYPED_TEST(CudaKernels, ForwardStridedViews) {
  using T = TypeParam;
  for (int D : {64, 128}) {
    const Shape s{1, 120, 140, 2, 2, D};
    auto in = make_inputs<T>(s);
    const auto A = Kokkos::ALL;
    Tensor4<T, Mem> qbig("qbig", s.B, s.Sq + 37, s.H + 3, D), kbig("kbig", s.B, s.Sk + 11, s.Hkv + 1, D),
        vbig("vbig", s.B, s.Sk + 5, s.Hkv + 2, D);
    auto q = Kokkos::subview(qbig, A, std::make_pair(37, 37 + s.Sq), std::make_pair(1, 1 + s.H), A);
    auto k = Kokkos::subview(kbig, A, std::make_pair(11, 11 + s.Sk), std::make_pair(1, 1 + s.Hkv), A);
    auto v = Kokkos::subview(vbig, A, std::make_pair(0, s.Sk), std::make_pair(2, 2 + s.Hkv), A);
    Kokkos::deep_copy(q, in.qd);
    Kokkos::deep_copy(k, in.kd);
    Kokkos::deep_copy(v, in.vd);
    // State: acc rows inside a longer acc, m/l inside longer rows.
    Tensor4<Acc, Mem> accbig("accbig", s.B, s.Sq + 8, s.H, D);
    RowStats<Acc, Mem> mbig("mbig", s.B, s.H, s.Sq + 9), lbig("lbig", s.B, s.H, s.Sq + 9);
    Kokkos::deep_copy(accbig, 0.f);
    Kokkos::deep_copy(mbig, -std::numeric_limits<float>::infinity());
    Kokkos::deep_copy(lbig, 0.f);
    auto acc = Kokkos::subview(accbig, A, std::make_pair(8, 8 + s.Sq), A, A);
    auto m   = Kokkos::subview(mbig, A, A, std::make_pair(9, 9 + s.Sq));
    auto l   = Kokkos::subview(lbig, A, A, std::make_pair(9, 9 + s.Sq));
    const Mask mask    = Mask::causal({20, 1}, {0, 1});
    const double scale = 1.0 / std::sqrt(double(D));
    ASSERT_TRUE((Impl::TunedAttnFwdUpdate<Exec, T>::run(Exec(), q, k, v, acc, m, l, mask, scale)))
        << "tuned forward declined strided views";
    auto port = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
    fwd_update<T>(in.qd, in.kd, in.vd, port, mask, KernelPath::Portable);
    State tuned{Tensor4<Acc, Mem>("acc", s.B, s.Sq, s.H, D), RowStats<Acc, Mem>("m", s.B, s.H, s.Sq),
                RowStats<Acc, Mem>("l", s.B, s.H, s.Sq)};
    Kokkos::deep_copy(tuned.acc, acc);
    Kokkos::deep_copy(tuned.m, m);
    Kokkos::deep_copy(tuned.l, l);
    expect_states_agree<T>(state_to_host(tuned), state_to_host(port), describe<T>(s, mask, in.seed) + " strided");
    // Nothing outside the subviews was written.
    const auto hab = to_host(accbig);
    long outside = 0;
    for (int i = 0; i < 8; ++i)
      for (int h = 0; h < s.H; ++h)
        for (int d = 0; d < D; ++d) outside += hab(0, i, h, d) != 0.0;
    const auto hmb = stats_to_host(mbig);
    for (int h = 0; h < s.H; ++h)
      for (int i = 0; i < 9; ++i) outside += !std::isinf(hmb(0, h, i));
    EXPECT_EQ(outside, 0) << "writes outside the state subviews";
  }
}

// Where TMA cannot describe a tensor (here K and V whose KV heads all alias one
// head: head stride 0) the Hopper forward declines before launching anything, and the
// public call gives the portable result; the sm80 forward (cp.async, no tensor map)
// runs and gives the same.
TYPED_TEST(CudaKernels, ForwardDeclinesWithoutTensorMap) {
  using T = TypeParam;
  using Strided = Kokkos::View<T****, Kokkos::LayoutStride, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  for (int D : {64, 128}) {
    const Shape s{1, 130, 150, 2, 2, D};
    auto in = make_inputs<T>(s);
    const Kokkos::LayoutStride lay(s.B, std::size_t(s.Sk) * s.Hkv * D, s.Sk, std::size_t(s.Hkv) * D, s.Hkv, 0, D, 1);
    const Strided k0(in.kd.data(), lay), v0(in.vd.data(), lay);  // every KV head reads head 0
    Tensor4<T, Mem> kc("kc", s.B, s.Sk, s.Hkv, D), vc("vc", s.B, s.Sk, s.Hkv, D);  // the same, materialized
    Kokkos::deep_copy(kc, k0);
    Kokkos::deep_copy(vc, v0);
    const Mask mask    = Mask::causal({20, 1}, {0, 1});
    const double scale = 1.0 / std::sqrt(double(D));
    auto st            = make_state<Acc>(Exec(), s.B, s.Sq, s.H, D);
    const bool ran = Impl::TunedAttnFwdUpdate<Exec, T>::run(Exec(), in.qd, k0, v0, st.acc, st.m, st.l, mask, scale);
    if (tuned_arch() == AttnCudaArch::sm90) {
      EXPECT_FALSE(ran) << "D" << D;
      AttnOptions opts;
      opts.mask = mask;
      attention_fwd_update(Exec(), in.qd, k0, v0, st, opts);  // Auto: the tuned kernel declines, the portable one runs
    } else {
      EXPECT_TRUE(ran) << "the sm80 forward needs no tensor map, D" << D;
    }
    auto port = make_state<Acc>(Exec(), s.B, s.Sq, s.H, D);
    fwd_update<T>(in.qd, kc, vc, port, mask, KernelPath::Portable);
    expect_states_agree<T>(state_to_host(st), state_to_host(port), describe<T>(s, mask, in.seed) + " head stride 0");
  }
}

// The public API picks the tuned kernel on Cuda (Auto and Cuda give the same bits),
// and declines head_dims it has no kernel for (not a multiple of 8, or above the
// widest entry, 256 on Hopper: the portable kernel runs instead).
TYPED_TEST(CudaKernels, DispatchSeam) {
  using T = TypeParam;
  static_assert(Impl::tuned_attn_avail<Kokkos::Cuda, T>::value, "bf16/fp16 must be tuned on Cuda");
  const Shape s{1, 100, 100, 2, 2, 128};
  auto in = make_inputs<T>(s);
  auto a  = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
  auto b  = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
  AttnOptions opts;
  opts.mask = Mask::causal();
  attention_fwd_update(Exec(), in.qd, in.kd, in.vd, a, opts);  // Auto
  fwd_update<T>(in.qd, in.kd, in.vd, b, opts.mask, KernelPath::Cuda);
  const auto ha = state_to_host(a), hb = state_to_host(b);
  for (std::size_t i = 0; i < ha.acc.span(); ++i) ASSERT_EQ(ha.acc.data()[i], hb.acc.data()[i]);

  for (int D : {100, 264}) {
    const Shape sd{1, 20, 20, 2, 2, D};
    auto ind = make_inputs<T>(sd);
    auto st  = make_state<Acc>(Exec(), sd.B, sd.Sq, sd.H, sd.D);
    EXPECT_FALSE((Impl::TunedAttnFwdUpdate<Exec, T>::run(Exec(), ind.qd, ind.kd, ind.vd, st.acc, st.m, st.l,
                                                         opts.mask, 0.1)))
        << "head_dim " << D;
  }
}

// head_dim 192 and 256 (and the multiples of 8 padded to them): on Hopper the
// forward has tuned entries (tile_size.hpp, FwdTileD192 / FwdTileD256: smaller key
// tiles, O += P V as one m64n192 / m64n256 product), the backward none, so it declines
// and its notice names the direction. The sm80 table stops at 128: both decline.
TYPED_TEST(CudaKernels, WideHeadDims) {
  using T = TypeParam;
  for (int D : {192, 256}) {
    const Shape sb{1, 64, 64, 2, 2, D};
    auto inb = make_inputs<T>(sb);
    auto st  = make_state<Acc>(Exec(), sb.B, sb.Sq, sb.H, sb.D);
    RowStats<Acc, Mem> lse("lse", sb.B, sb.H, sb.Sq), delta("delta", sb.B, sb.H, sb.Sq);
    Tensor4<Acc, Mem> gq("gq", sb.B, sb.Sq, sb.H, D), gk("gk", sb.B, sb.Sk, sb.Hkv, D), gv("gv", sb.B, sb.Sk, sb.Hkv, D);
    EXPECT_FALSE((Impl::TunedAttnBwdUpdate<Exec, T>::run(Exec(), inb.qd, inb.kd, inb.vd, inb.qd, lse, delta, gq, gk, gv,
                                                         Mask::causal(), 0.1)))
        << "no tuned backward at head_dim " << D;
    if (tuned_arch() != AttnCudaArch::sm90) {
      EXPECT_FALSE((Impl::TunedAttnFwdUpdate<Exec, T>::run(Exec(), inb.qd, inb.kd, inb.vd, st.acc, st.m, st.l,
                                                           Mask::causal(), 0.1)))
          << "the sm80 table has no forward at head_dim " << D;
      continue;
    }
    check_fwd<T>({2, 300, 300, 4, 4, D}, Mask::causal());
    check_fwd<T>({1, 257, 190, 4, 2, D}, Mask::none());                    // GQA, ragged tiles, Sq != Sk
    check_fwd<T>({1, 190, 257, 6, 3, D}, Mask::causal({67, 1}, {0, 1}));  // GQA, offset causal
    check_fwd<T>({1, 160, 160, 2, 2, D}, Mask::causal({1, 4}, {2, 4}));   // strided (Attention2D shards)
    check_fwd<T>({1, 40, 40, 2, 2, D}, Mask::causal({0, 1}, {5, 1}));     // rows 0..4 see no key
    check_fwd<T>({1, 3, 200, 2, 1, D}, Mask::none());
    check_fwd<T>({1, 520, 520, 4, 2, D}, Mask::causal());  // many key tiles, skipped tiles, GQA
    check_fwd<T>({1, 300, 300, 4, 2, D - 56}, Mask::causal());  // 136 / 200: padded to 192 / 256
    check_fwd<T>({1, 190, 257, 3, 3, D - 8}, Mask::none());     // 184 / 248
  }
}

// ---------------------------------------------------------------------------------
// Backward

/// Gradient accumulators start from random values (the update must add, not
/// overwrite); returns the increments. `host_mask` as in check_fwd.
template <class T>
void check_bwd(const Shape& s, const Mask& mask, bool deterministic = false, const Mask* host_mask = nullptr) {
  const Mask& hmask     = host_mask != nullptr ? *host_mask : mask;
  auto in               = make_inputs<T>(s);
  const std::string ctx = describe<T>(s, hmask, in.seed);
  const double scale    = 1.0 / std::sqrt(double(s.D));
  HostTensor dout("dout", s.B, s.Sq, s.H, s.D);
  Testing::fill_random(dout, in.seed + 3);
  dout     = rounded<T>(dout);
  auto ddo = to_device<T>(dout, "dout");

  // Forward through the tuned path (as a user would), then Delta from the final O.
  auto st = make_state<Acc>(Exec(), s.B, s.Sq, s.H, s.D);
  fwd_update<T>(in.qd, in.kd, in.vd, st, mask, KernelPath::Cuda);
  Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq), delta("delta", s.B, s.H, s.Sq);
  attention_finalize(Exec(), st, o, lse);
  attention_bwd_delta(Exec(), o, ddo, delta);

  HostTensor g0q("g0q", s.B, s.Sq, s.H, s.D), g0k("g0k", s.B, s.Sk, s.Hkv, s.D), g0v("g0v", s.B, s.Sk, s.Hkv, s.D);
  Testing::fill_random(g0q, in.seed + 7, 0.25);
  Testing::fill_random(g0k, in.seed + 8, 0.25);
  Testing::fill_random(g0v, in.seed + 9, 0.25);
  for (HostTensor* g : {&g0q, &g0k, &g0v})  // exactly representable in the fp32 accumulators
    for (std::size_t i = 0; i < g->span(); ++i) g->data()[i] = double(float(g->data()[i]));
  auto run = [&](KernelPath path, HostTensor& dq, HostTensor& dk, HostTensor& dv) {
    auto gq = to_device<Acc>(g0q, "gq"), gk = to_device<Acc>(g0k, "gk"), gv = to_device<Acc>(g0v, "gv");
    bwd_update<T>(in.qd, in.kd, in.vd, ddo, lse, delta, gq, gk, gv, mask, path, deterministic);
    dq = to_host(gq);
    dk = to_host(gk);
    dv = to_host(gv);
    for (std::size_t i = 0; i < dq.span(); ++i) dq.data()[i] -= g0q.data()[i];
    for (std::size_t i = 0; i < dk.span(); ++i) dk.data()[i] -= g0k.data()[i];
    for (std::size_t i = 0; i < dv.span(); ++i) dv.data()[i] -= g0v.data()[i];
  };
  HostTensor tq, tk, tv, pq, pk, pv;
  run(KernelPath::Cuda, tq, tk, tv);
  if (::testing::Test::HasFatalFailure()) return;
  run(KernelPath::Portable, pq, pk, pv);
  if (deterministic) {  // two more runs from the same accumulators: the same bits
    for (int rep = 0; rep < 2; ++rep) {
      HostTensor rq, rk, rv;
      run(KernelPath::Cuda, rq, rk, rv);
      if (::testing::Test::HasFatalFailure()) return;
      for (const auto& [name, a, b] : {std::make_tuple("dq", &tq, &rq), std::make_tuple("dk", &tk, &rk),
                                       std::make_tuple("dv", &tv, &rv)}) {
        long diff = 0;
        for (std::size_t i = 0; i < a->span(); ++i)
          diff += std::memcmp(&a->data()[i], &b->data()[i], sizeof(double)) != 0 ? 1 : 0;
        EXPECT_EQ(diff, 0) << name << ": elements that differ from the first deterministic run (run " << rep + 2
                           << "), " << ctx;
      }
    }
  }

  HostTensor rdq("rdq", s.B, s.Sq, s.H, s.D), rdk("rdk", s.B, s.Sk, s.Hkv, s.D), rdv("rdv", s.B, s.Sk, s.Hkv, s.D);
  Testing::reference_bwd(in.q, in.k, in.v, dout, hmask, scale, rdq, rdk, rdv);
  HostTensor ndq, ndk, ndv;
  naive_bwd<T>(in.q, in.k, in.v, dout, hmask, scale, ndq, ndk, ndv);

  for (const auto& [name, ours, naive, ref, port] :
       {std::make_tuple("dq", tq, ndq, rdq, pq), std::make_tuple("dk", tk, ndk, rdk, pk),
        std::make_tuple("dv", tv, ndv, rdv, pv)}) {
    EXPECT_EQ(count_nan(ours), 0) << name << ", " << ctx;
    const std::string msg = rule_check(name, rounded_to<T>(ours), naive, ref);
    EXPECT_TRUE(msg.empty()) << msg << ", " << ctx;
    // Tuned vs portable, both fp32 accumulations of the same block.
    EXPECT_LE(Testing::rel_error(ours, port), 2 * rel_tol<T>()) << name << " tuned vs portable, " << ctx;
  }
}

TYPED_TEST(CudaKernels, BackwardMatchesReferenceAndPortable) {
  using T = TypeParam;
  for (int D : {64, 128}) {
    check_bwd<T>({1, 300, 300, 4, 2, D}, Mask::causal());  // GQA
    check_bwd<T>({2, 190, 257, 2, 2, D}, Mask::none());
    check_bwd<T>({1, 257, 130, 3, 1, D}, Mask::causal({200, 1}, {0, 1}));  // MQA, ragged
    check_bwd<T>({1, 1, 1, 1, 1, D}, Mask::causal());
  }
}

TYPED_TEST(CudaKernels, BackwardStridedMasksAndEmptyRows) {
  using T = TypeParam;
  for (int D : {64, 128}) {
    check_bwd<T>({1, 160, 160, 2, 2, D}, Mask::causal({1, 4}, {2, 4}));
    check_bwd<T>({1, 160, 160, 2, 2, D}, Mask::causal({3, 4}, {2, 4}));
    check_bwd<T>({1, 100, 200, 2, 1, D}, Mask::causal({1, 4}, {0, 2}));
    check_bwd<T>({1, 150, 150, 2, 2, D}, Mask::causal({0, 1}, {5, 1}));  // rows 0..4 empty
  }
}

/// A backward the tuned kernels cannot run (deterministic on a path whose kernels add
/// dQ with atomics, sm80; a mask they cannot apply) must decline without writing
/// anything: the caller then runs the portable kernel.
template <class T>
void expect_bwd_declines(const Shape& s, const Mask& mask = Mask::causal(), bool deterministic = true) {
  auto in = make_inputs<T>(s);
  Tensor4<T, Mem> dout("dout", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq), delta("delta", s.B, s.H, s.Sq);
  Tensor4<Acc, Mem> dq("dq", s.B, s.Sq, s.H, s.D), dk("dk", s.B, s.Sk, s.Hkv, s.D), dv("dv", s.B, s.Sk, s.Hkv, s.D);
  Kokkos::deep_copy(dq, 1.f);
  EXPECT_FALSE((Impl::TunedAttnBwdUpdate<Exec, T>::run(Exec(), in.qd, in.kd, in.vd, dout, lse, delta, dq, dk, dv,
                                                       mask, 0.125, deterministic)))
      << "D" << s.D;
  const HostTensor hq = to_host(dq);
  long changed        = 0;
  for (std::size_t i = 0; i < hq.span(); ++i) changed += hq.data()[i] != 1.0 ? 1 : 0;
  EXPECT_EQ(changed, 0) << "a declined backward wrote dq, D" << s.D;
}

// AttnOptions::deterministic: correct (the same rule as every backward) and bitwise
// equal over 3 runs, with many key tiles adding into each query tile (and a GQA
// group, whose heads' dq tiles are added by the same CTAs). Only the Hopper kernel
// orders its dQ additions; the sm80 path declines.
TYPED_TEST(CudaKernels, BackwardDeterministic) {
  using T = TypeParam;
  if (tuned_arch() != AttnCudaArch::sm90) {
    for (int D : {64, 96, 128}) expect_bwd_declines<T>({1, 300, 300, 4, 2, D});
    return;
  }
  for (int D : {64, 128}) {
    check_bwd<T>({1, 1100, 1100, 4, 2, D}, Mask::causal(), true);
    check_bwd<T>({2, 333, 900, 2, 1, D}, Mask::none(), true);
    check_bwd<T>({1, 500, 500, 2, 2, D}, Mask::causal({1, 4}, {2, 4}), true);
  }
  check_bwd<T>({1, 400, 400, 2, 2, 96}, Mask::causal(), true);  // padded head_dim
}

// The sm80 backward adds dQ through a scratch that holds as many KV heads as fit
// under DISTATTN_SM80_DQ_SCRATCH_MIB and runs the KV heads in chunks of that many:
// with a 1 MiB cap every shape below needs one launch per KV head (a chunk offset
// that is wrong puts dQ into the wrong head and fails the reference check). A value
// that is not a whole number of MiB throws, naming the variable.
TYPED_TEST(CudaKernels, BackwardDqScratchInChunks) {
  using T = TypeParam;
  if (tuned_arch() != AttnCudaArch::sm80) GTEST_SKIP() << "the dQ scratch is the sm80 backward's (ctest cuda_kernels_sm80)";
  struct EnvGuard {
    ~EnvGuard() { unsetenv("DISTATTN_SM80_DQ_SCRATCH_MIB"); }
  } guard;
  ASSERT_EQ(setenv("DISTATTN_SM80_DQ_SCRATCH_MIB", "1", 1), 0);
  for (int D : {64, 128}) {
    check_bwd<T>({1, 1100, 1100, 4, 2, D}, Mask::causal());  // GQA: 2 launches of 2 query heads
    check_bwd<T>({2, 1300, 700, 3, 3, D}, Mask::none());    // 3 launches, batch 2
  }
  ASSERT_EQ(setenv("DISTATTN_SM80_DQ_SCRATCH_MIB", "0.5", 1), 0);
  const Shape s{1, 64, 64, 2, 2, 64};
  auto in = make_inputs<T>(s);
  Tensor4<T, Mem> dout("dout", s.B, s.Sq, s.H, s.D);
  RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq), delta("delta", s.B, s.H, s.Sq);
  Tensor4<Acc, Mem> dq("dq", s.B, s.Sq, s.H, s.D), dk("dk", s.B, s.Sk, s.Hkv, s.D), dv("dv", s.B, s.Sk, s.Hkv, s.D);
  try {
    Impl::TunedAttnBwdUpdate<Exec, T>::run(Exec(), in.qd, in.kd, in.vd, dout, lse, delta, dq, dk, dv, Mask::causal(),
                                           0.125, false);
    ADD_FAILURE() << "DISTATTN_SM80_DQ_SCRATCH_MIB=0.5 did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("DISTATTN_SM80_DQ_SCRATCH_MIB"), std::string::npos) << e.what();
  }
}

TYPED_TEST(CudaKernels, BackwardLongCausal) {
  using T = TypeParam;
  check_bwd<T>({1, 777, 777, 2, 1, 128}, Mask::causal());
}

// head_dim other than 64 / 128 (any multiple of 8 up to 128) runs in the next
// instantiated kernel with the columns zero-padded in shared memory: loads must
// zero-fill the padding and stores must skip it (several heads per row, so a store
// into the padding lands in the next head and fails the reference check).
TYPED_TEST(CudaKernels, PaddedHeadDims) {
  using T = TypeParam;
  for (int D : {8, 32, 80, 96, 120}) {
    check_fwd<T>({1, 300, 300, 4, 2, D}, Mask::causal());
    check_fwd<T>({1, 190, 257, 3, 3, D}, Mask::none());
  }
  for (int D : {32, 96, 120}) {
    check_bwd<T>({1, 300, 300, 4, 2, D}, Mask::causal());
    check_bwd<T>({1, 190, 257, 3, 3, D}, Mask::causal({67, 1}, {0, 1}));
  }
}

// The fused backward prologue: Delta against an fp64 sum of the same 16-bit O and dO
// (within fp32 summation error), and dq / dk / dv, which start from
// random values, exactly zero inside their (strided) views and untouched outside.
TYPED_TEST(CudaKernels, BackwardPrepareDeltaAndZeros) {
  using T = TypeParam;
  const auto A = Kokkos::ALL;
  for (int D : {8, 64, 96, 128}) {
    const Shape s{2, 150, 70, 4, 2, D};
    const std::uint64_t seed = fresh_seed();
    HostTensor o("o", s.B, s.Sq, s.H, D), dout("dout", s.B, s.Sq, s.H, D);
    HostTensor gq("gq", s.B, s.Sq + 5, s.H, D), gk("gk", s.B, s.Sk, s.Hkv + 1, D), gv("gv", s.B, s.Sk + 3, s.Hkv, D);
    Testing::fill_random(o, seed);
    Testing::fill_random(dout, seed + 1);
    Testing::fill_random(gq, seed + 2);
    Testing::fill_random(gk, seed + 3);
    Testing::fill_random(gv, seed + 4);
    const auto od = to_device<T>(o, "o"), dod = to_device<T>(dout, "dout");
    const auto gqd = to_device<Acc>(gq, "gq"), gkd = to_device<Acc>(gk, "gk"), gvd = to_device<Acc>(gv, "gv");
    RowStats<Acc, Mem> dbig("dbig", s.B, s.H, s.Sq + 7);
    Kokkos::deep_copy(dbig, std::numeric_limits<Acc>::quiet_NaN());
    auto dq    = Kokkos::subview(gqd, A, std::make_pair(5, 5 + s.Sq), A, A);
    auto dk    = Kokkos::subview(gkd, A, A, std::make_pair(1, 1 + s.Hkv), A);
    auto dv    = Kokkos::subview(gvd, A, std::make_pair(0, s.Sk), A, A);
    auto delta = Kokkos::subview(dbig, A, A, std::make_pair(7, 7 + s.Sq));
    ASSERT_TRUE((Impl::TunedAttnBwdPrepare<Exec, T>::run(Exec(), od, dod, delta, dq, dk, dv)))
        << "the CUDA prologue declined, D" << D;
    const std::string ctx = std::string(type_name<T>()) + " D" + std::to_string(D) + " seed " + std::to_string(seed);

    const auto hd = stats_to_host(delta);
    // The reference reads the 16-bit values the kernel read (copied back), not a
    // host rounding of the fp64 inputs, which may round a few values differently.
    const auto ro = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), od);
    const auto rdo = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dod);
    long bad = 0;
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.H; ++h)
        for (int i = 0; i < s.Sq; ++i) {
          double ref = 0, mag = 0;
          for (int d = 0; d < D; ++d) {
            const double x = double(ro(b, i, h, d)), y = double(rdo(b, i, h, d));
            ref += x * y;
            mag += std::fabs(x * y);
          }
          // 16-bit products are exact in fp32: only the sum of D terms rounds.
          bad += !(std::fabs(hd(b, h, i) - ref) <= D * 6e-8 * mag + 1e-30);
        }
    EXPECT_EQ(bad, 0) << "Delta rows off the fp64 sum, " << ctx;

    // Inside the views every element is 0; outside, the random start is unchanged.
    auto count = [](const HostTensor& now, const HostTensor& start, auto inside) {
      long wrong = 0;
      for (std::size_t a = 0; a < now.extent(0); ++a)
        for (std::size_t b = 0; b < now.extent(1); ++b)
          for (std::size_t c = 0; c < now.extent(2); ++c)
            for (std::size_t e = 0; e < now.extent(3); ++e) {
              const double want = inside(int(b), int(c)) ? 0.0 : double(float(start(a, b, c, e)));
              wrong += now(a, b, c, e) != want;
            }
      return wrong;
    };
    EXPECT_EQ(count(to_host(gqd), gq, [&](int i, int) { return i >= 5; }), 0) << "dq, " << ctx;
    EXPECT_EQ(count(to_host(gkd), gk, [&](int, int h) { return h >= 1; }), 0) << "dk, " << ctx;
    EXPECT_EQ(count(to_host(gvd), gv, [&](int j, int) { return j < s.Sk; }), 0) << "dv, " << ctx;
    const auto hb = stats_to_host(dbig);
    long outside = 0;
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.H; ++h)
        for (int i = 0; i < 7; ++i) outside += !std::isnan(hb(b, h, i));
    EXPECT_EQ(outside, 0) << "delta written outside its view, " << ctx;
  }
}

// Q split in 2 and K/V in 3 strided pieces: the sum of the tuned per-block updates
// equals the whole backward (additivity, docs/design/building_block.md).
TYPED_TEST(CudaKernels, BackwardSumOfBlocksEqualsWhole) {
  using T = TypeParam;
  for (int D : {64, 128}) {
    const Shape s{1, 237, 237, 4, 2, D};
    auto in = make_inputs<T>(s);
    HostTensor dout("dout", s.B, s.Sq, s.H, s.D);
    Testing::fill_random(dout, in.seed + 3);
    dout           = rounded<T>(dout);
    auto ddo       = to_device<T>(dout, "dout");
    const Mask all = Mask::causal();
    Tensor4<T, Mem> o("o", s.B, s.Sq, s.H, s.D);
    RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq), delta("delta", s.B, s.H, s.Sq);
    AttnOptions opts;
    opts.mask = all;
    attention_fwd(Exec(), in.qd, in.kd, in.vd, o, lse, opts);
    attention_bwd_delta(Exec(), o, ddo, delta);
    Tensor4<Acc, Mem> gq("gq", s.B, s.Sq, s.H, s.D), gk("gk", s.B, s.Sk, s.Hkv, s.D), gv("gv", s.B, s.Sk, s.Hkv, s.D);
    const std::vector<int> qc{0, 119, s.Sq}, kc{0, 70, 161, s.Sk};
    const auto A = Kokkos::ALL;
    for (std::size_t a = 0; a + 1 < qc.size(); ++a)
      for (std::size_t c = 0; c + 1 < kc.size(); ++c) {
        const auto qr = std::make_pair(qc[a], qc[a + 1]);
        const auto kr = std::make_pair(kc[c], kc[c + 1]);
        bwd_update<T>(Kokkos::subview(in.qd, A, qr, A, A), Kokkos::subview(in.kd, A, kr, A, A),
                      Kokkos::subview(in.vd, A, kr, A, A), Kokkos::subview(ddo, A, qr, A, A),
                      Kokkos::subview(lse, A, A, qr), Kokkos::subview(delta, A, A, qr),
                      Kokkos::subview(gq, A, qr, A, A), Kokkos::subview(gk, A, kr, A, A),
                      Kokkos::subview(gv, A, kr, A, A), Mask::causal({qc[a], 1}, {kc[c], 1}), KernelPath::Cuda);
      }
    const double scale = 1.0 / std::sqrt(double(D));
    HostTensor rdq("rdq", s.B, s.Sq, s.H, s.D), rdk("rdk", s.B, s.Sk, s.Hkv, s.D), rdv("rdv", s.B, s.Sk, s.Hkv, s.D);
    Testing::reference_bwd(in.q, in.k, in.v, dout, all, scale, rdq, rdk, rdv);
    HostTensor ndq, ndk, ndv;
    naive_bwd<T>(in.q, in.k, in.v, dout, all, scale, ndq, ndk, ndv);
    const std::string ctx = describe<T>(s, all, in.seed) + " blocks";
    for (const auto& [name, ours, naive, ref] : {std::make_tuple("dq", to_host(gq), ndq, rdq),
                                                 std::make_tuple("dk", to_host(gk), ndk, rdk),
                                                 std::make_tuple("dv", to_host(gv), ndv, rdv)}) {
      const std::string msg = rule_check(name, rounded_to<T>(ours), naive, ref);
      EXPECT_TRUE(msg.empty()) << msg << ", " << ctx;
    }
  }
}

// ---------------------------------------------------------------------------------
// Key windows and packed documents (core/mask.hpp). The Hopper kernels and the sm80
// forward apply them: each row's admissible key range, key tiles outside every row's
// range skipped, per-element masks on the tiles that cross a range's end. The sm80
// backward declines them (the portable kernels run those calls), as does a
// deterministic backward.

/// A shape and its mask: the kernels read `dev`, the references `host` (the same
/// rule, with document offsets in host memory).
struct MaskCase {
  Shape s;
  Mask dev, host;
};

/// The cases, for head_dim D: sliding and bidirectional windows narrower and wider
/// than a tile, documents of length 1 and boundaries inside tiles, documents with a
/// window, GQA and MQA, ring blocks (query and key offsets) and Attention2D's cyclic
/// shards (stride P), rows that see no key.
std::vector<MaskCase> window_document_cases(int D, const PackedDocs& d400, const PackedDocs& dw400,
                                            const PackedDocs& d600, const PackedDocs& d640,
                                            const PackedDocs& d480) {
  std::vector<MaskCase> cases;
  auto plain = [&](Shape s, const Mask& m) { cases.push_back({s, m, m}); };
  auto docs  = [&](Shape s, const PackedDocs& d, const Mask& m) { cases.push_back({s, d.on_device(m), d.on_host(m)}); };
  plain({1, 300, 300, 4, 2, D}, Mask::causal().with_window(Window{37, 0}));                     // inside one tile
  plain({1, 200, 330, 2, 1, D}, Mask::causal({400, 1}, {150, 1}).with_window(Window{200, 0}));  // ring block, MQA
  plain({2, 257, 300, 2, 2, D}, Mask::none().with_window(Window{50, 20}));                      // bidirectional
  plain({1, 190, 257, 6, 3, D}, Mask::none({100, 1}, {0, 1}).with_window(Window{0, 70}));       // right side only
  docs({1, 400, 400, 4, 2, D}, d400, Mask::causal());
  docs({1, 400, 400, 2, 2, D}, d400, Mask::none());
  docs({1, 400, 400, 4, 1, D}, dw400, Mask::causal().with_window(Window{30, 0}));
  docs({1, 400, 400, 2, 2, D}, dw400, Mask::none().with_window(Window{16, 9}));
  docs({1, 200, 300, 4, 2, D}, d600, Mask::causal({256, 1}, {64, 1}));                             // ring block
  docs({1, 160, 160, 2, 2, D}, d640, Mask::causal({1, 4}, {2, 4}).with_window(Window{40, 0}));     // cyclic, P = 4
  docs({1, 160, 160, 2, 1, D}, d480, Mask::none({2, 3}, {0, 3}));                                  // cyclic, P = 3
  plain({1, 100, 100, 2, 2, D}, Mask::causal({3, 4}, {0, 4}).with_window(Window{2, 0}));  // no row sees a key
  return cases;
}

TYPED_TEST(CudaKernels, WindowsAndDocuments) {
  using T = TypeParam;
  const PackedDocs d400({0, 1, 2, 70, 71, 200, 333, 400}), dw400({0, 5, 130, 131, 300, 400});
  const PackedDocs d600({0, 100, 101, 300, 450, 600}), d640({0, 3, 77, 200, 201, 640}), d480({0, 50, 51, 300, 480});
  const bool fwd_ok = Impl::cuda::attn_masks_beyond_dense(tuned_arch(), Impl::cuda::AttnDir::fwd);
  const bool bwd_ok = Impl::cuda::attn_masks_beyond_dense(tuned_arch(), Impl::cuda::AttnDir::bwd);
  ASSERT_TRUE(fwd_ok) << "every tuned family's forward applies windows and documents";
  for (int D : {64, 128}) {
    for (const MaskCase& c : window_document_cases(D, d400, dw400, d600, d640, d480)) {
      check_fwd<T>(c.s, c.dev, &c.host);
      if (bwd_ok) check_bwd<T>(c.s, c.dev, false, &c.host);
      else expect_bwd_declines<T>(c.s, c.dev, false);  // declined, nothing written
    }
  }
  // A padded head_dim, and many tiles: most of them skipped, boundaries everywhere.
  const Mask padded = d400.on_host(Mask::causal());
  check_fwd<T>({1, 300, 300, 2, 1, 96}, d400.on_device(Mask::causal()), &padded);
  const PackedDocs dlong({0, 1, 130, 500, 501, 502, 900, 1100});
  for (const Mask& m : {Mask::causal().with_window(Window{300, 0}), Mask::none()}) {
    const Mask host = dlong.on_host(m);
    check_fwd<T>({1, 1100, 1100, 2, 1, 128}, dlong.on_device(m), &host);
    if (bwd_ok) check_bwd<T>({1, 1100, 1100, 2, 1, 64}, dlong.on_device(m), false, &host);
  }
}

// Where the Hopper backward's warp-specialized kernel cannot run (no tensor map for
// K and V whose heads alias: head stride 0) its wgmma fallback would take a dense
// mask, but it knows no windows or documents: the call declines, nothing written.
// A deterministic backward declines them too (its dQ order rests on dense masks).
TYPED_TEST(CudaKernels, BackwardDeclinesMasksItsKernelCannotApply) {
  using T = TypeParam;
  if (tuned_arch() != AttnCudaArch::sm90) GTEST_SKIP() << "WindowsAndDocuments covers the sm80 backward's declines";
  using Strided = Kokkos::View<T****, Kokkos::LayoutStride, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const PackedDocs docs({0, 40, 41, 150});
  for (int D : {64, 128}) {
    const Shape s{1, 130, 150, 2, 2, D};
    auto in = make_inputs<T>(s);
    const Kokkos::LayoutStride lay(s.B, std::size_t(s.Sk) * s.Hkv * D, s.Sk, std::size_t(s.Hkv) * D, s.Hkv, 0, D, 1);
    const Strided k0(in.kd.data(), lay), v0(in.vd.data(), lay);
    Tensor4<T, Mem> dout("dout", s.B, s.Sq, s.H, D);
    RowStats<Acc, Mem> lse("lse", s.B, s.H, s.Sq), delta("delta", s.B, s.H, s.Sq);
    Tensor4<Acc, Mem> dq("dq", s.B, s.Sq, s.H, D), dk("dk", s.B, s.Sk, s.Hkv, D), dv("dv", s.B, s.Sk, s.Hkv, D);
    Kokkos::deep_copy(dq, 1.f);
    for (const Mask& m : {Mask::causal().with_window(Window{20, 0}), docs.on_device(Mask::none())}) {
      EXPECT_FALSE((Impl::TunedAttnBwdUpdate<Exec, T>::run(Exec(), in.qd, k0, v0, dout, lse, delta, dq, dk, dv, m,
                                                           0.125)))
          << "D" << D;
      expect_bwd_declines<T>(s, m);
    }
    const HostTensor hq = to_host(dq);
    long changed        = 0;
    for (std::size_t i = 0; i < hq.span(); ++i) changed += hq.data()[i] != 1.0 ? 1 : 0;
    EXPECT_EQ(changed, 0) << "a declined backward wrote dq, D" << D;
    // The same call with a dense mask runs (on the fallback), so the declines above are the mask's.
    EXPECT_TRUE((Impl::TunedAttnBwdUpdate<Exec, T>::run(Exec(), in.qd, k0, v0, dout, lse, delta, dq, dk, dv,
                                                        Mask::causal(), 0.125)))
        << "D" << D;
  }
}

}  // namespace
}  // namespace DistAttn::Test
