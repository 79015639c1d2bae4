/*
 * device_ops.h: running ops on devices (MXNet's ThreadedEnginePerDevice and
 * its asynchronous GPU mode): the whole story. A device op's trip (its run
 * on a stream, its release in flight, its completion) is device_ops.c; the
 * fences it meets and leaves on its vars are fences.[ch]; the thread that
 * completes it is completer.[ch]; devices and their pools are
 * device_pools.[ch].
 *
 * Pools. Each device (type, id) gets, on the first push for it, three
 * pools: compute workers, copy workers (VF_PROP_COPY_TO/FROM_DEVICE) and
 * priority workers (VF_PROP_DEVICE_PRIORITIZED); every worker owns a stream
 * of its own (device/device.h). The naive engine has no workers: it runs a
 * device op inline on one stream per device and synchronizes after it.
 *
 * Fences. A device op's function only puts work on its stream; when it
 * returns, the worker records an event and wraps it in a fence, which the
 * op leaves on its vars: as the var's write fence for a var it writes (the
 * read fences are then dropped), among the read fences for a var it reads.
 * The op's vars are released at once, so the host runs ahead of the device,
 * and whoever depends on the op meets the fence:
 *   - a device op makes its stream wait for the fence on the device (for a
 *     read: the write fence; for a write: the write and read fences), with
 *     no host synchronization; on the same stream the wait only carries a
 *     failure (the device layer's segments), the order is already there;
 *   - an op that runs on the host (a CPU op, an async op, a delete, a wait)
 *     waits for those fences on the host first, and a CPU write drops the
 *     var's fences afterwards (nothing it could order is left in flight).
 * With device_sync, a device op instead waits for its own event on the host
 * before its vars are released, and leaves no fence.
 *
 * Its kind (vf__kind_device, op.h) is the whole trip on a worker: its body
 * meets the fences a host op meets before it, where it must, and lets go of
 * its vars while its work is in flight.
 *
 * Completion. A device op in flight stays pending and active until its
 * event completes. The engine's completer thread takes in-flight ops in the
 * order they were handed to it (each before its vars were released, so
 * after every op it depends on), waits for each event, resolves the
 * fence's failure (rule 9), then finishes the op: `done` (for a device op
 * in flight, after its vars were released), statistics, the op counted
 * out. The outcome of a device op's work:
 *   - its function returned non-zero: a failure like a CPU op's, recorded
 *     at once (its vars carry it as usual);
 *   - its work failed on the device: a new failure, recorded when the
 *     completer sees it, carried by the fence;
 *   - its work was skipped on the device because a fence it waited for had
 *     failed (the device's inherited failure): the op is skipped and its
 *     fence carries that same failure. The fences it waited for were
 *     recorded earlier, so the completer has resolved them already.
 * A host-side consumer that finds a fence failed waits until the completer
 * has resolved it (it is already complete, so that is brief), then treats
 * the failure as it treats a var's (skip, pass on, report at waits).
 *
 * Which failure. An op that finds a live failure on the host before it
 * starts (a var's own, or a resolved fence's) is skipped there; it first
 * meets all its fences on the host, since work still in flight may fail
 * with a failure pushed earlier, which is then the one it inherits (rule
 * 9: the first in push order), whatever the host had seen complete.
 *
 * A claim while work is in flight. A failure inherited on the device is
 * decided when the work runs, a wait's claim (failure.h) when the wait
 * runs on the host, so a wait of another thread may claim a failure that
 * work in flight has already inherited, for an op pushed after the wait.
 * Such an op started before the claim, as an op that the program did not
 * order after the wait may (its pusher was not waiting): it stays skipped
 * with that failure, as if it had started before the wait, never reported
 * as a failure of its own (device_outcome). An op that starts after the
 * claim must not inherit it through such work: each fence notes the
 * process's count of claims (vf__failure_claims) when its op began, and an
 * op that would carry a fence still in flight from before a claim meets it
 * on the host instead, where its outcome is known (device_op_begin; a
 * device replay's boundary likewise). An op before the wait in push order
 * that begins after the claim still carries the claimed failure (it is
 * live for it); its fence then notes the count before that claim, so an op
 * after the wait meets that fence on the host too.
 *
 * Locks (engine.h has the order): dev.lock (engine) guards device creation
 * and is taken under no other lock but life.op_lock (a stop, a start) and,
 * at fork, those taken before it; the completer's lock is a leaf; a var's
 * read fences are guarded by the var's spinlock (its write fence is only
 * changed by an op holding the var exclusively, also under the spinlock so
 * a host waiter may read it).
 */
#ifndef VF_DEVICE_OPS_H
#define VF_DEVICE_OPS_H

#include <stdbool.h>

#include "core/fences.h"
#include "core/op.h"
#include "device/device.h"

/* Per-op state of a device op (malloc'd at its start, freed with it). */
typedef struct vf__devrun {
    const vf__device_class *cls;
    /* A node of a graph's device replay (graph_device.c): its launch's
     * instance, whose end its completion is; NULL for a pushed op. */
    struct vf__graph_inst *graph;
    /* A node's, the last of its graph's launch: the read fence of the
     * launch (vf__fences_leave_rw), resolved with this node (a
     * reference), or NULL. */
    vf__fence *graph_end;
    vf__fence *fence; /* its own, once recorded */
    /* Profiling: an event recorded before the op's stream waits, whose
     * time (or a waited fence's, or put_ns, whichever is latest) starts
     * its span. */
    vf__event *start_ev;
    /* Profiling: the host's time (CLOCK_MONOTONIC) when the op first put
     * work on its stream or handed the stream out (vf_run_submit,
     * vf_run_stream), else when its function returned; 0 before. No work
     * of it can start on the device before then. */
    uint64_t put_ns;
    /* What its function said with vf_run_set_error() and returned 0 (a
     * copy, or NULL): the message of a failure of its work, which the
     * device's own words replaced (a device function has no run handle to
     * say it with: found by a user tester). */
    char *message;
    uint64_t claims; /* vf__failure_claims at its start (its fence's; one
                        less when it carries a claimed failure) */
    /* Events that closed its segments early, in order: each time an op
     * ran on its stream above it while its function ran (a child at its
     * push, or above a wait of its function), so that its work's failure
     * stays its own and the child's work starts clean (device_ops.c:
     * seal). Its outcome is the first of them that failed, else its own
     * event's. NULL when none (the usual case). */
    vf__event **seals;
    int nseals;
    int ninputs;
    int ncarry;          /* inputs[0..ncarry): write fences, which carry
                            their failure; the rest (read fences) order */
    vf__fence *inputs[]; /* fences it waited for (references) */
} vf__devrun;

/* The completer's part of an in-flight op whose event completed: its
 * outcome resolved onto its fence (the versions of what it wrote bumped
 * unless its work was skipped), then `done` and statistics; the op is
 * freed by whichever of this and the release of its vars comes last. */
void vf__device_op_completed(vf__op *op);

/* A device op's body (its kind's run, op.h), for a node of a graph's
 * device replay that graph_device.c runs as its push would run: true when
 * it is done now, false when its work is in flight (its fence left on its
 * vars; the caller hands it to the completer). */
bool vf__device_op_run(vf__op *op, int worker, bool shutdown);

/* An op whose device work is in flight lets go of its vars (a device op,
 * or a device replay's launch op, whose vars are its graph's): a failure
 * known now goes to what it writes, the versions wait for the work; the
 * ops that makes ready go to `ready` and are counted active in the same
 * step, before the caller lowers the op's own count. */
void vf__device_release_vars(vf__op *op, vf__failure *failure,
                             vf__readylist *ready);

/* A device op's run state with room for `cap` input fences, at rest: no
 * graph, fence, span, message, seals or inputs, claims 0 (a pushed op's
 * start and a graph's device replay each set what is theirs). NULL when
 * out of memory. */
vf__devrun *vf__devrun_new(const vf__device_class *cls, int cap);

/* Let go of a device op's run state (op->dev), if it has one. */
void vf__devrun_free(vf__op *op);

/* The running device op `op` puts work on its stream, or hands the stream
 * out (vf_run_submit, vf_run_stream): while profiled, the first such call
 * bounds the start of its device span (the host's time before it was
 * counted as device work, and a run whose ops prepare long on the host
 * read as device-bound: found by a user tester). No event is recorded:
 * one between the op's waits and its work would split the stream segment
 * that carries an input's failure into the work (device.h). */
void vf__device_op_work_begins(vf__op *op);

#endif /* VF_DEVICE_OPS_H */
