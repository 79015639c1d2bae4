/*
 * trace_write.c: writing the Chrome trace (the JSON Object Format of the
 * Trace Event Format, read by Perfetto and chrome://tracing), which
 * trace_load.c reads back; the fields of a record and of otherData are
 * the list in trace_fields.h, which both expand:
 * - a process per pool (pid 1, 2, ... in worker order, named after the pool
 *   and the device its ops ran for) with a thread per worker (tid = worker
 *   + 1); pid 0 is the engine: its thread 0 holds ops that ran inline (on a
 *   thread that is not a worker) and it carries the counters;
 * - a complete event ("X") per op, at its start, lasting until its end;
 *   category "op", "failed" or "skipped"; args hold everything else the
 *   record has (VF__TRACE_RECORD_ARGS), so that the loader can read the
 *   snapshot back exactly; times are microseconds with three decimals,
 *   i.e. exact nanoseconds; a skipped op, whose slice lasts 0, also gets
 *   an instant event ("i") there, "skipped: <op>", so a viewer shows it;
 * - the device side, after the pools: a process per device that ran
 *   recorded work ("emulated 0 (device)", pids in device type then id
 *   order) with a thread per stream, tid = its worker's + 1 ("stream of
 *   worker 5 (emu-copy)"; tid 0: the streams of ops run inline), and on
 *   it a second complete event per device op, category "device", over
 *   the span its work ran on the stream as the device told, args {"op":
 *   id}. Having no "id" in its args, it is no record to a loader: copies
 *   are seen overlapping compute, next to each op's host-side slice (its
 *   function, which only queued the work);
 * - a flow (a "s" event inside the releasing op's slice, a "f" event with
 *   binding point "e" inside the released op's slice, one id per edge) for
 *   each dependency edge, once per pair of ops;
 * - counters ("C") "running ops" and "ready ops" (ready, waiting for a
 *   worker), each emitted when its value changes (vf__prof_levels);
 * - otherData (VF__TRACE_META): engine kind, workers and their pools,
 *   records, dropped, span, and "varflow": 1, the format's version, which
 *   the loader checks.
 */
#include <inttypes.h>
#include <limits.h>
#include <string.h>

#include "base/alloc.h"
#include "base/engine_type.h"
#include "profile/out.h"
#include "profile/trace_fields.h"
#include "varflow_profile.h"

/* Where a record's slice goes: its pool's process and its worker's thread,
 * or the engine's inline thread. Where its device span goes: its device's
 * process (pid npools + 1 + the device's index), on the thread of its
 * worker's stream (the worker's tid; 0 for the streams of inline ops). */
typedef struct chrome_tracks {
    int npools;
    const char **pool_name; /* pid - 1 (a pid per pool: at most a worker's) */
    int *worker_pid;        /* per worker index */
    vf_device *devices;     /* vf__prof_devices */
    size_t ndevices;
    /* The streams that ran work of a recorded op, each once, by device
     * index then tid: a list, not a table of every device by every worker
     * (a file may claim 2^20 workers: varflow-report reads any). */
    struct stream_used {
        size_t device;
        int tid;
    } * streams;
    size_t nstreams;
} chrome_tracks;

static int record_pid(const chrome_tracks *t, const vf_profile *p,
                      const vf_profile_record *r)
{
    return r->worker >= 0 && r->worker < p->nworkers ? t->worker_pid[r->worker]
                                                     : 0;
}

static int record_tid(const vf_profile *p, const vf_profile_record *r)
{
    return r->worker >= 0 && r->worker < p->nworkers ? r->worker + 1 : 0;
}

/* The process that holds a device's streams. */
static int device_pid(const chrome_tracks *t, vf_device d)
{
    return t->npools + 1 +
           (int)vf__prof_device_index(t->devices, t->ndevices, d);
}

static void chrome_meta(FILE *f, int pid, int tid, const char *what,
                        const char *name, int sort_index)
{
    fprintf(f,
            ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s_name\","
            "\"args\":{\"name\":",
            pid, tid, what);
    vf__prof_json_string(f, name, 0);
    fprintf(f,
            "}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
            "\"%s_sort_index\",\"args\":{\"sort_index\":%d}}",
            pid, tid, what, sort_index);
}

/* The device of the first op that ran on a process's workers: false when
 * none did (the profile knows a pool's device only from its ops: a pool
 * that ran none was named "cpu:0", a device's copy pool too, found trying
 * the profiler as a user). */
static bool pool_device(const chrome_tracks *t, const vf_profile *p, int pid,
                        vf_device *d)
{
    for (size_t i = 0; i < p->count; i++)
        if (record_pid(t, p, &p->records[i]) == pid) {
            *d = p->records[i].device;
            return true;
        }
    return false;
}

static void chrome_process(FILE *f, int pid, const char *name)
{
    fprintf(f,
            ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":"
            "\"process_name\",\"args\":{\"name\":",
            pid);
    vf__prof_json_string(f, name, 0);
    fprintf(f,
            "}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":"
            "\"process_sort_index\",\"args\":{\"sort_index\":%d}}",
            pid, pid);
}

/* A process per device after the pools', a thread per stream that ran
 * work of a recorded op, named after the stream's worker and its pool. */
static void chrome_device_meta(FILE *f, const vf_profile *p,
                               const chrome_tracks *t)
{
    char name[128];
    size_t s = 0; /* t->streams by device */
    for (size_t d = 0; d < t->ndevices; d++) {
        int pid = t->npools + 1 + (int)d;
        snprintf(name, sizeof name, "%s %d (device)",
                 vf__prof_device_name(t->devices[d]), t->devices[d].id);
        chrome_process(f, pid, name);
        for (; s < t->nstreams && t->streams[s].device == d; s++) {
            int tid = t->streams[s].tid, w = tid - 1;
            if (w < 0)
                snprintf(name, sizeof name,
                         "streams of inline ops (not a worker)");
            else
                snprintf(name, sizeof name, "stream of worker %d (%s)", w,
                         p->worker_pool[w] ? p->worker_pool[w] : "?");
            chrome_meta(f, pid, tid, "thread", name, tid);
        }
    }
}

static void chrome_tracks_meta(FILE *f, const vf_profile *p,
                               const chrome_tracks *t)
{
    const char *kind = vf__engine_type_name(p->kind);
    char name[128];
    fprintf(f,
            "{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"process_name\","
            "\"args\":{\"name\":\"varflow %s engine\"}}",
            kind);
    chrome_meta(f, 0, 0, "thread", "inline (not a worker)", 0);
    fprintf(f, ",\n{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":"
               "\"process_sort_index\",\"args\":{\"sort_index\":0}}");
    for (int pid = 1; pid <= t->npools; pid++) {
        vf_device d;
        if (pool_device(t, p, pid, &d))
            snprintf(name, sizeof name, "%s pool (%s:%d)",
                     t->pool_name[pid - 1], vf__prof_device_name(d), d.id);
        else
            snprintf(name, sizeof name, "%s pool", t->pool_name[pid - 1]);
        chrome_process(f, pid, name);
    }
    for (int w = 0; w < p->nworkers; w++) {
        snprintf(name, sizeof name, "%s worker %d",
                 t->pool_name[t->worker_pid[w] - 1], w);
        chrome_meta(f, t->worker_pid[w], w + 1, "thread", name, w + 1);
    }
    chrome_device_meta(f, p, t);
}

/* --- the fields (trace_fields.h) ----------------------------------------- */

/* Writing one object's fields: its stream, the record they come from, and
 * what goes before the next key. */
typedef struct field_out {
    FILE *f;
    const vf_profile_record *r;
    const char *sep;
} field_out;

static void key(field_out *o, const char *name)
{
    fprintf(o->f, "%s\"%s\":", o->sep, name);
    o->sep = ",";
}

/* A record's args, by kind (VF__TRACE_RECORD_ARGS). */
static void put_op_id(field_out *o, const char *k, const uint64_t *id)
{
    key(o, k);
    fprintf(o->f, "%" PRIu64, *id);
}

static void put_op_ref(field_out *o, const char *k, const uint64_t *id)
{
    if (*id != 0)
        put_op_id(o, k, id);
}

static void put_unnamed(field_out *o, const char *k, const char *const *name)
{
    (void)name;
    if (vf__prof_unnamed(o->r)) {
        key(o, k);
        fputs("true", o->f);
    }
}

static void put_status(field_out *o, const char *k, const int *status)
{
    key(o, k);
    fprintf(o->f, "\"%s\"", vf__prof_status_name(*status));
}

static void put_integer(field_out *o, const char *k, const int *v)
{
    key(o, k);
    fprintf(o->f, "%d", *v);
}

static void put_micros(field_out *o, const char *k, const uint64_t *ns)
{
    key(o, k);
    vf__prof_print_us(o->f, *ns);
}

static void put_queued(field_out *o, const char *k, const uint64_t *start_ns)
{
    uint64_t queued = *start_ns - o->r->ready_ns;
    put_micros(o, k, &queued);
}

static void put_device(field_out *o, const char *k, const vf_device *d)
{
    key(o, k);
    fprintf(o->f, "\"%s:%d\"", vf__prof_device_name(*d), d->id);
}

static void put_property(field_out *o, const char *k, const vf_property *prop)
{
    key(o, k);
    fprintf(o->f, "\"%s\"", vf__prof_property_name(*prop));
}

static void put_boolean(field_out *o, const char *k, const bool *b)
{
    key(o, k);
    fputs(*b ? "true" : "false", o->f);
}

static void put_deps(field_out *o, const char *k, const uint64_t *const *deps)
{
    key(o, k);
    fputc('[', o->f);
    for (int i = 0; i < o->r->ndeps; i++)
        fprintf(o->f, "%s%" PRIu64, i ? "," : "", (*deps)[i]);
    fputc(']', o->f);
}

static void put_span(field_out *o, const char *k, const uint64_t *ns)
{
    if (o->r->device_start_ns != 0 || o->r->device_end_ns != 0)
        put_micros(o, k, ns);
}

/* otherData, by field (VF__TRACE_META). */
static void put_meta_format(field_out *o, const char *k, const vf_profile *p)
{
    (void)p;
    key(o, k);
    fprintf(o->f, "%d", VF__TRACE_FORMAT);
}

static void put_meta_version(field_out *o, const char *k, const vf_profile *p)
{
    (void)p;
    key(o, k);
    fprintf(o->f, "\"%d.%d.%d\"", VF_VERSION_MAJOR, VF_VERSION_MINOR,
            VF_VERSION_PATCH);
}

static void put_meta_engine(field_out *o, const char *k, const vf_profile *p)
{
    key(o, k);
    fprintf(o->f, "\"%s\"", vf__engine_type_name(p->kind));
}

static void put_meta_workers(field_out *o, const char *k, const vf_profile *p)
{
    key(o, k);
    fprintf(o->f, "%d", p->nworkers);
}

static void put_meta_worker_pools(field_out *o, const char *k,
                                  const vf_profile *p)
{
    key(o, k);
    fputc('[', o->f);
    for (int w = 0; w < p->nworkers; w++) {
        fputs(w ? "," : "", o->f);
        vf__prof_json_string(o->f, p->worker_pool[w] ? p->worker_pool[w] : "?",
                             0);
    }
    fputc(']', o->f);
}

static void put_meta_records(field_out *o, const char *k, const vf_profile *p)
{
    key(o, k);
    fprintf(o->f, "%zu", p->count);
}

static void put_meta_dropped(field_out *o, const char *k, const vf_profile *p)
{
    key(o, k);
    fprintf(o->f, "%" PRIu64, p->dropped);
}

static void put_meta_span_ns(field_out *o, const char *k, const vf_profile *p)
{
    key(o, k);
    fprintf(o->f, "%" PRIu64, p->span_ns);
}

/* --- the events -------------------------------------------------------------
 */

static void chrome_slice(FILE *f, const chrome_tracks *t, const vf_profile *p,
                         const vf_profile_record *r)
{
    const char *status = vf__prof_status_name(r->status);
    char label[VF__PROF_LABEL_MAX];
    fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":",
            record_pid(t, p, r), record_tid(p, r));
    vf__prof_json_string(f, vf__prof_label(r, label), 0);
    fprintf(f, ",\"cat\":\"%s\",", r->status == 0 ? "op" : status);
    if (r->status == VF_ESKIPPED)
        fprintf(f, "\"cname\":\"grey\",");
    else if (r->status != 0)
        fprintf(f, "\"cname\":\"terrible\",");
    fprintf(f, "\"ts\":");
    vf__prof_print_us(f, r->start_ns);
    fprintf(f, ",\"dur\":");
    vf__prof_print_us(f, r->end_ns - r->start_ns);
    fprintf(f, ",\"args\":{");
    field_out out = {f, r, ""};
#define PUT_FIELD(key, kind, member) put_##kind(&out, key, &r->member);
    VF__TRACE_RECORD_ARGS(PUT_FIELD)
#undef PUT_FIELD
    fprintf(f, "}}");
}

/* A skipped op never ran: its slice lasts 0 us, which a viewer draws as
 * a hairline or nothing. An instant event at the same place gives it a
 * mark of its own at every zoom ("i", scope "t": on its worker's track),
 * named "skipped: <op>". Its args have no "id": no record to a loader. */
static void chrome_skip_mark(FILE *f, const chrome_tracks *t,
                             const vf_profile *p, const vf_profile_record *r)
{
    char label[VF__PROF_LABEL_MAX], name[VF__PROF_LABEL_MAX + 16];
    snprintf(name, sizeof name, "skipped: %s", vf__prof_label(r, label));
    fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,\"name\":",
            record_pid(t, p, r), record_tid(p, r));
    vf__prof_json_string(f, name, 0);
    fprintf(f, ",\"cat\":\"skipped\",\"cname\":\"grey\",\"ts\":");
    vf__prof_print_us(f, r->start_ns);
    fprintf(f, ",\"args\":{\"op\":%" PRIu64 "}}", r->id);
}

/* The op's work on its stream, as the device told: a slice on the stream's
 * thread, under its device's process. */
static void chrome_device_slice(FILE *f, const chrome_tracks *t,
                                const vf_profile *p, const vf_profile_record *r)
{
    char label[VF__PROF_LABEL_MAX];
    fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":",
            device_pid(t, r->device), record_tid(p, r));
    vf__prof_json_string(f, vf__prof_label(r, label), 0);
    fprintf(f, ",\"cat\":\"device\",");
    if (r->status != 0 && r->status != VF_ESKIPPED)
        fprintf(f, "\"cname\":\"terrible\",");
    fprintf(f, "\"ts\":");
    vf__prof_print_us(f, r->device_start_ns);
    fprintf(f, ",\"dur\":");
    vf__prof_print_us(f, vf__prof_device_dur(r));
    fprintf(f, ",\"args\":{\"op\":%" PRIu64 "}}", r->id);
}

/* A point inside a slice, at most 1 us (and half its length) in from
 * `edge` towards the other end, so that flows bind to it. */
static uint64_t inside(const vf_profile_record *r, int at_end)
{
    uint64_t dur = r->end_ns - r->start_ns;
    uint64_t in = dur / 2 < 1000 ? dur / 2 : 1000;
    return at_end ? r->end_ns - in : r->start_ns + in;
}

static void chrome_flows(FILE *f, const chrome_tracks *t, const vf_profile *p)
{
    uint64_t flow = 0;
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        for (int k = 0; k < r->ndeps; k++) {
            ptrdiff_t d = vf__prof_find(p, r->deps[k]);
            if (d < 0)
                continue;
            const vf_profile_record *from = &p->records[d];
            flow++;
            fprintf(f,
                    ",\n{\"ph\":\"s\",\"id\":%" PRIu64 ",\"pid\":%d,"
                    "\"tid\":%d,\"name\":\"dependency\",\"cat\":\"dep\","
                    "\"ts\":",
                    flow, record_pid(t, p, from), record_tid(p, from));
            vf__prof_print_us(f, inside(from, 1));
            fprintf(f,
                    "},\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%" PRIu64
                    ",\"pid\":%d,\"tid\":%d,\"name\":\"dependency\","
                    "\"cat\":\"dep\",\"ts\":",
                    flow, record_pid(t, p, r), record_tid(p, r));
            vf__prof_print_us(f, inside(r, 0));
            fputc('}', f);
        }
    }
}

static int chrome_counters(FILE *f, const vf_profile *p)
{
    vf__prof_level *lv;
    size_t n;
    if (vf__prof_levels(p, &lv, &n) != 0)
        return VF_ENOMEM;
    uint32_t running = 0, ready = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || lv[i].running != running) {
            fprintf(f, ",\n{\"ph\":\"C\",\"pid\":0,\"name\":\"running ops\","
                       "\"ts\":");
            vf__prof_print_us(f, lv[i].t);
            fprintf(f, ",\"args\":{\"running\":%u}}", lv[i].running);
        }
        if (i == 0 || lv[i].ready != ready) {
            fprintf(f, ",\n{\"ph\":\"C\",\"pid\":0,\"name\":\"ready ops\","
                       "\"ts\":");
            vf__prof_print_us(f, lv[i].t);
            fprintf(f, ",\"args\":{\"ready\":%u}}", lv[i].ready);
        }
        running = lv[i].running;
        ready = lv[i].ready;
    }
    free(lv);
    return 0;
}

static int by_stream(const void *a, const void *b)
{
    const struct stream_used *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

/* The device-side tracks of `t`: its devices, and which of their streams
 * ran work of a recorded op. */
static int chrome_streams(chrome_tracks *t, const vf_profile *p)
{
    if (vf__prof_devices(p, &t->devices, &t->ndevices) != 0)
        return VF_ENOMEM;
    if (t->ndevices == 0)
        return 0;
    t->streams = vf__malloc((p->count ? p->count : 1) * sizeof *t->streams);
    if (t->streams == NULL)
        return VF_ENOMEM;
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        if (vf__prof_has_device_span(r))
            t->streams[t->nstreams++] = (struct stream_used){
                (size_t)(device_pid(t, r->device) - t->npools - 1),
                record_tid(p, r)};
    }
    qsort(t->streams, t->nstreams, sizeof *t->streams, by_stream);
    size_t kept = 0;
    for (size_t i = 0; i < t->nstreams; i++)
        if (kept == 0 || by_stream(&t->streams[kept - 1], &t->streams[i]) != 0)
            t->streams[kept++] = t->streams[i];
    t->nstreams = kept;
    return 0;
}

/* Each worker's process: its pool's. A pool's workers are consecutive
 * (the engine numbers them so); pools of the same name are not one pool
 * (each device's "emu" pool: they were one process, named after the
 * first device, found by a user tester), so a process ends where the
 * pool's index changes, or, in a snapshot read back from a trace, which
 * names the pools only, where the name changes or the pool its ops were
 * queued to does (a pool made later than the next device's, after a
 * failed start: same-named pools side by side; an idle one of them stays
 * with its neighbour there). 0, or VF_ENOMEM. */
static int chrome_pools(chrome_tracks *t, const vf_profile *p)
{
    size_t n = (size_t)p->nworkers + 1;
    t->worker_pid = vf__calloc(n, sizeof *t->worker_pid);
    t->pool_name = vf__calloc(n, sizeof *t->pool_name);
    int *queued_to = vf__malloc(n * sizeof *queued_to);
    if (t->worker_pid == NULL || t->pool_name == NULL || queued_to == NULL) {
        free(queued_to);
        return VF_ENOMEM;
    }
    for (int w = 0; w < p->nworkers; w++)
        queued_to[w] = INT_MIN; /* no op of its recorded */
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        if (r->worker >= 0 && r->worker < p->nworkers &&
            queued_to[r->worker] == INT_MIN)
            queued_to[r->worker] = r->pool;
    }
    int known = INT_MIN; /* the pool of the process's workers, once seen */
    for (int w = 0; w < p->nworkers; w++) {
        const char *pool = p->worker_pool[w] ? p->worker_pool[w] : "?";
        bool other = t->npools == 0 ||
                     (p->worker_pool_index != NULL
                          ? p->worker_pool_index[w] !=
                                p->worker_pool_index[w - 1]
                          : strcmp(t->pool_name[t->npools - 1], pool) != 0 ||
                                (known != INT_MIN && queued_to[w] != INT_MIN &&
                                 queued_to[w] != known));
        if (other) {
            t->pool_name[t->npools++] = pool;
            known = INT_MIN;
        }
        if (known == INT_MIN)
            known = queued_to[w];
        t->worker_pid[w] = t->npools;
    }
    free(queued_to);
    return 0;
}

int vf__prof_write_chrome(const vf_profile *p, FILE *f)
{
    chrome_tracks t = {0};
    if (chrome_pools(&t, p) != 0 || chrome_streams(&t, p) != 0) {
        free(t.devices);
        free(t.worker_pid);
        free(t.pool_name);
        return VF_ENOMEM;
    }
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    chrome_tracks_meta(f, p, &t);
    for (size_t i = 0; i < p->count; i++) {
        chrome_slice(f, &t, p, &p->records[i]);
        if (p->records[i].status == VF_ESKIPPED)
            chrome_skip_mark(f, &t, p, &p->records[i]);
        if (vf__prof_has_device_span(&p->records[i]))
            chrome_device_slice(f, &t, p, &p->records[i]);
    }
    chrome_flows(f, &t, p);
    int rc = chrome_counters(f, p);
    free(t.streams);
    free(t.devices);
    free(t.worker_pid);
    free(t.pool_name);
    fprintf(f, "\n],\"otherData\":{");
    field_out out = {f, NULL, ""};
#define PUT_META(k, what) put_meta_##what(&out, k, p);
    VF__TRACE_META(PUT_META)
#undef PUT_META
    fprintf(f, "}}\n");
    return rc;
}
