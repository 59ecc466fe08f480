// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every executor's outputs, bit for bit, against outputs recorded before a change
// (issue #36: the renovation must leave every result unchanged). Fixed inputs;
// each executor runs a forward and a backward, causal and full, and every rank
// hashes its o, lse, dq, dk and dv (64-bit FNV-1a over the bytes, so -0.0 and 0.0
// differ as they should). Rank 0 compares the hashes with the recorded file and
// names every (executor, rank, tensor) that differs.
//
// The host build compares with unit_tests/data/bitwise_outputs_serial.txt.
// Recording (only for a change meant to alter results, said so in its commit):
//   DISTATTN_BITWISE_RECORD=<file> mpiexec -n P distattn_test_bitwise_outputs
// replaces that file's lines for P ranks. GPU builds have no recorded file in
// the tree (results depend on the device and the kernels): record with the build
// before the change, then compare with the build after it on the same machine:
//   DISTATTN_BITWISE_FILE=<file> mpiexec -n P distattn_test_bitwise_outputs
// ctest pins OpenBLAS to one kernel set (OPENBLAS_CORETYPE), since its products
// round differently on different instruction sets.

#include "executor_memory_helpers.hpp"

#include <DistAttn/registry/any_attention.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace DistAttn::Test {
namespace {

constexpr std::uint64_t kSeed = 20261128;
constexpr const char* kTensors[] = {"o", "lse", "dq", "dk", "dv"};

template <class V>
std::uint64_t fnv1a(const V& dev) {
  auto h                  = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dev);
  const auto* bytes       = reinterpret_cast<const unsigned char*>(h.data());
  std::uint64_t x         = 14695981039346656037ull;
  const std::size_t count = h.span() * sizeof(typename V::non_const_value_type);
  for (std::size_t i = 0; i < count; ++i) x = (x ^ bytes[i]) * 1099511628211ull;
  return x;
}

/// The hashes of one rank, in case order, and the case names (the same on every rank).
struct Run {
  std::vector<std::string> cases;
  std::vector<std::uint64_t> hashes;

  template <class E>
  void add(const std::string& name, E& ex, int B, int c, int H, int Hkv, int D) {
    Tensors t(B, c, H, Hkv, D, kSeed);
    t.forward(ex);
    t.backward(ex);
    Exec().fence();
    cases.push_back(name);
    for (std::uint64_t h : {fnv1a(t.o), fnv1a(t.lse), fnv1a(t.dq), fnv1a(t.dk), fnv1a(t.dv)}) hashes.push_back(h);
  }
};

std::string hex(std::uint64_t x) {
  std::ostringstream s;
  s << std::hex;
  s.width(16);
  s.fill('0');
  s << x;
  return s.str();
}

/// "P=<P> <case> rank=<r> <tensor>" -> hash, for every rank (rank 0 only).
std::map<std::string, std::string> gathered(const Run& run, int P) {
  const int n = int(run.hashes.size());
  std::vector<std::uint64_t> all(world_rank() == 0 ? std::size_t(n) * P : 0);
  MPI_Gather(run.hashes.data(), n, MPI_UINT64_T, all.data(), n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  std::map<std::string, std::string> out;
  if (world_rank() != 0) return out;
  for (int r = 0; r < P; ++r)
    for (std::size_t c = 0; c < run.cases.size(); ++c)
      for (int t = 0; t < 5; ++t)
        out["P=" + std::to_string(P) + " " + run.cases[c] + " rank=" + std::to_string(r) + " " + kTensors[t]] =
            hex(all[std::size_t(r) * n + c * 5 + t]);
  return out;
}

/// Recorded lines: "<key> <hash>"; '#' starts a comment line.
std::map<std::string, std::string> read_file(const std::string& path) {
  std::map<std::string, std::string> m;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto sp = line.rfind(' ');
    if (sp != std::string::npos) m[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return m;
}

std::string record_header() {
  return std::string("# DistAttn bitwise outputs (unit_tests/TestBitwiseOutputs.cpp): execution space ") + Exec::name() +
         ", double inputs, fixed seed. Lines: P=<ranks> <case> rank=<r> <tensor> <FNV-1a of the bytes>.";
}

/// Records (rank 0), keeping other rank counts' lines.
void record(const std::string& path, const std::map<std::string, std::string>& now, int P) {
  auto m            = read_file(path);
  const auto prefix = "P=" + std::to_string(P) + " ";
  for (auto it = m.begin(); it != m.end();) it = it->first.rfind(prefix, 0) == 0 ? m.erase(it) : std::next(it);
  for (const auto& kv : now) m[kv.first] = kv.second;
  std::ofstream out(path);
  out << record_header() << "\n";
  for (const auto& kv : m) out << kv.first << " " << kv.second << "\n";
  if (!out) ADD_FAILURE() << "could not write " << path;
}

/// Differences (rank 0): every key of this run checked against the file.
std::vector<std::string> compare(const std::string& path, const std::map<std::string, std::string>& now) {
  const auto want = read_file(path);
  std::vector<std::string> diff;
  if (want.empty()) return {"no recorded outputs in " + path};
  for (const auto& kv : now) {
    auto it = want.find(kv.first);
    if (it == want.end())
      diff.push_back(kv.first + ": not recorded");
    else if (it->second != kv.second)
      diff.push_back(kv.first + ": " + kv.second + ", recorded " + it->second);
  }
  return diff;
}

/// Every executor, built through make_attention (the registry): the recorded file
/// was made from the executors' own classes, so a pass here also shows that the
/// registry computes the same bits.
Run run_every_executor(Comm& comm) {
  const int P = world_size();
  // GQA that every executor accepts at P = 1..4 (Ulysses splits kv heads by P, or P by kv heads).
  const LocalProblem p{1, 24, 12, P == 3 ? 3 : 2, 16};
  std::vector<ExecutorChoice> choices;
  for (ExecutorKind k : kAllExecutorKinds) {
    ExecutorChoice c;
    c.kind = k;
    choices.push_back(c);
  }
  if (P == 4)
    for (ExecutorKind inner : {ExecutorKind::RingZigzag, ExecutorKind::Grid2DO}) {
      ExecutorChoice c;
      c.kind           = ExecutorKind::Hybrid;
      c.ulysses_degree = 2;
      c.inner          = inner;
      choices.push_back(c);
    }
  Run run;
  for (bool causal : {true, false}) {
    ExecutorOptions o;
    o.causal = causal;
    for (const ExecutorChoice& c : choices) {
      // The vanilla and balanced rings compute causal attention only.
      if (!causal && (c.kind == ExecutorKind::RingVanilla || c.kind == ExecutorKind::RingBalanced)) continue;
      auto ex = make_attention<T>(comm, Exec(), p, c, o);
      std::string name = is_ring(c.kind) ? std::string(c.kind == ExecutorKind::RingVanilla ? "ring-vanilla"
                                                       : c.kind == ExecutorKind::RingBalanced ? "ring-balanced"
                                                                                              : "ring-zigzag")
                                         : std::string(to_string(c.kind));
      if (c.kind == ExecutorKind::Hybrid)
        name += "-U" + std::to_string(c.ulysses_degree) + "-" + to_string(Impl::hybrid_inner(c.inner));
      run.add(name + "-" + (causal ? "causal" : "full"), *ex, p.batch, p.local_seq, p.heads, p.kv_heads,
              p.head_dim);
    }
  }
  return run;
}

TEST(BitwiseOutputs, EveryExecutorMatchesTheRecordedOutputs) {
  const char* rec  = std::getenv("DISTATTN_BITWISE_RECORD");
  const char* file = std::getenv("DISTATTN_BITWISE_FILE");
  std::string path = rec ? rec : file ? file : "";
#ifdef DISTATTN_BITWISE_DEFAULT_FILE
  if (path.empty() && std::is_same<Exec, Kokkos::Serial>::value) path = DISTATTN_BITWISE_DEFAULT_FILE;
#endif
  if (path.empty())
    GTEST_SKIP() << "no recorded outputs for execution space " << Exec::name()
                 << ": record with the build before a change (DISTATTN_BITWISE_RECORD=<file>), then compare "
                    "with the build after it (DISTATTN_BITWISE_FILE=<file>)";

  Comm comm = Comm::from_raw(MPI_COMM_WORLD, Exec());
  comm.set_timeout(60.0);
  comm.set_timeout_policy(TimeoutPolicy::Throw);
  const int P    = world_size();
  const auto now = gathered(run_every_executor(comm), P);

  std::vector<std::string> diff;
  if (world_rank() == 0) {
    if (rec)
      record(path, now, P);
    else
      diff = compare(path, now);
  }
  int ndiff = int(diff.size());
  MPI_Bcast(&ndiff, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::ostringstream msg;
  for (const auto& d : diff) msg << "\n  " << d;
  EXPECT_EQ(ndiff, 0) << (world_rank() == 0 ? "outputs differ from " + path + ":" + msg.str()
                                            : std::string("outputs differ (rank 0 lists them)"));
}

}  // namespace
}  // namespace DistAttn::Test
