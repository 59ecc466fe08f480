// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run --schedule auto [--tiles FILE]: the cost model (cost/cost_model.hpp)
// ranks every executor and grid for this P and problem; the ranking is printed
// with its predicted times and the first choice the driver can run is run. Without
// --tiles the table shipped for this device and dtype (perf_tests/data) is used.

#include "driver_common.hpp"
#include "driver_options.hpp"
#include "sync.hpp"

#include <DistAttn/cost/cost_model.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace DistAttn::Driver {

/// The driver's options that run `c` (schedule, grid, Ulysses degree, inner executor).
inline Options options_for(const Options& o, const ExecutorChoice& c) {
  Options x  = o;
  x.schedule = to_string(c.kind);
  x.grid.clear();
  if (is_grid2d(c.kind)) x.grid = std::to_string(c.rows) + "x" + std::to_string(c.cols);
  if (c.kind == ExecutorKind::Ulysses) x.ulysses_groups = c.head_groups;
  if (c.kind == ExecutorKind::Hybrid) {
    x.ulysses = c.ulysses_degree;
    x.inner   = to_string(c.inner);
    if (is_grid2d(c.inner)) x.grid = std::to_string(c.inner_rows) + "x" + std::to_string(c.inner_cols);
  }
  return x;
}

/// Whether the driver runs `c` for this N without padding it cannot do.
inline bool driver_runs(const ExecutorChoice& c, long N, int P) {
  if (is_grid2d(c.kind)) return N % P == 0;
  if (c.kind == ExecutorKind::Hybrid) return N % (c.inner == ExecutorKind::RingZigzag ? 2L * P : long(P)) == 0;
  return true;
}

/// This device as the shipped tile tables name it (tiles_<device>_<dtype>...txt):
/// "cpu" on a host build, else the GPU's model from its name ("NVIDIA H200" -> "h200").
inline std::string device_tag() {
#if defined(KOKKOS_ENABLE_CUDA)
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess) {
    std::istringstream words(p.name);
    std::string w;
    while (words >> w)
      if (w != "NVIDIA") break;
    std::string tag;
    for (char c : w) {
      if (!std::isalnum(static_cast<unsigned char>(c))) break;
      tag += char(std::tolower(static_cast<unsigned char>(c)));
    }
    return tag.empty() ? "unknown-gpu" : tag;
  }
  return "unknown-gpu";
#else
  return "cpu";
#endif
}

/// Where the shipped tile tables are: beside an installed driver
/// (<prefix>/share/distattn/tiles, DISTATTN_DRIVER_INSTALLED_TILES relative to its
/// bin/), else the source tree's perf_tests/data (a driver run from its build tree).
inline std::string tiles_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = (exe.parent_path() / DISTATTN_DRIVER_INSTALLED_TILES).lexically_normal();
    if (fs::is_directory(installed, ec)) return installed.string();
  }
  return DISTATTN_DRIVER_TILES_DIR;
}

/// The tile tables shipped with the project (tiles_dir()).
inline std::vector<std::string> shipped_tile_tables() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(tiles_dir(), ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("tiles_", 0) == 0 && e.path().extension() == ".txt") names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// --tiles, or the shipped table of this device and --dtype (one naming --dim,
/// "_d<dim>", first). Throws InvalidArgument, listing the shipped tables, when none matches.
inline std::string tile_table(const Options& o) {
  if (!o.machine.tiles.empty()) return o.machine.tiles;
  const std::string prefix = "tiles_" + device_tag() + "_" + o.dtype, dim = "_d" + std::to_string(o.dim);
  const auto names         = shipped_tile_tables();
  std::string pick;
  for (const auto& n : names) {
    const char next = n.size() > prefix.size() ? n[prefix.size()] : 0;
    if (n.rfind(prefix, 0) != 0 || (next != '.' && next != '_')) continue;
    const bool names_dim = n.find(dim + ".") != std::string::npos || n.find(dim + "_") != std::string::npos;
    if (pick.empty() || names_dim) pick = n;
    if (names_dim) break;
  }
  if (!pick.empty()) return tiles_dir() + "/" + pick;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw InvalidArgument("--schedule auto needs --tiles FILE: no shipped tile table matches this device (" +
                        device_tag() + ") and --dtype " + o.dtype + "; shipped: " +
                        (list.empty() ? std::string("none found") : list) + " (in " + tiles_dir() +
                        "); measure one with cost_calibrate");
}

/// The ranking for this job, printed on rank 0; returns the options of the choice to
/// run. Every rank ranks alike, so an error (no table, a bad table, nothing fits) is
/// agreed and ends the job on every rank.
inline Options choose_schedule(const Options& o, Sync& comm) {
  const int P = comm.size(), rank = comm.rank();
  AttnProblem pr;
  pr.batch = o.batch, pr.seq_len = o.seq, pr.heads = o.heads, pr.kv_heads = o.kv_heads, pr.head_dim = o.dim;
  pr.dtype = o.dtype;
  // Causality, window and documents as the executors are given them, so the ranking
  // prices the work the mask allows.
  pr.with_mask_of(mask_options(o));
  Perf::MachineArgs machine = o.machine;
  MachineModel m;
  std::vector<Prediction> ranked;
  std::string error;
  try {
    machine.tiles = tile_table(o);
    m             = Perf::make_machine(machine, P);
    ranked        = rank_choices(pr, P, m);
  } catch (const InvalidArgument& e) {
    error = e.what();
  }
  comm.agree(error, "the cost model's ranking");
  const Prediction* pick = nullptr;
  for (const auto& p : ranked)
    if (driver_runs(p.choice, o.seq, P)) {
      pick = &p;
      break;
    }
  if (pick == nullptr) throw AgreedError("--schedule auto: no ranked choice runs with --seq " + std::to_string(o.seq));
  if (rank == 0) {
    if (o.machine.tiles.empty())
      std::printf("# schedule auto: no --tiles: the shipped table for this device (%s) and --dtype %s, %s\n",
                  device_tag().c_str(), o.dtype.c_str(), machine.tiles.c_str());
    std::printf("# schedule auto: cost model ranking for P=%d (tiles %s); predicted seconds, slowest rank\n", P,
                machine.tiles.c_str());
    std::printf("# machine: intra-node %.4g GB/s, inter-node %.4g GB/s, latency %.4g us, %d ranks per node%s\n",
                m.intra.bandwidth_Bps * 1e-9, m.inter.bandwidth_Bps * 1e-9, m.intra.latency_s * 1e6,
                m.gpus_per_node, Perf::shared_cores_note(o.machine, P).c_str());
    std::printf("#   %-28s %10s %10s %10s %10s %12s\n", "choice", "fwd", "bwd", "total", "exposed", "workspace_MB");
    int shown = 0;
    for (const auto& p : ranked) {
      if (shown++ == o.auto_show) break;
      std::printf("#   %-28s %10.4g %10.4g %10.4g %10.4g %12.1f%s\n", p.choice.name().c_str(), p.forward.seconds,
                  p.backward.seconds, p.total_seconds(),
                  p.forward.exposed_seconds() + p.backward.exposed_seconds(), double(p.workspace_bytes) / 1e6,
                  &p == pick ? "   <- runs" : "");
    }
  }
  return options_for(o, pick->choice);
}

}  // namespace DistAttn::Driver
