/*
 * test_bad_input_sweep: the invalid arguments tests/test_bad_input.c and
 * the module tests do not reach (issue 4, point 4), each checked for the
 * code the header documents, with a detail, no crash and no side effect.
 * Together with test_bad_input.c (NULL engine and out pointers, bad lists,
 * bad functions, devices, properties, made-up / foreign / deleted handles,
 * push during destroy, destroy inside an op), test_operator.c (foreign and
 * bad operators), test_async.c (vf_completion_finish twice), test_wait_nested.c
 * (waits that would deadlock), test_lifecycle.c (bad type and worker
 * fields and variables) and test_profile.c (profile files and formats),
 * every public function meets each kind of bad input. Here:
 *
 * - config: max_inflight and profile_max_records negative, worker counts
 *   beyond the maximum; VF_MAX_INFLIGHT, VF_CPU_WORKER_NTHREADS,
 *   VF_PROFILE_MAX_RECORDS set to 0, negative, non-numeric, trailing junk,
 *   out of range; VF_ENGINE_INFO not 0/1: VF_EINVAL with a detail naming
 *   the field or variable, and *out left NULL. Empty variables mean unset.
 * - a var whose delete is still pending (queued behind a held op): a
 *   second delete, pushes reading or writing it, wait_var, vf_var_version,
 *   vf_operator_create: VF_ESTALE at once; the pending delete still runs its
 *   free callback exactly once;
 * - var lists with huge counts (INT_MAX; reads + writes overflowing int):
 *   VF_EINVAL without touching the (too short) arrays, for vf_engine_push and
 *   vf_operator_create; negative counts for vf_operator_create;
 * - operators: NULL engine for new/push/delete (VF_EINVAL); a deleted
 *   operator that still has a run in flight: push and a second delete get
 *   VF_EINVAL; a bad device (VF_ENODEV); a deleted var (VF_ESTALE);
 * - a completion handle with an odd ticket (never handed out): VF_EINVAL;
 * - destroy: a second destroy while the first drains gets VF_ESHUTDOWN;
 *   from outside ops vf_var_create, vf_var_destroy, vf_operator_create and
 *   vf_operator_push get VF_ESHUTDOWN; from inside the draining op they
 *   work; nothing refused ever runs or calls `done`;
 * - accessors given NULL: vf_engine_type_of and vf_profile_engine_type
 *   (VF_ENGINE_INVALID, never VF_ENGINE_DEFAULT, with a detail),
 *   vf_engine_num_workers, vf_engine_type_name of a bad type, every
 *   vf_profile_* function
 *   (VF_EINVAL where a code is returned, NULL / 0 otherwise), out-of-range
 *   indexes of vf_profile_at and vf_profile_worker_pool, a bad sort key.
 */
#include "runner.h"

#include <errno.h>

#include <limits.h>

#include "profile/trace_load.h"
#include <varflow_profile.h>

static atomic_int ran, done_calls;

static int nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_fetch_add(&ran, 1);
    return 0;
}

static void keep(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    *(vf_completion *)arg = done;
}

static void count_done(void *arg, int status)
{
    (void)arg;
    (void)status;
    atomic_fetch_add(&done_calls, 1);
}

/* `rc` must be `code`, with a detail; nothing ran or called done since
 * `ran0` / `done0`. */
static void expect_code(int rc, int code, const char *what)
{
    if (rc != code)
        CHECK_REPORT_("%s: returned %s, expected %s", what, vf_error_name(rc),
                      vf_error_name(code));
    else if (code != 0 && vf_error_detail()[0] == 0)
        CHECK_REPORT_("%s: %s without a detail", what, vf_error_name(code));
}

/* ------------------------------------------------------------ config */

/* Every count read from the environment: each must be decimal digits
 * only, in range. */
static const char *const count_vars[] = {"VF_CPU_WORKER_NTHREADS",
                                         "VF_CPU_PRIORITY_NTHREADS",
                                         "VF_MAX_INFLIGHT",
                                         "VF_PROFILE_MAX_RECORDS",
                                         "VF_GPU_WORKER_NTHREADS",
                                         "VF_GPU_COPY_NTHREADS",
                                         "VF_GPU_PRIORITY_NTHREADS",
                                         "VF_EMULATED_LATENCY_US",
                                         "VF_EMULATED_MB_PER_S",
                                         "VF_FORK_CHILD_NTHREADS",
                                         "VF_BULK_SIZE",
                                         "VF_IDLE_SPIN_US"};

static void clear_env(void)
{
    unsetenv("VF_ENGINE_TYPE");
    unsetenv("VF_CPU_WORKER_NTHREADS");
    unsetenv("VF_CPU_PRIORITY_NTHREADS");
    unsetenv("VF_MAX_INFLIGHT");
    unsetenv("VF_PROFILE_MAX_RECORDS");
    unsetenv("VF_ENGINE_INFO");
    unsetenv("VF_PROFILE");
    for (size_t i = 0; i < sizeof count_vars / sizeof *count_vars; i++)
        unsetenv(count_vars[i]);
}

/* vf_engine_create must refuse with VF_EINVAL, a detail mentioning
 * `needle`, and *out NULL. */
static void refuse(const vf_config *cfg, const char *needle, const char *what)
{
    vf_engine *e = (vf_engine *)(uintptr_t)1; /* must be overwritten */
    int rc = vf_engine_create(&e, cfg);
    if (rc != VF_EINVAL) {
        CHECK_REPORT_("%s: create returned %s, expected VF_EINVAL", what,
                      vf_error_name(rc));
        if (rc == 0 && e != NULL)
            CHECK_OK(vf_engine_destroy(e));
        return;
    }
    if (e != NULL)
        CHECK_REPORT_("%s: *out not NULL after a failed create", what);
    if (strstr(vf_error_detail(), needle) == NULL)
        CHECK_REPORT_("%s: detail '%s' does not name '%s'", what,
                      vf_error_detail(), needle);
}

static void accept(const vf_config *cfg, const char *what)
{
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, cfg);
    if (rc != 0) {
        CHECK_REPORT_("%s: create returned %s (%s)", what, vf_error_name(rc),
                      vf_error_detail());
        return;
    }
    CHECK_OK(vf_engine_destroy(e));
}

static void env_refused(const char *var, const char *value,
                        const vf_config *cfg)
{
    char what[128];
    snprintf(what, sizeof what, "%s=\"%s\"", var, value);
    setenv(var, value, 1);
    refuse(cfg, what, what); /* the detail names the variable and value */
    unsetenv(var);
}

TEST_CASE(config)
{
    clear_env();
    const vf_config pooled = {.type = VF_ENGINE_POOLED, .cpu_workers = 1};
    refuse(&(vf_config){.type = VF_ENGINE_POOLED, .max_inflight = -1},
           "max_inflight", "max_inflight -1");
    refuse(&(vf_config){.type = VF_ENGINE_POOLED, .max_inflight = INT_MIN},
           "max_inflight", "max_inflight INT_MIN");
    refuse(&(vf_config){.type = VF_ENGINE_POOLED, .profile_max_records = -7},
           "profile_max_records", "profile_max_records -7");
    refuse(&(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1 << 20},
           "cpu_workers", "cpu_workers 2^20");
    refuse(&(vf_config){.type = VF_ENGINE_PERDEVICE,
                        .cpu_workers = 1,
                        .cpu_priority_workers = INT_MAX},
           "cpu_priority_workers", "cpu_priority_workers INT_MAX");
    refuse(&(vf_config){.type = VF_ENGINE_INVALID}, "type", "type -1");

    /* Decimal digits only: no sign, space, suffix or base prefix. */
    static const char *bad_counts[] = {
        "-5", "abc", "12x", "3 ",  "99999999999", "0x10", "1e3", "+",
        " 3", "+3",  "\t3", "3\n", "-0",          "1 2",  "3.0", "٣"};
    for (size_t v = 0; v < sizeof count_vars / sizeof *count_vars; v++)
        for (size_t i = 0; i < sizeof bad_counts / sizeof *bad_counts; i++)
            env_refused(count_vars[v], bad_counts[i],
                        &(vf_config){.type = VF_ENGINE_PERDEVICE});
    /* 0 is out of range, but where it means none: VF_BULK_SIZE (off),
     * VF_IDLE_SPIN_US (no spinning), VF_EMULATED_LATENCY_US (no latency)
     * and VF_EMULATED_MB_PER_S (no limit), their defaults. */
    for (size_t v = 0; v < sizeof count_vars / sizeof *count_vars; v++) {
        const char *var = count_vars[v];
        if (strcmp(var, "VF_BULK_SIZE") != 0 &&
            strcmp(var, "VF_IDLE_SPIN_US") != 0 &&
            strcmp(var, "VF_EMULATED_LATENCY_US") != 0 &&
            strcmp(var, "VF_EMULATED_MB_PER_S") != 0) {
            env_refused(var, "0", &(vf_config){.type = VF_ENGINE_PERDEVICE});
            continue;
        }
        setenv(var, "0", 1);
        accept(&(vf_config){.type = VF_ENGINE_PERDEVICE}, var);
        unsetenv(var);
    }
    /* The range a refusal states is the one taken. */
    setenv("VF_BULK_SIZE", "x", 1);
    refuse(&pooled, "0 for none or 1..4096", "VF_BULK_SIZE=x: its range");
    unsetenv("VF_BULK_SIZE");
    setenv("VF_WORKER_STACK_KIB", "64", 1);
    refuse(&pooled, "128..1048576", "VF_WORKER_STACK_KIB=64: its range");
    unsetenv("VF_WORKER_STACK_KIB");
    refuse(&(vf_config){.type = VF_ENGINE_POOLED, .worker_stack_kib = -1},
           "128..1048576", "worker_stack_kib -1: its range");
    refuse(&(vf_config){.type = VF_ENGINE_POOLED, .idle_spin_us = 100001},
           "or -1 for none", "idle_spin_us 100001: its range");
    setenv("VF_IDLE_SPIN_US", "100001", 1);
    refuse(&pooled, "0 for none or 1..100000", "VF_IDLE_SPIN_US: its range");
    unsetenv("VF_IDLE_SPIN_US");
    env_refused("VF_CPU_WORKER_NTHREADS", "1025",
                &(vf_config){.type = VF_ENGINE_POOLED});
    env_refused("VF_BULK_SIZE", "4097", &pooled);
    env_refused("VF_IDLE_SPIN_US", "100001", &pooled);
    refuse(&(vf_config){.type = VF_ENGINE_POOLED, .idle_spin_us = -2},
           "idle_spin_us", "idle_spin_us -2");
    refuse(&(vf_config){.type = VF_ENGINE_POOLED, .idle_spin_us = 100001},
           "idle_spin_us", "idle_spin_us 100001");
    /* Spinning off (-1, or 0 in the environment), or as long as allowed. */
    accept(&(vf_config){.type = VF_ENGINE_POOLED, .idle_spin_us = -1},
           "idle_spin_us -1");
    accept(&(vf_config){.type = VF_ENGINE_POOLED, .idle_spin_us = 100000},
           "idle_spin_us 100000");
    setenv("VF_IDLE_SPIN_US", "0", 1);
    accept(&pooled, "VF_IDLE_SPIN_US=0");
    unsetenv("VF_IDLE_SPIN_US");
    /* Digits in range are taken, a leading zero included. */
    setenv("VF_CPU_WORKER_NTHREADS", "03", 1);
    {
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED}));
        REQUIRE(e != NULL);
        CHECK_EQ(vf_engine_num_workers(e), 3);
        CHECK_OK(vf_engine_destroy(e));
    }
    unsetenv("VF_CPU_WORKER_NTHREADS");
    env_refused("VF_ENGINE_INFO", "yes", &pooled);
    env_refused("VF_ENGINE_INFO", "2", &pooled);
    clear_env();

    /* Empty variables mean unset. */
    setenv("VF_MAX_INFLIGHT", "", 1);
    setenv("VF_CPU_WORKER_NTHREADS", "", 1);
    setenv("VF_PROFILE_MAX_RECORDS", "", 1);
    setenv("VF_ENGINE_INFO", "", 1);
    accept(&(vf_config){.type = VF_ENGINE_POOLED}, "empty variables");
    clear_env();
    /* A good variable is taken (so the refusals above were about the
     * values): VF_MAX_INFLIGHT=2 on the naive engine, two async ops in
     * flight, a third nonblocking push gets VF_EAGAIN. */
    setenv("VF_MAX_INFLIGHT", "2", 1);
    {
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_NAIVE}));
        REQUIRE(e != NULL);
        static vf_completion held_c[2];
        for (int i = 0; i < 2; i++)
            CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keep,
                                                .arg = &held_c[i],
                                                .nonblocking = true}));
        CHECK_ERR(vf_engine_push(e, &(vf_op){.fn = nop, .nonblocking = true}),
                  VF_EAGAIN);
        for (int i = 0; i < 2; i++)
            CHECK_OK(vf_completion_finish(held_c[i], 0, NULL));
        CHECK_OK(vf_engine_destroy(e));
    }
    clear_env();
    CHECK_ERR(vf_engine_create(NULL, &pooled), VF_EINVAL);
}

/* ------------------------------------------------------------ pending delete
 */

typedef struct held {
    tu_gate go, started;
} held;

static int hold(vf_run *run, void *arg)
{
    (void)run;
    held *h = arg;
    tu_gate_open(&h->started);
    CHECK(tu_gate_wait(&h->go, TU_TIMEOUT));
    return 0;
}

static atomic_int freed;

static void free_cb(void *arg)
{
    (void)arg;
    atomic_fetch_add(&freed, 1);
}

TEST_KIND_CASE(pending_delete, k)
{
    tu_phase_limit("pending_delete", 30);
    if (!k->threaded)
        return; /* the holding op would run inside its own push */
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    held h;
    tu_gate_init(&h.go);
    tu_gate_init(&h.started);
    atomic_store(&freed, 0);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = hold, .arg = &h, .reads = VF_VARS(x)}));
    CHECK(tu_gate_wait(&h.started, TU_TIMEOUT));
    CHECK_OK(vf_var_destroy(e, x, free_cb, NULL)); /* queued behind hold */
    int ran0 = atomic_load(&ran), done0 = atomic_load(&done_calls);
    uint64_t ver;
    vf_operator *opr = NULL;
    expect_code(vf_var_destroy(e, x, free_cb, NULL), VF_ESTALE,
                "second delete while the first is pending");
    expect_code(
        vf_engine_push(
            e, &(vf_op){.fn = nop, .done = count_done, .reads = VF_VARS(x)}),
        VF_ESTALE, "push reading a var being deleted");
    expect_code(vf_engine_push(e, &(vf_op){.fn = nop,
                                           .done = count_done,
                                           .reads = VF_VARS(y),
                                           .writes = VF_VARS(x)}),
                VF_ESTALE, "push writing a var being deleted");
    expect_code(vf_var_wait(e, x, NULL), VF_ESTALE,
                "wait on a var being deleted");
    expect_code(vf_var_version(e, x, &ver), VF_ESTALE,
                "version of a var being deleted");
    /* An operator over a var whose delete is pending is refused at once,
     * like a push (it once was accepted and refused at its first push). */
    int rc = vf_operator_create(e, &(vf_op){.fn = nop, .reads = VF_VARS(x)},
                                &opr);
    expect_code(rc, VF_ESTALE, "operator over a var being deleted");
    CHECK(opr == NULL);
    CHECK_EQ(atomic_load(&freed), 0);
    tu_gate_open(&h.go);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&freed), 1);
    CHECK_EQ(atomic_load(&ran), ran0);
    CHECK_EQ(atomic_load(&done_calls), done0);
    /* And after it ran: still refused, the callback not run again. */
    expect_code(vf_var_destroy(e, x, free_cb, NULL), VF_ESTALE,
                "delete after the delete ran");
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&freed), 1);
    tu_finish_engine(e);
    tu_gate_destroy(&h.go);
    tu_gate_destroy(&h.started);
}

/* ------------------------------------------------------------ lists */

TEST_KIND_CASE(huge_lists, k)
{
    tu_phase_limit("huge_lists", 30);
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    vf_var one[1] = {x}; /* far shorter than the counts claim */
    vf_operator *opr = NULL;
    int ran0 = atomic_load(&ran);
    expect_code(vf_engine_push(e, &(vf_op){.fn = nop,
                                           .done = count_done,
                                           .reads = {one, INT_MAX}}),
                VF_EINVAL, "reads.count INT_MAX");
    expect_code(vf_engine_push(e, &(vf_op){.fn = nop,
                                           .done = count_done,
                                           .reads = {one, INT_MAX},
                                           .writes = {one, INT_MAX}}),
                VF_EINVAL, "reads + writes overflowing int");
    expect_code(vf_engine_push(e, &(vf_op){.fn = nop,
                                           .done = count_done,
                                           .writes = {one, INT_MIN}}),
                VF_EINVAL, "writes.count INT_MIN");
    expect_code(vf_operator_create(
                    e, &(vf_op){.fn = nop, .writes = {one, INT_MAX}}, &opr),
                VF_EINVAL, "operator writes.count INT_MAX");
    expect_code(
        vf_operator_create(e, &(vf_op){.fn = nop, .reads = {one, -1}}, &opr),
        VF_EINVAL, "operator reads.count -1");
    expect_code(
        vf_operator_create(e, &(vf_op){.fn = nop, .writes = {one, -3}}, &opr),
        VF_EINVAL, "operator writes.count -3");
    expect_code(
        vf_operator_create(
            e, &(vf_op){.fn = nop, .device = {VF_DEVICE_CUDA, 99}}, &opr),
        VF_ENODEV, "operator on CUDA device 99");
    CHECK(opr == NULL);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&ran), ran0);
    CHECK_EQ(atomic_load(&done_calls), 0);
    tu_finish_engine(e);
}

/* ------------------------------------------------------------ operators */

TEST_KIND_CASE(operators, k)
{
    tu_phase_limit("operators", 30);
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    vf_operator *opr = NULL;
    expect_code(vf_operator_create(NULL, &(vf_op){.fn = nop}, &opr), VF_EINVAL,
                "vf_operator_create(NULL engine)");
    CHECK(opr == NULL);
    CHECK_OK(
        vf_operator_create(e, &(vf_op){.fn = nop, .writes = VF_VARS(x)}, &opr));
    REQUIRE(opr != NULL);
    expect_code(vf_operator_push(NULL, opr, 0), VF_EINVAL,
                "vf_operator_push(NULL engine)");
    expect_code(vf_operator_destroy(NULL, opr), VF_EINVAL,
                "vf_operator_destroy(NULL engine)");
    if (k->threaded) {
        /* A run held in flight keeps the deleted operator's memory alive,
         * so using the handle again is defined: it is refused. */
        held h;
        tu_gate_init(&h.go);
        tu_gate_init(&h.started);
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = hold, .arg = &h, .writes = VF_VARS(x)}));
        CHECK_OK(vf_operator_push(e, opr, 0)); /* queued behind hold */
        CHECK_OK(vf_operator_destroy(e, opr));
        int ran0 = atomic_load(&ran);
        expect_code(vf_operator_push(e, opr, 0), VF_EINVAL,
                    "push of a deleted operator");
        expect_code(vf_operator_destroy(e, opr), VF_EINVAL,
                    "second delete of an operator");
        tu_gate_open(&h.go);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&ran), ran0 + 1); /* only the queued run */
        tu_gate_destroy(&h.go);
        tu_gate_destroy(&h.started);
    } else {
        CHECK_OK(vf_operator_destroy(e, opr));
    }
    /* An operator whose var was deleted is refused at push. */
    vf_var y = tu_var(e);
    CHECK_OK(
        vf_operator_create(e, &(vf_op){.fn = nop, .reads = VF_VARS(y)}, &opr));
    CHECK_OK(vf_var_destroy(e, y, NULL, NULL));
    expect_code(vf_operator_push(e, opr, 0), VF_ESTALE,
                "operator over a deleted var");
    CHECK_OK(vf_operator_destroy(e, opr));
    tu_finish_engine(e);
}

/* ------------------------------------------------------------ completion */

TEST_CASE(completions)
{
    int dummy;
    vf_completion odd = {&dummy, 1};
    expect_code(vf_completion_finish(odd, 0, NULL), VF_EINVAL,
                "completion with an odd ticket");
    vf_completion odd2 = {&dummy, 12345};
    expect_code(vf_completion_finish(odd2, 3, "x"), VF_EINVAL,
                "completion with an odd ticket and a failure");
}

/* ------------------------------------------------------------ destroy */

typedef struct drain {
    vf_engine *e;
    vf_var x;
    held h;
    int destroy_rc;
    int inside_var_rc, inside_push_rc, inside_opr_rc, inside_opr_del_rc;
    int done_push_rc;
    vf_operator *opr;
} drain;

/* The long op's done: outside the engine's ops (its op has finished), so
 * its push is refused once destroy has begun (varflow.h, destroy). */
static void push_from_done(void *arg, int status)
{
    drain *d = arg;
    (void)status;
    d->done_push_rc = vf_engine_push(d->e, &(vf_op){.fn = nop});
}

static int long_op(vf_run *run, void *arg)
{
    drain *d = arg;
    tu_gate_open(&d->h.started);
    CHECK(tu_gate_wait(&d->h.go, TU_TIMEOUT));
    /* Destroy has begun: from inside an op these still work. */
    vf_engine *e = vf_run_engine(run);
    vf_var v = {0};
    d->inside_var_rc = vf_var_create(e, &v);
    d->inside_push_rc = vf_engine_push(
        e, &(vf_op){.fn = nop, .writes = VF_VARS(v)});
    d->inside_opr_rc = vf_operator_push(e, d->opr, 0);
    d->inside_opr_del_rc = vf_operator_destroy(e, d->opr);
    return 0;
}

static void *destroyer(void *arg)
{
    drain *d = arg;
    d->destroy_rc = vf_engine_destroy(d->e);
    return NULL;
}

TEST_KIND_CASE(during_destroy, k)
{
    tu_phase_limit("during_destroy", 30);
    if (!k->threaded)
        return;
    drain d;
    memset(&d, 0, sizeof d);
    tu_gate_init(&d.h.go);
    tu_gate_init(&d.h.started);
    d.e = tu_engine(k);
    d.x = tu_var(d.e);
    vf_var y = tu_var(d.e);
    CHECK_OK(vf_operator_create(d.e, &(vf_op){.fn = nop, .reads = VF_VARS(y)},
                                &d.opr));
    CHECK_OK(vf_engine_push(d.e, &(vf_op){.fn = long_op,
                                          .arg = &d,
                                          .done = push_from_done,
                                          .writes = VF_VARS(d.x)}));
    CHECK(tu_gate_wait(&d.h.started, TU_TIMEOUT));
    pthread_t th = tu_thread_start(destroyer, &d);
    /* Until destroy has begun, a push is accepted (and will run). */
    int ran_start = atomic_load(&ran), accepted = 0;
    double end = tu_now() + TU_TIMEOUT;
    int rc;
    while ((rc = vf_engine_push(d.e, &(vf_op){.fn = nop})) == 0 &&
           tu_now() < end) {
        accepted++;
        sched_yield();
    }
    CHECK_ERR(rc, VF_ESHUTDOWN);
    int done0 = atomic_load(&done_calls);
    vf_var v = {0};
    vf_operator *o2 = NULL;
    expect_code(vf_engine_destroy(d.e), VF_ESHUTDOWN,
                "second destroy while the first drains");
    expect_code(vf_var_create(d.e, &v), VF_ESHUTDOWN,
                "vf_var_create during destroy");
    int freed0 = atomic_load(&freed);
    expect_code(vf_var_destroy(d.e, y, free_cb, NULL), VF_ESHUTDOWN,
                "vf_var_destroy during destroy");
    CHECK_EQ(atomic_load(&freed), freed0); /* refused: no free_fn, ever */
    expect_code(vf_operator_create(d.e, &(vf_op){.fn = nop}, &o2), VF_ESHUTDOWN,
                "vf_operator_create during destroy");
    CHECK(o2 == NULL);
    expect_code(vf_operator_push(d.e, d.opr, 0), VF_ESHUTDOWN,
                "vf_operator_push during destroy");
    expect_code(
        vf_engine_push(
            d.e, &(vf_op){.fn = nop, .done = count_done, .nonblocking = true}),
        VF_ESHUTDOWN, "nonblocking push during destroy");
    CHECK_EQ(atomic_load(&done_calls), done0);
    tu_gate_open(&d.h.go);
    tu_thread_join(th);
    CHECK_OK(d.destroy_rc);
    CHECK_OK(d.inside_var_rc);
    CHECK_OK(d.inside_push_rc);
    CHECK_ERR(d.done_push_rc, VF_ESHUTDOWN); /* a done is outside */
    CHECK_OK(d.inside_opr_rc);
    CHECK_OK(d.inside_opr_del_rc);
    /* What was accepted before destroy began, and the two pushed from
     * inside the draining op, ran; nothing refused did. */
    CHECK_EQ(atomic_load(&ran), ran_start + accepted + 2);
    CHECK_EQ(atomic_load(&done_calls), done0);
    CHECK_EQ(atomic_load(&freed), freed0); /* the refused delete's */
    tu_gate_destroy(&d.h.go);
    tu_gate_destroy(&d.h.started);
}

/* ------------------------------------------------------------ accessors */

TEST_CASE(accessors)
{
    vf_error_set_detail(0, "%s", "");
    CHECK_EQ(vf_engine_type_of(NULL), VF_ENGINE_INVALID);
    CHECK(strcmp(vf_error_detail(),
                 "vf_engine_type_of: not an engine (NULL or destroyed)") == 0);
    CHECK(strcmp(vf_engine_type_name(VF_ENGINE_INVALID), "invalid") == 0);
    CHECK_EQ(vf_engine_num_workers(NULL), 0);
    CHECK(vf_engine_type_name((vf_engine_type)-5) != NULL);
    CHECK(vf_engine_type_name((vf_engine_type)1000) != NULL);

    vf_profile *p = (vf_profile *)(uintptr_t)1;
    expect_code(vf_profile_start(NULL), VF_EINVAL, "vf_profile_start(NULL)");
    expect_code(vf_profile_stop(NULL), VF_EINVAL, "vf_profile_stop(NULL)");
    expect_code(vf_profile_pause(NULL), VF_EINVAL, "vf_profile_pause(NULL)");
    expect_code(vf_profile_resume(NULL), VF_EINVAL, "vf_profile_resume(NULL)");
    expect_code(vf_profile_take(NULL, &p), VF_EINVAL,
                "vf_profile_take(NULL, &p)");
    vf_profile_destroy(NULL);
    CHECK_EQ(vf_profile_count(NULL), 0);
    CHECK(vf_profile_at(NULL, 0) == NULL);
    CHECK_EQ(vf_profile_dropped(NULL), 0);
    vf_error_set_detail(0, "%s", "");
    CHECK_EQ(vf_profile_engine_type(NULL), VF_ENGINE_INVALID);
    CHECK(strcmp(vf_error_detail(),
                 "vf_profile_engine_type: the profile is NULL") == 0);
    CHECK_EQ(vf_profile_num_workers(NULL), 0);
    CHECK(vf_profile_worker_pool(NULL, 0) == NULL);
    CHECK_EQ(vf_profile_span_ns(NULL), 0);
    expect_code(vf_profile_write(NULL, "-", VF_PROFILE_AUTO), VF_EINVAL,
                "vf_profile_write(NULL)");
    expect_code(vf_profile_summary_write(NULL, "-", VF_PROFILE_SUMMARY_TEXT,
                                         VF_PROFILE_SORT_TOTAL),
                VF_EINVAL, "vf_profile_summary_write(NULL)");
    vf_profile *q = NULL;
    expect_code(vf_profile_load(NULL, &q), VF_EINVAL,
                "vf_profile_load(NULL, &q)");
    expect_code(vf_profile_load("/nonexistent", NULL), VF_EINVAL,
                "vf_profile_load(path, NULL)");
    CHECK(q == NULL);
    /* A file that cannot be read says why, a directory included (it said
     * "Input/output error": found trying varflow-report as a user). */
    expect_code(vf_profile_load("/nonexistent", &q), VF_ESYSTEM,
                "vf_profile_load(a missing file)");
    CHECK(strstr(vf_error_detail(), strerror(ENOENT)) != NULL);
    expect_code(vf_profile_load("/", &q), VF_ESYSTEM,
                "vf_profile_load(a directory)");
    if (strstr(vf_error_detail(), strerror(EISDIR)) == NULL)
        CHECK_REPORT_("vf_profile_load(\"/\"): %s", vf_error_detail());
    CHECK(q == NULL);
    vf_profile_row *rows = NULL;
    size_t nrows = 0;
    expect_code(vf_profile_summary(NULL, VF_PROFILE_SORT_TOTAL, &rows, &nrows),
                VF_EINVAL, "vf_profile_summary(NULL)");
    vf_profile_summary_destroy(NULL);
    vf_profile_path path;
    expect_code(vf_profile_critical_path(NULL, &path), VF_EINVAL,
                "vf_profile_critical_path(NULL)");
    vf_profile_path_destroy(NULL);
    CHECK(vf_profile_sort_name((vf_profile_sort)-1) == NULL);
    CHECK(vf_profile_sort_name((vf_profile_sort)1000) == NULL);
    vf_profile_sort by;
    expect_code(vf_profile_sort_parse(NULL, &by), VF_EINVAL,
                "vf_profile_sort_parse(NULL)");
    expect_code(vf_profile_sort_parse("total", NULL), VF_EINVAL,
                "vf_profile_sort_parse(name, NULL)");
    CHECK(strstr(vf_error_detail(), "out is NULL") != NULL); /* not the
                                                                column */
    expect_code(vf_profile_sort_parse("", &by), VF_EINVAL,
                "vf_profile_sort_parse(\"\")");

    /* A real snapshot: NULL outputs and indexes out of range. */
    vf_engine *e = tu_engine(&tu_kinds[0]);
    CHECK_OK(vf_profile_start(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nop, .name = "one"}));
    expect_code(vf_profile_take(e, NULL), VF_EINVAL,
                "vf_profile_take(e, NULL)");
    p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    CHECK(vf_profile_at(p, vf_profile_count(p)) == NULL);
    CHECK(vf_profile_at(p, (size_t)-1) == NULL);
    CHECK(vf_profile_worker_pool(p, -1) == NULL);
    CHECK(vf_profile_worker_pool(p, 1 << 20) == NULL);
    expect_code(vf_profile_write(p, NULL, VF_PROFILE_AUTO), VF_EINVAL,
                "vf_profile_write(p, NULL path)");
    expect_code(vf_profile_summary_write(p, NULL, VF_PROFILE_SUMMARY_TEXT,
                                         VF_PROFILE_SORT_TOTAL),
                VF_EINVAL, "vf_profile_summary_write(p, NULL path)");
    expect_code(vf_profile_summary(p, VF_PROFILE_SORT_TOTAL, NULL, &nrows),
                VF_EINVAL, "vf_profile_summary(p, NULL rows)");
    expect_code(vf_profile_summary(p, VF_PROFILE_SORT_TOTAL, &rows, NULL),
                VF_EINVAL, "vf_profile_summary(p, rows, NULL)");
    expect_code(vf_profile_summary(p, (vf_profile_sort)-1, &rows, &nrows),
                VF_EINVAL, "vf_profile_summary(p, sort -1)");
    expect_code(vf_profile_critical_path(p, NULL), VF_EINVAL,
                "vf_profile_critical_path(p, NULL)");
    expect_code(vf_profile_summary_write(p, "-", VF_PROFILE_SUMMARY_TEXT,
                                         (vf_profile_sort)77),
                VF_EINVAL, "vf_profile_summary_write(p, sort 77)");
    vf_profile_destroy(p);
    CHECK_OK(vf_profile_stop(e));
    tu_finish_engine(e);
}

TEST_MAIN("test_bad_input_sweep", 120)
