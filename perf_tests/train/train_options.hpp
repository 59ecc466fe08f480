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
  bool fp64 = false, help = false;
};

inline void print_usage(std::ostream& os) {
  os << "usage: mpiexec -n P distattn-train [options]\n"
        "  L decoder layers (RMSNorm, GQA attention through the chosen executor, SwiGLU MLP),\n"
        "  forward + backward + plain SGD for K steps, for each checkpoint policy.\n"
        "  --schedule ring|balanced|zigzag|grid2d-no|grid2d-o   (default zigzag)\n"
        "  --policy none|layer-boundary|remat-aware|all          (default all)\n"
        "  --seq N          total tokens per sequence, over all ranks\n"
        "  --batch B --layers L\n"
        "  --hidden E --heads H --kv-heads Hkv --dim d --mlp F\n"
        "  --steps K -w W   timed and warm-up steps (default 3, 1)\n"
        "  --lr X           SGD learning rate (default 0.5)\n"
        "  --fp64           double instead of float\n"
        "  defaults: Llama-7B layers (E 4096, H 32, d 128, F 11008, L 4, N 64K) on GPU builds,\n"
        "            E 256, H 8, Hkv 4, d 32, F 688, L 2, N 1024 on CPU builds\n";
}

inline std::vector<CheckpointPolicy> parse_policies(const std::string& s) {
  if (s == "all") return {CheckpointPolicy::None, CheckpointPolicy::LayerBoundary, CheckpointPolicy::RematAware};
  for (auto p : {CheckpointPolicy::None, CheckpointPolicy::LayerBoundary, CheckpointPolicy::RematAware})
    if (s == to_string(p)) return {p};
  throw InvalidArgument("--policy: '" + s + "' is not none, layer-boundary, remat-aware or all");
}

inline Options parse_options(int argc, char** argv) {
  Perf::Args a(argc, argv);
  Options o;
  o.help      = a.flag({"--help", "-h"});
  o.schedule  = a.str({"--schedule"}, o.schedule);
  o.policies  = parse_policies(a.str({"--policy"}, "all"));
  o.seq       = a.integer({"--seq"}, o.seq);
  o.batch     = int(a.integer({"--batch"}, o.batch));
  o.layers    = int(a.integer({"--layers"}, o.layers));
  o.cfg.hidden     = int(a.integer({"--hidden"}, o.cfg.hidden));
  o.cfg.heads      = int(a.integer({"--heads"}, o.cfg.heads));
  o.cfg.kv_heads   = int(a.integer({"--kv-heads"}, o.cfg.kv_heads));
  o.cfg.head_dim   = int(a.integer({"--dim"}, o.cfg.head_dim));
  o.cfg.mlp_hidden = int(a.integer({"--mlp"}, o.cfg.mlp_hidden));
  o.steps     = int(a.integer({"--steps"}, o.steps));
  o.warmup    = int(a.integer({"-w", "--warmup"}, o.warmup));
  o.lr        = a.real({"--lr"}, o.lr);
  o.fp64      = a.flag({"--fp64"});
  a.reject_unknown();
  if (o.steps < 1 || o.warmup < 0) throw InvalidArgument("--steps must be >= 1 and -w >= 0");
  return o;
}

}  // namespace DistAttn::Train
