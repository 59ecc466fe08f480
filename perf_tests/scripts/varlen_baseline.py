#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch's varlen anchors for packed documents (and windows) on one GPU, for the
same documents distattn-run reads with --docs FILE: FlexAttention with a document
BlockMask (torch.compile'd), torch.nn.attention.varlen.varlen_attn where this torch
has it, and dense causal SDPA (cuDNN) as the unmasked reference. Median of CUDA-event
timings after warm-up. FLOPs count allowed pairs only (docs/PERFORMANCE.md: forward
4*B*H*d*pairs, backward 2.5x), as distattn-run does for masks.

  python3 varlen_baseline.py --docs ../shared/data/docs_lognormal8k_seed1_128k.txt --heads 32 --kv-heads 8 \
      --dim 128 [--window 4096] [--causal 1] [--json out.json]
"""
import argparse, json, sys

import torch
import torch.nn.functional as F

from sdpa_baseline import time_cuda  # the same timing as the dense anchor (same folder)


def allowed_pairs(lengths, causal, window):
    """Pairs (q, k) in the same document, k <= q when causal, q - k <= window (or |q - k|, full)."""
    total = 0
    for n in lengths:
        for p in range(n) if window >= 0 else ():
            lo = max(0, p - window)
            hi = p if causal else min(n - 1, p + window)
            total += hi - lo + 1
        if window < 0:
            total += n * (n + 1) // 2 if causal else n * n
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", required=True, help="one document length per line (distattn-run --docs FILE)")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--causal", type=int, default=1)
    p.add_argument("--window", type=int, default=-1, help="key window W (causal: q - W <= k <= q); -1 none")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--json", default="")
    a = p.parse_args()
    lengths = [int(x) for x in open(a.docs).read().split()]
    N, H, Hkv, d = sum(lengths), a.heads, a.kv_heads, a.dim
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    dev = "cuda"
    pairs = allowed_pairs(lengths, bool(a.causal), a.window)
    fwd_flops = 4.0 * H * d * pairs
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}  N {N} docs {len(lengths)} h {H} h_kv {Hkv} "
          f"d {d} causal {a.causal} window {a.window} dtype {a.dtype}  allowed pairs {pairs} "
          f"({pairs / (N * (N + 1) / 2 if a.causal else N * N):.4f} of dense)")
    print(f"# {'anchor':>22} {'fwd_s':>10} {'fwd_TF/s':>9} {'fwdbwd_s':>10} {'bwd_TF/s':>9}")
    g = torch.Generator(device=dev).manual_seed(1)
    q = torch.randn(1, H, N, d, device=dev, dtype=dt, generator=g, requires_grad=True)
    k = torch.randn(1, Hkv, N, d, device=dev, dtype=dt, generator=g, requires_grad=True)
    v = torch.randn(1, Hkv, N, d, device=dev, dtype=dt, generator=g, requires_grad=True)
    do = torch.randn(1, H, N, d, device=dev, dtype=dt, generator=g)
    rows = []

    def record(name, fwd, fwdbwd, flops):
        tf, tfb = time_cuda(fwd, a.warmup, a.iters), time_cuda(fwdbwd, a.warmup, a.iters)
        tb = max(tfb - tf, 1e-12)
        row = {"anchor": name, "fwd_s": tf, "fwdbwd_s": tfb, "fwd_tflops": flops / tf / 1e12,
               "bwd_tflops": 2.5 * flops / tb / 1e12}
        rows.append(row)
        print(f"  {name:>22} {tf:10.6f} {row['fwd_tflops']:9.1f} {tfb:10.6f} {row['bwd_tflops']:9.1f}")

    # FlexAttention with the document (and window) mask.
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        doc = torch.repeat_interleave(torch.arange(len(lengths), device=dev), torch.tensor(lengths, device=dev))
        W, causal = a.window, bool(a.causal)

        def mask_mod(b, h, qi, ki):
            m = doc[qi] == doc[ki]
            if causal:
                m = m & (ki <= qi)
            if W >= 0:
                m = m & ((qi - ki) <= W) & ((ki - qi) <= W)
            return m

        bm = create_block_mask(mask_mod, 1, None, N, N, device=dev)
        flex = torch.compile(flex_attention)
        fwd = lambda: flex(q, k, v, block_mask=bm, enable_gqa=Hkv != H)
        record("flex_attention", lambda: fwd(), lambda: fwd().backward(do), fwd_flops)
    except Exception as e:  # noqa: BLE001 - an anchor that cannot run is reported, not fatal
        print(f"  flex_attention: not run ({type(e).__name__}: {str(e)[:200]})")

    # varlen_attn (flash varlen) on the packed layout [N, H, d].
    try:
        from torch.nn.attention.varlen import varlen_attn
        if a.window >= 0:
            raise RuntimeError("no window argument")
        cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()), device=dev, dtype=torch.int32)
        mx = max(lengths)
        qt, kt, vt = (x.detach()[0].transpose(0, 1).contiguous().requires_grad_() for x in (q, k, v))
        rep = H // Hkv
        kt2, vt2 = kt.repeat_interleave(rep, 1), vt.repeat_interleave(rep, 1)
        dot = do[0].transpose(0, 1).contiguous()
        vfwd = lambda: varlen_attn(qt, kt2, vt2, cu, cu, mx, mx, is_causal=bool(a.causal))
        record("varlen_attn", lambda: vfwd(), lambda: vfwd().backward(dot), fwd_flops)
    except Exception as e:  # noqa: BLE001
        print(f"  varlen_attn: not run ({type(e).__name__}: {str(e)[:200]})")

    # Dense causal SDPA (cuDNN): the unmasked reference, its own FLOPs.
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        dense_flops = 4.0 * H * d * (N * (N + 1) / 2 if a.causal else N * N)
        kk, vv = k.detach().repeat_interleave(H // Hkv, 1).requires_grad_(), v.detach().repeat_interleave(H // Hkv, 1).requires_grad_()

        def sfwd():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, kk, vv, is_causal=bool(a.causal))
        record("sdpa_cudnn_dense", lambda: sfwd(), lambda: sfwd().backward(do), dense_flops)
    except Exception as e:  # noqa: BLE001
        print(f"  sdpa_cudnn_dense: not run ({type(e).__name__}: {str(e)[:200]})")

    if a.json:
        json.dump({"N": N, "docs": len(lengths), "heads": H, "kv_heads": Hkv, "dim": d, "causal": a.causal,
                   "window": a.window, "allowed_pairs": pairs, "rows": rows}, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
