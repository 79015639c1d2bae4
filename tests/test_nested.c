/*
 * test_nested: ops that push ops from inside (rule 10), on every engine kind.
 *
 * - a recursive fan-out tree: each node adds its id into the accumulator of
 *   its level (a var written by every node of the level, so the engine must
 *   serialize them) and pushes its children; every node runs exactly once
 *   and each level's sum is right;
 * - a chain: op i computes x = x*3 + i and pushes op i+1 on the same var;
 *   the result equals the serial loop;
 * - ordering of a nested push against its parent: a parent that writes x
 *   (or only reads x) pushes a child writing x and then changes x: the child
 *   must see the parent's final value (it cannot run before the parent
 *   ended, even on the naive engine, which runs ready ops inside push);
 * - a nested push of an independent op from inside an op on the naive
 *   engine, or on a pool of one worker, runs to completion within the
 *   parent's push call, with the parent's vf_run_worker;
 * - on a pool of two, with the other worker held, a parent's first 8
 *   ready children are queued and its 9th, with 8 queued on its worker,
 *   runs inside its push on the parent's worker (VF__AT_PUSH_QUEUED);
 * - children with no vars run inside their pushes on a pool of one (no
 *   trip through queues or counts) are ordinary ops to every observer:
 *   their `done`, the stats, the failures their parent's wait and wait_all
 *   report, the profiler's records;
 * - a failing child that runs alone, which takes its place in push order
 *   only at its failure, still comes after a failing sibling with a var
 *   pushed before it, and before one pushed after it;
 * - a child run inside its push that waits for ops that need its parent
 *   to end (a var whose writer reads what the parent writes) gets
 *   VF_EDEADLK there, never a hang: its parent is not counted as active
 *   while the child runs above it;
 * - a child on a var its parent (or a further ancestor) writes goes right
 *   behind it, ahead of the ops the program pushed after it meanwhile, and
 *   ahead of a wait on that var, as the serial program has it, and a
 *   child that reads a var its parent reads runs beside it; but not where
 *   it would queue on another var behind an op it passes, wait behind a
 *   second running write, or pass an op before it in tree order (a cycle,
 *   an ancestor's inner wait given up, a sibling out of order): there it
 *   takes its place at its push.
 */
#include "runner.h"

#include <string.h>

#include <varflow_profile.h>

#define FANOUT 4
#define DEPTH 6 /* 1 + 4 + ... + 4^6 = 5461 nodes */

typedef struct tree {
    vf_var acc[DEPTH + 1];
    uint64_t sum[DEPTH + 1];
    atomic_int *ran; /* per node id */
    int nnodes;
    atomic_int push_errors;
} tree;

typedef struct node_arg {
    tree *t;
    int id, depth;
} node_arg;

static void push_node(vf_engine *e, tree *t, int id, int depth);

static int node_fn(vf_run *run, void *arg)
{
    node_arg *a = arg;
    tree *t = a->t;
    atomic_fetch_add(&t->ran[a->id], 1);
    t->sum[a->depth] += (uint64_t)a->id;
    if (a->depth < DEPTH)
        for (int c = 0; c < FANOUT; c++)
            push_node(vf_run_engine(run), t, a->id * FANOUT + 1 + c,
                      a->depth + 1);
    return 0;
}

static void node_done(void *arg, int status)
{
    CHECK_EQ(status, 0);
    free(arg);
}

static void push_node(vf_engine *e, tree *t, int id, int depth)
{
    node_arg *a = malloc(sizeof *a);
    REQUIRE(a);
    a->t = t;
    a->id = id;
    a->depth = depth;
    vf_op op = {.fn = node_fn,
                .arg = a,
                .done = node_done,
                .writes = tu_list(&t->acc[depth], 1),
                .name = "node"};
    int rc = vf_engine_push(e, &op);
    if (rc != 0) {
        atomic_fetch_add(&t->push_errors, 1);
        free(a);
    }
}

TEST_KIND_CASE(fan_out, k)
{
    vf_engine *e = tu_engine(k);
    tree t;
    memset(&t, 0, sizeof t);
    t.nnodes = 0;
    for (int d = 0, w = 1; d <= DEPTH; d++, w *= FANOUT)
        t.nnodes += w;
    t.ran = calloc((size_t)t.nnodes, sizeof *t.ran);
    REQUIRE(t.ran);
    for (int d = 0; d <= DEPTH; d++)
        t.acc[d] = tu_var(e);
    push_node(e, &t, 0, 0);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&t.push_errors), 0);
    int bad = 0;
    for (int i = 0; i < t.nnodes; i++)
        if (atomic_load(&t.ran[i]) != 1 && bad++ < 5)
            CHECK_REPORT_("node %d ran %d times", i, atomic_load(&t.ran[i]));
    CHECK_EQ(bad, 0);
    /* Level d holds ids first..first+4^d-1. */
    uint64_t first = 0, width = 1;
    for (int d = 0; d <= DEPTH; d++) {
        uint64_t want = width * first + width * (width - 1) / 2;
        CHECK_EQ(t.sum[d], want);
        uint64_t ver = 0;
        CHECK_OK(vf_var_version(e, t.acc[d], &ver));
        CHECK_EQ(ver, width);
        first += width;
        width *= FANOUT;
    }
    vf_stats s;
    CHECK_OK(vf_engine_stats(e, &s));
    CHECK_EQ(s.ran, t.nnodes);
    tu_finish_engine(e);
    free(t.ran);
}

/* ------------------------------------------------------------ chain */

typedef struct chain {
    vf_var x;
    uint64_t val;
    int n;
    atomic_int ran;
    atomic_int push_errors;
} chain;

typedef struct link_arg {
    chain *c;
    int i;
} link_arg;

static int link_fn(vf_run *run, void *arg);

static void push_link(vf_engine *e, chain *c, link_arg *args, int i)
{
    vf_op op = {.fn = link_fn,
                .arg = &args[i],
                .reads = tu_list(&c->x, 1),
                .writes = tu_list(&c->x, 1),
                .name = "link"};
    if (vf_engine_push(e, &op) != 0)
        atomic_fetch_add(&c->push_errors, 1);
}

static int link_fn(vf_run *run, void *arg)
{
    link_arg *a = arg;
    chain *c = a->c;
    atomic_fetch_add(&c->ran, 1);
    if (a->i + 1 < c->n)
        push_link(vf_run_engine(run), c, a - a->i, a->i + 1);
    /* After the push: the next link must still see this value. */
    c->val = c->val * 3 + (uint64_t)a->i;
    return 0;
}

TEST_KIND_CASE(chain_test, k)
{
    vf_engine *e = tu_engine(k);
    chain c;
    memset(&c, 0, sizeof c);
    c.n = (int)tu_scaled(2000, 200);
    c.x = tu_var(e);
    c.val = 1;
    link_arg *args = calloc((size_t)c.n, sizeof *args);
    REQUIRE(args);
    for (int i = 0; i < c.n; i++) {
        args[i].c = &c;
        args[i].i = i;
    }
    push_link(e, &c, args, 0);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    uint64_t want = 1;
    for (int i = 0; i < c.n; i++)
        want = want * 3 + (uint64_t)i;
    CHECK(c.val == want);
    CHECK_EQ(atomic_load(&c.ran), c.n);
    CHECK_EQ(atomic_load(&c.push_errors), 0);
    tu_finish_engine(e);
    free(args);
}

/* ------------------------------------------------------------ ordering */

typedef struct order {
    vf_var x, y;
    int xval;
    int child_saw;
    atomic_int child_ran, indep_ran;
    int indep_ran_in_push; /* the independent child ran within its push */
    int parent_worker, indep_worker; /* vf_run_worker of each */
    bool parent_writes;
} order;

static int child_fn(vf_run *run, void *arg)
{
    (void)run;
    order *o = arg;
    o->child_saw = o->xval;
    atomic_fetch_add(&o->child_ran, 1);
    return 0;
}

static int indep_fn(vf_run *run, void *arg)
{
    order *o = arg;
    o->indep_worker = vf_run_worker(run);
    atomic_fetch_add(&o->indep_ran, 1);
    return 0;
}

static int parent_fn(vf_run *run, void *arg)
{
    order *o = arg;
    vf_engine *e = vf_run_engine(run);
    o->parent_worker = vf_run_worker(run);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = child_fn,
                                        .arg = o,
                                        .writes = tu_list(&o->x, 1),
                                        .name = "child"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = indep_fn,
                                        .arg = o,
                                        .writes = tu_list(&o->y, 1),
                                        .name = "independent"}));
    o->indep_ran_in_push = atomic_load(&o->indep_ran);
    tu_spin_us(500);
    /* The child has not run: it waits for this op to end. */
    CHECK_EQ(atomic_load(&o->child_ran), 0);
    if (o->parent_writes)
        o->xval = 1;
    return 0;
}

static void ordering(const tu_kind *k, bool parent_writes)
{
    vf_engine *e = tu_engine(k);
    order o;
    memset(&o, 0, sizeof o);
    o.x = tu_var(e);
    o.y = tu_var(e);
    o.parent_writes = parent_writes;
    o.xval = parent_writes ? 0 : 1;
    vf_op p = {.fn = parent_fn, .arg = &o, .name = "parent"};
    if (parent_writes)
        p.writes = tu_list(&o.x, 1);
    else
        p.reads = tu_list(&o.x, 1);
    CHECK_OK(vf_engine_push(e, &p));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&o.child_ran), 1);
    CHECK_EQ(atomic_load(&o.indep_ran), 1);
    CHECK_EQ(o.child_saw, 1);
    /* Ready at its push, the independent child runs inside it on the naive
     * engine and on a pool of one (exec.h), on the parent's worker. */
    if (k->workers <= 1) {
        CHECK_EQ(o.indep_ran_in_push, 1);
        CHECK_EQ(o.indep_worker, o.parent_worker);
    }
    tu_finish_engine(e);
}

TEST_KIND_CASE(ordering_parent_writes, k)
{
    ordering(k, true);
}

TEST_KIND_CASE(ordering_parent_reads, k)
{
    ordering(k, false);
}

/* A (writes a) pushes B (reads a, writes b), then C (no vars), which
 * waits on b: B needs A to end, and where C runs inside A's push (naive,
 * a pool of one) A cannot: VF_EDEADLK, as in the serial program. Where C
 * is queued it may run once A ended and see 0 (vf_var_wait in varflow.h).
 */
typedef struct indirect {
    vf_var a, b;
    int rc;
    atomic_int ran;
} indirect;

static int indirect_c(vf_run *run, void *arg)
{
    indirect *t = arg;
    t->rc = vf_var_wait(vf_run_engine(run), t->b, NULL);
    atomic_fetch_add(&t->ran, 1);
    return 0;
}

static int indirect_a(vf_run *run, void *arg)
{
    indirect *t = arg;
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                        .reads = tu_list(&t->a, 1),
                                        .writes = tu_list(&t->b, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = indirect_c, .arg = t}));
    return 0;
}

TEST_KIND_CASE(child_waits_on_its_parent_indirectly, k)
{
    vf_engine *e = tu_engine(k);
    indirect t;
    memset(&t, 0, sizeof t);
    t.rc = 99;
    t.a = tu_var(e);
    t.b = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = indirect_a, .arg = &t, .writes = tu_list(&t.a, 1)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&t.ran), 1);
    if (k->workers <= 1)
        CHECK_ERR(t.rc, VF_EDEADLK);
    else
        CHECK(t.rc == 0 || t.rc == VF_EDEADLK);
    tu_finish_engine(e);
}

/* A pool of two: one worker held by a gated op, the other runs a parent
 * that pushes 9 ready children: the first 8 are queued on its worker (the
 * held one takes none), the 9th runs inside its push. */
typedef struct queued_kids {
    tu_gate held, release;
    atomic_int ran[9];
    int ran_before_last; /* of the first 8, how many had run */
    int last_in_push;    /* the 9th had run when its push returned */
    int parent_worker, last_worker;
} queued_kids;

typedef struct kid {
    queued_kids *q;
    int i;
} kid;

static int holder(vf_run *run, void *arg)
{
    (void)run;
    queued_kids *q = arg;
    tu_gate_open(&q->held);
    CHECK(tu_gate_wait(&q->release, TU_TIMEOUT));
    return 0;
}

static int kid_fn(vf_run *run, void *arg)
{
    const kid *k = arg;
    if (k->i == 8)
        k->q->last_worker = vf_run_worker(run);
    atomic_store(&k->q->ran[k->i], 1);
    return 0;
}

static int kids_parent(vf_run *run, void *arg)
{
    queued_kids *q = arg;
    vf_engine *e = vf_run_engine(run);
    q->parent_worker = vf_run_worker(run);
    kid kids[9];
    for (int i = 0; i < 9; i++) {
        kids[i] = (kid){q, i};
        if (i == 8)
            for (int j = 0; j < 8; j++)
                q->ran_before_last += atomic_load(&q->ran[j]);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = kid_fn,
                                            .arg = &kids[i],
                                            .arg_size = sizeof kids[i]}));
    }
    q->last_in_push = atomic_load(&q->ran[8]);
    return 0;
}

TEST_CASE(runs_at_push_once_queue_holds_enough)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2}));
    REQUIRE(e != NULL);
    queued_kids q;
    memset(&q, 0, sizeof q);
    tu_gate_init(&q.held);
    tu_gate_init(&q.release);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = holder, .arg = &q}));
    CHECK(tu_gate_wait(&q.held, TU_TIMEOUT));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = kids_parent, .arg = &q}));
    /* The parent ran (the held worker cannot), then release the other. */
    double give_up = tu_now() + TU_TIMEOUT;
    while (atomic_load(&q.ran[8]) == 0 && tu_now() < give_up)
        sched_yield();
    tu_gate_open(&q.release);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    for (int i = 0; i < 9; i++)
        CHECK_EQ(atomic_load(&q.ran[i]), 1);
    CHECK_EQ(q.ran_before_last, 0);
    CHECK_EQ(q.last_in_push, 1);
    CHECK_EQ(q.last_worker, q.parent_worker);
    CHECK_OK(vf_engine_destroy(e));
    tu_gate_destroy(&q.held);
    tu_gate_destroy(&q.release);
}

/* A parent pushes three children with no vars, each with a `done`: "a"
 * succeeds, "b" fails with 7, "c" pushes a grandchild "g" that fails with
 * 9 and does not wait for it. On a pool of one every child runs inside its
 * push, on its parent's worker, without a trip through the queues or the
 * counts (push.c: push_child_here); it must still be an ordinary op to
 * every observer, with the profiler on (which takes the usual path) or
 * off: its `done` with its status, vf_engine_stats' counts, the failure
 * its parent's wait reports (the first in push order, "b"), the one left
 * for wait_all ("g"), and vf_engine_stats' pending with none left. */
typedef struct observed {
    vf_engine *e;
    int done_status[3];
    atomic_int ran_in_push[3]; /* the child had run when its push returned */
    atomic_int ran[3];
    int worker[3], parent_worker;
    int wait_rc;
    vf_error err;
} observed;

typedef struct observed_kid {
    observed *t;
    int i;
} observed_kid;

static int observed_g(vf_run *run, void *arg)
{
    (void)arg;
    vf_run_set_error(run, "g failed");
    return 9;
}

static int observed_child(vf_run *run, void *arg)
{
    const observed_kid *k = arg;
    k->t->worker[k->i] = vf_run_worker(run);
    atomic_store(&k->t->ran[k->i], 1);
    if (k->i == 2)
        CHECK_OK(vf_engine_push(vf_run_engine(run),
                                &(vf_op){.fn = observed_g, .name = "g"}));
    return k->i == 1 ? 7 : 0;
}

static void observed_done(void *arg, int status)
{
    const observed_kid *k = arg;
    k->t->done_status[k->i] = status;
}

/* An argument larger than a child's block on its pusher's frame takes
 * (push.c: VF__OP_STACK_ARG): the usual path, its bytes intact. */
typedef struct big_arg {
    unsigned char bytes[200];
    atomic_int *sum;
} big_arg;

static int big_child(vf_run *run, void *arg)
{
    (void)run;
    const big_arg *b = arg;
    int sum = 0;
    for (int i = 0; i < (int)sizeof b->bytes; i++)
        sum += b->bytes[i];
    atomic_store(b->sum, sum);
    return 0;
}

static int observed_parent(vf_run *run, void *arg)
{
    observed *t = arg;
    static const char *names[3] = {"a", "b", "c"};
    t->parent_worker = vf_run_worker(run);
    /* Careless input inside an op: refused, nothing run or counted. */
    CHECK_ERR(vf_engine_push(t->e, &(vf_op){.fn = observed_g, .arg_size = 8}),
              VF_EINVAL);
    atomic_int big_sum = 0;
    big_arg b = {.sum = &big_sum};
    for (int i = 0; i < (int)sizeof b.bytes; i++)
        b.bytes[i] = (unsigned char)i;
    CHECK_OK(vf_engine_push(
        t->e, &(vf_op){.fn = big_child, .arg = &b, .arg_size = sizeof b}));
    memset(b.bytes, 0, sizeof b.bytes); /* the child has its copy */
    CHECK_OK(vf_run_wait_children(run, NULL));
    CHECK_EQ(atomic_load(&big_sum), 199 * 200 / 2);
    for (int i = 0; i < 3; i++) {
        observed_kid k = {t, i};
        CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = observed_child,
                                               .arg = &k,
                                               .arg_size = sizeof k,
                                               .done = observed_done,
                                               .name = names[i]}));
        atomic_store(&t->ran_in_push[i], atomic_load(&t->ran[i]));
    }
    t->wait_rc = vf_run_wait_children(run, &t->err);
    return 0;
}

TEST_KIND_CASE(child_at_push_is_an_ordinary_op, k)
{
    for (int profiled = 0; profiled <= 1; profiled++) {
        vf_engine *e = tu_engine(k);
        if (profiled)
            CHECK_OK(vf_profile_start(e));
        observed t;
        memset(&t, 0, sizeof t);
        t.e = e;
        for (int i = 0; i < 3; i++)
            t.done_status[i] = -1;
        vf_stats before, after;
        CHECK_OK(vf_engine_stats(e, &before));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = observed_parent, .arg = &t}));
        vf_error err;
        CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
        CHECK_EQ(err.code, 9);
        CHECK(strcmp(err.op_name, "g") == 0);
        CHECK(strcmp(err.message, "g failed") == 0);
        CHECK_ERR(t.wait_rc, VF_EOPFAILED);
        CHECK_EQ(t.err.code, 7);
        CHECK(strcmp(t.err.op_name, "b") == 0);
        CHECK_EQ(t.done_status[0], 0);
        CHECK_EQ(t.done_status[1], 7);
        CHECK_EQ(t.done_status[2], 0);
        CHECK_OK(vf_engine_stats(e, &after));
        CHECK_EQ(after.ran - before.ran, 4); /* parent, big child, a, c */
        CHECK_EQ(after.failed - before.failed, 2);
        CHECK_EQ(after.skipped - before.skipped, 0);
        CHECK_EQ(after.pending, 0);
        for (int i = 0; i < 3; i++) {
            CHECK_EQ(atomic_load(&t.ran[i]), 1);
            if (k->workers == 1) { /* a pool of one: inside the push */
                CHECK_EQ(atomic_load(&t.ran_in_push[i]), 1);
                CHECK_EQ(t.worker[i], t.parent_worker);
            }
        }
        if (profiled) {
            vf_profile *p = NULL;
            CHECK_OK(vf_profile_stop(e));
            CHECK_OK(vf_profile_take(e, &p));
            REQUIRE(p != NULL);
            CHECK_EQ(vf_profile_count(p), 6); /* every op, children too */
            vf_profile_destroy(p);
        }
        tu_finish_engine(e);
    }
}

/* A child that runs alone takes its place in push order only when it
 * needs one (push.h: vf__push_place_of): at its failure, here. It must
 * still stand where its push put it: after a failing sibling with a var
 * pushed before it (which took its place at its push), before one pushed
 * after it. The parent's wait reports the first, wait_all the other. */
typedef struct order_pair {
    vf_engine *e;
    vf_var v;
    bool var_child_first;
    int wait_rc, wait_code;
} order_pair;

static int fail_5(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 5;
}

static int fail_6(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 6;
}

static int pair_parent(vf_run *run, void *arg)
{
    order_pair *t = arg;
    for (int i = 0; i < 2; i++) {
        if ((i == 0) == t->var_child_first)
            CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = fail_6,
                                                   .writes = tu_list(&t->v, 1),
                                                   .name = "with a var"}));
        else
            CHECK_OK(
                vf_engine_push(t->e, &(vf_op){.fn = fail_5, .name = "alone"}));
    }
    vf_error err;
    memset(&err, 0, sizeof err);
    t->wait_rc = vf_run_wait_children(run, &err);
    t->wait_code = err.code;
    return 0;
}

TEST_KIND_CASE(alone_child_failure_in_push_order, k)
{
    for (int first = 0; first <= 1; first++) {
        vf_engine *e = tu_engine(k);
        order_pair t = {.e = e, .var_child_first = first};
        t.v = tu_var(e);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = pair_parent, .arg = &t}));
        vf_error err;
        CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
        CHECK_ERR(t.wait_rc, VF_EOPFAILED);
        CHECK_EQ(t.wait_code, first ? 6 : 5);
        CHECK_EQ(err.code, first ? 5 : 6);
        tu_finish_engine(e);
    }
}

/* --- a child's place on the vars its ancestors hold --------------------- */

/* ahead: the program's thread pushes P, then later ops (T, W, a wait) on
 * P's vars while P runs; P (or A, a child of P's without vars) then
 * pushes children on them. */
typedef struct ahead {
    vf_engine *e;
    vf_var x, y, z;
    long xval, yval;
    long c1_saw;    /* y as the reading child saw it */
    bool threaded;  /* the program pushes while P runs (not naive) */
    tu_gate pushed; /* the later ops are pushed */
    int grandchild; /* A pushes the child, not P */
    int code;       /* the child's return */
} ahead;

static int ahead_digit(vf_run *run, void *arg)
{
    (void)run;
    long *slot = ((long **)arg)[0];
    long d = (long)(intptr_t)((void **)arg)[1];
    *slot = *slot * 10 + d;
    return (int)(intptr_t)((void **)arg)[2];
}

/* Push an op that appends digit `d` to *slot, on the vars given. */
static int push_digit(vf_engine *e, long *slot, long d, int code,
                      vf_var_list reads, vf_var_list writes)
{
    void *arg[3] = {slot, (void *)(intptr_t)d, (void *)(intptr_t)code};
    return vf_engine_push(e, &(vf_op){.fn = ahead_digit,
                                      .arg = arg,
                                      .arg_size = sizeof arg,
                                      .reads = reads,
                                      .writes = writes,
                                      .name = "digit"});
}

static void ahead_wait_for_later_ops(ahead *t)
{
    if (t->threaded)
        CHECK(tu_gate_wait(&t->pushed, 10));
}

static int ahead_pusher(vf_run *run, void *arg)
{
    (void)run;
    ahead *t = arg;
    ahead_wait_for_later_ops(t);
    return push_digit(t->e, &t->xval, 2, t->code, tu_list(NULL, 0),
                      tu_list(&t->x, 1));
}

static int ahead_p(vf_run *run, void *arg)
{
    ahead *t = arg;
    t->xval = t->xval * 10 + 1;
    if (!t->grandchild)
        return ahead_pusher(run, arg);
    /* P waits for A, so it still runs when A pushes C (an ancestor that
     * ended let T run already: the header's time order). */
    CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = ahead_pusher, .arg = t}));
    return vf_run_wait_children(run, NULL);
}

/* The program: P (writes x) then T (writes x); P, or its child A, pushes
 * C (writes x) once T is pushed. The serial program runs C inside P's
 * push, before T: x = 123. */
static void ahead_round(const tu_kind *k, int grandchild)
{
    static ahead t;
    memset(&t, 0, sizeof t);
    t.e = tu_engine(k);
    t.x = tu_var(t.e);
    t.threaded = k->threaded;
    t.grandchild = grandchild;
    tu_gate_init(&t.pushed);
    CHECK_OK(vf_engine_push(
        t.e, &(vf_op){.fn = ahead_p, .arg = &t, .writes = VF_VARS(t.x)}));
    CHECK_OK(
        push_digit(t.e, &t.xval, 3, 0, tu_list(NULL, 0), tu_list(&t.x, 1)));
    tu_gate_open(&t.pushed);
    CHECK_OK(vf_engine_wait_all(t.e, NULL));
    CHECK_EQ(t.xval, 123);
    tu_finish_engine(t.e);
    tu_gate_destroy(&t.pushed);
}

/* A child on a var its parent (or a further ancestor) writes comes where
 * the serial program has it, right behind that ancestor, ahead of the ops
 * the program pushed after the ancestor while it ran: it came behind them,
 * in time order, and a pool computed x = 132 where the serial program and
 * the naive engine compute 123 (found trying nested pushes as a user). */
TEST_KIND_CASE(child_ahead_of_later_ops, k)
{
    check_context_ = k->name;
    for (int round = 0; round < 20; round++) {
        ahead_round(k, 0);
        ahead_round(k, 1); /* a grandchild, pushed by A (no vars) */
    }
    check_context_ = NULL;
}

static int ahead_fail_p(vf_run *run, void *arg)
{
    (void)run;
    ahead *t = arg;
    /* The program's wait is in progress: its marker is pending. */
    if (t->threaded) {
        vf_stats st = {0};
        for (double end = tu_now() + 10; tu_now() < end;) {
            CHECK_OK(vf_engine_stats(t->e, &st));
            if (st.pending >= 3) /* P, T and the marker */
                break;
            tu_spin_us(50);
        }
        CHECK(st.pending >= 3);
    }
    return push_digit(t->e, &t->xval, 2, 7, tu_list(NULL, 0),
                      tu_list(&t->x, 1));
}

/* The same with a wait on x after T, and C failing: the wait comes after
 * C, as in the serial program, and reports its failure (T, which writes
 * the failed x, is skipped); it returned before C ran, with 0. */
TEST_KIND_CASE(child_ahead_of_a_later_wait, k)
{
    check_context_ = k->name;
    for (int round = 0; round < 10; round++) {
        static ahead t;
        memset(&t, 0, sizeof t);
        t.e = tu_engine(k);
        t.x = tu_var(t.e);
        t.threaded = k->threaded;
        CHECK_OK(vf_engine_push(
            t.e,
            &(vf_op){.fn = ahead_fail_p, .arg = &t, .writes = VF_VARS(t.x)}));
        CHECK_OK(
            push_digit(t.e, &t.xval, 3, 0, tu_list(NULL, 0), tu_list(&t.x, 1)));
        vf_error err;
        CHECK_ERR(vf_var_wait(t.e, t.x, &err), VF_EOPFAILED);
        CHECK_EQ(err.code, 7);
        CHECK_EQ(t.xval, 2); /* C wrote, then failed; T never ran */
        vf_stats st;
        CHECK_OK(vf_engine_stats(t.e, &st));
        CHECK_EQ(st.skipped, 1); /* T */
        tu_finish_engine(t.e);
    }
    check_context_ = NULL;
}

static int ahead_read_c1(vf_run *run, void *arg)
{
    (void)run;
    ahead *t = arg;
    t->c1_saw = t->yval;
    return 0;
}

static int ahead_reading_p(vf_run *run, void *arg)
{
    (void)run;
    ahead *t = arg;
    ahead_wait_for_later_ops(t);
    CHECK_OK(vf_engine_push(
        t->e, &(vf_op){.fn = ahead_read_c1, .arg = t, .reads = VF_VARS(t->y)}));
    return push_digit(t->e, &t->yval, 2, 0, tu_list(NULL, 0),
                      tu_list(&t->y, 1));
}

/* P reads y; W, pushed after P, writes y; P then pushes C1, which reads y,
 * and C2, which writes it. The serial program: C1 sees y as it was, C2
 * writes it, then W: y = 25. In time order C1 queued behind W and saw 5.
 * C1 runs beside P's read now. C2 does not go ahead of W: a write there
 * would wait for every read granted on y, and such a read's op may wait
 * for an op the write passes (the second reviewer's cycle); it takes its
 * place at its push, after W (y = 52; 25 on the naive engine, where W is
 * pushed after P ran). */
TEST_KIND_CASE(child_ahead_beside_a_reading_parent, k)
{
    check_context_ = k->name;
    for (int round = 0; round < 20; round++) {
        static ahead t;
        memset(&t, 0, sizeof t);
        t.e = tu_engine(k);
        t.y = tu_var(t.e);
        t.c1_saw = -1;
        t.threaded = k->threaded;
        tu_gate_init(&t.pushed);
        CHECK_OK(vf_engine_push(
            t.e,
            &(vf_op){.fn = ahead_reading_p, .arg = &t, .reads = VF_VARS(t.y)}));
        CHECK_OK(
            push_digit(t.e, &t.yval, 5, 0, tu_list(NULL, 0), tu_list(&t.y, 1)));
        tu_gate_open(&t.pushed);
        CHECK_OK(vf_engine_wait_all(t.e, NULL));
        CHECK_EQ(t.c1_saw, 0);
        CHECK_EQ(t.yval, k->threaded ? 52 : 25);
        tu_finish_engine(t.e);
        tu_gate_destroy(&t.pushed);
    }
    check_context_ = NULL;
}

static int ahead_two_vars_p(vf_run *run, void *arg)
{
    (void)run;
    ahead *t = arg;
    t->xval = t->xval * 10 + 1;
    ahead_wait_for_later_ops(t);
    vf_var both[2] = {t->x, t->z};
    return push_digit(t->e, &t->xval, 2, 0, tu_list(NULL, 0), tu_list(both, 2));
}

/* P writes x; T, pushed after P, writes x and z, so it holds z while it
 * waits for x; P then pushes C, which writes x and z. C cannot go ahead
 * of T on x: on z it would queue behind T, and each would wait for the
 * other. It takes its place at its push on both (T first: x = 132 on a
 * pool, as the header says; 123 on the naive engine, where P and C run
 * before T is pushed), and the program ends. */
TEST_KIND_CASE(child_not_ahead_where_it_would_cycle, k)
{
    check_context_ = k->name;
    for (int round = 0; round < 20; round++) {
        static ahead t;
        memset(&t, 0, sizeof t);
        t.e = tu_engine(k);
        t.x = tu_var(t.e);
        t.z = tu_var(t.e);
        t.threaded = k->threaded;
        tu_gate_init(&t.pushed);
        CHECK_OK(vf_engine_push(t.e, &(vf_op){.fn = ahead_two_vars_p,
                                              .arg = &t,
                                              .writes = VF_VARS(t.x)}));
        vf_var both[2] = {t.x, t.z};
        CHECK_OK(
            push_digit(t.e, &t.xval, 3, 0, tu_list(NULL, 0), tu_list(both, 2)));
        tu_gate_open(&t.pushed);
        CHECK_OK(vf_engine_wait_all(t.e, NULL));
        CHECK_EQ(t.xval, k->threaded ? 132 : 123);
        tu_finish_engine(t.e);
        tu_gate_destroy(&t.pushed);
    }
    check_context_ = NULL;
}

/* passing: the program pushes later ops while P runs; P then pushes its
 * children; each op appends its letter to the trace. */
typedef struct passing {
    vf_engine *e;
    vf_var v, w, u;
    tu_gate pushed;
    bool threaded;
    int scene;
    char trace[8];
    atomic_int n;
} passing;

static int passing_mark(vf_run *run, void *arg)
{
    (void)run;
    passing *t = ((passing **)arg)[0];
    char c = (char)(intptr_t)((void **)arg)[1];
    t->trace[atomic_fetch_add(&t->n, 1)] = c;
    return 0;
}

static int push_mark(passing *t, char c, vf_var_list reads, vf_var_list writes)
{
    void *arg[2] = {t, (void *)(intptr_t)c};
    return vf_engine_push(t->e, &(vf_op){.fn = passing_mark,
                                         .arg = arg,
                                         .arg_size = sizeof arg,
                                         .reads = reads,
                                         .writes = writes});
}

static int passing_p(vf_run *run, void *arg)
{
    (void)run;
    passing *t = arg;
    if (t->threaded)
        CHECK(tu_gate_wait(&t->pushed, 10));
    vf_var vu[2] = {t->v, t->u}, vw[2] = {t->v, t->w};
    if (t->scene == 0) { /* X (v, u), then C (v, w) */
        CHECK_OK(push_mark(t, 'X', tu_list(NULL, 0), tu_list(vu, 2)));
        return push_mark(t, 'C', tu_list(NULL, 0), tu_list(vw, 2));
    }
    /* scene 1: C writes v (P reads it) and w */
    return push_mark(t, 'C', tu_list(NULL, 0), tu_list(vw, 2));
}

/* Where going ahead would make ops wait for each other, or pass an op the
 * serial program runs first, a child takes its place at its push (found
 * by the second reviewer of the first cut, which hung on both):
 * - scene 0: P writes v and w; the program pushes Z (writes w and u), which
 *   holds u while it waits for w; P pushes X (writes v and u: queued
 *   behind Z on u, so at its push on v too), then C (writes v and w). Had
 *   C gone behind X on v and ahead of Z on w, C would wait for X, X for Z
 *   and Z for C. C must not pass X, its elder sibling, either. Time order:
 *   "ZXC" (the naive engine runs the serial "XCZ").
 * - scene 1: P reads v and w; the program pushes A (writes w), B (reads v,
 *   granted at once; writes w, behind A) and D (writes v); P pushes C
 *   (writes v and w). A write at the front of v would wait for B's granted
 *   read while B waits for C on w. Time order: "ABDC" (serial "CABD"). */
TEST_KIND_CASE(child_not_ahead_where_ops_would_wait_for_each_other, k)
{
    check_context_ = k->name;
    for (int round = 0; round < 20; round++) {
        for (int scene = 0; scene < 2; scene++) {
            static passing t;
            memset(&t, 0, sizeof t);
            t.e = tu_engine(k);
            t.v = tu_var(t.e);
            t.w = tu_var(t.e);
            t.u = tu_var(t.e);
            t.threaded = k->threaded;
            t.scene = scene;
            tu_gate_init(&t.pushed);
            vf_var vw[2] = {t.v, t.w}, wu[2] = {t.w, t.u};
            vf_op p = {.fn = passing_p, .arg = &t};
            if (scene == 0) {
                p.writes = tu_list(vw, 2);
                CHECK_OK(vf_engine_push(t.e, &p));
                CHECK_OK(push_mark(&t, 'Z', tu_list(NULL, 0), tu_list(wu, 2)));
            } else {
                p.reads = tu_list(vw, 2);
                CHECK_OK(vf_engine_push(t.e, &p));
                CHECK_OK(
                    push_mark(&t, 'A', tu_list(NULL, 0), tu_list(&t.w, 1)));
                CHECK_OK(
                    push_mark(&t, 'B', tu_list(&t.v, 1), tu_list(&t.w, 1)));
                CHECK_OK(
                    push_mark(&t, 'D', tu_list(NULL, 0), tu_list(&t.v, 1)));
            }
            tu_gate_open(&t.pushed);
            CHECK_OK(vf_engine_wait_all_timed(t.e, 20000, NULL));
            const char *want = scene == 0 ? (k->threaded ? "ZXC" : "XCZ")
                                          : (k->threaded ? "ABDC" : "CABD");
            if (strcmp(t.trace, want) != 0)
                CHECK_REPORT_("scene %d ran \"%s\", want \"%s\"", scene,
                              t.trace, want);
            tu_finish_engine(t.e);
            tu_gate_destroy(&t.pushed);
        }
    }
    check_context_ = NULL;
}

/* inner: A (writes u) pushes P (reads v, or writes it); the program pushes
 * W (writes v) once P runs; P pushes C (reads v and u); A then waits
 * inside for something queued behind W. */
typedef struct inner {
    vf_engine *e;
    vf_var u, v;
    bool threaded, p_writes;
    int scene;
    tu_gate p_pushed, w_pushed, c_pushed;
    int a_rc;
    atomic_int c_ran, q_ran, w_ran;
} inner;

static int inner_count(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(*(atomic_int **)arg, 1);
    return 0;
}

static int push_count(vf_engine *e, atomic_int *n, vf_var_list reads,
                      vf_var_list writes)
{
    return vf_engine_push(e, &(vf_op){.fn = inner_count,
                                      .arg = &n,
                                      .arg_size = sizeof n,
                                      .reads = reads,
                                      .writes = writes});
}

static int inner_p(vf_run *run, void *arg)
{
    (void)run;
    inner *t = arg;
    tu_gate_open(&t->p_pushed); /* it holds v: W goes behind it */
    if (t->threaded)
        CHECK(tu_gate_wait(&t->w_pushed, 10));
    vf_var vu[2] = {t->v, t->u};
    CHECK_OK(push_count(t->e, &t->c_ran, tu_list(vu, 2), tu_list(NULL, 0)));
    tu_gate_open(&t->c_pushed);
    return 0;
}

static int inner_a(vf_run *run, void *arg)
{
    inner *t = arg;
    vf_op p = {.fn = inner_p, .arg = t};
    if (t->p_writes)
        p.writes = tu_list(&t->v, 1);
    else
        p.reads = tu_list(&t->v, 1);
    CHECK_OK(vf_engine_push(t->e, &p));
    if (t->threaded) {
        CHECK(tu_gate_wait(&t->c_pushed, 10));
        tu_spin_us(20000); /* P ends: only C holds v */
    }
    if (t->scene == 0) {
        t->a_rc = vf_var_wait(t->e, t->v, NULL);
    } else {
        CHECK_OK(
            push_count(t->e, &t->q_ran, tu_list(&t->v, 1), tu_list(NULL, 0)));
        t->a_rc = vf_run_wait_children(run, NULL);
    }
    return 0;
}

/* C goes ahead of W on v (beside P's read, or behind P's write) while it
 * waits behind A's write on u. W then waited for C, so for A, which it
 * never did before, and A's wait for what is queued behind W could never
 * finish: VF_EDEADLK where the serial program returns 0 (found by the
 * second reviewer of 7198870). A child goes ahead now only where it waits
 * behind one running write, its parent's when it also reads beside its
 * parent: the ops it passes waited for that one already. */
TEST_KIND_CASE(child_ahead_behind_one_holder, k)
{
    check_context_ = k->name;
    for (int round = 0; round < 3; round++)
        for (int scene = 0; scene < 2; scene++)
            for (int p_writes = 0; p_writes <= 1; p_writes++) {
                static inner t;
                memset(&t, 0, sizeof t);
                t.e = tu_engine(k);
                t.u = tu_var(t.e);
                t.v = tu_var(t.e);
                t.threaded = k->threaded;
                t.p_writes = p_writes;
                t.scene = scene;
                tu_gate_init(&t.p_pushed);
                tu_gate_init(&t.w_pushed);
                tu_gate_init(&t.c_pushed);
                CHECK_OK(
                    vf_engine_push(t.e, &(vf_op){.fn = inner_a,
                                                 .arg = &t,
                                                 .writes = tu_list(&t.u, 1)}));
                if (t.threaded)
                    CHECK(tu_gate_wait(&t.p_pushed, 10));
                CHECK_OK(push_count(t.e, &t.w_ran, tu_list(NULL, 0),
                                    tu_list(&t.v, 1)));
                tu_gate_open(&t.w_pushed);
                CHECK_OK(vf_engine_wait_all_timed(t.e, 20000, NULL));
                if (t.a_rc != 0)
                    CHECK_REPORT_("scene %d, P %s v: A's wait returned %s",
                                  scene, p_writes ? "writes" : "reads",
                                  vf_error_name(t.a_rc));
                CHECK_EQ(atomic_load(&t.c_ran), 1);
                CHECK_EQ(atomic_load(&t.w_ran), 1);
                tu_finish_engine(t.e);
                tu_gate_destroy(&t.p_pushed);
                tu_gate_destroy(&t.w_pushed);
                tu_gate_destroy(&t.c_pushed);
            }
    check_context_ = NULL;
}

TEST_MAIN("test_nested", 120)
