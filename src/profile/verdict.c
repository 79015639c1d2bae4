/*
 * verdict.c: what limited a run, in one sentence (out.h,
 * vf__prof_verdict_of): the HTML report's verdict and the text summary's.
 *
 * The figures count device work where it happened. A device op's function
 * only queues work on its worker's stream; the work runs later, on the
 * stream (the record's device span). Counting only the functions, a
 * pipeline whose streams were busy the whole run looked like a run of
 * idle workers and tiny ops. So work is run times plus device spans,
 * parallelism is work over the span against the workers and streams that
 * ran something, the critical path runs through device stages and stream
 * waits (critical.c), and a stream busy most of the span is a verdict of
 * its own: the device's work is what takes the time.
 *
 * Streams are told apart by (device, worker): every device worker owns one
 * stream; ops run inline (worker -1, the naive engine) share one lane per
 * device. The busiest stream's time is the sum of its ops' device spans
 * (work on one stream runs one piece at a time). O(n log n).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "profile/out.h"
#include "varflow_profile.h"

#define BOUND_CRITICAL 0.7 /* critical path / span: dependency-bound */
#define BOUND_STREAM 0.7   /* busiest stream / span: device-bound */
#define BOUND_BUSY 0.75    /* busy / resources: worker-bound */

typedef struct stream_key {
    int type, id, worker;
    uint64_t ns;
} stream_key;

static int by_stream(const void *a, const void *b)
{
    const stream_key *x = a, *y = b;
    if (x->type != y->type)
        return x->type < y->type ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->worker < y->worker ? -1 : x->worker > y->worker;
}

static double share(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Appends to out->text (truncating, never overflowing). */
static void say(vf__prof_verdict *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(vf__prof_verdict *out, const char *fmt, ...)
{
    size_t len = strlen(out->text);
    if (len + 1 >= sizeof out->text)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->text + len, sizeof out->text - len, fmt, ap);
    va_end(ap);
}

/* "X of Y workers" or "X of Y workers and streams (W workers, S
 * streams)", and the note on workers that ran nothing. */
static void say_resources(vf__prof_verdict *out, const vf_profile *p,
                          double busy)
{
    int res = out->workers + out->streams;
    if (out->streams > 0)
        say(out,
            "On average %.2f of %d workers and streams (%d worker%s, %d "
            "stream%s) were busy",
            busy, res, out->workers, out->workers == 1 ? "" : "s", out->streams,
            out->streams == 1 ? "" : "s");
    else
        say(out, "On average %.2f of %d workers were busy", busy,
            out->workers > 0 ? out->workers : 1);
    if (out->workers < p->nworkers)
        say(out,
            " (%d of the %d workers ran no op: ops go only to the pool "
            "their property names)",
            p->nworkers - out->workers, p->nworkers);
}

int vf__prof_verdict_of(const vf_profile *p, const vf_profile_path *path,
                        const vf__prof_crit_stages *stages, const char *top,
                        vf__prof_verdict *out)
{
    memset(out, 0, sizeof *out);
    stream_key *keys = vf__malloc((p->count + 1) * sizeof *keys);
    bool *ran = vf__calloc((size_t)p->nworkers + 1, sizeof *ran);
    if (keys == NULL || ran == NULL) {
        free(keys);
        free(ran);
        return VF_ENOMEM;
    }
    size_t nkeys = 0;
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        out->host_ns += r->end_ns - r->start_ns;
        if (r->worker >= 0 && r->worker < p->nworkers && !ran[r->worker]) {
            ran[r->worker] = true;
            out->workers++;
        }
        if (vf__prof_has_device_span(r)) {
            uint64_t d = vf__prof_device_dur(r);
            out->device_ns += d;
            keys[nkeys++] = (stream_key){(int)r->device.type, r->device.id,
                                         r->worker < 0 ? -1 : r->worker, d};
        }
    }
    free(ran);
    qsort(keys, nkeys, sizeof *keys, by_stream);
    stream_key busiest = {0, 0, -1, 0};
    for (size_t i = 0; i < nkeys;) {
        stream_key k = keys[i];
        k.ns = 0;
        for (; i < nkeys && by_stream(&keys[i], &k) == 0; i++)
            k.ns += keys[i].ns;
        out->streams++;
        if (k.ns > busiest.ns)
            busiest = k;
    }
    free(keys);
    uint64_t span = p->span_ns ? p->span_ns : 1;
    out->busiest_stream_ns = busiest.ns > span ? span : busiest.ns;
    if (path != NULL) {
        out->critical_ns = path->length_ns;
        for (size_t i = 0;
             stages != NULL && stages->device_ns != NULL && i < path->count;
             i++)
            out->critical_device_ns += stages->device_ns[i];
    }
    uint64_t work = out->host_ns + out->device_ns;
    out->parallelism = (double)work / (double)span;
    double dag = out->critical_ns ? (double)work / (double)out->critical_ns
                                  : 0.0;
    double crit = (double)out->critical_ns / (double)span;
    int res = out->workers + out->streams;

    if (p->count == 0) {
        out->kind = VF__VERDICT_EMPTY;
        out->key = "empty";
        out->title = "Nothing was recorded.";
        say(out, "Start the profiler before pushing ops.");
    } else if (out->streams == 0 && out->workers <= 1) {
        out->kind = VF__VERDICT_ONE_WORKER;
        out->key = "one-worker";
        out->title = "One worker.";
        say(out,
            "Ops ran one at a time; the DAG would allow a parallelism "
            "of %.1f.",
            dag);
    } else if (crit >= BOUND_CRITICAL) {
        out->kind = VF__VERDICT_DEPENDENCY;
        out->key = "dependency";
        out->title = "Dependency-bound.";
        say(out, "The critical path alone is %.1f%% of the span",
            share(out->critical_ns, span));
        if (out->critical_device_ns > 0)
            say(out,
                " (%.1f%% of it work on device streams, the rest ops' "
                "functions on workers)",
                share(out->critical_device_ns, out->critical_ns));
        say(out,
            ", so more workers%s cannot make this run much faster: "
            "shorten or split the ops on it (red below).",
            out->streams > 0 ? " or streams" : "");
    } else if ((double)out->busiest_stream_ns / (double)span >= BOUND_STREAM) {
        out->kind = VF__VERDICT_DEVICE;
        out->key = "device";
        out->title = "Device-bound.";
        const char *pool = busiest.worker >= 0 &&
                                   busiest.worker < p->nworkers &&
                                   p->worker_pool[busiest.worker] != NULL
                               ? p->worker_pool[busiest.worker]
                               : "inline";
        char where[64];
        if (busiest.worker >= 0)
            snprintf(where, sizeof where, "%s %d", pool, busiest.worker);
        else
            snprintf(where, sizeof where, "inline ops");
        char dev_h[32], span_h[32];
        say(out,
            "The busiest stream (%s, on %s %d) ran work %.1f%% of the "
            "span (the %d stream%s together ran %s of work in a %s "
            "span), while the critical path is %.1f%% of it: the "
            "device's work itself takes the time. Overlap more of it "
            "(more device workers, each with a stream; copies on copy "
            "streams beside compute), or shorten the device work of "
            "the ops on that stream.",
            where,
            vf__prof_device_name(
                (vf_device){(vf_device_type)busiest.type, busiest.id}),
            busiest.id, share(out->busiest_stream_ns, span), out->streams,
            out->streams == 1 ? "" : "s", vf__prof_human(dev_h, out->device_ns),
            vf__prof_human(span_h, p->span_ns), 100.0 * crit);
    } else if (out->parallelism >= BOUND_BUSY * res) {
        out->kind = VF__VERDICT_WORKERS;
        out->key = "workers";
        out->title = "Worker-bound.";
        say_resources(out, p, out->parallelism);
        say(out, " and the DAG allows %.1f: more workers", dag);
        if (out->streams > 0)
            say(out, " or streams");
        if (top != NULL && top[0] != '\0')
            say(out, " (or cheaper ops, starting with \"%s\")", top);
        say(out, " would help.");
    } else {
        out->kind = VF__VERDICT_IDLE;
        out->key = "idle";
        out->title = out->streams > 0 ? "Workers and streams were idle."
                                      : "Workers were idle.";
        say_resources(out, p, out->parallelism);
        say(out,
            " while the DAG allows %.1f and the critical path is only "
            "%.1f%% of the span: time went between ops (ops too small "
            "for the engine's overhead, a pusher slower than the "
            "workers, or waits%s).",
            dag, 100.0 * crit,
            out->streams > 0 ? "; between device ops, the cost of "
                               "launching, recording and waiting for events"
                             : "");
    }
    return 0;
}
