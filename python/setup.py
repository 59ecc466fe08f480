# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Builds libdistattn.so (the C ABI, include/DistAttn/c/distattn.h) with the repository's
CMake and puts it into the package as distattn/lib/libdistattn.so.

Environment:
  DISTATTN_CMAKE_ARGS   extra CMake arguments, e.g. "-DKokkos_ROOT=$KOKKOS -DDistAttn_ENABLE_NCCL=ON
                        -DCMAKE_CXX_COMPILER=$KOKKOS/bin/nvcc_wrapper" for the CUDA build
  DISTATTN_BUILD_DIR    CMake build folder (default: python/build/cmake; kept, so a reinstall is incremental)
  DISTATTN_BUILD_JOBS   parallel compile jobs (default: 2)
"""
import glob
import os
import shlex
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


class CMakeBuildPy(build_py):
    """build_py that also configures and builds the `distattn` target as a shared library."""

    def run(self):
        super().run()
        build_dir = os.environ.get("DISTATTN_BUILD_DIR") or os.path.join(HERE, "build", "cmake")
        jobs = os.environ.get("DISTATTN_BUILD_JOBS", "2")
        args = ["-DBUILD_SHARED_LIBS=ON", "-DCMAKE_BUILD_TYPE=Release", "-DDistAttn_ENABLE_TESTS=OFF",
                "-DDistAttn_ENABLE_PERFTESTS=OFF", "-DDistAttn_ENABLE_DRIVER=OFF"]
        args += shlex.split(os.environ.get("DISTATTN_CMAKE_ARGS", ""))
        subprocess.check_call(["cmake", "-S", REPO, "-B", build_dir] + args)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "distattn", "-j", jobs])
        libs = [p for p in glob.glob(os.path.join(build_dir, "src", "libdistattn.so*")) if not os.path.islink(p)]
        if len(libs) != 1:
            raise RuntimeError(f"expected one libdistattn.so in {build_dir}/src, found {libs}")
        dest = os.path.join(self.build_lib, "distattn", "lib")
        os.makedirs(dest, exist_ok=True)
        shutil.copyfile(libs[0], os.path.join(dest, "libdistattn.so"))


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": CMakeBuildPy}, distclass=BinaryDistribution)
