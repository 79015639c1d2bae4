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
/* A figure this close to its threshold (either side) decides nothing: the
 * run is between two verdicts (tell_between). */
#define VERDICT_MARGIN 0.10

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

/* The note on workers that ran nothing, when some did not, and, with
 * `why`, the usual reason when others were busy. */
static void say_workers_unused(vf__prof_verdict *out, const vf_profile *p,
                               bool why)
{
    if (out->workers < p->nworkers)
        say(out, " (%d of the %d workers ran no op%s)",
            p->nworkers - out->workers, p->nworkers,
            why ? ": ops go only to the pool their property names" : "");
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
        say(out, "On average %.2f of %d worker%s busy", busy,
            out->workers > 0 ? out->workers : 1,
            out->workers > 1 ? "s were" : " was");
    /* The pools' reason only where more than one worker ran ops: with one,
     * the ops were few or the pusher slow (the sentence says so), and
     * the pools had nothing to do with it (found by a reviewer). */
    say_workers_unused(out, p, out->workers > 1);
}

/* The figures each verdict is decided on, and what its sentence needs. */
typedef struct figures {
    double crit;   /* critical path / span */
    double stream; /* busiest stream / span */
    double busy;   /* parallelism / workers and streams */
    double dag;    /* work weighed as the path weighs it / its length */
    stream_key busiest;
    const char *top;
} figures;

/* The verdict the thresholds give, each moved by `m` (0.1: a figure must
 * clear its threshold by 10 points to count, -0.1: 10 points short is
 * enough). */
static vf__prof_verdict_kind classify(const figures *f, double m)
{
    if (f->crit >= BOUND_CRITICAL + m)
        return VF__VERDICT_DEPENDENCY;
    if (f->stream >= BOUND_STREAM + m)
        return VF__VERDICT_DEVICE;
    if (f->busy >= BOUND_BUSY + m)
        return VF__VERDICT_WORKERS;
    return VF__VERDICT_IDLE;
}

/* The key, title and sentence of a verdict the thresholds decide. */
static void tell(vf__prof_verdict_kind kind, const vf_profile *p,
                 const figures *f, vf__prof_verdict *out)
{
    uint64_t span = p->span_ns ? p->span_ns : 1;
    out->kind = kind;
    out->text[0] = '\0';
    switch (kind) {
    case VF__VERDICT_DEPENDENCY:
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
        break;
    case VF__VERDICT_DEVICE: {
        out->key = "device";
        out->title = "Device-bound.";
        stream_key b = f->busiest;
        const char *pool = b.worker >= 0 && b.worker < p->nworkers &&
                                   p->worker_pool[b.worker] != NULL
                               ? p->worker_pool[b.worker]
                               : "inline";
        char where[64];
        if (b.worker >= 0)
            snprintf(where, sizeof where, "%s %d", pool, b.worker);
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
            vf__prof_device_name((vf_device){(vf_device_type)b.type, b.id}),
            b.id, share(out->busiest_stream_ns, span), out->streams,
            out->streams == 1 ? "" : "s", vf__prof_human(dev_h, out->device_ns),
            vf__prof_human(span_h, p->span_ns), 100.0 * f->crit);
        break;
    }
    case VF__VERDICT_WORKERS:
        out->key = "workers";
        out->title = "Worker-bound.";
        say_resources(out, p, out->parallelism);
        say(out, " and the DAG allows %.1f: more workers", f->dag);
        if (out->streams > 0)
            say(out, " or streams");
        if (f->top != NULL && f->top[0] != '\0')
            say(out, " (or cheaper ops, starting with \"%s\")", f->top);
        say(out, " would help.");
        break;
    default:
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
            f->dag, 100.0 * f->crit,
            out->streams > 0 ? "; between device ops, the cost of "
                               "launching, recording and waiting for events"
                             : "");
        if (out->async_ns > 0)
            say(out,
                " Async ops were in flight %.1f at a time on average: the "
                "work they wait for (I/O, other threads) is not counted as "
                "the workers'.",
                (double)out->async_ns / (double)span);
        break;
    }
}

/* A run whose ops all ran on one worker (or inline), not plainly
 * dependency-bound or idle: not "worker-bound, more workers would help"
 * when the pool had more (they ran nothing), nor "between" figures of one
 * lane, but what the DAG would allow. A chain on one worker (the path at
 * least 80% of the span) is dependency-bound, a worker busy less than 65%
 * of it with a short path idle, as on many (it said "One worker." for
 * both: found by a user tester). */
static void tell_one_worker(const vf_profile *p, const figures *f,
                            vf__prof_verdict *out)
{
    out->kind = VF__VERDICT_ONE_WORKER;
    out->key = "one-worker";
    out->title = "One worker.";
    say(out, "Ops ran one at a time; the DAG would allow a parallelism of %.1f",
        f->dag);
    say_workers_unused(out, p, false);
    say(out, ".");
}

/* A verdict's name inside a sentence. */
static const char *short_name(vf__prof_verdict_kind k)
{
    return k == VF__VERDICT_DEPENDENCY ? "dependency-bound"
           : k == VF__VERDICT_DEVICE   ? "device-bound"
           : k == VF__VERDICT_WORKERS  ? "worker-bound"
                                       : "idle";
}

/*
 * A run whose figures sit within VERDICT_MARGIN of a threshold: the same
 * program lands on either side from one run to the next (79% and 62% of
 * critical path against 70%), so it gets both verdicts, the figures that
 * decide between them, and each verdict's sentence. `lo` comes first in
 * the order of the tests, `hi` after it.
 */
static void tell_between(vf__prof_verdict_kind lo, vf__prof_verdict_kind hi,
                         const vf_profile *p, const figures *f,
                         vf__prof_verdict *out)
{
    vf__prof_verdict a = *out, b = *out;
    tell(lo, p, f, &a);
    tell(hi, p, f, &b);
    out->kind = VF__VERDICT_BETWEEN;
    out->key = "between";
    out->lo = lo;
    out->hi = hi;
    out->lo_key = a.key;
    out->hi_key = b.key;
    /* A title of static storage, as every other one (a verdict is
     * copied): one per pair, lo < hi. */
    static const char *const titles[3][3] = {
        {"Between dependency-bound and device-bound.",
         "Between dependency-bound and worker-bound.",
         "Between dependency-bound and idle."},
        {NULL, "Between device-bound and worker-bound.",
         "Between device-bound and idle."},
        {NULL, NULL, "Between worker-bound and idle."}};
    out->title = titles[lo - VF__VERDICT_DEPENDENCY][hi - VF__VERDICT_DEVICE];
    out->text[0] = '\0';
    /* The figures near their lines, of the tests from lo's to the one
     * before hi's: lo's held by less than the margin or one after it
     * failed by less (at least one of them is near). */
    const struct {
        vf__prof_verdict_kind kind;
        double figure, line;
        const char *what;
    } tests[] = {
        {VF__VERDICT_DEPENDENCY, f->crit, BOUND_CRITICAL,
         "the critical path is %.1f%% of the span"},
        {VF__VERDICT_DEVICE, f->stream, BOUND_STREAM,
         "the busiest stream ran work %.1f%% of the span"},
        {VF__VERDICT_WORKERS, f->busy, BOUND_BUSY,
         "%.1f%% of the workers and streams were busy on average"},
    };
    int near = 0;
    say(out, "Near the line: ");
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        double x = tests[i].figure, line = tests[i].line; /* as classify */
        if (tests[i].kind < lo || tests[i].kind >= hi ||
            !(x >= line - VERDICT_MARGIN && x < line + VERDICT_MARGIN))
            continue;
        say(out, "%s", near++ ? " and " : "");
        say(out, tests[i].what, 100.0 * tests[i].figure);
        say(out, " (%s from %.0f%%)", short_name(tests[i].kind),
            100.0 * tests[i].line);
    }
    say(out,
        ", within %.0f points of %s, so runs of the same program can "
        "fall on either side. %s %s %s %s",
        100.0 * VERDICT_MARGIN, near > 1 ? "those lines" : "it", a.title,
        a.text, b.title, b.text);
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
    vf__prof_span *host;
    size_t nhost;
    if (vf__prof_host_spans(p, &host, &nhost) != 0) {
        free(keys);
        free(ran);
        return VF_ENOMEM;
    }
    for (size_t i = 0; i < nhost; i++)
        out->host_ns += host[i].end - host[i].start;
    free(host);
    size_t nkeys = 0;
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        /* An async op's record spans its start to its completion: the
         * work it waits for (I/O, another thread), not a worker's. */
        if (r->async)
            out->async_ns += r->end_ns - r->start_ns;
        if (r->worker >= 0 && r->worker < p->nworkers && !ran[r->worker]) {
            ran[r->worker] = true;
            out->workers++;
        }
        if (vf__prof_has_device_span(r)) {
            uint64_t d = vf__prof_device_dur(r);
            out->device_ns += d;
            /* Once as work: a chain of device_sync ops, whose functions
             * wait for their work, read as parallelism 2 (found by a
             * user tester). */
            uint64_t from = r->device_start_ns > r->end_ns ? r->device_start_ns
                                                           : r->end_ns;
            if (r->device_end_ns > from)
                out->device_beyond_ns += r->device_end_ns - from;
            keys[nkeys++] = (stream_key){(int)r->device.type, r->device.id,
                                         r->worker < 0 ? -1 : r->worker, d};
        }
    }
    free(ran);
    qsort(keys, nkeys, sizeof *keys, by_stream);
    figures f = {.busiest = {0, 0, -1, 0}, .top = top};
    for (size_t i = 0; i < nkeys;) {
        stream_key k = keys[i];
        k.ns = 0;
        for (; i < nkeys && by_stream(&keys[i], &k) == 0; i++)
            k.ns += keys[i].ns;
        out->streams++;
        if (k.ns > f.busiest.ns)
            f.busiest = k;
    }
    free(keys);
    uint64_t span = p->span_ns ? p->span_ns : 1;
    out->busiest_stream_ns = f.busiest.ns > span ? span : f.busiest.ns;
    if (path != NULL) {
        out->critical_ns = path->length_ns;
        for (size_t i = 0;
             stages != NULL && stages->device_ns != NULL && i < path->count;
             i++)
            out->critical_device_ns += stages->device_ns[i];
    }
    uint64_t work = out->host_ns + out->device_beyond_ns;
    out->parallelism = (double)work / (double)span;
    int res = out->workers + out->streams;
    uint64_t dag_work = stages != NULL ? stages->total_ns : work;
    f.dag = out->critical_ns ? (double)dag_work / (double)out->critical_ns
                             : 0.0;
    f.crit = (double)out->critical_ns / (double)span;
    f.stream = (double)out->busiest_stream_ns / (double)span;
    f.busy = out->parallelism / (res > 0 ? res : 1);

    if (p->count == 0) {
        out->kind = VF__VERDICT_EMPTY;
        out->key = "empty";
        out->title = "Nothing was recorded.";
        say(out, "Start the profiler before pushing ops.");
    } else {
        vf__prof_verdict_kind lo = classify(&f, -VERDICT_MARGIN),
                              hi = classify(&f, VERDICT_MARGIN);
        if (hi != VF__VERDICT_DEPENDENCY && lo != VF__VERDICT_IDLE &&
            out->streams == 0 && out->workers <= 1 && out->async_ns == 0)
            tell_one_worker(p, &f, out);
        else if (lo == hi)
            tell(lo, p, &f, out);
        else
            tell_between(lo, hi, p, &f, out);
    }
    return 0;
}
