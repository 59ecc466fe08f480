#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Configures and builds DistAttn against a CUDA Kokkos install on a GPU machine.
#   gpu_build.sh KOKKOS_ROOT BUILD_DIR [extra cmake args...]
# The C++ compiler is the install's nvcc_wrapper; Hopper (sm_90) is the target.
set -euo pipefail
KROOT=$(cd "$1" && pwd); BUILD=$2; shift 2
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export NVCC_WRAPPER_DEFAULT_ARCH=${NVCC_WRAPPER_DEFAULT_ARCH:-sm_90}
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$KROOT" -DKokkosKernels_ROOT="$KROOT" -DCMAKE_PREFIX_PATH="$KROOT" \
  -DCMAKE_CXX_COMPILER="$KROOT/bin/nvcc_wrapper" -DMPIEXEC_PREFLAGS=--oversubscribe "$@" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" 2>&1 | grep -vE "^\[ *[0-9]+%\]" || true
test -x "$BUILD/unit_tests/distattn_test_attention_fwd"
