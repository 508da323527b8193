#!/usr/bin/env python3
"""Two kiln-run binaries (A = before, B = after) against ONNX Runtime, interleaved.

For each model and thread count, each round runs ORT, A and B in turn (ORT A B ORT A B ...),
using ../shared/bench/compare.py's runners, and prints medians and the kiln/ORT ratios of both
binaries, so a change is judged against the same ORT runs on the same noisy host.

usage: ab_compare.py --a PATH --b PATH [--dir /tmp/kiln-models] [--models a,b]
                     [--threads 1,2] [--rounds 3] [--json FILE]
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "bench"))
BENCH = os.environ.get("KILN_BENCH_DIR", BENCH)
if not os.path.exists(os.path.join(BENCH, "compare.py")):
    sys.exit("ab_compare.py: %s/compare.py not found (set KILN_BENCH_DIR to ../shared/bench)"
             % BENCH)
sys.path.insert(0, BENCH)
import compare  # noqa: E402  (../shared/bench/compare.py)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="kiln-run before")
    ap.add_argument("--b", required=True, help="kiln-run after")
    ap.add_argument("--dir", default="/tmp/kiln-models")
    ap.add_argument("--models", default="")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", default="CPU")
    ap.add_argument("--json", default="", help="also append one JSON row per line to FILE")
    a = ap.parse_args()
    models = a.models.split(",") if a.models else sorted(
        m for m in os.listdir(a.dir) if os.path.exists(os.path.join(a.dir, m, "model.onnx")))
    out = open(a.json, "a") if a.json else None
    for model in models:
        for t in [int(x) for x in a.threads.split(",")]:
            ms = {"ort": [], "a": [], "b": []}
            comp = {"a": [], "b": []}
            for _ in range(a.rounds):
                o = compare.run_ort(a.dir, model, t)
                if "median_ms" in o:
                    ms["ort"].append(o["median_ms"])
                for key, binary in (("a", a.a), ("b", a.b)):
                    k = compare.run_kiln(binary, a.dir, model, t, a.backend)
                    if "median_ms" in k:
                        ms[key].append(k["median_ms"])
                        comp[key].append(k.get("compile_ms"))
            med = {k: statistics.median(v) if v else None for k, v in ms.items()}
            row = {"model": model, "threads": t, "rounds": a.rounds, **{k + "_ms": v for k, v in med.items()},
                   "a_runs": ms["a"], "b_runs": ms["b"], "ort_runs": ms["ort"],
                   "a_compile_ms": comp["a"], "b_compile_ms": comp["b"]}
            for key in ("a", "b"):
                row[key + "_ratio"] = (med[key] / med["ort"]) if med[key] and med["ort"] else None
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
            f = lambda v: "%.3f" % v if v is not None else "-"
            print("%-16s T=%d  ORT %8s  A %8s (%s)  B %8s (%s)  B/A %s" % (
                model, t, f(med["ort"]), f(med["a"]), f(row["a_ratio"]), f(med["b"]),
                f(row["b_ratio"]), f(med["b"] / med["a"] if med["a"] and med["b"] else None)),
                flush=True)


if __name__ == "__main__":
    main()
