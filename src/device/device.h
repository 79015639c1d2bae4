/*
 * device.h: the device interface, the one door between the core and the
 * devices.
 *
 * A device kind (the emulated stream device, CUDA) is one file of this
 * folder that fills a vf__device_class; the core sees streams and events
 * only through it, and this folder is the only place in src/ with device
 * #ifdefs. A class that needs nothing but libc and pthreads (the emulated
 * device) is built into the core: one line in device.c's table. A class
 * that needs a vendor runtime (CUDA) is a library of its own
 * (libvarflow-cuda, src/device/cuda.c), so the core never links the
 * runtime: it registers its class at run time through
 * vf__device_class_register below, the one internal name libvarflow.so
 * exports (cmake/varflow.map), and the core then reaches it through
 * vf__device_class_of like a built-in one.
 *
 * The model is CUDA's:
 * - a stream runs the work submitted to it in submission order,
 *   asynchronously to the host thread that submitted it;
 * - an event marks a point of a stream: it completes when all the work
 *   submitted to that stream before it was recorded has completed (an event
 *   recorded on an idle stream completes at once);
 * - a stream can wait for an event on the device: work submitted to it
 *   after the wait does not start before the event completes, and the host
 *   does not block;
 * - the host can wait for an event, query it, or synchronize a stream.
 *
 * Errors. Work can fail (a failed CUDA call, an emulated submission whose
 * function returns non-zero). The stretch of a stream between two records
 * is a *segment*: the first failure in a segment fails it, later work of
 * the same segment is skipped, and the event that closes the segment
 * carries the failure (code, message, and whether it was inherited). A
 * stream that waits for a failed event inherits its failure into the
 * segment where the wait stands, so a failure follows the data on the
 * device as rule 9 wants it to on the host. The next segment starts clean.
 * (CUDA's errors are sticky for a whole context; there a failure is
 * reported by every later event of that context.)
 *
 * Threads: every function may be called from any thread. A stream is used
 * by one worker at a time (the worker that owns it), but events are shared:
 * any thread may wait for, query, retain or release them.
 */
#ifndef VF_DEVICE_H
#define VF_DEVICE_H

#include <stdbool.h>

#include "base/common.h"

typedef struct vf__stream vf__stream;     /* opaque: each class has its own */
typedef struct vf__event vf__event;       /* opaque; reference counted */
typedef struct vf__devgraph vf__devgraph; /* opaque; reference counted */

/* What a device graph's launch follows: an event, and the node whose work
 * first uses what the event guards; with `carry`, that node inherits the
 * event's failure (as a carrying stream_wait would), else it only orders. */
typedef struct vf__devgraph_input {
    vf__event *ev;
    uint32_t node;
    bool carry;
} vf__devgraph_input;

/* The emulated device's host-side costs, in ns (VF_EMULATED_*_NS; see
 * src/device/emulated.c). */
typedef struct vf__emulated_costs {
    uint64_t launch_ns, record_ns, wait_ns, query_ns, hostfn_ns;
    uint64_t graph_launch_ns, graph_node_ns;
} vf__emulated_costs;

/* What an engine gives every stream it makes. */
typedef struct vf__device_params {
    /* How an emulated device slows itself down, so tests see real overlap
     * (a real device ignores them). */
    uint64_t latency_ns;      /* every submission takes at least this long */
    uint64_t bytes_per_sec;   /* copy bandwidth for submissions with bytes
                                 (0: unlimited) */
    vf__emulated_costs costs; /* read once, at vf_engine_create */
    /* A stream runs each piece of work as run_work(owner, fn, arg), not
     * fn(arg) (NULL: fn(arg)): the engine `owner` so knows its calls from
     * device work, which must not block (exec.h: vf__exec_device_work). */
    int (*run_work)(const void *owner, vf_device_fn fn, void *arg);
    const void *owner;
} vf__device_params;

/* fn(arg) as `p` says a stream runs its work. */
static inline int vf__device_run_work(const vf__device_params *p,
                                      vf_device_fn fn, void *arg)
{
    return p->run_work != NULL ? p->run_work(p->owner, fn, arg) : fn(arg);
}

/* An event's outcome, once complete. */
typedef struct vf__event_status {
    int code;          /* 0, or the first failure of its segment */
    bool inherited;    /* the failure came through a stream wait */
    char message[128]; /* what the failing work said ("" when nothing) */
} vf__event_status;

typedef struct vf__device_class {
    vf_device_type type;
    const char *name; /* "emulated", "cuda" */
    /* Whether a forked child can go on using the device, and free what the
     * parent had made of it: the emulated device's streams and events are
     * host memory, their threads joined by the fork's stop, so the child
     * frees the parent's (stream_destroy finds them stopped) and makes
     * new ones; CUDA's cannot be touched after a fork, not even to be
     * destroyed, so the child leaves them and cannot use the device. */
    bool usable_after_fork;

    /* Devices of this kind usable now (0 when none: no GPU, no driver). On
     * 0, vf__fail has left a detail saying why. */
    int (*count)(void);

    /* A new stream on device `id`. VF_ENODEV (with a detail), VF_ENOMEM,
     * VF_ESYSTEM. */
    int (*stream_create)(int id, const vf__device_params *params,
                         vf__stream **out);
    /* Waits for the stream's work, then frees it. */
    void (*stream_destroy)(vf__stream *s);
    /* What an op's function gets from vf_run_stream(): the cudaStream_t
     * for CUDA, the stream itself for the emulated device. */
    void *(*stream_handle)(vf__stream *s);

    /* Queue fn(arg) on the stream, after all earlier work. `bytes` > 0
     * marks a copy of that many bytes (the emulated device charges its
     * bandwidth). A non-zero return of fn fails the segment. Returns 0,
     * VF_ENOMEM, or an error of the device. */
    int (*submit)(vf__stream *s, vf_device_fn fn, void *arg, size_t bytes);

    /* A new event (one reference) closing the current segment. */
    int (*record)(vf__stream *s, vf__event **out);
    /* Work submitted to `s` from now on starts after `ev` completes
     * (device side; the host does not block). With `carry`, the segment
     * where the wait stands inherits `ev`'s failure (the work after it
     * uses what `ev`'s work wrote); without, the wait only orders (that
     * work only read what the work after it overwrites). */
    int (*stream_wait)(vf__stream *s, vf__event *ev, bool carry);
    /* Block the host until `ev` completes; fills *st (may be NULL).
     * Returns 0, or st->code. */
    int (*event_wait)(vf__event *ev, vf__event_status *st);
    /* 0 when complete without failure, VF_EAGAIN while not complete, else
     * the failure's code. Never blocks. */
    int (*event_query)(vf__event *ev);
    /* CLOCK_MONOTONIC ns at which a complete event completed (0 when the
     * device cannot tell): the profiler's device-side spans. */
    uint64_t (*event_time_ns)(vf__event *ev);
    void (*event_retain)(vf__event *ev);
    void (*event_release)(vf__event *ev);

    /* Block until all work submitted so far has completed: 0 or the first
     * failure not yet reported by an event. */
    int (*stream_sync)(vf__stream *s);

    /* Stop the threads a stream runs on the host, after its work (the
     * engine's stop, and before a fork), and start them again; the stream
     * keeps its identity and its events. No-ops for a device without such
     * threads. stream_start: 0 or VF_ESYSTEM. */
    void (*stream_stop)(vf__stream *s);
    int (*stream_start)(vf__stream *s);

    /* --- device graphs: work recorded once, launched as one call ---------
     *
     * Optional: all NULL where the class records none (a varflow graph on
     * it then runs as pushes would). A device graph is a sequence of
     * *nodes*, each the work submitted for one op; its work runs in node
     * order, and each node is a segment of its own: its failure is its
     * own, and a node inherits the failure of the earlier nodes it carries
     * from (those whose work wrote what it uses) and of the launch inputs
     * it carries, as separate ops on one stream with carrying waits would.
     *
     * capture_begin: from now on the work submitted to `s` is recorded, not
     * run (record and stream_wait are not allowed until the capture ends).
     * capture_node: node k (0, 1, ... in calls) starts; the work submitted
     * until the next call is its own; its work follows that of the
     * `norder` earlier nodes in `order` (its predecessors: the graph may
     * run nodes neither follows at once), and it carries from the
     * `ncarry` of them in `carry`. capture_end: the capture is over; *out the
     * graph of the nodes started (one reference), or with `out` NULL it is
     * dropped. VF_ENOMEM, VF_ENOTSUP (work this class cannot record, with
     * a detail), or the device's error; after a failed capture_begin there
     * is no capture, after any other failure the capture still needs its
     * capture_end.
     *
     * graph_launch: run g's work on `s`, after all earlier work of `s` and
     * the `ninputs` inputs, and before any later work of `s`;
     * node_events[k] gets a new event (a reference) that completes when
     * node k's work has, with its status (not necessarily in node order). 0,
     * VF_ENOMEM, VF_ENOTSUP (an input this class cannot carry into a graph: the
     * caller runs the ops as pushes would), or the device's error; on failure
     * no work was queued. graph_release: drop a reference (the last one frees
     * the graph once its launches have completed). */
    int (*capture_begin)(vf__stream *s);
    int (*capture_node)(vf__stream *s, const uint32_t *order, uint32_t norder,
                        const uint32_t *carry, uint32_t ncarry);
    int (*capture_end)(vf__stream *s, vf__devgraph **out);
    int (*graph_launch)(vf__devgraph *g, vf__stream *s,
                        const vf__devgraph_input *inputs, uint32_t ninputs,
                        vf__event **node_events);
    void (*graph_release)(vf__devgraph *g);
} vf__device_class;

/* The class of a device type, or NULL: VF_DEVICE_CPU, an unknown type, or
 * a type whose class lives in a library of its own that has not registered
 * it (CUDA before vf_cuda_register); vf__fail has then left a detail
 * saying why and what to link. Never blocks; any thread. */
const vf__device_class *vf__device_class_of(vf_device_type type);

/* The emulated device's costs from the environment (VF_EMULATED_*_NS, see
 * src/device/emulated.c) into *out: 0, or VF_EINVAL naming the variable
 * and its value. vf_engine_create reads them, once: a bad value is refused
 * at create, as every other VF_* setting is, and the engine's streams all
 * run at the costs it read (not at what the environment says when each is
 * made: found by a user setting one after create). With `use_env` false
 * (config.ignore_env) the built-in costs, whatever the environment says. */
int vf__emulated_costs_read(vf__emulated_costs *out, bool use_env);

/* The emulated device's streams and events not yet freed, process-wide:
 * how the unit tests see that a forked child frees the parent's. */
void vf__emulated_live(long *streams, long *events);

/* --- registration: the door for a class in a library of its own ----------
 *
 * The class struct is internal, so a device library must be the one built
 * with this libvarflow: it passes VF__DEVICE_ABI as it saw it, and the core
 * refuses a library built for another version or another layout of the
 * class or of the params the core passes its streams (VF_EINVAL, with both
 * stamps in the detail) rather than call through a table it cannot read.
 * (The params' size is in it since they carry run_work: found by a
 * reviewer, a library built before would have run work unmarked.) */
#define VF__DEVICE_ABI                                                         \
    (((uint64_t)VF_VERSION_MAJOR << 56) | ((uint64_t)VF_VERSION_MINOR << 48) | \
     ((uint64_t)VF_VERSION_PATCH << 40) |                                      \
     ((uint64_t)sizeof(vf__device_params) << 20) |                             \
     (uint64_t)sizeof(vf__device_class))

/* What the core lends such a class: its allocation funnel (base/alloc.h),
 * so vf__testing_fail_alloc reaches the class's allocations as it reaches the
 * core's. (Details go through the public vf_error_set_detail, the buffer
 * vf__fail writes.) */
typedef struct vf__device_host {
    void *(*malloc)(size_t size);
    void *(*calloc)(size_t count, size_t size);
} vf__device_host;

/*
 * Make `cls` the class of cls->type, for every engine of the process from
 * now on (there is no unregistering: the class must live as long as the
 * process, as a library's static table does). Before the class can be
 * seen, *host is set to the core's services. Registering the class that
 * is already registered is a no-op (0). VF_EINVAL (with a detail): `cls`
 * or `host` NULL, a type that is not a vf_device_type or whose class is
 * built in (CPU, emulated), another class already registered for the
 * type, or `abi` other than this core's VF__DEVICE_ABI. Never blocks; any
 * thread, concurrently with engines using devices.
 */
int vf__device_class_register(const vf__device_class *cls, uint64_t abi,
                              const vf__device_host **host);

#endif /* VF_DEVICE_H */
