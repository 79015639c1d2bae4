#!/usr/bin/env python3
"""Run the benchmark suite: every engine at 1 worker and at every core, over
every workload (W1-W8, W10) and work size (0, ~10 us, ~100 us per op; W6
and W8 run their tile and block kernels once, W10 its recursion), each
checked against the serial run; then the pending-ops row (memory per op
held, bench/pending.h) and the wide-op row (one op over 2^20 vars,
bench/adapters/adapter.h); print the tables; write the results JSON.

    bench/run.py [--build build-bench] [--mode full|quick|tiny]
                 [--out FILE] [--engines a,b] [--workloads W1,W5,pending,wide]
                 [--threads 1,2] [--reps N] [--pending N] [--wide N] [--docs]

Each engine family is its own binary (vfbench-varflow, vfbench-omp-gcc,
vfbench-omp-clang, vfbench-starpu, vfbench-tbb); each (engine, worker count)
runs in its own process, so one engine's threads never disturb another's, and
StarPU can be started with each configuration. A binary that was not built
(its peer's package is missing) is skipped with a note. The pending-ops row
runs each engine that measures it in a process of its own too, so the peak
resident set is that row's alone; `--workloads` names it `pending`. The
wide-op row runs in a process of its own per engine as well; `--workloads`
names it `wide`.

Exit status: 0; 1 when an engine failed, crashed or timed out; 3 when any
run's final state differed from the serial run (then no tables are printed:
a fast wrong answer is not a result).
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report")  # tables.py, report.py
sys.path.insert(0, REPORT)
import tables  # noqa: E402

BINARIES = [
    ("vfbench-varflow", "varflow and the serial loop", "the varflow library did not build"),
    ("vfbench-omp-gcc", "OpenMP tasks, GCC libgomp", "configure bench/ with GCC (OpenMP)"),
    ("vfbench-omp-clang", "OpenMP tasks, clang + LLVM libomp",
     "install clang and libomp-dev (scripts/install-bench-peers)"),
    ("vfbench-starpu", "StarPU 1.3", "install libstarpu-dev (scripts/install-bench-peers)"),
    ("vfbench-tbb", "oneTBB flow graph",
     "install libtbb-dev and a C++ compiler (scripts/install-bench-peers)"),
]

PENDING_KEY = "pending"  # the pending-ops row's name in --workloads
WIDE_KEY = "wide"        # the wide-op row's name in --workloads

MODES = {
    # scale: fraction of WORKLOADS.md's op counts at work = 0
    # budget_ms: with work > 0, ops are capped so one serial run takes ~this
    # max_run_s: a row whose run takes longer is not repeated (see driver.c)
    # row_timeout_s: a single run that takes longer is abandoned (driver.c)
    # rounds: the whole suite runs this many times, ceil(reps / rounds) runs a
    #   cell each time, and the samples are pooled: a quiet or busy spell of a
    #   shared machine then falls on every engine alike, not on whichever one
    #   happened to be running.
    # chol_n: W6's matrix order; lu_n: W8's (NB = lu_n / B blocks a side)
    # pending: ops held at once in the pending-ops row (bench/pending.h)
    # wide: vars of the one op of the wide-op row (bench/adapters/adapter.h;
    #   2^20 is varflow's limit, VF_MAX_OP_VARS), pushed and run `reps` times
    "full": dict(scale=1.0, budget_ms=300, reps=6, warmup=1, chol_n=2048, lu_n=2560,
                 works=[0, 10, 100], timeout=1800, max_run_s=10, row_timeout_s=60,
                 rounds=2, pending=10000000, wide=1 << 20),
    "quick": dict(scale=0.05, budget_ms=25, reps=5, warmup=1, chol_n=512, lu_n=640,
                  works=[0, 10, 100], timeout=300, max_run_s=2, row_timeout_s=10,
                  rounds=1, pending=1000000, wide=1 << 20),
    "tiny": dict(scale=0.005, budget_ms=3, reps=5, warmup=0, chol_n=256, lu_n=256,
                 works=[0, 10], timeout=120, max_run_s=1, row_timeout_s=10, rounds=1,
                 pending=100000, wide=1 << 16),
}


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except Exception:
        return ""


def machine_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    osname = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    osname = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = "%.0f GiB" % (kb / 1048576)
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "memory": mem,
        "os": osname,
        "kernel": platform.release(),
        "virtualized": bool(sh("grep -q hypervisor /proc/cpuinfo && echo y")),
        "gcc": sh("gcc --version | head -1"),
        "clang": sh("clang --version | head -1"),
        "starpu": sh("pkg-config --modversion starpu-1.3"),
        "tbb": sh("pkg-config --modversion tbb"),
        "loadavg_start": os.getloadavg()[0],
    }


class Progress:
    """One status line: where the suite is and how long it has run."""

    def __init__(self, total):
        self.total = total
        self.t0 = time.time()
        self.tty = sys.stderr.isatty()
        self.last = ""

    def show(self, done, label, detail):
        frac = min(done / self.total, 1.0) if self.total else 1.0
        el = time.time() - self.t0
        eta = ""
        if frac > 0.02:
            eta = " eta %s" % fmt_secs(el / frac - el)
        line = "[%3.0f%% %s%s] %s | %s" % (100 * frac, fmt_secs(el), eta, label, detail)
        if self.tty:
            sys.stderr.write("\r\033[K" + line[:200])
            sys.stderr.flush()
        else:
            # Without a terminal: one line per step, not per run.
            key = label + detail.split(":")[0]
            if key != self.last:
                sys.stderr.write(line + "\n")
                self.last = key

    def message(self, text):
        if self.tty:
            sys.stderr.write("\r\033[K")
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def fmt_secs(s):
    s = int(s)
    return "%d:%02d" % (s // 60, s % 60)


def engine_env():
    # The engines are configured by the adapters alone: a VF_* variable of
    # the caller's shell (VF_PROFILE, VF_MAX_INFLIGHT, ...) must not leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("VF_")}
    env.update(OPENBLAS_NUM_THREADS="1", STARPU_SILENT="1")
    return env


def run_one_record(cmd, kind, timeout):
    """Run the driver once and return (its JSON record of type `kind` or
    None, status)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=engine_env(),
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout after %d s" % timeout
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("type") == kind and proc.returncode == 0:
                return rec, "ok"
    tail = "; ".join(proc.stderr.strip().splitlines()[-3:])
    return None, "failed (exit %d): %s" % (proc.returncode, tail)


def run_pending(binary, engine, n, timeout):
    """The pending-ops row of one engine, in a process of its own, at one
    worker (the count does not change what a held op costs). Returns (the
    record or None, status)."""
    cmd = [binary, "--engine", engine, "--threads", "1", "--pending", str(n)]
    return run_one_record(cmd, "pending", timeout)


def run_wide(binary, engine, n, reps, timeout):
    """The wide-op row of one engine, in a process of its own, at one worker
    (a single op: more workers would only wait). Returns (the record or
    None, status)."""
    cmd = [binary, "--engine", engine, "--threads", "1", "--reps", str(reps),
           "--wide", str(n)]
    return run_one_record(cmd, "wide", timeout)


def run_engine(binary, engine, threads, args, progress, index, nconfigs, timeout,
               label_round=""):
    """Run one (engine, threads) process; returns (records, status, stderr tail)."""
    cmd = [binary, "--engine", engine, "--threads", str(threads), "--progress"] + args
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=engine_env())
    records, errors = [], []

    def read_stdout():
        for line in proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    errors.append("bad record: " + line)

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    timed_out = []

    def kill():
        timed_out.append(True)
        proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    label = "%s T=%d (%d/%d%s)" % (engine, threads, index + 1, nconfigs, label_round)
    try:
        for line in proc.stderr:
            line = line.rstrip("\n")
            m = re.match(r"PROGRESS\t(\d+)\t(\d+)\t(.*)", line)
            if m:
                step, nsteps = int(m.group(1)), int(m.group(2))
                progress.show(index + step / max(nsteps, 1), label, m.group(3))
            elif line.strip():
                errors.append(line)
                if "!!!" in line or ("bench:" in line and "not repeated" not in line):
                    progress.message(line)
        proc.wait()
    finally:
        timer.cancel()
    reader.join()
    status = "ok"
    if proc.returncode == 3:
        status = "mismatch"
    elif proc.returncode == 4:
        status = "timeout-row"
    elif timed_out:
        status = "timeout after %d s" % timeout
    elif proc.returncode != 0:
        status = "failed (exit %d)" % proc.returncode
    return records, status, errors[-20:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--mode", choices=sorted(MODES), default="full")
    ap.add_argument("--out", help="results JSON (default BUILD/results-MODE.json)")
    ap.add_argument("--engines", help="only these engines (comma list)")
    ap.add_argument("--workloads",
                    help="only these rows, e.g. W1,W5,W6-b64,W8-b16,pending,wide")
    ap.add_argument("--threads", help="worker counts (default 1 and all cores)")
    ap.add_argument("--reps", type=int, help="timed runs per cell (>= 5 for reports)")
    ap.add_argument("--rounds", type=int,
                    help="run the suite this many times, interleaving the engines, "
                         "and pool the runs (mode default; more on a busy machine)")
    ap.add_argument("--row-timeout", type=float,
                    help="seconds after which one run is abandoned (mode default)")
    ap.add_argument("--pending", type=int,
                    help="ops held in the pending-ops row (mode default; 0: skip it)")
    ap.add_argument("--wide", type=int,
                    help="vars of the wide-op row's op (mode default; 0: skip it)")
    ap.add_argument("--docs", action="store_true",
                    help="then regenerate docs/BENCHMARKS.md from the results")
    opts = ap.parse_args()
    mode = dict(MODES[opts.mode])
    if opts.reps:
        mode["reps"] = opts.reps
    if opts.row_timeout:
        mode["row_timeout_s"] = opts.row_timeout
    if opts.rounds:
        mode["rounds"] = max(1, opts.rounds)
    if opts.pending is not None:
        mode["pending"] = max(0, opts.pending)
    if opts.wide is not None:
        mode["wide"] = max(0, opts.wide)
    rows = opts.workloads.split(",") if opts.workloads else None
    suite_rows = [r for r in rows if r not in (PENDING_KEY, WIDE_KEY)] if rows else None
    if rows and PENDING_KEY not in rows:
        mode["pending"] = 0
    if rows and WIDE_KEY not in rows:
        mode["wide"] = 0
    run_suite = suite_rows is None or bool(suite_rows)
    rounds = mode["rounds"]
    reps_per_round = -(-mode["reps"] // rounds)
    mode["reps"] = reps_per_round * rounds
    build = os.path.abspath(opts.build)
    out = opts.out or os.path.join(build, "results-%s.json" % opts.mode)
    cores = os.cpu_count() or 1
    threads = ([int(t) for t in opts.threads.split(",")] if opts.threads
               else sorted({1, cores}))
    want = set(opts.engines.split(",")) if opts.engines else None

    # Which binaries and engines exist.
    notes, skipped, configs, pending_configs, wide_configs = [], [], [], [], []
    calibrator = None
    for name, what, howto in BINARIES:
        path = os.path.join(build, name)
        if not os.access(path, os.X_OK):
            skipped.append({"engine": name.replace("vfbench-", ""),
                            "reason": "%s not built: %s" % (what, howto)})
            notes.append("skipped %s: not built (%s)" % (what, howto))
            continue
        calibrator = calibrator or path
        listing = subprocess.run([path, "--list"], capture_output=True, text=True)
        for line in listing.stdout.splitlines():
            e = json.loads(line)
            if want and e["engine"] not in want:
                continue
            if not want and e.get("extra"):
                continue  # extras run only when named
            if e["unavailable"]:
                skipped.append({"engine": e["engine"], "reason": e["unavailable"]})
                notes.append("skipped %s: %s" % (e["engine"], e["unavailable"]))
                continue
            if e.get("pending") and mode["pending"]:
                pending_configs.append((path, e["engine"]))
            if e.get("wide") and mode["wide"]:
                wide_configs.append((path, e["engine"]))
            if not run_suite:
                continue
            for t in (threads if e["threaded"] else [1]):
                configs.append((path, e["engine"], e["family"], t))
    if not configs and not pending_configs and not wide_configs:
        print("bench: nothing to run (build with: make bench)", file=sys.stderr)
        return 1
    configs.sort(key=lambda c: (tables.engine_rank(c[1]), c[3]))

    # Calibrate the work loop: ~10 us must mean 10 us on this machine.
    cal = subprocess.run([calibrator, "--calibrate"], capture_output=True, text=True)
    ns_per_iter = json.loads(cal.stdout.strip().splitlines()[-1])["ns_per_iter"]
    work_sizes = []
    for us in mode["works"]:
        iters = 0 if us == 0 else int(round(us * 1000.0 / ns_per_iter))
        work_sizes.append({"label": "0" if us == 0 else "%dus" % us, "target_us": us,
                           "iters": iters})

    ref_dir = os.path.join(build, "refs")
    os.makedirs(ref_dir, exist_ok=True)
    args = ["--work", ",".join(str(w["iters"]) for w in work_sizes),
            "--work-labels", ",".join(w["label"] for w in work_sizes),
            "--ns-per-iter", "%.6f" % ns_per_iter,
            "--budget-ms", str(mode["budget_ms"]), "--scale", str(mode["scale"]),
            "--chol-n", str(mode["chol_n"]), "--lu-n", str(mode["lu_n"]),
            "--reps", str(reps_per_round),
            "--warmup", str(mode["warmup"]), "--max-run-s", str(mode["max_run_s"]),
            "--row-timeout-s", str(mode["row_timeout_s"]),
            "--ref-dir", ref_dir]
    if suite_rows:
        args += ["--workloads", ",".join(suite_rows)]

    doc = {
        "schema": "varflow-bench/1",
        "mode": opts.mode,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git": sh("git -C %s describe --always --dirty" % HERE),
        "machine": machine_info(),
        "settings": {k: mode[k] for k in ("scale", "budget_ms", "reps", "warmup", "chol_n",
                                          "lu_n", "max_run_s", "row_timeout_s", "rounds",
                                          "pending", "wide")},
        "calibration": {"ns_per_iter": ns_per_iter},
        "work_sizes": work_sizes,
        "threads": threads,
        "engines": [], "results": [], "skips": [], "timeouts": [], "skipped": skipped,
        "notes": notes, "pending": [], "wide": [],
    }
    for n in notes:
        print("bench: " + n, file=sys.stderr)
    print("bench: %s mode, %d engine configurations, work loop %.3f ns/iteration "
          "(10 us = %d iterations), load average %.2f"
          % (opts.mode, len(configs), ns_per_iter,
             int(round(10000 / ns_per_iter)), doc["machine"]["loadavg_start"]),
          file=sys.stderr)

    progress = Progress(len(configs) * rounds)
    worst = 0
    mismatches = []
    merged = {}     # (engine, threads, key, work_label) -> result record
    engines = {}    # (engine, threads) -> engine record
    finished = {}   # (engine, threads) -> rows not to run again (timed out, capped)
    for rnd in range(rounds):
        for i, (path, engine, family, t) in enumerate(configs):
            index = rnd * len(configs) + i
            recs = []
            done = list(finished.get((engine, t), []))
            while True:
                skip = ["--skip", ",".join(done)] if done else []
                label_round = " round %d/%d" % (rnd + 1, rounds) if rounds > 1 else ""
                got, status, errors = run_engine(path, engine, t, args + skip, progress,
                                                 index, len(configs) * rounds,
                                                 mode["timeout"], label_round)
                recs += got
                done += ["%s@%s" % (r["key"], r["work_label"]) for r in got
                         if r["type"] in ("result", "skip", "timeout")]
                if status != "timeout-row":
                    break
                progress.message("bench: %s T=%d: a run took longer than %s s: %s"
                                 % (engine, t, mode["row_timeout_s"],
                                    "; ".join("%s work=%s" % (r["key"], r["work_label"])
                                              for r in got if r["type"] == "timeout")))
            einfo = engines.setdefault((engine, t), {"engine": engine, "family": family,
                                                     "threads": t, "status": "ok",
                                                     "startup_runs": [],
                                                     "shutdown_runs": []})
            for r in recs:
                cell = (engine, t, r.get("key"), r.get("work_label"))
                if r["type"] == "result":
                    if r["check"] != "ok":
                        mismatches.append("%s T=%d %s work=%s: %s" % (
                            engine, t, r["key"], r["work_label"], r["check"]))
                    if r.get("capped"):
                        finished.setdefault((engine, t), []).append(
                            "%s@%s" % (r["key"], r["work_label"]))
                    if cell in merged:
                        m = merged[cell]
                        m["times_s"] += r["times_s"]
                        m["capped"] = m.get("capped", False) or r.get("capped", False)
                        if r["check"] != "ok":
                            m["check"] = r["check"]
                    else:
                        merged[cell] = r
                        doc["results"].append(r)
                elif r["type"] == "skip":
                    if rnd == 0:
                        doc["skips"].append(r)
                elif r["type"] == "timeout":
                    doc["timeouts"].append(r)
                    finished.setdefault((engine, t), []).append(
                        "%s@%s" % (r["key"], r["work_label"]))
                elif r["type"] == "engine":
                    einfo["version"] = r["version"]
                    einfo["startup_runs"].append(r["startup_s"])
                    einfo["shutdown_runs"].append(r["shutdown_s"])
                elif r["type"] == "unavailable" and rnd == 0:
                    skipped.append({"engine": engine, "reason": r["reason"]})
            if status != "ok":
                einfo["status"] = status
                progress.message("bench: %s T=%d: %s" % (engine, t, status))
                for e in errors:
                    progress.message("    " + e)
                worst = max(worst, 3 if status == "mismatch" else 1)
    for r in doc["results"]:
        r.pop("us_per_op", None)
        tables.enrich(r)
    for (engine, t), einfo in sorted(engines.items(),
                                     key=lambda x: (tables.engine_rank(x[0][0]), x[0][1])):
        if einfo["startup_runs"]:
            einfo["startup_s"] = sorted(einfo["startup_runs"])[len(einfo["startup_runs"]) // 2]
            einfo["shutdown_s"] = sorted(einfo["shutdown_runs"])[len(einfo["shutdown_runs"]) // 2]
        doc["engines"].append(einfo)
    pending_configs.sort(key=lambda c: tables.engine_rank(c[1]))
    for path, engine in pending_configs:
        progress.message("bench: pending-ops row: %s, %d ops held" % (engine, mode["pending"]))
        rec, status = run_pending(path, engine, mode["pending"], mode["timeout"])
        if rec:
            doc["pending"].append(rec)
        else:
            progress.message("bench: %s pending-ops row: %s" % (engine, status))
            worst = max(worst, 1)
    wide_configs.sort(key=lambda c: tables.engine_rank(c[1]))
    for path, engine in wide_configs:
        progress.message("bench: wide-op row: %s, one op over %d vars, %d runs"
                         % (engine, mode["wide"], mode["reps"]))
        rec, status = run_wide(path, engine, mode["wide"], mode["reps"], mode["timeout"])
        if rec:
            doc["wide"].append(rec)
        else:
            progress.message("bench: %s wide-op row: %s" % (engine, status))
            worst = max(worst, 1)
    progress.message("bench: done in %s" % fmt_secs(time.time() - progress.t0))
    doc["machine"]["loadavg_end"] = os.getloadavg()[0]
    doc["valid"] = not mismatches
    doc["mismatches"] = mismatches

    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

    if mismatches:
        print("\n" + "!" * 72, file=sys.stderr)
        print("!!! bench: FAILED: final state differs from the serial run:", file=sys.stderr)
        for m in mismatches:
            print("!!!   " + m, file=sys.stderr)
        print("!!! no tables are reported for a run that computed a wrong result", file=sys.stderr)
        print("!" * 72, file=sys.stderr)
        return 3

    res = tables.Results(doc)
    m = doc["machine"]
    print("varflow benchmarks (%s mode), %s, %s cores, %s; %s"
          % (opts.mode, m["cpu"], m["cores"], doc["date"], doc["git"]))
    print("each cell: %d timed runs (%d round%s, each after %d warm-up); push-all + "
          "wait-all; load average %.2f -> %.2f"
          % (mode["reps"], rounds, "" if rounds == 1 else "s interleaving the engines",
             mode["warmup"], m["loadavg_start"], m["loadavg_end"]))
    print("(capped): fewer runs, one took longer than %s s; timeout: a run took longer "
          "than %s s and was abandoned; n/a: the engine cannot express the workload"
          % (mode["max_run_s"], mode["row_timeout_s"]))
    for n in notes:
        print("note: " + n)
    for title, header, trows in tables.all_tables(res):
        print(tables.render_text(title, header, trows))
    print("\nresults: %s" % out)

    if opts.docs:
        rc = subprocess.call([sys.executable, os.path.join(REPORT, "report.py"), out])
        worst = max(worst, 1 if rc else 0)
    return worst


if __name__ == "__main__":
    sys.exit(main())
