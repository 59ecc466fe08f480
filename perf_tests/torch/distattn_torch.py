# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch binding of DistAttn's C ABI (include/DistAttn/c/distattn.h), loaded with ctypes.

    import distattn_torch as dt
    lib  = dt.load()                                  # $DISTATTN_LIB or the path given
    comm = dt.Communicator.from_torch()               # NCCL, id shared through torch.distributed
    attn = dt.DistributedAttention(comm, "zigzag", batch=1, local_seq=S // P, heads=32,
                                   kv_heads=32, head_dim=128, dtype=torch.bfloat16)
    pos  = attn.positions()                           # global positions of this rank's rows
    q    = q_global.index_select(1, pos)              # [batch, local_seq, heads, head_dim]
    o    = attn(q, k, v)                              # autograd-aware; o sharded like q

Tensors are [batch, local_seq, heads, head_dim] (any strides), CUDA tensors of the
attention's dtype; each rank passes the rows attn.positions() names. Calls run on
torch.cuda.current_stream(). Needs a shared build of the library
(-DBUILD_SHARED_LIBS=ON, libdistattn.so) for CUDA with NCCL.

Communicator choice: under torchrun, Communicator.from_torch() makes DistAttn's own
NCCL communicator: rank 0's ncclUniqueId reaches the others with
torch.distributed.broadcast, so nothing but torch.distributed is needed (no MPI
launcher). Under mpiexec with mpi4py, Communicator.from_mpi(comm.py2f()) uses MPI.
"""
import atexit
import ctypes
import os
import weakref

import torch
import torch.distributed as dist

API_VERSION = 4  # 4: distattn_attention_set_documents (not used here)

EXECUTORS = {"ring": 0, "balanced": 1, "zigzag": 2, "grid2d-no": 3, "grid2d-o": 4, "ulysses": 5, "hybrid": 6}
DTYPES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
STATUS = {0: "success", 1: "invalid argument", 2: "communication error", 3: "unsupported in this build",
          4: "out of memory", 5: "not initialized", 6: "internal error"}


class _Config(ctypes.Structure):
    _fields_ = [("api_version", ctypes.c_int), ("executor", ctypes.c_int), ("dtype", ctypes.c_int),
                ("batch", ctypes.c_int), ("local_seq", ctypes.c_int64), ("heads", ctypes.c_int),
                ("kv_heads", ctypes.c_int), ("head_dim", ctypes.c_int), ("causal", ctypes.c_int),
                ("scale", ctypes.c_double), ("grid_rows", ctypes.c_int), ("grid_cols", ctypes.c_int),
                ("ulysses_degree", ctypes.c_int), ("hybrid_inner", ctypes.c_int), ("head_group", ctypes.c_int),
                ("memory_limit_bytes", ctypes.c_size_t), ("window_left", ctypes.c_int64),
                ("window_right", ctypes.c_int64), ("cu_seqlens", ctypes.POINTER(ctypes.c_int64)),
                ("num_documents", ctypes.c_int64)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_int64 * 4), ("strides", ctypes.c_int64 * 4)]


class DistAttnError(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"{STATUS.get(status, status)}: {message}")
        self.status = status


_lib = None


def load(path=None):
    """Loads libdistattn.so once (path, else $DISTATTN_LIB) and initializes it on the current CUDA device."""
    global _lib
    if _lib is not None:
        return _lib
    path = path or os.environ.get("DISTATTN_LIB")
    if not path:
        raise RuntimeError("distattn_torch.load: pass the path of libdistattn.so or set DISTATTN_LIB")
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    P, I, I64, VP = ctypes.POINTER, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
    T = P(_Tensor)
    sigs = {
        "distattn_api_version": ([], I), "distattn_last_error": ([], ctypes.c_char_p),
        "distattn_has_dtype": ([I], I), "distattn_is_cuda_build": ([], I), "distattn_has_nccl": ([], I),
        "distattn_initialize": ([], I), "distattn_finalize": ([], I),
        "distattn_comm_create_mpi_f": ([I64, P(VP)], I), "distattn_comm_create_nccl": ([VP, P(VP)], I),
        "distattn_nccl_unique_id_bytes": ([], ctypes.c_size_t),
        "distattn_nccl_unique_id": ([VP, ctypes.c_size_t], I),
        "distattn_comm_create_nccl_id": ([VP, ctypes.c_size_t, I, I, P(VP)], I),
        "distattn_comm_destroy": ([VP], I), "distattn_comm_rank": ([VP, P(I)], I),
        "distattn_comm_size": ([VP, P(I)], I),
        "distattn_attention_config_init": ([P(_Config)], I),
        "distattn_attention_create": ([VP, P(_Config), P(VP)], I), "distattn_attention_destroy": ([VP], I),
        "distattn_attention_positions": ([VP, I, P(I64)], I),
        "distattn_attention_forward": ([VP, T, T, T, T, T, VP], I),
        "distattn_attention_backward": ([VP, T, T, T, T, T, T, T, T, T, VP], I),
    }
    for name, (args, res) in sigs.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, res
    if lib.distattn_api_version() != API_VERSION:
        raise RuntimeError(f"{path} implements C API version {lib.distattn_api_version()}, "
                           f"this binding version {API_VERSION}")
    _lib = lib
    _check(lib.distattn_initialize())
    atexit.register(_shutdown)
    return lib


# Handles still open at exit are closed before Kokkos is finalized (attentions first).
_live_attentions, _live_comms = weakref.WeakSet(), weakref.WeakSet()
_finalized = False


def _shutdown():
    global _finalized
    for objs in (_live_attentions, _live_comms):
        for obj in list(objs):
            obj.close()
    _lib.distattn_finalize()
    _finalized = True


def _check(status):
    if status != 0:
        raise DistAttnError(status, _lib.distattn_last_error().decode(errors="replace"))


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream) if _lib.distattn_is_cuda_build() else None


class Communicator:
    """DistAttn's communicator; attentions made with it keep it alive."""

    def __init__(self, handle):
        self._h = ctypes.c_void_p(handle)
        r, n = ctypes.c_int(), ctypes.c_int()
        _check(_lib.distattn_comm_rank(self._h, ctypes.byref(r)))
        _check(_lib.distattn_comm_size(self._h, ctypes.byref(n)))
        self.rank, self.size = r.value, n.value
        _live_comms.add(self)

    @classmethod
    def from_torch(cls, group=None):
        """Own NCCL communicator over torch.distributed's `group` (default: the world), on the
        current CUDA device; collective. The id travels by torch.distributed.broadcast."""
        lib = load()
        n = lib.distattn_nccl_unique_id_bytes()
        if n == 0:
            raise DistAttnError(3, "this DistAttn build has no NCCL backend (configure with -DDistAttn_ENABLE_NCCL=ON)")
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        buf = (ctypes.c_ubyte * n)()
        if rank == 0:
            _check(lib.distattn_nccl_unique_id(ctypes.cast(buf, ctypes.c_void_p), n))
        dev = "cuda" if "nccl" in str(dist.get_backend(group)) else "cpu"
        t = torch.tensor(list(bytes(buf)), dtype=torch.uint8, device=dev)
        dist.broadcast(t, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
        idbuf = (ctypes.c_ubyte * n).from_buffer_copy(bytes(t.cpu().tolist()))
        h = ctypes.c_void_p()
        _check(lib.distattn_comm_create_nccl_id(ctypes.cast(idbuf, ctypes.c_void_p), n, size, rank, ctypes.byref(h)))
        return cls(h.value)

    @classmethod
    def from_mpi(cls, fortran_handle):
        """From an MPI communicator's Fortran handle (mpi4py: MPI.COMM_WORLD.py2f())."""
        h = ctypes.c_void_p()
        _check(load().distattn_comm_create_mpi_f(int(fortran_handle), ctypes.byref(h)))
        return cls(h.value)

    def close(self):
        if not _finalized and getattr(self, "_h", None) and self._h.value:
            _lib.distattn_comm_destroy(self._h)
        self._h = ctypes.c_void_p()

    __del__ = close


def _tensor_arg(t):
    """A distattn_tensor for t: its strides when all positive, else a contiguous copy (returned
    too, to keep it alive). Broadcast (stride 0) tensors, e.g. the gradient of a sum, land here."""
    if t.dim() and min(t.stride()) <= 0:
        t = t.contiguous()
    pad = [0] * (4 - t.dim())
    st = [0, 0, 0, 0] if t.is_contiguous() else list(t.stride()) + pad
    return _Tensor(t.data_ptr(), (ctypes.c_int64 * 4)(*(list(t.shape) + pad)), (ctypes.c_int64 * 4)(*st)), t


class _AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, attn):
        o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        lse = torch.empty((attn.batch, attn.heads, attn.local_seq), dtype=attn.lse_dtype, device=q.device)
        args = [_tensor_arg(t) for t in (q, k, v, o, lse)]
        _check(_lib.distattn_attention_forward(attn._h, *(ctypes.byref(a) for a, _ in args), _stream()))
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.attn = attn
        return o

    @staticmethod
    def backward(ctx, dout):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
        args = [_tensor_arg(t) for t in (q, k, v, o, dout, lse, dq, dk, dv)]
        _check(_lib.distattn_attention_backward(ctx.attn._h, *(ctypes.byref(a) for a, _ in args), _stream()))
        return dq, dk, dv, None


class DistributedAttention(torch.nn.Module):
    """Exact distributed causal (or full) attention of one executor kind over `comm`.

    forward(q, k, v): [batch, local_seq, heads|kv_heads, head_dim] shards -> o, sharded like q.
    Collective: every rank calls it with its shard, in the same order."""

    def __init__(self, comm, executor="zigzag", *, batch, local_seq, heads, kv_heads=None, head_dim,
                 dtype=torch.bfloat16, causal=True, scale=0.0, grid=(0, 0), ulysses_degree=0,
                 hybrid_inner="zigzag", head_group=0, memory_limit_bytes=0):
        super().__init__()
        lib = load()
        if dtype not in DTYPES or not lib.distattn_has_dtype(DTYPES[dtype]):
            raise DistAttnError(3, f"dtype {dtype} is not available in this DistAttn build")
        cfg = _Config()
        _check(lib.distattn_attention_config_init(ctypes.byref(cfg)))
        cfg.executor, cfg.dtype = EXECUTORS[executor], DTYPES[dtype]
        cfg.batch, cfg.local_seq, cfg.heads = batch, local_seq, heads
        cfg.kv_heads, cfg.head_dim, cfg.causal, cfg.scale = kv_heads or heads, head_dim, int(causal), scale
        cfg.grid_rows, cfg.grid_cols, cfg.ulysses_degree = grid[0], grid[1], ulysses_degree
        cfg.hybrid_inner, cfg.head_group, cfg.memory_limit_bytes = EXECUTORS[hybrid_inner], head_group, memory_limit_bytes
        h = ctypes.c_void_p()
        _check(lib.distattn_attention_create(comm._h, ctypes.byref(cfg), ctypes.byref(h)))
        self._h, self._comm = h, comm  # the library keeps the communicator alive too
        self.executor, self.batch, self.local_seq, self.heads = executor, batch, local_seq, heads
        self.dtype = dtype
        self.lse_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        self._positions = {}
        _live_attentions.add(self)

    def positions(self, rank=None):
        """Global positions (int64 CPU tensor) of the local rows of `rank` of the communicator
        (default: this rank)."""
        rank = self._comm.rank if rank is None else rank
        if rank not in self._positions:
            out = torch.empty(self.local_seq, dtype=torch.int64)
            _check(_lib.distattn_attention_positions(self._h, rank, ctypes.cast(out.data_ptr(),
                                                                                 ctypes.POINTER(ctypes.c_int64))))
            self._positions[rank] = out
        return self._positions[rank]

    def forward(self, q, k, v):
        return _AttentionFunction.apply(q, k, v, self)

    def close(self):
        if not _finalized and getattr(self, "_h", None) and self._h.value:
            _lib.distattn_attention_destroy(self._h)
        self._h = ctypes.c_void_p()

    __del__ = close


# ---- token layouts: which global positions rank r of P holds (c tokens per rank) ----

def token_positions(layout, rank, world, local_seq):
    """Positions for the named layout, as the executors place tokens:
    'contiguous' (ring, balanced, ulysses): r c + i;
    'zigzag': halves r and 2P-1-r of 2P blocks (schedule/ring_layout.hpp ring_position);
    'cyclic' (Attention2D): r + i P."""
    i = torch.arange(local_seq, dtype=torch.int64)
    if layout == "contiguous":
        return rank * local_seq + i
    if layout == "zigzag":
        h = local_seq // 2
        block = torch.where(i < h, torch.full_like(i, rank), torch.full_like(i, 2 * world - 1 - rank))
        return block * h + i % h
    if layout == "cyclic":
        return rank + i * world
    raise ValueError(f"unknown layout '{layout}' (contiguous, zigzag, cyclic)")


def shard(x, positions, seq_dim=1):
    """This rank's rows of a global-sequence tensor."""
    return x.index_select(seq_dim, positions.to(x.device))


def gather(x_local, positions, seq_dim=1, group=None):
    """The global-sequence tensor from every rank's shard (collective; positions: this rank's)."""
    world = dist.get_world_size(group)
    parts = [torch.empty_like(x_local) for _ in range(world)]
    dist.all_gather(parts, x_local.contiguous(), group=group)
    all_pos = [torch.empty_like(positions.to(x_local.device)) for _ in range(world)]
    dist.all_gather(all_pos, positions.to(x_local.device), group=group)
    shape = list(x_local.shape)
    shape[seq_dim] *= world
    out = torch.empty(shape, dtype=x_local.dtype, device=x_local.device)
    out.index_copy_(seq_dim, torch.cat(all_pos), torch.cat(parts, dim=seq_dim))
    return out
