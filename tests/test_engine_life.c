/*
 * test_engine_life: the engine's life under misuse and races (rule 14).
 *
 * - every public call that takes an engine, on a destroyed one (a second
 *   destroy included), returns VF_EINVAL with a detail naming the call,
 *   and reads nothing of the freed engine: the memory is handed out again
 *   and filled with the engine's magic number first, so a read of it would
 *   pass for a live engine and crash (plain build), or be reported (ASan
 *   with ASAN_OPTIONS=quarantine_size_mb=0, valgrind);
 * - many engines alive at once, destroyed in a scattered order: each dead
 *   one refused, each live one answered;
 * - pushes, waits and var calls from three threads racing destroy, runs
 *   per engine kind (VF_TEST_LIFE_RUNS, default 40; the 1,000 by
 *   hand): each returns 0 or VF_ESHUTDOWN, or VF_EINVAL only once destroy
 *   has begun; no push succeeds after destroy returned; every op a push
 *   accepted ran before destroy returned;
 * - vf_engine_destroy_timed on an async op nobody completes: VF_ETIMEDOUT
 *   naming the op, and the engine usable afterwards (shut down engines
 *   stay shut down); with 0 while an op runs and a thread waits for it,
 *   VF_ETIMEDOUT at once, 20 rounds; with INT64_MAX, it waits for the op
 *   another thread completes; giving up on a stopped engine, it leaves it
 *   started, its held op run; beside another thread's stop that drains,
 *   it returns at once and leaves the engine to that stop;
 * - operators and vars the program forgot are freed by destroy (LSan in
 *   `make asan`), and VF_ENGINE_INFO's log counts them;
 * - ops held while stopped with the profiler on are recorded once and leak
 *   nothing (LSan);
 * - vf_var_create after vf_engine_shutdown: VF_ESHUTDOWN saying so.
 */
#include "runner.h"

#include <pthread.h>
#include <unistd.h>

#include "varflow_profile.h"

/* --- helpers ------------------------------------------------------------ */

/* Run `fn(arg)` with stderr going to a file; return what it wrote
 * (malloc'd, terminated). */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    REQUIRE(tmp != NULL);
    int saved = dup(2);
    REQUIRE(saved >= 0 && dup2(fileno(tmp), 2) >= 0);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(tmp);
    char *text = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    REQUIRE(text != NULL);
    rewind(tmp);
    size_t got = fread(text, 1, (size_t)(n > 0 ? n : 0), tmp);
    text[got] = '\0';
    fclose(tmp);
    return text;
}

/* The detail of the last failure names `who` and a dead engine. */
static void check_dead_detail(const char *who)
{
    const char *d = vf_error_detail();
    if (strstr(d, who) == NULL || strstr(d, "not an engine") == NULL)
        CHECK_REPORT_("%s on a destroyed engine: detail \"%s\"", who, d);
}

#define CHECK_DEAD(call, who)                                                  \
    do {                                                                       \
        CHECK_ERR(call, VF_EINVAL);                                            \
        check_dead_detail(who);                                                \
    } while (0)

static void nop_done(void *arg, int status)
{
    (void)status;
    if (arg != NULL)
        atomic_fetch_add((atomic_int *)arg, 1);
}

/* Hand freed memory out again, filled with the engine's magic number
 * ("vfen"), so that a check reading a destroyed engine would take it for
 * a live one. */
static void scribble(void)
{
    enum { N = 64 };
    void *blocks[N];
    for (int i = 0; i < N; i++) {
        size_t size = (size_t)1 << (6 + i % 16); /* 64 B to 2 MiB */
        uint32_t *p = malloc(size);
        blocks[i] = p;
        for (size_t j = 0; p != NULL && j < size / 4; j++)
            p[j] = 0x7666656eu;
    }
    for (int i = 0; i < N; i++)
        free(blocks[i]);
}

/* --- calls on a destroyed engine ------------------------------------------ */

static void call_everything_dead(vf_engine *e, vf_var v, vf_operator *opr)
{
    vf_error err;
    vf_stats st;
    vf_var out;
    uint64_t version;
    vf_operator *opr2 = NULL;
    vf_profile *prof = NULL;
    int x = 0;
    CHECK_DEAD(vf_engine_destroy(e), "vf_engine_destroy");
    CHECK_DEAD(vf_engine_destroy_timed(e, 10), "vf_engine_destroy_timed");
    CHECK_DEAD(vf_engine_stop(e), "vf_engine_stop");
    CHECK_DEAD(vf_engine_start(e), "vf_engine_start");
    CHECK_DEAD(vf_engine_shutdown(e), "vf_engine_shutdown");
    CHECK_EQ(vf_engine_type_of(e), VF_ENGINE_INVALID);
    check_dead_detail("vf_engine_type_of");
    CHECK_EQ(vf_engine_num_workers(e), 0);
    CHECK_DEAD(vf_engine_stats(e, &st), "vf_engine_stats");
    CHECK_DEAD(vf_var_create(e, &out), "vf_var_create");
    CHECK_DEAD(vf_var_destroy(e, v, NULL, NULL), "vf_var_destroy");
    CHECK_DEAD(vf_var_version(e, v, &version), "vf_var_version");
    CHECK_DEAD(vf_var_of(e, &x, &out), "vf_var_of");
    CHECK_DEAD(vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}),
               "vf_engine_push");
    CHECK_DEAD(vf_operator_create(e, &(vf_op){.fn = tu_nop}, &opr2),
               "vf_operator_create");
    CHECK_DEAD(vf_operator_push(e, opr, 0), "vf_operator_push");
    CHECK_DEAD(vf_operator_push_arg(e, opr, 0, &x, sizeof x),
               "vf_operator_push_arg");
    CHECK_DEAD(vf_operator_destroy(e, opr), "vf_operator_destroy");
    CHECK_DEAD(vf_bulk_set_size(e, 4), "vf_bulk_set_size");
    CHECK_DEAD(vf_bulk_flush(e), "vf_bulk_flush");
    CHECK_DEAD(vf_var_wait(e, v, &err), "vf_var_wait");
    CHECK_DEAD(vf_var_wait_timed(e, v, 10, &err), "vf_var_wait_timed");
    CHECK_DEAD(vf_engine_wait_all(e, &err), "vf_engine_wait_all");
    CHECK_DEAD(vf_engine_wait_all_timed(e, 10, &err),
               "vf_engine_wait_all_timed");
    CHECK_DEAD(vf_profile_start(e), "vf_profile_start");
    CHECK_DEAD(vf_profile_stop(e), "vf_profile_stop");
    CHECK_DEAD(vf_profile_pause(e), "vf_profile_pause");
    CHECK_DEAD(vf_profile_resume(e), "vf_profile_resume");
    CHECK_DEAD(vf_profile_take(e, &prof), "vf_profile_take");
    CHECK(opr2 == NULL && prof == NULL);
}

TEST_KIND_CASE(destroyed_engine_calls, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    vf_operator *opr = NULL;
    CHECK_OK(vf_operator_create(
        e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v), .name = "opr"}, &opr));
    CHECK_OK(vf_operator_push(e, opr, 0));
    CHECK_OK(vf_engine_destroy(e)); /* frees the operator too */
    scribble();
    call_everything_dead(e, v, opr);
    /* Calls on NULL say the same. */
    CHECK_DEAD(vf_engine_push(NULL, &(vf_op){.fn = tu_nop}), "vf_engine_push");
    CHECK_EQ(vf_engine_type_of(NULL), VF_ENGINE_INVALID);
}

/* Engines alive at once, destroyed out of order: the registry keeps the
 * live ones and only them. */
TEST_CASE(many_engines)
{
    enum { N = 48 };
    vf_engine *e[N];
    bool dead[N] = {false};
    for (int i = 0; i < N; i++) {
        e[i] = NULL;
        CHECK_OK(
            vf_engine_create(&e[i], &(vf_config){.type = VF_ENGINE_NAIVE}));
        REQUIRE(e[i] != NULL);
    }
    for (int round = 0; round < 3; round++) {
        for (int i = round; i < N; i += 3) {
            CHECK_OK(vf_engine_destroy(e[i]));
            dead[i] = true;
        }
        for (int i = 0; i < N; i++)
            CHECK_EQ(vf_engine_type_of(e[i]),
                     dead[i] ? VF_ENGINE_INVALID : VF_ENGINE_NAIVE);
    }
    for (int i = 0; i < N; i++)
        CHECK_ERR(vf_engine_destroy(e[i]), VF_EINVAL);
}

/* --- calls racing destroy --------------------------------------------------
 */

enum { RACERS = 3, RACE_VARS = 4 };

typedef struct race {
    vf_engine *e;
    vf_var vars[RACE_VARS];
    atomic_int calls;            /* calls made so far, all threads */
    atomic_bool began, returned; /* destroy called / returned */
    atomic_int accepted, ran;    /* pushes that returned 0; ops that ran */
    atomic_int bad;              /* violations (reported once each) */
} race;

static int race_op(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((race *)arg)->ran, 1);
    return 0;
}

/* One call of a racer: what it returned is checked against when it ran. */
static void race_check(race *r, const char *what, int rc, bool after)
{
    bool began = atomic_load(&r->began);
    bool ok = rc == 0 || rc == VF_ESHUTDOWN || (rc == VF_EINVAL && began);
    if (rc == 0 && after)
        ok = false; /* accepted by an engine destroy had freed */
    if (!ok && atomic_fetch_add(&r->bad, 1) < 5)
        CHECK_REPORT_("racing %s returned %s (%s), destroy began %d, "
                      "returned before the call %d",
                      what, vf_error_name(rc), vf_error_detail(), began, after);
}

static void *racer(void *arg)
{
    race *r = arg;
    tu_rng rng = {(uint64_t)(uintptr_t)&rng};
    for (int i = 0;; i++) {
        bool after = atomic_load(&r->returned);
        vf_var v = r->vars[tu_next(&rng) % RACE_VARS];
        int rc;
        const char *what;
        switch (i % 6) {
        case 0:
        case 1:
        case 2:
            what = "vf_engine_push";
            rc = vf_engine_push(r->e, &(vf_op){.fn = race_op,
                                               .arg = r,
                                               .writes = VF_VARS(v),
                                               .name = "race"});
            if (rc == 0)
                atomic_fetch_add(&r->accepted, 1);
            break;
        case 3:
            what = "vf_var_wait";
            rc = vf_var_wait(r->e, v, NULL);
            break;
        case 4: {
            what = "vf_var_create";
            vf_var nv;
            rc = vf_var_create(r->e, &nv);
            break;
        }
        default: {
            what = "vf_var_version";
            uint64_t version;
            rc = vf_var_version(r->e, v, &version);
            break;
        }
        }
        race_check(r, what, rc, after);
        atomic_fetch_add(&r->calls, 1);
        if (after && rc == VF_EINVAL)
            return NULL; /* seen dead after destroy returned: done */
    }
}

static int race_runs(void)
{
    const char *s = getenv("VF_TEST_LIFE_RUNS");
    if (s != NULL && *s != '\0' && atoi(s) > 0)
        return atoi(s);
    return (int)tu_scaled(40, 8);
}

TEST_KIND_CASE(calls_racing_destroy, k)
{
    int runs = race_runs();
    for (int run = 0; run < runs; run++) {
        tu_phase_limit("calls_racing_destroy (one run)", 60);
        race r = {0};
        r.e = tu_engine(k);
        for (int i = 0; i < RACE_VARS; i++)
            r.vars[i] = tu_var(r.e);
        pthread_t t[RACERS];
        for (int i = 0; i < RACERS; i++)
            REQUIRE(pthread_create(&t[i], NULL, racer, &r) == 0);
        /* Let them get going, then destroy under their feet. */
        int want = 8 + run % 32;
        double until = tu_now() + TU_TIMEOUT;
        while (atomic_load(&r.calls) < want && tu_now() < until)
            sched_yield();
        atomic_store(&r.began, true);
        CHECK_OK(vf_engine_destroy(r.e));
        int ran = atomic_load(&r.ran);
        atomic_store(&r.returned, true);
        for (int i = 0; i < RACERS; i++)
            pthread_join(t[i], NULL);
        /* Every push accepted (before destroy returned: race_check) ran
         * before destroy returned. */
        int accepted = atomic_load(&r.accepted);
        if (ran != accepted)
            CHECK_REPORT_("run %d: %d pushes accepted, %d ran", run, accepted,
                          ran);
        if (atomic_load(&r.bad) != 0)
            break;
    }
}

/* --- destroy that waits for an async op ------------------------------------
 */

static vf_completion stuck_done;
static atomic_bool stuck_started;

static void stuck_start(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    (void)arg;
    stuck_done = done;
    atomic_store(&stuck_started, true);
}

TEST_KIND_CASE(destroy_timed, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    atomic_store(&stuck_started, false);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = stuck_start,
                                        .writes = VF_VARS(v),
                                        .name = "never-done"}));
    double until = tu_now() + TU_TIMEOUT;
    while (!atomic_load(&stuck_started) && tu_now() < until)
        sched_yield();
    REQUIRE(atomic_load(&stuck_started));
    CHECK_ERR(vf_engine_destroy_timed(e, 30), VF_ETIMEDOUT);
    const char *d = vf_error_detail();
    if (strstr(d, "\"never-done\" (op #1, started") == NULL)
        CHECK_REPORT_("destroy_timed's detail: \"%s\"", d);
    CHECK_ERR(vf_engine_destroy_timed(e, 0), VF_ETIMEDOUT);
    /* Usable as before: a push, a wait on another var. */
    vf_var w = tu_var(e);
    atomic_int done = 0;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                        .done = nop_done,
                                        .arg = &done,
                                        .writes = VF_VARS(w)}));
    CHECK_OK(vf_var_wait(e, w, NULL));
    CHECK_EQ(atomic_load(&done), 1);
    /* Shut down, it times out again and stays shut down. */
    CHECK_OK(vf_engine_shutdown(e));
    CHECK_ERR(vf_engine_destroy_timed(e, 0), VF_ETIMEDOUT);
    CHECK_ERR(vf_engine_push(e, &(vf_op){.fn = tu_nop}), VF_ESHUTDOWN);
    CHECK(strstr(vf_error_detail(), "shut down") != NULL);
    CHECK_OK(vf_completion_finish(stuck_done, 0, NULL));
    CHECK_OK(vf_engine_destroy_timed(e, -1));
    CHECK_EQ(vf_engine_type_of(e), VF_ENGINE_INVALID);
}

/* A timed destroy with no limit to speak of (INT64_MAX) waits, asleep,
 * for the async op another thread completes 50 ms on. start + INT64_MAX
 * overflowed: UBSan stopped the program (make asan), a plain build
 * polled its wrapped deadline (found by a user tester). */
static void *complete_stuck_later(void *arg)
{
    (void)arg;
    usleep(50 * 1000);
    CHECK_OK(vf_completion_finish(stuck_done, 0, NULL));
    return NULL;
}

TEST_KIND_CASE(destroy_timed_without_a_limit, k)
{
    vf_engine *e = tu_engine(k);
    atomic_store(&stuck_started, false);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = stuck_start}));
    double until = tu_now() + TU_TIMEOUT;
    while (!atomic_load(&stuck_started) && tu_now() < until)
        sched_yield();
    REQUIRE(atomic_load(&stuck_started));
    pthread_t t = tu_thread_start(complete_stuck_later, NULL);
    CHECK_OK(vf_engine_destroy_timed(e, INT64_MAX));
    tu_thread_join(t);
    CHECK_EQ(vf_engine_type_of(e), VF_ENGINE_INVALID);
}

/* destroy_timed(e, 0) while an op runs and another thread waits for it
 * inside vf_var_wait (a call in progress): VF_ETIMEDOUT at once, the
 * engine as it was. The op runs until the destroy has begun (a prober's
 * vf_var_create says VF_ESHUTDOWN) and 2 ms more, so it is pending
 * throughout the call's first 2 ms. The destroy's first spins, 128 of
 * them yields, went by before it looked at its limit: when the wait
 * returned within them, the destroy waited for the op and freed the
 * engine (a user tester's "destroy if idle": 1 to 124 calls in 200). */
typedef struct busy_case {
    vf_engine *e;
    vf_var v;
    atomic_int began, stop, waiting;
} busy_case;

static int busy_until_destroy(vf_run *run, void *arg)
{
    (void)run;
    busy_case *c = arg;
    while (!atomic_load(&c->began) && !atomic_load(&c->stop))
        sched_yield();
    tu_spin_us(2000);
    return 0;
}

static void *prober(void *arg)
{
    busy_case *c = arg;
    while (!atomic_load(&c->stop)) {
        vf_var x;
        int rc = vf_var_create(c->e, &x);
        if (rc == VF_ESHUTDOWN)
            atomic_store(&c->began, 1);
        else if (rc == 0)
            vf_var_destroy(c->e, x, NULL, NULL);
    }
    return NULL;
}

static void *waiter(void *arg)
{
    busy_case *c = arg;
    atomic_store(&c->waiting, 1);
    CHECK_OK(vf_var_wait(c->e, c->v, NULL));
    return NULL;
}

TEST_KIND_CASE(destroy_timed_zero_while_an_op_runs, k)
{
    if (!k->threaded)
        return; /* the op runs inside its push: nothing runs meanwhile */
    for (int round = 0; round < 20; round++) {
        busy_case c = {.e = tu_engine(k)};
        c.v = tu_var(c.e);
        CHECK_OK(vf_engine_push(c.e, &(vf_op){.fn = busy_until_destroy,
                                              .arg = &c,
                                              .writes = VF_VARS(c.v)}));
        pthread_t w = tu_thread_start(waiter, &c);
        while (!atomic_load(&c.waiting))
            sched_yield();
        pthread_t p = tu_thread_start(prober, &c);
        int rc = vf_engine_destroy_timed(c.e, 0);
        atomic_store(&c.stop, 1);
        tu_thread_join(p);
        tu_thread_join(w);
        if (rc != VF_ETIMEDOUT) {
            CHECK_REPORT_("round %d: destroy_timed(e, 0) with an op running "
                          "returned %s",
                          round, vf_error_name(rc));
            break; /* the engine is gone */
        }
        CHECK_OK(vf_engine_wait_all(c.e, NULL)); /* usable as before */
        tu_finish_engine(c.e);
    }
}

/* destroy_timed(e, 0) on a stopped engine, with an op held and another
 * thread calling vf_var_version over and over: when it gives up
 * (VF_ETIMEDOUT), the engine has been started, as the header says: the
 * held op runs and vf_engine_wait_all returns 0. Giving up on the calls
 * in progress before the step that starts it, it left the engine stopped
 * (vf_engine_wait_all: VF_ESTOPPED), 11 runs in 20 (found by the
 * reviewer of the limit's first look). */
typedef struct version_caller {
    vf_engine *e;
    vf_var v;
    atomic_int stop, calls;
} version_caller;

static void *call_version(void *arg)
{
    version_caller *vc = arg;
    while (!atomic_load(&vc->stop)) {
        uint64_t version;
        (void)vf_var_version(vc->e, vc->v, &version);
        atomic_fetch_add(&vc->calls, 1);
    }
    return NULL;
}

TEST_KIND_CASE(destroy_timed_zero_starts_a_stopped_engine, k)
{
    for (int round = 0; round < 20; round++) {
        version_caller vc = {.e = tu_engine(k)};
        vc.v = tu_var(vc.e);
        atomic_int ran = 0;
        CHECK_OK(vf_engine_stop(vc.e));
        CHECK_OK(vf_engine_push(vc.e, &(vf_op){.fn = tu_nop,
                                               .arg = &ran,
                                               .done = nop_done,
                                               .writes = VF_VARS(vc.v)}));
        pthread_t t = tu_thread_start(call_version, &vc);
        while (atomic_load(&vc.calls) < 100) /* calling on and on */
            sched_yield();
        int rc = vf_engine_destroy_timed(vc.e, 0);
        atomic_store(&vc.stop, 1);
        tu_thread_join(t);
        if (rc == 0) {
            CHECK_EQ(atomic_load(&ran), 1); /* destroyed: it ran first */
            continue;
        }
        CHECK_ERR(rc, VF_ETIMEDOUT);
        CHECK_OK(vf_engine_wait_all(vc.e, NULL));
        CHECK_EQ(atomic_load(&ran), 1);
        tu_finish_engine(vc.e);
    }
}

/* destroy_timed(e, 0) while another thread's vf_engine_stop drains, waiting
 * for an async op: VF_ETIMEDOUT at once, the engine left to that stop.
 * Starting a stopped engine when it gave up, it waited for the stop's
 * lock, so for the async op (3 s in the reviewer's program, or for ever).
 * The op is completed only once the destroy returned: a destroy that
 * waits for it hangs (the watchdog names the case). */
typedef struct stop_beside {
    vf_engine *e;
    atomic_int stopped;
} stop_beside;

static void *stop_it(void *arg)
{
    stop_beside *sb = arg;
    CHECK_OK(vf_engine_stop(sb->e));
    atomic_store(&sb->stopped, 1);
    return NULL;
}

TEST_KIND_CASE(destroy_timed_zero_beside_a_stop, k)
{
    stop_beside sb = {.e = tu_engine(k)};
    atomic_store(&stuck_started, false);
    CHECK_OK(vf_engine_push(sb.e, &(vf_op){.async_fn = stuck_start}));
    double until = tu_now() + TU_TIMEOUT;
    while (!atomic_load(&stuck_started) && tu_now() < until)
        sched_yield();
    REQUIRE(atomic_load(&stuck_started));
    pthread_t t = tu_thread_start(stop_it, &sb);
    /* The stop drains (it waits for the async op) once a push is held:
     * a wait then says VF_ESTOPPED. */
    vf_var v = tu_var(sb.e);
    do
        CHECK_OK(
            vf_engine_push(sb.e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}));
    while (vf_var_wait(sb.e, v, NULL) != VF_ESTOPPED);
    CHECK_ERR(vf_engine_destroy_timed(sb.e, 0), VF_ETIMEDOUT);
    CHECK(!atomic_load(&sb.stopped));
    CHECK_OK(vf_completion_finish(stuck_done, 0, NULL));
    tu_thread_join(t);
    CHECK(atomic_load(&sb.stopped));
    CHECK_OK(vf_engine_start(sb.e)); /* the held pushes run */
    tu_finish_engine(sb.e);
}

/* --- what the program forgot -----------------------------------------------
 */

typedef struct forgot_arg {
    const tu_kind *k;
    atomic_int done;
} forgot_arg;

static void forget_things(void *p)
{
    forgot_arg *a = p;
    vf_config cfg = a->k->cfg;
    cfg.engine_info = true;
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &cfg));
    REQUIRE(e != NULL);
    vf_var v = tu_var(e), w = tu_var(e);
    vf_operator *opr[3];
    for (int i = 0; i < 3; i++) {
        CHECK_OK(vf_operator_create(e,
                                    &(vf_op){.fn = tu_nop,
                                             .done = nop_done,
                                             .arg = &a->done,
                                             .writes = VF_VARS(v),
                                             .arg_size = 0,
                                             .name = "forgotten"},
                                    &opr[i]));
        CHECK_OK(vf_operator_push(e, opr[i], 0));
    }
    CHECK_OK(vf_var_destroy(e, w, NULL, NULL));
    CHECK_OK(vf_engine_destroy(e)); /* three operators and one var left */
}

TEST_KIND_CASE(forgotten_freed, k)
{
    forgot_arg a = {.k = k};
    char *log = capture_stderr(forget_things, &a);
    CHECK_EQ(atomic_load(&a.done), 3);
    if (strstr(log, "vf_engine_destroy freed 3 operators and 1 var the "
                    "program did not destroy") == NULL)
        CHECK_REPORT_("VF_ENGINE_INFO's log at destroy: \"%s\"", log);
    free(log);
}

TEST_KIND_CASE(held_ops_profiled, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    CHECK_OK(vf_profile_start(e));
    CHECK_OK(vf_engine_stop(e));
    enum { HELD = 10 };
    for (int i = 0; i < HELD; i++)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v), .name = "held"}));
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    CHECK_EQ(vf_profile_count(p), HELD); /* once each */
    vf_profile_destroy(p);
    CHECK_OK(vf_engine_destroy(e)); /* and no record leaked (LSan) */
}

TEST_CASE(var_create_after_shutdown)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1}));
    REQUIRE(e != NULL);
    CHECK_OK(vf_engine_shutdown(e));
    vf_var v;
    CHECK_ERR(vf_var_create(e, &v), VF_ESHUTDOWN);
    const char *d = vf_error_detail();
    if (strstr(d, "vf_var_create") == NULL || strstr(d, "shut down") == NULL ||
        strstr(d, "destroyed") != NULL)
        CHECK_REPORT_("vf_var_create after shutdown: detail \"%s\"", d);
    CHECK_OK(vf_engine_destroy(e));
}

/* With VF_TEST_LIFE_RUNS set (1,000 runs per kind by hand take longer
 * than CTest's limit), no limit on the whole program: a watchdog of its
 * own, and a limit on each run of the racing case instead. */
int main(int argc, char **argv)
{
    const char *runs = getenv("VF_TEST_LIFE_RUNS");
    bool long_run = runs != NULL && *runs != '\0';
    if (long_run) {
        double *secs = malloc(sizeof *secs);
        REQUIRE(secs != NULL);
        *secs = 1e9;
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, tu_watchdog_, secs) == 0);
        pthread_detach(t);
    }
    return runner_main(argc, argv, "test_engine_life", long_run ? 0 : 240);
}
