/*
 * profile_write.c: the profiler's outputs, from a snapshot.
 *
 * Chrome trace JSON: one track (thread) per worker, plus one for ops run
 * inline; a complete event ("X") per op with its times and status.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common.h"
#include "error.h"

/* A JSON string literal of `s`. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Chrome's thread id for a record's track: workers 1.., inline 0. */
static int track(const vf_profile_record *r)
{
    return r->worker + 1;
}

static void write_chrome(const vf_profile *p, FILE *f)
{
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\","
               "\"args\":{\"name\":\"varflow (%s)\"}}",
            vf_engine_type_name(vf_profile_engine_kind(p)));
    fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"thread_name\","
               "\"args\":{\"name\":\"inline\"}}");
    for (int w = 0; w < vf_profile_num_workers(p); w++)
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":"
                   "\"thread_name\",\"args\":{\"name\":\"%s worker %d\"}}",
                w + 1, vf_profile_worker_pool(p, w), w);
    for (size_t i = 0; i < vf_profile_count(p); i++) {
        const vf_profile_record *r = vf_profile_at(p, i);
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"name\":",
                track(r));
        json_string(f, r->name[0] ? r->name : "(unnamed)");
        fprintf(f, ",\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"id\":%" PRIu64
                   ",\"status\":%d,\"push_us\":%.3f,\"ready_us\":%.3f}}",
                r->start_ns / 1e3, (r->end_ns - r->start_ns) / 1e3, r->id,
                r->status, r->push_ns / 1e3, r->ready_ns / 1e3);
    }
    fprintf(f, "\n],\"otherData\":{\"dropped\":%" PRIu64 "}}\n",
            vf_profile_dropped(p));
}

VF_API int vf_profile_write(const vf_profile *p, const char *path,
                            vf_profile_format format)
{
    static const char who[] = "vf_profile_write";
    if (p == NULL || path == NULL)
        return vf__fail(VF_EINVAL, "%s: NULL profile or path", who);
    if (format != VF_PROFILE_AUTO && format != VF_PROFILE_CHROME_JSON)
        return vf__fail(VF_ENOTSUP, "%s: unknown format %d", who,
                        (int)format);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return vf__fail(VF_ESYSTEM, "%s: %s: %s", who, path, strerror(errno));
    write_chrome(p, f);
    if (fclose(f) != 0)
        return vf__fail(VF_ESYSTEM, "%s: %s: %s", who, path, strerror(errno));
    return 0;
}
