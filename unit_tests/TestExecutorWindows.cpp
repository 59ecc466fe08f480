// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Key windows and packed documents (ExecutorOptions::window, ::documents) through
// every executor, built by the registry: each rank's rows of o, LSE, dQ, dK, dV
// against the fp64 reference of the whole sequence under the same mask, rows
// taken where the executor's token layout puts them (AnyAttention::position).
// Windows narrower than a rank's chunk, wider than it, and a window of the query
// alone; documents across rank boundaries, of one token, and with a window;
// causal and not. Documents replaced on a built executor (set_documents) between
// passes, as a training loop's batches pack them.

#include "mpi_test_helpers.hpp"
#include "test_helpers.hpp"

#include <DistAttn/registry/any_attention.hpp>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

namespace DistAttn::Test {
namespace {

using T    = double;
using Comm = Communicator<MpiSpace, Exec>;

/// The global problem (the same on every rank) and its reference under `rule`.
struct Global {
  HostTensor q, k, v, dout, o, dq, dk, dv;
  HostStats lse;
  Global(int B, int N, int H, int Hkv, int D, const Mask& rule, std::uint64_t seed)
      : q("q", B, N, H, D), k("k", B, N, Hkv, D), v("v", B, N, Hkv, D), dout("do", B, N, H, D), o("o", B, N, H, D),
        dq("dq", B, N, H, D), dk("dk", B, N, Hkv, D), dv("dv", B, N, Hkv, D), lse("lse", B, H, N) {
    Testing::fill_random(q, seed, 1.5);
    Testing::fill_random(k, seed + 1, 1.5);
    Testing::fill_random(v, seed + 2);
    Testing::fill_random(dout, seed + 3);
    const double scale = 1.0 / std::sqrt(double(D));
    Testing::reference_fwd(q, k, v, rule, scale, o, lse);
    Testing::reference_bwd(q, k, v, dout, rule, scale, dq, dk, dv);
  }
};

/// Rows of g at the executor's positions of this rank's local rows.
template <class E>
HostTensor local_rows(const HostTensor& g, const E& ex, int c) {
  HostTensor out("rows", g.extent(0), c, g.extent(2), g.extent(3));
  for (int i = 0; i < c; ++i)
    for (std::size_t b = 0; b < g.extent(0); ++b)
      for (std::size_t h = 0; h < g.extent(2); ++h)
        for (std::size_t d = 0; d < g.extent(3); ++d)
          out(b, i, h, d) = g(b, ex.position(world_rank(), i), h, d);
  return out;
}

/// One forward and backward of `ex` on g's inputs; each rank's rows against g's reference.
template <class E>
void expect_reference(E& ex, const Global& g, const LocalProblem& p, const std::string& what) {
  const auto q    = to_device<T>(local_rows(g.q, ex, p.local_seq), "q");
  const auto k    = to_device<T>(local_rows(g.k, ex, p.local_seq), "k");
  const auto v    = to_device<T>(local_rows(g.v, ex, p.local_seq), "v");
  const auto dout = to_device<T>(local_rows(g.dout, ex, p.local_seq), "do");
  Tensor4<T, Mem> o_("o", p.batch, p.local_seq, p.heads, p.head_dim);
  Tensor4<T, Mem> dq("dq", p.batch, p.local_seq, p.heads, p.head_dim);
  Tensor4<T, Mem> dk("dk", p.batch, p.local_seq, p.kv_heads, p.head_dim);
  Tensor4<T, Mem> dv("dv", p.batch, p.local_seq, p.kv_heads, p.head_dim);
  RowStats<T, Mem> lse("lse", p.batch, p.heads, p.local_seq);
  ex.forward(q, k, v, o_, lse);
  ex.backward(q, k, v, o_, dout, lse, dq, dk, dv);
  Exec().fence();
  EXPECT_LE(Testing::rel_error(to_host(o_), local_rows(g.o, ex, p.local_seq)), 1e-12) << "o " << what;
  EXPECT_LE(Testing::rel_error(to_host(dq), local_rows(g.dq, ex, p.local_seq)), 1e-11) << "dq " << what;
  EXPECT_LE(Testing::rel_error(to_host(dk), local_rows(g.dk, ex, p.local_seq)), 1e-11) << "dk " << what;
  EXPECT_LE(Testing::rel_error(to_host(dv), local_rows(g.dv, ex, p.local_seq)), 1e-11) << "dv " << what;
  const auto hl = stats_to_host(lse);
  double lerr   = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < p.local_seq; ++i)
        lerr = std::max(lerr, std::fabs(hl(b, h, i) - g.lse(b, h, ex.position(world_rank(), i))));
  EXPECT_LE(lerr, 1e-11) << "lse " << what;
}

std::vector<ExecutorChoice> every_choice(int P) {
  std::vector<ExecutorChoice> choices;
  for (ExecutorKind k : kAllExecutorKinds) {
    ExecutorChoice c;
    c.kind = k;
    choices.push_back(c);
  }
  if (P == 4) {
    ExecutorChoice c;
    c.kind           = ExecutorKind::Hybrid;
    c.ulysses_degree = 2;
    c.inner          = ExecutorKind::Grid2DO;
    choices.push_back(c);
  }
  return choices;
}

std::string name_of(const ExecutorChoice& c) {
  std::string n = to_string(c.kind);
  if (c.kind == ExecutorKind::Hybrid) n += "-U" + std::to_string(c.ulysses_degree) + "-" + to_string(c.inner);
  return n;
}

TEST(ExecutorWindows, EveryExecutorMatchesTheReference) {
  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world_size();
  const LocalProblem p{1, 12, 12, P == 3 ? 3 : 2, 16};
  const int N = P * p.local_seq;
  const std::vector<ExecutorChoice> choices = every_choice(P);
  struct Case {
    bool causal;
    Window window;
    std::vector<std::int64_t> docs;
  };
  // Documents over N = 12 P tokens: boundaries inside chunks, a one-token document.
  std::vector<std::int64_t> docs{0};
  for (std::int64_t x : {7, 8, 20, 31, 44})
    if (x < N) docs.push_back(x);
  docs.push_back(N);
  const std::vector<Case> cases{{true, {5, 0}, {}},  {true, {17, 0}, {}}, {true, {0, 0}, {}},
                                {false, {4, 6}, {}}, {false, {0, 9}, {}}, {true, {}, docs},
                                {false, {}, docs},   {true, {3, 0}, docs}, {false, {2, 5}, docs}};
  const std::uint64_t seed = shared_seed();
  for (const Case& wc : cases) {
    ExecutorOptions o;
    o.causal = wc.causal;
    o.window    = wc.window;
    o.documents = wc.docs;
    const Global g(p.batch, N, p.heads, p.kv_heads, p.head_dim, o.mask_rule(), seed);
    for (const ExecutorChoice& c : choices) {
      if (!wc.causal && (c.kind == ExecutorKind::RingVanilla || c.kind == ExecutorKind::RingBalanced)) continue;
      const std::string what = name_of(c) + (wc.causal ? " causal" : " full") +
                               (wc.window.bounded() ? " window {" + std::to_string(wc.window.left) + "," +
                                                          std::to_string(wc.window.right) + "}"
                                                    : std::string(" no window")) +
                               " documents " + std::to_string(wc.docs.size()) + " P=" +
                               std::to_string(P) + " seed " + std::to_string(seed);
      auto ex = make_attention<T>(comm, Exec(), p, c, o);
      expect_reference(*ex, g, p, what);
    }
  }
}

// One executor per kind, built with documents, then given other documents between
// passes (set_documents): each pass matches the reference of the documents it
// ran under, with a window kept from construction. A backward right after the
// change (o and lse of the old documents) is refused on every rank; bad or
// differing offsets are refused on every rank and leave the documents as they were.
TEST(ExecutorWindows, SetDocumentsReplacesTheDocumentsBetweenPasses) {
  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world_size();
  const LocalProblem p{1, 12, 12, P == 3 ? 3 : 2, 16};
  const std::int64_t N = std::int64_t(P) * p.local_seq;
  const std::uint64_t seed = shared_seed();
  // Boundaries inside chunks and across ranks, a one-token document; then none.
  auto split = [&](std::initializer_list<std::int64_t> at) {
    std::vector<std::int64_t> d{0};
    for (std::int64_t x : at)
      if (x > d.back() && x < N) d.push_back(x);
    d.push_back(N);
    return d;
  };
  const std::vector<std::vector<std::int64_t>> batches{split({5, 6, 19, 30}), split({3, 14, 15, 40}),
                                                       std::vector<std::int64_t>{}, split({9, 23})};
  for (const ExecutorChoice& c : every_choice(P)) {
    ExecutorOptions o;
    o.window    = Window{7, 0};
    o.documents = batches[0];
    auto ex     = make_attention<T>(comm, Exec(), p, c, o);
    for (std::size_t b = 0; b < batches.size(); ++b) {
      const std::string what = name_of(c) + " batch " + std::to_string(b) + " P=" + std::to_string(P);
      if (b > 0) {
        ex->set_documents(batches[b]);
        EXPECT_EQ(ex->options().documents, batches[b]) << what;
        Tensor4<T, Mem> x("x", p.batch, p.local_seq, p.heads, p.head_dim), kv("kv", p.batch, p.local_seq, p.kv_heads, p.head_dim);
        RowStats<T, Mem> lse("lse", p.batch, p.heads, p.local_seq);
        EXPECT_THROW(ex->backward(x, kv, kv, x, x, lse, x, kv, kv), InvalidArgument) << what;
      }
      o.documents = batches[b];
      const Global g(p.batch, int(N), p.heads, p.kv_heads, p.head_dim, o.mask_rule(), seed + b);
      expect_reference(*ex, g, p, what);
    }
    // Refused on every rank, naming the documents: unsorted, not from 0, past N,
    // and different on rank 0 only. The executor keeps the last batch's.
    std::vector<std::vector<std::int64_t>> bad{{0, 9, 4, N}, {2, N}, {0, N + 1}};
    if (P > 1) bad.push_back(world_rank() == 0 ? split({4}) : split({8}));
    for (const auto& d : bad) {
      try {
        ex->set_documents(d);
        ADD_FAILURE() << name_of(c) << ": bad documents were accepted";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("document"), std::string::npos) << e.what();
      }
      EXPECT_EQ(ex->options().documents, batches.back()) << name_of(c);
    }
  }
}

// A causal window narrower than a chunk leaves every block more than one chunk
// back without an allowed pair: the ring kinds that do not split blocks (vanilla,
// balanced) then run no kernel for it. Tasks of the pass, summed over ranks,
// against the dense causal pass: fewer from P = 3 on (at P <= 2 every block
// touches the diagonal or its neighbour).
TEST(ExecutorWindows, RingRunsNoKernelForMaskedOutBlocks) {
  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const int P = world_size();
  const LocalProblem p{1, 12, 2, 2, 16};
  for (ExecutorKind kind : {ExecutorKind::RingVanilla, ExecutorKind::RingBalanced}) {
    auto tasks = [&](const Window& w) {
      ExecutorOptions o;
      o.window = w;
      ExecutorChoice c;
      c.kind  = kind;
      auto ex = make_attention<T>(comm, Exec(), p, c, o);
      Tensor4<T, Mem> q("q", p.batch, p.local_seq, p.heads, p.head_dim), out("o", p.batch, p.local_seq, p.heads, p.head_dim);
      RowStats<T, Mem> lse("lse", p.batch, p.heads, p.local_seq);
      ex->forward(q, q, q, out, lse);
      long n = ex->last_pass().tasks;
      MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      return n;
    };
    const long dense = tasks(Window{}), windowed = tasks(Window{5, 0});
    // Within the window: the own block and the one before it, on each rank.
    if (P >= 3) {
      EXPECT_LT(windowed, dense) << to_string(kind) << " P=" << P;
    }
    EXPECT_GE(windowed, 2L * P - 1) << to_string(kind) << " P=" << P;
  }
}

// A negative window side and malformed document offsets are refused when the
// executor is built, on every rank.
TEST(ExecutorWindows, BadMasksAreRefused) {
  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  const LocalProblem p{1, 12, 4, 2, 16};
  const std::int64_t N = 12 * world_size();
  ExecutorChoice c;
  c.kind = ExecutorKind::RingZigzag;
  auto refused = [&](const ExecutorOptions& o, const char* what) {
    try {
      make_attention<T>(comm, Exec(), p, c, o);
      ADD_FAILURE() << what << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  ExecutorOptions o;
  o.window = Window{-1, 0};
  refused(o, "window");
  for (const std::vector<std::int64_t>& d : {std::vector<std::int64_t>{1, N}, {0, 5, 3, N}, {0, N + 1}, {0}}) {
    ExecutorOptions od;
    od.documents = d;
    refused(od, "documents");
  }
  ExecutorOptions full;  // a short last offset is a padded tail, exact only when causal
  full.causal    = false;
  full.documents = {0, N - 1};
  refused(full, "documents");
}

}  // namespace
}  // namespace DistAttn::Test
