/* guard.c: the registry of live engines and the threads' call slots (see
 * guard.h). */
#include "core/guard.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/thread_exit.h"

/* A thread's slot until its first call takes one: the fast path may store
 * into it, then misses its cache (epoch 0) and takes a real slot. Never
 * scanned. */
static vf__call_slot no_slot;
_Thread_local vf__guard_tls vf__guard_tls_ = {.slot = &no_slot};
/* From 1: a thread's cache starts at epoch 0, never current. */
_Atomic uint64_t vf__guard_epoch = 1; /* hidden (guard.h) */

/* Every slot ever made, newest first (release on publishing, acquire on
 * walking): a slot is never freed, only given back. */
static _Atomic(vf__call_slot *) slots;

/* The set of listed engines: open addressing, linear probing, a power of
 * two (or 0) in size, at most half full. */
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static const vf_engine **set;   /* set_lock */
static size_t set_cap, set_len; /* set_lock */

static size_t hash_of(const vf_engine *e)
{
    uint64_t x = (uint64_t)(uintptr_t)e;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* set_lock held: the index of `e`, or of the empty place it would go. */
static size_t find(const vf_engine *e)
{
    size_t mask = set_cap - 1, i = hash_of(e) & mask;
    while (set[i] != NULL && set[i] != e)
        i = (i + 1) & mask;
    return i;
}

/* set_lock held. */
static bool is_listed(const vf_engine *e)
{
    return e != NULL && set_cap != 0 && set[find(e)] == e;
}

/* set_lock held: room for one more (VF_ENOMEM). */
static int grow(void)
{
    if (2 * (set_len + 1) <= set_cap)
        return 0;
    size_t cap = set_cap ? 2 * set_cap : 16;
    const vf_engine **old = set;
    size_t old_cap = set_cap;
    set = vf__calloc(cap, sizeof *set);
    if (set == NULL) {
        set = old;
        return VF_ENOMEM;
    }
    set_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i] != NULL)
            set[find(old[i])] = old[i];
    free(old);
    return 0;
}

int vf__guard_list(const vf_engine *e)
{
    pthread_mutex_lock(&set_lock);
    int rc = grow();
    if (rc == 0) {
        set[find(e)] = e;
        set_len++;
    }
    pthread_mutex_unlock(&set_lock);
    return rc;
}

void vf__guard_unlist(const vf_engine *e)
{
    pthread_mutex_lock(&set_lock);
    if (is_listed(e)) {
        /* Backward-shift deletion: every later entry of the run moves up
         * when its home is not between the hole and itself. */
        size_t mask = set_cap - 1, hole = find(e);
        set[hole] = NULL;
        for (size_t i = (hole + 1) & mask; set[i] != NULL; i = (i + 1) & mask) {
            size_t home = hash_of(set[i]) & mask;
            if (((i - home) & mask) >= ((i - hole) & mask)) {
                set[hole] = set[i];
                set[i] = NULL;
                hole = i;
            }
        }
        set_len--;
    }
    /* Under the lock: a cache filled at the new epoch saw the set without
     * `e` (guard.h's Dekker pair: this RMW, then the scans). */
    atomic_fetch_add(&vf__guard_epoch, 1);
    pthread_mutex_unlock(&set_lock);
}

bool vf__guard_listed(const vf_engine *e)
{
    pthread_mutex_lock(&set_lock);
    bool listed = is_listed(e);
    pthread_mutex_unlock(&set_lock);
    return listed;
}

bool vf__guard_listed_with(const vf_engine *e,
                           bool (*test)(const vf_engine *e, const void *arg),
                           const void *arg)
{
    pthread_mutex_lock(&set_lock);
    bool listed = is_listed(e) && test(e, arg);
    pthread_mutex_unlock(&set_lock);
    return listed;
}

/* Whether slot `s` names `e` at any depth (seq_cst loads). */
static bool names(vf__call_slot *s, const vf_engine *e)
{
    for (int i = 0; i < VF__GUARD_DEPTH; i++)
        if (atomic_load(&s->calls[i]) == e)
            return true;
    return false;
}

bool vf__guard_in_call(const vf_engine *e)
{
    vf__guard_tls *t = &vf__guard_tls_;
    for (unsigned i = 0; i < t->depth; i++)
        if (atomic_load_explicit(&t->slot->calls[i], memory_order_relaxed) == e)
            return true;
    return false;
}

bool vf__guard_in_outer_call(const vf_engine *e)
{
    vf__guard_tls *t = &vf__guard_tls_;
    for (unsigned i = 0; i + 1 < t->depth; i++)
        if (!(t->hidden >> i & 1) &&
            atomic_load_explicit(&t->slot->calls[i], memory_order_relaxed) == e)
            return true;
    return false;
}

int vf__guard_calls(const vf_engine *out[VF__GUARD_DEPTH])
{
    vf__guard_tls *t = &vf__guard_tls_;
    int n = 0;
    for (unsigned i = 0; i < t->depth; i++)
        if (!(t->hidden >> i & 1))
            out[n++] = atomic_load_explicit(&t->slot->calls[i],
                                            memory_order_relaxed);
    return n;
}

void vf__guard_scan_start(vf__call_scan *sc)
{
    sc->next = atomic_load_explicit(&slots, memory_order_acquire);
    sc->n = 0;
}

bool vf__guard_scan_busy(vf__call_scan *sc, const vf_engine *e)
{
    for (;;) {
        /* Drop the calls seen that have returned: the slot names `e` no
         * more, or `started` moved (a later call began: that one ended). */
        int kept = 0;
        for (int i = 0; i < sc->n; i++)
            if (names(sc->busy[i].slot, e) &&
                atomic_load(&sc->busy[i].slot->started) == sc->busy[i].started)
                sc->busy[kept++] = sc->busy[i];
        sc->n = kept;
        if (sc->n > 0)
            return true;
        if (sc->next == NULL)
            return false;
        /* The next batch: `started` read after the load that saw the call
         * (which the call raised before it published its engine). */
        for (; sc->next != NULL && sc->n < VF__SCAN_BATCH;
             sc->next = sc->next->next) {
            if (names(sc->next, e)) {
                sc->busy[sc->n].slot = sc->next;
                sc->busy[sc->n++].started = atomic_load(&sc->next->started);
            }
        }
    }
}

void vf__guard_fork_lock(bool lock)
{
    if (lock)
        pthread_mutex_lock(&set_lock);
    else
        pthread_mutex_unlock(&set_lock);
}

void vf__guard_after_fork(void)
{
    for (vf__call_slot *s = atomic_load(&slots); s != NULL; s = s->next) {
        if (s == vf__guard_tls_.slot)
            continue;
        for (int i = 0; i < VF__GUARD_DEPTH; i++)
            atomic_store(&s->calls[i], NULL);
        atomic_store(&s->taken, false);
    }
}

/* --- a thread's slot ----------------------------------------------------- */

void vf__guard_thread_exit(void)
{
    vf__guard_tls *t = &vf__guard_tls_;
    vf__call_slot *s = t->slot;
    if (s == &no_slot)
        return;
    t->slot = &no_slot;
    t->epoch = 0; /* a later call takes a slot again */
    atomic_store_explicit(&s->taken, false, memory_order_release);
}

/* A slot for this thread: a free one taken, or a new one published; NULL
 * without memory. */
static vf__call_slot *take_slot(void)
{
    if (vf__thread_exit_arm() != 0)
        return NULL;
    vf__call_slot *s = atomic_load_explicit(&slots, memory_order_acquire);
    for (; s != NULL; s = s->next) {
        bool free_one = false;
        if (atomic_compare_exchange_strong(&s->taken, &free_one, true))
            break;
    }
    if (s == NULL) {
        s = vf__calloc(1, sizeof *s);
        if (s == NULL)
            return NULL;
        atomic_init(&s->taken, true);
        s->next = atomic_load_explicit(&slots, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(
            &slots, &s->next, s, memory_order_release, memory_order_relaxed)) {
        }
    }
    return s;
}

/* The slot names `e` at g->depth already (seq_cst): is `e` listed? From
 * this thread's cache beyond its first entry, else the set (refreshing
 * the cache). */
static bool listed_now(vf__guard_tls *t, const vf_engine *e)
{
    uint64_t epoch = atomic_load(&vf__guard_epoch);
    if (t->epoch == epoch && t->listed[0] == e)
        return true;
    if (e != NULL && t->epoch == epoch) {
        for (int i = 1; i < VF__GUARD_CACHE; i++) {
            if (t->listed[i] == e) {
                t->listed[i] = t->listed[0];
                t->listed[0] = e;
                return true;
            }
        }
    }
    pthread_mutex_lock(&set_lock);
    bool listed = is_listed(e);
    epoch = atomic_load(&vf__guard_epoch);
    pthread_mutex_unlock(&set_lock);
    if (!listed)
        return false;
    if (t->epoch != epoch) { /* what it remembered may be gone */
        for (int i = 1; i < VF__GUARD_CACHE; i++)
            t->listed[i] = NULL;
        t->epoch = epoch;
    } else {
        for (int i = VF__GUARD_CACHE - 1; i > 0; i--)
            t->listed[i] = t->listed[i - 1];
    }
    t->listed[0] = e;
    return true;
}

/* Entering failed with `rc`: give the place back (nothing to leave). */
static int refuse(vf__guard_tls *t, const vf__guard *g, int rc, const char *who)
{
    t->depth = (unsigned)g->depth;
    atomic_store_explicit(&t->slot->calls[g->depth], NULL,
                          memory_order_release);
    if (rc == VF_ENOMEM)
        return vf__fail(rc, "%s: out of memory", who);
    return vf__fail(rc, "%s: not an engine (NULL or destroyed)", who);
}

int vf__guard_enter_slow(const vf_engine *e, vf__guard *g, const char *who)
{
    vf__guard_tls *t = &vf__guard_tls_;
    if (t->slot == &no_slot) { /* this thread's first call */
        vf__call_slot *s = take_slot();
        if (s == NULL)
            return refuse(t, g, VF_ENOMEM, who);
        t->slot = s;
        atomic_store_explicit(/* as the fast path did on the dummy */
                              &s->started,
                              atomic_load_explicit(&s->started,
                                                   memory_order_relaxed) +
                                  1,
                              memory_order_release);
        atomic_store(&s->calls[g->depth], e);
    }
    return listed_now(t, e) ? 0 : refuse(t, g, VF_EINVAL, who);
}

int vf__guard_enter_nested(const vf_engine *e, vf__guard *g, const char *who)
{
    vf__guard_tls *t = &vf__guard_tls_;
    unsigned d = t->depth;
    vf__call_slot *s = t->slot;
    if (d >= VF__GUARD_DEPTH)
        return vf__fail(VF_ENOTSUP,
                        "%s: called from inside %d calls on other engines "
                        "(ops run inline inside calls on other engines), "
                        "the most calls nest across engines",
                        who, VF__GUARD_DEPTH);
    atomic_store(&s->calls[d], e); /* then the check: the pair */
    t->depth = d + 1;
    g->depth = (int)d;
    return listed_now(t, e) ? 0 : refuse(t, g, VF_EINVAL, who);
}
