// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The rank -> host / GPU map distattn-run prints at start-up (as nccl-tests does),
// and its refusal of two ranks on one GPU: under a launcher whose binding did not
// take (every rank of a node on device 0), ranks would share a GPU silently and
// every number of the run would be wrong for the machine it claims.

#include "places.hpp"

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace DistAttn::Driver {

/// One line per rank: host, and the GPU (CUDA device number, model, UUID) or the host execution space.
inline std::string rank_map(const std::vector<Place>& places) {
  std::string out;
  for (std::size_t r = 0; r < places.size(); ++r) {
    const Place& p = places[r];
    out += "# rank " + std::to_string(r) + ": host " + p.host + ", ";
    out += p.device_id.empty() ? p.device
                               : "CUDA device " + std::to_string(p.device_index) + ", " + p.device + ", " + p.device_id;
    out += '\n';
  }
  return out;
}

/// Why the ranks must not run as placed (two or more of them on one GPU), or "".
/// GPUs are told apart by UUID, so ranks that each see their own GPU as device 0
/// (Slurm's --gpu-bind) are not taken for one.
inline std::string shared_gpu_error(const std::vector<Place>& places) {
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> by_gpu;
  for (std::size_t r = 0; r < places.size(); ++r)
    if (!places[r].device_id.empty()) by_gpu[{places[r].host, places[r].device_id}].push_back(r);
  for (const auto& [gpu, ranks] : by_gpu) {
    if (ranks.size() < 2) continue;
    std::string list;
    for (std::size_t i = 0; i < ranks.size(); ++i)
      list += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
    const Place& p = places[ranks[0]];
    return "ranks " + list + " share one GPU (" + p.device + " " + gpu.second + ", CUDA device " +
           std::to_string(p.device_index) + " on host " + gpu.first +
           "): start one rank per GPU (Slurm: srun --gpus-per-task=1 --gpu-bind=single:1; docs/cluster.md), "
           "or pass --allow-shared-gpu to run them so";
  }
  return "";
}

}  // namespace DistAttn::Driver
