#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The PyTorch binding (distattn_torch.py) against torch SDPA on the gathered sequence.

    DISTATTN_LIB=build/src/libdistattn.so python3 perf_tests/torch/test_distattn_torch.py

Started without torchrun it starts itself under torchrun on min(2, GPUs) ranks. For
every executor kind, bf16 causal (and full) attention with grouped K/V heads: sharded
inputs in the executor's layout, forward and backward through the autograd function,
outputs and gradients gathered and compared with SDPA computed in fp32 from the same
bf16 inputs (relative Frobenius error <= 3e-2, the project's 16-bit tolerance; the
error of PyTorch's own bf16 SDPA is printed beside it). Also: the layout helpers
against the library's positions, and a bad shape failing on every rank.

Exit status 77 (ctest SKIP_RETURN_CODE) with a message where PyTorch, a GPU or a
shared CUDA build of the library is missing.
"""
import os
import re
import subprocess
import sys
import time
import unittest

SKIP = 77
TOL = 3e-2


def skip(msg):
    print(f"SKIPPED: {msg}", flush=True)
    return SKIP


def launch():
    """Checks what the test needs; re-runs itself under torchrun unless already there."""
    try:
        import torch
    except ImportError:
        return skip("PyTorch is not installed (the binding's test runs on the GPU machine)")
    if not torch.cuda.is_available():
        return skip("no CUDA device")
    lib = os.environ.get("DISTATTN_LIB", "")
    if not re.search(r"\.so(\.[0-9.]+)?$", lib) or not os.path.exists(lib):
        return skip(f"DISTATTN_LIB='{lib}' is not a shared library: configure with -DBUILD_SHARED_LIBS=ON")
    if "LOCAL_RANK" in os.environ:
        return None
    n = min(2, torch.cuda.device_count())
    return subprocess.call([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
                            os.path.abspath(__file__)] + sys.argv[1:])


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


class BindingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        import torch.distributed as dist
        import distattn_torch as dt
        cls.torch, cls.dist, cls.dt = torch, dist, dt
        cls.rank, cls.world = dist.get_rank(), dist.get_world_size()
        cls.comm = dt.Communicator.from_torch()
        seed = torch.tensor([int(time.time())], device="cuda")
        dist.broadcast(seed, 0)
        cls.seed = int(seed.item())
        if cls.rank == 0:
            print(f"# {cls.world} ranks, seed {cls.seed}, torch {torch.__version__}", flush=True)

    def run_case(self, executor, causal=True, B=2, N=4096, H=8, Hkv=2, D=128, **kw):
        torch, dt = self.torch, self.dt
        F = torch.nn.functional
        g = torch.Generator(device="cuda").manual_seed(self.seed)
        q, k, v, do = (torch.randn(B, N, h, D, device="cuda", dtype=torch.bfloat16, generator=g)
                       for h in (H, Hkv, Hkv, H))
        attn = dt.DistributedAttention(self.comm, executor, batch=B, local_seq=N // self.world, heads=H,
                                       kv_heads=Hkv, head_dim=D, dtype=torch.bfloat16, causal=causal, **kw)
        pos = attn.positions()
        ql, kl, vl = (dt.shard(t, pos).requires_grad_(True) for t in (q, k, v))
        o = attn(ql, kl, vl)
        o.backward(dt.shard(do, pos))
        ours = [dt.gather(t, pos) for t in (o.detach(), ql.grad, kl.grad, vl.grad)]

        def sdpa(dtype):
            x = [t.to(dtype).transpose(1, 2).detach().requires_grad_(True) for t in (q, k, v)]
            out = F.scaled_dot_product_attention(*x, is_causal=causal, enable_gqa=True)
            out.backward(do.to(dtype).transpose(1, 2))
            return [t.transpose(1, 2) for t in (out.detach(), x[0].grad, x[1].grad, x[2].grad)]

        ref, theirs = sdpa(torch.float32), sdpa(torch.bfloat16)
        for name, a, b, t in zip(("O", "dQ", "dK", "dV"), ours, ref, theirs):
            err = rel(a, b)
            if self.rank == 0:
                print(f"  {executor:<10} causal={int(causal)} D={D} {name:<2} rel_error {err:.2e} "
                      f"(torch bf16 SDPA {rel(t, b):.2e})", flush=True)
            self.assertLessEqual(err, TOL, f"{executor} {name}")
        attn.close()

    def test_executors(self):
        for e in ("zigzag", "balanced", "ring", "grid2d-o", "grid2d-no", "ulysses", "hybrid"):
            with self.subTest(executor=e):
                self.run_case(e)

    def test_head_dim_64_and_full_attention(self):
        self.run_case("zigzag", D=64)
        self.run_case("zigzag", causal=False)
        self.run_case("grid2d-o", causal=False)

    def test_layout_helpers(self):
        for e, layout in (("ring", "contiguous"), ("zigzag", "zigzag"), ("grid2d-o", "cyclic")):
            attn = self.dt.DistributedAttention(self.comm, e, batch=1, local_seq=64, heads=2, head_dim=64)
            for r in range(self.world):
                self.assertTrue(self.torch.equal(attn.positions(r), self.dt.token_positions(layout, r, self.world, 64)))
            attn.close()

    def test_bad_shape_fails_on_every_rank(self):
        torch, dt = self.torch, self.dt
        attn = dt.DistributedAttention(self.comm, "zigzag", batch=1, local_seq=64, heads=2, head_dim=64)
        # Only rank 0 passes too few tokens; every rank must raise, none may hang.
        n = 32 if self.rank == 0 else 64
        q = torch.zeros(1, n, 2, 64, device="cuda", dtype=torch.bfloat16)
        kv = torch.zeros(1, 64, 2, 64, device="cuda", dtype=torch.bfloat16)
        with self.assertRaises(dt.DistAttnError) as cm:
            attn(q, kv, kv)
        self.assertEqual(cm.exception.status, 1)
        self.assertIn("'q'", str(cm.exception))
        attn.close()


def main():
    code = launch()
    if code is not None:
        return code
    import torch
    import torch.distributed as dist
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import distattn_torch as dt
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    dt.load()
    result = unittest.main(argv=[sys.argv[0]], exit=False, verbosity=2 if dist.get_rank() == 0 else 0).result
    bad = torch.tensor([len(result.failures) + len(result.errors)], device="cuda")
    dist.all_reduce(bad)
    dist.destroy_process_group()
    return 1 if bad.item() else 0


if __name__ == "__main__":
    sys.exit(main())
