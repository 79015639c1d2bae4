/*
 * out.h: what the profiler's outputs share (write.c, trace_write.c,
 * summary.c, critical.c, dot.c, html.c), and the trace loader
 * (trace_load.c, which parses property names with them).
 *
 * Every output is computed from an immutable snapshot (struct vf_profile,
 * records sorted by id), so nothing here takes a lock or touches an
 * engine. A record's `deps` are the ids of the ops whose finishing released
 * it, as recorded: an id may appear twice (one op released two of its
 * vars), and may name an op the snapshot does not hold (dropped, or
 * recorded under an earlier session); outputs skip both. Writers return 0
 * or VF_ENOMEM (the file is then partial); I/O errors are caught by the
 * caller from the stream's error flag.
 */
#ifndef VF_PROFILE_OUT_H
#define VF_PROFILE_OUT_H

#include <stdio.h>

#include "profile/snapshot.h"
#include "varflow_profile.h"

/* Ops a Graphviz file shows at most (the first ones by id). */
#define VF__PROF_DOT_MAX 1000
/* Ops the HTML timeline shows at most (the first ones by id); every other
 * figure of the report covers all records. */
#define VF__PROF_HTML_MAX 200000

/* Index of the record with `id` (binary search), or -1. */
ptrdiff_t vf__prof_find(const vf_profile *p, uint64_t id);

/* The name a summary groups a record under: its own, or "(unnamed)" for
 * every op pushed without one. */
const char *vf__prof_name(const vf_profile_record *r);

/* The name one op is shown by (a trace slice, a dot node): its own, or
 * "op #<id>" (its place in push order within the profile, what the
 * trace's args, the critical path and the report call it) written into
 * buf. */
#define VF__PROF_LABEL_MAX 32
const char *vf__prof_label(const vf_profile_record *r,
                           char buf[VF__PROF_LABEL_MAX]);

/* Whether the op was pushed without a name. */
static inline int vf__prof_unnamed(const vf_profile_record *r)
{
    return r->name == NULL || r->name[0] == '\0';
}

/* Keep each of the n ids of `deps` once, in the order they first come:
 * how many are left (an op that reads two vars another op wrote was
 * released by it twice). A snapshot's records and a loaded trace's have
 * each dep once (record.c, trace_read.c), so no output looks for repeats. */
int vf__prof_deps_unique(uint64_t *deps, int n);

/* "ok", "skipped" or "failed". */
const char *vf__prof_status_name(int status);

/* The property's short name ("normal", "copy_to_device", ...), and back
 * (-1 when unknown). */
const char *vf__prof_property_name(vf_property prop);
int vf__prof_property_parse(const char *name);

/* The format a path's extension names (vf_profile_write's
 * VF_PROFILE_AUTO): .html/.htm, .dot/.gv, .txt, .summary.json, else the
 * Chrome trace. */
vf_profile_format vf__prof_format_of(const char *path);

/* A JSON string literal of `s`; with `html`, also <, > and & escaped, so
 * that the text may sit inside a <script> element. */
void vf__prof_json_string(FILE *f, const char *s, int html);

/* `s` as text (a summary's table, a dot label): UTF-8 as it is, and each
 * control character or byte that is not UTF-8 as U+FFFD (a name is the
 * program's bytes: a newline would break the table's line); with `dot`,
 * quotes and backslashes escaped. At most `max` characters (code points;
 * negative: all). Returns how many it wrote; with `f` NULL it writes
 * nothing and counts (a column's width). */
int vf__prof_text_string(FILE *f, const char *s, int max, int dot);

/* "cpu", "cuda" or "emulated". */
const char *vf__prof_device_name(vf_device d);

/* Whether the device told when r's work ran on its stream (a device op;
 * see vf_profile_record.device_start_ns). */
static inline int vf__prof_has_device_span(const vf_profile_record *r)
{
    return r->device_end_ns > 0;
}

/* r's device span's length (0 when it has none, or is out of order). */
static inline uint64_t vf__prof_device_dur(const vf_profile_record *r)
{
    return r->device_end_ns > r->device_start_ns
               ? r->device_end_ns - r->device_start_ns
               : 0;
}

/* The devices of the records with a device span, each once, sorted by
 * type then id, into *out (malloc'd, NULL when *n is 0); and a device's
 * index among them (-1: not there). 0 or VF_ENOMEM. */
int vf__prof_devices(const vf_profile *p, vf_device **out, size_t *n);
ptrdiff_t vf__prof_device_index(const vf_device *devs, size_t n, vf_device d);

/* `ns` as microseconds with exactly three decimals ("12.345"). */
void vf__prof_print_us(FILE *f, uint64_t ns);

/* `ns` for people: "850 ns", "12.35 us", "1.234 ms", "2.500 s" (3 to 6
 * significant digits). */
const char *vf__prof_human(char buf[32], uint64_t ns);

/*
 * The time workers ran ops, as spans: each worker's run times (>= 0)
 * merged, so an op run above another's wait on the same worker (a child in
 * vf_run_wait_children(), an op inside a nested vf_var_wait()) counts once,
 * inside the waiting op's span (counted twice, one worker showed a
 * parallelism of 2: found trying the profiler as a user); an op of a
 * thread of the program (worker -1) as its own span, those threads being
 * unknown apart. Async ops are left out: their span is the work they wait
 * for. *out is malloc'd (free it whatever n is). 0 or VF_ENOMEM.
 */
typedef struct vf__prof_span {
    uint64_t start, end;
} vf__prof_span;
int vf__prof_host_spans(const vf_profile *p, vf__prof_span **out, size_t *n);

/*
 * Concurrency over time: at each time `t` where a count changes, the number
 * of ops running (start <= t < end; on a worker, its ops nested above a
 * wait as one: vf__prof_host_spans), ready but not started (ready <= t <
 * start), and device ops whose work runs on their streams (device_start
 * <= t < device_end) from then on. Sorted by t, one entry per distinct
 * time, the last one back at zero. *out is malloc'd (NULL when n is 0).
 */
typedef struct vf__prof_level {
    uint64_t t;
    uint32_t running, ready, device;
} vf__prof_level;
int vf__prof_levels(const vf_profile *p, vf__prof_level **out, size_t *n);

/*
 * What limited a run, in one sentence (the report's verdict, the summary's
 * last header line), from the snapshot and its critical path (`path`, and
 * `stages` when known: the device work on the path; either may be NULL).
 * Work counts both sides of a device op: its function on a worker and its
 * work on a stream; the resources are the workers that ran ops and the
 * streams that ran device work. In this order, the first that holds:
 *   EMPTY       nothing recorded;
 *   DEPENDENCY  the critical path is >= 70% of the span;
 *   DEVICE      one stream ran work >= 70% of the span;
 *   WORKERS     on average >= 75% of the resources were busy;
 *   IDLE        otherwise: time went between ops.
 * Those four are decided twice, each figure made to clear its threshold
 * by 10 points, then let 10 points short count: when the two answers
 * differ, the run is BETWEEN them (`lo` the first in this order, `hi` the
 * other; the text names the figures and gives both sentences), so runs
 * of one program that differ by noise do not flip from one to the other.
 * ONE_WORKER where one worker ran every op, with no device work and no
 * async op, unless the run is plainly DEPENDENCY (`hi`) or IDLE (`lo`):
 * what the DAG would allow, not "more workers would help" (the pool may
 * have had more, idle).
 * `top` names the op with the most run time (NULL: none). 0 or VF_ENOMEM.
 */
typedef enum vf__prof_verdict_kind {
    VF__VERDICT_EMPTY,
    VF__VERDICT_ONE_WORKER,
    VF__VERDICT_DEPENDENCY,
    VF__VERDICT_DEVICE,
    VF__VERDICT_WORKERS,
    VF__VERDICT_IDLE,
    VF__VERDICT_BETWEEN
} vf__prof_verdict_kind;

typedef struct vf__prof_verdict {
    vf__prof_verdict_kind kind;
    const char *key;   /* "empty", "one-worker", "dependency", ... */
    const char *title; /* "Dependency-bound." */
    char text[2048];   /* the rest of the sentence */
    /* BETWEEN: the two verdicts (DEPENDENCY..IDLE) and their keys. */
    vf__prof_verdict_kind lo, hi;
    const char *lo_key, *hi_key;
    uint64_t host_ns;          /* run times (end - start) summed, but
                                  async ops', nested ones once
                                  (vf__prof_host_spans) */
    uint64_t async_ns;         /* async ops' (start to completion: mostly spent
                                  outside the workers, in the work they wait for) */
    uint64_t device_ns;        /* device spans summed */
    uint64_t device_beyond_ns; /* of them, the parts past each op's host
                                  end: work inside its own function
                                  (device_sync) is in host_ns already */
    uint64_t critical_ns;      /* the critical path's length */
    uint64_t critical_device_ns; /* of it, device work */
    int workers, streams;        /* that ran ops, device work */
    uint64_t busiest_stream_ns;
    double parallelism; /* (host_ns + device_beyond_ns) / span */
} vf__prof_verdict;
struct vf__prof_crit_stages;
int vf__prof_verdict_of(const vf_profile *p, const vf_profile_path *path,
                        const struct vf__prof_crit_stages *stages,
                        const char *top, vf__prof_verdict *out);

/* The critical path (vf_profile_critical_path; critical.c says how device
 * ops count) and, when `stages` is not NULL, per op of the path: the time
 * it adds to the path's length (its stages on the path), whether its
 * device stage is on it, and that stage's part of the time. Free with
 * vf__prof_crit_stages_free (also on an error, which leaves them NULL). */
typedef struct vf__prof_crit_stages {
    uint64_t *weight;
    uint8_t *device;
    uint64_t *device_ns;
    /* Every op's weight, as the path weighs it (its own time: less its
     * waits and what ran inside it, plus its device stage): the work
     * "what the DAG allows" divides by the path's length. */
    uint64_t total_ns;
} vf__prof_crit_stages;
int vf__prof_critical(const vf_profile *p, vf_profile_path *out,
                      vf__prof_crit_stages *stages);
void vf__prof_crit_stages_free(vf__prof_crit_stages *stages);

/* The writers, by format. */
int vf__prof_write_chrome(const vf_profile *p, FILE *f);
int vf__prof_write_summary(const vf_profile *p, FILE *f,
                           vf_profile_format format, vf_profile_sort by);
int vf__prof_write_dot(const vf_profile *p, FILE *f);
int vf__prof_write_html(const vf_profile *p, FILE *f);

#endif /* VF_PROFILE_OUT_H */
