#!/usr/bin/env python3
"""Add to a results JSON of bench/run.py the engines, the pending-ops row and
the wide-op row of a later run, for a peer or a row that arrived after the
last full `make bench`, without running the whole suite again.

    bench/report/merge.py BASE.json ADD.json [-o OUT.json]
                          (default OUT: BASE, in place)

From ADD: the records (results, skips, timeouts, engine start-up) of every
(engine, worker count) BASE does not have, and its pending-ops and wide-op
records, which replace BASE's. BASE keeps everything else. A note, which
docs/BENCHMARKS.md prints under the machine, names the run each came from
(date, commit, load average, calibration): figures of two runs on a shared
machine are not as comparable as those of one. Both runs must be in the same
mode.
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base")
    ap.add_argument("add")
    ap.add_argument("-o", "--out")
    opts = ap.parse_args()
    with open(opts.base) as f:
        base = json.load(f)
    with open(opts.add) as f:
        add = json.load(f)
    if base.get("mode") != add.get("mode"):
        print("merge: %s is a %s run, %s a %s run: not merged"
              % (opts.base, base.get("mode"), opts.add, add.get("mode")), file=sys.stderr)
        return 1
    if not add.get("valid", True):
        print("merge: %s failed its correctness check: not merged" % opts.add,
              file=sys.stderr)
        return 3

    have = {(e["engine"], e["threads"]) for e in base.get("engines", [])}
    added = sorted({(e["engine"], e["threads"]) for e in add.get("engines", [])} - have)
    for field in ("results", "skips", "timeouts", "engines"):
        base.setdefault(field, []).extend(
            r for r in add.get(field, []) if (r["engine"], r["threads"]) in added)
    for row in ("pending", "wide"):
        if add.get(row):
            base[row] = add[row]
            base.setdefault("settings", {})[row] = add["settings"].get(row)
    for k in ("tbb",):
        if add.get("machine", {}).get(k) and not base["machine"].get(k):
            base["machine"][k] = add["machine"][k]

    what = []
    if added:
        what.append(", ".join("%s T=%d" % a for a in added))
    if add.get("pending"):
        what.append("the pending-ops row")
    if add.get("wide"):
        what.append("the wide-op row")
    if not what:
        print("merge: %s adds nothing to %s" % (opts.add, opts.base), file=sys.stderr)
        return 0
    m = add.get("machine", {})
    base.setdefault("notes", []).append(
        "%s: from a later run (%s, %s mode, commit %s, load average %.2f at start, "
        "%.2f at end, work loop %.3f ns/iteration), merged by "
        "bench/report/merge.py; the rest from the run above" % (
            " and ".join(what), add.get("date"), add.get("mode"), add.get("git"),
            m.get("loadavg_start", 0), m.get("loadavg_end", 0),
            add.get("calibration", {}).get("ns_per_iter", 0)))
    out = opts.out or opts.base
    with open(out, "w") as f:
        json.dump(base, f, indent=1)
        f.write("\n")
    print("merge: added %s to %s" % ("; ".join(what), out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
