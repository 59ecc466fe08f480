#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Plots the cost model's PREDICTED scaling (cost_scaling --csv) as one panel per
sequence length: predicted fwd+bwd time of the best ring, the best Attention2D
grid, Ulysses and the best hybrid against P.

    /usr/bin/python3 perf_tests/scripts/plot_cost_scaling.py   # Debian python3-matplotlib scaling.csv docs/design/cost_model_scaling.png
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    rows = defaultdict(list)
    with open(src) as f:
        for r in csv.DictReader(f):
            rows[int(r["N"])].append(r)
    seqs = sorted(rows)
    fig, axes = plt.subplots(2, (len(seqs) + 1) // 2, figsize=(15, 8), sharex=True)
    series = [("ring_s", "best ring"), ("grid2d_s", "best Attention2D"), ("ulysses_s", "Ulysses"),
              ("hybrid_s", "best hybrid U x S")]
    for ax, n in zip(axes.flat, seqs):
        rs = sorted(rows[n], key=lambda r: int(r["P"]))
        ps = [int(r["P"]) for r in rs]
        for key, label in series:
            pts = [(p, float(r[key])) for p, r in zip(ps, rs) if float(r[key]) > 0]
            if pts:
                ax.plot([p for p, _ in pts], [t for _, t in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        label = f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"
        ax.set_title(f"N = {label} (predicted)")
        ax.set_xlabel("P (GPUs, 8 per node)")
        ax.set_ylabel("predicted fwd+bwd (s)")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend()
    fig.suptitle("DistAttn cost model, PREDICTED: H=32, 8 KV heads, d=128, bf16, causal; "
                 "H200 tile rates, NVLink 298 GB/s, IB 50 GB/s")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
