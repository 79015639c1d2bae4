#!/usr/bin/env python3
"""W6 (tiled Cholesky) across MPI ranks: varflow-mpi against StarPU-MPI.

    bench/mpi/mpi_run.py [--build build-bench] [--quick] [--ranks 1,2,4]
                         [--n N] [--b B] [--rounds R] [--reps N]
                         [--engines vf-mpi,starpu-mpi] [--out FILE] [--docs]

Runs vfbench-mpi-vf (libvarflow-mpi) and vfbench-mpi-starpu (StarPU-MPI)
under mpirun on 1, 2 and 4 ranks (the benchmarks: bench/mpi/mpi_bench.h) with
max(1, cores // ranks) worker threads per rank; more ranks than cores are
started with --oversubscribe. Each round runs every (ranks, engine) pair once,
the engines' order alternating from round to round, so a busy spell of the
machine falls on both alike; each process does one warm-up rep and --reps
timed ones. Prints, per engine and rank count, GFLOP/s (median [min-max] over
the timed reps of all rounds), the messages and bytes moved, the minimum
message count of the program (computed here from the task list, apart from
either runtime), and whether every rep's factor was the serial one bit for
bit. With --docs, writes the section "## W6 across ranks (MPI)" of
docs/BENCHMARKS.md (replacing it when there).

Exit status: 0; 1 when a run failed or a binary is missing; 3 when a factor
differed from the serial one (no table is written to the docs then).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))  # bench/mpi
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path[:0] = [BENCH, os.path.join(BENCH, "report")]
import run  # noqa: E402  (bench/run.py: its machine description and sh)
import sections  # noqa: E402  (bench/report/sections.py)
import tables  # noqa: E402  (bench/report/tables.py)

ENGINES = [
    ("vf-mpi", "vfbench-mpi-vf", "libvarflow-mpi",
     "configure bench/ with MPI (libopenmpi-dev) once varflow::mpi exists"),
    ("starpu-mpi", "vfbench-mpi-starpu", "StarPU-MPI",
     "install libstarpu-dev (starpumpi-1.3) and libopenmpi-dev"),
]
SECTION = "## W6 across ranks (MPI)"
NOTE_2CORES = ("On this %d-core machine only the counts and the correctness are "
               "meaningful past %d ranks: more ranks than cores share the cores "
               "(mpirun --oversubscribe), every rank's communication thread "
               "included, so their times measure the sharing, not the runtime.")


# ---- the minimum message count, from the task list alone ---------------------

def grid(size):
    """p x q = size, p <= q, as square as size allows (ScaLAPACK)."""
    p = max(d for d in range(1, size + 1) if size % d == 0 and d * d <= size)
    return p, size // p


def cholesky_tasks(nt):
    """(tiles read, tile written) of each task, in the right-looking order of
    examples/cholesky_tiles.h: POTRF(k), TRSM(k, i), SYRK(k, i), GEMM(k, i, j)."""
    for k in range(nt):
        yield [], (k, k)
        for i in range(k + 1, nt):
            yield [(k, k)], (i, k)
        for i in range(k + 1, nt):
            yield [(i, k)], (i, i)
            for j in range(k + 1, i):
                yield [(i, k), (j, k)], (i, j)


def min_messages(nt, size):
    """The fewest tile messages any runtime can do with the 2D block-cyclic
    map and owner-computes (each task on the owner of the tile it writes):
    one per (tile version, rank) pair where the rank runs a task naming that
    version and neither produced it nor owns it initially, plus one per tile
    whose final version is away from its owner (none here). Returns
    (messages, write-backs)."""
    p, q = grid(size)

    def owner(t):
        return (t[0] % p) * q + (t[1] % q)

    holders = {(i, j): {owner((i, j))} for i in range(nt) for j in range(i + 1)}
    msgs = 0
    for reads, w in cholesky_tasks(nt):
        runner = owner(w)
        for t in reads + [w]:  # a write reads the tile too
            if runner not in holders[t]:
                msgs += 1
                holders[t].add(runner)
        holders[w] = {runner}
    backs = sum(1 for t, h in holders.items() if owner(t) not in h)
    return msgs + backs, backs


# ---- running ----------------------------------------------------------------------

def mpirun_cmd(binary, ranks, cores, args):
    cmd = ["mpirun", "-np", str(ranks), "--bind-to", "none"]
    if ranks > cores:
        cmd.append("--oversubscribe")
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for var in ("OPENBLAS_NUM_THREADS", "STARPU_SILENT", "STARPU_WORKERS_NOBIND"):
        cmd += ["-x", var]
    return cmd + [binary] + [str(a) for a in args]


def engine_env():
    # VF_* of the caller's shell must not configure the engine; OpenBLAS
    # runs one thread per worker; StarPU's workers are not pinned, as
    # varflow's are not (else each rank would pin its first worker to core 0).
    env = {k: v for k, v in os.environ.items() if not k.startswith("VF_")}
    env.update(OPENBLAS_NUM_THREADS="1", STARPU_SILENT="1", STARPU_WORKERS_NOBIND="1")
    return env


STATS_PAIR = re.compile(r"^\[starpu_comm_stats\]\[(\d+):(\d+)\]\s+([0-9.]+) B")


def run_one(binary, ranks, cores, args, timeout):
    """One mpirun: returns (info, reps, StarPU's shutdown total or None, status,
    stderr tail)."""
    cmd = mpirun_cmd(binary, ranks, cores, args)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=engine_env(),
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, [], None, "timeout after %d s" % timeout, ""
    info, reps = None, []
    for line in p.stdout.splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if rec["type"] == "info":
            info = rec
        elif rec["type"] == "rep":
            reps.append(rec)
    # StarPU-MPI prints each rank's bytes per destination at shutdown (as
    # floats) when STARPU_COMM_STATS=1; their sum is the run's total.
    pairs = [float(m.group(3)) for m in map(STATS_PAIR.match, p.stderr.splitlines()) if m]
    shutdown_total = sum(pairs) if pairs else None
    status = {0: "ok", 3: "mismatch"}.get(p.returncode, "failed (exit %d)" % p.returncode)
    if status == "ok" and (info is None or not reps):
        status = "no records"
    tail = "\n".join(l for l in p.stderr.splitlines() if not STATS_PAIR.match(l)
                     and "starpu_comm_stats" not in l and l.strip())[-2000:]
    return info, reps, shutdown_total, status, tail


def machine_info():
    """The suite's machine description (bench/run.py), with the MPI and
    StarPU-MPI versions in place of the shared-memory peers'."""
    info = run.machine_info()
    for key in ("gcc", "clang", "tbb"):
        info.pop(key, None)
    info["mpi"] = run.sh("mpirun --version 2>/dev/null | head -1")
    info["starpu"] = run.sh("pkg-config --modversion starpumpi-1.3")
    return info


# ---- summary -----------------------------------------------------------------------

def spread(values, fmt):
    return "%s [%s-%s]" % (fmt % statistics.median(values), fmt % min(values),
                           fmt % max(values))


def one_or_range(values, fmt="%d"):
    lo, hi = min(values), max(values)
    return fmt % lo if lo == hi else (fmt + "-" + fmt) % (lo, hi)


def summarize(cell):
    """The row of one (engine, ranks) from its runs."""
    reps = [r for r in cell["reps"] if not r["warmup"]]
    allreps = cell["reps"]
    row = {"engine": cell["engine"], "ranks": cell["ranks"], "workers": cell["workers"],
           "runs": cell["runs"], "status": cell["status"], "timed_reps": len(reps)}
    if not reps:
        return row
    mib = 1024.0 * 1024.0
    row.update(
        gflops=[r["gflops"] for r in reps],
        seconds=[r["seconds"] for r in reps],
        tile_msgs=sorted({r["tile_msgs"] for r in reps}),
        other_msgs=sorted({r["msgs"] - r["tile_msgs"] for r in reps}),
        all_mib=sorted({r["bytes"] / mib for r in reps}),
        # Bytes sent beyond the tiles themselves: headers in the tiles'
        # messages and messages of their own (envelopes).
        extra_kib=sorted({(r["bytes"] - r["tile_msgs"] * r["b"] * r["b"] * 8) / 1024.0
                          for r in reps}),
        rt_msgs=sorted({r["rt_msgs"] for r in reps}),
        rt_mib=sorted({r["rt_bytes"] / mib if r["rt_bytes"] >= 0 else -1 for r in reps}),
        identical=all(r["tiles_differing"] == 0 for r in allreps),
        max_abs_diff=max((r["max_abs_diff"] for r in allreps
                          if r["max_abs_diff"] is not None), default=None),
        nan=any(r["max_abs_diff"] is None for r in allreps),
    )
    # StarPU's shutdown print against its retrieved per-rep bytes (all reps,
    # warm-ups too, summed over the runs): equal up to float rounding.
    if cell["shutdown_totals"]:
        printed = sum(cell["shutdown_totals"])
        retrieved = sum(r["rt_bytes"] for r in allreps)
        row["shutdown_check"] = abs(printed - retrieved) <= 1e-6 * max(retrieved, 1) + 64
    return row


def table(rows, minimum):
    header = ["engine", "ranks", "workers/rank", "GFLOP/s median [min-max]",
              "tile messages", "minimum", "other messages", "MiB moved",
              "KiB beyond the tiles", "runtime's own count", "bit-identical"]
    out = []
    for r in rows:
        if "gflops" not in r:
            out.append([r["engine"], str(r["ranks"]), str(r["workers"]), r["status"]]
                       + ["-"] * (len(header) - 4))
            continue
        own = []
        if r["rt_msgs"] != [-1]:
            own.append("%s msgs" % one_or_range(r["rt_msgs"]))
        if r["rt_mib"] != [-1]:
            own.append("%s MiB" % one_or_range(r["rt_mib"], "%.2f"))
        ident = "yes" if r["identical"] else "NO (max diff %s)" % (
            "NaN" if r["nan"] else "%.3g" % r["max_abs_diff"])
        out.append([r["engine"], str(r["ranks"]), str(r["workers"]),
                    spread(r["gflops"], "%.2f"), one_or_range(r["tile_msgs"]),
                    str(minimum[r["ranks"]][0]), one_or_range(r["other_msgs"]),
                    one_or_range(r["all_mib"], "%.2f"), one_or_range(r["extra_kib"], "%.1f"),
                    ", ".join(own) or "-", ident])
    return header, out


# ---- the docs section ---------------------------------------------------------------

def docs_section(doc, header, trows):
    s = doc["settings"]
    m = doc["machine"]
    L = [SECTION, ""]
    L.append("<!-- Written by bench/mpi/mpi_run.py --docs (`make bench-mpi`), which "
             "replaces this section and nothing else. The rest of the page comes "
             "from bench/report/report.py, which keeps this section as it is when it "
             "rewrites the page (`make bench`). -->")
    L.append("")
    L.append(
        "W6 (n = %d, b = %d: %d tiles, %d tasks) as one program run on every MPI "
        "rank, StarPU-MPI's model: each tile has an owner rank on a 2D block-cyclic "
        "grid (rank (i %% p) * q + (j %% q), p x q = ranks, p <= q as square as the "
        "count allows), every rank pushes every task in the order of "
        "`examples/cholesky_tiles.h`, each task runs on the owner of the tile it "
        "writes, and the runtime moves the tiles a task reads to the rank that runs "
        "it. `vf-mpi`: libvarflow-mpi (`include/varflow_mpi.h`: `vf_mpi_vars_create` "
        "with `vf_mpi_owner_2d`, `vf_mpi_push` per task, `vf_mpi_wait_all`) on a "
        "per-device engine. `starpu-mpi`: StarPU-MPI %s (`starpu_mpi_data_register` "
        "on the same map, `starpu_mpi_task_insert` with `STARPU_R` / `STARPU_RW`, "
        "lws scheduler, MPI cache on). Both use the same tile kernels (%s) and "
        "check every rep: each rank compares the tiles it owns with a serial "
        "factor it computed alone, bit for bit."
        % (s["n"], s["b"], doc["tiles"], doc["tasks"], m.get("starpu") or "?",
           doc.get("kernels") or "?"))
    L.append("")
    L.append(
        "A rep is timed from a barrier before the first push to the return of the "
        "runtime's wait for all on the slowest rank; registering the tiles is not "
        "timed. Workers per rank = max(1, cores // ranks) (%s here), besides each "
        "rank's pushing thread and its runtime's communication thread; ranks are "
        "not pinned (`--bind-to none`, StarPU with `STARPU_WORKERS_NOBIND=1`, as "
        "varflow pins nothing). GFLOP/s: n^3 / 3 over the time, median [min-max] of "
        "%d timed reps (%d rounds of %d, each process after 1 warm-up rep; the "
        "rounds alternate the engines)."
        % (", ".join("%d at %d rank%s" % (w, r, "" if r == 1 else "s")
                     for r, w in doc["workers"]), s["rounds"] * s["reps"],
           s["rounds"], s["reps"]))
    L.append("")
    L.append(
        "**Messages** are counted the same way for both runtimes, through MPI's "
        "profiling interface: the benchmark defines the `MPI_*send` calls, counts "
        "and forwards them to `PMPI_*` (`bench/mpi/mpi_bench.c`), so every "
        "point-to-point message of the timed part is seen, whichever library "
        "sends it. *tile "
        "messages* carry a tile (%d KiB, with whatever header the runtime puts in "
        "the same message); *other messages* are the rest (StarPU-MPI sends an "
        "envelope of its own before each tile); *MiB moved* is every message's "
        "payload, and *KiB beyond the tiles* the part of it that is not tile data "
        "(headers and envelopes). *minimum* is computed by `bench/mpi/mpi_run.py` from "
        "the task list "
        "alone: one message per (tile version, rank) where a rank runs a task naming "
        "that version and neither wrote it nor owns it initially, plus one per tile "
        "whose final version is away from its owner (none: each tile is written "
        "only by its owner). *runtime's own count*: `vf_mpi_stats` (sends, bytes) "
        "summed over ranks; StarPU-MPI 1.3 counts bytes only "
        "(`STARPU_COMM_STATS=1`, read with `starpu_mpi_comm_amounts_retrieve` "
        "before and after each rep)."
        % (s["b"] * s["b"] * 8 // 1024))
    L.append("")
    L.append("**%s**" % (NOTE_2CORES % (m["cores"], m["cores"])))
    L.append("")
    command = "`%s`" % doc["command"]
    if doc["command"] == "python3 bench/mpi/mpi_run.py --build build-bench --docs":
        command = "`make bench-mpi` (%s)" % command
    L.append("Run: %s, commit %s; %s; %s cores (%s); %s; load average %.2f at start, "
             "%.2f at end. Command: %s."
             % (doc["date"], doc["git"], m.get("cpu") or "?", m["cores"],
                "virtual machine" if m.get("virtualized") else "bare metal or unknown",
                m.get("mpi") or "?", m["loadavg_start"], m["loadavg_end"], command))
    L.append("")
    L.append(tables.render_markdown("W6 across ranks, n = %d, b = %d" % (s["n"], s["b"]),
                                    header, trows))
    L.append("")
    for n in doc.get("notes", []):
        L.append("- %s" % n)
    if doc.get("notes"):
        L.append("")
    return L


def write_docs(lines):
    return sections.put(os.path.join(ROOT, "docs", "BENCHMARKS.md"), SECTION, lines)


# ---- main -------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--quick", action="store_true",
                    help="n = 1024, 1 round of 2 reps (a smoke test, not a report)")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--n", type=int, help="matrix order (default 2048, W6's)")
    ap.add_argument("--b", type=int, help="tile order (default 128)")
    ap.add_argument("--rounds", type=int, help="default 5 (quick: 1)")
    ap.add_argument("--reps", type=int, help="timed reps per process (default 3; quick: 2)")
    ap.add_argument("--engines", default=",".join(e[0] for e in ENGINES))
    ap.add_argument("--timeout", type=int, default=600, help="seconds per mpirun")
    ap.add_argument("--out", help="results JSON (default BUILD/mpi-results.json)")
    ap.add_argument("--docs", action="store_true",
                    help="then write the section '%s' of docs/BENCHMARKS.md" % SECTION)
    opts = ap.parse_args()
    n = opts.n or (1024 if opts.quick else 2048)
    b = opts.b or 128
    rounds = opts.rounds or (1 if opts.quick else 5)
    reps = opts.reps or (2 if opts.quick else 3)
    ranks_list = [int(x) for x in opts.ranks.split(",")]
    cores = os.cpu_count() or 1
    if n % b:
        ap.error("n must be a multiple of b")
    if not shutil.which("mpirun"):
        print("mpi_run: mpirun not found (install openmpi-bin)", file=sys.stderr)
        return 1

    build = os.path.abspath(opts.build)
    wanted = opts.engines.split(",")
    engines, notes = [], []
    for name, binary, what, hint in ENGINES:
        if name not in wanted:
            continue
        path = os.path.join(build, binary)
        if os.access(path, os.X_OK):
            engines.append((name, path))
        else:
            notes.append("%s (%s) skipped: %s not built; %s" % (name, what, binary, hint))
            print("mpi_run: " + notes[-1], file=sys.stderr)
    if not engines:
        return 1

    nt = n // b
    minimum = {r: min_messages(nt, r) for r in ranks_list}
    print("minimum tile messages (2D block-cyclic, owner computes, from the task list):")
    for r in ranks_list:
        p, q = grid(r)
        print("  %d rank%s (grid %dx%d): %d messages (%d of them write-backs), %.2f MiB"
              % (r, "" if r == 1 else "s", p, q, minimum[r][0], minimum[r][1],
                 minimum[r][0] * b * b * 8 / 1048576.0))
    print("workers per rank = max(1, cores // ranks), cores = %d%s" % (
        cores, "; ranks > cores run with --oversubscribe" if max(ranks_list) > cores else ""))

    machine = machine_info()
    cells = {}
    status = 0
    order = [(r, e) for r in ranks_list for e in engines]
    for rnd in range(rounds):
        for ranks in ranks_list:
            pair = engines if rnd % 2 == 0 else engines[::-1]
            for name, path in pair:
                workers = max(1, cores // ranks)
                key = (name, ranks)
                cell = cells.setdefault(key, {"engine": name, "ranks": ranks,
                                              "workers": workers, "reps": [],
                                              "shutdown_totals": [], "runs": 0,
                                              "status": "ok", "info": None})
                sys.stderr.write("[round %d/%d] %s on %d rank%s, %d worker%s each\n"
                                 % (rnd + 1, rounds, name, ranks, "" if ranks == 1 else "s",
                                    workers, "" if workers == 1 else "s"))
                info, recs, total, st, tail = run_one(path, ranks, cores,
                                                      [n, b, reps, workers, 1], opts.timeout)
                cell["runs"] += 1
                cell["reps"] += recs
                cell["info"] = cell["info"] or info
                if total is not None:
                    cell["shutdown_totals"].append(total)
                if st != "ok":
                    cell["status"] = st
                    status = 3 if st == "mismatch" else max(status, 1)
                    sys.stderr.write("mpi_run: %s on %d ranks: %s\n%s\n"
                                     % (name, ranks, st, tail))
    machine["loadavg_end"] = os.getloadavg()[0]
    rows = [summarize(cells[(e[0], r)]) for (r, e) in order if (e[0], r) in cells]
    header, trows = table(rows, minimum)
    title = "W6 across ranks, n = %d, b = %d, GFLOP/s median [min-max] of %d reps" % (
        n, b, rounds * reps)
    print(tables.render_text(title, header, trows))
    for r in rows:
        if "shutdown_check" in r:
            print("%s, %d rank%s: StarPU's shutdown print (STARPU_COMM_STATS) %s the "
                  "retrieved bytes" % (r["engine"], r["ranks"], "" if r["ranks"] == 1 else "s",
                                       "agrees with" if r["shutdown_check"] else
                                       "DISAGREES with"))
    print(NOTE_2CORES % (cores, cores))
    for note in notes:
        print("note: " + note)

    info = next((c["info"] for c in cells.values() if c["info"]), {}) or {}
    cmd = "python3 bench/mpi/mpi_run.py " + " ".join(sys.argv[1:])
    doc = {
        "schema": "varflow-mpi-bench/1",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git": subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip(),
        "command": cmd.strip(),
        "machine": machine,
        "settings": {"n": n, "b": b, "rounds": rounds, "reps": reps, "ranks": ranks_list},
        "tiles": info.get("tiles"), "tasks": info.get("tasks"),
        "kernels": info.get("kernels"),
        "workers": [(r, max(1, cores // r)) for r in ranks_list],
        "minimum": {str(r): v[0] for r, v in minimum.items()},
        "runtimes": {k[0]: c["info"]["runtime"] for k, c in cells.items() if c["info"]},
        "rows": rows, "notes": notes,
        "valid": status != 3,
    }
    out = opts.out or os.path.join(build, "mpi-results.json")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("\nresults: %s" % out)
    if opts.docs:
        if status == 3:
            print("mpi_run: a factor differed from the serial one; docs not written",
                  file=sys.stderr)
        else:
            print("wrote %s" % write_docs(docs_section(doc, header, trows)))
            # Kept beside the suite's results.json, so the figures in the
            # page have their raw data in the tree.
            kept = os.path.join(ROOT, "docs", "bench", "mpi-results.json")
            shutil.copyfile(out, kept)
            print("wrote %s" % kept)
    return status


if __name__ == "__main__":
    sys.exit(main())
