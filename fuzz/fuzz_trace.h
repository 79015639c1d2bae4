/*
 * fuzz_trace.h: what varflow-report does with a trace file, checked on any
 * bytes (fuzz/fuzz_trace.c under libFuzzer; tests/test_profile.c replays
 * the checked-in corpus, fuzz/corpus_trace, in every make test).
 *
 * A trace is input the program may not have written (docs/PROFILING.md):
 * vf_profile_load refuses what no run writes, and whatever it accepts,
 * every output and the critical path take (no crash, leak, hang or
 * undefined behaviour: the sanitizers say so), and the Chrome trace
 * written from it loads back as the same records. vf__fuzz_trace_check
 * returns 0, or a line saying what broke (the harness aborts on it).
 */
#ifndef VF_FUZZ_TRACE_H
#define VF_FUZZ_TRACE_H

#include <stdio.h>
#include <string.h>

#include <varflow.h>
#include <varflow_profile.h>

#include "profile/trace_load.h"

/* Where the outputs go: written, then dropped. */
static const char *const vf__fuzz_sink = "/dev/null";

/* Whether a name is plain ASCII: one the JSON carries byte for byte (a
 * byte that is not UTF-8 is written as U+FFFD, a control character
 * escaped: PROFILING.md). */
static int vf__fuzz_plain(const char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

/* The record fields a Chrome trace carries, compared. */
static const char *vf__fuzz_record_differs(const vf_profile_record *a,
                                           const vf_profile_record *b)
{
    if (a->id != b->id ||
        (vf__fuzz_plain(a->name) && strcmp(a->name, b->name) != 0))
        return "id or name";
    if (a->push_ns != b->push_ns || a->ready_ns != b->ready_ns ||
        a->start_ns != b->start_ns || a->end_ns != b->end_ns)
        return "times";
    if (a->device_start_ns != b->device_start_ns ||
        a->device_end_ns != b->device_end_ns ||
        a->device.type != b->device.type || a->device.id != b->device.id)
        return "device";
    if (a->worker != b->worker || a->pool != b->pool ||
        a->status != b->status || a->property != b->property ||
        a->async != b->async)
        return "worker, pool, status, property or async";
    if (a->ndeps != b->ndeps ||
        (a->ndeps > 0 &&
         memcmp(a->deps, b->deps, (size_t)a->ndeps * sizeof *a->deps) != 0))
        return "deps";
    return NULL;
}

/* Load `path` and do with it what varflow-report does; `again` is where
 * its Chrome trace is written to be loaded back. */
static const char *vf__fuzz_trace_check(const char *path, const char *again)
{
    static char why[256];
    vf_profile *p = NULL;
    if (vf_profile_load(path, &p) != 0)
        return p == NULL ? NULL : "a refused load left a profile";
    static const vf_profile_format formats[] = {
        VF_PROFILE_SUMMARY_TEXT, VF_PROFILE_SUMMARY_JSON, VF_PROFILE_DOT,
        VF_PROFILE_HTML};
    for (int i = 0; i < 4; i++)
        (void)vf_profile_write(p, vf__fuzz_sink, formats[i]);
    for (int s = VF_PROFILE_SORT_TOTAL; s <= VF_PROFILE_SORT_QUEUED; s++)
        (void)vf_profile_summary_write(
            p, vf__fuzz_sink, VF_PROFILE_SUMMARY_TEXT, (vf_profile_sort)s);
    vf_profile_path crit;
    const char *broke = NULL;
    if (vf_profile_critical_path(p, &crit) != 0)
        broke = "a loaded profile has no critical path";
    else
        vf_profile_path_destroy(&crit);
    vf_profile *q = NULL;
    if (broke == NULL &&
        vf_profile_write(p, again, VF_PROFILE_CHROME_JSON) == 0) {
        if (vf_profile_load(again, &q) != 0) {
            snprintf(why, sizeof why, "its Chrome trace does not load: %s",
                     vf_error_detail());
            broke = why;
        } else if (vf_profile_count(q) != vf_profile_count(p)) {
            broke = "its Chrome trace has another count";
        } else {
            for (size_t i = 0; i < vf_profile_count(p) && !broke; i++) {
                const char *what = vf__fuzz_record_differs(vf_profile_at(p, i),
                                                           vf_profile_at(q, i));
                if (what != NULL) {
                    snprintf(why, sizeof why,
                             "its Chrome trace differs in record %zu: %s", i,
                             what);
                    broke = why;
                }
            }
        }
        vf_profile_destroy(q);
    }
    vf_profile_destroy(p);
    return broke;
}

#endif /* VF_FUZZ_TRACE_H */
