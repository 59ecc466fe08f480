#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# One device call: correctness, kernel-only timings, the attn_perf table and the
# PyTorch SDPA anchor, all on the same machine in the same run. Run from the repo
# root on the GPU machine:
#   bash perf_tests/scripts/kernel_gpu_run.sh
# Uses prebuilt binaries from .gpu/bin when they run there (built on the dev box,
# saves the build time); otherwise, or with FORCE_BUILD=1, builds with
# perf_tests/scripts/gpu_build.sh. Extra test binaries in .gpu/bin named
# distattn_test_cuda_kernels_* (other tile tables, mutants) run too. Logs go to
# $OUT; the last lines are a summary.
#   EXTRA=1         also time d = 64, d = 96, non-causal and GQA shapes (attn_perf + SDPA)
#   SANITIZE=0      skip compute-sanitizer
#   NCU=1           Nsight Compute sections of the shipped kernels (S = 8192)
#   DEVICE_BUILD=1  also build from source with gpu_build.sh (nice'd, in the
#                   background while the measurements run) and run the test
#                   binary it produces
set -u
OUT=${OUT:-/tmp/gpu_run_out}
. "$(dirname "$0")/kernel_run_env.sh"

TEST=.gpu/bin/distattn_test_cuda_kernels
PERF=.gpu/bin/attn_perf
BENCH=.gpu/bin/attn_cuda_bench
if [ "${FORCE_BUILD:-0}" = 1 ] || ! timeout 60 "$TEST" --gtest_list_tests > "$OUT/prebuilt_check.txt" 2>&1; then
  stamp "building on the device (gpu_build.sh)"
  bash perf_tests/scripts/gpu_build.sh .deps/kokkos-cuda build-gpu -DDistAttn_ENABLE_CUDA_KERNELS=ON \
    -DDistAttn_ENABLE_PERFTESTS=ON > "$OUT/build.log" 2>&1 || { stamp "BUILD FAILED"; tail -40 "$OUT/build.log"; }
  TEST=build-gpu/unit_tests/distattn_test_cuda_kernels
  PERF=build-gpu/perf_tests/attn_perf
  BENCH=build-gpu/src/attn_cuda_bench
else
  stamp "prebuilt binaries run here"
fi

if [ "${DEVICE_BUILD:-0}" = 1 ]; then
  stamp "device build from source started in the background"
  ( nice -n 19 bash perf_tests/scripts/gpu_build.sh .deps/kokkos-cuda build-gpu -DDistAttn_ENABLE_CUDA_KERNELS=ON \
      -DDistAttn_ENABLE_PERFTESTS=ON > "$OUT/build.log" 2>&1; echo "gpu_build rc=$?" >> "$OUT/build.log" ) &
  BUILD_PID=$!
fi

stamp "unit tests"
{
  for t in "$TEST" $(ls .gpu/bin/distattn_test_cuda_kernels_* 2>/dev/null); do
    echo "===== $t"
    timeout ${TEST_TIMEOUT:-120} "$t"
    echo "rc=$? ($t)"
  done
} > "$OUT/tests.log" 2>&1

stamp "attn_perf --path cuda"
{
  timeout 120 "$PERF" -b 8192 -e 32768 -f 4 --heads 32 --dim 128 --dtype bf16 --causal 1 -w 2 -n 10 -c 1 --path cuda
  echo "rc=$?"
  if [ "${EXTRA:-0}" = 1 ]; then
    timeout 60 "$PERF" -b 8192 -e 32768 -f 4 --heads 64 --dim 64 --dtype bf16 --causal 1 -w 2 -n 10 -c 1 --path cuda | grep -v "^#"
    timeout 60 "$PERF" -b 8192 -e 16384 -f 2 --heads 32 --dim 128 --dtype bf16 --causal 0 -w 2 -n 10 -c 1 --path cuda | grep -v "^#"
    timeout 60 "$PERF" -b 32768 -e 32768 --heads 32 --kv-heads 8 --dim 128 --dtype bf16 --causal 1 -w 2 -n 10 -c 1 --path cuda | grep -v "^#"
    timeout 60 "$PERF" -b 32768 -e 32768 --heads 32 --dim 128 --dtype fp16 --causal 1 -w 2 -n 10 -c 1 --path cuda | grep -v "^#"
    timeout 60 "$PERF" -b 8192 -e 32768 -f 4 --heads 32 --dim 96 --dtype bf16 --causal 1 -w 2 -n 10 -c 1 --path cuda | grep -v "^#"
  fi
} > "$OUT/perf.log" 2>&1

stamp "SDPA anchor"
{
  timeout 90 python3 perf_tests/scripts/sdpa_baseline.py --seqs 8192 32768
  echo "rc=$?"
  if [ "${EXTRA:-0}" = 1 ]; then
    timeout 60 python3 perf_tests/scripts/sdpa_baseline.py --seqs 8192 32768 --heads 64 --dim 64 | grep -v "^#"
    timeout 60 python3 perf_tests/scripts/sdpa_baseline.py --seqs 8192 16384 --causal 0 | grep -v "^#"
    timeout 60 python3 perf_tests/scripts/sdpa_baseline.py --seqs 8192 32768 --dim 96 | grep -v "^#"
  fi
} > "$OUT/sdpa.log" 2>&1

stamp "kernel bench"
{
  bench_rows "$BENCH"
} > "$OUT/bench.log" 2>&1

stamp "SASS facts"
{
  cuobjdump --dump-resource-usage "$BENCH" 2>&1 | grep -E "Function|REG" | sed 's/_ZN8DistAttn4Impl4cuda//' | paste - - |
    grep -oE "(Fwd|Bwd)Tile(PS)?ILi[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]+E(Li[0-9]+E)?|REG:[0-9]+|STACK:[0-9]+" | paste - - -
  cuobjdump -sass "$BENCH" > "$OUT/bench.sass" 2>&1
  echo "HMMA: $(grep -c HMMA "$OUT/bench.sass")  LDSM: $(grep -c LDSM "$OUT/bench.sass")  LDL: $(grep -c LDL "$OUT/bench.sass")  STL: $(grep -c STL "$OUT/bench.sass")  RED: $(grep -cE "RED\\.|REDG" "$OUT/bench.sass")"
  rm -f "$OUT/bench.sass"
} > "$OUT/sass.txt" 2>&1

if [ "${SANITIZE:-1}" = 1 ]; then
  stamp "compute-sanitizer (small sizes, every bench variant)"
  {
    bench_sanitizers "$BENCH"
    timeout 120 compute-sanitizer --tool memcheck "$TEST" --gtest_filter='*Deterministic*:*PaddedHeadDims*:*StridedMasks*'
    timeout 90 compute-sanitizer --tool racecheck "$TEST" --gtest_filter='*/0.BackwardStridedMasksAndEmptyRows'
  } > "$OUT/sanitizer.log" 2>&1
fi
if [ "${NCU:-0}" = 1 ]; then
  stamp "ncu (shipped kernels)"
  timeout 90 ncu --clock-control none --kernel-name regex:attn_ --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis "$BENCH" -s 8192 --dim 128 -w 0 -n 1 --shipped-only > "$OUT/ncu.txt" 2>&1
  # stall reasons (per warp, % of its active cycles) and pipe utilization
  timeout 150 ncu --clock-control none --kernel-name regex:attn_ --metrics \
    'regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,regex:sm__pipe_.*_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum' \
    "$BENCH" -s 8192 --dim 128 -w 0 -n 1 --shipped-only > "$OUT/ncu_stalls.txt" 2>&1
fi

if [ "${DEVICE_BUILD:-0}" = 1 ]; then
  stamp "waiting for the device build (until ${BUILD_DEADLINE:-250}s)"
  while kill -0 "$BUILD_PID" 2>/dev/null && [ $(( $(date +%s) - S0 )) -lt ${BUILD_DEADLINE:-250} ]; do sleep 3; done
  if kill -0 "$BUILD_PID" 2>/dev/null; then
    stamp "device build still running at the deadline: not tested"
  elif [ -x build-gpu/unit_tests/distattn_test_cuda_kernels ]; then
    tail -3 "$OUT/build.log"
    timeout 90 build-gpu/unit_tests/distattn_test_cuda_kernels > "$OUT/tests_devbuild.log" 2>&1
    echo "rc=$? (device-built binary)" >> "$OUT/tests_devbuild.log"
  fi
fi
stamp "done"

echo "===== summary ($(head -1 "$OUT/env.txt"))"
grep -E "^=====|^\[  PASSED  \]|^\[  FAILED  \]|tests? ran|^rc=" "$OUT/tests.log" | tail -40
grep -E "Failure|max error|declined" "$OUT/tests.log" | head -12
grep -vE "^#" "$OUT/perf.log" | tail -12
grep -vE "^# torch" "$OUT/sdpa.log" | tail -14
grep -E "fwd|bwd" "$OUT/bench.log"
tail -1 "$OUT/sass.txt"
[ -f "$OUT/sanitizer.log" ] && grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log" | head -12
[ -f "$OUT/tests_devbuild.log" ] && grep -E "PASSED|FAILED  \] [0-9]|^rc=" "$OUT/tests_devbuild.log"
[ -f "$OUT/ncu.txt" ] && grep -E "attn_|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots|No Eligible|Shared Memory|Bank" "$OUT/ncu.txt" | head -30
[ -f "$OUT/ncu_stalls.txt" ] && grep -E "attn_|stalled|pipe_(tensor|shared|alu|fma|xu|lsu|uniform)_cycles|duration" "$OUT/ncu_stalls.txt" |
  awk '$NF+0 >= 1 || /attn_|duration/' | sed 's/_per_warp_active.pct//; s/.avg.pct_of_peak_sustained_active//' | head -60
