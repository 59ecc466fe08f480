// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file exec/impl/kernel_documents.hpp
/// ExecutorOptions::documents where the kernels read them. The options keep the
/// host offsets (schedules and block relations read those on the host); the masks
/// an executor hands its kernels must point at a copy in the executor's memory
/// space, and this is that copy. Nothing is allocated without documents, so the
/// executors' memory plans hold as they were.

#include <DistAttn/core/kokkos_compat.hpp>
#include <DistAttn/core/mask.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace DistAttn::Impl {

template <class Mem>
class KernelDocuments {
 public:
  KernelDocuments() = default;
  explicit KernelDocuments(const std::vector<std::int64_t>& host) {
    if (host.empty()) return;
    dev_   = Kokkos::View<std::int64_t*, Mem>("DistAttn::documents", host.size());
    auto h = Kokkos::create_mirror_view(dev_);
    for (std::size_t i = 0; i < host.size(); ++i) h(i) = host[i];
    Kokkos::deep_copy(dev_, h);
  }
  /// Replaces the options' host offsets `host` by `offsets` and this copy with them:
  /// the two always hold the same documents (an executor's set_documents).
  void replace(std::vector<std::int64_t>& host, std::vector<std::int64_t> offsets) {
    host  = std::move(offsets);
    *this = KernelDocuments(host);
  }
  /// The documents, read from this copy (none without documents).
  Documents documents() const { return Documents{dev_.data(), dev_.extent(0) > 0 ? int(dev_.extent(0)) - 1 : 0}; }
  /// `rule` (a mask on host offsets) reading its documents from this copy instead.
  Mask for_kernels(Mask rule) const {
    if (rule.docs.any()) rule.docs.offsets = dev_.data();
    return rule;
  }

 private:
  Kokkos::View<std::int64_t*, Mem> dev_;
};

}  // namespace DistAttn::Impl
