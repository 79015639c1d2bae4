/*
 * test_sched_wake: batches and wake-ups of the pools (src/core/sched.h)
 * inside running engines, round after round with every worker asleep
 * first (the test reads the pool's sleeper count, an internal, to know).
 *
 * - bursts: with all 3 workers asleep, a burst of ready ops arrives as
 *   single pushes, as one batch a foreign thread's completion readies
 *   (an inbox), or as a batch a worker's finish readies (its own queue);
 *   every op must run, and wait_all (timed, help_on_wait off, so only the
 *   workers run ops) must not time out: a lost wake-up leaves the burst
 *   queued with everyone asleep;
 * - order across pools (per-device engine, one CPU worker and one
 *   priority worker, both asleep): a finish readies readers of one var
 *   for both pools, on the pushing thread (a foreign completion) and on a
 *   worker; each pool runs its batch in push order (one worker each), so a
 *   batch that lost or reordered an op fails the comparison;
 * - nested waits with deadlines: an op waits on a var an async op writes;
 *   either the deadline passes first (VF_ETIMEDOUT, the sleep ended by its
 *   deadline) or the async op is completed while the waiter sleeps on the
 *   pool and the wait returns 0: a lost wake-up would make it time out
 *   after a minute instead.
 * - a nested wait's end wakes its own thread alone: two ops wait, each
 *   inside a worker asleep in the pool, on vars async ops write; the end
 *   of one wait leaves the other thread asleep (its count of voluntary
 *   context switches, from /proc, does not move). Every wait's end woke
 *   every sleeper of the pool, hundreds in a deep recursion (wait.h).
 * - a wake-up owed for an op placed is passed on: two workers wait inside
 *   ops, B (asleep first) on var V, A for its child X, which reads V and
 *   comes before B's wait there; the completion of V's async writer
 *   places X, whose wake-up goes to B, and then fires B's marker: B's op
 *   goes on, and X must start while it does (B waits for it), on A's
 *   thread. B kept the wake and A slept on (the reviewer's case).
 * - a waiter with no stack room lends a spare for a child queued after it
 *   slept: on one worker with 128 KiB stacks, an op whose frames fill 104
 *   KiB waits for a child not ready yet; asleep with nothing queued, it
 *   is not counted stuck and no spare is lent; once the child is queued,
 *   its next look (it looks every millisecond at the most until it is
 *   counted: the reviewer's case waited 20 ms) counts it, and a spare
 *   runs the child.
 * - a waiter never refuses its own child for want of stack it has: a
 *   recursion deeper than a worker's stack, on stacks of 128 to 188 KiB,
 *   has no waiter sleep as a refuser (the pool counts such sleeps): each
 *   runs its child above its wait, or sleeps alone, counted stuck, while
 *   a spare runs it.
 * - idle spinning (vf_config.idle_spin_us): while the program's thread
 *   sleeps in wait_all and a CPU is free, an idle worker spins for the
 *   time set before it sleeps (the sleep comes no earlier: a lower bound,
 *   which load cannot break) and the pool counts one long spin; with the
 *   process bound to one CPU, which another worker's op needs, it does
 *   not spin: the pool counts no long spin (its time to sleep is the
 *   scheduler's under load: 164 ms under TSan, against a spin of 100).
 * - nested waiters sleep on the lock of the engine's list of them: while
 *   the test holds it, 4 ops whose waits want it to join are asleep in
 *   the kernel (each thread's state from /proc). A yielding lock kept
 *   them runnable, and a 10,000-level recursion polling with 1 ms timed
 *   waits on ~300 threads crawled (8,500 levels: 22-28 s, 1.4-1.7 s on
 *   a sleeping lock; found by the reviewer of row 433).
 * - a timed wait that gives up with no async op in flight takes no lock
 *   of the async list for its detail: with that lock held, it times out.
 * A failing round prints its number; a hang is caught by the watchdog.
 */
#include "runner.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/engine.h"

#define BURST 24
#define LONG_MS 60000 /* "never" for a wait that must not time out */

/* Until `n` threads are counted asleep on the pool (or about to be). */
static void until_asleep(vf__pool *p, int n)
{
    while (vf__ecount_waiters(&p->sleepers) < (uint32_t)n)
        sched_yield();
}

typedef struct burst {
    vf_var v;
    atomic_int ran[BURST];
    vf_completion gate_done;
    tu_gate gate;
    atomic_int gate_started;
} burst;

typedef struct slot {
    burst *b;
    int i;
} slot;

static int count_run(vf_run *run, void *arg)
{
    (void)run;
    const slot *s = arg;
    atomic_fetch_add(&s->b->ran[s->i], 1);
    return 0;
}

static void keep_completion(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((burst *)arg)->gate_done = done;
}

static int wait_gate(vf_run *run, void *arg)
{
    (void)run;
    burst *b = arg;
    atomic_store(&b->gate_started, 1);
    CHECK(tu_gate_wait(&b->gate, TU_TIMEOUT));
    return 0;
}

static void push_readers(vf_engine *e, burst *b, slot *slots, vf_var *u)
{
    for (int i = 0; i < BURST; i++) {
        slots[i] = (slot){b, i};
        vf_var *reads = u != NULL ? &u[i] : &b->v;
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = count_run,
                                            .arg = &slots[i],
                                            .reads = tu_list(reads, 1)}));
    }
}

TEST_CASE(bursts_with_every_worker_asleep)
{
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = 3}) == 0);
    REQUIRE(!e->help_on_wait);
    burst *b = calloc(1, sizeof *b);
    REQUIRE(b != NULL);
    b->v = tu_var(e);
    vf_var u[BURST];
    for (int i = 0; i < BURST; i++)
        u[i] = tu_var(e);
    slot slots[BURST];
    int rounds = (int)tu_scaled(300, 30);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < BURST; i++)
            atomic_store(&b->ran[i], 0);
        tu_gate_init(&b->gate);
        until_asleep(e->cpu_pool, 3);
        if (r % 3 == 0) { /* single pushes, each ready at once */
            push_readers(e, b, slots, u);
        } else if (r % 3 == 1) { /* a foreign completion readies a batch */
            CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keep_completion,
                                                .arg = b,
                                                .writes = tu_list(&b->v, 1)}));
            push_readers(e, b, slots, NULL);
            until_asleep(e->cpu_pool, 3);
            CHECK_OK(vf_completion_finish(b->gate_done, 0, NULL));
        } else { /* a worker's finish readies a batch */
            atomic_store(&b->gate_started, 0);
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_gate,
                                                .arg = b,
                                                .writes = tu_list(&b->v, 1)}));
            push_readers(e, b, slots, NULL);
            REQUIRE(tu_wait_flag(&b->gate_started, 1, TU_TIMEOUT));
            until_asleep(e->cpu_pool, 2); /* the other two */
            tu_gate_open(&b->gate);
        }
        int rc = vf_engine_wait_all_timed(e, LONG_MS, NULL);
        if (rc != 0)
            CHECK_REPORT_("round %d: wait_all returned %s", r,
                          vf_error_name(rc));
        for (int i = 0; i < BURST; i++)
            if (atomic_load(&b->ran[i]) != 1)
                CHECK_REPORT_("round %d: op %d ran %d times", r, i,
                              atomic_load(&b->ran[i]));
        tu_gate_destroy(&b->gate);
        if (rc != 0)
            break;
    }
    tu_finish_engine(e);
    free(b);
}

/* Readers log the order they run in, one log per pool. */
typedef struct order {
    vf_var v;
    vf_completion gate_done;
    tu_gate gate;
    atomic_int n[2];
    int log[2][BURST];
} order;

typedef struct reader {
    order *o;
    int pool; /* 0: CPU pool, 1: priority pool */
    int index;
} reader;

static int log_run(vf_run *run, void *arg)
{
    (void)run;
    const reader *rd = arg;
    int at = atomic_fetch_add(&rd->o->n[rd->pool], 1);
    if (at < BURST)
        rd->o->log[rd->pool][at] = rd->index;
    return 0;
}

static void keep_order_completion(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((order *)arg)->gate_done = done;
}

static int wait_order_gate(vf_run *run, void *arg)
{
    (void)run;
    CHECK(tu_gate_wait(&((order *)arg)->gate, TU_TIMEOUT));
    return 0;
}

TEST_CASE(batches_keep_push_order_across_pools)
{
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                              .cpu_workers = 1,
                                              .cpu_priority_workers = 1}) == 0);
    REQUIRE(e->priority_pool != NULL && e->priority_pool->nworkers == 1);
    order *o = calloc(1, sizeof *o);
    REQUIRE(o != NULL);
    o->v = tu_var(e);
    reader rd[BURST];
    int rounds = (int)tu_scaled(200, 20);
    for (int r = 0; r < rounds; r++) {
        atomic_store(&o->n[0], 0);
        atomic_store(&o->n[1], 0);
        tu_gate_init(&o->gate);
        until_asleep(e->cpu_pool, 1);
        until_asleep(e->priority_pool, 1);
        bool foreign = r % 2 == 0;
        if (foreign)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.async_fn = keep_order_completion,
                                           .arg = o,
                                           .writes = tu_list(&o->v, 1)}));
        else
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_order_gate,
                                                .arg = o,
                                                .writes = tu_list(&o->v, 1)}));
        /* Pools mixed in one ready list: 2 of 3 readers prioritized. */
        int want[2][BURST], nwant[2] = {0, 0};
        for (int i = 0; i < BURST; i++) {
            int pool = i % 3 != 0;
            rd[i] = (reader){o, pool, i};
            want[pool][nwant[pool]++] = i;
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = log_run,
                            .arg = &rd[i],
                            .reads = tu_list(&o->v, 1),
                            .property = pool ? VF_PROP_CPU_PRIORITIZED
                                             : VF_PROP_NORMAL}));
        }
        until_asleep(e->priority_pool, 1);
        if (foreign) {
            until_asleep(e->cpu_pool, 1);
            CHECK_OK(vf_completion_finish(o->gate_done, 0, NULL));
        } else {
            tu_gate_open(&o->gate);
        }
        int rc = vf_engine_wait_all_timed(e, LONG_MS, NULL);
        if (rc != 0)
            CHECK_REPORT_("round %d: wait_all returned %s", r,
                          vf_error_name(rc));
        for (int p = 0; p < 2; p++) {
            CHECK_EQ(atomic_load(&o->n[p]), nwant[p]);
            for (int k = 0; k < nwant[p] && k < atomic_load(&o->n[p]); k++)
                if (o->log[p][k] != want[p][k]) {
                    CHECK_REPORT_("round %d (%s), pool %d: run %d was "
                                  "reader %d, expected %d",
                                  r, foreign ? "foreign" : "worker", p, k,
                                  o->log[p][k], want[p][k]);
                    break;
                }
        }
        tu_gate_destroy(&o->gate);
        if (rc != 0)
            break;
    }
    tu_finish_engine(e);
    free(o);
}

/* An op that waits on `x` (written by an async op) with a timeout. */
typedef struct nested {
    vf_var a, x;
    vf_completion x_done;
    atomic_int have_done;
    int64_t timeout_ms;
    atomic_int started;
    atomic_int rc;
    atomic_int returned;
} nested;

static void keep_x(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    nested *n = arg;
    n->x_done = done;
    atomic_store(&n->have_done, 1);
}

static int waits_on_x(vf_run *run, void *arg)
{
    nested *n = arg;
    atomic_store(&n->started, 1);
    int rc = vf_var_wait_timed(vf_run_engine(run), n->x, n->timeout_ms, NULL);
    atomic_store(&n->rc, rc);
    atomic_store(&n->returned, 1);
    return 0;
}

TEST_CASE(nested_waits_with_deadlines)
{
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = 2}) == 0);
    nested *n = calloc(1, sizeof *n);
    REQUIRE(n != NULL);
    n->a = tu_var(e);
    n->x = tu_var(e);
    int rounds = (int)tu_scaled(60, 10);
    for (int r = 0; r < rounds; r++) {
        bool expire = r % 2 == 0;
        n->timeout_ms = expire ? 5 : LONG_MS;
        atomic_store(&n->returned, 0);
        atomic_store(&n->started, 0);
        atomic_store(&n->have_done, 0);
        atomic_store(&n->rc, 99);
        until_asleep(e->cpu_pool, 2);
        CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keep_x,
                                            .arg = n,
                                            .writes = tu_list(&n->x, 1)}));
        REQUIRE(atomic_load(&n->have_done));
        CHECK_OK(vf_engine_push(
            e,
            &(vf_op){.fn = waits_on_x, .arg = n, .writes = tu_list(&n->a, 1)}));
        if (expire) { /* the deadline ends the waiter's sleep */
            REQUIRE(tu_wait_flag(&n->returned, 1, TU_TIMEOUT));
            if (atomic_load(&n->rc) != VF_ETIMEDOUT)
                CHECK_REPORT_("round %d: the wait returned %s, expected "
                              "VF_ETIMEDOUT",
                              r, vf_error_name(atomic_load(&n->rc)));
            CHECK_OK(vf_completion_finish(n->x_done, 0, NULL));
        } else { /* completed while the waiter sleeps on the pool */
            REQUIRE(tu_wait_flag(&n->started, 1, TU_TIMEOUT));
            until_asleep(e->cpu_pool, 2); /* the waiter and the other */
            CHECK(!atomic_load(&n->returned));
            CHECK_OK(vf_completion_finish(n->x_done, 0, NULL));
        }
        int rc = vf_engine_wait_all_timed(e, LONG_MS, NULL);
        if (rc != 0 || atomic_load(&n->rc) != (expire ? VF_ETIMEDOUT : 0))
            CHECK_REPORT_("round %d: wait_all %s, the nested wait %s", r,
                          vf_error_name(rc),
                          vf_error_name(atomic_load(&n->rc)));
        if (rc != 0)
            break;
    }
    tu_finish_engine(e);
    free(n);
}

/* Two nested waiters, each in its own worker, on vars async ops write. */
typedef struct pair_waiter {
    vf_var x, out;
    vf_completion x_done;
    atomic_int have_done;
    atomic_long tid;
    atomic_int returned;
    atomic_int rc;
} pair_waiter;

static void keep_pair_x(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    pair_waiter *p = arg;
    p->x_done = done;
    atomic_store(&p->have_done, 1);
}

static int waits_on_pair_x(vf_run *run, void *arg)
{
    pair_waiter *p = arg;
    atomic_store(&p->tid, (long)syscall(SYS_gettid));
    atomic_store(&p->rc, vf_var_wait(vf_run_engine(run), p->x, NULL));
    atomic_store(&p->returned, 1);
    return 0;
}

/* Thread `tid`'s voluntary context switches (-1: unreadable). */
static long voluntary_switches(long tid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    FILE *f = fopen(path, "r");
    long n = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return n;
}

TEST_CASE(a_wait_end_wakes_its_thread_alone)
{
    vf_engine *e = NULL;
    /* No idle spinning: the test reads who sleeps. */
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = 2,
                                              .idle_spin_us = -1}) == 0);
    pair_waiter *w = calloc(2, sizeof *w);
    REQUIRE(w != NULL);
    int rounds = (int)tu_scaled(20, 5);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 2; i++) {
            w[i].x = tu_var(e);
            w[i].out = tu_var(e);
            atomic_store(&w[i].have_done, 0);
            atomic_store(&w[i].returned, 0);
            atomic_store(&w[i].tid, 0);
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.async_fn = keep_pair_x,
                                           .arg = &w[i],
                                           .writes = tu_list(&w[i].x, 1)}));
            REQUIRE(atomic_load(&w[i].have_done));
        }
        for (int i = 0; i < 2; i++)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = waits_on_pair_x,
                                           .arg = &w[i],
                                           .writes = tu_list(&w[i].out, 1)}));
        /* Both waiters asleep in the pool, blocked in the kernel. */
        for (;;) {
            long a = atomic_load(&w[0].tid), b = atomic_load(&w[1].tid);
            if (a != 0 && b != 0 && a != b &&
                vf__ecount_waiters(&e->cpu_pool->sleepers) == 2 &&
                tu_thread_asleep(a) && tu_thread_asleep(b))
                break;
            sched_yield();
        }
        int ends = r % 2, stays = 1 - ends; /* each ends first in turn */
        long tid = atomic_load(&w[stays].tid);
        long before = voluntary_switches(tid);
        REQUIRE(before >= 0);
        CHECK_OK(vf_completion_finish(w[ends].x_done, 0, NULL));
        CHECK_OK(vf_var_wait(e, w[ends].out, NULL)); /* its op finished */
        /* The other slept on. */
        long after = voluntary_switches(tid);
        if (after != before || atomic_load(&w[stays].returned))
            CHECK_REPORT_("round %d: the other waiter's thread woke (%ld "
                          "voluntary switches before, %ld after)",
                          r, before, after);
        CHECK_OK(vf_completion_finish(w[stays].x_done, 0, NULL));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&w[0].rc), 0);
        CHECK_EQ(atomic_load(&w[1].rc), 0);
        for (int i = 0; i < 2; i++) {
            CHECK_OK(vf_var_destroy(e, w[i].x, NULL, NULL));
            CHECK_OK(vf_var_destroy(e, w[i].out, NULL, NULL));
        }
    }
    tu_finish_engine(e);
    free(w);
}

/* The pass-on case: B waits on v, A for its child x, which reads v. */
typedef struct pass_on_case {
    vf_var v, r;
    vf_completion v_done;
    atomic_int have_done;
    atomic_long a_tid, b_tid;
    atomic_int x_pushed, a_go;
    atomic_int x_started;
    atomic_int b_saw_x; /* 1: X started while B's op ran; -1: it did not */
} pass_on_case;

static void keep_v(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    pass_on_case *c = arg;
    c->v_done = done;
    atomic_store(&c->have_done, 1);
}

static int x_reads_v(vf_run *run, void *arg)
{
    (void)run;
    atomic_store(&((pass_on_case *)arg)->x_started, 1);
    return 0;
}

static int a_waits_for_x(vf_run *run, void *arg)
{
    pass_on_case *c = arg;
    atomic_store(&c->a_tid, (long)syscall(SYS_gettid));
    int rc = vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = x_reads_v,
                                     .arg = c,
                                     .reads = tu_list(&c->v, 1),
                                     .writes = tu_list(&c->r, 1)});
    atomic_store(&c->x_pushed, 1);
    /* Asleep in the wait after B: on v, X comes before B's marker. */
    if (rc == 0 && !tu_wait_flag(&c->a_go, 1, TU_TIMEOUT))
        rc = VF_ETIMEDOUT;
    return rc != 0 ? rc : vf_run_wait_children(run, NULL);
}

static int b_waits_on_v(vf_run *run, void *arg)
{
    pass_on_case *c = arg;
    atomic_store(&c->b_tid, (long)syscall(SYS_gettid));
    int rc = vf_var_wait(vf_run_engine(run), c->v, NULL);
    /* B's op goes on: X must not wait for its end. */
    atomic_store(&c->b_saw_x, tu_wait_flag(&c->x_started, 1, 3.0) ? 1 : -1);
    return rc;
}

TEST_CASE(a_wake_for_placed_work_is_passed_on)
{
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = 2,
                                              .idle_spin_us = -1}) == 0);
    pass_on_case *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    int rounds = (int)tu_scaled(10, 3);
    for (int r = 0; r < rounds; r++) {
        memset(c, 0, sizeof *c);
        c->v = tu_var(e);
        c->r = tu_var(e);
        until_asleep(e->cpu_pool, 2);
        CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keep_v,
                                            .arg = c,
                                            .writes = tu_list(&c->v, 1)}));
        REQUIRE(atomic_load(&c->have_done));
        /* A pushes X, then B waits on v (its marker behind X there) and
         * sleeps, then A waits and sleeps: X is placed before B's marker
         * fires, and its wake-up goes to B, asleep first. */
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = a_waits_for_x, .arg = c}));
        REQUIRE(tu_wait_flag(&c->x_pushed, 1, TU_TIMEOUT));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = b_waits_on_v, .arg = c}));
        while (atomic_load(&c->b_tid) == 0 ||
               !tu_thread_asleep(atomic_load(&c->b_tid)) ||
               vf__ecount_waiters(&e->cpu_pool->sleepers) != 1)
            sched_yield();
        atomic_store(&c->a_go, 1);
        while (atomic_load(&c->a_tid) == 0 ||
               atomic_load(&c->a_tid) == atomic_load(&c->b_tid) ||
               !tu_thread_asleep(atomic_load(&c->a_tid)) ||
               vf__ecount_waiters(&e->cpu_pool->sleepers) != 2)
            sched_yield();
        /* Idle a while: a thread woken from a long sleep takes longer to
         * run, and B's marker fires before B looks (with hot CPUs, B
         * looked at the queue first, refused X and passed its wake on:
         * without the fix, every round failed with 100 ms here, none
         * with 20). */
        nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
        CHECK_OK(vf_completion_finish(c->v_done, 0, NULL));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        if (atomic_load(&c->b_saw_x) != 1)
            CHECK_REPORT_("round %d: X waited for B's op to end", r);
        CHECK_OK(vf_var_destroy(e, c->v, NULL, NULL));
        CHECK_OK(vf_var_destroy(e, c->r, NULL, NULL));
    }
    tu_finish_engine(e);
    free(c);
}

/* The no-room case: P waits for its child C, which reads v. */
typedef struct no_room_case {
    vf_var v, r;
    vf_completion v_done;
    atomic_int have_done;
    atomic_long p_tid;
    atomic_int c_ran;
} no_room_case;

static void keep_no_room_v(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    no_room_case *c = arg;
    c->v_done = done;
    atomic_store(&c->have_done, 1);
}

static int c_reads_v(vf_run *run, void *arg)
{
    (void)run;
    atomic_store(&((no_room_case *)arg)->c_ran, 1);
    return 0;
}

static __attribute__((noinline)) int wait_with_a_full_stack(vf_run *run,
                                                            no_room_case *c)
{
    volatile char frames[104 * 1024]; /* past 6/8 of 128 KiB: exec.h */
    memset((char *)frames, 1, sizeof frames);
    int rc = vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = c_reads_v,
                                     .arg = c,
                                     .reads = tu_list(&c->v, 1),
                                     .writes = tu_list(&c->r, 1)});
    atomic_store(&c->p_tid, (long)syscall(SYS_gettid));
    if (rc == 0)
        rc = vf_run_wait_children(run, NULL);
    return rc + frames[7] - 1;
}

static int p_waits_with_no_room(vf_run *run, void *arg)
{
    return wait_with_a_full_stack(run, arg);
}

TEST_CASE(a_waiter_with_no_stack_room_lends_a_spare_later)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("a 104 KiB frame on a 128 KiB stack: the sanitizers' frames "
              "take the rest");
#endif
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = 1,
                                              .worker_stack_kib = 128,
                                              .idle_spin_us = -1}) == 0);
    no_room_case *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    c->v = tu_var(e);
    c->r = tu_var(e);
    vf__pool *p = e->cpu_pool;
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keep_no_room_v,
                                        .arg = c,
                                        .writes = tu_list(&c->v, 1)}));
    REQUIRE(atomic_load(&c->have_done));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p_waits_with_no_room, .arg = c}));
    /* P asleep in its wait, with nothing queued: not counted stuck, and
     * no spare lent (nothing needs one). */
    while (atomic_load(&c->p_tid) == 0 ||
           !tu_thread_asleep(atomic_load(&c->p_tid)))
        sched_yield();
    CHECK_EQ(atomic_load(&p->nstuck), 0);
    CHECK_EQ(atomic_load(&p->nspares), 0);
    CHECK(!atomic_load(&c->c_ran));
    /* C queued now: P's next look (within a millisecond) counts it stuck,
     * and the pool lends the spare that runs C. */
    CHECK_OK(vf_completion_finish(c->v_done, 0, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK(atomic_load(&c->c_ran));
    CHECK_EQ(atomic_load(&p->nspares), 1);
    CHECK_EQ(atomic_load(&p->nstuck), 0); /* left at the wait's end */
    tu_finish_engine(e);
    free(c);
}

/* Levels of the chain below that a spare thread ran. */
static atomic_int levels_on_spares;

/* A chain of `left` levels, each pushing the next and waiting for it. */
static int chain_level(vf_run *run, void *arg)
{
    if (vf_run_worker(run) < 0) /* a spare's: no worker (varflow.h) */
        atomic_fetch_add(&levels_on_spares, 1);
    int left = *(const int *)arg - 1;
    if (left == 0)
        return 0;
    int rc = vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = chain_level, .arg = &left, .arg_size = sizeof left});
    return rc != 0 ? rc : vf_run_wait_children(run, NULL);
}

/* A recursion deeper than a worker's stack holds, with a wait at every
 * level, on stacks of 128 to 188 KiB (where the top level's frames fall
 * against the stack's line moves with the size): the waiter at the top
 * of each thread's stack either runs its child above its wait or, with
 * no room for it, sleeps alone, counted stuck for its whole wait, while a
 * spare runs the child. It never sleeps as a refuser, which stays counted
 * stuck only while it sleeps. The wait decided it had room where its
 * frames began, and the look for an op, a few frames deeper, that it had
 * none: the waiter refused its own child, and hundreds such, each looking
 * every 0.2 ms, never all stuck at once, made 40,000 levels on 128 KiB
 * stacks take 4-15 s instead of 0.3 s, as the build's and the program's
 * frame sizes fell (stated open in "Known limits" at stop 60). */
TEST_CASE(a_waiter_never_refuses_its_child_for_the_stack_it_has)
{
    int levels = 600, kib_from = 128, kib_to = 188;
    for (int kib = kib_from; kib <= kib_to; kib += 4) {
        vf_engine *e = NULL;
        REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                                  .cpu_workers = 1,
                                                  .worker_stack_kib = kib,
                                                  .idle_spin_us = -1}) == 0);
        vf__pool *p = e->cpu_pool;
        atomic_store(&levels_on_spares, 0);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = chain_level,
                                            .arg = &levels,
                                            .arg_size = sizeof levels}));
        vf_error err = {0};
        int rc = vf_engine_wait_all(e, &err);
        if (rc != 0)
            CHECK_REPORT_("%d KiB: the chain's wait said %s (%s)", kib,
                          vf_error_name(rc), err.message);
        /* Deeper than one stack, or nothing was tried; the levels the
         * spares ran see no worker's index. */
        CHECK(atomic_load(&p->nspares) > 0);
        CHECK(atomic_load(&levels_on_spares) > 0);
        if (atomic_load(&p->refused_sleeps) != 0)
            CHECK_REPORT_("%d KiB: %u sleeps as a refuser, %d spares", kib,
                          atomic_load(&p->refused_sleeps),
                          atomic_load(&p->nspares));
        tu_finish_engine(e);
    }
}

/* The refusing waiter's case: P waits for its child C, which another
 * worker runs until `c_go`, beside Q, which P may not run above its wait
 * (no descendant of P's) and the busy worker cannot take yet. */
typedef struct refusal_case {
    atomic_int c_started, c_go, p_waited;
} refusal_case;

static int c_runs_until_go(vf_run *run, void *arg)
{
    (void)run;
    refusal_case *c = arg;
    atomic_store(&c->c_started, 1);
    CHECK(tu_wait_flag(&c->c_go, 1, TU_TIMEOUT));
    return 0;
}

static int p_waits_beside_q(vf_run *run, void *arg)
{
    refusal_case *c = arg;
    int rc = vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = c_runs_until_go, .arg = c});
    CHECK(tu_wait_flag(&c->c_started, 1, TU_TIMEOUT)); /* on the other */
    if (rc == 0)
        rc = vf_run_wait_children(run, NULL);
    atomic_store(&c->p_waited, 1);
    return rc;
}

/* A waiter that refused every op queued on its pool looks again only when
 * the queues change (sched.h: vf__pool_look_same): it takes no queue's
 * lock meanwhile. With the queues' locks held by the test, P's wait still
 * ends when C does. It took every lock at each of its looks, 200 us
 * apart, so it sat in the lock's queue here; hundreds of such waiters of
 * a recursion that waited on another engine at every level kept one
 * another awake there, never all stuck, and the pool lent no spare for
 * the ops they refused: the chains sat still (found by a user tester). */
TEST_CASE(a_refusing_waiter_leaves_unchanged_queues_unlocked)
{
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = 2,
                                              .idle_spin_us = -1}) == 0);
    vf__pool *p = e->cpu_pool;
    refusal_case *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    until_asleep(p, 2);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p_waits_beside_q, .arg = c}));
    REQUIRE(tu_wait_flag(&c->c_started, 1, TU_TIMEOUT));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop})); /* Q */
    /* P refused Q twice (counted stuck from its second refusal on; the
     * worker running C is not, so no spare is lent). */
    double give_up = tu_now() + TU_TIMEOUT;
    while (atomic_load(&p->nstuck) == 0 && tu_now() < give_up)
        sched_yield();
    CHECK_EQ(atomic_load(&p->nstuck), 1);
    for (int i = 0; i < p->nworkers; i++)
        pthread_mutex_lock(&p->workers[i].qlock);
    /* P looks again a few times, its looks doubling apart from 0.2 ms. */
    nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
    atomic_store(&c->c_go, 1);
    CHECK(tu_wait_flag(&c->p_waited, 1, TU_TIMEOUT));
    for (int i = 0; i < p->nworkers; i++)
        pthread_mutex_unlock(&p->workers[i].qlock);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&p->nspares), 0);
    tu_finish_engine(e);
    free(c);
}

/* The blocked worker's case: A, on an engine's only worker, pushes its
 * child C, which reads v (held by an async op until the test completes
 * it: C is queued then, not run at its push), and waits for all of a
 * second engine, whose op G holds on until C ran. */
typedef struct grace_case {
    vf_engine *other;
    vf_var v;
    vf_completion v_done;
    bool timed; /* A waits by a loop of 1 ms timed waits */
    double a_waits_at;
    atomic_int a_waiting, c_ran;
} grace_case;

static void keep_grace_v(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((grace_case *)arg)->v_done = done;
}

static int c_notes_it_ran(vf_run *run, void *arg)
{
    (void)run;
    atomic_store(&((grace_case *)arg)->c_ran, 1);
    return 0;
}

static int g_holds_until_c_ran(vf_run *run, void *arg)
{
    (void)run;
    CHECK(tu_wait_flag(&((grace_case *)arg)->c_ran, 1, TU_TIMEOUT));
    return 0;
}

static int a_waits_on_the_other(vf_run *run, void *arg)
{
    grace_case *c = arg;
    int rc = vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = c_notes_it_ran, .arg = c, .reads = tu_list(&c->v, 1)});
    if (rc == 0)
        rc = vf_engine_push(c->other,
                            &(vf_op){.fn = g_holds_until_c_ran, .arg = c});
    c->a_waits_at = tu_now();
    atomic_store(&c->a_waiting, 1);
    if (rc != 0 || !c->timed)
        return rc != 0 ? rc : vf_engine_wait_all(c->other, NULL);
    double give_up = tu_now() + TU_TIMEOUT;
    while ((rc = vf_engine_wait_all_timed(c->other, 1, NULL)) == VF_ETIMEDOUT &&
           tu_now() < give_up) {
    }
    return rc;
}

/* A worker blocked in a wait on another engine counts stuck in its pool
 * only after VF__WAIT_STUCK_GRACE_US (a lower bound, which load cannot
 * break), and then the pool lends the spare that runs C once it is
 * queued, which the wait needs; by a loop of 1 ms timed waits too, which
 * share one grace. Counted at once, a recursion whose levels each waited
 * on another engine left each level on a spare of its own (wait.h). */
static void grace_round(bool timed);

TEST_CASE(a_wait_on_another_engine_counts_stuck_after_a_grace)
{
    grace_round(false);
    grace_round(true);
}

static void grace_round(bool timed)
{
    vf_engine *e = NULL;
    grace_case c = {.timed = timed};
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = 1,
                                              .idle_spin_us = -1}) == 0);
    REQUIRE(vf_engine_create(&c.other, &(vf_config){.type = VF_ENGINE_POOLED,
                                                    .cpu_workers = 1}) == 0);
    vf__pool *p = e->cpu_pool;
    c.v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keep_grace_v,
                                        .arg = &c,
                                        .writes = tu_list(&c.v, 1)}));
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = a_waits_on_the_other, .arg = &c}));
    REQUIRE(tu_wait_flag(&c.a_waiting, 1, TU_TIMEOUT));
    double give_up = tu_now() + TU_TIMEOUT;
    while (atomic_load(&p->nstuck) == 0 && tu_now() < give_up)
        sched_yield();
    CHECK(tu_now() - c.a_waits_at >= VF__WAIT_STUCK_GRACE_US * 1e-6);
    CHECK_EQ(atomic_load(&p->nstuck), 1);
    CHECK_OK(vf_completion_finish(c.v_done, 0, NULL)); /* C queued */
    CHECK(tu_wait_flag(&c.c_ran, 1, TU_TIMEOUT));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&p->nspares), 1);
    CHECK_EQ(atomic_load(&p->nstuck), 0);
    tu_finish_engine(e);
    tu_finish_engine(c.other);
}

/* Idle spinning: the program's thread sleeps in wait_all (an async op it
 * started keeps the wait open) while `quick` runs and its worker goes
 * idle; an observer notes when that worker is asleep (and the long spins
 * the pool began since `quick` ended), then completes the async op. With
 * `busy`, another worker runs an op until then. */
typedef struct spin_probe {
    vf_engine *e;
    vf_completion hold;
    double quick_end, asleep_at;
    unsigned spins_at_quick_end, spins_at_asleep;
    atomic_int quick_done, observed;
} spin_probe;

static unsigned long_spins(const spin_probe *p)
{
    return atomic_load(&p->e->cpu_pool->long_spins);
}

static void hold_open(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((spin_probe *)arg)->hold = done;
}

static int quick_op(vf_run *run, void *arg)
{
    (void)run;
    spin_probe *p = arg;
    /* Ends once the program's thread sleeps in its wait (an internal
     * count): its worker then goes idle with the program waiting. */
    double give_up = tu_now() + TU_TIMEOUT;
    while (atomic_load(&p->e->waits.outside_asleep) == 0 && tu_now() < give_up)
        sched_yield();
    p->spins_at_quick_end = long_spins(p);
    p->quick_end = tu_now();
    atomic_store(&p->quick_done, 1);
    return 0;
}

/* Busy until the observer saw the other worker asleep, however long the
 * machine's load makes that take. */
static int busy_op(vf_run *run, void *arg)
{
    (void)run;
    spin_probe *p = arg;
    double give_up = tu_now() + TU_TIMEOUT;
    while (!atomic_load(&p->observed) && tu_now() < give_up)
        tu_spin_us(100);
    return 0;
}

static void *spin_observer(void *arg)
{
    spin_probe *p = arg;
    CHECK(tu_wait_flag(&p->quick_done, 1, TU_TIMEOUT));
    until_asleep(p->e->cpu_pool, 1);
    p->asleep_at = tu_now();
    p->spins_at_asleep = long_spins(p);
    atomic_store(&p->observed, 1);
    CHECK_OK(vf_completion_finish(p->hold, 0, NULL));
    return NULL;
}

/* Seconds from `quick`'s end to its worker's sleep, on a fresh pooled
 * engine of `workers` spinning up to 100 ms; the long spins the pool
 * began meanwhile to *spins. */
static double idle_to_sleep_s(int workers, bool busy, unsigned *spins)
{
    spin_probe p;
    memset(&p, 0, sizeof p);
    CHECK_OK(vf_engine_create(&p.e, &(vf_config){.type = VF_ENGINE_POOLED,
                                                 .cpu_workers = workers,
                                                 .idle_spin_us = 100000}));
    REQUIRE(p.e != NULL);
    until_asleep(p.e->cpu_pool, workers);
    CHECK_OK(vf_engine_push(p.e, &(vf_op){.async_fn = hold_open, .arg = &p}));
    if (busy)
        CHECK_OK(vf_engine_push(p.e, &(vf_op){.fn = busy_op, .arg = &p}));
    CHECK_OK(vf_engine_push(p.e, &(vf_op){.fn = quick_op, .arg = &p}));
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, spin_observer, &p) == 0);
    CHECK_OK(vf_engine_wait_all(p.e, NULL)); /* asleep until the observer */
    pthread_join(th, NULL);
    CHECK_OK(vf_engine_destroy(p.e));
    *spins = p.spins_at_asleep - p.spins_at_quick_end;
    return p.asleep_at - p.quick_end;
}

TEST_CASE(idle_spin_while_cpus_fit)
{
    cpu_set_t all, one;
    unsigned spins;
    REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
    if (CPU_COUNT(&all) >= 2) {
        /* The program's thread sleeps in a wait, one worker: it spins
         * (a lower bound on the time: a loaded machine only lengthens). */
        double dt = idle_to_sleep_s(1, false, &spins);
        if (dt < 0.09 || spins < 1)
            CHECK_REPORT_("asleep %.1f ms after going idle after %u long "
                          "spins: spin 100 ms",
                          dt * 1e3, spins);
    }
    /* One CPU, which the busy worker needs: the idle one does not spin.
     * Told by the pool's count of long spins: the time to its sleep is
     * the scheduler's on a loaded machine (164 ms under TSan and load,
     * against a spin of 100 ms). */
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
    double dt = idle_to_sleep_s(2, true, &spins);
    REQUIRE(sched_setaffinity(0, sizeof all, &all) == 0);
    if (spins != 0)
        CHECK_REPORT_("on one CPU beside a busy worker, %u long spins (asleep "
                      "%.1f ms after going idle): it spun where it should "
                      "not",
                      spins, dt * 1e3);
}

/* Nested waiters on the lock of the engine's list of them: each op of the
 * case's engine notes its thread and waits on v, which an async op holds,
 * so its nested wait joins the list, whose lock the test holds. */
#define LIST_WAITERS 4

typedef struct list_case {
    vf_var v;
    vf_completion v_done;
    atomic_long tid[LIST_WAITERS];
    atomic_int next;
} list_case;

static void keep_list_v(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((list_case *)arg)->v_done = done;
}

static int notes_its_thread_and_waits(vf_run *run, void *arg)
{
    list_case *c = arg;
    int k = atomic_fetch_add(&c->next, 1);
    atomic_store(&c->tid[k], (long)syscall(SYS_gettid));
    return vf_var_wait(vf_run_engine(run), c->v, NULL);
}

TEST_CASE(nested_waiters_sleep_on_their_lists_lock)
{
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = LIST_WAITERS,
                                              .idle_spin_us = -1}) == 0);
    list_case *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    CHECK_OK(vf_var_create(e, &c->v));
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keep_list_v,
                                        .arg = c,
                                        .writes = tu_list(&c->v, 1)}));
    vf__sleeplock_lock(&e->waits.nested_lock);
    for (int k = 0; k < LIST_WAITERS; k++)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = notes_its_thread_and_waits, .arg = c}));
    /* Each waiter asleep in the kernel, on a loaded machine too: 20 s at
     * the most. A lock whose waiters yield keeps them runnable: with
     * hundreds of threads after it (a recursion polling with 1 ms timed
     * waits), its holder ran once a round of them. */
    int asleep = 0;
    for (int tries = 0; tries < 2000 && asleep < LIST_WAITERS; tries++) {
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
        asleep = 0;
        for (int k = 0; k < LIST_WAITERS; k++) {
            long tid = atomic_load(&c->tid[k]);
            asleep += tid != 0 && tu_thread_asleep(tid);
        }
    }
    if (asleep < LIST_WAITERS)
        CHECK_REPORT_("%d of %d threads waiting for the list's lock asleep",
                      asleep, LIST_WAITERS);
    vf__sleeplock_unlock(&e->waits.nested_lock);
    CHECK_OK(vf_completion_finish(c->v_done, 0, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&c->next), LIST_WAITERS);
    CHECK_OK(vf_var_destroy(e, c->v, NULL, NULL));
    tu_finish_engine(e);
    free(c);
}

/* A timed wait that gives up with no async op in flight takes none of
 * the async list's lock for its detail: with the lock held by the test, a
 * wait on a var whose writer holds on times out all the same. Under load,
 * 50 of 204 threads of a recursion polling with 1 ms timed waits queued
 * there (the reviewer of row 438). */
static int holds_until_the_gate(vf_run *run, void *arg)
{
    (void)run;
    return tu_gate_wait(arg, TU_TIMEOUT) ? 0 : VF_EOPFAILED;
}

typedef struct giving_up_case {
    vf_engine *e;
    vf_var v;
    atomic_int rc, returned;
} giving_up_case;

static void *waits_1_ms(void *arg)
{
    giving_up_case *c = arg;
    atomic_store(&c->rc, vf_var_wait_timed(c->e, c->v, 1, NULL));
    atomic_store(&c->returned, 1);
    return NULL;
}

TEST_CASE(a_timed_wait_gives_up_without_the_async_lock)
{
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = 1}) == 0);
    tu_gate gate;
    tu_gate_init(&gate);
    giving_up_case c = {.e = e, .v = tu_var(e)};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = holds_until_the_gate,
                                        .arg = &gate,
                                        .writes = VF_VARS(c.v)}));
    pthread_mutex_lock(&e->async.lock);
    pthread_t t = tu_thread_start(waits_1_ms, &c);
    bool returned = tu_wait_flag(&c.returned, 1, TU_TIMEOUT);
    pthread_mutex_unlock(&e->async.lock);
    CHECK(returned);
    tu_thread_join(t);
    CHECK_EQ(atomic_load(&c.rc), VF_ETIMEDOUT);
    tu_gate_open(&gate);
    tu_finish_engine(e);
    tu_gate_destroy(&gate);
}

TEST_MAIN("test_sched_wake", 300)
