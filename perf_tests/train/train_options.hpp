// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Options of distattn-train. GPU builds default to Llama-7B layer shapes; CPU
// builds to small shapes that finish in seconds on 2 cores.

#include "common/args.hpp"

#include <DistAttn/layer/decoder_config.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace DistAttn::Train {

struct Options {
  std::string schedule = "zigzag";  // ring | balanced | zigzag | grid2d-no | grid2d-o
  std::vector<CheckpointPolicy> policies{CheckpointPolicy::None, CheckpointPolicy::LayerBoundary,
                                         CheckpointPolicy::RematAware};
#if defined(KOKKOS_ENABLE_CUDA)
  long seq = 65536;
  int layers = 4, batch = 1;
  DecoderConfig cfg{4096, 32, 32, 128, 11008};
#else
  long seq = 1024;
  int layers = 2, batch = 1;
  DecoderConfig cfg{256, 8, 4, 32, 688};
#endif
  int steps = 3, warmup = 1;
  double lr = 0.5;
  std::string dtype = "float";
  std::string comm;  // mpi | nccl; empty = nccl where built, else mpi
  bool deterministic = false, help = false;
};

/// The option table, bound to `o`; `policy` is the --policy text.
inline void add_options(CLI::App& app, Options& o, std::string& policy) {
  using Perf::at_least;
  app.add_option("--schedule", o.schedule, "sequence executor")
      ->check(CLI::IsMember({"ring", "balanced", "zigzag", "grid2d-no", "grid2d-o"}))
      ->capture_default_str();
  app.add_option("--policy", policy, "checkpoint policy")
      ->check(CLI::IsMember({"none", "layer-boundary", "remat-aware", "all"}))
      ->capture_default_str();
  Perf::add_length(app, "--seq", o.seq, "total tokens per sequence, over all ranks");
  app.add_option("--batch", o.batch, "batch")->check(at_least(1))->capture_default_str();
  app.add_option("--layers", o.layers, "decoder layers")->check(at_least(1))->capture_default_str();
  app.add_option("--hidden", o.cfg.hidden, "hidden size E")->check(at_least(1))->capture_default_str();
  app.add_option("--heads", o.cfg.heads, "query heads")->check(at_least(1))->capture_default_str();
  app.add_option("--kv-heads", o.cfg.kv_heads, "key/value heads")->check(at_least(1))->capture_default_str();
  app.add_option("--dim", o.cfg.head_dim, "head dimension")->check(at_least(1))->capture_default_str();
  app.add_option("--mlp", o.cfg.mlp_hidden, "MLP hidden size F")->check(at_least(1))->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps")->check(at_least(1))->capture_default_str();
  app.add_option("-w,--warmup", o.warmup, "warm-up steps")->check(at_least(0))->capture_default_str();
  app.add_option("--lr", o.lr, "SGD learning rate")->check(CLI::Range(0.0, 1e6))->capture_default_str();
  app.add_option("--dtype", o.dtype, "element type")->check(CLI::IsMember(Perf::dtype_choices()))->capture_default_str();
  app.add_flag("--deterministic", o.deterministic,
               "deterministic attention backward (slower on GPUs): policies' losses must then match bit for bit");
  app.add_option("--comm", o.comm, "transport (default nccl where built, else mpi)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
}

constexpr const char* kAbout =
    "L decoder layers (RMSNorm, GQA attention through the chosen executor, SwiGLU MLP): forward + backward + "
    "plain SGD for K steps, for each checkpoint policy. Defaults: Llama-7B layers (E 4096, H 32, d 128, F 11008, "
    "L 4, N 64K) on GPU builds; E 256, H 8, Hkv 4, d 32, F 688, L 2, N 1024 on CPU builds.";

inline void print_usage(std::ostream& os) {
  Options o;
  std::string policy = "all";
  CLI::App app(kAbout, "distattn-train");
  add_options(app, o, policy);
  Perf::add_kokkos_help(app);
  os << app.help();
}

inline std::vector<CheckpointPolicy> parse_policies(const std::string& s) {
  if (s == "all") return {CheckpointPolicy::None, CheckpointPolicy::LayerBoundary, CheckpointPolicy::RematAware};
  for (auto p : {CheckpointPolicy::None, CheckpointPolicy::LayerBoundary, CheckpointPolicy::RematAware})
    if (s == to_string(p)) return {p};
  throw InvalidArgument("--policy: '" + s + "' is not none, layer-boundary, remat-aware or all");
}

/// Throws InvalidArgument naming the option and its valid range or choices.
inline Options parse_options(int argc, char** argv) {
  Options o;
  std::string policy = "all";
  CLI::App app(kAbout, "distattn-train");
  add_options(app, o, policy);
  o.help     = !Perf::parse_command_line(app, argc, argv);
  o.policies = parse_policies(policy);
  return o;
}

}  // namespace DistAttn::Train
