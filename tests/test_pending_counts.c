/*
 * test_pending_counts: the engine's pending and active counts, kept per thread
 * (src/core/counts.h), seen through the API on every engine kind.
 *
 * - outside_pushers: 40 threads (more than the engine has spare count
 *   slots, so some share one) push ops that all wait behind a gate op, and
 *   exit while those ops are pending. Then vf_engine_stats says exactly how
 *   many are pending (the engine is still: a sum is exact), the gate opens,
 *   wait_all returns 0 with every op run once and nothing pending; a second
 *   round of new threads (taking the slots given back) does the same;
 * - last_finish: wait_all races the finish of the last op, thousands of
 *   times: one op, or a few, pushed just before the wait; two threads
 *   waiting at once; an async op completed by a foreign thread (the
 *   completer finishes it: vf_completion_finish). A lost wake-up would leave
 *   a wait hanging: each is timed (10 s) and must return 0;
 * - stats_after_wait: vf_engine_stats right after each of thousands of
 *   wait_alls says nothing is pending, with and without an in-flight bound
 *   (whose exact count stats reads instead of the sum);
 * - deadlock_claimed_once: two running ops each waiting inside for a
 *   child queued behind the other's write, 100 times: exactly one wait is
 *   refused (VF_EDEADLK) and the
 *   other returns 0 once the refused op has finished; a second claim of the
 *   same deadlock would refuse both. Every other round an async op in
 *   flight keeps the engine active while both wait, and its finish (from
 *   the main thread) makes both see active at zero at once;
 * - nested_no_false_alarm: ops wait inside on chains of ops they pushed,
 *   on every worker at once, many times: never VF_EDEADLK (active must not
 *   touch zero while a chain moves);
 * - fork_churn: threads come and go, each making its first push on the
 *   engine (which takes a count slot under the process-wide slots lock,
 *   and gives it back at exit), while the main thread forks: in each child
 *   a new thread pushes and waits, and wait_all returns 0 with nothing
 *   pending (a child stuck on a lock a parent thread held dies by alarm).
 */
#include "runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* --- outside_pushers ------------------------------------------------------ */

#define PUSHERS 40

typedef struct rig {
    vf_engine *e;
    vf_var shared;
    vf_var own[PUSHERS];
    int each;
    atomic_int runs;
    atomic_int push_errors;
} rig;

static int count_run(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((rig *)arg)->runs, 1);
    return 0;
}

typedef struct pusher_arg {
    rig *r;
    int me;
} pusher_arg;

static void *pusher(void *arg)
{
    pusher_arg *a = arg;
    rig *r = a->r;
    for (int i = 0; i < r->each; i++) {
        /* Every op reads the shared var (held by the gate op) and writes
         * this thread's own: all wait for the gate. */
        int rc = vf_engine_push(r->e,
                                &(vf_op){.fn = count_run,
                                         .arg = r,
                                         .reads = VF_VARS(r->shared),
                                         .writes = VF_VARS(a->r->own[a->me]),
                                         .name = "pushed"});
        if (rc != 0)
            atomic_fetch_add(&r->push_errors, 1);
    }
    return NULL; /* exits with its ops pending */
}

static int gate_op(vf_run *run, void *arg)
{
    (void)run;
    CHECK(tu_gate_wait(arg, TU_TIMEOUT));
    return 0;
}

static void pusher_round(const tu_kind *k, rig *r, int round)
{
    tu_gate gate;
    tu_gate_init(&gate);
    if (k->threaded)
        CHECK_OK(vf_engine_push(r->e, &(vf_op){.fn = gate_op,
                                               .arg = &gate,
                                               .writes = VF_VARS(r->shared),
                                               .name = "gate"}));
    atomic_store(&r->runs, 0);
    pthread_t t[PUSHERS];
    pusher_arg args[PUSHERS];
    for (int i = 0; i < PUSHERS; i++) {
        args[i] = (pusher_arg){r, i};
        t[i] = tu_thread_start(pusher, &args[i]);
    }
    for (int i = 0; i < PUSHERS; i++)
        tu_thread_join(t[i]);
    CHECK_EQ(atomic_load(&r->push_errors), 0);
    vf_stats st;
    CHECK_OK(vf_engine_stats(r->e, &st));
    if (k->threaded) {
        /* The gate op runs; everything else waits for it: still. */
        CHECK_EQ(st.pending, (uint64_t)PUSHERS * r->each + 1);
        CHECK_EQ(atomic_load(&r->runs), 0);
        tu_gate_open(&gate);
    } else {
        CHECK_EQ(st.pending, 0); /* naive: ran inside the pushes */
    }
    CHECK_OK(vf_engine_wait_all(r->e, NULL));
    CHECK_EQ(atomic_load(&r->runs), PUSHERS * r->each);
    CHECK_OK(vf_engine_stats(r->e, &st));
    CHECK_EQ(st.pending, 0);
    (void)round;
    tu_gate_destroy(&gate);
}

TEST_KIND_CASE(outside_pushers, k)
{
    rig r;
    memset(&r, 0, sizeof r);
    r.e = tu_engine(k);
    r.shared = tu_var(r.e);
    for (int i = 0; i < PUSHERS; i++)
        r.own[i] = tu_var(r.e);
    r.each = (int)tu_scaled(500, 20);
    pusher_round(k, &r, 1);
    pusher_round(k, &r, 2); /* new threads, slots given back */
    tu_finish_engine(r.e);
}

/* --- last_finish ---------------------------------------------------------- */

typedef struct racer {
    vf_engine *e;
    atomic_int go;  /* rounds the helper should wait in */
    atomic_int bad; /* waits that did not return 0 */
    atomic_bool over;
} racer;

static int wait_ok(vf_engine *e)
{
    return vf_engine_wait_all_timed(e, 10000, NULL);
}

/* A second waiter: waits whenever the main thread has pushed. */
static void *second_waiter(void *arg)
{
    racer *r = arg;
    int seen = 0;
    while (!atomic_load(&r->over)) {
        int g = atomic_load(&r->go);
        if (g == seen) {
            sched_yield();
            continue;
        }
        seen = g;
        if (wait_ok(r->e) != 0)
            atomic_fetch_add(&r->bad, 1);
    }
    return NULL;
}

/* Async ops: the completion goes to a completer thread, which finishes
 * it at once (the foreign finish races the main thread's wait). */
static _Atomic(vf_completion *) handed;
static atomic_bool completer_over;

static void start_async(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    vf_completion *slot = arg;
    *slot = done;
    vf_completion *expected = NULL;
    while (!atomic_compare_exchange_weak(&handed, &expected, slot))
        expected = NULL;
}

static void *completer(void *arg)
{
    (void)arg;
    while (!atomic_load(&completer_over)) {
        vf_completion *c = atomic_exchange(&handed, NULL);
        if (c == NULL) {
            sched_yield();
            continue;
        }
        CHECK_OK(vf_completion_finish(*c, 0, NULL));
    }
    return NULL;
}

TEST_KIND_CASE(last_finish, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v[3] = {tu_var(e), tu_var(e), tu_var(e)};
    int rounds = (int)tu_scaled(3000, 100);
    racer r = {.e = e};
    pthread_t helper = tu_thread_start(second_waiter, &r);
    int bad = 0;
    for (int i = 0; i < rounds; i++) {
        int n = 1 + i % 3;
        for (int j = 0; j < n; j++)
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v[j])}));
        if (i % 2 == 0)
            atomic_fetch_add(&r.go, 1);
        bad += wait_ok(e) != 0;
    }
    atomic_store(&r.over, true);
    tu_thread_join(helper);
    /* Async, finished on a foreign thread. */
    atomic_store(&completer_over, false);
    pthread_t comp = tu_thread_start(completer, NULL);
    vf_completion slot;
    for (int i = 0; i < rounds / 3; i++) {
        CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = start_async,
                                            .arg = &slot,
                                            .writes = VF_VARS(v[0])}));
        bad += wait_ok(e) != 0;
    }
    atomic_store(&completer_over, true);
    tu_thread_join(comp);
    bad += atomic_load(&r.bad);
    if (bad != 0)
        CHECK_REPORT_("%d waits did not return 0 (a lost wake-up)", bad);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 0);
    tu_finish_engine(e);
}

/* --- stats_after_wait ----------------------------------------------------- */

/* wait_all returns once a sum of the per-thread counts proved pending at
 * zero; vf_engine_stats right after must say 0 too, on an engine with an
 * in-flight bound as well, where it reads the bound's own shared count
 * (which a finisher must lower before its slot, engine.h). Thousands of
 * rounds: the last op's finish races the wait each time. */
TEST_KIND_CASE(stats_after_wait, k)
{
    for (int bounded = 0; bounded < 2; bounded++) {
        vf_config cfg = k->cfg;
        cfg.max_inflight = bounded ? 3 : 0;
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &cfg));
        vf_var v[2] = {tu_var(e), tu_var(e)};
        int rounds = (int)tu_scaled(20000, 500), nonzero = 0;
        uint64_t seen = 0;
        /* Each round is two hand-offs between threads: on a machine
         * loaded by others each costs a time slice, so past MIN_ROUNDS
         * the case stops after ROUNDS_S seconds (its watchdog is 200). */
        enum { MIN_ROUNDS = 500, ROUNDS_S = 15 };
        double stop_at = tu_now() + ROUNDS_S;
        for (int i = 0; i < rounds; i++) {
            if (i >= MIN_ROUNDS && i % 100 == 0 && tu_now() > stop_at) {
                printf("  %s: stopped after %d of %d rounds (%d s)\n", k->name,
                       i, rounds, (int)ROUNDS_S);
                rounds = i;
                break;
            }
            int n = 1 + i % 2;
            for (int j = 0; j < n; j++)
                CHECK_OK(vf_engine_push(
                    e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v[j])}));
            /* Polled (a zero timeout) on odd rounds: the wait then sees
             * the zero the moment the finisher makes it, not when it
             * wakes the waiter after. */
            int rc;
            while ((rc = vf_engine_wait_all_timed(e, i % 2 ? 0 : 10000,
                                                  NULL)) == VF_ETIMEDOUT &&
                   i % 2) {
            }
            CHECK_OK(rc);
            vf_stats st;
            CHECK_OK(vf_engine_stats(e, &st));
            if (st.pending != 0) {
                nonzero++;
                seen = st.pending;
            }
        }
        if (nonzero != 0)
            CHECK_REPORT_("max_inflight %u: %d of %d stats after a wait_all "
                          "said pending (last %llu)",
                          cfg.max_inflight, nonzero, rounds,
                          (unsigned long long)seen);
        tu_finish_engine(e);
    }
}

/* --- deadlock_claimed_once ------------------------------------------------ */

typedef struct pair {
    vf_var a, b, pc, qc;
    tu_rv rv;
    atomic_int p_rc, q_rc;
    vf_completion held; /* an async op in flight: active until finished */
} pair;

/* P writes a, Q writes b, both running; P pushes a child that reads b
 * (queued behind Q's write) and writes pc, and waits on pc; Q the same
 * the other way round. A wait counts no write of a later op (Q's b is
 * not waited for itself), but a child waits for the write its var is
 * queued behind: each wait waits for the other's op to end. */
static void wait_for_child(vf_run *run, pair *c, vf_var in, vf_var out,
                           atomic_int *rc)
{
    CHECK(tu_rv_meet(&c->rv, 3, TU_TIMEOUT));
    CHECK_OK(vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = tu_nop, .reads = VF_VARS(in), .writes = VF_VARS(out)}));
    atomic_store(rc, vf_var_wait(vf_run_engine(run), out, NULL));
}

static int op_p(vf_run *run, void *arg)
{
    pair *c = arg;
    wait_for_child(run, c, c->b, c->pc, &c->p_rc);
    return 0;
}

static int op_q(vf_run *run, void *arg)
{
    pair *c = arg;
    wait_for_child(run, c, c->a, c->qc, &c->q_rc);
    return 0;
}

static void hold_async(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((pair *)arg)->held = done;
}

TEST_KIND_CASE(deadlock_claimed_once, k)
{
    /* Both ops must run at once: two workers for normal ops. */
    if (!k->threaded || k->workers < 2)
        return;
    vf_engine *e = tu_engine(k);
    int rounds = (int)tu_scaled(100, 10);
    int both = 0, none = 0;
    for (int i = 0; i < rounds; i++) {
        pair c;
        memset(&c, 0, sizeof c);
        tu_rv_init(&c.rv);
        c.a = tu_var(e);
        c.b = tu_var(e);
        c.pc = tu_var(e);
        c.qc = tu_var(e);
        atomic_store(&c.p_rc, 99);
        atomic_store(&c.q_rc, 99);
        /* Odd rounds: an async op keeps active above zero while both wait,
         * and its finish wakes both at once, to race for the claim. */
        bool held = i % 2 == 1;
        if (held)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.async_fn = hold_async, .arg = &c}));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = op_p, .arg = &c, .writes = VF_VARS(c.a)}));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = op_q, .arg = &c, .writes = VF_VARS(c.b)}));
        CHECK(tu_rv_meet(&c.rv, 3, TU_TIMEOUT));
        if (held) {
            tu_spin_us(500); /* let both reach their waits (not needed) */
            CHECK_OK(vf_completion_finish(c.held, 0, NULL));
        }
        CHECK_OK(vf_engine_wait_all(e, NULL));
        int p = atomic_load(&c.p_rc), q = atomic_load(&c.q_rc);
        CHECK(p == 0 || p == VF_EDEADLK);
        CHECK(q == 0 || q == VF_EDEADLK);
        both += p == VF_EDEADLK && q == VF_EDEADLK;
        none += p != VF_EDEADLK && q != VF_EDEADLK;
        CHECK_OK(vf_var_destroy(e, c.a, NULL, NULL));
        CHECK_OK(vf_var_destroy(e, c.b, NULL, NULL));
        CHECK_OK(vf_var_destroy(e, c.pc, NULL, NULL));
        CHECK_OK(vf_var_destroy(e, c.qc, NULL, NULL));
        tu_rv_destroy(&c.rv);
    }
    if (both != 0 || none != 0)
        CHECK_REPORT_("of %d cycles, %d refused both waits, %d neither", rounds,
                      both, none);
    tu_finish_engine(e);
}

/* --- nested_no_false_alarm ------------------------------------------------ */

typedef struct waiter_ctx {
    vf_var v;
    int len;
    atomic_int deadlocks, other;
} waiter_ctx;

static int chain_waiter(vf_run *run, void *arg)
{
    waiter_ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    for (int i = 0; i < c->len; i++)
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(c->v)}));
    int rc = vf_var_wait(e, c->v, NULL);
    if (rc == VF_EDEADLK)
        atomic_fetch_add(&c->deadlocks, 1);
    else if (rc != 0)
        atomic_fetch_add(&c->other, 1);
    return 0;
}

TEST_KIND_CASE(nested_no_false_alarm, k)
{
    vf_engine *e = tu_engine(k);
    enum { NW = 4 };
    waiter_ctx c[NW];
    memset(c, 0, sizeof c);
    for (int j = 0; j < NW; j++) {
        c[j].v = tu_var(e);
        c[j].len = 1 + 7 * j;
    }
    int rounds = (int)tu_scaled(400, 20);
    for (int i = 0; i < rounds; i++) {
        /* A round at a time: a worker may stack waiters on its wait. */
        for (int j = 0; j < NW; j++)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = chain_waiter, .arg = &c[j]}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
    }
    for (int j = 0; j < NW; j++) {
        CHECK_EQ(atomic_load(&c[j].deadlocks), 0);
        CHECK_EQ(atomic_load(&c[j].other), 0);
    }
    tu_finish_engine(e);
}

/* --- fork_churn ----------------------------------------------------------- */

#if !defined(TU_TSAN) && !defined(TU_ASAN)
static vf_engine *churn_engine;
static atomic_bool churn_over;

static void *push_once(void *arg)
{
    (void)arg;
    vf_engine_push(churn_engine, &(vf_op){.fn = tu_nop});
    return NULL; /* gives its slot back */
}

static void *churn(void *arg)
{
    (void)arg;
    while (!atomic_load(&churn_over))
        tu_thread_join(tu_thread_start(push_once, NULL));
    return NULL;
}

static void *child_pusher(void *arg)
{
    int *bad = arg;
    for (int i = 0; i < 100; i++)
        *bad += vf_engine_push(churn_engine, &(vf_op){.fn = tu_nop}) != 0;
    *bad += vf_engine_wait_all(churn_engine, NULL) != 0;
    return NULL;
}
#endif

TEST_CASE(fork_churn)
{
#if defined(TU_TSAN)
    TEST_SKIP("under TSan (its runtime cannot follow threads started in a "
              "forked child; see test_lifecycle_fork)");
#elif defined(TU_ASAN)
    /* GCC 12's ASan runtime does not hold its allocator's locks across a
     * fork (glibc's malloc does): a child whose parent had a thread in
     * malloc at the fork hangs in SizeClassAllocator64::GetFromAllocator
     * at its first calloc (seen: in 1 run of 4, every child thread there,
     * none in varflow's locks). This case forks while two threads start
     * threads and allocate without pause, so it runs in the plain build. */
    TEST_SKIP("under ASan (its allocator is not fork-safe while other "
              "threads allocate: the child can hang in ASan's own lock)");
#else
    vf_config cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2};
    CHECK_OK(vf_engine_create(&churn_engine, &cfg));
    atomic_store(&churn_over, false);
    pthread_t t[2] = {tu_thread_start(churn, NULL),
                      tu_thread_start(churn, NULL)};
    int forks = (int)tu_scaled(20, 4);
    for (int f = 0; f < forks; f++) {
        tu_spin_us(2000);
        fflush(NULL);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            alarm(20); /* a lock left held by a parent thread: die */
            int bad = 0;
            pthread_t c;
            if (pthread_create(&c, NULL, child_pusher, &bad) != 0)
                _exit(3);
            pthread_join(c, NULL);
            bad += vf_engine_wait_all(churn_engine, NULL) != 0;
            vf_stats st;
            bad += vf_engine_stats(churn_engine, &st) != 0 || st.pending != 0;
            bad += vf_engine_destroy(churn_engine) != 0;
            _exit(bad == 0 ? 0 : 1);
        }
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            CHECK_REPORT_("fork %d: the child failed (status %#x)", f, status);
    }
    atomic_store(&churn_over, true);
    tu_thread_join(t[0]);
    tu_thread_join(t[1]);
    CHECK_OK(vf_engine_wait_all(churn_engine, NULL));
    vf_stats st;
    CHECK_OK(vf_engine_stats(churn_engine, &st));
    CHECK_EQ(st.pending, 0);
    CHECK_OK(vf_engine_destroy(churn_engine));
#endif
}

TEST_MAIN("test_pending_counts", 200)
