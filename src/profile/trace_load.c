/*
 * trace_load.c: reading a Chrome trace written by varflow back into a
 * snapshot (vf_profile_load), so that a trace saved by one run (VF_PROFILE)
 * can be turned into the other outputs later (varflow-report).
 *
 * The file is read into memory whole and cJSON parses it, one value at a
 * time: this file walks only the punctuation of the top-level object and
 * of its "traceEvents" array, and hands every key, every event and every
 * other value to cJSON. So only one event's tree exists at a time: a whole
 * trace as one cJSON tree takes about ten times the file's size (1.2 GB
 * for the 116 MB trace of 200 000 ops), against about the file's size
 * here.
 *
 * "otherData" gives the engine, its workers and their pools, the dropped
 * count and the span, and must say "varflow": 1. A complete event ("X")
 * whose args hold an "id" is a record (a device op's args may add
 * "device_start_us" and "device_end_us", its device span); every event is
 * checked the same way, and only records are kept (a device op's slice on
 * its stream's track, category "device", holds "op", not "id": skipped). Fields come in any order and unknown
 * ones are ignored; a key given twice is read twice (the last value
 * counts). The records, their deps and their names are gathered in growing
 * arrays that become the snapshot's (a record's name and deps hold
 * offsets until the arrays stop moving); then the records are sorted by
 * id, and what needs otherData (which the writer puts last) is checked.
 *
 * Numbers: cJSON keeps a number as a double. The writer prints integers,
 * and times as microseconds with three decimals (n ns as the decimal
 * n / 1000). Integers under 2^53 and times under 2^43 us (101 days) come
 * back exactly; larger ones are refused, since a double cannot tell them
 * from their neighbours. Times with more decimals are rounded to the
 * nanosecond.
 */
#include "profile/trace_load.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/alloc.h"
#include "base/error.h"
#include "profile/out.h"

/* 2^53: every integer below it is a double exactly. */
#define INTEGER_MAX 9007199254740992.0
/* 2^43 microseconds: below it a double is within 2^-11 us of the decimal
 * it was read from (see micros). */
#define MICROS_MAX 8796093022208.0

typedef struct loader {
    const char *text, *end; /* the file, NUL-terminated at end */
    /* The first error (VF_EINVAL): why, at which key (or ""), in which
     * event (-1: none) and at which byte (NULL: none). */
    const char *why, *at;
    char key[32];
    long event;
    char buf[64]; /* for a `why` with a number in it */
    /* Gathered: records with offsets into names[] and deps[] */
    vf_profile_record *recs;
    size_t nrecs, recs_cap;
    uint64_t *deps;
    size_t ndeps, deps_cap;
    char *names; /* NUL-terminated names, one after the other */
    size_t names_len, names_cap;
    /* otherData */
    int have_meta, workers;
    vf_engine_type kind;
    uint64_t dropped, span_ns;
    size_t *pools; /* per worker: offset of its pool's name in names[] */
    size_t npools, pools_cap;
} loader;

static int bad(loader *ld, const char *key, const char *what)
{
    if (ld->why == NULL) {
        ld->why = what;
        snprintf(ld->key, sizeof ld->key, "%s", key != NULL ? key : "");
    }
    return VF_EINVAL;
}

/* An error at a byte of the file (a JSON error, where cJSON stopped). */
static int bad_at(loader *ld, const char *at, const char *what)
{
    if (ld->why == NULL)
        ld->at = at;
    return bad(ld, "", what);
}

/* Room for `need` elements of `size` bytes in *arr (vf__malloc and copy:
 * the allocation funnel has no realloc). */
static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap * 2 : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *t = vf__malloc(cap2 * size);
    if (t == NULL)
        return VF_ENOMEM;
    if (*cap)
        memcpy(t, *arr, *cap * size);
    free(*arr);
    *arr = t;
    *cap = cap2;
    return 0;
}

/* Copies a name into names[]; its offset into *off. */
static int add_name(loader *ld, const char *name, size_t *off)
{
    size_t len = strlen(name) + 1;
    if (grow((void **)&ld->names, &ld->names_cap, ld->names_len + len, 1))
        return VF_ENOMEM;
    memcpy(ld->names + ld->names_len, name, len);
    *off = ld->names_len;
    ld->names_len += len;
    return 0;
}

/* Whether v is an integer under 2^53 in magnitude. */
static int exact_integer(const cJSON *v)
{
    double d = v->valuedouble;
    return cJSON_IsNumber(v) && d > -INTEGER_MAX && d < INTEGER_MAX &&
           d == (double)(int64_t)d;
}

static int integer(loader *ld, const cJSON *v, int64_t *out)
{
    if (!exact_integer(v))
        return bad(ld, v->string, "expected an integer (under 2^53)");
    *out = (int64_t)v->valuedouble;
    return 0;
}

/*
 * Microseconds as nanoseconds. The writer printed n ns as the decimal
 * n / 1000, and the double d read from it is the nearest one: under 2^43,
 * within half a unit in its last place, 2^-11 us, of the decimal. So d's
 * integer part is n / 1000's (a decimal with three decimals is at least
 * 0.001 from the next integer), and d's fraction times 1000 is within
 * 0.49 of n % 1000 (the fraction is exact, the product's rounding error
 * under 2^-42): rounded, it is n % 1000. Multiplying d by 1000 whole
 * would not do: near 2^52 ns the product's rounding adds up to 0.25.
 */
static int micros(loader *ld, const cJSON *v, uint64_t *out)
{
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || !(d >= 0 && d < MICROS_MAX))
        return bad(ld, v->string,
                   "expected microseconds (not negative, under 2^43)");
    uint64_t us = (uint64_t)d;
    double frac_ns = (d - (double)us) * 1000.0;
    *out = us * 1000 + (uint64_t)(frac_ns + 0.5);
    return 0;
}

static int string(loader *ld, const cJSON *v, const char **out)
{
    if (!cJSON_IsString(v))
        return bad(ld, v->string, "expected a string");
    *out = v->valuestring;
    return 0;
}

/* "cpu:0" and the like. */
static int device(loader *ld, const cJSON *v, vf_device *out)
{
    static const char *const types[] = {"cpu", "cuda", "emulated"};
    const char *s;
    if (string(ld, v, &s) != 0)
        return VF_EINVAL;
    for (int t = 0; t < 3; t++) {
        size_t n = strlen(types[t]);
        if (strncmp(s, types[t], n) == 0 && s[n] == ':') {
            out->type = (vf_device_type)t;
            out->id = atoi(s + n + 1);
            return 0;
        }
    }
    return bad(ld, v->string, "unknown device");
}

/* An event's args into *r; *deps is the "deps" array, if any; *unnamed
 * set when the op had no name (its slice says "op #<id>"). */
static int args(loader *ld, const cJSON *o, vf_profile_record *r,
                const cJSON **deps, int *unnamed)
{
    if (!cJSON_IsObject(o))
        return bad(ld, o->string, "expected an object");
    const cJSON *f;
    cJSON_ArrayForEach(f, o)
    {
        const char *k = f->string, *s;
        int64_t v = 0;
        int rc = 0;
        if (strcmp(k, "id") == 0) {
            if ((rc = integer(ld, f, &v)) == 0 && v <= 0)
                return bad(ld, k, "an op id must be positive");
            r->id = (uint64_t)v;
        } else if (strcmp(k, "code") == 0) {
            rc = integer(ld, f, &v);
            r->status = (int)v;
        } else if (strcmp(k, "worker") == 0) {
            rc = integer(ld, f, &v);
            r->worker = (int)v;
        } else if (strcmp(k, "pool") == 0) {
            rc = integer(ld, f, &v);
            r->pool = (int)v;
        } else if (strcmp(k, "push_us") == 0) {
            rc = micros(ld, f, &r->push_ns);
        } else if (strcmp(k, "ready_us") == 0) {
            rc = micros(ld, f, &r->ready_ns);
        } else if (strcmp(k, "device_start_us") == 0) {
            rc = micros(ld, f, &r->device_start_ns);
        } else if (strcmp(k, "device_end_us") == 0) {
            rc = micros(ld, f, &r->device_end_ns);
        } else if (strcmp(k, "device") == 0) {
            rc = device(ld, f, &r->device);
        } else if (strcmp(k, "property") == 0) {
            if ((rc = string(ld, f, &s)) == 0 &&
                (v = vf__prof_property_parse(s)) < 0)
                return bad(ld, k, "unknown property");
            r->property = (vf_property)v;
        } else if (strcmp(k, "async") == 0) {
            if (!cJSON_IsBool(f))
                return bad(ld, k, "expected true or false");
            r->async = cJSON_IsTrue(f);
        } else if (strcmp(k, "unnamed") == 0) {
            if (!cJSON_IsBool(f))
                return bad(ld, k, "expected true or false");
            *unnamed = cJSON_IsTrue(f);
        } else if (strcmp(k, "deps") == 0) {
            if (!cJSON_IsArray(f))
                return bad(ld, k, "expected an array");
            const cJSON *d;
            cJSON_ArrayForEach(d, f)
            {
                if (!exact_integer(d))
                    return bad(ld, k, "expected an array of op ids");
            }
            *deps = f;
        }
        if (rc != 0)
            return VF_EINVAL;
    }
    return 0;
}

/* One element of traceEvents; a record is added to the gathered ones. */
static int event(loader *ld, const cJSON *ev)
{
    vf_profile_record r;
    memset(&r, 0, sizeof r);
    r.worker = r.pool = -1;
    if (!cJSON_IsObject(ev))
        return bad(ld, "", "expected an object");
    int is_x = 0, unnamed = 0;
    uint64_t ts = 0, dur = 0;
    const char *name = NULL;
    const cJSON *f, *deps = NULL;
    cJSON_ArrayForEach(f, ev)
    {
        const char *k = f->string, *ph;
        int rc = 0;
        if (strcmp(k, "ph") == 0) {
            if ((rc = string(ld, f, &ph)) == 0)
                is_x = strcmp(ph, "X") == 0;
        } else if (strcmp(k, "name") == 0) {
            rc = string(ld, f, &name);
        } else if (strcmp(k, "ts") == 0) {
            rc = micros(ld, f, &ts);
        } else if (strcmp(k, "dur") == 0) {
            rc = micros(ld, f, &dur);
        } else if (strcmp(k, "args") == 0) {
            rc = args(ld, f, &r, &deps, &unnamed);
        }
        if (rc != 0)
            return VF_EINVAL;
    }
    if (!is_x || r.id == 0)
        return 0;
    if (name == NULL)
        return bad(ld, "", "an op without a name");
    if (unnamed)
        name = ""; /* the record's name; "op #<id>" was for the viewer */
    r.start_ns = ts;
    r.end_ns = ts + dur;
    if (r.push_ns > r.ready_ns || r.ready_ns > r.start_ns)
        return bad(ld, "", "push, ready and start times out of order");
    if (r.device_start_ns > r.device_end_ns)
        return bad(ld, "", "device start after device end");
    size_t off;
    r.ndeps = cJSON_GetArraySize(deps);
    if (add_name(ld, name, &off) != 0 ||
        grow((void **)&ld->deps, &ld->deps_cap, ld->ndeps + r.ndeps,
             sizeof *ld->deps) != 0 ||
        grow((void **)&ld->recs, &ld->recs_cap, ld->nrecs + 1,
             sizeof *ld->recs) != 0)
        return VF_ENOMEM;
    r.name = (const char *)(uintptr_t)off;
    r.deps = (const uint64_t *)(uintptr_t)ld->ndeps;
    cJSON_ArrayForEach(f, deps)
    {
        ld->deps[ld->ndeps++] = (uint64_t)(int64_t)f->valuedouble;
    }
    ld->recs[ld->nrecs++] = r;
    return 0;
}

static int meta(loader *ld, const cJSON *o)
{
    if (!cJSON_IsObject(o))
        return bad(ld, "otherData", "expected an object");
    const cJSON *f;
    cJSON_ArrayForEach(f, o)
    {
        const char *k = f->string, *s;
        int64_t v = 0;
        int rc = 0;
        if (strcmp(k, "varflow") == 0) {
            if ((rc = integer(ld, f, &v)) == 0 && v != 1)
                return bad(ld, k, "a varflow trace of another format version");
            ld->have_meta = 1;
        } else if (strcmp(k, "engine") == 0) {
            if ((rc = string(ld, f, &s)) == 0)
                ld->kind = strcmp(s, "naive") == 0    ? VF_ENGINE_NAIVE
                           : strcmp(s, "pooled") == 0 ? VF_ENGINE_POOLED
                                                      : VF_ENGINE_PERDEVICE;
        } else if (strcmp(k, "workers") == 0) {
            if ((rc = integer(ld, f, &v)) == 0 && (v < 0 || v > 1 << 20))
                return bad(ld, k, "bad worker count");
            ld->workers = (int)v;
        } else if (strcmp(k, "worker_pools") == 0) {
            if (!cJSON_IsArray(f))
                return bad(ld, k, "expected an array");
            const cJSON *p;
            ld->npools = 0;
            cJSON_ArrayForEach(p, f)
            {
                if (!cJSON_IsString(p))
                    return bad(ld, k, "expected an array of strings");
                if (grow((void **)&ld->pools, &ld->pools_cap, ld->npools + 1,
                         sizeof *ld->pools) != 0 ||
                    add_name(ld, p->valuestring, &ld->pools[ld->npools]) != 0)
                    return VF_ENOMEM;
                ld->npools++;
            }
        } else if (strcmp(k, "dropped") == 0) {
            rc = integer(ld, f, &v);
            ld->dropped = (uint64_t)v;
        } else if (strcmp(k, "span_ns") == 0) {
            rc = integer(ld, f, &v);
            ld->span_ns = (uint64_t)v;
        }
        if (rc != 0)
            return VF_EINVAL;
    }
    return 0;
}

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
static int value(loader *ld, const char **p, cJSON **out)
{
    const char *stop = *p;
    parse_nomem = 0;
    *out = cJSON_ParseWithLengthOpts(*p, (size_t)(ld->end - *p), &stop, 0);
    *p = stop;
    if (*out != NULL)
        return 0;
    return parse_nomem ? VF_ENOMEM : bad_at(ld, stop, "not valid JSON");
}

/* An error found in the tree of a value is placed at the value's first
 * byte (and event, -1 for none). */
static int place(loader *ld, int rc, const char *at, long event)
{
    if (rc == VF_EINVAL && ld->at == NULL) {
        ld->at = at;
        ld->event = event;
    }
    return rc;
}

/* The elements of traceEvents, one cJSON tree at a time. */
static int trace_events(loader *ld, const char **p)
{
    if (!accept(p, '['))
        return bad_at(ld, *p, "expected an array");
    if (accept(p, ']'))
        return 0;
    long i = 0;
    do {
        const char *at = skip_space(*p);
        cJSON *ev;
        int rc = value(ld, p, &ev);
        if (rc != 0)
            return rc;
        rc = event(ld, ev);
        cJSON_Delete(ev);
        if (rc != 0)
            return place(ld, rc, at, i);
        i++;
    } while (accept(p, ','));
    return accept(p, ']') ? 0 : bad_at(ld, *p, "expected ',' or ']'");
}

/* The top-level object: its keys, then traceEvents or another value. */
static int document(loader *ld)
{
    const char *p = ld->text;
    if (!accept(&p, '{'))
        return bad_at(ld, p, "expected an object");
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
                return bad_at(ld, at, "expected a key (a string)");
            if (!accept(&p, ':'))
                return bad_at(ld, p, "expected ':'");
            if (events) {
                rc = trace_events(ld, &p);
            } else {
                at = skip_space(p);
                if ((rc = value(ld, &p, &v)) != 0)
                    return rc;
                if (other)
                    rc = place(ld, meta(ld, v), at, -1);
                cJSON_Delete(v);
            }
            if (rc != 0)
                return rc;
        } while (accept(&p, ','));
        if (!accept(&p, '}'))
            return bad_at(ld, p, "expected ',' or '}'");
    }
    p = skip_space(p);
    return p == ld->end ? 0 : bad_at(ld, p, "text after the JSON document");
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
static int assemble(loader *ld, vf_profile **out)
{
    static const char no_meta[] =
        "no otherData with \"varflow\": 1 (not written by varflow)";
    if (!ld->have_meta)
        return bad(ld, "", no_meta);
    if (ld->npools != (size_t)ld->workers)
        return bad(ld, "worker_pools", "does not list every worker");
    for (size_t i = 0; i < ld->nrecs; i++) {
        const vf_profile_record *r = &ld->recs[i];
        if (r->worker < -1 || r->worker >= ld->workers) {
            snprintf(ld->buf, sizeof ld->buf,
                     "op %" PRIu64 ": no worker %d in the engine", r->id,
                     r->worker);
            return bad(ld, "", ld->buf);
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
            return bad(ld, "", ld->buf);
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
    while (buf != NULL) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (ferror(f) || feof(f))
            break;
        char *more = vf__malloc(cap * 2);
        if (more != NULL)
            memcpy(more, buf, n);
        free(buf);
        buf = more;
        cap *= 2;
    }
    int err = buf == NULL ? ENOMEM : ferror(f) ? EIO : 0;
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
    if (text == NULL)
        return vf__fail(errno == ENOMEM ? VF_ENOMEM : VF_ESYSTEM, "%s: %s: %s",
                        who, path, strerror(errno));
    loader ld = {.text = text,
                 .end = text + len,
                 .event = -1,
                 .kind = VF_ENGINE_PERDEVICE};
    /* The gathered arrays are never NULL, even when empty. */
    int rc = grow((void **)&ld.recs, &ld.recs_cap, 1, sizeof *ld.recs);
    if (rc == 0)
        rc = grow((void **)&ld.deps, &ld.deps_cap, 1, sizeof *ld.deps);
    if (rc == 0)
        rc = grow((void **)&ld.names, &ld.names_cap, 1, 1);
    if (rc == 0)
        rc = document(&ld);
    if (rc == 0)
        rc = assemble(&ld, out);
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
