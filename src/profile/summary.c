/*
 * summary.c: aggregates of a snapshot: the summary per op name (as
 * rows, text and JSON) and concurrency over time.
 *
 * Summary: the records are sorted by name (an index array, so the snapshot
 * stays untouched), each run of equal names becomes a row, and the rows are
 * sorted by the column asked for. Every count is exact (integers over all
 * records); the timing columns (total, mean, min, max) cover the ops that
 * ran, ok or failed: a skipped op never ran, and its near-zero span would
 * only hide the real minimum. `queued` adds up start - ready, the time an
 * op was ready and waited for a worker.
 *
 * Concurrency (vf__prof_levels): each record gives two steps, +1 ready at
 * ready_ns and -1 at start_ns, a device op two more, +1 device at
 * device_start_ns and -1 at device_end_ns, and an async op +1 running at
 * start_ns and -1 at end_ns; each host span (vf__prof_host_spans: a
 * worker's ops nested above a wait merged) +1 running at its start and -1
 * at its end. The steps sorted by time and summed give, at each distinct
 * time, the ops running, the ops ready but not started, and the device ops
 * whose work runs on a stream. O(n log n).
 *
 * The text and JSON forms end their header with the verdict (verdict.c),
 * and count device work beside the run times when there is any.
 */
#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/engine_type.h"
#include "base/error.h"
#include "profile/out.h"
#include "varflow_profile.h"

/* --- rows -------------------------------------------------------------- */

static const char *const sort_names[] = {"total",   "name",   "count",
                                         "skipped", "failed", "mean",
                                         "min",     "max",    "queued"};
#define NSORTS ((int)(sizeof sort_names / sizeof sort_names[0]))

VF_API const char *vf_profile_sort_name(vf_profile_sort by)
{
    return (int)by >= 0 && (int)by < NSORTS ? sort_names[by] : NULL;
}

VF_API int vf_profile_sort_parse(const char *name, vf_profile_sort *out)
{
    if (name == NULL || out == NULL)
        return vf__fail(VF_EINVAL, "vf_profile_sort_parse: %s is NULL",
                        name == NULL ? "name" : "out");
    for (int i = 0; i < NSORTS; i++) {
        if (strcmp(name, sort_names[i]) == 0) {
            *out = (vf_profile_sort)i;
            return 0;
        }
    }
    return vf__fail(VF_EINVAL, "vf_profile_sort_parse: unknown column \"%s\"",
                    name);
}

/* The column's name, never NULL (callers checked `by`). */
static const char *column_name(vf_profile_sort by)
{
    const char *name = vf_profile_sort_name(by);
    return name != NULL ? name : "total";
}

/* qsort has no context argument: the snapshot being sorted, per thread. */
static _Thread_local const vf_profile *sorting_;
static _Thread_local vf_profile_sort sort_by_;

static int by_name(const void *a, const void *b)
{
    const vf_profile_record *x = &sorting_->records[*(const size_t *)a];
    const vf_profile_record *y = &sorting_->records[*(const size_t *)b];
    int c = strcmp(vf__prof_name(x), vf__prof_name(y));
    if (c != 0)
        return c;
    return x->id < y->id ? -1 : x->id > y->id;
}

static uint64_t column(const vf_profile_row *r, vf_profile_sort by)
{
    switch (by) {
    case VF_PROFILE_SORT_COUNT:
        return r->count;
    case VF_PROFILE_SORT_SKIPPED:
        return r->skipped;
    case VF_PROFILE_SORT_FAILED:
        return r->failed;
    case VF_PROFILE_SORT_MEAN:
        return r->mean_ns;
    case VF_PROFILE_SORT_MIN:
        return r->min_ns;
    case VF_PROFILE_SORT_MAX:
        return r->max_ns;
    case VF_PROFILE_SORT_QUEUED:
        return r->queued_ns;
    default:
        return r->total_ns;
    }
}

static int by_column(const void *a, const void *b)
{
    const vf_profile_row *x = a, *y = b;
    if (sort_by_ != VF_PROFILE_SORT_NAME) {
        uint64_t u = column(x, sort_by_), v = column(y, sort_by_);
        if (u != v)
            return u > v ? -1 : 1; /* largest first */
    }
    return strcmp(x->name, y->name);
}

VF_API int vf_profile_summary(const vf_profile *p, vf_profile_sort by,
                              vf_profile_row **rows, size_t *nrows)
{
    static const char who[] = "vf_profile_summary";
    if (p == NULL || rows == NULL || nrows == NULL)
        return vf__fail(VF_EINVAL, "%s: NULL argument", who);
    if ((int)by < 0 || (int)by >= NSORTS)
        return vf__fail(VF_EINVAL, "%s: unknown sort key %d", who, (int)by);
    *rows = NULL;
    *nrows = 0;
    if (p->count == 0)
        return 0;
    size_t *order = vf__malloc(p->count * sizeof *order);
    vf_profile_row *out = vf__calloc(p->count, sizeof *out);
    if (order == NULL || out == NULL) {
        free(order);
        free(out);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    for (size_t i = 0; i < p->count; i++)
        order[i] = i;
    sorting_ = p;
    qsort(order, p->count, sizeof *order, by_name);
    size_t n = 0;
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[order[i]];
        const char *name = vf__prof_name(r);
        if (n == 0 || strcmp(out[n - 1].name, name) != 0)
            out[n++].name = name;
        vf_profile_row *row = &out[n - 1];
        row->count++;
        if (r->status == VF_ESKIPPED) {
            row->skipped++;
            continue;
        }
        if (r->status != 0)
            row->failed++;
        uint64_t d = r->end_ns - r->start_ns;
        uint64_t ran = row->count - row->skipped;
        row->total_ns += d;
        row->min_ns = ran == 1 || d < row->min_ns ? d : row->min_ns;
        row->max_ns = d > row->max_ns ? d : row->max_ns;
        row->queued_ns += r->start_ns - r->ready_ns;
    }
    free(order);
    for (size_t i = 0; i < n; i++) {
        uint64_t ran = out[i].count - out[i].skipped;
        out[i].mean_ns = ran ? out[i].total_ns / ran : 0;
    }
    sort_by_ = by;
    qsort(out, n, sizeof *out, by_column);
    *rows = out;
    *nrows = n;
    return 0;
}

VF_API void vf_profile_summary_destroy(vf_profile_row *rows)
{
    free(rows);
}

/* --- text and JSON ----------------------------------------------------- */

static void summary_text(const vf_profile *p, FILE *f,
                         const vf_profile_row *rows, size_t n,
                         const vf_profile_path *path, vf_profile_sort by,
                         const vf__prof_verdict *v)
{
    char a[32], b[32], c[32];
    uint64_t busy = v->host_ns; /* async ops' time is not the workers' */
    fprintf(f,
            "varflow profile: %s engine, %d workers, %zu ops recorded, "
            "%" PRIu64 " dropped\n",
            vf__engine_type_name(p->kind), p->nworkers, p->count, p->dropped);
    if (v->device_ns > 0)
        fprintf(f,
                "span %s, busy %s on workers and %s on %d device stream%s "
                "(average parallelism %.2f)\n",
                vf__prof_human(a, p->span_ns), vf__prof_human(b, busy),
                vf__prof_human(c, v->device_ns), v->streams,
                v->streams == 1 ? "" : "s", v->parallelism);
    else
        fprintf(f, "span %s, busy %s (average parallelism %.2f)\n",
                vf__prof_human(a, p->span_ns), vf__prof_human(b, busy),
                p->span_ns ? (double)busy / (double)p->span_ns : 0.0);
    if (v->async_ns > 0)
        fprintf(f,
                "async ops in flight %s in all (%.2f at a time on average, "
                "not counted as busy)\n",
                vf__prof_human(a, v->async_ns),
                p->span_ns ? (double)v->async_ns / (double)p->span_ns : 0.0);
    if (path != NULL && path->count > 0) {
        fprintf(f,
                "critical path %s over %zu ops = %.1f%% of the span "
                "(%s from its first start to its last end)",
                vf__prof_human(a, path->length_ns), path->count,
                p->span_ns
                    ? 100.0 * (double)path->length_ns / (double)p->span_ns
                    : 0.0,
                vf__prof_human(c, path->elapsed_ns));
        if (v->critical_device_ns > 0)
            fprintf(f, ", %s of it device work",
                    vf__prof_human(b, v->critical_device_ns));
        fputc('\n', f);
    }
    fprintf(f, "verdict: %s %s\n", v->title, v->text);
    int w = 4; /* in characters: a name's bytes may be UTF-8 */
    for (size_t i = 0; i < n; i++) {
        int len = vf__prof_text_string(NULL, rows[i].name, 40, 0);
        w = len > w ? len : w;
    }
    fprintf(f, "\nsorted by %s\n%-*s %8s %8s %7s %12s %12s %12s %12s %12s\n",
            column_name(by), w, "name", "count", "skipped", "failed", "total",
            "mean", "min", "max", "queued");
    for (size_t i = 0; i < n; i++) {
        const vf_profile_row *r = &rows[i];
        char t[32], mean[32], mn[32], mx[32], q[32];
        int len = vf__prof_text_string(f, r->name, w, 0);
        fprintf(f,
                "%*s %8" PRIu64 " %8" PRIu64 " %7" PRIu64
                " %12s %12s %12s %12s %12s\n",
                w - len, "", r->count, r->skipped, r->failed,
                vf__prof_human(t, r->total_ns),
                vf__prof_human(mean, r->mean_ns), vf__prof_human(mn, r->min_ns),
                vf__prof_human(mx, r->max_ns), vf__prof_human(q, r->queued_ns));
    }
}

static void summary_json(const vf_profile *p, FILE *f,
                         const vf_profile_row *rows, size_t n,
                         const vf_profile_path *path, vf_profile_sort by,
                         const vf__prof_verdict *v)
{
    fprintf(f,
            "{\"engine\":\"%s\",\"workers\":%d,\"records\":%zu,"
            "\"dropped\":%" PRIu64 ",\"span_ns\":%" PRIu64
            ",\"busy_ns\":%" PRIu64 ",\"device_busy_ns\":%" PRIu64
            ",\"streams\":%d,\"verdict\":{\"kind\":\"%s\",\"text\":",
            vf__engine_type_name(p->kind), p->nworkers, p->count, p->dropped,
            p->span_ns, v->host_ns, v->device_ns, v->streams, v->key);
    char sentence[sizeof v->text + 64];
    snprintf(sentence, sizeof sentence, "%s %s", v->title, v->text);
    vf__prof_json_string(f, sentence, 0);
    if (v->kind == VF__VERDICT_BETWEEN)
        fprintf(f, ",\"between\":[\"%s\",\"%s\"]", v->lo_key, v->hi_key);
    fprintf(f, "},\"sort\":\"%s\",\"critical_path\":", column_name(by));
    if (path == NULL) {
        fprintf(f, "null");
    } else {
        fprintf(f,
                "{\"length_ns\":%" PRIu64 ",\"elapsed_ns\":%" PRIu64
                ",\"ops\":%zu,\"ids\":[",
                path->length_ns, path->elapsed_ns, path->count);
        for (size_t i = 0; i < path->count; i++)
            fprintf(f, "%s%" PRIu64, i ? "," : "", path->ids[i]);
        fprintf(f, "]}");
    }
    fprintf(f, ",\"rows\":[");
    for (size_t i = 0; i < n; i++) {
        const vf_profile_row *r = &rows[i];
        fprintf(f, "%s\n{\"name\":", i ? "," : "");
        vf__prof_json_string(f, r->name, 0);
        fprintf(f,
                ",\"count\":%" PRIu64 ",\"skipped\":%" PRIu64
                ",\"failed\":%" PRIu64 ",\"total_ns\":%" PRIu64
                ",\"mean_ns\":%" PRIu64 ",\"min_ns\":%" PRIu64
                ",\"max_ns\":%" PRIu64 ",\"queued_ns\":%" PRIu64 "}",
                r->count, r->skipped, r->failed, r->total_ns, r->mean_ns,
                r->min_ns, r->max_ns, r->queued_ns);
    }
    fprintf(f, "\n]}\n");
}

int vf__prof_write_summary(const vf_profile *p, FILE *f,
                           vf_profile_format format, vf_profile_sort by)
{
    vf_profile_row *rows;
    size_t n;
    int rc = vf_profile_summary(p, by, &rows, &n);
    if (rc != 0)
        return rc;
    vf_profile_path path;
    vf__prof_crit_stages stages;
    int prc = vf__prof_critical(p, &path, &stages);
    vf__prof_verdict v;
    /* The top op by total time: the rows sorted by total, or found. */
    const char *top = NULL;
    uint64_t top_ns = 0;
    for (size_t i = 0; i < n; i++)
        if (top == NULL || rows[i].total_ns > top_ns) {
            top = rows[i].name;
            top_ns = rows[i].total_ns;
        }
    if (prc == VF_ENOMEM ||
        vf__prof_verdict_of(p, prc == 0 ? &path : NULL,
                            prc == 0 ? &stages : NULL, top, &v) != 0) {
        if (prc == 0)
            vf_profile_path_destroy(&path);
        vf__prof_crit_stages_free(&stages);
        vf_profile_summary_destroy(rows);
        return VF_ENOMEM;
    }
    if (format == VF_PROFILE_SUMMARY_JSON)
        summary_json(p, f, rows, n, prc == 0 ? &path : NULL, by, &v);
    else
        summary_text(p, f, rows, n, prc == 0 ? &path : NULL, by, &v);
    if (prc == 0)
        vf_profile_path_destroy(&path);
    vf__prof_crit_stages_free(&stages);
    vf_profile_summary_destroy(rows);
    return 0;
}

/* --- concurrency over time --------------------------------------------- */

static int by_worker_then_start(const void *a, const void *b)
{
    const vf_profile_record *x = *(const vf_profile_record *const *)a;
    const vf_profile_record *y = *(const vf_profile_record *const *)b;
    if (x->worker != y->worker)
        return x->worker < y->worker ? -1 : 1;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    return x->end_ns > y->end_ns ? -1 : x->end_ns < y->end_ns; /* outer */
}

int vf__prof_host_spans(const vf_profile *p, vf__prof_span **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    const vf_profile_record **by = vf__malloc((p->count + 1) * sizeof *by);
    vf__prof_span *sp = vf__malloc((p->count + 1) * sizeof *sp);
    if (by == NULL || sp == NULL) {
        free(by);
        free(sp);
        return VF_ENOMEM;
    }
    size_t m = 0, k = 0;
    for (size_t i = 0; i < p->count; i++)
        if (!p->records[i].async)
            by[m++] = &p->records[i];
    qsort(by, m, sizeof *by, by_worker_then_start);
    for (size_t i = 0; i < m; i++) {
        const vf_profile_record *r = by[i];
        /* One worker runs one op at a time, but above a wait: the ops it
         * runs there lie inside the waiting op's span. */
        if (r->worker >= 0 && k > 0 && by[i - 1]->worker == r->worker &&
            r->start_ns < sp[k - 1].end) {
            if (r->end_ns > sp[k - 1].end)
                sp[k - 1].end = r->end_ns;
            continue;
        }
        sp[k++] = (vf__prof_span){r->start_ns, r->end_ns};
    }
    free(by);
    *out = sp;
    *n = k;
    return 0;
}

typedef struct step {
    uint64_t t;
    int8_t running, ready, device;
} step;

static int by_time(const void *a, const void *b)
{
    uint64_t x = ((const step *)a)->t, y = ((const step *)b)->t;
    return x < y ? -1 : x > y;
}

int vf__prof_levels(const vf_profile *p, vf__prof_level **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (p->count == 0)
        return 0;
    vf__prof_span *host;
    size_t nhost;
    if (vf__prof_host_spans(p, &host, &nhost) != 0)
        return VF_ENOMEM;
    size_t ns = 2 * nhost;
    for (size_t i = 0; i < p->count; i++)
        ns += (vf__prof_has_device_span(&p->records[i]) ? 4 : 2) +
              (p->records[i].async ? 2 : 0);
    step *s = vf__malloc(ns * sizeof *s);
    vf__prof_level *lv = vf__malloc(ns * sizeof *lv);
    if (s == NULL || lv == NULL) {
        free(host);
        free(s);
        free(lv);
        return VF_ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < nhost; i++) {
        s[m++] = (step){host[i].start, 1, 0, 0};
        s[m++] = (step){host[i].end, -1, 0, 0};
    }
    free(host);
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        s[m++] = (step){r->ready_ns, 0, 1, 0};
        s[m++] = (step){r->start_ns, 0, -1, 0};
        if (r->async) { /* running from its start to its completion */
            s[m++] = (step){r->start_ns, 1, 0, 0};
            s[m++] = (step){r->end_ns, -1, 0, 0};
        }
        if (vf__prof_has_device_span(r)) {
            s[m++] = (step){r->device_start_ns, 0, 0, 1};
            s[m++] = (step){r->device_start_ns + vf__prof_device_dur(r), 0, 0,
                            -1};
        }
    }
    qsort(s, ns, sizeof *s, by_time);
    int64_t running = 0, ready = 0, device = 0;
    size_t k = 0;
    for (size_t i = 0; i < ns;) {
        uint64_t t = s[i].t;
        for (; i < ns && s[i].t == t; i++) {
            running += s[i].running;
            ready += s[i].ready;
            device += s[i].device;
        }
        lv[k++] = (vf__prof_level){t, running > 0 ? (uint32_t)running : 0,
                                   ready > 0 ? (uint32_t)ready : 0,
                                   device > 0 ? (uint32_t)device : 0};
    }
    free(s);
    *out = lv;
    *n = k;
    return 0;
}
