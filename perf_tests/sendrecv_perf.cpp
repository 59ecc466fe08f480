// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// sendrecv_perf: the communication ceiling of the ring schedules. Ranks 2k and
// 2k+1 exchange a message of each size, once through DistAttn's Communicator
// (sendrecv + Request::wait) and once through the raw backend in the same run
// (MPI_Sendrecv, or ncclSend/ncclRecv in one group on the same NCCL handle), so
// the table shows what the layer costs. nccl-tests-style output (STYLE.md b6).
//
//   time  = median over the timed iterations of one exchange, max over ranks
//   algbw = bytes sent per rank / time;  busbw = algbw (nccl-tests SendRecv factor 1)
//
// Usage: sendrecv_perf [-b min] [-e max] [-f factor] [-w warmup] [-n iters] [-c 0|1]
//                      [-J out.json] [--backend auto|mpi|nccl] [--staging auto|always]
// Sizes accept K, M, G suffixes (powers of 1024). Exit status 1 if any byte is wrong.

#include "common/kokkos_args.hpp"

#include <DistAttn/DistAttn.hpp>

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace DistAttn;

struct Options {
  std::size_t min_bytes = 1024;
  std::size_t max_bytes = std::size_t(64) << 20;
  double factor         = 2.0;
  int warmup            = 5;
  int iters             = 20;
  bool check            = true;
  std::string json;
  std::string backend = "auto";
  std::string staging = "auto";
};

std::size_t parse_size(const std::string& s) {
  char* end         = nullptr;
  const double v    = std::strtod(s.c_str(), &end);
  std::size_t scale = 1;
  if (end && *end) {
    switch (*end) {
      case 'K': case 'k': scale = std::size_t(1) << 10; break;
      case 'M': case 'm': scale = std::size_t(1) << 20; break;
      case 'G': case 'g': scale = std::size_t(1) << 30; break;
      default: throw InvalidArgument("sendrecv_perf: bad size '" + s + "' (use e.g. 1024, 64K, 256M)");
    }
  }
  if (!(v >= 0)) throw InvalidArgument("sendrecv_perf: bad size '" + s + "'");
  return std::size_t(v * double(scale));
}

void usage() {
  std::cout << "usage: sendrecv_perf [-b min_bytes] [-e max_bytes] [-f factor] [-w warmup] [-n iters]\n"
               "                     [-c 0|1] [-J out.json] [--backend auto|mpi|nccl] [--staging auto|always]\n"
               "                     [--kokkos-help (Kokkos' own options)]\n";
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next           = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgument("sendrecv_perf: option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-b") o.min_bytes = parse_size(next());
    else if (a == "-e") o.max_bytes = parse_size(next());
    else if (a == "-f") o.factor = std::stod(next());
    else if (a == "-w") o.warmup = std::stoi(next());
    else if (a == "-n") o.iters = std::stoi(next());
    else if (a == "-c") o.check = std::stoi(next()) != 0;
    else if (a == "-J") o.json = next();
    else if (a == "--backend") o.backend = next();
    else if (a == "--staging") o.staging = next();
    else if (a == "-h" || a == "--help" || a == "--kokkos-help") { usage(); std::exit(0); }
    else throw InvalidArgument("sendrecv_perf: unknown option '" + a + "'");
  }
  if (o.min_bytes == 0 || o.max_bytes < o.min_bytes || o.factor <= 1.0 || o.iters < 1 || o.warmup < 0)
    throw InvalidArgument("sendrecv_perf: need 0 < -b <= -e, -f > 1, -n >= 1, -w >= 0");
  if (o.backend != "auto" && o.backend != "mpi" && o.backend != "nccl")
    throw InvalidArgument("sendrecv_perf: --backend must be auto, mpi or nccl");
  if (o.staging != "auto" && o.staging != "always")
    throw InvalidArgument("sendrecv_perf: --staging must be auto or always");
  return o;
}

/// Byte i of rank r's message of `bytes` bytes: differs between ranks, sizes and positions.
inline unsigned char pattern(int rank, std::size_t bytes, std::size_t i) {
  std::uint64_t x = (std::uint64_t(rank) << 48) ^ (std::uint64_t(bytes) << 20) ^ i;
  x               = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
  return static_cast<unsigned char>(x >> 56);
}

struct Stat {
  double time_us = 0;  // median over iterations, max over ranks
  double algbw   = 0;
  long wrong     = 0;  // summed over ranks
};

double max_over_ranks(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}
long sum_over_ranks(long v) {
  long out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

/// Times `exchange` (one complete exchange, host returns when it is done).
template <class F>
double median_us(const Options& o, F&& exchange) {
  std::vector<double> t;
  t.reserve(std::size_t(o.iters));
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    MPI_Barrier(MPI_COMM_WORLD);  // both partners start together
    const auto t0 = std::chrono::steady_clock::now();
    exchange();
    const auto t1 = std::chrono::steady_clock::now();
    if (it >= o.warmup) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return max_over_ranks(t[t.size() / 2]);
}

template <class View>
void fill_pattern(const View& v, int rank) {
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < h.size(); ++i) h(i) = pattern(rank, h.size(), i);
  Kokkos::deep_copy(v, h);
}
template <class View>
void poison(const View& v) {
  Kokkos::deep_copy(v, static_cast<unsigned char>(0xA5));
}
template <class View>
long count_wrong(const View& v, int peer) {
  auto h     = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  long wrong = 0;
  for (std::size_t i = 0; i < h.size(); ++i) wrong += h(i) == pattern(peer, h.size(), i) ? 0 : 1;
  return wrong;
}

struct Row {
  std::size_t bytes;
  Stat layer, raw;
};

/// One table for one transport. RawExchange(send, recv, peer) performs the raw
/// backend's exchange on the same buffers (or host copies, see raw_note).
template <class Comm, class RawExchange>
int run_table(const Options& o, Comm& comm, const char* layer_name, const std::string& raw_name,
              RawExchange&& raw_exchange) {
  using Exec  = typename Comm::execution_space;
  using Mem   = typename Exec::memory_space;
  const int P = comm.size(), rank = comm.rank();
  const int peer = P == 1 ? 0 : (rank ^ 1);
  if (rank == 0) {
    std::printf("# test sendrecv_perf  backend %s  ranks %d  pairs 2k<->2k+1%s  warmup %d  iters %d  check %d\n",
                layer_name, P, P == 1 ? " (self)" : "", o.warmup, o.iters, int(o.check));
    std::printf("# time = median over iterations, max over ranks; algbw = bytes/time; busbw = algbw (SendRecv)\n");
    std::printf("#\n#             %-37s  %-37s\n", layer_name, raw_name.c_str());
    std::printf("# %10s  %9s %8s %8s %6s  %9s %8s %8s %6s  %8s\n", "size", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong", "overhead");
    std::printf("# %10s  %9s %8s %8s %6s  %9s %8s %8s %6s  %8s\n", "(B)", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(%)");
  }
  std::vector<Row> rows;
  long total_wrong = 0;
  for (double s = double(o.min_bytes); s <= double(o.max_bytes) * (1 + 1e-9); s *= o.factor) {
    const std::size_t bytes = std::size_t(s);
    Kokkos::View<unsigned char*, Mem> send("send", bytes), recv("recv", bytes);
    fill_pattern(send, rank);
    Row row{bytes, {}, {}};

    poison(recv);
    row.layer.time_us = median_us(o, [&] {
      auto req = sendrecv(comm, send, peer, recv, peer);
      req.wait();
    });
    row.layer.wrong = o.check ? sum_over_ranks(count_wrong(recv, peer)) : 0;

    poison(recv);
    row.raw.time_us = median_us(o, [&] { raw_exchange(send, recv, peer); });
    row.raw.wrong   = o.check ? sum_over_ranks(count_wrong(recv, peer)) : 0;

    row.layer.algbw = double(bytes) / row.layer.time_us * 1e-3;  // B/us -> GB/s
    row.raw.algbw   = double(bytes) / row.raw.time_us * 1e-3;
    total_wrong += row.layer.wrong + row.raw.wrong;
    if (rank == 0) {
      std::printf("  %10zu  %9.2f %8.3f %8.3f %6ld  %9.2f %8.3f %8.3f %6ld  %8.1f\n", bytes, row.layer.time_us,
                  row.layer.algbw, row.layer.algbw, row.layer.wrong, row.raw.time_us, row.raw.algbw,
                  row.raw.algbw, row.raw.wrong, 100.0 * (row.layer.time_us / row.raw.time_us - 1.0));
      std::fflush(stdout);
    }
    rows.push_back(row);
  }
  if (rank == 0) {
    double avg_l = 0, avg_r = 0;
    for (const auto& r : rows) avg_l += r.layer.algbw, avg_r += r.raw.algbw;
    avg_l /= double(rows.size());
    avg_r /= double(rows.size());
    std::printf("# Avg bus bandwidth (%s) : %.3f GB/s\n", layer_name, avg_l);
    std::printf("# Avg bus bandwidth (raw)   : %.3f GB/s\n", avg_r);
    std::printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    std::printf("# Test concluded: sendrecv_perf\n");
    if (!o.json.empty()) {
      std::ofstream js(o.json);
      js << "{\n  \"test\": \"sendrecv_perf\",\n  \"backend\": \"" << layer_name << "\",\n  \"raw\": \"" << raw_name
         << "\",\n  \"ranks\": " << P << ",\n  \"warmup\": " << o.warmup << ",\n  \"iters\": " << o.iters
         << ",\n  \"time\": \"median over iterations, max over ranks\",\n  \"results\": [\n";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        js << "    {\"bytes\": " << r.bytes << ", \"layer\": {\"time_us\": " << r.layer.time_us
           << ", \"algbw_GBps\": " << r.layer.algbw << ", \"busbw_GBps\": " << r.layer.algbw
           << ", \"wrong\": " << r.layer.wrong << "}, \"raw\": {\"time_us\": " << r.raw.time_us
           << ", \"algbw_GBps\": " << r.raw.algbw << ", \"busbw_GBps\": " << r.raw.algbw
           << ", \"wrong\": " << r.raw.wrong << "}}" << (i + 1 < rows.size() ? "," : "") << "\n";
      }
      js << "  ]\n}\n";
      if (!js) std::fprintf(stderr, "sendrecv_perf: could not write %s\n", o.json.c_str());
    }
  }
  return total_wrong ? 1 : 0;
}

int run_mpi(const Options& o) {
  using Exec = Kokkos::DefaultExecutionSpace;
  auto comm  = Communicator<MpiSpace, Exec>::from_raw(MPI_COMM_WORLD, Exec()).duplicate();
  if (o.staging == "always") comm.set_host_staging(HostStaging::Always);
  using DevView    = Kokkos::View<unsigned char*, Exec::memory_space>;
  const bool host  = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Exec::memory_space>::accessible;
  const bool direct = host || DISTATTN_ENABLE_GPU_AWARE_MPI;
  // The raw baseline passes MPI the Views' memory where MPI may read it, host
  // copies otherwise (then it excludes the staging copies the layer has to make).
  const std::string raw_name = direct ? "raw MPI_Sendrecv" : "raw MPI_Sendrecv (host buffers)";
  MPI_Comm raw_comm          = comm.comm();
  // Owned here, not static: a View must not outlive Kokkos::finalize.
  Kokkos::View<unsigned char*, Kokkos::HostSpace> hs, hr;
  auto raw = [&, direct](const DevView& send, const DevView& recv, int peer) {
    const void* sp = send.data();
    void* rp       = recv.data();
    if (!direct) {
      if (hs.size() != send.size()) {
        hs = Kokkos::View<unsigned char*, Kokkos::HostSpace>("raw_send", send.size());
        hr = Kokkos::View<unsigned char*, Kokkos::HostSpace>("raw_recv", recv.size());
        Kokkos::deep_copy(hs, send);
      }
      sp = hs.data();
      rp = hr.data();
    }
    Impl::MpiBytes layout(send.size(), "sendrecv_perf");
    DISTATTN_MPI_CHECK(MPI_Sendrecv(sp, layout.count(), layout.type(), peer, 1, rp, layout.count(), layout.type(),
                                    peer, 1, raw_comm, MPI_STATUS_IGNORE),
                       "sendrecv_perf: raw MPI_Sendrecv with peer " << peer);
    if (!direct && hr.size() == recv.size()) Kokkos::deep_copy(recv, hr);  // only for the check
  };
  const char* name = o.staging == "always" ? "DistAttn MPI (staged)" : "DistAttn MPI";
  return run_table(o, comm, name, raw_name, raw);
}

#if DISTATTN_ENABLE_NCCL
int run_nccl(const Options& o) {
  auto comm = Communicator<NcclSpace, Kokkos::Cuda>::from_mpi(MPI_COMM_WORLD, Kokkos::Cuda());
  using DevView = Kokkos::View<unsigned char*, Kokkos::CudaSpace>;
  auto raw = [&](const DevView& send, const DevView& recv, int peer) {
    cudaStream_t s = comm.stream();
    DISTATTN_NCCL_CHECK(ncclGroupStart(), "sendrecv_perf: raw");
    DISTATTN_NCCL_CHECK(ncclRecv(recv.data(), recv.size(), ncclUint8, peer, comm.comm(), s), "sendrecv_perf: raw ncclRecv");
    DISTATTN_NCCL_CHECK(ncclSend(send.data(), send.size(), ncclUint8, peer, comm.comm(), s), "sendrecv_perf: raw ncclSend");
    DISTATTN_NCCL_CHECK(ncclGroupEnd(), "sendrecv_perf: raw");
    DISTATTN_CUDA_CHECK(cudaStreamSynchronize(s), "sendrecv_perf: raw");
  };
  return run_table(o, comm, "DistAttn NCCL", "raw ncclSend/ncclRecv", raw);
}
#endif

void print_context(const std::string& backend) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::ostringstream line;
  line << "#  Rank " << rank << " Pid " << getpid() << " on " << host;
#if defined(KOKKOS_ENABLE_CUDA)
  {
    const int dev = Kokkos::Cuda().cuda_device();
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, dev);
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    line << " device " << dev << " [" << bus << "] " << prop.name;
  }
#else
  line << " " << Kokkos::DefaultExecutionSpace::name();
#endif
  std::string mine = line.str();
  mine.resize(200, ' ');
  std::vector<char> all(rank == 0 ? std::size_t(200) * size : 0);
  MPI_Gather(mine.data(), 200, MPI_CHAR, all.data(), 200, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::cout << "# DistAttn sendrecv_perf (" << backend << ")\n";
    print_configuration(std::cout);
    for (int r = 0; r < size; ++r) {
      std::string l(all.data() + std::size_t(r) * 200, 200);
      l.erase(l.find_last_not_of(' ') + 1);
      std::cout << l << '\n';
    }
    std::cout << std::flush;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    DistAttn::Perf::KokkosArgs args(argc, argv);
    Kokkos::ScopeGuard kokkos(args.kokkos_argc(), args.kokkos_argv());
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    try {
      const Options o = parse(args.tool_argc(), args.tool_argv());
      if (size > 1 && size % 2 != 0)
        throw InvalidArgument("sendrecv_perf: needs 1 rank or an even number of ranks (pairs 2k <-> 2k+1), got " +
                              std::to_string(size));
      std::string backend = o.backend;
      if (backend == "auto") backend = DISTATTN_ENABLE_NCCL ? "nccl" : "mpi";
      if (backend == "nccl" && !DISTATTN_ENABLE_NCCL)
        throw InvalidArgument("sendrecv_perf: --backend nccl, but DistAttn was built without DistAttn_ENABLE_NCCL");
      print_context(backend);
#if DISTATTN_ENABLE_NCCL
      rc = backend == "nccl" ? run_nccl(o) : run_mpi(o);
#else
      rc = run_mpi(o);
#endif
    } catch (const std::exception& e) {
      std::cerr << "[rank " << rank << "] " << e.what() << std::endl;
      rc = 2;
    }
    int any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    rc = any;
  }
  MPI_Finalize();
  return rc;
}
