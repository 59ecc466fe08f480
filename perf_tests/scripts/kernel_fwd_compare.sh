#!/usr/bin/env bash
# One device call: the shipped forward against the warp-specialized forward
# (WsFwdTile, DISTATTN_FWD_VARIANT=ws), with correctness first and the PyTorch SDPA
# anchor in the same call. Run from the repo root on the GPU machine:
#   bash perf_tests/scripts/kernel_fwd_compare.sh [BIN_DIR]     (default .gpu/bin)
# BIN_DIR holds distattn_test_cuda_kernels, attn_cuda_bench and attn_perf built on
# the dev box. Steps (each under a timeout; the whole takes about 4 minutes):
#   1. unit tests (CUDA kernels) with DISTATTN_FWD_VARIANT=ws, then with the default;
#   2. compute-sanitizer memcheck, racecheck, synccheck on small forwards of every
#      variant (attn_cuda_bench --fwd-only) and memcheck on forward unit tests (ws);
#   3. kernel-only forward timings (attn_cuda_bench --fwd-only): d = 128 (H = 32) and
#      d = 64 (H = 64), S = 8K, 16K, 32K, causal and non-causal;
#   4. the library forward (attn_perf --dir fwd, sampled fp64 check) for both
#      variants, and PyTorch SDPA (cuDNN, flash; forward only) on the same shapes.
#   NCU=1 adds ncu stall reasons and pipe utilization of every --fwd-only kernel at
#   d = 128, S = 8K, causal (about a minute more).
# Logs go to $OUT (default /tmp/fwd_compare_out); the summary is printed at the end.
set -u
BIN=${1:-.gpu/bin}
OUT=${OUT:-/tmp/fwd_compare_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
S0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - S0 ))s] $*"; }
TEST=$BIN/distattn_test_cuda_kernels
BENCH=$BIN/attn_cuda_bench
PERF=$BIN/attn_perf
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > "$OUT/env.txt" 2>&1
date -u >> "$OUT/env.txt"

# A hang in a new kernel must not eat the call: one small launch of every variant
# first, and on a timeout or crash only the default forward's tests run.
stamp "smoke (every --fwd-only variant, small)"
timeout 30 "$BENCH" --fwd-only -s 1000 --heads 2 -w 0 -n 1 > "$OUT/smoke.log" 2>&1
SMOKE=$?
cat "$OUT/smoke.log"
if [ $SMOKE -ne 0 ]; then
  stamp "SMOKE FAILED (rc=$SMOKE): the default forward's tests only"
  timeout 120 "$TEST" --gtest_filter='*Forward*:*DispatchSeam*' 2>&1 | tail -5
  exit 1
fi

stamp "unit tests (ws, then default)"
{
  echo "===== DISTATTN_FWD_VARIANT=ws"
  DISTATTN_FWD_VARIANT=ws timeout 150 "$TEST"
  echo "rc=$? (ws)"
  echo "===== default"
  timeout 120 "$TEST" --gtest_filter='*Forward*:*DispatchSeam*'
  echo "rc=$? (default)"
} > "$OUT/tests.log" 2>&1

stamp "compute-sanitizer"
{
  timeout 60 compute-sanitizer --tool memcheck "$BENCH" --fwd-only -s 200 --heads 2 -w 0 -n 1
  timeout 60 compute-sanitizer --tool memcheck "$BENCH" --fwd-only -s 333 --heads 2 -w 0 -n 1 --dim 64 --causal 0
  timeout 60 compute-sanitizer --tool racecheck "$BENCH" --fwd-only -s 130 --heads 1 -w 0 -n 1
  timeout 60 compute-sanitizer --tool racecheck "$BENCH" --fwd-only -s 333 --heads 2 -w 0 -n 1 --dim 64
  timeout 60 compute-sanitizer --tool synccheck "$BENCH" --fwd-only -s 300 --heads 1 -w 0 -n 1
  DISTATTN_FWD_VARIANT=ws timeout 90 compute-sanitizer --tool memcheck "$TEST" \
    --gtest_filter='*/0.ForwardStridedMasks:*/0.ForwardEmptyRowsAndFullyMaskedBlocks:*/0.ForwardStridedViews'
} > "$OUT/sanitizer.log" 2>&1

stamp "kernel bench (--fwd-only)"
{
  for causal in 1 0; do
    timeout 60 "$BENCH" --fwd-only -s 8192 -s 16384 -s 32768 --dim 128 --heads 32 --causal $causal
    timeout 60 "$BENCH" --fwd-only -s 8192 -s 16384 -s 32768 --dim 64 --heads 64 --causal $causal
  done
} > "$OUT/bench.log" 2>&1

stamp "SASS facts"
{
  cuobjdump --dump-resource-usage "$BENCH" 2>&1 | grep -A1 "attn_fwd_ws_kernel" | grep -oE "WsFwdTileILi[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]+ELb[01]E|REG:[0-9]+|STACK:[0-9]+|SHARED:[0-9]+" | paste - - - -
  cuobjdump -sass "$BENCH" | awk '/Function : .*attn_fwd_ws_kernel/{on=1} /Function : /&&!/attn_fwd_ws_kernel/{on=0} on' > "$OUT/ws.sass"
  echo "ws kernels: HGMMA $(grep -c HGMMA "$OUT/ws.sass")  LDL $(grep -c LDL "$OUT/ws.sass")  STL $(grep -c STL "$OUT/ws.sass")  SETMAXNREG $(grep -ciE "SETMAXREG|SETMAXNREG" "$OUT/ws.sass")"
} > "$OUT/sass.txt" 2>&1

stamp "attn_perf --dir fwd (both variants) and SDPA"
{
  for shape in "32 128" "64 64"; do
    set -- $shape
    for causal in 1 0; do
      echo "== H=$1 d=$2 causal=$causal"
      for v in default ws; do
        echo "-- variant $v"
        DISTATTN_FWD_VARIANT=$v timeout 60 "$PERF" -b 8192 -e 32768 -f 2 --heads "$1" --dim "$2" --dtype bf16 \
          --causal "$causal" --dir fwd -w 2 -n 10 -c 1 --path cuda | grep -vE "^# (Out|Test)"
      done
      timeout 100 python3 perf_tests/scripts/sdpa_baseline.py --seqs 8192 16384 32768 --heads "$1" --dim "$2" \
        --causal "$causal" --iters 10 --fwd-only | grep -v "^# torch"
    done
  done
} > "$OUT/api.log" 2>&1
if [ "${NCU:-0}" = 1 ]; then
  stamp "ncu (stall reasons, pipes)"
  timeout 150 ncu --clock-control none --kernel-name regex:attn_fwd --metrics \
    'regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,regex:sm__pipe_(tensor_op_gmma|tensor|alu|fma|xu|shared)_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,gpu__time_duration.sum' \
    "$BENCH" --fwd-only -s 8192 --dim 128 -w 0 -n 1 > "$OUT/ncu.txt" 2>&1
fi
stamp "done"

echo "===== summary ($(head -1 "$OUT/env.txt"))"
grep -E "^=====|^\[  PASSED  \]|^\[  FAILED  \]|tests? ran|^rc=" "$OUT/tests.log"
grep -E "Failure|max error|declined|what\(\)" "$OUT/tests.log" | head -12
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log"
grep -E "^#.*bench|fwd" "$OUT/bench.log"
cat "$OUT/sass.txt"
grep -vE "^#" "$OUT/api.log"
[ -f "$OUT/ncu.txt" ] && grep -E "attn_fwd|stalled|pipe_|issue_active|registers|duration" "$OUT/ncu.txt" |
  awk '$NF+0 >= 1 || /attn_fwd|duration|registers/' | sed 's/_per_warp_active.pct//; s/.avg.pct_of_peak_sustained_active//' | cut -c1-160
