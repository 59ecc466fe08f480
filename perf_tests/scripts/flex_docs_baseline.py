#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Single-GPU anchor for packed documents and key windows: PyTorch FlexAttention
with a document (and window) mask on the same documents as distattn-run.

  python3 perf_tests/scripts/flex_docs_baseline.py --seq 131072 --heads 32 --kv-heads 8 --dim 128 \
          --docs dist:lognormal8k:1 [--window 4096] [--causal 1]

--docs takes what distattn-run takes: a file of one document length per line summing
to --seq, or dist:lognormal8k:SEED, generated here exactly as the driver does
(perf_tests/driver/mask_options.hpp: mt19937_64, Box-Muller, lengths capped at what
is left), so both tools run the same documents. --window L[,R] as the driver's.
FLOPs over allowed pairs only (docs/PERFORMANCE.md): forward 4 B H d pairs,
backward 2.5x; times are CUDA events, median of --iters after --warmup.
"""
import argparse, math

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from sdpa_baseline import time_cuda  # this directory: the same CUDA-event timing as the SDPA anchor

UNBOUNDED = 1 << 60


class MT19937_64:
    """std::mt19937_64 (the driver's generator), for the same documents from a seed."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & 0xFFFFFFFFFFFFFFFF
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & 0xFFFFFFFFFFFFFFFF
        self.i = 312

    def __call__(self):
        if self.i >= 312:
            for k in range(312):
                y = (self.mt[k] & 0xFFFFFFFF80000000) | (self.mt[(k + 1) % 312] & 0x7FFFFFFF)
                x = self.mt[(k + 156) % 312] ^ (y >> 1)
                if y & 1:
                    x ^= 0xB5026F5AA96619E9
                self.mt[k] = x
            self.i = 0
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & 0xFFFFFFFFFFFFFFFF


def lognormal_docs(seq, mean, seed):
    sigma = 1.0
    mu = math.log(mean) - sigma * sigma / 2
    gen = MT19937_64(seed)
    uniform = lambda: (float(gen() >> 11) + 1.0) * 2.0 ** -53
    offsets = [0]
    while offsets[-1] < seq:
        u1 = uniform()
        u2 = uniform()
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)
        length = max(1, math.floor(math.exp(mu + sigma * z) + 0.5))  # llround of a positive value
        offsets.append(offsets[-1] + min(length, seq - offsets[-1]))
    return offsets


def read_docs(arg, seq):
    if arg.startswith("dist:"):
        name, seed = arg[5:].split(":")
        if name != "lognormal8k":
            raise SystemExit(f"--docs {arg}: only dist:lognormal8k:SEED")
        return lognormal_docs(seq, 8192.0, int(seed))
    lengths = [int(x) for x in open(arg).read().split()]
    if sum(lengths) != seq or min(lengths) < 1:
        raise SystemExit(f"--docs {arg}: lengths must be >= 1 and sum to --seq {seq}")
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    return offsets


def allowed_pairs(offsets, causal, left, right):
    """Allowed (query, key) pairs, document by document (closed forms per row, vectorized)."""
    total = 0
    for b, e in zip(offsets[:-1], offsets[1:]):
        p = torch.arange(b, e, dtype=torch.int64)
        lo = torch.clamp(p - left, min=b)
        hi = torch.clamp(p + (0 if causal else right) + 1, max=e)
        total += int(torch.clamp(hi - lo, min=0).sum())
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seq", type=int, default=131072)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--causal", type=int, default=1)
    p.add_argument("--docs", default="", help="as distattn-run's --docs (empty: one document)")
    p.add_argument("--window", default="", help="L[,R] as distattn-run's --window (empty: unbounded)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args()

    offsets = read_docs(a.docs, a.seq) if a.docs else [0, a.seq]
    w = [int(x) for x in a.window.split(",")] if a.window else []
    left = w[0] if w else UNBOUNDED
    right = w[1] if len(w) > 1 else (0 if w else UNBOUNDED)
    dev = "cuda"
    lengths = torch.tensor([e - b for b, e in zip(offsets[:-1], offsets[1:])], device=dev)
    doc = torch.repeat_interleave(torch.arange(len(lengths), device=dev), lengths)
    causal = bool(a.causal)

    def mask_mod(b, h, q, k):
        ok = doc[q] == doc[k]
        if causal:
            ok = ok & (q >= k)
        if left < UNBOUNDED:
            ok = ok & (q - k <= left)
        if not causal and right < UNBOUNDED:
            ok = ok & (k - q <= right)
        return ok

    block_mask = create_block_mask(mask_mod, None, None, a.seq, a.seq, device=dev)
    attn = torch.compile(flex_attention)
    g = torch.Generator(device=dev).manual_seed(0)
    mk = lambda h: torch.randn(1, h, a.seq, a.dim, device=dev, dtype=torch.bfloat16, generator=g).requires_grad_()
    q, k, v = mk(a.heads), mk(a.kv_heads), mk(a.kv_heads)
    gqa = a.heads != a.kv_heads
    fwd = lambda: attn(q, k, v, block_mask=block_mask, enable_gqa=gqa)
    do = torch.randn(1, a.heads, a.seq, a.dim, device=dev, dtype=torch.bfloat16, generator=g)
    fwdbwd = lambda: torch.autograd.grad(fwd(), (q, k, v), do)

    with torch.no_grad():
        t_f = time_cuda(fwd, a.warmup, a.iters)
    t_fb = time_cuda(fwdbwd, a.warmup, a.iters)
    pairs = allowed_pairs(offsets, causal, left, right)
    flops_f = 4.0 * a.heads * a.dim * pairs
    print(f"# torch {torch.__version__} flex_attention on {torch.cuda.get_device_name()} bf16 seq {a.seq} "
          f"heads {a.heads}/{a.kv_heads} d {a.dim} causal {int(causal)} docs {len(offsets) - 1} "
          f"({a.docs or '-'}) window {a.window or '-'} allowed_pairs {pairs} warmup {a.warmup} iters {a.iters}")
    print(f"fwd_ms {t_f * 1e3:.3f} fwd_TF/s {flops_f / t_f * 1e-12:.1f} "
          f"fwdbwd_ms {t_fb * 1e3:.3f} fwdbwd_TF/s {3.5 * flops_f / t_fb * 1e-12:.1f}")


if __name__ == "__main__":
    main()
