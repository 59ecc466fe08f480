#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch SDPA anchor for attn_perf: same shapes, same FLOP convention
(forward 4*B*H*S^2*d, halved when causal; backward 2.5x), median of CUDA-event
timings after warm-up, one row per (backend, S). Prints a table and optional JSON.

  python3 sdpa_baseline.py --seqs 8192 32768 --heads 32 --dim 128 --dtype bf16 --causal 1 [--fwd-only] [--json out.json]
"""
import argparse, json, statistics, sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F


def time_cuda(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", type=int, nargs="+", default=[8192, 32768])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--causal", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--backends", nargs="+", default=["cudnn", "flash"])
    p.add_argument("--fwd-only", action="store_true", help="time the forward only (bwd columns print nan)")
    p.add_argument("--json", default="")
    a = p.parse_args()
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}  dtype {a.dtype} causal {a.causal} "
          f"b {a.batch} h {a.heads} d {a.dim} warmup {a.warmup} iters {a.iters}")
    print(f"# {'backend':>9} {'seq':>7} {'fwd_us':>12} {'fwd_TF/s':>9} {'bwd_us':>12} {'bwd_TF/s':>9}")
    rows = []
    for S in a.seqs:
        # SDPA wants [B, H, S, d]; DistAttn's layout is [B, S, H, d] - transpose views, same data volume.
        q, k, v = (torch.rand(a.batch, S, a.heads, a.dim, device="cuda", dtype=dt).mul_(2).sub_(1).transpose(1, 2)
                   .requires_grad_(True) for _ in range(3))
        do = torch.rand_like(q)
        ff = 4.0 * a.batch * a.heads * S * S * a.dim * (0.5 if a.causal else 1.0)
        for name in a.backends:
            try:
                with sdpa_kernel(backends[name]):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(a.causal))
                    tf = time_cuda(fwd, a.warmup, a.iters)
                    tb = float("nan")
                    if not a.fwd_only:
                        out = fwd()
                        bwd = lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
                        tb = time_cuda(bwd, a.warmup, a.iters)
            except Exception as e:  # a backend that does not support the shape is reported, not hidden
                print(f"  {name:>9} {S:>7} unavailable: {str(e).splitlines()[0][:80]}")
                continue
            rows.append(dict(backend=name, seq=S, fwd_us=tf * 1e6, fwd_tflops=ff / tf * 1e-12,
                             bwd_us=tb * 1e6, bwd_tflops=2.5 * ff / tb * 1e-12))
            r = rows[-1]
            print(f"  {name:>9} {S:>7} {r['fwd_us']:>12.1f} {r['fwd_tflops']:>9.2f} {r['bwd_us']:>12.1f} {r['bwd_tflops']:>9.2f}")
        del q, k, v, do
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
