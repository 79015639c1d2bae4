#!/usr/bin/env python3
"""Time per op of empty ops pushed through varflow.hpp and through the C API,
side by side in one run (docs/CXX.md).

    bench/cxx_overhead.py [--build build-bench] [--threads 2] [--rounds 7]
                          [--reps 5] [--scale 1.0] [--workloads W1,W2]

Engines (all in vfbench-varflow): vf-naive / vf-naive-cxx, vf-pooled /
vf-pooled-cxx (varflow.hpp, a callable that fits in the op) and
vf-pooled-cxx-heap (a 16-byte callable: one new per push). The rounds
interleave the engines (C, C++, C, C++, ...), so a noisy spell of a shared
machine falls on both alike; every timed run (push every op, wait for all)
is a sample, and the table shows the median time per op, in microseconds,
with the C++/C ratio. Instructions per op, which do not depend on the
machine's noise, come from bench/callgrind.py.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

PAIRS = [("vf-naive", "vf-naive-cxx"), ("vf-pooled", "vf-pooled-cxx"),
         ("vf-pooled", "vf-pooled-cxx-heap")]


def run(binary, engine, opts):
    cmd = [binary, "--engine", engine, "--threads", str(opts.threads),
           "--workloads", opts.workloads, "--work", "0", "--work-labels", "0",
           "--scale", str(opts.scale), "--reps", str(opts.reps), "--warmup", "1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VF_")}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-2000:])
        raise RuntimeError("%s failed (exit %d)" % (" ".join(cmd), out.returncode))
    for line in out.stdout.splitlines():
        rec = json.loads(line)
        if rec["type"] == "result":
            if rec["check"] != "ok":
                raise RuntimeError("%s %s: check %s" % (engine, rec["key"], rec["check"]))
            yield rec["key"], rec["ops"], rec["times_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--workloads", default="W1,W2")
    opts = ap.parse_args()
    binary = os.path.join(os.path.abspath(opts.build), "vfbench-varflow")
    engines = []
    for pair in PAIRS:
        for e in pair:
            if e not in engines:
                engines.append(e)
    samples = {}  # (engine, key) -> [seconds per op]
    for r in range(opts.rounds):
        sys.stderr.write("round %d/%d\n" % (r + 1, opts.rounds))
        for engine in engines:
            for key, ops, times in run(binary, engine, opts):
                samples.setdefault((engine, key), []).extend(t / ops for t in times)
    keys = opts.workloads.split(",")
    print("median us/op over %d runs each, empty ops, %d worker%s, engines "
          "interleaved" % (opts.rounds * opts.reps, opts.threads,
                           "" if opts.threads == 1 else "s"))
    print("%-10s %-20s %-9s %-20s %-9s %s" % ("workload", "C engine", "us/op",
                                            "C++ engine", "us/op", "C++/C"))
    for key in keys:
        for c, cxx in PAIRS:
            mc = statistics.median(samples[(c, key)]) * 1e6
            mx = statistics.median(samples[(cxx, key)]) * 1e6
            print("%-10s %-20s %-9.3f %-20s %-9.3f %.2f" % (key, c, mc, cxx, mx, mx / mc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
