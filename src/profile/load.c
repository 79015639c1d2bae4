/*
 * load.c: reading a Chrome trace written by varflow back into a
 * snapshot (vf_profile_load), so that a trace saved by one run (VF_PROFILE)
 * can be turned into the other outputs later (tools/varflow-report).
 *
 * A small recursive-descent JSON parser, made for this one shape but
 * accepting any valid JSON around it: the top-level object's "traceEvents"
 * array is read one event at a time; a complete event ("X") whose args hold
 * an "id" is a record (its fields in any order, unknown ones skipped);
 * every other event is skipped; "otherData" gives the engine, its workers
 * and pools, the dropped count and the span, and must say "varflow": 1.
 * Times are read from their decimal text ("12.345" microseconds is 12345
 * ns), not through a double, so they come back exact. The file is read
 * into memory whole; the records, their deps and their names are gathered
 * in growing arrays, then moved into one snapshot as vf_profile_take makes
 * it (records sorted by id, names in one block).
 */
#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "profile/out.h"

#define MAX_DEPTH 64

typedef struct parser {
    const char *s, *p, *end;
    const char *err; /* first error, with err_at its offset */
    size_t err_at;
    char *buf; /* the last string read, unescaped */
    size_t buf_len, buf_cap;
    int nomem;
} parser;

/* What is being gathered; `name` and `deps` of records hold indexes into
 * names[] and deps[] until the snapshot is put together. */
typedef struct gather {
    vf_profile_record *recs;
    size_t nrecs, recs_cap;
    uint64_t *deps;
    size_t ndeps, deps_cap;
    char **names; /* distinct names, in order of appearance */
    size_t nnames, names_cap;
    int have_meta, workers;
    vf_engine_type kind;
    uint64_t dropped, span_ns;
    size_t *table; /* open addressing over names: index + 1, 0 empty */
    size_t table_cap;
    size_t *pool_name; /* per worker: index into names */
    size_t npools, npools_cap;
} gather;

static int fail_at(parser *ps, const char *what)
{
    if (ps->err == NULL) {
        ps->err = what;
        ps->err_at = (size_t)(ps->p - ps->s);
    }
    return -1;
}

static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap * 2 : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *t = vf__malloc(cap2 * size);
    if (t == NULL)
        return -1;
    if (*cap)
        memcpy(t, *arr, *cap * size);
    free(*arr);
    *arr = t;
    *cap = cap2;
    return 0;
}

static void ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' ||
                               *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

static int expect(parser *ps, char c)
{
    ws(ps);
    if (ps->p >= ps->end || *ps->p != c)
        return fail_at(ps, c == ':'   ? "expected ':'"
                           : c == '{' ? "expected an object"
                           : c == '[' ? "expected an array"
                                      : "unexpected character");
    ps->p++;
    return 0;
}

/* Peek: true when the next character is `c` (consumed then). */
static int accept(parser *ps, char c)
{
    ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return 1;
    }
    return 0;
}

static int put(parser *ps, unsigned c)
{
    if (grow((void **)&ps->buf, &ps->buf_cap, ps->buf_len + 2, 1) != 0) {
        ps->nomem = 1;
        return fail_at(ps, "out of memory");
    }
    ps->buf[ps->buf_len++] = (char)c;
    return 0;
}

static int put_utf8(parser *ps, unsigned c)
{
    if (c < 0x80)
        return put(ps, c);
    if (c < 0x800)
        return put(ps, 0xC0 | (c >> 6)) | put(ps, 0x80 | (c & 0x3F));
    if (c < 0x10000)
        return put(ps, 0xE0 | (c >> 12)) | put(ps, 0x80 | ((c >> 6) & 0x3F)) |
               put(ps, 0x80 | (c & 0x3F));
    return put(ps, 0xF0 | (c >> 18)) | put(ps, 0x80 | ((c >> 12) & 0x3F)) |
           put(ps, 0x80 | ((c >> 6) & 0x3F)) | put(ps, 0x80 | (c & 0x3F));
}

static int hex4(parser *ps, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++, ps->p++) {
        char c = ps->p < ps->end ? *ps->p : 0;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return fail_at(ps, "bad \\u escape");
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 0;
}

/* A string into ps->buf (NUL-terminated). */
static int string(parser *ps)
{
    ws(ps);
    if (ps->p >= ps->end || *ps->p != '"')
        return fail_at(ps, "expected a string");
    ps->p++;
    ps->buf_len = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p++;
        if (c < 0x20)
            return fail_at(ps, "control character in a string");
        if (c != '\\') {
            if (put(ps, c) != 0)
                return -1;
            continue;
        }
        char e = ps->p < ps->end ? *ps->p++ : 0;
        unsigned u = 0;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != 0 && simple != NULL) {
            static const char to[] = "\"\\/\b\f\n\r\t";
            u = (unsigned char)to[simple - "\"\\/bfnrt"];
        } else if (e == 'u') {
            if (hex4(ps, &u) != 0)
                return -1;
            if (u >= 0xD800 && u < 0xDC00 && ps->end - ps->p >= 6 &&
                ps->p[0] == '\\' && ps->p[1] == 'u') {
                unsigned lo;
                ps->p += 2;
                if (hex4(ps, &lo) != 0)
                    return -1;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
        } else {
            return fail_at(ps, "bad escape in a string");
        }
        if (put_utf8(ps, u) != 0)
            return -1;
    }
    if (ps->p >= ps->end)
        return fail_at(ps, "unterminated string");
    ps->p++;
    if (grow((void **)&ps->buf, &ps->buf_cap, ps->buf_len + 1, 1) != 0) {
        ps->nomem = 1;
        return fail_at(ps, "out of memory");
    }
    ps->buf[ps->buf_len] = '\0';
    return 0;
}

/* The text of a number: [start, *end). */
static int number_text(parser *ps, const char **start, const char **stop)
{
    ws(ps);
    *start = ps->p;
    while (ps->p < ps->end && strchr("+-0123456789.eE", *ps->p) != NULL &&
           *ps->p != '\0')
        ps->p++;
    *stop = ps->p;
    if (*start == *stop)
        return fail_at(ps, "expected a number");
    return 0;
}

/* A non-negative integer, or -1 for "-1" (worker and pool use it). */
static int integer(parser *ps, int64_t *out)
{
    const char *a, *b;
    if (number_text(ps, &a, &b) != 0)
        return -1;
    int neg = *a == '-';
    uint64_t v = 0;
    for (const char *c = a + neg; c < b; c++) {
        if (*c < '0' || *c > '9' || v > (UINT64_MAX - 9) / 10)
            return fail_at(ps, "expected an integer");
        v = v * 10 + (uint64_t)(*c - '0');
    }
    if (b == a + neg || v > INT64_MAX)
        return fail_at(ps, "expected an integer");
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* Microseconds with up to three decimals, as nanoseconds. */
static int micros(parser *ps, uint64_t *out)
{
    const char *a, *b;
    if (number_text(ps, &a, &b) != 0)
        return -1;
    uint64_t v = 0;
    const char *c = a;
    for (; c < b && *c >= '0' && *c <= '9'; c++)
        v = v * 10 + (uint64_t)(*c - '0');
    int decimals = 0;
    if (c < b && *c == '.')
        for (c++; c < b && *c >= '0' && *c <= '9' && decimals < 3; c++) {
            v = v * 10 + (uint64_t)(*c - '0');
            decimals++;
        }
    if (c != b || c == a)
        return fail_at(ps, "expected microseconds (digits, '.', at most "
                           "three decimals)");
    for (; decimals < 3; decimals++)
        v *= 10;
    *out = v;
    return 0;
}

static int skip(parser *ps, int depth)
{
    ws(ps);
    if (depth > MAX_DEPTH)
        return fail_at(ps, "nested too deeply");
    if (ps->p >= ps->end)
        return fail_at(ps, "unexpected end of file");
    char c = *ps->p;
    if (c == '"')
        return string(ps);
    if (c == '{' || c == '[') {
        ps->p++;
        char close = c == '{' ? '}' : ']';
        if (accept(ps, close))
            return 0;
        do {
            if (c == '{' && (string(ps) != 0 || expect(ps, ':') != 0))
                return -1;
            if (skip(ps, depth + 1) != 0)
                return -1;
        } while (accept(ps, ','));
        return expect(ps, close);
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, words[i], n) == 0) {
            ps->p += n;
            return 0;
        }
    }
    const char *a, *b;
    return number_text(ps, &a, &b);
}

static int boolean(parser *ps, bool *out)
{
    ws(ps);
    if (ps->end - ps->p >= 4 && memcmp(ps->p, "true", 4) == 0) {
        ps->p += 4;
        *out = true;
        return 0;
    }
    if (ps->end - ps->p >= 5 && memcmp(ps->p, "false", 5) == 0) {
        ps->p += 5;
        *out = false;
        return 0;
    }
    return fail_at(ps, "expected true or false");
}

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Index of the name just read (ps->buf) in g->names, added if new; found
 * through an open-addressing table of index + 1. */
static int name_index(parser *ps, gather *g, size_t *out)
{
    if (g->nnames * 2 >= g->table_cap) {
        size_t cap = g->table_cap ? g->table_cap * 2 : 64;
        size_t *t = vf__calloc(cap, sizeof *t);
        if (t == NULL) {
            ps->nomem = 1;
            return fail_at(ps, "out of memory");
        }
        for (size_t i = 0; i < g->nnames; i++) {
            size_t j = hash(g->names[i]) & (cap - 1);
            while (t[j] != 0)
                j = (j + 1) & (cap - 1);
            t[j] = i + 1;
        }
        free(g->table);
        g->table = t;
        g->table_cap = cap;
    }
    size_t j = hash(ps->buf) & (g->table_cap - 1);
    for (; g->table[j] != 0; j = (j + 1) & (g->table_cap - 1))
        if (strcmp(g->names[g->table[j] - 1], ps->buf) == 0) {
            *out = g->table[j] - 1;
            return 0;
        }
    char *copy = vf__strdup(ps->buf);
    if (copy == NULL || grow((void **)&g->names, &g->names_cap, g->nnames + 1,
                             sizeof *g->names) != 0) {
        free(copy);
        ps->nomem = 1;
        return fail_at(ps, "out of memory");
    }
    g->names[g->nnames] = copy;
    g->table[j] = g->nnames + 1;
    *out = g->nnames++;
    return 0;
}

/* "cpu:0" and the like. */
static int device(parser *ps, vf_device *out)
{
    if (string(ps) != 0)
        return -1;
    static const char *const types[] = {"cpu", "cuda", "emulated"};
    for (int t = 0; t < 3; t++) {
        size_t n = strlen(types[t]);
        if (strncmp(ps->buf, types[t], n) == 0 && ps->buf[n] == ':') {
            out->type = (vf_device_type)t;
            out->id = atoi(ps->buf + n + 1);
            return 0;
        }
    }
    return fail_at(ps, "unknown device");
}

/* An event's args; a record when it has an id. */
static int args(parser *ps, gather *g, vf_profile_record *r, int depth)
{
    if (expect(ps, '{') != 0)
        return -1;
    if (accept(ps, '}'))
        return 0;
    do {
        int64_t v = 0;
        int rc = 0;
        if (string(ps) != 0 || expect(ps, ':') != 0)
            return -1;
        const char *key = ps->buf;
        if (strcmp(key, "id") == 0) {
            rc = integer(ps, &v);
            r->id = (uint64_t)v;
            if (rc == 0 && v <= 0)
                return fail_at(ps, "an op id must be positive");
        } else if (strcmp(key, "code") == 0) {
            rc = integer(ps, &v);
            r->status = (int)v;
        } else if (strcmp(key, "worker") == 0 || strcmp(key, "pool") == 0) {
            int worker = key[0] == 'w';
            rc = integer(ps, &v);
            *(worker ? &r->worker : &r->pool) = (int)v;
        } else if (strcmp(key, "push_us") == 0) {
            rc = micros(ps, &r->push_ns);
        } else if (strcmp(key, "ready_us") == 0) {
            rc = micros(ps, &r->ready_ns);
        } else if (strcmp(key, "device") == 0) {
            rc = device(ps, &r->device);
        } else if (strcmp(key, "property") == 0) {
            if ((rc = string(ps)) == 0 &&
                (v = vf__prof_property_parse(ps->buf)) < 0)
                return fail_at(ps, "unknown property");
            r->property = (vf_property)v;
        } else if (strcmp(key, "async") == 0) {
            rc = boolean(ps, &r->async);
        } else if (strcmp(key, "deps") == 0) {
            if (expect(ps, '[') != 0)
                return -1;
            r->deps = (const uint64_t *)(uintptr_t)g->ndeps;
            r->ndeps = 0;
            if (!accept(ps, ']')) {
                do {
                    if (integer(ps, &v) != 0)
                        return -1;
                    if (grow((void **)&g->deps, &g->deps_cap, g->ndeps + 1,
                             sizeof *g->deps) != 0) {
                        ps->nomem = 1;
                        return fail_at(ps, "out of memory");
                    }
                    g->deps[g->ndeps++] = (uint64_t)v;
                    r->ndeps++;
                } while (accept(ps, ','));
                rc = expect(ps, ']');
            }
        } else {
            rc = skip(ps, depth + 1);
        }
        if (rc != 0)
            return -1;
    } while (accept(ps, ','));
    return expect(ps, '}');
}

/* One element of traceEvents. */
static int event(parser *ps, gather *g)
{
    vf_profile_record r;
    memset(&r, 0, sizeof r);
    r.worker = r.pool = -1;
    int is_x = 0, has_name = 0;
    size_t name = 0;
    uint64_t ts = 0, dur = 0;
    if (expect(ps, '{') != 0)
        return -1;
    if (accept(ps, '}'))
        return 0;
    do {
        int rc;
        if (string(ps) != 0 || expect(ps, ':') != 0)
            return -1;
        if (strcmp(ps->buf, "ph") == 0) {
            rc = string(ps);
            is_x = rc == 0 && strcmp(ps->buf, "X") == 0;
        } else if (strcmp(ps->buf, "name") == 0) {
            rc = string(ps) != 0 ? -1 : name_index(ps, g, &name);
            has_name = 1;
        } else if (strcmp(ps->buf, "ts") == 0) {
            rc = micros(ps, &ts);
        } else if (strcmp(ps->buf, "dur") == 0) {
            rc = micros(ps, &dur);
        } else if (strcmp(ps->buf, "args") == 0) {
            rc = args(ps, g, &r, 1);
        } else {
            rc = skip(ps, 1);
        }
        if (rc != 0)
            return -1;
    } while (accept(ps, ','));
    if (expect(ps, '}') != 0)
        return -1;
    if (!is_x || r.id == 0)
        return 0;
    if (!has_name)
        return fail_at(ps, "an op without a name");
    if (grow((void **)&g->recs, &g->recs_cap, g->nrecs + 1, sizeof *g->recs)) {
        ps->nomem = 1;
        return fail_at(ps, "out of memory");
    }
    r.name = (const char *)(uintptr_t)name;
    r.start_ns = ts;
    r.end_ns = ts + dur;
    g->recs[g->nrecs++] = r;
    return 0;
}

static int meta(parser *ps, gather *g)
{
    if (expect(ps, '{') != 0)
        return -1;
    if (accept(ps, '}'))
        return 0;
    do {
        int64_t v = 0;
        int rc = 0;
        if (string(ps) != 0 || expect(ps, ':') != 0)
            return -1;
        if (strcmp(ps->buf, "varflow") == 0) {
            if ((rc = integer(ps, &v)) == 0 && v != 1)
                return fail_at(ps, "a varflow trace of another format version");
            g->have_meta = 1;
        } else if (strcmp(ps->buf, "engine") == 0) {
            rc = string(ps);
            g->kind = strcmp(ps->buf, "naive") == 0    ? VF_ENGINE_NAIVE
                      : strcmp(ps->buf, "pooled") == 0 ? VF_ENGINE_POOLED
                                                       : VF_ENGINE_PERDEVICE;
        } else if (strcmp(ps->buf, "workers") == 0) {
            if ((rc = integer(ps, &v)) == 0 && (v < 0 || v > 1 << 20))
                return fail_at(ps, "bad worker count");
            g->workers = (int)v;
        } else if (strcmp(ps->buf, "worker_pools") == 0) {
            if (expect(ps, '[') != 0)
                return -1;
            if (!accept(ps, ']')) {
                do {
                    size_t k;
                    if (string(ps) != 0 || name_index(ps, g, &k) != 0)
                        return -1;
                    if (grow((void **)&g->pool_name, &g->npools_cap,
                             g->npools + 1, sizeof *g->pool_name) != 0) {
                        ps->nomem = 1;
                        return fail_at(ps, "out of memory");
                    }
                    g->pool_name[g->npools++] = k;
                } while (accept(ps, ','));
                rc = expect(ps, ']');
            }
        } else if (strcmp(ps->buf, "dropped") == 0) {
            rc = integer(ps, &v);
            g->dropped = (uint64_t)v;
        } else if (strcmp(ps->buf, "span_ns") == 0) {
            rc = integer(ps, &v);
            g->span_ns = (uint64_t)v;
        } else {
            rc = skip(ps, 1);
        }
        if (rc != 0)
            return -1;
    } while (accept(ps, ','));
    return expect(ps, '}');
}

static int document(parser *ps, gather *g)
{
    if (expect(ps, '{') != 0)
        return -1;
    if (accept(ps, '}'))
        return 0;
    do {
        int rc;
        if (string(ps) != 0 || expect(ps, ':') != 0)
            return -1;
        if (strcmp(ps->buf, "traceEvents") == 0) {
            if ((rc = expect(ps, '[')) == 0 && !accept(ps, ']')) {
                do
                    rc = event(ps, g);
                while (rc == 0 && accept(ps, ','));
                if (rc == 0)
                    rc = expect(ps, ']');
            }
        } else if (strcmp(ps->buf, "otherData") == 0) {
            rc = meta(ps, g);
        } else {
            rc = skip(ps, 1);
        }
        if (rc != 0)
            return -1;
    } while (accept(ps, ','));
    if (expect(ps, '}') != 0)
        return -1;
    ws(ps);
    return ps->p == ps->end ? 0 : fail_at(ps, "text after the JSON document");
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const vf_profile_record *)a)->id;
    uint64_t y = ((const vf_profile_record *)b)->id;
    return x < y ? -1 : x > y;
}

/* Checks what was gathered and moves it into a snapshot. Returns 0, or a
 * VF_E* code with *why set. */
static int assemble(gather *g, vf_profile **out, const char **why)
{
    if (!g->have_meta)
        return *why = "no otherData with \"varflow\": 1 (not written by "
                      "varflow)",
               VF_EINVAL;
    if (g->npools != (size_t)g->workers)
        return *why = "worker_pools does not list every worker", VF_EINVAL;
    for (size_t i = 0; i < g->nrecs; i++) {
        const vf_profile_record *r = &g->recs[i];
        if (r->push_ns > r->ready_ns || r->ready_ns > r->start_ns)
            return *why = "an op's push, ready and start times are out of "
                          "order",
                   VF_EINVAL;
        if (r->worker < -1 || r->worker >= g->workers)
            return *why = "an op names a worker the engine does not have",
                   VF_EINVAL;
    }
    size_t names_size = 0;
    for (size_t i = 0; i < g->nnames; i++)
        names_size += strlen(g->names[i]) + 1;
    vf_profile *s = vf__calloc(1, sizeof *s);
    size_t *off = vf__malloc((g->nnames + 1) * sizeof *off);
    if (s != NULL) {
        s->records = vf__malloc((g->nrecs + 1) * sizeof *s->records);
        s->deps = vf__malloc((g->ndeps + 1) * sizeof *s->deps);
        s->names = vf__malloc(names_size + 1);
        s->worker_pool = vf__calloc((size_t)g->workers + 1,
                                    sizeof *s->worker_pool);
    }
    if (s == NULL || off == NULL || s->records == NULL || s->deps == NULL ||
        s->names == NULL || s->worker_pool == NULL) {
        free(off);
        vf_profile_free(s);
        return *why = "out of memory", VF_ENOMEM;
    }
    for (size_t i = 0, o = 0; i < g->nnames; i++) {
        size_t len = strlen(g->names[i]) + 1;
        memcpy(s->names + o, g->names[i], len);
        off[i] = o;
        o += len;
    }
    if (g->ndeps)
        memcpy(s->deps, g->deps, g->ndeps * sizeof *s->deps);
    uint64_t span = 0;
    for (size_t i = 0; i < g->nrecs; i++) {
        vf_profile_record *r = &s->records[i];
        *r = g->recs[i];
        r->name = s->names + off[(uintptr_t)r->name];
        span = r->end_ns > span ? r->end_ns : span;
    }
    qsort(s->records, g->nrecs, sizeof *s->records, by_id);
    for (size_t i = 0; i < g->nrecs; i++) {
        vf_profile_record *r = &s->records[i];
        r->deps = s->deps + (uintptr_t)r->deps;
        if (i > 0 && r->id == s->records[i - 1].id) {
            free(off);
            vf_profile_free(s);
            return *why = "an op id appears twice", VF_EINVAL;
        }
    }
    for (int w = 0; w < g->workers; w++) {
        const char *pool = s->names + off[g->pool_name[w]];
        s->worker_pool[w] = strcmp(pool, "cpu") == 0    ? "cpu"
                            : strcmp(pool, "prio") == 0 ? "prio"
                                                        : pool;
    }
    free(off);
    s->kind = g->kind ? g->kind : VF_ENGINE_PERDEVICE;
    s->nworkers = g->workers;
    s->count = g->nrecs;
    s->dropped = g->dropped;
    s->span_ns = g->span_ns > span ? g->span_ns : span;
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
    if (buf == NULL)
        errno = ENOMEM;
    while (buf != NULL) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (ferror(f) || feof(f))
            break;
        if (grow((void **)&buf, &cap, cap * 2, 1) != 0) {
            free(buf);
            buf = NULL;
            errno = ENOMEM;
        }
    }
    if (buf != NULL && ferror(f)) {
        free(buf);
        buf = NULL;
        errno = EIO;
    }
    fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

VF_API int vf_profile_load(const char *path, vf_profile **out)
{
    static const char who[] = "vf_profile_load";
    if (path == NULL || out == NULL)
        return vf__fail(VF_EINVAL, "%s: NULL argument", who);
    size_t len = 0;
    char *text = slurp(path, &len);
    if (text == NULL)
        return vf__fail(errno == ENOMEM ? VF_ENOMEM : VF_ESYSTEM, "%s: %s: %s",
                        who, path, strerror(errno));
    parser ps = {.s = text, .p = text, .end = text + len};
    gather g;
    memset(&g, 0, sizeof g);
    int rc = document(&ps, &g);
    const char *why = NULL;
    if (rc == 0)
        rc = assemble(&g, out, &why);
    else
        rc = ps.nomem ? VF_ENOMEM : VF_EINVAL;
    free(text);
    free(ps.buf);
    for (size_t i = 0; i < g.nnames; i++)
        free(g.names[i]);
    free(g.names);
    free(g.table);
    free(g.recs);
    free(g.deps);
    free(g.pool_name);
    if (rc != 0 && why != NULL)
        return vf__fail(rc, "%s: %s: %s", who, path, why);
    if (rc != 0)
        return vf__fail(rc, "%s: %s: at byte %zu: %s", who, path, ps.err_at,
                        ps.err);
    return 0;
}
