/*
 * write.c: writing a snapshot to a file, by format; the Chrome
 * trace JSON; helpers the other outputs share (out.h).
 *
 * The Chrome trace (the JSON Object Format of the Trace Event Format, read
 * by Perfetto and chrome://tracing):
 * - a process per pool (pid 1, 2, ... in worker order, named after the pool
 *   and the device its ops ran for) with a thread per worker (tid = worker
 *   + 1); pid 0 is the engine: its thread 0 holds ops that ran inline (on a
 *   thread that is not a worker) and it carries the counters;
 * - a complete event ("X") per op, at its start, lasting until its end;
 *   category "op", "failed" or "skipped"; args hold everything else the
 *   record has (id, status, push and ready times, worker, pool, device,
 *   property, async, deps, and for a device op its device span as
 *   device_start_us and device_end_us), so that the trace loader
 *   (trace_load.c) can read the snapshot back exactly; times are
 *   microseconds with three decimals, i.e. exact nanoseconds;
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
 * - otherData: engine kind, workers and their pools, records, dropped,
 *   span, and "varflow": 1, the format's version, which the loader checks.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "profile/out.h"

/* --- shared helpers ---------------------------------------------------- */

ptrdiff_t vf__prof_find(const vf_profile *p, uint64_t id)
{
    size_t lo = 0, hi = p->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t m = p->records[mid].id;
        if (m == id)
            return (ptrdiff_t)mid;
        if (m < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

const char *vf__prof_name(const vf_profile_record *r)
{
    return vf__prof_unnamed(r) ? "(unnamed)" : r->name;
}

const char *vf__prof_label(const vf_profile_record *r,
                           char buf[VF__PROF_LABEL_MAX])
{
    if (!vf__prof_unnamed(r))
        return r->name;
    snprintf(buf, VF__PROF_LABEL_MAX, "op #%" PRIu64, r->id);
    return buf;
}

int vf__prof_dep_repeats(const vf_profile_record *r, int k)
{
    for (int j = 0; j < k; j++)
        if (r->deps[j] == r->deps[k])
            return 1;
    return 0;
}

const char *vf__prof_status_name(int status)
{
    return status == 0 ? "ok" : status == VF_ESKIPPED ? "skipped" : "failed";
}

static const char *const property_names[] = {
    "normal",          "copy_to_device",     "copy_from_device",
    "cpu_prioritized", "device_prioritized", "delete_var"};
#define NPROPS ((int)(sizeof property_names / sizeof property_names[0]))

const char *vf__prof_property_name(vf_property prop)
{
    return (int)prop >= 0 && (int)prop < NPROPS ? property_names[prop]
                                                : "unknown";
}

int vf__prof_property_parse(const char *name)
{
    for (int i = 0; i < NPROPS; i++)
        if (strcmp(name, property_names[i]) == 0)
            return i;
    return -1;
}

const char *vf__prof_device_name(vf_device d)
{
    return d.type == VF_DEVICE_CPU    ? "cpu"
           : d.type == VF_DEVICE_CUDA ? "cuda"
                                      : "emulated";
}

static int device_cmp(vf_device a, vf_device b)
{
    if (a.type != b.type)
        return (int)a.type < (int)b.type ? -1 : 1;
    return a.id < b.id ? -1 : a.id > b.id;
}

ptrdiff_t vf__prof_device_index(const vf_device *devs, size_t n, vf_device d)
{
    for (size_t i = 0; i < n; i++)
        if (device_cmp(devs[i], d) == 0)
            return (ptrdiff_t)i;
    return -1;
}

/* A handful of devices at most: a linear insertion per new one. */
int vf__prof_devices(const vf_profile *p, vf_device **out, size_t *n)
{
    vf_device *devs = NULL;
    size_t count = 0, cap = 0;
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        if (!vf__prof_has_device_span(r) ||
            vf__prof_device_index(devs, count, r->device) >= 0)
            continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 4;
            vf_device *t = vf__malloc(cap * sizeof *t);
            if (t == NULL) {
                free(devs);
                return VF_ENOMEM;
            }
            if (count > 0)
                memcpy(t, devs, count * sizeof *t);
            free(devs);
            devs = t;
        }
        size_t at = count;
        while (at > 0 && device_cmp(devs[at - 1], r->device) > 0) {
            devs[at] = devs[at - 1];
            at--;
        }
        devs[at] = r->device;
        count++;
    }
    *out = devs;
    *n = count;
    return 0;
}

void vf__prof_json_string(FILE *f, const char *s, int html)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || (html && (c == '<' || c == '>' || c == '&')))
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void vf__prof_print_us(FILE *f, uint64_t ns)
{
    fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

const char *vf__prof_human(char buf[32], uint64_t ns)
{
    if (ns < 1000)
        snprintf(buf, 32, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, 32, "%.2f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, 32, "%.3f ms", (double)ns / 1e6);
    else
        snprintf(buf, 32, "%.3f s", (double)ns / 1e9);
    return buf;
}

/* --- Chrome trace ------------------------------------------------------ */

/* Where a record's slice goes: its pool's process and its worker's thread,
 * or the engine's inline thread. Where its device span goes: its device's
 * process (pid npools + 1 + the device's index), on the thread of its
 * worker's stream (the worker's tid; 0 for the streams of inline ops). */
typedef struct chrome_tracks {
    int npools;
    const char *pool_name[8]; /* pid - 1 */
    int *worker_pid;          /* per worker index */
    vf_device *devices;       /* vf__prof_devices */
    size_t ndevices;
    unsigned char *streams; /* [device index][tid]: a span is there */
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

/* The device of the first op that ran on a process's workers. */
static vf_device pool_device(const chrome_tracks *t, const vf_profile *p,
                             int pid)
{
    for (size_t i = 0; i < p->count; i++)
        if (record_pid(t, p, &p->records[i]) == pid)
            return p->records[i].device;
    return (vf_device){VF_DEVICE_CPU, 0};
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
    size_t width = (size_t)p->nworkers + 1;
    for (size_t d = 0; d < t->ndevices; d++) {
        int pid = t->npools + 1 + (int)d;
        snprintf(name, sizeof name, "%s %d (device)",
                 vf__prof_device_name(t->devices[d]), t->devices[d].id);
        chrome_process(f, pid, name);
        for (size_t tid = 0; tid < width; tid++) {
            if (!t->streams[d * width + tid])
                continue;
            int w = (int)tid - 1;
            if (w < 0)
                snprintf(name, sizeof name,
                         "streams of inline ops (not a worker)");
            else
                snprintf(name, sizeof name, "stream of worker %d (%s)", w,
                         p->worker_pool[w] ? p->worker_pool[w] : "?");
            chrome_meta(f, pid, (int)tid, "thread", name, (int)tid);
        }
    }
}

static void chrome_tracks_meta(FILE *f, const vf_profile *p,
                               const chrome_tracks *t)
{
    const char *kind = vf_engine_type_name(p->kind);
    char name[128];
    fprintf(f,
            "{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"process_name\","
            "\"args\":{\"name\":\"varflow %s engine\"}}",
            kind);
    chrome_meta(f, 0, 0, "thread", "inline (not a worker)", 0);
    fprintf(f, ",\n{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":"
               "\"process_sort_index\",\"args\":{\"sort_index\":0}}");
    for (int pid = 1; pid <= t->npools; pid++) {
        vf_device d = pool_device(t, p, pid);
        snprintf(name, sizeof name, "%s pool (%s:%d)", t->pool_name[pid - 1],
                 vf__prof_device_name(d), d.id);
        chrome_process(f, pid, name);
    }
    for (int w = 0; w < p->nworkers; w++) {
        snprintf(name, sizeof name, "%s worker %d",
                 t->pool_name[t->worker_pid[w] - 1], w);
        chrome_meta(f, t->worker_pid[w], w + 1, "thread", name, w + 1);
    }
    chrome_device_meta(f, p, t);
}

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
    fprintf(f,
            ",\"args\":{\"id\":%" PRIu64 ",%s\"status\":\"%s\",\"code\":%d,"
            "\"push_us\":",
            r->id, vf__prof_unnamed(r) ? "\"unnamed\":true," : "", status,
            r->status);
    vf__prof_print_us(f, r->push_ns);
    fprintf(f, ",\"ready_us\":");
    vf__prof_print_us(f, r->ready_ns);
    fprintf(f, ",\"queued_us\":");
    vf__prof_print_us(f, r->start_ns - r->ready_ns);
    fprintf(f,
            ",\"worker\":%d,\"pool\":%d,\"device\":\"%s:%d\","
            "\"property\":\"%s\",\"async\":%s,\"deps\":[",
            r->worker, r->pool, vf__prof_device_name(r->device), r->device.id,
            vf__prof_property_name(r->property), r->async ? "true" : "false");
    for (int k = 0; k < r->ndeps; k++)
        fprintf(f, "%s%" PRIu64, k ? "," : "", r->deps[k]);
    fputc(']', f);
    if (r->device_start_ns != 0 || r->device_end_ns != 0) {
        fprintf(f, ",\"device_start_us\":");
        vf__prof_print_us(f, r->device_start_ns);
        fprintf(f, ",\"device_end_us\":");
        vf__prof_print_us(f, r->device_end_ns);
    }
    fprintf(f, "}}");
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
            if (d < 0 || vf__prof_dep_repeats(r, k))
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

/* The device-side tracks of `t`: its devices, and which of their streams
 * ran work of a recorded op. */
static int chrome_streams(chrome_tracks *t, const vf_profile *p)
{
    if (vf__prof_devices(p, &t->devices, &t->ndevices) != 0)
        return VF_ENOMEM;
    if (t->ndevices == 0)
        return 0;
    size_t width = (size_t)p->nworkers + 1;
    t->streams = vf__calloc(t->ndevices * width, 1);
    if (t->streams == NULL)
        return VF_ENOMEM;
    for (size_t i = 0; i < p->count; i++) {
        const vf_profile_record *r = &p->records[i];
        if (vf__prof_has_device_span(r))
            t->streams[(size_t)(device_pid(t, r->device) - t->npools - 1) *
                           width +
                       (size_t)record_tid(p, r)] = 1;
    }
    return 0;
}

int vf__prof_write_chrome(const vf_profile *p, FILE *f)
{
    chrome_tracks t = {0};
    t.worker_pid = vf__calloc((size_t)p->nworkers + 1, sizeof *t.worker_pid);
    if (t.worker_pid == NULL)
        return VF_ENOMEM;
    for (int w = 0; w < p->nworkers; w++) {
        const char *pool = p->worker_pool[w] ? p->worker_pool[w] : "?";
        int pid = 0;
        for (int k = 0; k < t.npools && pid == 0; k++)
            if (strcmp(t.pool_name[k], pool) == 0)
                pid = k + 1;
        if (pid == 0 && t.npools < 8) {
            t.pool_name[t.npools++] = pool;
            pid = t.npools;
        }
        t.worker_pid[w] = pid ? pid : t.npools;
    }
    if (chrome_streams(&t, p) != 0) {
        free(t.devices);
        free(t.worker_pid);
        return VF_ENOMEM;
    }
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    chrome_tracks_meta(f, p, &t);
    for (size_t i = 0; i < p->count; i++) {
        chrome_slice(f, &t, p, &p->records[i]);
        if (vf__prof_has_device_span(&p->records[i]))
            chrome_device_slice(f, &t, p, &p->records[i]);
    }
    chrome_flows(f, &t, p);
    int rc = chrome_counters(f, p);
    free(t.streams);
    free(t.devices);
    free(t.worker_pid);
    fprintf(f,
            "\n],\"otherData\":{\"varflow\":1,\"version\":\"%d.%d.%d\","
            "\"engine\":\"%s\",\"workers\":%d,\"worker_pools\":[",
            VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH,
            vf_engine_type_name(p->kind), p->nworkers);
    for (int w = 0; w < p->nworkers; w++) {
        fputs(w ? "," : "", f);
        vf__prof_json_string(f, p->worker_pool[w] ? p->worker_pool[w] : "?", 0);
    }
    fprintf(f,
            "],\"records\":%zu,\"dropped\":%" PRIu64 ",\"span_ns\":%" PRIu64
            "}}\n",
            p->count, p->dropped, p->span_ns);
    return rc;
}

/* --- writing a file ---------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (k > n)
        return 0;
    for (size_t i = 0; i < k; i++) {
        char c = s[n - k + i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != suffix[i])
            return 0;
    }
    return 1;
}

static vf_profile_format by_extension(const char *path)
{
    if (ends_with(path, ".html") || ends_with(path, ".htm"))
        return VF_PROFILE_HTML;
    if (ends_with(path, ".dot") || ends_with(path, ".gv"))
        return VF_PROFILE_DOT;
    if (ends_with(path, ".txt"))
        return VF_PROFILE_SUMMARY_TEXT;
    if (ends_with(path, ".summary.json"))
        return VF_PROFILE_SUMMARY_JSON;
    return VF_PROFILE_CHROME_JSON;
}

static int emit(const char *who, const vf_profile *p, const char *path,
                vf_profile_format format, vf_profile_sort by)
{
    if (p == NULL || path == NULL)
        return vf__fail(VF_EINVAL, "%s: NULL profile or path", who);
    if (format == VF_PROFILE_AUTO)
        format = by_extension(path);
    if (format < VF_PROFILE_CHROME_JSON || format > VF_PROFILE_HTML)
        return vf__fail(VF_ENOTSUP, "%s: unknown format %d", who, (int)format);
    if ((int)by < VF_PROFILE_SORT_TOTAL || by > VF_PROFILE_SORT_QUEUED)
        return vf__fail(VF_EINVAL, "%s: unknown sort key %d", who, (int)by);
    int to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (f == NULL)
        return vf__fail(VF_ESYSTEM, "%s: %s: %s", who, path, strerror(errno));
    int rc;
    switch (format) {
    case VF_PROFILE_SUMMARY_TEXT:
    case VF_PROFILE_SUMMARY_JSON:
        rc = vf__prof_write_summary(p, f, format, by);
        break;
    case VF_PROFILE_DOT:
        rc = vf__prof_write_dot(p, f);
        break;
    case VF_PROFILE_HTML:
        rc = vf__prof_write_html(p, f);
        break;
    default:
        rc = vf__prof_write_chrome(p, f);
        break;
    }
    int err = ferror(f) ? errno : 0;
    if (to_stdout ? fflush(f) != 0 : fclose(f) != 0)
        err = errno ? errno : EIO;
    if (rc != 0)
        return vf__fail(rc, "%s: %s: out of memory", who, path);
    if (err != 0)
        return vf__fail(VF_ESYSTEM, "%s: %s: %s", who, path, strerror(err));
    return 0;
}

VF_API int vf_profile_write(const vf_profile *p, const char *path,
                            vf_profile_format format)
{
    return emit("vf_profile_write", p, path, format, VF_PROFILE_SORT_TOTAL);
}

VF_API int vf_profile_write_summary(const vf_profile *p, const char *path,
                                    vf_profile_format format,
                                    vf_profile_sort by)
{
    if (format != VF_PROFILE_SUMMARY_TEXT && format != VF_PROFILE_SUMMARY_JSON)
        return vf__fail(VF_ENOTSUP,
                        "vf_profile_write_summary: format %d is "
                        "not a summary",
                        (int)format);
    return emit("vf_profile_write_summary", p, path, format, by);
}
