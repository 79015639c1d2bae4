/*
 * test_stepping: the stepped engine (src/core/testing.h), and through it
 * exact orders that a threaded engine can only show statistically.
 *
 * A stepped engine runs no worker thread: an op runs only when the test
 * calls vf__testing_run_one, on the test's thread. Each op appends its
 * number to a log, so a case asserts the whole order: priority order
 * among ready ops, arrival order among equal priorities, rule 2 (reads
 * between two writes run after the first, together, before the second),
 * that no priority overtakes a dependency, what a step made ready, and
 * that failures skip as usual. It also checks what the aid refuses.
 */
#include "runner.h"

#include <sched.h>

#include "core/testing.h"

static int order[64];
static int norder;

typedef struct step_op {
    int id;
    int rc;           /* what the op returns */
    vf_engine *e;     /* ops that push or wait: their engine */
    vf_var var;       /* ... on this var */
    pthread_t thread; /* where it ran */
    int worker;       /* vf_run_worker */
    int done_status;
    bool ran, done;
} step_op;

static int log_op(vf_run *run, void *arg)
{
    step_op *o = arg;
    o->ran = true;
    o->thread = pthread_self();
    o->worker = vf_run_worker(run);
    if (norder < 64)
        order[norder++] = o->id;
    return o->rc;
}

static void log_done(void *arg, int status)
{
    step_op *o = arg;
    o->done = true;
    o->done_status = status;
}

static vf_engine *stepped(void)
{
    vf_engine *e = NULL;
    int rc = vf__testing_engine_create_stepped(&e, NULL);
    if (rc != 0)
        CHECK_REPORT_("create_stepped: %s (%s)", vf_error_name(rc),
                      vf_error_detail());
    REQUIRE(e != NULL);
    norder = 0;
    return e;
}

static void push(vf_engine *e, step_op *o, int id, int priority,
                 const vf_var *reads, int nreads, const vf_var *writes,
                 int nwrites)
{
    o->id = id;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = log_op,
                                        .arg = o,
                                        .done = log_done,
                                        .reads = tu_list(reads, nreads),
                                        .writes = tu_list(writes, nwrites),
                                        .priority = priority,
                                        .name = "step op"}));
}

/* Step `n` times: each step must run one op, and the log must then read
 * want[0..n) (from where it stood). */
static void expect_steps(vf_engine *e, const int *want, int n)
{
    int from = norder;
    for (int i = 0; i < n; i++) {
        int rc = vf__testing_run_one(e);
        if (rc != 1) {
            CHECK_REPORT_("step %d ran nothing (%d), op %d was due", i, rc,
                          want[i]);
            return;
        }
        if (norder != from + i + 1 || order[from + i] != want[i])
            CHECK_REPORT_("step %d ran op %d, op %d was due", i,
                          norder > from + i ? order[from + i] : -1, want[i]);
    }
}

#define EXPECT_STEPS(e, ...)                                                   \
    expect_steps(e, (const int[]){__VA_ARGS__},                                \
                 (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))

static void finish(vf_engine *e)
{
    CHECK_EQ(vf__testing_run_one(e), 0);
    tu_finish_engine(e);
}

TEST_CASE(refuses_what_it_cannot_step)
{
    vf_engine *e = (vf_engine *)&e;
    CHECK_ERR(vf__testing_engine_create_stepped(NULL, NULL), VF_EINVAL);
    CHECK_ERR(vf__testing_engine_create_stepped(
                  &e, &(vf_config){.type = VF_ENGINE_NAIVE}),
              VF_EINVAL);
    CHECK(e == NULL);
    CHECK_ERR(vf__testing_engine_create_stepped(
                  &e, &(vf_config){.type = VF_ENGINE_PERDEVICE}),
              VF_EINVAL);
    CHECK_ERR(
        vf__testing_engine_create_stepped(&e, &(vf_config){.cpu_workers = 2}),
        VF_EINVAL);
    CHECK_ERR(
        vf__testing_engine_create_stepped(&e, &(vf_config){.max_inflight = 8}),
        VF_EINVAL);
    vf_engine *threaded = tu_engine(&tu_kinds[1]);
    CHECK_ERR(vf__testing_run_one(threaded), VF_EINVAL);
    CHECK_ERR(vf__testing_run_one(NULL), VF_EINVAL);
    tu_finish_engine(threaded);
}

/* Nothing runs until a step, and a step runs one op on the caller. */
TEST_CASE(an_op_runs_only_when_stepped)
{
    vf_engine *e = stepped();
    vf_var x = tu_var(e);
    step_op a = {0};
    push(e, &a, 1, 0, NULL, 0, &x, 1);
    for (int i = 0; i < 100; i++)
        sched_yield();
    CHECK(!a.ran);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 1);
    CHECK_EQ(vf__testing_run_one(e), 1);
    CHECK(a.ran && a.done);
    CHECK(pthread_equal(a.thread, pthread_self()));
    CHECK_EQ(a.worker, 0);
    CHECK_EQ(a.done_status, 0);
    finish(e);
}

/* Ready ops run by priority, equal priorities in push order, negative
 * ones last. */
TEST_CASE(priority_order)
{
    static const int prio[] = {0, 3, -1, 3, 1, 0, -1, 7};
    vf_engine *e = stepped();
    step_op o[8] = {{0}};
    for (int i = 0; i < 8; i++)
        push(e, &o[i], i, prio[i], NULL, 0, NULL, 0);
    EXPECT_STEPS(e, 7, 1, 3, 4, 0, 5, 2, 6);
    finish(e);
}

/* Rule 2 on one var: R0 W1 R1 R2 W2 R3. W1 waits for R0, and R1, R2
 * wait for W1 although a read (R0) is under way: no reader overtakes a
 * queued write. The reads between the writes become ready together when
 * W1 finishes (R2, of higher priority, then runs first), and W2, though
 * of the highest priority, waits for both. */
TEST_CASE(reads_between_writes)
{
    vf_engine *e = stepped();
    vf_var x = tu_var(e);
    step_op r0 = {0}, w1 = {0}, r1 = {0}, r2 = {0}, w2 = {0}, r3 = {0};
    push(e, &r0, 0, 0, &x, 1, NULL, 0);
    push(e, &w1, 1, 0, NULL, 0, &x, 1);
    push(e, &r1, 2, 0, &x, 1, NULL, 0);
    push(e, &r2, 3, 5, &x, 1, NULL, 0);
    push(e, &w2, 4, 9, NULL, 0, &x, 1);
    push(e, &r3, 5, 9, &x, 1, NULL, 0);
    EXPECT_STEPS(e, 0, 1, 3, 2, 4, 5);
    finish(e);
}

/* A high priority never overtakes a dependency: the low-priority write
 * pushed first runs before the urgent read of its var, while an
 * independent op of middling priority runs in between as priority says. */
TEST_CASE(priority_does_not_overtake_a_dependency)
{
    vf_engine *e = stepped();
    vf_var x = tu_var(e), y = tu_var(e);
    step_op low = {0}, urgent = {0}, mid = {0};
    push(e, &low, 1, -5, NULL, 0, &x, 1);
    push(e, &urgent, 2, 10, &x, 1, NULL, 0);
    push(e, &mid, 3, 0, &y, 1, NULL, 0);
    EXPECT_STEPS(e, 3, 1, 2);
    finish(e);
}

/* Ops pushed inside a step join the queue; none runs in the same step
 * (no hand-off). They take their place among older ready ops by priority
 * and, among equal priorities, ahead of them: an op's children run
 * before older work, newest first (sched.h: vf__pool_submit_nested), as
 * a worker waiting inside the op needs to find them. */
static int push_two(vf_run *run, void *arg)
{
    step_op *o = arg; /* o[0] is this op; o[1], o[2] are pushed here */
    (void)log_op(run, o);
    push(o->e, &o[1], 11, 5, NULL, 0, NULL, 0);
    push(o->e, &o[2], 12, 0, NULL, 0, NULL, 0);
    return 0;
}

TEST_CASE(ops_made_ready_in_a_step_join_the_queue)
{
    vf_engine *e = stepped();
    step_op a[3] = {{0}}, d = {0};
    a[0].id = 10;
    a[0].e = e;
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = push_two, .arg = a, .name = "a"}));
    push(e, &d, 20, 0, NULL, 0, NULL, 0);
    EXPECT_STEPS(e, 10);
    CHECK(!a[1].ran && !a[2].ran);
    EXPECT_STEPS(e, 11, 12, 20);
    finish(e);
}

/* A failure skips what depends on it, step by step; the wait reports it. */
TEST_CASE(failure_skips_dependents)
{
    vf_engine *e = stepped();
    vf_var x = tu_var(e), y = tu_var(e);
    step_op bad = {.rc = 5}, reader = {0}, other = {0};
    push(e, &bad, 1, 0, NULL, 0, &x, 1);
    push(e, &reader, 2, 0, &x, 1, &y, 1);
    push(e, &other, 3, 0, NULL, 0, NULL, 0);
    EXPECT_STEPS(e, 1, 3);
    CHECK_EQ(bad.done_status, 5);
    CHECK_EQ(vf__testing_run_one(e), 1); /* the reader: skipped */
    CHECK(!reader.ran && reader.done);
    CHECK_EQ(reader.done_status, VF_ESKIPPED);
    CHECK_EQ(vf__testing_run_one(e), 0);
    CHECK_ERR(vf_engine_wait_all(e, NULL), VF_EOPFAILED);
    CHECK_OK(vf_engine_destroy(e));
}

/* An op that waits inside for an op it pushed: the stepping thread, as
 * the pool's worker, runs that op within the same step. */
static int push_and_wait(vf_run *run, void *arg)
{
    step_op *o = arg;
    (void)run;
    push(o->e, &o[1], 2, 0, NULL, 0, &o->var, 1);
    CHECK_OK(vf_var_wait(o->e, o->var, NULL));
    CHECK(o[1].ran);
    CHECK_ERR(vf__testing_run_one(o->e), VF_EDEADLK); /* not from an op */
    if (norder < 64)
        order[norder++] = o->id;
    return 0;
}

TEST_CASE(nested_wait_runs_within_the_step)
{
    vf_engine *e = stepped();
    step_op o[2] = {{.id = 1, .e = e}, {0}};
    o[0].var = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = push_and_wait, .arg = o, .name = "waits"}));
    CHECK_EQ(vf__testing_run_one(e), 1);
    CHECK_EQ(norder, 2);
    CHECK_EQ(order[0], 2); /* the pushed op, inside the wait */
    CHECK_EQ(order[1], 1);
    finish(e);
}

/* vf_engine_wait_all runs what is left on the calling thread. */
TEST_CASE(wait_all_runs_the_rest)
{
    vf_engine *e = stepped();
    vf_var x = tu_var(e);
    step_op o[10] = {{0}};
    for (int i = 0; i < 10; i++)
        push(e, &o[i], i, i % 3, i % 2 ? &x : NULL, i % 2, i % 2 ? NULL : &x,
             i % 2 ? 0 : 1);
    EXPECT_STEPS(e, 0);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(norder, 10);
    for (int i = 0; i < 10; i++)
        CHECK(o[i].ran && pthread_equal(o[i].thread, pthread_self()));
    finish(e);
}

/* An async op made ready in device work goes to the CPU pool (exec.c:
 * starts_on_pool); a step runs it left in flight, on a worker with no
 * pool (found by the second reviewer of that routing: the step read the
 * worker's pool for the op's engine, a NULL dereference). */
typedef struct stepped_async {
    vf_engine *e;
    vf_var out;
    atomic_int started;
    vf_completion keep;
} stepped_async;

static void keep_in_flight(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    stepped_async *s = arg;
    s->keep = done;
    atomic_store(&s->started, 1);
}

static int push_async_from_work(void *arg)
{
    stepped_async *s = arg;
    return vf_engine_push(s->e, &(vf_op){.async_fn = keep_in_flight,
                                         .arg = s,
                                         .writes = VF_VARS(s->out)});
}

static int submit_async_pusher(vf_run *run, void *arg)
{
    return vf_run_submit(run, push_async_from_work, arg, 0);
}

TEST_CASE(async_op_from_device_work_in_a_step)
{
    stepped_async s = {.e = stepped()};
    atomic_init(&s.started, 0);
    s.out = tu_var(s.e);
    vf_var d = tu_var(s.e);
    CHECK_OK(vf_engine_push(s.e, &(vf_op){.fn = submit_async_pusher,
                                          .arg = &s,
                                          .writes = VF_VARS(d),
                                          .device = {VF_DEVICE_EMULATED, 0}}));
    double end = tu_now() + TU_TIMEOUT;
    while (!atomic_load(&s.started) && tu_now() < end)
        if (vf__testing_run_one(s.e) == 0)
            sched_yield();
    REQUIRE(atomic_load(&s.started));
    CHECK_OK(vf_completion_finish(s.keep, 0, NULL));
    finish(s.e);
}

TEST_MAIN("test_stepping", 60)
