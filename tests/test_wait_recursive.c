/*
 * test_wait_recursive: recursive programs with a wait at every level, and
 * continuation chains, at the sizes OpenMP and TBB users run (rule 10: a
 * wait inside an op neither hangs the pool nor grows the waiting worker's
 * stack without bound).
 *
 * On pooled and perdevice engines with 1, 2 and 8 workers:
 * - flat: N top-level ops, each pushing one child and waiting for it
 *   (1,000,000 in a plain build; a waiting worker that ran any queued op
 *   on its stack overflowed it from about 100,000);
 * - fib: fib(n) where each op pushes fib(n-1) and fib(n-2) and waits for
 *   both (fib(30): about 2.7 million ops; it overflowed from fib(21));
 * - fib_children: the same with vf_run_wait_children and no vars;
 * - fib_priorities: fib_children with a priority on every child (n, 1 or
 *   -n), which a waiter must find in its queue's heap;
 * - device_recursion_at_the_bound: fib through emulated-device ops with
 *   max_inflight 1, where every push inside an op is at the bound;
 * - device_recursion_on_one_device, _across_two_devices: fib wholly on
 *   one device's pool, and with each node's children on two devices;
 * - device_waiters_beside_a_running_cpu_op: a device pool's waiters run
 *   no unrelated op above their waits while the op they wait for runs;
 * - timed_wait_loops_through_devices: fib through CPU and device ops
 *   whose ops wait by loops of 1 ms timed waits ends (a watchdog);
 * - quicksort: a parallel quicksort of 10 million ints, each op
 *   partitioning its range, pushing both halves and waiting for them;
 *   the result is checked against qsort;
 * - small stacks: fib on workers with 256 KiB stacks (worker_stack_kib),
 *   which the engine must not overflow whatever it stacks above waits;
 * - cross: a child that needs a top-level op pushed before it, on one
 *   worker, where the waiter must run that (shallower) op itself;
 * - deep_chain_small_stacks: chains 4,000 and 15,000 deep on 128 KiB
 *   stacks, hundreds of spare threads;
 * - small_system_stack: a chain with the system's default thread stack at
 *   16 KiB, which workers get raised to 128 KiB;
 * - async_leaf_completed_during_its_function: a chain of var waits 200
 *   deep on 128 KiB stacks whose async leaf another thread completes
 *   while its function runs gets no false VF_EDEADLK;
 * - async_leaf_completed_as_its_function_returns: the same, the leaf
 *   returning as soon as it handed its completion over;
 * - chains_waiting_on_another_engine: 4 chains 1,000 deep on 128 KiB
 *   stacks whose every level waits for all of a second engine before it
 *   waits for its child go on (a progress watch);
 * - spare_thread: on one worker, an op waits with its stack nearly full,
 *   so it runs nothing above the wait: the pool must lend a spare thread
 *   (not pinned when the worker is: cpu_affinity)
 *   to run its child;
 * and on every engine, naive included:
 * - chain: an op pushing its successor from inside itself, 1,000,000 deep
 *   (the naive engine ran each inside the parent's push and overflowed
 *   from about 20,000);
 * - naive_recursion_deeper_than_its_stack: a chain with a wait at every
 *   level deeper than the naive engine's thread's stack holds: the
 *   deepest wait gets VF_EDEADLK (the stack is full), never a crash.
 * Each case checks the program's result against the serial one and that
 * the deepest stack any op saw stays within what the engine promises (7/8
 * of the worker's stack; the figure is printed). Sizes are smaller under
 * the sanitizers.
 */
#include "runner.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#if defined(TU_TSAN) || defined(TU_ASAN)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

#define FLAT_N (SANITIZED ? 20000 : 1000000)
#define FIB_N (SANITIZED ? 17 : 30)
#define QSORT_N (SANITIZED ? 200000 : 10000000)
#define QSORT_CUTOFF 4096
#define CHAIN_N (SANITIZED ? 100000 : 1000000)

typedef struct config {
    const char *name;
    vf_config cfg;
} config;

static const config configs[] = {
    {"pooled/1", {.type = VF_ENGINE_POOLED, .cpu_workers = 1}},
    {"pooled/2", {.type = VF_ENGINE_POOLED, .cpu_workers = 2}},
    {"pooled/8", {.type = VF_ENGINE_POOLED, .cpu_workers = 8}},
    {"perdevice/1",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 1,
      .cpu_priority_workers = 1}},
    {"perdevice/2",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 2,
      .cpu_priority_workers = 2}},
    {"perdevice/8",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 8,
      .cpu_priority_workers = 2}},
};
#define NCONFIGS ((int)(sizeof configs / sizeof configs[0]))

static vf_engine *engine_of(const vf_config *cfg, const char *name)
{
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, cfg);
    if (rc != 0)
        CHECK_REPORT_("vf_engine_create(%s): %s (%s)", name, vf_error_name(rc),
                      vf_error_detail());
    REQUIRE(rc == 0);
    return e;
}

/* --- how deep the stacks went --------------------------------------- */

/* The highest and lowest frame address an op saw on this thread, and the
 * largest difference seen on any thread since the last reset. */
static _Thread_local uintptr_t frame_hi, frame_lo;
static _Thread_local unsigned frame_epoch;
static atomic_uint depth_epoch = 1;
static atomic_size_t depth_max;

static void note_depth(void)
{
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    unsigned epoch = atomic_load_explicit(&depth_epoch, memory_order_relaxed);
    if (frame_epoch != epoch) {
        frame_epoch = epoch;
        frame_hi = frame_lo = here;
    }
    if (here > frame_hi)
        frame_hi = here;
    if (here < frame_lo)
        frame_lo = here;
    size_t d = frame_hi - frame_lo, m = atomic_load(&depth_max);
    while (d > m && !atomic_compare_exchange_weak(&depth_max, &m, d)) {
    }
}

static void depth_reset(void)
{
    atomic_fetch_add(&depth_epoch, 1);
    atomic_store(&depth_max, 0);
}

/* The deepest stack an op saw must stay within 7/8 of the workers' stack
 * (`stack`: their size; 8 MiB when left to the system), which is what
 * the engine promises to leave the program. */
static void depth_check(const char *what, const char *cfg, size_t stack)
{
    size_t d = atomic_load(&depth_max);
    printf("%s [%s]: largest worker stack depth seen %zu bytes\n", what, cfg,
           d);
    if (d >= stack / 8 * 7)
        CHECK_REPORT_("%s [%s]: ops ran %zu bytes deep on a stack of %zu", what,
                      cfg, d, stack);
}

static size_t default_stack(void)
{
    pthread_attr_t a;
    size_t s = 0;
    pthread_attr_init(&a);
    pthread_attr_getstacksize(&a, &s);
    pthread_attr_destroy(&a);
    return s;
}

/* --- the programs --------------------------------------------------- */

typedef struct fib_arg {
    vf_engine *e;
    int n;
    long *out;
} fib_arg;

static atomic_int op_errors; /* a push or wait inside an op that failed */

static void op_error(const char *what, int rc)
{
    if (atomic_fetch_add(&op_errors, 1) == 0)
        CHECK_REPORT_("%s inside an op: %s (%s)", what, vf_error_name(rc),
                      vf_error_detail());
}

static int fib_op(vf_run *run, void *arg)
{
    (void)run;
    const fib_arg *a = arg;
    note_depth();
    if (a->n < 2) {
        *a->out = a->n;
        return 0;
    }
    long x = 0, y = 0;
    vf_var vx, vy;
    int rc;
    if ((rc = vf_var_create(a->e, &vx)) != 0 ||
        (rc = vf_var_create(a->e, &vy)) != 0) {
        op_error("vf_var_create", rc);
        return rc;
    }
    fib_arg ax = {a->e, a->n - 1, &x}, ay = {a->e, a->n - 2, &y};
    if ((rc = vf_engine_push(a->e, &(vf_op){.fn = fib_op,
                                            .arg = &ax,
                                            .arg_size = sizeof ax,
                                            .writes = VF_VARS(vx)})) != 0 ||
        (rc = vf_engine_push(a->e, &(vf_op){.fn = fib_op,
                                            .arg = &ay,
                                            .arg_size = sizeof ay,
                                            .writes = VF_VARS(vy)})) != 0) {
        op_error("vf_engine_push", rc);
        return rc;
    }
    if ((rc = vf_var_wait(a->e, vx, NULL)) != 0 ||
        (rc = vf_var_wait(a->e, vy, NULL)) != 0) {
        op_error("vf_var_wait", rc);
        return rc;
    }
    vf_var_destroy(a->e, vx, NULL, NULL);
    vf_var_destroy(a->e, vy, NULL, NULL);
    *a->out = x + y;
    return 0;
}

/* Non-zero: fib_two_children_as waits by a loop of timed waits of this
 * many milliseconds (timed_wait_loops_through_devices). */
static int fib_wait_timeout_ms;

/* fib's step with OpenMP's shape, for `a` (n >= 2): two children, ops of
 * `fn` made from `first` and `second` (their priorities, their devices),
 * no vars, a wait for both, their sum to *a->out. */
static int fib_two_children_as(vf_run *run, const fib_arg *a, vf_sync_fn fn,
                               vf_op first, vf_op second)
{
    long x = 0, y = 0;
    fib_arg ax = {a->e, a->n - 1, &x}, ay = {a->e, a->n - 2, &y};
    first.fn = second.fn = fn;
    first.arg = &ax;
    second.arg = &ay;
    first.arg_size = second.arg_size = sizeof ax;
    int rc = vf_engine_push(a->e, &first);
    if (rc == 0)
        rc = vf_engine_push(a->e, &second);
    if (rc != 0) {
        op_error("vf_engine_push", rc);
        return rc;
    }
    if (fib_wait_timeout_ms != 0) {
        while ((rc = vf_run_wait_children_timed(run, fib_wait_timeout_ms,
                                                NULL)) == VF_ETIMEDOUT) {
        }
    } else {
        rc = vf_run_wait_children(run, NULL);
    }
    if (rc != 0) {
        op_error("vf_run_wait_children", rc);
        return rc;
    }
    *a->out = x + y;
    return 0;
}

/* fib_two_children_as with both children made from `proto`. */
static int fib_two_children(vf_run *run, const fib_arg *a, vf_sync_fn fn,
                            vf_op proto)
{
    return fib_two_children_as(run, a, fn, proto, proto);
}

/* fib with OpenMP's shape: two children, no vars, a wait for both. */
static int fib_children_op(vf_run *run, void *arg)
{
    const fib_arg *a = arg;
    note_depth();
    if (a->n < 2) {
        *a->out = a->n;
        return 0;
    }
    return fib_two_children(run, a, fib_children_op, (vf_op){0});
}

/* fib_children_op with a priority on every child (the ops go to the
 * queue's heap, not its lane): n, 1, or -n, by fib_priority_kind. */
static int fib_priority_kind;
static atomic_long ran_on_spares; /* its ops a spare thread ran */

static int fib_priority_op(vf_run *run, void *arg)
{
    const fib_arg *a = arg;
    note_depth();
    if (vf_run_worker(run) < 0)
        atomic_fetch_add(&ran_on_spares, 1);
    if (a->n < 2) {
        *a->out = a->n;
        return 0;
    }
    int priority = fib_priority_kind == 0   ? a->n
                   : fib_priority_kind == 1 ? 1
                                            : -a->n;
    return fib_two_children(run, a, fib_priority_op,
                            (vf_op){.priority = priority});
}

static long fib_serial(int n)
{
    long a = 0, b = 1;
    for (int i = 0; i < n; i++) {
        long t = a + b;
        a = b;
        b = t;
    }
    return a;
}

/* fib(n) by `fn` (fib_op: a var per child; fib_children_op: a wait for
 * children), checked against the serial value. */
static void run_fib_by(vf_engine *e, vf_sync_fn fn, int n, const char *name)
{
    long out = -1;
    fib_arg a = {e, n, &out};
    vf_var v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = fn,
                                        .arg = &a,
                                        .arg_size = sizeof a,
                                        .writes = VF_VARS(v)}));
    CHECK_OK(vf_var_wait(e, v, NULL));
    if (out != fib_serial(n))
        CHECK_REPORT_("fib(%d) [%s] = %ld, serially %ld", n, name, out,
                      fib_serial(n));
}

static void run_fib(vf_engine *e, int n, const char *name)
{
    run_fib_by(e, fib_op, n, name);
}

/* fib(FIB_N) by `fn` on every configuration, its stack depth checked. */
static void fib_case(vf_sync_fn fn, const char *what)
{
    for (int c = 0; c < NCONFIGS; c++) {
        tu_phase_limit(configs[c].name, 120);
        depth_reset();
        vf_engine *e = engine_of(&configs[c].cfg, configs[c].name);
        run_fib_by(e, fn, FIB_N, configs[c].name);
        tu_finish_engine(e);
        depth_check(what, configs[c].name, default_stack());
    }
    CHECK_EQ(atomic_load(&op_errors), 0);
}

TEST_CASE(fib)
{
    fib_case(fib_op, "fib");
}

TEST_CASE(fib_children)
{
    fib_case(fib_children_op, "fib_children");
}

/* fib with a priority on every child: a waiter looks for its children in
 * the heap its queue keeps such ops in, as in its lane, and runs them
 * itself. It looked in the lane only: every waiter lent a spare thread,
 * the pool grew to 1,024 spares fighting over one queue's lock, and
 * fib(16) took minutes (fib(13) 0.4 s). With one worker, its ops never
 * need a spare (vf_run_worker -1). */
TEST_CASE(fib_priorities)
{
    for (int kind = 0; kind < 3; kind++) {
        fib_priority_kind = kind;
        for (int c = 0; c < NCONFIGS; c++) {
            tu_phase_limit(configs[c].name, 60);
            depth_reset();
            atomic_store(&ran_on_spares, 0);
            vf_engine *e = engine_of(&configs[c].cfg, configs[c].name);
            run_fib_by(e, fib_priority_op, SANITIZED ? 16 : 22,
                       configs[c].name);
            tu_finish_engine(e);
            depth_check("fib_priorities", configs[c].name, default_stack());
            if (configs[c].cfg.cpu_workers == 1)
                CHECK_EQ(atomic_load(&ran_on_spares), 0);
        }
    }
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* fib_children_op whose children of an odd n run on the emulated device
 * (its pool lends no spare), for an engine with an in-flight bound of 1:
 * every push inside an op is at the bound and runs ready ops above it. */
static int fib_device_op(vf_run *run, void *arg)
{
    const fib_arg *a = arg;
    if (a->n < 2) {
        *a->out = a->n;
        return 0;
    }
    vf_device where = a->n % 2 ? (vf_device){VF_DEVICE_EMULATED, a->n % 3}
                               : (vf_device){VF_DEVICE_CPU, 0};
    return fib_two_children(run, a, fib_device_op, (vf_op){.device = where});
}

/* A recursion through device ops at the in-flight bound ends: a push
 * inside an op runs ready ops above it, and the pushing op, active below
 * them, kept a device pool's waiter (no spare relieves it) from running
 * the ops queued beside it itself: every thread asleep, for ever (found
 * trying it as a user, fib(10) with max_inflight 1). */
TEST_CASE(device_recursion_at_the_bound)
{
    for (int c = 0; c < NCONFIGS; c++) {
        if (configs[c].cfg.cpu_workers == 1)
            continue; /* one worker: a pool of one, nothing above a push */
        tu_phase_limit(configs[c].name, 60);
        vf_config cfg = configs[c].cfg;
        cfg.max_inflight = 1;
        vf_engine *e = engine_of(&cfg, configs[c].name);
        for (int top = 0; top < 2; top++)
            run_fib_by(e, fib_device_op, 10, configs[c].name);
        tu_finish_engine(e);
    }
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* fib_children_op with every child on the emulated device 0. */
static int fib_on_device_op(vf_run *run, void *arg)
{
    const fib_arg *a = arg;
    if (a->n < 2) {
        *a->out = a->n;
        return 0;
    }
    return fib_two_children(
        run, a, fib_on_device_op,
        (vf_op){.device = (vf_device){VF_DEVICE_EMULATED, 0}});
}

/* A recursion with a wait at every level, all of it on one device's pool
 * of two threads (the default): a waiter runs its descendants from the
 * other thread's queue too. Each took only its own queue's, so the
 * children placed on the other thread, whose waits were in other
 * branches, waited for the 10 ms a forced run takes, one op at a time:
 * fib(16) ran for minutes (found trying device recursion as a user). */
TEST_CASE(device_recursion_on_one_device)
{
    tu_phase_limit("perdevice, default", 20); /* 0.2 s here; it took 52 */
    vf_engine *e = engine_of(NULL, "perdevice, default");
    for (int top = 0; top < 2; top++)
        run_fib_by(e, fib_on_device_op, SANITIZED ? 14 : 16,
                   "perdevice, default");
    tu_finish_engine(e);
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* fib_children_op with the first child of n % 3 == 0 on emulated device
 * n % 2 and the second of n % 4 == 1 on device 3, the rest on the CPU. */
static int fib_mixed_op(vf_run *run, void *arg)
{
    const fib_arg *a = arg;
    if (a->n < 2) {
        *a->out = a->n;
        return 0;
    }
    vf_op first = {0}, second = {0};
    if (a->n % 3 == 0)
        first.device = (vf_device){VF_DEVICE_EMULATED, a->n % 2};
    if (a->n % 4 == 1)
        second.device = (vf_device){VF_DEVICE_EMULATED, 3};
    return fib_two_children_as(run, a, fib_mixed_op, first, second);
}

/* A recursion through CPU and device ops whose ops wait for their
 * children by a loop of 1 ms timed waits. Each wait began its count of
 * hopeless looks at zero, so none reached the forced run the untimed
 * wait comes to in about 0.4 ms: fib(16) took 24 s, and under TSan
 * fib(12) never ended in 120 s (found trying it as a user). A timed-out
 * wait now leaves its count to the op's next one: 1-3 s. (Still far
 * slower than the untimed wait under TSan from fib(14).) The test runs
 * fib(14): it guards the hang (under TSan, fib(10)), not the speed;
 * fib(16) took 5-7 s at a load average of 6-26 and 21-24 s at 40-90,
 * past the watchdog. */
TEST_CASE(timed_wait_loops_through_devices)
{
    tu_phase_limit("pooled/2, 1 ms waits", 24); /* 0.5-2 s; 48 before */
    fib_wait_timeout_ms = 1;
    vf_engine *e = engine_of(
        &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}, "pooled/2");
    for (int top = 0; top < 2; top++)
        run_fib_by(e, fib_mixed_op, SANITIZED ? 10 : 14,
                   "pooled/2, 1 ms waits");
    tu_finish_engine(e);
    fib_wait_timeout_ms = 0;
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* fib_children_op with each node's two children on two emulated devices,
 * each level swapping which gets which (fib_arg has no depth: n's parity
 * stands in). */
static int fib_two_devices_op(vf_run *run, void *arg)
{
    const fib_arg *a = arg;
    if (a->n < 2) {
        *a->out = a->n;
        return 0;
    }
    return fib_two_children_as(
        run, a, fib_two_devices_op,
        (vf_op){.device = {VF_DEVICE_EMULATED, a->n % 2}},
        (vf_op){.device = {VF_DEVICE_EMULATED, (a->n + 1) % 2}});
}

/* A recursion with a wait at every level whose two children go to two
 * devices' pools: every thread of both waits in some branch, and the ops
 * of the other branches queued beside them run only by a forced run
 * (wait.c: HOPELESS_LOOKS). Each forced run waited 10 ms, and its waiter
 * slept through the ops placed for it 200 us at a time: fib(16) took 14
 * s (found trying device recursion as a user); fib(17) here, 2.5 s now. */
TEST_CASE(device_recursion_across_two_devices)
{
    tu_phase_limit("perdevice, two devices", 20); /* 22 s before */
    vf_engine *e = engine_of(NULL, "perdevice, two devices");
    run_fib_by(e, fib_two_devices_op, SANITIZED ? 13 : 17,
               "perdevice, two devices");
    tu_finish_engine(e);
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* Both threads of a device's pool wait inside ops for a CPU op that still
 * runs, and two unrelated device ops are queued on them: neither waiter
 * runs one above its wait (nobody else would run them only once every op
 * of the engine stops: the CPU op would end the waits); each starts once
 * the CPU op is over, and its waits on the waiters' vars return 0. A
 * waiter ran them as soon as every thread of its pool waited, and one
 * waiting on what the op under it writes got VF_EDEADLK (the second
 * reviewer, of a change of this stop). */
static struct {
    vf_var x, y[2];
    atomic_int waiting, cpu_done, early, failed;
} beside;

static int slow_cpu_op(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
    atomic_store(&beside.cpu_done, 1);
    return 0;
}

static int wait_for_cpu_op(vf_run *run, void *arg)
{
    (void)arg;
    atomic_fetch_add(&beside.waiting, 1);
    int rc = vf_var_wait(vf_run_engine(run), beside.x, NULL);
    if (rc != 0)
        atomic_fetch_add(&beside.failed, 1);
    return rc;
}

static int wait_for_waiters(vf_run *run, void *arg)
{
    (void)arg;
    if (!atomic_load(&beside.cpu_done))
        atomic_fetch_add(&beside.early, 1);
    for (int i = 0; i < 2; i++)
        if (vf_var_wait(vf_run_engine(run), beside.y[i], NULL) != 0)
            atomic_fetch_add(&beside.failed, 1);
    return 0;
}

TEST_CASE(device_waiters_beside_a_running_cpu_op)
{
    tu_phase_limit("perdevice, default", 60);
    for (int round = 0; round < 3; round++) {
        vf_engine *e = engine_of(NULL, "perdevice, default");
        beside.x = tu_var(e);
        beside.y[0] = tu_var(e);
        beside.y[1] = tu_var(e);
        atomic_store(&beside.waiting, 0);
        atomic_store(&beside.cpu_done, 0);
        vf_device dev = {VF_DEVICE_EMULATED, 0};
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = slow_cpu_op, .writes = VF_VARS(beside.x)}));
        for (int i = 0; i < 2; i++)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = wait_for_cpu_op,
                                           .device = dev,
                                           .writes = VF_VARS(beside.y[i])}));
        REQUIRE(tu_wait_flag(&beside.waiting, 2, TU_TIMEOUT));
        for (int i = 0; i < 2; i++)
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = wait_for_waiters, .device = dev}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        tu_finish_engine(e);
    }
    CHECK_EQ(atomic_load(&beside.early), 0);
    CHECK_EQ(atomic_load(&beside.failed), 0);
}

/* Workers with small stacks: the engine keeps what it stacks above waits
 * within them (a worker that ran any ready op above a wait overflowed 256
 * KiB in a few hundred levels). */
TEST_CASE(small_stacks)
{
    vf_engine *e = NULL;
    vf_config bad = {.type = VF_ENGINE_POOLED, .worker_stack_kib = 100};
    CHECK_ERR(vf_engine_create(&e, &bad), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "worker_stack_kib") != NULL);
    for (int c = 0; c < NCONFIGS; c++) {
        tu_phase_limit(configs[c].name, 120);
        depth_reset();
        vf_config cfg = configs[c].cfg;
        cfg.worker_stack_kib = 256;
        e = engine_of(&cfg, configs[c].name);
        run_fib(e, SANITIZED ? 15 : 22, configs[c].name);
        tu_finish_engine(e);
        depth_check("fib on 256 KiB stacks", configs[c].name, 256 << 10);
    }
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* The environment variable, and what it refuses. */
TEST_CASE(stack_env)
{
    vf_engine *e = NULL;
    vf_config cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 1};
    setenv("VF_WORKER_STACK_KIB", "64", 1);
    CHECK_ERR(vf_engine_create(&e, &cfg), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "VF_WORKER_STACK_KIB") != NULL);
    setenv("VF_WORKER_STACK_KIB", "12k", 1);
    CHECK_ERR(vf_engine_create(&e, &cfg), VF_EINVAL);
    setenv("VF_WORKER_STACK_KIB", "512", 1);
    CHECK_OK(vf_engine_create(&e, &cfg));
    unsetenv("VF_WORKER_STACK_KIB");
    depth_reset();
    run_fib(e, SANITIZED ? 15 : 20, "VF_WORKER_STACK_KIB=512");
    tu_finish_engine(e);
    depth_check("fib on 512 KiB stacks", "pooled/1", 512 << 10);
}

static atomic_long flat_done;

static int flat_leaf(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    note_depth();
    atomic_fetch_add_explicit(&flat_done, 1, memory_order_relaxed);
    return 0;
}

static int flat_op(vf_run *run, void *arg)
{
    vf_engine *e = arg;
    (void)run;
    note_depth();
    vf_var v;
    int rc = vf_var_create(e, &v);
    if (rc == 0)
        rc = vf_engine_push(e, &(vf_op){.fn = flat_leaf, .writes = VF_VARS(v)});
    if (rc == 0)
        rc = vf_var_wait(e, v, NULL);
    if (rc != 0) {
        op_error("flat", rc);
        return rc;
    }
    vf_var_destroy(e, v, NULL, NULL);
    return 0;
}

TEST_CASE(flat)
{
    for (int c = 0; c < NCONFIGS; c++) {
        tu_phase_limit(configs[c].name, 120);
        depth_reset();
        atomic_store(&flat_done, 0);
        vf_engine *e = engine_of(&configs[c].cfg, configs[c].name);
        for (int i = 0; i < FLAT_N; i++)
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = flat_op, .arg = e}));
        tu_finish_engine(e);
        CHECK_EQ(atomic_load(&flat_done), FLAT_N);
        depth_check("flat", configs[c].name, default_stack());
    }
    CHECK_EQ(atomic_load(&op_errors), 0);
}

typedef struct qs_arg {
    vf_engine *e;
    int *a;
    long lo, hi; /* [lo, hi) */
} qs_arg;

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

static int qs_op(vf_run *run, void *arg)
{
    (void)run;
    const qs_arg *q = arg;
    note_depth();
    int *a = q->a;
    long lo = q->lo, hi = q->hi;
    if (hi - lo <= QSORT_CUTOFF) {
        qsort(a + lo, (size_t)(hi - lo), sizeof *a, cmp_int);
        return 0;
    }
    /* Hoare's partition around the median of three. */
    long mid = lo + (hi - lo) / 2;
    int x = a[lo], y = a[mid], z = a[hi - 1];
    int pivot = x < y ? (y < z ? y : (x < z ? z : x))
                      : (x < z ? x : (y < z ? z : y));
    long i = lo - 1, j = hi;
    for (;;) {
        do
            i++;
        while (a[i] < pivot);
        do
            j--;
        while (a[j] > pivot);
        if (i >= j)
            break;
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
    vf_var vl, vr;
    int rc;
    if ((rc = vf_var_create(q->e, &vl)) != 0 ||
        (rc = vf_var_create(q->e, &vr)) != 0) {
        op_error("vf_var_create", rc);
        return rc;
    }
    qs_arg l = {q->e, a, lo, j + 1}, r = {q->e, a, j + 1, hi};
    if ((rc = vf_engine_push(q->e, &(vf_op){.fn = qs_op,
                                            .arg = &l,
                                            .arg_size = sizeof l,
                                            .writes = VF_VARS(vl)})) != 0 ||
        (rc = vf_engine_push(q->e, &(vf_op){.fn = qs_op,
                                            .arg = &r,
                                            .arg_size = sizeof r,
                                            .writes = VF_VARS(vr)})) != 0 ||
        (rc = vf_var_wait(q->e, vl, NULL)) != 0 ||
        (rc = vf_var_wait(q->e, vr, NULL)) != 0) {
        op_error("quicksort", rc);
        return rc;
    }
    vf_var_destroy(q->e, vl, NULL, NULL);
    vf_var_destroy(q->e, vr, NULL, NULL);
    return 0;
}

TEST_CASE(quicksort)
{
    int *data = malloc(sizeof(int) * QSORT_N);
    int *want = malloc(sizeof(int) * QSORT_N);
    REQUIRE(data != NULL && want != NULL);
    uint64_t s = check_seed();
    for (long i = 0; i < QSORT_N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        want[i] = (int)(s >> 33);
    }
    qsort(want, QSORT_N, sizeof *want, cmp_int);
    for (int c = 0; c < NCONFIGS; c++) {
        tu_phase_limit(configs[c].name, 120);
        depth_reset();
        s = check_seed();
        for (long i = 0; i < QSORT_N; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            data[i] = (int)(s >> 33);
        }
        vf_engine *e = engine_of(&configs[c].cfg, configs[c].name);
        qs_arg q = {e, data, 0, QSORT_N};
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = qs_op, .arg = &q, .arg_size = sizeof q}));
        tu_finish_engine(e);
        long bad = -1;
        for (long i = 0; i < QSORT_N && bad < 0; i++)
            if (data[i] != want[i])
                bad = i;
        if (bad >= 0)
            CHECK_REPORT_("quicksort [%s]: element %ld is %d, serially %d",
                          configs[c].name, bad, data[bad], want[bad]);
        depth_check("quicksort", configs[c].name, default_stack());
    }
    free(data);
    free(want);
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* A: pushed first, waits for the main thread to push B (which writes x),
 * then pushes C (reads x) and waits for C. On one worker C can only run
 * after B, which is not A's descendant: the waiter must run it itself. */
typedef struct cross {
    vf_engine *e;
    vf_var x, c;
    tu_gate b_pushed;
    atomic_int b_ran, c_saw;
    atomic_int rc;
} cross;

static int cross_b(vf_run *run, void *arg)
{
    (void)run;
    cross *t = arg;
    atomic_store(&t->b_ran, 1);
    return 0;
}

static int cross_c(vf_run *run, void *arg)
{
    (void)run;
    cross *t = arg;
    atomic_store(&t->c_saw, atomic_load(&t->b_ran));
    return 0;
}

static int cross_a(vf_run *run, void *arg)
{
    (void)run;
    cross *t = arg;
    if (!tu_gate_wait(&t->b_pushed, TU_TIMEOUT))
        return 1;
    int rc = vf_engine_push(t->e, &(vf_op){.fn = cross_c,
                                           .arg = t,
                                           .reads = VF_VARS(t->x),
                                           .writes = VF_VARS(t->c)});
    if (rc == 0)
        rc = vf_var_wait(t->e, t->c, NULL);
    atomic_store(&t->rc, rc);
    return 0;
}

TEST_CASE(cross)
{
    for (int c = 0; c < NCONFIGS; c++) {
        if (configs[c].cfg.cpu_workers != 1)
            continue;
        tu_phase_limit(configs[c].name, 30);
        cross t;
        memset(&t, 0, sizeof t);
        tu_gate_init(&t.b_pushed);
        atomic_store(&t.rc, 99);
        vf_engine *e = t.e = engine_of(&configs[c].cfg, configs[c].name);
        t.x = tu_var(e);
        t.c = tu_var(e);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = cross_a, .arg = &t}));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = cross_b, .arg = &t, .writes = VF_VARS(t.x)}));
        tu_gate_open(&t.b_pushed);
        tu_finish_engine(e);
        CHECK_ERR(atomic_load(&t.rc), 0);
        CHECK_EQ(atomic_load(&t.c_saw), 1);
        tu_gate_destroy(&t.b_pushed);
    }
}

/* A waiter whose stack is nearly full (more than 3/4 used) runs nothing
 * above its wait; on one worker nothing else would run its child either,
 * so the pool must start a spare thread for it (sched.h). Without one the
 * wait hangs (the watchdog names the case). */
typedef struct deep {
    vf_engine *e;
    vf_var v;
    atomic_int child_ran, rc;
    char *stack_lo; /* the worker's stack's lowest address */
    size_t stack_size;
    int child_worker, child_cpus; /* where the child ran, its mask's CPUs */
} deep;

static int deep_child(vf_run *run, void *arg)
{
    deep *d = arg;
    cpu_set_t set;
    d->child_worker = vf_run_worker(run);
    d->child_cpus = pthread_getaffinity_np(pthread_self(), sizeof set, &set) ==
                            0
                        ? CPU_COUNT(&set)
                        : -1;
    atomic_store(&d->child_ran, 1);
    return 0;
}

/* Recurse until more than 13/16 of the stack is used, then wait. */
static __attribute__((noinline)) int deep_burn(deep *d, volatile char *prev)
{
    volatile char pad[1024];
    pad[0] = prev != NULL ? prev[0] : 1;
    char *here = (char *)__builtin_frame_address(0);
    size_t free_below = (size_t)(here - d->stack_lo);
    if (free_below > d->stack_size / 16 * 3)
        return deep_burn(d, pad) + pad[0] * 0;
    int rc = vf_engine_push(
        d->e, &(vf_op){.fn = deep_child, .arg = d, .writes = VF_VARS(d->v)});
    if (rc == 0)
        rc = vf_var_wait(d->e, d->v, NULL);
    return rc;
}

static int deep_op(vf_run *run, void *arg)
{
    (void)run;
    deep *d = arg;
    pthread_attr_t a;
    void *lo;
    REQUIRE(pthread_getattr_np(pthread_self(), &a) == 0);
    pthread_attr_getstack(&a, &lo, &d->stack_size);
    pthread_attr_destroy(&a);
    d->stack_lo = lo;
    atomic_store(&d->rc, deep_burn(d, NULL));
    return 0;
}

/* Run deep_op on an engine of `cfg` to its end: its wait returned 0 and
 * its child ran once (`d` then says where). */
static void run_deep(const vf_config *cfg, const char *name, deep *d)
{
    memset(d, 0, sizeof *d);
    d->e = engine_of(cfg, name);
    atomic_store(&d->rc, 99);
    d->v = tu_var(d->e);
    CHECK_OK(vf_engine_push(d->e, &(vf_op){.fn = deep_op, .arg = d}));
    tu_finish_engine(d->e);
    CHECK_ERR(atomic_load(&d->rc), 0);
    CHECK_EQ(atomic_load(&d->child_ran), 1);
}

TEST_CASE(spare_thread)
{
    for (int c = 0; c < NCONFIGS; c++) {
        if (configs[c].cfg.cpu_workers != 1)
            continue;
        tu_phase_limit(configs[c].name, 30);
        vf_config cfg = configs[c].cfg;
        cfg.worker_stack_kib = 512;
        deep d;
        run_deep(&cfg, configs[c].name, &d);
    }
    /* With the worker pinned (cpu_affinity), the spare is not: it runs
     * the child (worker -1) on every CPU the process may run on. */
    cpu_set_t all;
    REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
    char first[16];
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            snprintf(first, sizeof first, "%d", c);
            break;
        }
    vf_config cfg = {.type = VF_ENGINE_POOLED,
                     .cpu_workers = 1,
                     .worker_stack_kib = 512,
                     .cpu_affinity = first};
    deep d;
    run_deep(&cfg, "pooled/1 pinned", &d);
#ifndef TU_TSAN /* there the waiter's frames leave it room to run the child    \
                   itself (seen in CI): no spare is started */
    CHECK_EQ(d.child_worker, -1);
    CHECK_EQ(d.child_cpus, CPU_COUNT(&all));
#endif
}

typedef struct chain {
    vf_engine *e;
    atomic_long left;
} chain;

static int chain_op(vf_run *run, void *arg)
{
    (void)run;
    chain *c = arg;
    note_depth();
    if (atomic_fetch_sub(&c->left, 1) > 1) {
        int rc = vf_engine_push(c->e, &(vf_op){.fn = chain_op, .arg = c});
        if (rc != 0) {
            op_error("chain push", rc);
            return rc;
        }
    }
    return 0;
}

TEST_CASE(chain)
{
    static const config naive = {"naive", {.type = VF_ENGINE_NAIVE}};
    for (int c = -1; c < NCONFIGS; c++) {
        const config *k = c < 0 ? &naive : &configs[c];
        tu_phase_limit(k->name, 120);
        depth_reset();
        chain ch = {.e = engine_of(&k->cfg, k->name)};
        atomic_store(&ch.left, CHAIN_N);
        CHECK_OK(vf_engine_push(ch.e, &(vf_op){.fn = chain_op, .arg = &ch}));
        tu_finish_engine(ch.e);
        CHECK_EQ(atomic_load(&ch.left), 0);
        depth_check("chain", k->name, default_stack());
    }
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* A chain of ops each pushing one child and waiting for it
 * (vf_run_wait_children), every `device_every`-th child on the emulated
 * device (its function pushes and waits too): the result is the depth
 * reached plus one, level by level. */
typedef struct nested_chain {
    int depth, device_every;
    long *out;
} nested_chain;

static int nested_chain_op(vf_run *run, void *arg)
{
    const nested_chain *a = arg;
    if (a->depth == 0) {
        *a->out = 1;
        return 0;
    }
    volatile char frame[2048]; /* a kernel's locals: fewer levels a stack */
    frame[a->depth % sizeof frame] = 1;
    long below = 0;
    nested_chain c = {a->depth - 1, a->device_every, &below};
    bool device = a->device_every > 0 && c.depth % a->device_every == 0;
    int rc = vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = nested_chain_op,
                 .arg = &c,
                 .device = {device ? VF_DEVICE_EMULATED : VF_DEVICE_CPU, 0}});
    if (rc == 0)
        rc = vf_run_wait_children(run, NULL);
    if (rc != 0) {
        op_error("nested chain", rc);
        return rc;
    }
    *a->out = below + 1 + frame[a->depth % sizeof frame] - 1;
    return 0;
}

static void run_nested_chain(const vf_config *cfg, const char *name, int depth,
                             int device_every)
{
    tu_phase_limit(name, 60);
    vf_engine *e = engine_of(cfg, name);
    long got = 0;
    nested_chain top = {depth, device_every, &got};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nested_chain_op, .arg = &top}));
    tu_finish_engine(e);
    CHECK_EQ(got, depth + 1);
}

/* The system's default stack below the 128 KiB a worker may be given
 * (`ulimit -s 16`; set here with pthread_setattr_default_np, as
 * RLIMIT_STACK sets it at start): the workers get 128 KiB, and a chain
 * with a wait at every level runs. They got 16 KiB, and a chain 10 deep
 * overflowed a worker inside its wait (found by a user tester). */
TEST_CASE(small_system_stack)
{
    pthread_attr_t saved;
    REQUIRE(pthread_getattr_default_np(&saved) == 0);
    pthread_attr_t small;
    REQUIRE(pthread_attr_init(&small) == 0);
    REQUIRE(pthread_attr_setstacksize(&small, 16 << 10) == 0);
    REQUIRE(pthread_setattr_default_np(&small) == 0);
    vf_config cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2};
    run_nested_chain(&cfg, "pooled/2, 16 KiB system stack",
                     SANITIZED ? 100 : 300, 0);
    REQUIRE(pthread_setattr_default_np(&saved) == 0);
    pthread_attr_destroy(&small);
    pthread_attr_destroy(&saved);
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* Past VF__FAMILY_DEPTH (128) levels a waiter knows only its op's
 * children as its descendants, and a device's pool lends no spare: its
 * two threads waited beside the deeper device op queued for one of them,
 * which neither ran, for ever (found trying it as a user, from 130
 * levels). Now a waiter that nobody else would help runs it. */
TEST_CASE(deep_device_children)
{
    for (int c = 0; c < 2; c++) {
        vf_config cfg = {.type = c ? VF_ENGINE_PERDEVICE : VF_ENGINE_POOLED,
                         .cpu_workers = 2};
        run_nested_chain(&cfg, c ? "perdevice/2" : "pooled/2", 300, 10);
        run_nested_chain(&cfg, c ? "perdevice/2 all" : "pooled/2 all", 140, 1);
    }
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* A chain 4000 deep on 128 KiB stacks, 2 KiB a level: each thread holds
 * some 40 levels, so the pool lends about 100 spares; it stopped at 64
 * and the chain waited for ever (found trying it as a user). Then 15,000
 * deep on one worker, some 650 threads of the 1024 a pool may have: each
 * wait's end woke every one of them, and the time grew as the square of
 * the depth (a user's 40,000 levels took 55 s; wait.h). */
TEST_CASE(deep_chain_small_stacks)
{
    vf_config cfg = {
        .type = VF_ENGINE_POOLED, .cpu_workers = 2, .worker_stack_kib = 128};
    run_nested_chain(&cfg, "pooled/2, 128 KiB", SANITIZED ? 600 : 4000, 0);
    cfg.cpu_workers = 1;
    run_nested_chain(&cfg, "pooled/1, 128 KiB", SANITIZED ? 600 : 15000, 0);
    CHECK_EQ(atomic_load(&op_errors), 0);
}

/* A recursion through device ops with a wait at every level, deeper than
 * a device thread's stack holds: a device's pool lends no spare, so
 * nobody can run the deepest op. The wait that cannot go on returns
 * VF_EDEADLK, its detail saying the stack is full, and the recursion
 * unwinds with that failure; it waited for ever, silently (found trying
 * device recursion as a user: 80 levels on 128 KiB stacks). */
static char starved_detail[512];
static atomic_int starved_seen;

/* A level of a starving recursion returns: the first VF_EDEADLK's detail
 * kept; `mark` is its frame's byte, 1 when the frame was not overwritten. */
static int starved_level_ends(int rc, char mark)
{
    if (rc == VF_EDEADLK && atomic_fetch_add(&starved_seen, 1) == 0)
        snprintf(starved_detail, sizeof starved_detail, "%s",
                 vf_error_detail());
    return rc != 0 ? rc : mark - 1;
}

static int starving_op(vf_run *run, void *arg)
{
    int depth = *(const int *)arg;
    if (depth == 0)
        return 0;
    volatile char frame[4096]; /* fewer levels a stack */
    frame[depth % sizeof frame] = 1;
    int below = depth - 1;
    vf_var v;
    vf_engine *e = vf_run_engine(run);
    int rc = vf_var_create(e, &v);
    if (rc == 0)
        rc = vf_engine_push(e, &(vf_op){.fn = starving_op,
                                        .arg = &below,
                                        .writes = VF_VARS(v),
                                        .device = {VF_DEVICE_EMULATED, 0}});
    if (rc == 0)
        rc = vf_var_wait(e, v, NULL);
    return starved_level_ends(rc, frame[depth % sizeof frame]);
}

TEST_CASE(device_recursion_deeper_than_its_stack)
{
#if defined(TU_ASAN)
    /* Under ASan the waiter's own run of the deeper op (the one nobody
     * else will run) does not take it though its stack has room: each
     * level then gives up with the "no thread will run them" detail, and
     * the op it left queued starts the recursion over, a give-up taking
     * seconds there; the case takes minutes. Not understood yet (the
     * plain and TSan builds run it). */
    TEST_SKIP("under ASan (see the comment)");
#endif
    tu_phase_limit("device recursion past its stack", 120);
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                               .cpu_workers = 1,
                                               .gpu_workers = 1,
                                               .worker_stack_kib = 128}));
    REQUIRE(e != NULL);
    vf_var top = tu_var(e);
    int depth = 400;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = starving_op,
                                        .arg = &depth,
                                        .writes = VF_VARS(top),
                                        .device = {VF_DEVICE_EMULATED, 0}}));
    vf_error err;
    /* Each level fails with what its wait returned: the top's failure is
     * VF_EOPFAILED (its child's), the deepest waiter's VF_EDEADLK. */
    CHECK_ERR(vf_var_wait(e, top, &err), VF_EOPFAILED);
    CHECK(atomic_load(&starved_seen) >= 1);
    /* Its stack full, or (a sanitizer's frames) the deeper op not one it
     * could take: either way no thread would ever run it. */
    if (strstr(starved_detail, "stack is full") == NULL &&
        strstr(starved_detail, "no thread will run them") == NULL)
        CHECK_REPORT_("detail '%s' does not say why the wait cannot go on",
                      starved_detail);
    int rc = vf_engine_wait_all(e, NULL); /* the failures not reported */
    CHECK(rc == 0 || rc == VF_EOPFAILED);
    tu_finish_engine(e);
}

/* The same on the naive engine, which runs every op on the thread that
 * pushed it: a chain with vf_run_wait_children at every level, deeper
 * than that thread's stack holds (a 1 MiB thread). Each child the stack
 * has no room for is deferred, and only this thread runs it: the wait
 * that cannot run it returns VF_EDEADLK, its detail saying the stack is
 * full, and the chain unwinds with that failure. The waits ran the
 * deferred child above them whatever the stack held, and the program
 * crashed (found trying deep recursion as a user: ~6,000 levels on an
 * 8 MiB main thread). */
static int naive_chain_op(vf_run *run, void *arg)
{
    int depth = *(const int *)arg;
    if (depth == 0)
        return 0;
    volatile char frame[4096]; /* fewer levels a stack */
    frame[depth % sizeof frame] = 1;
    int below = depth - 1;
    int rc = vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = naive_chain_op,
                                     .arg = &below,
                                     .arg_size = sizeof below});
    if (rc == 0)
        rc = vf_run_wait_children(run, NULL);
    return starved_level_ends(rc, frame[depth % sizeof frame]);
}

static void *naive_deep_chain(void *arg)
{
    int *top_rc = arg;
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_NAIVE}));
    REQUIRE(e != NULL);
    vf_var top = tu_var(e);
    int depth = 2000;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = naive_chain_op,
                                        .arg = &depth,
                                        .arg_size = sizeof depth,
                                        .writes = VF_VARS(top)}));
    *top_rc = vf_var_wait(e, top, NULL);
    int rc = vf_engine_wait_all(e, NULL);
    CHECK(rc == 0 || rc == VF_EOPFAILED);
    tu_finish_engine(e);
    return NULL;
}

TEST_CASE(naive_recursion_deeper_than_its_stack)
{
    atomic_store(&starved_seen, 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)1 << 20);
    int top_rc = -99;
    pthread_t t;
    REQUIRE(pthread_create(&t, &attr, naive_deep_chain, &top_rc) == 0);
    pthread_attr_destroy(&attr);
    tu_thread_join(t);
    CHECK_ERR(top_rc, VF_EOPFAILED); /* its child's failure */
    CHECK(atomic_load(&starved_seen) >= 1);
    if (strstr(starved_detail, "stack is full") == NULL)
        CHECK_REPORT_("detail '%s' does not say the stack is full",
                      starved_detail);
    /* No worker's stack: the system's (it named worker_stack_kib, which
     * the naive engine has no use for: found porting OpenMP programs as
     * a user). */
    if (strstr(starved_detail, "worker_stack_kib") != NULL ||
        strstr(starved_detail, "ulimit -s") == NULL)
        CHECK_REPORT_("detail '%s' names a worker's stack, not the "
                      "system's",
                      starved_detail);
}

/* The least stack any level of a chain had left below its frame, each
 * level measuring its own thread's stack (pthread_getattr_np). */
static _Thread_local char *stack_low;
static atomic_long least_left;

static int headroom_level(vf_run *run, void *arg)
{
    char here;
    if (stack_low == NULL) {
        pthread_attr_t attr;
        void *addr;
        size_t size;
        REQUIRE(pthread_getattr_np(pthread_self(), &attr) == 0);
        REQUIRE(pthread_attr_getstack(&attr, &addr, &size) == 0);
        pthread_attr_destroy(&attr);
        stack_low = addr;
    }
    long left = (long)(&here - stack_low);
    long least = atomic_load(&least_left);
    while (left < least &&
           !atomic_compare_exchange_weak(&least_left, &least, left))
        ;
    int below = *(const int *)arg - 1;
    if (below == 0)
        return 0;
    int rc = vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = headroom_level,
                                     .arg = &below,
                                     .arg_size = sizeof below});
    return rc != 0 ? rc : vf_run_wait_children(run, NULL);
}

/* A waiter runs an op above its wait only while a quarter of its stack is
 * left where it looks for the op (VF__WAIT_CHILD_EIGHTHS: the rest is the
 * program's own), less the engine's frames between the look and the op's
 * function (about 2.5 KiB in an optimized build: on stacks of 128 to 256
 * KiB in steps of 2 KiB, ops began at most 2,441 bytes past the quarter,
 * 2,521 on the tree before row 433, and 3,001 with the room measured
 * where the wait's frames begin, which let a program whose frames fit
 * overflow a worker: found by the reviewer of row 433). No level of a
 * deep chain starts more than 4 KiB past the quarter. */
TEST_CASE(ops_above_a_wait_keep_a_quarter_of_the_stack)
{
#if SANITIZED
    TEST_SKIP("the sanitizers' frames between the look and the op are "
              "larger");
#endif
    for (int kib = 128; kib <= 256; kib += 16) {
        vf_engine *e = NULL;
        REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                                  .cpu_workers = 1,
                                                  .worker_stack_kib = kib}) ==
                0);
        atomic_store(&least_left, LONG_MAX);
        int levels = 2000;
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = headroom_level,
                                            .arg = &levels,
                                            .arg_size = sizeof levels}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        long quarter = (long)kib * 1024 / 4;
        long least = atomic_load(&least_left);
        if (least < quarter - 4096)
            CHECK_REPORT_("%d KiB stacks: an op began with %ld bytes left "
                          "below it, %ld past the quarter",
                          kib, least, quarter - least);
        tu_finish_engine(e);
    }
}

/* A chain of var waits on 128 KiB stacks (spare threads, nested waiters
 * with no stack room) whose leaf is an async op that another thread
 * completes while the leaf's function still runs: every wait returns 0.
 * The leaf's op was counted out of `active` at its function's return one
 * step before its waiter (whose marker its completion fired) was counted
 * back in, and a waiter on another thread, seeing zero, claimed a
 * deadlock: a false VF_EDEADLK in most rounds (found by the reviewer of
 * the nested waiters' wake-ups). */
typedef struct completer {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    vf_completion handed;
    bool has, finished, stop;
} completer;

static completer the_completer = {.lock = PTHREAD_MUTEX_INITIALIZER,
                                  .cond = PTHREAD_COND_INITIALIZER};
static int chain_depth;
static atomic_int chain_errors;

static void *complete_what_is_handed(void *arg)
{
    completer *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->has && !c->stop)
            pthread_cond_wait(&c->cond, &c->lock);
        if (!c->has)
            break;
        c->has = false;
        vf_completion d = c->handed;
        pthread_mutex_unlock(&c->lock);
        if (vf_completion_finish(d, 0, NULL) != 0)
            atomic_fetch_add(&chain_errors, 1);
        pthread_mutex_lock(&c->lock);
        c->finished = true;
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Whether the leaf returns once its completion was finished (the finish
 * hands the op over to the call) or at once (the finish and the return
 * race: the call returns first, or while the finish is under way). */
static bool leaf_returns_at_once;

/* The leaf: hands its completion over and returns once it was finished,
 * or at once. */
static void leaf_completed_meanwhile(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    completer *c = arg;
    pthread_mutex_lock(&c->lock);
    c->handed = done;
    c->has = true;
    c->finished = false;
    pthread_cond_broadcast(&c->cond);
    while (!c->finished && !leaf_returns_at_once)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

static int chain_level(vf_run *run, void *arg)
{
    int k = (int)(intptr_t)arg;
    vf_engine *e = vf_run_engine(run);
    vf_var v;
    int rc = vf_var_create(e, &v);
    if (rc != 0)
        return rc;
    vf_op child = {.writes = VF_VARS(v)};
    if (k + 1 == chain_depth) {
        child.async_fn = leaf_completed_meanwhile;
        child.arg = &the_completer;
    } else {
        child.fn = chain_level;
        child.arg = (void *)(intptr_t)(k + 1);
    }
    rc = vf_engine_push(e, &child);
    if (rc == 0)
        rc = vf_var_wait(e, v, NULL);
    if (rc != 0 && atomic_fetch_add(&chain_errors, 1) == 0)
        CHECK_REPORT_("the wait at level %d: %s (%s)", k, vf_error_name(rc),
                      vf_error_detail());
    vf_var_destroy(e, v, NULL, NULL);
    return rc;
}

static void async_leaf_chain_rounds(bool at_once)
{
    leaf_returns_at_once = at_once;
    chain_depth = 200;
    /* A case before this one stopped its completer. */
    the_completer.stop = the_completer.has = false;
    pthread_t t = tu_thread_start(complete_what_is_handed, &the_completer);
    int rounds = (int)tu_scaled(30, 5);
    for (int r = 0; r < rounds && atomic_load(&chain_errors) == 0; r++) {
        vf_engine *e = NULL;
        REQUIRE(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                                  .cpu_workers = 1,
                                                  .worker_stack_kib = 128}) ==
                0);
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = chain_level, .arg = (void *)(intptr_t)0}));
        vf_engine_wait_all(e, NULL); /* the levels report their own */
        CHECK_OK(vf_engine_destroy(e));
        if (atomic_load(&chain_errors) != 0)
            CHECK_REPORT_("round %d of %d", r, rounds);
    }
    pthread_mutex_lock(&the_completer.lock);
    the_completer.stop = true;
    pthread_cond_broadcast(&the_completer.cond);
    pthread_mutex_unlock(&the_completer.lock);
    tu_thread_join(t);
}

TEST_CASE(async_leaf_completed_during_its_function)
{
    async_leaf_chain_rounds(false);
}

/* The same, the leaf returning as soon as it handed its completion over:
 * the return and the finish race. The waiter of the wait loop that ran
 * the leaf was counted back in only after the call said it returned, and
 * a finish that counted the op out in between left `active` at zero (a
 * window of a few instructions: model/async.pml, mutant 1, shows it; this
 * case runs the race for real). */
TEST_CASE(async_leaf_completed_as_its_function_returns)
{
    async_leaf_chain_rounds(true);
}

/* Chains whose every level waits for all of a second engine (from
 * inside the op: a wait across engines) before it waits for its child,
 * on 128 KiB stacks, which hold a few dozen levels each: the chains need
 * spares. They sat still for tens of seconds, in most runs (found by a
 * user tester): a wait on the other engine counted its thread stuck at
 * once, so the pool lent a spare for the child it had just queued, and
 * each level ended on a thread of its own; hundreds of the waiters left
 * behind, refusing what the pool held, took every queue's lock at each of
 * their looks, kept one another awake in the locks' queues, and so never
 * all counted stuck: no spare was lent for the children that needed one.
 * A progress watch: no level started or ended for STALL_S seconds fails
 * at once. */
static vf_engine *other_engine;
static atomic_long other_steps; /* levels started, and levels ended */

static int other_engine_op(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static int waits_on_other_engine(vf_run *run, void *arg)
{
    intptr_t depth = (intptr_t)arg;
    atomic_fetch_add(&other_steps, 1);
    int rc = 0;
    if (depth > 0) {
        rc = vf_engine_push(
            vf_run_engine(run),
            &(vf_op){.fn = waits_on_other_engine, .arg = (void *)(depth - 1)});
        if (rc == 0)
            rc = vf_engine_push(other_engine, &(vf_op){.fn = other_engine_op});
        if (rc == 0)
            rc = vf_engine_wait_all(other_engine, NULL);
        int waited = vf_run_wait_children(run, NULL);
        rc = rc != 0 ? rc : waited;
    }
    atomic_fetch_add(&other_steps, 1);
    return rc;
}

TEST_CASE(chains_waiting_on_another_engine)
{
    enum { CHAINS = 4, DEPTH = SANITIZED ? 300 : 1000, STALL_S = 10 };
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                               .cpu_workers = 4,
                                               .worker_stack_kib = 128}));
    CHECK_OK(
        vf_engine_create(&other_engine, &(vf_config){.type = VF_ENGINE_POOLED,
                                                     .cpu_workers = 2}));
    atomic_store(&other_steps, 0);
    for (int c = 0; c < CHAINS; c++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = waits_on_other_engine,
                                            .arg = (void *)(intptr_t)DEPTH}));
    long last = -1;
    int still = 0, rc;
    while ((rc = vf_engine_wait_all_timed(e, 1000, NULL)) == VF_ETIMEDOUT) {
        long now = atomic_load(&other_steps);
        still = now == last ? still + 1 : 0;
        last = now;
        if (still == STALL_S)
            printf("  no level started or ended for %d s (%ld of %d steps)\n",
                   STALL_S, now, 2 * CHAINS * (DEPTH + 1));
        REQUIRE(still < STALL_S);
    }
    CHECK_OK(rc);
    CHECK_EQ(atomic_load(&other_steps), 2L * CHAINS * (DEPTH + 1));
    CHECK_OK(vf_engine_destroy(e));
    CHECK_OK(vf_engine_destroy(other_engine));
}

TEST_MAIN("test_wait_recursive", 280)
