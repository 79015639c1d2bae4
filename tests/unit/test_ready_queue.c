/*
 * test_ready_queue: a pool's ready queues (src/core/sched.h), alone.
 *
 * A pool is made with vf__pool_init and never started: no worker thread
 * runs, and the test places and takes hand-made ops itself, as a pusher
 * (a thread that is no worker: the workers' inboxes) or as a worker
 * (vf__this_worker_ set: its own queue). It checks the queue's order
 * (higher priority first, arrival order among equal priorities, negative
 * priorities after the priority-0 lane), a worker's hand-off
 * (vf__worker_place), taking its own ops before stealing, a thief taking
 * the oldest of the children a worker pushed (its lane's tail) while the
 * owner takes the newest, and top-level ops in arrival order, device pools
 * that never steal, batches (vf__pool_submit_list: a batch lands whole on
 * one worker, spliced onto its inbox in arrival order, priorities kept; a
 * worker's own batch goes to its queue; a device pool's batch is spread
 * op by op), and, with threads, that every op placed is taken exactly
 * once, one at a time or in batches; a waiter's takes of descendants
 * from the heap keep it a heap (random heaps, the order of what is left).
 */
#include "runner.h"

#include <limits.h>

#include "core/family.h"
#include "core/freelist.h"
#include "core/sched.h"

/* vf__worker_take_above for a waiter that runs only descendants of the op
 * whose family is `f` (exec.c's test for a CPU pool). */
static bool descends(const vf__op *op, const void *f)
{
    return op->up != NULL && vf__family_within(op->up, f);
}

static vf__op *take_descendant(vf__worker *w, const vf__family *f)
{
    return vf__worker_take_above(w, &(vf__pool_fits){descends, f});
}

#define MAXOPS 64

/* Op blocks with no var entries (a ready queue never looks at them). */
typedef struct opblock {
    _Alignas(vf__op) unsigned char bytes[sizeof(vf__op)];
} opblock;

typedef struct ops {
    opblock op[MAXOPS];
} ops;

#define OP(o, i) ((vf__op *)&(o)->op[i])

static ops *ops_new(const int *prio, int n)
{
    REQUIRE(n <= MAXOPS);
    ops *o = calloc(1, sizeof *o);
    REQUIRE(o != NULL);
    for (int i = 0; i < n; i++)
        OP(o, i)->priority = prio ? prio[i] : 0;
    return o;
}

static int index_of(const ops *o, const vf__op *op)
{
    return op == NULL ? -1 : (int)((const opblock *)op - o->op);
}

static void pool_new(vf__pool *p, int nworkers)
{
    /* Never started: no thread runs anything. */
    static const vf__pool_runner never_runs = {0};
    REQUIRE(vf__pool_init(p, NULL, &never_runs, "test", nworkers, 0) == 0);
}

/* Submit as a thread that is not a worker (a pusher: an inbox). */
static void submit_outside(vf__pool *p, vf__op *op)
{
    vf__worker *saved = vf__this_worker_;
    vf__this_worker_ = NULL;
    vf__pool_submit(p, op);
    vf__this_worker_ = saved;
}

/* Submit as worker w (its own queue). */
static void submit_as(vf__worker *w, vf__op *op)
{
    vf__worker *saved = vf__this_worker_;
    vf__this_worker_ = w;
    vf__pool_submit(w->pool, op);
    vf__this_worker_ = saved;
}

/* Submit ops[from..to) of o as one batch, as a pusher or as worker `as`. */
static void submit_batch(vf__pool *p, vf__worker *as, ops *o, int from, int to)
{
    vf__readylist l;
    vf__readylist_init(&l);
    for (int i = from; i < to; i++)
        vf__readylist_add(&l, OP(o, i));
    vf__worker *saved = vf__this_worker_;
    vf__this_worker_ = as;
    vf__pool_submit_list(p, &l);
    vf__this_worker_ = saved;
    CHECK_EQ(l.count, 0);
    CHECK(l.head == NULL && l.tail == NULL);
}

/* Take from w n times: the ops must come as want[] says (-1: none). */
static void expect_takes(vf__worker *w, const ops *o, const int *want, int n)
{
    for (int i = 0; i < n; i++) {
        int got = index_of(o, vf__worker_take(w));
        if (got != want[i])
            CHECK_REPORT_("take %d from worker %d: op %d, expected op %d", i,
                          w->index, got, want[i]);
    }
}

#define EXPECT_TAKES(w, o, ...)                                                \
    expect_takes(w, o, (const int[]){__VA_ARGS__},                             \
                 (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))

TEST_CASE(fifo_among_priority_zero)
{
    vf__pool p;
    pool_new(&p, 1);
    ops *o = ops_new(NULL, 6);
    for (int i = 0; i < 3; i++)
        submit_outside(&p, OP(o, i));
    CHECK_EQ(atomic_load(&p.workers[0].qlen), 0); /* still in the inbox */
    EXPECT_TAKES(&p.workers[0], o, 0);
    CHECK_EQ(atomic_load(&p.workers[0].qlen), 2); /* the inbox moved in */
    for (int i = 3; i < 6; i++)
        submit_as(&p.workers[0], OP(o, i));
    EXPECT_TAKES(&p.workers[0], o, 1, 2, 3, 4, 5, -1);
    vf__pool_destroy(&p);
    free(o);
}

TEST_CASE(priority_order)
{
    static const int prio[] = {0, 5, -3, 5, 2, 0, -3, 2, 1};
    vf__pool p;
    pool_new(&p, 1);
    ops *o = ops_new(prio, 9);
    for (int i = 0; i < 9; i++)
        submit_outside(&p, OP(o, i));
    /* Higher first; equal ones in arrival order; negative ones only once
     * the priority-0 lane is empty. */
    EXPECT_TAKES(&p.workers[0], o, 1, 3, 4, 7, 8, 0, 5, 2, 6, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* The heap keeps arrival order among equal priorities too (its tie-break),
 * with ops arriving interleaved and taken while others arrive. */
TEST_CASE(fifo_among_equal_priorities)
{
    int prio[40];
    for (int i = 0; i < 40; i++)
        prio[i] = i % 2 ? 7 : 3;
    vf__pool p;
    pool_new(&p, 1);
    ops *o = ops_new(prio, 40);
    vf__worker *w = &p.workers[0];
    for (int i = 0; i < 20; i++)
        submit_as(w, OP(o, i));
    EXPECT_TAKES(w, o, 1, 3, 5); /* the 7s first */
    for (int i = 20; i < 40; i++)
        submit_as(w, OP(o, i));
    for (int i = 7; i < 40; i += 2)
        EXPECT_TAKES(w, o, i);
    for (int i = 0; i < 40; i += 2)
        EXPECT_TAKES(w, o, i);
    EXPECT_TAKES(w, o, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* A worker that made ops ready runs the first of them next itself when its
 * queue holds nothing better (the hand-off), and queues the rest. */
TEST_CASE(worker_place_hands_off)
{
    static const int prio[] = {0, 0, 0, 5, 0, 0};
    vf__pool p;
    pool_new(&p, 1);
    vf__worker *w = &p.workers[0];
    ops *o = ops_new(prio, 6);
    vf__readylist mine;

    vf__readylist_init(&mine); /* nothing: nothing to run */
    CHECK(vf__worker_place(w, &mine, true) == NULL);

    vf__readylist_init(&mine); /* one, queue empty: no queue round trip */
    vf__readylist_add(&mine, OP(o, 0));
    CHECK_EQ(index_of(o, vf__worker_place(w, &mine, true)), 0);
    CHECK_EQ(atomic_load(&w->qlen), 0);

    vf__readylist_init(&mine); /* two: the first runs, one is queued */
    vf__readylist_add(&mine, OP(o, 1));
    vf__readylist_add(&mine, OP(o, 2));
    CHECK_EQ(index_of(o, vf__worker_place(w, &mine, true)), 1);
    CHECK_EQ(atomic_load(&w->qlen), 1);
    CHECK_EQ(mine.count, 0);

    vf__readylist_init(&mine); /* the queue holds something better */
    vf__readylist_add(&mine, OP(o, 4));
    submit_as(w, OP(o, 3));
    CHECK_EQ(index_of(o, vf__worker_place(w, &mine, true)), 3);
    EXPECT_TAKES(w, o, 2, 4, -1);

    vf__readylist_init(&mine); /* an inbox op is older: it goes first */
    submit_outside(&p, OP(o, 5));
    vf__readylist_add(&mine, OP(o, 0));
    CHECK_EQ(index_of(o, vf__worker_place(w, &mine, true)), 5);
    EXPECT_TAKES(w, o, 0, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* A worker takes its own ops first, then steals another's, oldest first. */
TEST_CASE(take_own_then_steal)
{
    vf__pool p;
    pool_new(&p, 3);
    ops *o = ops_new(NULL, 5);
    vf__worker *w0 = &p.workers[0], *w1 = &p.workers[1];
    submit_as(w1, OP(o, 0));
    submit_as(w1, OP(o, 1));
    submit_as(w0, OP(o, 2));
    submit_as(w1, OP(o, 3));
    EXPECT_TAKES(w0, o, 2, 0, 1); /* its own, then stolen in order */
    submit_as(w0, OP(o, 4));
    EXPECT_TAKES(w1, o, 3, 4, -1);
    EXPECT_TAKES(w0, o, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* Submit as worker w from inside a running op (nest > 0): the front of
 * w's lane, as vf__exec_dispatch_pushed places an op's children. */
static void submit_child_as(vf__worker *w, vf__op *op)
{
    vf__worker *saved = vf__this_worker_;
    vf__this_worker_ = w;
    op->nest = 1;
    vf__pool_submit_nested(w->pool, op);
    vf__this_worker_ = saved;
}

/* An op on w0 pushes children 0..3 in that order (each at the lane's
 * front: 3 2 1 0): the owner takes the newest (3, then 2), a thief the
 * oldest (0, the largest piece of a recursion, then 1), from the tail.
 * With a top-level op at the tail (children 0, 1, then top-level 4: 1 0
 * 4), a thief takes the head, as the owner would, so top-level ops keep
 * their arrival order. */
TEST_CASE(thief_takes_oldest_child)
{
    vf__pool p;
    pool_new(&p, 2);
    ops *o = ops_new(NULL, 6);
    vf__worker *w0 = &p.workers[0], *w1 = &p.workers[1];
    for (int i = 0; i < 4; i++)
        submit_child_as(w0, OP(o, i));
    EXPECT_TAKES(w1, o, 0);
    EXPECT_TAKES(w0, o, 3);
    EXPECT_TAKES(w1, o, 1);
    EXPECT_TAKES(w0, o, 2, -1);
    for (int i = 0; i < 2; i++)
        submit_child_as(w0, OP(o, i));
    submit_as(w0, OP(o, 4));
    EXPECT_TAKES(w1, o, 1);
    EXPECT_TAKES(w0, o, 0);
    EXPECT_TAKES(w1, o, 4, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* A waiter inside op P (family fp) takes only P's descendants: from its
 * own lane's head, else from another worker's lane tail (op 0, P's child
 * there, and op 1, a grandchild through P's child C, family fc), never op
 * 2 (another op Q's child) nor op 3 (top-level); none left: NULL. */
TEST_CASE(waiter_takes_descendants_only)
{
    vf__fl_init(VF__FL_FAMILY, sizeof(vf__family));
    vf__pool p;
    pool_new(&p, 2);
    ops *o = ops_new(NULL, 5);
    vf__worker *w0 = &p.workers[0], *w1 = &p.workers[1];
    vf__running in_p, in_c, in_q;
    vf__running_enter(&in_p, OP(o, 4));
    vf__family *fp = vf__running_family(OP(o, 4), NULL, 1); /* P, place 1 */
    vf__running_enter(&in_c, OP(o, 4));
    vf__family *fc = vf__running_family(OP(o, 4), fp, 2); /* P's child */
    vf__running_enter(&in_q, OP(o, 4));
    vf__family *fq = vf__running_family(OP(o, 4), NULL, 3); /* Q */
    vf__family_ref(fp); /* the ops' references (the runs hold their own) */
    vf__family_ref(fc);
    vf__family_ref(fq);
    OP(o, 0)->up = fp;
    OP(o, 1)->up = fc;
    OP(o, 2)->up = fq;
    submit_child_as(w1, OP(o, 1));
    submit_child_as(w1, OP(o, 2));
    submit_as(w1, OP(o, 3));
    vf__worker *saved = vf__this_worker_;
    vf__this_worker_ = w1;
    OP(o, 0)->nest = 1;
    vf__pool_submit_nested(&p, OP(o, 0)); /* pushed last: the head */
    vf__this_worker_ = saved;
    /* w1's lane, head to tail: 0 2 1 3. From the tail: 3 is top-level, 1
     * descends from P (through C), then 0. */
    CHECK_EQ(index_of(o, take_descendant(w0, fp)), 1);
    CHECK_EQ(index_of(o, take_descendant(w0, fp)), 0);
    CHECK(take_descendant(w0, fp) == NULL);
    CHECK_EQ(index_of(o, take_descendant(w0, fq)), 2);
    EXPECT_TAKES(w1, o, 3, -1);
    vf__running_leave(&in_q);
    vf__running_leave(&in_c);
    vf__running_leave(&in_p);
    vf__family_unref(fq);
    vf__family_unref(fc);
    vf__family_unref(fp);
    vf__pool_destroy(&p);
    free(o);
}

/* A device pool ("spread") places round-robin and never steals: one
 * worker's ops stay its own (each worker owns a stream). */
TEST_CASE(spread_pool_does_not_steal)
{
    vf__pool p;
    pool_new(&p, 2);
    p.spread = true;
    ops *o = ops_new(NULL, 4);
    for (int i = 0; i < 4; i++)
        submit_outside(&p, OP(o, i));
    vf__worker *w0 = &p.workers[0], *w1 = &p.workers[1];
    vf__op *a = vf__worker_take(w0), *b = vf__worker_take(w0);
    CHECK(a != NULL && b != NULL);
    CHECK(vf__worker_take(w0) == NULL);           /* the other two are w1's */
    CHECK_EQ(index_of(o, b) - index_of(o, a), 2); /* every other one */
    vf__op *c = vf__worker_take(w1), *d = vf__worker_take(w1);
    CHECK(c != NULL && d != NULL && vf__worker_take(w1) == NULL);
    CHECK(a != c && a != d && b != c && b != d);
    vf__pool_destroy(&p);
    free(o);
}

/* A batch from a pusher goes onto one inbox with the ops already there,
 * and the drain gives all of them in arrival order: ops before the batch,
 * the batch's, ops after it. An empty batch places nothing. */
TEST_CASE(batch_keeps_arrival_order)
{
    vf__pool p;
    pool_new(&p, 1);
    ops *o = ops_new(NULL, 12);
    vf__worker *w = &p.workers[0];
    submit_batch(&p, NULL, o, 0, 0);
    CHECK(atomic_load(&w->inbox) == NULL);
    submit_outside(&p, OP(o, 0));
    submit_batch(&p, NULL, o, 1, 5);
    submit_outside(&p, OP(o, 5));
    submit_batch(&p, NULL, o, 6, 7); /* a batch of one */
    submit_batch(&p, NULL, o, 7, 10);
    EXPECT_TAKES(w, o, 0, 1, 2);
    submit_batch(&p, NULL, o, 10, 12); /* while the queue holds some */
    EXPECT_TAKES(w, o, 3, 4, 5, 6, 7, 8, 9, 10, 11, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* A batch's ops keep the queue's order once drained: priority first,
 * arrival among equals, negative ones after the lane. */
TEST_CASE(batch_keeps_priorities)
{
    static const int prio[] = {0, 3, 0, -1, 3, 9, 0};
    vf__pool p;
    pool_new(&p, 1);
    ops *o = ops_new(prio, 7);
    submit_batch(&p, NULL, o, 0, 4);
    submit_batch(&p, NULL, o, 4, 7);
    EXPECT_TAKES(&p.workers[0], o, 5, 1, 4, 0, 2, 6, 3, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* Round-robin moves on per batch: each batch lands whole on one worker's
 * inbox, the next batch on the next worker's; a worker takes its own batch
 * in order, then steals the other's in order. */
TEST_CASE(batch_lands_whole_on_one_worker)
{
    vf__pool p;
    pool_new(&p, 2);
    ops *o = ops_new(NULL, 10);
    vf__worker *w0 = &p.workers[0], *w1 = &p.workers[1];
    submit_batch(&p, NULL, o, 0, 5);
    CHECK((atomic_load(&w0->inbox) == NULL) !=
          (atomic_load(&w1->inbox) == NULL));
    vf__worker *first = atomic_load(&w0->inbox) != NULL ? w0 : w1;
    vf__worker *second = first == w0 ? w1 : w0;
    submit_batch(&p, NULL, o, 5, 10);
    CHECK(atomic_load(&second->inbox) != NULL);
    EXPECT_TAKES(first, o, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1);
    EXPECT_TAKES(second, o, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* A worker's batch for its own pool goes to its own queue, in order, after
 * what its inbox held. */
TEST_CASE(batch_from_a_worker_goes_to_its_queue)
{
    vf__pool p;
    pool_new(&p, 2);
    ops *o = ops_new(NULL, 6);
    vf__worker *w1 = &p.workers[1];
    submit_batch(&p, w1, o, 0, 4);
    CHECK_EQ(atomic_load(&w1->qlen), 4);
    CHECK(atomic_load(&w1->inbox) == NULL);
    CHECK_EQ(atomic_load(&p.workers[0].qlen), 0);
    submit_batch(&p, w1, o, 4, 6);
    EXPECT_TAKES(w1, o, 0, 1, 2, 3, 4, 5, -1);
    vf__pool_destroy(&p);
    free(o);
}

/* A device pool spreads a batch op by op, as it does single ops: each of
 * its two workers gets every other op, and keeps its own. */
TEST_CASE(spread_pool_spreads_a_batch)
{
    vf__pool p;
    pool_new(&p, 2);
    p.spread = true;
    ops *o = ops_new(NULL, 6);
    vf__worker *w0 = &p.workers[0], *w1 = &p.workers[1];
    submit_batch(&p, NULL, o, 0, 6);
    vf__op *a[3], *b[3];
    for (int i = 0; i < 3; i++) {
        a[i] = vf__worker_take(w0);
        b[i] = vf__worker_take(w1);
        CHECK(a[i] != NULL && b[i] != NULL);
    }
    CHECK(vf__worker_take(w0) == NULL && vf__worker_take(w1) == NULL);
    for (int i = 0; i < 2; i++) { /* in order, every other op */
        CHECK_EQ(index_of(o, a[i + 1]) - index_of(o, a[i]), 2);
        CHECK_EQ(index_of(o, b[i + 1]) - index_of(o, b[i]), 2);
    }
    /* A worker of the device pool spreads its batch too. */
    submit_batch(&p, w0, o, 0, 2);
    CHECK(vf__worker_take(w0) != NULL && vf__worker_take(w1) != NULL);
    vf__pool_destroy(&p);
    free(o);
}

/* A thread that is no worker takes from any worker's queue. */
TEST_CASE(pool_take_from_any_worker)
{
    vf__pool p;
    pool_new(&p, 2);
    ops *o = ops_new(NULL, 4);
    submit_as(&p.workers[0], OP(o, 0));
    submit_as(&p.workers[1], OP(o, 1));
    submit_outside(&p, OP(o, 2));
    submit_outside(&p, OP(o, 3));
    bool seen[4] = {false};
    for (int i = 0; i < 4; i++) {
        int k = index_of(o, vf__pool_take(&p));
        CHECK(k >= 0 && k < 4 && !seen[k]);
        if (k >= 0 && k < 4)
            seen[k] = true;
    }
    CHECK(vf__pool_take(&p) == NULL);
    vf__pool_destroy(&p);
    free(o);
}

/* Pushers place ops from several threads, one at a time and in batches,
 * while workers take (their own, and stealing): every op is taken exactly
 * once. */
#define NPUSHERS 3
#define NTAKERS 2

typedef struct race {
    vf__pool pool;
    vf__op *ops;
    long per_pusher;
    atomic_long taken;
    atomic_int *seen;
    tu_rv start;
} race;

typedef struct race_arg {
    race *r;
    int index;
} race_arg;

/* Pusher 0 places one op at a time, the others batches of 1 to 8. */
static void *pusher(void *arg)
{
    race_arg *a = arg;
    race *r = a->r;
    vf__op *mine = &r->ops[a->index * r->per_pusher];
    tu_rng rng = tu_rng_make((uint64_t)a->index + 1);
    (void)tu_rv_meet(&r->start, NPUSHERS + NTAKERS, TU_TIMEOUT);
    for (long i = 0; i < r->per_pusher;) {
        if (a->index == 0) {
            vf__pool_submit(&r->pool, &mine[i++]);
            continue;
        }
        vf__readylist batch;
        vf__readylist_init(&batch);
        for (int n = tu_range(&rng, 1, 8); n > 0 && i < r->per_pusher; n--)
            vf__readylist_add(&batch, &mine[i++]);
        vf__pool_submit_list(&r->pool, &batch);
    }
    return NULL;
}

static void *taker(void *arg)
{
    race_arg *a = arg;
    race *r = a->r;
    vf__worker *w = &r->pool.workers[a->index];
    vf__this_worker_ = w;
    long total = NPUSHERS * r->per_pusher;
    (void)tu_rv_meet(&r->start, NPUSHERS + NTAKERS, TU_TIMEOUT);
    while (atomic_load(&r->taken) < total) {
        vf__op *op = vf__worker_take(w);
        if (op == NULL) {
            sched_yield();
            continue;
        }
        atomic_fetch_add(&r->seen[op - r->ops], 1);
        atomic_fetch_add(&r->taken, 1);
    }
    vf__this_worker_ = NULL;
    return NULL;
}

TEST_CASE(every_op_taken_once_under_contention)
{
    race *r = calloc(1, sizeof *r);
    REQUIRE(r != NULL);
    r->per_pusher = (long)tu_scaled(20000, 2000);
    long total = NPUSHERS * r->per_pusher;
    r->ops = calloc((size_t)total, sizeof *r->ops);
    r->seen = calloc((size_t)total, sizeof *r->seen);
    REQUIRE(r->ops != NULL && r->seen != NULL);
    for (long i = 0; i < total; i++)
        r->ops[i].priority = (int)(i % 3) - 1; /* lane and heap */
    pool_new(&r->pool, NTAKERS);
    tu_rv_init(&r->start);
    pthread_t t[NPUSHERS + NTAKERS];
    race_arg args[NPUSHERS + NTAKERS];
    for (int i = 0; i < NPUSHERS; i++) {
        args[i] = (race_arg){r, i};
        t[i] = tu_thread_start(pusher, &args[i]);
    }
    for (int i = 0; i < NTAKERS; i++) {
        args[NPUSHERS + i] = (race_arg){r, i};
        t[NPUSHERS + i] = tu_thread_start(taker, &args[NPUSHERS + i]);
    }
    for (int i = 0; i < NPUSHERS + NTAKERS; i++)
        tu_thread_join(t[i]);
    CHECK_EQ(atomic_load(&r->taken), total);
    long bad = 0;
    for (long i = 0; i < total; i++)
        if (atomic_load(&r->seen[i]) != 1 && bad++ < 5)
            CHECK_REPORT_("op %ld taken %d times", i, atomic_load(&r->seen[i]));
    CHECK_EQ(bad, 0);
    vf__pool_destroy(&r->pool);
    tu_rv_destroy(&r->start);
    free(r->ops);
    free(r->seen);
    free(r);
}

/* A waiter's takes of descendants from the heap (ops with a priority),
 * interleaved with ordinary takes, on random heaps over a small tree of
 * families: each take is an op placed and not taken before, unlinked
 * whole (no links left), the queue's length, its mirror and the heap's
 * top mirror right after each; what is left comes out in the exact queue
 * order (higher priority first, arrival among equals), none lost. */
TEST_CASE(heap_descendant_takes)
{
    enum { N = 60, NFAMILIES = 6 };
    static vf__family fam[NFAMILIES];
    tu_rng rng = {12345};
    for (int round = 0; round < (int)tu_scaled(3000, 300); round++) {
        memset(fam, 0, sizeof fam);
        for (int i = 2; i < NFAMILIES; i++) /* 0 and 1 roots, a tree */
            fam[i].up = &fam[tu_next(&rng) % (uint64_t)i];
        vf__pool p;
        pool_new(&p, 1);
        vf__worker *w = &p.workers[0];
        ops *o = ops_new(NULL, N);
        int n = 1 + (int)(tu_next(&rng) % N);
        bool taken[N] = {false};
        for (int i = 0; i < n; i++) {
            int priority = (int)(tu_next(&rng) % 5) - 2; /* -2..2, not 0 */
            OP(o, i)->priority = priority == 0 ? 3 : priority;
            OP(o, i)->up = &fam[tu_next(&rng) % NFAMILIES];
            submit_as(w, OP(o, i));
        }
        vf__worker *saved = vf__this_worker_;
        vf__this_worker_ = w;
        int ntakes = (int)(tu_next(&rng) % (uint64_t)(n + 1));
        for (int t = 0; t < ntakes; t++) {
            const vf__family *f = &fam[tu_next(&rng) % NFAMILIES];
            vf__op *op = tu_next(&rng) % 3 != 0 ? take_descendant(w, f)
                                                : vf__worker_take(w);
            if (op == NULL)
                continue;
            int i = index_of(o, op);
            REQUIRE(i >= 0 && i < n && !taken[i]);
            taken[i] = true;
            CHECK(op->next == NULL && op->child == NULL);
            CHECK_EQ(atomic_load(&w->qlen), w->len);
            CHECK_EQ(atomic_load(&w->heap_top),
                     w->root != NULL ? w->root->priority : INT_MIN);
        }
        vf__this_worker_ = saved;
        int left = 0;
        for (int i = 0; i < n; i++)
            left += !taken[i];
        int prev_priority = INT_MAX, prev = -1;
        for (int k = 0; k < left; k++) {
            vf__op *op = vf__worker_take(w);
            REQUIRE(op != NULL);
            int i = index_of(o, op);
            REQUIRE(i >= 0 && i < n && !taken[i]);
            taken[i] = true;
            if (op->priority > prev_priority ||
                (op->priority == prev_priority && i < prev))
                CHECK_REPORT_("round %d: op %d (priority %d) after op %d "
                              "(priority %d)",
                              round, i, op->priority, prev, prev_priority);
            prev_priority = op->priority;
            prev = i;
        }
        CHECK(vf__worker_take(w) == NULL);
        CHECK_EQ(w->len, 0);
        vf__pool_destroy(&p);
        free(o);
    }
}

TEST_MAIN("test_ready_queue", 120)
