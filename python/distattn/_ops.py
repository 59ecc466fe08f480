# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The torch ops over the C ABI and their autograd.

Two ops, in the namespace `distattn`:
  attention_fwd(q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left, window_right) -> (o, lse)
  attention_bwd(dout, q, k, v, o, lse, cu_seqlens, comm, schedule, causal, scale, window_left,
                window_right) -> (dq, dk, dv)
q, o, dout, dq: [batch, local_seq, heads, head_dim]; k, v, dk, dv: [batch, local_seq, kv_heads,
head_dim] (any positive strides); lse: [batch, heads, local_seq], fp32 (fp64 for fp64 inputs).
`comm` is a communicator id (_comm.Communicator.id), `schedule` an executor name (never
"auto": distattn.attention resolves it), `scale` 0.0 for 1/sqrt(head_dim), `window_left`/`window_right` the key window in tokens (the
query at global position p sees keys in [p - window_left, p + window_right]; -1 leaves a side
unbounded; the library clips window_right to 0 when causal). `cu_seqlens` (optional, int32 or
int64, any device) holds the packed documents' global offsets: the first 0, non-decreasing, the
last the global sequence length (the library checks the values on every rank).

One registration path per torch API, chosen by feature detection:
  torch >= 2.4: torch.library.custom_op + register_fake + register_autograd;
  older (Debian's 1.13): torch.library.Library define/impl (CPU, CUDA, and Meta for the
  fake implementation) and a torch.autograd.Function calling the ops.

Executors are cached by (communicator, schedule, dtype, shape, causal, scale, window): shapes
are per call. Documents are not part of the key: every batch packs them differently, so a
cached executor is given the call's offsets (distattn_attention_set_documents, collective)
when they differ from those it holds. A backward whose documents are no longer the
executor's (another batch's forward ran in between) sets them back and runs the forward
again first: the library refuses a backward after a documents change without a forward,
since o and lse belong to the documents of their forward. Saved inputs: an executor keeps what its last forward derived from q, k, v for its
backward. Before each backward the package compares the backward's q, k, v (data pointer
and torch version counter) with those of the executor's last forward and calls
distattn_attention_invalidate_saved when any differs; when they agree, the C ABI still
compares a content fingerprint (issue #35, item 1), so data written behind torch's back
(e.g. through .data) is also seen."""
import collections
import ctypes

import torch

from . import _comm, _lib

EXECUTORS = {"ring": 0, "balanced": 1, "zigzag": 2, "grid2d-no": 3, "grid2d-o": 4, "ulysses": 5, "hybrid": 6}
DTYPES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
MAX_EXECUTORS = 64

USE_CUSTOM_OP = all(hasattr(torch.library, n) for n in ("custom_op", "register_fake", "register_autograd"))


def lse_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


class Executor:
    """One distattn_attention (collective to create)."""

    def __init__(self, comm, schedule, dtype, batch, local_seq, heads, kv_heads, head_dim, causal, scale,
                 window_left, window_right):
        L = _lib.lib()
        cfg = _lib.Config()
        _lib.check(L.distattn_attention_config_init(ctypes.byref(cfg)))
        cfg.executor, cfg.dtype = EXECUTORS[schedule], DTYPES[dtype]
        cfg.batch, cfg.local_seq, cfg.heads, cfg.kv_heads = batch, local_seq, heads, kv_heads
        cfg.head_dim, cfg.causal, cfg.scale = head_dim, int(causal), float(scale)
        cfg.window_left, cfg.window_right = int(window_left), int(window_right)
        h = ctypes.c_void_p()
        _lib.check(L.distattn_attention_create(comm.handle, ctypes.byref(cfg), ctypes.byref(h)))
        self._h, self.comm, self.local_seq = h, comm, local_seq
        self.last_forward = None  # (data_ptr, _version) of the last forward's q, k, v
        self.documents = None  # the offsets the handle holds (int64 CPU tensor), None: one sequence
        self._positions = {}

    def use_documents(self, offsets):
        """Makes `offsets` (None or an int64 CPU tensor) the handle's documents; True when they
        changed. Collective, and called by every rank on every pass even when its offsets did not
        change: skipping it locally would leave a rank whose offsets differ from the others' in
        another collective (a hang); the library agrees on them and changes nothing when equal."""
        changed = not ((offsets is None and self.documents is None) or (
            offsets is not None and self.documents is not None and torch.equal(offsets, self.documents)))
        n = 0 if offsets is None else offsets.numel() - 1
        ptr = None if offsets is None else ctypes.cast(offsets.data_ptr(), ctypes.POINTER(ctypes.c_int64))
        _lib.check(_lib.lib().distattn_attention_set_documents(self._h, ptr, n))
        if changed:
            self.documents, self.last_forward = offsets, None
        return changed

    @property
    def handle(self):
        return self._h

    def positions(self, rank):
        if rank not in self._positions:
            out = torch.empty(self.local_seq, dtype=torch.int64)
            _lib.check(_lib.lib().distattn_attention_positions(
                self._h, rank, ctypes.cast(out.data_ptr(), ctypes.POINTER(ctypes.c_int64))))
            self._positions[rank] = out
        return self._positions[rank]

    def close(self):
        if not _lib.finalized() and self._h.value:
            _lib.lib().distattn_attention_destroy(self._h)
        self._h = ctypes.c_void_p()


_executors = collections.OrderedDict()


def _close_all():
    for e in _executors.values():
        e.close()
    _executors.clear()


_lib._closers.append(_close_all)


def executor(comm_id, schedule, dtype, batch, local_seq, heads, kv_heads, head_dim, causal, scale,
             window_left=-1, window_right=-1):
    """The cached executor for these options (made, collectively, on first use). Every rank
    makes the same calls in the same order, so eviction (least recently used beyond
    MAX_EXECUTORS) is the same on every rank; destroying is local."""
    key = (comm_id, schedule, dtype, batch, local_seq, heads, kv_heads, head_dim, bool(causal), float(scale),
           int(window_left), int(window_right))
    e = _executors.get(key)
    if e is None:
        e = Executor(_comm.by_id(comm_id), *key[1:])
        _executors[key] = e
        while len(_executors) > MAX_EXECUTORS:
            _executors.popitem(last=False)[1].close()
    else:
        _executors.move_to_end(key)
    return e


def _stamp(*ts):
    return tuple((t.data_ptr(), t._version) for t in ts)


def _arg(t):
    """A distattn_tensor for t (its strides when all positive, else a contiguous copy,
    returned too to keep it alive: broadcast gradients, e.g. of a sum, have stride 0)."""
    if t.dim() and min(t.stride()) <= 0:
        t = t.contiguous()
    st = [0, 0, 0, 0] if t.is_contiguous() else list(t.stride()) + [0] * (4 - t.dim())
    shape = list(t.shape) + [0] * (4 - t.dim())
    return _lib.Tensor(t.data_ptr(), (ctypes.c_int64 * 4)(*shape), (ctypes.c_int64 * 4)(*st)), t


def _stream(device):
    if _lib.info()["cuda"]:
        return ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)
    return None


def _executor_for(q, k, comm, schedule, causal, scale, window_left, window_right):
    b, s, h, d = q.shape
    return executor(comm, schedule, q.dtype, b, s, h, k.shape[2], d, causal, scale, window_left, window_right)


def host_offsets(cu_seqlens):
    """cu_seqlens as the C ABI reads them: int64 in host memory, contiguous (None stays None)."""
    if cu_seqlens is None:
        return None
    return cu_seqlens.detach().to(device="cpu", dtype=torch.int64).contiguous()


def _forward(e, q, k, v):
    b, s, h, _ = q.shape
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((b, h, s), dtype=lse_dtype(q.dtype), device=q.device)
    args = [_arg(t) for t in (q, k, v, o, lse)]
    _lib.check(_lib.lib().distattn_attention_forward(e.handle, *(ctypes.byref(a) for a, _ in args),
                                                      _stream(q.device)))
    e.last_forward = _stamp(q, k, v)
    return o, lse


def fwd_impl(q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left, window_right):
    e = _executor_for(q, k, comm, schedule, causal, scale, window_left, window_right)
    e.use_documents(host_offsets(cu_seqlens))
    return _forward(e, q, k, v)


def bwd_impl(dout, q, k, v, o, lse, cu_seqlens, comm, schedule, causal, scale, window_left, window_right):
    e = _executor_for(q, k, comm, schedule, causal, scale, window_left, window_right)
    if e.use_documents(host_offsets(cu_seqlens)):
        _forward(e, q, k, v)  # the library's state for these documents (its o and lse equal the saved ones)
    if e.last_forward != _stamp(q, k, v):
        _lib.check(_lib.lib().distattn_attention_invalidate_saved(e.handle))
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    args = [_arg(t) for t in (q, k, v, o, dout, lse, dq, dk, dv)]
    _lib.check(_lib.lib().distattn_attention_backward(e.handle, *(ctypes.byref(a) for a, _ in args),
                                                       _stream(q.device)))
    return dq, dk, dv


def fwd_fake(q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left, window_right):
    b, s, h, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((b, h, s), dtype=lse_dtype(q.dtype))


def bwd_fake(dout, q, k, v, o, lse, cu_seqlens, comm, schedule, causal, scale, window_left, window_right):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


FWD_SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens, int comm, str schedule, bool causal, "
              "float scale, int window_left, int window_right) -> (Tensor, Tensor)")
BWD_SCHEMA = ("(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor? cu_seqlens, int comm, "
              "str schedule, bool causal, float scale, int window_left, int window_right) "
              "-> (Tensor, Tensor, Tensor)")
N_OPTS = 7  # the inputs of attention_fwd after v (cu_seqlens ... window_right): no gradient

if USE_CUSTOM_OP:
    from typing import Optional, Tuple

    Tensor = torch.Tensor

    @torch.library.custom_op("distattn::attention_fwd", mutates_args=())
    def attention_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Optional[Tensor], comm: int, schedule: str,
                      causal: bool, scale: float, window_left: int, window_right: int) -> Tuple[Tensor, Tensor]:
        return fwd_impl(q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left, window_right)

    @torch.library.custom_op("distattn::attention_bwd", mutates_args=())
    def attention_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                      cu_seqlens: Optional[Tensor], comm: int, schedule: str, causal: bool, scale: float,
                      window_left: int, window_right: int) -> Tuple[Tensor, Tensor, Tensor]:
        return bwd_impl(dout, q, k, v, o, lse, cu_seqlens, comm, schedule, causal, scale, window_left,
                        window_right)

    torch.library.register_fake("distattn::attention_fwd", fwd_fake)
    torch.library.register_fake("distattn::attention_bwd", bwd_fake)

    def _setup_context(ctx, inputs, output):
        q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left, window_right = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse, cu_seqlens)
        ctx.opts = (comm, schedule, causal, scale, window_left, window_right)

    def _backward(ctx, dout, dlse):
        q, k, v, o, lse, cu_seqlens = ctx.saved_tensors
        if dout is None:
            return (None,) * (3 + N_OPTS)
        dq, dk, dv = torch.ops.distattn.attention_bwd(dout, q, k, v, o, lse, cu_seqlens, *ctx.opts)
        return (dq, dk, dv) + (None,) * N_OPTS

    torch.library.register_autograd("distattn::attention_fwd", _backward, setup_context=_setup_context)

    def attention_op(q, k, v, comm, schedule, causal, scale, window_left=-1, window_right=-1, cu_seqlens=None):
        return torch.ops.distattn.attention_fwd(q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left,
                                                window_right)

else:
    _library = torch.library.Library("distattn", "DEF")
    _library.define("attention_fwd" + FWD_SCHEMA)
    _library.define("attention_bwd" + BWD_SCHEMA)
    for _key in ("CPU", "CUDA"):
        _library.impl("attention_fwd", fwd_impl, _key)
        _library.impl("attention_bwd", bwd_impl, _key)
    # Meta is the fake implementation; torch 1.13 has no autograd fallthrough for meta
    # tensors, so AutogradMeta takes it too (shape propagation only, no graph).
    for _key in ("Meta", "AutogradMeta"):
        _library.impl("attention_fwd", fwd_fake, _key)
        _library.impl("attention_bwd", bwd_fake, _key)

    class _Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left, window_right):
            o, lse = torch.ops.distattn.attention_fwd(q, k, v, cu_seqlens, comm, schedule, causal, scale,
                                                      window_left, window_right)
            ctx.save_for_backward(q, k, v, o, lse, cu_seqlens)
            ctx.opts = (comm, schedule, causal, scale, window_left, window_right)
            ctx.mark_non_differentiable(lse)
            return o, lse

        @staticmethod
        def backward(ctx, dout, dlse):
            q, k, v, o, lse, cu_seqlens = ctx.saved_tensors
            dq, dk, dv = torch.ops.distattn.attention_bwd(dout, q, k, v, o, lse, cu_seqlens, *ctx.opts)
            return (dq, dk, dv) + (None,) * N_OPTS

    def attention_op(q, k, v, comm, schedule, causal, scale, window_left=-1, window_right=-1, cu_seqlens=None):
        return _Attention.apply(q, k, v, cu_seqlens, comm, schedule, causal, scale, window_left, window_right)
