#pragma once
// distattn-run for the DistFlashAttn schedules (--schedule ring|balanced) and
// the single-device baseline (--schedule local, rank 0 only).

#include "driver_common.hpp"

#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/schedule/ring_format.hpp>

#include "common/timer.hpp"

#include <iostream>

namespace DistAttn::Driver {

template <class T>
int check_against_reference(const Options& o, const Testing::HostTensor& O, const Testing::HostTensor* dq,
                            const Testing::HostTensor* dk, const Testing::HostTensor* dv) {
  const long N = o.seq;
  auto q = global_host<T>(kSeedQ, o.batch, N, o.heads, o.dim);
  auto k = global_host<T>(kSeedK, o.batch, N, o.kv_heads, o.dim);
  auto v = global_host<T>(kSeedV, o.batch, N, o.kv_heads, o.dim);
  const Mask mask    = o.causal ? Mask::causal() : Mask::none();
  const double scale = 1.0 / std::sqrt(double(o.dim));
  Testing::HostTensor ro("ro", o.batch, N, o.heads, o.dim);
  Testing::HostStats rl("rl", o.batch, o.heads, N);
  Testing::reference_fwd(q, k, v, mask, scale, ro, rl);
  const double tol = check_tolerance<T>();
  int bad          = 0;
  auto report      = [&](const char* name, double err) {
    std::printf("# check %-3s rel_error %.3e (tolerance %.1e) %s\n", name, err, tol, err <= tol ? "OK" : "FAILED");
    bad += err <= tol ? 0 : 1;
  };
  report("O", Testing::rel_error(O, ro));
  if (dq) {
    auto dout = global_host<T>(kSeedDO, o.batch, N, o.heads, o.dim);
    Testing::HostTensor rdq("rdq", o.batch, N, o.heads, o.dim), rdk("rdk", o.batch, N, o.kv_heads, o.dim),
        rdv("rdv", o.batch, N, o.kv_heads, o.dim);
    Testing::reference_bwd(q, k, v, dout, mask, scale, rdq, rdk, rdv);
    report("dQ", Testing::rel_error(*dq, rdq));
    report("dK", Testing::rel_error(*dk, rdk));
    report("dV", Testing::rel_error(*dv, rdv));
  }
  return bad;
}

template <class T>
int run_local(const Options& o, MPI_Comm comm) {
  using Acc = accum_t<T>;
  int rank  = 0;
  MPI_Comm_rank(comm, &rank);
  int rc = 0;
  if (rank == 0) {
    Exec exec;
    const long N = o.seq;
    Tensor4<T, Mem> q("q", o.batch, N, o.heads, o.dim), k("k", o.batch, N, o.kv_heads, o.dim),
        v("v", o.batch, N, o.kv_heads, o.dim), out("o", o.batch, N, o.heads, o.dim),
        dout("do", o.batch, N, o.heads, o.dim), dq("dq", o.batch, N, o.heads, o.dim),
        dk("dk", o.batch, N, o.kv_heads, o.dim), dv("dv", o.batch, N, o.kv_heads, o.dim);
    RowStats<Acc, Mem> lse("lse", o.batch, o.heads, N);
    fill_global_rows(exec, q, kSeedQ, {0, 1}, N, false);
    fill_global_rows(exec, k, kSeedK, {0, 1}, N, false);
    fill_global_rows(exec, v, kSeedV, {0, 1}, N, false);
    fill_global_rows(exec, dout, kSeedDO, {0, 1}, N, false);
    AttnOptions ao;
    ao.mask = o.causal ? Mask::causal() : Mask::none();
    Perf::EventTimer<Exec> timer(exec);
    std::vector<double> tf, tb;
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      timer.start();
      attention_fwd(exec, q, k, v, out, lse, ao);
      const double f = timer.stop();
      double b       = 0;
      if (o.backward) {
        timer.start();
        attention_bwd(exec, q, k, v, out, dout, lse, dq, dk, dv, ao);
        b = timer.stop();
      }
      if (it >= o.warmup) {
        tf.push_back(f);
        tb.push_back(b);
      }
    }
    std::printf("# schedule local  seq %ld  b %d h %d h_kv %d d %d  dtype %s causal %d\n", N, o.batch, o.heads,
                o.kv_heads, o.dim, o.dtype.c_str(), int(o.causal));
    std::printf("#   fwd_time(s)   bwd_time(s)\n    %10.6f    %10.6f\n", Perf::median(tf), Perf::median(tb));
    if (o.check) {
      auto ho = to_host_f64(out), hq = to_host_f64(dq), hk = to_host_f64(dk), hv = to_host_f64(dv);
      rc = check_against_reference<T>(o, ho, o.backward ? &hq : nullptr, &hk, &hv);
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
  return rc;
}

template <class T, class CommSpace>
int run_ring_with(const Options& o, Communicator<CommSpace, Exec>& comm, const Exec& compute, MPI_Comm mpi) {
  using Acc    = accum_t<T>;
  const int P  = comm.size(), rank = comm.rank();
  const long N = o.seq;
  const bool zz = o.schedule == "zigzag";
  // Padded at the end (exact for causal; see ring_attention.hpp); zigzag needs
  // 2P equal half-chunks.
  const int c = zz ? 2 * int((N + 2 * P - 1) / (2 * P)) : int((N + P - 1) / P);
  DISTATTN_REQUIRE(o.causal || zz, "distattn-run",
                   "--causal 0 needs --schedule zigzag: the " << o.schedule
                                                               << " schedule computes causal attention only");
  DISTATTN_REQUIRE(o.causal || N % (zz ? 2L * P : long(P)) == 0, "distattn-run",
                   "--causal 0: --seq " << N << " must be a multiple of " << 2L * P
                                        << " (2 x ranks): padded keys would enter every row of full attention");
  RingOptions ro;
  ro.kind   = o.schedule == "ring" ? RingKind::Vanilla : (zz ? RingKind::Zigzag : RingKind::Balanced);
  ro.causal = o.causal;
  ro.recv_delay_ms = o.delay_ms;
  RingAttention<T, CommSpace, Exec> ring(comm, compute, o.batch, c, o.heads, o.kv_heads, o.dim, ro);
  if (o.print_schedule && rank == 0) std::cout << to_string(ring.schedule(), Pass::Forward) << '\n';

  Tensor4<T, Mem> q("q", o.batch, c, o.heads, o.dim), k("k", o.batch, c, o.kv_heads, o.dim),
      v("v", o.batch, c, o.kv_heads, o.dim), out("o", o.batch, c, o.heads, o.dim),
      dout("do", o.batch, c, o.heads, o.dim), dq("dq", o.batch, c, o.heads, o.dim),
      dk("dk", o.batch, c, o.kv_heads, o.dim), dv("dv", o.batch, c, o.kv_heads, o.dim);
  RowStats<Acc, Mem> lse("lse", o.batch, o.heads, c);
  // Local row i sits at global position pos(rank, i).
  auto pos = [c, P, zz](int r, long i) {
    if (!zz) return long(r) * c + i;
    const long h = c / 2;
    return i < h ? long(r) * h + i : long(2 * P - 1 - r) * h + (i - h);
  };
  auto fill_all = [&](auto&& view_of) {  // one affine piece at a time
    const int pieces = zz ? 2 : 1, len = c / pieces;
    for (int a = 0; a < pieces; ++a) {
      const PositionMap pm{pos(rank, long(a) * len), 1};
      view_of(std::make_pair(a * len, (a + 1) * len), pm);
    }
  };
  fill_all([&](auto rows, PositionMap pm) {
    const auto A = Kokkos::ALL;
    fill_global_rows(compute, Kokkos::subview(q, A, rows, A, A), kSeedQ, pm, N, false);
    fill_global_rows(compute, Kokkos::subview(k, A, rows, A, A), kSeedK, pm, N, false);
    fill_global_rows(compute, Kokkos::subview(v, A, rows, A, A), kSeedV, pm, N, false);
    fill_global_rows(compute, Kokkos::subview(dout, A, rows, A, A), kSeedDO, pm, N, /*zero_padding=*/true);
  });
  compat::fence(compute, "distattn-run: inputs ready");

  std::vector<double> tf, tb;
  RingStats sf, sb;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    MPI_Barrier(mpi);
    ring.forward(q, k, v, out, lse);
    sf = ring.stats();
    if (o.backward) {
      MPI_Barrier(mpi);
      ring.backward(q, k, v, out, dout, lse, dq, dk, dv);
      sb = ring.stats();
    }
    if (it >= o.warmup) {
      tf.push_back(max_over_ranks(sf.total_s, mpi));
      tb.push_back(o.backward ? max_over_ranks(sb.total_s, mpi) : 0.0);
    }
  }

  // Per-rank instrumentation of the last iteration.
  auto kindb = [](const RingStats& s, PayloadKind k) {
    return double(s.bytes_sent[std::size_t(k)] + s.bytes_received[std::size_t(k)]) / 1e6;
  };
  const std::vector<double> row{sf.compute_s, sf.wait_s, sf.total_s, double(sf.tasks), double(sf.merges),
                                kindb(sf, PayloadKind::KV), kindb(sf, PayloadKind::Q), kindb(sf, PayloadKind::Partial),
                                sb.compute_s, sb.wait_s, sb.total_s, kindb(sb, PayloadKind::KV),
                                kindb(sb, PayloadKind::QBundle), kindb(sb, PayloadKind::GradKV),
                                kindb(sb, PayloadKind::GradQ), double(sf.total_sent() + sb.total_sent()) / 1e6,
                                double(sf.total_received() + sb.total_received()) / 1e6};
  const auto table = gather_table(row, mpi);
  if (rank == 0) {
    std::printf("# comm %s\n", std::is_same<CommSpace, MpiSpace>::value ? "MPI" : "NCCL");
    std::printf("# schedule %s  ranks %d  steps %d  seq %ld (chunk %d%s)  b %d h %d h_kv %d d %d  dtype %s\n",
                o.schedule.c_str(), P, ring.schedule().num_steps(), N, c, long(c) * P != N ? ", padded" : "",
                o.batch, o.heads, o.kv_heads, o.dim, o.dtype.c_str());
    std::printf("# idle fraction: %.4f (SPEC 2.3.6 accounting), %.4f (paper's convention)\n",
                ring.schedule().idle_fraction(), ring.schedule().idle_fraction_printed());
    std::printf("#                 ---------------- forward ----------------------  ------------------- backward "
                "------------------------   total MB\n");
    std::printf("# rank  compute(s)   wait(s)  total(s) tasks merges  kv_MB  q_MB part_MB  compute(s)   wait(s)  "
                "total(s)  kv_MB qbnd_MB dkv_MB  dq_MB   sent   recv\n");
    std::vector<double> mx(row.size(), 0.0);
    for (std::size_t r = 0; r < table.size(); ++r) {
      const auto& t = table[r];
      for (std::size_t i = 0; i < t.size(); ++i) mx[i] = std::max(mx[i], t[i]);
      std::printf("  %4zu  %10.5f %9.5f %9.5f %5.0f %6.0f %6.2f %5.2f %7.2f  %10.5f %9.5f %9.5f %6.2f %7.2f %6.2f "
                  "%6.2f %6.2f %6.2f\n",
                  r, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12], t[13], t[14],
                  t[15], t[16]);
    }
    std::printf("   max  %10.5f %9.5f %9.5f %5.0f %6.0f %6.2f %5.2f %7.2f  %10.5f %9.5f %9.5f %6.2f %7.2f %6.2f "
                "%6.2f %6.2f %6.2f\n",
                mx[0], mx[1], mx[2], mx[3], mx[4], mx[5], mx[6], mx[7], mx[8], mx[9], mx[10], mx[11], mx[12], mx[13],
                mx[14], mx[15], mx[16]);
    std::printf("# median over %d iterations (max over ranks): forward %.6f s, backward %.6f s\n", o.iters,
                Perf::median(tf), Perf::median(tb));
  }
  if (o.decompose) {
    // The same schedule with every transfer skipped: what the tiles alone cost.
    RingOptions co = ro;
    co.compute_only = true;
    RingAttention<T, CommSpace, Exec> alone(comm, compute, o.batch, c, o.heads, o.kv_heads, o.dim, co);
    Tensor4<T, Mem> o2("o2", o.batch, c, o.heads, o.dim), dq2("dq2", o.batch, c, o.heads, o.dim),
        dk2("dk2", o.batch, c, o.kv_heads, o.dim), dv2("dv2", o.batch, c, o.kv_heads, o.dim);
    RowStats<Acc, Mem> lse2("lse2", o.batch, o.heads, c);
    std::vector<double> cf, cb;
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      MPI_Barrier(mpi);
      alone.forward(q, k, v, o2, lse2);
      const double f = alone.stats().total_s;
      double b       = 0;
      if (o.backward) {
        MPI_Barrier(mpi);
        alone.backward(q, k, v, out, dout, lse, dq2, dk2, dv2);
        b = alone.stats().total_s;
      }
      if (it >= o.warmup) {
        cf.push_back(max_over_ranks(f, mpi));
        cb.push_back(max_over_ranks(b, mpi));
      }
    }
    if (rank == 0) {
      const double f = Perf::median(tf), fc = Perf::median(cf), b = Perf::median(tb), bc = Perf::median(cb);
      std::printf("# decomposition (median, max over ranks):   time(s)  compute_only(s)  exposed_comm(s)  exposed(%%)\n");
      std::printf("#   forward                              %9.6f        %9.6f        %9.6f     %6.2f\n", f, fc,
                  f - fc, 100.0 * (f - fc) / f);
      if (o.backward)
        std::printf("#   backward                             %9.6f        %9.6f        %9.6f     %6.2f\n", b, bc,
                    b - bc, 100.0 * (b - bc) / b);
    }
  }

  int rc = 0;
  if (o.check) {
    auto pos_of = pos;
    auto go     = gather_rows(to_host_f64(out), N, pos_of, mpi);
    auto gq     = gather_rows(to_host_f64(dq), N, pos_of, mpi);
    auto gk     = gather_rows(to_host_f64(dk), N, pos_of, mpi);
    auto gv     = gather_rows(to_host_f64(dv), N, pos_of, mpi);
    if (rank == 0) rc = check_against_reference<T>(o, go, o.backward ? &gq : nullptr, &gk, &gv);
    MPI_Bcast(&rc, 1, MPI_INT, 0, mpi);
  }
  return rc;
}

template <class T>
int run_ring(const Options& o, MPI_Comm mpi) {
  // Two instances: transfers on one, tiles on the other (distinct streams on GPUs).
  return with_communicator(o, mpi, [&](auto& comm, const Exec& compute) { return run_ring_with<T>(o, comm, compute, mpi); });
}

}  // namespace DistAttn::Driver
