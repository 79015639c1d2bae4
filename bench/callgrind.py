#!/usr/bin/env python3
"""Instructions per op of each varflow engine, counted by callgrind: a figure
that stays put on a noisy machine, where timings do not.

    bench/callgrind.py [--build build-bench] [--n 10000] [--threads 1]
                       [--workloads W1,W2,W5] [--repeat 1] [--out FILE] [--docs]

For each engine (the serial loop as the floor, then varflow's naive, pooled
and per-device engines, and the pooled engine fed through reusable operators,
vf-pooled-opr) and each workload (empty ops), the driver runs the
program once to warm up, then once more between CALLGRIND_ZERO_STATS and
CALLGRIND_DUMP_STATS, i.e. from the first push to the return of
vf_engine_wait_all. That is done at N and at 2N ops and the difference divided by
N, so everything that does not grow with the op count (engine start, the
first wake-up, the final wait) cancels out:

    instructions per op = (I(2N) - I(N)) / N

"all" counts every thread (callgrind's summary of the dump: the pushing
thread, the workers, and whatever they spin while idle, which depends on
scheduling); "main" counts the pushing thread alone (a second run with
--separate-threads=yes): push, dependency bookkeeping, and, for the naive
engine, the op itself. "workers" is the difference. With --repeat R each
figure is the median of R runs.
"""

import argparse
import datetime
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report")  # tables.py, report.py
sys.path.insert(0, REPORT)
import tables  # noqa: E402


def summary_of(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError("no summary in %s" % path)


def count(binary, engine, threads, key, ops, separate, tmp):
    """Instructions of the timed region (all threads, or the main one)."""
    for f in glob.glob(os.path.join(tmp, "cg.out*")):
        os.remove(f)
    out = os.path.join(tmp, "cg.out")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
           "--separate-threads=" + ("yes" if separate else "no"),
           binary, "--engine", engine, "--threads", str(threads), "--workloads", key,
           "--scale", "%.6f" % (ops / 100000.0), "--reps", "1", "--warmup", "1",
           "--callgrind", "--ref-dir", os.path.join(tmp, "refs")]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict({k: v for k, v in os.environ.items()
                                 if not k.startswith("VF_")}, OPENBLAS_NUM_THREADS="1"))
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-3000:])
        raise RuntimeError("%s failed (exit %d)" % (" ".join(cmd), r.returncode))
    # The client-request dump is <out>.1 (all threads) or <out>.1-01 (thread 1).
    dump = out + (".1-01" if separate else ".1")
    return summary_of(dump)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--n", type=int, default=10000, help="ops of the smaller run")
    ap.add_argument("--threads", type=int, default=1, help="workers of the engines")
    ap.add_argument("--workloads", default="W1,W2,W5")
    ap.add_argument("--engines",
                    default="serial,vf-naive,vf-pooled,vf-perdev,vf-pooled-opr")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--docs", action="store_true",
                    help="then regenerate docs/BENCHMARKS.md with these counts")
    opts = ap.parse_args()
    if not shutil.which("valgrind"):
        print("bench-callgrind: valgrind is not installed (scripts/install-bench-peers)",
              file=sys.stderr)
        return 1
    binary = os.path.join(os.path.abspath(opts.build), "vfbench-varflow")
    if not os.access(binary, os.X_OK):
        print("bench-callgrind: %s not built" % binary, file=sys.stderr)
        return 1
    n = opts.n
    rows = []
    # Engines that run everything on the pushing thread need no per-thread run.
    single = set()
    listing = subprocess.run([binary, "--list"], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        e = json.loads(line)
        if not e["threaded"]:
            single.add(e["engine"])
    tmp = tempfile.mkdtemp(prefix="vfcg.")
    os.makedirs(os.path.join(tmp, "refs"))
    engines = opts.engines.split(",")
    keys = opts.workloads.split(",")
    total = len(engines) * len(keys)
    step = 0
    try:
        for engine in engines:
            for key in keys:
                step += 1
                sys.stderr.write("[%d/%d] callgrind: %s %s (N=%d and %d ops)\n"
                                 % (step, total, engine, key, n, 2 * n))
                per = {}
                for separate in ((False,) if engine in single else (False, True)):
                    vals = []
                    for _ in range(opts.repeat):
                        a = count(binary, engine, opts.threads, key, n, separate, tmp)
                        b = count(binary, engine, opts.threads, key, 2 * n, separate, tmp)
                        vals.append((b - a) / n)
                    per[separate] = statistics.median(vals)
                per.setdefault(True, per[False])  # one thread: main is all
                row = {"engine": engine, "key": key, "per_op": per[False],
                       "per_op_main": per[True],
                       "per_op_workers": max(per[False] - per[True], 0.0)}
                rows.append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    doc = {
        "schema": "varflow-callgrind/1",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git": subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip(),
        "n": n, "threads": opts.threads, "repeat": opts.repeat, "rows": rows,
    }
    out = opts.out or os.path.join(opts.build, "callgrind.json")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    header = ["engine", "workload", "instr/op (all threads)", "main thread", "workers"]
    trows = [[r["engine"], r["key"], "%.0f" % r["per_op"], "%.0f" % r["per_op_main"],
              "%.0f" % r["per_op_workers"]] for r in rows]
    print(tables.render_text(
        "instructions per op, empty ops, (I(2N) - I(N)) / N with N = %d, %d worker%s"
        % (n, opts.threads, "" if opts.threads == 1 else "s"), header, trows))
    print("\nresults: %s" % out)
    if opts.docs:
        docs = os.path.join(os.path.dirname(HERE), "docs", "bench")
        if os.path.exists(os.path.join(docs, "results.json")):
            return subprocess.call([sys.executable, os.path.join(REPORT, "report.py"),
                                    "--callgrind", out])
        os.makedirs(docs, exist_ok=True)
        shutil.copyfile(out, os.path.join(docs, "callgrind.json"))
        print("bench-callgrind: saved docs/bench/callgrind.json; docs/BENCHMARKS.md "
              "is written by the next `make bench`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
