/*
 * device_ops.h: running ops on devices (MXNet's ThreadedEnginePerDevice and
 * its asynchronous GPU mode).
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
 * Locks: dev.lock (engine) guards device creation and is taken under no
 * other lock; the completer's lock is a leaf; a var's read fences are
 * guarded by the var's spinlock (its write fence is only changed by an op
 * holding the var exclusively, also under the spinlock so a host waiter may
 * read it).
 */
#ifndef VF_DEVICE_OPS_H
#define VF_DEVICE_OPS_H

#include <pthread.h>
#include <stdbool.h>

#include "core/failure.h"
#include "device/device.h"

typedef struct vf__op vf__op;
typedef struct vf__pool vf__pool;
typedef struct vf__var vf__var;
typedef struct vf__worker vf__worker;

#define VF__MAX_DEVICE_IDS 8   /* per device type */
#define VF__VAR_READ_FENCES 4  /* reads in flight a var remembers */

/* A device op's event, as its vars see it. Reference counted. */
typedef struct vf__fence {
    atomic_int refs; /* acq_rel: the last unref frees */
    const vf__device_class *cls;
    vf__event *ev;
    const vf__stream *stream; /* identity only: same stream, same order */
    /* Set by the completer once `ev` completed, then `resolved` is stored
     * (release); read after an acquire load of `resolved`. */
    vf__failure *failure;
    atomic_bool resolved;
} vf__fence;

void vf__fence_ref(vf__fence *f);
void vf__fence_unref(vf__fence *f);

/* Wait on the host until f's work completed and the completer resolved
 * it; returns the failure it carries (no reference: the caller holds f),
 * or NULL. */
vf__failure *vf__fence_host_wait(vf_engine *e, vf__fence *f);

/* The naive engine runs a device op inside push, on a stream of the
 * pushing thread's own (a nested push reuses it; no lock is held while the
 * op runs). */
typedef struct vf__thread_stream {
    struct vf__thread_stream *next;
    pthread_t thread;
    vf__stream *stream;
} vf__thread_stream;

/* One device of one engine. */
typedef struct vf__devctx {
    const vf__device_class *cls;
    vf_device dev;
    vf__pool *normal, *copy, *prio; /* NULL in the naive engine */
    pthread_mutex_t inline_lock;
    vf__thread_stream *inline_streams; /* inline_lock */
    bool forked_away; /* in a forked child, a device it cannot use */
} vf__devctx;

/* Naive engine: the calling thread's stream on device d, made on first
 * use. VF_ENOMEM, or the device's error. */
int vf__device_thread_stream(vf_engine *e, vf__devctx *d, vf__stream **out);

/* Per-op state of a device op (malloc'd at its start, freed with it). */
typedef struct vf__devrun {
    const vf__device_class *cls;
    vf__fence *fence; /* its own, once recorded */
    /* Profiling: an event recorded before the op's stream waits, whose
     * time (or a waited fence's, whichever is later) starts its span. */
    vf__event *start_ev;
    int ninputs;
    int ncarry;          /* inputs[0..ncarry): write fences, which carry
                            their failure; the rest (read fences) order */
    vf__fence *inputs[]; /* fences it waited for (references) */
} vf__devrun;

void vf__devrun_free(vf__devrun *d);

/* The engine's completer: device ops in flight, oldest first. */
typedef struct vf__completer {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    vf__op *head, *tail; /* lock; linked through op->next */
    bool stop;           /* lock */
    bool sleeping;       /* lock: waiting on cond (only then signalled) */
    bool started;
    pthread_t thread;
} vf__completer;

/* An engine's devices (the engine's `dev`). Lock order: `lock` is taken
 * under no other engine lock; under it, the device layer's own locks. */
typedef struct vf__devices {
    /* Device contexts, made on first use under `lock` and published with a
     * release store; index: type - 1, id. */
    pthread_mutex_t lock;
    _Atomic(vf__devctx *) ctx[2][VF__MAX_DEVICE_IDS];
    vf__completer completer;
    vf__device_params params; /* the emulated device's costs */
    bool sync;                /* device_sync: host waits after every op */
    int workers, copy_workers, priority_workers; /* per device */
    int next_worker_index; /* lock: the next device worker's index */
    /* lock: the engine is stopped (lifecycle.c): a device made now gets
     * its pools and completer started by vf_engine_start. */
    bool threads_down;
    /* How dependencies on device work were met (relaxed counters). */
    _Atomic uint64_t host_syncs, stream_waits, same_stream;
} vf__devices;

/* The pool that runs an op of `dev` (not the CPU) and `prop`, creating the
 * device's pools on first use; NULL *pool: run inline (naive engine).
 * VF_ENODEV (no such device, with a detail), VF_ENOTSUP, VF_ENOMEM,
 * VF_ESYSTEM. */
int vf__device_route(vf_engine *e, const char *who, vf_device dev,
                     vf_property prop, vf__pool **pool);

/* The device context of a device op's definition. */
vf__devctx *vf__device_of(vf_engine *e, vf_device dev);

/* Stop and start the completer with the engine (lifecycle.c; dev.lock
 * held); nothing may be pending. */
void vf__devices_stop(vf_engine *e);
int vf__devices_start(vf_engine *e);

/* In a forked child (no thread of the parent's here): every device pool is
 * made anew in place (ops and operators keep pointing at it) with one
 * worker and a new stream when the device can be used after fork (the
 * emulated one); CUDA cannot: its device is marked forked_away, and its
 * ops are refused (VF_ENODEV) or fail. Nothing of the parent's streams and
 * events is called (vf__var_table_after_fork forgets the vars' fences).
 * Not started. */
void vf__devices_rebuild_for_child(vf_engine *e);

/* Stop the completer and free every device (after every op finished and
 * every pool's workers were joined; before the pools are freed). */
void vf__devices_destroy(vf_engine *e);

/* --- running ------------------------------------------------------------ */

/* Before a host-side op runs (engine with devices): wait on the host for
 * the fences of its vars that it depends on. */
void vf__fences_host_wait(vf__op *op);

/* The failure var v holds (no reference; NULL: none), for the op at
 * `place` that holds v: its last device write's, when that work failed
 * after the op released v (its write fence, resolved), else v's own. The
 * fence's is the newer: a host write turns it into v's own and drops the
 * fence before it runs (vf__fences_clear_written), and a device write
 * replaces the fence. A fence still in flight is waited for on the host
 * only when v's own failure is live for the op (which of the two holds
 * depends on that work); otherwise its failure is met on the device,
 * where the stream that waits for it inherits it (device.h). */
vf__failure *vf__var_failure(vf_engine *e, vf__var *v, uint64_t place);

/* A host-side op that met its fences (vf__fences_host_wait), before it
 * runs: the vars it writes take their last device write's failure, if
 * its work failed (rule 9: it sticks to the var), and drop their fences
 * (the op holds them exclusively, and nothing of theirs is in flight). */
void vf__fences_clear_written(const vf__op *op);

/* Before a device op's function: make `s` wait on the device for the
 * fences of its vars, keeping them as the op's inputs. VF_ENOMEM. */
int vf__device_op_begin(vf__op *op, const vf__device_class *cls,
                        vf__stream *s);

/* After its function returned (a failure it returned is already in
 * op->failure): record its event and leave the fence on its vars (or, with
 * device_sync or a naive engine, wait for it here). Returns true when the
 * op is in flight (the completer will finish it: the caller releases its
 * vars now, see exec.c), false when it is done (op->status and op->failure
 * set). */
bool vf__device_op_end(vf__op *op, const vf__device_class *cls,
                       vf__stream *s);

/* Profiling: tell the profiler when the op's work ran on the device, its
 * last event being `end` (complete). */
void vf__device_op_span(vf__op *op, vf__event *end);

/* Hand an in-flight op to the completer, before its vars are released:
 * so every op it could depend on through a fence was handed over before
 * it, and the completer resolves fences in an order where inputs come
 * first. The op then has two owners (exec.c's vf__device_op_drop). */
void vf__completer_add(vf_engine *e, vf__op *op);

/* Drop everything a var remembers of device work, by one that holds it
 * exclusively or when no op runs (its slot is freed, the engine is
 * destroyed): a failure its last device write's work left becomes the
 * var's own. */
void vf__var_drop_fences(vf__var *v);

#endif /* VF_DEVICE_OPS_H */
