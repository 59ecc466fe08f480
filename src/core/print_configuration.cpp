// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <DistAttn/core/config.hpp>
#include <DistAttn/core/configuration.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <ostream>

namespace DistAttn {

std::string version() { return DISTATTN_VERSION_STRING; }

void print_configuration(std::ostream& os) {
  os << "# DistAttn " << DISTATTN_VERSION_STRING << " | Kokkos " << KOKKOS_VERSION / 10000 << '.'
     << (KOKKOS_VERSION / 100) % 100 << '.' << KOKKOS_VERSION % 100 << " ["
     << Kokkos::DefaultExecutionSpace::name() << "] | comm:"
     << (DISTATTN_ENABLE_MPI ? " MPI" : "") << (DISTATTN_ENABLE_NCCL ? " NCCL" : "")
     << (DISTATTN_ENABLE_GPU_AWARE_MPI ? " (GPU-aware)" : "")
     << " | cuda_kernels " << (DISTATTN_ENABLE_CUDA_KERNELS ? "on" : "off") << '\n';
}

}  // namespace DistAttn
