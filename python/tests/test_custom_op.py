# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The torch >= 2.4 registration path (torch.library.custom_op, register_fake,
register_autograd) and torch.compile, with a stand-in for the C ABI: one process, one rank,
the ops' kernels (distattn._ops.fwd_impl / bwd_impl) replaced by plain torch attention, so
that this runs wherever torch >= 2.4 is, without libdistattn or MPI. What it checks is the
package's side: op schemas, fake implementations, autograd registration
(torch.library.opcheck), gradcheck through the ops, and torch.compile(fullgraph=True) /
torch._dynamo.explain with no graph break around distattn.attention.

Exit status 0 (and a SKIP line on older torch), 1 on a failure, 77 without torch."""
import math
import sys

try:
    import torch
except ImportError as e:
    print(f"SKIP: needs torch ({e})")
    sys.exit(77)

import distattn
from distattn import _comm, _lib, _ops

if not distattn.USE_CUSTOM_OP:
    print(f"SKIP: the custom_op path needs torch >= 2.4 (torch.library.custom_op), have {torch.__version__}")
    sys.exit(0)


def _scores(q, k, cu_seqlens, causal, scale, window_left, window_right):
    h, hk, d = q.shape[2], k.shape[2], q.shape[3]
    k = k.repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * (scale or 1.0 / math.sqrt(d))
    n = q.shape[1]
    p = torch.arange(n, device=q.device)[:, None]
    j = torch.arange(n, device=q.device)[None, :]
    ok = torch.ones(n, n, dtype=torch.bool, device=q.device)
    if window_left >= 0:
        ok = ok & (j >= p - window_left)
    if window_right >= 0:
        ok = ok & (j <= p + window_right)
    if causal:
        ok = ok & (j <= p)
    if cu_seqlens is not None:  # the document of each position: how many offsets after the first it has passed
        doc = (torch.arange(n, device=q.device)[:, None] >= cu_seqlens[1:].to(q.device)[None, :]).sum(1)
        ok = ok & (doc[:, None] == doc[None, :])
    return s.masked_fill(~ok, float("-inf"))


def fwd_standin(q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left, window_right):
    s = _scores(q, k, cu_seqlens, causal, scale, window_left, window_right)
    lse = torch.logsumexp(s, dim=-1)
    vv = v.repeat_interleave(q.shape[2] // v.shape[2], dim=2)
    o = torch.einsum("bhqk,bkhd->bqhd", torch.exp(s - lse[..., None]), vv)
    return o.contiguous(), lse.to(_ops.lse_dtype(q.dtype)).contiguous()


def bwd_standin(dout, q, k, v, o, lse, cu_seqlens, comm, schedule, causal, scale, window_left, window_right):
    g = q.shape[2] // k.shape[2]
    sc = scale or 1.0 / math.sqrt(q.shape[3])
    p = torch.exp(_scores(q, k, cu_seqlens, causal, scale, window_left, window_right) - lse[..., None].to(q.dtype))
    vv, kk = (t.repeat_interleave(g, dim=2) for t in (v, k))
    dvv = torch.einsum("bhqk,bqhd->bkhd", p, dout)
    dp = torch.einsum("bqhd,bkhd->bhqk", dout, vv)
    ds = p * (dp - (dout * o).sum(-1).transpose(1, 2)[..., None])
    dq = torch.einsum("bhqk,bkhd->bqhd", ds, kk) * sc
    dkk = torch.einsum("bhqk,bqhd->bkhd", ds, q) * sc
    fold = lambda t: t.reshape(t.shape[0], t.shape[1], k.shape[2], g, t.shape[3]).sum(3)
    return dq.contiguous(), fold(dkk).contiguous(), fold(dvv).contiguous()


class _Comm:
    id, rank, size, mpi_comm, group = 1, 0, 1, None, None


# the stand-in: no library, no MPI
_lib._lib, _lib._info = object(), {"cuda": False, "dtypes": frozenset({0, 1})}
_comm._by_key["mpi-world"] = _comm._by_id[1] = _Comm()
_ops.fwd_impl, _ops.bwd_impl = fwd_standin, bwd_standin

torch.manual_seed(0)
failures = []


def check(name, fn):
    try:
        note = fn()
        print(f"PASS {name}{': ' + note if note else ''}", flush=True)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        failures.append(name)
        print(f"FAIL {name}: {e}", flush=True)


def t_opcheck():
    q = torch.randn(1, 6, 4, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 6, 2, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 6, 2, 8, dtype=torch.float64, requires_grad=True)
    for cu in (None, torch.tensor([0, 2, 3, 6], dtype=torch.int32)):
        for w in ((-1, -1), (2, 0), (1, 3)):
            torch.library.opcheck(torch.ops.distattn.attention_fwd.default,
                                  (q, k, v, cu, 1, "zigzag", w[1] == 0, 0.0) + w)
            o, lse = torch.ops.distattn.attention_fwd(q, k, v, cu, 1, "zigzag", w[1] == 0, 0.0, *w)
            do = torch.randn_like(o)
            torch.library.opcheck(torch.ops.distattn.attention_bwd.default,
                                  (do, q.detach(), k.detach(), v.detach(), o.detach(), lse.detach(), cu, 1,
                                   "zigzag", w[1] == 0, 0.0) + w)
    return "attention_fwd and attention_bwd; unbounded, causal (2, 0), full (1, 3) windows; without and with documents"


def t_gradcheck():
    q = torch.randn(1, 4, 2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 4, 1, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 4, 1, 3, dtype=torch.float64, requires_grad=True)
    for causal, window in ((True, None), (False, None), (True, 2), (False, (1, 2))):
        for cu in (None, torch.tensor([0, 1, 4])):
            assert torch.autograd.gradcheck(
                lambda q, k, v: distattn.attention(q, k, v, causal=causal, window=window, cu_seqlens=cu), (q, k, v))


def t_fake():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q, k = torch.empty(2, 5, 4, 8), torch.empty(2, 5, 2, 8)
        o, lse = torch.ops.distattn.attention_fwd(q, k, k, None, 1, "zigzag", True, 0.0, 3, 0)
        assert o.shape == q.shape and lse.shape == (2, 4, 5) and lse.dtype == torch.float32
        dq, dk, dv = torch.ops.distattn.attention_bwd(o, q, k, k, o, lse, None, 1, "zigzag", True, 0.0, 3, 0)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape


class Block(torch.nn.Module):
    def __init__(self, d=32, h=4, hk=2):
        super().__init__()
        self.h, self.hk, self.dh = h, hk, d // h
        self.wq = torch.nn.Linear(d, d)
        self.wkv = torch.nn.Linear(d, 2 * hk * self.dh)
        self.attn = distattn.DistributedAttention(schedule="zigzag", window=5)
        self.wo = torch.nn.Linear(d, d)

    def forward(self, x, cu_seqlens=None):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.h, self.dh)
        k, v = self.wkv(x).view(b, s, 2, self.hk, self.dh).unbind(2)
        return x + self.wo(self.attn(q, k, v, cu_seqlens=cu_seqlens).reshape(b, s, -1))


def t_compile():
    m = Block()
    x = torch.randn(2, 16, 32, requires_grad=True)
    notes = []
    for cu in (None, torch.tensor([0, 5, 6, 16], dtype=torch.int32)):
        x.grad = None
        ref = m(x, cu)
        ref.sum().backward()
        g_ref = x.grad.clone()
        x.grad = None
        ex = torch._dynamo.explain(m)(x, cu)
        assert ex.graph_break_count == 0, f"{ex.graph_break_count} graph breaks: {ex.break_reasons}"
        cm = torch.compile(m, fullgraph=True)
        out = cm(x, cu)
        out.sum().backward()
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(x.grad, g_ref)
        notes.append(f"{'with' if cu is not None else 'without'} documents: {ex.graph_count} graph(s), "
                     f"{ex.graph_break_count} graph breaks")
    return "; ".join(notes) + "; compiled forward and backward match eager"


check("opcheck", t_opcheck)
check("gradcheck through the custom ops", t_gradcheck)
check("fake tensors", t_fake)
check("torch.compile", t_compile)
print(f"torch {torch.__version__}: {4 - len(failures)} of 4 passed", flush=True)
sys.exit(1 if failures else 0)
