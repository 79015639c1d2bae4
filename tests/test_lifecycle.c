/*
 * test_lifecycle: engine creation, configuration and destruction.
 *
 * - 1000 create/destroy cycles of each engine kind, each with a few ops
 *   (a nested push and a var delete among them) left for destroy to finish:
 *   every op ran; nothing leaks (LSan checks this in `make asan`);
 * - destroy completes all pushed work without any wait: slow ops, ops
 *   pushed by ops (three levels), and async ops that a foreign thread
 *   completes only after destroy has begun;
 * - several engines of different kinds used at once from several threads;
 * - configuration: the default kind (perdevice) and worker counts,
 *   VF_ENGINE_TYPE, VF_CPU_WORKER_NTHREADS, VF_CPU_PRIORITY_NTHREADS (set
 *   before create), the struct winning over the environment, and bad
 *   values in the environment or the struct refused with VF_EINVAL and a
 *   detail message (VF_ENGINE_TYPE in another case than its names' too);
 * - pinning (cpu_affinity, VF_CPU_AFFINITY): with "cores" each worker runs
 *   on the CPU its index names among those the process may run on, and
 *   only there (its thread's mask, read from inside its ops); a list
 *   pins every worker on its entry, wrapping; "none" leaves them as the
 *   process is; malformed lists, and a CPU the process may not run on,
 *   are refused with VF_EINVAL naming the setting;
 * - workers_while_stopped: vf_engine_num_workers counts the threads an
 *   engine was made with, also while it is stopped (its threads joined),
 *   and after its start, on every engine kind.
 */
#include "runner.h"

#include <unistd.h>

typedef struct counts {
    atomic_int ran, nested_ran, freed, done;
} counts;

static int inc(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((counts *)arg)->ran, 1);
    return 0;
}

static int inc_nested(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((counts *)arg)->nested_ran, 1);
    return 0;
}

static int pusher(vf_run *run, void *arg)
{
    counts *c = arg;
    atomic_fetch_add(&c->ran, 1);
    CHECK_OK(vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = inc_nested, .arg = c}));
    return 0;
}

static void on_free(void *arg)
{
    atomic_fetch_add(&((counts *)arg)->freed, 1);
}

static void on_done(void *arg, int status)
{
    CHECK_EQ(status, 0);
    atomic_fetch_add(&((counts *)arg)->done, 1);
}

TEST_KIND_CASE(cycles, k)
{
    long n = tu_scaled(1000, 100);
    counts c;
    memset(&c, 0, sizeof c);
    for (long i = 0; i < n; i++) {
        vf_engine *e = tu_engine(k);
        vf_var a = tu_var(e), b = tu_var(e), d = tu_var(e);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = inc,
                                            .arg = &c,
                                            .done = on_done,
                                            .writes = VF_VARS(a)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = inc,
                                            .arg = &c,
                                            .done = on_done,
                                            .reads = VF_VARS(a),
                                            .writes = VF_VARS(b)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = pusher,
                                            .arg = &c,
                                            .done = on_done,
                                            .reads = VF_VARS(a, b),
                                            .writes = VF_VARS(d)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = inc,
                                            .arg = &c,
                                            .done = on_done,
                                            .reads = VF_VARS(d)}));
        CHECK_OK(vf_var_destroy(e, a, on_free, &c));
        if (i % 2)
            CHECK_OK(vf_var_wait(e, b, NULL));
        CHECK_OK(vf_engine_destroy(e));
    }
    CHECK_EQ(atomic_load(&c.ran), 4 * n);
    CHECK_EQ(atomic_load(&c.nested_ran), n);
    CHECK_EQ(atomic_load(&c.freed), n);
    CHECK_EQ(atomic_load(&c.done), 4 * n);
}

/* ------------------------------------------------------------ drain */

#define NASYNC 10

typedef struct drain {
    counts c;
    atomic_int slow_ran, tree_ran, async_done;
    vf_completion pending[NASYNC];
    atomic_int npending;
    tu_gate destroying;
    atomic_int completed, complete_errors;
} drain;

static int slow(vf_run *run, void *arg)
{
    (void)run;
    tu_spin_us(20);
    atomic_fetch_add(&((drain *)arg)->slow_ran, 1);
    return 0;
}

static void free_done(void *arg, int status)
{
    CHECK_EQ(status, 0);
    free(arg);
}

typedef struct tree_arg {
    drain *d;
    int depth;
} tree_arg;

static int tree(vf_run *run, void *arg)
{
    tree_arg *t = arg;
    atomic_fetch_add(&t->d->tree_ran, 1);
    if (t->depth < 3) {
        for (int i = 0; i < 2; i++) {
            tree_arg *c = malloc(sizeof *c);
            REQUIRE(c);
            c->d = t->d;
            c->depth = t->depth + 1;
            int rc = vf_engine_push(
                vf_run_engine(run),
                &(vf_op){.fn = tree, .arg = c, .done = free_done});
            CHECK_OK(rc);
            if (rc)
                free(c);
        }
    }
    return 0;
}

static void async_start(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    drain *d = arg;
    int i = atomic_load(&d->npending);
    d->pending[i] = done;
    atomic_store(&d->npending, i + 1); /* publishes pending[i] */
}

static void async_done(void *arg, int status)
{
    CHECK_EQ(status, 0);
    atomic_fetch_add(&((drain *)arg)->async_done, 1);
}

static void *completer(void *arg)
{
    drain *d = arg;
    CHECK(tu_gate_wait(&d->destroying, TU_TIMEOUT));
    CHECK(tu_wait_flag(&d->npending, NASYNC, TU_TIMEOUT));
    for (int i = 0; i < NASYNC; i++) {
        tu_spin_us(200); /* destroy is well under way */
        int rc = vf_completion_finish(d->pending[i], 0, NULL);
        if (rc)
            atomic_fetch_add(&d->complete_errors, 1);
        atomic_fetch_add(&d->completed, 1);
    }
    return NULL;
}

TEST_KIND_CASE(destroy_drains, k)
{
    drain d;
    memset(&d, 0, sizeof d);
    tu_gate_init(&d.destroying);
    vf_engine *e = tu_engine(k);
    vf_var v[4];
    for (int i = 0; i < 4; i++)
        v[i] = tu_var(e);
    for (int i = 0; i < 200; i++)
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = slow,
                                       .arg = &d,
                                       .reads = tu_list(&v[i % 4], 1),
                                       .writes = tu_list(&v[(i + 1) % 4], 1)}));
    tree_arg *root = malloc(sizeof *root);
    REQUIRE(root);
    root->d = &d;
    root->depth = 0;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tree,
                                        .arg = root,
                                        .done = free_done,
                                        .writes = tu_list(&v[0], 1)}));
    /* Async ops on their own vars (so the naive engine starts them all
     * inside push), completed only once destroy has begun. */
    vf_var av[NASYNC];
    for (int i = 0; i < NASYNC; i++) {
        av[i] = tu_var(e);
        CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = async_start,
                                            .arg = &d,
                                            .done = async_done,
                                            .writes = tu_list(&av[i], 1)}));
    }
    /* Readers of the async ops' vars wait for their completion. */
    for (int i = 0; i < NASYNC; i++)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = slow, .arg = &d, .reads = tu_list(&av[i], 1)}));
    pthread_t th = tu_thread_start(completer, &d);
    tu_gate_open(&d.destroying);
    CHECK_OK(vf_engine_destroy(e));
    /* Everything ran before destroy returned. */
    CHECK_EQ(atomic_load(&d.slow_ran), 200 + NASYNC);
    CHECK_EQ(atomic_load(&d.tree_ran), 1 + 2 + 4 + 8);
    CHECK_EQ(atomic_load(&d.async_done), NASYNC);
    tu_thread_join(th);
    CHECK_EQ(atomic_load(&d.completed), NASYNC);
    CHECK_EQ(atomic_load(&d.complete_errors), 0);
    tu_gate_destroy(&d.destroying);
}

/* ------------------------------------------------------------ engines */

typedef struct multi {
    const tu_kind *k;
    uint64_t val, want;
} multi;

static int mul(vf_run *run, void *arg)
{
    (void)run;
    multi *m = arg;
    m->val = m->val * 5 + 1;
    return 0;
}

static void *use_engine(void *arg)
{
    multi *m = arg;
    vf_engine *e = tu_engine(m->k);
    vf_var x = tu_var(e);
    m->val = 1;
    m->want = 1;
    for (int i = 0; i < 2000; i++) {
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = mul, .arg = m, .writes = VF_VARS(x)}));
        m->want = m->want * 5 + 1;
    }
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK(m->val == m->want);
    CHECK_OK(vf_engine_destroy(e));
    return NULL;
}

TEST_CASE(many_engines)
{
    multi m[TU_NKINDS];
    pthread_t th[TU_NKINDS];
    for (int i = 0; i < TU_NKINDS; i++) {
        m[i].k = &tu_kinds[i];
        th[i] = tu_thread_start(use_engine, &m[i]);
    }
    for (int i = 0; i < TU_NKINDS; i++)
        tu_thread_join(th[i]);
}

/* ------------------------------------------------------------ config */

static void clear_env(void)
{
    unsetenv("VF_ENGINE_TYPE");
    unsetenv("VF_CPU_WORKER_NTHREADS");
    unsetenv("VF_CPU_PRIORITY_NTHREADS");
}

static int cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int affinity_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return cores();
    return CPU_COUNT(&set);
}

/* Create with `cfg` (may be NULL) and check kind and worker count. */
static void expect_engine(const vf_config *cfg, vf_engine_type kind,
                          int workers, const char *what)
{
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, cfg);
    if (rc != 0) {
        CHECK_REPORT_("%s: create returned %s (%s)", what, vf_error_name(rc),
                      vf_error_detail());
        return;
    }
    if (vf_engine_type_of(e) != kind)
        CHECK_REPORT_("%s: kind %s, expected %s", what,
                      vf_engine_type_name(vf_engine_type_of(e)),
                      vf_engine_type_name(kind));
    if (workers >= 0 && vf_engine_num_workers(e) != workers)
        CHECK_REPORT_("%s: %d workers, expected %d", what,
                      vf_engine_num_workers(e), workers);
    /* It works. */
    vf_var x = tu_var(e);
    counts c;
    memset(&c, 0, sizeof c);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = inc, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(atomic_load(&c.ran), 1);
    CHECK_OK(vf_engine_destroy(e));
}

static void expect_einval(const vf_config *cfg, const char *what)
{
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, cfg);
    if (rc != VF_EINVAL) {
        CHECK_REPORT_("%s: create returned %s, expected VF_EINVAL", what,
                      vf_error_name(rc));
        if (rc == 0)
            CHECK_OK(vf_engine_destroy(e));
        return;
    }
    if (*vf_error_detail() == 0)
        CHECK_REPORT_("%s: no detail message", what);
}

TEST_CASE(config)
{
    clear_env();
    int n = cores();
    int na = affinity_cores();
    /* Defaults: perdevice, cores + min(4, cores) workers. */
    {
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, NULL));
        REQUIRE(e);
        CHECK_EQ(vf_engine_type_of(e), VF_ENGINE_PERDEVICE);
        int w = vf_engine_num_workers(e);
        int want1 = n + (n < 4 ? n : 4), want2 = na + (na < 4 ? na : 4);
        if (w != want1 && w != want2)
            CHECK_REPORT_("default engine has %d workers, expected %d", w,
                          want1);
        CHECK_OK(vf_engine_destroy(e));
        vf_config zero;
        memset(&zero, 0, sizeof zero);
        CHECK_OK(vf_engine_create(&e, &zero));
        REQUIRE(e);
        CHECK_EQ(vf_engine_type_of(e), VF_ENGINE_PERDEVICE);
        CHECK_OK(vf_engine_destroy(e));
    }
    CHECK(strcmp(vf_engine_type_name(VF_ENGINE_NAIVE), "naive") == 0);
    CHECK(strcmp(vf_engine_type_name(VF_ENGINE_POOLED), "pooled") == 0);
    CHECK(strcmp(vf_engine_type_name(VF_ENGINE_PERDEVICE), "perdevice") == 0);
    CHECK(vf_engine_type_name((vf_engine_type)77) != NULL);

    /* The environment fills what the struct leaves unset. */
    setenv("VF_ENGINE_TYPE", "naive", 1);
    expect_engine(NULL, VF_ENGINE_NAIVE, 0, "env naive");
    setenv("VF_ENGINE_TYPE", "pooled", 1);
    setenv("VF_CPU_WORKER_NTHREADS", "3", 1);
    expect_engine(NULL, VF_ENGINE_POOLED, 3, "env pooled/3");
    setenv("VF_ENGINE_TYPE", "perdevice", 1);
    setenv("VF_CPU_WORKER_NTHREADS", "1", 1);
    setenv("VF_CPU_PRIORITY_NTHREADS", "2", 1);
    expect_engine(NULL, VF_ENGINE_PERDEVICE, 3, "env perdevice/1+2");

    /* The struct wins. */
    setenv("VF_ENGINE_TYPE", "pooled", 1);
    setenv("VF_CPU_WORKER_NTHREADS", "3", 1);
    expect_engine(&(vf_config){.type = VF_ENGINE_PERDEVICE,
                               .cpu_workers = 2,
                               .cpu_priority_workers = 1},
                  VF_ENGINE_PERDEVICE, 3, "struct perdevice over env");
    expect_engine(&(vf_config){.type = VF_ENGINE_NAIVE}, VF_ENGINE_NAIVE, 0,
                  "struct naive over env");
    expect_engine(&(vf_config){.cpu_workers = 2}, VF_ENGINE_POOLED, 2,
                  "struct workers over env");
    expect_engine(&(vf_config){.type = VF_ENGINE_POOLED}, VF_ENGINE_POOLED, 3,
                  "env workers under struct type");

    /* Bad environment values. */
    clear_env();
    setenv("VF_ENGINE_TYPE", "bogus", 1);
    expect_einval(NULL, "VF_ENGINE_TYPE=bogus");
    /* Exact names only, as every other value is exact (it took POOLED). */
    const char *cased[] = {"POOLED", "Naive", "perDevice", " pooled"};
    for (int i = 0; i < 4; i++) {
        setenv("VF_ENGINE_TYPE", cased[i], 1);
        expect_einval(NULL, cased[i]);
        CHECK(strstr(vf_error_detail(), "lower case") != NULL);
    }
    clear_env();
    setenv("VF_ENGINE_TYPE", "pooled", 1);
    setenv("VF_CPU_WORKER_NTHREADS", "abc", 1);
    expect_einval(NULL, "VF_CPU_WORKER_NTHREADS=abc");
    setenv("VF_CPU_WORKER_NTHREADS", "-2", 1);
    expect_einval(NULL, "VF_CPU_WORKER_NTHREADS=-2");
    setenv("VF_CPU_WORKER_NTHREADS", "3x", 1);
    expect_einval(NULL, "VF_CPU_WORKER_NTHREADS=3x");
    clear_env();
    setenv("VF_ENGINE_TYPE", "perdevice", 1);
    setenv("VF_CPU_PRIORITY_NTHREADS", "many", 1);
    expect_einval(NULL, "VF_CPU_PRIORITY_NTHREADS=many");
    clear_env();

    /* Bad struct fields. */
    expect_einval(&(vf_config){.type = (vf_engine_type)42}, "type 42");
    expect_einval(&(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = -1},
                  "cpu_workers -1");
    expect_einval(
        &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_priority_workers = -3},
        "cpu_priority_workers -3");
    vf_engine *e = NULL;
    CHECK_ERR(vf_engine_create(NULL, NULL), VF_EINVAL);
    /* Still fine afterwards. */
    expect_engine(&(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1},
                  VF_ENGINE_POOLED, 1, "after errors");
    (void)e;
}

/* config.ignore_env: no VF_* variable is read. Each variable the engine
 * reads, set to a value it refuses, fails a create alone; with ignore_env
 * none does. Then the settings a program's ops may rely on: with
 * VF_MAX_INFLIGHT=1 and VF_RUN_AT_PUSH=1 in the environment, an engine
 * that ignores it has no in-flight bound and runs no op on the pushing
 * thread (a field of 0 cannot say "off" against them: found by a user
 * tester whose op waiting for its pusher then hung). */
static const char *const every_var[] = {
    "VF_BULK_SIZE",
    "VF_CPU_AFFINITY",
    "VF_CPU_PRIORITY_NTHREADS",
    "VF_CPU_WORKER_NTHREADS",
    "VF_DEVICE_SYNC",
    "VF_EMULATED_GRAPH_LAUNCH_NS",
    "VF_EMULATED_GRAPH_NODE_NS",
    "VF_EMULATED_HOSTFN_NS",
    "VF_EMULATED_LATENCY_US",
    "VF_EMULATED_LAUNCH_NS",
    "VF_EMULATED_MB_PER_S",
    "VF_EMULATED_QUERY_NS",
    "VF_EMULATED_RECORD_NS",
    "VF_EMULATED_WAIT_NS",
    "VF_ENGINE_INFO",
    "VF_ENGINE_TYPE",
    "VF_FORK_CHILD_NTHREADS",
    "VF_GPU_COPY_NTHREADS",
    "VF_GPU_PRIORITY_NTHREADS",
    "VF_GPU_WORKER_NTHREADS",
    "VF_HELP_ON_WAIT",
    "VF_IDLE_SPIN_US",
    "VF_MAX_INFLIGHT",
    "VF_PROFILE",
    "VF_PROFILE_MAX_RECORDS",
    "VF_RUN_AT_PUSH",
    "VF_WORKER_STACK_KIB",
};
#define NVARS ((int)(sizeof every_var / sizeof every_var[0]))

static vf_completion ignore_held;

static void ignore_hold(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    (void)arg;
    ignore_held = done;
}

static int note_worker(vf_run *run, void *arg)
{
    *(int *)arg = vf_run_worker(run);
    return 0;
}

TEST_CASE(ignore_env)
{
    clear_env();
    for (int i = 0; i < NVARS; i++) {
        check_context_ = every_var[i];
        setenv(every_var[i],
               strcmp(every_var[i], "VF_PROFILE") == 0 ? "/no-such-dir/p.json"
                                                       : "x",
               1);
        vf_engine *e = NULL;
        CHECK_ERR(vf_engine_create(&e, NULL), VF_EINVAL);
        CHECK(strstr(vf_error_detail(), every_var[i]) != NULL);
        CHECK_OK(vf_engine_create(&e, &(vf_config){.ignore_env = true}));
        REQUIRE(e != NULL);
        CHECK_EQ(vf_engine_type_of(e), VF_ENGINE_PERDEVICE);
        CHECK_OK(vf_engine_destroy(e));
        unsetenv(every_var[i]);
    }
    check_context_ = "settings";
    setenv("VF_MAX_INFLIGHT", "1", 1);
    setenv("VF_RUN_AT_PUSH", "1", 1);
    setenv("VF_ENGINE_TYPE", "naive", 1);
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.cpu_workers = 1, .ignore_env = true}));
    REQUIRE(e != NULL);
    CHECK_EQ(vf_engine_type_of(e), VF_ENGINE_PERDEVICE);
    vf_var held = tu_var(e), v = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.async_fn = ignore_hold, .writes = VF_VARS(held)}));
    int worker[3] = {-2, -2, -2};
    for (int i = 0; i < 3; i++) /* no bound: none refused */
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = note_worker,
                                            .arg = &worker[i],
                                            .writes = VF_VARS(v),
                                            .nonblocking = true}));
    CHECK_OK(vf_var_wait(e, v, NULL));
    for (int i = 0; i < 3; i++)
        CHECK(worker[i] >= 0); /* on the worker, never the pusher */
    CHECK_OK(vf_completion_finish(ignore_held, 0, NULL));
    CHECK_OK(vf_engine_destroy(e));
    /* Read, they bound it and run at the push. */
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_workers = 1}));
    REQUIRE(e != NULL);
    held = tu_var(e);
    v = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.async_fn = ignore_hold, .writes = VF_VARS(held)}));
    CHECK_ERR(vf_engine_push(e, &(vf_op){.fn = note_worker,
                                         .arg = &worker[0],
                                         .writes = VF_VARS(v),
                                         .nonblocking = true}),
              VF_EAGAIN);
    CHECK_OK(vf_completion_finish(ignore_held, 0, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_push(
        e,
        &(vf_op){.fn = note_worker, .arg = &worker[0], .writes = VF_VARS(v)}));
    CHECK_EQ(worker[0], -1); /* ready at its push, on a pool of one */
    CHECK_OK(vf_engine_destroy(e));
    clear_env();
    unsetenv("VF_MAX_INFLIGHT");
    unsetenv("VF_RUN_AT_PUSH");
    check_context_ = NULL;
}

/* Each op notes its worker and its thread's CPU mask (one CPU: that
 * CPU; several: -1). */
typedef struct pin_seen {
    int worker;
    int cpu;
} pin_seen;

static int note_pin(vf_run *run, void *arg)
{
    pin_seen *p = arg;
    cpu_set_t set;
    p->worker = vf_run_worker(run);
    p->cpu = -2;
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0) {
        p->cpu = -1;
        if (CPU_COUNT(&set) == 1)
            for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &set))
                    p->cpu = c;
    }
    tu_spin_us(200); /* so that both workers take some */
    return 0;
}

/* Run 64 ops on a pooled engine of 2 workers pinned by `spec` (config or
 * environment); each must be on cpus[worker % n] (n 0: not pinned, its
 * mask the process's). */
static void expect_pins(const char *spec, bool from_env, const int *cpus, int n,
                        const char *what)
{
    vf_config cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2};
    if (from_env)
        setenv("VF_CPU_AFFINITY", spec, 1);
    else
        cfg.cpu_affinity = spec;
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, &cfg);
    unsetenv("VF_CPU_AFFINITY");
    if (rc != 0) {
        CHECK_REPORT_("%s: create returned %s (%s)", what, vf_error_name(rc),
                      vf_error_detail());
        return;
    }
    pin_seen seen[64];
    for (int i = 0; i < 64; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = note_pin, .arg = &seen[i]}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
    int one = affinity_cores() == 1;
    for (int i = 0; i < 64; i++) {
        int want = n > 0 ? cpus[seen[i].worker % n] : -1;
        if (n == 0 && one)
            continue; /* a one-CPU process: every mask is one CPU */
        if (seen[i].worker < 0 || seen[i].cpu != want) {
            CHECK_REPORT_("%s: op %d on worker %d with CPU %d, expected %d",
                          what, i, seen[i].worker, seen[i].cpu, want);
            return;
        }
    }
}

TEST_CASE(cpu_affinity)
{
    clear_env();
    cpu_set_t all;
    REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
    int allowed[CPU_SETSIZE], na = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all))
            allowed[na++] = c;
    REQUIRE(na > 0);
    expect_pins("cores", false, allowed, na, "cores");
    expect_pins("cores", true, allowed, na, "VF_CPU_AFFINITY=cores");
    char list[32];
    snprintf(list, sizeof list, "%d", allowed[0]);
    expect_pins(list, false, allowed, 1, "one CPU for both workers");
    if (na >= 2) {
        int two[2] = {allowed[1], allowed[0]};
        snprintf(list, sizeof list, "%d,%d", allowed[1], allowed[0]);
        expect_pins(list, true, two, 2, "a list, reversed");
        if (allowed[1] == allowed[0] + 1) {
            snprintf(list, sizeof list, "%d-%d", allowed[0], allowed[1]);
            expect_pins(list, false, allowed, 2, "a range");
        }
    }
    expect_pins("none", false, NULL, 0, "none");

    static const char *bad[] = {"",   "abc", "0-",      "1-0", "0,,1",  "-1",
                                "0,", " 0",  "cores,0", "0x1", "99999", "2k"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vf_engine *e = NULL;
        int rc = vf_engine_create(
            &e, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_affinity = bad[i]});
        if (rc != VF_EINVAL ||
            strstr(vf_error_detail(), "cpu_affinity") == NULL) {
            CHECK_REPORT_("cpu_affinity \"%s\": %s (%s)", bad[i],
                          vf_error_name(rc), vf_error_detail());
            if (rc == 0)
                CHECK_OK(vf_engine_destroy(e));
        }
    }
    /* A CPU the process may not run on. */
    int outside = -1;
    for (int c = 0; c < CPU_SETSIZE && outside < 0; c++)
        if (!CPU_ISSET(c, &all))
            outside = c;
    if (outside >= 0) {
        snprintf(list, sizeof list, "%d", outside);
        setenv("VF_CPU_AFFINITY", list, 1);
        vf_engine *e = NULL;
        int rc = vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED});
        unsetenv("VF_CPU_AFFINITY");
        CHECK_ERR(rc, VF_EINVAL);
        CHECK(strstr(vf_error_detail(), "may run on") != NULL);
        CHECK(strstr(vf_error_detail(), "VF_CPU_AFFINITY") != NULL);
    }
}

TEST_CASE(workers_while_stopped)
{
    clear_env();
    for (int k = 0; k < TU_NKINDS; k++) {
        vf_engine *e = tu_engine(&tu_kinds[k]);
        int made = vf_engine_num_workers(e);
        if (vf_engine_type_of(e) == VF_ENGINE_NAIVE)
            CHECK_EQ(made, 0);
        else
            CHECK(made > 0);
        CHECK_OK(vf_engine_stop(e));
        CHECK_EQ(vf_engine_num_workers(e), made);
        CHECK_OK(vf_engine_start(e));
        CHECK_EQ(vf_engine_num_workers(e), made);
        tu_finish_engine(e);
    }
    /* A device's pools count from its first op, which makes them (the
     * header said "the number it was made with": a user tester read 3,
     * then 9). */
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                               .cpu_workers = 2,
                                               .cpu_priority_workers = 1,
                                               .gpu_workers = 2,
                                               .gpu_copy_workers = 1,
                                               .gpu_priority_workers = 1,
                                               .ignore_env = true}));
    REQUIRE(e != NULL);
    CHECK_EQ(vf_engine_num_workers(e), 3);
    vf_var v = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = tu_nop,
                    .writes = VF_VARS(v),
                    .device = (vf_device){VF_DEVICE_EMULATED, 0}}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(vf_engine_num_workers(e), 3 + 2 + 1 + 1);
    CHECK_OK(vf_engine_destroy(e));
}

TEST_MAIN("test_lifecycle", 200)
