// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// block_balance_perf: the time of assign_blocks (schedule/block_assignment.hpp) and
// the balance of every strategy. Documents from --docs FILE (one length per line)
// or, without it, --num-docs log-normal lengths (fixed seed) summing to --seq.
//
//   block_balance_perf --seq 1048576 --num-docs 10000 --ranks 8 --block 512
//   block_balance_perf --docs docs_one64k_plus_2k_128k.txt --ranks 4 --window 4096

#include <DistAttn/schedule/block_assignment.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using namespace DistAttn;

namespace {

std::vector<std::int64_t> generated_docs(std::int64_t seq, int count) {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> len(0.0, 1.0);
  std::vector<double> raw(static_cast<std::size_t>(count));
  double sum = 0;
  for (auto& x : raw) sum += x = len(rng);
  std::vector<std::int64_t> off{0};
  for (int d = 0; d < count; ++d) {
    const std::int64_t l = d + 1 == count ? seq - off.back() : std::max<std::int64_t>(1, std::llround(raw[std::size_t(d)] / sum * double(seq)));
    off.push_back(std::min(seq, off.back() + l));
  }
  off.back() = seq;
  return off;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time and balance of the document-aware block assignment"};
  std::string docs_file;
  std::int64_t seq = 1 << 20, block = 512, window = 0;
  int num_docs = 10000, ranks = 8, reps = 50;
  app.add_option("--docs", docs_file, "document lengths, one per line (overrides --seq, --num-docs)");
  app.add_option("--seq", seq, "total tokens of the generated documents")->capture_default_str();
  app.add_option("--num-docs", num_docs, "generated documents (log-normal lengths, seed 1)")->capture_default_str();
  app.add_option("--ranks", ranks, "P")->capture_default_str();
  app.add_option("--block", block, "tokens per block")->capture_default_str();
  app.add_option("--window", window, "causal window W (0: none)")->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions (the fastest is reported)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<std::int64_t> off{0};
  if (!docs_file.empty()) {
    std::ifstream f(docs_file);
    for (std::int64_t l = 0; f >> l;) off.push_back(off.back() + l);
    if (off.size() < 2) {
      std::fprintf(stderr, "--docs %s: no document lengths read\n", docs_file.c_str());
      return 1;
    }
    seq = off.back();
  } else {
    off = generated_docs(seq, num_docs);
  }
  Mask rule = Mask::causal().with_documents(Documents{off.data(), int(off.size()) - 1});
  if (window > 0) rule = rule.with_window(Window{window, 0});
  const std::int64_t n = balance_padded_length(seq, ranks, block);
  std::printf("# %zu documents, %lld tokens (%lld padded), P=%d, block %lld (k=%lld), window %lld\n", off.size() - 1,
              (long long)seq, (long long)n, ranks, (long long)block, (long long)(n / block / ranks), (long long)window);
  std::printf("# %-11s %10s %12s\n", "strategy", "balance", "time_us");
  for (const BlockStrategy s : {BlockStrategy::Contiguous, BlockStrategy::Zigzag, BlockStrategy::HeadTail,
                                BlockStrategy::Greedy}) {
    double best = 1e30, balance = 0;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const BlockAssignment a = assign_blocks(rule, n, ranks, block, s);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      balance = a.balance();
    }
    std::printf("  %-11s %10.4f %12.1f\n", to_string(s), balance, best * 1e6);
  }
  return 0;
}
