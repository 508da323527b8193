#!/usr/bin/env python3
"""Start-up time and peak memory of kiln-run against ONNX Runtime, per model.

For each model of a corpus folder (the ONNX backend-test layout of BENCH.md), one process
each, under /usr/bin/time -v:
  - ORT: ../shared/bench/ort_bench.js, 3 runs; its `load_ms` is session creation;
  - Kiln cold: kiln-run with an empty kernel cache folder (load_ms + compile_ms);
  - Kiln warm: kiln-run again with the cache the cold run filled.
Prints load/compile times, the start-up ratio (Kiln load+compile / ORT session creation) cold
and warm, and peak RSS of both processes (runtime and 3 runs included; Kiln's of the warm
run, the cold run's in the JSON rows) with their ratio.

--settle S sleeps S seconds before each of the three processes. On a virtual machine whose
host takes idle guest memory back, the first touch of fresh pages costs several times more
some seconds after the last large process than right after it (backends/CPU/README.md,
"Start-up, sixth pass"), so back-to-back processes measure each other's leftovers; settling
starts ORT and both Kiln runs from the same state.

usage: startup_rss.py --kiln-run PATH [--dir /tmp/kiln-models] [--models a,b] [--threads 1]
                      [--settle S] [--json FILE]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("KILN_BENCH_DIR",
                       os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "bench")))
PEERS = os.environ.get("KILN_PEERS_DIR", os.path.expanduser("~/.cache/kiln-peers"))


def timed(cmd, settle=0.0):
    """Runs cmd under /usr/bin/time -v after sleeping settle seconds: (stdout, peak RSS in
    MB, exit status)."""
    if settle > 0:
        time.sleep(settle)
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return p.stdout, (int(m.group(1)) / 1024.0 if m else None), p.returncode


def last_json(out):
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--dir", default="/tmp/kiln-models")
    ap.add_argument("--models", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", default="CPU")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="seconds to sleep before each process (default 0)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    ort_bench = os.path.join(BENCH, "ort_bench.js")
    if not os.path.exists(ort_bench):
        sys.exit("startup_rss.py: %s not found (set KILN_BENCH_DIR to ../shared/bench)" % ort_bench)
    models = a.models.split(",") if a.models else sorted(
        m for m in os.listdir(a.dir) if os.path.exists(os.path.join(a.dir, m, "model.onnx")))
    out = open(a.json, "a") if a.json else None
    print("%-22s %9s %9s %9s %9s %7s %7s %8s %8s %6s" % (
        "model", "ORT load", "K load", "K cold", "K warm", "cold/O", "warm/O", "ORT MB",
        "Kiln MB", "RSS/O"))
    for model in models:
        d = os.path.join(a.dir, model)
        ort_out, ort_rss, _ = timed(
            ["node", ort_bench, "--dir", a.dir, "--models", model,
             "--threads", str(a.threads), "--warmup", "1", "--min-runs", "3", "--max-runs", "3",
             "--min-sec", "0", "--ort", os.path.join(PEERS, "node_modules", "onnxruntime-node")],
            a.settle)
        ort = last_json(ort_out)
        cache = tempfile.mkdtemp(prefix="kiln-cache-")
        runs = {}
        try:
            for phase in ("cold", "warm"):
                cmd = [a.kiln_run, "--model", os.path.join(d, "model.onnx"), "--backend", a.backend,
                       "--threads", str(a.threads), "--iterations", "3", "--warmup", "0", "--json",
                       "--backend-opt", "cache-dir=" + cache]
                data = os.path.join(d, "test_data_set_0")
                if os.path.isdir(data):
                    cmd += ["--data", data]
                k_out, k_rss, _ = timed(cmd, a.settle)
                runs[phase] = (last_json(k_out), k_rss)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        cold, cold_rss = runs["cold"]
        warm, rss = runs["warm"]
        ort_load = ort.get("load_ms")
        row = {"model": model, "threads": a.threads, "ort_load_ms": ort_load,
               "ort_peak_rss_mb": ort_rss, "kiln_load_ms": cold.get("load_ms"),
               "kiln_cold_compile_ms": cold.get("compile_ms"),
               "kiln_warm_compile_ms": warm.get("compile_ms"), "kiln_peak_rss_mb": rss,
               "kiln_cold_peak_rss_mb": cold_rss,
               "kiln_match": cold.get("match")}
        def ratio(phase):
            r = runs[phase][0]
            if ort_load and r.get("load_ms") is not None and r.get("compile_ms") is not None:
                return (r["load_ms"] + r["compile_ms"]) / ort_load
            return None
        row["startup_cold_ratio"] = ratio("cold")
        row["startup_warm_ratio"] = ratio("warm")
        row["rss_ratio"] = rss / ort_rss if rss and ort_rss else None
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
        f = lambda v, fmt="%.0f": fmt % v if v is not None else "-"
        print("%-22s %9s %9s %9s %9s %7s %7s %8s %8s %6s" % (
            model, f(ort_load), f(row["kiln_load_ms"]), f(row["kiln_cold_compile_ms"]),
            f(row["kiln_warm_compile_ms"]), f(row["startup_cold_ratio"], "%.2f"),
            f(row["startup_warm_ratio"], "%.2f"), f(ort_rss), f(rss),
            f(row["rss_ratio"], "%.2f")))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
