#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# NCCL checks of the communication layer on a machine with >= 2 GPUs:
#   1. the comm unit tests on 2 ranks (NCCL, MPI with device staging, MPI host);
#   2. sendrecv_perf through the NCCL Communicator next to raw ncclSend/ncclRecv,
#      1 KiB .. 256 MiB (table on stdout, JSON next to it).
#
# Usage: perf_tests/scripts/run_nccl_checks.sh BUILD_DIR [OUT_DIR]
#   BUILD_DIR  a build configured with -DDistAttn_ENABLE_NCCL=ON (CUDA Kokkos)
#   OUT_DIR    where logs and sendrecv_nccl.json go (default: BUILD_DIR/nccl_checks)
# The MPI launcher is the one CMake found (MPIEXEC_EXECUTABLE and friends in the
# cache), never a hard-coded mpirun.
set -euo pipefail

BUILD_DIR=$(cd "${1:?usage: $0 BUILD_DIR [OUT_DIR]}" && pwd)
OUT_DIR=${2:-$BUILD_DIR/nccl_checks}
mkdir -p "$OUT_DIR"
CACHE="$BUILD_DIR/CMakeCache.txt"
[ -f "$CACHE" ] || { echo "error: $CACHE not found: not a CMake build directory" >&2; exit 2; }

# NVLink multicast (NVLS) must stay off: on a shared host it can put the GPUs out
# of service. The library leaves the environment to its caller, so the script sets it.
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

cache_get() { sed -n "s/^$1:[A-Z]*=//p" "$CACHE" | head -n 1; }
if [ "$(cache_get DistAttn_ENABLE_NCCL)" != "ON" ]; then
  echo "error: $BUILD_DIR was not configured with -DDistAttn_ENABLE_NCCL=ON" >&2
  exit 2
fi
MPIEXEC=$(cache_get MPIEXEC_EXECUTABLE)
NPFLAG=$(cache_get MPIEXEC_NUMPROC_FLAG)
PREFLAGS=$(cache_get MPIEXEC_PREFLAGS)
POSTFLAGS=$(cache_get MPIEXEC_POSTFLAGS)
[ -x "$MPIEXEC" ] || { echo "error: MPIEXEC_EXECUTABLE '$MPIEXEC' from the cache is not executable" >&2; exit 2; }
# Open MPI forwards only variables named with -x to ranks it starts elsewhere.
if "$MPIEXEC" --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
  PREFLAGS="$PREFLAGS -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
fi

TEST_EXE="$BUILD_DIR/unit_tests/distattn_test_comm"
PERF_EXE="$BUILD_DIR/perf_tests/distattn_sendrecv_perf"
for exe in "$TEST_EXE" "$PERF_EXE"; do
  [ -x "$exe" ] || { echo "error: $exe not built (cmake --build $BUILD_DIR --target $(basename "$exe"))" >&2; exit 2; }
done

command -v nvidia-smi >/dev/null && nvidia-smi -L
echo "== NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE  launcher: $MPIEXEC $NPFLAG 2 $PREFLAGS"

status=0
echo "== 1/2 comm unit tests on 2 ranks (one GPU per rank: --kokkos-map-device-id-by=mpi_rank)"
# shellcheck disable=SC2086  # flag lists are meant to split
if ! "$MPIEXEC" $NPFLAG 2 $PREFLAGS "$TEST_EXE" $POSTFLAGS --kokkos-map-device-id-by=mpi_rank \
      --gtest_output="xml:$OUT_DIR/comm_tests.xml" 2>&1 | tee "$OUT_DIR/comm_tests.log"; then
  status=1
fi
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$OUT_DIR/comm_tests.log" || true

echo "== 2/2 sendrecv_perf, NCCL vs raw NCCL, 1 KiB .. 256 MiB"
# shellcheck disable=SC2086
if ! "$MPIEXEC" $NPFLAG 2 $PREFLAGS "$PERF_EXE" $POSTFLAGS --kokkos-map-device-id-by=mpi_rank \
      --backend nccl -b 1K -e 256M -f 2 -w 5 -n 20 -J "$OUT_DIR/sendrecv_nccl.json" 2>&1 \
      | tee "$OUT_DIR/sendrecv_nccl.log"; then
  status=1
fi

echo "== results in $OUT_DIR (status $status)"
exit $status
