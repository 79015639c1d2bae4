/*
 * emulated.c: the emulated stream device (VF_DEVICE_EMULATED), always
 * built, so every device path of the engine is tested on every machine.
 *
 * A stream is a thread with a FIFO of items: work (fn, arg, bytes), event
 * records and event waits. The thread takes them in order:
 *   work    runs fn(arg) unless the current segment has failed, then makes
 *           the item last at least latency_ns plus bytes / bytes_per_sec
 *           (sleeping, not spinning: the host's cores are for the host);
 *           a non-zero return fails the segment;
 *   record  completes the event with the segment's status and a time
 *           stamp, and starts a clean segment;
 *   wait    blocks the stream thread (never the host) until the event
 *           completes; a failed event fails the segment, as inherited;
 *   graph   a device graph's launch (device.h): waits for its inputs, then
 *           runs its nodes, each as a segment of its own (its work as
 *           `work` runs it, skipped when a node or input it carries from
 *           failed), completing each node's event after it; the next item
 *           starts when every node is done. As a GPU overlaps the copies
 *           and the kernels of a graph (its copy engines and its SMs), a
 *           stream runs the nodes whose work copies (bytes > 0) on a
 *           second thread of its own, its copy lane (made at its first
 *           graph with such a node), and the others on its own: each lane
 *           takes its nodes as they become ready (their predecessors
 *           done), first ready first.
 * An event recorded on an idle stream completes in the record call itself
 * (the thread is parked and touches nothing); a stream waiting on an event
 * runs no later item before that event completes, as CUDA's do.
 *
 * Events are reference counted: the recorder gets one reference, the
 * stream's queue holds another until it completes the event.
 *
 * Costs. Besides the slowness the engine passes (vf__device_params: what
 * the work itself takes), a stream charges what a CUDA runtime call costs
 * the host thread that makes it, by spinning that thread (the driver's
 * work is CPU work; a sleep would also overshoot a few microseconds):
 *   launch   each submit (cudaLaunchKernel, cudaMemcpyAsync);
 *   record   each record (cudaEventRecord);
 *   wait     each stream_wait (cudaStreamWaitEvent);
 *   query    each event_query, event_wait and stream_sync (the call
 *            itself; a wait still lasts until the event completes);
 * and, on the stream's side, a host-function latency: the stream holds
 * each piece of work that long before it runs it (cudaLaunchHostFunc, what
 * vf_run_submit is on CUDA), sleeping. A device graph's launch
 * (cudaGraphLaunch) charges its own: graph_launch once, and graph_node for
 * each node, in place of every submit, record and wait its nodes would
 * have made one by one (recording one charges a submit's launch per piece
 * of work, as capturing a call costs about what making it does). The
 * engine reads them from the environment once, at vf_engine_create, and
 * passes them to every stream it makes (vf__device_params.costs;
 * VF_EMULATED_LAUNCH_NS, _RECORD_NS, _WAIT_NS, _QUERY_NS, _HOSTFN_NS,
 * _GRAPH_LAUNCH_NS, _GRAPH_NODE_NS: decimal nanoseconds, 0 turns one off);
 * unset, the defaults below.
 *
 * Lock order: a stream's lock, then an event's lock (a record on an idle
 * stream completes its event under the stream's lock); never the reverse
 * (the stream thread drops its lock before waiting on an event), and no
 * user code runs under either.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "base/alloc.h"
#include "base/deadline.h"
#include "base/error.h"
#include "base/ref.h"
#include "device/device.h"

#define EMULATED_DEVICES 8 /* ids 0..7 */

/* What a CUDA call costs, in ns (see the top of the file). The defaults
 * are measured on an NVIDIA H200, CUDA 13.0, driver 580.159
 * (bench/device/calls_cuda.cu, docs/PERFORMANCE.md, "The emulated
 * device's costs"): a submit 2.65 us, the mean of an empty kernel's launch
 * (3.9 us) and a 4 KiB cudaMemcpyAsync (1.4 us); cudaEventRecord of a
 * timing event 1.29 us; cudaStreamWaitEvent 0.20 us; cudaEventQuery
 * 0.19 us. Host functions off (0): emulated work stands for kernels and
 * copies unless a run says otherwise (cudaLaunchHostFunc's latency on an
 * idle stream was 11.4 us there). A graph's launch is not measured yet
 * (bench/device/calls_cuda.cu measures it on the next GPU a session gets):
 * until then it is modelled as one submit's cost and nothing per node, an
 * assumption docs/PERFORMANCE.md states as such. */
static const struct cost_setting {
    const char *env;
    size_t offset;
    uint64_t fallback;
} cost_settings[] = {
    {"VF_EMULATED_LAUNCH_NS", offsetof(vf__emulated_costs, launch_ns), 2650},
    {"VF_EMULATED_RECORD_NS", offsetof(vf__emulated_costs, record_ns), 1290},
    {"VF_EMULATED_WAIT_NS", offsetof(vf__emulated_costs, wait_ns), 200},
    {"VF_EMULATED_QUERY_NS", offsetof(vf__emulated_costs, query_ns), 190},
    {"VF_EMULATED_HOSTFN_NS", offsetof(vf__emulated_costs, hostfn_ns), 0},
    {"VF_EMULATED_GRAPH_LAUNCH_NS",
     offsetof(vf__emulated_costs, graph_launch_ns), 2650},
    {"VF_EMULATED_GRAPH_NODE_NS", offsetof(vf__emulated_costs, graph_node_ns),
     0},
};
#define MAX_COST_NS 1000000000u /* 1 s */

struct vf__event {
    atomic_int refs;   /* acq_rel: the last release frees */
    uint64_t query_ns; /* its stream's query cost (fixed) */
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;           /* lock */
    vf__event_status st; /* lock; fixed once done */
    uint64_t done_ns;    /* lock; fixed once done */
};

typedef enum item_kind {
    ITEM_WORK,
    ITEM_RECORD,
    ITEM_WAIT,
    ITEM_GRAPH
} item_kind;

/* A piece of recorded work, and a node of a device graph: its work and the
 * earlier nodes it carries from, at offsets into the graph's arrays. */
typedef struct rec_work {
    vf_device_fn fn;
    void *arg;
    size_t bytes;
} rec_work;

typedef struct rec_node {
    uint32_t work_at, nwork, carry_at, ncarry, order_at, norder;
} rec_node;

struct vf__devgraph {
    atomic_int refs; /* acq_rel: the holder's, and each queued launch's */
    rec_node *nodes;
    rec_work *work;
    uint32_t *carry, *order;
    uint32_t n, ncap, nw, wcap, nc, ccap, no, ocap;
    /* Made at capture_end: each node's successors (at succ_at[k] in succ,
     * up to succ_at[k + 1]), and whether its work copies (its lane). */
    uint32_t *succ_at, *succ;
    bool *copies;
};

typedef struct item {
    struct item *next;
    item_kind kind;
    vf_device_fn fn;
    void *arg;
    size_t bytes;
    vf__event *ev; /* RECORD, WAIT: a reference, dropped when done */
    bool carry;    /* WAIT: inherit the event's failure */
    /* GRAPH: the graph (a reference), its inputs (the events referenced),
     * each node's event (a reference) and status, all freed when done. */
    vf__devgraph *graph;
    vf__devgraph_input *inputs;
    uint32_t ninputs;
    vf__event **node_events;
    vf__event_status *node_st;
    /* The lanes' schedule (the copy lane's lock): per node its
     * predecessors not done; per lane (0: the stream's, 1: the copy
     * lane's) its ready nodes, in a ring of room n, and those left. */
    uint32_t *waiting;
    uint32_t *ready[2];
    uint32_t head[2], tail[2], left[2];
} item;

/* A stream's copy lane (see the top of the file): a thread that runs the
 * copying nodes of the launch in `job`, then clears it. */
typedef struct emu_lane {
    pthread_mutex_t lock; /* job, stop, and the jobs. schedules */
    pthread_cond_t cond;  /* job posted or over, a node done, stop */
    item *job;
    bool stop, running;
    pthread_t thread;
} emu_lane;

struct vf__stream {
    pthread_mutex_t lock;
    pthread_cond_t work_cond; /* items queued, or stop */
    pthread_cond_t idle_cond; /* the queue drained */
    item *head, *tail;        /* lock */
    bool busy;                /* lock: an item is being processed */
    bool stop;                /* lock */
    pthread_t thread;
    vf__device_params params;
    vf__event_status segment; /* the stream thread's own */
    vf__devgraph *capture;    /* the owner's: the graph being recorded */
    emu_lane copy_lane;       /* its thread made at the first need */
};

/* Keep the calling thread busy for `ns` (a host-side cost). */
static void spin_ns(uint64_t ns)
{
    if (ns == 0)
        return;
    uint64_t end = vf__now_ns() + ns;
    while (vf__now_ns() < end) {
    }
}

int vf__emulated_costs_read(vf__emulated_costs *out, bool use_env)
{
    for (size_t i = 0; i < sizeof cost_settings / sizeof cost_settings[0];
         i++) {
        const struct cost_setting *c = &cost_settings[i];
        uint64_t *slot = (uint64_t *)(void *)((char *)out + c->offset);
        const char *v = use_env ? getenv(c->env) : NULL;
        *slot = c->fallback;
        if (v == NULL || *v == '\0')
            continue; /* empty counts as unset, as the engine's do */
        uint64_t n = 0;
        const char *p = v;
        for (; *p >= '0' && *p <= '9' && n <= MAX_COST_NS; p++)
            n = n * 10 + (uint64_t)(*p - '0');
        if (*p != '\0' || n > MAX_COST_NS)
            return vf__fail(VF_EINVAL,
                            "emulated device: %s=\"%s\" (must be "
                            "decimal digits only, 0..%u ns)",
                            c->env, v, MAX_COST_NS);
        *slot = n;
    }
    return 0;
}

/* --- events ------------------------------------------------------------- */

/* Streams and events made and not yet freed (vf__emulated_live). */
static atomic_long live_streams, live_events;

void vf__emulated_live(long *streams, long *events)
{
    *streams = atomic_load_explicit(&live_streams, memory_order_relaxed);
    *events = atomic_load_explicit(&live_events, memory_order_relaxed);
}

static int event_new(vf__event **out)
{
    vf__event *ev = vf__calloc(1, sizeof *ev);
    if (ev == NULL)
        return vf__fail(VF_ENOMEM, "emulated device: out of memory");
    if (pthread_mutex_init(&ev->lock, NULL) != 0) {
        free(ev);
        return vf__fail(VF_ESYSTEM, "emulated device: pthread_mutex_init");
    }
    if (pthread_cond_init(&ev->done_cond, NULL) != 0) {
        pthread_mutex_destroy(&ev->lock);
        free(ev);
        return vf__fail(VF_ESYSTEM, "emulated device: pthread_cond_init");
    }
    atomic_init(&ev->refs, 1);
    atomic_fetch_add_explicit(&live_events, 1, memory_order_relaxed);
    *out = ev;
    return 0;
}

static void event_retain(vf__event *ev)
{
    atomic_fetch_add_explicit(&ev->refs, 1, memory_order_relaxed);
}

static void event_release(vf__event *ev)
{
    if (ev == NULL || !vf__ref_drop(&ev->refs))
        return;
    pthread_cond_destroy(&ev->done_cond);
    pthread_mutex_destroy(&ev->lock);
    free(ev);
    atomic_fetch_sub_explicit(&live_events, 1, memory_order_relaxed);
}

static void event_complete(vf__event *ev, const vf__event_status *st)
{
    pthread_mutex_lock(&ev->lock);
    ev->st = *st;
    ev->done_ns = vf__now_ns();
    ev->done = true;
    pthread_cond_broadcast(&ev->done_cond);
    pthread_mutex_unlock(&ev->lock);
}

/* Block until ev completes (no cost: the stream thread's waits use it). */
static int wait_done(vf__event *ev, vf__event_status *st)
{
    pthread_mutex_lock(&ev->lock);
    while (!ev->done)
        pthread_cond_wait(&ev->done_cond, &ev->lock);
    vf__event_status s = ev->st;
    pthread_mutex_unlock(&ev->lock);
    if (st != NULL)
        *st = s;
    return s.code;
}

static int event_wait(vf__event *ev, vf__event_status *st)
{
    spin_ns(ev->query_ns);
    return wait_done(ev, st);
}

static int event_query(vf__event *ev)
{
    spin_ns(ev->query_ns);
    pthread_mutex_lock(&ev->lock);
    int rc = ev->done ? ev->st.code : VF_EAGAIN;
    pthread_mutex_unlock(&ev->lock);
    return rc;
}

static uint64_t event_time_ns(vf__event *ev)
{
    pthread_mutex_lock(&ev->lock);
    uint64_t t = ev->done ? ev->done_ns : 0;
    pthread_mutex_unlock(&ev->lock);
    return t;
}

/* --- the stream thread --------------------------------------------------- */

/* Sleep until `deadline` (CLOCK_MONOTONIC ns). */
static void sleep_until(uint64_t deadline)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000u),
                          .tv_nsec = (long)(deadline % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
           EINTR) {
    }
}

/* Work of the segment whose status is *seg (the stream's, or a graph
 * node's). */
static void run_work_in(vf__stream *s, vf_device_fn fn, void *arg, size_t bytes,
                        vf__event_status *seg)
{
    /* A host function's latency: the stream holds until the host runs it
     * (even one that a failed segment then skips). */
    if (s->params.costs.hostfn_ns > 0)
        sleep_until(vf__now_ns() + s->params.costs.hostfn_ns);
    if (seg->code != 0)
        return; /* the segment failed: later work is skipped */
    uint64_t t0 = vf__now_ns();
    int rc = vf__device_run_work(&s->params, fn, arg);
    if (rc != 0) {
        seg->code = rc;
        seg->inherited = false;
        snprintf(seg->message, sizeof seg->message,
                 "emulated device work failed with %d", rc);
    }
    uint64_t cost = s->params.latency_ns;
    if (bytes > 0 && s->params.bytes_per_sec > 0) {
        /* Saturated: past 2^64 ns the conversion is undefined (a copy of
         * SIZE_MAX bytes took 1 ms: found by a user tester). */
        double ns = (double)bytes * 1e9 / (double)s->params.bytes_per_sec;
        cost = ns >= (double)(UINT64_MAX - cost) ? UINT64_MAX
                                                 : cost + (uint64_t)ns;
    }
    if (cost > 0 && vf__now_ns() - t0 < cost)
        sleep_until(cost > UINT64_MAX - t0 ? UINT64_MAX : t0 + cost);
}

static void run_work(vf__stream *s, const item *it)
{
    run_work_in(s, it->fn, it->arg, it->bytes, &s->segment);
}

static void graph_release(vf__devgraph *g);

/* A node inherits a failure: the first it carries from. */
static void inherit(vf__event_status *st, const vf__event_status *from)
{
    if (st->code != 0 || from->code == 0)
        return;
    *st = *from;
    st->inherited = true;
}

/* Run node k of launch `it` (its predecessors are done). */
static void run_node(vf__stream *s, item *it, uint32_t k)
{
    const vf__devgraph *g = it->graph;
    const rec_node *nd = &g->nodes[k];
    vf__event_status *st = it->node_st;
    for (uint32_t c = 0; c < nd->ncarry; c++)
        inherit(&st[k], &st[g->carry[nd->carry_at + c]]);
    for (uint32_t w = 0; w < nd->nwork; w++) {
        const rec_work *rw = &g->work[nd->work_at + w];
        run_work_in(s, rw->fn, rw->arg, rw->bytes, &st[k]);
    }
    event_complete(it->node_events[k], &st[k]);
    event_release(it->node_events[k]);
}

/* Lane `lane` of launch `it`: its nodes as they become ready (see the top
 * of the file); a node done readies its successors on either lane. */
static void run_lane(vf__stream *s, item *it, int lane)
{
    const vf__devgraph *g = it->graph;
    struct emu_lane *l = &s->copy_lane;
    pthread_mutex_lock(&l->lock);
    while (it->left[lane] != 0) {
        if (it->head[lane] == it->tail[lane]) {
            pthread_cond_wait(&l->cond, &l->lock);
            continue;
        }
        uint32_t k = it->ready[lane][it->head[lane]++ % g->n];
        it->left[lane]--;
        pthread_mutex_unlock(&l->lock);
        run_node(s, it, k);
        pthread_mutex_lock(&l->lock);
        bool other = false;
        for (uint32_t i = g->succ_at[k]; i < g->succ_at[k + 1]; i++) {
            uint32_t to = g->succ[i];
            if (--it->waiting[to] == 0) {
                int tl = g->copies[to];
                it->ready[tl][it->tail[tl]++ % g->n] = to;
                other |= tl != lane;
            }
        }
        if (other)
            pthread_cond_broadcast(&l->cond);
    }
    pthread_mutex_unlock(&l->lock);
}

static void *lane_main(void *arg)
{
    vf__stream *s = arg;
    emu_lane *l = &s->copy_lane;
    pthread_setname_np(pthread_self(), "vf-emu-copy");
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (l->job == NULL && !l->stop)
            pthread_cond_wait(&l->cond, &l->lock);
        if (l->job == NULL)
            break;
        item *it = l->job;
        pthread_mutex_unlock(&l->lock);
        run_lane(s, it, 1);
        pthread_mutex_lock(&l->lock);
        l->job = NULL;
        pthread_cond_broadcast(&l->cond);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* The copy lane's thread, made if need be: false when it cannot be (the
 * stream thread then runs every node itself). Stream thread only. */
static bool lane_up(vf__stream *s)
{
    emu_lane *l = &s->copy_lane;
    if (!l->running) {
        l->stop = false;
        l->running = pthread_create(&l->thread, NULL, lane_main, s) == 0;
    }
    return l->running;
}

static void lane_down(vf__stream *s)
{
    emu_lane *l = &s->copy_lane;
    if (!l->running)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    l->running = false;
}

/* A device graph's launch: its inputs, then its nodes, on the two lanes
 * when some copy and some do not (see the top of the file). */
static void run_graph(vf__stream *s, item *it)
{
    const vf__devgraph *g = it->graph;
    vf__event_status *st = it->node_st; /* zeroed */
    for (uint32_t i = 0; i < it->ninputs; i++) {
        vf__event_status in;
        if (wait_done(it->inputs[i].ev, &in) != 0 && it->inputs[i].carry)
            inherit(&st[it->inputs[i].node], &in);
        event_release(it->inputs[i].ev);
    }
    uint32_t ncopies = 0;
    for (uint32_t k = 0; k < g->n; k++)
        ncopies += g->copies[k];
    if (ncopies == 0 || ncopies == g->n || !lane_up(s)) {
        for (uint32_t k = 0; k < g->n; k++) /* node order: one lane */
            run_node(s, it, k);
    } else {
        for (uint32_t k = 0; k < g->n; k++) {
            const rec_node *nd = &g->nodes[k];
            int lane = g->copies[k];
            it->waiting[k] = nd->norder;
            it->left[lane]++;
            if (nd->norder == 0)
                it->ready[lane][it->tail[lane]++] = k;
        }
        emu_lane *l = &s->copy_lane;
        pthread_mutex_lock(&l->lock);
        l->job = it;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->lock);
        run_lane(s, it, 0);
        pthread_mutex_lock(&l->lock);
        while (l->job != NULL)
            pthread_cond_wait(&l->cond, &l->lock);
        pthread_mutex_unlock(&l->lock);
    }
    graph_release(it->graph);
    free(it->inputs);
    free(it->node_events);
    free(it->node_st);
    free(it->waiting);
}

static void run_item(vf__stream *s, item *it)
{
    switch (it->kind) {
    case ITEM_WORK:
        run_work(s, it);
        break;
    case ITEM_RECORD:
        event_complete(it->ev, &s->segment);
        memset(&s->segment, 0, sizeof s->segment); /* a clean segment */
        break;
    case ITEM_WAIT: {
        vf__event_status st;
        if (wait_done(it->ev, &st) != 0 && it->carry && s->segment.code == 0) {
            s->segment = st;
            s->segment.inherited = true;
        }
        break;
    }
    case ITEM_GRAPH:
        run_graph(s, it);
        break;
    }
    event_release(it->ev);
    free(it);
}

static void *stream_main(void *arg)
{
    vf__stream *s = arg;
    pthread_setname_np(pthread_self(), "vf-emu-stream");
    /* Latencies are emulated with sleeps: Linux's default timer slack
     * (50 us) would add its own to every one. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&s->lock);
    for (;;) {
        item *it = s->head;
        if (it == NULL) {
            s->busy = false;
            pthread_cond_broadcast(&s->idle_cond);
            if (s->stop)
                break;
            pthread_cond_wait(&s->work_cond, &s->lock);
            continue;
        }
        s->head = it->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->lock);
        run_item(s, it);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Queue an item (never fails: the item is made by the caller). */
static void enqueue(vf__stream *s, item *it)
{
    it->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->tail != NULL)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    s->busy = true;
    pthread_cond_signal(&s->work_cond);
    pthread_mutex_unlock(&s->lock);
}

static item *item_new(item_kind kind)
{
    item *it = vf__calloc(1, sizeof *it);
    if (it == NULL)
        vf__fail(VF_ENOMEM, "emulated device: out of memory");
    else
        it->kind = kind;
    return it;
}

/* --- the class ---------------------------------------------------------- */

static int count(void)
{
    return EMULATED_DEVICES;
}

static int stream_create(int id, const vf__device_params *params,
                         vf__stream **out)
{
    *out = NULL;
    if (id < 0 || id >= EMULATED_DEVICES)
        return vf__fail(VF_ENODEV, "no emulated device %d (ids 0..%d)", id,
                        EMULATED_DEVICES - 1);
    vf__stream *s = vf__calloc(1, sizeof *s);
    if (s == NULL)
        return vf__fail(VF_ENOMEM, "emulated device: out of memory");
    /* NULL (the device layer's own tests): no slowness, the costs the
     * environment says now. */
    int rc = 0;
    if (params != NULL)
        s->params = *params;
    else
        rc = vf__emulated_costs_read(&s->params.costs, true);
    if (rc != 0) {
        free(s);
        return rc;
    }
    int made = 0;
    if (pthread_mutex_init(&s->lock, NULL) == 0 && ++made &&
        pthread_cond_init(&s->work_cond, NULL) == 0 && ++made &&
        pthread_cond_init(&s->idle_cond, NULL) == 0 && ++made &&
        pthread_mutex_init(&s->copy_lane.lock, NULL) == 0 && ++made &&
        pthread_cond_init(&s->copy_lane.cond, NULL) == 0 && ++made &&
        pthread_create(&s->thread, NULL, stream_main, s) == 0) {
        atomic_fetch_add_explicit(&live_streams, 1, memory_order_relaxed);
        *out = s;
        return 0;
    }
    if (made > 4)
        pthread_cond_destroy(&s->copy_lane.cond);
    if (made > 3)
        pthread_mutex_destroy(&s->copy_lane.lock);
    if (made > 2)
        pthread_cond_destroy(&s->idle_cond);
    if (made > 1)
        pthread_cond_destroy(&s->work_cond);
    if (made > 0)
        pthread_mutex_destroy(&s->lock);
    free(s);
    return vf__fail(VF_ESYSTEM, "emulated device: cannot start a stream "
                                "thread");
}

static void stream_stop(vf__stream *s);

static void stream_destroy(vf__stream *s)
{
    stream_stop(s);
    pthread_cond_destroy(&s->copy_lane.cond);
    pthread_mutex_destroy(&s->copy_lane.lock);
    pthread_cond_destroy(&s->idle_cond);
    pthread_cond_destroy(&s->work_cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
    atomic_fetch_sub_explicit(&live_streams, 1, memory_order_relaxed);
}

static void stream_stop(vf__stream *s)
{
    /* A stopped stream has no thread to join: one stopped before, or one
     * whose start could not make its thread (a start that failed stops
     * every stream again; it joined a thread twice, and crashed: found
     * by a user tester). The engine's lifecycle calls these one at a
     * time: no lock for `stop` here. */
    if (s->stop)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = true; /* the thread drains the queue first */
    pthread_cond_signal(&s->work_cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    lane_down(s); /* idle: the stream thread drained its queue */
}

static int stream_start(vf__stream *s)
{
    if (!s->stop)
        return 0;    /* running: started before a start that failed */
    s->stop = false; /* no thread runs: no lock needed */
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        s->stop = true; /* still none to join */
        return vf__fail(VF_ESYSTEM, "emulated device: cannot start a stream "
                                    "thread");
    }
    return 0;
}

static void *stream_handle(vf__stream *s)
{
    return s;
}

static int capture_work(vf__stream *s, vf_device_fn fn, void *arg,
                        size_t bytes);

static int submit(vf__stream *s, vf_device_fn fn, void *arg, size_t bytes)
{
    spin_ns(s->params.costs.launch_ns);
    if (s->capture != NULL)
        return capture_work(s, fn, arg, bytes);
    item *it = item_new(ITEM_WORK);
    if (it == NULL)
        return VF_ENOMEM;
    it->fn = fn;
    it->arg = arg;
    it->bytes = bytes;
    enqueue(s, it);
    return 0;
}

static int not_in_capture(const char *what)
{
    return vf__fail(VF_EINVAL,
                    "emulated device: %s while the stream records a graph",
                    what);
}

static int record(vf__stream *s, vf__event **out)
{
    if (s->capture != NULL)
        return not_in_capture("an event record");
    spin_ns(s->params.costs.record_ns);
    vf__event *ev = NULL;
    int rc = event_new(&ev);
    if (rc != 0)
        return rc;
    ev->query_ns = s->params.costs.query_ns;
    /* On an idle stream the thread touches nothing: complete it here, at
     * once, as CUDA's event on an idle stream is. */
    pthread_mutex_lock(&s->lock);
    if (!s->busy && s->head == NULL) {
        event_complete(ev, &s->segment);
        memset(&s->segment, 0, sizeof s->segment);
        pthread_mutex_unlock(&s->lock);
        *out = ev;
        return 0;
    }
    pthread_mutex_unlock(&s->lock);
    item *it = item_new(ITEM_RECORD);
    if (it == NULL) {
        event_release(ev);
        return VF_ENOMEM;
    }
    event_retain(ev); /* the queue's reference */
    it->ev = ev;
    enqueue(s, it);
    *out = ev;
    return 0;
}

static int stream_wait(vf__stream *s, vf__event *ev, bool carry)
{
    if (s->capture != NULL)
        return not_in_capture("a stream wait");
    spin_ns(s->params.costs.wait_ns);
    item *it = item_new(ITEM_WAIT);
    if (it == NULL)
        return VF_ENOMEM;
    event_retain(ev);
    it->ev = ev;
    it->carry = carry;
    enqueue(s, it);
    return 0;
}

static int stream_sync(vf__stream *s)
{
    spin_ns(s->params.costs.query_ns);
    pthread_mutex_lock(&s->lock);
    while (s->busy)
        pthread_cond_wait(&s->idle_cond, &s->lock);
    /* Idle: the thread wrote `segment` before it took the lock last. */
    int rc = s->segment.code;
    pthread_mutex_unlock(&s->lock);
    return rc; /* the open segment's failure, not yet in an event */
}

/* --- device graphs -------------------------------------------------------- */

/* Room for one more of an array of `size`-byte elements. */
static bool grow(void **v, uint32_t n, uint32_t *cap, size_t size)
{
    if (n < *cap)
        return true;
    uint32_t ncap = *cap ? 2 * *cap : 16;
    void *nv = ncap > *cap ? realloc(*v, (size_t)ncap * size) : NULL;
    if (nv == NULL)
        return false;
    *v = nv;
    *cap = ncap;
    return true;
}

static int out_of_memory(void)
{
    return vf__fail(VF_ENOMEM, "emulated device: out of memory");
}

static int capture_work(vf__stream *s, vf_device_fn fn, void *arg, size_t bytes)
{
    vf__devgraph *g = s->capture;
    if (g->n == 0)
        return vf__fail(VF_EINVAL, "emulated device: work recorded before "
                                   "the graph's first node");
    if (!grow((void **)&g->work, g->nw, &g->wcap, sizeof *g->work))
        return out_of_memory();
    g->work[g->nw++] = (rec_work){fn, arg, bytes};
    g->nodes[g->n - 1].nwork++;
    return 0;
}

static void graph_release(vf__devgraph *g)
{
    if (g == NULL || !vf__ref_drop(&g->refs))
        return;
    free(g->nodes);
    free(g->work);
    free(g->carry);
    free(g->order);
    free(g->succ_at);
    free(g->succ);
    free(g->copies);
    free(g);
}

static int capture_begin(vf__stream *s)
{
    if (s->capture != NULL)
        return vf__fail(VF_EINVAL, "emulated device: the stream already "
                                   "records a graph");
    vf__devgraph *g = vf__calloc(1, sizeof *g);
    if (g == NULL)
        return out_of_memory();
    atomic_init(&g->refs, 1);
    s->capture = g;
    return 0;
}

static int capture_node(vf__stream *s, const uint32_t *order, uint32_t norder,
                        const uint32_t *carry, uint32_t ncarry)
{
    vf__devgraph *g = s->capture;
    if (g == NULL)
        return vf__fail(VF_EINVAL, "emulated device: no graph is recorded");
    for (uint32_t c = 0; c < ncarry; c++)
        if (carry[c] >= g->n)
            return vf__fail(VF_EINVAL,
                            "emulated device: node %u carries from node %u, "
                            "not an earlier one",
                            g->n, carry[c]);
    for (uint32_t c = 0; c < norder; c++)
        if (order[c] >= g->n)
            return vf__fail(VF_EINVAL,
                            "emulated device: node %u follows node %u, not "
                            "an earlier one",
                            g->n, order[c]);
    if (!grow((void **)&g->nodes, g->n, &g->ncap, sizeof *g->nodes))
        return out_of_memory();
    for (uint32_t c = 0; c < ncarry; c++) {
        if (!grow((void **)&g->carry, g->nc, &g->ccap, sizeof *g->carry))
            return out_of_memory();
        g->carry[g->nc++] = carry[c];
    }
    for (uint32_t c = 0; c < norder; c++) {
        if (!grow((void **)&g->order, g->no, &g->ocap, sizeof *g->order))
            return out_of_memory();
        g->order[g->no++] = order[c];
    }
    g->nodes[g->n] = (rec_node){.work_at = g->nw,
                                .carry_at = g->nc - ncarry,
                                .ncarry = ncarry,
                                .order_at = g->no - norder,
                                .norder = norder};
    g->n++;
    return 0;
}

static int capture_end(vf__stream *s, vf__devgraph **out)
{
    vf__devgraph *g = s->capture;
    if (g == NULL)
        return vf__fail(VF_EINVAL, "emulated device: no graph is recorded");
    s->capture = NULL;
    if (out == NULL) {
        graph_release(g);
        return 0;
    }
    /* The successors (the order lists, reversed) and the lanes. */
    g->succ_at = vf__calloc((size_t)g->n + 1, sizeof *g->succ_at);
    g->succ = vf__malloc((g->no ? g->no : 1) * sizeof *g->succ);
    g->copies = vf__calloc(g->n ? g->n : 1, sizeof *g->copies);
    if (g->succ_at == NULL || g->succ == NULL || g->copies == NULL) {
        graph_release(g);
        return out_of_memory();
    }
    for (uint32_t i = 0; i < g->no; i++)
        g->succ_at[g->order[i] + 1]++;
    for (uint32_t k = 0; k < g->n; k++)
        g->succ_at[k + 1] += g->succ_at[k];
    for (uint32_t k = 0; k < g->n; k++) {
        const rec_node *nd = &g->nodes[k];
        for (uint32_t p = 0; p < nd->norder; p++) /* fills by pred's slot */
            g->succ[g->succ_at[g->order[nd->order_at + p]]++] = k;
        g->copies[k] = nd->nwork != 0 && g->work[nd->work_at].bytes > 0;
    }
    for (uint32_t k = g->n; k > 0; k--) /* each slot back at its start */
        g->succ_at[k] = g->succ_at[k - 1];
    g->succ_at[0] = 0;
    *out = g;
    return 0;
}

static int graph_launch(vf__devgraph *g, vf__stream *s,
                        const vf__devgraph_input *inputs, uint32_t ninputs,
                        vf__event **node_events)
{
    if (s->capture != NULL)
        return not_in_capture("a graph launch");
    for (uint32_t i = 0; i < ninputs; i++)
        if (inputs[i].node >= g->n)
            return vf__fail(VF_EINVAL,
                            "emulated device: an input for node %u of a "
                            "graph of %u",
                            inputs[i].node, g->n);
    spin_ns(s->params.costs.graph_launch_ns +
            s->params.costs.graph_node_ns * g->n);
    item *it = item_new(ITEM_GRAPH);
    if (it == NULL)
        return VF_ENOMEM;
    it->node_events = vf__calloc(g->n ? g->n : 1, sizeof *it->node_events);
    it->node_st = vf__calloc(g->n ? g->n : 1, sizeof *it->node_st);
    size_t room = g->n ? g->n : 1;
    it->waiting = vf__malloc(room * 3 * sizeof *it->waiting);
    if (it->waiting != NULL) {
        it->ready[0] = it->waiting + room;
        it->ready[1] = it->waiting + 2 * room;
    }
    it->inputs = vf__malloc((ninputs ? ninputs : 1) * sizeof *it->inputs);
    uint32_t made = 0;
    bool have = it->node_events != NULL && it->node_st != NULL &&
                it->waiting != NULL && it->inputs != NULL;
    for (; have && made < g->n; made++)
        if (event_new(&it->node_events[made]) != 0)
            break;
    if (!have || made < g->n) {
        for (uint32_t k = 0; k < made; k++)
            event_release(it->node_events[k]);
        free(it->node_events);
        free(it->node_st);
        free(it->waiting);
        free(it->inputs);
        free(it);
        return out_of_memory();
    }
    for (uint32_t k = 0; k < g->n; k++) {
        it->node_events[k]->query_ns = s->params.costs.query_ns;
        event_retain(it->node_events[k]); /* the queue's reference */
        node_events[k] = it->node_events[k];
    }
    for (uint32_t i = 0; i < ninputs; i++) {
        event_retain(inputs[i].ev);
        it->inputs[i] = inputs[i];
    }
    it->ninputs = ninputs;
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    it->graph = g;
    enqueue(s, it);
    return 0;
}

const vf__device_class vf__emulated_class = {
    .type = VF_DEVICE_EMULATED,
    .name = "emulated",
    .usable_after_fork = true,
    .count = count,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_handle = stream_handle,
    .submit = submit,
    .record = record,
    .stream_wait = stream_wait,
    .event_wait = event_wait,
    .event_query = event_query,
    .event_time_ns = event_time_ns,
    .event_retain = event_retain,
    .event_release = event_release,
    .stream_sync = stream_sync,
    .stream_stop = stream_stop,
    .stream_start = stream_start,
    .capture_begin = capture_begin,
    .capture_node = capture_node,
    .capture_end = capture_end,
    .graph_launch = graph_launch,
    .graph_release = graph_release,
};
