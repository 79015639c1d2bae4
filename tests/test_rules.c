/*
 * test_rules: the var queue rules, each on its own (rules 1, 2, 3, 4, 6).
 *
 * - rule 2 (FIFO, neither reader- nor writer-preferring): W1; R1 R2; W2;
 *   R3 on one var. R1 and R2 run after W1 ends and before W2 starts (a
 *   writer-preferring queue would let W2 pass them); R3 runs after W2 ends
 *   (a reader-preferring queue would let it join R1 and R2). The readers are
 *   slow so that a wrong queue shows.
 * - rule 3 (readers of one var run at the same time): on two workers, two,
 *   then (with three workers) three readers of one var meet at a
 *   rendezvous; a read pushed while readers run (no write queued) joins
 *   them at once.
 * - rule 1: writers of one var never overlap (a counter of writers inside
 *   the var stays at one), and readers never overlap a writer, under a
 *   random mix pushed by the main thread.
 * - rule 6: wait_var returns once the writes pushed before it are done,
 *   with their effects visible, without waiting for readers (a reader held
 *   on a gate does not hold up wait_var of its var); wait_all waits for
 *   everything pushed, readers included.
 * - rule 4 (the wait counter is vars + 1; the push takes the last one off):
 *   an op with no vars runs exactly once (its only count is the push's:
 *   without it the op would never be dispatched and wait_all would hang
 *   until the watchdog fires), and ops pushed behind writes that finish
 *   while the push is under way each run exactly once (a push that did not
 *   hold the last count could see its op dispatched twice; that race is
 *   narrow, so this part catches it by chance, not by construction).
 */
#include "runner.h"

#include <sys/syscall.h>
#include <unistd.h>

typedef struct st {
    double us;
    tu_gate *gate;
    tu_rv *rv;
    int rv_n;
    uint64_t start, end;
    atomic_int ran;
    bool met;
} st;

static int st_fn(vf_run *run, void *arg)
{
    (void)run;
    st *s = arg;
    s->start = tu_stamp();
    atomic_fetch_add(&s->ran, 1);
    if (s->rv)
        s->met = tu_rv_meet(s->rv, s->rv_n, TU_TIMEOUT);
    if (s->gate)
        CHECK(tu_gate_wait(s->gate, TU_TIMEOUT));
    tu_spin_us(s->us);
    s->end = tu_stamp();
    return 0;
}

#define NONE ((vf_var_list){NULL, 0})

static void push_st(vf_engine *e, st *s, vf_var_list r, vf_var_list w)
{
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = st_fn, .arg = s, .reads = r, .writes = w}));
}

#define CHECK_BEFORE(a, b)                                                     \
    do {                                                                       \
        if (!((a).end < (b).start))                                            \
            CHECK_REPORT_("%s (ended %" PRIu64 ") not before %s (started "     \
                          "%" PRIu64 ")",                                      \
                          #a, (a).end, #b, (b).start);                         \
    } while (0)

TEST_KIND_CASE(rule2_fifo, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    tu_gate g;
    tu_gate_init(&g);
    st w1 = {.us = 500}, r1 = {.us = 3000}, r2 = {.us = 3000}, w2 = {.us = 500},
       r3 = {.us = 100};
    /* Hold W1 until everything is queued (threaded engines). */
    if (k->threaded)
        w1.gate = &g;
    push_st(e, &w1, NONE, VF_VARS(x));
    push_st(e, &r1, VF_VARS(x), NONE);
    push_st(e, &r2, VF_VARS(x), NONE);
    push_st(e, &w2, NONE, VF_VARS(x));
    push_st(e, &r3, VF_VARS(x), NONE);
    tu_gate_open(&g);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_BEFORE(w1, r1);
    CHECK_BEFORE(w1, r2);
    CHECK_BEFORE(r1, w2);
    CHECK_BEFORE(r2, w2);
    CHECK_BEFORE(w2, r3);
    tu_finish_engine(e);
    tu_gate_destroy(&g);
}

static void rule3_readers_meet(const tu_kind *k, int n)
{
    vf_config cfg = k->cfg;
    cfg.cpu_workers = n;
    tu_kind kk = *k;
    kk.cfg = cfg;
    vf_engine *e = tu_engine(&kk);
    vf_var x = tu_var(e);
    tu_rv rv;
    tu_rv_init(&rv);
    st r[3];
    memset(r, 0, sizeof r);
    for (int i = 0; i < n; i++) {
        r[i].rv = &rv;
        r[i].rv_n = n;
        push_st(e, &r[i], VF_VARS(x), NONE);
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    for (int i = 0; i < n; i++) {
        if (!r[i].met)
            CHECK_REPORT_("reader %d of %d did not meet the others", i, n);
    }
    tu_rv_destroy(&rv);

    /* A read pushed while a read runs (no write queued) joins it. */
    tu_rv rv2;
    tu_rv_init(&rv2);
    st a = {.rv = &rv2, .rv_n = 2}, b = {.rv = &rv2, .rv_n = 2};
    push_st(e, &a, VF_VARS(x), NONE);
    CHECK(tu_wait_flag(&a.ran, 1, TU_TIMEOUT));
    push_st(e, &b, VF_VARS(x), NONE);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK(a.met && b.met);
    tu_finish_engine(e);
    tu_rv_destroy(&rv2);
}

/* Rule 3 needs two workers that can meet. */
TEST_KIND_CASE(rule3_two_readers_meet, k)
{
    if (k->threaded && k->workers == 2)
        rule3_readers_meet(k, 2);
}

TEST_KIND_CASE(rule3_three_readers_meet, k)
{
    if (k->threaded && k->workers == 2)
        rule3_readers_meet(k, 3);
}

/* ------------------------------------------------------------ rule 1 */

#define NV 4

typedef struct excl {
    atomic_int writers[NV], readers[NV];
    atomic_int violations;
} excl;

typedef struct excl_op {
    excl *x;
    int r, w; /* var indices; -1 none */
} excl_op;

static int excl_fn(vf_run *run, void *arg)
{
    (void)run;
    excl_op *o = arg;
    excl *x = o->x;
    if (o->w >= 0 && atomic_fetch_add(&x->writers[o->w], 1) != 0)
        atomic_fetch_add(&x->violations, 1);
    if (o->r >= 0) {
        atomic_fetch_add(&x->readers[o->r], 1);
        if (atomic_load(&x->writers[o->r]) != 0)
            atomic_fetch_add(&x->violations, 1);
    }
    if (o->w >= 0 && atomic_load(&x->readers[o->w]) != 0)
        atomic_fetch_add(&x->violations, 1);
    tu_spin_us(3);
    if (o->r >= 0)
        atomic_fetch_sub(&x->readers[o->r], 1);
    if (o->w >= 0)
        atomic_fetch_sub(&x->writers[o->w], 1);
    return 0;
}

TEST_KIND_CASE(rule1_exclusion, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v[NV];
    for (int i = 0; i < NV; i++)
        v[i] = tu_var(e);
    excl x;
    memset(&x, 0, sizeof x);
    int n = (int)tu_scaled(20000, 2000);
    excl_op *ops = calloc((size_t)n, sizeof *ops);
    REQUIRE(ops);
    tu_rng r = tu_rng_make(7);
    for (int i = 0; i < n; i++) {
        ops[i].x = &x;
        ops[i].r = tu_below(&r, NV + 1) - 1;
        ops[i].w = tu_below(&r, 3) == 0 ? tu_below(&r, NV) : -1;
        if (ops[i].w == ops[i].r)
            ops[i].r = -1;
        vf_op op = {.fn = excl_fn, .arg = &ops[i]};
        if (ops[i].r >= 0)
            op.reads = tu_list(&v[ops[i].r], 1);
        if (ops[i].w >= 0)
            op.writes = tu_list(&v[ops[i].w], 1);
        CHECK_OK(vf_engine_push(e, &op));
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&x.violations), 0);
    tu_finish_engine(e);
    free(ops);
}

/* ------------------------------------------------------------ rule 6 */

TEST_KIND_CASE(rule6_wait, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    tu_gate g;
    tu_gate_init(&g);
    st w = {.us = 2000}, r = {.us = 0}, w2 = {.us = 0};
    if (k->threaded)
        r.gate = &g; /* a reader that holds on until after the wait (with
                        one worker it holds the only worker) */
    push_st(e, &w, NONE, VF_VARS(x));
    push_st(e, &r, VF_VARS(x), VF_VARS(y));
    CHECK_OK(vf_var_wait(e, x, NULL));
    /* The write is done and visible; the reader may still be running. */
    CHECK_EQ(atomic_load(&w.ran), 1);
    CHECK(w.end != 0);
    tu_gate_open(&g);
    /* wait_all waits for the reader too. */
    push_st(e, &w2, NONE, VF_VARS(x));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&r.ran), 1);
    CHECK(r.end != 0);
    CHECK(w2.end != 0);
    CHECK_BEFORE(r, w2);
    tu_finish_engine(e);
    tu_gate_destroy(&g);
}

/* vf_engine_wait_all waits until nothing is pending, ops another thread
 * pushed while it waits included (varflow.h; a user tester took it for a
 * wait for the ops pushed before the call, as vf_var_wait is): with an
 * op pushed during the wait gated, the wait returns only after the gate
 * opens, though every op pushed before it finished long before. */
typedef struct waiting_all {
    vf_engine *e;
    atomic_long tid;
    atomic_int returned;
    int rc;
} waiting_all;

static void *wait_all_thread(void *arg)
{
    waiting_all *w = arg;
    atomic_store(&w->tid, (long)syscall(SYS_gettid));
    w->rc = vf_engine_wait_all(w->e, NULL);
    atomic_store(&w->returned, 1);
    return NULL;
}

TEST_KIND_CASE(rule6_wait_all_counts_later_pushes, k)
{
    if (!k->threaded)
        return; /* a naive push runs its op: nothing stays pending */
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    tu_gate first_go, later_go;
    tu_gate_init(&first_go);
    tu_gate_init(&later_go);
    st first = {.gate = &first_go}, later = {.gate = &later_go};
    push_st(e, &first, NONE, VF_VARS(x));
    waiting_all w = {.e = e};
    pthread_t t = tu_thread_start(wait_all_thread, &w);
    /* The wait under way: its thread asleep in it (the first op holds). */
    double end = tu_now() + TU_TIMEOUT;
    while (
        (atomic_load(&w.tid) == 0 || !tu_thread_asleep(atomic_load(&w.tid))) &&
        tu_now() < end)
        usleep(1000);
    REQUIRE(tu_thread_asleep(atomic_load(&w.tid)));
    push_st(e, &later, NONE, VF_VARS(y));
    tu_gate_open(&first_go);
    CHECK(tu_wait_flag(&first.ran, 1, TU_TIMEOUT));
    CHECK_OK(vf_var_wait(e, x, NULL)); /* the first op finished */
    usleep(50000);
    CHECK_EQ(atomic_load(&w.returned), 0); /* still waiting for `later` */
    tu_gate_open(&later_go);
    tu_thread_join(t);
    CHECK_OK(w.rc);
    CHECK(later.end != 0);
    tu_finish_engine(e);
    tu_gate_destroy(&first_go);
    tu_gate_destroy(&later_go);
}

/* ------------------------------------------------------------ rule 4 */

#define R4_OPS 2000

typedef struct r4_op {
    atomic_int runs;
} r4_op;

static int r4_fn(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((r4_op *)arg)->runs, 1);
    return 0;
}

TEST_KIND_CASE(rule4_push_counts, k)
{
    vf_engine *e = tu_engine(k);
    r4_op *ops = calloc(R4_OPS, sizeof *ops);
    REQUIRE(ops != NULL);
    vf_var v[4];
    for (int i = 0; i < 4; i++)
        v[i] = tu_var(e);
    for (int i = 0; i < R4_OPS; i++) {
        r4_op *o = &ops[i];
        vf_op op = {.fn = r4_fn, .arg = o};
        if (i % 5 != 0) { /* every fifth op has no vars at all */
            op.reads = tu_list(&v[i % 4], 1);
            op.writes = tu_list(&v[(i + 1) % 4], 1);
        }
        CHECK_OK(vf_engine_push(e, &op));
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    int bad_runs = 0;
    for (int i = 0; i < R4_OPS; i++)
        bad_runs += atomic_load(&ops[i].runs) != 1;
    CHECK_EQ(bad_runs, 0);
    free(ops);
    tu_finish_engine(e);
}

TEST_MAIN("test_rules", 120)
