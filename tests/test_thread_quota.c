/*
 * test_thread_quota: a pool that cannot start a thread, as under a thread
 * quota (`ulimit -u`, a container's pids limit), with pthread_create
 * refused here (EAGAIN) while `refusing` is set: the test defines
 * pthread_create, which the library's calls bind to, and passes the others
 * on to the C library's.
 *
 * - a recursion with a wait at every level, on 128 KiB stacks, deeper than
 *   the workers' stacks hold: it needs spares, and none can start. Its
 *   deepest waits return VF_EDEADLK, their detail saying the stack is
 *   full, and the program ends (it waited for ever, silently: found by a
 *   user tester). With threads allowed again, the same recursion runs on
 *   the same engine (the spares start then).
 *
 * - threads refused for 10 ms only: the same recursion goes on, with no
 *   VF_EDEADLK;
 * - threads refused for 60 ms while a worker of one engine blocks on
 *   another (a var wait, a wait for all, a push at the in-flight bound, a
 *   destroy, or a destroy with another thread in a call on it), whose op
 *   needs an op queued behind it: the blocked worker asks for its spare
 *   again, and both engines finish (they waited for ever after one
 *   refusal: found by a user tester);
 * - a device's first op, whose threads cannot start: VF_ESYSTEM, the same
 *   detail at every try, naming the thread; it runs once threads start;
 *   so do its pools that could not start when others did, and the
 *   streams of a start that started some of them;
 * - a start that cannot start the workers: VF_ESYSTEM naming the worker,
 *   the engine still stopped; the next start runs what it held.
 * - a fork whose restart of the engine after it cannot start the
 *   threads: a wait says VF_ESYSTEM, naming the fork, and runs the ops
 *   pushed meanwhile once threads start.
 *
 * Not under the sanitizers: their runtimes intercept pthread_create
 * themselves.
 */
#define _GNU_SOURCE
#include "runner.h"

#include "varflow_profile.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int refusing, refused;
/* With `refusing`: this many threads start before the refusals (-1: none
 * do). */
static atomic_int allowed = -1;

int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                   void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                       void *);
    if (atomic_load(&refusing) && atomic_fetch_sub(&allowed, 1) <= 0) {
        atomic_fetch_add(&refused, 1);
        return EAGAIN;
    }
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    return real(thread, attr, fn, arg);
}

typedef struct level {
    int depth;
} level;

static atomic_int deadlocks, other_errors;
static char first_detail[512]; /* the first VF_EDEADLK's */

static int level_op(vf_run *run, void *arg)
{
    const level *l = arg;
    if (l->depth == 0)
        return 0;
    volatile char frame[2048]; /* a few dozen levels a 128 KiB stack */
    frame[l->depth % sizeof frame] = 1;
    level below = {l->depth - 1};
    int rc = vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = level_op, .arg = &below, .arg_size = sizeof below});
    if (rc == 0)
        rc = vf_run_wait_children(run, NULL);
    if (rc == VF_EDEADLK) {
        if (atomic_fetch_add(&deadlocks, 1) == 0)
            snprintf(first_detail, sizeof first_detail, "%s",
                     vf_error_detail());
    } else if (rc != 0 && rc != VF_EOPFAILED) {
        atomic_fetch_add(&other_errors, 1);
    }
    return rc != 0 ? rc : frame[l->depth % sizeof frame] - 1;
}

/* A pooled engine of `workers` (and, if not 0, stacks of `stack_kib`). */
static vf_engine *quota_engine(int workers, int stack_kib)
{
    vf_engine *e = NULL;
    REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                              .cpu_workers = workers,
                                              .worker_stack_kib = stack_kib}) ==
            0);
    return e;
}

/* The recursion `depth` levels deep, pushed and waited for. */
static int run_levels(vf_engine *e, int depth)
{
    level top = {depth};
    int rc = vf_engine_push(
        e, &(vf_op){.fn = level_op, .arg = &top, .arg_size = sizeof top});
    return rc != 0 ? rc : vf_engine_wait_all(e, NULL);
}

TEST_CASE(recursion_without_spares)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    vf_engine *e = quota_engine(2, 128);
    atomic_store(&refusing, 1);
    CHECK_EQ(run_levels(e, 1000), VF_EOPFAILED);
    atomic_store(&refusing, 0);
    CHECK(atomic_load(&refused) > 0); /* it tried to start spares */
    CHECK(atomic_load(&deadlocks) > 0);
    if (strstr(first_detail, "stack") == NULL)
        CHECK_REPORT_("the VF_EDEADLK's detail: %s", first_detail);
    CHECK_EQ(atomic_load(&other_errors), 0);
    /* Threads allowed again: the spares start, and it runs. */
    atomic_store(&deadlocks, 0);
    CHECK_OK(run_levels(e, 1000));
    CHECK_EQ(atomic_load(&deadlocks), 0);
    tu_finish_engine(e);
}

/* Threads refused for a moment only (a quota freed as threads exit):
 * the recursion that needs spares meanwhile goes on once they start. A
 * pool counted out of spares at its first failure gave it a false
 * VF_EDEADLK for a refusal of 3 ms (found by the reviewer); it waits
 * VF__SPARE_FAIL_MS (100 ms) first. */
static void *allow_threads_soon(void *arg)
{
    long ms = arg != NULL ? *(const long *)arg : 10; /* after the first */
    while (atomic_load(&refused) == 0)
        sched_yield();
    nanosleep(&(struct timespec){0, ms * 1000000L}, NULL);
    atomic_store(&refusing, 0);
    return NULL;
}

TEST_CASE(a_short_refusal_costs_nothing)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    vf_engine *e = quota_engine(2, 128);
    pthread_t allower;
    REQUIRE(pthread_create(&allower, NULL, allow_threads_soon, NULL) == 0);
    atomic_store(&refused, 0);
    atomic_store(&deadlocks, 0);
    atomic_store(&refusing, 1);
    CHECK_OK(run_levels(e, 300));
    pthread_join(allower, NULL);
    CHECK(atomic_load(&refused) > 0);
    CHECK_EQ(atomic_load(&deadlocks), 0);
    tu_finish_engine(e);
}

/* The same across two engines: an op of A blocks on B (a var wait, a
 * wait for all of B, a push at B's in-flight bound of 1, a destroy of B
 * draining it, a destroy of B waiting for another thread's call on B to
 * return), and B's op it waits for waits on A's var, written by an op
 * queued behind it on A's only worker: A must lend a spare, and its first
 * try is refused. One refused start left both engines waiting for ever,
 * even with threads allowed again 60 ms later: the blocked worker slept
 * on B's condition and never asked again (found by a user tester; each
 * form hung but the drain, which asked again at its 2 s stall report;
 * the destroy waiting for a call, found by the fix's reviewer). */
typedef enum {
    ACROSS_VAR_WAIT,
    ACROSS_WAIT_ALL,
    ACROSS_PUSH,
    ACROSS_DESTROY,
    ACROSS_DESTROY_CALLS
} across_form;

typedef struct across {
    vf_engine *a, *b;
    vf_var va, vb;
    across_form form;
    tu_gate a2_pushed;
    atomic_int ran;
    atomic_bool caller_in; /* ACROSS_DESTROY_CALLS: the call is made */
    int caller_rc;
} across;

static int across_b1(vf_run *run, void *arg)
{
    (void)run;
    across *x = *(across **)arg;
    REQUIRE(tu_gate_wait(&x->a2_pushed, 10));
    int rc = vf_var_wait(x->a, x->va, NULL);
    atomic_fetch_add(&x->ran, 1);
    return rc;
}

static int across_a1(vf_run *run, void *arg)
{
    (void)run;
    across *x = *(across **)arg;
    int rc = 0;
    if (x->form == ACROSS_VAR_WAIT)
        rc = vf_var_wait(x->b, x->vb, NULL);
    else if (x->form == ACROSS_WAIT_ALL)
        rc = vf_engine_wait_all(x->b, NULL);
    else if (x->form == ACROSS_PUSH) /* B holds b1, its bound */
        rc = vf_engine_push(x->b, &(vf_op){.fn = tu_nop});
    else if (x->form == ACROSS_DESTROY)
        rc = vf_engine_destroy(x->b);
    else { /* once the caller is inside its wait on B (most likely) */
        double until = tu_now() + 5;
        while (!atomic_load(&x->caller_in) && tu_now() < until)
            sched_yield();
        nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
        rc = vf_engine_destroy(x->b);
    }
    atomic_fetch_add(&x->ran, 1);
    return rc;
}

static int across_a2(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&(*(across **)arg)->ran, 1);
    return 0;
}

/* ACROSS_DESTROY_CALLS: a thread in a call on B while A's op destroys B. */
static void *across_caller(void *arg)
{
    across *x = arg;
    atomic_store(&x->caller_in, true);
    x->caller_rc = vf_var_wait(x->b, x->vb, NULL);
    return NULL;
}

TEST_CASE(a_short_refusal_across_engines)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    tu_phase_limit("a short refusal across engines", 60);
    for (int form = ACROSS_VAR_WAIT; form <= ACROSS_DESTROY_CALLS; form++) {
        across x = {.form = (across_form)form};
        across *xp = &x;
        tu_gate_init(&x.a2_pushed);
        x.a = quota_engine(1, 0);
        REQUIRE(vf_engine_create(&x.b, &(vf_config){.type = VF_ENGINE_POOLED,
                                                    .cpu_workers = 1,
                                                    .max_inflight = 1}) == 0);
        x.va = tu_var(x.a);
        x.vb = tu_var(x.b);
        vf_var a1_out = tu_var(x.a);
        pthread_t allower, caller;
        atomic_store(&refused, 0);
        /* 60 ms: past a1's 20 ms in ACROSS_DESTROY_CALLS (the first
         * refusal may be B's pool's, for b1 blocks on A too). */
        static const long refuse_ms = 60;
        REQUIRE(pthread_create(&allower, NULL, allow_threads_soon,
                               (void *)&refuse_ms) == 0);
        CHECK_OK(vf_engine_push(x.b, &(vf_op){.fn = across_b1,
                                              .arg = &xp,
                                              .arg_size = sizeof xp,
                                              .writes = VF_VARS(x.vb)}));
        if (form == ACROSS_DESTROY_CALLS) /* it waits for b1 */
            REQUIRE(pthread_create(&caller, NULL, across_caller, &x) == 0);
        atomic_store(&refusing, 1);
        CHECK_OK(vf_engine_push(x.a, &(vf_op){.fn = across_a1,
                                              .arg = &xp,
                                              .arg_size = sizeof xp,
                                              .writes = VF_VARS(a1_out)}));
        CHECK_OK(vf_engine_push(x.a, &(vf_op){.fn = across_a2,
                                              .arg = &xp,
                                              .arg_size = sizeof xp,
                                              .writes = VF_VARS(x.va)}));
        tu_gate_open(&x.a2_pushed);
        int rc = vf_engine_wait_all_timed(x.a, 20000, NULL);
        if (rc != 0)
            CHECK_REPORT_("form %d: the wait for A returned %s", form,
                          vf_error_name(rc));
        REQUIRE(rc == 0); /* both engines hang otherwise */
        bool destroyed = form >= ACROSS_DESTROY;
        if (!destroyed)
            CHECK_OK(vf_engine_wait_all(x.b, NULL));
        CHECK_EQ(atomic_load(&x.ran), 3);
        if (form == ACROSS_DESTROY_CALLS) {
            pthread_join(caller, NULL);
            CHECK_OK(x.caller_rc);
        }
        if (atomic_load(&refused) == 0) { /* no spare was asked for */
            CHECK_REPORT_("form %d: no thread start was refused", form);
            atomic_store(&refused, 1); /* the allower waits for one */
        }
        pthread_join(allower, NULL);
        tu_finish_engine(x.a);
        if (!destroyed)
            tu_finish_engine(x.b);
        tu_gate_destroy(&x.a2_pushed);
    }
}

/* A device's threads start at its first op: when they cannot, the push
 * returns VF_ESYSTEM, its detail saying which thread, the same at every
 * try (it was the thread's last detail, wrapped again at each push), and
 * a push once threads are allowed runs. */
static int quota_dev_work(void *arg)
{
    *(int *)arg = 1;
    return 0;
}

static int quota_dev_op(vf_run *run, void *arg)
{
    return vf_run_submit(run, quota_dev_work, arg, 0);
}

TEST_CASE(device_threads_that_cannot_start)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    vf_engine *e = quota_engine(1, 0);
    int x = 0;
    vf_op op = {
        .fn = quota_dev_op, .arg = &x, .device = {VF_DEVICE_EMULATED, 0}};
    atomic_store(&refusing, 1);
    char first[512] = "";
    for (int i = 0; i < 3; i++) {
        CHECK_ERR(vf_engine_push(e, &op), VF_ESYSTEM);
        const char *detail = vf_error_detail();
        if (strstr(detail, "cannot start emulated device 0") == NULL ||
            strstr(detail, "thread") == NULL)
            CHECK_REPORT_("push %d: the detail: %s", i, detail);
        if (i == 0)
            snprintf(first, sizeof first, "%s", detail);
        else if (strcmp(first, detail) != 0)
            CHECK_REPORT_("push %d: the detail changed: %s", i, detail);
    }
    atomic_store(&refusing, 0);
    CHECK_OK(vf_engine_push(e, &op));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(x, 1);
    tu_finish_engine(e);
}

/* A device's first op under a quota that lets only some of its pools
 * start: VF_ESYSTEM; once threads start, an op for each of its pools runs
 * (the pools that could not start were refused for good, VF_ENODEV "could
 * not start all its pools": found by a user tester). Every count of
 * threads allowed, from none to all. */
TEST_CASE(device_pools_that_could_not_all_start)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    static const vf_property props[] = {VF_PROP_NORMAL, VF_PROP_COPY_TO_DEVICE,
                                        VF_PROP_DEVICE_PRIORITIZED};
    bool all_started = false;
    for (int k = 0; k < 64 && !all_started; k++) {
        vf_engine *e = quota_engine(1, 0);
        int x[3] = {0, 0, 0};
        atomic_store(&allowed, k);
        atomic_store(&refusing, 1);
        int rc = vf_engine_push(e, &(vf_op){.fn = quota_dev_op,
                                            .arg = &x[0],
                                            .device = {VF_DEVICE_EMULATED, 0}});
        atomic_store(&refusing, 0);
        atomic_store(&allowed, -1);
        all_started = rc == 0;
        if (rc != 0 && rc != VF_ESYSTEM)
            CHECK_REPORT_("%d threads: the first push: %d (%s)", k, rc,
                          vf_error_detail());
        for (int i = rc == 0 ? 1 : 0; i < 3; i++)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = quota_dev_op,
                                           .arg = &x[i],
                                           .device = {VF_DEVICE_EMULATED, 0},
                                           .property = props[i]}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        for (int i = 0; i < 3; i++)
            CHECK_EQ(x[i], 1);
        tu_finish_engine(e);
    }
    CHECK(all_started); /* the counts went past what a device needs */
}

/* Occurrences of `what` in `text`. */
static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *at = text; (at = strstr(at, what)) != NULL; at++)
        n++;
    return n;
}

/* Device 0's first op under a quota, then device 1's, then an op for each
 * pool of device 0 (its missing ones made now, after device 1's), device
 * 1's priority pool idle: the Chrome trace has a process per pool, each
 * device's apart, whatever pools device 0 could make at first (an idle
 * pool made beside a same-named one of another device shared its process:
 * found by the reviewer of the pools' processes). */
TEST_CASE(pools_made_late_have_their_own_process)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    static const vf_property props[] = {VF_PROP_NORMAL, VF_PROP_COPY_TO_DEVICE,
                                        VF_PROP_DEVICE_PRIORITIZED};
    char path[64];
    snprintf(path, sizeof path, "/tmp/vf-quota-%d.json", (int)getpid());
    bool all_started = false;
    for (int k = 0; k < 64 && !all_started; k++) {
        vf_engine *e = quota_engine(1, 0);
        CHECK_OK(vf_profile_start(e));
        int x = 0;
        atomic_store(&allowed, k);
        atomic_store(&refusing, 1);
        int rc = vf_engine_push(e, &(vf_op){.fn = quota_dev_op,
                                            .arg = &x,
                                            .device = {VF_DEVICE_EMULATED, 0}});
        atomic_store(&refusing, 0);
        atomic_store(&allowed, -1);
        all_started = rc == 0;
        for (int i = 0; i < 2; i++) /* device 1's prio pool stays idle */
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = quota_dev_op,
                                           .arg = &x,
                                           .device = {VF_DEVICE_EMULATED, 1},
                                           .property = props[i]}));
        for (int i = 0; i < 3; i++)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = quota_dev_op,
                                           .arg = &x,
                                           .device = {VF_DEVICE_EMULATED, 0},
                                           .property = props[i]}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        vf_profile *p = NULL;
        CHECK_OK(vf_profile_take(e, &p));
        CHECK_OK(vf_profile_write(p, path, VF_PROFILE_CHROME_JSON));
        char *text = tu_read_file(path);
        REQUIRE(text != NULL);
        if (count_of(text, "\"emu pool") != 2 ||
            count_of(text, "\"emu-copy pool") != 2 ||
            count_of(text, "\"emu-prio pool") != 2)
            CHECK_REPORT_("%d threads: %d, %d and %d processes", k,
                          count_of(text, "\"emu pool"),
                          count_of(text, "\"emu-copy pool"),
                          count_of(text, "\"emu-prio pool"));
        free(text);
        vf_profile_destroy(p);
        tu_finish_engine(e);
    }
    unlink(path);
    CHECK(all_started);
}

/* A start of an engine with devices whose threads start only in part:
 * VF_ESYSTEM, the engine stopped; the next start runs every pool (it
 * joined the streams it had not started, and crashed: found by a user
 * tester). Every count of threads allowed, from none to all. */
TEST_CASE(start_with_devices_in_part)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    vf_engine *e = quota_engine(2, 0);
    int x = 0;
    for (int d = 0; d < 2; d++) {
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = quota_dev_op,
                                       .arg = &x,
                                       .device = {VF_DEVICE_EMULATED, d}}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
    }
    bool started = false;
    for (int k = 0; k < 64 && !started; k++) {
        CHECK_OK(vf_engine_stop(e));
        int held = 0; /* an op held by the stop */
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = quota_dev_op,
                                       .arg = &held,
                                       .device = {VF_DEVICE_EMULATED, 1}}));
        atomic_store(&allowed, k);
        atomic_store(&refusing, 1);
        int rc = vf_engine_start(e);
        atomic_store(&refusing, 0);
        atomic_store(&allowed, -1);
        started = rc == 0;
        if (rc != 0) {
            CHECK_ERR(rc, VF_ESYSTEM);
            CHECK_ERR(vf_engine_wait_all(e, NULL), VF_ESTOPPED);
            CHECK_EQ(held, 0);
            CHECK_OK(vf_engine_start(e));
        }
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(held, 1);
        for (int d = 0; d < 2; d++)
            for (int i = 0; i < 3; i++) {
                static const vf_property props[] = {VF_PROP_NORMAL,
                                                    VF_PROP_COPY_FROM_DEVICE,
                                                    VF_PROP_DEVICE_PRIORITIZED};
                x = 0;
                CHECK_OK(vf_engine_push(
                    e, &(vf_op){.fn = quota_dev_op,
                                .arg = &x,
                                .device = {VF_DEVICE_EMULATED, d},
                                .property = props[i]}));
                CHECK_OK(vf_engine_wait_all(e, NULL));
                CHECK_EQ(x, 1);
            }
    }
    CHECK(started);
    tu_finish_engine(e);
}

/* A start that cannot start a worker's thread returns VF_ESYSTEM, its
 * detail saying which (it said only "cannot start the workers"), and the
 * engine stays stopped, its held op held; the next start runs it. */
TEST_CASE(start_without_threads)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    vf_engine *e = quota_engine(2, 0);
    CHECK_OK(vf_engine_stop(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop}));
    atomic_store(&refusing, 1);
    CHECK_ERR(vf_engine_start(e), VF_ESYSTEM);
    if (strstr(vf_error_detail(), "no thread for worker") == NULL)
        CHECK_REPORT_("the detail: %s", vf_error_detail());
    atomic_store(&refusing, 0);
    CHECK_ERR(vf_engine_wait_all(e, NULL), VF_ESTOPPED);
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
}

/* varflow stops every engine around fork() and starts it again after:
 * when the parent's restart cannot start the threads, a wait says so
 * (VF_ESYSTEM, naming the fork) and tries again; once threads start, the
 * wait runs what was pushed meanwhile. It stayed stopped silently, a wait
 * said VF_ESTOPPED, "wait for vf_engine_start", to a program that never
 * stopped it (found by a user tester). */
static int quota_count(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add((atomic_int *)arg, 1);
    return 0;
}

TEST_CASE(fork_restart_without_threads)
{
#if defined(TU_ASAN) || defined(TU_TSAN)
    TEST_SKIP("the sanitizers intercept pthread_create");
#endif
    vf_engine *e = quota_engine(2, 0);
    atomic_int ran = 0;
    atomic_store(&refusing, 1);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    REQUIRE(child > 0);
    for (int i = 0; i < 10; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = quota_count, .arg = &ran}));
    CHECK_ERR(vf_engine_wait_all(e, NULL), VF_ESYSTEM);
    if (strstr(vf_error_detail(), "after fork()") == NULL)
        CHECK_REPORT_("the detail: %s", vf_error_detail());
    atomic_store(&refusing, 0);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&ran), 10);
    REQUIRE(waitpid(child, NULL, 0) == child);
    tu_finish_engine(e);
}

TEST_MAIN("test_thread_quota", 120)
