#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Compares the ctest perf suite's results with a stored baseline.

  perf_compare.py RESULTS_DIR BASELINE TOLERANCE SCHEDULE [SCHEDULE ...]
  perf_compare.py --self-test      (ctest perfsuite_compare_self_test)

RESULTS_DIR holds one `distattn-run --json` file per schedule (<schedule>.json). A
schedule regresses when its forward + backward median is more than (1 + TOLERANCE)
times its baseline entry's; the script then exits 1. An entry is compared only with a
baseline entry of the same configuration (ranks, seq, heads, kv_heads, dim, dtype,
causal) and device (the context's execution space); where none is, it says so, and
with nothing compared it prints "SKIPPED" (ctest's skip). It writes RESULTS_DIR/summary.json
(time, baseline, ratio per schedule) and RESULTS_DIR/baseline_candidate.json (these
results in the baseline's format: copy it over BASELINE to store a new baseline).
"""
import json
import os
import sys

KEYS = ("ranks", "seq", "heads", "kv_heads", "dim", "dtype", "causal")


def entry(doc):
    e = {k: doc["config"][k] for k in KEYS}
    e["execution_space"] = doc["config"]["execution_space"]
    e["forward_s"] = doc["median"]["forward_s"]
    e["backward_s"] = doc["median"]["backward_s"]
    return e


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    results, baseline_path, tolerance, schedules = argv[1], argv[2], float(argv[3]), argv[4:]
    baseline = {}
    if baseline_path and os.path.exists(baseline_path):
        with open(baseline_path) as f:
            baseline = json.load(f).get("entries", {})
    summary, candidate, regressions, compared = {}, {"entries": {}}, [], 0
    for s in schedules:
        path = os.path.join(results, s + ".json")
        if not os.path.exists(path):
            print(f"no result for {s}: {path} (did its perfsuite test fail?)", file=sys.stderr)
            return 1
        with open(path) as f:
            e = entry(json.load(f))
        candidate["entries"][s] = e
        now = e["forward_s"] + e["backward_s"]
        line = f"{s}: forward {e['forward_s']:.4g} s + backward {e['backward_s']:.4g} s"
        b = baseline.get(s)
        same = b is not None and all(b.get(k) == e[k] for k in KEYS + ("execution_space",))
        summary[s] = {"forward_s": e["forward_s"], "backward_s": e["backward_s"]}
        if same:
            then = b["forward_s"] + b["backward_s"]
            ratio = now / then
            summary[s].update(baseline_forward_s=b["forward_s"], baseline_backward_s=b["backward_s"], ratio=ratio)
            line += f" = {ratio:.2f}x the baseline's {then:.4g} s (limit {1 + tolerance:.2f}x)"
            compared += 1
            if ratio > 1 + tolerance:
                line += "  REGRESSION"
                regressions.append(s)
        elif b is not None:
            line += " (the baseline entry is of another configuration or device: not compared)"
        else:
            line += " (no baseline entry)"
        print(line)
    with open(os.path.join(results, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    with open(os.path.join(results, "baseline_candidate.json"), "w") as f:
        json.dump(candidate, f, indent=2)
    print(f"results: {results}/summary.json; as a new baseline: {results}/baseline_candidate.json")
    if regressions:
        print(f"slower than {baseline_path} by more than {1 + tolerance:.2f}x: {', '.join(regressions)}", file=sys.stderr)
        return 1
    if compared == 0:
        print(f"SKIPPED: no baseline entry of this configuration and device in '{baseline_path}'")
    return 0


def self_test():
    """The comparison on made-up results: equal times pass, 3x the baseline fails at
    tolerance 1, another configuration is not compared, and no baseline skips."""
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        run = {"config": {"ranks": 2, "seq": 64, "heads": 2, "kv_heads": 1, "dim": 16, "dtype": "float",
                          "causal": True, "execution_space": "Serial"},
               "median": {"forward_s": 0.3, "backward_s": 0.6}}
        with open(os.path.join(d, "ring.json"), "w") as f:
            json.dump(run, f)
        base = os.path.join(d, "base.json")

        def check(entry, want_rc, want_text):
            with open(base, "w") as f:
                json.dump({"entries": {"ring": entry}} if entry else {}, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                rc = main(["perf_compare.py", d, base, "1", "ring"])
            if rc != want_rc or want_text not in out.getvalue():
                print(f"self-test failed: rc {rc} (want {want_rc}), want '{want_text}' in:\n{out.getvalue()}")
                return False
            return True

        same = dict(run["config"], forward_s=0.3, backward_s=0.6)
        ok = check(same, 0, "1.00x the baseline")
        ok &= check(dict(same, forward_s=0.1, backward_s=0.2), 1, "REGRESSION")
        ok &= check(dict(same, seq=128), 0, "not compared")
        ok &= check(None, 0, "SKIPPED")
    print("self-test passed" if ok else "self-test FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main(sys.argv))
