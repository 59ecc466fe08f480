# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Shared start of the kernel device scripts (sourced, with OUT set): the log folder,
# CUDA on PATH and LD_LIBRARY_PATH, stamp() for elapsed-time lines, and the GPU,
# driver, clocks and date in $OUT/env.txt.
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
S0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - S0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader \
  > "$OUT/env.txt" 2>&1
date -u >> "$OUT/env.txt"

# compute-sanitizer memcheck, racecheck and synccheck over every attn_cuda_bench row
# at small sizes (ragged tiles, d = 128 and 64, causal and not): bench_sanitizers BENCH
bench_sanitizers() {
  timeout 60 compute-sanitizer --tool memcheck "$1" -s 200 --heads 2 -w 0 -n 1
  timeout 60 compute-sanitizer --tool memcheck "$1" -s 333 --heads 2 -w 0 -n 1 --dim 64 --causal 0
  timeout 60 compute-sanitizer --tool racecheck "$1" -s 130 --heads 1 -w 0 -n 1
  timeout 60 compute-sanitizer --tool racecheck "$1" -s 333 --heads 2 -w 0 -n 1 --dim 64
  timeout 60 compute-sanitizer --tool synccheck "$1" -s 300 --heads 1 -w 0 -n 1
}

# Kernel-only timings of every attn_cuda_bench row (causal bf16): d = 128 (H = 32) at
# S = 8K / 16K / 32K, d = 64 (H = 64) at 16K / 32K: bench_rows BENCH
bench_rows() {
  timeout 120 "$1" -s 8192 -s 16384 -s 32768 --dim 128
  timeout 90 "$1" -s 16384 -s 32768 --dim 64 --heads 64
}
