/*
 * html.c: the HTML report, one self-contained file.
 *
 * The page is src/profile/report/report.html, embedded in the library with
 * its style sheet and script (report_assets.h), written with each of its
 * {{markers}} replaced: {{report.css}} and {{report.js}} by those files,
 * {{engine}} and {{ops}} (the title) by the engine's name and the op count,
 * and {{data}} by one JSON object. The object sits in a <script
 * type="application/json"> element, its strings escaped so that no "<" can
 * end the element early; the script draws the page from it offline:
 * nothing is fetched. The object holds
 * - engine, version, workers and the pool of each worker; records, dropped,
 *   span, busy (the run times summed as the text summary sums them: each
 *   worker's time once, async ops' not), device_busy (the sum of device
 *   spans), device_beyond (of it, the parts past each op's run time: the
 *   work that adds to busy) and async (async ops' start to completion),
 *   all in integer nanoseconds;
 * - verdict: {kind, title, text}, what limited the run (verdict.c), and
 *   between: [the two kinds] when the kind is "between";
 * - names: every distinct op name, and the other fields refer to names by
 *   their index; unnamed: the index of "(unnamed)", the group of the ops
 *   pushed without a name (-1: none), which the page labels one by one
 *   "op #<id>" (as the trace and dot do);
 * - devices: the devices whose streams ran recorded work, as "emulated 0"
 *   or "cuda 1", in type then id order (vf__prof_devices);
 * - ops: [id, name, worker, start, end, ready, push, status, [deps]] for
 *   the first VF__PROF_HTML_MAX ops by id (the timeline's rows; "shown"
 *   says how many); an op with a device span has three more: its device
 *   (an index into devices), device start and device end; the page draws
 *   that span on the lane of its worker's stream under its device;
 * - crit: the critical path's ids, length and elapsed time (critical.c),
 *   or null; with it, per op of the path, crit_w: the time it adds to the
 *   length, crit_dev: whether its device stage is on the path (0, 1), and
 *   crit_dn: that stage's part of crit_w;
 * - levels: [t, running, ready, device] steps of the parallelism plot
 *   (vf__prof_levels). Past LEVELS_MAX steps they are averaged over
 *   LEVELS_BINS equal bins, each value weighted by how long it held;
 * - summary: [name, count, skipped, failed, total, mean, min, max, queued]
 *   per name, by total time.
 * Names are found by an open-addressing table of the snapshot's name
 * pointers' texts, so this is linear in the records (plus the sorts that
 * the summary and levels do).
 */
#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/engine_type.h"
#include "base/hashmap.h"
#include "profile/out.h"
#include "profile/report_assets.h"
#include "varflow_profile.h"

#define LEVELS_MAX 20000
#define LEVELS_BINS 4000

/* Writes the page from *page up to its next {{marker}} and returns the
 * marker's name (its length in *n), *page moved past the marker; NULL, the
 * whole rest written, when there is none. */
static const char *next_marker(FILE *f, const char **page, size_t *n)
{
    const char *open = strstr(*page, "{{");
    if (open == NULL) {
        fputs(*page, f);
        return NULL;
    }
    const char *close = strstr(open, "}}");
    VF__ASSERT(close != NULL); /* report.html is ours: a bug, if so */
    fwrite(*page, 1, (size_t)(open - *page), f);
    *page = close + 2;
    *n = (size_t)(close - open - 2);
    return open + 2;
}

static int is(const char *marker, size_t n, const char *name)
{
    return strlen(name) == n && memcmp(marker, name, n) == 0;
}

/* Distinct names: the summary rows' names, found again by text: each
 * row's name is a string key of the map (base/hashmap.h), its value the
 * row's index. */
typedef struct name_table {
    const vf_profile_row *rows;
    vf__hashmap index;
} name_table;

static int names_init(name_table *t, const vf_profile_row *rows, size_t n)
{
    t->rows = rows;
    vf__hashmap_init(&t->index, vf__calloc);
    if (vf__hashmap_reserve(&t->index, n) != 0)
        return VF_ENOMEM;
    for (size_t i = 0; i < n; i++)
        for (uint64_t key = vf__hashmap_string_key(rows[i].name);;
             key = vf__hashmap_next_key(key)) {
            uint64_t at;
            if (vf__hashmap_put(&t->index, key, i, &at) < 0)
                return VF_ENOMEM;
            if (strcmp(rows[at].name, rows[i].name) == 0)
                break; /* its own (or an earlier row's of the same name) */
        }
    return 0;
}

/* The summary row of the record's name (0 if it has none: never for a
 * record the summary counted). */
static size_t name_of(const name_table *t, const vf_profile_record *r)
{
    const char *name = vf__prof_name(r);
    for (uint64_t key = vf__hashmap_string_key(name);;
         key = vf__hashmap_next_key(key)) {
        const uint64_t *at = vf__hashmap_find(&t->index, key);
        if (at == NULL)
            return 0;
        if (strcmp(t->rows[*at].name, name) == 0)
            return (size_t)*at;
    }
}

static void write_levels(FILE *f, const vf_profile *p, const vf__prof_level *lv,
                         size_t n)
{
    fprintf(f, ",\"levels\":[");
    if (n <= LEVELS_MAX || p->span_ns == 0) {
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s[%" PRIu64 ",%u,%u,%u]", i ? "," : "", lv[i].t,
                    lv[i].running, lv[i].ready, lv[i].device);
        fprintf(f, "]");
        return;
    }
    /* Time-weighted means over equal bins: level i holds over [t_i,
     * t_{i+1}); each bin adds up value * overlap. */
    double width = (double)p->span_ns / LEVELS_BINS;
    size_t i = 0;
    for (int b = 0; b < LEVELS_BINS; b++) {
        double b0 = b * width, b1 = b0 + width, run = 0, ready = 0, dev = 0;
        while (i + 1 < n && (double)lv[i + 1].t <= b0)
            i++;
        for (size_t k = i; k < n && (double)lv[k].t < b1; k++) {
            double t0 = (double)lv[k].t > b0 ? (double)lv[k].t : b0;
            double t1 = k + 1 < n && (double)lv[k + 1].t < b1
                            ? (double)lv[k + 1].t
                            : b1;
            if (t1 > t0) {
                run += lv[k].running * (t1 - t0);
                ready += lv[k].ready * (t1 - t0);
                dev += lv[k].device * (t1 - t0);
            }
        }
        fprintf(f, "%s[%.0f,%.3f,%.3f,%.3f]", b ? "," : "", b0, run / width,
                ready / width, dev / width);
    }
    fprintf(f, "]");
}

static void write_ops(FILE *f, const vf_profile *p, const name_table *names,
                      const vf_device *devs, size_t ndevs)
{
    size_t shown = p->count < VF__PROF_HTML_MAX ? p->count : VF__PROF_HTML_MAX;
    fprintf(f, ",\"shown\":%zu,\"ops\":[", shown);
    for (size_t i = 0; i < shown; i++) {
        const vf_profile_record *r = &p->records[i];
        int worker = r->worker >= 0 && r->worker < p->nworkers ? r->worker : -1;
        fprintf(f,
                "%s\n[%" PRIu64 ",%zu,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",%d,[",
                i ? "," : "", r->id, name_of(names, r), worker, r->start_ns,
                r->end_ns, r->ready_ns, r->push_ns, r->status);
        int first = 1;
        for (int k = 0; k < r->ndeps; k++) {
            if (vf__prof_find(p, r->deps[k]) < 0)
                continue;
            fprintf(f, "%s%" PRIu64, first ? "" : ",", r->deps[k]);
            first = 0;
        }
        fputc(']', f);
        if (vf__prof_has_device_span(r))
            fprintf(f, ",%td,%" PRIu64 ",%" PRIu64,
                    vf__prof_device_index(devs, ndevs, r->device),
                    r->device_start_ns,
                    r->device_start_ns + vf__prof_device_dur(r));
        fputc(']', f);
    }
    fprintf(f, "]");
}

static void write_data(FILE *f, const vf_profile *p, const vf_profile_row *rows,
                       size_t nrows, const name_table *names,
                       const vf_profile_path *path,
                       const vf__prof_crit_stages *stages,
                       const vf__prof_verdict *verdict,
                       const vf__prof_level *lv, size_t nlv,
                       const vf_device *devs, size_t ndevs)
{
    /* The verdict's sums, as the summary's: a plain sum of end - start
     * counted an op run above another's wait twice and an async op's wait
     * for its completion as work (5.6 ops running on 2 workers: found by
     * a user tester). */
    fprintf(f,
            "{\"version\":\"%d.%d.%d\",\"engine\":\"%s\",\"workers\":%d,"
            "\"pools\":[",
            VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH,
            vf__engine_type_name(p->kind), p->nworkers);
    for (int w = 0; w < p->nworkers; w++) {
        fputs(w ? "," : "", f);
        vf__prof_json_string(f, p->worker_pool[w] ? p->worker_pool[w] : "?", 1);
    }
    fprintf(f,
            "],\"records\":%zu,\"dropped\":%" PRIu64 ",\"span\":%" PRIu64
            ",\"busy\":%" PRIu64 ",\"device_busy\":%" PRIu64
            ",\"device_beyond\":%" PRIu64 ",\"async\":%" PRIu64
            ",\"verdict\":{\"kind\":\"%s\",\"title\":",
            p->count, p->dropped, p->span_ns, verdict->host_ns,
            verdict->device_ns, verdict->device_beyond_ns, verdict->async_ns,
            verdict->key);
    vf__prof_json_string(f, verdict->title, 1);
    fprintf(f, ",\"text\":");
    vf__prof_json_string(f, verdict->text, 1);
    if (verdict->kind == VF__VERDICT_BETWEEN)
        fprintf(f, ",\"between\":[\"%s\",\"%s\"]", verdict->lo_key,
                verdict->hi_key);
    fprintf(f, "},\"names\":[");
    for (size_t i = 0; i < nrows; i++) {
        fputs(i ? "," : "", f);
        vf__prof_json_string(f, rows[i].name, 1);
    }
    long unnamed = -1;
    for (size_t i = 0; i < p->count && unnamed < 0; i++)
        if (vf__prof_unnamed(&p->records[i]))
            unnamed = (long)name_of(names, &p->records[i]);
    fprintf(f, "],\"unnamed\":%ld,\"devices\":[", unnamed);
    for (size_t i = 0; i < ndevs; i++)
        fprintf(f, "%s\"%s %d\"", i ? "," : "", vf__prof_device_name(devs[i]),
                devs[i].id);
    fprintf(f, "]");
    write_ops(f, p, names, devs, ndevs);
    if (path != NULL) {
        fprintf(f,
                ",\"crit\":{\"length\":%" PRIu64 ",\"elapsed\":%" PRIu64
                ",\"dag_work\":%" PRIu64 ",\"ids\":[",
                path->length_ns, path->elapsed_ns,
                stages != NULL ? stages->total_ns : 0);
        for (size_t i = 0; i < path->count; i++)
            fprintf(f, "%s%" PRIu64, i ? "," : "", path->ids[i]);
        fprintf(f, "]},\"crit_w\":[");
        for (size_t i = 0; i < path->count; i++)
            fprintf(f, "%s%" PRIu64, i ? "," : "", stages->weight[i]);
        fprintf(f, "],\"crit_dev\":[");
        for (size_t i = 0; i < path->count; i++)
            fprintf(f, "%s%d", i ? "," : "", stages->device[i]);
        fprintf(f, "],\"crit_dn\":[");
        for (size_t i = 0; i < path->count; i++)
            fprintf(f, "%s%" PRIu64, i ? "," : "", stages->device_ns[i]);
        fprintf(f, "]");
    } else {
        fprintf(f, ",\"crit\":null");
    }
    write_levels(f, p, lv, nlv);
    fprintf(f, ",\"summary\":[");
    for (size_t i = 0; i < nrows; i++) {
        const vf_profile_row *r = &rows[i];
        fprintf(f,
                "%s\n[%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]",
                i ? "," : "", i, r->count, r->skipped, r->failed, r->total_ns,
                r->mean_ns, r->min_ns, r->max_ns, r->queued_ns);
    }
    fprintf(f, "]}");
}

int vf__prof_write_html(const vf_profile *p, FILE *f)
{
    vf_profile_row *rows = NULL;
    size_t nrows = 0, nlv = 0;
    vf__prof_level *lv = NULL;
    vf_device *devs = NULL;
    size_t ndevs = 0;
    vf_profile_path path;
    vf__prof_crit_stages stages = {0};
    vf__prof_verdict verdict;
    name_table names = {0};
    int rc = vf_profile_summary(p, VF_PROFILE_SORT_TOTAL, &rows, &nrows);
    int prc = rc == 0 ? vf__prof_critical(p, &path, &stages) : rc;
    if (rc == 0 && prc == VF_ENOMEM)
        rc = prc;
    if (rc == 0)
        rc = vf__prof_verdict_of(p, prc == 0 ? &path : NULL,
                                 prc == 0 ? &stages : NULL,
                                 nrows ? rows[0].name : NULL, &verdict);
    if (rc == 0)
        rc = names_init(&names, rows, nrows);
    if (rc == 0)
        rc = vf__prof_levels(p, &lv, &nlv);
    if (rc == 0)
        rc = vf__prof_devices(p, &devs, &ndevs);
    if (rc == 0) {
        const char *page = vf__report_html, *m;
        size_t n = 0;
        while ((m = next_marker(f, &page, &n)) != NULL) {
            if (is(m, n, "report.css"))
                fputs(vf__report_css, f);
            else if (is(m, n, "report.js"))
                fputs(vf__report_js, f);
            else if (is(m, n, "engine"))
                fputs(vf__engine_type_name(p->kind), f);
            else if (is(m, n, "ops"))
                fprintf(f, "%zu", p->count);
            else if (is(m, n, "data"))
                write_data(f, p, rows, nrows, &names, prc == 0 ? &path : NULL,
                           &stages, &verdict, lv, nlv, devs, ndevs);
            else
                vf__panic(__FILE__, __LINE__, "report.html: unknown marker");
        }
    }
    if (prc == 0)
        vf_profile_path_destroy(&path);
    vf__prof_crit_stages_free(&stages);
    free(devs);
    free(lv);
    vf__hashmap_destroy(&names.index);
    vf_profile_summary_destroy(rows);
    return rc;
}
