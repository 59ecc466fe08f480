#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch's anchors for packed documents and key windows on one GPU, on the same
documents as distattn-run: FlexAttention with a document (and window) BlockMask
(torch.compile'd), torch.nn.attention.varlen.varlen_attn (flash varlen) where this
torch has it, and dense SDPA (cuDNN) as the unmasked reference.

  python3 perf_tests/scripts/varlen_baseline.py --seq 131072 --heads 32 --kv-heads 8 --dim 128 \
          --docs dist:lognormal8k:1 [--window 4096] [--causal 1]

--docs takes what distattn-run takes: a file of one document length per line summing
to --seq, or dist:lognormal8k:SEED, generated here exactly as the driver does
(perf_tests/driver/mask_options.hpp: mt19937_64, Box-Muller, lengths capped at what
is left). --window L[,R] as the driver's. FLOPs over allowed pairs only
(docs/PERFORMANCE.md): forward 4 B H d pairs, backward 2.5x (dense SDPA: its own
pairs); CUDA events, median of --iters after --warmup.
"""
import argparse, inspect, math, sys

import torch
import torch.nn.functional as F

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

    N, H, Hkv, d, causal = a.seq, a.heads, a.kv_heads, a.dim, bool(a.causal)
    offsets = read_docs(a.docs, N) if a.docs else [0, N]
    w = [int(x) for x in a.window.split(",")] if a.window else []
    left = w[0] if w else UNBOUNDED
    right = w[1] if len(w) > 1 else (0 if w else UNBOUNDED)
    pairs = allowed_pairs(offsets, causal, left, right)
    flops_f = 4.0 * H * d * pairs
    dev = "cuda"
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()} bf16 seq {N} heads {H}/{Hkv} d {d} "
          f"causal {int(causal)} docs {len(offsets) - 1} ({a.docs or '-'}) window {a.window or '-'} "
          f"allowed_pairs {pairs} warmup {a.warmup} iters {a.iters}")
    print(f"# {'anchor':>16} {'fwd_ms':>9} {'fwd_TF/s':>9} {'fwdbwd_ms':>10} {'fwdbwd_TF/s':>11}")
    g = torch.Generator(device=dev).manual_seed(0)
    mk = lambda h: torch.randn(1, h, N, d, device=dev, dtype=torch.bfloat16, generator=g).requires_grad_()
    q, k, v = mk(H), mk(Hkv), mk(Hkv)
    do = torch.randn(1, H, N, d, device=dev, dtype=torch.bfloat16, generator=g)

    def record(name, fwd, inputs, dout, flops):
        with torch.no_grad():
            t_f = time_cuda(fwd, a.warmup, a.iters)
        t_fb = time_cuda(lambda: torch.autograd.grad(fwd(), inputs, dout), a.warmup, a.iters)
        print(f"  {name:>16} {t_f * 1e3:9.3f} {flops / t_f * 1e-12:9.1f} {t_fb * 1e3:10.3f} "
              f"{3.5 * flops / t_fb * 1e-12:11.1f}")

    def attempt(name, f):
        try:
            f()
        except Exception as e:  # noqa: BLE001 - an anchor this torch cannot run is reported, not fatal
            print(f"  {name:>16} not run: {type(e).__name__}: {str(e)[:160]}")

    def flex():
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        lengths = torch.tensor([e - b for b, e in zip(offsets[:-1], offsets[1:])], device=dev)
        doc = torch.repeat_interleave(torch.arange(len(lengths), device=dev), lengths)

        def mask_mod(b, h, qi, ki):
            ok = doc[qi] == doc[ki]
            if causal:
                ok = ok & (qi >= ki)
            if left < UNBOUNDED:
                ok = ok & (qi - ki <= left)
            if not causal and right < UNBOUNDED:
                ok = ok & (ki - qi <= right)
            return ok

        # _compile: the eager path evaluates mask_mod over the whole N x N square.
        bm = create_block_mask(mask_mod, None, None, N, N, device=dev, _compile=True)
        attn = torch.compile(flex_attention)
        record("flex_attention", lambda: attn(q, k, v, block_mask=bm, enable_gqa=H != Hkv), (q, k, v), do, flops_f)

    def varlen():
        from torch.nn.attention.varlen import varlen_attn
        # torch 2.10 takes is_causal; later ones window_size = (left, right), -1 unbounded.
        if "window_size" in inspect.signature(varlen_attn).parameters:
            lw = -1 if left == UNBOUNDED else left
            rw = 0 if causal else (-1 if right == UNBOUNDED else right)
            kw = {"window_size": (lw, rw)}
        elif left == UNBOUNDED and right == UNBOUNDED:
            kw = {"is_causal": causal}
        else:
            raise RuntimeError("this torch's varlen_attn takes no window")
        cu = torch.tensor(offsets, device=dev, dtype=torch.int32)
        mx = max(e - b for b, e in zip(offsets[:-1], offsets[1:]))
        rep = H // Hkv  # packed [N, heads, d], K/V heads repeated for the query heads
        qt = q.detach()[0].transpose(0, 1).contiguous().requires_grad_()
        kt = k.detach()[0].transpose(0, 1).repeat_interleave(rep, 1).contiguous().requires_grad_()
        vt = v.detach()[0].transpose(0, 1).repeat_interleave(rep, 1).contiguous().requires_grad_()
        dot = do[0].transpose(0, 1).contiguous()
        record("varlen_attn", lambda: varlen_attn(qt, kt, vt, cu, cu, mx, mx, **kw), (qt, kt, vt), dot, flops_f)

    def dense():
        from torch.nn.attention import SDPBackend, sdpa_kernel
        rep = H // Hkv
        kk = k.detach().repeat_interleave(rep, 1).requires_grad_()
        vv = v.detach().repeat_interleave(rep, 1).requires_grad_()

        def f():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal)
        record("sdpa_cudnn_dense", f, (q, kk, vv), do, 4.0 * H * d * (N * (N + 1) / 2 if causal else N * N))

    attempt("flex_attention", flex)
    attempt("varlen_attn", varlen)
    attempt("sdpa_cudnn_dense", dense)
    return 0


if __name__ == "__main__":
    sys.exit(main())
