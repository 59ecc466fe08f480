/* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception */
/* The C ABI (include/DistAttn/c/distattn.h) from a C program on MPI ranks:
 * forward and backward of every executor kind, fp32 and fp64, against a naive
 * float64 reference of the gathered sequence (also with key windows and packed
 * documents), with q/dq in a strided [batch, heads, seq, dim] layout; then the
 * error paths (a bad config on every rank or on one rank only, a NULL tensor or
 * 'out' on one rank, a host stream, an unavailable dtype, enum fields outside
 * their enumeration, MPI handles MPI does not know, each agreed config field
 * differing on one rank, bad or differing cu_seqlens, ranks in different calls),
 * each of which must fail on every rank, naming the argument (and the rank, or
 * the field and the ranks' values).
 * Fresh random inputs each run (the seed is printed). Exit status 1 on any failure. */

/* mpi.h first: distattn.h then offers distattn_comm_create_mpi(MPI_Comm, ...). */
#include <mpi.h>
#include <DistAttn/c/distattn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank_, size_, failures_;

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      ++failures_;                                                      \
      printf("[rank %d] FAILED %s:%d: ", rank_, __FILE__, __LINE__);   \
      printf(__VA_ARGS__);                                              \
      printf("\n");                                                     \
    }                                                                   \
  } while (0)

/* ---- inputs and the float64 reference (global sequence, layout [B, N, H, D]) ---- */

static unsigned long long rng_;
static double uniform(void) { /* splitmix64 -> [-1, 1) */
  unsigned long long z = (rng_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Key window of the next problems and configs (-1: unbounded), as config_init leaves it. */
static int64_t window_left_ = -1, window_right_ = -1;
/* Packed documents of the next problems and configs: num_documents_ + 1 global
 * offsets (0: none, as config_init leaves it). */
enum { kMaxDocs = 64 };
static int64_t documents_[kMaxDocs + 1];
static int64_t num_documents_ = 0;

typedef struct {
  int B, N, H, Hkv, D, causal;
  double *q, *k, *v, *dout;        /* inputs */
  double *o, *lse, *dq, *dk, *dv;  /* reference outputs */
} problem;

static size_t at4(int n1, int n2, int n3, int a, int b, int c, int d) {
  return (((size_t)a * n1 + b) * n2 + c) * n3 + d;
}

static double* fresh(size_t n, int random) {
  double* p = calloc(n, sizeof *p);
  if (random)
    for (size_t i = 0; i < n; ++i) p[i] = uniform();
  return p;
}

/* Naive attention in double: P = softmax(scale q k^T) (causal: key <= query; the
 * window: key within [query - left, query + right]; documents: key in the
 * query's document, the last d with documents_[d] <= query),
 * O = P v; backward dV = P^T dO, dP = dO v^T, dS = P (dP - rowsum(dO * O)),
 * dQ = scale dS k, dK = scale dS^T q; K/V head of query head h: h / (H / Hkv). */
static void reference(problem* p) {
  const int B = p->B, N = p->N, H = p->H, Hkv = p->Hkv, D = p->D;
  const double scale = 1.0 / sqrt((double)D);
  double* s = malloc(sizeof(double) * (size_t)N);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int g = h / (H / Hkv);
      for (int i = 0; i < N; ++i) {
        int last        = p->causal ? i : N - 1;
        int first       = window_left_ >= 0 && i - window_left_ > 0 ? (int)(i - window_left_) : 0;
        if (!p->causal && window_right_ >= 0 && i + window_right_ < last) last = (int)(i + window_right_);
        if (num_documents_ > 0) {
          int64_t d = 0;
          while (d + 1 < num_documents_ && documents_[d + 1] <= i) ++d;
          if (first < documents_[d]) first = (int)documents_[d];
          if (d + 1 < num_documents_ && last > documents_[d + 1] - 1) last = (int)documents_[d + 1] - 1;
        }
        double m = -INFINITY, l = 0, delta = 0;
        for (int j = first; j <= last; ++j) {
          double x = 0;
          for (int d = 0; d < D; ++d) x += p->q[at4(N, H, D, b, i, h, d)] * p->k[at4(N, Hkv, D, b, j, g, d)];
          s[j] = x * scale;
          if (s[j] > m) m = s[j];
        }
        for (int j = first; j <= last; ++j) l += exp(s[j] - m);
        p->lse[((size_t)b * H + h) * N + i] = m + log(l);
        for (int j = first; j <= last; ++j) s[j] = exp(s[j] - m) / l; /* P row i */
        for (int d = 0; d < D; ++d) {
          double x = 0;
          for (int j = first; j <= last; ++j) x += s[j] * p->v[at4(N, Hkv, D, b, j, g, d)];
          p->o[at4(N, H, D, b, i, h, d)] = x;
          delta += x * p->dout[at4(N, H, D, b, i, h, d)];
        }
        for (int j = first; j <= last; ++j) {
          double dp = 0;
          for (int d = 0; d < D; ++d) dp += p->dout[at4(N, H, D, b, i, h, d)] * p->v[at4(N, Hkv, D, b, j, g, d)];
          const double ds = s[j] * (dp - delta);
          for (int d = 0; d < D; ++d) {
            p->dv[at4(N, Hkv, D, b, j, g, d)] += s[j] * p->dout[at4(N, H, D, b, i, h, d)];
            p->dq[at4(N, H, D, b, i, h, d)] += scale * ds * p->k[at4(N, Hkv, D, b, j, g, d)];
            p->dk[at4(N, Hkv, D, b, j, g, d)] += scale * ds * p->q[at4(N, H, D, b, i, h, d)];
          }
        }
      }
    }
  free(s);
}

/* Fresh random documents over N tokens (the same on every rank: the seed is shared):
 * a length-1 document, an empty one, then random lengths up to 2.5 ranks' rows, so
 * documents both end inside a rank and span several. */
static void random_documents(int N, int rows_per_rank) {
  int64_t at = 1;
  documents_[0] = 0, documents_[1] = 1, documents_[2] = 1;
  num_documents_ = 2;
  while (at < N && num_documents_ < kMaxDocs) {
    at += 1 + (int64_t)((uniform() + 1) / 2 * (2.5 * rows_per_rank));
    if (at > N || num_documents_ + 1 == kMaxDocs) at = N;
    documents_[++num_documents_] = at;
  }
}

static problem make_problem(int B, int N, int H, int Hkv, int D, int causal) {
  problem p = {B, N, H, Hkv, D, causal, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const size_t nq = (size_t)B * N * H * D, nk = (size_t)B * N * Hkv * D;
  p.q = fresh(nq, 1), p.k = fresh(nk, 1), p.v = fresh(nk, 1), p.dout = fresh(nq, 1);
  p.o = fresh(nq, 0), p.lse = fresh((size_t)B * H * N, 0), p.dq = fresh(nq, 0), p.dk = fresh(nk, 0),
  p.dv = fresh(nk, 0);
  reference(&p);
  return p;
}

static void free_problem(problem* p) {
  double* all[] = {p->q, p->k, p->v, p->dout, p->o, p->lse, p->dq, p->dk, p->dv};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) free(all[i]);
}

/* ---- this rank's shard in the element type, and the comparison ---------------- */

/* A local tensor [B, c, heads, D] stored with `strides` (in elements). */
typedef struct {
  void* data;
  int64_t strides[4];
  size_t elems;
} local_tensor;

static local_tensor alloc_local(size_t elems, size_t elem_bytes, const int64_t strides[4]) {
  local_tensor t;
  t.data  = calloc(elems, elem_bytes);
  t.elems = elems;
  memcpy(t.strides, strides, sizeof t.strides);
  return t;
}

static double get(const local_tensor* t, int fp64, size_t off) {
  return fp64 ? ((const double*)t->data)[off] : (double)((const float*)t->data)[off];
}
static void set(local_tensor* t, int fp64, size_t off, double x) {
  if (fp64)
    ((double*)t->data)[off] = x;
  else
    ((float*)t->data)[off] = (float)x;
}
static size_t off4(const local_tensor* t, int a, int b, int c, int d) {
  return (size_t)(a * t->strides[0] + b * t->strides[1] + c * t->strides[2] + d * t->strides[3]);
}

/* Copies global rows (positions pos[i]) of a [B, N, heads, D] tensor into a local one. */
static void scatter(local_tensor* t, int fp64, const double* g, const int64_t* pos, int B, int c, int N, int heads,
                    int D) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < c; ++i)
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < D; ++d) set(t, fp64, off4(t, b, i, h, d), g[at4(N, heads, D, b, (int)pos[i], h, d)]);
}

/* Relative Frobenius error of the local rows against the reference, summed over ranks. */
static double rel_error(const local_tensor* t, int fp64, const double* g, const int64_t* pos, int B, int c, int N,
                        int heads, int D) {
  double nd[2] = {0, 0}, all[2];
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < c; ++i)
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < D; ++d) {
          const double r = g[at4(N, heads, D, b, (int)pos[i], h, d)];
          const double e = get(t, fp64, off4(t, b, i, h, d)) - r;
          nd[0] += e * e;
          nd[1] += r * r;
        }
  MPI_Allreduce(nd, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sqrt(all[0] / all[1]);
}

static const char* executor_name(distattn_executor e) {
  static const char* names[] = {"ring", "balanced", "zigzag", "grid2d-no", "grid2d-o", "ulysses", "hybrid"};
  return names[e];
}

static void expect_error(distattn_status got, distattn_status want, const char* needle, const char* what);

/* How check_executor_case runs its handle. */
typedef enum {
  /* create, forward, backward */
  PLAIN,
  /* The handle that runs the backward saw other data in the same buffers in its
   * last forward (the caller recomputed new inputs in place), and the forward of
   * the data it differentiates ran on a second handle: the backward must still
   * be that of the new data. */
  STALE,
  /* The handle is created with other documents and runs a forward under them;
   * distattn_attention_set_documents then gives it the case's documents. A
   * backward before the next forward is refused on every rank; the forward and
   * backward after it are those of the case's documents. */
  REDOCUMENT
} case_mode;

/* One forward + backward of `executor` against the reference. */
static void check_executor_case(distattn_comm comm, distattn_executor executor, distattn_executor inner, int fp64,
                                int causal, case_mode mode) {
  const int stale = mode == STALE;
  const int B = 2, c = 4, H = 6, D = 8, N = c * size_;
  /* Ulysses splits heads over the ranks: one K/V head divides every rank count. */
  const int Hkv = executor >= DISTATTN_ULYSSES ? 1 : 3;
  problem p = make_problem(B, N, H, Hkv, D, causal);

  distattn_attention_config cfg;
  distattn_attention_config_init(&cfg);
  cfg.executor = executor, cfg.hybrid_inner = inner, cfg.dtype = fp64 ? DISTATTN_FP64 : DISTATTN_FP32;
  cfg.batch = B, cfg.local_seq = c, cfg.heads = H, cfg.kv_heads = Hkv, cfg.head_dim = D, cfg.causal = causal;
  cfg.window_left = window_left_, cfg.window_right = window_right_;
  /* The offsets in a buffer freed right after create: the library keeps its own copy. */
  int64_t* offsets = NULL;
  if (num_documents_ > 0) {
    offsets = malloc(sizeof(int64_t) * (size_t)(num_documents_ + 1));
    memcpy(offsets, documents_, sizeof(int64_t) * (size_t)(num_documents_ + 1));
  }
  cfg.cu_seqlens = offsets, cfg.num_documents = num_documents_;
  /* REDOCUMENT: created with no documents when the case has some, else with two. */
  const int64_t created_with[] = {0, 1, N};
  if (mode == REDOCUMENT) cfg.cu_seqlens = num_documents_ > 0 ? NULL : created_with;
  if (mode == REDOCUMENT) cfg.num_documents = num_documents_ > 0 ? 0 : 2;
  distattn_attention attn = NULL;
  distattn_status st      = distattn_attention_create(comm, &cfg, &attn);
  if (offsets) memset(offsets, 0xff, sizeof(int64_t) * (size_t)(num_documents_ + 1));
  free(offsets);
  CHECK(st == DISTATTN_SUCCESS, "create %s: %s", executor_name(executor), distattn_last_error());
  if (st != DISTATTN_SUCCESS) {
    free_problem(&p);
    return;
  }
  int64_t pos[64];
  CHECK(distattn_attention_positions(attn, rank_, pos) == DISTATTN_SUCCESS, "positions: %s", distattn_last_error());

  const size_t eb = fp64 ? sizeof(double) : sizeof(float);
  const size_t nq = (size_t)B * c * H * D, nk = (size_t)B * c * Hkv * D;
  const int64_t row_major_q[4] = {(int64_t)c * H * D, H * D, D, 1};
  const int64_t row_major_k[4] = {(int64_t)c * Hkv * D, Hkv * D, D, 1};
  /* q and dq stored [B, H, c, D] (what a transposed torch tensor looks like). */
  const int64_t heads_first[4] = {(int64_t)H * c * D, D, (int64_t)c * D, 1};
  local_tensor q = alloc_local(nq, eb, heads_first), k = alloc_local(nk, eb, row_major_k),
               v = alloc_local(nk, eb, row_major_k), o = alloc_local(nq, eb, row_major_q),
               dout = alloc_local(nq, eb, row_major_q), dq = alloc_local(nq, eb, heads_first),
               dk = alloc_local(nk, eb, row_major_k), dv = alloc_local(nk, eb, row_major_k);
  void* lse = calloc((size_t)B * H * c, eb); /* LSE is fp32 for fp32, fp64 for fp64 */
  distattn_attention first = NULL; /* with `stale`: the handle that saw the old data */
  if (stale) {
    first = attn;
    st    = distattn_attention_create(comm, &cfg, &attn);
    CHECK(st == DISTATTN_SUCCESS, "create a second %s: %s", executor_name(executor), distattn_last_error());
  }
  scatter(&q, fp64, p.q, pos, B, c, N, H, D);
  scatter(&k, fp64, p.k, pos, B, c, N, Hkv, D);
  scatter(&v, fp64, p.v, pos, B, c, N, Hkv, D);
  scatter(&dout, fp64, p.dout, pos, B, c, N, H, D);

  /* Row-major tensors are passed with strides 0 (the default), the others with theirs. */
#define SHAPE_Q {B, c, H, D}
#define SHAPE_K {B, c, Hkv, D}
#define HEADS_FIRST {heads_first[0], heads_first[1], heads_first[2], heads_first[3]}
  distattn_tensor tq = {q.data, SHAPE_Q, HEADS_FIRST}, tk = {k.data, SHAPE_K, {0}}, tv = {v.data, SHAPE_K, {0}};
  distattn_tensor to = {o.data, SHAPE_Q, {0}}, tdo = {dout.data, SHAPE_Q, {0}}, tl = {lse, {B, H, c}, {0}};
  distattn_tensor tdq = {dq.data, SHAPE_Q, HEADS_FIRST}, tdk = {dk.data, SHAPE_K, {0}}, tdv = {dv.data, SHAPE_K, {0}};

  if (stale) {
    /* `first` keeps what it derived from old data in these very buffers; then
     * the caller computes the new data into them. */
    problem old = make_problem(B, N, H, Hkv, D, causal);
    scatter(&q, fp64, old.q, pos, B, c, N, H, D);
    scatter(&k, fp64, old.k, pos, B, c, N, Hkv, D);
    scatter(&v, fp64, old.v, pos, B, c, N, Hkv, D);
    free_problem(&old);
    st = distattn_attention_forward(first, &tq, &tk, &tv, &to, &tl, NULL);
    CHECK(st == DISTATTN_SUCCESS, "forward (old data) %s: %s", executor_name(executor), distattn_last_error());
    scatter(&q, fp64, p.q, pos, B, c, N, H, D);
    scatter(&k, fp64, p.k, pos, B, c, N, Hkv, D);
    scatter(&v, fp64, p.v, pos, B, c, N, Hkv, D);
  }
  if (mode == REDOCUMENT) {
    st = distattn_attention_forward(attn, &tq, &tk, &tv, &to, &tl, NULL);
    CHECK(st == DISTATTN_SUCCESS, "forward (created documents) %s: %s", executor_name(executor), distattn_last_error());
    /* The offsets from a buffer freed right after the call: the library copies them. */
    int64_t* next = num_documents_ > 0 ? malloc(sizeof(int64_t) * (size_t)(num_documents_ + 1)) : NULL;
    if (next) memcpy(next, documents_, sizeof(int64_t) * (size_t)(num_documents_ + 1));
    st = distattn_attention_set_documents(attn, next, num_documents_);
    if (next) memset(next, 0xff, sizeof(int64_t) * (size_t)(num_documents_ + 1));
    free(next);
    CHECK(st == DISTATTN_SUCCESS, "set_documents %s: %s", executor_name(executor), distattn_last_error());
    expect_error(distattn_attention_backward(attn, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, NULL),
                 DISTATTN_ERROR_INVALID_ARGUMENT, "forward", "backward after set_documents without a forward");
  }
  st = distattn_attention_forward(attn, &tq, &tk, &tv, &to, &tl, NULL);
  CHECK(st == DISTATTN_SUCCESS, "forward %s: %s", executor_name(executor), distattn_last_error());
  if (stale) {
    /* ...and differentiates the new data. */
    CHECK(distattn_attention_destroy(attn) == DISTATTN_SUCCESS, "destroy: %s", distattn_last_error());
    attn = first;
  }
  st = distattn_attention_backward(attn, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv, NULL);
  CHECK(st == DISTATTN_SUCCESS, "backward %s: %s", executor_name(executor), distattn_last_error());

  const double tol = fp64 ? 1e-10 : 1e-4;
  double lse_nd[2] = {0, 0}, lse_all[2];
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < c; ++i) {
        const size_t li = ((size_t)b * H + h) * c + i;
        const double got = fp64 ? ((double*)lse)[li] : (double)((float*)lse)[li];
        const double r   = p.lse[((size_t)b * H + h) * N + pos[i]];
        lse_nd[0] += (got - r) * (got - r), lse_nd[1] += r * r;
      }
  MPI_Allreduce(lse_nd, lse_all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double err[5] = {rel_error(&o, fp64, p.o, pos, B, c, N, H, D), sqrt(lse_all[0] / lse_all[1]),
                         rel_error(&dq, fp64, p.dq, pos, B, c, N, H, D),
                         rel_error(&dk, fp64, p.dk, pos, B, c, N, Hkv, D),
                         rel_error(&dv, fp64, p.dv, pos, B, c, N, Hkv, D)};
  const char* names[5] = {"O", "LSE", "dQ", "dK", "dV"};
  for (int x = 0; x < 5; ++x)
    CHECK(err[x] <= tol, "%s%s%s %s causal=%d window=%lld,%lld documents=%lld%s: %s rel_error %.3e > %.1e",
          executor_name(executor), executor == DISTATTN_HYBRID ? "/" : "",
          executor == DISTATTN_HYBRID ? executor_name(inner) : "", fp64 ? "fp64" : "fp32", causal,
          (long long)window_left_, (long long)window_right_, (long long)num_documents_,
          stale ? " (inputs recomputed in place)" : mode == REDOCUMENT ? " (documents set after create)" : "",
          names[x], err[x], tol);
  if (rank_ == 0)
    printf("%-10s%-10s %s causal=%d window=%lld,%lld docs=%lld%s  rel_error O %.2e LSE %.2e dQ %.2e dK %.2e dV %.2e\n",
           executor_name(executor), executor == DISTATTN_HYBRID ? executor_name(inner) : "", fp64 ? "fp64" : "fp32",
           causal, (long long)window_left_, (long long)window_right_, (long long)num_documents_,
           stale ? " recomputed" : mode == REDOCUMENT ? " set_documents" : "", err[0], err[1], err[2], err[3], err[4]);
  CHECK(distattn_attention_invalidate_saved(attn) == DISTATTN_SUCCESS, "invalidate: %s", distattn_last_error());

  local_tensor* all[] = {&q, &k, &v, &o, &dout, &dq, &dk, &dv};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) free(all[i]->data);
  free(lse);
  CHECK(distattn_attention_destroy(attn) == DISTATTN_SUCCESS, "destroy: %s", distattn_last_error());
  free_problem(&p);
}

static void check_executor(distattn_comm comm, distattn_executor executor, distattn_executor inner, int fp64,
                           int causal) {
  check_executor_case(comm, executor, inner, fp64, causal, PLAIN);
}

/* ---- error paths: every rank gets the status and a message naming the argument ---- */

static void expect_error(distattn_status got, distattn_status want, const char* needle, const char* what) {
  const char* msg = distattn_last_error();
  CHECK(got == want, "%s: status %d (%s), expected %d; message: %s", what, (int)got, distattn_status_string(got),
        (int)want, msg);
  CHECK(strstr(msg, needle) != NULL, "%s: message does not name '%s': %s", what, needle, msg);
  if (rank_ == 0) printf("error path %-34s -> %s: %s\n", what, distattn_status_string(got), msg);
}

static distattn_attention_config small_config(void) {
  distattn_attention_config cfg;
  distattn_attention_config_init(&cfg);
  cfg.executor = DISTATTN_RING_ZIGZAG, cfg.batch = 1, cfg.local_seq = 4, cfg.heads = 2, cfg.kv_heads = 2;
  cfg.head_dim = 8;
  return cfg;
}

static void check_errors(distattn_comm comm) {
  distattn_attention attn = NULL;
  distattn_attention_config cfg = small_config();

  cfg.batch = 0; /* on every rank */
  expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, "batch",
               "batch = 0 on every rank");
  CHECK(attn == NULL, "a failed create must leave *out NULL");

  if (size_ > 1) {
    cfg = small_config();
    if (rank_ == size_ - 1) cfg.local_seq = 6; /* one rank differs: agreement, not a hang */
    expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, "local_seq",
                 "local_seq differs on the last rank");
  }

  cfg = small_config();
  if (rank_ == 0) cfg.heads = 3; /* kv_heads 2 does not divide it, on rank 0 only */
  expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, "heads",
               "heads = 3 on rank 0 only");

  cfg = small_config();
  cfg.local_seq = 3;
  expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, "local_seq",
               "odd local_seq for zigzag");

  cfg = small_config();
  cfg.api_version = DISTATTN_C_API_VERSION + 1;
  expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, "api_version",
               "wrong api_version");

  cfg = small_config();
  cfg.dtype = DISTATTN_BF16;
  if (!distattn_has_dtype(DISTATTN_BF16))
    expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_UNSUPPORTED, "dtype",
                 "bf16 on a build without it");

  if (!distattn_has_nccl()) {
    char id[8];
    expect_error(distattn_nccl_unique_id(id, sizeof id), DISTATTN_ERROR_UNSUPPORTED, "NCCL", "NCCL id without NCCL");
  }

  /* Passes: a NULL data pointer on rank 0 only, and a stream on a host build. */
  cfg = small_config();
  distattn_status st = distattn_attention_create(comm, &cfg, &attn);
  CHECK(st == DISTATTN_SUCCESS, "create: %s", distattn_last_error());
  if (st != DISTATTN_SUCCESS) return;
  const size_t n = 1 * 4 * 2 * 8;
  float *buf = calloc(6 * n, sizeof(float)), *lse = calloc(8, sizeof(float));
  distattn_tensor q = {buf, {1, 4, 2, 8}, {0}}, k = {buf + n, {1, 4, 2, 8}, {0}}, v = {buf + 2 * n, {1, 4, 2, 8}, {0}};
  distattn_tensor o = {buf + 3 * n, {1, 4, 2, 8}, {0}}, l = {lse, {1, 2, 4}, {0}};
  if (rank_ == 0) q.data = NULL;
  expect_error(distattn_attention_forward(attn, &q, &k, &v, &o, &l, NULL), DISTATTN_ERROR_INVALID_ARGUMENT, "'q'",
               "NULL q on rank 0 only");
  q.data = buf;
  expect_error(distattn_attention_forward(attn, &q, &k, &v, &o, rank_ == 0 ? NULL : &l, NULL),
               DISTATTN_ERROR_INVALID_ARGUMENT, "'lse'", "lse NULL on rank 0 only");
  if (rank_ == size_ - 1) k.shape[1] = 2;
  expect_error(distattn_attention_forward(attn, &q, &k, &v, &o, &l, NULL), DISTATTN_ERROR_INVALID_ARGUMENT,
               "'k' has shape", "2 tokens of k on the last rank");
  k.shape[1] = 4;
  if (!distattn_is_cuda_build()) {
    int dummy = 0;
    expect_error(distattn_attention_forward(attn, &q, &k, &v, &o, &l, &dummy), DISTATTN_ERROR_INVALID_ARGUMENT,
                 "stream", "a stream on a host build");
  }
  q.strides[0] = -1;
  expect_error(distattn_attention_forward(attn, &q, &k, &v, &o, &l, NULL), DISTATTN_ERROR_INVALID_ARGUMENT, "'q'",
               "negative stride");
  q.strides[0] = 0;
  /* After the failures the object still works. */
  CHECK(distattn_attention_forward(attn, &q, &k, &v, &o, &l, NULL) == DISTATTN_SUCCESS, "forward after errors: %s",
        distattn_last_error());
  CHECK(strcmp(distattn_last_error(), "") == 0, "a successful call clears the message");
  expect_error(distattn_attention_forward(NULL, &q, &k, &v, &o, &l, NULL), DISTATTN_ERROR_INVALID_ARGUMENT, "attn",
               "NULL attn");
  free(buf), free(lse);
  distattn_attention_destroy(attn);
}

/* ---- issue #35: every collective entry agrees before it acts ------------------- */

static void expect_error_naming_rank(distattn_status got, distattn_status want, const char* needle, int bad_rank,
                                     const char* what) {
  char who[32];
  snprintf(who, sizeof who, "rank %d", bad_rank);
  expect_error(got, want, needle, what);
  CHECK(strstr(distattn_last_error(), who) != NULL, "%s: message does not name '%s': %s", what, who,
        distattn_last_error());
}

/* Bad cu_seqlens on every rank, on one rank, or differing across ranks: each fails
 * on every rank (naming the rank where one rank is at fault), naming cu_seqlens. */
static void check_documents_errors(distattn_comm comm) {
  const int64_t N = 4 * size_, last = size_ - 1;
  const int64_t unsorted[] = {0, 3, 2, N}, short_end[] = {0, 2, N - 1}, long_end[] = {0, 2, N + 1},
                late_start[] = {1, 2, N}, whole[] = {0, N}, split[] = {0, 2, N}, other_split[] = {0, 3, N};
  const struct {
    const int64_t* offsets;
    int64_t count;
    int causal;
    const char* what;
  } bad[] = {{unsorted, 3, 1, "cu_seqlens not sorted"},
             {short_end, 2, 0, "cu_seqlens ending before N (full attention)"},
             {long_end, 2, 1, "cu_seqlens ending after N"},
             {late_start, 2, 1, "cu_seqlens not starting at 0"},
             {whole, -1, 1, "num_documents = -1"},
             {NULL, 2, 1, "cu_seqlens NULL with num_documents = 2"}};
  distattn_attention attn = NULL;
  /* The same offsets given to live handles (causal and full) by set_documents. */
  distattn_attention live[2] = {NULL, NULL};
  for (int causal = 0; causal <= 1; ++causal) {
    distattn_attention_config cfg = small_config();
    cfg.causal = causal;
    CHECK(distattn_attention_create(comm, &cfg, &live[causal]) == DISTATTN_SUCCESS, "create: %s",
          distattn_last_error());
  }
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
    distattn_attention_config cfg = small_config();
    cfg.causal = bad[i].causal, cfg.cu_seqlens = bad[i].offsets, cfg.num_documents = bad[i].count;
    expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, "cu_seqlens",
                 bad[i].what);
    CHECK(attn == NULL, "%s: a failed create must leave *out NULL", bad[i].what);
    char what[96];
    snprintf(what, sizeof what, "set_documents: %s", bad[i].what);
    expect_error(distattn_attention_set_documents(live[bad[i].causal], bad[i].offsets, bad[i].count),
                 DISTATTN_ERROR_INVALID_ARGUMENT, "argument 'cu_seqlens'", what);
    if (size_ > 1) {
      snprintf(what, sizeof what, "set_documents: %s on the last rank", bad[i].what);
      expect_error_naming_rank(distattn_attention_set_documents(live[bad[i].causal],
                                                                rank_ == last ? bad[i].offsets : split,
                                                                rank_ == last ? bad[i].count : 2),
                               DISTATTN_ERROR_INVALID_ARGUMENT, "cu_seqlens", (int)last, what);
    }
    if (size_ > 1) { /* the same on the last rank only */
      char what[96];
      snprintf(what, sizeof what, "%s on the last rank", bad[i].what);
      cfg = small_config();
      if (rank_ == last)
        cfg.causal = bad[i].causal, cfg.cu_seqlens = bad[i].offsets, cfg.num_documents = bad[i].count;
      expect_error_naming_rank(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT,
                               "cu_seqlens", (int)last, what);
    }
  }
  if (size_ > 1) {
    /* Valid on each rank, differing across ranks: in the count, then in the offsets alone. */
    distattn_attention_config cfg = small_config();
    cfg.cu_seqlens = rank_ == last ? split : whole, cfg.num_documents = rank_ == last ? 2 : 1;
    expect_error_naming_rank(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT,
                             "cu_seqlens", (int)last, "num_documents 2 on the last rank, 1 elsewhere");
    CHECK(strstr(distattn_last_error(), "config->num_documents"), "the message must name num_documents: %s",
          distattn_last_error());
    cfg.cu_seqlens = rank_ == last ? other_split : split, cfg.num_documents = 2;
    expect_error_naming_rank(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT,
                             "config->cu_seqlens", (int)last, "cu_seqlens offsets differing on the last rank");
    CHECK(strstr(distattn_last_error(), "num_documents") == NULL, "only the offsets differ: %s",
          distattn_last_error());
    expect_error_naming_rank(distattn_attention_set_documents(live[1], rank_ == last ? split : whole,
                                                              rank_ == last ? 2 : 1),
                             DISTATTN_ERROR_INVALID_ARGUMENT, "num_documents", (int)last,
                             "set_documents: num_documents 2 on the last rank, 1 elsewhere");
    expect_error_naming_rank(distattn_attention_set_documents(live[1], rank_ == last ? other_split : split, 2),
                             DISTATTN_ERROR_INVALID_ARGUMENT, "cu_seqlens (hash", (int)last,
                             "set_documents: offsets differing on the last rank");
  }
  expect_error(distattn_attention_set_documents(NULL, split, 2), DISTATTN_ERROR_INVALID_ARGUMENT, "attn",
               "set_documents: NULL attn");
  for (int causal = 0; causal <= 1; ++causal) distattn_attention_destroy(live[causal]);
  /* Equal offsets at different addresses, and a causal padded tail: accepted. */
  int64_t* copy = malloc(sizeof split);
  memcpy(copy, split, sizeof split);
  const int64_t padded[] = {0, 2, N - 1};
  distattn_attention_config cfg = small_config();
  cfg.cu_seqlens = rank_ == 0 ? copy : split, cfg.num_documents = 2;
  distattn_status st = distattn_attention_create(comm, &cfg, &attn);
  CHECK(st == DISTATTN_SUCCESS, "equal offsets at different addresses: %s", distattn_last_error());
  distattn_attention_destroy(attn), attn = NULL;
  cfg.cu_seqlens = padded;
  st = distattn_attention_create(comm, &cfg, &attn);
  CHECK(st == DISTATTN_SUCCESS, "causal offsets ending before N (a padded tail): %s", distattn_last_error());
  distattn_attention_destroy(attn);
  free(copy);
}

/* Perturbs field `i` of a small_config() to another valid value; returns its name (NULL past the last). */
static const char* perturb(distattn_attention_config* c, int i) {
  switch (i) {
    case 0: c->executor = DISTATTN_RING_BALANCED; return "executor";
    case 1: c->dtype = DISTATTN_FP64; return "dtype";
    case 2: c->batch = 2; return "batch";
    case 3: c->local_seq = 6; return "local_seq";
    case 4: c->heads = 4; return "heads";
    case 5: c->kv_heads = 1; return "kv_heads";
    case 6: c->head_dim = 16; return "head_dim";
    case 7: c->causal = 0; return "causal";
    case 8: c->scale = 0.5; return "scale";
    case 9: c->grid_rows = 1; return "grid_rows";
    case 10: c->grid_cols = 1; return "grid_cols";
    case 11: c->ulysses_degree = 1; return "ulysses_degree";
    case 12: c->hybrid_inner = DISTATTN_RING_BALANCED; return "hybrid_inner";
    case 13: c->head_group = 1; return "head_group";
    case 14: c->window_left = 3; return "window_left";
    case 15: c->window_right = 2; return "window_right";
    default: return NULL;
  }
}

static void check_agreement(distattn_comm comm) {
  const int last = size_ - 1;
  distattn_attention attn = NULL;
  distattn_attention_config cfg = small_config();
  distattn_status st;
  distattn_comm c2 = NULL;

  /* 'out' NULL on one rank only: every rank fails, naming the rank and 'out' (the others
   * used to wait in the agreement until the communicator's timeout aborted the job). */
  st = distattn_attention_create(comm, &cfg, rank_ == last ? NULL : &attn);
  expect_error_naming_rank(st, DISTATTN_ERROR_INVALID_ARGUMENT, "'out'", last, "create: out NULL on the last rank");
  CHECK(attn == NULL, "a failed create must leave *out NULL");
  st = distattn_comm_create_mpi(MPI_COMM_WORLD, rank_ == 0 ? NULL : &c2);
  expect_error_naming_rank(st, DISTATTN_ERROR_INVALID_ARGUMENT, "'out'", 0, "comm_create: out NULL on rank 0");
  CHECK(c2 == NULL, "a failed comm_create must leave *out NULL");
  distattn_comm_destroy(c2);

  /* Handles MPI does not know: an error status, not MPI's fatal error handler. */
  MPI_Comm freed;
  MPI_Comm_dup(MPI_COMM_WORLD, &freed);
  const int64_t freed_f = (int64_t)MPI_Comm_c2f(freed);
  MPI_Comm_free(&freed);
  const int64_t bad_handles[] = {12345, -7, ((int64_t)1 << 32) + (int64_t)MPI_Comm_c2f(MPI_COMM_WORLD), freed_f,
                                 (int64_t)MPI_Comm_c2f(MPI_COMM_NULL)};
  for (size_t i = 0; i < sizeof bad_handles / sizeof *bad_handles; ++i) {
    char what[64];
    snprintf(what, sizeof what, "Fortran handle %lld", (long long)bad_handles[i]);
    c2 = NULL;
    expect_error(distattn_comm_create_mpi_f(bad_handles[i], &c2), DISTATTN_ERROR_INVALID_ARGUMENT,
                 "mpi_fortran_handle", what);
    CHECK(c2 == NULL, "%s: *out must stay NULL", what);
  }

  /* Enum fields holding values outside their enumeration (C allows storing them). */
  const int bad_enums[] = {99, -1};
  for (int i = 0; i < 2; ++i) {
    char needle[64], what[64];
    cfg = small_config();
    cfg.executor = (distattn_executor)bad_enums[i];
    snprintf(needle, sizeof needle, "config->executor = %d", bad_enums[i]);
    snprintf(what, sizeof what, "executor = %d", bad_enums[i]);
    expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, needle, what);
    cfg = small_config();
    cfg.dtype = (distattn_dtype)bad_enums[i];
    snprintf(needle, sizeof needle, "config->dtype = %d", bad_enums[i]);
    snprintf(what, sizeof what, "dtype = %d", bad_enums[i]);
    expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, needle, what);
    cfg = small_config();
    cfg.executor = DISTATTN_HYBRID;
    cfg.hybrid_inner = (distattn_executor)bad_enums[i];
    snprintf(needle, sizeof needle, "config->hybrid_inner = %d", bad_enums[i]);
    snprintf(what, sizeof what, "hybrid_inner = %d", bad_enums[i]);
    expect_error(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT, needle, what);
    CHECK(distattn_has_dtype((distattn_dtype)bad_enums[i]) == 0, "has_dtype(%d) must be 0", bad_enums[i]);
    CHECK(strcmp(distattn_status_string((distattn_status)bad_enums[i]), "unknown status") == 0,
          "status_string(%d): %s", bad_enums[i], distattn_status_string((distattn_status)bad_enums[i]));
  }
  cfg = small_config();
  if (rank_ == last) cfg.executor = (distattn_executor)99;
  expect_error_naming_rank(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT,
                           "config->executor = 99", last, "executor = 99 on the last rank");

  if (size_ > 1) {
    /* Every field that changes results is agreed: one rank differing in it fails on every
     * rank with a message naming the field and that rank, not every rank's whole config. */
    for (int i = 0;; ++i) {
      cfg = small_config();
      const char* name = perturb(&cfg, i);
      if (!name) break;
      if (rank_ != last) cfg = small_config();
      char needle[64], what[64];
      snprintf(needle, sizeof needle, "config->%s", name);
      snprintf(what, sizeof what, "%s differs on the last rank", name);
      expect_error_naming_rank(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT,
                               needle, last, what);
      CHECK(strstr(distattn_last_error(), "api_version") == NULL, "%s: the message lists unchanged fields: %s",
            what, distattn_last_error());
    }
    /* The softmax scale, with the ranks' values; enums by their names. */
    cfg = small_config();
    cfg.scale = rank_ == last ? 0.5 : 0.25;
    expect_error_naming_rank(distattn_attention_create(comm, &cfg, &attn), DISTATTN_ERROR_INVALID_ARGUMENT,
                             "config->scale", last, "scale 0.5 on the last rank, 0.25 elsewhere");
    {
      char theirs[32];
      snprintf(theirs, sizeof theirs, "0.5 on rank %d", last);
      CHECK(strstr(distattn_last_error(), theirs) && strstr(distattn_last_error(), "0.25 on rank"),
            "scale: the message must give both values and their ranks: %s", distattn_last_error());
    }
    cfg = small_config();
    if (rank_ == last) cfg.executor = DISTATTN_RING_BALANCED;
    distattn_attention_create(comm, &cfg, &attn);
    CHECK(strstr(distattn_last_error(), "DISTATTN_RING_BALANCED") && strstr(distattn_last_error(), "DISTATTN_RING_ZIGZAG"),
          "executor: the message must name the values: %s", distattn_last_error());

    /* Not agreed: memory_limit_bytes (a per-rank bound) and the sign of a zero scale. */
    cfg = small_config();
    if (rank_ == last) cfg.memory_limit_bytes = (size_t)1 << 30, cfg.scale = -0.0;
    st = distattn_attention_create(comm, &cfg, &attn);
    CHECK(st == DISTATTN_SUCCESS, "memory_limit_bytes and the sign of scale differing per rank: %s", distattn_last_error());
    if (st == DISTATTN_SUCCESS) {
      /* Ranks in different calls on one attention: an error naming both. */
      const size_t n = 1 * 4 * 2 * 8;
      float *buf = calloc(10 * n, sizeof(float)), *lse = calloc(8, sizeof(float));
      distattn_tensor t[9], l = {lse, {1, 2, 4}, {0}};
      for (int j = 0; j < 9; ++j) {
        distattn_tensor x = {buf + (size_t)j * n, {1, 4, 2, 8}, {0}};
        t[j] = x;
      }
      if (rank_ == 0)
        st = distattn_attention_forward(attn, &t[0], &t[1], &t[2], &t[3], &l, NULL);
      else
        st = distattn_attention_backward(attn, &t[0], &t[1], &t[2], &t[3], &t[4], &l, &t[5], &t[6], &t[7], NULL);
      expect_error(st, DISTATTN_ERROR_INVALID_ARGUMENT, "distattn_attention_backward", "forward on rank 0, backward elsewhere");
      CHECK(strstr(distattn_last_error(), "distattn_attention_forward"), "the message must name both calls: %s",
            distattn_last_error());
      free(buf), free(lse);
      distattn_attention_destroy(attn);
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  unsigned long long seed = (unsigned long long)time(NULL);
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  rng_ = seed;
  if (rank_ == 0)
    printf("C API version %d (header %d), library %s, %d ranks, seed %llu\n", distattn_api_version(),
           DISTATTN_C_API_VERSION, distattn_library_version(), size_, seed);
  CHECK(distattn_api_version() == DISTATTN_C_API_VERSION, "header and library versions differ");

  distattn_comm comm = NULL;
  expect_error(distattn_comm_create_mpi(MPI_COMM_WORLD, &comm), DISTATTN_ERROR_NOT_INITIALIZED,
               "distattn_initialize", "communicator before initialize");
  CHECK(distattn_initialize() == DISTATTN_SUCCESS, "initialize: %s", distattn_last_error());
  CHECK(distattn_comm_create_mpi(MPI_COMM_WORLD, &comm) == DISTATTN_SUCCESS, "comm: %s", distattn_last_error());
  int r = -1, s = -1;
  distattn_comm_rank(comm, &r), distattn_comm_size(comm, &s);
  CHECK(r == rank_ && s == size_, "comm rank/size %d/%d, MPI says %d/%d", r, s, rank_, size_);

  for (int fp64 = 0; fp64 <= 1; ++fp64) {
    for (int e = DISTATTN_RING_VANILLA; e <= DISTATTN_ULYSSES; ++e)
      check_executor(comm, (distattn_executor)e, DISTATTN_RING_ZIGZAG, fp64, 1);
    check_executor(comm, DISTATTN_HYBRID, DISTATTN_RING_ZIGZAG, fp64, 1);
    check_executor(comm, DISTATTN_HYBRID, DISTATTN_GRID2D_O, fp64, 1);
    /* Full attention: the executors that visit every block. */
    check_executor(comm, DISTATTN_RING_ZIGZAG, DISTATTN_RING_ZIGZAG, fp64, 0);
    check_executor(comm, DISTATTN_GRID2D_NO, DISTATTN_RING_ZIGZAG, fp64, 0);
  }
  /* Inputs recomputed in place: the executors that keep forward state for backward. */
  check_executor_case(comm, DISTATTN_ULYSSES, DISTATTN_RING_ZIGZAG, 1, 1, STALE);
  check_executor_case(comm, DISTATTN_GRID2D_O, DISTATTN_RING_ZIGZAG, 1, 1, STALE);
  check_executor_case(comm, DISTATTN_GRID2D_NO, DISTATTN_RING_ZIGZAG, 1, 0, STALE);
  check_executor_case(comm, DISTATTN_HYBRID, DISTATTN_GRID2D_O, 1, 1, STALE);
  check_executor_case(comm, DISTATTN_HYBRID, DISTATTN_RING_ZIGZAG, 0, 1, STALE);
  /* Key windows (narrower than a rank's 4 tokens and wider): causal sliding on
   * every executor, local bidirectional on those that visit every block. */
  window_left_ = 2, window_right_ = -1;
  for (int e = DISTATTN_RING_VANILLA; e <= DISTATTN_ULYSSES; ++e)
    check_executor(comm, (distattn_executor)e, DISTATTN_RING_ZIGZAG, 1, 1);
  check_executor(comm, DISTATTN_HYBRID, DISTATTN_GRID2D_O, 0, 1);
  window_left_ = 5, window_right_ = 3;
  check_executor(comm, DISTATTN_RING_ZIGZAG, DISTATTN_RING_ZIGZAG, 1, 0);
  check_executor(comm, DISTATTN_GRID2D_O, DISTATTN_RING_ZIGZAG, 1, 0);
  check_executor(comm, DISTATTN_ULYSSES, DISTATTN_RING_ZIGZAG, 0, 0);
  window_left_ = window_right_ = -1;
  /* Packed documents: every executor causal, full attention on those that visit every
   * block, documents with a causal window; fresh documents for each. */
  for (int e = DISTATTN_RING_VANILLA; e <= DISTATTN_ULYSSES; ++e) {
    random_documents(4 * size_, 4);
    check_executor(comm, (distattn_executor)e, DISTATTN_RING_ZIGZAG, 1, 1);
  }
  random_documents(4 * size_, 4);
  check_executor(comm, DISTATTN_HYBRID, DISTATTN_GRID2D_O, 0, 1);
  random_documents(4 * size_, 4);
  check_executor(comm, DISTATTN_RING_ZIGZAG, DISTATTN_RING_ZIGZAG, 1, 0);
  random_documents(4 * size_, 4);
  check_executor(comm, DISTATTN_GRID2D_NO, DISTATTN_RING_ZIGZAG, 1, 0);
  random_documents(4 * size_, 4);
  check_executor(comm, DISTATTN_ULYSSES, DISTATTN_RING_ZIGZAG, 0, 0);
  window_left_ = 2;
  random_documents(4 * size_, 4);
  check_executor(comm, DISTATTN_RING_ZIGZAG, DISTATTN_RING_ZIGZAG, 1, 1);
  random_documents(4 * size_, 4);
  check_executor(comm, DISTATTN_GRID2D_O, DISTATTN_RING_ZIGZAG, 1, 1);
  /* Documents replaced on a live handle (distattn_attention_set_documents), as each
   * training batch packs them: every executor given fresh documents after a
   * forward under none, full attention and a window too; then documents removed. */
  window_left_ = -1;
  for (int e = DISTATTN_RING_VANILLA; e <= DISTATTN_HYBRID; ++e) {
    random_documents(4 * size_, 4);
    check_executor_case(comm, (distattn_executor)e, DISTATTN_GRID2D_O, 1, 1, REDOCUMENT);
  }
  random_documents(4 * size_, 4);
  check_executor_case(comm, DISTATTN_GRID2D_NO, DISTATTN_RING_ZIGZAG, 0, 0, REDOCUMENT);
  window_left_ = 2;
  random_documents(4 * size_, 4);
  check_executor_case(comm, DISTATTN_RING_ZIGZAG, DISTATTN_RING_ZIGZAG, 1, 1, REDOCUMENT);
  window_left_   = -1;
  num_documents_ = 0;
  check_executor_case(comm, DISTATTN_ULYSSES, DISTATTN_RING_ZIGZAG, 1, 1, REDOCUMENT);
  check_executor_case(comm, DISTATTN_HYBRID, DISTATTN_RING_ZIGZAG, 1, 0, REDOCUMENT);
  check_errors(comm);
  check_documents_errors(comm);
  check_agreement(comm);

  distattn_comm_destroy(comm);
  CHECK(distattn_finalize() == DISTATTN_SUCCESS, "finalize: %s", distattn_last_error());
  int total = 0;
  MPI_Allreduce(&failures_, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank_ == 0) printf("%s: %d failed checks over %d ranks\n", total ? "FAILED" : "PASSED", total, size_);
  MPI_Finalize();
  return total ? 1 : 0;
}
