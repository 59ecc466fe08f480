# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Spack recipe for DistAttn (docs/cluster.md, "Spack"). Use it from a Spack
# repository that holds this directory:
#   spack repo add <distattn>/cmake/spack
#   spack develop --path <distattn> distattn@main
#   spack install distattn@main +cuda cuda_arch=90 +nccl
from spack.package import *


class Distattn(CMakePackage, CudaPackage):
    """Exact causal attention over sequences too long for one GPU: the DistFlashAttn
    ring and the Attention2D grid executors on Kokkos, with MPI and NCCL transports."""

    license("Apache-2.0 WITH LLVM-exception")

    # No public address yet: build from a checkout with `spack develop`.
    version("main")

    variant("mpi", default=True, description="MPI communication backend (the executors need it)")
    variant("nccl", default=False, description="NCCL communication backend (needs +cuda)")
    variant("gpu_aware_mpi", default=False, description="Hand device pointers to MPI instead of staging")
    variant("cuda_kernels", default=False, description="Hopper (sm_90a) tile kernels (needs +cuda)")
    variant("driver", default=True, description="distattn-run and the perf tests")

    depends_on("cmake@3.23:", type="build")
    depends_on("kokkos@3.4:")
    depends_on("kokkos-kernels")
    depends_on("mpi", when="+mpi")
    depends_on("cli11@2.1:", type="build", when="+driver")
    depends_on("nlohmann-json@3.2:", type="build", when="+driver")
    depends_on("googletest", type="test")

    # Kokkos with CUDA: DistAttn compiles with the nvcc_wrapper of that Kokkos.
    depends_on("kokkos+cuda+wrapper+cuda_lambda", when="+cuda")
    depends_on("kokkos-kernels+cublas", when="+cuda")
    for arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos cuda_arch={arch}", when=f"+cuda cuda_arch={arch}")
    depends_on("nccl", when="+nccl")

    conflicts("+nccl", when="~cuda", msg="NCCL needs a Kokkos with CUDA")
    conflicts("+nccl", when="~mpi", msg="the NCCL unique id is broadcast over MPI")
    conflicts("+cuda_kernels", when="~cuda")
    conflicts("+cuda_kernels", when="cuda_arch=none", msg="the tile kernels are sm_90a only")
    conflicts("+driver", when="~mpi", msg="distattn-run runs on MPI ranks")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("DistAttn_ENABLE_MPI", "mpi"),
            self.define_from_variant("DistAttn_ENABLE_NCCL", "nccl"),
            self.define_from_variant("DistAttn_ENABLE_GPU_AWARE_MPI", "gpu_aware_mpi"),
            self.define_from_variant("DistAttn_ENABLE_CUDA_KERNELS", "cuda_kernels"),
            self.define_from_variant("DistAttn_ENABLE_DRIVER", "driver"),
            self.define_from_variant("DistAttn_ENABLE_PERFTESTS", "driver"),
            self.define("DistAttn_ENABLE_TESTS", self.run_tests),
            self.define("DistAttn_ENABLE_INSTALL_TEST", False),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CXX_COMPILER", spec["kokkos"].kokkos_cxx))
        if spec.satisfies("+nccl"):
            args.append(self.define("NCCL_ROOT", spec["nccl"].prefix))
        if spec.satisfies("+mpi"):
            # ctest starts its MPI tests with the MPI this package was built with.
            args.append(self.define("MPIEXEC_EXECUTABLE", spec["mpi"].prefix.bin.mpiexec))
        return args
