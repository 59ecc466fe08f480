#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Distributed GPU measurements on one host with >= 2 GPUs (NCCL), one call:
#   gpu_distributed.sh BUILD_DIR OUT_DIR [SEQS...]
# 1. correctness of every schedule on the GPUs (bf16, small, --check vs fp64);
# 2. 1-GPU time of our kernel (--schedule local) and the ring schedules on 2 GPUs
#    ($SCHEDULES, default "ring balanced zigzag") with the compute-only
#    decomposition, for each S;
# 3. Attention2D ($GRID_SCHEDULES, default both variants) on the $GRIDS grids
#    (default 1x2 2x1) at the two largest S;
# 4. PyTorch context parallel on the same GPUs (anchor, same call).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -u
B=$(cd "$1" && pwd); OUT=$2; shift 2
SEQS=${*:-32768 65536 131072}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export KOKKOS_MAP_DEVICE_ID_BY=mpi_rank
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI2="mpiexec -n 2 --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x KOKKOS_MAP_DEVICE_ID_BY"
MPI1="mpiexec -n 1 --oversubscribe --bind-to none -x KOKKOS_MAP_DEVICE_ID_BY"
RUN=$B/perf_tests/distattn-run
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SHAPE="--dtype bf16 --heads 32 --kv-heads 32 --dim 128"

echo "== correctness on 2 GPUs (bf16, NCCL)" | tee "$OUT/check.log"
for s in ring balanced zigzag grid2d-no grid2d-o; do
  $MPI2 $RUN --schedule $s --dtype bf16 --seq 1024 --heads 4 --kv-heads 2 --dim 128 --check -n 1 -w 0 2>&1 \
    | grep -E "^# (comm|check|schedule)|FAILED|rror" | tee -a "$OUT/check.log"
done

for S in $SEQS; do
  echo "== S=$S local (1 GPU)" | tee -a "$OUT/ring.log"
  $MPI1 $RUN --schedule local $SHAPE --seq $S -w 1 -n 3 2>&1 | tail -2 | tee -a "$OUT/ring.log"
  for s in ${SCHEDULES:-ring balanced zigzag}; do
    echo "== S=$S $s (2 GPUs)" | tee -a "$OUT/ring.log"
    $MPI2 $RUN --schedule $s $SHAPE --seq $S -w 1 -n 3 --decompose 2>&1 | tail -9 | tee -a "$OUT/ring.log"
  done
done

for S in $(echo $SEQS | tr ' ' '\n' | tail -2); do
  for s in ${GRID_SCHEDULES:-grid2d-no grid2d-o}; do
    for g in ${GRIDS:-1x2 2x1}; do
      echo "== S=$S $s grid $g (2 GPUs)" | tee -a "$OUT/grid2d.log"
      $MPI2 $RUN --schedule $s --grid $g $SHAPE --seq $S -w 1 -n 3 2>&1 | tail -4 | tee -a "$OUT/grid2d.log"
    done
  done
done

echo "== PyTorch context parallel (2 GPUs)" | tee "$OUT/torch_cp.log"
torchrun --nproc_per_node 2 "$SRC/perf_tests/scripts/torch_cp_baseline.py" --seqs $SEQS --heads 32 --dim 128 \
  2>&1 | grep -vE "^W[0-9]|warn" | tee -a "$OUT/torch_cp.log"
