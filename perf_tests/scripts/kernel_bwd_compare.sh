#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# One device call: the backward through the library with the fused prologue
# (attention_bwd_prepare: Delta and the zeroed dq/dk/dv in one pass, attn_perf's
# default) against the separate Delta pass and three fills (--bwd-prep separate),
# with correctness first and the PyTorch SDPA anchor in the same call. Run from the
# repo root on the GPU machine:
#   bash perf_tests/scripts/kernel_bwd_compare.sh [BIN_DIR]     (default .gpu/bin)
# BIN_DIR holds distattn_test_cuda_kernels, attn_cuda_bench and attn_perf built on
# the dev box. Steps (each under a timeout; about 4 minutes in all):
#   1. a small launch of every bench row (forward and backward kernels), stopping
#      early on a hang or crash;
#   2. the CUDA kernel unit tests (all of them);
#   3. compute-sanitizer memcheck, racecheck, synccheck on small bench runs, memcheck
#      on the prologue, decline, padded and strided-mask unit tests;
#   4. kernel-only timings (attn_cuda_bench): d = 128 causal S = 8K / 16K / 32K,
#      d = 64 (H = 64) S = 16K / 32K;
#   5. attn_perf --dir bwd with --bwd-prep fused and separate, alternated twice, and
#      PyTorch SDPA (cuDNN, flash) on the same shapes: d = 128 (H = 32) causal and
#      non-causal, d = 64 (H = 64) causal; S = 8K, 16K, 32K.
# Logs go to $OUT (default /tmp/bwd_compare_out); the summary is printed at the end.
set -u
BIN=${1:-.gpu/bin}
OUT=${OUT:-/tmp/bwd_compare_out}
. "$(dirname "$0")/kernel_run_env.sh"
TEST=$BIN/distattn_test_cuda_kernels
BENCH=$BIN/attn_cuda_bench
PERF=$BIN/attn_perf

stamp "smoke (every bench row, small)"
{
  timeout 30 "$BENCH" -s 1000 --heads 2 -w 0 -n 1 && timeout 30 "$BENCH" -s 1000 --heads 2 -w 0 -n 1 --dim 64
} > "$OUT/smoke.log" 2>&1
SMOKE=$?
cat "$OUT/smoke.log"
if [ $SMOKE -ne 0 ]; then
  stamp "SMOKE FAILED (rc=$SMOKE): unit tests only"
  timeout 150 "$TEST" 2>&1 | tail -8
  exit 1
fi

stamp "unit tests"
{
  timeout 180 "$TEST"
  echo "rc=$?"
} > "$OUT/tests.log" 2>&1

stamp "compute-sanitizer"
{
  bench_sanitizers "$BENCH"
  timeout 120 compute-sanitizer --tool memcheck "$TEST" \
    --gtest_filter='*/0.BackwardPrepare*:*/0.ForwardDeclines*:*/0.PaddedHeadDims:*/0.ForwardStridedMasks'
} > "$OUT/sanitizer.log" 2>&1

stamp "kernel bench"
{
  bench_rows "$BENCH"
} > "$OUT/bench.log" 2>&1

stamp "attn_perf --dir bwd (fused / separate prologue) and SDPA"
{
  for shape in "32 128 1" "32 128 0" "64 64 1"; do
    set -- $shape
    echo "== H=$1 d=$2 causal=$3"
    for prep in fused separate fused separate; do
      echo "-- bwd-prep $prep"
      timeout 90 "$PERF" -b 8192 -e 32768 -f 2 --heads "$1" --dim "$2" --dtype bf16 --causal "$3" --dir bwd \
        -w 2 -n 10 -c 1 --path cuda --bwd-prep "$prep" | grep -vE "^# (Out|Test|DistAttn|test)|^#$|^#  "
    done
    timeout 120 python3 perf_tests/scripts/sdpa_baseline.py --seqs 8192 16384 32768 --heads "$1" --dim "$2" \
      --causal "$3" --iters 10 | grep -v "^# torch"
  done
} > "$OUT/api.log" 2>&1
stamp "done"

echo "===== summary ($(head -1 "$OUT/env.txt"))"
grep -E "^\[  PASSED  \]|^\[  FAILED  \]|tests? ran|^rc=" "$OUT/tests.log"
grep -E "Failure|max error|declined|what\(\)" "$OUT/tests.log" | head -12
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log"
grep -E "^#.*bench|fwd|bwd" "$OUT/bench.log"
cat "$OUT/api.log"
