#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Cost model against measurement: every executor through distattn-run, for each
rank count P and sequence length S, next to the cost model's prediction of the
same choice (distattn-run --schedule auto --predict-only prints the ranking), and
what --schedule auto picks and measures against the measured fastest.

CPU MPI ranks (one host; the model divides tile rates by max(1, P / cores)):
  perf_tests/scripts/cost_validate.py --build build --tiles perf_tests/data/tiles_cpu_float_d64.txt \\
      --ranks 2,3,4 --seqs 576,1152 --heads 72 --kv-heads 72 --dim 64 --dtype float \\
      --model-args "--gpus-per-node 64 --intra-gbps 18.5 --latency-us 2.5" --out table.md
Two GPUs over NCCL: --comm nccl --launcher "mpiexec --bind-to none -x NCCL_NVLS_ENABLE -x
KOKKOS_MAP_DEVICE_ID_BY" --tiles perf_tests/data/tiles_h200_bf16.txt --dtype bf16 (docs/PERFORMANCE.md).

Writes a Markdown table (and the raw outputs under --log-dir). Error = (predicted -
measured) / measured. Exits 1 when a run fails; never fails on model error.
"""
import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

RANKING = re.compile(r"^#\s{3}(\S.*?)\s+([-+0-9.eE]+|inf|nan)\s+([-+0-9.eE]+|inf|nan)\s+([-+0-9.eE]+|inf|nan)"
                     r"\s+([-+0-9.eE]+|inf|nan)\s+([-+0-9.eE]+)(\s+<- runs)?\s*$")
MEDIAN = re.compile(r"median over \d+ iterations \(max over ranks\): forward ([0-9.eE+-]+) s, backward ([0-9.eE+-]+) s")


def run(cmd, log_path, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
    with open(log_path, "w") as f:
        f.write(" ".join(shlex.quote(c) for c in cmd) + "\n" + out)
    return rc, out, time.time() - t0


def read_measured(log_dir, tag, sched, pick):
    """A run of an earlier --log-dir as run() returns it. For auto: the measured run of
    what the model picks now (one of the executors' runs, or the earlier auto run if
    it ran the same pick)."""
    if sched == "auto":
        for other in os.listdir(log_dir):
            if other.startswith(tag + "_") and not other.endswith(("_predict.log", "_auto.log")):
                rc, out, _ = read_measured(log_dir, tag, other[len(tag) + 1:-4], None)
                name = measured_name(other[len(tag) + 1:-4], out)
                if name == pick:
                    return rc, out, 0.0
        path = os.path.join(log_dir, f"{tag}_auto.log")
        if os.path.exists(path):
            with open(path) as f:
                out = f.read()
            if re.search(r"^#\s{3}" + re.escape(pick) + r"\s.*<- runs", out, re.M):
                return 0, out, 0.0
        return 1, f"auto's pick {pick} was not among the measured runs", 0.0
    path = os.path.join(log_dir, f"{tag}_{sched}.log")
    if not os.path.exists(path):
        return 1, f"no measured run {path}", 0.0
    with open(path) as f:
        return 0, f.read().split("\n", 1)[-1], 0.0


def measured_name(schedule, out):
    """The cost model's name of what distattn-run ran (grid, head groups, U as it chose them)."""
    if schedule in ("ring", "balanced", "zigzag"):
        return schedule
    if schedule.startswith("grid2d"):
        m = re.search(r"grid (\d+)x(\d+)", out)
        return f"{schedule} {m.group(1)}x{m.group(2)}" if m else None
    if schedule == "ulysses":
        m = re.search(r"pipelined over (\d+) head group", out)
        return f"ulysses G{m.group(1)}" if m else None
    if schedule == "hybrid":
        m = re.search(r"U (\d+) x S (\d+)\s+inner (\S+)", out)
        return f"hybrid U{m.group(1)}+{m.group(3)}" if m else None
    return None


def pct(pred, meas):
    return 100.0 * (pred - meas) / meas if meas > 0 else float("nan")


def sweep(a, exe, tiles, log_dir, measured_dir):
    """One pass over every P and S: the model's ranking with `tiles`, each executor's
    run and auto's. Returns {(P, S): {"pred": {name: (f, b)}, "pick": name,
    "meas": {name: (f, b)}, "auto": (name, f, b)}} and the number of failures."""
    shape = ["--heads", str(a.heads), "--kv-heads", str(a.kv_heads), "--dim", str(a.dim), "--dtype", a.dtype,
             "--comm", a.comm, "-w", str(a.warmup), "-n", str(a.iters)]
    cases, failures = {}, 0
    for P in [int(x) for x in a.ranks.split(",")]:
        launch = shlex.split(a.launcher) + ["-n", str(P)]
        model = ["--tiles", tiles.replace("{P}", str(P))] + shlex.split(a.model_args)
        for S in [int(x) for x in a.seqs.split(",")]:
            tag = f"P{P}_S{S}"
            rc, out, _ = run(launch + [exe, "--schedule", "auto", "--predict-only", "--auto-show", "100000",
                                       "--seq", str(S)] + shape + model, f"{log_dir}/{tag}_predict.log", a.timeout)
            pred, pick = {}, None
            for line in out.splitlines():
                m = RANKING.match(line)
                if m:
                    pred[m.group(1).strip()] = (float(m.group(2)), float(m.group(3)))
                    if m.group(7):
                        pick = m.group(1).strip()
            if rc != 0 or not pred:
                print(f"cost_validate: prediction failed for P={P} S={S} (see {log_dir}/{tag}_predict.log)",
                      file=sys.stderr)
                failures += 1
                continue
            case = cases[(P, S)] = {"pred": pred, "pick": pick, "meas": {}}
            for sched in a.schedules.split(",") + ["auto"]:
                extra = []
                if sched == "hybrid":
                    # a real U x S split (U = 1 or P is another executor): the largest proper U
                    us = [u for u in range(P - 1, 1, -1) if P % u == 0 and a.heads % u == 0
                          and (a.kv_heads % u == 0 or u % a.kv_heads == 0)]
                    if not us:
                        continue
                    extra = ["--inner", "zigzag", "--ulysses", str(us[0])]
                if sched == "auto":
                    extra = model
                if measured_dir:
                    rc, out, wall = read_measured(measured_dir, tag, sched, pick)
                else:
                    rc, out, wall = run(launch + [exe, "--schedule", sched, "--seq", str(S)] + shape + extra,
                                        f"{log_dir}/{tag}_{sched}.log", a.timeout)
                m = MEDIAN.search(out)
                if rc != 0 or not m:
                    # e.g. Ulysses when P does not divide the heads: the model has no choice for it either
                    reason = next((l for l in out.splitlines() if "rror" in l or "must" in l), f"exit {rc}")
                    print(f"cost_validate: P={P} S={S} {sched}: not measured ({reason.strip()[:160]})",
                          file=sys.stderr)
                    continue
                name = pick if sched == "auto" else measured_name(sched, out)
                f, b = float(m.group(1)), float(m.group(2))
                if sched == "auto":
                    case["auto"] = (name, f, b)
                    continue
                case["meas"][name] = (f, b)
                pf, pb = pred.get(name, (float("nan"), float("nan")))
                print(f"P={P} S={S} {name}: fwd {pf:.4g}/{f:.4g} s  bwd {pb:.4g}/{b:.4g} s (predicted/measured)",
                      file=sys.stderr)
    return cases, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="build directory with perf_tests/distattn-run")
    ap.add_argument("--tiles", required=True,
                    help="tile table of this device (cost_calibrate); '{P}' in the path is replaced by the rank "
                         "count, for CPU hosts calibrated once per number of ranks sharing them")
    ap.add_argument("--ranks", default="2,3,4,6,8,9")
    ap.add_argument("--seqs", default="576,1152")
    ap.add_argument("--heads", type=int, default=72)
    ap.add_argument("--kv-heads", type=int, default=72)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--dtype", default="float")
    ap.add_argument("--comm", default="mpi", choices=["mpi", "nccl"])
    ap.add_argument("--launcher", default="mpiexec --oversubscribe", help="MPI launcher; '-n P' is appended")
    ap.add_argument("--model-args", default="", help="machine options for the model (--intra-gbps, --cores, ...)")
    ap.add_argument("--schedules", default="ring,balanced,zigzag,grid2d-no,grid2d-o,ulysses,hybrid")
    ap.add_argument("-w", "--warmup", type=int, default=1)
    ap.add_argument("-n", "--iters", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run")
    ap.add_argument("--tolerance", type=float, default=15.0, help="%% error counted as agreement")
    ap.add_argument("--pick-within", type=float, default=5.0, help="%% of the fastest auto's pick may be")
    ap.add_argument("--out", default="-", help="Markdown table (default stdout)")
    ap.add_argument("--log-dir", default="cost_validate_logs")
    ap.add_argument("--measured", default="",
                    help="read the measured runs from this earlier --log-dir instead of running them: the model "
                         "(--tiles, --model-args) against the same measurements; auto's pick is then looked up "
                         "among them")
    ap.add_argument("--rounds", type=int, default=1,
                    help="sweeps, one after another (logs under LOG_DIR/roundR): each case's times are the medians "
                         "over the rounds, and its error the median of the rounds' errors, so that a host whose "
                         "speed drifts over minutes does not move a whole stretch of the sweep at once")
    ap.add_argument("--calibrate", default="",
                    help="shell command run before each round that writes the round's tile table to '{out}' "
                         "(LOG_DIR/roundR/tiles.txt); the round's predictions use it instead of --tiles, so the "
                         "table is measured in the same minutes as the runs it predicts; with --measured, each "
                         "round's table is read from the measured round's directory instead")
    a = ap.parse_args()

    exe = os.path.join(a.build, "perf_tests", "distattn-run")
    if not os.access(exe, os.X_OK):
        sys.exit(f"cost_validate: no distattn-run at {exe}")
    if a.rounds < 1:
        sys.exit("cost_validate: --rounds must be >= 1")
    rounds, failures = [], 0
    for r in range(a.rounds):
        sub = lambda d: os.path.join(d, f"round{r + 1}") if a.rounds > 1 else d
        log_dir = sub(a.log_dir)
        os.makedirs(log_dir, exist_ok=True)
        tiles = a.tiles
        if a.calibrate and a.measured:
            tiles = os.path.join(sub(a.measured), "tiles.txt")  # the table measured with those runs
        elif a.calibrate:
            tiles = os.path.join(log_dir, "tiles.txt")
            rc, out, wall = run(["bash", "-c", a.calibrate.replace("{out}", shlex.quote(tiles))],
                                os.path.join(log_dir, "calibrate.log"), a.timeout)
            if rc != 0:
                sys.exit(f"cost_validate: --calibrate failed in round {r + 1} (see {log_dir}/calibrate.log)")
            print(f"cost_validate: round {r + 1} calibrated in {wall:.0f} s", file=sys.stderr)
        cases, fails = sweep(a, exe, tiles, log_dir, sub(a.measured) if a.measured else "")
        rounds.append(cases)
        failures += fails

    # Rows: each executor measured in every round that has its case, medians over the rounds.
    rows, picks = [], []
    keys = sorted({k for c in rounds for k in c})
    for (P, S) in keys:
        per = [c[(P, S)] for c in rounds if (P, S) in c]
        names = [n for n in per[0]["meas"] if all(n in c["meas"] for c in per)]
        dropped = sorted({n for c in per for n in c["meas"]} - set(names))
        if len(per) < len(rounds) or dropped:
            print(f"cost_validate: P={P} S={S}: {len(per)} of {len(rounds)} rounds have the case"
                  + (f"; left out, not measured in every one of them: {', '.join(dropped)}" if dropped else ""),
                  file=sys.stderr)
        for name in names:
            f = statistics.median([c["meas"][name][0] for c in per])
            b = statistics.median([c["meas"][name][1] for c in per])
            preds = [c["pred"].get(name, (float("nan"), float("nan"))) for c in per]
            pf, pb = statistics.median([p[0] for p in preds]), statistics.median([p[1] for p in preds])
            ef = statistics.median([pct(p[0], c["meas"][name][0]) for p, c in zip(preds, per)])
            eb = statistics.median([pct(p[1], c["meas"][name][1]) for p, c in zip(preds, per)])
            rows.append((P, S, name, pf, f, ef, pb, b, eb))
        autos = [c["auto"] for c in per if "auto" in c]
        if autos:
            chosen = sorted({x[0] for x in autos})
            label = " / ".join(f"{n} ({sum(1 for x in autos if x[0] == n)}x)" if len(autos) > 1 else n for n in chosen)
            t = statistics.median([x[1] + x[2] for x in autos])
            candidates = {n: statistics.median([c["meas"][n][0] + c["meas"][n][1] for c in per]) for n in names}
            candidates[f"auto ({label})"] = t
            best = min(candidates, key=candidates.get)
            bt = candidates[best]
            picks.append((P, S, label, t, best, bt, 100.0 * (t - bt) / bt))

    lines = []
    if a.rounds > 1:
        lines += [f"Medians over {a.rounds} rounds; error: the median of the rounds' errors"
                  + (", each round predicted with the table calibrated just before it." if a.calibrate else "."), ""]
    lines += ["| P | S | executor | predicted fwd (s) | measured fwd (s) | fwd error | predicted bwd (s) | "
              "measured bwd (s) | bwd error |", "|---|---|---|---|---|---|---|---|---|"]
    for (P, S, name, pf, f, ef, pb, b, eb) in rows:
        if pf != pf:  # not in the model's ranking (e.g. the hybrid with U = P): measured only
            lines.append(f"| {P} | {S} | {name} | - | {f:.4g} | - | - | {b:.4g} | - |")
        else:
            lines.append(f"| {P} | {S} | {name} | {pf:.4g} | {f:.4g} | {ef:+.0f}% | {pb:.4g} | {b:.4g} | {eb:+.0f}% |")
    modelled = [r for r in rows if r[3] == r[3]]
    ok_f = sum(1 for r in modelled if abs(r[5]) <= a.tolerance)
    ok_b = sum(1 for r in modelled if abs(r[8]) <= a.tolerance)
    ok_both = sum(1 for r in modelled if abs(r[5]) <= a.tolerance and abs(r[8]) <= a.tolerance)
    n = len(modelled)
    lines += ["", f"Within ±{a.tolerance:g}%: forward {ok_f}/{n}, backward {ok_b}/{n}, both {ok_both}/{n} cases.", "",
              "| P | S | auto's pick | its measured fwd+bwd (s) | measured fastest | fwd+bwd (s) | pick vs fastest |",
              "|---|---|---|---|---|---|---|"]
    for (P, S, name, t, best, bt, d) in picks:
        lines.append(f"| {P} | {S} | {name} | {t:.4g} | {best} | {bt:.4g} | {d:+.1f}% |")
    ok_pick = sum(1 for p in picks if p[6] <= a.pick_within)
    lines += ["", f"auto's pick within {a.pick_within:g}% of the measured fastest: {ok_pick}/{len(picks)} cases."]
    text = "\n".join(lines) + "\n"
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as f:
            f.write(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
