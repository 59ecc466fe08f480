#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Plots distattn-run --json files.

  plot_results.py OUTDIR RUN.json [RUN.json ...] [--timeline RUN.json]

Writes into OUTDIR:
  efficiency.png  parallel efficiency versus P (one line per schedule and S) and
                  versus S (one line per schedule and P). Efficiency of a run is
                  T(P0) * P0 / (T(P) * P), T the median forward + backward time and
                  P0 the fewest ranks among the files with the same schedule, S and
                  shape (P0 = 1 with a single-rank run: strong-scaling efficiency).
  timeline.png    one forward pass of one distributed run (--timeline, default the
                  run with the most ranks), per rank and schedule step: the host's wait,
                  the tiles' compute, and the rest of the step (posting transfers,
                  copies, merges).

Every file is checked for the fields these plots use first (exit status 1 and
the missing fields named); without matplotlib the script says so and exits 77
(ctest's skip code) after that check.
"""

import argparse
import json
import os
import sys

REQUIRED = {
    "": ["program", "config", "ranks", "median", "iterations", "throughput", "verdict"],
    "config": ["schedule", "ranks", "seq", "batch", "heads", "kv_heads", "dim", "dtype", "causal"],
    "median": ["forward_s", "backward_s"],
    "ranks[]": ["rank", "forward"],
    "ranks[].forward": ["total_s", "compute_s", "wait_s", "bytes_sent", "bytes_received", "timeline"],
    "ranks[].forward.timeline[]": ["start_s", "compute_s", "wait_s", "bytes_received"],
}


def missing_fields(doc):
    """Names of the fields REQUIRED lists that `doc` lacks."""
    out = []

    def objects(path):
        nodes = [("", doc)]
        for part in [p for p in path.split(".") if p]:
            nxt = []
            for name, node in nodes:
                key = part[:-2] if part.endswith("[]") else part
                if not isinstance(node, dict) or key not in node:
                    continue
                val = node[key]
                if part.endswith("[]"):
                    nxt += [(f"{name}.{key}[{i}]", v) for i, v in enumerate(val)]
                else:
                    nxt.append((f"{name}.{key}", val))
            nodes = nxt
        return nodes

    local = doc.get("config", {}).get("schedule") == "local"  # one device: no per-rank passes
    for path, keys in REQUIRED.items():
        nodes = objects(path)
        if path == "ranks[]" and not nodes and not local and not out:
            out.append("ranks (empty)")
        for name, node in nodes:
            out += [f"{name}.{k}".lstrip(".") for k in keys if not isinstance(node, dict) or k not in node]
    return out


def load(paths):
    runs, bad = [], False
    for p in paths:
        with open(p) as f:
            doc = json.load(f)
        miss = missing_fields(doc)
        if miss:
            print(f"{p}: missing fields: {', '.join(miss[:12])}", file=sys.stderr)
            bad = True
        runs.append((p, doc))
    if bad:
        sys.exit(1)
    return runs


def shape_key(c):
    return (c["schedule"], c["batch"], c["heads"], c["kv_heads"], c["dim"], c["dtype"], c["causal"])


def run_time(doc):
    return doc["median"]["forward_s"] + doc["median"]["backward_s"]


def efficiencies(runs):
    """(schedule, P, S, efficiency, baseline P) of every run. The baseline at a
    sequence length is the one-device run (`--schedule local`) of the same shape
    when there is one, else the same schedule's run with the fewest ranks."""
    best, local = {}, {}
    for _, d in runs:
        c = d["config"]
        k = (shape_key(c), c["seq"])
        if k not in best or c["ranks"] < best[k]["config"]["ranks"]:
            best[k] = d
        if c["schedule"] == "local":
            local[(shape_key(c)[1:], c["seq"])] = d
    out = []
    for _, d in runs:
        c = d["config"]
        base = local.get((shape_key(c)[1:], c["seq"]), best[(shape_key(c), c["seq"])])
        p0, t0, t = base["config"]["ranks"], run_time(base), run_time(d)
        out.append((c["schedule"], c["ranks"], c["seq"], t0 * p0 / (t * c["ranks"]) if t > 0 else 0.0, p0))
    return out


def plot_efficiency(plt, runs, path):
    eff = efficiencies(runs)
    fig, (ax_p, ax_s) = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (x_of, series_of, xlabel, name) in (
        (ax_p, (lambda e: e[1], lambda e: (e[0], "S", e[2]), "ranks P", "versus P")),
        (ax_s, (lambda e: e[2], lambda e: (e[0], "P", e[1]), "sequence length S", "versus S")),
    ):
        series = {}
        for e in eff:
            series.setdefault(series_of(e), []).append((x_of(e), e[3], e[4]))
        for (sched, lab, val), pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{sched} {lab}={val} (base P={pts[0][2]})")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("parallel efficiency T(P0)·P0 / (T(P)·P)")
        ax.set_title(f"Parallel efficiency {name}")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_timeline(plt, name, doc, path):
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(doc["ranks"]) + 1.6))
    colors = {"wait": "#d62728", "compute": "#1f77b4", "other": "#bbbbbb"}
    used = set()
    # Steps run in order on each rank. On GPUs the host clock gives when a step
    # was enqueued, not when it ran, so a step starts no earlier than the
    # previous one's wait and compute ended; gaps are "other" (host work).
    for r in doc["ranks"]:
        fwd = r["forward"]
        t = 0.0
        for i, st in enumerate(fwd["timeline"]):
            begin = max(st["start_s"], t)
            for kind, left, dur in (("other", t, begin - t), ("wait", begin, st["wait_s"]),
                                    ("compute", begin + st["wait_s"], st["compute_s"])):
                if dur <= 0:
                    continue
                ax.barh(r["rank"], dur * 1e3, left=left * 1e3, color=colors[kind], edgecolor="white", linewidth=0.3,
                        label=None if kind in used else kind)
                used.add(kind)
            ax.text(begin * 1e3, r["rank"] + 0.42, f"{i}", fontsize=6, va="bottom")
            t = begin + st["wait_s"] + st["compute_s"]
        if fwd["total_s"] > t:
            ax.barh(r["rank"], (fwd["total_s"] - t) * 1e3, left=t * 1e3, color=colors["other"], edgecolor="white",
                    linewidth=0.3, label=None if "other" in used else "other")
            used.add("other")
    c = doc["config"]
    ax.set_yticks([r["rank"] for r in doc["ranks"]])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the forward pass began (steps in order; numbers: schedule steps)")
    ax.set_ylabel("rank")
    ax.set_title(f"{c['schedule']} forward, P={c['ranks']} S={c['seq']} ({c['execution_space'] if 'execution_space' in c else ''}"
                 f" {c['dtype']}): {os.path.basename(name)}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("runs", nargs="+", help="distattn-run --json files")
    ap.add_argument("--timeline", help="the run whose forward pass timeline.png shows (default: most ranks)")
    a = ap.parse_args()
    runs = load(a.runs + ([a.timeline] if a.timeline and a.timeline not in a.runs else []))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_results.py: matplotlib is not installed (Debian: python3-matplotlib); JSON fields checked, "
              "no plots made", file=sys.stderr)
        sys.exit(77)
    os.makedirs(a.outdir, exist_ok=True)
    plot_efficiency(plt, [r for r in runs if r[0] in a.runs], os.path.join(a.outdir, "efficiency.png"))
    distributed = [r for r in runs if r[1]["ranks"]]
    if not distributed:
        print(f"wrote {a.outdir}/efficiency.png (no distributed run for a timeline)")
        return
    name, doc = next((r for r in distributed if r[0] == a.timeline), None) or max(
        distributed, key=lambda r: r[1]["config"]["ranks"])
    plot_timeline(plt, name, doc, os.path.join(a.outdir, "timeline.png"))
    print(f"wrote {a.outdir}/efficiency.png and {a.outdir}/timeline.png")


if __name__ == "__main__":
    main()
