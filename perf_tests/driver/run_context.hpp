// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The "context" record of distattn-run's --json, after Google Benchmark's: what
// a result needs to be traced to a build, a machine and a command (version, git
// commit at build time, hosts, devices, library versions, the command line).
// Library versions are those the driver was compiled and runs against; a field
// is null where the build has no such library (NCCL, CUDA on host builds).

#include "places.hpp"

#include <DistAttn/core/config.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <distattn_build_info.hpp>  // generated at build time: DISTATTN_GIT_HASH, DISTATTN_GIT_DIRTY

#include <KokkosKernels_config.h>
#include <mpi.h>
#if DISTATTN_ENABLE_NCCL
#include <nccl.h>
#endif

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <ctime>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace DistAttn::Driver {

/// What main() knows before any run and the runners do not: the command line as
/// typed (before Kokkos removes its own options) and when and where the job started.
struct StartInfo {
  std::vector<std::string> argv;
  std::string date;           ///< UTC, ISO 8601, on each rank's clock at start-up
  std::vector<Place> places;  ///< rank 0: every rank's, in rank order
};

/// Set once by main() before the run; finish() reads it, so every runner's --json
/// carries the context without passing it through each of them.
inline StartInfo& start_info() {
  static StartInfo info;
  return info;
}

inline std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

inline std::string compiler_name() {
#if defined(__clang__)
  return std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

inline std::string dotted(long major, long minor, long patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

/// The MPI library's own name and version (its first line: Open MPI adds build details).
inline std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, std::size_t(len));
  s = s.substr(0, s.find_first_of("\n,"));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return s;
}

/// Rank 0's context record; "ranks" is the job's size (a --schedule local run
/// computes on one of them).
inline nlohmann::json context_json() {
  using Json             = nlohmann::json;
  const StartInfo& start = start_info();
  std::string command_line;
  for (const auto& a : start.argv) command_line += (command_line.empty() ? "" : " ") + a;
  Json devices = Json::array();
  std::set<std::string> hosts;
  for (std::size_t r = 0; r < start.places.size(); ++r) {
    Json d    = place_json(start.places[r]);
    d["rank"] = r;
    devices.push_back(d);
    hosts.insert(start.places[r].host);
  }
  int mpi_major = 0, mpi_minor = 0;
  MPI_Get_version(&mpi_major, &mpi_minor);
  double load[3] = {-1, -1, -1};
  const bool have_load = getloadavg(load, 3) == 3;
  Json c{{"program", "distattn-run"},
         {"distattn_version", DISTATTN_VERSION_STRING},
         {"git_hash", DISTATTN_GIT_HASH},
         {"git_dirty", DISTATTN_GIT_DIRTY != 0},
         {"library_build_type", DISTATTN_DRIVER_BUILD_TYPE},
         {"compiler", compiler_name()},
         {"date", start.date},
         {"host", start.places.empty() ? "" : start.places[0].host},
         {"hosts", hosts.size()},
         {"ranks", start.places.size()},
         {"devices", devices},
         {"num_cpus", std::thread::hardware_concurrency()},
         {"load_avg", have_load ? Json{load[0], load[1], load[2]} : Json()},
         {"executable", start.argv.empty() ? "" : start.argv[0]},
         {"command_line", command_line},
         {"execution_space", Kokkos::DefaultExecutionSpace::name()},
         {"kokkos_version", dotted(KOKKOS_VERSION / 10000, KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100)},
         {"mpi_version", std::to_string(mpi_major) + "." + std::to_string(mpi_minor)},
         {"mpi_library", mpi_library_version()}};
#if defined(KOKKOSKERNELS_VERSION)
  c["kokkos_kernels_version"] =
      dotted(KOKKOSKERNELS_VERSION / 10000, KOKKOSKERNELS_VERSION / 100 % 100, KOKKOSKERNELS_VERSION % 100);
#else
  c["kokkos_kernels_version"] = nullptr;  // Kokkos Kernels 3.x names no version in its headers
#endif
  c["nccl_version"] = nullptr;
#if DISTATTN_ENABLE_NCCL
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    c["nccl_version"] = nccl >= 10000 ? dotted(nccl / 10000, nccl / 100 % 100, nccl % 100)
                                      : dotted(nccl / 1000, nccl / 100 % 10, nccl % 100);
#endif
  c["cuda_runtime_version"] = nullptr;
  c["cuda_driver_version"]  = nullptr;
#if defined(KOKKOS_ENABLE_CUDA)
  int rt = 0, drv = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) c["cuda_runtime_version"] = dotted(rt / 1000, rt % 1000 / 10, 0);
  if (cudaDriverGetVersion(&drv) == cudaSuccess) c["cuda_driver_version"] = dotted(drv / 1000, drv % 1000 / 10, 0);
#endif
  return c;
}

}  // namespace DistAttn::Driver
