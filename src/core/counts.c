/* counts.c: per-thread pending and active counts, and their sum (see
 * counts.h). */
#include "core/counts.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "core/thread_exit.h"

_Thread_local vf__count_mru vf__count_mru_;

/* A thread's slots: one entry per engine it counts in (serial 0: free). */
typedef struct cache_entry {
    uint64_t serial;
    vf__counts *counts;   /* compared, not followed, once the engine goes */
    vf__count_slot *slot; /* slot 0 when none was free (not owned) */
} cache_entry;

typedef struct count_cache {
    cache_entry ent[VF__COUNT_CACHE];
    unsigned evict; /* round-robin victim when every entry is live */
} count_cache;

/* This thread's cache: thread-local storage, not the heap, so a thread
 * whose exit no longer runs (the library unloaded before it: thread_exit.h)
 * leaves nothing behind; NULL until its first use arms its exit. */
static _Thread_local count_cache tcache_storage;
static _Thread_local count_cache *tcache;

/* The slots lock (a leaf, engine.h): slot owners, the live list, every
 * thread's cache entries but for their owner's reads. */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static vf__counts *live; /* slots_lock */
static _Atomic uint64_t last_serial;

/* slots_lock held: is `c` a live engine's counts with this serial? */
static bool is_live(const vf__counts *c, uint64_t serial)
{
    for (vf__counts *l = live; l != NULL; l = l->next_live)
        if (l == c)
            return l->serial == serial;
    return false;
}

/* slots_lock held: give back the slot of entry `en` and clear it. */
static void release(cache_entry *en)
{
    if (en->serial != 0 && is_live(en->counts, en->serial) &&
        en->slot != &en->counts->slots[0])
        en->slot->owner = NULL;
    en->serial = 0;
}

void vf__counts_thread_exit(void)
{
    count_cache *t = tcache;
    if (t == NULL)
        return;
    pthread_mutex_lock(&slots_lock);
    for (int i = 0; i < VF__COUNT_CACHE; i++)
        release(&t->ent[i]);
    pthread_mutex_unlock(&slots_lock);
    tcache = NULL;
    vf__count_mru_.serial = 0;
}

/* This thread's cache, from its first use; NULL when its exit cannot be
 * armed (no thread key: thread_exit.h). */
static count_cache *this_cache(void)
{
    if (tcache != NULL)
        return tcache;
    if (vf__thread_exit_arm() != 0)
        return NULL;
    memset(&tcache_storage, 0, sizeof tcache_storage);
    tcache = &tcache_storage;
    return tcache;
}

/* slots_lock held: the entry of `t` to fill: a free one, one of an engine
 * that is gone, else a live one given back (round robin). */
static cache_entry *entry_to_fill(count_cache *t)
{
    for (int i = 0; i < VF__COUNT_CACHE; i++)
        if (t->ent[i].serial == 0 ||
            !is_live(t->ent[i].counts, t->ent[i].serial))
            return &t->ent[i];
    cache_entry *en = &t->ent[t->evict++ % VF__COUNT_CACHE];
    release(en);
    return en;
}

vf__count_slot *vf__counts_slot_slow(vf__counts *c)
{
    count_cache *t = this_cache();
    if (t != NULL) {
        for (int i = 0; i < VF__COUNT_CACHE; i++) {
            if (t->ent[i].serial == c->serial) {
                vf__count_mru_ = (vf__count_mru){c->serial, t->ent[i].slot};
                return t->ent[i].slot;
            }
        }
    }
    vf__count_slot *slot = &c->slots[0]; /* shared */
    pthread_mutex_lock(&slots_lock);
    if (t != NULL) {
        cache_entry *en = entry_to_fill(t);
        for (int i = 1; i < c->nslots; i++) {
            if (c->slots[i].owner == NULL) {
                slot = &c->slots[i];
                slot->owner = t;
                /* Before this thread's first add (counts.h). */
                if (i >= atomic_load(&c->nused))
                    atomic_store(&c->nused, i + 1);
                break;
            }
        }
        *en = (cache_entry){c->serial, c, slot};
    }
    pthread_mutex_unlock(&slots_lock);
    /* Slot 0 is never given back: it may be remembered without a cache. */
    vf__count_mru_ = (vf__count_mru){c->serial, slot};
    return slot;
}

uint64_t vf__counts_sum(vf__counts *c)
{
    /* Every `end` before every `start`, `nused` read again between the
     * two: the instant T of counts.h's proof. */
    int n = atomic_load(&c->nused);
    uint64_t end = 0;
    for (int i = 0; i < n; i++)
        end += atomic_load(&c->slots[i].end);
    n = atomic_load(&c->nused);
    uint64_t start = 0;
    for (int i = 0; i < n; i++)
        start += atomic_load(&c->slots[i].start);
    return start - end;
}

int vf__counts_init(vf__counts *c, int nworkers)
{
    int n = 1 + (nworkers > 0 ? nworkers : 0) + VF__COUNT_SPARE_SLOTS;
    c->slots = vf__aligned_calloc(VF__CACHELINE, (size_t)n * sizeof *c->slots);
    if (c->slots == NULL)
        return VF_ENOMEM;
    c->nslots = n;
    c->serial = atomic_fetch_add(&last_serial, 1) + 1;
    atomic_init(&c->nused, 1); /* slot 0 */
    atomic_init(&c->inflight, 0);
    pthread_mutex_lock(&slots_lock);
    c->next_live = live;
    live = c;
    pthread_mutex_unlock(&slots_lock);
    return 0;
}

void vf__counts_destroy(vf__counts *c)
{
    if (c->slots == NULL)
        return;
    pthread_mutex_lock(&slots_lock);
    vf__counts **p = &live;
    while (*p != NULL && *p != c)
        p = &(*p)->next_live;
    if (*p == c)
        *p = c->next_live;
    pthread_mutex_unlock(&slots_lock);
    /* A thread that still remembers it never matches its serial again. */
    free(c->slots);
    c->slots = NULL;
}

void vf__counts_fork_lock(bool lock)
{
    if (lock)
        pthread_mutex_lock(&slots_lock);
    else
        pthread_mutex_unlock(&slots_lock);
}

void vf__counts_after_fork(vf__counts *c)
{
    for (int i = 0; i < c->nslots; i++) {
        atomic_store(&c->slots[i].start, 0);
        atomic_store(&c->slots[i].end, 0);
        if (c->slots[i].owner != tcache)
            c->slots[i].owner = NULL; /* its thread is gone */
    }
    atomic_store(&c->inflight, 0);
}
