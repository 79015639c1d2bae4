#!/usr/bin/env python3
"""Generate docs/BENCHMARKS.md and its SVG charts from the results JSON of
bench/run.py (and, when present, the instruction counts of
bench/callgrind.py). The document is never edited by hand: every number,
table, chart and remark in it comes from the JSON.

    bench/report/report.py [RESULTS.json] [--callgrind CALLGRIND.json]
                           [--docs DOCS_DIR]

The JSON files are copied to DOCS_DIR/bench/ (results.json, callgrind.json)
so the document can be regenerated from what is committed:
    python3 bench/report/report.py            # from docs/bench/results.json
"""

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sections  # noqa: E402
import svg  # noqa: E402
import tables  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))  # HERE is bench/report

WORKLOADS = [
    ("W1", "independent", "N ops; op i writes var i. No dependencies: push and "
     "dispatch throughput."),
    ("W2", "chain", "N ops, all read-write one var: the latency of one dependency "
     "hand-off."),
    ("W3", "fan-out / fan-in", "R rounds of: one op writes X; K ops read X and "
     "write their own Y_k; one op reads all Y_k and writes X. K = 16 and 64."),
    ("W4", "wavefront", "G x G grid; cell (i,j) reads (i-1,j) and (i,j-1), writes "
     "(i,j). G = 100 and 300."),
    ("W5", "random DAG", "1000 vars, 100000 ops, each reading 0-4 and writing 1-2 "
     "distinct vars (fixed seed)."),
    ("W6", "tiled Cholesky", "n = 2048 in b x b tiles, b = 32, 64 and 128; "
     "POTRF/TRSM/SYRK/GEMM tile kernels (examples/cholesky_tiles.h)."),
    ("W7", "many pushers", "W5 split over 2 pushing threads, each on its own "
     "500 vars, plus a shared var both accumulate into now and then."),
    ("W8", "blocked sparse LU", "BOTS's SparseLU: n = 2560 as NB x NB blocks of B x B "
     "floats, NB = 160, B = 16 and NB = 40, B = 64; about half the blocks present at "
     "the start (fixed seed, the diagonal always), the others allocated zeroed by the "
     "pushing thread when first needed; lu0/fwd/bdiv/bmod block kernels "
     "(bench/sparselu.h)."),
    ("W9", "iterative stencil", "Task Bench's stencil_1d: W = T and 4T columns over S "
     "steps, task (t, i) reads (t-1, i-1..i+1) and writes (t, i), two vars a column "
     "alternating; each task a FLOP loop of g us, g from 800 us down to 0.1 us by "
     "halving (bench/stencil.h); its own sweep and section (bench/w9_run.py)."),
    ("W10", "recursive", "fib(n) with no cutoff, n = 25 and 30, each call a task that "
     "spawns two and waits for both; a quicksort of 10M ints, each range over 1000 "
     "partitioned into two tasks waited for, at or below sorted serially "
     "(bench/recursive.h)."),
]

# Each tiled workload's chart (docs/bench/NAME) and chart title.
TILED_CHARTS = {"W6": ("cholesky-gflops.svg", "W6 tiled Cholesky"),
                "W8": ("sparselu-gflops.svg", "W8 blocked sparse LU")}

# What the W8 section says before its tables (the W6 section has no such
# text: the workload list says it all).
W8_TEXT = (
    "BOTS's SparseLU (`bench/sparselu.h`, `bench/workloads.c`): LU without pivoting "
    "of an NB x NB grid of B x B single-precision blocks, each its own allocation, "
    "about half present at the start (a fixed-seed pattern, the diagonal always); "
    "for each k, lu0 on (k,k), fwd on the present (k,j), bdiv on the present (i,k), "
    "and bmod on (i,j) for every present pair (i,k), (k,j), where the pushing thread "
    "first allocates (i,j), zeroed, if it is absent (fill-in), inside the timed run, "
    "as BOTS's task-creating thread does. The kernels are BOTS's loops, not BLAS. "
    "**GFLOP/s** counts BOTS's nominal flops per kernel: lu0 2/3 B^3, fwd B^3, "
    "bdiv B^3, bmod 2 B^3, summed over the ops the pattern gives. Every block of "
    "every run is compared with the serial run bit for bit (each block's updates "
    "come in the same order under every engine, since each op writes one block and "
    "the ops writing a block are pushed in loop order), and the serial factor's "
    "residual ||A - LU||_F / ||A||_F is shown (single precision; above 1e-6 the "
    "suite fails: a kernel is wrong). A var per block "
    "that exists: varflow makes the vars of the blocks present at the start before "
    "the clock and `vf_var_create` for each block allocated on the way, in the pushing "
    "loop; StarPU registers a handle likewise; OpenMP runs BOTS's loop as a C user "
    "writes it, `depend(in:)` / `depend(inout:)` on the blocks' addresses "
    "(`bench/adapters/adapt_omp.c`); tbb-flow builds the whole graph, allocations "
    "included, before any kernel runs. Every engine runs the same kernel code: "
    "`bench/sparselu.c` is built once, by the C compiler (GCC), and linked into every "
    "binary, omp-clang's too.")


def md_table(t):
    return tables.render_markdown(*t)


def slug(label):
    """A work label as part of a file name: docs/ names its assets in
    lowercase-kebab ("10 us" -> "10us")."""
    return label.replace(" ", "").lower()


def chart_us(res, work, threads, path):
    cols = res.columns(threads)
    engines = [c[0] for c in cols]
    groups = []
    for key in res.rows:
        if not tables.in_table(key, "0"):
            continue
        g = {}
        for e, t in cols:
            r = res.get(e, t, key, work)
            if r and "us_per_op" in r:
                u = r["us_per_op"]
                g[e] = (u["median"], u["min"], u["max"])
        groups.append((res.row_label(key), g))
    title = "us per op, %s, T = %d" % (tables.work_title(res.doc, work), threads)
    sub = ("median of %d runs, whisker min-max; shorter is better; serial is the "
           "plain loop (T=1)" % res.doc["settings"]["reps"])
    with open(path, "w") as f:
        f.write(svg.bars_log(title, sub, groups, engines, "us/op"))


def chart_speedup(res, path):
    t = res.tmax
    engines = [c[0] for c in res.columns(t) if c[1] == t and c[0] != "serial"]
    panels = []
    for key in res.rows:
        if not tables.in_table(key, "0"):
            continue
        p = {}
        for e in engines:
            p[e] = [res.speedup(e, t, key, w) for w in res.works]
        panels.append((res.row_label(key), p))
    xl = []
    for w in res.doc.get("work_sizes", []):
        xl.append("empty" if w["iters"] == 0 else "%d us" % w["target_us"])
    title = "speedup over the serial loop vs op size, T = %d workers" % t
    sub = "serial median / engine median; dashed: 1 (serial) and %d (ideal); log scale" % t
    with open(path, "w") as f:
        f.write(svg.lines_log(title, sub, panels, engines, xl,
                              [(1.0, "serial"), (float(t), "ideal")], "speedup"))


def chart_gflops(res, path, wid="W6"):
    groups = []
    engines = []
    for t in res.threads:
        for e, tt in res.columns(t):
            if tt == t and e not in engines:
                engines.append(e)
    name = TILED_CHARTS[wid][1]
    for key in res.rows:
        if key[:2] != wid:
            continue
        for t in res.threads:
            g = {}
            for e in engines:
                r = res.get(e, t if e != "serial" else 1, key, "tiles")
                if r and "gflops" in r and (e != "serial" or t == res.threads[0]):
                    u = r["gflops"]
                    g[e] = (u["median"], u["min"], u["max"])
            label = res.row_label(key).replace(name[3:] + " ", "")
            groups.append(("%s T=%d" % (label, t), g))
    title = "%s, GFLOP/s (longer is better)" % name
    sub = "median of %d runs, whisker min-max" % res.doc["settings"]["reps"]
    with open(path, "w") as f:
        f.write(svg.bars_log(title, sub, groups, engines, "GFLOP/s"))


def behind(res):
    """Generated remarks: where a varflow engine trails the best peer by more
    than 10 % at the same worker count. Returns markdown table lines."""
    vf = [e for e in res.engines if res.families.get(e) == "varflow"]
    lines = []
    ids = tables.tiled_ids(res)
    works = res.works + (["tiles"] if ids else []) + (
        ["rec"] if any(tables.is_recursive(k) for k in res.rows) else [])
    for w in works:
        for t in res.threads:
            cells = []
            for e in vf:
                items = []
                tt = 1 if e == "vf-naive" else t
                if tt != t:
                    cells.append("")
                    continue
                for key in res.rows:
                    if not tables.in_table(key, w):
                        continue
                    r = res.get(e, t, key, w)
                    best = res.best_peer(t, key, w)
                    if not r or "us_per_op" not in r or not best:
                        continue
                    ratio = r["us_per_op"]["median"] / best[1]
                    if ratio > 1.10:
                        items.append("%s %.2fx %s" % (key, ratio, best[0]))
                cells.append(", ".join(items) if items else "none")
            if any(c and c != "none" for c in cells):
                where = ("%s tiles" % "/".join(ids) if w == "tiles"
                         else "W10 recursive" if w == "rec"
                         else ("empty" if w == "0" else "~" + w))
                lines.append("| %s | %d | %s |" % (where, t, " | ".join(cells)))
    if not lines:
        return []
    head = ["| op size | T | " + " | ".join(vf) + " |",
            "|---|---|" + "---|" * len(vf)]
    return head + lines


def pending_section(doc, res):
    """The pending-ops row: memory per op held, and the peak."""
    lines = ["## Memory per pending op", ""]
    lines.append(
        "How much memory an engine holds for each op that was pushed and cannot run "
        "yet (`bench/pending.h`). Shape: vars A, B0, B1; a gate op writes all three "
        "and blocks until the pushing thread opens it; then N ops, op i reading A "
        "and writing B[i %% 2], so each waits on exactly two dependencies (A on the "
        "gate's write, B[i %% 2] on op i - 2's, the gate's for ops 1 and 2) and all N are pending at once. The "
        "resident set (`/proc/self/statm`) is read just before the first of the N "
        "pushes and just after the last: bytes per pending op = (after - before) / N. "
        "Then the gate opens and the engine drains. Each engine runs this row in a "
        "process of its own at one worker, so the peak (`ru_maxrss`) is the row's: "
        "the binary, the engine, and the N ops. varflow's engines run with no "
        "in-flight limit (`vf_config.max_inflight` 0, no `VF_MAX_INFLIGHT`); "
        "vf-naive runs each op inside its push and cannot hold one. For tbb-flow the "
        "N ops are the graph built and not yet started (its nodes, edges, and the "
        "deque that owns the nodes); starting it is opening the gate. "
        "N = %s in this run (full mode 10,000,000; quick 1,000,000)."
        % "{:,}".format(doc["settings"].get("pending", 0)))
    lines.append("")
    if doc.get("pending"):
        lines.append(md_table(tables.table_pending(res)))
    else:
        lines.append("Not measured in this run.")
    lines.append("")
    return lines


def wide_section(doc, res):
    """The wide-op row: one op over 2^20 vars, pushed and run."""
    lines = ["## One op over many vars", ""]
    lines.append(
        "What one op that names very many vars costs (`bench/adapters/adapter.h`, "
        "`bench_wide`): N vars are made, then one op that writes all of them, its "
        "list in a shuffled order (a fixed seed), is pushed and waited for "
        "(`vf_engine_push`, `vf_engine_wait_all`) %s times over the same vars; each run's time is "
        "push + run, and every var must have been written once per run. The push "
        "puts the list in normal form (each var once, a write if any use of it "
        "writes, sorted by address: O(N log N)), resolves every handle and queues "
        "the op on every var; the run is the op and the release of its vars. Making "
        "the N vars and deleting them (one `vf_var_destroy` each, then a wait) are "
        "timed apart. Each engine runs this row in a process of its own at one "
        "worker. N = %s in this run: varflow's limit on the handles one op names "
        "(`VF_MAX_OP_VARS`, 2^20; full and quick mode); the target is under 1 s."
        % (len(doc["wide"][0]["times_s"]) if doc.get("wide") else "R",
           "{:,}".format(doc["settings"].get("wide", 0))))
    lines.append("")
    if doc.get("wide"):
        lines.append(md_table(tables.table_wide(res)))
    else:
        lines.append("Not measured in this run.")
    lines.append("")
    return lines


def tiled_section(res, wid, rel="bench", run_line=None):
    """The section of a tiled workload (W6, W8): its chart, its GFLOP/s
    tables at each worker count, and for the last one present the speedup
    and varflow / best peer tables of all tiled rows. `run_line`, when
    given, says which run the figures come from (a section made from
    another run than the page's)."""
    title = {"W6": "W6: tiled Cholesky", "W8": "W8: blocked sparse LU"}[wid]
    L = ["## %s" % title, ""]
    if wid == "W8":
        L += [W8_TEXT, ""]
    if run_line:
        L += [run_line, ""]
    if rel:
        L += ["![GFLOP/s](%s/%s)" % (rel, TILED_CHARTS[wid][0]), ""]
    for t in res.threads:
        L += [md_table(tables.table_gflops(res, t, "–", wid)), ""]
    if wid == "W8":
        for t in res.threads:
            L += [md_table(tables.table_seconds(res, t, "–", wid)), ""]
    if wid == tables.tiled_ids(res)[-1]:
        L += [md_table(tables.table_speedup(res, "tiles")), ""]
        L += [md_table(tables.table_vs_peer(res, "tiles")), ""]
    return L


W10_TITLE = "## W10: recursive"
W10_TEXT = (
    "Task-parallel recursion with a wait at every level (`bench/recursive.h`): fib(n) "
    "with no cutoff, each call a task that spawns fib(n-1) and fib(n-2) and waits for "
    "both (n = 25: 242,785 tasks; n = 30: 2,692,537), and a quicksort of 10M ints "
    "(a fixed seed) in which each range over 1000 ints is partitioned (median of "
    "three, Hoare) into two tasks that the range's task waits for, and a range at or "
    "below 1000 is sorted serially. A cell is the time of one run, the root call's "
    "push and wait; tasks per second divide the task count (the calls) by the median. "
    "varflow: each call is an op, its arguments copied into it (`arg_size`); a call "
    "that recurses makes two vars (`vf_var_create`), pushes one op per child writing "
    "one of them, waits on both with `vf_var_wait` from inside the op, then destroys "
    "them (`bench/adapters/vf_recursive.c`). OpenMP: `#pragma omp task` per child and "
    "`#pragma omp taskwait`, the root in a `single` of a team of T. oneTBB (`tbb-tg`): "
    "a `tbb::task_group` per call, `run` per child, `wait`. serial: the plain "
    "recursion (GCC at -O3 folds most of fib's calls into loops, so its fib is no "
    "per-task floor). varflow has T workers besides the program's thread, which "
    "only waits for the root; OpenMP's team of T and TBB's T threads include it. "
    "The partition and the serial leaf sort are built once by GCC and "
    "linked into every binary. Every run is checked: fib against the closed form, the "
    "sorted array against `qsort(3)`'s output of the same input.")


def rec_section(res, run_line=None):
    """The W10 section: seconds per run at each worker count, tasks per
    second, and varflow / best peer."""
    L = [W10_TITLE, "", W10_TEXT, ""]
    if run_line:
        L += [run_line, ""]
    for t in res.threads:
        L += [md_table(tables.table_rec_seconds(res, t, "–")), ""]
    L += [md_table(tables.table_rec_rate(res)), ""]
    L += [md_table(tables.table_vs_peer(res, "rec")), ""]
    return L


def callgrind_section(cg):
    lines = ["## Instructions per op (callgrind)", ""]
    lines.append(
        "`make bench-callgrind` runs W1, W2 and W5 with empty ops under "
        "`valgrind --tool=callgrind`, each at N and 2N ops, and divides the "
        "difference of the instruction counts by N, so set-up and one-time costs "
        "cancel out. Counted from the start of the first push to the return of "
        "`vf_engine_wait_all`, all threads together; `main` is the pushing thread alone, "
        "`workers` the rest (dispatch, completion, and any spinning while idle: "
        "that part depends on scheduling and varies between runs). "
        "The serial row is the loop itself (the op's kernel, the floor). "
        "`vf-pooled-opr` pushes the same ops through reusable operators "
        "(`vf_operator_push`), whose var lists are checked once, not per push.")
    lines.append("")
    lines.append("Run: %s, N = %s, worker threads: %s, median of %s runs, %s." % (
        cg.get("date", "?"), cg.get("n", "?"), cg.get("threads", "?"),
        cg.get("repeat", 1), cg.get("git", "?")))
    lines.append("")
    header = ["engine", "workload", "instr/op (all)", "main thread", "workers"]
    rows = []
    for r in cg.get("rows", []):
        rows.append([r["engine"], r["key"], "%.0f" % r["per_op"],
                     "%.0f" % r.get("per_op_main", 0) if "per_op_main" in r else "-",
                     "%.0f" % r.get("per_op_workers", 0) if "per_op_workers" in r else "-"])
    lines.append(tables.render_markdown("instructions per op (I(2N) - I(N)) / N", header, rows))
    lines.append("")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="?")
    ap.add_argument("--callgrind")
    ap.add_argument("--docs", default=os.path.join(ROOT, "docs"))
    opts = ap.parse_args()
    data_dir = os.path.join(opts.docs, "bench")
    os.makedirs(data_dir, exist_ok=True)
    stored = os.path.join(data_dir, "results.json")
    stored_cg = os.path.join(data_dir, "callgrind.json")
    for src, dst in ((opts.results, stored), (opts.callgrind, stored_cg)):
        if src and os.path.abspath(src) != os.path.abspath(dst):
            shutil.copyfile(src, dst)
    if not os.path.exists(stored):
        print("report: no results (%s): run `make bench` first" % stored, file=sys.stderr)
        return 1
    with open(stored) as f:
        doc = json.load(f)
    if not doc.get("valid", True):
        print("report: the results failed their correctness check; not reporting them",
              file=sys.stderr)
        return 3
    cg = None
    if os.path.exists(stored_cg):
        with open(stored_cg) as f:
            cg = json.load(f)
    res = tables.Results(doc)
    m = doc["machine"]
    rel = "bench"

    charts = []
    for w in res.works:
        for t in res.threads:
            name = "us-per-op-%s-t%d.svg" % (slug(w), t)
            chart_us(res, w, t, os.path.join(data_dir, name))
            charts.append((w, t, name))
    chart_speedup(res, os.path.join(data_dir, "speedup.svg"))
    tiled = tables.tiled_ids(res)
    for wid in tiled:
        chart_gflops(res, os.path.join(data_dir, TILED_CHARTS[wid][0]), wid)

    L = []
    L.append("# Benchmarks")
    L.append("")
    L.append("<!-- Generated by bench/report/report.py from docs/bench/results.json%s. "
             "Do not edit: run `make bench` (or `python3 bench/report/report.py`). -->"
             % (" and docs/bench/callgrind.json" if cg else ""))
    L.append("")
    L.append("What varflow costs per op, how close it gets to the ideal speedup, and "
             "how much memory an op holds while it waits, side by side with the serial "
             "loop, OpenMP tasks, StarPU and oneTBB's flow graph on the same workloads "
             "in one run.")
    L.append("")
    L.append("## How to run")
    L.append("")
    L.append("```sh\n"
             "sudo scripts/install-bench-peers  # once: libstarpu-dev, libomp-dev, "
             "clang, libtbb-dev, OpenBLAS, valgrind\n"
             "make bench                        # full suite (minutes); updates this page\n"
             "make bench-quick                  # reduced sizes, under 2 minutes\n"
             "make bench-w9                     # W9's sweep of task sizes alone (minutes)\n"
             "make bench-callgrind              # instructions per op, stable on a noisy "
             "machine\n"
             "```")
    L.append("")
    L.append(
        "`make bench` configures `bench/` as a CMake project of its own in "
        "`build-bench/` (so the library's tests never depend on OpenMP or StarPU), "
        "builds one binary per engine family, and runs `bench/run.py`, which starts "
        "each engine at 1 worker and at every core in a process of its own, prints "
        "the tables below, writes `build-bench/results-full.json`, and regenerates "
        "this page and its charts from it. A peer whose package is missing is "
        "skipped with a note. Options: `bench/run.py --help`. "
        "`bench/report/merge.py` adds the engines, the pending-ops row and the "
        "wide-op row of a later run to the results this page is made from, and "
        "says so in a note under the machine. Then `bench/w9_run.py` runs W9, the "
        "iterative stencil, over its own sweep of task sizes and writes its "
        "section (W9: iterative stencil, below).")
    L.append("")
    L.append("**What is measured.** Every engine runs the same programs, built from "
             "one definition (`bench/workloads.c`). A cell is the time from the first "
             "push to the return of the wait for all ops, divided by the number of "
             "ops: median of %d timed runs, with min and max (%d round%s over the whole "
             "suite, each run of a cell after %d warm-up%s). Engine "
             "start-up is timed apart. Each op hashes the values of the vars it reads "
             "and writes, runs `work` iterations of a dependent multiply-add loop, "
             "and writes the result: work = 0 measures the engine alone; the loop is "
             "calibrated at start (%.3f ns per iteration here) so ~10 us and ~100 us "
             "mean that on the machine at hand. With work, op counts are capped so a "
             "serial run takes about %d ms; a row whose run takes longer than %s s is not "
             "repeated (its cell says *capped*), and one that runs longer than %s s is "
             "abandoned (*timeout*). **Every run's final state is compared "
             "with the serial run's** (a hash of all values; W6 and W8 factors bit for "
             "bit); "
             "a mismatch fails the suite and no table is reported."
             % (doc["settings"]["reps"], doc["settings"].get("rounds", 1),
                "" if doc["settings"].get("rounds", 1) == 1 else "s",
                doc["settings"]["warmup"],
                "" if doc["settings"].get("rounds", 1) == 1 else
                ": the rounds interleave the engines, so a busy spell of the machine "
                "falls on all of them alike",
                doc["calibration"]["ns_per_iter"], doc["settings"]["budget_ms"],
                doc["settings"].get("max_run_s", "-"),
                doc["settings"].get("row_timeout_s", "-")))
    L.append("")
    L.append("| id | workload | shape |")
    L.append("|---|---|---|")
    for wid, name, shape in WORKLOADS:
        L.append("| %s | %s | %s |" % (wid, name, shape))
    L.append("")
    L.append("**Engines (columns).** `serial`: the plain loop. `vf-naive`, `vf-pooled`, "
             "`vf-perdev`: varflow's engines (`vf_engine_push` per op, `vf_engine_wait_all`). "
             "`vf-bulk64`: `vf-perdev` with bulk execution on (`bulk_size` 64: up to 64 "
             "consecutive pushes fused into one op, rule 13), on W1 and W2 only, the rows "
             "that measure overhead alone. "
             "`omp-gcc` / `omp-clang`: one thread of an OpenMP team creates a task per "
             "op with `depend(in:)` / `depend(inout:)` (GCC libgomp; clang with LLVM "
             "libomp). `spu-eager` / `spu-lws`: StarPU, `starpu_task_insert` with "
             "`STARPU_R` / `STARPU_RW` on registered handles, eager and lws schedulers. "
             "`tbb-flow`: oneTBB's flow graph, a `continue_node` per op and an edge from "
             "each op it must wait for; a flow graph takes the whole DAG before it runs, "
             "so **tbb-flow's time includes deriving the edges from the ops' read/write "
             "sets (varflow's rules: the last writer of each var read or written, and "
             "for a write every read since it; linear time) and building the graph "
             "(node creation and `make_edge`)**, then starting the roots and "
             "`wait_for_all`; only freeing the graph is not timed. "
             "varflow and StarPU have T workers besides the pushing thread; OpenMP's "
             "team of T and TBB's T threads (`global_control` "
             "`max_allowed_parallelism`) include it. OpenMP cannot run W7: `depend` "
             "orders sibling tasks only, and tasks created by two threads are not "
             "siblings. tbb-flow does not run W7 either: its graph is built by one "
             "thread, and W7 measures two threads pushing at once.")
    L.append("")
    L.append("## The machine")
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    for k, label in (("cpu", "CPU"), ("cores", "cores"), ("memory", "memory"),
                     ("os", "OS"), ("kernel", "kernel"), ("gcc", "GCC"),
                     ("clang", "clang"), ("starpu", "StarPU"), ("tbb", "oneTBB")):
        L.append("| %s | %s |" % (label, m.get(k, "") or "-"))
    L.append("| virtual machine | %s |" % ("yes" if m.get("virtualized") else "no"))
    L.append("| load average | %.2f at start, %.2f at end |"
             % (m.get("loadavg_start", 0), m.get("loadavg_end", 0)))
    L.append("| run | %s, %s mode, commit %s |" % (doc["date"], doc["mode"], doc["git"]))
    L.append("")
    for n in doc.get("notes", []):
        L.append("- note: %s" % n)
    if doc.get("notes"):
        L.append("")
    rem = behind(res)
    L.append("## At a glance, and where varflow is behind")
    L.append("")
    L.append(md_table(tables.table_glance(res)))
    L.append("")
    if rem:
        L.append("Rows where a varflow engine's median time is more than 10 % above the "
                 "best peer's (OpenMP, StarPU or TBB) at the same worker count, with the ratio "
                 "and that peer (computed from the tables below):")
        L.append("")
        L.extend(rem)
    else:
        L.append("Nowhere by more than 10 % in this run.")
    L.append("")
    L.append("## Speedup vs op size")
    L.append("")
    L.append("![speedup over serial vs op size](%s/speedup.svg)" % rel)
    L.append("")
    for w in res.works:
        L.append("## %s" % tables.work_title(doc, w))
        L.append("")
        for (cw, t, name) in charts:
            if cw == w:
                L.append("![us per op, %s, T=%d](%s/%s)" % (w, t, rel, name))
                L.append("")
        for t in res.threads:
            L.append(md_table(tables.table_us(res, w, t, "–")))
            L.append("")
        if w == "0":
            L.append(md_table(tables.table_throughput(res, w)))
            L.append("")
        L.append(md_table(tables.table_speedup(res, w)))
        L.append("")
        L.append(md_table(tables.table_vs_peer(res, w)))
        L.append("")
    out = os.path.join(opts.docs, "BENCHMARKS.md")
    for wid in tiled:
        L.extend(tiled_section(res, wid, rel))
    if "W8" not in tiled:
        # Figures of W8 from a run of its own (see tiled_section's
        # run_line), kept until a run of the whole suite has W8.
        L.extend(kept_sections(out, (W8_TITLE,))[1:])
    if any(tables.is_recursive(k) for k in res.rows):
        L.extend(rec_section(res))
    else:
        # Figures of W10 from a run of its own, kept likewise.
        L.extend(kept_sections(out, (W10_TITLE,))[1:])
    L.append("## Start-up")
    L.append("")
    L.append(md_table(tables.table_startup(res)))
    L.append("")
    L.extend(pending_section(doc, res))
    L.extend(wide_section(doc, res))
    if cg:
        L.extend(callgrind_section(cg))
    kept = kept_sections(out)
    if kept and L and not L[-1].strip():
        kept = kept[1:]  # one blank line between sections, not two
    L.extend(kept)
    with open(out, "w") as f:
        f.write("\n".join(L))
    print("report: wrote %s and %d charts in %s" % (out, len(charts) + 1 + len(tiled),
                                                      data_dir))
    return 0


# Sections of BENCHMARKS.md that another runner writes from results this
# report does not have: kept as they are when the page is regenerated.
KEPT_SECTIONS = ("## W9: iterative stencil",  # bench/w9_run.py --docs
                 "## W6 across ranks (MPI)",  # bench/mpi/mpi_run.py --docs
                 "## Device pipeline on a GPU",  # scripts/gpu-check, by hand
                 "## 16 cores (a lent machine)")  # scripts/bench-many-cores
W8_TITLE = "## W8: blocked sparse LU"


def kept_sections(path, titles=KEPT_SECTIONS):
    if not os.path.exists(path):
        return []
    lines = open(path).read().split("\n")
    kept = []
    for title in titles:
        where = sections.span(lines, title)
        if where is None:
            continue
        section = lines[where[0]:where[1]]
        while section and not section[-1].strip():
            section.pop()
        kept.extend([""] + section + [""])
    return kept


if __name__ == "__main__":
    sys.exit(main())
