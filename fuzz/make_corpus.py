#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_engine.c into fuzz/corpus/seed-*.

Each seed is a small hand-made program in the harness's input format (see
the comment at the top of fuzz_engine.c), one per feature and engine kind
(failures, waits at their place in push order, push+ ops: async completed
by another thread, device ops, unnamed ops, vf_completion_fail; forks; the
chaos moves: handshake pushers, VF_BULK_SIZE, address vars, deep nesting,
stop/start),
so the fuzzer (and tests/test_fuzz_replay.c) start from inputs that reach
every instruction. Run it from anywhere; it rewrites only seed-* files
(inputs libFuzzer adds to the corpus keep their hash names).
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

PUSH, NESTED, WAIT, WAIT_ALL, DELETE, STALE, PUSHX, FORK = 0, 3, 4, 5, 6, 7, 8, 9
STOP, ADDR = 9, 13  # in chaos programs (first byte 144 or more)
ASYNC, FAIL, NOSKIP, PRIO = 1, 6, 8, 16
# the push+ byte: how it runs, then modifiers
SYNC, INLINE, THREAD, DEVICE = 0, 1, 2, 3
DEVICE1, UNNAMED, SPECIAL, NOMSG = 4, 8, 16, 32
SECOND = 16  # an instruction's thread bit: the second pusher, in a fork


def push(reads, writes, flags=0, prio=3, thread=0):
    return [PUSH | thread, flags | (prio << 5), len(reads) | (len(writes) << 2)] + reads + writes


def pushx(x, reads, writes, flags=0, prio=3, thread=0):
    return [PUSHX | thread, x] + push(reads, writes, flags, prio)[1:]


def nested(reads, writes, kids=2, kid_bits=0, flags=0, thread=0):
    return [NESTED | thread, flags | (3 << 5), len(reads) | (len(writes) << 2)] + reads + writes + [
        (kids - 1) | (kid_bits << 2)]


def wait(var, thread=0):
    return [WAIT | thread, var]


def fork(length, failing_side=1, sides=0b10101010):
    return [FORK, (length - 1) | (failing_side << 4), sides]


def header(kind, workers, nvars, bulk=0, help=0, inflight=0, latency=0):
    return [kind + 3 * (workers - 1) + 6 * bulk + 18 * help + 36 * inflight + 72 * latency,
            nvars - 1]


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
            # push+: async completed by another thread, device ops (their
            # work fails), unnamed ops ("op #N"), vf_completion_fail, an op
            # returning VF_ESKIPPED, failures without a message
            body = pushx(THREAD, [], [0]) + pushx(THREAD, [0], [1], FAIL)
            body += pushx(DEVICE, [0], [2]) + pushx(DEVICE | DEVICE1, [2], [3], FAIL)
            body += pushx(SYNC | UNNAMED, [], [0], FAIL) + [WAIT, 0]
            body += pushx(INLINE | SPECIAL, [3], [0], FAIL) + pushx(SYNC | SPECIAL, [], [2], FAIL)
            body += pushx(THREAD | SPECIAL | NOMSG, [], [3], FAIL) + [WAIT, 1, WAIT_ALL]
            body += pushx(DEVICE, [1], [0]) + [WAIT, 0, WAIT_ALL]
            p[f"plus-{tag}"] = h + body
            # waits clear at their place in push order: ops pushed before a
            # wait still see the failure, ops after it do not; wait_all
            # reports the first failure in push order, not in time
            body = pushx(THREAD, [], [0], FAIL) + push([0], [1]) + push([0], [2])
            body += [WAIT, 0] + push([0], [3]) + [WAIT, 1, WAIT, 2, WAIT, 3]
            body += pushx(THREAD, [], [0], FAIL) + push([], [1], FAIL) + [WAIT_ALL]
            body += push([0, 1], [2]) + [WAIT, 2, WAIT_ALL]
            p[f"order-{tag}"] = h + body
            # a second pusher over its own vars, one side failing, joined
            body = push([], [0], FAIL) + push([], [3])
            body += fork(8, failing_side=1, sides=0b0110)
            body += push([0], [0]) + push([1], [1], FAIL, thread=SECOND)
            body += wait(0) + push([1], [2], thread=SECOND) + wait(1, thread=SECOND)
            body += nested([0], [0], kids=2) + nested([1], [1], kids=2, kid_bits=1, thread=SECOND)
            body += push([0], [], NOSKIP)
            body += [WAIT_ALL] + wait(2) + wait(0)
            p[f"fork-{tag}"] = h + body
    # the other engine settings: bulk, help_on_wait, max_inflight, latency
    for kind, kname in ((1, "pooled"), (2, "perdevice")):
        h = header(kind, 2, 6, bulk=1, help=1, inflight=1, latency=1)
        body = []
        for i in range(10):
            body += push([i % 6], [(i + 1) % 6], FAIL if i % 4 == 3 else 0, prio=3)
            body += pushx(DEVICE if i % 2 else THREAD, [(i + 2) % 6], [(i + 3) % 6])
            body += nested([i % 6], [(i + 4) % 6], kids=3, kid_bits=i % 8)
        body += [WAIT, 0, WAIT, 3, WAIT_ALL]
        p[f"settings-{kname}"] = h + body
    # foreign handle before any delete; 8 vars, wide ops
    p["stale-foreign"] = header(1, 2, 2) + [STALE, 0] + push([0], [1])
    h = header(2, 2, 8)
    body = []
    for i in range(20):
        body += push([i % 8, (i + 3) % 8, (i + 5) % 8], [(i + 1) % 8, (i + 2) % 8, (i + 1) % 8])
    body += [WAIT_ALL] + [WAIT, 7]
    p["wide-perdevice2"] = h + body
    # the chaos moves (issue 27): handshake pushers, VF_BULK_SIZE, address
    # vars destroyed and looked up again, deep nesting, stop/start
    for kind, kname in ((0, "naive"), (1, "pooled"), (2, "perdevice")):
        for bulk in (0, 2):  # VF_BULK_SIZE unset, 8
            # a hand-off: thread t writes v, thread t+1 reads it (4 pushers)
            h = chaos_header(kind, 2, 4, threads=4, env_bulk=bulk)
            body = []
            for i in range(12):
                body += push([i % 4], [(i + 1) % 4], thread=(i % 4) << 4)
            body += [WAIT | 0x10, 1, WAIT_ALL | 0x20]
            p[f"chaos-handoff-{kname}-bulk{bulk}"] = h + body
            # an address var: written, destroyed, looked up again, written
            h = chaos_header(kind, 2, 3, threads=2, env_bulk=bulk, naddr=2)
            body = push([0], [3], FAIL if bulk else 0) + [ADDR, 0] + [ADDR | 0x10, 4]
            body += push([3], [1], thread=0x10) + [ADDR, 1, ADDR | 0x10, 5]
            body += push([4], [3, 4]) + [WAIT, 3, WAIT | 0x10, 4]
            p[f"chaos-addr-{kname}-bulk{bulk}"] = h + body
            # stop, pushes of both pushers held, start, waits
            h = chaos_header(kind, 1, 4, threads=2, env_bulk=bulk, naddr=1)
            body = push([], [0]) + [STOP] + push([0], [1], thread=0x10)
            body += [WAIT, 0] + [ADDR, 4] + push([1], [2]) + [DELETE | 0x10, 3]
            body += [ADDR, 0] + push([2], [4], FAIL, thread=0x10) + [STOP]
            body += [WAIT, 2, WAIT | 0x10, 4, WAIT_ALL]
            p[f"chaos-stop-{kname}-bulk{bulk}"] = h + body
        # children 4 levels deep, every child a parent
        h = chaos_header(kind, 2, 3, threads=3, depth=4)
        deep = kids_bytes(1, 4, fail_first=True)
        body = push([], [0]) + [NESTED | 0x10, 3 << 5, 1 | (1 << 2), 0, 1] + deep
        body += push([1], [2], thread=0x20) + [WAIT | 0x20, 1, WAIT_ALL]
        p[f"chaos-deep-{kname}"] = h + body
    return p


def kids_bytes(level, depth, fail_first=False):
    """A nested push's kid bytes in chaos (depth-first): 3 sync children,
    the first one failing if asked, each one a parent down to `depth`."""
    out = [2 | ((1 << 2) if fail_first else 0)]
    if level < depth:
        out.append(7)
        for _ in range(3):
            out += kids_bytes(level + 1, depth)
    return out


def chaos_header(kind, workers, nvars, threads=1, env_bulk=0, naddr=0, depth=1):
    return [144 + header(kind, workers, nvars)[0], nvars - 1,
            (threads - 1) | (env_bulk << 2) | (naddr << 4) | ((depth - 1) << 6)]


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
