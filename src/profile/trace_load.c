/*
 * trace_load.c: reading a Chrome trace written by varflow back into a
 * snapshot (vf_profile_load), so that a trace saved by one run (VF_PROFILE)
 * can be turned into the other outputs later (varflow-report).
 *
 * The file is read into memory whole and cJSON parses it, one value at a
 * time: this file walks only the punctuation of the top-level object and
 * of its "traceEvents" array, and hands every key, every event and every
 * other value to cJSON, each event and otherData then to trace_read.c. So
 * only one event's tree exists at a time: a whole trace as one cJSON tree
 * takes about ten times the file's size (1.2 GB for the 116 MB trace of
 * 200 000 ops), against about the file's size here. Once the walk is
 * done, the records are sorted by id, and what needs otherData (which the
 * writer puts last) is checked.
 */
#include "profile/trace_load.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "profile/snapshot.h"
#include "profile/trace_read.h"
#include "varflow_profile.h"

/* ---------------------------------------------------------- the walk */

/* cJSON allocates through vf__malloc (see trace_load.h); a failure is
 * noted for the thread that parses. */
static _Thread_local int parse_nomem;

static void *parse_malloc(size_t size)
{
    void *p = vf__malloc(size);
    parse_nomem |= p == NULL;
    return p;
}

static void use_our_allocator(void)
{
    cJSON_Hooks hooks = {.malloc_fn = parse_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
}

static const char *skip_space(const char *p)
{
    return p + strspn(p, " \t\r\n");
}

/* Past white space, then past `c` if it is there. */
static int accept(const char **p, char c)
{
    *p = skip_space(*p);
    if (**p != c)
        return 0;
    (*p)++;
    return 1;
}

/* The JSON value at *p, parsed by cJSON into *out; *p moves past it.
 * Returns 0, VF_EINVAL or VF_ENOMEM. */
static int value(vf__trace_loader *ld, const char **p, cJSON **out)
{
    const char *stop = *p;
    parse_nomem = 0;
    *out = cJSON_ParseWithLengthOpts(*p, (size_t)(ld->end - *p), &stop, 0);
    *p = stop;
    if (*out != NULL)
        return 0;
    return parse_nomem ? VF_ENOMEM
                       : vf__trace_bad_at(ld, stop, "not valid JSON");
}

/* An error found in the tree of a value is placed at the value's first
 * byte (and event, -1 for none). */
static int place(vf__trace_loader *ld, int rc, const char *at, long event)
{
    if (rc == VF_EINVAL && ld->at == NULL) {
        ld->at = at;
        ld->event = event;
    }
    return rc;
}

/* The elements of traceEvents, one cJSON tree at a time. */
static int trace_events(vf__trace_loader *ld, const char **p)
{
    if (!accept(p, '['))
        return vf__trace_bad_at(ld, *p, "expected an array");
    if (accept(p, ']'))
        return 0;
    long i = 0;
    do {
        const char *at = skip_space(*p);
        cJSON *ev;
        int rc = value(ld, p, &ev);
        if (rc != 0)
            return rc;
        rc = vf__trace_event(ld, ev);
        cJSON_Delete(ev);
        if (rc != 0)
            return place(ld, rc, at, i);
        i++;
    } while (accept(p, ','));
    return accept(p, ']') ? 0 : vf__trace_bad_at(ld, *p, "expected ',' or ']'");
}

/* The top-level object: its keys, then traceEvents or another value. */
static int document(vf__trace_loader *ld)
{
    const char *p = ld->text;
    if (!accept(&p, '{'))
        return vf__trace_bad_at(ld, p, "expected an object");
    if (!accept(&p, '}')) {
        do {
            const char *at = skip_space(p);
            cJSON *key, *v;
            int rc = value(ld, &p, &key);
            if (rc != 0)
                return rc;
            int is_key = cJSON_IsString(key);
            int events = is_key && strcmp(key->valuestring, "traceEvents") == 0;
            int other = is_key && strcmp(key->valuestring, "otherData") == 0;
            cJSON_Delete(key);
            if (!is_key)
                return vf__trace_bad_at(ld, at, "expected a key (a string)");
            if (!accept(&p, ':'))
                return vf__trace_bad_at(ld, p, "expected ':'");
            if (events) {
                rc = trace_events(ld, &p);
            } else {
                at = skip_space(p);
                if ((rc = value(ld, &p, &v)) != 0)
                    return rc;
                if (other)
                    rc = place(ld, vf__trace_meta(ld, v), at, -1);
                cJSON_Delete(v);
            }
            if (rc != 0)
                return rc;
        } while (accept(&p, ','));
        if (!accept(&p, '}'))
            return vf__trace_bad_at(ld, p, "expected ',' or '}'");
    }
    p = skip_space(p);
    return p == ld->end
               ? 0
               : vf__trace_bad_at(ld, p, "text after the JSON document");
}

/* ------------------------------------------------------- the snapshot */

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const vf_profile_record *)a)->id;
    uint64_t y = ((const vf_profile_record *)b)->id;
    return x < y ? -1 : x > y;
}

/* Checks what needs the whole document and moves the gathered arrays
 * into a snapshot. Returns 0, VF_EINVAL (ld->why) or VF_ENOMEM. */
static int assemble(vf__trace_loader *ld, vf_profile **out)
{
    static const char no_meta[] =
        "no otherData with \"varflow\": 1 (not written by varflow)";
    if (!ld->have_meta)
        return vf__trace_bad(ld, "", no_meta);
    if (ld->npools != (size_t)ld->workers)
        return vf__trace_bad(ld, "worker_pools", "does not list every worker");
    if (ld->records >= 0 && (uint64_t)ld->records != ld->nrecs)
        return vf__trace_bad(ld, "records", "disagrees with the ops' events");
    for (size_t i = 0; i < ld->nrecs; i++) {
        const vf_profile_record *r = &ld->recs[i];
        if (r->worker < -1 || r->worker >= ld->workers) {
            snprintf(ld->buf, sizeof ld->buf,
                     "op %" PRIu64 ": no worker %d in the engine", r->id,
                     r->worker);
            return vf__trace_bad(ld, "", ld->buf);
        }
        /* A pool's index has no list to check it against (the trace
         * names the workers' pools, not their indices), but none is
         * below -1 (a thread of the program). */
        if (r->pool < -1) {
            snprintf(ld->buf, sizeof ld->buf,
                     "op %" PRIu64 ": no pool %d in the engine", r->id,
                     r->pool);
            return vf__trace_bad(ld, "", ld->buf);
        }
    }
    vf_profile *s = vf__calloc(1, sizeof *s);
    const char **pools = vf__calloc((size_t)ld->workers + 1, sizeof *pools);
    if (s == NULL || pools == NULL) {
        free(s);
        free(pools);
        return VF_ENOMEM;
    }
    if (ld->nrecs > 1)
        qsort(ld->recs, ld->nrecs, sizeof *ld->recs, by_id);
    uint64_t span = 0;
    for (size_t i = 0; i < ld->nrecs; i++) {
        vf_profile_record *r = &ld->recs[i];
        r->name = ld->names + (uintptr_t)r->name;
        r->deps = ld->deps + (uintptr_t)r->deps;
        span = r->end_ns > span ? r->end_ns : span;
        span = r->device_end_ns > span ? r->device_end_ns : span;
        if (i > 0 && r->id == r[-1].id) {
            snprintf(ld->buf, sizeof ld->buf, "op id %" PRIu64 " appears twice",
                     r->id);
            free(s);
            free(pools);
            return vf__trace_bad(ld, "", ld->buf);
        }
    }
    for (int w = 0; w < ld->workers; w++)
        pools[w] = ld->names + ld->pools[w];
    s->kind = ld->kind;
    s->nworkers = ld->workers;
    s->worker_pool = pools;
    s->count = ld->nrecs;
    s->records = ld->recs;
    s->deps = ld->deps;
    s->names = ld->names;
    s->dropped = ld->dropped;
    s->span_ns = ld->span_ns > span ? ld->span_ns : span;
    ld->recs = NULL; /* the snapshot's now */
    ld->deps = NULL;
    ld->names = NULL;
    *out = s;
    return 0;
}

/* The whole file, NUL-terminated; NULL with errno set. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = vf__malloc(cap);
    int read_errno = 0; /* fread's reason (EISDIR for a directory) */
    bool looked = false;
    while (buf != NULL) {
        errno = 0;
        n += fread(buf + n, 1, cap - n - 1, f);
        /* A trace is a JSON object: anything else (/dev/zero, a binary)
         * is refused at its first bytes, not read to its end. */
        size_t lead = 0;
        while (!looked && lead < n && strchr(" \t\r\n", buf[lead]) != NULL &&
               buf[lead] != '\0')
            lead++;
        if (!looked && lead < n) {
            looked = true;
            if (buf[lead] != '{') {
                read_errno = EILSEQ;
                break;
            }
        }
        if (ferror(f) || feof(f)) {
            read_errno = errno;
            break;
        }
        char *more = vf__malloc(cap * 2);
        if (more != NULL)
            memcpy(more, buf, n);
        free(buf);
        buf = more;
        cap *= 2;
    }
    int err = buf == NULL            ? ENOMEM
              : read_errno == EILSEQ ? EILSEQ
              : !ferror(f)           ? 0
              : read_errno           ? read_errno
                                     : EIO;
    fclose(f);
    if (err != 0) {
        free(buf);
        errno = err;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

int vf_profile_load(const char *path, vf_profile **out)
{
    static const char who[] = "vf_profile_load";
    static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
    if (path == NULL || out == NULL)
        return vf__fail(VF_EINVAL, "%s: NULL argument", who);
    *out = NULL;
    pthread_once(&hooks_once, use_our_allocator);
    size_t len = 0;
    char *text = slurp(path, &len);
    if (text == NULL && errno == EILSEQ)
        return vf__fail(VF_EINVAL, "%s: %s: not a JSON object", who, path);
    if (text == NULL)
        return vf__fail(errno == ENOMEM ? VF_ENOMEM : VF_ESYSTEM, "%s: %s: %s",
                        who, path, strerror(errno));
    vf__trace_loader ld = {.text = text,
                           .end = text + len,
                           .event = -1,
                           .kind = VF_ENGINE_PERDEVICE,
                           .records = -1};
    /* The gathered arrays are never NULL, even when empty. */
    int rc = vf__trace_grow((void **)&ld.recs, &ld.recs_cap, 1,
                            sizeof *ld.recs);
    if (rc == 0)
        rc = vf__trace_grow((void **)&ld.deps, &ld.deps_cap, 1,
                            sizeof *ld.deps);
    if (rc == 0)
        rc = vf__trace_grow((void **)&ld.names, &ld.names_cap, 1, 1);
    if (rc == 0)
        rc = document(&ld);
    if (rc == 0)
        rc = assemble(&ld, out);
    if (rc == 0) {
        /* Edges in a cycle: no run makes them, and every analysis of the
         * file would fail on them (the critical path finds them). */
        vf_profile_path crit;
        rc = vf_profile_critical_path(*out, &crit);
        if (rc == 0)
            vf_profile_path_destroy(&crit);
        else {
            vf_profile_destroy(*out);
            *out = NULL;
            if (rc == VF_EINVAL) {
                ld.at = NULL;
                snprintf(ld.key, sizeof ld.key, "deps");
                ld.why = "the dependency edges form a cycle";
            }
        }
    }
    if (rc == VF_EINVAL) {
        char where[64] = "";
        size_t at = ld.at != NULL ? (size_t)(ld.at - text) : 0;
        if (ld.at != NULL && ld.event >= 0)
            snprintf(where, sizeof where,
                     "traceEvents[%ld], byte %zu: ", ld.event, at);
        else if (ld.at != NULL)
            snprintf(where, sizeof where, "at byte %zu: ", at);
        vf__fail(rc, "%s: %s: %s%s%s%s", who, path, where, ld.key,
                 ld.key[0] ? ": " : "", ld.why);
    } else if (rc != 0) {
        vf__fail(rc, "%s: %s: out of memory", who, path);
    }
    free(text);
    free(ld.recs);
    free(ld.deps);
    free(ld.names);
    free(ld.pools);
    return rc;
}
