#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Scaling on P = 4 or 8 GPUs of one host (issue #17), one call per machine kind:
#   gpu_scaling.sh BUILD_DIR OUT_DIR P
# then the report table:
#   python3 perf_tests/scripts/scaling_table.py OUT_DIR [OUT_DIR ...]
#
# GPU command lines (BUILD_DIR from gpu_build.sh with -DDistAttn_ENABLE_NCCL=ON
# -DDistAttn_ENABLE_CUDA_KERNELS=ON -DDistAttn_ENABLE_PERFTESTS=ON):
#   nvidia-h200-x4:  bash perf_tests/scripts/gpu_scaling.sh build $OUT/p4 4
#   nvidia-h200-x8:  bash perf_tests/scripts/gpu_scaling.sh build $OUT/p8 8
# A device command is cut at 10 minutes, so a full sweep is split by the
# variables below, e.g. SEQS=131072 LONGEST=0 TORCH=0, then SEQS=524288 SHAPES=mha,
# then SEQS= LONGEST=1 SCHEDULES="zigzag grid2d-o" (every run appends to OUT_DIR).
#
# For each shape ($SHAPES: mha = H=$HEADS kv=H, gqa = H=$HEADS kv=$GQA_KV; d=$DIM,
# $DTYPE, causal, forward + backward) and each S in $SEQS:
#   - 1 device (--schedule local) while S <= $LOCAL_MAX: the parallel-efficiency base;
#   - every executor in $SCHEDULES on P ranks with --decompose (exposed
#     communication) unless DECOMPOSE=0: ring (vanilla), balanced, zigzag,
#     grid2d-o on 2x2 (P=4) or 2x4 and 4x2 (P=8), ulysses, hybrid (U=$HYBRID_U +
#     $HYBRID_INNER), auto (the cost model with $TILES; its log holds the ranking
#     with the predicted times of every choice, which scaling_table.py reads).
# With LONGEST=1 each executor first asks for a sequence too long for its workspace
# but not for the driver's inputs (q, k, v, o, dO and the gradients, 8 tensors of
# S/P rows; about 64 KiB a token per rank for MHA at H=32 d=128 bf16): $PROBE_SEQ, by
# default P x $PROBE_PER_RANK_MHA (1.5M) for MHA and P x $PROBE_PER_RANK_GQA (2M)
# for GQA. The pre-flight check then fails on every rank naming "the largest
# sequence that fits", which rounded down to a multiple of $ROUND is run next (up
# to 4 tries: the backward may fit less than the forward named). A probe still
# running after $PROBE_LIMIT s (default 120) fits and is cut (the log says so).
# PyTorch context parallel (cuDNN and flash, MHA) on the same P GPUs at $SEQS
# when torch is installed and TORCH != 0; otherwise a message says it was skipped.
# Every distattn-run writes OUT_DIR/<label>.S<S>.<shape>.json (--json) and .log.
# Each run is cut at $RUN_LIMIT seconds (default 300). NVLink multicast stays off.
#
# On CPU MPI ranks (a smoke test of the pipeline, timings not meaningful):
#   COMM=mpi DTYPE=float HEADS=8 GQA_KV=2 DIM=64 SEQS="512 1024" LOCAL_MAX=1024 \
#   TILES=perf_tests/data/tiles_cpu_float_d64.txt DISTATTN_MEMORY_LIMIT=4000000 PROBE_SEQ=65536 \
#   ROUND=256 gpu_scaling.sh build /tmp/scale/p4 4
set -u
B=$(cd "$1" && pwd); OUT=$2; P=$3
case $P in 4|8) ;; *) echo "gpu_scaling.sh: P must be 4 or 8, got '$P'" >&2; exit 2 ;; esac
mkdir -p "$OUT"
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export KOKKOS_MAP_DEVICE_ID_BY=mpi_rank
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

COMM=${COMM:-nccl}; DTYPE=${DTYPE:-bf16}; HEADS=${HEADS:-32}; GQA_KV=${GQA_KV:-8}; DIM=${DIM:-128}
SHAPES=${SHAPES:-mha gqa}
SEQS=${SEQS-131072 524288}
LONGEST=${LONGEST:-1}; ROUND=${ROUND:-65536}; PROBE_LIMIT=${PROBE_LIMIT:-120}
PROBE_PER_RANK_MHA=${PROBE_PER_RANK_MHA:-1572864}; PROBE_PER_RANK_GQA=${PROBE_PER_RANK_GQA:-2097152}
LOCAL_MAX=${LOCAL_MAX:-524288}
TILES=${TILES:-$SRC/perf_tests/data/tiles_h200_bf16.txt}
HYBRID_U=${HYBRID_U:-2}; HYBRID_INNER=${HYBRID_INNER:-zigzag}
WARMUP=${WARMUP:-1}; ITERS=${ITERS:-3}; LIMIT=${RUN_LIMIT:-300}; DECOMPOSE=${DECOMPOSE:-1}
if [ "$P" = 4 ]; then GRIDS=${GRIDS:-2x2}; else GRIDS=${GRIDS:-2x4 4x2}; fi
if [ -z "${SCHEDULES:-}" ]; then
  SCHEDULES="ring balanced zigzag"
  for g in $GRIDS; do SCHEDULES="$SCHEDULES grid2d-o:$g"; done
  SCHEDULES="$SCHEDULES ulysses hybrid auto"
fi

XENV=(-x NCCL_NVLS_ENABLE -x KOKKOS_MAP_DEVICE_ID_BY)
[ -n "${DISTATTN_MEMORY_LIMIT:-}" ] && XENV+=(-x DISTATTN_MEMORY_LIMIT)
RUN=$B/perf_tests/distattn-run
S0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - S0 ))s] $*"; }

shape_args() {  # shape -> driver arguments
  case $1 in
    mha) echo "--dtype $DTYPE --heads $HEADS --kv-heads $HEADS --dim $DIM" ;;
    gqa) echo "--dtype $DTYPE --heads $HEADS --kv-heads $GQA_KV --dim $DIM" ;;
    *) echo "gpu_scaling.sh: unknown shape '$1' (mha, gqa)" >&2; exit 2 ;;
  esac
}
sched_args() {  # label (schedule[:grid]) -> driver arguments
  case $1 in
    grid2d-*:*) echo "--schedule ${1%%:*} --grid ${1#*:}" ;;
    hybrid) echo "--schedule hybrid --ulysses $HYBRID_U --inner $HYBRID_INNER" ;;
    auto) echo "--schedule auto --tiles $TILES --auto-show 64" ;;
    *) echo "--schedule $1" ;;
  esac
}
# run_one ranks label S shape [extra args]: one distattn-run, cut at $LIMIT seconds.
run_one() {
  local n=$1 label=$2 S=$3 shape=$4; shift 4
  local stem="$OUT/${label//:/_}.S$S.$shape" comm="--comm $COMM"
  [ "$label" = local ] && comm=""
  stamp "P=$n $label S=$S $shape"
  timeout "$LIMIT" mpiexec -n "$n" --oversubscribe --bind-to none "${XENV[@]}" \
    "$RUN" $(sched_args "$label") $comm $(shape_args "$shape") --seq "$S" -w "$WARMUP" -n "$ITERS" \
    --no-progress --json "$stem.json" "$@" > "$stem.log" 2>&1
  local rc=$?
  [ "$rc" -eq 124 ] && echo "# cut at ${LIMIT} s" >> "$stem.log"
  grep -E "^# verdict|^distattn-run \(rank 0\)|^# cut at" "$stem.log" | head -1 | cut -c1-240
  return "$rc"
}
# run_longest label shape: the longest S that fits, from the pre-flight check. The
# first try asks for the probe length (cut at $PROBE_LIMIT s: still running means
# it fits); while a try fails naming "the largest sequence that fits" (the forward
# names its own, the backward may need less), the next asks for that length rounded
# down to $ROUND. Failed tries' logs are kept as <stem>.fit.
run_longest() {
  local s=$1 shape=$2 S=${PROBE_SEQ:-} lim=$PROBE_LIMIT try stem fit
  if [ -z "$S" ]; then
    if [ "$shape" = mha ]; then S=$(( P * PROBE_PER_RANK_MHA )); else S=$(( P * PROBE_PER_RANK_GQA )); fi
  fi
  for try in 1 2 3 4; do
    stem="$OUT/${s//:/_}.S$S.$shape"
    # one timed iteration at the longest: its time grows as S^2
    WARMUP=0 ITERS=1 LIMIT=$lim run_one "$P" "$s" "$S" "$shape"
    fit=$(grep -oE "largest sequence that fits is about [0-9]+" "$stem.log" | head -1 | grep -oE "[0-9]+$")
    [ -z "$fit" ] && return 0
    mv "$stem.log" "$stem.fit"
    fit=$(( fit / ROUND * ROUND ))
    if [ "$fit" -le 0 ] || [ "$fit" -ge "$S" ]; then
      stamp "P=$P $s $shape: the pre-flight check names no shorter length than $S (see $stem.fit)"
      return 1
    fi
    S=$fit; lim=$LIMIT
  done
}

DEC=""; [ "$DECOMPOSE" != 0 ] && DEC="--decompose"
for shape in $SHAPES; do
  for S in $SEQS; do
    [ "$S" -le "$LOCAL_MAX" ] && run_one 1 local "$S" "$shape"
    for s in $SCHEDULES; do run_one "$P" "$s" "$S" "$shape" $DEC; done
  done
  if [ "$LONGEST" = 1 ]; then
    for s in $SCHEDULES; do
      [ "$s" = auto ] || run_longest "$s" "$shape"  # auto runs one of the others
    done
  fi
done

if [ "${TORCH:-1}" = 0 ] || [ -z "$SEQS" ]; then
  stamp "PyTorch context parallel not run (TORCH=0 or no SEQS)"
elif ! python3 -c "import torch.distributed.tensor.experimental" 2>/dev/null; then
  stamp "PyTorch context parallel skipped: torch is not installed for $(command -v python3)"
else
  stamp "PyTorch context parallel (cuDNN, flash) on $P GPUs"
  timeout "$LIMIT" torchrun --nproc_per_node "$P" "$SRC/perf_tests/scripts/torch_cp_baseline.py" \
    --seqs $SEQS --heads "$HEADS" --dim "$DIM" --backends cudnn flash --warmup "$WARMUP" --iters "$ITERS" \
    2>&1 | grep -vE "^W[0-9]|warn" > "$OUT/torch_cp.log"
  tail -6 "$OUT/torch_cp.log"
fi
stamp "done; table: python3 $SRC/perf_tests/scripts/scaling_table.py $OUT"
