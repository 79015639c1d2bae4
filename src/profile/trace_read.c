/*
 * trace_read.c: reading one event, or otherData, of a Chrome trace into
 * the loader (trace_read.h), for vf_profile_load (trace_load.c).
 *
 * Which fields there are, and how each is written, is the list of
 * trace_fields.h, which the writer (trace_write.c) expands too: here a
 * get_<kind> function reads each kind back, and get_meta_<what> each
 * field of otherData. "otherData" gives the engine, its workers and their
 * pools, the dropped count and the span, and must say "varflow": 1. A
 * complete event ("X") whose args hold an "id" is a record (a device op's
 * args may add "device_start_us" and "device_end_us", its device span);
 * every event is checked the same way, and only records are kept (a
 * device op's slice on its stream's track, category "device", holds "op",
 * not "id": skipped). Fields come in any order and unknown ones are
 * ignored; a key given twice is read twice (the last value counts). The
 * records, their deps and their names are gathered in growing arrays that
 * become the snapshot's (a record's name and deps hold offsets until the
 * arrays stop moving).
 *
 * Numbers: cJSON keeps a number as a double. The writer prints integers,
 * and times as microseconds with three decimals (n ns as the decimal
 * n / 1000). Integers under 2^53 and times under 2^43 us (101 days) come
 * back exactly; larger ones are refused, since a double cannot tell them
 * from their neighbours. Times with more decimals are rounded to the
 * nanosecond.
 */
#include "profile/trace_read.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "base/alloc.h"
#include "base/engine_type.h"
#include "profile/out.h"
#include "profile/trace_fields.h"
#include "varflow_profile.h"

/* 2^53: every integer below it is a double exactly. */
#define INTEGER_MAX 9007199254740992.0
/* 2^43 microseconds: below it a double is within 2^-11 us of the decimal
 * it was read from (see micros). */
#define MICROS_MAX 8796093022208.0
/* Device ids a trace may name, per type: the engine's are 0-7
 * (device_pools.h), and a later version may have a few more. */
#define TRACE_DEVICE_IDS 64

/* --- the loader's bookkeeping (trace_read.h) ----------------------------- */

int vf__trace_bad(vf__trace_loader *ld, const char *key, const char *what)
{
    if (ld->why == NULL) {
        ld->why = what;
        snprintf(ld->key, sizeof ld->key, "%s", key != NULL ? key : "");
    }
    return VF_EINVAL;
}

int vf__trace_bad_at(vf__trace_loader *ld, const char *at, const char *what)
{
    if (ld->why == NULL)
        ld->at = at;
    return vf__trace_bad(ld, "", what);
}

int vf__trace_grow(void **arr, size_t *cap, size_t need, size_t size)
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

int vf__trace_add_name(vf__trace_loader *ld, const char *name, size_t *off)
{
    size_t len = strlen(name) + 1;
    if (vf__trace_grow((void **)&ld->names, &ld->names_cap, ld->names_len + len,
                       1))
        return VF_ENOMEM;
    memcpy(ld->names + ld->names_len, name, len);
    *off = ld->names_len;
    ld->names_len += len;
    return 0;
}
/* --- values -----------------------------------------------------------------
 */

/* Whether v is an integer under 2^53 in magnitude. */
static int exact_integer(const cJSON *v)
{
    double d = v->valuedouble;
    return cJSON_IsNumber(v) && d > -INTEGER_MAX && d < INTEGER_MAX &&
           d == (double)(int64_t)d;
}

static int integer(vf__trace_loader *ld, const cJSON *v, int64_t *out)
{
    if (!exact_integer(v))
        return vf__trace_bad(ld, v->string, "expected an integer (under 2^53)");
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
static int micros(vf__trace_loader *ld, const cJSON *v, uint64_t *out)
{
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || !(d >= 0 && d < MICROS_MAX))
        return vf__trace_bad(
            ld, v->string, "expected microseconds (not negative, under 2^43)");
    uint64_t us = (uint64_t)d;
    double frac_ns = (d - (double)us) * 1000.0;
    *out = us * 1000 + (uint64_t)(frac_ns + 0.5);
    return 0;
}

static int string(vf__trace_loader *ld, const cJSON *v, const char **out)
{
    if (!cJSON_IsString(v))
        return vf__trace_bad(ld, v->string, "expected a string");
    *out = v->valuestring;
    return 0;
}

/* "cpu:0" and the like. */
static int device(vf__trace_loader *ld, const cJSON *v, vf_device *out)
{
    static const char *const types[] = {"cpu", "cuda", "emulated"};
    const char *s;
    if (string(ld, v, &s) != 0)
        return VF_EINVAL;
    for (int t = 0; t < 3; t++) {
        size_t n = strlen(types[t]);
        if (strncmp(s, types[t], n) == 0 && s[n] == ':') {
            /* Digits, a device id as the engine takes them (ids of a
             * type are few: the outputs look devices up one by one). */
            const char *id = s + n + 1;
            size_t len = strspn(id, "0123456789");
            long x = len > 0 && len < 4 && id[len] == '\0' ? atol(id) : -1;
            if (x < 0 || x >= TRACE_DEVICE_IDS)
                return vf__trace_bad(ld, v->string,
                                     "expected a device id under 64");
            out->type = (vf_device_type)t;
            out->id = (int)x;
            return 0;
        }
    }
    return vf__trace_bad(ld, v->string, "unknown device");
}

/* --- the fields (trace_fields.h) ---------------------------------------- */

/* Reading one event's args: where a record's fields go besides the
 * record, the "deps" array (copied once the record is whole) and whether
 * the op had no name (its slice says "op #<id>"). */
typedef struct args_in {
    vf__trace_loader *ld;
    const cJSON **deps;
    int *unnamed;
    const char *status; /* the "status" word, or NULL */
} args_in;

/* A record's args, by kind (VF__TRACE_RECORD_ARGS). */
static int get_op_id(args_in *a, const cJSON *v, uint64_t *id)
{
    int64_t x = 0;
    if (integer(a->ld, v, &x) != 0)
        return VF_EINVAL;
    if (x <= 0)
        return vf__trace_bad(a->ld, v->string, "an op id must be positive");
    *id = (uint64_t)x;
    return 0;
}

static int get_op_ref(args_in *a, const cJSON *v, uint64_t *id)
{
    return get_op_id(a, v, id);
}

static int get_boolean(args_in *a, const cJSON *v, bool *b)
{
    if (!cJSON_IsBool(v))
        return vf__trace_bad(a->ld, v->string, "expected true or false");
    *b = cJSON_IsTrue(v);
    return 0;
}

static int get_unnamed(args_in *a, const cJSON *v, const char **name)
{
    (void)name; /* the slice's name is read with the event's */
    bool b = false;
    int rc = get_boolean(a, v, &b);
    *a->unnamed = b;
    return rc;
}

static int get_status(args_in *a, const cJSON *v, int *status)
{
    (void)status; /* for people: "code" says it, which must agree (args) */
    const char *s;
    if (string(a->ld, v, &s) != 0)
        return VF_EINVAL;
    if (strcmp(s, "ok") != 0 && strcmp(s, "skipped") != 0 &&
        strcmp(s, "failed") != 0)
        return vf__trace_bad(a->ld, v->string,
                             "expected \"ok\", \"skipped\" or \"failed\"");
    a->status = s;
    return 0;
}

static int get_integer(args_in *a, const cJSON *v, int *out)
{
    int64_t x = 0;
    if (integer(a->ld, v, &x) != 0)
        return VF_EINVAL;
    if (x < INT_MIN || x > INT_MAX)
        return vf__trace_bad(a->ld, v->string, "expected an int");
    *out = (int)x;
    return 0;
}

static int get_micros(args_in *a, const cJSON *v, uint64_t *ns)
{
    return micros(a->ld, v, ns);
}

static int get_queued(args_in *a, const cJSON *v, uint64_t *start_ns)
{
    (void)a;
    (void)v;
    (void)start_ns; /* for people: ready and ts say it */
    return 0;
}

static int get_device(args_in *a, const cJSON *v, vf_device *d)
{
    return device(a->ld, v, d);
}

static int get_property(args_in *a, const cJSON *v, vf_property *prop)
{
    const char *s;
    int p;
    if (string(a->ld, v, &s) != 0)
        return VF_EINVAL;
    if ((p = vf__prof_property_parse(s)) < 0)
        return vf__trace_bad(a->ld, v->string, "unknown property");
    *prop = (vf_property)p;
    return 0;
}

static int get_deps(args_in *a, const cJSON *v, const uint64_t **deps)
{
    (void)deps; /* filled in when the record is added */
    if (!cJSON_IsArray(v))
        return vf__trace_bad(a->ld, v->string, "expected an array");
    const cJSON *d;
    cJSON_ArrayForEach(d, v)
    {
        if (!exact_integer(d) || d->valuedouble < 1)
            return vf__trace_bad(a->ld, v->string,
                                 "expected an array of op ids (positive)");
    }
    *a->deps = v;
    return 0;
}

static int get_span(args_in *a, const cJSON *v, uint64_t *ns)
{
    return micros(a->ld, v, ns);
}

/* An event's args into *r; *deps is the "deps" array, if any; *unnamed
 * set when the op had no name. */
static int args(vf__trace_loader *ld, const cJSON *o, vf_profile_record *r,
                const cJSON **deps, int *unnamed)
{
    if (!cJSON_IsObject(o))
        return vf__trace_bad(ld, o->string, "expected an object");
    args_in a = {ld, deps, unnamed, NULL};
    const cJSON *f;
    cJSON_ArrayForEach(f, o)
    {
        const char *k = f->string;
        int rc = 0;
        /* if (key is "id") rc = get_op_id(...); else if ... else {} */
#define GET_FIELD(key, kind, member)                                           \
    if (strcmp(k, key) == 0)                                                   \
        rc = get_##kind(&a, f, &r->member);                                    \
    else
        VF__TRACE_RECORD_ARGS(GET_FIELD)
        {
            /* a key of a later version: ignored */
        }
#undef GET_FIELD
        if (rc != 0)
            return VF_EINVAL;
    }
    /* The word for people must say what the code does (a hand-edited
     * "ok" over a failure's code was read as the failure). */
    if (a.status != NULL &&
        strcmp(a.status, r->status == 0             ? "ok"
                         : r->status == VF_ESKIPPED ? "skipped"
                                                    : "failed") != 0)
        return vf__trace_bad(ld, "status", "disagrees with \"code\"");
    return 0;
}

/* --- an event, and otherData (trace_read.h) ----------------------------- */

int vf__trace_event(vf__trace_loader *ld, const cJSON *ev)
{
    vf_profile_record r;
    memset(&r, 0, sizeof r);
    r.worker = r.pool = -1;
    if (!cJSON_IsObject(ev))
        return vf__trace_bad(ld, "", "expected an object");
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
        return vf__trace_bad(ld, "", "an op without a name");
    if (unnamed)
        name = ""; /* the record's name; "op #<id>" was for the viewer */
    if (ts + dur >= (uint64_t)MICROS_MAX * 1000)
        return vf__trace_bad(ld, "dur", "the op ends past 2^43 microseconds");
    r.start_ns = ts;
    r.end_ns = ts + dur;
    if (r.push_ns > r.ready_ns || r.ready_ns > r.start_ns)
        return vf__trace_bad(ld, "",
                             "push, ready and start times out of order");
    if (r.device_start_ns > r.device_end_ns)
        return vf__trace_bad(ld, "", "device start after device end");
    if (r.inside_ns > dur)
        return vf__trace_bad(ld, "inside_us", "more than the op's run");
    /* Numbered at its push, before its children: an earlier id (one not
     * in the file was dropped while recording). */
    if (r.parent >= r.id)
        return vf__trace_bad(ld, "parent", "not an op before this one");
    size_t off;
    r.ndeps = cJSON_GetArraySize(deps);
    if (vf__trace_add_name(ld, name, &off) != 0 ||
        vf__trace_grow((void **)&ld->deps, &ld->deps_cap, ld->ndeps + r.ndeps,
                       sizeof *ld->deps) != 0 ||
        vf__trace_grow((void **)&ld->recs, &ld->recs_cap, ld->nrecs + 1,
                       sizeof *ld->recs) != 0)
        return VF_ENOMEM;
    r.name = (const char *)(uintptr_t)off;
    r.deps = (const uint64_t *)(uintptr_t)ld->ndeps;
    size_t first = ld->ndeps;
    cJSON_ArrayForEach(f, deps)
    {
        ld->deps[ld->ndeps++] = (uint64_t)(int64_t)f->valuedouble;
    }
    /* Each once, as a snapshot has them (out.h). */
    r.ndeps = vf__prof_deps_unique(ld->deps + first, r.ndeps);
    ld->ndeps = first + (size_t)r.ndeps;
    ld->recs[ld->nrecs++] = r;
    return 0;
}

/* otherData, by field (VF__TRACE_META). */
static int get_meta_format(vf__trace_loader *ld, const cJSON *v)
{
    int64_t x = 0;
    if (integer(ld, v, &x) != 0)
        return VF_EINVAL;
    if (x != VF__TRACE_FORMAT)
        return vf__trace_bad(ld, v->string,
                             "a varflow trace of another format version");
    ld->have_meta = 1;
    return 0;
}

static int get_meta_version(vf__trace_loader *ld, const cJSON *v)
{
    (void)ld;
    (void)v; /* for people: the format is what counts */
    return 0;
}

static int get_meta_engine(vf__trace_loader *ld, const cJSON *v)
{
    const char *s;
    if (string(ld, v, &s) != 0)
        return VF_EINVAL;
    ld->kind = vf__engine_type_parse(s);
    if (ld->kind == VF_ENGINE_INVALID)
        return vf__trace_bad(ld, v->string,
                             "expected \"naive\", \"pooled\" or \"perdevice\"");
    return 0;
}

static int get_meta_workers(vf__trace_loader *ld, const cJSON *v)
{
    int64_t x = 0;
    if (integer(ld, v, &x) != 0)
        return VF_EINVAL;
    if (x < 0 || x > 1 << 20)
        return vf__trace_bad(ld, v->string, "bad worker count");
    ld->workers = (int)x;
    return 0;
}

static int get_meta_worker_pools(vf__trace_loader *ld, const cJSON *v)
{
    if (!cJSON_IsArray(v))
        return vf__trace_bad(ld, v->string, "expected an array");
    const cJSON *p;
    ld->npools = 0;
    cJSON_ArrayForEach(p, v)
    {
        if (!cJSON_IsString(p))
            return vf__trace_bad(ld, v->string, "expected an array of strings");
        if (vf__trace_grow((void **)&ld->pools, &ld->pools_cap, ld->npools + 1,
                           sizeof *ld->pools) != 0 ||
            vf__trace_add_name(ld, p->valuestring, &ld->pools[ld->npools]) != 0)
            return VF_ENOMEM;
        ld->npools++;
    }
    return 0;
}

static int get_meta_records(vf__trace_loader *ld, const cJSON *v)
{
    /* For people (the events are the records), but it must agree with
     * them (trace_load.c: assemble). */
    int64_t x = 0;
    if (integer(ld, v, &x) != 0)
        return VF_EINVAL;
    if (x < 0)
        return vf__trace_bad(ld, v->string, "expected a count (not negative)");
    ld->records = x;
    return 0;
}

/* A count or a time: an integer, not negative. */
static int count(vf__trace_loader *ld, const cJSON *v, uint64_t *out)
{
    int64_t x = 0;
    if (integer(ld, v, &x) != 0)
        return VF_EINVAL;
    if (x < 0)
        return vf__trace_bad(ld, v->string, "expected a count (not negative)");
    *out = (uint64_t)x;
    return 0;
}

static int get_meta_dropped(vf__trace_loader *ld, const cJSON *v)
{
    return count(ld, v, &ld->dropped);
}

static int get_meta_span_ns(vf__trace_loader *ld, const cJSON *v)
{
    return count(ld, v, &ld->span_ns);
}

int vf__trace_meta(vf__trace_loader *ld, const cJSON *o)
{
    if (!cJSON_IsObject(o))
        return vf__trace_bad(ld, "otherData", "expected an object");
    const cJSON *f;
    cJSON_ArrayForEach(f, o)
    {
        const char *k = f->string;
        int rc = 0;
#define GET_META(key, what)                                                    \
    if (strcmp(k, key) == 0)                                                   \
        rc = get_meta_##what(ld, f);                                           \
    else
        VF__TRACE_META(GET_META)
        {
            /* a key of a later version: ignored */
        }
#undef GET_META
        if (rc != 0)
            return rc;
    }
    return 0;
}
