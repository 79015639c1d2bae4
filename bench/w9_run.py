#!/usr/bin/env python3
"""W9, the iterative stencil (Task Bench's stencil_1d): a sweep of task sizes.

    bench/w9_run.py [--build build-bench] [--quick] [--engines serial,vf-pooled,...]
                    [--threads 1,2] [--steps S] [--run-ms M] [--max-tasks N]
                    [--g-max-us G] [--g-min-us G] [--g-every K] [--reps R]
                    [--warmup W] [--max-run-s S] [--omp-bind spread|none]
                    [--out FILE] [--docs]

The program (bench/workloads.h, rows W9-x1 and W9-x4): W columns, W = T
(the worker count) and 4T, over S steps; task (t, i) reads the values of
(t-1, i-1), (t-1, i) and (t-1, i+1) and writes (t, i), two vars per column
alternating as a program reuses two buffers. Each task runs the FLOP loop of
bench/stencil.h for g microseconds: the loop is calibrated once, in one
process (`vfbench-varflow --calibrate`), and every engine runs the same
iteration counts, so every engine runs the same programs and is checked
against the same serial run (the final values, bit for bit; a mismatch
fails loudly and writes nothing to the docs).

g goes from --g-max-us (800) down by halving to the last at or above
--g-min-us (0.09): 800, 400, ..., 100, ..., 12.5, ..., 0.098 us. S is
--steps (100 here; the driver's own default is WORKLOADS.md's 1000), raised
for each g so that the ideal run (tasks x g / T) takes --run-ms (200), but
never past --max-tasks tasks (1M) a program.

Each engine runs in a process of its own per worker count T (1 and every
core by default): varflow's engines, OpenMP tasks with depend (GCC libgomp,
clang + LLVM libomp; pinned with OMP_PROC_BIND=spread OMP_PLACES=cores
unless --omp-bind none), oneTBB's flow graph, StarPU (eager, lws); each
skipped with a note where not built. The serial loop runs the program of
every T (one thread, --w9-threads T), the baseline of the efficiency against
the serial loop.

A point whose run takes longer than --max-run-s (5 s) is not repeated: its
one run is the sample (the driver's "capped"; marked * in the tables). A
peer can be very slow on the smallest tasks (GCC's libgomp with a team of
one holds a million deferred tasks), and its 6 runs there would take the
sweep's whole time.

Per (engine, T, W, g): the median of --reps timed runs (after --warmup),
the time per task as Task Bench counts it (time x T / tasks: at full
efficiency, g), FLOP/s, the efficiency against the best FLOP/s seen at T
workers in this run (any engine, W or g), and against the serial loop's
throughput per worker (serial time of the same program / (T x time)). The
METG is Task Bench's (scripts/chart_metg.py): of the points at 50 %
efficiency or more, the one with the smallest time per task, interpolated
linearly in efficiency towards the next smaller g when that one's time per
task is smaller.

Exit status: 0; 1 when an engine failed or a binary is missing; 3 when a
run's final state differed from the serial run.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))  # bench
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(HERE, "report")]
import run  # noqa: E402  (bench/run.py: the binaries, the machine, engine_env)
import sections  # noqa: E402  (bench/report/sections.py)
import tables  # noqa: E402  (bench/report/tables.py)

SECTION = "## W9: iterative stencil"
ENGINES = ["serial", "vf-pooled", "vf-perdev", "vf-pooled-replay", "vf-perdev-replay",
           "omp-gcc", "omp-clang", "tbb-flow",
           "spu-eager", "spu-lws"]
KEYS = [("W9-x1", 1), ("W9-x4", 4)]
TARGET_G_US = 100.0     # the coarse tasks
TARGET_PER_WORKER = 0.98
PEER_FROM_G_US = 10.0   # no peer ahead of varflow at this g or more
MODES = {
    "full": dict(steps=100, run_ms=200, max_tasks=1000000, g_max_us=800.0,
                 g_min_us=0.09, g_every=1, reps=5, warmup=1, max_run_s=5.0),
    # a smoke test while developing: 5 sizes, 100 steps, 3 runs
    "quick": dict(steps=100, run_ms=0, max_tasks=1000000, g_max_us=800.0,
                  g_min_us=0.09, g_every=3, reps=3, warmup=1, max_run_s=2.0),
}


def g_label(g):
    return "%gus" % float("%.3g" % g)


def find_engines(build, want):
    """{engine: (binary, family, threaded)} of the engines built here, and
    the notes on those skipped."""
    found, notes = {}, []
    for name, what, howto in run.BINARIES:
        path = os.path.join(build, name)
        if not os.access(path, os.X_OK):
            notes.append("skipped %s: not built (%s)" % (what, howto))
            continue
        listing = subprocess.run([path, "--list"], capture_output=True, text=True)
        for line in listing.stdout.splitlines():
            e = json.loads(line)
            if e["engine"] not in want:
                continue
            if e["unavailable"]:
                notes.append("skipped %s: %s" % (e["engine"], e["unavailable"]))
                continue
            found[e["engine"]] = (path, e["family"], e["threaded"])
    return found, notes


def run_engine(binary, engine, family, threads, prog_threads, args, omp_bind, timeout):
    """One engine process; returns (result records, status, stderr tail)."""
    cmd = [binary, "--engine", engine, "--threads", str(threads),
           "--w9-threads", str(prog_threads)] + args
    env = run.engine_env()
    if family == "openmp" and omp_bind != "none":
        env.update(OMP_PROC_BIND=omp_bind, OMP_PLACES="cores")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], "timeout after %d s" % timeout, []
    recs = [json.loads(line) for line in proc.stdout.splitlines()
            if line.startswith("{")]
    status = {0: "ok", 3: "mismatch", 4: "timeout-row"}.get(
        proc.returncode, "failed (exit %d)" % proc.returncode)
    errors = [line for line in proc.stderr.splitlines()
              if line.strip() and not line.startswith("[")]
    return recs, status, errors[-20:]


def metg(points, threshold=0.5):
    """Task Bench's METG over points [(iters, time_per_task, efficiency)]:
    (value, how) with how "" (interpolated or a point), "<=" (every point
    reached the threshold: at most the smallest time per task measured) or
    None (no point reached it)."""
    pts = sorted(points, key=lambda p: -p[0])
    above = [i for i, p in enumerate(pts) if p[2] >= threshold]
    if not above:
        return None, None
    i = min(above, key=lambda k: pts[k][1])
    t = pts[i][1]
    if i + 1 >= len(pts):
        return t, "<="
    if pts[i + 1][1] < t:
        e0, t0 = pts[i + 1][2], pts[i + 1][1]
        e1, t1 = pts[i][2], pts[i][1]
        frac = 1.0 if e1 == e0 else min(max((threshold - e0) / (e1 - e0), 0.0), 1.0)
        t = t0 + frac * (t1 - t0)
    return t, ""


def analyze(doc):
    """Derived figures: per result its median, time per task, FLOP/s and
    efficiencies; the METGs; the targets."""
    res = doc["results"]
    for r in res:
        r["median_s"] = statistics.median(r["times_s"])
        r["tpt_us"] = r["median_s"] * r["threads"] / r["ops"] * 1e6
        r["flops_s"] = r["flops"] / r["median_s"] if r["median_s"] > 0 else 0.0
    peak = {}
    for r in res:
        peak[r["threads"]] = max(peak.get(r["threads"], 0.0), r["flops_s"])
    serial = {(r["w9_threads"], r["key"], r["work_label"]): r for r in res
              if r["engine"] == "serial"}
    for r in res:
        r["eff_best"] = r["flops_s"] / peak[r["threads"]] if peak[r["threads"]] else 0.0
        s = serial.get((r["w9_threads"], r["key"], r["work_label"]))
        r["eff_serial"] = (s["median_s"] / (r["threads"] * r["median_s"])
                           if s and r["median_s"] > 0 else None)
    doc["peak_flops_s"] = {str(t): v for t, v in peak.items()}
    groups = {}
    for r in res:
        groups.setdefault((r["engine"], r["w9_threads"], r["key"]), []).append(r)
    doc["metg"] = []
    for (engine, t, key), rs in sorted(groups.items(),
                                       key=lambda x: (tables.engine_rank(x[0][0]),
                                                      x[0][1], x[0][2])):
        mb = metg([(r["work_iters"], r["tpt_us"], r["eff_best"]) for r in rs])
        ms = metg([(r["work_iters"], r["tpt_us"], r["eff_serial"]) for r in rs
                   if r["eff_serial"] is not None])
        doc["metg"].append({"engine": engine, "threads": rs[0]["threads"],
                            "prog_threads": t, "key": key, "width": rs[0]["w9_width"],
                            "metg_best_us": mb[0], "metg_best_how": mb[1],
                            "metg_serial_us": ms[0], "metg_serial_how": ms[1]})


def targets(doc):
    """The issue's W9 rows, met or not: (text, rows)."""
    res = doc["results"]
    tmax = max(doc["threads"])
    rows = []
    near = min({r["g_us"] for r in res}, key=lambda g: abs(g - TARGET_G_US))
    for r in sorted(res, key=lambda r: (tables.engine_rank(r["engine"]), r["key"])):
        if (r["family"] == "varflow" and r["threads"] == tmax and r["g_us"] == near
                and r["eff_serial"] is not None):
            rows.append(["W9 %s g=%s T=%d: per-worker throughput vs serial >= %.0f %%"
                         % (r["key"], g_label(near), tmax, TARGET_PER_WORKER * 100),
                         r["engine"], "%.1f %% (speedup %.2f)"
                         % (100 * r["eff_serial"], r["eff_serial"] * tmax),
                         "met" if r["eff_serial"] >= TARGET_PER_WORKER else "not met"])
    cells = {}
    for r in res:
        if r["threads"] == tmax and r["g_us"] >= PEER_FROM_G_US and r["engine"] != "serial":
            cells.setdefault((r["key"], r["g_us"]), []).append(r)
    vf_engines = sorted({r["engine"] for r in res if r["family"] == "varflow"},
                        key=tables.engine_rank)
    for vf in vf_engines:
        ahead = []
        for (key, g), rs in sorted(cells.items()):
            mine = [r for r in rs if r["engine"] == vf]
            peers = [r for r in rs if r["family"] != "varflow"]
            if not mine or not peers:
                continue
            best = min(peers, key=lambda r: r["median_s"])
            if best["median_s"] < mine[0]["median_s"]:
                ahead.append("%s g=%s %s %.3fx" % (key, g_label(g), best["engine"],
                                                   mine[0]["median_s"] / best["median_s"]))
        rows.append(["W9 g >= %g us T=%d: no peer ahead of varflow" % (PEER_FROM_G_US, tmax),
                     vf, "; ".join(ahead) if ahead else "none ahead",
                     "not met" if ahead else "met"])
    return rows


def fmt_pct(x):
    return "-" if x is None else "%.0f" % (100 * x)


def fmt_us(x):
    return "-" if x is None else tables.fmt_num(x)


def sweep_tables(doc):
    """(title, header, rows) per (T, W): g down the side, engines across;
    a cell is the time per task in us (efficiency against the best % /
    against the serial loop per worker %)."""
    res = doc["results"]
    out = []
    engines = sorted({r["engine"] for r in res}, key=tables.engine_rank)
    for t in doc["threads"]:
        for key, mult in KEYS:
            rs = {(r["engine"], r["work_label"]): r for r in res
                  if r["w9_threads"] == t and r["key"] == key}
            if not rs:
                continue
            cols = [e for e in engines if any(k[0] == e for k in rs)]
            header = ["g", "iterations", "S"] + cols
            rows = []
            for g in doc["g_sizes"]:
                any_r = next((r for (e, lab), r in rs.items() if lab == g["label"]), None)
                if not any_r:
                    continue
                line = [g["label"].replace("us", " us"), str(g["iters"]),
                        str(any_r["w9_steps"])]
                for e in cols:
                    r = rs.get((e, g["label"]))
                    if not r:
                        line.append("-")
                    elif e == "serial":  # the baseline: its time alone
                        line.append(fmt_us(r["tpt_us"]) + ("*" if r.get("capped") else ""))
                    else:
                        line.append("%s%s (%s/%s)" % (fmt_us(r["tpt_us"]),
                                                    "*" if r.get("capped") else "",
                                                    fmt_pct(r["eff_best"]),
                                                    fmt_pct(r["eff_serial"])))
                rows.append(line)
            w = mult * t
            out.append(("W9 T=%d, W=%d (%s): us per task (efficiency %% against the "
                        "best FLOP/s at T=%d / against the serial loop per worker)"
                        % (t, w, key, t), header, rows))
    return out


def metg_table(doc):
    cols = sorted({(m["prog_threads"], m["key"]) for m in doc["metg"]})
    width = {(m["prog_threads"], m["key"]): m["width"] for m in doc["metg"]}
    header = ["engine"] + ["T=%d W=%d" % (t, width[(t, k)]) for t, k in cols]
    by = {}
    for m in doc["metg"]:
        by.setdefault(m["engine"], {})[(m["prog_threads"], m["key"])] = m
    rows = []
    for e in sorted(by, key=tables.engine_rank):
        line = [e]
        for c in cols:
            m = by[e].get(c)
            if not m:
                line.append("-")
                continue

            def one(v, how):
                return "none" if v is None else "%s%s" % ("<= " if how == "<=" else "",
                                                           tables.fmt_num(v))
            line.append("%s / %s" % (one(m["metg_best_us"], m["metg_best_how"]),
                                     one(m["metg_serial_us"], m["metg_serial_how"])))
        rows.append(line)
    return ("W9 METG(50 %), us: against the best FLOP/s / against the serial loop",
            header, rows)


def docs_section(doc):
    s = doc["settings"]
    m = doc["machine"]
    L = [SECTION, ""]
    L.append("<!-- Written by bench/w9_run.py --docs (`make bench-w9`, and `make bench` "
             "after the suite), which replaces this section and nothing else; "
             "bench/report/report.py keeps it as it is when it rewrites the page. -->")
    L.append("")
    L.append(
        "Task Bench's stencil_1d as a workload of our own (`bench/workloads.c`, rows "
        "W9-x1 and W9-x4; `bench/w9_run.py` runs the sweep): W columns, W = T and 4T "
        "for T workers, over S steps; task (t, i) reads the values of (t-1, i-1), "
        "(t-1, i) and (t-1, i+1) (clipped at the edges) and writes (t, i), two vars "
        "per column alternating, as a program reuses two buffers (so a task also "
        "waits for the readers of the value it overwrites); each value on a cache "
        "line of its own, as separate buffers are (Task Bench mallocs each task's "
        "output). The -replay engines capture the repeating part once (about 1024 "
        "tasks, whole pairs of steps) and launch it again and again "
        "(`bench/adapters/vf_replay.c`); "
        "every other engine pushes every task. Each task runs a FLOP loop "
        "(`bench/stencil.h`: %d "
        "independent multiply-adds per iteration, %d FLOPs, in registers) for g "
        "microseconds: calibrated once at %.3f ns per iteration, and every engine "
        "runs the same iteration counts. g from %s down by halving to %s; S = max(%d, "
        "what makes the ideal run, tasks x g / T, take %d ms), at most %d tasks. "
        "**Every run's final values are compared with the serial run's, bit for bit.**"
        % (doc["flops_per_iter"] // 2, doc["flops_per_iter"], doc["flop_ns_per_iter"],
           doc["g_sizes"][0]["label"].replace("us", " us"),
           doc["g_sizes"][-1]["label"].replace("us", " us"), s["steps"], s["run_ms"],
           s["max_tasks"]))
    L.append("")
    L.append(
        "A cell: the time per task as Task Bench counts it, median run time x T / "
        "tasks (g at full efficiency), median of %d timed runs after %d warm-up "
        "(*: a single run, it took longer than %s s), "
        "then in brackets the efficiency against the best FLOP/s seen at T workers "
        "in this run (any engine, W or g: %s) and against the serial loop's "
        "throughput per worker (the serial time of the same program / (T x time): "
        "1.96x at T=2 is 98 %%). The METG is Task Bench's (its chart_metg.py): "
        "of the points at 50 %% efficiency or more, the smallest time per task, "
        "interpolated linearly in efficiency towards the next smaller g when that "
        "one's time per task is smaller; *<=* when every g reached 50 %%; the serial "
        "loop's cells give its time alone. varflow's "
        "engines push from the calling thread to T workers; OpenMP's team of T and "
        "TBB's T threads include the pushing thread; OpenMP's threads are pinned "
        "(%s), varflow's and TBB's are not."
        % (s["reps"], s["warmup"], s.get("max_run_s", 0),
           ", ".join("%.2f GFLOP/s at T=%s" % (v * 1e-9, t)
                     for t, v in sorted(doc["peak_flops_s"].items())),
           "OMP_PROC_BIND=%s OMP_PLACES=cores" % s["omp_bind"]
           if s["omp_bind"] != "none" else "not here: --omp-bind none"))
    L.append("")
    L.append("**This machine is a %s-core virtual machine shared with other work "
             "(sanitizer suites ran beside this run), so its figures are noisy: a "
             "point a few %% off is within its noise.**" % m["cores"])
    L.append("")
    L.append("Run: %s, commit %s; %s; %s cores (%s); load average %.2f at start, "
             "%.2f at end. Command: `%s`."
             % (doc["date"], doc["git"], m.get("cpu") or "?", m["cores"],
                "virtual machine" if m.get("virtualized") else "bare metal or unknown",
                m["loadavg_start"], m["loadavg_end"], doc["command"]))
    L.append("")
    rt = doc.get("line_round_trip_ns") or 0
    if rt > 0:
        L.append("A cache line's round trip between two cores of this machine (CPUs 0 "
                 "and 1, `vfbench-varflow --calibrate`): %.0f ns. At W = T = 2 every "
                 "step hands each worker's result to the other: one way for the "
                 "engine's signal and one for the value, whatever the engine, so a "
                 "task there costs at least about %.0f ns more than g." % (rt, rt))
        L.append("")
    L.append(tables.render_markdown("W9 targets (issue 29)",
                                    ["target", "engine", "figure", "verdict"],
                                    targets(doc)))
    L.append("")
    L.append(tables.render_markdown(*metg_table(doc)))
    L.append("")
    for title, header, rows in sweep_tables(doc):
        L.append(tables.render_markdown(title, header, rows))
        L.append("")
    for n in doc.get("notes", []):
        L.append("- %s" % n)
    if doc.get("notes"):
        L.append("")
    return L


def write_docs(lines):
    # before the sections report.py keeps after this one, else at the end
    return sections.put(os.path.join(ROOT, "docs", "BENCHMARKS.md"), SECTION, lines,
                        before=("## W6 across ranks (MPI)", "## Device pipeline on a GPU"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--quick", action="store_true",
                    help="every third g, S = 100, 3 runs (a smoke test, not a report)")
    ap.add_argument("--engines", help="only these (default: %s)" % ",".join(ENGINES))
    ap.add_argument("--threads", help="worker counts (default 1 and all cores)")
    ap.add_argument("--steps", type=int, help="S, the fewest steps (mode default)")
    ap.add_argument("--run-ms", type=float,
                    help="raise S so the ideal run takes this long (0: S fixed)")
    ap.add_argument("--max-tasks", type=int, help="at most this many tasks a program")
    ap.add_argument("--g-max-us", type=float)
    ap.add_argument("--g-min-us", type=float)
    ap.add_argument("--g-every", type=int, help="keep every K-th halving of g")
    ap.add_argument("--reps", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--max-run-s", type=float,
                    help="a point whose run takes longer is not repeated (mode default)")
    ap.add_argument("--omp-bind", default="spread",
                    help="OMP_PROC_BIND for the OpenMP peers (none: leave unset)")
    ap.add_argument("--row-timeout", type=float, default=60,
                    help="seconds after which one run is abandoned")
    ap.add_argument("--out", help="results JSON (default BUILD/w9-results.json)")
    ap.add_argument("--docs", action="store_true",
                    help="then write the section '%s' of docs/BENCHMARKS.md" % SECTION)
    opts = ap.parse_args()
    mode = dict(MODES["quick" if opts.quick else "full"])
    for k in ("steps", "run_ms", "max_tasks", "g_max_us", "g_min_us", "g_every",
              "reps", "warmup", "max_run_s"):
        if getattr(opts, k) is not None:
            mode[k] = getattr(opts, k)
    mode["omp_bind"] = opts.omp_bind
    build = os.path.abspath(opts.build)
    cores = os.cpu_count() or 1
    threads = ([int(t) for t in opts.threads.split(",")] if opts.threads
               else sorted({1, cores}))
    want = opts.engines.split(",") if opts.engines else ENGINES
    found, notes = find_engines(build, set(want))
    if "vfbench-varflow" not in [os.path.basename(p) for p, _, _ in found.values()]:
        print("w9_run: vfbench-varflow not built (make bench)", file=sys.stderr)
        return 1
    varflow_bin = os.path.join(build, "vfbench-varflow")
    cal = subprocess.run([varflow_bin, "--calibrate"], capture_output=True, text=True)
    calrec = json.loads(cal.stdout.strip().splitlines()[-1])
    flop_ns = calrec["flop_ns_per_iter"]
    g_sizes = []
    g, k = mode["g_max_us"], 0
    while g >= mode["g_min_us"]:
        if k % mode["g_every"] == 0:
            g_sizes.append({"label": g_label(g), "g_us": g,
                            "iters": max(1, int(round(g * 1000.0 / flop_ns)))})
        g, k = g / 2, k + 1
    ref_dir = os.path.join(build, "refs")
    os.makedirs(ref_dir, exist_ok=True)
    args = ["--workloads", ",".join(k for k, _ in KEYS),
            "--work", ",".join(str(x["iters"]) for x in g_sizes),
            "--work-labels", ",".join(x["label"] for x in g_sizes),
            "--flop-ns-per-iter", "%.6f" % flop_ns,
            "--w9-steps", str(mode["steps"]), "--w9-run-ms", str(mode["run_ms"]),
            "--w9-max-tasks", str(mode["max_tasks"]),
            "--reps", str(mode["reps"]), "--warmup", str(mode["warmup"]),
            "--max-run-s", str(mode.get("max_run_s", 0)),
            "--row-timeout-s", str(opts.row_timeout), "--ref-dir", ref_dir]
    doc = {
        "schema": "varflow-bench-w9/1",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git": run.sh("git -C %s describe --always --dirty" % HERE),
        "command": " ".join(["python3", "bench/w9_run.py"] + sys.argv[1:]),
        "machine": run.machine_info(),
        "settings": mode, "threads": threads,
        "flop_ns_per_iter": flop_ns, "flops_per_iter": calrec["flops_per_iter"],
        "line_round_trip_ns": calrec.get("line_round_trip_ns", 0),
        "g_sizes": g_sizes, "results": [], "notes": notes,
    }
    for n in notes:
        print("w9_run: " + n, file=sys.stderr)
    print("w9_run: FLOP loop %.3f ns/iteration; g = %s; T = %s"
          % (flop_ns, ", ".join(x["label"] for x in g_sizes),
             ",".join(map(str, threads))), file=sys.stderr)
    status = 0
    order = sorted(found, key=tables.engine_rank)
    for t in threads:
        for e in order:
            binary, family, threaded = found[e]
            if not threaded and e != "serial":
                continue
            workers = t if threaded else 1
            print("w9_run: %s T=%d (program for T=%d)" % (e, workers, t), file=sys.stderr,
                  flush=True)
            recs, st, errors = run_engine(binary, e, family, workers, t, args,
                                          opts.omp_bind, 3600)
            for r in recs:
                if r.get("type") == "result":
                    r["g_us"] = next(x["g_us"] for x in g_sizes
                                     if x["label"] == r["work_label"])
                    if r["check"] != "ok":
                        status = 3
                    elif r["times_s"]:
                        doc["results"].append(r)
                elif r.get("type") == "skip":
                    doc["notes"].append("%s: %s" % (e, r["reason"]))
            if st != "ok":
                print("w9_run: %s T=%d: %s" % (e, workers, st), file=sys.stderr)
                for line in errors:
                    print("    " + line, file=sys.stderr)
                status = max(status, 3 if st == "mismatch" else 1)
    doc["machine"]["loadavg_end"] = os.getloadavg()[0]
    doc["valid"] = status != 3
    out = opts.out or os.path.join(build, "w9-results.json")
    if status == 3:
        print("\n" + "!" * 72, file=sys.stderr)
        print("!!! w9_run: FAILED: a final state differs from the serial run; no "
              "tables are reported", file=sys.stderr)
        print("!" * 72, file=sys.stderr)
    elif doc["results"]:
        analyze(doc)
        trows = targets(doc)
        print(tables.render_text("W9 targets (issue 29)",
                                 ["target", "engine", "figure", "verdict"], trows))
        print(tables.render_text(*metg_table(doc)))
        for title, header, rows in sweep_tables(doc):
            print(tables.render_text(title, header, rows))
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("\nresults: %s" % out)
    if opts.docs and status != 3 and doc["results"]:
        print("wrote %s" % write_docs(docs_section(doc)))
        kept = os.path.join(ROOT, "docs", "bench", "w9-results.json")
        shutil.copyfile(out, kept)
        print("wrote %s" % kept)
    return status


if __name__ == "__main__":
    sys.exit(main())
