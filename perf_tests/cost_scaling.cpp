// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cost_scaling: the cost model's predicted-scaling table (docs/design/cost_model.md,
// "Predicted scaling"). Everything it prints is PREDICTED, not measured.
//
//   cost_scaling --tiles perf_tests/data/tiles_h200_bf16.txt [--csv out.csv]
//                [--ranks 8,16,...,1024] [--seqs 131072,...,4194304] [--heads 32 --kv-heads 8 --dim 128]
//                [--gpus-per-node 8] [--inter-gbps 50] [--intra-gbps 297.96] [--latency-us 16.41]
//                [--memory-gb 0 (not checked)]
//                [--paper | --rank] [--batch 1] [--cores C]
//
// Per (P, N): the winner of rank_choices and the best choice of each family
// (ring kinds, Attention2D grids, Ulysses, hybrid U x S), fwd+bwd seconds, the
// winner's exposed communication, and the bytes per rank the best ring and the
// best Attention2D receive in the forward. --paper prints the comparison with the
// Attention2D paper's setups instead (64 GPUs, 1 or 4 per node, a sweep of
// inter-node bandwidths). --rank prints every feasible choice of rank_choices for
// each (P, N), the list `--schedule auto` would run the first of. --cores C
// divides the tile rates by max(1, P / C): P ranks sharing C CPU cores.
#include <DistAttn/core/error.hpp>
#include <DistAttn/cost/cost_model.hpp>

#include "common/args.hpp"
#include "common/machine_args.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace DistAttn;
using namespace DistAttn::Perf;
using DistAttn::Perf::at_least;
using DistAttn::Perf::dtype_choices;
using DistAttn::Perf::parse_command_line;

namespace {

struct Best {
  const Prediction* p = nullptr;
  void offer(const Prediction& q) {
    if (!p || q.total_seconds() < p->total_seconds()) p = &q;
  }
  std::string name() const { return p ? p->choice.name() : "-"; }
  double t() const { return p ? p->total_seconds() : 0.0; }
};

struct Families {
  Best ring, grid, ulysses, hybrid;
  std::vector<Prediction> all;
};

Families families(const AttnProblem& pr, int P, const MachineModel& m, const RankingOptions& o = {}) {
  Families f;
  f.all = rank_choices(pr, P, m, o);
  for (const Prediction& p : f.all) {
    const ExecutorKind k = p.choice.kind;
    if (is_ring(k)) f.ring.offer(p);
    else if (is_grid2d(k)) f.grid.offer(p);
    else if (k == ExecutorKind::Ulysses) f.ulysses.offer(p);
    else f.hybrid.offer(p);
  }
  return f;
}

std::string seq_name(long N) {
  return N >= (1L << 20) ? std::to_string(N >> 20) + "M" : std::to_string(N >> 10) + "K";
}

void scaling(const AttnProblem& base, const MachineModel& m, const std::vector<long>& ranks,
             const std::vector<long>& seqs, const std::string& csv_path) {
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    DISTATTN_REQUIRE(csv.good(), "cost_scaling", "cannot write '" << csv_path << "'");
    csv << "P,N,winner,winner_s,ring,ring_s,grid2d,grid2d_s,ulysses_s,hybrid,hybrid_s,exposed_pct,"
           "ring_fwd_bytes,grid2d_fwd_bytes\n";
  }
  std::printf("| P | N | predicted winner | fwd+bwd (s) | exposed | best ring (s) | best Attention2D (s) | "
              "A2D / ring speed-up | Ulysses (s) | best hybrid (s) | fwd MB/rank ring / A2D |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (long P : ranks)
    for (long N : seqs) {
      AttnProblem pr = base;
      pr.seq_len = N;
      const Families f = families(pr, int(P), m);
      const Prediction& w = f.all.front();
      const double exposed = 100.0 * (w.forward.exposed_seconds() + w.backward.exposed_seconds()) / w.total_seconds();
      const double rb = f.ring.p ? f.ring.p->forward.max_bytes_received * 1e-6 : 0;
      const double gb = f.grid.p ? f.grid.p->forward.max_bytes_received * 1e-6 : 0;
      auto cell = [](const Best& b) {
        char buf[96];
        if (b.p) std::snprintf(buf, sizeof buf, "%s %.4g", b.name().c_str(), b.t());
        return b.p ? std::string(buf) : std::string("-");
      };
      char speedup[32] = "-";
      if (f.ring.p && f.grid.p) std::snprintf(speedup, sizeof speedup, "%.2f", f.ring.t() / f.grid.t());
      std::printf("| %ld | %s | %s | %.4g | %.1f%% | %s | %s | %s | %s | %s | %.0f / %.0f |\n", P, seq_name(N).c_str(),
                  w.choice.name().c_str(), w.total_seconds(), exposed, cell(f.ring).c_str(), cell(f.grid).c_str(),
                  speedup, f.ulysses.p ? std::to_string(f.ulysses.t()).substr(0, 6).c_str() : "-",
                  cell(f.hybrid).c_str(), rb, gb);
      if (csv.is_open())
        csv << P << ',' << N << ',' << w.choice.name() << ',' << w.total_seconds() << ',' << f.ring.name() << ','
            << f.ring.t() << ',' << f.grid.name() << ',' << f.grid.t() << ',' << f.ulysses.t() << ','
            << f.hybrid.name() << ',' << f.hybrid.t() << ',' << exposed << ',' << rb * 1e6 << ',' << gb * 1e6
            << '\n';
    }
}

/// The Attention2D paper's setups: 64 GPUs, 4 per node (A100 runs) or 1 per
/// node (H100 runs), over networks of several speeds (the paper's Ethernet
/// speed is not stated). Tile rates stay this machine's.
void paper(const AttnProblem& base, const MachineModel& m0, const std::vector<long>& seqs) {
  std::printf("| GPUs/node | inter-node GB/s | heads / KV heads | N | best ring (s) | vanilla ring (s) | "
              "best Attention2D (s) | speed-up vs best ring | vs vanilla ring |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int gpn : {4, 1})
    for (double gbps : {1.25, 3.125, 12.5, 50.0})
      for (int kv : {base.heads, base.kv_heads})
        for (long N : seqs) {
          MachineModel m = m0;
          m.gpus_per_node = gpn;
          m.inter.bandwidth_Bps = gbps * 1e9;
          AttnProblem pr = base;
          pr.seq_len = N, pr.kv_heads = kv;
          RankingOptions o;
          o.ulysses = o.hybrid = false;
          const Families f = families(pr, 64, m, o);
          ExecutorChoice v;
          v.kind = ExecutorKind::RingVanilla;
          const double tv = predict(v, pr, 64, m).total_seconds();
          std::printf("| %d | %.3g | %d / %d | %s | %s %.4g | %.4g | %s %.4g | %.2f | %.2f |\n", gpn, gbps, pr.heads,
                      kv, seq_name(N).c_str(), f.ring.name().c_str(), f.ring.t(), tv, f.grid.name().c_str(),
                      f.grid.t(), f.ring.t() / f.grid.t(), tv / f.grid.t());
        }
}

void ranking(const AttnProblem& base, const MachineArgs& ma, const std::vector<long>& ranks,
             const std::vector<long>& seqs) {
  for (long P : ranks)
    for (long N : seqs) {
      AttnProblem pr = base;
      pr.seq_len = N;
      const MachineModel mm = make_machine(ma, int(P));
      const double c    = shared_cores(ma);
      const double slow = c > 0 ? std::max(1.0, double(P) / c) : 1.0;
      std::printf("# P=%ld N=%ld: every feasible choice, fastest predicted first (tile rates / %.2f)\n", P, N, slow);
      std::printf("| rank | choice | fwd (s) | bwd (s) | fwd compute-only (s) | bwd compute-only (s) | exposed | "
                  "fwd MB recv/rank | workspace MB/rank |\n|---|---|---|---|---|---|---|---|---|\n");
      int i = 0;
      for (const Prediction& p : rank_choices(pr, int(P), mm)) {
        const double ex = 100.0 * (p.forward.exposed_seconds() + p.backward.exposed_seconds()) / p.total_seconds();
        std::printf("| %d | %s | %.5g | %.5g | %.5g | %.5g | %.1f%% | %.2f | %.2f |\n", ++i, p.choice.name().c_str(),
                    p.forward.seconds, p.backward.seconds, p.forward.compute_only_seconds,
                    p.backward.compute_only_seconds, ex, p.forward.max_bytes_received * 1e-6,
                    p.workspace_bytes * 1e-6);
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string csv;
    MachineArgs ma;
    ma.cores = 0;  // GPU nodes unless --cores says the ranks share a CPU host
    int causal = 1;
    bool paper_mode = false, rank_mode = false;
    AttnProblem pr;
    pr.batch = 1, pr.heads = 32, pr.kv_heads = 8, pr.head_dim = 128, pr.dtype = "bf16";
    std::vector<long> ranks{8, 16, 32, 64, 128, 256, 512, 1024}, seqs;
    CLI::App app("Predicted times of every executor (the cost model).", "cost_scaling");
    add_machine_options(app, ma, true);
    app.add_option("--batch", pr.batch, "batch")->check(at_least(1))->capture_default_str();
    app.add_option("--heads", pr.heads, "heads")->check(at_least(1))->capture_default_str();
    app.add_option("--kv-heads", pr.kv_heads, "kv heads")->check(at_least(1))->capture_default_str();
    app.add_option("--dim", pr.head_dim, "head dim")->check(at_least(1))->capture_default_str();
    app.add_option("--dtype", pr.dtype, "element type")->check(CLI::IsMember({"float", "double", "bf16", "fp16"}))
        ->capture_default_str();
    app.add_option("--causal", causal, "causal mask")->check(CLI::Range(0, 1))->capture_default_str();
    app.add_option("--csv", csv, "also write the table as CSV");
    app.add_flag("--paper", paper_mode, "compare with the Attention2D paper's setups");
    app.add_flag("--rank", rank_mode, "print the whole ranking for each case");
    app.add_option("--ranks", ranks, "rank counts")->delimiter(',')->check(at_least(1L))->capture_default_str();
    app.add_option("--seqs", seqs, "sequence lengths")->delimiter(',')->check(at_least(1L));
    if (!parse_command_line(app, argc, argv)) {
      std::cout << app.help();
      return 0;
    }
    pr.causal = causal != 0;
    if (seqs.empty())
      seqs = paper_mode ? std::vector<long>{32768, 131072}
                        : std::vector<long>{131072, 262144, 524288, 1048576, 2097152, 4194304};
    const MachineModel m = make_machine(ma, 1);
    if (rank_mode) ranking(pr, ma, ranks, seqs);
    else if (paper_mode) paper(pr, m, seqs);
    else scaling(pr, m, ranks, seqs, csv);
  } catch (const std::exception& e) {
    std::cerr << "cost_scaling: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
