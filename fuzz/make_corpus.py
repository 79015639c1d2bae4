#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_engine.c into fuzz/corpus/seed-*.

Each seed is a small hand-made program in the harness's input format (see
the comment at the top of fuzz_engine.c), one per feature and engine kind,
so the fuzzer (and tests/test_fuzz_replay.c) start from inputs that reach
every instruction. Run it from anywhere; it rewrites only seed-* files
(inputs libFuzzer adds to the corpus keep their hash names).
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

PUSH, NESTED, WAIT, WAIT_ALL, DELETE, STALE = 0, 3, 4, 5, 6, 7
ASYNC, FAIL, NOSKIP, PRIO = 1, 6, 8, 16


def push(reads, writes, flags=0, prio=3):
    return [PUSH, flags | (prio << 5), len(reads) | (len(writes) << 2)] + reads + writes


def nested(reads, writes, kids=2, kid_bits=0, flags=0):
    return [NESTED, flags | (3 << 5), len(reads) | (len(writes) << 2)] + reads + writes + [
        (kids - 1) | (kid_bits << 2)]


def header(kind, workers, nvars):
    return [kind + 3 * (workers - 1), nvars - 1]


def programs():
    p = {}
    for kind, kname in ((0, "naive"), (1, "pooled"), (2, "perdevice")):
        for workers in (1, 2):
            h = header(kind, workers, 4)
            tag = f"{kname}{workers}"
            # chains and fan-out reads over 4 vars, waits on each
            body = []
            for i in range(12):
                body += push([i % 4], [(i + 1) % 4])
                body += push([(i + 2) % 4, (i + 2) % 4], [])
            body += [WAIT, 0, WAIT, 1, WAIT, 2, WAIT, 3]
            p[f"chain-{tag}"] = h + body
            # a failure, its followers skipped, no-skip ops, waits report it
            body = push([], [0]) + push([0], [1], FAIL) + push([1], [2])
            body += push([2], [3], NOSKIP) + push([1, 2], [3])
            body += [WAIT, 3] + push([3], [0]) + [WAIT, 2, WAIT, 1, WAIT_ALL]
            body += push([1], [2]) + [WAIT, 2]
            p[f"fail-{tag}"] = h + body
            # async ops, failing async, prioritized ops
            body = push([], [0], ASYNC) + push([0], [1], ASYNC | FAIL)
            body += push([0], [2], PRIO) + push([2], [3], ASYNC | PRIO, prio=7)
            body += push([1], [0], NOSKIP | ASYNC) + [WAIT, 1, WAIT, 0, WAIT_ALL]
            p[f"async-{tag}"] = h + body
            # deletes and stale handles
            body = push([], [0]) + push([0], [1]) + [DELETE, 0] + push([1], [0])
            body += [STALE, 0] + [DELETE, 1, DELETE, 1] + push([0, 1], [2])
            body += [STALE, 1, WAIT, 2, WAIT, 0]
            p[f"delete-{tag}"] = h + body
            # nested pushes, one child failing, duplicates, read+write
            body = nested([0], [1], kids=3, kid_bits=2) + nested([1, 1], [1, 2])
            body += push([0, 1, 2], [0, 0, 1]) + nested([3], [3], kids=1, flags=FAIL)
            body += [WAIT, 1, WAIT_ALL, WAIT, 0]
            p[f"nested-{tag}"] = h + body
    # foreign handle before any delete; 8 vars, wide ops
    p["stale-foreign"] = header(1, 2, 2) + [STALE, 0] + push([0], [1])
    h = header(2, 2, 8)
    body = []
    for i in range(20):
        body += push([i % 8, (i + 3) % 8, (i + 5) % 8], [(i + 1) % 8, (i + 2) % 8, (i + 1) % 8])
    body += [WAIT_ALL] + [WAIT, 7]
    p["wide-perdevice2"] = h + body
    return p


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in os.listdir(OUT):
        if name.startswith("seed-"):
            os.remove(os.path.join(OUT, name))
    for name, data in sorted(programs().items()):
        with open(os.path.join(OUT, "seed-" + name), "wb") as f:
            f.write(bytes(b & 0xFF for b in data))
    print(f"{len(programs())} seeds in {OUT}")


if __name__ == "__main__":
    main()
