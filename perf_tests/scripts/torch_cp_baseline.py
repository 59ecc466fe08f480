#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch context-parallel attention anchor for the distributed perf runs.

  torchrun --nproc_per_node 2 perf_tests/scripts/torch_cp_baseline.py --seqs 32768 65536 131072 \
           --heads 32 --dim 128 --backends cudnn flash

Uses torch.distributed.tensor.experimental.context_parallel (its round-robin /
head-tail load balancer for causal masks, ring rotation of K/V) with the chosen
SDPA backend. Same FLOP convention as DistAttn (causal forward 2*B*H*S^2*d,
backward 2.5x). Times: CUDA events, median of --iters after --warmup, max over ranks.
"""
import argparse, os, statistics, sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.experimental import context_parallel
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        t = torch.tensor([a.elapsed_time(b) * 1e-3], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        ts.append(t.item())
    return statistics.median(ts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", type=int, nargs="+", default=[32768])
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--backends", nargs="+", default=["cudnn", "flash"])
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    a = p.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    mesh = init_device_mesh("cuda", (world,))
    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
          "efficient": SDPBackend.EFFICIENT_ATTENTION}
    if rank == 0:
        print(f"# torch {torch.__version__} context_parallel on {world} x {torch.cuda.get_device_name()} "
              f"bf16 causal h {a.heads} d {a.dim} warmup {a.warmup} iters {a.iters}")
        print(f"# {'backend':>8} {'seq':>7} {'fwd_ms':>9} {'fwd_TF/s/gpu':>12} {'fwdbwd_ms':>10} {'fwdbwd_TF/s/gpu':>15}"
              f"  peak_GiB per rank (torch allocator)")
    for S in a.seqs:
        ff = 2.0 * a.heads * S * S * a.dim  # causal forward FLOPs, whole problem
        for name in a.backends:
            torch.cuda.reset_peak_memory_stats()
            g = torch.Generator(device="cuda").manual_seed(1234)
            xq, xk, xv, xdo = (torch.rand(1, a.heads, S, a.dim, device="cuda", dtype=torch.bfloat16, generator=g)
                               .mul_(2).sub_(1) for _ in range(4))
            try:
                with sdpa_kernel(be[name]), context_parallel(mesh, buffers=[xq, xk, xv, xdo],
                                                             buffer_seq_dims=[2, 2, 2, 2]):
                    q, k, v = (t.detach().requires_grad_(True) for t in (xq, xk, xv))
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    tf = timed(fwd, a.warmup, a.iters)

                    def fwdbwd():
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        torch.autograd.grad(out, (q, k, v), xdo)
                    tfb = timed(fwdbwd, a.warmup, a.iters)
            except Exception as e:  # an unsupported backend is reported, not hidden
                if rank == 0:
                    print(f"  {name:>8} {S:>7} unavailable: {str(e).splitlines()[0][:100]}")
                continue
            peak = torch.tensor([torch.cuda.max_memory_allocated() / 2**30], device="cuda")
            peaks = [torch.zeros_like(peak) for _ in range(world)]
            dist.all_gather(peaks, peak)
            if rank == 0:
                print(f"  {name:>8} {S:>7} {tf*1e3:>9.2f} {ff/tf/world*1e-12:>12.1f} {tfb*1e3:>10.2f} "
                      f"{3.5*ff/tfb/world*1e-12:>15.1f}  " + " ".join(f"{x.item():.2f}" for x in peaks), flush=True)
            del xq, xk, xv, xdo
            torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
