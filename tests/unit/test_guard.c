/*
 * test_guard: core/guard.h, the registry of live engines and the calls in
 * progress, and what destroy (core/destroy.c) says while it waits.
 *
 * - the registry: 1,000 made-up handles listed, half of them unlisted in
 *   a scattered order (the set's deletion moves entries), each answered
 *   right (a test with the answer called for listed ones only); a guard
 *   on an unlisted handle is refused and leaves nothing;
 * - nesting: guards on alternating engines stack up, one on the engine
 *   of the call it is inside is covered by it, vf__guard_in_call sees
 *   every level, too deep is VF_ENOMEM;
 * - a scan: busy while another thread holds a guard on the engine, done
 *   once it leaves; done too while that thread keeps calling in a tight
 *   loop (its count of calls ended moves);
 * - destroy's reports on stderr (grace and period shortened): waiting for
 *   an async op nobody completes, and for another thread's wait blocked
 *   on it, each named with its place and age, more than once; a stop's
 *   and a fork's drain report the same way (core/stall_report.h); a sync
 *   op a worker runs is named by its place (for at least how long, once
 *   seen running at an earlier look), by destroy and a push at the bound
 *   too, and a delete's free callback is not named as another op; with
 *   stderr a full pipe, a stop and a destroy return, their reports
 *   dropped.
 */
#include "runner.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/stall_report.h"

static char fake[4096]; /* made-up handles: never followed */
#define FAKE(i) ((const vf_engine *)(const void *)&fake[(i)*4])

/* vf__guard_listed_with's test: whether the handle is an odd one, and
 * counted in *arg. */
static bool odd_and_count(const vf_engine *e, const void *arg)
{
    (*(int *)(uintptr_t)arg)++;
    return ((const char *)(const void *)e - fake) / 4 % 2 == 1;
}

TEST_CASE(registry)
{
    enum { N = 1000 };
    for (int i = 0; i < N; i++)
        CHECK_OK(vf__guard_list(FAKE(i)));
    tu_rng rng = {7};
    bool gone[N] = {false};
    for (int k = 0; k < N / 2; k++) {
        int i = (int)(tu_next(&rng) % N);
        if (!gone[i]) {
            vf__guard_unlist(FAKE(i));
            gone[i] = true;
        }
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(vf__guard_listed(FAKE(i)), !gone[i]);
        /* The test runs for a listed handle only, and decides. */
        int tested = 0;
        CHECK_EQ(vf__guard_listed_with(FAKE(i), odd_and_count, &tested),
                 !gone[i] && i % 2 == 1);
        CHECK_EQ(tested, !gone[i]);
        vf__guard g;
        int rc = vf__guard_enter(FAKE(i), &g, "test");
        CHECK_EQ(rc, gone[i] ? VF_EINVAL : 0);
        if (rc == 0)
            vf__guard_leave(&g);
        CHECK(!vf__guard_in_call(FAKE(i)));
    }
    for (int i = 0; i < N; i++)
        if (!gone[i])
            vf__guard_unlist(FAKE(i));
    CHECK(!vf__guard_listed(NULL));
}

TEST_CASE(nesting)
{
    const vf_engine *a = FAKE(1), *b = FAKE(2);
    CHECK_OK(vf__guard_list(a));
    CHECK_OK(vf__guard_list(b));
    vf__guard g[VF__GUARD_DEPTH + 2];
    CHECK_OK(vf__guard_enter(a, &g[0], "test"));
    CHECK_OK(vf__guard_enter(a, &g[1], "test")); /* covered by g[0] */
    CHECK_EQ(g[1].depth, -1);
    int n = 2;
    for (; n < VF__GUARD_DEPTH + 1; n++) /* b, a, b, ...: one place each */
        CHECK_OK(vf__guard_enter(n % 2 ? a : b, &g[n], "test"));
    CHECK_ERR(vf__guard_enter(n % 2 ? a : b, &g[n], "test"), VF_ENOTSUP);
    CHECK(vf__guard_in_call(a) && vf__guard_in_call(b));
    while (n-- > 0)
        vf__guard_leave(&g[n]);
    CHECK(!vf__guard_in_call(a) && !vf__guard_in_call(b));
    vf__guard_unlist(a);
    vf__guard_unlist(b);
}

typedef struct holder {
    const vf_engine *e;
    atomic_int phase; /* 1: in a call, 2: leave it, 3: loop calls, 4: stop */
} holder;

static void *hold(void *arg)
{
    holder *h = arg;
    vf__guard g;
    REQUIRE(vf__guard_enter(h->e, &g, "test") == 0);
    atomic_store(&h->phase, 1);
    while (atomic_load(&h->phase) == 1)
        sched_yield();
    vf__guard_leave(&g);
    while (atomic_load(&h->phase) != 4) {
        if (vf__guard_enter(h->e, &g, "test") == 0)
            vf__guard_leave(&g);
    }
    return NULL;
}

TEST_CASE(scan)
{
    holder h = {.e = FAKE(3)};
    CHECK_OK(vf__guard_list(h.e));
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, hold, &h) == 0);
    while (atomic_load(&h.phase) != 1)
        sched_yield();
    vf__call_scan sc;
    vf__guard_scan_start(&sc);
    for (int i = 0; i < 100; i++)
        CHECK(vf__guard_scan_busy(&sc, h.e));
    atomic_store(&h.phase, 2); /* leaves, then calls in a tight loop */
    double until = tu_now() + TU_TIMEOUT;
    while (vf__guard_scan_busy(&sc, h.e) && tu_now() < until)
        sched_yield();
    CHECK(!vf__guard_scan_busy(&sc, h.e));
    /* A new scan sees the loop's calls, and each of them ends. */
    for (int round = 0; round < 50; round++) {
        vf__guard_scan_start(&sc);
        until = tu_now() + TU_TIMEOUT;
        while (vf__guard_scan_busy(&sc, h.e) && tu_now() < until)
            sched_yield();
        CHECK(tu_now() < until);
    }
    atomic_store(&h.phase, 4);
    pthread_join(t, NULL);
    vf__guard_unlist(h.e);
}

/* --- destroy's reports ------------------------------------------------- */

static vf_completion stuck;
static atomic_bool started;

static void stuck_start(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    (void)arg;
    stuck = done;
    atomic_store(&started, true);
}

typedef struct scene {
    vf_engine *e;
    vf_var v;
    atomic_int waited; /* the waiter's result + 1000 once it returned */
} scene;

static void *destroyer(void *arg)
{
    scene *s = arg;
    CHECK_OK(vf_engine_destroy(s->e));
    return NULL;
}

static void *waiter(void *arg)
{
    scene *s = arg;
    atomic_store(&s->waited, 1000 + vf_var_wait(s->e, s->v, NULL));
    return NULL;
}

#define DESTROY_SAID "varflow: vf_engine_destroy has waited"

/* How often `what` occurs in `text`. */
static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
        n++;
    return n;
}

/* What the file at `fd` holds once it holds `n` reports of destroy's
 * wait (TU_TIMEOUT at most), a string to free: the op is completed only
 * then, whatever the machine's load (a fixed 400 ms saw one report on a
 * loaded CI machine), and only these reports, all written while the op
 * was in flight, are checked. */
static char *await_reports_of(int fd, const char *prefix, int n)
{
    enum { MAX = 65536 };
    char *text = calloc(1, MAX);
    REQUIRE(text != NULL);
    for (double t0 = tu_now(); tu_now() - t0 < TU_TIMEOUT;) {
        ssize_t got = pread(fd, text, MAX - 1, 0);
        text[got > 0 ? got : 0] = '\0';
        if (count_of(text, prefix) >= n)
            break;
        usleep(10000);
    }
    return text;
}

static char *await_reports(int fd, int n)
{
    return await_reports_of(fd, DESTROY_SAID, n);
}

/* Destroy while an async op is never completed (and, with `wait`, while
 * another thread waits for it); stderr captured; the op is completed once
 * destroy reported its wait twice. Returns what destroy wrote until then
 * (to free). */
static char *destroy_reports(bool with_waiter)
{
    scene s = {0};
    CHECK_OK(vf_engine_create(
        &s.e, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1}));
    REQUIRE(s.e != NULL);
    CHECK_OK(vf_var_create(s.e, &s.v));
    atomic_store(&started, false);
    CHECK_OK(vf_engine_push(s.e, &(vf_op){.async_fn = stuck_start,
                                          .writes = VF_VARS(s.v),
                                          .name = "stuck"}));
    while (!atomic_load(&started))
        sched_yield();
    pthread_t w, d;
    if (with_waiter) {
        REQUIRE(pthread_create(&w, NULL, waiter, &s) == 0);
        /* In its wait once its marker is pending (a fixed 20 ms was too
         * short when the thread started late). */
        vf_stats st = {0};
        for (double t0 = tu_now(); vf_engine_stats(s.e, &st) == 0 &&
                                   st.pending < 2 &&
                                   tu_now() - t0 < TU_TIMEOUT;)
            sched_yield();
        REQUIRE(st.pending >= 2);
    }
    fflush(stderr);
    FILE *tmp = tmpfile();
    REQUIRE(tmp != NULL);
    int saved = dup(2);
    REQUIRE(saved >= 0 && dup2(fileno(tmp), 2) >= 0);
    REQUIRE(pthread_create(&d, NULL, destroyer, &s) == 0);
    char *text = await_reports(fileno(tmp), 2);
    CHECK_OK(vf_completion_finish(stuck, 0, NULL));
    pthread_join(d, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (with_waiter) {
        pthread_join(w, NULL);
        CHECK_EQ(atomic_load(&s.waited), 1000); /* returned 0 */
    }
    fclose(tmp);
    return text;
}

/* `log` (freed) holds two reports or more starting `prefix`, each naming
 * the stuck op, and says `what` was waited for. */
static void check_reports(char *log, const char *prefix, const char *what)
{
    int n = count_of(log, prefix);
    if (n < 2 || count_of(log, "\"stuck\" (op #1, started") < n ||
        strstr(log, what) == NULL)
        CHECK_REPORT_("the reports: \"%s\"", log);
    free(log);
}

TEST_CASE(destroy_reports_async)
{
    vf__stall_report_times(50, 100);
    check_reports(destroy_reports(false), DESTROY_SAID,
                  "its pushed ops to finish");
    vf__stall_report_times(2000, 10000);
}

TEST_CASE(destroy_reports_calls)
{
    vf__stall_report_times(50, 100);
    check_reports(destroy_reports(true), DESTROY_SAID,
                  "calls in progress on other threads");
    vf__stall_report_times(2000, 10000);
}

/* --- the ops a destroy's and a push's reports name (shortened times) --- */

static tu_gate sync_gate;

/* A sync op that does not return until sync_gate opens. */
static int held_sync(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_store(&started, true);
    CHECK(tu_gate_wait(&sync_gate, TU_TIMEOUT));
    return 0;
}

/* A pooled engine of one worker (max_inflight as given), and a var. */
static vf_engine *one_worker_engine(unsigned max_inflight, vf_var *v)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                               .cpu_workers = 1,
                                               .max_inflight = max_inflight}));
    REQUIRE(e != NULL);
    CHECK_OK(vf_var_create(e, v));
    return e;
}

/* stderr to a temporary file until restore_stderr; its descriptor. */
static int saved_stderr = -1;
static FILE *stderr_file;

static int capture_stderr(void)
{
    fflush(stderr);
    stderr_file = tmpfile();
    REQUIRE(stderr_file != NULL);
    saved_stderr = dup(2);
    REQUIRE(saved_stderr >= 0 && dup2(fileno(stderr_file), 2) >= 0);
    return fileno(stderr_file);
}

static void restore_stderr(void)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    fclose(stderr_file);
}

/* What another thread saw on stderr until it held `n` lines with `what`,
 * when it opened sync_gate (the text, to free). */
typedef struct reports_until {
    int fd, n;
    const char *what;
    char *text;
} reports_until;

static void *open_once_said(void *arg)
{
    reports_until *r = arg;
    r->text = await_reports_of(r->fd, r->what, r->n);
    tu_gate_open(&sync_gate);
    return NULL;
}

/* Destroy e, whose ops wait for sync_gate, stderr captured, until its
 * reports held `n` lines with `what`; what they said (to free). */
static char *destroy_until_said(vf_engine *e, const char *what, int n)
{
    reports_until r = {.fd = capture_stderr(), .n = n, .what = what};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, open_once_said, &r) == 0);
    CHECK_OK(vf_engine_destroy(e));
    pthread_join(t, NULL);
    restore_stderr();
    return r.text;
}

/* A sync op that does not return (blocked on a gate), pushed fourth,
 * three ops queued behind it on its var, and destroy: its reports name
 * it as the op a worker has run since the wait began (they said only
 * "no async op in flight": found by a user tester whose op slept). */
TEST_CASE(destroy_names_the_running_sync_op)
{
    vf__stall_report_times(50, 100);
    tu_gate_init(&sync_gate);
    vf_var v;
    vf_engine *e = one_worker_engine(0, &v);
    atomic_store(&started, false);
    for (int i = 0; i < 7; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = i == 3 ? held_sync : tu_nop,
                                            .writes = VF_VARS(v)}));
    while (!atomic_load(&started))
        sched_yield();
    char *text = destroy_until_said(e, DESTROY_SAID, 2);
    int n = count_of(text, DESTROY_SAID);
    if (n < 2 || strstr(text, "no async op in flight") == NULL ||
        count_of(text, "; running now: op #4 on worker 0 (cpu) for at "
                       "least ") < n)
        CHECK_REPORT_("the reports: \"%s\"", text);
    free(text);
    tu_gate_destroy(&sync_gate);
    vf__stall_report_times(2000, 10000);
}

/* An async op that completes itself and runs on, its function blocked on
 * sync_gate: destroy waits for it with nothing pending, and its reports
 * say so ("no async op in flight" alone, before: a destroy waiting for
 * nothing that can be seen). */
static void completes_then_holds(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    (void)arg;
    CHECK_OK(vf_completion_finish(done, 0, NULL));
    atomic_store(&started, true);
    CHECK(tu_gate_wait(&sync_gate, TU_TIMEOUT));
}

static void *push_completes_then_holds(void *arg)
{
    CHECK_OK(vf_engine_push(arg, &(vf_op){.async_fn = completes_then_holds}));
    return NULL;
}

TEST_CASE(destroy_says_it_waits_for_an_async_function)
{
    vf__stall_report_times(50, 100);
    tu_gate_init(&sync_gate);
    vf_var v;
    vf_engine *e = one_worker_engine(0, &v);
    atomic_store(&started, false);
    /* Ready at its push: its function runs on that thread. */
    pthread_t t = tu_thread_start(push_completes_then_holds, e);
    while (!atomic_load(&started))
        sched_yield();
    char *text = destroy_until_said(e, DESTROY_SAID, 2);
    tu_thread_join(t);
    if (count_of(text, "(0 ops pending); no async op in flight; 1 async op "
                       "function still running") < 2)
        CHECK_REPORT_("the reports: \"%s\"", text);
    free(text);
    tu_gate_destroy(&sync_gate);
    vf__stall_report_times(2000, 10000);
}

/* A push blocked at the in-flight bound (one worker, max_inflight 1, op #1
 * held): its reports name op #1 too (they named the async ops only: the
 * reviewer of the first cut). */
typedef struct bound_scene {
    vf_engine *e;
    vf_var v;
} bound_scene;

static void *push_at_bound(void *arg)
{
    bound_scene *b = arg;
    CHECK_OK(
        vf_engine_push(b->e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(b->v)}));
    return NULL;
}

TEST_CASE(a_push_at_the_bound_names_the_running_op)
{
    vf__stall_report_times(50, 100);
    tu_gate_init(&sync_gate);
    bound_scene b = {0};
    b.e = one_worker_engine(1, &b.v);
    atomic_store(&started, false);
    int fd = capture_stderr();
    CHECK_OK(
        vf_engine_push(b.e, &(vf_op){.fn = held_sync, .writes = VF_VARS(b.v)}));
    while (!atomic_load(&started))
        sched_yield();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, push_at_bound, &b) == 0);
    char *text = await_reports_of(fd, "varflow: vf_engine_push has waited", 2);
    tu_gate_open(&sync_gate);
    pthread_join(t, NULL);
    CHECK_OK(vf_engine_wait_all(b.e, NULL));
    restore_stderr();
    if (count_of(text, "varflow: vf_engine_push has waited") < 2 ||
        count_of(text, "; running now: op #1 on worker 0 (cpu) for at "
                       "least ") < 2)
        CHECK_REPORT_("the reports: \"%s\"", text);
    free(text);
    tu_gate_destroy(&sync_gate);
    CHECK_OK(vf_engine_destroy(b.e));
    vf__stall_report_times(2000, 10000);
}

/* An op that starts after destroy began to wait (op #1 spins 150 ms, then
 * op #2 is held): a report names it as seen anew, the next for at least
 * how long (a report left it out until its second look: the reviewer of
 * the first cut). */
static int spin_150ms(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_store(&started, true);
    tu_spin_us(150000);
    return 0;
}

TEST_CASE(destroy_names_an_op_started_after_its_wait_began)
{
    vf__stall_report_times(50, 100);
    tu_gate_init(&sync_gate);
    vf_var v;
    vf_engine *e = one_worker_engine(0, &v);
    atomic_store(&started, false);
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = spin_150ms, .writes = VF_VARS(v)}));
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = held_sync, .writes = VF_VARS(v)}));
    while (!atomic_load(&started))
        sched_yield();
    char *text = destroy_until_said(e, "op #2 on worker 0 (cpu) for at least ",
                                    1);
    if (strstr(text, "; running now: op #2 on worker 0 (cpu)\n") == NULL ||
        strstr(text, "; running now: op #2 on worker 0 (cpu) for at least ") ==
            NULL)
        CHECK_REPORT_("the reports: \"%s\"", text);
    free(text);
    tu_gate_destroy(&sync_gate);
    vf__stall_report_times(2000, 10000);
}

/* A var's delete whose free callback does not return, after op #1: the
 * delete runs on the worker with another op's place (its own is the last
 * one pushed), so the reports name no op for it (they named op #1, ended
 * long before, "for at least" seconds: the reviewer of the first cut). */
static void held_free(void *arg)
{
    (void)arg;
    atomic_store(&started, true);
    CHECK(tu_gate_wait(&sync_gate, TU_TIMEOUT));
}

TEST_CASE(destroy_names_no_op_for_a_delete)
{
    vf__stall_report_times(50, 100);
    tu_gate_init(&sync_gate);
    vf_var v;
    vf_engine *e = one_worker_engine(0, &v);
    atomic_store(&started, false);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}));
    CHECK_OK(vf_var_destroy(e, v, held_free, NULL));
    while (!atomic_load(&started))
        sched_yield();
    char *text = destroy_until_said(e, DESTROY_SAID, 2);
    if (count_of(text, DESTROY_SAID) < 2 || strstr(text, "running now") != NULL)
        CHECK_REPORT_("the reports: \"%s\"", text);
    free(text);
    tu_gate_destroy(&sync_gate);
    vf__stall_report_times(2000, 10000);
}

/* A stop's and a fork's drain: what another thread finishing the async
 * op once the call reported its wait twice saw on stderr (to free). */
typedef struct reports_seen {
    int fd;
    const char *prefix;
    char *text;
} reports_seen;

static void *finish_after_reports(void *arg)
{
    reports_seen *r = arg;
    r->text = await_reports_of(r->fd, r->prefix, 2);
    CHECK_OK(vf_completion_finish(stuck, 0, NULL));
    return NULL;
}

static char *drain_reports(bool fork_it)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1}));
    REQUIRE(e != NULL);
    atomic_store(&started, false);
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.async_fn = stuck_start, .name = "stuck"}));
    while (!atomic_load(&started))
        sched_yield();
    fflush(NULL);
    FILE *tmp = tmpfile();
    REQUIRE(tmp != NULL);
    int saved = dup(2);
    REQUIRE(saved >= 0 && dup2(fileno(tmp), 2) >= 0);
    reports_seen r = {.fd = fileno(tmp),
                      .prefix = fork_it ? "varflow: fork() has waited"
                                        : "varflow: vf_engine_stop has waited"};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, finish_after_reports, &r) == 0);
    if (fork_it) {
        pid_t pid = fork(); /* its drain waits for the op */
        REQUIRE(pid >= 0);
        if (pid == 0)
            _exit(0);
        REQUIRE(waitpid(pid, NULL, 0) == pid);
    } else {
        CHECK_OK(vf_engine_stop(e));
        CHECK_OK(vf_engine_start(e));
    }
    pthread_join(t, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(tmp);
    CHECK_OK(vf_engine_destroy(e));
    return r.text;
}

TEST_CASE(a_stop_reports_what_it_waits_for)
{
    vf__stall_report_times(50, 100);
    check_reports(drain_reports(false), "varflow: vf_engine_stop has waited",
                  "its pushed ops to finish");
    vf__stall_report_times(2000, 10000);
}

TEST_CASE(a_fork_reports_what_it_waits_for)
{
#if defined(TU_TSAN)
    TEST_SKIP("under TSan (its runtime cannot follow threads started in a "
              "forked child: see test_lifecycle_fork)");
#endif
    vf__stall_report_times(50, 100);
    /* With the usual cause of a fork that never returns (a user tester
     * driving varflow from Python, whose os.fork holds the GIL). */
    check_reports(drain_reports(true), "varflow: fork() has waited",
                  "its pushed ops to finish (one that needs what the forking "
                  "thread holds, a lock or Python's GIL, never does: stop the "
                  "engine before fork())");
    vf__stall_report_times(2000, 10000);
}

/* The reports never block on stderr: with it a pipe nobody reads, full,
 * a stop, a destroy_timed (within its deadline), a destroy, a push at the
 * in-flight bound and a fork's drain, each waiting for an async op,
 * return once another thread completes it, their reports dropped. A
 * blocking write kept each waiting for ever (found by a user tester whose
 * program's log nobody read). */
enum stalled_call {
    STOP,
    DESTROY_TIMED,
    DESTROY,
    PUSH_AT_BOUND,
    FORK,
    NSTALLED
};

typedef struct blocked_call {
    vf_engine *e;
    enum stalled_call which;
    int rc;
    atomic_int done;
} blocked_call;

static int nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

/* fork() from this thread: its drain waits for the async op; the child
 * leaves at once. 0 once the child is reaped. */
static int fork_and_reap(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid < 0)
        return VF_EINVAL;
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? 0 : VF_EINVAL;
}

static void *make_call(void *arg)
{
    blocked_call *c = arg;
    switch (c->which) {
    case STOP:
        c->rc = vf_engine_stop(c->e);
        break;
    case DESTROY_TIMED:
        c->rc = vf_engine_destroy_timed(c->e, 60000);
        break;
    case DESTROY:
        c->rc = vf_engine_destroy(c->e);
        break;
    case PUSH_AT_BOUND:
        c->rc = vf_engine_push(c->e, &(vf_op){.fn = nop, .name = "behind"});
        break;
    case FORK:
        c->rc = fork_and_reap();
        break;
    default:
        c->rc = VF_EINVAL;
    }
    atomic_store(&c->done, 1);
    return NULL;
}

static void *finish_later(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL); /* reports due */
    CHECK_OK(vf_completion_finish(stuck, 0, NULL));
    return NULL;
}

TEST_CASE(reports_never_block_on_a_full_stderr)
{
    static const char *const names[NSTALLED] = {
        "vf_engine_stop", "vf_engine_destroy_timed", "vf_engine_destroy",
        "a push at the bound", "fork()"};
    vf__stall_report_times(10, 10);
    for (int which = 0; which < NSTALLED; which++) {
        check_context_ = names[which];
#if defined(TU_TSAN)
        if (which == FORK)
            continue; /* TSan's runtime and fork (a_fork_reports_what_...) */
#endif
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(
            &e, &(vf_config){.type = VF_ENGINE_POOLED,
                             .cpu_workers = 1,
                             .max_inflight = which == PUSH_AT_BOUND}));
        REQUIRE(e != NULL);
        atomic_store(&started, false);
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.async_fn = stuck_start, .name = "stuck"}));
        while (!atomic_load(&started))
            sched_yield();
        int p[2];
        REQUIRE(pipe(p) == 0);
        /* Filled without blocking, then blocking again, as a program's
         * stderr is. */
        int flags = fcntl(p[1], F_GETFL);
        REQUIRE(fcntl(p[1], F_SETFL, flags | O_NONBLOCK) == 0);
        static const char junk[4096];
        while (write(p[1], junk, sizeof junk) > 0)
            ;
        REQUIRE(fcntl(p[1], F_SETFL, flags) == 0);
        fflush(NULL);
        int saved = dup(2);
        REQUIRE(saved >= 0 && dup2(p[1], 2) >= 0);
        blocked_call c = {.e = e, .which = (enum stalled_call)which};
        pthread_t t = tu_thread_start(make_call, &c);
        pthread_t f = tu_thread_start(finish_later, NULL);
        tu_thread_join(f);
        bool returned = tu_wait_flag(&c.done, 1, TU_TIMEOUT);
        if (!returned) { /* let it write, then go on */
            char sink[4096];
            REQUIRE(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0);
            while (!atomic_load(&c.done))
                if (read(p[0], sink, sizeof sink) <= 0)
                    sched_yield();
        }
        tu_thread_join(t);
        dup2(saved, 2); /* the checks' reports go to stderr */
        close(saved);
        close(p[0]);
        close(p[1]);
        CHECK(returned);
        CHECK_OK(c.rc);
        if (which == STOP)
            CHECK_OK(vf_engine_start(e));
        if (which != DESTROY_TIMED && which != DESTROY)
            CHECK_OK(vf_engine_destroy(e));
    }
    vf__stall_report_times(2000, 10000);
}

TEST_MAIN("test_guard", 120)
