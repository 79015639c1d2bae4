"""Statistics and tables of benchmark results, shared by bench/run.py (the
console tables of `make bench`) and bench/report/report.py
(docs/BENCHMARKS.md).

A results document (the JSON that run.py writes) holds one record per
(engine, threads, workload row, work size) with the raw run times; every
figure shown anywhere is computed here from those times, so the console and
the docs always agree.
"""

import statistics

# Column order of the tables: the floor, varflow's engines, then the peers.
ENGINE_ORDER = ["serial", "vf-naive", "vf-pooled", "vf-perdev", "vf-bulk64", "vf-pooled-opr",
                "omp-gcc", "omp-clang", "spu-eager", "spu-lws", "tbb-flow", "tbb-tg"]
PEER_FAMILIES = ("openmp", "starpu", "tbb")

# The pending-ops row's targets: bytes a held op may cost, and the peak
# resident set of holding PENDING_TARGET_OPS of them.
PENDING_TARGET_BASE = 128
PENDING_TARGET_PER_DEP = 16
PENDING_TARGET_OPS = 10000000
PENDING_TARGET_PEAK = 2 << 30

# The wide-op row's target: one op over 2^20 distinct vars (varflow's
# limit), pushed and run, in under this many seconds (issue 17).
WIDE_TARGET_S = 1.0
WIDE_TARGET_VARS = 1 << 20

ROW_ORDER = ["W1", "W2", "W3-K16", "W3-K64", "W4-G100", "W4-G300", "W5", "W7",
             "W6-b32", "W6-b64", "W6-b128", "W8-b16", "W8-b64",
             "W10-fib25", "W10-fib30", "W10-qsort"]

# The rows that run tile or block kernels (work label "tiles"), reported in
# GFLOP/s, by workload id, with their table titles.
TILED = {"W6": "W6 tiled Cholesky", "W8": "W8 blocked sparse LU"}


def is_tiled(key):
    return key[:2] in TILED and not is_recursive(key)


def is_recursive(key):
    """W10: a recursion, run once per process (work label "rec"), reported
    in seconds per run and tasks per second."""
    return key.startswith("W10")


def in_table(key, work):
    """Whether a row belongs in a table of a work label: the tile rows in
    "tiles", W10 in "rec", the others in the work sizes."""
    if work == "tiles":
        return is_tiled(key)
    if work == "rec":
        return is_recursive(key)
    return not is_tiled(key) and not is_recursive(key)


def tiled_ids(res):
    """The tiled workload ids a results document has, in order."""
    return [i for i in TILED if any(k[:2] == i for k in res.rows)]


def tiles_title(res):
    """What the "tiles" tables cover: "W6 tile kernels", "W6 and W8 ..."."""
    return "%s tile kernels" % " and ".join(tiled_ids(res) or ["W6"])


def engine_rank(name):
    return ENGINE_ORDER.index(name) if name in ENGINE_ORDER else len(ENGINE_ORDER)


def row_rank(key):
    return ROW_ORDER.index(key) if key in ROW_ORDER else len(ROW_ORDER)


def enrich(rec):
    """Add the derived figures to a driver result record (in place)."""
    times = rec.get("times_s") or []
    ops = rec.get("ops") or 1
    if times:
        us = [t * 1e6 / ops for t in times]
        rec["us_per_op"] = {"median": statistics.median(us), "min": min(us),
                            "max": max(us)}
        rec["ops_per_s"] = ops / statistics.median(times)
        if rec.get("flops"):
            rec.pop("gflops", None)
            g = [rec["flops"] / t * 1e-9 for t in times]
            rec["gflops"] = {"median": statistics.median(g), "min": min(g),
                             "max": max(g)}
    return rec


class Results:
    """Index of a results document's records."""

    def __init__(self, doc):
        self.doc = doc
        self.recs = {}
        for r in doc.get("results", []):
            if "us_per_op" not in r:
                enrich(r)
            self.recs[(r["engine"], r["threads"], r["key"], r["work_label"])] = r
        self.skips = {(s["engine"], s["threads"], s["key"], s["work_label"]): s["reason"]
                      for s in doc.get("skips", [])}
        self.timeouts = {(s["engine"], s["threads"], s["key"], s["work_label"]): s
                         for s in doc.get("timeouts", [])}
        self.families = {e["engine"]: e["family"] for e in doc.get("engines", [])}
        for r in doc.get("results", []):
            self.families.setdefault(r["engine"], r.get("family", ""))
        self.engines = sorted(self.families, key=engine_rank)
        self.threads = sorted({r["threads"] for r in doc.get("results", [])})
        self.tmax = max(self.threads) if self.threads else 1
        self.works = [w["label"] for w in doc.get("work_sizes", [])]
        if not self.works:
            self.works = sorted({r["work_label"] for r in doc.get("results", [])
                                 if r["work_label"] != "tiles"})
        self.rows = sorted({r["key"] for r in doc.get("results", [])}, key=row_rank)

    def get(self, engine, threads, key, work):
        return self.recs.get((engine, threads, key, work))

    def columns(self, threads):
        """(engine, threads) columns of a table at a worker count: engines
        whose worker count means nothing (serial, naive) appear at T=1."""
        cols = []
        for e in self.engines:
            if any(k[0] == e and k[1] == threads for k in self.recs):
                cols.append((e, threads))
            elif threads != 1 and e == "serial":
                cols.append((e, 1))
        return cols

    def all_columns(self):
        cols = []
        for t in self.threads:
            for c in self.columns(t):
                if c not in cols and c[1] == t:
                    cols.append(c)
        return sorted(cols, key=lambda c: (engine_rank(c[0]), c[1]))

    def row_label(self, key):
        for r in self.doc.get("results", []):
            if r["key"] == key:
                return "%s %s" % (r["id"], r["name"])
        return key

    def row_size(self, key, work):
        for (e, t, k, w), r in self.recs.items():
            if k == key and w == work:
                return r["size"]
        return ""

    def is_peer(self, engine):
        return self.families.get(engine) in PEER_FAMILIES

    def serial(self, key, work):
        return self.get("serial", 1, key, work)

    def speedup(self, engine, threads, key, work):
        s, r = self.serial(key, work), self.get(engine, threads, key, work)
        if not s or not r or "us_per_op" not in r or "us_per_op" not in s:
            return None
        return s["us_per_op"]["median"] / r["us_per_op"]["median"]

    def best_peer(self, threads, key, work):
        """(engine, median us/op) of the fastest peer at a worker count."""
        best = None
        for e in self.engines:
            if not self.is_peer(e):
                continue
            r = self.get(e, threads, key, work)
            if r and "us_per_op" in r:
                m = r["us_per_op"]["median"]
                if best is None or m < best[1]:
                    best = (e, m)
        return best

    def note(self, engine, threads, key, work):
        """Why a cell is empty."""
        reason = self.skips.get((engine, threads, key, work))
        if reason:
            return "n/a"
        if (engine, threads, key, work) in self.timeouts:
            return "timeout"
        return "-"


def fmt_num(x):
    if x is None:
        return "-"
    if x >= 1000:
        return "%.0f" % x
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    if x >= 1:
        return "%.2f" % x
    return "%.3f" % x


def fmt_range(stat, dash="-", capped=False):
    if capped:
        return "%s (capped)" % fmt_num(stat["median"])
    return "%s [%s%s%s]" % (fmt_num(stat["median"]), fmt_num(stat["min"]), dash,
                            fmt_num(stat["max"]))


def fmt_cell(rec, field, dash="-"):
    return fmt_range(rec[field], dash, rec.get("capped", False))


def fixed_title(res, work):
    """The title part of a table of a work label."""
    if work == "tiles":
        return tiles_title(res)
    if work == "rec":
        return REC_TITLE
    return work_title(res.doc, work)


REC_TITLE = "W10 recursive (a task per call, each waiting for its two children)"


def work_title(doc, label):
    for w in doc.get("work_sizes", []):
        if w["label"] == label:
            if w.get("iters", 0) == 0:
                return "work = 0 (empty ops: the engine alone)"
            return "work ~ %s per op (%d loop iterations, calibrated)" % (
                label.replace("us", " us"), w["iters"])
    return "work = %s" % label


# ---- table builders: each returns (title, header, rows, notes) ------------------

def table_us(res, work, threads, dash="-"):
    cols = res.columns(threads)
    header = ["workload", "size"] + [c[0] + ("" if c[1] == threads else " (T=%d)" % c[1])
                                      for c in cols]
    rows = []
    for key in res.rows:
        if not in_table(key, work):
            continue
        line = [res.row_label(key), res.row_size(key, work)]
        for e, t in cols:
            r = res.get(e, t, key, work)
            line.append(fmt_cell(r, "us_per_op", dash) if r and "us_per_op" in r
                        else res.note(e, t, key, work))
        rows.append(line)
    title = "%s - median us/op [min%smax], T = %d worker%s" % (
        work_title(res.doc, work), dash, threads, "" if threads == 1 else "s")
    return title, header, rows


def table_throughput(res, work):
    """Millions of ops per second (from the median), every engine at every
    worker count: the other unit WORKLOADS.md asks for."""
    cols = res.all_columns()
    header = ["workload"] + ["%s T=%d" % c for c in cols]
    rows = []
    for key in res.rows:
        if not in_table(key, work):
            continue
        line = [res.row_label(key)]
        for e, t in cols:
            r = res.get(e, t, key, work)
            line.append("%.3g" % (r["ops_per_s"] / 1e6) if r and "ops_per_s" in r
                        else res.note(e, t, key, work))
        rows.append(line)
    title = "throughput, millions of ops per second (median run), %s" % (
        work_title(res.doc, work))
    return title, header, rows


def table_speedup(res, work):
    t = res.tmax
    cols = [c for c in res.columns(t) if c[1] == t]
    header = ["workload"] + [c[0] for c in cols]
    rows = []
    for key in res.rows:
        if not in_table(key, work):
            continue
        line = [res.row_label(key)]
        for e, t in cols:
            s = res.speedup(e, t, key, work)
            line.append("%.2f" % s if s is not None else res.note(e, t, key, work))
        rows.append(line)
    title = ("speedup over the serial loop at T = %d workers (serial median / engine "
             "median; ideal %d), %s" % (t, t, fixed_title(res, work)))
    return title, header, rows


def table_vs_peer(res, work):
    cols = [c for c in res.all_columns() if res.families.get(c[0]) == "varflow"]
    if work == "rec":
        cols = rec_columns(res, cols)
    header = ["workload"] + ["%s T=%d" % c for c in cols]
    rows = []
    for key in res.rows:
        if not in_table(key, work):
            continue
        line = [res.row_label(key)]
        for e, t in cols:
            r = res.get(e, t, key, work)
            best = res.best_peer(t, key, work)
            if not r or "us_per_op" not in r or not best:
                line.append(res.note(e, t, key, work) if not r else "no peer")
                continue
            line.append("%.2fx %s" % (r["us_per_op"]["median"] / best[1], best[0]))
        rows.append(line)
    title = ("varflow / best peer at the same T (median time ratio; < 1: varflow "
             "faster), %s" % fixed_title(res, work))
    return title, header, rows


def table_gflops(res, threads, dash="-", wid="W6"):
    cols = res.columns(threads)
    header = ["workload", "size", "residual"] + [
        c[0] + ("" if c[1] == threads else " (T=%d)" % c[1]) for c in cols]
    rows = []
    for key in res.rows:
        if key[:2] != wid:
            continue
        resid = ""
        for (e, t, k, w), r in res.recs.items():
            if k == key and "residual" in r:
                resid = "%.1e" % r["residual"]
        line = [res.row_label(key), res.row_size(key, "tiles"), resid]
        for e, t in cols:
            r = res.get(e, t, key, "tiles")
            line.append(fmt_cell(r, "gflops", dash) if r and "gflops" in r
                        else res.note(e, t, key, "tiles"))
        rows.append(line)
    title = "%s - GFLOP/s, median [min%smax], T = %d worker%s" % (
        TILED[wid], dash, threads, "" if threads == 1 else "s")
    return title, header, rows


def table_seconds(res, threads, dash="-", wid="W8"):
    """Seconds per run of a tiled workload (WORKLOADS.md asks W8 for
    seconds as well as GFLOP/s)."""
    cols = res.columns(threads)
    header = ["workload", "size"] + [
        c[0] + ("" if c[1] == threads else " (T=%d)" % c[1]) for c in cols]
    rows = []
    for key in res.rows:
        if key[:2] != wid:
            continue
        line = [res.row_label(key), res.row_size(key, "tiles")]
        for e, t in cols:
            r = res.get(e, t, key, "tiles")
            if r and r.get("times_s"):
                ts = r["times_s"]
                stat = {"median": statistics.median(ts), "min": min(ts), "max": max(ts)}
                line.append(fmt_range(stat, dash, r.get("capped", False)))
            else:
                line.append(res.note(e, t, key, "tiles"))
        rows.append(line)
    title = "%s - seconds per run, median [min%smax], T = %d worker%s" % (
        TILED[wid], dash, threads, "" if threads == 1 else "s")
    return title, header, rows


def rec_columns(res, cols):
    """The columns that ran W10 (vf-bulk64 and tbb-flow, say, do not)."""
    return [(e, t) for e, t in cols
            if any(res.get(e, t, k, "rec") for k in res.rows if is_recursive(k))]


def table_rec_seconds(res, threads, dash="-"):
    """W10: seconds per run (the root's push and wait), every engine at a
    worker count."""
    cols = rec_columns(res, res.columns(threads))
    header = ["workload", "size"] + [
        c[0] + ("" if c[1] == threads else " (T=%d)" % c[1]) for c in cols]
    rows = []
    for key in res.rows:
        if not is_recursive(key):
            continue
        line = [res.row_label(key), res.row_size(key, "rec")]
        for e, t in cols:
            r = res.get(e, t, key, "rec")
            if r and r.get("times_s"):
                ts = r["times_s"]
                stat = {"median": statistics.median(ts), "min": min(ts), "max": max(ts)}
                line.append(fmt_range(stat, dash, r.get("capped", False)))
            else:
                line.append(res.note(e, t, key, "rec"))
        rows.append(line)
    title = "%s - seconds per run, median [min%smax], T = %d worker%s" % (
        REC_TITLE, dash, threads, "" if threads == 1 else "s")
    return title, header, rows


def table_rec_rate(res):
    """W10: millions of tasks (calls) per second, every engine at every
    worker count."""
    cols = rec_columns(res, res.all_columns())
    header = ["workload"] + ["%s T=%d" % c for c in cols]
    rows = []
    for key in res.rows:
        if not is_recursive(key):
            continue
        line = [res.row_label(key)]
        for e, t in cols:
            r = res.get(e, t, key, "rec")
            line.append("%.3g" % (r["ops_per_s"] / 1e6) if r and "ops_per_s" in r
                        else res.note(e, t, key, "rec"))
        rows.append(line)
    return ("%s - millions of tasks per second (median run)" % REC_TITLE, header, rows)


def table_startup(res):
    header = ["engine", "T", "start-up ms", "shutdown ms", "what ran"]
    rows = []
    for e in sorted(res.doc.get("engines", []),
                    key=lambda e: (engine_rank(e["engine"]), e["threads"])):
        if "startup_s" not in e:
            rows.append([e["engine"], str(e["threads"]), e.get("status", "-"), "", ""])
            continue
        rows.append([e["engine"], str(e["threads"]), "%.3f" % (e["startup_s"] * 1e3),
                     "%.3f" % (e.get("shutdown_s", 0) * 1e3), e.get("version", "")])
    return "engine start-up and shutdown (not in the timings above)", header, rows


def table_pending(res):
    """The pending-ops row (bench/pending.h): memory per op held behind a
    gate, and the peak resident set, one line per engine."""
    recs = sorted(res.doc.get("pending", []), key=lambda r: engine_rank(r["engine"]))
    header = ["engine", "ops held", "deps/op", "bytes/pending op", "RSS before MiB",
              "RSS after MiB", "peak RSS MiB", "push us/op", "drain us/op",
              "within targets"]
    mib = 1024.0 * 1024.0
    rows = []
    for r in recs:
        budget = PENDING_TARGET_BASE + PENDING_TARGET_PER_DEP * r["deps_per_op"]
        verdict = ["bytes/op %s %d" % ("<=" if r["bytes_per_op"] <= budget else ">", budget)]
        if r["n"] >= PENDING_TARGET_OPS:
            verdict.append("peak %s 2 GiB" % ("<" if r["peak_rss"] < PENDING_TARGET_PEAK
                                              else ">="))
        rows.append([r["engine"], "{:,}".format(r["n"]), str(r["deps_per_op"]),
                     "%.0f" % r["bytes_per_op"], "%.0f" % (r["rss_before"] / mib),
                     "%.0f" % (r["rss_after"] / mib), "%.0f" % (r["peak_rss"] / mib),
                     "%.3f" % (r["push_s"] * 1e6 / r["n"]),
                     "%.3f" % (r["drain_s"] * 1e6 / r["n"]), ", ".join(verdict)])
    title = ("memory per pending op: ops held behind a gate, each waiting on 2 "
             "dependencies (targets: <= %d + %d bytes per dependency; %s ops under "
             "2 GiB peak RSS)" % (PENDING_TARGET_BASE, PENDING_TARGET_PER_DEP,
                                  "{:,}".format(PENDING_TARGET_OPS)))
    return title, header, rows


def table_wide(res):
    """The wide-op row (bench/adapters/adapter.h): one op that writes n
    distinct vars, named in a shuffled order, pushed and run; one line per
    engine."""
    recs = sorted(res.doc.get("wide", []), key=lambda r: engine_rank(r["engine"]))
    header = ["engine", "vars", "runs", "push + run s (median)", "min", "max",
              "push s", "run s", "vars made s", "vars deleted s", "within target"]
    rows = []
    for r in recs:
        t = sorted(r["times_s"])
        med = statistics.median(t)
        verdict = "%s %.0f s" % ("<" if med < WIDE_TARGET_S else ">=", WIDE_TARGET_S)
        if r["n"] < WIDE_TARGET_VARS:
            verdict = "(fewer vars than the target's %s)" % "{:,}".format(WIDE_TARGET_VARS)
        rows.append([r["engine"], "{:,}".format(r["n"]), str(len(t)), "%.3f" % med,
                     "%.3f" % t[0], "%.3f" % t[-1],
                     "%.3f" % statistics.median(r["push_s"]),
                     "%.3f" % statistics.median(r["run_s"]),
                     "%.3f" % r["new_s"], "%.3f" % r["delete_s"], verdict])
    title = ("one op over many vars: an op that writes %s distinct vars (named "
             "in a shuffled order), pushed and run (target: under %.0f s)"
             % ("{:,}".format(recs[0]["n"]) if recs else "n", WIDE_TARGET_S))
    return title, header, rows


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    if not xs:
        return None
    import math
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def table_glance(res):
    """One line per engine: geometric means over the rows every engine ran
    (W1-W5; W7 is left out since OpenMP and tbb-flow do not run it)."""
    rows_common = [k for k in res.rows if in_table(k, "0") and k != "W7"]
    works = [w for w in res.works]
    tmax = res.tmax
    header = ["engine"]
    spec = []
    if works:
        w0 = works[0]
        for t in res.threads:
            header.append("us/op %s T=%d" % ("empty" if w0 == "0" else w0, t))
            spec.append(("us", w0, t))
    for w in works[1:]:
        header.append("speedup %s T=%d" % (w, tmax))
        spec.append(("speedup", w, tmax))
    for wid in tiled_ids(res):
        last = [k for k in res.rows if k[:2] == wid][-1]
        header.append("GFLOP/s %s T=%d" % (last.replace("-", " "), tmax))
        spec.append(("gflops", last, tmax))
    rows = []
    for e in res.engines:
        line = [e]
        for kind, w, t in spec:
            tt = 1 if e in ("serial", "vf-naive") else t
            if kind == "us":
                if tt != t:
                    line.append("(T=1)" if t != 1 else "-")
                    continue
                vals = [res.get(e, tt, k, w) for k in rows_common]
                g = _geomean([r["us_per_op"]["median"] for r in vals if r and "us_per_op" in r])
                line.append(fmt_num(g) if g else "-")
            elif kind == "speedup":
                g = _geomean([res.speedup(e, tt, k, w) for k in rows_common])
                line.append("%.2f" % g if g else "-")
            else:
                r = res.get(e, tt, w, "tiles")
                line.append(fmt_num(r["gflops"]["median"]) if r and "gflops" in r else "-")
        rows.append(line)
    return ("at a glance: geometric means over W1-W5 (the rows every engine runs)",
            header, rows)


def all_tables(res, dash="-"):
    """Every table in print order."""
    out = []
    if not res.recs:
        return (([table_pending(res)] if res.doc.get("pending") else []) +
                ([table_wide(res)] if res.doc.get("wide") else []))
    works = res.works if any(in_table(k, "0") for k in res.rows) else []
    for w in works:
        for t in res.threads:
            out.append(table_us(res, w, t, dash))
        if w == "0":
            out.append(table_throughput(res, w))
        out.append(table_speedup(res, w))
        out.append(table_vs_peer(res, w))
    if tiled_ids(res):
        for wid in tiled_ids(res):
            for t in res.threads:
                out.append(table_gflops(res, t, dash, wid))
            if wid == "W8":
                for t in res.threads:
                    out.append(table_seconds(res, t, dash, wid))
        out.append(table_speedup(res, "tiles"))
        out.append(table_vs_peer(res, "tiles"))
    if any(is_recursive(k) for k in res.rows):
        for t in res.threads:
            out.append(table_rec_seconds(res, t, dash))
        out.append(table_rec_rate(res))
        out.append(table_vs_peer(res, "rec"))
    out.append(table_startup(res))
    if works:
        out.append(table_glance(res))
    if res.doc.get("pending"):
        out.append(table_pending(res))
    if res.doc.get("wide"):
        out.append(table_wide(res))
    return out


# ---- rendering ---------------------------------------------------------------

def render_text(title, header, rows):
    widths = [len(h) for h in header]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    lines = ["", "== %s ==" % title]

    def fmt(cells):
        out = []
        for i, c in enumerate(cells):
            left = i == 0 or (i == 1 and header[1] == "size")
            out.append(c.ljust(widths[i]) if left else c.rjust(widths[i]))
        return "  ".join(out).rstrip()

    lines.append(fmt(header))
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append(fmt(r))
    return "\n".join(lines)


def render_markdown(title, header, rows):
    lines = ["**%s**" % title, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|")
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    return "\n".join(lines)
