#!/usr/bin/env python3
"""The engine's host-side instructions per device op (issue 20, item 2, the
part that needs no GPU), counted by callgrind on the emulated device with
zero latency and its CUDA-call costs off (bench/device/hostcost.c).

Each configuration runs twice under callgrind, N and 2N ops; a figure is
(I(2N) - I(N)) / N, so set-up and teardown cancel; the median of --repeat
such pairs is printed (the JSON keeps the range). A chain's figures move
from run to run (its workers spin while the other stream's worker runs the
previous op, and valgrind serializes threads), and inclusive counts of
functions that recurse through the worker's loop can split the cost
between neighbouring columns differently: read the chain's columns as
+-25%, its sums ("push to launch", "engine, all") as +-10%. Inclusive counts of the
functions below (all threads) split an op's cost:

  push        vf_engine_push, on the pushing thread
  pickup      worker_main - vf__exec_worker_execute: the device worker's loop
              (taking the op; its idle spinning under valgrind's serialized
              threads is counted too, so this one moves between runs)
  to launch   run_body - device_op_end - the op's function: the checks
              before the function and device_op_begin (the fences it
              meets, its stream waits)
  launch call the op's function - the device's submit: vf_run_submit
  after       device_op_end - the device's record (and, with --sync,
              its event_wait): the fence made and left on the op's vars
  release     vf__exec_worker_execute - run_body: the vars released (the
              dependent made ready and handed to its worker), the op handed
              to the completer
  completion  completer_main - the device's event_wait: resolving the
              fence, the op's completion, freeing it (none with --sync: the
              worker finishes the op as a CPU op)
  device      the emulated class's host-side calls (submit, record,
              stream_wait, event_wait, event_query, event_release,
              stream_sync): on a GPU these are CUDA's (their cost is what
              VF_EMULATED_*_NS model), so they are not the engine's
  stream      stream_main: the emulated device's own thread (the GPU's
              side on a real device)

The replay rows (hostcost.c --replay 100: the shape's ops as a graph of 100
with device replay, launched N / 100 times) have no push, pickup or
launch of their own per op: read "engine, all" (the launch's run, the
completion of each node, the launch's end) and "device" (one graph_launch
and one record a launch, event_wait per node).

push to launch = push + pickup + to launch + launch call; release to the
dependent's launch = after + release + (the dependent's pickup + to launch +
launch call). With event ordering a dependent is released when the op's
function returns, not when its work completes (that is the completer's
business, off the path); with --sync the op's worker waits for the work
inside device_op_end, so the release follows the completion.

Usage: callgrind_device.py [--build DIR] [--ops N] [--repeat K]
                           [--out FILE.json]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

FUNCS = {
    "push": [("push.c", "vf_engine_push")],
    "worker_main": [("sched.c", "worker_main")],
    "execute": [("exec.c", "vf__exec_worker_execute")],
    "run_body": [("exec.c", "run_body")],
    "begin": [("device_ops.c", "device_op_begin")],
    "end": [("device_ops.c", "device_op_end")],
    "fn": [("hostcost.c", "op_launch")],
    "completer": [("completer.c", "completer_main")],
    "submit": [("emulated.c", "submit")],
    "record": [("emulated.c", "record")],
    "stream_wait": [("emulated.c", "stream_wait")],
    "event_wait": [("emulated.c", "event_wait")],
    "event_query": [("emulated.c", "event_query")],
    "event_release": [("emulated.c", "event_release")],
    "stream_sync": [("emulated.c", "stream_sync")],
    "graph_launch": [("emulated.c", "graph_launch")],
    "stream_main": [("emulated.c", "stream_main")],
}
LINE = re.compile(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.+?):(\S+)\s+\[")
TOTAL = re.compile(r"^\s*([\d,]+)\s+\(100\.0+%\)\s+PROGRAM TOTALS")


def counts(binary, args, n):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=no",
                        "--callgrind-out-file=" + out, binary, "--ops",
                        str(n)] + args, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        ann = subprocess.run(["callgrind_annotate", "--inclusive=yes",
                              "--threshold=100", out], check=True,
                             capture_output=True, text=True).stdout
    got = {k: 0 for k in FUNCS}
    total = 0
    for line in ann.splitlines():
        m = TOTAL.match(line)
        if m:
            total = int(m.group(1).replace(",", ""))
            continue
        m = LINE.match(line)
        if not m:
            continue
        ir, path, func = int(m.group(1).replace(",", "")), m.group(2), m.group(3)
        base = os.path.basename(path)
        for key, names in FUNCS.items():
            if (base, func) in names:
                got[key] += ir
    got["total"] = total
    return got


def per_op(binary, args, n, sync):
    a, b = counts(binary, args, n), counts(binary, args, 2 * n)
    d = {k: (b[k] - a[k]) / n for k in a}
    # event_wait's caller: the completer with event ordering, the op's own
    # worker (inside device_op_end) with --sync.
    wait_in_end = d["event_wait"] if sync else 0.0
    wait_in_completer = 0.0 if sync else d["event_wait"]
    dev = sum(d[k] for k in ("submit", "record", "stream_wait", "event_wait",
                             "event_query", "event_release", "stream_sync",
                             "graph_launch"))
    row = {
        "push": d["push"],
        "pickup": d["worker_main"] - d["execute"],
        "to launch": d["run_body"] - d["end"] - d["fn"],
        "launch call": d["fn"] - d["submit"],
        "after": d["end"] - d["record"] - wait_in_end,
        "release": d["execute"] - d["run_body"],
        "completion": d["completer"] - wait_in_completer,
        "device": dev,
        "stream": d["stream_main"],
        "total": d["total"],
        "begin (in to launch)": d["begin"],
    }
    row["push to launch"] = (row["push"] + row["pickup"] + row["to launch"] +
                             row["launch call"])
    row["release to next launch"] = (row["after"] + row["release"] +
                                     row["pickup"] + row["to launch"] +
                                     row["launch call"])
    row["engine, all"] = row["total"] - row["device"] - row["stream"]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--ops", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per configuration; each figure is the median "
                    "(with the range in the JSON)")
    ap.add_argument("--out")
    opts = ap.parse_args()
    binary = os.path.join(opts.build, "device", "vfbench-device-hostcost")
    if not os.path.exists(binary):
        sys.exit("no %s: build bench/ first (make bench-quick, or cmake -S "
                 "bench -B %s && cmake --build %s)" % (binary, opts.build,
                                                       opts.build))
    configs = [("independent", "events", ["--shape", "independent"]),
               ("chain", "events", ["--shape", "chain"]),
               ("chain", "sync", ["--shape", "chain", "--sync"]),
               ("independent", "replay",
                ["--shape", "independent", "--replay", "100"]),
               ("chain", "replay", ["--shape", "chain", "--replay", "100"])]
    cols = ["push", "pickup", "to launch", "launch call", "push to launch",
            "after", "release", "release to next launch", "completion",
            "engine, all", "device", "stream", "total"]
    results = []
    print("| shape | mode | " + " | ".join(cols) + " |")
    print("|---|---|" + "---:|" * len(cols))
    for shape, mode, args in configs:
        runs = [per_op(binary, args, opts.ops, mode == "sync")
                for _ in range(opts.repeat)]
        row = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0]}
        spread = {k: [min(r[k] for r in runs), max(r[k] for r in runs)]
                  for k in runs[0]}
        results.append({"shape": shape, "mode": mode, "ops": opts.ops,
                        "per_op": row, "range": spread})
        print("| %s | %s | " % (shape, mode) +
              " | ".join("%.0f" % row[c] for c in cols) + " |")
        sys.stdout.flush()
    if opts.out:
        with open(opts.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
