/*
 * test_priority: scheduling among ready ops (rules 11 and 12).
 *
 * On a 1-worker pool (pooled, and perdevice's normal pool): the worker is
 * blocked by an op waiting on a gate (the test waits until it has started),
 * independent ops of assorted priorities are pushed, the gate is opened;
 * they must run highest priority first, in push order among equal
 * priorities. A var delete (VF_PROP_DELETE_VAR) pushed last runs before all
 * of them (it jumps to the front of the ready queue), even before higher
 * priorities. An op made ready by the blocker finishing (it waited for the
 * blocker's var) takes its place by priority among the queued ones too.
 *
 * A child ready at its push runs inside it on a 1-worker pool, but never
 * ahead of a higher-priority op: the blocker, while a priority-5 op the
 * program pushed waits for the worker, pushes child D and waits for it
 * (which sorts the program's op into the queue), then pushes child C, both
 * priority 0: they must run D, the priority-5 op, then C.
 *
 * On the perdevice engine, VF_PROP_CPU_PRIORITIZED ops run on the priority
 * pool: their vf_run_worker indices are disjoint from the normal ops', and
 * a CPU-prioritized op completes while every normal worker is blocked. The
 * pooled and naive engines accept the property and run the op.
 */
#include "runner.h"

#define MAXLOG 64

typedef struct prio {
    tu_gate started, release;
    atomic_int n;
    int order[MAXLOG];
} prio;

typedef struct item {
    prio *p;
    int id;
} item;

static int blocker(vf_run *run, void *arg)
{
    (void)run;
    prio *p = arg;
    tu_gate_open(&p->started);
    CHECK(tu_gate_wait(&p->release, TU_TIMEOUT));
    return 0;
}

static int logged(vf_run *run, void *arg)
{
    (void)run;
    item *it = arg;
    int i = atomic_fetch_add(&it->p->n, 1);
    if (i < MAXLOG)
        it->p->order[i] = it->id;
    return 0;
}

static void log_free(void *arg)
{
    item *it = arg;
    int i = atomic_fetch_add(&it->p->n, 1);
    if (i < MAXLOG)
        it->p->order[i] = it->id;
}

static void prio_init(prio *p)
{
    memset(p, 0, sizeof *p);
    tu_gate_init(&p->started);
    tu_gate_init(&p->release);
}

static void prio_destroy(prio *p)
{
    tu_gate_destroy(&p->started);
    tu_gate_destroy(&p->release);
}

static void block_worker(vf_engine *e, prio *p)
{
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = blocker, .arg = p, .name = "block"}));
    CHECK(tu_gate_wait(&p->started, TU_TIMEOUT));
}

static void print_order(const prio *p, int n)
{
    fprintf(stderr, "  ran in order:");
    for (int i = 0; i < n && i < MAXLOG; i++)
        fprintf(stderr, " %d", p->order[i]);
    fprintf(stderr, "\n");
}

/* The ordering cases run on the 1-worker pools only (pooled/1 and
 * perdevice/1; see the top of the file), and return at once on the other
 * kinds. */
static bool one_worker(const tu_kind *k)
{
    return k->threaded && k->workers == 1;
}

TEST_KIND_CASE(priority_order, k)
{
    if (!one_worker(k))
        return;
    vf_engine *e = tu_engine(k);
    prio p;
    prio_init(&p);
    block_worker(e, &p);
    enum { N = 24 };
    static const int prios[N] = {3, 1,  4, 1, 5, 9, 2,   6, 5,  3, 5, 8,
                                 9, -7, 9, 3, 2, 0, 100, 0, -7, 4, 6, 2};
    item items[N];
    for (int i = 0; i < N; i++) {
        items[i].p = &p;
        items[i].id = i;
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = logged, .arg = &items[i], .priority = prios[i]}));
    }
    tu_gate_open(&p.release);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&p.n), N);
    /* Expected: stable sort by priority, descending. */
    int want[N];
    for (int i = 0; i < N; i++)
        want[i] = i;
    for (int i = 1; i < N; i++)
        for (int j = i; j > 0 && prios[want[j]] > prios[want[j - 1]]; j--) {
            int t = want[j];
            want[j] = want[j - 1];
            want[j - 1] = t;
        }
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (p.order[i] != want[i] && bad++ == 0)
            CHECK_REPORT_("position %d: op %d (priority %d) ran, expected op "
                          "%d (priority %d)",
                          i, p.order[i], prios[p.order[i]], want[i],
                          prios[want[i]]);
    if (bad)
        print_order(&p, N);
    tu_finish_engine(e);
    prio_destroy(&p);
}

TEST_KIND_CASE(delete_jumps, k)
{
    if (!one_worker(k))
        return;
    vf_engine *e = tu_engine(k);
    prio p;
    prio_init(&p);
    vf_var v = tu_var(e);
    block_worker(e, &p);
    item items[6];
    for (int i = 0; i < 5; i++) {
        items[i].p = &p;
        items[i].id = i;
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = logged, .arg = &items[i], .priority = 10 * i}));
    }
    items[5].p = &p;
    items[5].id = 99;
    CHECK_OK(vf_var_destroy(e, v, log_free, &items[5]));
    tu_gate_open(&p.release);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&p.n), 6);
    CHECK_EQ(p.order[0], 99);
    if (p.order[0] != 99)
        print_order(&p, 6);
    for (int i = 1; i < 6; i++)
        CHECK_EQ(p.order[i], 5 - i);
    tu_finish_engine(e);
    prio_destroy(&p);
}

/* Ops made ready by a finishing op go by priority, not first. */
static int blocker_w(vf_run *run, void *arg)
{
    return blocker(run, arg);
}

TEST_KIND_CASE(ready_by_finish, k)
{
    if (!one_worker(k))
        return;
    vf_engine *e = tu_engine(k);
    prio p;
    prio_init(&p);
    vf_var v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = blocker_w,
                                        .arg = &p,
                                        .writes = VF_VARS(v),
                                        .name = "block"}));
    CHECK(tu_gate_wait(&p.started, TU_TIMEOUT));
    item items[4] = {{&p, 0}, {&p, 1}, {&p, 2}, {&p, 3}};
    /* 0: waits for the blocker's var, priority 1; 1..3 ready now. */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = logged,
                                        .arg = &items[0],
                                        .reads = VF_VARS(v),
                                        .priority = 1}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = logged, .arg = &items[1], .priority = 5}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = logged, .arg = &items[2], .priority = -5}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = logged, .arg = &items[3], .priority = 2}));
    tu_gate_open(&p.release);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&p.n), 4);
    static const int want[4] = {1, 3, 0, 2};
    int bad = 0;
    for (int i = 0; i < 4; i++)
        bad += p.order[i] != want[i];
    if (bad) {
        CHECK_REPORT_("ops made ready by a finish did not go by priority "
                      "(expected 1 3 0 2)");
        print_order(&p, 4);
    }
    tu_finish_engine(e);
    prio_destroy(&p);
}

/* ------------------------------------------------------------ CPU pool */

typedef struct pool {
    tu_gate release;
    atomic_int normal_in;
    atomic_int prio_ran;
    atomic_int worker_normal[64];
    atomic_int worker_prio[64];
    atomic_int bad_worker;
} pool;

static int normal_block(vf_run *run, void *arg)
{
    pool *p = arg;
    int w = vf_run_worker(run);
    if (w >= 0 && w < 64)
        atomic_fetch_add(&p->worker_normal[w], 1);
    else
        atomic_fetch_add(&p->bad_worker, 1);
    atomic_fetch_add(&p->normal_in, 1);
    CHECK(tu_gate_wait(&p->release, TU_TIMEOUT));
    return 0;
}

static int normal_op(vf_run *run, void *arg)
{
    pool *p = arg;
    int w = vf_run_worker(run);
    if (w >= 0 && w < 64)
        atomic_fetch_add(&p->worker_normal[w], 1);
    else
        atomic_fetch_add(&p->bad_worker, 1);
    return 0;
}

static int prio_op(vf_run *run, void *arg)
{
    pool *p = arg;
    int w = vf_run_worker(run);
    if (w >= 0 && w < 64)
        atomic_fetch_add(&p->worker_prio[w], 1);
    else
        atomic_fetch_add(&p->bad_worker, 1);
    atomic_fetch_add(&p->prio_ran, 1);
    return 0;
}

static void check_cpu_prioritized(const tu_kind *k)
{
    vf_engine *e = tu_engine(k);
    pool p;
    memset(&p, 0, sizeof p);
    tu_gate_init(&p.release);
    if (k->cfg.type == VF_ENGINE_PERDEVICE) {
        int nw = k->workers;
        CHECK_EQ(vf_engine_num_workers(e), nw + k->cfg.cpu_priority_workers);
        /* Block every normal worker. */
        for (int i = 0; i < nw; i++)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = normal_block, .arg = &p}));
        CHECK(tu_wait_flag(&p.normal_in, nw, TU_TIMEOUT));
        /* The priority pool still runs prioritized ops. */
        for (int i = 0; i < 20; i++)
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = prio_op,
                            .arg = &p,
                            .property = VF_PROP_CPU_PRIORITIZED}));
        CHECK(tu_wait_flag(&p.prio_ran, 20, TU_TIMEOUT));
        tu_gate_open(&p.release);
        for (int i = 0; i < 50; i++)
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = normal_op, .arg = &p}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&p.bad_worker), 0);
        for (int w = 0; w < 64; w++)
            if (atomic_load(&p.worker_normal[w]) &&
                atomic_load(&p.worker_prio[w]))
                CHECK_REPORT_("worker %d ran both normal and CPU-prioritized "
                              "ops",
                              w);
    } else {
        tu_gate_open(&p.release);
        for (int i = 0; i < 20; i++)
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = prio_op,
                            .arg = &p,
                            .property = VF_PROP_CPU_PRIORITIZED}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&p.prio_ran), 20);
    }
    tu_finish_engine(e);
    tu_gate_destroy(&p.release);
}

TEST_KIND_CASE(cpu_prioritized, k)
{
    check_cpu_prioritized(k);
}

/* A perdevice engine with more priority workers than normal ones. */
TEST_CASE(cpu_prioritized_1_plus_3)
{
    tu_kind big = {"perdevice/1+3",
                   {.type = VF_ENGINE_PERDEVICE,
                    .cpu_workers = 1,
                    .cpu_priority_workers = 3},
                   true,
                   1};
    check_context_ = big.name;
    check_cpu_prioritized(&big);
    check_context_ = NULL;
}

/* The blocker as a parent: once released, it pushes child D, waits for
 * it, then pushes child C (items 1 and 2 of `kids`, priority 0). */
typedef struct parent_kids {
    prio *p;
    item kids[2];
} parent_kids;

static int blocking_parent(vf_run *run, void *arg)
{
    parent_kids *pk = arg;
    prio *p = pk->p;
    tu_gate_open(&p->started);
    CHECK(tu_gate_wait(&p->release, TU_TIMEOUT));
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = logged, .arg = &pk->kids[0]}));
    CHECK_OK(vf_run_wait_children(run, NULL));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = logged, .arg = &pk->kids[1]}));
    return 0;
}

TEST_KIND_CASE(child_at_push_yields_to_priority, k)
{
    if (!one_worker(k))
        return;
    vf_engine *e = tu_engine(k);
    prio p;
    prio_init(&p);
    parent_kids pk = {&p, {{&p, 1}, {&p, 2}}};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = blocking_parent, .arg = &pk}));
    CHECK(tu_gate_wait(&p.started, TU_TIMEOUT));
    item high = {&p, 0};
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = logged, .arg = &high, .priority = 5}));
    tu_gate_open(&p.release);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&p.n), 3);
    if (p.order[0] != 1 || p.order[1] != 0 || p.order[2] != 2) {
        CHECK_REPORT_("expected child D (1), the priority-5 op (0), then "
                      "child C (2)");
        print_order(&p, 3);
    }
    tu_finish_engine(e);
    prio_destroy(&p);
}

/* Rule 11 across a pool's workers: with both workers of a pool of two
 * blocked, low ops (priority 0) are pushed (round-robin over the workers'
 * inboxes), then a priority-9 and a priority-5 op; one worker is released:
 * it runs the 9, then the 5, wherever they were placed, before any low op
 * of its own queue. Each worker took its own queue first: the high op
 * waited behind the other's low ops, or behind its own worker's blocker,
 * by the parity of the low ops' count (found by a user tester). */
TEST_KIND_CASE(across_the_pools_workers, k)
{
    if (!k->threaded || k->workers != 2)
        return;
    for (int nlow = 20; nlow <= 21; nlow++) {
        vf_engine *e = tu_engine(k);
        prio a, b;
        prio_init(&a);
        prio_init(&b);
        block_worker(e, &a);
        block_worker(e, &b);
        item items[MAXLOG];
        for (int i = 0; i < nlow + 2; i++) {
            items[i].p = &a;
            items[i].id = i;
            int priority = i < nlow ? 0 : i == nlow ? 9 : 5;
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = logged,
                                                .arg = &items[i],
                                                .priority = priority}));
        }
        tu_gate_open(&a.release);
        /* The released worker ran a few by now; the other is held. */
        CHECK(tu_wait_flag(&a.n, 4, TU_TIMEOUT));
        tu_gate_open(&b.release);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&a.n), nlow + 2);
        if (a.order[0] != nlow || a.order[1] != nlow + 1) {
            CHECK_REPORT_("%d low ops: the first two to run were %d and %d, "
                          "not the priority-9 op %d and the priority-5 op %d",
                          nlow, a.order[0], a.order[1], nlow, nlow + 1);
            print_order(&a, nlow + 2);
        }
        tu_finish_engine(e);
        prio_destroy(&a);
        prio_destroy(&b);
    }
}

/* A worker waiting inside an op takes no higher op of another worker's
 * queue: its wait's loop may run only what may run above the wait, and sent
 * such an op (H1, priority 5, on the other worker's heap) back to its own
 * queue with a new turn, so H2, pushed after H1 at the same priority, ran
 * first (the reviewer of across_the_pools_workers, 5 runs in 5). */
static atomic_int wp_cmd, wp_go, wp_d_started, wp_n, wp_b_worker = -9,
                                                     wp_p_worker = -9;
static int wp_order[16];
static vf_var wp_v;

static int wp_logged(vf_run *run, void *arg)
{
    (void)run;
    wp_order[atomic_fetch_add(&wp_n, 1)] = (int)(intptr_t)arg;
    return 0;
}

static int wp_slow(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_store(&wp_d_started, 1);
    tu_spin_us(100000);
    return 0;
}

static bool wp_until(atomic_int *flag, int want)
{
    double end = tu_now() + TU_TIMEOUT;
    while (atomic_load(flag) != want)
        if (tu_now() > end)
            return false;
        else
            sched_yield();
    return true;
}

static int wp_blocker(vf_run *run, void *arg)
{
    (void)arg;
    atomic_store(&wp_b_worker, vf_run_worker(run));
    CHECK(wp_until(&wp_cmd, 1));
    for (intptr_t h = 1; h <= 2; h++) /* H1, H2 on this worker's heap */
        CHECK_OK(vf_engine_push(
            vf_run_engine(run),
            &(vf_op){.fn = wp_logged, .arg = (void *)h, .priority = 5}));
    atomic_store(&wp_cmd, 0);
    CHECK(wp_until(&wp_cmd, 2));
    return 0;
}

static int wp_parent(vf_run *run, void *arg)
{
    (void)arg;
    atomic_store(&wp_p_worker, vf_run_worker(run));
    CHECK(wp_until(&wp_go, 1));
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(wp_v)}));
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = wp_slow, .reads = VF_VARS(wp_v)}));
    return vf_run_wait_children(run, NULL);
}

TEST_CASE(a_waiter_takes_no_higher_op_of_another_worker)
{
    vf_engine *e = tu_engine(&tu_kinds[2]); /* pooled, 2 workers */
    wp_v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wp_blocker}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wp_parent}));
    double end = tu_now() + TU_TIMEOUT;
    while ((atomic_load(&wp_b_worker) < 0 || atomic_load(&wp_p_worker) < 0) &&
           tu_now() < end)
        sched_yield();
    atomic_store(&wp_cmd, 1);
    CHECK(wp_until(&wp_cmd, 0));
    atomic_store(&wp_go, 1);
    CHECK(tu_wait_flag(&wp_d_started, 1, TU_TIMEOUT));
    atomic_store(&wp_cmd, 2); /* the blocker's worker free while D runs */
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&wp_n), 2);
    CHECK_EQ(wp_order[0], 1); /* H1, pushed first */
    tu_finish_engine(e);
}

TEST_MAIN("test_priority", 120)
