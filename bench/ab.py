#!/usr/bin/env python3
"""Time one engine from two builds of the benchmark, interleaved, in one run:
the before/after figure of a change, on a machine too noisy for two
separate runs to compare.

    bench/ab.py --a /path/to/old/build-bench --b build-bench
                [--engine vf-perdev] [--workloads W1,W2,W5] [--threads 1,2]
                [--rounds 3] [--reps 7]

Each round runs every (workload, threads) cell once with build A and once
with build B (A first in odd rounds, B first in even ones), `--reps` timed
runs each; the figure of a cell is the median over all rounds of its timed
runs, in microseconds per op, and the ratio is B / A (below 1: B is faster).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys


def run_cell(build, engine, workload, threads, reps):
    binary = os.path.join(build, "vfbench-varflow")
    out = subprocess.run(
        [binary, "--engine", engine, "--threads", str(threads), "--workloads", workload,
         "--reps", str(reps), "--warmup", "1"],
        capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("type") == "result":
                if rec.get("check") != "ok":
                    sys.exit("ab.py: %s %s T=%d: check %s" % (build, workload, threads,
                                                               rec.get("check")))
                return [t * 1e6 / rec["ops"] for t in rec["times_s"]]
    sys.exit("ab.py: no result from %s for %s" % (binary, workload))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the build before (build-bench tree)")
    ap.add_argument("--b", required=True, help="the build after")
    ap.add_argument("--engine", default="vf-perdev")
    ap.add_argument("--workloads", default="W1,W2,W5")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7)
    opts = ap.parse_args()
    cells = [(w, int(t)) for w in opts.workloads.split(",") for t in opts.threads.split(",")]
    times = {(side, cell): [] for side in "ab" for cell in cells}
    for r in range(opts.rounds):
        order = "ab" if r % 2 == 0 else "ba"
        for cell in cells:
            for side in order:
                build = opts.a if side == "a" else opts.b
                times[(side, cell)] += run_cell(build, opts.engine, cell[0], cell[1], opts.reps)
        print("[round %d/%d done]" % (r + 1, opts.rounds), file=sys.stderr)
    print("%s, median us/op over %d rounds x %d runs; A = %s, B = %s" % (
        opts.engine, opts.rounds, opts.reps, opts.a, opts.b))
    print("| workload | T | A | B | B / A |")
    print("|---|---|---:|---:|---:|")
    for cell in cells:
        a = statistics.median(times[("a", cell)])
        b = statistics.median(times[("b", cell)])
        print("| %s | %d | %.3f | %.3f | %.2f |" % (cell[0], cell[1], a, b, b / a))


if __name__ == "__main__":
    main()
