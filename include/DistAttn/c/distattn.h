/* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception */
#ifndef DISTATTN_C_DISTATTN_H
#define DISTATTN_C_DISTATTN_H
/* DistAttn's C ABI: distributed exact attention for C, Fortran, ctypes and other
 * foreign callers (docs/design/c_abi.md).
 *
 * Pure C99. Every function returns a distattn_status; on failure
 * distattn_last_error() holds a message (thread-local) naming the function and
 * the offending argument. No C++ exception crosses this boundary.
 *
 * Collective calls (distattn_comm_create_mpi_f / _nccl, distattn_attention_create,
 * _set_documents, _forward, _backward) check their arguments on each rank, then agree (one small
 * all-gather over the communicator) before acting: a bad argument on any rank
 * fails the call on every rank with the same status and a message naming that
 * rank and the argument; differing configs fail naming the fields and each
 * rank's value; ranks in different calls fail naming the calls. What has no
 * group to agree over fails on the calling rank only: a NULL or destroyed handle
 * (comm, attn), a Fortran handle MPI does not know, MPI not initialized,
 * distattn_comm_create_nccl_id's arguments, and NCCL calls before
 * distattn_initialize. The other ranks then wait in their call: in DistAttn's
 * agreement until the communicator's timeout (DISTATTN_COMM_TIMEOUT, 30 s), which
 * aborts the job unless DISTATTN_COMM_TIMEOUT_POLICY=throw (then
 * DISTATTN_ERROR_COMMUNICATION); in ncclCommInitRank as NCCL decides. The other
 * calls do not agree: they check their arguments on the calling rank only.
 *
 * Lifetime:
 *   distattn_initialize()                    Kokkos, once per process (after MPI_Init when MPI is used)
 *   distattn_comm_create_mpi[_f] / _nccl*    a communicator (collective)
 *   distattn_attention_create(comm, &cfg)    an executor (collective over comm)
 *   distattn_attention_forward / _backward   any number of passes (collective)
 *   distattn_attention_set_documents         another packing between passes (collective)
 *   distattn_attention_destroy, distattn_comm_destroy, distattn_finalize
 *
 * Tensors are raw pointers with strides in elements, in the memory the build
 * computes in (device memory on CUDA builds, host memory on host builds):
 *   q, o, dO, dq   [batch, local_seq, heads,    head_dim]
 *   k, v, dk, dv   [batch, local_seq, kv_heads, head_dim]
 *   lse            [batch, heads, local_seq], fp32 (fp64 for DISTATTN_FP64), natural log
 * where local_seq is this rank's number of tokens; which global positions they
 * are depends on the executor (distattn_attention_positions). */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of this header; distattn_api_version()
 * reports the version the library was built with. */
/* 2: distattn_attention_config gained the key window; 3: packed documents (cu_seqlens);
 * 4: distattn_attention_set_documents. */
#define DISTATTN_C_API_VERSION 4

#if defined(_WIN32)
#define DISTATTN_C_EXPORT __declspec(dllexport)
#else
#define DISTATTN_C_EXPORT __attribute__((visibility("default")))
#endif

typedef enum distattn_status {
  DISTATTN_SUCCESS                = 0,
  DISTATTN_ERROR_INVALID_ARGUMENT = 1, /* a caller bug: shapes, pointers, configuration */
  DISTATTN_ERROR_COMMUNICATION    = 2, /* a peer, transport or device failed */
  DISTATTN_ERROR_UNSUPPORTED      = 3, /* not available in this build (dtype, NCCL, CUDA) */
  DISTATTN_ERROR_OUT_OF_MEMORY    = 4,
  DISTATTN_ERROR_NOT_INITIALIZED  = 5, /* distattn_initialize() was not called */
  DISTATTN_ERROR_INTERNAL         = 6
} distattn_status;

typedef enum distattn_dtype {
  DISTATTN_FP32 = 0,
  DISTATTN_FP64 = 1, /* host builds only */
  DISTATTN_FP16 = 2, /* CUDA builds only */
  DISTATTN_BF16 = 3  /* CUDA builds only */
} distattn_dtype;

typedef enum distattn_executor {
  DISTATTN_RING_VANILLA  = 0, /* contiguous chunks, causal only */
  DISTATTN_RING_BALANCED = 1, /* contiguous chunks, causal only */
  DISTATTN_RING_ZIGZAG   = 2, /* zigzag halves (local_seq even) */
  DISTATTN_GRID2D_NO     = 3, /* Attention2D, cyclic tokens */
  DISTATTN_GRID2D_O      = 4, /* Attention2D, cyclic tokens */
  DISTATTN_ULYSSES       = 5, /* contiguous chunks, all-to-all over heads */
  DISTATTN_HYBRID        = 6  /* Ulysses over heads x hybrid_inner over the sequence */
} distattn_executor;

typedef struct distattn_comm_s* distattn_comm;
typedef struct distattn_attention_s* distattn_attention;

/* What distattn_attention_create builds. Fill with
 * distattn_attention_config_init, then set the extents. Every rank passes the
 * same values, compared bit for bit (scale: -0 as 0), except memory_limit_bytes,
 * a bound on each rank's own workspace (the executors agree on the head group it
 * leads to), and the cu_seqlens pointer (the offsets it points to are compared).
 * An enum field holding a value outside its enumeration is an error. */
typedef struct distattn_attention_config {
  int api_version; /* DISTATTN_C_API_VERSION, set by config_init */
  distattn_executor executor;
  distattn_dtype dtype;
  int batch;
  int64_t local_seq; /* tokens per rank, the same on every rank */
  int heads;
  int kv_heads; /* divides heads (grouped-query attention) */
  int head_dim;
  int causal;   /* 1: causal over global positions (default); 0: full attention */
  double scale; /* softmax scale; 0: 1/sqrt(head_dim) */
  int grid_rows, grid_cols;      /* Attention2D grid (own or hybrid inner); 0: chosen */
  int ulysses_degree;            /* DISTATTN_HYBRID: U; 0: largest valid */
  distattn_executor hybrid_inner; /* DISTATTN_HYBRID: RING_* or GRID2D_* */
  int head_group;                 /* kv heads per pass; 0: chosen from memory */
  size_t memory_limit_bytes;      /* workspace bound per rank; 0: free device memory */
  /* Key window in tokens: the query at global position p sees keys in
   * [p - window_left, p + window_right] (window_right is 0 when causal);
   * -1 leaves a side unbounded (the default). {W, 0} with causal = 1 is the
   * causal sliding window of width W. */
  int64_t window_left;
  int64_t window_right;
  /* Packed documents: a query sees keys of its own document only (on top of
   * causal and the window). cu_seqlens points to num_documents + 1 global
   * offsets in host memory: the first 0, non-decreasing, the last the global
   * sequence length (local_seq x ranks; with causal = 1 it may be less, the
   * tokens after it a padded tail). Offsets are global positions, as
   * distattn_attention_positions gives them. The library copies the offsets at
   * create: the array may be freed after distattn_attention_create returns.
   * Every rank passes the same offsets (compared through num_documents and a
   * hash of the offsets; the pointers may differ). num_documents = 0 (the
   * default): one sequence, cu_seqlens ignored. */
  const int64_t* cu_seqlens;
  int64_t num_documents;
} distattn_attention_config;

/* One tensor argument: data, shape, and strides in elements, outermost first
 * (lse uses the first three entries). The shape must be the one the attention
 * was created for (checked on every rank); strides all 0 mean row-major. */
typedef struct distattn_tensor {
  void* data;
  int64_t shape[4];
  int64_t strides[4];
} distattn_tensor;

/* ---- version, errors, process setup ---------------------------------------- */
DISTATTN_C_EXPORT int distattn_api_version(void);
/* "0.1.0" style library version. */
DISTATTN_C_EXPORT const char* distattn_library_version(void);
/* Message of the last failed call on this thread ("" if none). */
DISTATTN_C_EXPORT const char* distattn_last_error(void);
DISTATTN_C_EXPORT const char* distattn_status_string(distattn_status status);
/* 1 if this build computes in dtype (DISTATTN_FP32, ...), else 0. */
DISTATTN_C_EXPORT int distattn_has_dtype(distattn_dtype dtype);
/* 1 on CUDA builds (pointers are device pointers, streams cudaStream_t), else 0. */
DISTATTN_C_EXPORT int distattn_is_cuda_build(void);
/* 1 where the NCCL communicator functions are available. */
DISTATTN_C_EXPORT int distattn_has_nccl(void);

/* Initializes Kokkos unless the process already did; on CUDA builds on the
 * current CUDA device (cudaSetDevice / torch.cuda.set_device first). */
DISTATTN_C_EXPORT distattn_status distattn_initialize(void);
/* Finalizes Kokkos if distattn_initialize initialized it. Destroy every
 * attention and communicator first. */
DISTATTN_C_EXPORT distattn_status distattn_finalize(void);

/* ---- communicators (collective over their group) ---------------------------- */
/* From the Fortran handle of an MPI communicator (MPI_Comm_c2f(comm); mpi4py:
 * comm.py2f()), which keeps this header free of mpi.h. The communicator is
 * duplicated: the caller's stays the caller's. An intracommunicator only. A
 * handle MPI does not know (outside MPI_Fint, freed, not a communicator's) is an
 * error on the calling rank alone, never MPI's fatal error handler: it is probed
 * with MPI_ERRORS_RETURN set on MPI_COMM_WORLD and MPI_COMM_SELF, and the
 * agreement runs with it set on the caller's communicator, each restored after
 * (do not change those error handlers from another thread meanwhile). */
DISTATTN_C_EXPORT distattn_status distattn_comm_create_mpi_f(int64_t mpi_fortran_handle, distattn_comm* out);
/* NCCL (CUDA builds with NCCL): wrap an existing ncclComm_t (not owned; it
 * must outlive the communicator and every attention made with it). Collective:
 * the ranks agree over it. */
DISTATTN_C_EXPORT distattn_status distattn_comm_create_nccl(void* nccl_comm, distattn_comm* out);
/* NCCL without MPI: rank 0 calls distattn_nccl_unique_id, the id reaches
 * every rank by any means (e.g. torch.distributed.broadcast), then every rank
 * calls distattn_comm_create_nccl_id on the current CUDA device. Owning. Its
 * arguments are checked on each rank alone (there is no communicator yet). */
DISTATTN_C_EXPORT size_t distattn_nccl_unique_id_bytes(void);
DISTATTN_C_EXPORT distattn_status distattn_nccl_unique_id(void* id, size_t id_bytes);
DISTATTN_C_EXPORT distattn_status distattn_comm_create_nccl_id(const void* id, size_t id_bytes, int nranks,
                                                                int rank, distattn_comm* out);
DISTATTN_C_EXPORT distattn_status distattn_comm_rank(distattn_comm comm, int* rank);
DISTATTN_C_EXPORT distattn_status distattn_comm_size(distattn_comm comm, int* size);
/* Attentions made with the communicator keep it alive; destroying it only
 * drops the caller's reference. NULL is accepted. */
DISTATTN_C_EXPORT distattn_status distattn_comm_destroy(distattn_comm comm);

/* ---- attention -------------------------------------------------------------- */
DISTATTN_C_EXPORT distattn_status distattn_attention_config_init(distattn_attention_config* config);
/* Collective over comm: every rank passes the same config (see
 * distattn_attention_config); a bad or mismatched config, or a NULL config or
 * out, on any rank fails on every rank with the same status. */
DISTATTN_C_EXPORT distattn_status distattn_attention_create(distattn_comm comm,
                                                            const distattn_attention_config* config,
                                                            distattn_attention* out);
DISTATTN_C_EXPORT distattn_status distattn_attention_destroy(distattn_attention attn);
/* Drops what the last forward kept for backward (see distattn_attention_backward):
 * the next backward rebuilds it. Local (no communication); any rank may call it
 * alone, since the ranks agree on reuse at the next backward. */
DISTATTN_C_EXPORT distattn_status distattn_attention_invalidate_saved(distattn_attention attn);
/* Replaces the packed documents for the following passes, as create's
 * cu_seqlens and num_documents would set them (same rules; num_documents = 0:
 * one sequence): a training loop keeps one attention while every batch packs
 * its documents differently. The offsets are copied: the array may be freed on
 * return. Collective: checked on each rank, then agreed (num_documents and a
 * hash of the offsets); bad or differing offsets fail on every rank naming
 * cu_seqlens or num_documents, and the attention keeps its documents. On
 * success what the last forward kept is dropped, and a backward before the next
 * forward fails (DISTATTN_ERROR_INVALID_ARGUMENT): its o and lse came from the
 * old documents. The token layout (distattn_attention_positions) does not
 * change. */
DISTATTN_C_EXPORT distattn_status distattn_attention_set_documents(distattn_attention attn, const int64_t* cu_seqlens,
                                                                   int64_t num_documents);
/* positions[i]: the global position (0-based, in the sequence of local_seq x
 * ranks tokens) of local row i of `rank`, for i < local_seq: how callers shard
 * and gather. Local (no communication). */
DISTATTN_C_EXPORT distattn_status distattn_attention_positions(distattn_attention attn, int rank, int64_t* positions);

/* Forward: o and lse from q, k, v. `stream` is a cudaStream_t on CUDA builds
 * (NULL: the default stream) and must be NULL on host builds; the call is
 * ordered after work already on it and the outputs are ready in its order.
 * Collective; an invalid argument on any rank fails the call on every rank. */
DISTATTN_C_EXPORT distattn_status distattn_attention_forward(distattn_attention attn, const distattn_tensor* q,
                                                             const distattn_tensor* k, const distattn_tensor* v,
                                                             const distattn_tensor* o, const distattn_tensor* lse,
                                                             void* stream);
/* Backward: dq, dk, dv (overwritten) from the forward's inputs, o, lse and dO.
 * Saved inputs: Ulysses, the hybrid and Attention2D keep what their forward
 * derived from q, k, v (their head-side or permuted copies) and reuse it in
 * backward only when every rank passes the same tensors with unchanged content
 * (a content fingerprint of the inputs is taken in forward and compared in
 * backward): new data computed into the forward's buffers is always seen.
 * distattn_attention_invalidate_saved drops the kept state outright, sparing
 * that comparison's read when the caller knows the inputs changed. */
DISTATTN_C_EXPORT distattn_status distattn_attention_backward(
    distattn_attention attn, const distattn_tensor* q, const distattn_tensor* k, const distattn_tensor* v,
    const distattn_tensor* o, const distattn_tensor* dout, const distattn_tensor* lse, const distattn_tensor* dq,
    const distattn_tensor* dk, const distattn_tensor* dv, void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* C callers that include mpi.h first get the typed form. */
#if defined(MPI_VERSION)
static inline distattn_status distattn_comm_create_mpi(MPI_Comm comm, distattn_comm* out) {
  return distattn_comm_create_mpi_f((int64_t)MPI_Comm_c2f(comm), out);
}
#endif

#endif /* DISTATTN_C_DISTATTN_H */
