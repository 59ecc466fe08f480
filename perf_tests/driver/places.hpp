// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Where each rank of distattn-run runs: its host and device, gathered once at
// start-up, for the --json context (which hosts and GPUs a result came from).

#include "sync.hpp"

#include <Kokkos_Core.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace DistAttn::Driver {

/// One rank's host and device.
struct Place {
  std::string host;
  std::string device;     ///< the GPU's model, or the host execution space on host builds
  std::string device_id;  ///< the GPU's UUID, the same however CUDA_VISIBLE_DEVICES numbers it ("" on host builds)
  int device_index = -1;  ///< the CUDA device number this rank uses (-1 on host builds)
};

inline nlohmann::json place_json(const Place& p) {
  return {{"host", p.host}, {"device", p.device}, {"device_id", p.device_id}, {"device_index", p.device_index}};
}

inline Place place_from_json(const nlohmann::json& j) {
  return {j.at("host").get<std::string>(), j.at("device").get<std::string>(), j.at("device_id").get<std::string>(),
          j.at("device_index").get<int>()};
}

/// This rank's place, as Kokkos initialized it.
inline Place this_place() {
  Place p;
  char name[256] = {};
  p.host = gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
#if defined(KOKKOS_ENABLE_CUDA)
  cudaDeviceProp prop{};
  if (cudaGetDevice(&p.device_index) == cudaSuccess && cudaGetDeviceProperties(&prop, p.device_index) == cudaSuccess) {
    p.device = prop.name;
    char hex[3];
    for (int i = 0; i < 16; ++i) {
      std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
      p.device_id += hex;
    }
  }
#else
  p.device = Kokkos::DefaultExecutionSpace::name();
#endif
  return p;
}

/// Every rank's place on rank 0, in rank order (empty elsewhere). Collective.
inline std::vector<Place> gather_places(const Place& mine, Sync& sync) {
  const std::string text = place_json(mine).dump();
  std::vector<Place> out;
  for (const auto& r : sync.gather(text.data(), text.size(), "the gather of every rank's host and device"))
    out.push_back(place_from_json(nlohmann::json::parse(std::string(r.begin(), r.end()))));
  return out;
}

}  // namespace DistAttn::Driver
