/* record.c: recording ops and taking snapshots (see hooks.h). */
#include "profile/hooks.h"
#include "profile/snapshot.h"

#include <string.h>

#include "base/alloc.h"
#include "core/engine.h"
#include "base/error.h"

#define VF__PROF_CHUNK 4096

struct vf__prof_entry {
    vf_profile_record rec; /* name: interned; deps: fixed up by snapshots */
    uint64_t deps[VF__PROF_INLINE_DEPS];
    uint64_t *more_deps;
};

int vf__prof_init(vf__profiler *p, size_t max_records)
{
    memset(p, 0, sizeof *p);
    atomic_init(&p->state, VF__PROF_OFF);
    atomic_init(&p->session, 0);
    atomic_init(&p->t0, 0);
    atomic_init(&p->next_id, 0);
    p->max_records = max_records;
    return pthread_mutex_init(&p->lock, NULL) == 0 ? 0 : VF_ESYSTEM;
}

/* Free the records and names (lock held, or the profiler unused). */
static void clear(vf__profiler *p)
{
    for (size_t c = 0; c < p->nchunks; c++) {
        vf__prof_entry *chunk = p->chunks[c];
        size_t n = p->count - c * VF__PROF_CHUNK;
        for (size_t i = 0; i < n && i < VF__PROF_CHUNK; i++)
            free(chunk[i].more_deps);
        free(chunk);
    }
    free(p->chunks);
    p->chunks = NULL;
    p->nchunks = 0;
    for (size_t i = 0; i < p->names_cap; i++)
        free(p->names[i]);
    free(p->names);
    p->names = NULL;
    p->names_cap = p->names_len = 0;
    p->count = 0;
    p->dropped = 0;
}

void vf__prof_destroy(vf__profiler *p)
{
    clear(p);
    pthread_mutex_destroy(&p->lock);
}

uint64_t vf__prof_now(vf__profiler *p)
{
    return vf__now_ns() - atomic_load_explicit(&p->t0, memory_order_relaxed);
}

void vf__prof_push(vf__profiler *p, vf__op *op)
{
    vf__op_prof *pr = &op->prof;
    int nvars = op->def->nvars;
    pr->more_deps = NULL;
    if (nvars > VF__PROF_INLINE_DEPS) {
        pr->more_deps = vf__malloc((size_t)(nvars - VF__PROF_INLINE_DEPS) *
                                   sizeof *pr->more_deps);
        if (pr->more_deps == NULL) {
            op->hooks &= (uint8_t)~VF__HOOK_PROF;
            return; /* not recorded; the op itself is unaffected */
        }
    }
    atomic_store_explicit(&pr->ndeps, 0, memory_order_relaxed);
    pr->session = atomic_load_explicit(&p->session, memory_order_relaxed);
    pr->worker = -1;
    pr->push = pr->ready = pr->start = vf__prof_now(p);
    pr->id = atomic_fetch_add_explicit(&p->next_id, 1,
                                       memory_order_relaxed) + 1;
}

void vf__prof_edge(vf__op *to, const vf__op *from)
{
    vf__op_prof *pr = &to->prof;
    int i = atomic_fetch_add_explicit(&pr->ndeps, 1, memory_order_relaxed);
    if (i < VF__PROF_INLINE_DEPS)
        pr->deps[i] = from->prof.id;
    else
        pr->more_deps[i - VF__PROF_INLINE_DEPS] = from->prof.id;
}

void vf__prof_forget(vf__op *op)
{
    free(op->prof.more_deps);
    op->prof.more_deps = NULL;
    op->hooks &= (uint8_t)~VF__HOOK_PROF;
}

/* FNV-1a: names are short, and only hashed while profiling. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* The interned copy of `name` (lock held); NULL when out of memory. */
static const char *intern(vf__profiler *p, const char *name)
{
    if (p->names_len * 2 >= p->names_cap) {
        size_t cap = p->names_cap ? p->names_cap * 2 : 64;
        char **t = vf__calloc(cap, sizeof *t);
        if (t == NULL)
            return NULL;
        for (size_t i = 0; i < p->names_cap; i++) {
            if (p->names[i] == NULL)
                continue;
            size_t j = name_hash(p->names[i]) & (cap - 1);
            while (t[j] != NULL)
                j = (j + 1) & (cap - 1);
            t[j] = p->names[i];
        }
        free(p->names);
        p->names = t;
        p->names_cap = cap;
    }
    size_t j = name_hash(name) & (p->names_cap - 1);
    while (p->names[j] != NULL) {
        if (strcmp(p->names[j], name) == 0)
            return p->names[j];
        j = (j + 1) & (p->names_cap - 1);
    }
    char *copy = vf__strdup(name);
    if (copy == NULL)
        return NULL;
    p->names[j] = copy;
    p->names_len++;
    return copy;
}

/* A slot for the next record (lock held), or NULL (full or no memory). */
static vf__prof_entry *next_slot(vf__profiler *p)
{
    if (p->count >= p->max_records)
        return NULL;
    size_t c = p->count / VF__PROF_CHUNK;
    if (c == p->nchunks) {
        vf__prof_entry **t = vf__malloc((c + 1) * sizeof *t);
        vf__prof_entry *chunk = vf__malloc(VF__PROF_CHUNK * sizeof *chunk);
        if (t == NULL || chunk == NULL) {
            free(t);
            free(chunk);
            return NULL;
        }
        if (c > 0)
            memcpy(t, p->chunks, c * sizeof *t);
        free(p->chunks);
        t[c] = chunk;
        p->chunks = t;
        p->nchunks = c + 1;
    }
    return &p->chunks[c][p->count % VF__PROF_CHUNK];
}

void vf__prof_record(vf__profiler *p, vf__op *op, uint64_t end)
{
    vf__op_prof *pr = &op->prof;
    vf_engine *e = op->engine;
    const vf__opdef *def = op->def;
    pthread_mutex_lock(&p->lock);
    vf__prof_entry *slot = NULL;
    const char *name = NULL;
    if (pr->session == atomic_load_explicit(&p->session,
                                            memory_order_relaxed) &&
        (name = intern(p, def->name)) != NULL &&
        (slot = next_slot(p)) != NULL) {
        vf_profile_record *r = &slot->rec;
        r->id = pr->id;
        r->name = name;
        r->pool = def->pool == NULL             ? -1
                  : def->pool == e->cpu_pool ? 0
                                             : 1;
        r->worker = pr->worker;
        r->device = def->device;
        r->property = def->property;
        r->async = def->async_fn != NULL;
        r->status = op->status;
        r->push_ns = pr->push;
        r->ready_ns = pr->ready;
        r->start_ns = pr->start;
        r->end_ns = end;
        r->ndeps = atomic_load_explicit(&pr->ndeps, memory_order_relaxed);
        r->deps = NULL;
        memcpy(slot->deps, pr->deps, sizeof slot->deps);
        slot->more_deps = pr->more_deps; /* ownership moves to the slot */
        pr->more_deps = NULL;
        p->count++;
    } else if (pr->session == atomic_load_explicit(&p->session,
                                                   memory_order_relaxed)) {
        p->dropped++;
    }
    pthread_mutex_unlock(&p->lock);
    vf__prof_forget(op);
}

/* --- public calls ------------------------------------------------------ */

/* Mirror the profiler's state into the hooks new ops get. */
static void update_hooks(vf_engine *e)
{
    uint8_t h = e->engine_info ? VF__HOOK_INFO : 0;
    if (atomic_load(&e->prof.state) == VF__PROF_ON)
        h |= VF__HOOK_PROF;
    atomic_store_explicit(&e->hooks, h, memory_order_relaxed);
}

static int set_state(vf_engine *e, const char *who, int from, int to)
{
    if (!vf__engine_ok(e))
        return vf__fail(VF_EINVAL, "%s: not an engine", who);
    int expected = from;
    if (from >= 0 &&
        !atomic_compare_exchange_strong(&e->prof.state, &expected, to))
        return vf__fail(VF_EINVAL, "%s: the profiler is not %s", who,
                        from == VF__PROF_ON ? "running" : "paused");
    if (from < 0)
        atomic_store(&e->prof.state, to);
    update_hooks(e);
    return 0;
}

VF_API int vf_profile_start(vf_engine *e)
{
    if (!vf__engine_ok(e))
        return vf__fail(VF_EINVAL, "vf_profile_start: not an engine");
    vf__profiler *p = &e->prof;
    pthread_mutex_lock(&p->lock);
    clear(p);
    atomic_fetch_add_explicit(&p->session, 1, memory_order_relaxed);
    atomic_store_explicit(&p->t0, vf__now_ns(), memory_order_relaxed);
    atomic_store_explicit(&p->next_id, 0, memory_order_relaxed);
    atomic_store(&p->state, VF__PROF_ON);
    update_hooks(e);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

VF_API int vf_profile_stop(vf_engine *e)
{
    return set_state(e, "vf_profile_stop", -1, VF__PROF_OFF);
}

VF_API int vf_profile_pause(vf_engine *e)
{
    return set_state(e, "vf_profile_pause", VF__PROF_ON, VF__PROF_PAUSED);
}

VF_API int vf_profile_resume(vf_engine *e)
{
    return set_state(e, "vf_profile_resume", VF__PROF_PAUSED, VF__PROF_ON);
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const vf_profile_record *)a)->id;
    uint64_t y = ((const vf_profile_record *)b)->id;
    return x < y ? -1 : x > y;
}

VF_API int vf_profile_take(vf_engine *e, vf_profile **out)
{
    static const char who[] = "vf_profile_take";
    if (!vf__engine_ok(e))
        return vf__fail(VF_EINVAL, "%s: not an engine", who);
    if (out == NULL)
        return vf__fail(VF_EINVAL, "%s: out is NULL", who);
    vf__profiler *p = &e->prof;
    int nworkers = vf_engine_num_workers(e);
    pthread_mutex_lock(&p->lock);
    size_t ndeps = 0, names_size = 0;
    for (size_t i = 0; i < p->count; i++)
        ndeps += (size_t)p->chunks[i / VF__PROF_CHUNK][i % VF__PROF_CHUNK]
                     .rec.ndeps;
    for (size_t i = 0; i < p->names_cap; i++)
        if (p->names[i])
            names_size += strlen(p->names[i]) + 1;
    vf_profile *s = vf__calloc(1, sizeof *s);
    if (s != NULL) {
        s->records = vf__malloc((p->count + 1) * sizeof *s->records);
        s->deps = vf__malloc((ndeps + 1) * sizeof *s->deps);
        s->names = vf__malloc(names_size + 1);
        s->worker_pool = vf__calloc((size_t)nworkers + 1,
                                    sizeof *s->worker_pool);
    }
    if (s == NULL || s->records == NULL || s->deps == NULL ||
        s->names == NULL || s->worker_pool == NULL) {
        pthread_mutex_unlock(&p->lock);
        vf_profile_free(s);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    /* Names: copied into one block; records point into it. to[j] is the
     * copy of the interned name in slot j, found again by hashing the
     * record's name (O(1) a record, whatever the number of names). */
    char **to = vf__malloc((p->names_cap + 1) * sizeof *to);
    if (to == NULL) {
        pthread_mutex_unlock(&p->lock);
        vf_profile_free(s);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    size_t off = 0;
    for (size_t i = 0; i < p->names_cap; i++) {
        if (p->names[i] == NULL)
            continue;
        size_t len = strlen(p->names[i]) + 1;
        memcpy(s->names + off, p->names[i], len);
        to[i] = s->names + off;
        off += len;
    }
    size_t d = 0;
    for (size_t i = 0; i < p->count; i++) {
        const vf__prof_entry *en = &p->chunks[i / VF__PROF_CHUNK]
                                             [i % VF__PROF_CHUNK];
        vf_profile_record *r = &s->records[i];
        *r = en->rec;
        size_t j = name_hash(en->rec.name) & (p->names_cap - 1);
        while (p->names[j] != en->rec.name)
            j = (j + 1) & (p->names_cap - 1);
        r->name = to[j];
        for (int k = 0; k < r->ndeps; k++)
            s->deps[d + (size_t)k] = k < VF__PROF_INLINE_DEPS
                                         ? en->deps[k]
                                         : en->more_deps[k -
                                                         VF__PROF_INLINE_DEPS];
        d += (size_t)r->ndeps; /* r->deps is fixed up after sorting */
        if (r->end_ns > s->span_ns)
            s->span_ns = r->end_ns;
    }
    s->count = p->count;
    s->dropped = p->dropped;
    pthread_mutex_unlock(&p->lock);
    free(to);

    /* Sort by id, carrying each record's deps: record where each record's
     * deps start before sorting (stashed in `deps` as an offset). */
    for (size_t i = 0, o = 0; i < s->count; i++) {
        s->records[i].deps = (const uint64_t *)(uintptr_t)o;
        o += (size_t)s->records[i].ndeps;
    }
    qsort(s->records, s->count, sizeof *s->records, by_id);
    for (size_t i = 0; i < s->count; i++)
        s->records[i].deps = s->deps + (uintptr_t)s->records[i].deps;

    s->kind = e->kind;
    s->nworkers = nworkers;
    for (int pi = 0; pi < e->npools; pi++)
        for (int w = 0; w < e->pools[pi].nworkers; w++)
            s->worker_pool[e->pools[pi].workers[w].index] = e->pools[pi].name;
    *out = s;
    return 0;
}

VF_API void vf_profile_free(vf_profile *p)
{
    if (p == NULL)
        return;
    free(p->records);
    free(p->deps);
    free(p->names);
    free(p->worker_pool);
    free(p);
}

VF_API size_t vf_profile_count(const vf_profile *p)
{
    return p ? p->count : 0;
}

VF_API const vf_profile_record *vf_profile_at(const vf_profile *p, size_t i)
{
    return p && i < p->count ? &p->records[i] : NULL;
}

VF_API uint64_t vf_profile_dropped(const vf_profile *p)
{
    return p ? p->dropped : 0;
}

VF_API vf_engine_type vf_profile_engine_kind(const vf_profile *p)
{
    return p ? p->kind : VF_ENGINE_DEFAULT;
}

VF_API int vf_profile_num_workers(const vf_profile *p)
{
    return p ? p->nworkers : 0;
}

VF_API const char *vf_profile_worker_pool(const vf_profile *p, int worker)
{
    return p && worker >= 0 && worker < p->nworkers ? p->worker_pool[worker]
                                                     : NULL;
}

VF_API uint64_t vf_profile_span_ns(const vf_profile *p)
{
    return p ? p->span_ns : 0;
}
