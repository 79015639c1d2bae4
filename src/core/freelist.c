/* freelist.c: per-thread block caches over a process-wide depot. */
#include "core/freelist.h"

#include <pthread.h>
#include <stdbool.h>

#include "base/alloc.h"
#include "core/thread_exit.h"

#define VF__FL_BATCH 64

typedef struct free_block {
    struct free_block *next;
} free_block;

/* A chain of VF__FL_BATCH blocks, seen through its first block: the first
 * word is that block's own chain link, the second links the depot's batches,
 * so a whole batch moves in O(1). */
typedef struct batch {
    free_block *chain;
    struct batch *next_batch;
} batch;

typedef struct depot {
    pthread_mutex_t lock;
    size_t size;       /* block size; set once before use */
    batch *batches;    /* lock */
    free_block *loose; /* lock: blocks that did not make a whole batch */
} depot;

#define DEPOT                                                                  \
    {                                                                          \
        .lock = PTHREAD_MUTEX_INITIALIZER                                      \
    }
static depot depots[VF__FL_KINDS] = {DEPOT, DEPOT, DEPOT, DEPOT, DEPOT,
                                     DEPOT, DEPOT, DEPOT, DEPOT, DEPOT,
                                     DEPOT, DEPOT, DEPOT};
_Static_assert(VF__FL_KINDS == 13, "a depot per kind");
#undef DEPOT

typedef struct cache {
    free_block *head;
    unsigned count;
} cache;

static _Thread_local cache caches[VF__FL_KINDS];
static _Thread_local bool cache_registered;

/* A batch header lives inside the first block of its chain: blocks are at
 * least two pointers in size (checked in vf__fl_init). */
static batch *as_batch(free_block *b)
{
    return (batch *)b;
}

static void depot_put_chain(depot *d, free_block *head, unsigned count)
{
    pthread_mutex_lock(&d->lock);
    if (count == VF__FL_BATCH) {
        batch *bt = as_batch(head);
        /* head->next stays the chain link; next_batch is the second word */
        bt->next_batch = d->batches;
        d->batches = bt;
    } else {
        while (head != NULL) {
            free_block *next = head->next;
            head->next = d->loose;
            d->loose = head;
            head = next;
        }
    }
    pthread_mutex_unlock(&d->lock);
}

void vf__fl_thread_exit(void)
{
    cache_registered = false;
    for (int k = 0; k < VF__FL_KINDS; k++) {
        cache *c = &caches[k];
        if (c->count > 0)
            depot_put_chain(&depots[k], c->head, 0 /* as loose blocks */);
        c->head = NULL;
        c->count = 0;
    }
}

/* Arrange for this thread's caches to return to the depot at thread exit
 * (thread_exit.h). Without a key (none left: vf_engine_create refuses to
 * make an engine then), they are the thread's to the end. */
static void register_thread(void)
{
    cache_registered = vf__thread_exit_arm() == 0;
}

void vf__fl_init(vf__fl_kind kind, size_t size)
{
    VF__ASSERT(size >= sizeof(batch));
    depot *d = &depots[kind];
    pthread_mutex_lock(&d->lock);
    VF__ASSERT(d->size == 0 || d->size == size);
    d->size = size;
    pthread_mutex_unlock(&d->lock);
}

static bool refill(cache *c, depot *d)
{
    pthread_mutex_lock(&d->lock);
    if (d->batches != NULL) {
        batch *bt = d->batches;
        d->batches = bt->next_batch;
        c->head = (free_block *)bt;
        c->count = VF__FL_BATCH;
    } else {
        while (d->loose != NULL && c->count < VF__FL_BATCH) {
            free_block *b = d->loose;
            d->loose = b->next;
            b->next = c->head;
            c->head = b;
            c->count++;
        }
    }
    pthread_mutex_unlock(&d->lock);
    return c->count > 0;
}

/* vf__fl_alloc with the thread's cache empty: refill it from the depot,
 * or make a fresh block. Out of line, so the fast path saves no
 * registers. */
static __attribute__((noinline)) void *alloc_refill(vf__fl_kind kind)
{
    cache *c = &caches[kind];
    if (!cache_registered)
        register_thread();
    if (!refill(c, &depots[kind]))
        return vf__calloc(1, depots[kind].size);
    free_block *b = c->head;
    c->head = b->next;
    c->count--;
    return b;
}

void *vf__fl_alloc(vf__fl_kind kind)
{
    cache *c = &caches[kind];
    free_block *b = c->head;
    if (VF__UNLIKELY(b == NULL))
        return alloc_refill(kind);
    c->head = b->next;
    c->count--;
    return b;
}

/* vf__fl_free's rare cases, out of line as alloc_refill is: a thread's
 * first free (its cache must go back at exit), or a cache grown to twice
 * a batch, whose oldest-touched half goes back to the depot. */
static __attribute__((noinline)) void free_slow(vf__fl_kind kind, free_block *b)
{
    cache *c = &caches[kind];
    /* A thread may only ever free (a worker finishing ops that another
     * thread pushed): its cache must go back at exit all the same. */
    if (!cache_registered)
        register_thread();
    b->next = c->head;
    c->head = b;
    if (++c->count >= 2 * VF__FL_BATCH) {
        /* Hand the oldest-touched half back: cut after VF__FL_BATCH blocks. */
        free_block *keep = c->head;
        for (unsigned i = 1; i < VF__FL_BATCH; i++)
            keep = keep->next;
        free_block *give = keep->next;
        keep->next = NULL;
        c->count = VF__FL_BATCH;
        depot_put_chain(&depots[kind], give, VF__FL_BATCH);
    }
}

void vf__fl_free(vf__fl_kind kind, void *block)
{
    cache *c = &caches[kind];
    free_block *b = block;
    /* Not `c->head == NULL`: a thread that allocs and frees one block in
     * turn (an op pushed and finished on one thread) empties its cache at
     * every alloc, and every free took the slow path. */
    if (VF__UNLIKELY(!cache_registered || c->count + 1 >= 2 * VF__FL_BATCH)) {
        free_slow(kind, b);
        return;
    }
    b->next = c->head;
    c->head = b;
    c->count++;
}

void vf__fl_fork_lock(bool lock)
{
    for (int k = 0; k < VF__FL_KINDS; k++) {
        if (lock)
            pthread_mutex_lock(&depots[k].lock);
        else
            pthread_mutex_unlock(&depots[VF__FL_KINDS - 1 - k].lock);
    }
}

void vf__fl_trim(void)
{
    for (int k = 0; k < VF__FL_KINDS; k++) {
        if (k == VF__FL_COMPLETION)
            continue; /* kept (freelist.h) */
        depot *d = &depots[k];
        pthread_mutex_lock(&d->lock);
        batch *bt = d->batches;
        d->batches = NULL;
        free_block *loose = d->loose;
        d->loose = NULL;
        pthread_mutex_unlock(&d->lock);
        while (bt != NULL) {
            batch *next_batch = bt->next_batch;
            free_block *b = (free_block *)bt;
            while (b != NULL) {
                free_block *next = b->next;
                free(b);
                b = next;
            }
            bt = next_batch;
        }
        while (loose != NULL) {
            free_block *next = loose->next;
            free(loose);
            loose = next;
        }
    }
}
