/*
 * test_run: what a running op is told through vf_run, on every engine kind.
 *
 * - vf_run_engine is the engine the op was pushed to;
 * - vf_run_name is the op's name, "" when it has none;
 * - vf_run_device is CPU 0; vf_run_stream is NULL on the CPU;
 * - vf_run_worker is -1 on the naive engine (ops run on the pushing
 *   thread) and a valid index (0 <= w < vf_engine_num_workers) on the
 *   others, for sync ops; an async op dispatched by the pushing thread
 *   (ready at push, pushed from the main thread) gets -1;
 * - with help_on_wait, ops the thread in vf_engine_wait_all runs itself (the
 * one worker is blocked) get -1, and the wait returns once all have run;
 * - with run_at_push, on a pool of one worker, an op ready at its push
 *   runs inside the push on the pushing thread (-1, done before the push
 *   returns), a chain of them as the serial program, also while the
 *   worker runs another op; one not ready waits for its var as usual;
 *   off by default, and VF_RUN_AT_PUSH turns it on (another value:
 *   VF_EINVAL); on a pool of two, a ready op whose worker already holds
 *   64 ops (none ranked above it) runs inside its push, and a pusher at
 *   the in-flight bound runs a queued op rather than sleep;
 * - every vf_run getter is NULL-safe;
 * - vf_engine_type_of and vf_engine_num_workers match the configuration;
 * - vf_engine_in_op is true inside an op and its done callback, for that
 *   engine only, and false outside them and for NULL.
 */
#include "runner.h"

#include <unistd.h>

typedef struct seen {
    vf_engine *engine;
    char name[64];
    vf_device device;
    void *stream;
    int worker;
    atomic_int ran;
} seen;

static void record(vf_run *run, seen *s)
{
    s->engine = vf_run_engine(run);
    snprintf(s->name, sizeof s->name, "%s", vf_run_name(run));
    s->device = vf_run_device(run);
    s->stream = vf_run_stream(run);
    s->worker = vf_run_worker(run);
    atomic_fetch_add(&s->ran, 1);
}

static int sync_fn(vf_run *run, void *arg)
{
    record(run, arg);
    return 0;
}

static void async_fn(vf_run *run, void *arg, vf_completion done)
{
    record(run, arg);
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

/* Every vf_run getter is NULL-safe. */
TEST_CASE(null_run)
{
    CHECK(vf_run_engine(NULL) == NULL);
    CHECK_EQ(vf_run_worker(NULL), -1);
    CHECK(vf_run_stream(NULL) == NULL);
    CHECK(vf_run_name(NULL) != NULL);
    CHECK_EQ(vf_run_device(NULL).type, VF_DEVICE_CPU);
    vf_run_set_error(NULL, "ignored");
}

TEST_KIND_CASE(what_ops_see, k)
{
    vf_engine *e = tu_engine(k);
    CHECK_EQ(vf_engine_type_of(e), k->cfg.type);
    int nw = vf_engine_num_workers(e);
    if (k->cfg.type == VF_ENGINE_NAIVE)
        CHECK_EQ(nw, 0);
    else if (k->cfg.type == VF_ENGINE_POOLED)
        CHECK_EQ(nw, k->cfg.cpu_workers);
    else
        CHECK_EQ(nw, k->cfg.cpu_workers + k->cfg.cpu_priority_workers);

    vf_var x = tu_var(e);
    seen named, unnamed, prio, as;
    memset(&named, 0, sizeof named);
    memset(&unnamed, 0, sizeof unnamed);
    memset(&prio, 0, sizeof prio);
    memset(&as, 0, sizeof as);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = sync_fn,
                                        .arg = &named,
                                        .writes = VF_VARS(x),
                                        .name = "named op"}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = sync_fn, .arg = &unnamed, .reads = VF_VARS(x)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = sync_fn,
                                        .arg = &prio,
                                        .property = VF_PROP_CPU_PRIORITIZED}));
    vf_var y = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = async_fn,
                                        .arg = &as,
                                        .writes = VF_VARS(y),
                                        .name = "async"}));
    CHECK_OK(vf_engine_wait_all(e, NULL));

    seen *all[] = {&named, &unnamed, &prio, &as};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(atomic_load(&all[i]->ran), 1);
        CHECK(all[i]->engine == e);
        CHECK_EQ(all[i]->device.type, VF_DEVICE_CPU);
        CHECK_EQ(all[i]->device.id, 0);
        CHECK(all[i]->stream == NULL);
    }
    CHECK(strcmp(named.name, "named op") == 0);
    CHECK(strcmp(unnamed.name, "") == 0);
    CHECK(strcmp(as.name, "async") == 0);
    if (!k->threaded) {
        CHECK_EQ(named.worker, -1);
        CHECK_EQ(unnamed.worker, -1);
        CHECK_EQ(prio.worker, -1);
    } else {
        CHECK(named.worker >= 0 && named.worker < nw);
        CHECK(unnamed.worker >= 0 && unnamed.worker < nw);
        CHECK(prio.worker >= 0 && prio.worker < nw);
        if (k->cfg.type == VF_ENGINE_PERDEVICE)
            CHECK(prio.worker >= k->cfg.cpu_workers);
        else
            CHECK(prio.worker < k->cfg.cpu_workers);
    }
    /* Ready at its push from the main thread: dispatched by the pusher. */
    CHECK_EQ(as.worker, -1);
    tu_finish_engine(e);
}

/* help_on_wait: the pool's one worker is held by a gate op; the main
 * thread's vf_engine_wait_all runs the queued ops itself, the last of which
 * opens the gate. */
typedef struct helped {
    tu_gate started, gate;
    atomic_int on_helper, ran;
} helped;

static int gate_op(vf_run *run, void *arg)
{
    (void)run;
    helped *h = arg;
    tu_gate_open(&h->started);
    tu_gate_wait(&h->gate, 60);
    return 0;
}

static int counted_op(vf_run *run, void *arg)
{
    helped *h = arg;
    if (vf_run_worker(run) == -1)
        atomic_fetch_add(&h->on_helper, 1);
    atomic_fetch_add(&h->ran, 1);
    return 0;
}

static int opener_op(vf_run *run, void *arg)
{
    counted_op(run, arg);
    tu_gate_open(&((helped *)arg)->gate);
    return 0;
}

TEST_CASE(help_on_wait)
{
    tu_phase("help_on_wait");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled",
                                        .cfg = {.type = VF_ENGINE_POOLED,
                                                .cpu_workers = 1,
                                                .help_on_wait = true}});
    helped h;
    memset(&h, 0, sizeof h);
    tu_gate_init(&h.started);
    tu_gate_init(&h.gate);
    vf_var g = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = gate_op,
                                        .arg = &h,
                                        .writes = VF_VARS(g),
                                        .name = "gate"}));
    CHECK(tu_gate_wait(&h.started, 60)); /* the worker is held */
    enum { N = 50 };
    vf_var v[N];
    for (int i = 0; i < N; i++) {
        v[i] = tu_var(e);
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = i == N - 1 ? opener_op : counted_op,
                        .arg = &h,
                        .writes = VF_VARS(v[i]),
                        .name = "helped"}));
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&h.ran), N);
    CHECK_EQ(atomic_load(&h.on_helper), N);
    tu_finish_engine(e);
    tu_gate_destroy(&h.started);
    tu_gate_destroy(&h.gate);
}

/* A timed vf_engine_wait_all with help_on_wait stops at its deadline
 * between the ops of a chain it runs: each op it ran made the next ready
 * on its thread, and it ran all 20 before it looked at the time (found
 * by a user tester: 2 s late for a 20 ms timeout). The pool's one worker
 * is held, so every op that ran, ran on the waiting thread. */
static int slow_op(vf_run *run, void *arg)
{
    counted_op(run, arg);
    nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
    return 0;
}

TEST_CASE(help_on_wait_stops_at_its_deadline)
{
    static const vf_engine_type types[] = {VF_ENGINE_POOLED,
                                           VF_ENGINE_PERDEVICE};
    for (int t = 0; t < 2; t++) {
        check_context_ = t == 0 ? "pooled" : "perdevice";
        vf_engine *e = tu_engine(&(tu_kind){
            .name = check_context_,
            .cfg = {.type = types[t], .cpu_workers = 1, .help_on_wait = true}});
        helped h;
        memset(&h, 0, sizeof h);
        tu_gate_init(&h.started);
        tu_gate_init(&h.gate);
        vf_var g = tu_var(e), chain = tu_var(e);
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = gate_op, .arg = &h, .writes = VF_VARS(g)}));
        CHECK(tu_gate_wait(&h.started, 60)); /* the worker is held */
        enum { N = 20 };
        for (int i = 0; i < N; i++)
            CHECK_OK(vf_engine_push(
                e,
                &(vf_op){.fn = slow_op, .arg = &h, .writes = VF_VARS(chain)}));
        CHECK_EQ(vf_engine_wait_all_timed(e, 5, NULL), VF_ETIMEDOUT);
        /* The op it began (none, on a slow machine that looked late). */
        CHECK(atomic_load(&h.ran) <= 1);
        CHECK_EQ(atomic_load(&h.on_helper), atomic_load(&h.ran));
        tu_gate_open(&h.gate);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&h.ran), N);
        tu_finish_engine(e);
        tu_gate_destroy(&h.started);
        tu_gate_destroy(&h.gate);
    }
}

/* ... and once the engine has devices, it runs no further op of a chain
 * under a deadline: X1, run by the waiting thread (the worker is busy),
 * pushes the engine's first device op D, whose work the test holds, and
 * X2 (reading D's var, writing after X1) becomes ready at X1's end. Kept
 * on the waiting thread, X2 met D's work on the host and the 20 ms wait
 * returned only when that work ended (the reviewer). The work lets itself
 * go after 5 s, so the case ends either way. */
static atomic_int chain_go, chain_self_released, chain_busy_go,
    chain_busy_started, chain_d_returned, chain_x2_pushed;
static vf_var chain_v, chain_c;
static vf_engine *chain_e;

static int chain_dev_work(void *arg)
{
    (void)arg;
    double end = tu_now() + 5;
    while (!atomic_load(&chain_go))
        if (tu_now() > end) {
            atomic_store(&chain_self_released, 1);
            break;
        }
    return 0;
}

static int chain_dev_op(vf_run *run, void *arg)
{
    (void)arg;
    int rc = vf_run_submit(run, chain_dev_work, NULL, 0);
    atomic_store(&chain_d_returned, 1);
    return rc;
}

static int chain_busy(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_store(&chain_busy_started, 1);
    CHECK(tu_wait_flag(&chain_busy_go, 1, TU_TIMEOUT));
    return 0;
}

static int chain_x1(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    CHECK_OK(
        vf_engine_push(chain_e, &(vf_op){.fn = chain_dev_op,
                                         .writes = VF_VARS(chain_v),
                                         .device = {VF_DEVICE_EMULATED, 0}}));
    CHECK(tu_wait_flag(&chain_x2_pushed, 1, TU_TIMEOUT));
    return 0;
}

static void *chain_pusher(void *arg)
{
    (void)arg;
    CHECK(tu_wait_flag(&chain_d_returned, 1, TU_TIMEOUT));
    CHECK_OK(vf_engine_push(chain_e, &(vf_op){.fn = tu_nop,
                                              .reads = VF_VARS(chain_v),
                                              .writes = VF_VARS(chain_c)}));
    atomic_store(&chain_x2_pushed, 1);
    return NULL;
}

TEST_CASE(help_on_wait_chain_stops_at_a_device)
{
    chain_e = tu_engine(&(tu_kind){.name = "perdevice",
                                   .cfg = {.type = VF_ENGINE_PERDEVICE,
                                           .cpu_workers = 1,
                                           .help_on_wait = true}});
    chain_v = tu_var(chain_e);
    chain_c = tu_var(chain_e);
    vf_var x = tu_var(chain_e);
    CHECK_OK(vf_engine_push(chain_e,
                            &(vf_op){.fn = chain_busy, .writes = VF_VARS(x)}));
    CHECK(tu_wait_flag(&chain_busy_started, 1, TU_TIMEOUT));
    CHECK_OK(vf_engine_push(
        chain_e, &(vf_op){.fn = chain_x1, .writes = VF_VARS(chain_c)}));
    pthread_t t = tu_thread_start(chain_pusher, NULL);
    CHECK_EQ(vf_engine_wait_all_timed(chain_e, 20, NULL), VF_ETIMEDOUT);
    CHECK_EQ(atomic_load(&chain_self_released), 0); /* it returned first */
    atomic_store(&chain_go, 1);
    atomic_store(&chain_busy_go, 1);
    tu_thread_join(t);
    CHECK_OK(vf_engine_wait_all(chain_e, NULL));
    tu_finish_engine(chain_e);
}

typedef struct at_push {
    pthread_t pusher;
    atomic_int on_pusher, ran;
    long chain; /* x = 3x + 1, under var x */
} at_push;

static int at_push_op(vf_run *run, void *arg)
{
    at_push *a = arg;
    if (pthread_equal(pthread_self(), a->pusher) && vf_run_worker(run) == -1)
        atomic_fetch_add(&a->on_pusher, 1);
    a->chain = 3 * a->chain + 1;
    atomic_fetch_add(&a->ran, 1);
    return 0;
}

typedef struct spawner {
    helped *h;
    vf_var g;
} spawner;

/* Pushes the gate op as its child: the child runs on the worker even with
 * run_at_push (only top-level pushes run on the pushing thread). */
static int spawn_gate(vf_run *run, void *arg)
{
    spawner *s = arg;
    return vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = gate_op, .arg = s->h, .writes = {&s->g, 1}});
}

static void run_at_push_case(bool on)
{
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled/1",
                                        .cfg = {.type = VF_ENGINE_POOLED,
                                                .cpu_workers = 1,
                                                .run_at_push = on}});
    vf_var x = tu_var(e);
    at_push a;
    memset(&a, 0, sizeof a);
    a.pusher = pthread_self();
    for (int i = 0; i < 20; i++) {
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = at_push_op, .arg = &a, .writes = VF_VARS(x)}));
        if (on)
            CHECK_EQ(atomic_load(&a.ran), i + 1); /* ran inside the push */
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    long want = 0;
    for (int i = 0; i < 20; i++)
        want = 3 * want + 1;
    CHECK_EQ(a.chain, want);
    if (on)
        CHECK_EQ(atomic_load(&a.on_pusher), 20);
    else
        CHECK(atomic_load(&a.on_pusher) < 20); /* on the worker, as before */
    /* The worker busy (held on a gate), its queue empty: an op that is not
     * ready waits behind the gate either way; ready ones run here with the
     * switch on (two ops of a pool of one at once, as with help_on_wait),
     * else they queue behind the gate's. */
    helped h;
    memset(&h, 0, sizeof h);
    tu_gate_init(&h.started);
    tu_gate_init(&h.gate);
    vf_var g = tu_var(e), y = tu_var(e), z = tu_var(e);
    spawner s = {&h, g};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = spawn_gate, .arg = &s}));
    CHECK(tu_gate_wait(&h.started, 60));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = counted_op, .arg = &h, .writes = VF_VARS(g)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = counted_op, .arg = &h, .writes = VF_VARS(y)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = counted_op, .arg = &h, .writes = VF_VARS(z)}));
    CHECK_EQ(atomic_load(&h.ran), on ? 2 : 0);
    CHECK_EQ(atomic_load(&h.on_helper), on ? 2 : 0);
    tu_gate_open(&h.gate);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&h.ran), 3);
    tu_finish_engine(e);
    tu_gate_destroy(&h.started);
    tu_gate_destroy(&h.gate);
}

/* run_at_push on a pool of two: a pusher ahead of the pool runs ready ops
 * itself. The holder (an op on worker X) holds the other worker Y on a gate
 * (its child), then queues kKids children on X's own queue behind one of
 * priority 1, and holds X too. */
enum { kKids = 100 };

typedef struct ahead {
    helped held;            /* the gate holding Y, and the pushes counted */
    tu_gate ready, release; /* the holder queued its children; let X go */
    bool queue_kids;
    vf_var g, hi, kid[kKids];
    atomic_int kids_ran;
} ahead;

static int kid_op(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((ahead *)arg)->kids_ran, 1);
    return 0;
}

static int holder_op(vf_run *run, void *arg)
{
    ahead *a = arg;
    vf_engine *e = vf_run_engine(run);
    int rc = vf_engine_push(
        e, &(vf_op){.fn = gate_op, .arg = &a->held, .writes = {&a->g, 1}});
    if (rc != 0 || !tu_gate_wait(&a->held.started, 60))
        return -1; /* Y took the gate: it is held */
    if (a->queue_kids) {
        /* One of priority 1 first: the children queue behind it on X
         * (a child never runs at its push ahead of a better queued op). */
        rc = vf_engine_push(e, &(vf_op){.fn = kid_op,
                                        .arg = a,
                                        .writes = {&a->hi, 1},
                                        .priority = 1});
        for (int i = 0; rc == 0 && i < kKids; i++)
            rc = vf_engine_push(
                e, &(vf_op){.fn = kid_op, .arg = a, .writes = {&a->kid[i], 1}});
    }
    tu_gate_open(&a->ready);
    tu_gate_wait(&a->release, 60);
    return rc;
}

static vf_engine *ahead_engine(ahead *a, bool queue_kids, int max_inflight)
{
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled/2",
                                        .cfg = {.type = VF_ENGINE_POOLED,
                                                .cpu_workers = 2,
                                                .max_inflight = max_inflight,
                                                .run_at_push = true}});
    memset(a, 0, sizeof *a);
    tu_gate_init(&a->held.started);
    tu_gate_init(&a->held.gate);
    tu_gate_init(&a->ready);
    tu_gate_init(&a->release);
    a->queue_kids = queue_kids;
    a->g = tu_var(e);
    a->hi = tu_var(e);
    for (int i = 0; i < kKids; i++)
        a->kid[i] = tu_var(e);
    vf_var h = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = holder_op, .arg = a, .writes = VF_VARS(h)}));
    CHECK(tu_gate_wait(&a->ready, 60)); /* both workers are held */
    return e;
}

static void ahead_finish(vf_engine *e, ahead *a)
{
    tu_gate_open(&a->held.gate);
    tu_gate_open(&a->release);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
    tu_gate_destroy(&a->held.started);
    tu_gate_destroy(&a->held.gate);
    tu_gate_destroy(&a->ready);
    tu_gate_destroy(&a->release);
}

/* A thread that turns bulk on for the engine and ends: its state keeps
 * bulk in use (bulk.h: vf__bulk_maybe) until the engine is destroyed. */
/* A thread with bulk state on an engine, alive until `done` (its exit
 * gives its state back: bulk.h). */
typedef struct bulker {
    vf_engine *e;
    atomic_int on, done;
} bulker;

static void *bulk_on(void *arg)
{
    bulker *b = arg;
    CHECK_OK(vf_bulk_set_size(b->e, 100));
    atomic_store(&b->on, 1);
    tu_wait_flag(&b->done, 1, TU_TIMEOUT);
    return NULL;
}

/* A push made at the in-flight bound on a thread of its own. */
typedef struct bound_push {
    vf_engine *e;
    helped *h;
    vf_var v[3];
    atomic_int returned;
} bound_push;

static void *push_third(void *arg)
{
    bound_push *bp = arg;
    CHECK_OK(vf_engine_push(
        bp->e,
        &(vf_op){.fn = counted_op, .arg = bp->h, .writes = VF_VARS(bp->v[2])}));
    atomic_store(&bp->returned, 1);
    return NULL;
}

TEST_CASE(run_at_push_when_ahead)
{
    tu_phase("run_at_push_when_ahead");
    /* X's queue holds kKids + 1 >= 64 ops: of two ready pushes, at least
     * one goes to X, where it runs inside the push (on the pusher, -1);
     * one that goes to Y's empty queue waits there (which worker is X is
     * up to the scheduler). A priority-0 op would not run there: a
     * priority-1 op queued on X ranks above it (rule 11). */
    ahead a;
    vf_engine *e = ahead_engine(&a, true, 0);
    vf_var q[3] = {tu_var(e), tu_var(e), tu_var(e)};
    for (int i = 0; i < 2; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = counted_op,
                                            .arg = &a.held,
                                            .writes = VF_VARS(q[i]),
                                            .priority = 2}));
    int here = atomic_load(&a.held.on_helper);
    CHECK(here >= 1);
    CHECK_EQ(atomic_load(&a.held.ran), here);
    for (int i = 0; i < 2; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = counted_op,
                                            .arg = &a.held,
                                            .writes = VF_VARS(q[2])}));
    CHECK_EQ(atomic_load(&a.held.ran), here); /* behind the priority-1 op */
    CHECK_EQ(atomic_load(&a.kids_ran), 0);
    ahead_finish(e, &a);
    CHECK_EQ(atomic_load(&a.held.ran), 4);
    CHECK_EQ(atomic_load(&a.held.on_helper), here);
    CHECK_EQ(atomic_load(&a.kids_ran), kKids + 1);

    /* At the in-flight bound (4: the holder, the gate and two queued ops),
     * the pusher runs a queued op rather than sleep, and its push goes on
     * with both workers still held. */
    e = ahead_engine(&a, false, 4);
    vf_var r[3] = {tu_var(e), tu_var(e), tu_var(e)};
    for (int i = 0; i < 3; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = counted_op,
                                            .arg = &a.held,
                                            .writes = VF_VARS(r[i])}));
    CHECK_EQ(atomic_load(&a.held.ran), 1);
    CHECK_EQ(atomic_load(&a.held.on_helper), 1);
    ahead_finish(e, &a);
    CHECK_EQ(atomic_load(&a.held.ran), 3);

    /* The same while another thread has bulk state (varflow.h: the help is
     * off while bulk is in use anywhere): the third push sleeps at the
     * bound, on a thread of its own, until the workers are let go; nobody
     * runs an op on the pusher. */
    e = ahead_engine(&a, false, 4);
    bulker bk = {.e = e};
    pthread_t bulking = tu_thread_start(bulk_on, &bk);
    REQUIRE(tu_wait_flag(&bk.on, 1, TU_TIMEOUT));
    bound_push bp = {.e = e, .h = &a.held};
    for (int i = 0; i < 3; i++)
        bp.v[i] = tu_var(e);
    for (int i = 0; i < 2; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = counted_op,
                                            .arg = &a.held,
                                            .writes = VF_VARS(bp.v[i])}));
    pthread_t third = tu_thread_start(push_third, &bp);
    usleep(50 * 1000); /* ample for a helping pusher to have run one */
    CHECK_EQ(atomic_load(&a.held.ran), 0);
    CHECK_EQ(atomic_load(&bp.returned), 0); /* asleep at the bound */
    ahead_finish(e, &a);
    tu_thread_join(third);
    CHECK_EQ(atomic_load(&bp.returned), 1);
    CHECK_EQ(atomic_load(&a.held.ran), 3);
    CHECK_EQ(atomic_load(&a.held.on_helper), 0);
    atomic_store(&bk.done, 1);
    tu_thread_join(bulking);
}

TEST_CASE(run_at_push)
{
    tu_phase("run_at_push");
    run_at_push_case(false);
    run_at_push_case(true);
    setenv("VF_RUN_AT_PUSH", "1", 1);
    vf_engine *e = NULL;
    vf_config cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 1};
    CHECK_OK(vf_engine_create(&e, &cfg));
    vf_var x = tu_var(e);
    at_push a;
    memset(&a, 0, sizeof a);
    a.pusher = pthread_self();
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = at_push_op, .arg = &a, .writes = VF_VARS(x)}));
    CHECK_EQ(atomic_load(&a.on_pusher), 1);
    tu_finish_engine(e);
    setenv("VF_RUN_AT_PUSH", "yes", 1);
    e = NULL;
    CHECK_EQ(vf_engine_create(&e, &cfg), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "VF_RUN_AT_PUSH") != NULL);
    unsetenv("VF_RUN_AT_PUSH");
}

typedef struct inside {
    vf_engine *e, *other;
    atomic_int in_fn, in_other, in_done;
} inside;

static int inside_fn(vf_run *run, void *arg)
{
    (void)run;
    inside *in = arg;
    atomic_store(&in->in_fn, vf_engine_in_op(in->e) ? 1 : 2);
    atomic_store(&in->in_other, vf_engine_in_op(in->other) ? 1 : 2);
    return 0;
}

static void inside_done(void *arg, int status)
{
    (void)status;
    inside *in = arg;
    atomic_store(&in->in_done, vf_engine_in_op(in->e) ? 1 : 2);
}

/* run_at_push when the pusher is ahead of workers busy in long ops: the
 * pushes wait on the workers' inboxes, which they do not take from while
 * busy, so counted by their queues alone the pusher never looked ahead,
 * and none of 300 ran on it (found by a user tester checking the GUIDE).
 * Now past 64 waiting for the worker a push would go to, the push runs
 * its op; with the switch off, none does. */
typedef struct busy_pool {
    atomic_int started, open, on_pusher, ran;
} busy_pool;

static int hold_until_open(vf_run *run, void *arg)
{
    (void)run;
    busy_pool *b = arg;
    atomic_fetch_add(&b->started, 1);
    REQUIRE(tu_wait_flag(&b->open, 1, 60.0));
    return 0;
}

static int count_where(vf_run *run, void *arg)
{
    busy_pool *b = arg;
    if (vf_run_worker(run) == -1)
        atomic_fetch_add(&b->on_pusher, 1);
    atomic_fetch_add(&b->ran, 1);
    return 0;
}

TEST_CASE(run_at_push_ahead_of_busy_workers)
{
    for (int on = 0; on < 2; on++) {
        busy_pool b = {0};
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                                   .cpu_workers = 2,
                                                   .run_at_push = on}));
        REQUIRE(e != NULL);
        for (int i = 0; i < 2; i++)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = hold_until_open, .arg = &b}));
        REQUIRE(tu_wait_flag(&b.started, 2, TU_TIMEOUT)); /* both busy */
        for (int i = 0; i < 300; i++)
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = count_where, .arg = &b}));
        int during = atomic_load(&b.on_pusher);
        atomic_store(&b.open, 1);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&b.ran), 300);
        if (on) /* 64 wait for each worker; the rest ran here */
            CHECK(during >= 300 - 2 * 64 - 2 && during <= 300 - 2 * 64);
        else
            CHECK_EQ(during, 0);
        CHECK_OK(vf_engine_destroy(e));
    }
}

TEST_KIND_CASE(in_op, k)
{
    vf_engine *e = tu_engine(k), *other = tu_engine(k);
    static inside in;
    in.e = e;
    in.other = other;
    CHECK(!vf_engine_in_op(NULL));
    CHECK(!vf_engine_in_op(e));
    vf_var v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = inside_fn,
                                        .arg = &in,
                                        .done = inside_done,
                                        .writes = VF_VARS(v)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&in.in_fn), 1);
    CHECK_EQ(atomic_load(&in.in_other), 2);
    CHECK_EQ(atomic_load(&in.in_done), 1);
    CHECK(!vf_engine_in_op(e));
    tu_finish_engine(other);
    tu_finish_engine(e);
}

TEST_MAIN("test_run", 60)
