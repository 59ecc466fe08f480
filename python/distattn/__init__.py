# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""DistAttn for PyTorch: distributed exact attention over the caller's process group.

    import distattn
    q_local, pos = distattn.shard(q, group)            # this rank's tokens and their position ids
    o_local = distattn.attention(q_local, k_local, v_local, group=group)   # differentiable
    o = distattn.unshard(o_local, group)               # the global tensor again

Every rank of the group calls these functions collectively, in the same order, with
its own shard. See python/README.md."""
import torch

from . import _comm, _lib, _ops
from ._lib import DistAttnError, DistAttnInvalidArgument
from ._ops import EXECUTORS

__all__ = ["attention", "DistributedAttention", "shard", "unshard", "token_positions", "resolve_schedule",
           "DistAttnError", "DistAttnInvalidArgument", "SCHEDULES", "library_version", "USE_CUSTOM_OP"]

SCHEDULES = ("auto",) + tuple(EXECUTORS)
LAYOUTS = ("bshd", "sbhd")
USE_CUSTOM_OP = _ops.USE_CUSTOM_OP


def library_version():
    return _lib.lib().distattn_library_version().decode()


def resolve_schedule(schedule, causal, local_seq):
    """The executor `schedule` names; "auto" is "zigzag" when local_seq is even, else
    "balanced" (causal) or "grid2d-o" (full attention). A fixed rule, not the cost model."""
    if not isinstance(schedule, str) or schedule not in SCHEDULES:
        raise ValueError(f"distattn: schedule: '{schedule}' is not one of {', '.join(SCHEDULES)}")
    if schedule != "auto":
        return schedule
    if local_seq % 2 == 0:
        return "zigzag"
    return "balanced" if causal else "grid2d-o"


def _window_bounds(window):
    """(window_left, window_right) for the C ABI from `window`: None is unbounded (-1, -1), an int
    W >= 0 is (W, 0), a pair (left, right) of ints >= 0 is itself. Anything else: ValueError."""
    if window is None:
        return -1, -1
    is_int = lambda x: isinstance(x, int) and not isinstance(x, bool) and x < 2**63  # int64 in the C ABI
    if is_int(window) and window >= 0:
        return window, 0
    if isinstance(window, (tuple, list)) and len(window) == 2 and all(is_int(x) and x >= 0 for x in window):
        return int(window[0]), int(window[1])
    raise ValueError(f"distattn.attention: window: expected None, an int W >= 0 (the causal sliding window "
                     f"(W, 0)) or a pair (left, right) of ints >= 0, got {window!r}")


def _check_tensors(q, k, v, layout):
    info = _lib.info()
    cuda_build = info["cuda"]
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"distattn.attention: {name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"distattn.attention: {name}: expected 4 dimensions ({layout}), got shape "
                             f"{tuple(t.shape)}")
        if _ops.DTYPES.get(t.dtype) not in info["dtypes"]:
            ok = [str(d).replace("torch.", "") for d, c in _ops.DTYPES.items() if c in info["dtypes"]]
            raise TypeError(f"distattn.attention: {name}: dtype {str(t.dtype).replace('torch.', '')} is not "
                            f"supported by this DistAttn build (supported: {', '.join(ok)})")
        if t.device.type != "meta" and (t.device.type == "cuda") != cuda_build:
            want = "CUDA" if cuda_build else "CPU"
            raise ValueError(f"distattn.attention: {name}: a {want} tensor is needed (this DistAttn build "
                             f"computes on the {'GPU' if cuda_build else 'host'}), got device {t.device}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"distattn.attention: q, k, v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"distattn.attention: q, k, v must be on one device, got {q.device}, {k.device}, "
                         f"{v.device}")
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(f"distattn.attention: k and v must have one shape, got {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")


def _check_cu_seqlens(cu_seqlens, q):
    """Local checks of cu_seqlens' type (its values are the library's to check, on every rank)."""
    if cu_seqlens is None:
        return
    if not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError(f"distattn.attention: cu_seqlens: expected None or a torch.Tensor, got "
                        f"{type(cu_seqlens).__name__}")
    if cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"distattn.attention: cu_seqlens: expected dtype int32 or int64, got "
                        f"{str(cu_seqlens.dtype).replace('torch.', '')}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(f"distattn.attention: cu_seqlens: expected a 1-D tensor of documents + 1 >= 2 offsets, "
                         f"got shape {tuple(cu_seqlens.shape)}")
    if cu_seqlens.device.type not in ("cpu", "meta") and cu_seqlens.device != q.device:
        raise ValueError(f"distattn.attention: cu_seqlens: expected host memory or q's device {q.device}, got "
                         f"{cu_seqlens.device}")


def attention(q, k, v, group=None, schedule="auto", causal=True, scale=None, layout="bshd", return_lse=False,
              cu_seqlens=None, window=None):
    """Exact attention over the sequence split across `group`'s ranks.

    q: [batch, local_seq, heads, head_dim] (layout "bshd") or [local_seq, batch, heads, head_dim]
    ("sbhd"); k, v: the same with kv_heads (dividing heads). Each rank passes the tokens the
    schedule's layout gives it (distattn.shard). Returns o, shaped like q, and with
    return_lse=True also the log-sum-exp [batch, heads, local_seq] (fp32; fp64 for fp64 inputs;
    not differentiable). scale: None for 1/sqrt(head_dim). window: the key window, None for
    unbounded; (left, right) with ints >= 0: the query at global position p sees keys in
    [p - left, p + right]; an int W is (W, 0), with causal=True the sliding window of W + 1 keys
    (p - W ... p). With causal=True the library clips right to 0.

    cu_seqlens: packed documents, None for one sequence. A 1-D int32 or int64 tensor (host or
    device) of documents + 1 global offsets: the first 0, non-decreasing, the last the global
    sequence length (local_seq x ranks; with causal=True it may be less, the tokens after it a
    padded tail). Offsets are global positions, as distattn.token_positions gives them; a query
    sees keys of its own document only (on top of causal and the window), in every batch row.
    Every rank passes the same offsets; they may change from call to call (one executor serves
    every packing). Bad offsets fail on every rank with DistAttnInvalidArgument naming
    cu_seqlens. Collective over the group."""
    window_left, window_right = _window_bounds(window)
    if layout == "thd":
        raise NotImplementedError("distattn.attention: layout 'thd' is not supported yet: pass the packed "
                                  "tokens as bshd with batch 1, and their documents as cu_seqlens")
    if layout not in LAYOUTS:
        raise ValueError(f"distattn.attention: layout: '{layout}' is not one of {', '.join(LAYOUTS)}")
    _check_tensors(q, k, v, layout)
    _check_cu_seqlens(cu_seqlens, q)
    if layout == "sbhd":
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    b, s, h, d = q.shape
    if k.shape[0] != b or k.shape[1] != s or k.shape[3] != d:
        raise ValueError(f"distattn.attention: k: shape {tuple(k.shape)} does not go with q's {tuple(q.shape)} "
                         f"(batch, local_seq and head_dim must agree; layout bshd)")
    if k.shape[2] < 1 or h % k.shape[2] != 0:
        raise ValueError(f"distattn.attention: k: {k.shape[2]} kv heads do not divide q's {h} heads")
    if scale is None:
        scale = 0.0
    elif not isinstance(scale, (int, float)) or not scale > 0 or scale == float("inf"):
        raise ValueError(f"distattn.attention: scale: expected None or a positive finite number, got {scale!r}")
    kind = resolve_schedule(schedule, causal, s)
    comm = _comm.get(group)
    o, lse = _ops.attention_op(q, k, v, comm.id, kind, bool(causal), float(scale), window_left, window_right,
                               cu_seqlens)
    if layout == "sbhd":
        o = o.transpose(0, 1)
    return (o, lse.detach()) if return_lse else o


class DistributedAttention(torch.nn.Module):
    """distattn.attention as a module: forward(q, k, v, cu_seqlens=None) with the options given
    here (shapes and documents are per call). `window` is checked here, when the module is made."""

    def __init__(self, group=None, schedule="auto", causal=True, scale=None, layout="bshd", window=None):
        super().__init__()
        _window_bounds(window)
        self.group, self.schedule, self.causal, self.scale, self.layout = group, schedule, causal, scale, layout
        self.window = window

    def forward(self, q, k, v, return_lse=False, cu_seqlens=None):
        return attention(q, k, v, group=self.group, schedule=self.schedule, causal=self.causal, scale=self.scale,
                         layout=self.layout, return_lse=return_lse, window=self.window, cu_seqlens=cu_seqlens)

    def extra_repr(self):
        return (f"schedule={self.schedule!r}, causal={self.causal}, scale={self.scale}, layout={self.layout!r}, "
                f"window={self.window!r}")


def token_positions(seq_len, group=None, schedule="auto", causal=True, rank=None, heads=None, kv_heads=None):
    """Global positions (int64 CPU tensor of seq_len / ranks entries) of the tokens `rank` (default:
    this rank) holds in the layout of `schedule`: the position ids for RoPE, and what shard and
    unshard use. Asks the C ABI (distattn_attention_positions) of a small executor of the
    schedule, made collectively on first use. heads/kv_heads matter to "hybrid" only (default:
    the number of ranks)."""
    comm = _comm.get(group)
    if not isinstance(seq_len, int) or seq_len <= 0 or seq_len % comm.size:
        raise ValueError(f"distattn: seq_len: {seq_len!r} is not a positive multiple of the group's "
                         f"{comm.size} ranks")
    local = seq_len // comm.size
    kind = resolve_schedule(schedule, causal, local)
    heads = heads or comm.size
    kv_heads = kv_heads or heads
    dtype = next(d for d, c in _ops.DTYPES.items() if c in _lib.info()["dtypes"])
    e = _ops.executor(comm.id, kind, dtype, 1, local, heads, kv_heads, 8, bool(causal), 0.0)
    return e.positions(comm.rank if rank is None else rank)


def shard(x, group=None, schedule="auto", causal=True, seq_dim=1, heads=None, kv_heads=None):
    """(this rank's part of the global tensor x along seq_dim, its position ids). Collective."""
    pos = token_positions(x.shape[seq_dim], group, schedule, causal, heads=heads, kv_heads=kv_heads)
    return x.index_select(seq_dim, pos.to(x.device)), pos


def unshard(x_local, group=None, schedule="auto", causal=True, seq_dim=1, heads=None, kv_heads=None):
    """The global tensor from every rank's part (the inverse of shard). Collective; not
    differentiable."""
    comm = _comm.get(group)
    n = comm.size
    seq_len = x_local.shape[seq_dim] * n
    pos = torch.cat([token_positions(seq_len, group, schedule, causal, rank=r, heads=heads, kv_heads=kv_heads)
                     for r in range(n)])
    x_local = x_local.detach().contiguous()
    if comm.mpi_comm is not None:
        import numpy as np
        a = x_local.cpu().numpy()
        buf = np.empty((n,) + a.shape, dtype=a.dtype)
        comm.mpi_comm.Allgather(a, buf)
        parts = list(torch.from_numpy(buf).to(x_local.device).unbind(0))
    else:
        import torch.distributed as dist
        parts = [torch.empty_like(x_local) for _ in range(n)]
        dist.all_gather(parts, x_local, group=comm.group)
    shape = list(x_local.shape)
    shape[seq_dim] = seq_len
    out = x_local.new_empty(shape)
    out.index_copy_(seq_dim, pos.to(x_local.device), torch.cat(parts, dim=seq_dim))
    return out
