#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Longest-sequence table on 2 GPUs of one host (issue #12), one call:
#   gpu_long_sequences.sh BUILD_DIR OUT_DIR
# H=32, d=128, bf16, causal, forward + backward, every run prints peak memory per
# rank (peak_GiB: every Kokkos allocation; lib_peak_GiB: the executors' own).
# 0. the ring kinds against the fp64 reference, all heads and one kv head per pass;
# 1. S=128K, every executor ($SHORT_SCHEDULES), -w 1 -n 3: the time to compare
#    with the runs before the memory work (slowdown);
# 2. growing S ($LONG_SEQS, default 1M 2M) with $LONG_SCHEDULES (default zigzag),
#    -w 0 -n 1; ring kinds chunk heads automatically when all heads do not fit, and
#    a run that cannot fit stops at the pre-flight check with the largest sequence
#    that would; HEAD_GROUP=G forces G kv heads per pass;
# 3. PyTorch context parallel + cuDNN on the same GPUs at $TORCH_SEQS.
# Each run is cut at $RUN_LIMIT seconds (default 300). Fwd+bwd time grows as S^2:
# from 10.4 s at 512K (zigzag, 2026-11-22) about 170 s at 2M and 380 s at 3M, so
# 3M (LONG_SEQS=3145728) and grid2d-o at long S need calls of their own.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -u
B=$(cd "$1" && pwd); OUT=$2
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export KOKKOS_MAP_DEVICE_ID_BY=mpi_rank
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI2="mpiexec -n 2 --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x KOKKOS_MAP_DEVICE_ID_BY"
RUN=$B/perf_tests/distattn-run
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SHAPE=${SHAPE:-"--dtype bf16 --heads 32 --kv-heads 32 --dim 128"}  # smaller on CPU for a smoke run
LIMIT=${RUN_LIMIT:-300}

# schedule name -> driver arguments (Attention2D on the 1x2 grid, as in the table of issue #12)
args_of() {
  case $1 in
    grid2d-o|grid2d-no) echo "--schedule $1 --grid 1x2" ;;
    *) echo "--schedule $1" ;;
  esac
}
run_one() {  # S schedule warmup iters log
  echo "== S=$1 $2 (2 GPUs)" | tee -a "$5"
  timeout "$LIMIT" $MPI2 $RUN $(args_of "$2") $SHAPE --seq "$1" -w "$3" -n "$4" ${HEAD_GROUP:+--head-group $HEAD_GROUP} 2>&1 \
    | grep -E "^# (median|per rank|rank)|^ +[0-9]+ |^ +max |rror|memory" | tee -a "$5"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && echo "# cut at ${LIMIT} s" | tee -a "$5"
}

# The ring kinds' slots and head groups on the GPUs first (bf16, small, --check vs fp64).
echo "== correctness on 2 GPUs" | tee "$OUT/check.log"
for s in ring balanced zigzag; do
  for g in 0 1; do
    $MPI2 $RUN --schedule $s --dtype bf16 --seq 1024 --heads 4 --kv-heads 2 --dim 128 --head-group $g --check \
      -n 1 -w 0 2>&1 | grep -E "^# check|FAILED|rror" | sed "s/^/$s head_group $g: /" | tee -a "$OUT/check.log"
  done
done

for s in ${SHORT_SCHEDULES:-zigzag grid2d-o ulysses hybrid}; do
  run_one "${SHORT_SEQ:-131072}" "$s" 1 3 "$OUT/short.log"
done
for S in ${LONG_SEQS:-1048576 2097152}; do
  for s in ${LONG_SCHEDULES:-zigzag}; do
    run_one "$S" "$s" 0 1 "$OUT/long.log"
  done
done

echo "== PyTorch context parallel + cuDNN (2 GPUs)" | tee "$OUT/torch_cp.log"
timeout "$LIMIT" torchrun --nproc_per_node 2 "$SRC/perf_tests/scripts/torch_cp_baseline.py" \
  --seqs ${TORCH_SEQS:-131072 524288 1048576} --heads 32 --dim 128 --backends cudnn --warmup 0 --iters 1 \
  2>&1 | grep -vE "^W[0-9]|warn" | tee -a "$OUT/torch_cp.log"
