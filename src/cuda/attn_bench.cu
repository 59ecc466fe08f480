// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kernel-only benchmark of the tuned attention kernels and of alternative tile
// configurations (not part of the library; built as `attn_cuda_bench` when
// DistAttn_ENABLE_CUDA_KERNELS is ON). Times each launch alone with CUDA events
// (median of -n after -w warm-ups), and cross-checks every alternative
// configuration against the shipped one on the same inputs (max abs difference
// relative to max |shipped|), so a faster variant is known to be right before it is
// promoted in tile_size.hpp.
//
//   attn_cuda_bench [-s S ...] [--heads 32] [--dim 128] [--causal 1] [-w 2] [-n 10]
//                   [--shipped-only | --fwd-only | --dispatch]
//
// --fwd-only: the shipped Hopper forward alone, no backward rows.
// --dim 192 / 256: the Hopper table has a forward there and no backward; the backward
//   rows are replaced by a line saying so (the library runs the portable backward).
// --dispatch: forward and backward through the library's dispatch (run_attn_fwd /
//   run_attn_bwd), i.e. the kernels the device or DISTATTN_CUDA_ARCH_PATH selects, as
//   built into the library for their target (with DISTATTN_CUDA_ARCH_PATH=sm80 on
//   Hopper: the sm80 table's compute_80 PTX, JIT-compiled by the driver). The forward
//   is timed twice: writing the final O and LSE (direct mode, the work an SDPA forward
//   does) and merging into the fp32 state (update mode, what a ring step does).
//
// The other rows instantiate the kernels here, for this program's sm_90a target
// ('*' marks the sm90 table's entries; the sm80 table's kernels built for sm_90a
// are the cross-check reference of the Hopper kernels).
//
// FLOPs as docs/PERFORMANCE.md: forward 4 B H S^2 d (x 0.5 causal), backward x 2.5.

#include "attn_bwd_launch.cuh"
#include "attn_bwd_sm80.cuh"
#include "attn_fwd_launch.cuh"
#include "attn_fwd_sm80.cuh"
#include "tile_size.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

using namespace DistAttn::Impl::cuda;

namespace {

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

__global__ void fill_bf16(__nv_bfloat16* x, std::size_t n, unsigned long long seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned long long z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = __float2bfloat16(float(double(z >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0));
  }
}

__global__ void fill_f32(float* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    x[i] = v;
}

/// out[0] = max |a - b| (NaN -> +inf), out[1] = max |b|, as float bits.
__global__ void max_diff(const float* a, const float* b, std::size_t n, unsigned* out) {
  float d = 0.f, r = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float e = fabsf(a[i] - b[i]);
    d             = (e != e) ? INFINITY : fmaxf(d, e);
    r             = fmaxf(r, fabsf(b[i]));
  }
  atomicMax(out, __float_as_uint(d));
  atomicMax(out + 1, __float_as_uint(r));
}

double rel_diff(const float* a, const float* b, std::size_t n) {
  unsigned* d = nullptr;
  CK(cudaMalloc(&d, 8));
  CK(cudaMemset(d, 0, 8));
  max_diff<<<1024, 256>>>(a, b, n, d);
  unsigned h[2];
  CK(cudaMemcpy(h, d, 8, cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  float fd, fr;
  std::memcpy(&fd, &h[0], 4);
  std::memcpy(&fr, &h[1], 4);
  return fr > 0 ? double(fd) / fr : double(fd);
}

double time_median(const std::function<void()>& prep, const std::function<void()>& fn, int warmup, int iters) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) {
    prep();
    fn();
  }
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    prep();
    CK(cudaEventRecord(a));
    fn();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

struct Buffers {
  int B, S, H, D;
  __nv_bfloat16 *q, *k, *v, *dout, *o;
  float *acc, *m, *l, *lse, *delta, *dq, *dk, *dv;
  float *acc_ref, *dq_ref, *dk_ref, *dv_ref;
  __host__ __device__ std::size_t nt() const { return std::size_t(B) * S * H * D; }
  __host__ __device__ std::size_t ns() const { return std::size_t(B) * H * S; }
};

AttnFwdParams fwd_params(const Buffers& b, bool causal) {
  AttnFwdParams p{};
  p.q.data = b.q, p.k.data = b.k, p.v.data = b.v, p.acc.data = b.acc, p.m.data = b.m, p.l.data = b.l;
  const std::int64_t rs = std::int64_t(b.H) * b.D, bs = rs * b.S;
  p.q.batch_stride = p.k.batch_stride = p.v.batch_stride = p.acc.batch_stride = bs;
  p.q.row_stride = p.k.row_stride = p.v.row_stride = p.acc.row_stride = rs;
  p.q.head_stride = p.k.head_stride = p.v.head_stride = p.acc.head_stride = b.D;
  p.m.batch_stride = p.l.batch_stride = std::int64_t(b.H) * b.S;
  p.m.head_stride = p.l.head_stride = b.S;
  p.m.row_stride = p.l.row_stride = 1;
  p.batch = b.B, p.seqlen_q = b.S, p.seqlen_k = b.S, p.heads = b.H, p.heads_kv = b.H, p.head_dim = b.D;
  p.scale = 1.f / std::sqrt(float(b.D));
  p.mask  = AttnMaskParams{causal ? 1 : 0, 0, 1, 0, 1};
  p.dtype = AttnDType::BF16;
  return p;
}

AttnBwdParams bwd_params(const Buffers& b, bool causal) {
  AttnBwdParams p{};
  p.q.data = b.q, p.k.data = b.k, p.v.data = b.v, p.dout.data = b.dout, p.lse.data = b.lse, p.delta.data = b.delta;
  p.dq.data = b.dq, p.dk.data = b.dk, p.dv.data = b.dv;
  const std::int64_t rs = std::int64_t(b.H) * b.D, bs = rs * b.S;
  p.q.batch_stride = p.k.batch_stride = p.v.batch_stride = p.dout.batch_stride = bs;
  p.dq.batch_stride = p.dk.batch_stride = p.dv.batch_stride = bs;
  p.q.row_stride = p.k.row_stride = p.v.row_stride = p.dout.row_stride = rs;
  p.dq.row_stride = p.dk.row_stride = p.dv.row_stride = rs;
  p.q.head_stride = p.k.head_stride = p.v.head_stride = p.dout.head_stride = b.D;
  p.dq.head_stride = p.dk.head_stride = p.dv.head_stride = b.D;
  p.lse.batch_stride = p.delta.batch_stride = std::int64_t(b.H) * b.S;
  p.lse.head_stride = p.delta.head_stride = b.S;
  p.lse.row_stride = p.delta.row_stride = 1;
  p.batch = b.B, p.seqlen_q = b.S, p.seqlen_k = b.S, p.heads = b.H, p.heads_kv = b.H, p.head_dim = b.D;
  p.scale = 1.f / std::sqrt(float(b.D));
  p.mask  = AttnMaskParams{causal ? 1 : 0, 0, 1, 0, 1};
  p.dtype = AttnDType::BF16;
  return p;
}

/// LSE and Delta for the backward from one forward (acc, m, l): LSE = m + log l,
/// Delta = rowsum(dO * acc / l) (O kept in fp32 here; the bench times, the unit
/// tests check).
__global__ void make_bwd_stats(Buffers b) {
  const std::size_t r = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (r >= b.ns()) return;
  const int i = int(r % b.S), h = int((r / b.S) % b.H), bb = int(r / (std::size_t(b.S) * b.H));
  const float l = b.l[r];
  b.lse[r]      = l > 0 ? b.m[r] + logf(l) : -INFINITY;
  float dl      = 0;
  const std::size_t base = ((std::size_t(bb) * b.S + i) * b.H + h) * b.D;
  if (l > 0)
    for (int d = 0; d < b.D; ++d) dl += __bfloat162float(b.dout[base + d]) * b.acc[base + d] / l;
  b.delta[r] = dl;
}

/// A tile entry's kernel, or (Dispatched) the library's dispatch.
struct Dispatched {};

template <class Cfg>
bool launch_fwd(const AttnFwdParams& p) {
  if constexpr (std::is_same<Cfg, Dispatched>::value) return run_attn_fwd(p, nullptr);
  else if constexpr (Cfg::kWgmma) return launch_attn_fwd_any<Cfg, __nv_bfloat16>(p, nullptr);
  else return launch_attn_fwd_sm80<Cfg, __nv_bfloat16>(p, nullptr);
}

template <class Cfg>
bool launch_bwd(const AttnBwdParams& p) {
  if constexpr (std::is_same<Cfg, Dispatched>::value) return run_attn_bwd(p, nullptr);
  else if constexpr (Cfg::kWgmma) return launch_attn_bwd_any<Cfg, __nv_bfloat16>(p, nullptr);
  else return launch_attn_bwd_sm80<Cfg, __nv_bfloat16>(p, nullptr);
}

/// direct: the kernel writes the final O (bf16) and LSE, what attention_fwd and an
/// SDPA forward produce, instead of merging into the fp32 state (acc, m, l).
template <class Cfg>
double run_fwd(const Buffers& b, bool causal, int w, int n, bool direct = false) {
  AttnFwdParams p = fwd_params(b, causal);
  if (direct) {
    p.o.data = b.o, p.o.batch_stride = p.acc.batch_stride, p.o.row_stride = p.acc.row_stride;
    p.o.head_stride = p.acc.head_stride;
    p.lse.data = b.lse, p.lse.batch_stride = p.m.batch_stride, p.lse.head_stride = p.m.head_stride;
    p.lse.row_stride = p.m.row_stride;
  }
  auto prep = [&] {
    fill_f32<<<1024, 256>>>(b.m, b.ns(), -INFINITY);
    fill_f32<<<1024, 256>>>(b.l, b.ns(), 0.f);
  };
  return time_median(prep, [&] {
    if (!launch_fwd<Cfg>(p)) {
      std::fprintf(stderr, "forward declined: nothing to time\n");
      std::exit(2);
    }
  }, w, n);
}

template <class Cfg>
double run_bwd(const Buffers& b, bool causal, int w, int n, bool det) {
  AttnBwdParams p = bwd_params(b, causal);
  p.deterministic = det ? 1 : 0;
  auto prep = [&] {
    CK(cudaMemsetAsync(b.dq, 0, b.nt() * 4));
    CK(cudaMemsetAsync(b.dk, 0, b.nt() * 4));
    CK(cudaMemsetAsync(b.dv, 0, b.nt() * 4));
  };
  return time_median(prep, [&] {
    if (!launch_bwd<Cfg>(p)) {
      std::fprintf(stderr, "backward declined: nothing to time\n");
      std::exit(2);
    }
  }, w, n);
}

template <class Cfg>
void fwd_row(const char* name, Buffers& b, bool causal, int w, int n, bool is_ref, bool direct = false) {
  const double t  = run_fwd<Cfg>(b, causal, w, n, direct);
  const double fl = 4.0 * b.B * b.H * double(b.S) * b.S * b.D * (causal ? 0.5 : 1.0);
  double diff     = 0;
  // Direct mode leaves the state alone (the unit tests check its O and LSE).
  if (!direct && is_ref) CK(cudaMemcpy(b.acc_ref, b.acc, b.nt() * 4, cudaMemcpyDeviceToDevice));
  else if (!direct) diff = rel_diff(b.acc, b.acc_ref, b.nt());
  const bool shipped = std::is_same<Cfg, sm90::FwdTileD128>::value || std::is_same<Cfg, sm90::FwdTileD64>::value ||
                       std::is_same<Cfg, sm90::FwdTileD192>::value || std::is_same<Cfg, sm90::FwdTileD256>::value;
  std::printf("  fwd %c %-30s S %6d  %10.1f us  %7.1f TF/s  rel.diff vs first %.2e\n", shipped ? '*' : ' ', name, b.S,
              t * 1e6, fl / t * 1e-12, diff);
}

template <class Cfg>
void bwd_row(const char* name, Buffers& b, bool causal, int w, int n, bool is_ref, bool det = false) {
  const double t  = run_bwd<Cfg>(b, causal, w, n, det);
  const double fl = 2.5 * 4.0 * b.B * b.H * double(b.S) * b.S * b.D * (causal ? 0.5 : 1.0);
  double d1 = 0, d2 = 0, d3 = 0;
  if (is_ref) {
    CK(cudaMemcpy(b.dq_ref, b.dq, b.nt() * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(b.dk_ref, b.dk, b.nt() * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(b.dv_ref, b.dv, b.nt() * 4, cudaMemcpyDeviceToDevice));
  } else {
    d1 = rel_diff(b.dq, b.dq_ref, b.nt());
    d2 = rel_diff(b.dk, b.dk_ref, b.nt());
    d3 = rel_diff(b.dv, b.dv_ref, b.nt());
  }
  const bool shipped = !det && (std::is_same<Cfg, sm90::BwdTileD128>::value || std::is_same<Cfg, sm90::BwdTileD64>::value);
  std::printf("  bwd %c %-30s S %6d  %10.1f us  %7.1f TF/s  rel.diff vs first dq %.1e dk %.1e dv %.1e\n",
              shipped ? '*' : ' ', name, b.S, t * 1e6, fl / t * 1e-12, d1, d2, d3);
}

/// The shipped Hopper forward of head_dim D.
void shipped_fwd_row(const char* name, Buffers& b, bool causal, int w, int n) {
  switch (b.D) {
    case 64: fwd_row<sm90::FwdTileD64>(name, b, causal, w, n, true); break;
    case 128: fwd_row<sm90::FwdTileD128>(name, b, causal, w, n, true); break;
    case 192: fwd_row<sm90::FwdTileD192>(name, b, causal, w, n, true); break;
    default: fwd_row<sm90::FwdTileD256>(name, b, causal, w, n, true); break;
  }
}

void no_tuned_bwd(int D) {
  std::printf("  bwd   no tuned backward at d = %d: the library runs the portable kernel (not timed here)\n", D);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> seqs;
  int H = 32, D = 128, w = 2, n = 10;
  bool causal = true, shipped_only = false, fwd_only = false, dispatch = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next           = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "-s") seqs.push_back(next());
    else if (a == "--heads") H = next();
    else if (a == "--dim") D = next();
    else if (a == "--causal") causal = next() != 0;
    else if (a == "-w") w = next();
    else if (a == "-n") n = next();
    else if (a == "--shipped-only") shipped_only = true;
    else if (a == "--fwd-only") fwd_only = true;
    else if (a == "--dispatch") dispatch = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 1;
    }
  }
  if (seqs.empty()) seqs = {8192, 32768};
  if (D != 64 && D != 128 && D != 192 && D != 256) {
    std::fprintf(stderr, "--dim must be 64, 128, 192 or 256\n");
    return 1;
  }
  const bool tuned_bwd = D <= 128;  // the sm90 table's backward entries: 64 and 128
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# attn_cuda_bench on %s (%d SMs), bf16, b 1 h %d d %d causal %d, median of %d after %d warm-ups\n",
              prop.name, prop.multiProcessorCount, H, D, int(causal), n, w);
  for (int S : seqs) {
    Buffers b{1, S, H, D};
    const std::size_t nt = b.nt(), ns = b.ns();
    for (__nv_bfloat16** p : {&b.q, &b.k, &b.v, &b.dout, &b.o}) CK(cudaMalloc(p, nt * 2));
    for (float** p : {&b.acc, &b.dq, &b.dk, &b.dv, &b.acc_ref, &b.dq_ref, &b.dk_ref, &b.dv_ref}) CK(cudaMalloc(p, nt * 4));
    for (float** p : {&b.m, &b.l, &b.lse, &b.delta}) CK(cudaMalloc(p, ns * 4));
    fill_bf16<<<1024, 256>>>(b.q, nt, 1);
    fill_bf16<<<1024, 256>>>(b.k, nt, 2);
    fill_bf16<<<1024, 256>>>(b.v, nt, 3);
    fill_bf16<<<1024, 256>>>(b.dout, nt, 4);
    CK(cudaMemset(b.acc, 0, nt * 4));
    CK(cudaDeviceSynchronize());
    {  // without a tensor map the backward falls back to the wgmma kernel: say which ran
      CUtensorMap m;
      const bool ok = encode_tile_tensor_map(&m, b.k, true, D, S, H, 1, std::int64_t(H) * D, D, std::int64_t(S) * H * D, 128);
      std::printf("# TMA tensor map for K: %s\n", ok ? "encoded (TMA kernels use TMA)" : "FAILED (the backward falls back to the wgmma kernel)");
    }
    // The first row of each group is the cross-check reference; '*' marks the
    // entry of tile_size.hpp this binary ships.
    if (dispatch) {
      static const char* const kArch[] = {"none", "sm80", "sm90"};
      const AttnCudaArch arch = attn_cuda_arch();
      const std::string name  = std::string("dispatched (") + kArch[arch == AttnCudaArch::sm80 ? 1 : arch == AttnCudaArch::sm90 ? 2 : 0] + ")";
      fwd_row<Dispatched>(name.c_str(), b, causal, w, n, true);
      fwd_row<Dispatched>((name + ", direct O and LSE").c_str(), b, causal, w, n, false, true);
      make_bwd_stats<<<unsigned((ns + 255) / 256), 256>>>(b);
      if (attn_head_dim_supported(D, AttnDir::bwd)) bwd_row<Dispatched>(name.c_str(), b, causal, w, n, true);
      else no_tuned_bwd(D);
    } else if (fwd_only) {
      shipped_fwd_row("shipped", b, causal, w, n);
    } else if (!tuned_bwd) {
      // The shipped tile first (the cross-check reference), then a smaller key tile
      // (more tiles per row, fewer registers and less shared memory).
      shipped_fwd_row(D == 256 ? "ws 80-key tiles" : "ws 112-key tiles", b, causal, w, n);
      if (!shipped_only) {
        if (D == 256) fwd_row<WsFwdTile<256, 2, 64>>("ws 64-key tiles", b, causal, w, n, false);
        else fwd_row<WsFwdTile<192, 2, 64>>("ws 64-key tiles", b, causal, w, n, false);
      }
      no_tuned_bwd(D);
    } else if (shipped_only) {  // e.g. under ncu
      if (D == 128) {
        fwd_row<sm90::FwdTileD128>("shipped", b, causal, w, n, true);
        make_bwd_stats<<<unsigned((ns + 255) / 256), 256>>>(b);
        bwd_row<sm90::BwdTileD128>("shipped", b, causal, w, n, true);
      } else {
        fwd_row<sm90::FwdTileD64>("shipped", b, causal, w, n, true);
        make_bwd_stats<<<unsigned((ns + 255) / 256), 256>>>(b);
        bwd_row<sm90::BwdTileD64>("shipped", b, causal, w, n, true);
      }
    } else if (D == 128) {
      // Reference rows: the sm80 table's mma.sync kernels, built here for sm_90a.
      fwd_row<sm80::FwdTileD128>("mma 32r 128x64 4w x2 rebuild", b, causal, w, n, true);
      make_bwd_stats<<<unsigned((ns + 255) / 256), 256>>>(b);
      fwd_row<sm90::FwdTileD128>("warp-specialized", b, causal, w, n, false);
      CK(cudaDeviceSynchronize());
      bwd_row<sm80::BwdTileD128>("mma PS q64 k128", b, causal, w, n, true);
      bwd_row<WgBwdTile<128, 64, 128>>("wgmma q64 k128", b, causal, w, n, false);
      bwd_row<WsBwdTile<128>>("warp-specialized", b, causal, w, n, false);
      bwd_row<WsBwdTile<128, true>>("warp-specialized stmatrix", b, causal, w, n, false);
      bwd_row<sm90::BwdTileD128>("shipped, deterministic", b, causal, w, n, false, true);
    } else {
      fwd_row<sm80::FwdTileD64>("mma 32r 128x64 4w x2", b, causal, w, n, true);
      make_bwd_stats<<<unsigned((ns + 255) / 256), 256>>>(b);
      fwd_row<sm90::FwdTileD64>("warp-specialized", b, causal, w, n, false);
      CK(cudaDeviceSynchronize());
      bwd_row<sm80::BwdTileD64>("mma PS q64 k128", b, causal, w, n, true);
      bwd_row<WgBwdTile<64, 64, 128>>("wgmma q64 k128", b, causal, w, n, false);
      bwd_row<sm90::BwdTileD64>("warp-specialized, 128 queries", b, causal, w, n, false);
      bwd_row<WsBwdTile<64>>("ws 64 queries per step", b, causal, w, n, false);
      bwd_row<WsBwdTile<64, true>>("ws 64 queries, stmatrix", b, causal, w, n, false);
      bwd_row<sm90::BwdTileD64>("shipped, deterministic", b, causal, w, n, false, true);
    }
    CK(cudaDeviceSynchronize());
    for (void* p : {(void*)b.q, (void*)b.k, (void*)b.v, (void*)b.dout, (void*)b.o, (void*)b.acc, (void*)b.dq, (void*)b.dk,
                    (void*)b.dv, (void*)b.acc_ref, (void*)b.dq_ref, (void*)b.dk_ref, (void*)b.dv_ref, (void*)b.m,
                    (void*)b.l, (void*)b.lse, (void*)b.delta})
      CK(cudaFree(p));
  }
  return 0;
}
