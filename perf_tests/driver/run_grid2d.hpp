#pragma once
// distattn-run for Attention2D (--schedule grid2d-no | grid2d-o, --grid RxC).
//
// Every rank holds its cyclic shard: tokens {p + i P} of the same global problem
// the other schedules see (hash values at global indices, seeds q 11, k 12, v 13,
// dO 14). Prints one row per rank (compute / wait / total seconds and MB received
// per communication phase; sent equals received phase by phase) and the max over
// ranks, checks the measured bytes against grid2d_volume.hpp's model, and with
// --check gathers O, dQ, dK, dV to rank 0 and compares them with the fp64 reference.

#include "driver_common.hpp"
#include "run_ring.hpp"  // check_against_reference

#include <DistAttn/grid2d/grid2d_attention.hpp>

#include "common/timer.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace DistAttn::Driver {

/// "RxC" -> {R, C}; empty -> {0, 0} (choose_grid_shape).
inline GridShape parse_grid(const std::string& s) {
  if (s.empty()) return GridShape{0, 0};
  const auto x = s.find_first_of("xX");
  int R = -1, C = -1;
  try {
    if (x != std::string::npos) {
      std::size_t a = 0, b = 0;
      R = std::stoi(s.substr(0, x), &a);
      C = std::stoi(s.substr(x + 1), &b);
      if (a != x || b != s.size() - x - 1) R = C = -1;
    }
  } catch (const std::exception&) {
    R = C = -1;
  }
  if (R < 1 || C < 1) throw InvalidArgument("--grid '" + s + "' must be RxC with positive R and C, e.g. 2x3");
  return GridShape{R, C};
}

template <class T, class CommSpace>
int run_grid2d_with(const Options& o, Communicator<CommSpace, Exec>& world, const Exec& compute, MPI_Comm mpi) {
  using Acc    = accum_t<T>;
  const int P  = world.size(), rank = world.rank();
  const long N = o.seq;
  DISTATTN_REQUIRE(N % P == 0, "distattn-run",
                   "--seq N=" << N << " must be a multiple of the number of ranks P=" << P
                              << " for the grid2d schedules (cyclic layout: N/P tokens per rank)");
  const GridShape req = parse_grid(o.grid);
  Grid2DOptions go;
  go.variant       = o.schedule == "grid2d-no" ? Grid2DVariant::NO : Grid2DVariant::O;
  go.causal        = o.causal;
  go.recv_delay_ms = o.delay_ms;
  Grid2DAttention<T, CommSpace, Exec> a2d(world, req.rows, req.cols, compute, o.batch, N, o.heads, o.kv_heads, o.dim,
                                          go);
  const int n = a2d.shard_len();
  const PositionMap mine{long(rank), long(P)};
  Tensor4<T, Mem> q("q", o.batch, n, o.heads, o.dim), k("k", o.batch, n, o.kv_heads, o.dim),
      v("v", o.batch, n, o.kv_heads, o.dim), out("o", o.batch, n, o.heads, o.dim),
      dout("do", o.batch, n, o.heads, o.dim), dq("dq", o.batch, n, o.heads, o.dim),
      dk("dk", o.batch, n, o.kv_heads, o.dim), dv("dv", o.batch, n, o.kv_heads, o.dim);
  RowStats<Acc, Mem> lse("lse", o.batch, o.heads, n);
  fill_global_rows(compute, q, kSeedQ, mine, N, false);
  fill_global_rows(compute, k, kSeedK, mine, N, false);
  fill_global_rows(compute, v, kSeedV, mine, N, false);
  fill_global_rows(compute, dout, kSeedDO, mine, N, false);
  compat::fence(compute, "distattn-run: inputs ready");

  std::vector<double> tf, tb;
  Grid2DStats sf, sb;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    MPI_Barrier(mpi);
    a2d.forward(q, k, v, out, lse);
    sf = a2d.stats();
    if (o.backward) {
      MPI_Barrier(mpi);
      a2d.backward(q, k, v, out, dout, lse, dq, dk, dv);
      sb = a2d.stats();
    }
    if (it >= o.warmup) {
      tf.push_back(max_over_ranks(sf.total_s, mpi));
      tb.push_back(o.backward ? max_over_ranks(sb.total_s, mpi) : 0.0);
    }
  }

  // Measured bytes vs the model (exact where T and the accumulation type have the
  // same size; the model counts words, 16-bit runs mix 2- and 4-byte words).
  int model_mismatch = 0;
  const bool model_exact = sizeof(T) == sizeof(Acc);
  if (model_exact) {
    for (const bool bwd : {false, true}) {
      if (bwd && !o.backward) continue;
      const Grid2DStats& st = bwd ? sb : sf;
      const auto words      = grid2d_words_by_phase(a2d.layout(), rank, bwd, a2d.volume_params());
      for (int ph = 0; ph < kNumGrid2DPhases; ++ph) {
        const auto expect = std::uint64_t(words[std::size_t(ph)]) * std::uint64_t(o.batch) * sizeof(T);
        if (st.bytes_received[std::size_t(ph)] != expect || st.bytes_sent[std::size_t(ph)] != expect)
          ++model_mismatch;
      }
    }
  }
  int model_bad = 0;
  MPI_Allreduce(&model_mismatch, &model_bad, 1, MPI_INT, MPI_SUM, mpi);

  // Per-rank instrumentation of the last iteration (MB received per phase).
  auto mb = [](const Grid2DStats& s, Grid2DPhase p) { return double(s.received(p)) / 1e6; };
  using Ph = Grid2DPhase;
  const std::vector<double> row{sf.compute_s, sf.wait_s, sf.total_s, double(sf.tasks), mb(sf, Ph::KvPermute),
                                mb(sf, Ph::RowGather), mb(sf, Ph::ColGather), mb(sf, Ph::RowReduceScatter),
                                sb.compute_s, sb.wait_s, sb.total_s, double(sb.tasks), mb(sb, Ph::KvPermute),
                                mb(sb, Ph::RowGather), mb(sb, Ph::ColGather), mb(sb, Ph::RowReduceScatter),
                                mb(sb, Ph::ColReduceScatter), mb(sb, Ph::DkvPermute),
                                double(sf.comm_bytes_received[0] + sb.comm_bytes_received[0]) / 1e6,
                                double(sf.comm_bytes_received[1] + sb.comm_bytes_received[1]) / 1e6,
                                double(sf.comm_bytes_received[2] + sb.comm_bytes_received[2]) / 1e6,
                                double(sf.total_sent() + sb.total_sent()) / 1e6,
                                double(sf.total_received() + sb.total_received()) / 1e6};
  const auto table = gather_table(row, mpi);
  if (rank == 0) {
    std::printf("# schedule %s  ranks %d  grid %dx%d  seq %ld (shard %d, cyclic)  b %d h %d h_kv %d d %d  dtype %s "
                "causal %d\n",
                o.schedule.c_str(), P, a2d.rows(), a2d.cols(), N, n, o.batch, o.heads, o.kv_heads, o.dim,
                o.dtype.c_str(), int(o.causal));
    std::printf("# MB received per phase (sent is equal): perm = K/V permutation (world), rowg/colg = row/column "
                "gathers, rrs/crs = row/column reduce-scatters, dperm = dK/dV permutation back\n");
    std::printf("#                 ------------------- forward -------------------  ----------------------------- "
                "backward ------------------------------  -- MB by comm --   total MB\n");
    std::printf("# rank  compute(s)   wait(s)  total(s) tasks  perm  rowg  colg   rrs  compute(s)   wait(s)  "
                "total(s) tasks  perm  rowg  colg   rrs   crs dperm  world   row   col   sent   recv\n");
    std::vector<double> mx(row.size(), 0.0);
    auto print_row = [](const char* label, const std::vector<double>& t) {
      std::printf("  %4s  %10.5f %9.5f %9.5f %5.0f %5.2f %5.2f %5.2f %5.2f  %10.5f %9.5f %9.5f %5.0f %5.2f %5.2f "
                  "%5.2f %5.2f %5.2f %5.2f %6.2f %5.2f %5.2f %6.2f %6.2f\n",
                  label, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12], t[13],
                  t[14], t[15], t[16], t[17], t[18], t[19], t[20], t[21], t[22]);
    };
    for (std::size_t r = 0; r < table.size(); ++r) {
      const auto& t = table[r];
      for (std::size_t i = 0; i < t.size(); ++i) mx[i] = std::max(mx[i], t[i]);
      print_row(std::to_string(r).c_str(), t);
    }
    print_row("max", mx);
    std::printf("# median over %d iterations (max over ranks): forward %.6f s, backward %.6f s\n", o.iters,
                Perf::median(tf), Perf::median(tb));
    if (model_exact)
      std::printf("# bytes vs grid2d_volume.hpp model (per rank and phase): %s\n",
                  model_bad == 0 ? "OK" : "MISMATCH");
  }

  int rc = 0;
  if (o.check) {
    auto pos_of = [P](int r, long i) { return long(r) + long(P) * i; };
    auto go_    = gather_rows(to_host_f64(out), N, pos_of, mpi);
    auto gq     = gather_rows(to_host_f64(dq), N, pos_of, mpi);
    auto gk     = gather_rows(to_host_f64(dk), N, pos_of, mpi);
    auto gv     = gather_rows(to_host_f64(dv), N, pos_of, mpi);
    if (rank == 0) rc = check_against_reference<T>(o, go_, o.backward ? &gq : nullptr, &gk, &gv);
    if (rank == 0 && model_bad != 0) {
      std::printf("# check bytes: %d (rank, phase) pairs differ from grid2d_volume.hpp FAILED\n", model_bad);
      ++rc;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, mpi);
  }
  return rc;
}

/// Attention2D run of distattn-run for element type T.
template <class T>
int run_grid2d(const Options& o, MPI_Comm mpi) {
  // Two instances: transfers on one, block calls on the other (distinct streams on GPUs).
  return with_communicator(o, mpi, [&](auto& comm, const Exec& compute) { return run_grid2d_with<T>(o, comm, compute, mpi); });
}

/// Attention2D run of distattn-run, element type from --dtype.
inline int run_grid2d(const Options& o, MPI_Comm mpi) {
  if (o.dtype == "float") return run_grid2d<float>(o, mpi);
  if (o.dtype == "double") return run_grid2d<double>(o, mpi);
#if defined(KOKKOS_ENABLE_CUDA)
  if (o.dtype == "bf16" && compat::has_bhalf) return run_grid2d<compat::bhalf_t>(o, mpi);
  if (o.dtype == "fp16" && compat::has_half) return run_grid2d<compat::half_t>(o, mpi);
#endif
  throw InvalidArgument("--dtype '" + o.dtype + "' is not available in this build");
}

}  // namespace DistAttn::Driver
