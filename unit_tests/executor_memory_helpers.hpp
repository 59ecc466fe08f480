// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the executor memory tests share: one rank's tensors of a pass (labelled
// outside the library's prefix, so the allocation counter's labelled counts are
// the executors' own) and a bitwise comparison of two runs' outputs.

#include "mpi_test_helpers.hpp"
#include "test_helpers.hpp"

#include <DistAttn/executor/memory_plan.hpp>
#include <DistAttn/impl/allocation_counter.hpp>
#include <DistAttn/exec/impl/executor_inputs.hpp>
#include <DistAttn/testing/random_fill.hpp>

#include <string>

namespace DistAttn::Test {

using T       = double;
using Acc     = accum_t<T>;
using Comm    = Communicator<MpiSpace, Exec>;
using Entry   = Impl::EntryAgreement<MpiSpace, Exec>;
/// The content fingerprints of saved inputs: Ulysses' q, k, v, Attention2D's
/// k, v, the hybrid's q, k, v, o, lse (Saved::buffer_bytes(n) for n inputs).
using Saved   = Impl::SavedInputs<Exec>;
using Counter = Impl::AllocationCounter;

/// One rank's inputs and outputs of a pass, labelled outside the library's prefix.
struct Tensors {
  Tensor4<T, Mem> q, k, v, o, dout, dq, dk, dv;
  RowStats<Acc, Mem> lse;
  Tensors(int B, int c, int H, int Hkv, int D, std::uint64_t seed = shared_seed())
      : q("q", B, c, H, D), k("k", B, c, Hkv, D), v("v", B, c, Hkv, D), o("o", B, c, H, D), dout("do", B, c, H, D),
        dq("dq", B, c, H, D), dk("dk", B, c, Hkv, D), dv("dv", B, c, Hkv, D), lse("lse", B, H, c) {
    seed += std::uint64_t(world_rank()) * 17;
    Testing::fill_random_device(Exec(), q, seed);
    Testing::fill_random_device(Exec(), k, seed + 1);
    Testing::fill_random_device(Exec(), v, seed + 2);
    Testing::fill_random_device(Exec(), dout, seed + 3);
    Exec().fence();
  }
  template <class E>
  void forward(E& ex) { ex.forward(q, k, v, o, lse); }
  template <class E>
  void backward(E& ex) { ex.backward(q, k, v, o, dout, lse, dq, dk, dv); }
};

/// Every output of `a` and `b` equal bit for bit.
inline void expect_same_outputs(const Tensors& a, const Tensors& b, const std::string& what) {
  auto same = [&](const auto& xd, const auto& yd, const char* name) {
    auto x = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), xd);
    auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), yd);
    for (std::size_t i = 0; i < x.span(); ++i)
      if (x.data()[i] != y.data()[i]) {
        ADD_FAILURE() << what << ": " << name << " differs at element " << i << " on rank " << world_rank();
        return;
      }
  };
  same(a.o, b.o, "o");
  same(a.lse, b.lse, "lse");
  same(a.dq, b.dq, "dq");
  same(a.dk, b.dk, "dk");
  same(a.dv, b.dv, "dv");
}

/// A fixture (plain or parameterised) with the allocation counter installed
/// around every test. Only the executor's memory space is counted as the
/// library's own: on GPU builds the MPI transport stages device buffers (the
/// entry agreement's included) through pooled host memory.
template <class Base = ::testing::Test>
class Counting : public Base {
 protected:
  void SetUp() override { Counter::install("DistAttn::", Mem::name()); }
  void TearDown() override { Counter::uninstall(); }
};

/// The bytes of the named buffer in a layout (0 when it is not there).
inline std::size_t buffer_bytes(const MemoryLayout& l, const std::string& name) {
  for (const auto& b : l.buffers)
    if (b.name == name) return b.bytes;
  return 0;
}

}  // namespace DistAttn::Test
