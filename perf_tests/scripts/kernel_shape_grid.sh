#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The tuned kernels' full shape grid, one device call: B = 1, bf16, d = 128 (H = 32)
# and d = 64 (H = 64), causal and non-causal, S = 8K, 16K, 32K; attn_perf (the library
# calls, --path cuda) and PyTorch SDPA (cuDNN and flash) for every shape, same call.
#   bash perf_tests/scripts/kernel_shape_grid.sh [ATTN_PERF]   (default .gpu/bin/attn_perf)
set -u
PERF=${1:-.gpu/bin/attn_perf}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
date -u
for shape in "32 128" "64 64"; do
  set -- $shape
  for causal in 1 0; do
    echo "== H=$1 d=$2 causal=$causal"
    timeout 200 "$PERF" -b 8192 -e 32768 -f 2 --heads "$1" --dim "$2" --dtype bf16 --causal "$causal" -w 2 -n 10 -c 1 \
      --path cuda | grep -vE "^# (Out|Test)"
    timeout 200 python3 perf_tests/scripts/sdpa_baseline.py --seqs 8192 16384 32768 --heads "$1" --dim "$2" \
      --causal "$causal" | grep -v "^# torch"
  done
done
