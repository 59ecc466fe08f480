# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Loading libdistattn.so (the C ABI, include/DistAttn/c/distattn.h) with ctypes.

The library is the one shipped in the package (distattn/lib/libdistattn.so) unless
DISTATTN_LIB names another. On host builds MPI carries the communication: mpi4py is
imported (which initializes MPI and loads libmpi for the whole process) before
distattn_initialize, as the C ABI requires."""
import atexit
import ctypes
import os

API_VERSION = 4  # 4: distattn_attention_set_documents

STATUS = {0: "success", 1: "invalid argument", 2: "communication error", 3: "unsupported in this build",
          4: "out of memory", 5: "not initialized", 6: "internal error"}


class DistAttnError(RuntimeError):
    """A failed C ABI call; the message names the function and the argument (and, for
    collective calls, the rank). `status` is the C ABI's distattn_status."""

    def __init__(self, status, message):
        super().__init__(f"{STATUS.get(status, status)}: {message}")
        self.status = status


class DistAttnInvalidArgument(DistAttnError, ValueError):
    """DISTATTN_ERROR_INVALID_ARGUMENT: also a ValueError."""


class Config(ctypes.Structure):
    _fields_ = [("api_version", ctypes.c_int), ("executor", ctypes.c_int), ("dtype", ctypes.c_int),
                ("batch", ctypes.c_int), ("local_seq", ctypes.c_int64), ("heads", ctypes.c_int),
                ("kv_heads", ctypes.c_int), ("head_dim", ctypes.c_int), ("causal", ctypes.c_int),
                ("scale", ctypes.c_double), ("grid_rows", ctypes.c_int), ("grid_cols", ctypes.c_int),
                ("ulysses_degree", ctypes.c_int), ("hybrid_inner", ctypes.c_int), ("head_group", ctypes.c_int),
                ("memory_limit_bytes", ctypes.c_size_t), ("window_left", ctypes.c_int64),
                ("window_right", ctypes.c_int64), ("cu_seqlens", ctypes.POINTER(ctypes.c_int64)),
                ("num_documents", ctypes.c_int64)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_int64 * 4), ("strides", ctypes.c_int64 * 4)]


_lib = None
_info = None  # the build's properties as plain Python values (no ctypes call where torch.compile traces)
_finalized = False
_closers = []  # called at exit before distattn_finalize (executors first, then communicators)


def library_path():
    return os.environ.get("DISTATTN_LIB") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib",
                                                          "libdistattn.so")


def lib():
    """The loaded and initialized library (loaded on first use)."""
    global _lib, _info
    if _lib is None:
        handle = _load(library_path())
        _info = {"cuda": bool(handle.distattn_is_cuda_build()),
                 "dtypes": frozenset(c for c in range(4) if handle.distattn_has_dtype(c))}
        _lib = handle
    return _lib


def info():
    """{"cuda": CUDA build?, "dtypes": the C ABI dtype codes this build computes in}."""
    if _info is None:
        lib()
    return _info


def _load(path):
    if not os.path.exists(path):
        raise ImportError(f"distattn: the library {path} does not exist: install the package with "
                          f"'pip install ./python' from a DistAttn checkout, or set DISTATTN_LIB")
    handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    P, I, I64, VP = ctypes.POINTER, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
    T = P(Tensor)
    handle.distattn_api_version.argtypes, handle.distattn_api_version.restype = [], I
    if handle.distattn_api_version() != API_VERSION:  # before looking up functions an older library lacks
        raise ImportError(f"distattn: {path} implements C API version {handle.distattn_api_version()}, "
                          f"this package version {API_VERSION}")
    sigs = {
        "distattn_api_version": ([], I), "distattn_last_error": ([], ctypes.c_char_p),
        "distattn_library_version": ([], ctypes.c_char_p),
        "distattn_has_dtype": ([I], I), "distattn_is_cuda_build": ([], I), "distattn_has_nccl": ([], I),
        "distattn_initialize": ([], I), "distattn_finalize": ([], I),
        "distattn_comm_create_mpi_f": ([I64, P(VP)], I),
        "distattn_nccl_unique_id_bytes": ([], ctypes.c_size_t),
        "distattn_nccl_unique_id": ([VP, ctypes.c_size_t], I),
        "distattn_comm_create_nccl_id": ([VP, ctypes.c_size_t, I, I, P(VP)], I),
        "distattn_comm_destroy": ([VP], I), "distattn_comm_rank": ([VP, P(I)], I),
        "distattn_comm_size": ([VP, P(I)], I),
        "distattn_attention_config_init": ([P(Config)], I),
        "distattn_attention_create": ([VP, P(Config), P(VP)], I), "distattn_attention_destroy": ([VP], I),
        "distattn_attention_invalidate_saved": ([VP], I),
        "distattn_attention_set_documents": ([VP, P(I64), I64], I),
        "distattn_attention_positions": ([VP, I, P(I64)], I),
        "distattn_attention_forward": ([VP, T, T, T, T, T, VP], I),
        "distattn_attention_backward": ([VP, T, T, T, T, T, T, T, T, T, VP], I),
    }
    for name, (args, res) in sigs.items():
        f = getattr(handle, name)
        f.argtypes, f.restype = args, res
    if not handle.distattn_is_cuda_build():
        from mpi4py import MPI  # noqa: F401  (MPI_Init before distattn_initialize; its exit hook runs after ours)
    _check(handle, handle.distattn_initialize())
    atexit.register(_shutdown, handle)
    return handle


def _shutdown(handle):
    global _finalized
    for close in reversed(list(_closers)):
        close()
    handle.distattn_finalize()
    _finalized = True


def finalized():
    return _finalized


def _check(handle, status):
    if status != 0:
        msg = handle.distattn_last_error().decode(errors="replace")
        raise (DistAttnInvalidArgument if status == 1 else DistAttnError)(status, msg)


def check(status):
    """Raises the C ABI's error for a failed status."""
    _check(lib(), status)
