/*
 * test_promises: promises of the public headers that no other test would
 * catch breaking (issue 27, "every promise is tested"; the table in
 * docs/RELIABILITY.md, "Every promise and its test", names the test of
 * every other promise). Each case names the promise and where it is made.
 *
 * - error_codes_pinned: the VF_E* values are stable (varflow.h, the error
 *   codes): each code against its literal value, not against the map that
 *   defines it;
 * - callbacks_call_in: user code never runs while the engine holds one of
 *   its locks (varflow.h, conventions): a done callback, a free callback
 *   and an op each call back into the engine (push, var create, stats,
 *   version); a lock held around them would deadlock (the watchdog);
 * - done_before_release: `done` runs before the op's vars are released
 *   (vf_done_fn): a reader after a writer sees the writer's done finished;
 * - var_of_never_dereferenced: vf_var_of's address is only a key, never
 *   dereferenced: made-up addresses (1, the top of the address space,
 *   one nothing is mapped at) work and order their ops;
 * - stats_leave_out_waits: vf_engine_stats counts no internal wait op:
 *   after waits from the program and from inside ops, completed and ran
 *   are the program's ops exactly;
 * - shutdown_returns_at_once: vf_engine_shutdown returns while an op
 *   still runs;
 * - wait_on_a_var_the_notice_skipped: a var wait returns VF_ESHUTDOWN
 *   when the notice skipped an op that writes the var;
 * - stop_start_during_destroy: vf_engine_stop and vf_engine_start refuse
 *   with VF_ESHUTDOWN once destroy began;
 * - thread_start_fails: vf_engine_create returns VF_ESYSTEM, with a
 *   detail, when a worker thread cannot be started (a child process whose
 *   address space cannot hold the workers' stacks; not under sanitizers);
 * - engine_info_logs: engine_info (VF_ENGINE_INFO=1) logs to stderr the
 *   ops touching a waited-on var as they run and finish;
 * - profile_outlives_engine: a profile snapshot is independent of the
 *   engine (usable after vf_engine_destroy); an empty one's summary is
 *   NULL rows, 0 of them (vf_profile_summary);
 * - timed_wait_never_and_look: a negative timeout never gives up, 0 only
 *   looks (vf_var_wait_timed);
 * - held_op_fails_at_start: a held op that cannot be pushed at start fails
 *   with that push's code (vf_engine_stop): in a child whose address space
 *   cannot hold the workers' stacks, start returns VF_ESYSTEM and keeps
 *   the ops held; destroy, which starts it first, fails each with
 *   VF_ESYSTEM, once, a held graph launch's ops too (not under
 *   sanitizers).
 */
#include "runner.h"

#include "varflow_profile.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* --------------------------------------------------- error_codes_pinned */

TEST_CASE(error_codes_pinned)
{
    /* "Values are stable; new codes are only appended." */
    static const struct {
        int code, value;
        const char *name;
    } pinned[] = {
        {VF_EINVAL, -1, "VF_EINVAL"},       {VF_ENOMEM, -2, "VF_ENOMEM"},
        {VF_ESTALE, -3, "VF_ESTALE"},       {VF_EXDEV, -4, "VF_EXDEV"},
        {VF_ESHUTDOWN, -5, "VF_ESHUTDOWN"}, {VF_EDEADLK, -6, "VF_EDEADLK"},
        {VF_EALREADY, -7, "VF_EALREADY"},   {VF_EOPFAILED, -8, "VF_EOPFAILED"},
        {VF_ENODEV, -9, "VF_ENODEV"},       {VF_ENOTSUP, -10, "VF_ENOTSUP"},
        {VF_EAGAIN, -11, "VF_EAGAIN"},      {VF_ESKIPPED, -12, "VF_ESKIPPED"},
        {VF_ESYSTEM, -13, "VF_ESYSTEM"},    {VF_EDEVICE, -14, "VF_EDEVICE"},
        {VF_ESTOPPED, -15, "VF_ESTOPPED"},  {VF_ETIMEDOUT, -16, "VF_ETIMEDOUT"},
    };
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        CHECK_EQ(pinned[i].code, pinned[i].value);
        CHECK(strcmp(vf_error_name(pinned[i].value), pinned[i].name) == 0);
    }
}

/* ---------------------------------------------------- callbacks_call_in */

typedef struct call_in {
    vf_engine *e;
    vf_var spare; /* a var no op of the case touches */
    atomic_int from_done, from_free, from_op, failures;
} call_in;

static void call_in_engine(call_in *c, atomic_int *count)
{
    vf_stats st;
    uint64_t version;
    vf_var v = {0};
    if (vf_engine_stats(c->e, &st) != 0 ||
        vf_var_version(c->e, c->spare, &version) != 0 ||
        vf_var_create(c->e, &v) != 0 ||
        vf_engine_push(c->e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}) !=
            0 ||
        vf_var_destroy(c->e, v, NULL, NULL) != 0)
        atomic_fetch_add(&c->failures, 1);
    atomic_fetch_add(count, 1);
}

static int call_in_op(vf_run *run, void *arg)
{
    (void)run;
    call_in *c = arg;
    call_in_engine(c, &c->from_op);
    return 0;
}

static void call_in_done(void *arg, int status)
{
    (void)status;
    call_in *c = arg;
    call_in_engine(c, &c->from_done);
}

static void call_in_free(void *arg)
{
    call_in *c = arg;
    call_in_engine(c, &c->from_free);
}

TEST_KIND_CASE(callbacks_call_in, k)
{
    enum { N = 20 };
    check_context_ = k->name;
    static call_in c;
    memset(&c, 0, sizeof c);
    c.e = tu_engine(k);
    c.spare = tu_var(c.e);
    vf_var x = tu_var(c.e);
    for (int i = 0; i < N; i++) {
        vf_var d = tu_var(c.e);
        CHECK_OK(vf_engine_push(c.e, &(vf_op){.fn = call_in_op,
                                              .arg = &c,
                                              .done = call_in_done,
                                              .reads = VF_VARS(d),
                                              .writes = VF_VARS(x)}));
        CHECK_OK(vf_var_destroy(c.e, d, call_in_free, &c));
    }
    CHECK_OK(vf_engine_wait_all(c.e, NULL));
    CHECK_OK(vf_engine_wait_all(c.e, NULL)); /* what the callbacks pushed */
    CHECK_EQ(atomic_load(&c.from_op), N);
    CHECK_EQ(atomic_load(&c.from_done), N);
    CHECK_EQ(atomic_load(&c.from_free), N);
    CHECK_EQ(atomic_load(&c.failures), 0);
    CHECK_OK(vf_engine_destroy(c.e));
    check_context_ = NULL;
}

/* -------------------------------------------------- done_before_release */

typedef struct release {
    atomic_int done_finished, reader_saw_done, readers;
} release;

static int writer_fn(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static void writer_done(void *arg, int status)
{
    (void)status;
    release *r = arg;
    tu_spin_us(300); /* a reader let in early would overtake this */
    atomic_store(&r->done_finished, 1);
}

static int reader_fn(vf_run *run, void *arg)
{
    (void)run;
    release *r = arg;
    if (atomic_load(&r->done_finished))
        atomic_fetch_add(&r->reader_saw_done, 1);
    atomic_fetch_add(&r->readers, 1);
    return 0;
}

TEST_KIND_CASE(done_before_release, k)
{
    enum { ROUNDS = 30 };
    check_context_ = k->name;
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    static release r[ROUNDS];
    memset(r, 0, sizeof r);
    for (int i = 0; i < ROUNDS; i++) {
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = writer_fn,
                                            .arg = &r[i],
                                            .done = writer_done,
                                            .writes = VF_VARS(x)}));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = reader_fn, .arg = &r[i], .reads = VF_VARS(x)}));
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    for (int i = 0; i < ROUNDS; i++) {
        CHECK_EQ(atomic_load(&r[i].readers), 1);
        CHECK_EQ(atomic_load(&r[i].reader_saw_done), 1);
    }
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

/* -------------------------------------------- var_of_never_dereferenced */

typedef struct step_arg {
    uint64_t *value;
    uint64_t k;
} step_arg;

static int step_fn(vf_run *run, void *arg)
{
    (void)run;
    step_arg *s = arg;
    *s->value = *s->value * 3 + s->k;
    return 0;
}

TEST_KIND_CASE(var_of_never_dereferenced, k)
{
    enum { STEPS = 50 };
    check_context_ = k->name;
    vf_engine *e = tu_engine(k);
    const void *addrs[] = {(const void *)(uintptr_t)1,
                           (const void *)(~(uintptr_t)0 & ~(uintptr_t)7),
                           (const void *)(~(uintptr_t)0),
                           (const void *)(uintptr_t)0xdead0000};
    enum { NADDR = sizeof addrs / sizeof addrs[0] };
    static uint64_t value[NADDR];
    static step_arg steps[NADDR][STEPS];
    for (int a = 0; a < NADDR; a++) {
        value[a] = 1;
        vf_var v, again;
        CHECK_OK(vf_var_of(e, addrs[a], &v));
        CHECK_OK(vf_var_of(e, addrs[a], &again));
        CHECK_EQ(v.id, again.id);
        for (int i = 0; i < STEPS; i++) {
            steps[a][i] = (step_arg){&value[a], (uint64_t)i};
            CHECK_OK(vf_var_of(e, addrs[a], &v));
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = step_fn,
                                                .arg = &steps[a][i],
                                                .writes = VF_VARS(v)}));
        }
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    uint64_t want = 1;
    for (int i = 0; i < STEPS; i++)
        want = want * 3 + (uint64_t)i;
    for (int a = 0; a < NADDR; a++)
        CHECK_EQ(value[a], want);
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

/* ------------------------------------------------ stats_leave_out_waits */

typedef struct waiter_arg {
    vf_var child_out;
    atomic_int rc;
} waiter_arg;

static int nested_waiter(vf_run *run, void *arg)
{
    waiter_arg *w = arg;
    vf_engine *e = vf_run_engine(run);
    int rc = vf_engine_push(
        e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(w->child_out)});
    if (rc == 0)
        rc = vf_var_wait(e, w->child_out, NULL);
    atomic_store(&w->rc, rc);
    return 0;
}

TEST_KIND_CASE(stats_leave_out_waits, k)
{
    enum { N = 20 };
    check_context_ = k->name;
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    waiter_arg w = {.child_out = tu_var(e)};
    for (int i = 0; i < N; i++) {
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}));
        CHECK_OK(vf_var_wait(e, v, NULL));
    }
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nested_waiter, .arg = &w}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(atomic_load(&w.rc));
    CHECK_OK(vf_var_wait(e, v, NULL));
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    /* N ops, the waiter and its child: no wait marker among them. */
    CHECK_EQ(st.completed, (uint64_t)N + 2);
    CHECK_EQ(st.ran, (uint64_t)N + 2);
    CHECK_EQ(st.pending, 0);
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

/* --------------------------------------------- shutdown_returns_at_once */

typedef struct held {
    tu_gate go, started;
    atomic_int finished;
} held;

static int held_op(vf_run *run, void *arg)
{
    (void)run;
    held *h = arg;
    tu_gate_open(&h->started);
    tu_gate_wait(&h->go, TU_TIMEOUT);
    atomic_store(&h->finished, 1);
    return 0;
}

/* Push an op writing `x` that runs `fn` (held_op, or one that calls it)
 * to hold its worker until h->go opens, and wait until it runs. */
static void held_start_fn(held *h, vf_engine *e, vf_var x, vf_sync_fn fn)
{
    memset(h, 0, sizeof *h);
    tu_gate_init(&h->go);
    tu_gate_init(&h->started);
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = fn, .arg = h, .writes = VF_VARS(x)}));
    CHECK(tu_gate_wait(&h->started, TU_TIMEOUT));
}

static void held_start(held *h, vf_engine *e, vf_var x)
{
    held_start_fn(h, e, x, held_op);
}

static void held_end(held *h)
{
    tu_gate_destroy(&h->go);
    tu_gate_destroy(&h->started);
}

TEST_KIND_CASE(shutdown_returns_at_once, k)
{
    if (!k->threaded) /* the naive engine runs the op inside its push */
        return;
    check_context_ = k->name;
    vf_engine *e = tu_engine(k);
    held h;
    vf_var x = tu_var(e);
    held_start(&h, e, x);
    CHECK_OK(vf_engine_shutdown(e)); /* must not wait for the held op */
    CHECK_EQ(atomic_load(&h.finished), 0);
    tu_gate_open(&h.go);
    CHECK_OK(vf_engine_destroy(e));
    CHECK_EQ(atomic_load(&h.finished), 1);
    held_end(&h);
    check_context_ = NULL;
}

/* A var whose writer the shutdown notice skipped: its waits say
 * VF_ESHUTDOWN, pushed alone or in a batch; a var no skipped op writes
 * still waits to 0 (found trying shutdown as a user: the wait returned 0
 * and the program read a value never computed). */
static int set_42(vf_run *run, void *arg)
{
    (void)run;
    *(int *)arg = 42;
    return 0;
}

typedef struct var_waiter {
    vf_engine *e;
    vf_var v;
    int rc;
} var_waiter;

static void *wait_on_var(void *arg)
{
    var_waiter *w = arg;
    w->rc = vf_var_wait(w->e, w->v, NULL);
    return NULL;
}

/* Until `n` ops are pending (a wait's marker counts): true, or false
 * after TU_TIMEOUT. */
static bool until_pending(vf_engine *e, uint64_t n)
{
    for (int i = 0; i < (int)(TU_TIMEOUT * 1000); i++) {
        vf_stats st;
        if (vf_engine_stats(e, &st) == 0 && st.pending == n)
            return true;
        nanosleep(&(struct timespec){0, 1000000L}, NULL);
    }
    return false;
}

/* The skip a wait reports is the one it met when its marker fired: a
 * write the notice skipped after it does not make it VF_ESHUTDOWN, and a
 * delete queued after it, which frees the var's slot, does not hide the
 * one before it (the second reviewer: the wait read the var after its
 * marker had fired, and ops behind it had run meanwhile). */
static void notice_skip_as_the_marker_met_it(const tu_kind *k, bool after)
{
    vf_engine *e = tu_engine(k);
    held h;
    vf_var x = tu_var(e);
    held_start(&h, e, x);
    var_waiter w = {.e = e, .v = x, .rc = 1};
    pthread_t t;
    int other = -1;
    if (!after) /* a skipped write before the wait */
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = set_42, .arg = &other, .writes = VF_VARS(x)}));
    REQUIRE(pthread_create(&t, NULL, wait_on_var, &w) == 0);
    REQUIRE(until_pending(e, after ? 2 : 3)); /* its marker is queued */
    if (after)                                /* a skipped write after it */
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = set_42, .arg = &other, .writes = VF_VARS(x)}));
    else /* a delete after it: the var's slot is freed */
        CHECK_OK(vf_var_destroy(e, x, NULL, NULL));
    CHECK_OK(vf_engine_shutdown(e));
    tu_gate_open(&h.go);
    REQUIRE(pthread_join(t, NULL) == 0);
    if (after)
        CHECK_OK(w.rc);
    else
        CHECK_ERR(w.rc, VF_ESHUTDOWN);
    CHECK_EQ(other, -1);
    CHECK_OK(vf_engine_destroy(e));
    held_end(&h);
}

TEST_KIND_CASE(wait_on_a_var_the_notice_skipped, k)
{
    if (!k->threaded) /* the naive engine runs the op inside its push */
        return;
    check_context_ = k->name;
    for (int bulked = 0; bulked < 2; bulked++) {
        vf_engine *e = tu_engine(k);
        held h;
        vf_var x = tu_var(e), read_only = tu_var(e), y = tu_var(e);
        held_start(&h, e, x);
        int value = -1, other = -1;
        if (bulked)
            CHECK_OK(vf_bulk_set_size(e, 8));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = set_42,
                                            .arg = &value,
                                            .reads = VF_VARS(read_only),
                                            .writes = VF_VARS(x, y)}));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = set_42, .arg = &other, .writes = VF_VARS(y)}));
        CHECK_OK(vf_engine_shutdown(e));
        tu_gate_open(&h.go);
        vf_error err;
        CHECK_ERR(vf_var_wait(e, x, &err), VF_ESHUTDOWN);
        CHECK(strstr(vf_error_detail(), "shutdown notice") != NULL);
        CHECK_ERR(vf_var_wait_timed(e, y, (int64_t)(TU_TIMEOUT * 1000), NULL),
                  VF_ESHUTDOWN);
        CHECK_EQ(value, -1);
        CHECK_EQ(other, -1);
        CHECK_OK(vf_var_wait(e, read_only, NULL));        /* only read */
        CHECK_ERR(vf_var_wait(e, x, NULL), VF_ESHUTDOWN); /* again */
        CHECK_OK(vf_engine_destroy(e));
        held_end(&h);
    }
    notice_skip_as_the_marker_met_it(k, true);
    notice_skip_as_the_marker_met_it(k, false);
    check_context_ = NULL;
}

/* -------------------------------------------- stop_start_during_destroy */

typedef struct destroyer_arg {
    vf_engine *e;
    int rc;
} destroyer_arg;

static void *destroyer(void *arg)
{
    destroyer_arg *d = arg;
    d->rc = vf_engine_destroy(d->e);
    return NULL;
}

TEST_KIND_CASE(stop_start_during_destroy, k)
{
    if (!k->threaded)
        return;
    check_context_ = k->name;
    tu_phase_limit("stop_start_during_destroy", 30);
    held h;
    destroyer_arg d = {.e = tu_engine(k)};
    held_start(&h, d.e, tu_var(d.e));
    pthread_t t = tu_thread_start(destroyer, &d);
    /* Destroy has begun once an outside push is refused. */
    double end = tu_now() + TU_TIMEOUT;
    int rc;
    while ((rc = vf_engine_push(d.e, &(vf_op){.fn = tu_nop})) == 0 &&
           tu_now() < end)
        sched_yield();
    CHECK_ERR(rc, VF_ESHUTDOWN);
    CHECK_ERR(vf_engine_stop(d.e), VF_ESHUTDOWN);
    CHECK(*vf_error_detail() != 0);
    CHECK_ERR(vf_engine_start(d.e), VF_ESHUTDOWN);
    CHECK(*vf_error_detail() != 0);
    tu_gate_open(&h.go);
    tu_thread_join(t);
    CHECK_OK(d.rc);
    CHECK_EQ(atomic_load(&h.finished), 1);
    held_end(&h);
    check_context_ = NULL;
}

/* --------------------------------------------------- thread_start_fails */

/* Limit the address space to what is mapped now plus `extra` bytes. */
static bool limit_address_space(size_t extra)
{
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return false;
    bool ok = fscanf(f, "%ld", &pages) == 1;
    fclose(f);
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) +
                                (rlim_t)extra;
    return ok && setrlimit(RLIMIT_AS, &rl) == 0;
}

/* A sanitizer's runtime maps more address space than these cases leave. */
#if defined(TU_ASAN) || defined(TU_TSAN)
static const bool address_space_limit_fits = false;
#else
static const bool address_space_limit_fits = true;
#endif

TEST_CASE(thread_start_fails)
{
    if (!address_space_limit_fits)
        TEST_SKIP("a sanitizer's runtime needs more address space than the "
                  "limit this case sets");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        /* 64 MiB more than the child maps now: room for the engine, not
         * for a worker with a 256 MiB stack. */
        if (!limit_address_space(64u << 20))
            _exit(3);
        vf_engine *e = NULL;
        int rc = vf_engine_create(&e,
                                  &(vf_config){.type = VF_ENGINE_POOLED,
                                               .cpu_workers = 2,
                                               .worker_stack_kib = 256 * 1024});
        if (rc != VF_ESYSTEM || e != NULL || *vf_error_detail() == 0) {
            fprintf(stderr, "vf_engine_create returned %s (%s)\n",
                    vf_error_name(rc), vf_error_detail());
            _exit(1);
        }
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 3)
        TEST_SKIP("could not set RLIMIT_AS in the child");
    CHECK_EQ(WEXITSTATUS(status), 0);
}

/* ----------------------------------------------------- engine_info_logs */

TEST_CASE(engine_info_logs)
{
    char path[] = "/tmp/vf_promises_info_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    REQUIRE(saved >= 0);
    REQUIRE(dup2(fd, 2) == 2);
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                               .cpu_workers = 1,
                                               .engine_info = true});
    vf_var v = {0}, other = {0};
    if (rc == 0) {
        v = tu_var(e);
        other = tu_var(e);
        CHECK_OK(vf_var_wait(e, v, NULL)); /* watches v */
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                            .name = "watched_op",
                                            .writes = VF_VARS(v)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                            .name = "unwatched_op",
                                            .writes = VF_VARS(other)}));
        CHECK_OK(vf_var_wait(e, v, NULL));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_OK(vf_engine_destroy(e));
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    CHECK_OK(rc);
    char *log = tu_read_file(path);
    unlink(path);
    REQUIRE(log != NULL);
    CHECK(strstr(log, "\"watched_op\"") != NULL);
    CHECK(strstr(log, "dispatch") != NULL);
    CHECK(strstr(log, "complete") != NULL);
    CHECK(strstr(log, "unwatched_op") == NULL);
    if (strstr(log, "\"watched_op\"") == NULL)
        fprintf(stderr, "engine_info wrote:\n%s\n", log);
    free(log);
}

/* ---------------------------------------------- profile_outlives_engine */

TEST_CASE(profile_outlives_engine)
{
    vf_engine *e = tu_engine(&tu_kinds[2]); /* pooled/2 */
    CHECK_OK(vf_profile_start(e));
    vf_var v = tu_var(e);
    for (int i = 0; i < 5; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                            .name = i % 2 ? "odd" : "even",
                                            .writes = VF_VARS(v)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    CHECK_OK(vf_engine_destroy(e));
    /* The engine is gone; the snapshot is not. */
    REQUIRE(p != NULL);
    CHECK_EQ(vf_profile_count(p), 5);
    for (size_t i = 0; i < 5; i++) {
        const vf_profile_record *r = vf_profile_at(p, i);
        REQUIRE(r != NULL);
        CHECK_EQ(r->id, i + 1);
        CHECK(strcmp(r->name, i % 2 ? "odd" : "even") == 0);
    }
    CHECK_EQ(vf_profile_engine_type(p), VF_ENGINE_POOLED);
    vf_profile_row *rows = NULL;
    size_t nrows = 0;
    CHECK_OK(vf_profile_summary(p, VF_PROFILE_SORT_NAME, &rows, &nrows));
    CHECK_EQ(nrows, 2);
    if (nrows == 2) {
        CHECK(strcmp(rows[0].name, "even") == 0);
        CHECK_EQ(rows[0].count, 3);
    }
    vf_profile_summary_destroy(rows);
    CHECK_OK(vf_profile_write(p, "/dev/null", VF_PROFILE_CHROME_JSON));
    vf_profile_destroy(p);

    /* An empty snapshot: no rows, NULL. */
    e = tu_engine(&tu_kinds[1]);
    CHECK_OK(vf_profile_start(e));
    CHECK_OK(vf_profile_take(e, &p));
    CHECK_EQ(vf_profile_count(p), 0);
    rows = (vf_profile_row *)&nrows; /* must be overwritten */
    nrows = 7;
    CHECK_OK(vf_profile_summary(p, VF_PROFILE_SORT_TOTAL, &rows, &nrows));
    CHECK(rows == NULL);
    CHECK_EQ(nrows, 0);
    vf_profile_summary_destroy(rows);
    vf_profile_destroy(p);
    CHECK_OK(vf_engine_destroy(e));
}

/* -------------------------------------------- timed_wait_never_and_look */

static void *open_later(void *arg)
{
    tu_spin_us(20000);
    tu_gate_open(arg);
    return NULL;
}

TEST_KIND_CASE(timed_wait_never_and_look, k)
{
    if (!k->threaded)
        return;
    check_context_ = k->name;
    vf_engine *e = tu_engine(k);
    held h;
    vf_var x = tu_var(e);
    held_start(&h, e, x);
    CHECK_ERR(vf_var_wait_timed(e, x, 0, NULL), VF_ETIMEDOUT); /* a look */
    pthread_t t = tu_thread_start(open_later, &h.go);
    CHECK_OK(vf_var_wait_timed(e, x, -1, NULL)); /* never gives up */
    CHECK_EQ(atomic_load(&h.finished), 1);
    tu_thread_join(t);
    CHECK_OK(vf_var_wait_timed(e, x, 0, NULL)); /* settled: the look says 0 */
    CHECK_OK(vf_engine_wait_all_timed(e, -1, NULL));
    CHECK_OK(vf_engine_wait_all_timed(e, 0, NULL));
    CHECK_OK(vf_engine_destroy(e));
    held_end(&h);
    check_context_ = NULL;
}

/* -------------------------------------------- timed_waits_leave_nothing */

static int held_fail(vf_run *run, void *arg)
{
    held_op(run, arg);
    return 9;
}

/* An engine of kind `k` bounded to `max_inflight`, vars *x and *y, and a
 * writer of *x held running (it fails with 9 once let go: h->go). */
static vf_engine *bounded_with_failing_writer(const tu_kind *k,
                                              int max_inflight, vf_var *x,
                                              vf_var *y, held *h)
{
    vf_config cfg = k->cfg;
    cfg.max_inflight = max_inflight;
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &cfg));
    REQUIRE(e != NULL);
    *x = tu_var(e);
    *y = tu_var(e);
    held_start_fn(h, e, *x, held_fail);
    return e;
}

/* Timed waits on a var whose writer runs, each timing out, leave at most
 * one marker behind (the next wait takes it over), a look (0) none: they
 * count once at most in pending and in the in-flight bound, however many;
 * the wait that outlasts the writer reports its failure. */
TEST_KIND_CASE(timed_waits_leave_nothing, k)
{
    if (!k->threaded) /* the naive engine runs the op inside its push */
        return;
    check_context_ = k->name;
    vf_var x, y;
    held h;
    vf_engine *e = bounded_with_failing_writer(k, 3, &x, &y, &h);
    vf_stats st;
    for (int i = 0; i < 1000; i++)
        CHECK_ERR(vf_var_wait_timed(e, x, 0, NULL), VF_ETIMEDOUT);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 1); /* the writer: a look leaves nothing */
    for (int i = 0; i < 20; i++)
        CHECK_ERR(vf_var_wait_timed(e, x, 1, NULL), VF_ETIMEDOUT);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 2); /* and one marker, taken over by each wait */
    /* Under the bound of 3: a push does not wait (nor fail). */
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(y), .nonblocking = true}));
    tu_gate_open(&h.go);
    vf_error err;
    CHECK_ERR(vf_var_wait_timed(e, x, -1, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 9);
    CHECK_OK(vf_var_wait(e, x, NULL)); /* reported once */
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 0);
    CHECK_OK(vf_engine_destroy(e));
    held_end(&h);
    check_context_ = NULL;
}

/* ------------------------------------- timed_waits_of_threads_leave_few */

typedef struct poller {
    vf_engine *e;
    vf_var v;
    atomic_bool stop;
    atomic_int polls, other;
} poller;

static void *poll_var(void *arg)
{
    poller *p = arg;
    while (!atomic_load(&p->stop)) {
        int rc = vf_var_wait_timed(p->e, p->v, 1, NULL);
        atomic_fetch_add(rc == VF_ETIMEDOUT ? &p->polls : &p->other, 1);
    }
    return NULL;
}

/* Timed waits of several threads on a var whose writer runs leave about a
 * marker per thread, not one a poll: with max_inflight 10 and 4 threads
 * polling, an unrelated push finds room. Found trying timed waits from
 * several threads as a user: 2 threads left 1,246 markers in a second,
 * and a push that was to complete the writer waited for room for ever. */
TEST_KIND_CASE(timed_waits_of_threads_leave_few, k)
{
    if (!k->threaded) /* the naive engine runs the op inside its push */
        return;
    check_context_ = k->name;
    enum { THREADS = 4 };
    vf_var x, y;
    held h;
    vf_engine *e = bounded_with_failing_writer(k, 2 + 2 * THREADS, &x, &y, &h);
    poller p = {.e = e, .v = x};
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        t[i] = tu_thread_start(poll_var, &p);
    double until = tu_now() + 10.0;
    while (atomic_load(&p.polls) < 400 && tu_now() < until)
        tu_spin_us(1000);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    /* The writer and, per poller, its live marker and at most one more:
     * the one its last wait gave up, until that wait has taken it off the
     * queue (or, at the tail, the next wait took it over). */
    if (st.pending > 1 + 2 * THREADS)
        CHECK_REPORT_("%llu pending after %d polls (at most %d expected)",
                      (unsigned long long)st.pending, atomic_load(&p.polls),
                      1 + 2 * THREADS);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(y), .nonblocking = true}));
    atomic_store(&p.stop, true);
    for (int i = 0; i < THREADS; i++)
        tu_thread_join(t[i]);
    CHECK_EQ(atomic_load(&p.other), 0);
    tu_gate_open(&h.go);
    vf_error err;
    CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 9);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 0);
    CHECK_OK(vf_engine_destroy(e));
    held_end(&h);
    check_context_ = NULL;
}

/* Timed waits polling a var whose writer runs, with a reader of the var
 * pushed before each poll, leave at most two markers (the header: a
 * marker a thread, two while one gives up), not one a poll: with the
 * in-flight bound the writer, the readers and two more, every reader finds
 * room. Before, a marker given up at the var's tail stayed there when a
 * reader was pushed after it, and the next poll queued one more: a marker
 * a poll (found by an auditor: 200 polls left 200 markers, and with
 * max_inflight 64 only 32 readers found room). */
TEST_KIND_CASE(timed_polls_between_pushes_leave_few, k)
{
    if (!k->threaded) /* the naive engine runs the op inside its push */
        return;
    check_context_ = k->name;
    enum { POLLS = 40 };
    vf_var x, y;
    held h;
    vf_engine *e = bounded_with_failing_writer(k, 1 + POLLS + 2, &x, &y, &h);
    vf_stats st;
    for (int i = 0; i < POLLS; i++) {
        int rc = vf_engine_push(
            e,
            &(vf_op){.fn = tu_nop, .reads = VF_VARS(x), .nonblocking = true});
        if (rc != 0) {
            CHECK_REPORT_("reader %d of %d: %s (no room)", i + 1, POLLS,
                          vf_error_name(rc));
            break;
        }
        CHECK_ERR(vf_var_wait_timed(e, x, 1, NULL), VF_ETIMEDOUT);
    }
    CHECK_OK(vf_engine_stats(e, &st));
    if (st.pending > 1 + POLLS + 2)
        CHECK_REPORT_("%llu pending after %d polls (at most %d expected)",
                      (unsigned long long)st.pending, POLLS, 1 + POLLS + 2);
    tu_gate_open(&h.go);
    vf_error err;
    CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 9);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 0);
    CHECK_OK(vf_engine_destroy(e));
    held_end(&h);
    check_context_ = NULL;
}

/* ----------------------------------------------- held_op_fails_at_start */

static atomic_int held_calls, held_esystem;

static void held_done(void *arg, int status)
{
    (void)arg;
    atomic_fetch_add(&held_calls, 1);
    if (status == VF_ESYSTEM)
        atomic_fetch_add(&held_esystem, 1);
}

/* The child's part: 0 when the promise held, 3 when the limit could not
 * be set, 1 (saying why) otherwise. */
static int held_child(void)
{
    enum { PUSHED = 5, LAUNCHED = 2, OPS = PUSHED + LAUNCHED };
    vf_engine *e = NULL;
    if (vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                          .cpu_workers = 2,
                                          .worker_stack_kib = 256 * 1024}) != 0)
        return 1;
    vf_var v;
    if (vf_var_create(e, &v) != 0)
        return 1;
    /* A graph's launch is held too, and its ops fail as pushed ones. */
    vf_graph *g = NULL;
    if (vf_graph_begin(e) != 0)
        return 1;
    for (int i = 0; i < LAUNCHED; i++)
        if (vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                       .done = held_done,
                                       .writes = VF_VARS(v)}) != 0)
            return 1;
    if (vf_graph_end(e, &g) != 0 || vf_engine_stop(e) != 0 ||
        vf_graph_launch(e, g) != 0)
        return 1;
    for (int i = 0; i < PUSHED; i++)
        if (vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                       .done = held_done,
                                       .writes = VF_VARS(v)}) != 0)
            return 1;
    if (!limit_address_space(64u << 20))
        return 3;
    int rc = vf_engine_start(e); /* no room for the workers' stacks */
    if (rc != VF_ESYSTEM || atomic_load(&held_calls) != 0) {
        fprintf(stderr, "vf_engine_start: %s, %d done calls\n",
                vf_error_name(rc), atomic_load(&held_calls));
        return 1;
    }
    /* Destroy starts it first and cannot either: every held op fails with
     * that code, once, and destroy returns. */
    rc = vf_engine_destroy(e);
    if (rc != 0 || atomic_load(&held_calls) != OPS ||
        atomic_load(&held_esystem) != OPS) {
        fprintf(stderr, "vf_engine_destroy: %s, %d done calls, %d ESYSTEM\n",
                vf_error_name(rc), atomic_load(&held_calls),
                atomic_load(&held_esystem));
        return 1;
    }
    return 0;
}

TEST_CASE(held_op_fails_at_start)
{
    if (!address_space_limit_fits)
        TEST_SKIP("a sanitizer's runtime needs more address space than the "
                  "limit this case sets");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
        _exit(held_child());
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 3)
        TEST_SKIP("could not set RLIMIT_AS in the child");
    CHECK_EQ(WEXITSTATUS(status), 0);
}

TEST_MAIN("test_promises", 120)
