# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""DistAttn communicators for the caller's process group, made once per group and cached.

Host builds (MPI): the group's members, in the group's rank order, become an MPI
sub-communicator of MPI_COMM_WORLD (mpi4py's Comm.Create_group, collective over the
members only); their MPI ranks are exchanged over the torch group itself, so torch's
ranks need not equal MPI's. With group=None and torch.distributed not initialized,
MPI_COMM_WORLD is used. The C ABI duplicates the communicator it is given.

CUDA builds with NCCL: DistAttn's own NCCL communicator over the group, its unique id
broadcast by torch.distributed (as perf_tests/torch did; not yet tested through this
package)."""
import ctypes

import torch

from . import _lib

_by_key = {}  # group key -> Communicator
_by_id = {}   # Communicator.id -> Communicator (the torch ops name communicators by this integer)


class Communicator:
    def __init__(self, handle, key, mpi_comm=None, group=None):
        self._h = ctypes.c_void_p(handle)
        r, n = ctypes.c_int(), ctypes.c_int()
        _lib.check(_lib.lib().distattn_comm_rank(self._h, ctypes.byref(r)))
        _lib.check(_lib.lib().distattn_comm_size(self._h, ctypes.byref(n)))
        self.rank, self.size = r.value, n.value
        self.key, self.mpi_comm, self.group = key, mpi_comm, group
        self.id = len(_by_id) + 1
        _by_id[self.id] = self

    @property
    def handle(self):
        return self._h

    def close(self):
        if not _lib.finalized() and self._h.value:
            _lib.lib().distattn_comm_destroy(self._h)
        self._h = ctypes.c_void_p()
        if self.mpi_comm is not None and self.key != "mpi-world":
            try:
                from mpi4py import MPI
                if not MPI.Is_finalized():
                    self.mpi_comm.Free()
            except Exception:
                pass
            self.mpi_comm = None


def _close_all():
    for c in list(_by_id.values()):
        c.close()
    _by_id.clear()
    _by_key.clear()


_lib._closers.append(_close_all)


def _torch_dist_ready():
    import torch.distributed as dist
    return dist.is_available() and dist.is_initialized()


def by_id(cid):
    return _by_id[cid]


def get(group=None):
    """The communicator of `group` (a torch.distributed ProcessGroup, or None: the default
    group, or MPI_COMM_WORLD when torch.distributed is not initialized). Collective over the
    group the first time it is seen."""
    cuda = _lib.info()["cuda"]
    if group is None and not _torch_dist_ready():
        if cuda:
            raise RuntimeError("distattn: on CUDA builds pass a torch.distributed group or initialize "
                               "torch.distributed (the NCCL communicator is derived from it)")
        key = "mpi-world"
    else:
        if not _torch_dist_ready():
            raise RuntimeError("distattn: group was given but torch.distributed is not initialized")
        import torch.distributed as dist
        group = group if group is not None else dist.group.WORLD
        if dist.get_rank(group) < 0:
            raise ValueError("distattn: group: this process is not a member of the group it passed")
        key = group
    c = _by_key.get(key)
    if c is None:
        c = _make_cuda(group) if cuda else _make_mpi(key, group)
        _by_key[key] = c
    return c


def _make_mpi(key, group):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    if key == "mpi-world":
        mpi_comm = world
    else:
        import torch.distributed as dist
        ranks = [None] * dist.get_world_size(group)
        dist.all_gather_object(ranks, world.Get_rank(), group=group)
        if len(set(ranks)) != len(ranks):
            raise RuntimeError(f"distattn: group: its members are not distinct MPI processes (MPI ranks {ranks}); "
                               "launch one process per torch rank with mpiexec")
        wgroup = world.Get_group()
        sub = wgroup.Incl(ranks)
        mpi_comm = world.Create_group(sub)
        sub.Free()
        wgroup.Free()
    h = ctypes.c_void_p()
    _lib.check(_lib.lib().distattn_comm_create_mpi_f(mpi_comm.py2f(), ctypes.byref(h)))
    return Communicator(h.value, key, mpi_comm=mpi_comm, group=group)


def _make_cuda(group):
    import torch.distributed as dist
    L = _lib.lib()
    n = L.distattn_nccl_unique_id_bytes()
    if n == 0:
        raise _lib.DistAttnError(3, "this DistAttn build has no NCCL backend (configure with -DDistAttn_ENABLE_NCCL=ON)")
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    buf = (ctypes.c_ubyte * n)()
    if rank == 0:
        _lib.check(L.distattn_nccl_unique_id(ctypes.cast(buf, ctypes.c_void_p), n))
    dev = "cuda" if "nccl" in str(dist.get_backend(group)) else "cpu"
    t = torch.tensor(list(bytes(buf)), dtype=torch.uint8, device=dev)
    global_rank = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank
    dist.broadcast(t, src=global_rank(group, 0) if group is not dist.group.WORLD else 0, group=group)
    idbuf = (ctypes.c_ubyte * n).from_buffer_copy(bytes(t.cpu().tolist()))
    h = ctypes.c_void_p()
    _lib.check(L.distattn_comm_create_nccl_id(ctypes.cast(idbuf, ctypes.c_void_p), n, size, rank, ctypes.byref(h)))
    return Communicator(h.value, group, group=group)
