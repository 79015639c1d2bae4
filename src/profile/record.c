/* record.c: recording ops and taking snapshots (see hooks.h). */
#include "base/deadline.h"
#include "profile/hooks.h"

#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/deadline.h"
#include "base/error.h"
#include "base/hashmap.h"
#include "profile/out.h"
#include "profile/snapshot.h"
#include "varflow_profile.h"

#define VF__PROF_CHUNK 4096

typedef struct vf__prof_entry {
    vf_profile_record rec; /* name: interned; deps: fixed up by snapshots */
    size_t name;           /* rec.name's index in the profiler's names */
    uint64_t deps[VF__PROF_INLINE_DEPS];
    uint64_t *more_deps;
} vf__prof_entry;

/* vf__profiler.numbering: ids below, the session above. */
#define NUMBERING_BITS 40
#define NUMBERING_IDS ((UINT64_C(1) << NUMBERING_BITS) - 1)

struct vf__profiler {
    /* seq_cst: the core stores its hooks byte between two reads of it
     * (hooks.h: vf__prof_recording) */
    _Atomic int state;
    pthread_mutex_t lock; /* everything below unless marked */
    /* The session (each start begins one; an op pushed under an older
     * one is not recorded) above NUMBERING_BITS, the last id taken below:
     * one word, so a push takes its id and its session in one step, and
     * a restart resets both in one (a restart that published its session
     * before resetting the counter let a push in between number its op of
     * the new profile with the old counter: duplicate ids, found trying
     * the profiler as a user). Stored under the lock at start (release,
     * after `t0`), added to by pushes (acquire: a push of the new session
     * stamps with its clock). */
    _Atomic uint64_t numbering;
    _Atomic uint64_t t0; /* CLOCK_MONOTONIC ns at start */
    size_t max_records;
    char *path;              /* written at destroy, or NULL (immutable) */
    size_t count;            /* lock */
    uint64_t dropped;        /* lock */
    vf__prof_entry **chunks; /* lock */
    size_t nchunks;          /* lock */
    /* lock: the interned names, in the order first seen, and their
     * index: each name's string key (base/hashmap.h) -> its place in
     * names */
    char **names;
    size_t nnames, names_cap;
    vf__hashmap name_index;
    /* The ops last to end on each var (vf__prof_var_used), for the edges of
     * ops pushed after they ended (vf__prof_var_edge): under `var_lock`, a
     * spinlock a push takes under its vars' locks (the mutex is not taken
     * there). var_index: a var's slot + 1 -> its place in var_last. */
    pthread_spinlock_t var_lock;
    vf__hashmap var_index;
    struct var_last *var_last;
    size_t nvars, vars_cap;
};

/* A var's last write to end, and the last read to end since it: each a
 * record's session (above NUMBERING_BITS) and id, or 0; of the var of
 * generation `gen` of its slot. */
struct var_last {
    uint64_t write, read;
    uint32_t gen;
};

/* `path` as the create's working directory names it: a relative path
 * joined to it, so destroy writes where the create checked (after a
 * chdir, a daemon's to "/", it wrote to the directory of the moment, or
 * failed where the check had passed: found by a user tester). As it is
 * where it is absolute, "-", or the directory cannot be had (removed). */
static char *absolute_path(const char *path)
{
    char cwd[PATH_MAX];
    if (path[0] == '/' || strcmp(path, "-") == 0 ||
        getcwd(cwd, sizeof cwd) == NULL)
        return vf__strdup(path);
    size_t nc = strlen(cwd), np = strlen(path);
    char *abs = vf__malloc(nc + 1 + np + 1);
    if (abs != NULL) {
        memcpy(abs, cwd, nc);
        abs[nc] = '/';
        memcpy(abs + nc + 1, path, np + 1);
    }
    return abs;
}

int vf__prof_create(vf__profiler **out, size_t max_records, const char *path)
{
    vf__profiler *p = vf__calloc(1, sizeof *p);
    if (p == NULL ||
        (path != NULL && (p->path = absolute_path(path)) == NULL)) {
        free(p);
        return VF_ENOMEM;
    }
    atomic_init(&p->state, VF__PROF_OFF);
    atomic_init(&p->numbering, 0);
    atomic_init(&p->t0, 0);
    p->max_records = max_records;
    vf__hashmap_init(&p->name_index, vf__calloc);
    vf__hashmap_init(&p->var_index, vf__calloc);
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p->path);
        free(p);
        return VF_ESYSTEM;
    }
    if (pthread_spin_init(&p->var_lock, PTHREAD_PROCESS_PRIVATE) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p->path);
        free(p);
        return VF_ESYSTEM;
    }
    if (path != NULL)
        vf__prof_start(p);
    *out = p;
    return 0;
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
    for (size_t i = 0; i < p->nnames; i++)
        free(p->names[i]);
    free(p->names);
    p->names = NULL;
    p->nnames = p->names_cap = 0;
    vf__hashmap_destroy(&p->name_index);
    p->count = 0;
    p->dropped = 0;
    pthread_spin_lock(&p->var_lock);
    vf__hashmap_destroy(&p->var_index);
    free(p->var_last);
    p->var_last = NULL;
    p->nvars = p->vars_cap = 0;
    pthread_spin_unlock(&p->var_lock);
}

int vf__prof_destroy(vf__profiler *p, const vf__prof_engine_desc *engine)
{
    int rc = 0;
    if (p->path != NULL && engine != NULL) {
        vf_profile *snap;
        rc = vf__prof_take(p, engine, &snap);
        if (rc == 0) {
            rc = vf_profile_write(snap, p->path, VF_PROFILE_AUTO);
            vf_profile_destroy(snap);
        }
        if (rc != 0)
            fprintf(stderr, "varflow: cannot write the profile to %s: %s\n",
                    p->path, vf_error_detail());
    }
    clear(p);
    pthread_mutex_destroy(&p->lock);
    pthread_spin_destroy(&p->var_lock);
    free(p->path);
    free(p);
    return rc;
}

/* The session of the profile now (24 bits: a record compares its own,
 * cut to them, with it). */
static uint32_t session_now(vf__profiler *p)
{
    return (
        uint32_t)(atomic_load_explicit(&p->numbering, memory_order_relaxed) >>
                  NUMBERING_BITS);
}

/* Time stamps, relative to the profile's start. */
static uint64_t stamp(vf__profiler *p)
{
    return vf__now_ns() - atomic_load_explicit(&p->t0, memory_order_relaxed);
}

/* `n` records of the profile of `session` not kept (memory): counted as
 * dropped while that profile is the current one, as a record with no room
 * is (vf_profile_dropped). */
static void count_dropped(vf__profiler *p, uint32_t session, uint64_t n)
{
    if (n == 0) /* a part's (vf__prof_op_split counts the rest's) */
        return;
    pthread_mutex_lock(&p->lock);
    if (session == session_now(p))
        p->dropped += n;
    pthread_mutex_unlock(&p->lock);
}

vf__op_prof *vf__prof_op_pushed(vf__profiler *p, int nvars, uint32_t ids)
{
    vf__op_prof *r = vf__malloc(sizeof *r);
    if (r != NULL) {
        r->more_deps = NULL;
        if (nvars > VF__PROF_INLINE_DEPS) {
            r->more_deps = vf__malloc((size_t)(nvars - VF__PROF_INLINE_DEPS) *
                                      sizeof *r->more_deps);
            if (r->more_deps == NULL) {
                free(r);
                r = NULL;
            }
        }
    }
    if (r == NULL) {
        /* Not recorded; the op itself is unaffected. Counted: pushes that
         * found no memory for their records went missing from both the
         * records and the dropped count (found trying memory limits as a
         * user: 380,000 of 955,869 ops in neither). */
        count_dropped(p, session_now(p), ids);
        return NULL;
    }
    atomic_store_explicit(&r->ndeps, 0, memory_order_relaxed);
    r->cap = nvars > VF__PROF_INLINE_DEPS ? nvars : VF__PROF_INLINE_DEPS;
    r->session = session_now(p);
    r->id = r->first = 0;
    r->nids = ids;
    r->worker = -1;
    r->push = r->ready = r->start = r->end = stamp(p);
    r->device_start = r->device_end = 0;
    r->inside = 0;
    r->parent = 0;
    r->name = 0;
    r->name_state = VF__PROF_NAME_AT_RECORD;
    return r;
}

void vf__prof_op_number(vf__profiler *p, vf__op_prof *r)
{
    uint64_t n = atomic_load_explicit(&p->numbering, memory_order_relaxed);
    do {
        if ((uint32_t)(n >> NUMBERING_BITS) != r->session)
            return; /* a start since its push: in neither profile */
    } while (!atomic_compare_exchange_weak_explicit(
        &p->numbering, &n, n + r->nids, memory_order_acquire,
        memory_order_relaxed));
    r->first = (n & NUMBERING_IDS) + 1;
    r->id = (n & NUMBERING_IDS) + r->nids;
}

void vf__prof_op_parent_id(vf__op_prof *r, const vf__op_prof *parent,
                           uint64_t id)
{
    /* Numbered at its push, before the child's; of an earlier profile,
     * its id names another op here (or none). */
    if (parent->session == r->session && parent->first != 0)
        r->parent = id;
}

void vf__prof_op_parent(vf__op_prof *r, const vf__op_prof *parent)
{
    vf__prof_op_parent_id(r, parent, parent->id);
}

vf__op_prof *vf__prof_op_split(vf__profiler *p, vf__op_prof *whole, int nvars,
                               uint32_t ids)
{
    vf__op_prof *r = vf__prof_op_pushed(p, nvars, 0);
    if (r == NULL) {
        count_dropped(p, whole->session, ids); /* the rest's */
        return NULL;
    }
    r->session = whole->session;
    r->push = r->ready = r->start = r->end = whole->push;
    r->parent = whole->parent;
    r->id = whole->id;
    whole->id -= ids;
    r->first = whole->id + 1;
    return r;
}

/* An edge from the op `id` of r's profile: one per var at most, so
 * within r's room; one more (a bug) is dropped rather than written past
 * it (a child passing a deleted var took its push-time edges twice:
 * found by the second reviewer of those edges). */
static void edge_to(vf__op_prof *r, uint64_t id)
{
    int i = atomic_load_explicit(&r->ndeps, memory_order_relaxed);
    do {
        if (i >= r->cap)
            return;
    } while (!atomic_compare_exchange_weak_explicit(
        &r->ndeps, &i, i + 1, memory_order_relaxed, memory_order_relaxed));
    if (i < VF__PROF_INLINE_DEPS)
        r->deps[i] = id;
    else
        r->more_deps[i - VF__PROF_INLINE_DEPS] = id;
}

bool vf__prof_op_edge(vf__op_prof *r, const vf__op_prof *from)
{
    /* An op of an earlier profile (one started before the latest
     * vf_profile_start) has an id of that profile: in this one the same
     * number names another op (or this one). It is not recorded here. */
    if (from->session != r->session || from->id == 0)
        return false;
    edge_to(r, from->id);
    return true;
}

/* Room for one more of `n` elements of `size` bytes in *arr (capacity
 * *cap, doubling from 64, the old ones copied): 0 or VF_ENOMEM. */
static int room_for_one(void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t more = *cap ? 2 * *cap : 64;
    void *t = vf__malloc(more * size);
    if (t == NULL)
        return VF_ENOMEM;
    if (n > 0)
        memcpy(t, *arr, n * size);
    free(*arr);
    *arr = t;
    *cap = more;
    return 0;
}

/* A record's session and id in one word (as `numbering` keeps them). */
static uint64_t numbered(const vf__op_prof *r)
{
    return (uint64_t)r->session << NUMBERING_BITS | r->id;
}

/* The entry of the var of `slot` at `gen` (var_lock held); NULL when it
 * has none and `make` is false, or out of memory. One entry per slot, the
 * latest generation's: a destroyed var's entry is taken by the next var
 * made in its slot, so the table is no bigger than the most vars the
 * program had at once (the engine's own slots, never freed, outnumber
 * it), however many it makes over a long run. (It stopped growing at
 * max_records vars, entries of destroyed vars kept: past them an op on a
 * var free at its push had no edge, every op kept: found by an
 * auditor.) */
static struct var_last *var_last_of(vf__profiler *p, uint32_t slot,
                                    uint32_t gen, bool make)
{
    uint64_t key = (uint64_t)slot + 1; /* 0 is no key (hashmap.h) */
    const uint64_t *at = vf__hashmap_find(&p->var_index, key);
    if (at != NULL) {
        struct var_last *l = &p->var_last[*at];
        if (l->gen != gen) { /* a var of the slot that is gone */
            if (!make)
                return NULL;
            *l = (struct var_last){.gen = gen};
        }
        return l;
    }
    if (!make)
        return NULL;
    if (room_for_one((void **)&p->var_last, &p->vars_cap, p->nvars,
                     sizeof *p->var_last) != 0)
        return NULL;
    if (vf__hashmap_put(&p->var_index, key, p->nvars, NULL) != 0)
        return NULL;
    p->var_last[p->nvars] = (struct var_last){.gen = gen};
    return &p->var_last[p->nvars++];
}

void vf__prof_var_used(vf__profiler *p, const vf__op_prof *r, uint32_t slot,
                       uint32_t gen, bool write)
{
    /* An op of an earlier profile ending now does not hide the last op of
     * this one (its id would name no op here: found by the second
     * reviewer of the table's notes). */
    if (r->session != session_now(p))
        return;
    pthread_spin_lock(&p->var_lock);
    struct var_last *l = var_last_of(p, slot, gen, true);
    if (l != NULL) {
        if (write)
            *l = (struct var_last){numbered(r), 0, gen};
        else
            l->read = numbered(r);
    }
    pthread_spin_unlock(&p->var_lock);
}

void vf__prof_var_edge(vf__profiler *p, vf__op_prof *r, uint32_t slot,
                       uint32_t gen, bool write)
{
    pthread_spin_lock(&p->var_lock);
    const struct var_last *l = var_last_of(p, slot, gen, false);
    /* A write waits for the reads since the last write (the last of them
     * to end released it), else for that write; a read for the write. */
    uint64_t from = l == NULL ? 0 : write && l->read != 0 ? l->read : l->write;
    pthread_spin_unlock(&p->var_lock);
    if (from != 0 && (uint32_t)(from >> NUMBERING_BITS) == r->session)
        edge_to(r, from & NUMBERING_IDS);
}

void vf__prof_op_ready(vf__profiler *p, vf__op_prof *r)
{
    r->ready = stamp(p);
}

void vf__prof_op_started(vf__profiler *p, vf__op_prof *r, int worker)
{
    r->start = stamp(p);
    r->worker = worker;
}

void vf__prof_op_device_span(vf__profiler *p, vf__op_prof *r, uint64_t start_ns,
                             uint64_t end_ns)
{
    uint64_t t0 = atomic_load_explicit(&p->t0, memory_order_relaxed);
    if (start_ns < t0 || end_ns < start_ns)
        return; /* not from this profile's clock: unknown */
    r->device_start = start_ns - t0;
    r->device_end = end_ns - t0;
}

void vf__prof_op_inside(vf__op_prof *r, uint64_t ns)
{
    r->inside += ns;
}

void vf__prof_op_ended(vf__profiler *p, vf__op_prof *r, bool skipped)
{
    r->end = stamp(p);
    if (skipped)
        r->start = r->end;
}

void vf__prof_op_dropped(vf__op_prof *r)
{
    free(r->more_deps);
    free(r);
}

/* Room for one more name in names (lock held); 0 or VF_ENOMEM. */
static int names_room(vf__profiler *p)
{
    return room_for_one((void **)&p->names, &p->names_cap, p->nnames,
                        sizeof *p->names);
}

/* The index in names of the interned copy of `name` (lock held), made on
 * first sight; 0 or VF_ENOMEM. Names are the map's string keys (hashmap.h:
 * never removed one by one). */
static int intern(vf__profiler *p, const char *name, size_t *index)
{
    for (uint64_t key = vf__hashmap_string_key(name);;
         key = vf__hashmap_next_key(key)) {
        uint64_t at;
        int rc = vf__hashmap_put(&p->name_index, key, p->nnames, &at);
        if (rc < 0)
            return rc;
        if (rc == 1 && strcmp(p->names[at], name) != 0)
            continue;  /* another name's key */
        if (rc == 0) { /* a new name: at == nnames */
            char *copy = NULL;
            if (names_room(p) != 0 || (copy = vf__strdup(name)) == NULL) {
                vf__hashmap_remove(&p->name_index, key);
                return VF_ENOMEM;
            }
            p->names[p->nnames++] = copy;
        }
        *index = (size_t)at;
        return 0;
    }
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

void vf__prof_op_name(vf__profiler *p, vf__op_prof *r, const char *name)
{
    pthread_mutex_lock(&p->lock);
    /* Another session's names may be cleared (vf__prof_start): its record
     * is dropped anyway. */
    if (r->session == session_now(p))
        r->name_state = intern(p, name, &r->name) == 0 ? VF__PROF_NAME_INTERNED
                                                       : VF__PROF_NAME_LOST;
    pthread_mutex_unlock(&p->lock);
}

/* The place of the record's name in p's names (lock held): 0 or
 * VF_ENOMEM. */
static int record_name(vf__profiler *p, const vf__op_prof *pr, const char *name,
                       size_t *index)
{
    if (pr->name_state == VF__PROF_NAME_INTERNED) {
        *index = pr->name;
        return 0;
    }
    if (pr->name_state == VF__PROF_NAME_LOST)
        return VF_ENOMEM;
    return intern(p, name, index);
}

void vf__prof_op_finished(vf__profiler *p, vf__op_prof *pr,
                          const vf__prof_op_desc *op)
{
    pthread_mutex_lock(&p->lock);
    vf__prof_entry *slot = NULL;
    size_t name = 0;
    /* The first max_records ops pushed (ids are taken in push order from
     * 1 each session), whenever they finish: kept as they finished, the
     * long ops, finishing last, were the ones dropped, and every figure
     * went with them (found by a user tester auditing the profiler). */
    if (pr->session == session_now(p) && pr->id <= p->max_records &&
        record_name(p, pr, op->name, &name) == 0 &&
        (slot = next_slot(p)) != NULL) {
        vf_profile_record *r = &slot->rec;
        r->id = pr->id;
        r->name = p->names[name];
        slot->name = name;
        r->pool = op->pool;
        r->worker = pr->worker;
        r->device = op->device;
        r->property = op->property;
        r->async = op->async;
        r->status = op->status;
        r->push_ns = pr->push;
        r->ready_ns = pr->ready;
        r->start_ns = pr->start;
        r->end_ns = pr->end;
        r->device_start_ns = pr->device_start;
        r->device_end_ns = pr->device_end;
        r->inside_ns = pr->inside;
        r->parent = pr->parent;
        r->ndeps = atomic_load_explicit(&pr->ndeps, memory_order_relaxed);
        r->deps = NULL;
        memcpy(slot->deps, pr->deps, sizeof slot->deps);
        slot->more_deps = pr->more_deps; /* ownership moves to the slot */
        pr->more_deps = NULL;
        p->count++;
    } else if (pr->session == session_now(p)) {
        p->dropped++;
    }
    pthread_mutex_unlock(&p->lock);
    vf__prof_op_dropped(pr);
}

uint64_t vf__prof_now(vf__profiler *p)
{
    return stamp(p);
}

void vf__prof_part_finished(vf__profiler *p, const vf__op_prof *whole,
                            vf__op_prof *part, bool deps_of_whole,
                            const vf__prof_op_desc *desc)
{
    vf__op_prof *r = vf__malloc(sizeof *r);
    if (r == NULL) {
        count_dropped(p, whole->session, 1);
        return;
    }
    r->id = part->id;
    r->worker = part->worker;
    r->session = whole->session;
    r->push = whole->push;
    r->ready = part->ready;
    r->start = part->start;
    r->end = part->end;
    r->device_start = r->device_end = 0;
    r->inside = part->inside;
    r->parent = whole->parent;
    r->more_deps = NULL;
    r->name = 0;
    r->name_state = VF__PROF_NAME_AT_RECORD; /* desc->name: the item's */
    int n = deps_of_whole
                ? atomic_load_explicit(&whole->ndeps, memory_order_relaxed)
                : atomic_load_explicit(&part->ndeps, memory_order_relaxed);
    if (!deps_of_whole) {
        n = n < VF__PROF_INLINE_DEPS ? n : VF__PROF_INLINE_DEPS;
        memcpy(r->deps, part->deps, (size_t)n * sizeof r->deps[0]);
    } else {
        memcpy(r->deps, whole->deps, sizeof r->deps);
        if (n > VF__PROF_INLINE_DEPS) {
            r->more_deps = vf__malloc((size_t)(n - VF__PROF_INLINE_DEPS) *
                                      sizeof *r->more_deps);
            if (r->more_deps != NULL)
                memcpy(r->more_deps, whole->more_deps,
                       (size_t)(n - VF__PROF_INLINE_DEPS) *
                           sizeof *r->more_deps);
            else
                n = VF__PROF_INLINE_DEPS; /* the first edges only */
        }
    }
    atomic_store_explicit(&r->ndeps, n, memory_order_relaxed);
    vf__prof_op_finished(p, r, desc); /* frees r */
}

/* --- control ----------------------------------------------------------- */

void vf__prof_fork_lock(vf__profiler *p, bool lock)
{
    /* The vars' table's spinlock too, after the mutex (as clear takes
     * them): a push on another thread may hold it across the fork, and
     * the child's next push would spin for ever (found by the second
     * reviewer of the table). */
    if (lock) {
        pthread_mutex_lock(&p->lock);
        pthread_spin_lock(&p->var_lock);
    } else {
        pthread_spin_unlock(&p->var_lock);
        pthread_mutex_unlock(&p->lock);
    }
}

bool vf__prof_recording(vf__profiler *p)
{
    return atomic_load(&p->state) == VF__PROF_ON;
}

int vf__prof_set_state(vf__profiler *p, const char *who, int from, int to)
{
    int expected = from;
    if (from < 0)
        atomic_store(&p->state, to);
    else if (!atomic_compare_exchange_strong(&p->state, &expected, to))
        /* With the state it found, so the caller knows which (a user
         * tester: a stopped profile and one paused already read the
         * same). */
        return vf__fail(VF_EINVAL, "%s: the profiler is not %s: it is %s", who,
                        from == VF__PROF_ON ? "recording" : "paused",
                        expected == VF__PROF_PAUSED ? "paused already"
                        : expected == VF__PROF_ON   ? "recording"
                                                    : "stopped");
    return 0;
}

/* Clear what was recorded and begin the next session (lock held). */
static void new_session(vf__profiler *p)
{
    clear(p);
    /* The new clock first, then the next session with no id taken
     * (release): a push numbered in it stamps with that clock. */
    atomic_store_explicit(&p->t0, vf__now_ns(), memory_order_relaxed);
    atomic_store_explicit(&p->numbering,
                          (uint64_t)(session_now(p) + 1) << NUMBERING_BITS,
                          memory_order_release);
}

int vf__prof_start(vf__profiler *p)
{
    pthread_mutex_lock(&p->lock);
    new_session(p);
    atomic_store(&p->state, VF__PROF_ON);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

void vf__prof_after_fork(vf__profiler *p)
{
    /* The child's engine has pools of its own (fork_child_workers): the
     * parent's records name workers it does not have, which a snapshot
     * could not place (found trying the profiler across fork as a user:
     * a trace varflow-report refused). */
    pthread_mutex_lock(&p->lock);
    new_session(p);
    pthread_mutex_unlock(&p->lock);
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const vf_profile_record *)a)->id;
    uint64_t y = ((const vf_profile_record *)b)->id;
    return x < y ? -1 : x > y;
}

int vf__prof_take(vf__profiler *p, const vf__prof_engine_desc *engine,
                  vf_profile **out)
{
    static const char who[] = "vf_profile_take";
    int nworkers = 0;
    for (int i = 0; i < engine->npools; i++)
        if (engine->pools[i].first_worker + engine->pools[i].nworkers >
            nworkers)
            nworkers = engine->pools[i].first_worker +
                       engine->pools[i].nworkers;
    pthread_mutex_lock(&p->lock);
    size_t ndeps = 0, names_size = 0;
    for (size_t i = 0; i < p->count; i++)
        ndeps +=
            (size_t)p->chunks[i / VF__PROF_CHUNK][i % VF__PROF_CHUNK].rec.ndeps;
    for (size_t i = 0; i < p->nnames; i++)
        names_size += strlen(p->names[i]) + 1;
    vf_profile *s = vf__calloc(1, sizeof *s);
    if (s != NULL) {
        s->records = vf__malloc((p->count + 1) * sizeof *s->records);
        s->deps = vf__malloc((ndeps + 1) * sizeof *s->deps);
        s->names = vf__malloc(names_size + 1);
        s->worker_pool = vf__calloc((size_t)nworkers + 1,
                                    sizeof *s->worker_pool);
        s->worker_pool_index = vf__calloc((size_t)nworkers + 1,
                                          sizeof *s->worker_pool_index);
    }
    if (s == NULL || s->records == NULL || s->deps == NULL ||
        s->names == NULL || s->worker_pool == NULL ||
        s->worker_pool_index == NULL) {
        pthread_mutex_unlock(&p->lock);
        vf_profile_destroy(s);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    /* Names: copied into one block; records point into it. to[j] is the
     * copy of names[j], the name of each record whose entry says j. */
    char **to = vf__malloc((p->nnames + 1) * sizeof *to);
    if (to == NULL) {
        pthread_mutex_unlock(&p->lock);
        vf_profile_destroy(s);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    size_t off = 0;
    for (size_t i = 0; i < p->nnames; i++) {
        size_t len = strlen(p->names[i]) + 1;
        memcpy(s->names + off, p->names[i], len);
        to[i] = s->names + off;
        off += len;
    }
    size_t d = 0;
    for (size_t i = 0; i < p->count; i++) {
        const vf__prof_entry *en =
            &p->chunks[i / VF__PROF_CHUNK][i % VF__PROF_CHUNK];
        vf_profile_record *r = &s->records[i];
        *r = en->rec;
        r->name = to[en->name];
        for (int k = 0; k < r->ndeps; k++)
            s->deps[d + (size_t)k] =
                k < VF__PROF_INLINE_DEPS
                    ? en->deps[k]
                    : en->more_deps[k - VF__PROF_INLINE_DEPS];
        r->ndeps = vf__prof_deps_unique(s->deps + d, r->ndeps);
        d += (size_t)r->ndeps; /* r->deps is fixed up after sorting */
        if (r->end_ns > s->span_ns)
            s->span_ns = r->end_ns;
        if (r->device_end_ns > s->span_ns) /* device work ends later */
            s->span_ns = r->device_end_ns;
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

    s->kind = engine->kind;
    s->nworkers = nworkers;
    for (int i = 0; i < engine->npools; i++)
        for (int w = 0; w < engine->pools[i].nworkers; w++) {
            s->worker_pool[engine->pools[i].first_worker + w] =
                engine->pools[i].name;
            s->worker_pool_index[engine->pools[i].first_worker + w] = i;
        }
    *out = s;
    return 0;
}

VF_API void vf_profile_destroy(vf_profile *p)
{
    if (p == NULL)
        return;
    free(p->records);
    free(p->deps);
    free(p->names);
    free(p->worker_pool);
    free(p->worker_pool_index);
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

VF_API vf_engine_type vf_profile_engine_type(const vf_profile *p)
{
    if (p == NULL) {
        vf__fail(VF_EINVAL, "vf_profile_engine_type: the profile is NULL");
        return VF_ENGINE_INVALID;
    }
    return p->kind;
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
