#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The scaling report of issue #17 as markdown, from gpu_scaling.sh's output.

  scaling_table.py OUT_DIR [OUT_DIR ...]     (one OUT_DIR per P, e.g. p4 p8)

Reads OUT_DIR/<label>.S<S>.<shape>.json (distattn-run --json; plot_results.py
checks the fields), the matching .log files and OUT_DIR/torch_cp.log, and prints:

1. one row per run: forward + backward time (medians, max over ranks), parallel
   efficiency T(1) / (P T(P)) against --schedule local at the same S and shape,
   exposed communication (time minus the compute-only time of --decompose, as a
   share of the time), the wait share (the largest per-rank share of the passes
   spent waiting on transfers), bytes received per rank (forward + backward, the
   largest rank) and the ratio to PyTorch context parallel (its best backend's
   forward + backward time over ours: > 1 means faster than PyTorch; MHA only);
2. the balanced schedule's measured idle fraction against 1/(P+2) at even P:
   empty (rank, step) slots of the forward timeline, and the time-weighted idle
   share 1 - sum_r compute_r / (P max_r total_r);
3. Attention2D-O's traffic against N/sqrt(P): bytes per rank x sqrt(P) / N is
   constant across P when the traffic falls as N/sqrt(P); the ring's bytes / N
   alongside;
4. the cost model's predictions (the ranking that --schedule auto prints) against
   the measured time of each executor.
Runs that left no JSON are listed with the log's error line.
"""

import glob
import json
import math
import os
import re
import sys

from plot_results import missing_fields

STEM = re.compile(r"^(?P<label>.+)\.S(?P<seq>\d+)\.(?P<shape>[a-z]+)$")
TORCH = re.compile(r"^\s+(?P<backend>\w+)\s+(?P<seq>\d+)\s+(?P<fwd>[\d.]+)\s+[\d.]+\s+(?P<fwdbwd>[\d.]+)\s")
RANK = re.compile(r"^#\s+(?P<name>\S.*?)\s+(?P<fwd>[-\d.e+]+)\s+(?P<bwd>[-\d.e+]+)\s+(?P<total>[-\d.e+]+)"
                  r"\s+(?P<exposed>[-\d.e+]+)\s+(?P<ws>[-\d.e+]+)(?P<runs>\s+<- runs)?\s*$")


def pass_sum(rank, key):
    return sum(rank[p][key] for p in ("forward", "backward") if p in rank)


def load_dir(d):
    runs, failed, torch, rankings = [], [], {}, {}
    for log in sorted(glob.glob(os.path.join(d, "*.log"))):
        stem = os.path.basename(log)[:-4]
        m = STEM.match(stem)
        if not m:
            continue
        key = (m["label"], int(m["seq"]), m["shape"])
        js = log[:-4] + ".json"
        text = open(log, errors="replace").read()
        if "schedule auto: cost model ranking" in text:
            rankings[key] = [r.groupdict() for r in map(RANK.match, text.splitlines()) if r]
        if not os.path.exists(js):
            lines = text.strip().splitlines() or ["(empty log)"]
            err = [l for l in lines if re.search(r"^distattn-run|^# cut at|what\(\)", l)]
            err += [l for l in lines if "rror" in l] + lines[-1:]
            failed.append((d, key, err[0][:300]))
            continue
        with open(js) as f:
            doc = json.load(f)
        miss = missing_fields(doc)
        if miss:
            failed.append((d, key, "JSON lacks " + ", ".join(miss[:6])))
            continue
        runs.append({"dir": d, "label": m["label"], "seq": int(m["seq"]), "shape": m["shape"], "doc": doc,
                     "P": doc["config"]["ranks"], "log": text})
    tlog = os.path.join(d, "torch_cp.log")
    if os.path.exists(tlog):
        for line in open(tlog, errors="replace"):
            t = TORCH.match(line)
            if t:
                s = int(t["seq"])
                torch[s] = min(torch.get(s, math.inf), float(t["fwdbwd"]) * 1e-3)
    for lab, shape in {(r["label"], r["shape"]) for r in runs}:  # gpu_scaling.sh's LONGEST=1 left .fit logs
        if glob.glob(os.path.join(d, f"{lab}.S*.{shape}.fit")):
            max((r for r in runs if r["label"] == lab and r["shape"] == shape), key=lambda r: r["seq"])["longest"] = 1
    return runs, failed, torch, rankings


ORDER = ["ring", "balanced", "zigzag", "grid2d-no", "grid2d-o", "ulysses", "hybrid", "auto"]


def order(label):
    """The issue's order of executors (grids after their kind)."""
    base = label.split("_")[0]
    return ORDER.index(base) if base in ORDER else len(ORDER)


def total(doc):
    return doc["median"]["forward_s"] + doc["median"]["backward_s"]


def fmt(x, spec="{:.3g}", none="–"):
    return none if x is None else spec.format(x)


def chosen(doc):
    c = doc["config"]
    name = c["schedule"]
    if name.startswith("grid2d") and c["grid"]:
        name += " " + c["grid"]
    if name == "hybrid":
        name += f" U{c['ulysses']}+{c['inner']}"
    return name


def model_name(run):
    """The cost model's name of the executor a labelled run measured."""
    lab = run["label"]
    if lab.startswith("grid2d"):
        return lab.replace("_", " ")
    if lab == "hybrid":
        return chosen(run["doc"])
    return lab


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    runs, failed, torch, rankings = [], [], {}, {}
    for d in argv:
        r, f, t, k = load_dir(d)
        runs += r
        failed += f
        torch[d] = t
        rankings.update({(d,) + key: v for key, v in k.items()})
    local = {(r["seq"], r["shape"]): total(r["doc"]) for r in runs if r["label"] == "local"}
    dist = sorted([r for r in runs if r["label"] != "local"],
                  key=lambda r: (r["P"], r["shape"], r["seq"], order(r["label"]), r["label"]))
    if not runs:
        print("no runs with JSON found in " + " ".join(argv))
        return 1
    c0 = runs[0]["doc"]["config"]
    print(f"Runs: {len(runs)} with JSON ({len(runs) - len(dist)} on one device), {len(failed)} without. "
          f"d={c0['dim']}, {c0['dtype']}, causal={c0['causal']}, forward + backward, "
          f"{c0['execution_space']}, comm {c0['comm']}.\n")

    print("| P | shape (H/kv) | S | executor | fwd+bwd s | 1-device s | par. eff. | exposed comm | wait share "
          "| MB recv/rank | PyTorch CP / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in dist:
        doc, c = r["doc"], r["doc"]["config"]
        t = total(doc)
        t1 = local.get((r["seq"], r["shape"]))
        eff = t1 / (r["P"] * t) if t1 and t > 0 else None
        dec = doc.get("decomposition")
        exposed = None
        if dec:
            tt = dec["forward_s"] + dec["backward_s"]
            exposed = (tt - dec["forward_compute_only_s"] - dec["backward_compute_only_s"]) / tt if tt > 0 else None
        wait = max((pass_sum(k, "wait_s") / pass_sum(k, "total_s") for k in doc["ranks"] if pass_sum(k, "total_s") > 0),
                   default=None)
        mb = max((pass_sum(k, "bytes_received") for k in doc["ranks"]), default=0) / 1e6
        tc = torch[r["dir"]].get(r["seq"]) if r["shape"] == "mha" else None
        label = r["label"].replace("_", " ")
        if r["label"] in ("auto", "hybrid"):
            label += f" ({chosen(doc)})" if r["label"] == "auto" else f" U{c['ulysses']}+{c['inner']}"
        if r.get("longest"):
            label += " (longest)"
        if doc["verdict"] == "FAIL":  # DONE: a run without --check
            label += " FAIL"
        print(f"| {r['P']} | {r['shape']} ({c['heads']}/{c['kv_heads']}) | {r['seq']} | {label} | {t:.4g} | "
              f"{fmt(t1, '{:.4g}')} | {fmt(eff, '{:.2f}')} | {fmt(exposed, '{:.1%}')} | {fmt(wait, '{:.1%}')} | "
              f"{mb:.4g} | {fmt(tc / t if tc else None, '{:.2f}')} |")
    if not any(torch.values()):
        print("\nPyTorch CP: no torch_cp.log with results in these directories (not run, or torch not installed).")
    if local:
        print("\n1-device times (--schedule local): " +
              ", ".join(f"{sh} S={s}: {t:.4g} s" for (s, sh), t in sorted(local.items())))

    print("\n**Balanced schedule idle fraction** (forward timeline; schedule accounting 1/(P+2) at even P):\n")
    print("| P | shape | S | executor | empty slots (measured) | time-weighted idle | 1/(P+2) | schedule's own |")
    print("|---|---|---|---|---|---|---|---|")
    for r in dist:
        if r["label"] not in ("ring", "balanced", "zigzag"):
            continue
        ranks = r["doc"]["ranks"]
        P = r["P"]
        steps = [k["forward"]["timeline"] for k in ranks]
        n = max(len(s) for s in steps)
        busy = [x["compute_s"] for s in steps for x in s]
        tiny = 0.01 * (sorted(busy)[len(busy) // 2] if busy else 0)  # a step computing < 1% of the median is empty
        empty = sum(1 for s in steps for x in s if x["compute_s"] <= tiny) + sum(n - len(s) for s in steps)
        tmax = max(k["forward"]["total_s"] for k in ranks)
        tw = 1 - sum(k["forward"]["compute_s"] for k in ranks) / (P * tmax) if tmax > 0 else None
        own = re.search(r"# idle fraction: ([\d.]+)", r["log"])
        print(f"| {P} | {r['shape']} | {r['seq']} | {r['label']} | {empty}/{P * n} = {empty / (P * n):.4f} | "
              f"{fmt(tw, '{:.4f}')} | {1 / (P + 2) if P % 2 == 0 else 0:.4f} | {own[1] if own else '–'} |")

    print("\n**Attention2D-O traffic against N/sqrt(P)** (bytes received per rank, forward + backward; "
          "B sqrt(P)/N constant across P means traffic falls as N/sqrt(P); ring B/N for comparison):\n")
    print("| P | shape | S | executor | MB/rank | B·sqrt(P)/N | B/N | B / ring B |")
    print("|---|---|---|---|---|---|---|---|")
    ring = {(r["P"], r["shape"], r["seq"]): max(pass_sum(k, "bytes_received") for k in r["doc"]["ranks"])
            for r in dist if r["label"] == "ring"}
    for r in dist:
        if not (r["label"].startswith("grid2d") or r["label"] == "ring"):
            continue
        b = max(pass_sum(k, "bytes_received") for k in r["doc"]["ranks"])
        rb = ring.get((r["P"], r["shape"], r["seq"]))
        print(f"| {r['P']} | {r['shape']} | {r['seq']} | {r['label'].replace('_', ' ')} | {b / 1e6:.4g} | "
              f"{b * math.sqrt(r['P']) / r['seq']:.4g} | {b / r['seq']:.4g} | {fmt(b / rb if rb else None, '{:.3f}')} |")

    print("\n**Cost model** (predictions: the ranking `--schedule auto` printed for the same P, S and shape; "
          "this build has no `--predict-only`):\n")
    if not rankings:
        print("No `--schedule auto` ranking in these logs: not available.")
        return 0
    print("| P | shape | S | executor | predicted s | measured s | measured / predicted | model's pick | fastest measured |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (d, label, seq, shape), ranking in sorted(rankings.items(), key=lambda kv: kv[0][1:]):
        pred = {x["name"]: float(x["total"]) for x in ranking}
        pick = next((x["name"] for x in ranking if x["runs"]), "–")
        same = [r for r in dist if r["dir"] == d and r["seq"] == seq and r["shape"] == shape and r["label"] != "auto"]
        fastest = min(same, key=lambda r: total(r["doc"]), default=None)
        for r in same:
            p = pred.get(model_name(r))
            t = total(r["doc"])
            print(f"| {r['P']} | {shape} | {seq} | {model_name(r)} | {fmt(p, '{:.4g}')} | {t:.4g} | "
                  f"{fmt(t / p if p else None, '{:.2f}')} | {pick} | "
                  f"{model_name(fastest) if fastest else '–'} |")
    if failed:
        print("\nRuns without results:\n")
        for d, (label, seq, shape), why in failed:
            print(f"- {d}: {label} S={seq} {shape}: `{why}`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
