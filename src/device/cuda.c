/*
 * cuda.c: the CUDA device class (VF_DEVICE_CUDA), and all of
 * libvarflow-cuda (include/varflow_cuda.h), built when CMake finds the CUDA
 * toolkit (-DVF_WITH_CUDA=AUTO|ON|OFF, cmake/VarflowCuda.cmake); the
 * device's ordinal is vf_device.id.
 *
 * The library is apart from libvarflow so that the core links no CUDA
 * runtime. vf_cuda_register() hands the class to the core through
 * vf__device_class_register (device.h), the one internal name libvarflow
 * exports; from then on the core reaches the class through its table like
 * a built-in one. The core lends back its allocation funnel (host), which
 * every allocation here goes through; details are set with the public
 * vf_error_set_detail, the buffer the core's own vf__fail writes.
 *
 * A stream is a cudaStream_t (non-blocking: it never waits on the legacy
 * default stream); an event is a cudaEvent_t in a reference-counted
 * wrapper; stream_wait is cudaStreamWaitEvent, so ordering between streams
 * and devices happens on the GPU, and event_wait is cudaEventSynchronize.
 *
 * Work submitted through the interface (vf_run_submit) runs as a host
 * function of the stream (cudaLaunchHostFunc). A host function cannot
 * report an error to CUDA, so the stream keeps the segment's status
 * itself (device.h): the host function skips its fn once the segment has
 * failed and records a failure; a record closes the segment with one more
 * host function that copies the status into the event's wrapper before
 * the event completes; a stream_wait on an event whose segment had host
 * work adds a host function that inherits its failure. Streams that only
 * ever carry kernels and copies pay none of this: their errors are CUDA's
 * own, sticky for the context, and reported by cudaEventSynchronize.
 *
 * cudaEvent_t objects are reused: a released one goes back to its
 * device's pool (creating and destroying one per op costs more than the
 * op's own record and wait).
 *
 * Events of one stream complete in order: each carries its place in its
 * stream, and the stream's shared progress block remembers the latest one
 * seen complete, so waiting for an earlier one costs no CUDA call.
 *
 * Time stamps: each stream records a reference event at creation, whose
 * host time is taken once it completed; an event's time is that plus
 * cudaEventElapsedTime from the reference.
 *
 * Host functions may make no CUDA call, so what they share with an event
 * is a small status block of its own (reference counted, plain memory):
 * the last reference to a cudaEvent_t is never dropped inside one.
 *
 * Device graphs (device.h) are CUDA graphs made by stream capture
 * (cudaStreamBeginCapture, thread-local mode): each node ends with an
 * external event record (cudaEventRecordWithFlags, cudaEventRecordExternal),
 * so every node has an event of its own that each launch records again;
 * each node's work is captured after its predecessors' ends only
 * (cudaStreamUpdateCaptureDependencies), so the CUDA graph has the
 * varflow graph's edges and CUDA runs the nodes neither orders at once:
 * its events complete out of order, and are marked so (no stream
 * progress). A node's carry list is not needed here: a failed kernel or
 * copy is a sticky error of the context, which every later event
 * reports. Host work (vf_run_submit) cannot be recorded (its
 * status block is per call): submitting it while recording fails with
 * VF_ENOTSUP. A launch makes the stream wait for its inputs; an input that
 * carries and closes a segment with host work has its status read on the
 * host first (cudaEventSynchronize: it is earlier work), and a failed one
 * refuses the launch (VF_ENOTSUP), since a CUDA graph's nodes cannot be
 * skipped one by one. A launch's events are wrappers of the graph's own
 * cudaEvent_t (each holds the graph), which the next launch records
 * again: CUDA runs the launches of one executable graph one after the
 * other, so a wait on an earlier launch's event that comes after a later
 * launch waits for that one too (longer than needed, never too short), and
 * an event's record is its launch's from the cudaGraphLaunch call on, as
 * a cudaEventRecord's is from the call.
 *
 * Lock order: the stream's status lock and a status block's lock are
 * leaves; no user code runs under them. CUDA's own calls are made with no
 * varflow lock held.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include <varflow_cuda.h>

#include "base/deadline.h"
#include "base/ref.h"
#include "device/device.h"

/* The core's services, set by the registration before the core can reach
 * the class (its release publishes both): no function of the class runs
 * before. */
static const vf__device_host *host;

static void *cuda_malloc(size_t size)
{
    return host->malloc(size);
}

static void *cuda_calloc(size_t count, size_t size)
{
    return host->calloc(count, size);
}

/* A closed segment's status, filled by a host function before the event
 * that closes the segment completes. */
typedef struct seg_status {
    atomic_int refs; /* acq_rel: the last release frees */
    pthread_mutex_t lock;
    vf__event_status st; /* lock */
} seg_status;

/* How far a stream's events are known complete (shared by the stream and
 * its events, which may outlive it). */
typedef struct progress {
    atomic_int refs;           /* acq_rel: the last release frees */
    _Atomic uint64_t done_seq; /* relaxed max; ordered by CUDA's own sync */
    int device;
    cudaEvent_t ref_ev;   /* the time reference (destroyed with the block) */
    uint64_t ref_host_ns; /* its host time */
} progress;

struct vf__event {
    atomic_int refs; /* acq_rel: the last release destroys */
    progress *prog;  /* its stream's */
    uint64_t seq;    /* its place in its stream (1, 2, ...) */
    cudaEvent_t ev;
    int device;
    seg_status *status;  /* NULL: the segment had no host work */
    vf__devgraph *graph; /* a node's event of a graph's launch: the graph,
                            which owns `ev` (a reference); else NULL.
                            Such an event completes out of its stream's
                            order: `seq` and the progress are not used */
};

/* A device graph: the instantiated CUDA graph and each node's end event. */
struct vf__devgraph {
    atomic_int refs; /* acq_rel: the holder's, and each launch's event's */
    int device;
    cudaGraphExec_t exec;       /* NULL while recording */
    cudaEvent_t *ends;          /* per node closed: its end's event */
    cudaGraphNode_t *end_nodes; /* and the capture's node recording it */
    uint32_t n, nclosed, cap;
    cudaError_t err; /* the first failure while recording */
};

struct vf__stream {
    cudaStream_t st;
    progress *prog;
    uint64_t next_seq; /* the stream's owner only */
    int device;
    pthread_mutex_t lock;     /* segment, host_work */
    vf__event_status segment; /* lock */
    bool host_work;           /* the open segment had host functions */
    vf__devgraph *capture;    /* the owner's: the graph being recorded */
    /* How host work runs (run_work, owner; a real device needs none of
     * its slowing down). */
    vf__device_params params;
};

/* A CUDA error as a varflow one: VF_EDEVICE with CUDA's words. */
static int cuda_fail(cudaError_t err, const char *what)
{
    return vf_error_set_detail(VF_EDEVICE, "CUDA: %s: %s (%s)", what,
                               cudaGetErrorName(err), cudaGetErrorString(err));
}

/* --- the pool of cudaEvent_t, per device --------------------------------- */

#define POOLED_DEVICES 64
#define POOL_CAP 4096 /* per device; beyond it, released events are freed */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaEvent_t *pool[POOLED_DEVICES]; /* pool_lock */
static int pool_len[POOLED_DEVICES], pool_cap[POOLED_DEVICES];

/* A cudaEvent_t of `device` (the calling thread's current device). */
static cudaError_t pooled_event(int device, cudaEvent_t *out)
{
    if (device >= 0 && device < POOLED_DEVICES) {
        pthread_mutex_lock(&pool_lock);
        bool have = pool_len[device] > 0;
        if (have)
            *out = pool[device][--pool_len[device]];
        pthread_mutex_unlock(&pool_lock);
        if (have)
            return cudaSuccess;
    }
    return cudaEventCreate(out);
}

static void unpooled_event(int device, cudaEvent_t ev)
{
    if (device >= 0 && device < POOLED_DEVICES) {
        pthread_mutex_lock(&pool_lock);
        if (pool_len[device] == pool_cap[device] &&
            pool_cap[device] < POOL_CAP) {
            int cap = pool_cap[device] ? 2 * pool_cap[device] : 64;
            cudaEvent_t *t = cuda_malloc((size_t)cap * sizeof *t);
            if (t != NULL) {
                if (pool_len[device] > 0)
                    memcpy(t, pool[device],
                           (size_t)pool_len[device] * sizeof *t);
                free(pool[device]);
                pool[device] = t;
                pool_cap[device] = cap;
            }
        }
        bool kept = pool_len[device] < pool_cap[device];
        if (kept)
            pool[device][pool_len[device]++] = ev;
        pthread_mutex_unlock(&pool_lock);
        if (kept)
            return;
    }
    cudaSetDevice(device);
    cudaEventDestroy(ev);
}

/* --- status blocks and events -------------------------------------------- */

static seg_status *status_new(void)
{
    seg_status *b = cuda_calloc(1, sizeof *b);
    if (b != NULL && pthread_mutex_init(&b->lock, NULL) != 0) {
        free(b);
        b = NULL;
    }
    if (b == NULL) {
        vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
        return NULL;
    }
    atomic_init(&b->refs, 1);
    return b;
}

static seg_status *status_retain(seg_status *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

static void status_release(seg_status *b)
{
    if (b == NULL || !vf__ref_drop(&b->refs))
        return;
    pthread_mutex_destroy(&b->lock);
    free(b);
}

static vf__event_status status_get(seg_status *b)
{
    vf__event_status st = {0};
    if (b != NULL) {
        pthread_mutex_lock(&b->lock);
        st = b->st;
        pthread_mutex_unlock(&b->lock);
    }
    return st;
}

/* Never from a host function (it calls CUDA): events and streams only. */
static void progress_release(progress *p)
{
    if (p == NULL || !vf__ref_drop(&p->refs))
        return;
    if (p->ref_ev != NULL) {
        cudaSetDevice(p->device);
        cudaEventDestroy(p->ref_ev);
    }
    free(p);
}

/* Whether `e` is known complete; else remember when it is seen so. */
static bool known_done(const vf__event *e)
{
    return e->graph == NULL &&
           atomic_load_explicit(&e->prog->done_seq, memory_order_acquire) >=
               e->seq;
}

static void seen_done(vf__event *e)
{
    if (e->graph != NULL)
        return; /* out of its stream's order */
    uint64_t d = atomic_load_explicit(&e->prog->done_seq, memory_order_relaxed);
    while (d < e->seq && !atomic_compare_exchange_weak_explicit(
                             &e->prog->done_seq, &d, e->seq,
                             memory_order_release, memory_order_relaxed)) {
    }
}

static void event_retain(vf__event *e)
{
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

static void graph_release(vf__devgraph *g);

static void event_release(vf__event *e)
{
    if (e == NULL || !vf__ref_drop(&e->refs))
        return;
    if (e->graph != NULL)
        graph_release(e->graph); /* the graph's event */
    else
        unpooled_event(e->device, e->ev);
    status_release(e->status);
    progress_release(e->prog);
    free(e);
}

static int event_wait(vf__event *e, vf__event_status *st)
{
    vf__event_status s = {0};
    cudaError_t err = known_done(e) ? cudaSuccess : cudaEventSynchronize(e->ev);
    if (err == cudaSuccess)
        seen_done(e);
    if (err != cudaSuccess) {
        s.code = cuda_fail(err, "cudaEventSynchronize");
        snprintf(s.message, sizeof s.message, "%s", vf_error_detail());
    } else {
        s = status_get(e->status);
    }
    if (st != NULL)
        *st = s;
    return s.code;
}

static int event_query(vf__event *e)
{
    cudaError_t err = known_done(e) ? cudaSuccess : cudaEventQuery(e->ev);
    if (err == cudaSuccess)
        seen_done(e);
    if (err == cudaErrorNotReady)
        return VF_EAGAIN;
    if (err != cudaSuccess)
        return cuda_fail(err, "cudaEventQuery");
    return status_get(e->status).code;
}

static uint64_t event_time_ns(vf__event *e)
{
    float ms = 0;
    if (cudaEventElapsedTime(&ms, e->prog->ref_ev, e->ev) != cudaSuccess)
        return 0; /* not complete, or no timing */
    return e->prog->ref_host_ns + (uint64_t)((double)ms * 1e6);
}

/* --- host functions ------------------------------------------------------ */

typedef struct host_call {
    vf__stream *s;
    vf_device_fn fn;
    void *arg;
    seg_status *status; /* close: to fill; wait: the waited event's */
} host_call;

static void CUDART_CB run_host_work(void *p)
{
    host_call *c = p;
    vf__stream *s = c->s;
    pthread_mutex_lock(&s->lock);
    bool failed = s->segment.code != 0;
    pthread_mutex_unlock(&s->lock);
    /* A failed segment skips it. */
    int rc = failed ? 0 : vf__device_run_work(&s->params, c->fn, c->arg);
    if (rc != 0) {
        pthread_mutex_lock(&s->lock);
        if (s->segment.code == 0) {
            s->segment.code = rc;
            s->segment.inherited = false;
            snprintf(s->segment.message, sizeof s->segment.message,
                     "CUDA host work failed with %d", rc);
        }
        pthread_mutex_unlock(&s->lock);
    }
    free(c);
}

static void CUDART_CB close_segment(void *p)
{
    host_call *c = p;
    vf__stream *s = c->s;
    pthread_mutex_lock(&s->lock);
    vf__event_status st = s->segment;
    memset(&s->segment, 0, sizeof s->segment);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&c->status->lock);
    c->status->st = st;
    pthread_mutex_unlock(&c->status->lock);
    status_release(c->status);
    free(c);
}

static void CUDART_CB inherit_failure(void *p)
{
    host_call *c = p;
    /* Complete: the stream waited for its event. */
    vf__event_status st = status_get(c->status);
    if (st.code != 0) {
        pthread_mutex_lock(&c->s->lock);
        if (c->s->segment.code == 0) {
            c->s->segment = st;
            c->s->segment.inherited = true;
        }
        pthread_mutex_unlock(&c->s->lock);
    }
    status_release(c->status);
    free(c);
}

static int launch(vf__stream *s, cudaHostFn_t fn, host_call *c)
{
    cudaError_t err = cudaLaunchHostFunc(s->st, fn, c);
    if (err != cudaSuccess) {
        free(c);
        return cuda_fail(err, "cudaLaunchHostFunc");
    }
    return 0;
}

/* --- the class ------------------------------------------------------------ */

static int count(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        vf_error_set_detail(VF_ENODEV, "no CUDA device: cudaGetDeviceCount: %s",
                            cudaGetErrorString(err));
        return 0;
    }
    if (n == 0)
        vf_error_set_detail(VF_ENODEV, "no CUDA device: the driver sees none");
    return n;
}

static int stream_create(int id, const vf__device_params *params,
                         vf__stream **out)
{
    *out = NULL;
    int n = count();
    if (id < 0 || id >= n)
        return vf_error_set_detail(VF_ENODEV, "no CUDA device %d (%d found)",
                                   id, n);
    vf__stream *s = cuda_calloc(1, sizeof *s);
    if (s == NULL)
        return vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return vf_error_set_detail(VF_ESYSTEM,
                                   "CUDA device: pthread_mutex_init");
    }
    s->device = id;
    if (params != NULL)
        s->params = *params;
    s->prog = cuda_calloc(1, sizeof *s->prog);
    if (s->prog == NULL) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        return vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
    }
    atomic_init(&s->prog->refs, 1);
    s->prog->device = id;
    cudaError_t err = cudaSetDevice(id);
    const char *what = "cudaSetDevice";
    if (err == cudaSuccess) {
        what = "cudaStreamCreateWithFlags";
        err = cudaStreamCreateWithFlags(&s->st, cudaStreamNonBlocking);
    }
    if (err == cudaSuccess) {
        what = "cudaEventCreate";
        err = cudaEventCreate(&s->prog->ref_ev);
        if (err != cudaSuccess)
            cudaStreamDestroy(s->st);
    }
    if (err == cudaSuccess) {
        what = "cudaEventRecord";
        err = cudaEventRecord(s->prog->ref_ev, s->st);
        if (err == cudaSuccess)
            err = cudaEventSynchronize(s->prog->ref_ev);
        s->prog->ref_host_ns = vf__now_ns();
        if (err != cudaSuccess)
            cudaStreamDestroy(s->st); /* the block destroys the event */
    }
    if (err != cudaSuccess) {
        progress_release(s->prog);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return cuda_fail(err, what);
    }
    *out = s;
    return 0;
}

static void stream_destroy(vf__stream *s)
{
    cudaSetDevice(s->device);
    cudaStreamSynchronize(s->st);
    cudaStreamDestroy(s->st);
    progress_release(s->prog);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void *stream_handle(vf__stream *s)
{
    return (void *)s->st;
}

static int submit(vf__stream *s, vf_device_fn fn, void *arg, size_t bytes)
{
    (void)bytes;
    if (s->capture != NULL)
        return vf_error_set_detail(
            VF_ENOTSUP, "CUDA device: host work (vf_run_submit) cannot be "
                        "recorded into a CUDA graph (a graph with "
                        "vf_graph_device_replay may submit kernels and "
                        "copies only)");
    host_call *c = cuda_calloc(1, sizeof *c);
    if (c == NULL)
        return vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
    *c = (host_call){.s = s, .fn = fn, .arg = arg};
    pthread_mutex_lock(&s->lock);
    s->host_work = true;
    pthread_mutex_unlock(&s->lock);
    return launch(s, run_host_work, c);
}

static int not_in_capture(const char *what)
{
    return vf_error_set_detail(VF_EINVAL,
                               "CUDA device: %s while the stream records "
                               "a graph",
                               what);
}

static int record(vf__stream *s, vf__event **out)
{
    if (s->capture != NULL)
        return not_in_capture("an event record");
    vf__event *e = cuda_calloc(1, sizeof *e);
    if (e == NULL)
        return vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
    atomic_init(&e->refs, 1);
    atomic_fetch_add_explicit(&s->prog->refs, 1, memory_order_relaxed);
    e->prog = s->prog;
    e->seq = ++s->next_seq;
    e->device = s->device;
    cudaError_t err = cudaSetDevice(s->device);
    if (err == cudaSuccess)
        err = pooled_event(s->device, &e->ev);
    if (err != cudaSuccess) {
        progress_release(e->prog);
        free(e);
        return cuda_fail(err, "cudaEventCreate");
    }
    pthread_mutex_lock(&s->lock);
    bool host_work = s->host_work; /* cleared once the record succeeded */
    pthread_mutex_unlock(&s->lock);
    int rc = 0;
    if (host_work) { /* close the segment in stream order */
        host_call *c = cuda_calloc(1, sizeof *c);
        e->status = status_new();
        if (c == NULL || e->status == NULL) {
            free(c);
            rc = vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
        } else {
            *c = (host_call){.s = s, .status = status_retain(e->status)};
            rc = launch(s, close_segment, c);
            if (rc != 0)
                status_release(e->status);
        }
    }
    if (rc == 0 && (err = cudaEventRecord(e->ev, s->st)) != cudaSuccess)
        rc = cuda_fail(err, "cudaEventRecord");
    if (rc != 0) {
        event_release(e);
        return rc;
    }
    if (host_work) {
        pthread_mutex_lock(&s->lock);
        s->host_work = false;
        pthread_mutex_unlock(&s->lock);
    }
    *out = e;
    return 0;
}

static int stream_wait(vf__stream *s, vf__event *e, bool carry)
{
    if (s->capture != NULL)
        return not_in_capture("a stream wait");
    cudaError_t err = cudaStreamWaitEvent(s->st, e->ev, 0);
    if (err != cudaSuccess)
        return cuda_fail(err, "cudaStreamWaitEvent");
    if (!carry || e->status == NULL)
        return 0; /* order only, or its failures are CUDA's own (sticky) */
    host_call *c = cuda_calloc(1, sizeof *c);
    if (c == NULL)
        return vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
    seg_status *b = status_retain(e->status);
    *c = (host_call){.s = s, .status = b};
    pthread_mutex_lock(&s->lock);
    s->host_work = true; /* the segment's status matters now */
    pthread_mutex_unlock(&s->lock);
    int rc = launch(s, inherit_failure, c); /* frees c on failure */
    if (rc != 0)
        status_release(b);
    return rc;
}

static int stream_sync(vf__stream *s)
{
    cudaError_t err = cudaStreamSynchronize(s->st);
    if (err != cudaSuccess)
        return cuda_fail(err, "cudaStreamSynchronize");
    pthread_mutex_lock(&s->lock);
    int rc = s->segment.code;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* A CUDA stream runs no thread of ours. */
static void stream_stop(vf__stream *s)
{
    (void)s;
}

static int stream_start(vf__stream *s)
{
    (void)s;
    return 0;
}

/* --- device graphs -------------------------------------------------------- */

static void graph_release(vf__devgraph *g)
{
    if (g == NULL || !vf__ref_drop(&g->refs))
        return;
    cudaSetDevice(g->device);
    if (g->exec != NULL)
        cudaGraphExecDestroy(g->exec);
    for (uint32_t k = 0; k < g->nclosed; k++)
        unpooled_event(g->device, g->ends[k]);
    free(g->ends);
    free(g->end_nodes);
    free(g);
}

static int capture_begin(vf__stream *s)
{
    if (s->capture != NULL)
        return vf_error_set_detail(VF_EINVAL, "CUDA device: the stream "
                                              "already records a graph");
    vf__devgraph *g = cuda_calloc(1, sizeof *g);
    if (g == NULL)
        return vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
    atomic_init(&g->refs, 1);
    g->device = s->device;
    cudaError_t err = cudaSetDevice(s->device);
    if (err == cudaSuccess)
        err = cudaStreamBeginCapture(s->st, cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess) {
        free(g);
        return cuda_fail(err, "cudaStreamBeginCapture");
    }
    s->capture = g;
    return 0;
}

/* The open node's end: an external event record in the capture. */
static int close_node(vf__stream *s, vf__devgraph *g)
{
    if (g->nclosed == g->cap) {
        uint32_t cap = g->cap ? 2 * g->cap : 16;
        cudaEvent_t *t = cuda_malloc((size_t)cap * sizeof *t);
        cudaGraphNode_t *tn = cuda_malloc((size_t)cap * sizeof *tn);
        if (t == NULL || tn == NULL) {
            free(t);
            free(tn);
            return vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
        }
        if (g->nclosed != 0) {
            memcpy(t, g->ends, (size_t)g->nclosed * sizeof *t);
            memcpy(tn, g->end_nodes, (size_t)g->nclosed * sizeof *tn);
        }
        free(g->ends);
        free(g->end_nodes);
        g->ends = t;
        g->end_nodes = tn;
        g->cap = cap;
    }
    cudaEvent_t ev;
    cudaError_t err = pooled_event(s->device, &ev);
    if (err != cudaSuccess)
        return cuda_fail(err, "cudaEventCreate");
    err = cudaEventRecordWithFlags(ev, s->st, cudaEventRecordExternal);
    if (err != cudaSuccess) {
        unpooled_event(s->device, ev);
        return cuda_fail(err, "cudaEventRecordWithFlags");
    }
    /* The record is the capture's one dependency now: the node's end. */
    enum cudaStreamCaptureStatus status;
    const cudaGraphNode_t *deps = NULL;
    size_t ndeps = 0;
#if CUDART_VERSION >= 13000
    err = cudaStreamGetCaptureInfo(s->st, &status, NULL, NULL, &deps, NULL,
                                   &ndeps);
#else
    err = cudaStreamGetCaptureInfo(s->st, &status, NULL, NULL, &deps, &ndeps);
#endif
    if (err == cudaSuccess && ndeps != 1)
        err = cudaErrorStreamCaptureInvalidated;
    if (err != cudaSuccess) {
        unpooled_event(s->device, ev);
        return cuda_fail(err, "cudaStreamGetCaptureInfo");
    }
    g->ends[g->nclosed] = ev;
    g->end_nodes[g->nclosed++] = deps[0];
    return 0;
}

static int capture_node(vf__stream *s, const uint32_t *order, uint32_t norder,
                        const uint32_t *carry, uint32_t ncarry)
{
    (void)carry; /* CUDA's errors are sticky: see the top of the file */
    (void)ncarry;
    vf__devgraph *g = s->capture;
    if (g == NULL)
        return vf_error_set_detail(VF_EINVAL,
                                   "CUDA device: no graph is recorded");
    if (g->n > g->nclosed) {
        int rc = close_node(s, g);
        if (rc != 0)
            return rc;
    }
    /* Its work follows its predecessors' ends, and nothing else. */
    cudaGraphNode_t deps[64], *dp = deps;
    if (norder > sizeof deps / sizeof deps[0] &&
        (dp = cuda_malloc((size_t)norder * sizeof *dp)) == NULL)
        return vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
    for (uint32_t i = 0; i < norder; i++) {
        if (order[i] >= g->nclosed) {
            if (dp != deps)
                free(dp);
            return vf_error_set_detail(VF_EINVAL,
                                       "CUDA device: node %u follows node "
                                       "%u, not an earlier one",
                                       g->n, order[i]);
        }
        dp[i] = g->end_nodes[order[i]];
    }
#if CUDART_VERSION >= 13000
    cudaError_t err = cudaStreamUpdateCaptureDependencies(
        s->st, dp, NULL, norder, cudaStreamSetCaptureDependencies);
#else
    cudaError_t err = cudaStreamUpdateCaptureDependencies(
        s->st, dp, norder, cudaStreamSetCaptureDependencies);
#endif
    if (dp != deps)
        free(dp);
    if (err != cudaSuccess)
        return cuda_fail(err, "cudaStreamUpdateCaptureDependencies");
    g->n++;
    return 0;
}

static int capture_end(vf__stream *s, vf__devgraph **out)
{
    vf__devgraph *g = s->capture;
    if (g == NULL)
        return vf_error_set_detail(VF_EINVAL,
                                   "CUDA device: no graph is recorded");
    int rc = g->n > g->nclosed && out != NULL ? close_node(s, g) : 0;
    /* The capture ends joined on every node's end (only the last node's
     * is its dependency now): no captured work is left unjoined. */
    if (rc == 0 && g->nclosed > 1) {
#if CUDART_VERSION >= 13000
        cudaError_t jerr = cudaStreamUpdateCaptureDependencies(
            s->st, g->end_nodes, NULL, g->nclosed,
            cudaStreamSetCaptureDependencies);
#else
        cudaError_t jerr = cudaStreamUpdateCaptureDependencies(
            s->st, g->end_nodes, g->nclosed, cudaStreamSetCaptureDependencies);
#endif
        if (jerr != cudaSuccess)
            rc = cuda_fail(jerr, "cudaStreamUpdateCaptureDependencies");
    }
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(s->st, &graph);
    s->capture = NULL;
    if (rc == 0 && err != cudaSuccess)
        rc = cuda_fail(err, "cudaStreamEndCapture");
    if (rc == 0 && out != NULL &&
        (err = cudaGraphInstantiate(&g->exec, graph, 0)) != cudaSuccess)
        rc = cuda_fail(err, "cudaGraphInstantiate");
    if (graph != NULL)
        cudaGraphDestroy(graph); /* the exec keeps what it needs */
    if (rc != 0 || out == NULL) {
        graph_release(g);
        return rc;
    }
    *out = g;
    return 0;
}

static int graph_launch(vf__devgraph *g, vf__stream *s,
                        const vf__devgraph_input *inputs, uint32_t ninputs,
                        vf__event **node_events)
{
    if (s->capture != NULL)
        return not_in_capture("a graph launch");
    cudaError_t err = cudaSetDevice(s->device);
    if (err != cudaSuccess)
        return cuda_fail(err, "cudaSetDevice");
    for (uint32_t i = 0; i < ninputs; i++) {
        vf__event *in = inputs[i].ev;
        if (inputs[i].carry && in->status != NULL) {
            vf__event_status st;
            if (event_wait(in, &st) != 0)
                return vf_error_set_detail(
                    VF_ENOTSUP,
                    "CUDA device: a graph cannot inherit the failure "
                    "of host work (%s)",
                    st.message);
        }
        if ((err = cudaStreamWaitEvent(s->st, in->ev, 0)) != cudaSuccess)
            return cuda_fail(err, "cudaStreamWaitEvent");
    }
    uint32_t made = 0;
    for (; made < g->nclosed; made++) {
        vf__event *e = cuda_calloc(1, sizeof *e);
        if (e == NULL)
            break;
        atomic_init(&e->refs, 1);
        atomic_fetch_add_explicit(&s->prog->refs, 1, memory_order_relaxed);
        e->prog = s->prog;
        e->device = s->device;
        e->ev = g->ends[made];
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
        e->graph = g;
        node_events[made] = e;
    }
    int rc = 0;
    if (made < g->nclosed)
        rc = vf_error_set_detail(VF_ENOMEM, "CUDA device: out of memory");
    else if ((err = cudaGraphLaunch(g->exec, s->st)) != cudaSuccess)
        rc = cuda_fail(err, "cudaGraphLaunch");
    if (rc != 0) {
        for (uint32_t k = 0; k < made; k++)
            event_release(node_events[k]);
        return rc;
    }
    return 0;
}

static const vf__device_class cuda_class = {
    .type = VF_DEVICE_CUDA,
    .name = "cuda",
    .usable_after_fork = false,
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

/* --- registration (varflow_cuda.h) --------------------------------------- */

/* Once per process: the outcome (and its detail) is kept for later calls. */
static pthread_once_t register_once = PTHREAD_ONCE_INIT;
static int register_rc;
static char register_detail[256];

static void register_class(void)
{
    register_rc = vf__device_class_register(&cuda_class, VF__DEVICE_ABI, &host);
    if (register_rc != 0)
        snprintf(register_detail, sizeof register_detail, "%s",
                 vf_error_detail());
}

VF_API int vf_cuda_register(void)
{
    if (pthread_once(&register_once, register_class) != 0)
        return vf_error_set_detail(VF_ESYSTEM,
                                   "vf_cuda_register: pthread_once failed");
    if (register_rc != 0)
        return vf_error_set_detail(register_rc, "%s", register_detail);
    return 0;
}
