/*
 * test_freelist: the per-thread free lists over the process-wide depot
 * (src/core/freelist.h), alone.
 *
 * Allocation is counted with vf__testing_alloc_count (every malloc varflow
 * makes goes through base/alloc.h), so "no malloc" is checked exactly.
 * Each case empties the depot first (vf__fl_trim) and does its allocating
 * on threads of its own, whose caches start empty. It checks: a freed
 * block is reused by its thread; blocks freed on one thread reach another
 * through the depot, a thread's cache included when it exits, with no
 * malloc; trim gives the depot's memory back; out of memory is NULL, not
 * a crash; and under contention (pushers allocate, workers free) no block
 * is handed out twice while in use, and memory is reused rather than
 * grown.
 */
#include "runner.h"

#include "base/alloc.h"
#include "core/freelist.h"
#include "core/op.h"

/* Where a test marks a block it holds: past the words the free lists
 * overwrite in a free block (its links). */
#define MARK_AT 64
#define LIVE 0x4c495645u  /* "LIVE" */
#define FREED 0x46524545u /* "FREE" */

static uint32_t *mark(void *block)
{
    return (uint32_t *)((char *)block + MARK_AT);
}

/* Register the kinds as an engine does, and start with an empty depot. */
static void fresh_depot(void)
{
    _Static_assert(sizeof(vf__op) >= MARK_AT + sizeof(uint32_t),
                   "an op block holds the mark");
    for (int n = 0; n <= VF__OP_LISTED_VARS; n++)
        vf__fl_init(VF__FL_OP + n, vf__op_block_size(n));
    vf__fl_trim();
}

static void run_in_thread(void *(*fn)(void *), void *arg)
{
    tu_thread_join(tu_thread_start(fn, arg));
}

typedef struct blocks {
    int n;
    void *b[512];
    uint64_t allocs; /* vf__testing_alloc_count() over the thread's work */
} blocks;

static void *alloc_n(void *arg)
{
    blocks *bl = arg;
    vf__testing_fail_alloc(0); /* resets the count */
    for (int i = 0; i < bl->n; i++) {
        bl->b[i] = vf__fl_alloc(VF__FL_OP);
        REQUIRE(bl->b[i] != NULL);
    }
    bl->allocs = vf__testing_alloc_count();
    return NULL;
}

static void *free_n(void *arg)
{
    blocks *bl = arg;
    for (int i = 0; i < bl->n; i++)
        vf__fl_free(VF__FL_OP, bl->b[i]);
    return NULL; /* the thread's cache goes to the depot as it exits */
}

static bool contains(const blocks *bl, const void *p)
{
    for (int i = 0; i < bl->n; i++)
        if (bl->b[i] == p)
            return true;
    return false;
}

static void *reuse_on_one_thread(void *arg)
{
    (void)arg;
    vf__testing_fail_alloc(0);
    void *a = vf__fl_alloc(VF__FL_OP);
    REQUIRE(a != NULL);
    CHECK_EQ(vf__testing_alloc_count(), 1); /* empty cache and depot: malloc */
    vf__fl_free(VF__FL_OP, a);
    void *b = vf__fl_alloc(VF__FL_OP);
    CHECK(b == a); /* the thread's own cache, last in first out */
    CHECK_EQ(vf__testing_alloc_count(), 1);
    void *c = vf__fl_alloc(VF__FL_OP + 2); /* kinds do not mix */
    CHECK(c != NULL && c != a);
    CHECK_EQ(vf__testing_alloc_count(), 2);
    vf__fl_free(VF__FL_OP, b);
    vf__fl_free(VF__FL_OP + 2, c);
    return NULL;
}

TEST_CASE(freed_block_is_reused)
{
    fresh_depot();
    run_in_thread(reuse_on_one_thread, NULL);
}

/* Allocated on A, freed on B (a pusher's ops finished by a worker): once
 * B is gone, C gets every one of them back from the depot, malloc-free,
 * and only the next one is new. */
TEST_CASE(blocks_move_between_threads_through_the_depot)
{
    fresh_depot();
    static blocks made, again;
    made.n = 300; /* past a cache's limit: whole batches go to the depot */
    run_in_thread(alloc_n, &made);
    CHECK_EQ(made.allocs, 300);
    run_in_thread(free_n, &made);

    again.n = 301; /* one more than the depot has */
    run_in_thread(alloc_n, &again);
    CHECK_EQ(again.allocs, 1);
    int foreign = 0;
    for (int i = 0; i < again.n; i++) {
        foreign += !contains(&made, again.b[i]);
        for (int j = 0; j < i; j++)
            if (again.b[j] == again.b[i])
                CHECK_REPORT_("block %d handed out twice (as %d)", i, j);
    }
    CHECK_EQ(foreign, 1);
    run_in_thread(free_n, &again);
}

/* A thread that only frees (a worker) still gives its cache back when it
 * exits; trim then frees the depot, and the next block is new. */
TEST_CASE(thread_exit_and_trim)
{
    fresh_depot();
    static blocks made, again;
    made.n = 10;
    run_in_thread(alloc_n, &made);
    run_in_thread(free_n, &made);
    again.n = 10;
    run_in_thread(alloc_n, &again);
    CHECK_EQ(again.allocs, 0);
    for (int i = 0; i < 10; i++)
        CHECK(contains(&made, again.b[i]));
    run_in_thread(free_n, &again);
    vf__fl_trim();
    again.n = 1;
    run_in_thread(alloc_n, &again);
    CHECK_EQ(again.allocs, 1);
    run_in_thread(free_n, &again);
}

static void *alloc_without_memory(void *arg)
{
    (void)arg;
    vf__testing_fail_alloc(1); /* the next allocation fails */
    CHECK(vf__fl_alloc(VF__FL_OP) == NULL);
    vf__testing_fail_alloc(0);
    void *b = vf__fl_alloc(VF__FL_OP);
    CHECK(b != NULL);
    if (b != NULL)
        vf__fl_free(VF__FL_OP, b);
    return NULL;
}

TEST_CASE(out_of_memory_is_null)
{
    fresh_depot();
    run_in_thread(alloc_without_memory, NULL);
}

/* Pushers allocate, mark and hand blocks over; workers check and free
 * them. A block handed out while still in use would be found marked. */
#define NPRODUCERS 2
#define NCONSUMERS 2
#define RING 1024

typedef struct traffic {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *ring[RING];
    int head, count;
    long per_producer;
    int producers_left;
    atomic_long twice;
} traffic;

static void *producer(void *arg)
{
    traffic *t = arg;
    for (long i = 0; i < t->per_producer; i++) {
        void *b = vf__fl_alloc(VF__FL_OP);
        REQUIRE(b != NULL);
        if (*mark(b) == LIVE)
            atomic_fetch_add(&t->twice, 1);
        *mark(b) = LIVE;
        pthread_mutex_lock(&t->mu);
        while (t->count == RING)
            pthread_cond_wait(&t->cv, &t->mu);
        t->ring[(t->head + t->count++) % RING] = b;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_lock(&t->mu);
    t->producers_left--;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void *consumer(void *arg)
{
    traffic *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        while (t->count == 0 && t->producers_left > 0)
            pthread_cond_wait(&t->cv, &t->mu);
        if (t->count == 0) {
            pthread_mutex_unlock(&t->mu);
            return NULL;
        }
        void *b = t->ring[t->head];
        t->head = (t->head + 1) % RING;
        t->count--;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        if (*mark(b) != LIVE)
            atomic_fetch_add(&t->twice, 1);
        *mark(b) = FREED;
        vf__fl_free(VF__FL_OP, b);
    }
}

TEST_CASE(pushers_allocate_workers_free)
{
    fresh_depot();
    traffic *t = calloc(1, sizeof *t);
    REQUIRE(t != NULL);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->per_producer = tu_scaled(100000, 10000);
    t->producers_left = NPRODUCERS;
    vf__testing_fail_alloc(0);
    pthread_t th[NPRODUCERS + NCONSUMERS];
    for (int i = 0; i < NPRODUCERS; i++)
        th[i] = tu_thread_start(producer, t);
    for (int i = 0; i < NCONSUMERS; i++)
        th[NPRODUCERS + i] = tu_thread_start(consumer, t);
    for (int i = 0; i < NPRODUCERS + NCONSUMERS; i++)
        tu_thread_join(th[i]);
    long total = NPRODUCERS * t->per_producer;
    uint64_t allocs = vf__testing_alloc_count();
    CHECK_EQ(atomic_load(&t->twice), 0);
    /* At most RING blocks are in use at once; the rest is reuse. */
    if (allocs * 10 > (uint64_t)total)
        CHECK_REPORT_("%llu mallocs for %ld blocks handed out: blocks are "
                      "not reused",
                      (unsigned long long)allocs, total);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
    vf__fl_trim();
}

TEST_MAIN("test_freelist", 120)
