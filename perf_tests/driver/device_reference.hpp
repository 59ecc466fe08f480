// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// --check's fp64 reference computed where the library runs: the library's
// portable kernels in double precision on the default execution space (the GPU
// on CUDA builds), which the unit tests hold to the host reference
// (testing/reference.hpp). On a GPU a 16K check then takes seconds instead of the
// hours one host core needs. CPU builds keep the host reference by default: there
// the executors run the same portable kernels, so a fault in them would hide.

#include "driver_common.hpp"

#include <DistAttn/attention.hpp>
#include <DistAttn/exec/impl/kernel_documents.hpp>
#include <DistAttn/testing/reference.hpp>

#include <Kokkos_Core.hpp>

#include <string>
#include <vector>

namespace DistAttn::Driver {

/// o, lse (and with dout: dq, dk, dv) of q, k, v under `mask` (host documents
/// `documents`), computed by the portable kernels in fp64 on Exec.
inline void device_reference(const Testing::HostTensor& q, const Testing::HostTensor& k,
                             const Testing::HostTensor& v, const Testing::HostTensor* dout, const Mask& mask,
                             const std::vector<std::int64_t>& documents, double scale, Testing::HostTensor& o,
                             Testing::HostStats& lse, Testing::HostTensor* dq, Testing::HostTensor* dk,
                             Testing::HostTensor* dv) {
  using D4 = Kokkos::View<double****, Kokkos::LayoutRight, Mem>;
  const Exec exec;
  auto up = [](const Testing::HostTensor& h, const char* label) {
    D4 d(std::string(label), h.extent(0), h.extent(1), h.extent(2), h.extent(3));
    Kokkos::deep_copy(d, h);
    return d;
  };
  const D4 qd = up(q, "DistAttn::check.q"), kd = up(k, "DistAttn::check.k"), vd = up(v, "DistAttn::check.v");
  D4 od("DistAttn::check.o", q.extent(0), q.extent(1), q.extent(2), q.extent(3));
  RowStats<double, Mem> ld("DistAttn::check.lse", q.extent(0), q.extent(2), q.extent(1));
  const Impl::KernelDocuments<Mem> docs(documents);
  AttnOptions opts;
  opts.mask  = docs.for_kernels(mask);
  opts.scale = scale;
  opts.path  = KernelPath::Portable;
  attention_fwd(exec, qd, kd, vd, od, ld, opts);
  Kokkos::deep_copy(o, od);
  Kokkos::deep_copy(lse, ld);
  if (!dout) return;
  const D4 dod = up(*dout, "DistAttn::check.dout");
  D4 dqd("DistAttn::check.dq", q.extent(0), q.extent(1), q.extent(2), q.extent(3));
  D4 dkd("DistAttn::check.dk", k.extent(0), k.extent(1), k.extent(2), k.extent(3));
  D4 dvd("DistAttn::check.dv", v.extent(0), v.extent(1), v.extent(2), v.extent(3));
  attention_bwd(exec, qd, kd, vd, od, dod, ld, dqd, dkd, dvd, opts);
  Kokkos::deep_copy(*dq, dqd);
  Kokkos::deep_copy(*dk, dkd);
  Kokkos::deep_copy(*dv, dvd);
}

}  // namespace DistAttn::Driver
