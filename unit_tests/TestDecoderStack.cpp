// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Decoder stack on MPI ranks (issue #13), float64 end to end: the three
// checkpoint policies give bitwise identical gradients and the expected number of
// attention forwards; the P-rank stack equals the same stack on one rank; a
// 2-layer model's gradients match central finite differences; bad input raises
// InvalidArgument. Every rank builds the (tiny) global problem from a shared seed
// and takes its own tokens by the executor's TokenLayout.

#include "test_helpers.hpp"

#include <DistAttn/layer/decoder_stack.hpp>
#include <DistAttn/testing/layer_init.hpp>

#include <mpi.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace DistAttn::Test {
namespace {

using T    = double;
using Comm = Communicator<MpiSpace, Exec>;
using X3   = Kokkos::View<T***, Kokkos::LayoutRight, Mem>;
using H3   = Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace>;
using Ring = RingAttention<T, MpiSpace, Exec>;
using Grid = Grid2DAttention<T, MpiSpace, Exec>;

constexpr int kBatch = 2, kChunk = 4, kLayers = 2;

DecoderConfig tiny_config() {
  DecoderConfig c;
  c.hidden = 16, c.heads = 4, c.kv_heads = 2, c.head_dim = 4, c.mlp_hidden = 24;
  return c;
}

std::uint64_t shared_seed() {
  std::uint64_t s = fresh_seed();
  MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return s;
}

/// Global [batch, N, hidden] tensors of the problem, the same on every rank.
struct Problem {
  std::uint64_t seed;
  H3 x, dz;
};

Problem make_problem(int N, const DecoderConfig& c) {
  Problem p;
  p.seed = shared_seed();
  p.x    = H3("x", kBatch, N, c.hidden);
  p.dz   = H3("dz", kBatch, N, c.hidden);
  for (std::size_t i = 0; i < p.x.span(); ++i) {
    p.x.data()[i]  = Testing::hash_uniform(p.seed + 11, i);
    p.dz.data()[i] = Testing::hash_uniform(p.seed + 12, i);
  }
  return p;
}

/// This rank's rows of a global tensor, by the layout's token positions.
X3 local_rows(const H3& g, const TokenLayout& t) {
  X3 d("local", g.extent(0), t.local_rows(), g.extent(2));
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t b = 0; b < g.extent(0); ++b)
    for (int i = 0; i < t.local_rows(); ++i)
      for (std::size_t e = 0; e < g.extent(2); ++e) h(b, i, e) = g(b, t.position(i), e);
  Kokkos::deep_copy(d, h);
  return d;
}

template <class V>
std::vector<double> host_vector(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.span());
}

/// Everything a forward + backward produces on this rank.
struct StepResult {
  std::vector<double> out, dx;
  std::vector<std::vector<double>> grads;  // per layer, flat
  std::vector<int> calls;
  TokenLayout layout;
};

template <class Attn>
StepResult run_step(Comm& comm, Attn& attn, const DecoderConfig& cfg, CheckpointPolicy policy, const Problem& p,
                    std::uint64_t weight_seed) {
  DecoderStack<T, MpiSpace, Exec, Attn> stack(comm, attn, Exec(), cfg, kLayers, kBatch, policy);
  for (int l = 0; l < kLayers; ++l) Testing::fill_layer_weights(Exec(), stack.weights(l), weight_seed + l);
  const TokenLayout& t = stack.layout();
  X3 x = local_rows(p.x, t), dz = local_rows(p.dz, t);
  X3 out("out", kBatch, t.local_rows(), cfg.hidden), dx("dx", kBatch, t.local_rows(), cfg.hidden);
  stack.forward(x, out);
  stack.backward(dz, dx);
  StepResult r;
  r.calls  = stack.attention_forward_calls();
  r.out    = host_vector(out);
  r.dx     = host_vector(dx);
  r.layout = t;
  for (int l = 0; l < kLayers; ++l) r.grads.push_back(host_vector(stack.gradients(l).flat()));
  return r;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

/// The executors under test, built for P ranks of kChunk tokens each: every
/// token layout (zigzag, contiguous, cyclic) and both Attention2D variants.
template <RingKind Kind>
struct RingMaker {
  static Ring make(Comm& comm, const DecoderConfig& c) {
    RingOptions o;
    o.kind = Kind;
    return Ring(comm, Exec(), kBatch, kChunk, c.heads, c.kv_heads, c.head_dim, o);
  }
};
template <Grid2DVariant Variant>
struct GridMaker {
  static Grid make(Comm& comm, const DecoderConfig& c) {
    Grid2DOptions o;
    o.variant = Variant;
    return Grid(comm, 0, 0, Exec(), kBatch, std::int64_t(kChunk) * comm.size(), c.heads, c.kv_heads, c.head_dim, o);
  }
};
/// Executors chosen at run time (make_attention), the ones with no class overload
/// in the layer included; null where the heads do not split over the ranks.
template <ExecutorKind Kind>
struct AnyMaker {
  static std::unique_ptr<AnyAttention<T, MpiSpace, Exec>> make(Comm& comm, const DecoderConfig& c) {
    const int P = comm.size();
    if (Kind == ExecutorKind::Ulysses && (c.heads % P != 0 || (c.kv_heads % P != 0 && P % c.kv_heads != 0)))
      return nullptr;
    ExecutorChoice choice;
    choice.kind = Kind;
    return make_attention<T>(comm, Exec(), LocalProblem{kBatch, kChunk, c.heads, c.kv_heads, c.head_dim}, choice);
  }
};
template <class A>
A& executor(A& a) {
  return a;
}
template <class A>
A& executor(std::unique_ptr<A>& a) {
  return *a;
}
template <class A>
bool built(const A&) {
  return true;
}
template <class A>
bool built(const std::unique_ptr<A>& a) {
  return a != nullptr;
}

using ZigzagRing = RingMaker<RingKind::Zigzag>;
using Grid2DO    = GridMaker<Grid2DVariant::O>;

template <class Maker>
class DecoderStackTest : public ::testing::Test {};
using Executors = ::testing::Types<ZigzagRing, RingMaker<RingKind::Balanced>, Grid2DO, GridMaker<Grid2DVariant::NO>,
                                   AnyMaker<ExecutorKind::Ulysses>, AnyMaker<ExecutorKind::Hybrid>,
                                   AnyMaker<ExecutorKind::Grid2DO>>;
TYPED_TEST_SUITE(DecoderStackTest, Executors);

TYPED_TEST(DecoderStackTest, PoliciesGiveBitwiseIdenticalGradients) {
  auto comm            = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const DecoderConfig c = tiny_config();
  const Problem p       = make_problem(kChunk * comm.size(), c);
  auto attn             = TypeParam::make(comm, c);
  if (!built(attn)) GTEST_SKIP() << "the heads do not split over " << comm.size() << " ranks";
  const StepResult none = run_step(comm, executor(attn), c, CheckpointPolicy::None, p, p.seed);
  const StepResult lb   = run_step(comm, executor(attn), c, CheckpointPolicy::LayerBoundary, p, p.seed);
  const StepResult ra   = run_step(comm, executor(attn), c, CheckpointPolicy::RematAware, p, p.seed);
  EXPECT_EQ(none.calls, std::vector<int>(kLayers, 1));
  EXPECT_EQ(lb.calls, std::vector<int>(kLayers, 2));
  EXPECT_EQ(ra.calls, std::vector<int>(kLayers, 1));
  for (const StepResult* r : {&lb, &ra}) {
    const char* name = r == &lb ? "layer-boundary" : "remat-aware";
    EXPECT_TRUE(bitwise_equal(r->out, none.out)) << name << " output (seed " << p.seed << ")";
    EXPECT_TRUE(bitwise_equal(r->dx, none.dx)) << name << " input gradient (seed " << p.seed << ")";
    for (int l = 0; l < kLayers; ++l)
      EXPECT_TRUE(bitwise_equal(r->grads[l], none.grads[l]))
          << name << " weight gradients of layer " << l << " (seed " << p.seed << ")";
  }
}

/// Largest |a - b| over max|b| of two tensors.
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

TYPED_TEST(DecoderStackTest, MatchesTheSameStackOnOneRank) {
  auto comm            = Comm::from_raw(MPI_COMM_WORLD, Exec());
  auto self            = Comm::from_raw(MPI_COMM_SELF, Exec());
  const DecoderConfig c = tiny_config();
  const int N           = kChunk * comm.size();
  const Problem p       = make_problem(N, c);
  auto attn             = TypeParam::make(comm, c);
  if (!built(attn)) GTEST_SKIP() << "the heads do not split over " << comm.size() << " ranks";
  const StepResult dist = run_step(comm, executor(attn), c, CheckpointPolicy::RematAware, p, p.seed);
  RingOptions vo;
  vo.kind = RingKind::Vanilla;
  Ring one_attn(self, Exec(), kBatch, N, c.heads, c.kv_heads, c.head_dim, vo);
  const StepResult one = run_step(self, one_attn, c, CheckpointPolicy::None, p, p.seed);

  // One rank's rows in the global order: compare this rank's tokens only.
  const TokenLayout& t = dist.layout;
  std::vector<double> out_ref, dx_ref;
  for (int b = 0; b < kBatch; ++b)
    for (int i = 0; i < t.local_rows(); ++i)
      for (int e = 0; e < c.hidden; ++e) {
        const std::size_t g = (std::size_t(b) * N + t.position(i)) * c.hidden + e;
        out_ref.push_back(one.out[g]);
        dx_ref.push_back(one.dx[g]);
      }
  // fp64 sums over a few hundred terms reordered by the schedule: ~1e-15; a wrong
  // position, token or missing partial gives O(1).
  const double tol = 1e-12;
  EXPECT_LT(rel_diff(dist.out, out_ref), tol) << "output (seed " << p.seed << ")";
  EXPECT_LT(rel_diff(dist.dx, dx_ref), tol) << "input gradient (seed " << p.seed << ")";
  for (int l = 0; l < kLayers; ++l)
    EXPECT_LT(rel_diff(dist.grads[l], one.grads[l]), tol) << "weight gradients of layer " << l << " (seed " << p.seed
                                                          << ")";
}

/// Packed documents (issue #37): a stack over P ranks whose executor has documents
/// gives every document's tokens the output and input gradient of the same stack
/// run on that document alone on one rank, and its weight gradients are the sum of
/// the documents'. Attention across documents changes them by O(1). (Scores depend
/// only on distances within a document, so whether RoPE restarts its positions
/// there does not show here; LayerParts' RoPE test checks the positions.)
TEST(DecoderStack, PackedDocumentsTrainAsSeparateSequences) {
  auto comm             = Comm::from_raw(MPI_COMM_WORLD, Exec());
  auto self             = Comm::from_raw(MPI_COMM_SELF, Exec());
  const DecoderConfig c = tiny_config();
  const int N           = kChunk * comm.size();
  const Problem p       = make_problem(N, c);
  // Three documents at cuts drawn from the shared seed, 1 <= a < b <= N - 1.
  const std::int64_t a = 1 + std::int64_t(p.seed % std::uint64_t(N - 2));
  const std::int64_t b = a + 1 + std::int64_t((p.seed >> 16) % std::uint64_t(N - a - 1));
  ExecutorOptions opts;
  opts.documents = {0, a, b, N};

  // Each document alone: its rows of the problem on one rank, positions from 0.
  std::vector<StepResult> alone;
  for (int d = 0; d < 3; ++d) {
    const std::int64_t off = opts.documents[d], len = opts.documents[d + 1] - off;
    Problem pd{p.seed, H3("x", kBatch, len, c.hidden), H3("dz", kBatch, len, c.hidden)};
    for (int s = 0; s < kBatch; ++s)
      for (std::int64_t i = 0; i < len; ++i)
        for (int e = 0; e < c.hidden; ++e) pd.x(s, i, e) = p.x(s, off + i, e), pd.dz(s, i, e) = p.dz(s, off + i, e);
    RingOptions vo;
    vo.kind = RingKind::Vanilla;
    Ring one(self, Exec(), kBatch, int(len), c.heads, c.kv_heads, c.head_dim, vo);
    alone.push_back(run_step(self, one, c, CheckpointPolicy::None, pd, p.seed));
  }

  for (ExecutorKind kind : {ExecutorKind::RingZigzag, ExecutorKind::RingBalanced, ExecutorKind::Grid2DO}) {
    SCOPED_TRACE(std::string(to_string(kind)) + ", documents [0, " + std::to_string(a) + ", " + std::to_string(b) +
                 ", " + std::to_string(N) + "], seed " + std::to_string(p.seed));
    ExecutorChoice choice;
    choice.kind = kind;
    auto attn   = make_attention<T>(comm, Exec(), LocalProblem{kBatch, kChunk, c.heads, c.kv_heads, c.head_dim},
                                    choice, opts);
    const StepResult packed = run_step(comm, *attn, c, CheckpointPolicy::RematAware, p, p.seed);
    std::vector<double> out_ref, dx_ref;
    const TokenLayout& t = packed.layout;
    for (int s = 0; s < kBatch; ++s)
      for (int i = 0; i < t.local_rows(); ++i) {
        const std::int64_t g = t.position(i);
        const int d          = g < a ? 0 : g < b ? 1 : 2;
        const std::int64_t len = opts.documents[d + 1] - opts.documents[d];
        for (int e = 0; e < c.hidden; ++e) {
          const std::size_t at = (std::size_t(s) * len + (g - opts.documents[d])) * c.hidden + e;
          out_ref.push_back(alone[d].out[at]);
          dx_ref.push_back(alone[d].dx[at]);
        }
      }
    const double tol = 1e-12;  // fp64 sums reordered, as in MatchesTheSameStackOnOneRank
    EXPECT_LT(rel_diff(packed.out, out_ref), tol) << "output";
    EXPECT_LT(rel_diff(packed.dx, dx_ref), tol) << "input gradient";
    for (int l = 0; l < kLayers; ++l) {
      std::vector<double> sum(alone[0].grads[l].size(), 0.0);
      for (const auto& r : alone)
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += r.grads[l][i];
      EXPECT_LT(rel_diff(packed.grads[l], sum), tol) << "weight gradients of layer " << l;
    }
  }
}

/// Loss = sum over all ranks' tokens of <out, dz>, whose gradient is backward(dz).
template <class Stack>
double loss(Stack& stack, const X3& x, const X3& dz) {
  X3 out("out", x.extent(0), x.extent(1), x.extent(2));
  stack.forward(x, out);
  const auto o = host_vector(out), d = host_vector(dz);
  double local = 0, total = 0;
  for (std::size_t i = 0; i < o.size(); ++i) local += o[i] * d[i];
  MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

TEST(DecoderStack, GradientsMatchFiniteDifferences) {
  auto comm             = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const DecoderConfig c = tiny_config();
  const Problem p       = make_problem(kChunk * comm.size(), c);
  auto attn             = ZigzagRing::make(comm, c);
  DecoderStack<T, MpiSpace, Exec, Ring> stack(comm, attn, Exec(), c, kLayers, kBatch, CheckpointPolicy::RematAware);
  for (int l = 0; l < kLayers; ++l) Testing::fill_layer_weights(Exec(), stack.weights(l), p.seed + l);
  const TokenLayout& t = stack.layout();
  X3 x = local_rows(p.x, t), dz = local_rows(p.dz, t);
  X3 out("out", kBatch, t.local_rows(), c.hidden), dx("dx", kBatch, t.local_rows(), c.hidden);
  stack.forward(x, out);
  stack.backward(dz, dx);

  // Directional derivative along a random direction u of each weight (and of the
  // input): (L(w + h u) - L(w - h u)) / 2h against <grad, u>. The central
  // difference errs by O(h^2) ~ 1e-12 and by rounding ~ 1e-16 / h ~ 1e-10.
  const double h = 1e-6, tol = 1e-7;
  auto check = [&](const auto& param, const std::vector<double>& grad, const char* what, int layer, bool global_sum) {
    Vector<T, Mem> u("u", param.extent(0)), saved("saved", param.extent(0));
    Testing::fill_random_flat(Exec(), u, p.seed + 99 + layer, 1.0);
    Kokkos::deep_copy(saved, param);
    const auto uh = host_vector(u);
    double an = 0;
    for (std::size_t i = 0; i < uh.size(); ++i) an += grad[i] * uh[i];
    if (global_sum) MPI_Allreduce(MPI_IN_PLACE, &an, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    Impl::axpy(Exec(), h, u, param);
    const double lp = loss(stack, x, dz);
    Kokkos::deep_copy(param, saved);
    Impl::axpy(Exec(), -h, u, param);
    const double lm = loss(stack, x, dz);
    Kokkos::deep_copy(param, saved);
    const double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(fd, an, tol * std::max(1.0, std::abs(an)))
        << what << " of layer " << layer << " (seed " << p.seed << ")";
  };
  for (int l = 0; l < kLayers; ++l) {
    const auto g = stack.gradients(l);
    for (int i = 0; i < kNumWeights; ++i)
      check(stack.weights(l).span(Weight(i)), host_vector(g.span(Weight(i))), to_string(Weight(i)), l, false);
  }
  Kokkos::View<T*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> xf(x.data(), x.span());
  check(xf, host_vector(dx), "input", -1, true);
}

// ---- bad input: a clear InvalidArgument on every rank --------------------------------

template <class F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning '" << needle << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DecoderStackBadInput, HeadsNotDivisible) {
  auto comm       = Comm::from_raw(MPI_COMM_WORLD, Exec());
  DecoderConfig c = tiny_config();
  auto attn       = ZigzagRing::make(comm, c);
  c.kv_heads      = 3;
  expect_invalid([&] { DecoderStack<T, MpiSpace, Exec, Ring> s(comm, attn, Exec(), c, 1, kBatch, CheckpointPolicy::None); },
                 "heads (4) not divisible by kv_heads (3)");
}

TEST(DecoderStackBadInput, ExecutorBuiltForOtherShapes) {
  auto comm             = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const DecoderConfig c = tiny_config();
  DecoderConfig other   = c;
  other.heads = 2, other.kv_heads = 2, other.head_dim = 8;
  // The ring executor checks q at its entry: reported with the layer's shapes.
  auto ring = ZigzagRing::make(comm, other);
  DecoderStack<T, MpiSpace, Exec, Ring> s(comm, ring, Exec(), c, 1, kBatch, CheckpointPolicy::RematAware);
  X3 x("x", kBatch, kChunk, c.hidden), out("out", kBatch, kChunk, c.hidden);
  expect_invalid([&] { s.forward(x, out); }, "attention executor rejected the layer's q, k, v (heads=4");
  // Attention2D says its shapes up front.
  auto grid = Grid2DO::make(comm, other);
  expect_invalid([&] { DecoderStack<T, MpiSpace, Exec, Grid> g(comm, grid, Exec(), c, 1, kBatch, CheckpointPolicy::None); },
                 "the Attention2D executor was built for heads=2");
  // Tokens per rank other than the executor's.
  X3 wrong("wrong", kBatch, kChunk + 2, c.hidden);
  auto ring_ok = ZigzagRing::make(comm, c);
  DecoderStack<T, MpiSpace, Exec, Ring> ok(comm, ring_ok, Exec(), c, 1, kBatch, CheckpointPolicy::None);
  expect_invalid([&] { ok.forward(wrong, out); }, "'x' must be [batch=2, tokens=4");
  // Only one rank passes a bad shape: every rank raises, none hangs.
  X3 mine = comm.rank() == comm.size() - 1 ? wrong : x;
  expect_invalid([&] { ok.forward(mine, out); }, "rejected its arguments");
}

TEST(DecoderStackBadInput, WeightsOfTheWrongSize) {
  auto comm             = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const DecoderConfig c = tiny_config();
  auto attn             = ZigzagRing::make(comm, c);
  DecoderStack<T, MpiSpace, Exec, Ring> s(comm, attn, Exec(), c, 1, kBatch, CheckpointPolicy::None);
  Matrix<T, Mem> wq("wq", c.hidden, c.q_width() / 2);
  expect_invalid([&] { s.weights(0).assign(Weight::Q, wq); }, "weight 'wq' must be [16, 16], got [16, 8]");
  Vector<T, Mem> g("g", c.hidden + 1);
  expect_invalid([&] { s.weights(0).assign(Weight::NormMlp, g); }, "weight 'norm_mlp' must be [16], got [17]");
  DecoderConfig wider = c;
  wider.mlp_hidden    = 32;
  LayerWeights<T, Mem> other(wider, "other");
  expect_invalid([&] { s.weights(0).assign(other); }, "weight 'w_gate' must be [16, 24], got [16, 32]");
}

}  // namespace
}  // namespace DistAttn::Test
