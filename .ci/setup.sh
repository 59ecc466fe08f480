#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs what a fresh Debian 12 machine lacks to build DistAttn on the CPU
# (Kokkos 3.4.01 + Kokkos Kernels from Debian, OpenBLAS, Open MPI, GoogleTest,
# CLI11, nlohmann-json, CMake; matplotlib for the plot test; torch, mpi4py and pip for the
# Python package's tests, python/), then configures and
# builds into ${BUILD_DIR:-build}: every target, or only DISTATTN_BUILD_TARGETS (a space-separated list; main.sh
# builds the driver alone). Sourced by main.sh/test.sh. OpenBLAS replaces
# Debian's reference BLAS (through the libblas.so.3 alternative) under Kokkos
# Kernels, which the CPU tiles call for their products: 7-45x faster than the
# reference BLAS at tile sizes.
set -euo pipefail

need=()
for pkg in cmake g++ make libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev libopenblas-dev libopenmpi-dev openmpi-bin libgtest-dev libcli11-dev nlohmann-json3-dev python3-matplotlib python3-torch python3-mpi4py python3-pip; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Open MPI refuses to start as root unless told; ranks may outnumber cores.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
MPIEXEC_PREFLAGS=${MPIEXEC_PREFLAGS:---oversubscribe}
# The ranks use the cores; OpenBLAS threads inside each rank's tile products
# would only compete with them.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# Tests on more ranks than MPIEXEC_MAX_NUMPROCS (FindMPI: the cores) are not
# registered; with oversubscription the suite's largest count (9) can start.
max_np_arg=()
if [[ -n "${MPIEXEC_MAX_NUMPROCS:-}" ]]; then
  max_np_arg=("-DMPIEXEC_MAX_NUMPROCS=$MPIEXEC_MAX_NUMPROCS")
elif [[ "$MPIEXEC_PREFLAGS" == *--oversubscribe* ]]; then
  max_np_arg=("-DMPIEXEC_MAX_NUMPROCS=9")
fi

SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$SRC_DIR/build}
JOBS=${JOBS:-$(nproc)}
echo "== configuring in $BUILD_DIR"
cmake -S "$SRC_DIR" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
  "-DMPIEXEC_PREFLAGS=$MPIEXEC_PREFLAGS" "${max_np_arg[@]}" ${CMAKE_EXTRA_ARGS:-} >/dev/null
target_args=()
for t in ${DISTATTN_BUILD_TARGETS:-}; do target_args+=(--target "$t"); done
echo "== building ${DISTATTN_BUILD_TARGETS:-everything} with $JOBS jobs"
cmake --build "$BUILD_DIR" -j "$JOBS" "${target_args[@]}"
