/*
 * test_counts: counts.h's per-thread pending and active counts, alone.
 *
 * - exact: threads raise and lower in their own slots (ops pushed on one
 *   thread, finished on another); once they are joined the sum is exactly
 *   what is left, pending and active;
 * - no_false_zero: a baton keeps at least one op pending and active at all
 *   times, passed between threads: each raises the next op in its own slot
 *   before it lowers the current one, in another thread's slot, so the
 *   per-slot words run ahead of each other. A reader sums all the while: a
 *   sum must never read a count at zero or below (the proof of counts.h:
 *   `end` before `start`; reading them the other way round reads zeros and
 *   negative counts here);
 * - many_threads: more threads than slots count at once: the ones without a
 *   slot share slot 0, and the sum is still exact;
 * - thread_exit: threads that count and exit one after another give their
 *   slot back (slots ever used stay few), and what they left pending stays
 *   counted;
 * - stale_cache: a thread that counted in an engine's counts, destroyed and
 *   made again at the same address, counts in the new one's slots, never the
 *   freed ones (ASan), and exits cleanly after.
 */
#include "runner.h"

#include "core/counts.h"

/* The counts of a quiescent sum: pending and active. */
#define CHECK_SUM(c, p, a)                                                     \
    do {                                                                       \
        uint64_t s_ = vf__counts_sum(c);                                       \
        CHECK_EQ(vf__counts_pending(s_), (uint32_t)(p));                       \
        CHECK_EQ(vf__counts_active(s_), (uint32_t)(a));                        \
    } while (0)

/* --- exact ---------------------------------------------------------------- */

typedef struct pass {
    vf__counts *c;
    _Atomic int handed; /* ops pushed by the pusher, not yet taken */
    int total;
    atomic_bool pushing;
} pass;

static void *pusher_thread(void *arg)
{
    pass *p = arg;
    for (int i = 0; i < p->total; i++) {
        vf__counts_raise(p->c, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        atomic_fetch_add(&p->handed, 1);
    }
    atomic_store(&p->pushing, false);
    return NULL;
}

static void *finisher_thread(void *arg)
{
    pass *p = arg;
    int done = 0;
    while (done < p->total) {
        int h = atomic_load(&p->handed);
        if (h == 0) {
            sched_yield();
            continue;
        }
        if (!atomic_compare_exchange_weak(&p->handed, &h, h - 1))
            continue;
        vf__counts_lower(p->c, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        done++;
    }
    return NULL;
}

TEST_CASE(exact)
{
    vf__counts c;
    memset(&c, 0, sizeof c);
    REQUIRE(vf__counts_init(&c, 2) == 0);
    CHECK_SUM(&c, 0, 0);
    pass p = {.c = &c, .total = (int)tu_scaled(200000, 1000)};
    atomic_store(&p.pushing, true);
    pthread_t f = tu_thread_start(finisher_thread, &p);
    pthread_t q = tu_thread_start(pusher_thread, &p);
    tu_thread_join(q);
    tu_thread_join(f);
    CHECK_SUM(&c, 0, 0);
    /* Left over on this thread: 3 pending, 1 of them active. */
    vf__counts_raise(&c, 3 * VF__COUNT_PENDING + 3 * VF__COUNT_ACTIVE);
    vf__counts_lower(&c, 2 * VF__COUNT_ACTIVE);
    CHECK_SUM(&c, 3, 1);
    vf__counts_destroy(&c);
}

/* --- no_false_zero -------------------------------------------------------- */

#define BATON_THREADS 3

typedef struct baton {
    vf__counts *c;
    _Atomic int turn; /* whose move: thread index; -1 before, -2 over */
    int moves;
    atomic_bool over;
    _Atomic long bad_zero, bad_high;
    _Atomic long sums;
} baton;

typedef struct baton_arg {
    baton *b;
    int me;
} baton_arg;

static void *baton_thread(void *arg)
{
    baton_arg *a = arg;
    baton *b = a->b;
    for (;;) {
        int t = atomic_load(&b->turn);
        if (t == -2)
            return NULL;
        if (t != a->me) {
            sched_yield();
            continue;
        }
        /* Push the next op (here), then finish the current one, which the
         * previous thread pushed: the op in hand hops from slot to slot. */
        vf__counts_raise(b->c, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        vf__counts_lower(b->c, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        if (--b->moves <= 0) {
            atomic_store(&b->turn, -2);
            return NULL;
        }
        atomic_store(&b->turn, (a->me + 1) % BATON_THREADS);
    }
}

static void *baton_reader(void *arg)
{
    baton *b = arg;
    while (!atomic_load(&b->over)) {
        uint64_t s = vf__counts_sum(b->c);
        if (vf__counts_pending(s) == 0 || vf__counts_active(s) == 0)
            atomic_fetch_add(&b->bad_zero, 1);
        /* A count read below zero wraps: never, with the order right. */
        if (vf__counts_pending(s) > (1u << 30) ||
            vf__counts_active(s) > (1u << 30))
            atomic_fetch_add(&b->bad_high, 1);
        atomic_fetch_add(&b->sums, 1);
    }
    return NULL;
}

TEST_CASE(no_false_zero)
{
    vf__counts c;
    memset(&c, 0, sizeof c);
    REQUIRE(vf__counts_init(&c, 0) == 0);
    baton b = {.c = &c, .moves = (int)tu_scaled(20000, 2000)};
    atomic_store(&b.turn, -1);
    /* The first op, pushed here. */
    vf__counts_raise(&c, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
    baton_arg args[BATON_THREADS];
    pthread_t t[BATON_THREADS];
    pthread_t r = tu_thread_start(baton_reader, &b);
    for (int i = 0; i < BATON_THREADS; i++) {
        args[i] = (baton_arg){&b, i};
        t[i] = tu_thread_start(baton_thread, &args[i]);
    }
    while (atomic_load(&b.sums) == 0)
        sched_yield(); /* the reader is at work */
    atomic_store(&b.turn, 0);
    for (int i = 0; i < BATON_THREADS; i++)
        tu_thread_join(t[i]);
    atomic_store(&b.over, true);
    tu_thread_join(r);
    long zeros = atomic_load(&b.bad_zero), high = atomic_load(&b.bad_high);
    if (zeros != 0 || high != 0)
        CHECK_REPORT_("%ld of %ld sums read a zero count, %ld a negative one",
                      zeros, atomic_load(&b.sums), high);
    CHECK_SUM(&c, 1, 1);
    printf("  %ld sums while the baton hopped: none read zero\n",
           atomic_load(&b.sums));
    vf__counts_destroy(&c);
}

/* --- many_threads ------------------------------------------------------- */

#define MANY 40

typedef struct many {
    vf__counts *c;
    tu_rv rv;
    int each;
} many;

static void *many_thread(void *arg)
{
    many *m = arg;
    vf__counts_raise(m->c, 0);                   /* takes a slot, or slot 0 */
    CHECK(tu_rv_meet(&m->rv, MANY, TU_TIMEOUT)); /* all hold one at once */
    for (int i = 0; i < m->each; i++) {
        vf__counts_raise(m->c, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        vf__counts_lower(m->c, VF__COUNT_ACTIVE);
    }
    /* Each leaves one op pending, not active. */
    for (int i = 1; i < m->each; i++)
        vf__counts_lower(m->c, VF__COUNT_PENDING);
    return NULL;
}

TEST_CASE(many_threads)
{
    vf__counts c;
    memset(&c, 0, sizeof c);
    REQUIRE(vf__counts_init(&c, 0) == 0);
    many m = {.c = &c, .each = (int)tu_scaled(20000, 200)};
    tu_rv_init(&m.rv);
    pthread_t t[MANY];
    for (int i = 0; i < MANY; i++)
        t[i] = tu_thread_start(many_thread, &m);
    for (int i = 0; i < MANY; i++)
        tu_thread_join(t[i]);
    CHECK_SUM(&c, MANY, 0);
    CHECK(atomic_load(&c.nused) <= c.nslots);
    CHECK_EQ(atomic_load(&c.nused), c.nslots); /* every slot was taken */
    tu_rv_destroy(&m.rv);
    vf__counts_destroy(&c);
}

/* --- thread_exit ---------------------------------------------------------- */

static void *one_pending(void *arg)
{
    vf__counts_raise(arg, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
    return NULL;
}

TEST_CASE(thread_exit)
{
    vf__counts c;
    memset(&c, 0, sizeof c);
    REQUIRE(vf__counts_init(&c, 0) == 0);
    int n = 100;
    for (int i = 0; i < n; i++)
        tu_thread_join(tu_thread_start(one_pending, &c));
    /* One thread at a time: each found the slot the last one gave back. */
    CHECK_EQ(atomic_load(&c.nused), 2);
    CHECK_SUM(&c, n, n);
    vf__counts_lower(&c, (uint64_t)n * (VF__COUNT_PENDING | VF__COUNT_ACTIVE));
    CHECK_SUM(&c, 0, 0);
    vf__counts_destroy(&c);
}

/* --- stale_cache ---------------------------------------------------------- */

typedef struct stale {
    vf__counts *c;
    tu_gate step1, made2, step2;
} stale;

static void *stale_thread(void *arg)
{
    stale *s = arg;
    vf__counts_raise(s->c, VF__COUNT_PENDING);
    tu_gate_open(&s->step1);
    CHECK(tu_gate_wait(&s->made2, TU_TIMEOUT));
    vf__counts_raise(s->c, 2 * VF__COUNT_PENDING); /* the new one's */
    tu_gate_open(&s->step2);
    return NULL; /* exits caching both: gives back only the live one */
}

TEST_CASE(stale_cache)
{
    vf__counts c;
    memset(&c, 0, sizeof c);
    REQUIRE(vf__counts_init(&c, 0) == 0);
    uint64_t first = c.serial;
    stale s = {.c = &c};
    tu_gate_init(&s.step1);
    tu_gate_init(&s.made2);
    tu_gate_init(&s.step2);
    pthread_t t = tu_thread_start(stale_thread, &s);
    CHECK(tu_gate_wait(&s.step1, TU_TIMEOUT));
    CHECK_SUM(&c, 1, 0);
    vf__counts_destroy(&c);
    memset(&c, 0, sizeof c);
    REQUIRE(vf__counts_init(&c, 0) == 0); /* same address, new serial */
    CHECK(c.serial != first);
    tu_gate_open(&s.made2);
    CHECK(tu_gate_wait(&s.step2, TU_TIMEOUT));
    CHECK_SUM(&c, 2, 0);
    tu_thread_join(t);
    /* Its slot came back: the next thread takes slot 1 again. */
    CHECK_EQ(atomic_load(&c.nused), 2);
    tu_thread_join(tu_thread_start(one_pending, &c));
    CHECK_EQ(atomic_load(&c.nused), 2);
    CHECK_SUM(&c, 3, 1);
    vf__counts_destroy(&c);
    tu_gate_destroy(&s.step1);
    tu_gate_destroy(&s.made2);
    tu_gate_destroy(&s.step2);
}

TEST_MAIN("test_counts", 120)
