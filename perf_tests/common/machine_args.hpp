// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The cost model's machine on the command line, shared by cost_scaling and
// distattn-run --schedule auto: links (nvlink_ib_node_defaults unless given), GPUs
// per node, device memory, and the CPU cores the ranks share.

#include "common/args.hpp"

#include <DistAttn/cost/machine_model.hpp>

#include <string>
#include <thread>

namespace DistAttn::Perf {

struct MachineArgs {
  std::string tiles;       // tile table (perf_tests/data/, cost_calibrate)
  int gpus_per_node = 8;   // ranks per node
  double inter_gbps = 50;  // inter-node GB/s
  double intra_gbps = -1;  // intra-node GB/s (-1: the node default)
  double latency_us = -1;  // per transfer, both levels (-1: the node default)
  double memory_gb  = 0;   // device memory per rank (0: not checked)
  double cores      = -1;  // CPU cores the ranks share (-1: this host's on a host build, else 0 = not shared)
};

inline void add_machine_options(CLI::App& app, MachineArgs& a, bool tiles_required) {
  auto* t = app.add_option("--tiles", a.tiles,
                           std::string("cost model: tile table (see perf_tests/data/ and cost_calibrate)") +
                               (tiles_required ? "" : "; default: the one shipped for this device and --dtype"))
                ->check(CLI::ExistingFile);
  if (tiles_required) t->required();
  app.add_option("--gpus-per-node", a.gpus_per_node, "cost model: ranks per node")->check(at_least(1))
      ->capture_default_str();
  app.add_option("--inter-gbps", a.inter_gbps, "cost model: inter-node GB/s")->check(CLI::Range(1e-6, 1e9))
      ->capture_default_str();
  app.add_option("--intra-gbps", a.intra_gbps, "cost model: intra-node GB/s (default: the node default)")
      ->check(CLI::Range(1e-6, 1e9));
  app.add_option("--latency-us", a.latency_us, "cost model: link latency in us (default: the node default)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--memory-gb", a.memory_gb, "cost model: device memory per rank (0: unlimited)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--cores,--core-share", a.cores,
                 "cost model: CPU cores the ranks share; tile rates / max(1, P / cores) (default: this host's cores "
                 "on a CPU build, 0 = not shared on a GPU build)")
      ->check(CLI::Range(0.0, 1e6));
}

/// The cores the ranks share: --cores, or this host's on a CPU build (0 = not shared).
inline double shared_cores(const MachineArgs& a) {
  if (a.cores >= 0) return a.cores;
#if defined(KOKKOS_ENABLE_CUDA)
  return 0;
#else
  return double(std::thread::hardware_concurrency());
#endif
}
/// ", P ranks on C cores: tile rates / f" when they share fewer cores than ranks.
inline std::string shared_cores_note(const MachineArgs& a, int P) {
  const double c = shared_cores(a);
  if (c <= 0 || P <= c) return "";
  return ", " + std::to_string(P) + " ranks on " + std::to_string(int(c)) + " cores: tile rates / " +
         std::to_string(double(P) / c).substr(0, 4);
}

/// The machine of `a` for P ranks.
inline MachineModel make_machine(const MachineArgs& a, int P) {
  MachineModel m = nvlink_ib_node_defaults(TileThroughput::load(a.tiles));
  m.gpus_per_node       = a.gpus_per_node;
  m.device_memory_bytes = a.memory_gb * 1e9;
  m.inter.bandwidth_Bps = a.inter_gbps * 1e9;
  if (a.intra_gbps > 0) m.intra.bandwidth_Bps = a.intra_gbps * 1e9;
  if (a.latency_us >= 0) m.intra.latency_s = m.inter.latency_s = a.latency_us * 1e-6;
  return with_shared_cores(m, P, shared_cores(a));
}

}  // namespace DistAttn::Perf
