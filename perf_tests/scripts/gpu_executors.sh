#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Every executor on one host with >= 2 GPUs, in one call:
#   gpu_executors.sh KOKKOS_ROOT BUILD_DIR OUT_DIR [SEQS...]
# 1. builds DistAttn (CUDA Kokkos at KOKKOS_ROOT, NCCL, tuned kernels) unless
#    BUILD_DIR already holds it (SKIP_BUILD=1), and runs the whole ctest suite;
# 2. correctness of every schedule on 2 GPUs over NCCL (bf16, --check vs fp64);
# 3. timings for each S: 1 GPU (local), zigzag, ulysses, grid2d-o on 2 GPUs with
#    the compute-only decomposition ($SCHEDULES), H=32 d=128 bf16 causal fwd+bwd;
# 4. PyTorch context parallel (cuDNN and flash backends) in the same call.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -u
KROOT=$1; B=$2; OUT=$3; shift 3
SEQS=${*:-131072}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export KOKKOS_MAP_DEVICE_ID_BY=mpi_rank
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
S0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - S0 ))s] $*"; }

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  stamp "build"
  bash "$SRC/perf_tests/scripts/gpu_build.sh" "$KROOT" "$B" -DDistAttn_ENABLE_NCCL=ON \
    -DDistAttn_ENABLE_CUDA_KERNELS=ON -DDistAttn_ENABLE_PERFTESTS=ON > "$OUT/build.log" 2>&1 \
    || { stamp "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
fi
B=$(cd "$B" && pwd)

stamp "ctest"
(cd "$B" && ctest --timeout 300 -j 4 > "$OUT/ctest.log" 2>&1)
grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" "$OUT/ctest.log"

MPI2="mpiexec -n 2 --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x KOKKOS_MAP_DEVICE_ID_BY"
MPI1="mpiexec -n 1 --oversubscribe --bind-to none -x KOKKOS_MAP_DEVICE_ID_BY"
RUN=$B/perf_tests/distattn-run
stamp "correctness on 2 GPUs (bf16, NCCL)"
for s in ring balanced zigzag ulysses grid2d-no grid2d-o hybrid; do
  $MPI2 $RUN --schedule $s --comm nccl --dtype bf16 --seq 1024 --heads 4 --kv-heads 2 --dim 128 --check -n 1 -w 0 \
    2>&1 | grep -E "^# (check|schedule)|FAILED|rror" | tee -a "$OUT/check.log"
done
grep -c OK "$OUT/check.log" | sed 's/^/checks OK: /'

SHAPE="--dtype bf16 --heads 32 --kv-heads 32 --dim 128"
for S in $SEQS; do
  stamp "S=$S local (1 GPU)"
  $MPI1 $RUN --schedule local $SHAPE --seq $S -w 1 -n 3 2>&1 | tail -1 | tee -a "$OUT/time.log"
  for s in ${SCHEDULES:-zigzag ulysses grid2d-o}; do
    stamp "S=$S $s (2 GPUs)"
    $MPI2 $RUN --schedule $s --comm nccl $SHAPE --seq $S -w 1 -n 3 --decompose 2>&1 \
      | grep -E "median|forward|backward" | tee -a "$OUT/time.log"
  done
done

stamp "PyTorch context parallel (2 GPUs)"
torchrun --nproc_per_node 2 "$SRC/perf_tests/scripts/torch_cp_baseline.py" --seqs $SEQS --heads 32 --dim 128 \
  2>&1 | grep -vE "^W[0-9]|warn" | tee "$OUT/torch_cp.log" | tail -6
stamp "done"
