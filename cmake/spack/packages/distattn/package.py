# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Spack recipe for DistAttn (docs/cluster.md, "Spack", has the `spack develop`
# steps: the project has no public address yet, so Spack builds it from a checkout
# inside an environment).
from spack.package import *


class Distattn(CMakePackage, CudaPackage):
    """Exact causal attention over sequences too long for one GPU: the DistFlashAttn
    ring, Attention2D, Ulysses and hybrid executors on Kokkos, with MPI and NCCL transports."""

    license("Apache-2.0 WITH LLVM-exception")

    # No public address yet: `spack develop` supplies the source.
    version("main")

    # The variants are the README's CMake options.
    variant("mpi", default=True, description="MPI communication backend (the executors need it)")
    variant("nccl", default=False, description="NCCL communication backend (needs +cuda)")
    variant("gpu_aware_mpi", default=False, description="Hand device pointers to MPI instead of staging")
    variant(
        "cuda_kernels",
        default=False,
        description="CUDA-tuned tile kernels: sm90 (Hopper, wgmma/TMA) and sm80 (Ampere/Ada, mma.sync), chosen "
        "by the device at run time (needs +cuda)",
    )
    variant("driver", default=True, description="distattn-run and distattn-train, installed into bin/")
    variant("perftests", default=True, description="The perf tools (attn_perf, cost_calibrate, ...) in bin/")
    variant("shared", default=False, description="Shared libdistattn (the ctypes PyTorch binding needs it)")

    depends_on("cmake@3.23:", type="build")
    # Host builds: the Kokkos versions include/DistAttn/core/kokkos_compat.hpp knows
    # (Debian's 3.4.01 to 4.6.x); CUDA builds: 4.6 only (README, "Building for NVIDIA GPUs").
    depends_on("kokkos@3.4:4.6")
    depends_on("kokkos-kernels@3.4:4.6")
    depends_on("kokkos@4.6", when="+cuda")
    depends_on("kokkos-kernels@4.6", when="+cuda")
    depends_on("mpi", when="+mpi")
    depends_on("cli11@2.1:", type="build", when="+driver")
    depends_on("cli11@2.1:", type="build", when="+perftests")
    depends_on("nlohmann-json@3.2:", type="build", when="+driver")
    depends_on("nlohmann-json@3.2:", type="build", when="+perftests")
    depends_on("googletest", type="test")

    # Kokkos with CUDA: DistAttn compiles with the nvcc_wrapper of that Kokkos.
    depends_on("kokkos+cuda+wrapper+cuda_lambda", when="+cuda")
    depends_on("kokkos-kernels+cublas", when="+cuda")
    for arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos cuda_arch={arch}", when=f"+cuda cuda_arch={arch}")
    depends_on("nccl", when="+nccl")

    conflicts("+nccl", when="~cuda", msg="NCCL needs a Kokkos with CUDA")
    conflicts("+nccl", when="~mpi", msg="the NCCL unique id is broadcast over MPI")
    conflicts("+cuda_kernels", when="~cuda", msg="the tuned tile kernels are CUDA code")
    conflicts("+driver", when="~mpi", msg="distattn-run runs on MPI ranks")
    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("DistAttn_ENABLE_MPI", "mpi"),
            self.define_from_variant("DistAttn_ENABLE_NCCL", "nccl"),
            self.define_from_variant("DistAttn_ENABLE_GPU_AWARE_MPI", "gpu_aware_mpi"),
            self.define_from_variant("DistAttn_ENABLE_CUDA_KERNELS", "cuda_kernels"),
            self.define_from_variant("DistAttn_ENABLE_DRIVER", "driver"),
            self.define_from_variant("DistAttn_ENABLE_PERFTESTS", "perftests"),
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            self.define("DistAttn_ENABLE_TESTS", self.run_tests),
            # The install and example tests install into the build tree; Spack's own
            # smoke test below checks the real install.
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

    def check(self):
        """`spack install --test=root`: the unit tests of one process (label unit),
        minutes, not the whole suite (README: `.ci/test.sh`)."""
        with working_dir(self.build_directory):
            ctest("--output-on-failure", "-L", "unit")

    def _smoke(self):
        """The installed driver: its help, and on a host build (or where a GPU is
        visible) one small job on one rank that passes its fp64 check."""
        if not self.spec.satisfies("+driver"):
            return
        run = Executable(join_path(self.prefix.bin, "distattn-run"))
        first = run("--help", output=str, error=str).splitlines()[0]
        if not first.startswith("Exact causal attention"):
            raise InstallError(f"distattn-run --help starts with '{first}'")
        if self.spec.satisfies("+cuda") and which("nvidia-smi") is None:
            return  # no GPU on this node: Kokkos with CUDA cannot start
        mpiexec = Executable(self.spec["mpi"].prefix.bin.mpiexec)
        out = mpiexec("-n", "1", run.path, "--schedule", "ring", "--seq", "64", "--heads", "2", "--kv-heads", "1",
                      "--dim", "16", "-w", "0", "-n", "1", "--check", "--comm", "mpi", output=str, error=str)
        if "# verdict: PASS (checked against fp64)" not in out:
            raise InstallError(f"distattn-run did not pass its fp64 check:\n{out}")

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_install(self):
        self._smoke()

    def test_driver(self):
        """`spack test run distattn`: the installed driver's help and a one-rank job."""
        self._smoke()
