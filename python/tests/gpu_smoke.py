# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The package over a CUDA build of libdistattn, on GPUs: one process per GPU under torchrun
(or mpiexec with the torch.distributed environment set), NCCL from the caller's process group.

  DISTATTN_LIB=<cuda build>/src/libdistattn.so PYTHONPATH=python torchrun --nproc-per-node N \\
      python/tests/gpu_smoke.py

Checks, every executor the number of ranks allows, bf16 on the GPU: forward and backward
against a float64 reference on the gathered sequence (documents from cu_seqlens, a causal
sliding window, both, and none), documents changing between steps, and
torch.compile(fullgraph=True) around distattn.attention with no graph break (torch >= 2.4).
Exit status 0 when every check passed, 1 otherwise, 77 without CUDA."""
import math
import os
import sys

import torch
import torch.distributed as dist

if not torch.cuda.is_available():
    print("SKIP: needs a CUDA device")
    sys.exit(77)

import distattn

TOL = 3e-2  # bf16 inputs and outputs against fp64: the library's --check tolerance


def reference(q, k, v, do, offsets, causal, window):
    """o, dq, dk, dv of the whole sequence in float64 ([1, N, heads, d] tensors)."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    h, hk, n = q.shape[2], k.shape[2], q.shape[1]
    kk, vv = k.repeat_interleave(h // hk, 2), v.repeat_interleave(h // hk, 2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) / math.sqrt(q.shape[3])
    p = torch.arange(n, device=q.device)[:, None]
    j = torch.arange(n, device=q.device)[None, :]
    ok = torch.ones(n, n, dtype=torch.bool, device=q.device)
    if causal:
        ok &= j <= p
    if window is not None:
        ok &= j >= p - window
    if offsets is not None:
        doc = torch.bucketize(torch.arange(n, device=q.device), offsets[1:], right=True)
        ok &= doc[:, None] == doc[None, :]
    s = s.masked_fill(~ok, float("-inf"))
    o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1).nan_to_num(0.0), vv)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do.double())
    return o.detach(), dq, dk, dv


def rel(a, b):
    return float((a.double() - b).norm() / b.norm().clamp_min(1e-30))


def main():
    dist.init_process_group("nccl")
    rank, P = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank % torch.cuda.device_count())))
    dev = torch.device("cuda")
    N, H, Hkv, d = 512 * P, 8, 2, 128
    failures = 0
    g = torch.Generator(device=dev).manual_seed(7)
    full = [torch.randn(1, N, h, d, device=dev, generator=g, dtype=torch.bfloat16) for h in (H, Hkv, Hkv, H)]
    docs_a = torch.tensor([0, 37, 38, N // 3, N // 3 + 700, N], dtype=torch.int64)  # incl. a 1-token document
    docs_b = torch.tensor([0, N // 2 + 5, N], dtype=torch.int32, device=dev)        # int32, on the device
    for schedule in distattn.SCHEDULES[1:]:
        for offsets, window in ((None, None), (docs_a, None), (None, 100), (docs_a, 100), (docs_b, None)):
            try:
                pos = distattn.token_positions(N, schedule=schedule, heads=H, kv_heads=Hkv).to(dev)
            except (ValueError, distattn.DistAttnError):
                break  # the schedule does not take this rank count or these heads
            q, k, v, do = (t[:, pos].contiguous() for t in full)
            q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
            o = distattn.attention(q, k, v, schedule=schedule, causal=True, cu_seqlens=offsets, window=window)
            dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
            ref = reference(*full, None if offsets is None else offsets.to(dev, torch.int64), True, window)
            errs = [rel(x, r[:, pos]) for x, r in zip((o, dq, dk, dv), ref)]
            bad = not all(e < TOL for e in errs)
            failures += bad
            if rank == 0 or bad:
                print(f"{'FAIL' if bad else 'ok  '} rank {rank} {schedule:>10} docs "
                      f"{'-' if offsets is None else offsets.numel() - 1} window {window}: "
                      f"rel err o {errs[0]:.2e} dq {errs[1]:.2e} dk {errs[2]:.2e} dv {errs[3]:.2e}", flush=True)
    if distattn.USE_CUSTOM_OP:
        pos = distattn.token_positions(N, schedule="zigzag").to(dev)
        q, k, v, _ = (t[:, pos].contiguous() for t in full)
        f = lambda a, b, c: distattn.attention(a, b, c, schedule="zigzag", cu_seqlens=docs_a)
        explain = torch._dynamo.explain(f)(q, k, v)
        compiled = torch.compile(f, fullgraph=True)(q, k, v)
        same = torch.equal(compiled, f(q, k, v))
        bad = explain.graph_break_count != 0 or not same
        failures += bad
        print(f"{'FAIL' if bad else 'ok  '} rank {rank} torch.compile(fullgraph=True): graph breaks "
              f"{explain.graph_break_count}, output equal to eager: {same}", flush=True)
    total = torch.tensor([failures], device=dev)
    dist.all_reduce(total)
    if rank == 0:
        print(f"gpu_smoke: {P} rank(s), torch {torch.__version__}, {int(total)} failure(s)")
    dist.destroy_process_group()
    return 0 if int(total) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
