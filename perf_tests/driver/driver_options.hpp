#pragma once
// Options of distattn-run. Defaults finish in seconds on 2 CPU cores.

#include "common/args.hpp"

#include <ostream>
#include <string>

namespace DistAttn::Driver {

struct Options {
  std::string schedule = "balanced";  // local | ring | balanced | zigzag | ulysses | hybrid | grid2d-no | grid2d-o
  std::string grid;                   // "RxC" for grid2d-* (and a grid2d inner executor), empty = auto
  int ulysses = 0;                    // hybrid: Ulysses degree U (0 = largest that fits)
  std::string inner = "zigzag";       // hybrid: ring | balanced | zigzag | grid2d-no | grid2d-o
  std::string dtype = "float";
  std::string comm;  // mpi | nccl; empty = nccl where built, else mpi
  int ranks = -1;  // -1: whatever mpiexec started
  long seq = 2048;
  int batch = 1, heads = 4, kv_heads = 2, dim = 64;
  bool causal = true, check = false, backward = true, print_schedule = false, help = false;
  int warmup = 1, iters = 3;
  double delay_ms = 0.0;  // injected receive delay (tests the waits, not speed)
  int head_group  = 0;    // ring kinds: kv heads per pass (0 = all that fit)
  bool decompose = false;  // also time the schedule with transfers disabled (exposed communication)
};

inline void print_usage(std::ostream& os) {
  os << "usage: mpiexec -n P distattn-run [options]\n"
        "  --schedule local|ring|balanced|zigzag|ulysses|hybrid|grid2d-no|grid2d-o   (default balanced)\n"
        "  --grid RxC          process grid for grid2d-* (default: chosen from P and heads)\n"
        "  --ulysses U         hybrid: Ulysses degree over heads (default: the largest that fits)\n"
        "  --inner KIND        hybrid: ring|balanced|zigzag|grid2d-no|grid2d-o inside each head group\n"
        "                      (default zigzag)\n"
        "  --ranks P           expected number of MPI ranks (error if different)\n"
        "  --seq N             global sequence length (default 2048)\n"
        "  --batch B --heads H --kv-heads Hkv --dim d   (defaults 1, 4, 2, 64)\n"
        "  --dtype float|double|bf16|fp16   (16-bit types on GPU builds only)\n"
        "  --comm mpi|nccl     transport (default nccl where built, else mpi)\n"
        "  --causal 0|1        (default 1)\n"
        "  --fwd-only          skip the backward pass\n"
        "  --check             gather results and compare with the fp64 reference\n"
        "  -w W -n N           warm-up and timed iterations (default 1, 3)\n"
        "  --delay-ms X        sleep before every receive completes (testing aid)\n"
        "  --head-group G      ring kinds: kv heads per pass (default 0: all heads that fit in memory)\n"
        "  --print-schedule    draw the schedule table on rank 0\n"
        "  --decompose         also time the schedule with communication disabled and report\n"
        "                      exposed communication = time - compute-only time\n";
}

inline Options parse_options(int argc, char** argv) {
  Perf::Args a(argc, argv);
  Options o;
  o.help           = a.flag({"-h", "--help"});
  o.schedule       = a.str({"--schedule"}, o.schedule);
  o.grid           = a.str({"--grid"}, o.grid);
  o.ulysses        = int(a.integer({"--ulysses"}, o.ulysses));
  o.inner          = a.str({"--inner"}, o.inner);
  o.dtype          = a.str({"--dtype"}, o.dtype);
  o.comm           = a.str({"--comm"}, o.comm);
  o.ranks          = int(a.integer({"--ranks"}, o.ranks));
  o.seq            = a.integer({"--seq"}, o.seq);
  o.batch          = int(a.integer({"--batch"}, o.batch));
  o.heads          = int(a.integer({"--heads"}, o.heads));
  o.kv_heads       = int(a.integer({"--kv-heads"}, o.heads < o.kv_heads ? o.heads : o.kv_heads));
  o.dim            = int(a.integer({"--dim"}, o.dim));
  o.causal         = a.integer({"--causal"}, 1) != 0;
  o.backward       = !a.flag({"--fwd-only"});
  o.check          = a.flag({"--check"});
  o.warmup         = int(a.integer({"-w", "--warmup"}, o.warmup));
  o.iters          = int(a.integer({"-n", "--iters"}, o.iters));
  o.delay_ms       = a.real({"--delay-ms"}, o.delay_ms);
  o.head_group     = int(a.integer({"--head-group"}, o.head_group));
  o.print_schedule = a.flag({"--print-schedule"});
  o.decompose      = a.flag({"--decompose"});
  a.reject_unknown();
  if (!o.comm.empty() && o.comm != "mpi" && o.comm != "nccl")
    throw InvalidArgument("--comm must be mpi or nccl, got '" + o.comm + "'");
  if (o.seq < 1 || o.batch < 1 || o.heads < 1 || o.kv_heads < 1 || o.dim < 1 || o.iters < 1 || o.warmup < 0)
    throw InvalidArgument("sizes and iteration counts must be positive");
  return o;
}

}  // namespace DistAttn::Driver
