#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The Hopper forward at head_dim 192 and 256 (issue #39, part 2), one device call:
# compute-sanitizer over the new kernels at small ragged sizes, then per (d, causal)
# at S = 8K / 16K / 32K, B = 1, H = 32, bf16: attn_perf --dir fwd --path cuda (the
# library's forward, sampled rows checked against fp64: #wrong), PyTorch SDPA
# (cuDNN and flash, forward only) in the same call, and the kernel-only rows of
# attn_cuda_bench (the shipped key tile and the other one that fits).
#   bash perf_tests/scripts/kernel_wide_dims.sh [ATTN_PERF] [ATTN_CUDA_BENCH]
#   SANITIZE=0  skip compute-sanitizer
set -u
PERF=${1:-.gpu/bin/attn_perf}
BENCH=${2:-.gpu/bin/attn_cuda_bench}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
date -u
if [ "${SANITIZE:-1}" = 1 ]; then
  for d in 192 256; do
    for tool in memcheck racecheck synccheck; do
      echo "== compute-sanitizer $tool d=$d"
      timeout 120 compute-sanitizer --tool "$tool" "$BENCH" -s 333 --heads 2 --dim "$d" -w 0 -n 1 | tail -3
    done
  done
fi
for d in 192 256; do
  for causal in 1 0; do
    echo "== H=32 d=$d causal=$causal"
    timeout 200 "$PERF" -b 8192 -e 32768 -f 2 --heads 32 --dim "$d" --dtype bf16 --causal "$causal" --dir fwd \
      -w 2 -n 10 -c 1 --path cuda | grep -vE "^# (Out|Test)"
    timeout 200 python3 perf_tests/scripts/sdpa_baseline.py --seqs 8192 16384 32768 --heads 32 --dim "$d" \
      --causal "$causal" --fwd-only | grep -v "^# torch"
    timeout 200 "$BENCH" -s 8192 -s 16384 -s 32768 --heads 32 --dim "$d" --causal "$causal"
  done
done
