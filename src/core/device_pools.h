/*
 * device_pools.h: an engine's devices, each made on the first push for it
 * with its three pools (compute, copy, priority; a stream per worker), the
 * route of a device op to one of them, and what stop, start, fork and
 * destroy do to them (device_ops.h tells the whole story of device ops).
 * The naive engine has no pools: a device op runs inline on a stream of
 * the pushing thread's own.
 *
 * A device is made under the engine's dev.lock and published with a
 * release store; the pools array only grows, and `npools` is published
 * with a release store (engine.h). Stop and start (lifecycle.c) take the
 * same lock, so a device made while the engine is stopped waits for start
 * to run its threads. Under dev.lock, only the device layer's own locks
 * are taken (engine.h's lock order says what it nests under).
 */
#ifndef VF_DEVICE_POOLS_H
#define VF_DEVICE_POOLS_H

#include <pthread.h>
#include <stdbool.h>

#include "core/completer.h"
#include "device/device.h"

typedef struct vf__pool vf__pool;

#define VF__MAX_DEVICE_IDS 8 /* per device type */

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
    /* NULL in the naive engine, and where a start could not make one
     * (a later push tries again, under the devices' lock). */
    _Atomic(vf__pool *) normal, copy, prio;
    pthread_mutex_t inline_lock;
    vf__thread_stream *inline_streams; /* inline_lock */
    bool forked_away; /* in a forked child, a device it cannot use */
} vf__devctx;

/* An engine's devices (the engine's `dev`). Under `lock`, only the device
 * layer's own locks (engine.h's lock order). */
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

/* Check an op's `dev` (not the CPU) and `prop` without making anything:
 * *made is the device's context, or NULL while the engine has not made
 * it. VF_ENODEV (no such device, with a detail), VF_EINVAL (no property).
 * Does not block. */
int vf__device_check(vf_engine *e, const char *who, vf_device dev,
                     vf_property prop, vf__devctx **made);

/* The pool that runs an op of `dev` and `prop`, checked by
 * vf__device_check (`made`: what it gave), making the device and its
 * pools on first use, under dev.lock: they stay, so the caller checks
 * all else first. NULL *pool: run inline (naive engine). VF_ENODEV,
 * VF_ENOTSUP, VF_ENOMEM, VF_ESYSTEM. */
int vf__device_route(vf_engine *e, const char *who, vf_device dev,
                     vf_property prop, vf__devctx *made, vf__pool **pool);

/* The device context of a device op's definition. */
vf__devctx *vf__device_of(vf_engine *e, vf_device dev);

/* Naive engine: the calling thread's stream on device d, made on first
 * use. VF_ENOMEM, or the device's error. */
int vf__device_thread_stream(vf_engine *e, vf__devctx *d, vf__stream **out);

/* Stop and start the completer and every stream's thread with the engine
 * (lifecycle.c; dev.lock held); nothing may be pending. */
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

#endif /* VF_DEVICE_POOLS_H */
