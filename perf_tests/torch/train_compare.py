#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Training steps of one small causal transformer with three context-parallel attentions.

    DISTATTN_LIB=build-gpu/src/libdistattn.so torchrun --nproc_per_node 2 \\
        perf_tests/torch/train_compare.py --seqs 65536 131072 --steps 6

The model: --layers Llama-7B-shaped decoder layers (hidden 4096, 32 heads, head_dim
128, SwiGLU 11008, RMSNorm, RoPE), bf16 weights and activations, trained with AdamW
on an MSE loss against a fixed random target (inputs are random hidden states, so no
embedding or vocabulary enters). Each rank holds the full weights and a shard of
the sequence; gradients are summed over ranks after backward. Three ways, same
weights, data and optimizer, one process:
  distattn      our attention through the binding (distattn_torch.py; --executor,
                default zigzag), tokens in its layout (attn.positions());
  cp-cudnn      torch.distributed.tensor.experimental.context_parallel (its head-tail
                load balancer, ring K/V rotation) with SDPA's cuDNN backend;
  cp-flash      the same with the flash backend.
Per way and sequence: step time (median over the steps after --warmup, CUDA events,
max over ranks), tokens/s (whole sequence per step), peak memory per rank (torch
allocator, and device memory in use from cudaMemGetInfo, which also counts
DistAttn's own allocations and NCCL's buffers), the loss of every step, and the
largest relative difference of each way's losses from distattn's (must stay within
--loss-tol, bf16 level). Exit status 1 if a way's losses differ by more.
"""
import argparse
import math
import os
import statistics
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.utils.checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import distattn_torch as dt  # noqa: E402


class Layer(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.h, self.hkv, self.d = heads, kv_heads, hidden // heads
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.wq, self.wk, self.wv = lin(hidden, hidden), lin(hidden, kv_heads * self.d), lin(hidden, kv_heads * self.d)
        self.wo, self.gate, self.up, self.down = lin(hidden, hidden), lin(hidden, ffn), lin(hidden, ffn), lin(ffn, hidden)
        self.norm1, self.norm2 = torch.nn.RMSNorm(hidden, eps=1e-5), torch.nn.RMSNorm(hidden, eps=1e-5)

    def forward(self, x, cos, sin, attend):
        B, n, _ = x.shape
        h = self.norm1(x)
        q = rope(self.wq(h).view(B, n, self.h, self.d), cos, sin)
        k = rope(self.wk(h).view(B, n, self.hkv, self.d), cos, sin)
        v = self.wv(h).view(B, n, self.hkv, self.d)
        x = x + self.wo(attend(self, q, k, v).reshape(B, n, -1))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def rope_tables(pos, d, device):
    """cos, sin [n, d] (bf16) of the global positions this rank holds."""
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    ang = pos.to(device=device, dtype=torch.float32)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[None, :, None, :] + rot * sin[None, :, None, :]


def build_model(a):
    torch.manual_seed(0)  # the same weights on every rank and for every way
    layers = torch.nn.ModuleList(Layer(a.hidden, a.heads, a.kv_heads, a.ffn) for _ in range(a.layers))
    for p in layers.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.02)
    return layers.to(device="cuda", dtype=torch.bfloat16)


def train(a, S, layers, x, target, pos, attend, context):
    """a.steps steps; returns (losses, step times in s). x, target: this rank's rows."""
    opt = torch.optim.AdamW(layers.parameters(), lr=a.lr, weight_decay=0.0)
    losses, times = [], []
    with context():
        cos, sin = rope_tables(pos, a.hidden // a.heads, x.device)
        for step in range(a.steps):
            dist.barrier()
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            y = x
            for layer in layers:
                y = (torch.utils.checkpoint.checkpoint(layer, y, cos, sin, attend, use_reentrant=False)
                     if a.checkpoint else layer(y, cos, sin, attend))
            # Mean over the whole sequence: this rank's sum / all elements.
            loss = (y.float() - target.float()).pow(2).sum() / (S * a.hidden * x.shape[0])
            loss.backward()
            for prm in layers.parameters():  # the weights are replicated, the tokens sharded
                dist.all_reduce(prm.grad)
            opt.step()
            opt.zero_grad(set_to_none=True)
            t1.record()
            t1.synchronize()
            lt = loss.detach().reshape(1)
            dist.all_reduce(lt)
            t = torch.tensor([t0.elapsed_time(t1) * 1e-3], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            losses.append(lt.item())
            times.append(t.item())
    return losses, times


class NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def run_way(a, way, S, comm):
    world = dist.get_world_size()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    layers = build_model(a)
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(1, S, a.hidden, device="cuda", dtype=torch.bfloat16, generator=g)
    target = torch.randn(1, S, a.hidden, device="cuda", dtype=torch.bfloat16, generator=g)
    pos = torch.arange(S, device="cuda")
    if way == "distattn":
        # One executor for every layer: its workspace is allocated once, and what it
        # keeps from a forward for the backward is keyed on the tensors' addresses,
        # which stay distinct while autograd holds them.
        attn = dt.DistributedAttention(comm, a.executor, batch=1, local_seq=S // world, heads=a.heads,
                                       kv_heads=a.kv_heads, head_dim=a.hidden // a.heads, dtype=torch.bfloat16)
        mine = attn.positions().to("cuda")
        x, target, pos = dt.shard(x, mine), dt.shard(target, mine), mine
        attend = lambda layer, q, k, v: attn(q, k, v)
        context = NullContext
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.experimental import context_parallel
        from torch.nn.attention import SDPBackend, sdpa_kernel
        mesh = init_device_mesh("cuda", (world,))
        backend = {"cp-cudnn": SDPBackend.CUDNN_ATTENTION, "cp-flash": SDPBackend.FLASH_ATTENTION}[way]

        def attend(layer, q, k, v):
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            return o.transpose(1, 2)

        class context:  # CP shards x, target and the positions in place (its load-balanced layout)
            def __enter__(self):
                self.stack = [sdpa_kernel(backend),
                              context_parallel(mesh, buffers=[x, target, pos], buffer_seq_dims=[1, 1, 0],
                                               no_restore_buffers={x, target, pos})]
                for c in self.stack:
                    c.__enter__()
                return self

            def __exit__(self, *exc):
                for c in reversed(self.stack):
                    c.__exit__(*exc)
                return False
    losses, times = train(a, S, layers, x, target, pos, attend, context)
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    mem = torch.tensor([torch.cuda.max_memory_allocated() / 2**30, (total - free) / 2**30], device="cuda")
    dist.all_reduce(mem, op=dist.ReduceOp.MAX)
    if way == "distattn":
        attn.close()
    del layers, x, target
    return losses, times, mem.tolist()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqs", type=int, nargs="+", default=[65536, 131072])
    p.add_argument("--ways", nargs="+", default=["distattn", "cp-cudnn", "cp-flash"])
    p.add_argument("--executor", default="zigzag", choices=list(dt.EXECUTORS))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=32)
    p.add_argument("--ffn", type=int, default=11008)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--checkpoint", action="store_true", help="recompute each layer in backward")
    p.add_argument("--loss-tol", type=float, default=1e-2, help="largest relative loss difference from distattn")
    a = p.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    dt.load()
    comm = dt.Communicator.from_torch() if "distattn" in a.ways else None
    if rank == 0:
        print(f"# torch {torch.__version__}, {world} x {torch.cuda.get_device_name()}; {a.layers} layers hidden "
              f"{a.hidden} heads {a.heads}/{a.kv_heads} d {a.hidden // a.heads} ffn {a.ffn} bf16 causal, AdamW lr "
              f"{a.lr}, {a.steps} steps (median of the last {a.steps - a.warmup}), checkpoint {int(a.checkpoint)}, "
              f"distattn executor {a.executor}", flush=True)
        print(f"| S | way | step (ms) | tokens/s | peak torch alloc (GiB) | device in use (GiB) | losses |", flush=True)
        print("|---|---|---|---|---|---|---|", flush=True)
    bad = 0
    for S in a.seqs:
        curves = {}
        for way in a.ways:
            try:
                losses, times, mem = run_way(a, way, S, comm)
            except Exception as e:  # an unavailable backend is reported, not hidden
                if rank == 0:
                    print(f"| {S} | {way} | unavailable: {str(e).splitlines()[0][:120]} | | | | |", flush=True)
                torch.cuda.empty_cache()
                continue
            curves[way] = losses
            step = statistics.median(times[a.warmup:])
            if rank == 0:
                print(f"| {S} | {way} | {step * 1e3:.1f} | {S / step:,.0f} | {mem[0]:.1f} | {mem[1]:.1f} | "
                      + " ".join(f"{l:.5f}" for l in losses) + " |", flush=True)
        ref = curves.get("distattn")
        for way, losses in curves.items():
            if ref is None or way == "distattn":
                continue
            diff = max(abs(x - y) / abs(y) for x, y in zip(ref, losses))
            ok = diff <= a.loss_tol and all(math.isfinite(x) for x in losses + ref)
            bad += 0 if ok else 1
            if rank == 0:
                print(f"# S={S} losses of distattn vs {way}: largest relative difference {diff:.2e} "
                      f"(tolerance {a.loss_tol:.0e}) {'OK' if ok else 'FAILED'}", flush=True)
    if comm is not None:
        comm.close()
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
