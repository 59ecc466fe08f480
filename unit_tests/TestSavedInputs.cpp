// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What a forward keeps for its backward never turns into a wrong gradient
// (issue #35, item 1). Ulysses, the hybrid and Attention2D keep tensors derived
// from q, k, v; a caller that recomputes new data into the same buffers (C and
// Fortran codes, selective recomputation, a caching allocator handing an address
// back) must get the gradients of the new data. Each case runs the backward of an
// executor whose last forward saw other data in the same buffers ("stale"), and
// compares it bit for bit with an executor whose forward saw the new data
// ("fresh"). With reuse keyed on data pointers alone, as before the fix, the
// stale executor's dq, dk, dv differed from the fresh one's at element 0.

#include "executor_memory_helpers.hpp"

#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/hybrid/hybrid_attention.hpp>
#include <DistAttn/ulysses/ulysses_attention.hpp>

#include <functional>
#include <memory>
#include <string>

namespace DistAttn::Test {
namespace {

using Uly    = UlyssesAttention<T, MpiSpace, Exec>;
using Hybrid = HybridAttention<T, MpiSpace, Exec>;
using A2D    = Grid2DAttention<T, MpiSpace, Exec>;

/// Which ranks write new data into their forward's buffers before the backward.
enum class Change { None, AllRanks, LastRank, OneElement };

const char* name(Change c) {
  switch (c) {
    case Change::None: return "no change";
    case Change::AllRanks: return "new data on every rank";
    case Change::LastRank: return "new data on the last rank only";
    case Change::OneElement: return "one element of k changed on rank 0";
  }
  return "?";
}

void copy_inputs(const Tensors& from, Tensors& to) {
  Kokkos::deep_copy(to.q, from.q);
  Kokkos::deep_copy(to.k, from.k);
  Kokkos::deep_copy(to.v, from.v);
  Kokkos::deep_copy(to.dout, from.dout);
}

/// Runs the case; returns the bytes the stale executor's backward received in the
/// phase that rebuilds the saved state (`rebuilt`), so callers can check that an
/// unchanged input is still reused, or -1 where `moves` says that phase moves no
/// bytes to this rank either way.
template <class E, class Phase>
std::int64_t run_case(const std::function<std::unique_ptr<E>()>& make, int B, int c, int H, int Hkv, int D,
                      Change change, Phase rebuilt, const std::function<bool(E&)>& moves = [](E&) { return true; }) {
  const int P = world_size(), rank = world_rank();
  Tensors x(B, c, H, Hkv, D), y(B, c, H, Hkv, D, shared_seed());
  auto stale = make();
  auto fresh = make();
  x.forward(*stale);  // saves what it derives from x's first data

  const std::uint64_t seed = shared_seed() + 1000 + std::uint64_t(rank);
  const bool new_data      = change == Change::AllRanks || (change == Change::LastRank && rank == P - 1);
  if (new_data) {
    Testing::fill_random_device(Exec(), x.q, seed);
    Testing::fill_random_device(Exec(), x.k, seed + 1);
    Testing::fill_random_device(Exec(), x.v, seed + 2);
  }
  if (change == Change::OneElement && rank == 0) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x.k);
    h(0, c - 1, Hkv - 1, D - 1) += 0.5;
    Kokkos::deep_copy(x.k, h);
  }
  Exec().fence();
  copy_inputs(x, y);
  y.forward(*fresh);
  Kokkos::deep_copy(x.o, y.o);
  Kokkos::deep_copy(x.lse, y.lse);
  y.backward(*fresh);
  x.backward(*stale);
  expect_same_outputs(x, y, name(change));
  return moves(*stale) ? std::int64_t(stale->stats().received(rebuilt)) : -1;
}

class SavedInputsTest : public ::testing::TestWithParam<Change> {
 protected:
  void SetUp() override {
    comm_ = std::make_unique<Comm>(Comm::from_raw(MPI_COMM_WORLD, Exec()));
    // A rank left waiting by a disagreement fails the test instead of hanging it.
    comm_->set_timeout(20.0);
    comm_->set_timeout_policy(TimeoutPolicy::Throw);
  }
  std::unique_ptr<Comm> comm_;
};

/// Reuse must survive where it is right: the unchanged case receives nothing in
/// the rebuilding phase; every other case must rebuild on every rank.
void expect_reuse(Change change, std::int64_t rebuilt_bytes, int P) {
  if (P == 1 || rebuilt_bytes < 0) return;  // nothing moves either way
  if (change == Change::None)
    EXPECT_EQ(rebuilt_bytes, 0) << "unchanged inputs were not reused";
  else
    EXPECT_GT(rebuilt_bytes, 0) << "changed inputs were reused (" << name(change) << ")";
}

TEST_P(SavedInputsTest, Ulysses) {
  const int P = world_size(), B = 1, c = 6, H = 2 * P, Hkv = P, D = 8;
  std::function<std::unique_ptr<Uly>()> make = [&] { return std::make_unique<Uly>(*comm_, Exec(), B, c, H, Hkv, D); };
  expect_reuse(GetParam(), run_case(make, B, c, H, Hkv, D, GetParam(), UlyssesPhase::QKV), P);
}

TEST_P(SavedInputsTest, Hybrid) {
  const int P = world_size(), B = 1, c = 6, H = 2 * P, Hkv = P, D = 8;
  std::function<std::unique_ptr<Hybrid>()> make = [&] {
    return std::make_unique<Hybrid>(*comm_, Exec(), B, c, H, Hkv, D);
  };
  expect_reuse(GetParam(), run_case(make, B, c, H, Hkv, D, GetParam(), UlyssesPhase::QKV), P);
}

TEST_P(SavedInputsTest, Attention2D) {
  const int P = world_size(), B = 1, c = 6, H = 4, Hkv = 2, D = 8;
  for (Grid2DVariant variant : {Grid2DVariant::NO, Grid2DVariant::O}) {
    SCOPED_TRACE(to_string(variant));
    Grid2DOptions opts;
    opts.variant = variant;
    std::function<std::unique_ptr<A2D>()> make = [&] {
      return std::make_unique<A2D>(*comm_, 0, 0, Exec(), B, std::int64_t(P) * c, H, Hkv, D, opts);
    };
    // The K/V transpose moves data to a rank only if its source is another rank (on R x 1 and 1 x C grids,
    // and on the diagonal of a square one, each rank keeps its shard).
    std::function<bool(A2D&)> moves = [](A2D& a) { return a.grid().transpose_source() != a.grid().world().rank(); };
    expect_reuse(GetParam(), run_case(make, B, c, H, Hkv, D, GetParam(), Grid2DPhase::KvPermute, moves), P);
  }
}

TEST_P(SavedInputsTest, InvalidateDropsTheSavedState) {
  if (GetParam() != Change::None) GTEST_SKIP() << "one run suffices";
  const int P = world_size(), B = 1, c = 6, H = 2 * P, Hkv = P, D = 8;
  Tensors x(B, c, H, Hkv, D);
  Uly uly(*comm_, Exec(), B, c, H, Hkv, D);
  x.forward(uly);
  uly.invalidate_saved_inputs();
  x.backward(uly);
  if (P > 1) { EXPECT_GT(uly.stats().received(UlyssesPhase::QKV), 0u); }
}

INSTANTIATE_TEST_SUITE_P(Changes, SavedInputsTest,
                         ::testing::Values(Change::None, Change::AllRanks, Change::LastRank, Change::OneElement));

}  // namespace
}  // namespace DistAttn::Test
