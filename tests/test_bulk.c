/*
 * test_bulk: bulk execution (rule 13 of DESIGN.md, vf_bulk_set_size).
 *
 * Consecutive sync pushes from one thread are fused into one op; the
 * program must not be able to tell, except through vf_engine_stats: the
 * values are the serial ones, every op's done runs once with its own
 * status, a failing op skips exactly the later ops that depend on it (in
 * its batch and after it), versions count every write, and no batched op
 * is lost to a wait, a delete (another thread's too), a stop, a shutdown
 * or a destroy. Random
 * programs with bulking on are compared with serial execution in
 * test_random_serial.
 */
#include "runner.h"

/* the testing aid vf__testing_fail_alloc (fault injection) */
#include "base/alloc.h"

#include <unistd.h>

static const vf_config pooled = {.type = VF_ENGINE_POOLED, .cpu_workers = 2};
#define NONE ((vf_var_list){NULL, 0})

typedef struct arith {
    long *x;
    char op; /* '=', '*', '+' */
    long k;
} arith;

static int arith_fn(vf_run *run, void *arg)
{
    (void)run;
    arith *a = arg;
    if (a->op == '=')
        *a->x = a->k;
    else if (a->op == '*')
        *a->x *= a->k;
    else
        *a->x += a->k;
    return 0;
}

static void push_arith(vf_engine *e, vf_var v, arith *a)
{
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = arith_fn,
                                        .arg = a,
                                        .writes = VF_VARS(v),
                                        .name = "arith"}));
}

/* MXNet's bulk test: x = 1; x *= 2; x += 1; wait (3); x += 1 gives 4;
 * then 100 x (x += 1) gives 104, in fused ops the stats count. */
TEST_CASE(arithmetic)
{
    tu_phase("arithmetic");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_EQ(vf_bulk_set_size(e, 10), 0);
    CHECK_EQ(vf_bulk_set_size(e, 10), 10); /* returns the previous one */
    vf_var x = tu_var(e);
    long value = 0;
    arith set = {&value, '=', 1}, mul = {&value, '*', 2},
          add = {&value, '+', 1};
    push_arith(e, x, &set);
    push_arith(e, x, &mul);
    push_arith(e, x, &add);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.bulks, 0); /* still in this thread's batch */
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(value, 3);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.bulks, 1);
    CHECK_EQ(st.bulked, 3);
    push_arith(e, x, &add);
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(value, 4);
    for (int i = 0; i < 100; i++)
        push_arith(e, x, &add);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(value, 104);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.bulks, 12); /* 1 + 1 + 100 / 10 */
    CHECK_EQ(st.bulked, 104);
    CHECK_EQ(st.ran, 104);
    uint64_t version = 0;
    CHECK_OK(vf_var_version(e, x, &version));
    CHECK_EQ(version, 104); /* every write counts */
    tu_finish_engine(e);
}

/* An op that fails or records what it saw, and its done callback. */
typedef struct step {
    int fail;          /* return this when non-zero */
    atomic_int ran;    /* times the function ran */
    atomic_int dones;  /* times done was called */
    atomic_int status; /* done's status */
} step;

static int step_fn(vf_run *run, void *arg)
{
    step *s = arg;
    atomic_fetch_add(&s->ran, 1);
    if (s->fail)
        vf_run_set_error(run, "step %s fails", vf_run_name(run));
    return s->fail;
}

static void step_done(void *arg, int status)
{
    step *s = arg;
    atomic_store(&s->status, status);
    atomic_fetch_add(&s->dones, 1);
}

static void push_step(vf_engine *e, step *s, const char *name,
                      vf_var_list reads, vf_var_list writes, bool no_skip)
{
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = step_fn,
                                        .arg = s,
                                        .done = step_done,
                                        .reads = reads,
                                        .writes = writes,
                                        .name = name,
                                        .no_skip = no_skip}));
}

/* A failing op inside a batch fails like an op on its own. */
TEST_CASE(failure)
{
    tu_phase("failure");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_EQ(vf_bulk_set_size(e, 16), 0);
    vf_var a = tu_var(e), b = tu_var(e), c = tu_var(e);
    step s[7];
    memset(s, 0, sizeof s);
    s[1].fail = -42;
    push_step(e, &s[0], "s0", NONE, VF_VARS(a), false);
    push_step(e, &s[1], "fails", VF_VARS(a), VF_VARS(b), false);
    push_step(e, &s[2], "reads b", VF_VARS(b), VF_VARS(c), false); /* skip */
    push_step(e, &s[3], "reads a", VF_VARS(a), NONE, false);       /* runs */
    push_step(e, &s[4], "writes c", NONE, VF_VARS(c), false);      /* skip:
                                                         c inherited the failure */
    push_step(e, &s[5], "no skip", VF_VARS(b), NONE, true);        /* runs */
    push_step(e, &s[6], "other", NONE, VF_VARS(a), false);         /* runs */
    vf_error err;
    CHECK_ERR(vf_var_wait(e, c, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, -42);
    CHECK(strcmp(err.op_name, "fails") == 0);
    CHECK(strstr(err.message, "step fails fails") != NULL);
    int want_ran[7] = {1, 1, 0, 1, 0, 1, 1};
    int want_status[7] = {0, -42, VF_ESKIPPED, 0, VF_ESKIPPED, 0, 0};
    for (int i = 0; i < 7; i++) {
        CHECK_EQ(atomic_load(&s[i].ran), want_ran[i]);
        CHECK_EQ(atomic_load(&s[i].dones), 1);
        CHECK_EQ(atomic_load(&s[i].status), want_status[i]);
    }
    CHECK_OK(vf_var_wait(e, a, NULL)); /* a never failed */
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.ran, 4);
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.skipped, 2);
    CHECK_EQ(st.bulks, 1);
    /* The failure was reported at wait_var; wait_all clears the rest. */
    vf_engine_wait_all(e, NULL);
    uint64_t vb = 9, vc = 9;
    CHECK_OK(vf_var_version(e, b, &vb));
    CHECK_OK(vf_var_version(e, c, &vc));
    CHECK_EQ(vb, 1); /* the failing op ran: its write counts */
    CHECK_EQ(vc, 0); /* both writers of c were skipped */
    tu_finish_engine(e);
}

/* Operators join batches; a push that cannot (async, another priority,
 * another property) flushes first, so order is kept. */
typedef struct logger {
    int log[64];
    int n;
} logger;

typedef struct entry {
    logger *l;
    int id;
} entry;

static int log_fn(vf_run *run, void *arg)
{
    (void)run;
    entry *en = arg;
    en->l->log[en->l->n++] = en->id;
    return 0;
}

static void log_async(vf_run *run, void *arg, vf_completion done)
{
    log_fn(run, arg);
    vf_completion_finish(done, 0, NULL);
}

TEST_CASE(mixed)
{
    tu_phase("mixed");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_EQ(vf_bulk_set_size(e, 64), 0);
    vf_var x = tu_var(e);
    logger l;
    memset(&l, 0, sizeof l);
    entry en[12];
    for (int i = 0; i < 12; i++)
        en[i] = (entry){&l, i};
    vf_operator *opr;
    CHECK_OK(vf_operator_create(
        e,
        &(vf_op){
            .fn = log_fn, .arg = &en[2], .writes = VF_VARS(x), .name = "opr"},
        &opr));
    vf_op base = {.fn = log_fn, .writes = VF_VARS(x), .name = "log"};
    vf_op o = base;
    o.arg = &en[0];
    CHECK_OK(vf_engine_push(e, &o));
    o.arg = &en[1];
    CHECK_OK(vf_engine_push(e, &o));
    CHECK_OK(vf_operator_push(e, opr, 0));
    o = base; /* async: not bulkable */
    o.fn = NULL;
    o.async_fn = log_async;
    o.arg = &en[3];
    CHECK_OK(vf_engine_push(e, &o));
    /* Nothing is fused until it finished (async_completed_by_a_later_op) */
    CHECK_OK(vf_var_wait(e, x, NULL));
    o = base;
    o.arg = &en[4];
    o.priority = 5; /* another priority: a new batch */
    CHECK_OK(vf_engine_push(e, &o));
    o.arg = &en[5];
    o.priority = 0;
    CHECK_OK(vf_engine_push(e, &o));
    o.arg = &en[6];
    o.property = VF_PROP_CPU_PRIORITIZED; /* not normal: alone */
    CHECK_OK(vf_engine_push(e, &o));
    o = base;
    o.arg = &en[7];
    o.nonblocking = true; /* not bulkable either */
    CHECK_OK(vf_engine_push(e, &o));
    o = base;
    o.arg = &en[8];
    CHECK_OK(vf_engine_push(e, &o));
    CHECK_OK(vf_bulk_flush(e));
    o.arg = &en[9];
    CHECK_OK(vf_engine_push(e, &o));
    CHECK_EQ(vf_bulk_set_size(e, 0), 64); /* turning it off flushes */
    o.arg = &en[10];
    CHECK_OK(vf_engine_push(e, &o));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(l.n, 11);
    for (int i = 0; i < l.n; i++)
        CHECK_EQ(l.log[i], i);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    /* Batches: {0,1,opr}, {4}, {5}, {8}, {9}. */
    CHECK_EQ(st.bulks, 5);
    CHECK_EQ(st.bulked, 7);
    CHECK_OK(vf_operator_destroy(e, opr));
    tu_finish_engine(e);
}

/* Another thread's open batch: a wait flushes it; a delete of a var it
 * names flushes it first; destroy runs what is left. */
typedef struct pusher_arg {
    vf_engine *e;
    vf_var v;
    long *value;
    arith add;
    tu_gate pushed, done;
} pusher_arg;

static void *pusher(void *p)
{
    pusher_arg *a = p;
    CHECK_EQ(vf_bulk_set_size(a->e, 1000), 0);
    for (int i = 0; i < 10; i++)
        push_arith(a->e, a->v, &a->add);
    tu_gate_open(&a->pushed);
    tu_gate_wait(&a->done, 60);
    return NULL;
}

TEST_CASE(other_threads)
{
    tu_phase("other threads");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    long value = 0;
    pusher_arg a = {.e = e, .v = tu_var(e), .value = &value};
    a.add = (arith){&value, '+', 1};
    tu_gate_init(&a.pushed);
    tu_gate_init(&a.done);
    pthread_t t = tu_thread_start(pusher, &a);
    CHECK(tu_gate_wait(&a.pushed, 60));
    CHECK_OK(vf_var_wait(e, a.v, NULL)); /* flushes the pusher's batch */
    CHECK_EQ(value, 10);
    tu_gate_open(&a.done);
    tu_thread_join(t);
    tu_gate_destroy(&a.pushed);
    tu_gate_destroy(&a.done);

    /* A batch left open by a thread that has exited runs at destroy. The
     * engine is stopped first: a running one's idle workers push a batch
     * held back for a millisecond (sched.h: VF__POOL_HELD_BACK_US), so
     * the count below could see it run (seen under ASan in CI). */
    CHECK_OK(vf_engine_stop(e));
    a.e = e;
    tu_gate_init(&a.pushed);
    tu_gate_init(&a.done);
    tu_gate_open(&a.done);
    t = tu_thread_start(pusher, &a);
    tu_thread_join(t);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.ran, 10); /* the second 10 are still in the batch */
    CHECK_OK(vf_engine_destroy(e));
    CHECK_EQ(value, 20);
    tu_gate_destroy(&a.pushed);
    tu_gate_destroy(&a.done);
}

/* A var whose delete was pushed: a later batched push on it is refused at
 * its push (VF_ESTALE), as a lone push is; the delete pushed the batch
 * that named the var first, so that batch ran before it. */
static void free_flag(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
}

TEST_CASE(delete)
{
    tu_phase("delete");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_EQ(vf_bulk_set_size(e, 8), 0);
    vf_var v = tu_var(e), w = tu_var(e);
    step s[2];
    memset(s, 0, sizeof s);
    push_step(e, &s[0], "on v", NONE, VF_VARS(v), false);
    atomic_int freed = 0;
    CHECK_OK(vf_var_destroy(e, v, free_flag, &freed));
    step late;
    memset(&late, 0, sizeof late);
    CHECK_ERR(vf_engine_push(e, &(vf_op){.fn = step_fn,
                                         .arg = &late,
                                         .done = step_done,
                                         .writes = VF_VARS(v),
                                         .name = "late"}),
              VF_ESTALE);
    push_step(e, &s[1], "on w", NONE, VF_VARS(w), false);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&s[0].ran), 1);
    CHECK_EQ(atomic_load(&s[1].ran), 1);
    CHECK_EQ(atomic_load(&freed), 1);
    CHECK_EQ(atomic_load(&late.ran), 0);
    CHECK_EQ(atomic_load(&late.dones), 0);
    tu_finish_engine(e);
}

/* A batch that cannot be pushed whole. Its fused op needs memory for its
 * queue places (a union of more than 4 vars): with that allocation failing,
 * each op is pushed alone and runs. A union out of address order needs
 * memory to be sorted: with that failing, every op of the batch fails with
 * VF_ENOMEM, each reported as a failed op. */
TEST_CASE(fallback)
{
    tu_phase("fallback");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    enum { N = 6 };
    vf_var v[N];
    for (int i = 0; i < N; i++)
        v[i] = tu_var(e);
    step s[N];
    memset(s, 0, sizeof s);
    CHECK_EQ(vf_bulk_set_size(e, 64), 0);
    for (int i = 0; i < N; i++) /* creation order: the union is sorted */
        push_step(e, &s[i], "alone", NONE, VF_VARS(v[i]), false);
    vf__testing_fail_alloc(1);
    CHECK_OK(vf_bulk_flush(e));
    vf__testing_fail_alloc(0);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.bulks, 0); /* no fused op went in */
    CHECK_EQ(st.ran, N);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(atomic_load(&s[i].ran), 1);
        CHECK_EQ(atomic_load(&s[i].status), 0);
    }

    memset(s, 0, sizeof s);
    for (int i = N - 1; i >= 0; i--) /* reverse order: sorting allocates */
        push_step(e, &s[i], "unsorted", NONE, VF_VARS(v[i]), false);
    vf__testing_fail_alloc(1);
    CHECK_OK(vf_bulk_flush(e));
    vf__testing_fail_alloc(0);
    vf_error err;
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, VF_ENOMEM);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(atomic_load(&s[i].ran), 0);
        CHECK_EQ(atomic_load(&s[i].dones), 1);
        CHECK_EQ(atomic_load(&s[i].status), VF_ENOMEM);
    }
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.failed, N);
    tu_finish_engine(e);
}

/* Stop, shutdown and nested pushes. */
TEST_CASE(lifecycle)
{
    tu_phase("stop and shutdown");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_EQ(vf_bulk_set_size(e, 50), 0);
    vf_var x = tu_var(e);
    long value = 0;
    arith add = {&value, '+', 1};
    for (int i = 0; i < 7; i++)
        push_arith(e, x, &add);
    CHECK_OK(vf_engine_stop(e)); /* runs the open batch first */
    CHECK_EQ(value, 7);
    CHECK_OK(vf_engine_start(e));
    step s[3];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 3; i++)
        push_step(e, &s[i], "doomed", NONE, VF_VARS(x), false);
    CHECK_OK(vf_engine_shutdown(e)); /* skipped, not lost */
    CHECK_OK(vf_engine_destroy(e));
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(atomic_load(&s[i].ran), 0);
        CHECK_EQ(atomic_load(&s[i].dones), 1);
        CHECK_EQ(atomic_load(&s[i].status), VF_ESKIPPED);
    }
}

/* The shutdown notice given while a batch's first op runs: the ops after
 * it in the batch, not started, are skipped as they would be alone (found
 * trying it as a user: they ran, their done got 0). */
typedef struct held_first {
    atomic_int started;
    tu_gate go;
} held_first;

static int held_first_fn(vf_run *run, void *arg)
{
    (void)run;
    held_first *h = arg;
    atomic_store(&h->started, 1);
    CHECK(tu_gate_wait(&h->go, TU_TIMEOUT));
    return 0;
}

TEST_CASE(shutdown_inside_a_batch)
{
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_EQ(vf_bulk_set_size(e, 16), 0);
    vf_var x = tu_var(e);
    held_first h;
    atomic_init(&h.started, 0);
    tu_gate_init(&h.go);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = held_first_fn, .arg = &h, .writes = VF_VARS(x)}));
    step s[10];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 10; i++)
        push_step(e, &s[i], "after", NONE, VF_VARS(x), false);
    CHECK_OK(vf_bulk_flush(e));
    CHECK(tu_wait_flag(&h.started, 1, TU_TIMEOUT));
    CHECK_OK(vf_engine_shutdown(e));
    tu_gate_open(&h.go);
    CHECK_OK(vf_engine_destroy(e));
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(atomic_load(&s[i].ran), 0);
        CHECK_EQ(atomic_load(&s[i].dones), 1);
        CHECK_EQ(atomic_load(&s[i].status), VF_ESKIPPED);
    }
    tu_gate_destroy(&h.go);
}

/* config.bulk_size applies to every pushing thread, workers included: ops
 * pushed from inside ops sit in their worker's batch until a wait. */
typedef struct parent_arg {
    vf_engine *e;
    vf_var v;
    long *value;
    arith add;
} parent_arg;

static int parent_fn(vf_run *run, void *arg)
{
    (void)run;
    parent_arg *p = arg;
    for (int i = 0; i < 5; i++)
        push_arith(p->e, p->v, &p->add);
    return 0;
}

TEST_CASE(nested)
{
    tu_phase("nested, config");
    vf_config cfg = pooled;
    cfg.bulk_size = 4;
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = cfg});
    long value = 0;
    vf_var parent_var = tu_var(e);
    parent_arg p = {e, tu_var(e), &value, {&value, '+', 1}};
    for (int i = 0; i < 3; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = parent_fn,
                                            .arg = &p,
                                            .writes = VF_VARS(parent_var),
                                            .name = "parent"}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(value, 15);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.ran, 18);
    CHECK(st.bulks >= 4); /* the parents' batch, the children's batches */
    CHECK_EQ(st.bulked, 18);
    tu_finish_engine(e);
}

/* Bad sizes, the environment, the naive engine. */
TEST_CASE(settings)
{
    tu_phase("settings");
    vf_engine *e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_ERR(vf_bulk_set_size(e, -1), VF_EINVAL);
    CHECK_ERR(vf_bulk_set_size(e, 4097), VF_EINVAL);
    CHECK_ERR(vf_bulk_set_size(NULL, 4), VF_EINVAL);
    CHECK_ERR(vf_bulk_flush(NULL), VF_EINVAL);
    CHECK_OK(vf_bulk_flush(e)); /* nothing open: fine */
    CHECK_EQ(vf_bulk_set_size(e, 0), 0);
    CHECK_EQ(vf_bulk_set_size(e, 4096), 0);
    CHECK_EQ(vf_bulk_set_size(e, 3), 4096);
    tu_finish_engine(e);

    vf_engine *bad = NULL;
    CHECK_ERR(vf_engine_create(&bad, &(vf_config){.bulk_size = 5000}),
              VF_EINVAL);
    setenv("VF_BULK_SIZE", "x", 1);
    CHECK_ERR(vf_engine_create(&bad, &pooled), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "VF_BULK_SIZE") != NULL);
    setenv("VF_BULK_SIZE", "0", 1); /* off, said so */
    e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_EQ(vf_bulk_set_size(e, 2), 0);
    tu_finish_engine(e);
    setenv("VF_BULK_SIZE", "6", 1);
    e = tu_engine(&(tu_kind){.name = "pooled", .cfg = pooled});
    CHECK_EQ(vf_bulk_set_size(e, 2), 6); /* the environment's */
    tu_finish_engine(e);
    unsetenv("VF_BULK_SIZE");

    /* The naive engine runs each op inside its push: no batches. */
    e = tu_engine(
        &(tu_kind){.name = "naive", .cfg = {.type = VF_ENGINE_NAIVE}});
    CHECK_EQ(vf_bulk_set_size(e, 8), 0);
    vf_var x = tu_var(e);
    long value = 0;
    arith set = {&value, '=', 3};
    push_arith(e, x, &set);
    CHECK_EQ(value, 3); /* ran inside the push */
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.bulks, 0);
    tu_finish_engine(e);
}

/* A program that waits for its ops by its own means (a `done` that signals
 * it), with no varflow call to flush the batch they sit in: idle workers
 * push a batch held back for VF__POOL_HELD_BACK_US (sched.h), so the ops
 * run, as they would without bulk, instead of waiting for ever. */
typedef struct signal_done {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int calls;
} signal_done;

static void signal_done_fn(void *arg, int status)
{
    signal_done *d = arg;
    CHECK_OK(status);
    pthread_mutex_lock(&d->lock);
    d->calls++;
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

TEST_CASE(own_wait_without_flush)
{
    static const vf_engine_type types[] = {VF_ENGINE_POOLED,
                                           VF_ENGINE_PERDEVICE};
    for (int t = 0; t < 2; t++)
        for (int workers = 1; workers <= 2; workers++) {
            vf_engine *e = tu_engine(&(tu_kind){.name = "bulk 8",
                                                .cfg = {.type = types[t],
                                                        .cpu_workers = workers,
                                                        .bulk_size = 8}});
            vf_var v = tu_var(e);
            signal_done d = {.calls = 0};
            pthread_mutex_init(&d.lock, NULL);
            pthread_cond_init(&d.cond, NULL);
            enum { OPS = 3 };
            for (int i = 0; i < OPS; i++)
                CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                                    .done = signal_done_fn,
                                                    .arg = &d,
                                                    .writes = VF_VARS(v)}));
            /* Within 20 s (the workers release it after 1 ms). */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 20;
            pthread_mutex_lock(&d.lock);
            while (d.calls < OPS &&
                   pthread_cond_timedwait(&d.cond, &d.lock, &until) == 0) {
            }
            int calls = d.calls;
            pthread_mutex_unlock(&d.lock);
            if (calls != OPS)
                CHECK_REPORT_("%s, %d workers: %d of %d done calls came with "
                              "no flush",
                              vf_engine_type_name(types[t]), workers, calls,
                              OPS);
            vf_stats st;
            CHECK_OK(vf_engine_stats(e, &st));
            CHECK_EQ(st.bulked, (uint64_t)OPS); /* it was a batch */
            tu_finish_engine(e);
            pthread_cond_destroy(&d.cond);
            pthread_mutex_destroy(&d.lock);
        }
}

/* A batch of children an op pushed while the engine stops, flushed by
 * another thread's push from outside the engine's ops (it names a var of
 * the batch), is not held (rule 14 holds the program's pushes, not an
 * op's): the parent waits for it inside, and its nested wait must see the
 * children's write. */
typedef struct stopping_parent {
    vf_engine *e;
    vf_var v;
    long value, seen;
    int rc;
    tu_gate started, go_push, pushed, go_wait;
} stopping_parent;

static int write_seven(vf_run *run, void *arg)
{
    (void)run;
    *(long *)arg = 7;
    return 0;
}

static int waiting_parent(vf_run *run, void *arg)
{
    (void)run;
    stopping_parent *p = arg;
    tu_gate_open(&p->started);
    tu_gate_wait(&p->go_push, TU_TIMEOUT);
    p->rc = vf_engine_push(
        p->e,
        &(vf_op){.fn = write_seven, .arg = &p->value, .writes = VF_VARS(p->v)});
    tu_gate_open(&p->pushed);
    tu_gate_wait(&p->go_wait, TU_TIMEOUT);
    if (p->rc == 0)
        p->rc = vf_var_wait(p->e, p->v, NULL);
    p->seen = p->value;
    return 0;
}

static void *stopper(void *arg)
{
    return (void *)(intptr_t)vf_engine_stop(arg);
}

/* A pooled engine of `workers` CPU workers whose threads bulk `bulk`
 * pushes (1: each op a batch of its own). */
static vf_engine *bulk_engine(int workers, int bulk)
{
    return tu_engine(&(tu_kind){.name = "bulk",
                                .cfg = {.type = VF_ENGINE_POOLED,
                                        .cpu_workers = workers,
                                        .bulk_size = bulk}});
}

static uint64_t bulks_of(vf_engine *e)
{
    vf_stats st = {0};
    CHECK_OK(vf_engine_stats(e, &st));
    return st.bulks;
}

/* An op that waits, inside itself, for a var an earlier op of its batch
 * writes gets what it gets unbulked: the earlier op ran (0, or
 * VF_EOPFAILED with its failure), and VF_EDEADLK only when it writes the
 * var itself. It got VF_EDEADLK (it waited for its own batch), so
 * VF_BULK_SIZE changed what a program computed (found by a user test).
 * Case 3: the waiting op pushed a child that writes the var before its
 * wait: the batch lets go of the var (its earlier op was the last of it
 * to use it) before the child queues, and the wait gets 0 and sees the
 * child's write, as unbulked (it was VF_EDEADLK, the child queued behind
 * the batch: found trying settings as a user; a first cut of the settled
 * wait answered 0 without the child's write: found by the second
 * reviewer). Case 4: the ops are children of an op that writes the var:
 * VF_EDEADLK both ways (the first cut skipped that check when bulked). */
typedef struct inner_wait {
    vf_var x;
    int value, seen, rc;
    bool fail, child_first;
} inner_wait;

static int write_x(vf_run *run, void *arg)
{
    (void)run;
    inner_wait *w = arg;
    w->value = 42;
    return w->fail ? 5 : 0;
}

static int set_seven(vf_run *run, void *arg)
{
    (void)run;
    ((inner_wait *)arg)->value = 7;
    return 0;
}

static int wait_x(vf_run *run, void *arg)
{
    inner_wait *w = arg;
    if (w->child_first)
        (void)vf_engine_push(
            vf_run_engine(run),
            &(vf_op){.fn = set_seven, .arg = w, .writes = VF_VARS(w->x)});
    w->rc = vf_var_wait(vf_run_engine(run), w->x, NULL);
    /* A refused wait orders nothing: the writer may run meanwhile. */
    w->seen = w->rc == 0 || w->rc == VF_EOPFAILED ? w->value : -1;
    return 0;
}

/* Case 4's parent: writes x, pushes both ops as its children. */
typedef struct parent_of_two {
    inner_wait *w;
    vf_var y;
} parent_of_two;

static int push_writer_and_waiter(vf_run *run, void *arg)
{
    parent_of_two *p = arg;
    vf_engine *e = vf_run_engine(run);
    int rc = vf_engine_push(
        e, &(vf_op){.fn = write_x, .arg = p->w, .writes = VF_VARS(p->w->x)});
    if (rc == 0)
        rc = vf_engine_push(
            e, &(vf_op){.fn = wait_x, .arg = p->w, .writes = VF_VARS(p->y)});
    return rc;
}

TEST_CASE(wait_inside_for_an_earlier_op_of_the_batch)
{
    /* ok, the writer fails, the waiter writes x, the waiter's child writes
     * x, a parent writes x */
    for (int c = 0; c < 5; c++)
        for (int workers = 1; workers <= 2; workers++) {
            int rc[2], seen[2];
            uint64_t bulks[2];
            for (int bulk = 0; bulk < 2; bulk++) {
                vf_engine *e = bulk_engine(workers, bulk ? 8 : 1);
                inner_wait w = {.x = tu_var(e),
                                .fail = c == 1,
                                .child_first = c == 3,
                                .rc = -1};
                vf_var y = tu_var(e);
                vf_var waits[2] = {y, w.x};
                parent_of_two parent = {&w, y};
                if (c == 4) {
                    CHECK_OK(
                        vf_engine_push(e, &(vf_op){.fn = push_writer_and_waiter,
                                                   .arg = &parent,
                                                   .writes = VF_VARS(w.x)}));
                } else {
                    CHECK_OK(
                        vf_engine_push(e, &(vf_op){.fn = write_x,
                                                   .arg = &w,
                                                   .writes = VF_VARS(w.x)}));
                    CHECK_OK(vf_engine_push(
                        e, &(vf_op){.fn = wait_x,
                                    .arg = &w,
                                    .writes = tu_list(waits, c == 2 ? 2 : 1)}));
                }
                (void)vf_engine_wait_all(e, NULL);
                rc[bulk] = w.rc;
                seen[bulk] = w.seen;
                bulks[bulk] = bulks_of(e);
                tu_finish_engine(e);
            }
            if (c < 3) {
                CHECK_EQ(bulks[0], 2); /* each op a batch of its own */
                CHECK_EQ(bulks[1], 1); /* the two ops one batch */
            }
            if (rc[0] != rc[1] || seen[0] != seen[1])
                CHECK_REPORT_("case %d, %d workers: unbulked the inner wait "
                              "got %s and saw %d, bulked %s and %d",
                              c, workers, vf_error_name(rc[0]), seen[0],
                              vf_error_name(rc[1]), seen[1]);
            static const int expected[] = {0, VF_EOPFAILED, VF_EDEADLK, 0,
                                           VF_EDEADLK};
            CHECK_ERR(rc[1], expected[c]);
            if (c < 2)
                CHECK_EQ(seen[1], 42);
            if (c == 3) /* it waited for the child, both ways */
                CHECK_EQ(seen[1], 7);
        }
}

TEST_CASE(children_batch_not_held_by_stop)
{
    /* One worker, which runs the parent: the batch its child joins (the
     * worker's) is pushed by the main thread's push below. */
    vf_engine *e = tu_engine(&(tu_kind){
        .name = "pooled/1, bulk 8",
        .cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 1, .bulk_size = 8}});
    stopping_parent p = {.e = e, .v = tu_var(e)};
    tu_gate_init(&p.started);
    tu_gate_init(&p.go_push);
    tu_gate_init(&p.pushed);
    tu_gate_init(&p.go_wait);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = waiting_parent,
                                        .arg = &p,
                                        .writes = VF_VARS(tu_var(e))}));
    CHECK(tu_gate_wait(&p.started, TU_TIMEOUT));
    pthread_t t = tu_thread_start(stopper, e);
    /* The engine holds the program's pushes once a wait says so. */
    double end = tu_now() + TU_TIMEOUT;
    int rc;
    do {
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop}));
        rc = vf_engine_wait_all_timed(e, 0, NULL);
    } while (rc != VF_ESTOPPED && tu_now() < end);
    CHECK_ERR(rc, VF_ESTOPPED);
    tu_gate_open(&p.go_push);
    CHECK(tu_gate_wait(&p.pushed, TU_TIMEOUT));
    uint64_t bulks = bulks_of(e);
    vf_var w = p.v; /* names the child's var: its batch goes first */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(w)}));
    CHECK_EQ(bulks_of(e), bulks + 1);
    tu_gate_open(&p.go_wait);
    void *stop_rc = NULL;
    CHECK_EQ(pthread_join(t, &stop_rc), 0);
    CHECK_EQ((int)(intptr_t)stop_rc, 0);
    CHECK_OK(p.rc);
    CHECK_EQ(p.seen, 7); /* the nested wait came after the child */
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
    tu_gate_destroy(&p.started);
    tu_gate_destroy(&p.go_push);
    tu_gate_destroy(&p.pushed);
    tu_gate_destroy(&p.go_wait);
}

/* An async op A writes c; a sync op B, with no vars, completes it; a sync
 * op C reads c. Fused, B and C would make one op that waits for c, so for
 * A, whose completion is B's: bulking turned a program that finishes into
 * one that hangs (found trying async ops with VF_BULK_SIZE as a user).
 * While an async op is pushed and not finished, nothing is fused: the
 * program finishes, and the ops after A's end are fused again. */
static _Atomic(vf_completion *) kept;
static vf_completion kept_done;

static void keep_completion(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    *(long *)arg = 7;
    kept_done = done;
    atomic_store(&kept, &kept_done);
}

static int complete_kept(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    vf_completion *done;
    while ((done = atomic_load(&kept)) == NULL)
        sched_yield(); /* A starts at once: c is free */
    return vf_completion_finish(*done, 0, NULL);
}

TEST_CASE(async_completed_by_a_later_op)
{
    for (int threaded = 0; threaded < 2; threaded++) {
        vf_engine *e = NULL;
        vf_config cfg = pooled;
        cfg.cpu_workers = threaded ? 2 : 1;
        CHECK_OK(vf_engine_create(&e, &cfg));
        REQUIRE(e != NULL);
        CHECK_OK(vf_bulk_set_size(e, 2));
        vf_var c = tu_var(e), d = tu_var(e);
        long value = 0, seen = 0;
        atomic_store(&kept, NULL);
        CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = keep_completion,
                                            .arg = &value,
                                            .writes = VF_VARS(c)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = complete_kept}));
        arith copy = {.x = &seen, .op = '=', .k = 7};
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = arith_fn,
                                            .arg = &copy,
                                            .reads = VF_VARS(c),
                                            .writes = VF_VARS(d)}));
        CHECK_OK(vf_engine_wait_all_timed(e, 10000, NULL));
        CHECK_EQ(value, 7);
        CHECK_EQ(seen, 7);
        /* A is over: the next pushes are fused again. */
        vf_stats before, after;
        CHECK_OK(vf_engine_stats(e, &before));
        arith add = {.x = &seen, .op = '+', .k = 1};
        for (int i = 0; i < 4; i++)
            push_arith(e, d, &add);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_OK(vf_engine_stats(e, &after));
        CHECK_EQ(seen, 11);
        CHECK(after.bulked > before.bulked);
        CHECK_OK(vf_engine_destroy(e));
    }
}

/* children_on_an_earlier_ops_var: T writes v (value 1), then P, in T's
 * batch, pushes a child C that doubles v and a child D (no vars) that
 * waits on v, and waits for both. */
typedef struct earlier_var {
    vf_var v, p;
    long value;
    arith set_one, twice; /* T's and C's */
    long seen_by_d;       /* what D read after its wait */
    int rc_children, rc_d_wait;
} earlier_var;

static int ev_wait_v(vf_run *run, void *arg)
{
    earlier_var *ev = arg;
    /* v is no ancestor's: the batch's earlier op that wrote it is none of
     * D's ancestors. */
    ev->rc_d_wait = vf_var_wait(vf_run_engine(run), ev->v, NULL);
    ev->seen_by_d = ev->value;
    return 0;
}

static int ev_parent(vf_run *run, void *arg)
{
    earlier_var *ev = arg;
    vf_engine *e = vf_run_engine(run);
    push_arith(e, ev->v, &ev->twice);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = ev_wait_v, .arg = ev}));
    ev->rc_children = vf_run_wait_children(run, NULL);
    return ev->rc_children;
}

/* An op of a batch that pushes a child on a var only an earlier op of the
 * batch uses, and waits for it, gets what it gets unbulked: the batch lets
 * go of the var before the child queues. Before, the child queued behind
 * the batch, which waited for its running op, which waited for the child:
 * VF_EDEADLK under any VF_BULK_SIZE of 2 or more (found trying settings
 * as a user: "op \"bulk\" would wait for ops that wait for it"), and the
 * ancestors' writes a wait inside the child is checked against were the
 * whole batch's. */
TEST_CASE(children_on_an_earlier_ops_var)
{
    for (int workers = 1; workers <= 2; workers++)
        for (int bulk = 1; bulk <= 64; bulk *= 8) {
            vf_engine *e = bulk_engine(workers, bulk);
            for (int round = 0; round < 20; round++) {
                earlier_var ev = {.v = tu_var(e),
                                  .p = tu_var(e),
                                  .rc_children = 99,
                                  .rc_d_wait = 99};
                ev.set_one = (arith){&ev.value, '=', 1};
                ev.twice = (arith){&ev.value, '*', 2};
                push_arith(e, ev.v, &ev.set_one);
                CHECK_OK(vf_engine_push(e, &(vf_op){.fn = ev_parent,
                                                    .arg = &ev,
                                                    .writes = VF_VARS(ev.p)}));
                CHECK_OK(vf_var_wait(e, ev.p, NULL));
                CHECK_OK(vf_var_wait(e, ev.v, NULL));
                CHECK_EQ(ev.rc_children, 0);
                CHECK_EQ(ev.rc_d_wait, 0);
                CHECK_EQ(ev.value, 2);
                CHECK_EQ(ev.seen_by_d, 2);
                uint64_t version;
                CHECK_OK(vf_var_version(e, ev.v, &version));
                CHECK_EQ(version, 2);
            }
            if (bulk > 1)
                CHECK(bulks_of(e) > 0);
            tu_finish_engine(e);
        }
}

/* children_fused_beside_one_that_waits_for_the_parent: P reads a, pushes
 * C1 (writes b: 1) and C2 (writes a: 2), then waits on b. */
typedef struct sibling_fuse {
    vf_var a, b;
    long a_val, b_val;
    arith set_a, set_b; /* C2's and C1's */
    int rc;
    long b_seen, a_seen_in_p;
} sibling_fuse;

static int sf_parent(vf_run *run, void *arg)
{
    sibling_fuse *sf = arg;
    vf_engine *e = vf_run_engine(run);
    push_arith(e, sf->b, &sf->set_b);
    push_arith(e, sf->a, &sf->set_a);
    sf->rc = vf_var_wait(e, sf->b, NULL);
    sf->b_seen = sf->b_val;
    sf->a_seen_in_p = sf->a_val; /* C2 waits for P: not yet written */
    return 0;
}

/* A child that waits for its parent's end (it writes a var the parent
 * reads) is pushed alone, not fused with its siblings: fused, the batch
 * waited for the parent, and the parent's wait on a sibling's var got
 * VF_EDEADLK where the ops alone give 0 (found by the second reviewer of
 * the batch's early release). */
TEST_CASE(children_fused_beside_one_that_waits_for_the_parent)
{
    for (int workers = 1; workers <= 2; workers++)
        for (int bulk = 1; bulk <= 64; bulk *= 8) {
            vf_engine *e = bulk_engine(workers, bulk);
            for (int round = 0; round < 20; round++) {
                sibling_fuse sf = {.a = tu_var(e), .b = tu_var(e), .rc = 99};
                sf.set_b = (arith){&sf.b_val, '=', 1};
                sf.set_a = (arith){&sf.a_val, '=', 2};
                vf_var p = tu_var(e);
                CHECK_OK(vf_engine_push(e, &(vf_op){.fn = sf_parent,
                                                    .arg = &sf,
                                                    .reads = VF_VARS(sf.a),
                                                    .writes = VF_VARS(p)}));
                CHECK_OK(vf_engine_wait_all(e, NULL));
                CHECK_EQ(sf.rc, 0);
                CHECK_EQ(sf.b_seen, 1);
                CHECK_EQ(sf.a_seen_in_p, 0);
                CHECK_EQ(sf.a_val, 2);
            }
            tu_finish_engine(e);
        }
}

/* delete_racing_a_batch: two threads look one address up with vf_var_of,
 * push an op on its var (bulked) and now and then destroy it. */
typedef struct racing_delete {
    vf_engine *e;
    long cell;
    double until;
    atomic_long accepted, ran, stale;
} racing_delete;

static int racing_inc(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((racing_delete *)arg)->ran, 1);
    return 0;
}

static void racing_done(void *arg, int status)
{
    if (status == VF_ESTALE)
        atomic_fetch_add(&((racing_delete *)arg)->stale, 1);
}

static void *racing_pusher(void *arg)
{
    racing_delete *t = arg;
    tu_rng r = tu_rng_make((uint64_t)(uintptr_t)&r);
    CHECK_OK(vf_bulk_set_size(t->e, 8));
    while (tu_now() < t->until) {
        vf_var v;
        if (vf_var_of(t->e, &t->cell, &v) != 0)
            continue;
        if (tu_below(&r, 8) == 0)
            (void)vf_var_destroy(t->e, v, NULL, NULL); /* maybe twice */
        else if (vf_engine_push(t->e, &(vf_op){.fn = racing_inc,
                                               .arg = t,
                                               .done = racing_done,
                                               .writes = VF_VARS(v)}) == 0)
            atomic_fetch_add(&t->accepted, 1);
    }
    return NULL;
}

/* A push that joined a batch returned 0 on a live var; a destroy of the
 * var on another thread came after it, and every such op runs. The
 * destroy flushed every batch and then queued its delete, and a push in
 * between joined a batch that was pushed behind the delete: its op failed
 * with VF_ESTALE (found trying vf_var_of from two threads with
 * VF_BULK_SIZE as a user: hundreds of ops in 2 s). The delete now has a
 * batch that holds the var pushed first, under the lock that marks it. */
TEST_CASE(delete_racing_a_batch)
{
    static racing_delete t;
    memset(&t, 0, sizeof t);
    CHECK_OK(vf_engine_create(&t.e, &pooled));
    t.until = tu_now() + 1.0;
    pthread_t a = tu_thread_start(racing_pusher, &t);
    pthread_t b = tu_thread_start(racing_pusher, &t);
    tu_thread_join(a);
    tu_thread_join(b);
    CHECK_OK(vf_engine_wait_all(t.e, NULL));
    CHECK_EQ(atomic_load(&t.stale), 0);
    CHECK_EQ(atomic_load(&t.ran), atomic_load(&t.accepted));
    CHECK(atomic_load(&t.accepted) > 0);
    CHECK_OK(vf_engine_destroy(t.e));
}

/* --- children of a batched op, before the batch's later ops -------------
 *
 * An op of a batch whose child (or grandchild) must come before a later
 * op of the batch: unbulked, the child goes behind its parent, ahead of
 * the later op pushed before it in time; the fused op held the var for
 * the later op, so the child ran after the whole batch (x = 22 where the
 * ops alone give 12), and a wait for it got VF_EDEADLK. An environment
 * variable (VF_BULK_SIZE) changed what the program computed: found as 29
 * seeds in 30 of a nested-push fuzzer's bulk runs differing from the
 * serial program. The batch now ends after the running op and its later
 * ops go on as a fused op of their own behind the child (bulk_op.c:
 * split_after), and holds only what its running op needs. */

typedef struct later_op {
    vf_engine *e;
    vf_var a, p, y;
    long a_val;
    arith set_one, twice, add_ten;
    int rc_children;
    long seen;
    atomic_int grandchild_queued;
} later_op;

static vf_engine *bulk_engine_of(vf_engine_type type, int workers, int bulk)
{
    return tu_engine(&(tu_kind){.name = "bulk",
                                .cfg = {.type = type,
                                        .cpu_workers = workers,
                                        .gpu_workers = 1,
                                        .bulk_size = bulk}});
}

/* P: a = 1, then a child doubles a. */
static int lo_set_and_double(vf_run *run, void *arg)
{
    later_op *lo = arg;
    lo->a_val = 1;
    push_arith(vf_run_engine(run), lo->a, &lo->twice);
    return 0;
}

TEST_CASE(child_before_a_later_op_of_its_batch)
{
    vf_engine_type types[] = {VF_ENGINE_POOLED, VF_ENGINE_PERDEVICE};
    for (int t = 0; t < 2; t++)
        for (int workers = 1; workers <= 2; workers++)
            for (int bulk = 2; bulk <= 8; bulk *= 4) {
                vf_engine *e = bulk_engine_of(types[t], workers, bulk);
                for (int round = 0; round < 40; round++) {
                    later_op lo = {.a = tu_var(e)};
                    lo.twice = (arith){&lo.a_val, '*', 2};
                    lo.add_ten = (arith){&lo.a_val, '+', 10};
                    CHECK_OK(
                        vf_engine_push(e, &(vf_op){.fn = lo_set_and_double,
                                                   .arg = &lo,
                                                   .writes = VF_VARS(lo.a)}));
                    push_arith(e, lo.a, &lo.add_ten);
                    CHECK_OK(vf_var_wait(e, lo.a, NULL));
                    CHECK_EQ(lo.a_val, 12); /* 1, 2, 12: not 1, 11, 22 */
                    uint64_t version;
                    CHECK_OK(vf_var_version(e, lo.a, &version));
                    CHECK_EQ(version, 3);
                }
                CHECK(bulks_of(e) > 0);
                tu_finish_engine(e);
            }
}

/* P (writes p) pushes a child that doubles a, which only a later op of
 * its batch (a += 10) uses, and waits for it. */
static int lo_wait_for_double(vf_run *run, void *arg)
{
    later_op *lo = arg;
    push_arith(vf_run_engine(run), lo->a, &lo->twice);
    lo->rc_children = vf_run_wait_children(run, NULL);
    return 0;
}

/* The wait finishes, as unbulked: P does not hold a, so the child takes
 * its place at its push, behind the later op (pushed before it in time),
 * which runs first: (1 + 10) * 2. */
TEST_CASE(wait_for_a_child_on_a_later_ops_var)
{
    for (int workers = 1; workers <= 2; workers++) {
        vf_engine *e = bulk_engine_of(VF_ENGINE_POOLED, workers, 8);
        for (int round = 0; round < 40; round++) {
            later_op lo = {
                .a = tu_var(e), .p = tu_var(e), .a_val = 1, .rc_children = 99};
            lo.twice = (arith){&lo.a_val, '*', 2};
            lo.add_ten = (arith){&lo.a_val, '+', 10};
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = lo_wait_for_double,
                                                .arg = &lo,
                                                .writes = VF_VARS(lo.p)}));
            push_arith(e, lo.a, &lo.add_ten);
            CHECK_OK(vf_engine_wait_all(e, NULL));
            CHECK_EQ(lo.rc_children, 0); /* was VF_EDEADLK */
            CHECK_EQ(lo.a_val, 22);
        }
        tu_finish_engine(e);
    }
}

/* A child reading a var its parent reads, which a later op of the batch
 * writes. */
static int lo_read_a(vf_run *run, void *arg)
{
    (void)run;
    later_op *lo = arg;
    lo->seen = lo->a_val;
    return 0;
}

static void push_read_a(vf_engine *e, later_op *lo)
{
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = lo_read_a,
                                        .arg = lo,
                                        .reads = VF_VARS(lo->a),
                                        .name = "reader"}));
}

static int lo_read_child_and_wait(vf_run *run, void *arg)
{
    later_op *lo = arg;
    push_read_a(vf_run_engine(run), lo);
    lo->rc_children = vf_run_wait_children(run, NULL);
    return 0;
}

/* It runs beside its parent's read, before the later write, as beside
 * the parent alone: it sees 5, and the wait finishes (was VF_EDEADLK: the
 * fused op held a to write). */
TEST_CASE(child_reads_beside_its_batched_parent)
{
    for (int workers = 1; workers <= 2; workers++) {
        vf_engine *e = bulk_engine_of(VF_ENGINE_POOLED, workers, 8);
        for (int round = 0; round < 40; round++) {
            later_op lo = {
                .a = tu_var(e), .a_val = 5, .rc_children = 99, .seen = -1};
            lo.add_ten = (arith){&lo.a_val, '+', 10};
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = lo_read_child_and_wait,
                                                .arg = &lo,
                                                .reads = VF_VARS(lo.a)}));
            push_arith(e, lo.a, &lo.add_ten);
            CHECK_OK(vf_var_wait(e, lo.a, NULL));
            CHECK_EQ(lo.rc_children, 0);
            CHECK_EQ(lo.seen, 5);
            CHECK_EQ(lo.a_val, 15);
        }
        tu_finish_engine(e);
    }
}

/* P reads a, pushes a reading child into its worker's batch and returns
 * without waiting (after a pause in which an idle worker may push that
 * batch); the program's thread pushed a write of a after P, unbulked. */
static int lo_read_child_later(vf_run *run, void *arg)
{
    push_read_a(vf_run_engine(run), arg);
    usleep(3000);
    return 0;
}

/* The child comes before the write, as pushed alone it would (beside its
 * parent's read). Its batch was pushed by an idle worker, which did not
 * know the parent and queued it behind the write (it saw 15, not 5), or
 * after the parent's end, when the write had the var (found by the
 * nested-push fuzzer). Now the batch knows its parent, and the parent's
 * run pushes it at its end. */
TEST_CASE(children_batch_of_a_running_parent)
{
    vf_engine *e = bulk_engine_of(VF_ENGINE_POOLED, 2, 8);
    CHECK_EQ(vf_bulk_set_size(e, 0), 8); /* this thread's pushes go alone */
    for (int round = 0; round < 20; round++) {
        later_op lo = {.a = tu_var(e), .a_val = 5, .seen = -1};
        lo.add_ten = (arith){&lo.a_val, '+', 10};
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = lo_read_child_later,
                                            .arg = &lo,
                                            .reads = VF_VARS(lo.a)}));
        push_arith(e, lo.a, &lo.add_ten);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(lo.seen, 5);
        CHECK_EQ(lo.a_val, 15);
    }
    tu_finish_engine(e);
}

/* C1 (pushed by P, run on the other worker) pushes P's grandchild, which
 * doubles a. */
static int lo_push_grandchild(vf_run *run, void *arg)
{
    later_op *lo = arg;
    push_arith(vf_run_engine(run), lo->a, &lo->twice);
    atomic_store(&lo->grandchild_queued, 1);
    return 0;
}

/* P: a = 1, pushes C1 on a var of its own and waits (2 s at most) until
 * C1 has pushed the grandchild, without returning. */
static int lo_set_and_wait_for_grandchild(vf_run *run, void *arg)
{
    later_op *lo = arg;
    lo->a_val = 1;
    CHECK_OK(
        vf_engine_push(vf_run_engine(run), &(vf_op){.fn = lo_push_grandchild,
                                                    .arg = lo,
                                                    .writes = VF_VARS(lo->y)}));
    double until = tu_now() + 2.0;
    while (!atomic_load(&lo->grandchild_queued) && tu_now() < until)
        usleep(1000);
    return 0;
}

/* A grandchild pushed on another thread while its batched ancestor runs
 * goes behind the batch, ahead of the later op, as behind the ancestor
 * alone: the batch ends after that ancestor, and the grandchild runs
 * first (12; it was 22). */
TEST_CASE(grandchild_before_a_later_op_of_the_batch)
{
    vf_engine *e = bulk_engine_of(VF_ENGINE_POOLED, 2, 0);
    CHECK_EQ(vf_bulk_set_size(e, 8), 0); /* this thread's pushes are fused */
    for (int round = 0; round < 20; round++) {
        later_op lo = {.a = tu_var(e), .y = tu_var(e)};
        lo.twice = (arith){&lo.a_val, '*', 2};
        lo.add_ten = (arith){&lo.a_val, '+', 10};
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = lo_set_and_wait_for_grandchild,
                                       .arg = &lo,
                                       .writes = VF_VARS(lo.a)}));
        push_arith(e, lo.a, &lo.add_ten);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK(atomic_load(&lo.grandchild_queued));
        CHECK_EQ(lo.a_val, 12);
    }
    CHECK(bulks_of(e) > 0);
    tu_finish_engine(e);
}

/* --- found by the second reviewer of the batch split ------------------- */

/* vf_bulk_set_size(e, 0) before a thread's first push, on an engine whose
 * config.bulk_size is not 0: the thread's pushes go alone. It bulked
 * anyway (the 0 was not kept: the thread had no state yet). */
TEST_CASE(set_size_zero_before_the_first_push)
{
    vf_engine *e = bulk_engine_of(VF_ENGINE_POOLED, 2, 8);
    CHECK_EQ(vf_bulk_set_size(e, 0), 8);
    vf_var v = tu_var(e);
    long x = 0;
    arith inc = {&x, '+', 1};
    for (int i = 0; i < 20; i++)
        push_arith(e, v, &inc);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(x, 20);
    CHECK_EQ(bulks_of(e), 0);
    CHECK_EQ(vf_bulk_set_size(e, 0), 0);
    tu_finish_engine(e);
}

/* G (writes w, and y with `cycle`) pushes P (on a var of its own), which
 * pushes c1, c2 as one batch and then c3, all writing w (with `cycle`, c1
 * and c2 read y, c3 writes it): each goes ahead behind G. c1 pushes a
 * child on another var and waits for it, so the batch splits after c1. */
typedef struct sibling_rest {
    vf_var w, y, p, q;
    long w_val, q_val;
    bool cycle;
    atomic_int p_done;
} sibling_rest;

static sibling_rest sr;

static int sr_k(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    sr.q_val++;
    return 0;
}

static int sr_c1(vf_run *run, void *arg)
{
    (void)arg;
    sr.w_val = sr.w_val * 10 + 2;
    CHECK_OK(vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = sr_k, .writes = VF_VARS(sr.q)}));
    CHECK_OK(vf_run_wait_children(run, NULL));
    return 0;
}

static int sr_c2(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    sr.w_val = sr.w_val * 10 + 4;
    return 0;
}

static int sr_c3(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    sr.w_val = sr.w_val * 10 + 5;
    return 0;
}

static int sr_p(vf_run *run, void *arg)
{
    (void)arg;
    vf_engine *e = vf_run_engine(run);
    vf_var wy[2] = {sr.w, sr.y};
    vf_var_list none = {NULL, 0}, y = {&sr.y, 1};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = sr_c1,
                                        .reads = sr.cycle ? y : none,
                                        .writes = VF_VARS(sr.w)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = sr_c2,
                                        .reads = sr.cycle ? y : none,
                                        .writes = VF_VARS(sr.w)}));
    CHECK_OK(vf_bulk_flush(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = sr_c3, .writes = {wy, sr.cycle ? 2 : 1}}));
    CHECK_OK(vf_bulk_flush(e));
    atomic_store(&sr.p_done, 1);
    return 0;
}

static int sr_g(vf_run *run, void *arg)
{
    (void)arg;
    sr.w_val = 1;
    CHECK_OK(vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = sr_p, .writes = VF_VARS(sr.p)}));
    double until = tu_now() + 2.0;
    while (!atomic_load(&sr.p_done) && tu_now() < until)
        usleep(100);
    return 0;
}

/* The split's later op (c2) stays before c3, its later sibling queued
 * behind the batch: 1, 12, 124, 1245. It went behind every op that had
 * gone ahead there, c3 included: 1254, and with `cycle` each waited for
 * the other on one var and the other (a hang). */
TEST_CASE(split_rest_stays_before_a_later_sibling)
{
    for (int cycle = 0; cycle < 2; cycle++) {
        vf_engine *e = bulk_engine_of(VF_ENGINE_POOLED, 2, 2);
        for (int round = 0; round < 10; round++) {
            memset(&sr, 0, sizeof sr);
            sr.cycle = cycle;
            sr.w = tu_var(e);
            sr.y = tu_var(e);
            sr.p = tu_var(e);
            sr.q = tu_var(e);
            vf_var wy[2] = {sr.w, sr.y};
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = sr_g, .writes = {wy, cycle ? 2 : 1}}));
            CHECK_OK(vf_engine_wait_all_timed(e, 10000, NULL));
            CHECK_EQ(sr.w_val, 1245);
        }
        tu_finish_engine(e);
    }
}

/* item1 (reads x, writes a: a = 1) of a batch [item0, item1, item2] pushes
 * c (on z) to the other worker, whose child g (writes a: doubles it) sits
 * in that worker's batch while item1 runs, and a reading child c2 that
 * holds the batch to reading x; item2 (reads x, writes a) adds 10. */
typedef struct late_grandchild {
    vf_var x, a, z;
    long x_val, a_val;
    atomic_int g_pushed;
    int c2_saw;
} late_grandchild;

static late_grandchild lg;

static int lg_item0(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    lg.x_val = 5;
    return 0;
}

static int lg_g(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    lg.a_val *= 2;
    return 0;
}

static int lg_c2(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    lg.c2_saw = (int)lg.x_val;
    return 0;
}

static int lg_c(vf_run *run, void *arg)
{
    (void)arg;
    CHECK_OK(vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = lg_g, .writes = VF_VARS(lg.a)}));
    atomic_store(&lg.g_pushed, 1);
    usleep(2000); /* g sits in this worker's batch meanwhile */
    (void)vf_run_wait_children(run, NULL); /* VF_EDEADLK: g writes what
                                              c's parent writes */
    return 0;
}

static int lg_item1(vf_run *run, void *arg)
{
    (void)arg;
    vf_engine *e = vf_run_engine(run);
    lg.a_val = 1;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = lg_c, .writes = VF_VARS(lg.z)}));
    CHECK_OK(vf_bulk_flush(e)); /* c goes now, to the other worker */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = lg_c2, .reads = VF_VARS(lg.x)}));
    double until = tu_now() + 2.0; /* g is pushed while item1 runs */
    while (!atomic_load(&lg.g_pushed) && tu_now() < until)
        usleep(100);
    return 0;
}

static int lg_item2(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    lg.a_val += 10;
    return 0;
}

/* g, pushed while its ancestor item1 runs, goes before item2, as behind
 * item1 alone: 12 (a push that goes ahead behind an ancestor is not
 * batched). It was batched and pushed only after item1's end, behind
 * item2: 22, with the items batched (the program's thread bulks) or not.
 * Under TSan, the batch's hold on x becoming a read (c2's push) raced the
 * look at the batch's vars of g's placement on the other thread. */
TEST_CASE(grandchild_in_another_threads_batch)
{
    for (int round = 0; round < 20; round++) {
        vf_engine *e = bulk_engine_of(VF_ENGINE_POOLED, 2, 3);
        if (round % 2)
            CHECK_EQ(vf_bulk_set_size(e, 0), 3); /* items alone */
        memset(&lg, 0, sizeof lg);
        lg.x = tu_var(e);
        lg.a = tu_var(e);
        lg.z = tu_var(e);
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = lg_item0, .writes = VF_VARS(lg.x)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = lg_item1,
                                            .reads = VF_VARS(lg.x),
                                            .writes = VF_VARS(lg.a)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = lg_item2,
                                            .reads = VF_VARS(lg.x),
                                            .writes = VF_VARS(lg.a)}));
        CHECK_OK(vf_engine_wait_all_timed(e, 10000, NULL));
        CHECK(atomic_load(&lg.g_pushed));
        CHECK_EQ(lg.c2_saw, 5);
        CHECK_EQ(lg.a_val, 12);
        tu_finish_engine(e);
    }
}

/* An op of a batch that reads v itself waits on v for nothing, as alone
 * (varflow.h: vf_var_wait from inside an op that reads v), whatever is
 * queued on v behind its batch: a later op of the batch that writes v made
 * the batch hold v to write, and a read or a write queued behind it (here
 * the same thread's) got VF_EDEADLK, "waits on a variable it writes
 * itself" (found trying waits in bulked ops as a user). */
typedef struct reader_waits {
    vf_var v;
    int rc;
    char detail[256];
    tu_gate *go; /* or NULL: wait at once */
} reader_waits;

static int wait_on_what_i_read(vf_run *run, void *arg)
{
    reader_waits *r = arg;
    if (r->go != NULL)
        CHECK(tu_gate_wait(r->go, TU_TIMEOUT));
    r->rc = vf_var_wait(vf_run_engine(run), r->v, NULL);
    snprintf(r->detail, sizeof r->detail, "%s", vf_error_detail());
    return 0;
}

TEST_CASE(op_of_a_batch_waits_on_a_var_it_reads)
{
    for (int k = 1; k < TU_NKINDS; k++) {
        for (int mode = 0; mode < 3; mode++) {
            /* 0: a later op writes v, a read queued behind; 1: a later op
             * writes v, a write behind; 2: every op reads v, a write
             * behind. */
            check_context_ = tu_kinds[k].name;
            vf_engine *e = tu_engine(&tu_kinds[k]);
            vf_var v = tu_var(e), u = tu_var(e), w = tu_var(e);
            reader_waits r = {.v = v, .rc = -1};
            CHECK(vf_bulk_set_size(e, 8) >= 0);
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_on_what_i_read,
                                                .arg = &r,
                                                .reads = VF_VARS(v),
                                                .writes = VF_VARS(u)}));
            vf_var vs[1] = {v}, ws[1] = {w};
            vf_var_list just_v = {vs, 1}, just_w = {ws, 1};
            vf_op later = {.fn = tu_nop};
            if (mode < 2)
                later.writes = just_v;
            else
                later.reads = just_v;
            CHECK_OK(vf_engine_push(e, &later));
            CHECK_OK(vf_bulk_flush(e));
            vf_op behind = {.fn = tu_nop};
            if (mode == 0) {
                behind.reads = just_v;
                behind.writes = just_w;
            } else {
                behind.writes = just_v;
            }
            CHECK_OK(vf_engine_push(e, &behind));
            CHECK_OK(vf_engine_wait_all(e, NULL));
            if (r.rc != 0)
                CHECK_REPORT_("mode %d: the wait returned %s (%s)", mode,
                              vf_error_name(r.rc), vf_error_detail());
            tu_finish_engine(e);
        }
        /* One that does not use v, a write of v queued behind: what the
         * header says (do not bulk such ops), and the detail says so, not
         * "waits on a variable it writes itself". */
        vf_engine *e = tu_engine(&tu_kinds[k]);
        vf_var v = tu_var(e), u = tu_var(e);
        tu_gate go;
        tu_gate_init(&go);
        reader_waits r = {.v = v, .rc = -1, .go = &go};
        CHECK(vf_bulk_set_size(e, 8) >= 0);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_on_what_i_read,
                                            .arg = &r,
                                            .writes = VF_VARS(u)}));
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}));
        CHECK_OK(vf_bulk_flush(e));
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}));
        tu_gate_open(&go); /* the write is queued behind the batch */
        CHECK_OK(vf_engine_wait_all(e, NULL));
        tu_gate_destroy(&go);
        CHECK_ERR(r.rc, VF_EDEADLK);
        if (strstr(r.detail, "a later op of its batch writes") == NULL)
            CHECK_REPORT_("the detail: %s", r.detail);
        tu_finish_engine(e);
    }
    check_context_ = NULL;
}

/* An op of a batch waiting on a var it does not name waits for the writes
 * pushed before it only, as alone: its batch [A writes X; B writes Y, waits
 * on X], then, pushed after the batch, D reads Y and writes X (mode 0); or
 * [B reads Y, waits on X], then C writes Y and D reads Y and writes X
 * (mode 1). B waits once D is queued. Its marker went to the end of X's
 * queue, behind D, which waits for B's batch: VF_EDEADLK, 100 runs in 100
 * (found by a user tester; GUIDE: "finds it written, as alone"). */
TEST_CASE(op_of_a_batch_waits_for_no_later_write)
{
    for (int k = 1; k < TU_NKINDS; k++) {
        for (int mode = 0; mode < 2; mode++) {
            check_context_ = tu_kinds[k].name;
            vf_engine *e = tu_engine(&tu_kinds[k]);
            vf_var x = tu_var(e), y = tu_var(e);
            tu_gate go;
            tu_gate_init(&go);
            reader_waits r = {.v = x, .rc = -1, .go = &go};
            vf_var ys[1] = {y}, xs[1] = {x};
            vf_var_list just_y = {ys, 1}, just_x = {xs, 1};
            CHECK(vf_bulk_set_size(e, 64) >= 0);
            if (mode == 0) {
                CHECK_OK(vf_engine_push(
                    e, &(vf_op){.fn = tu_nop, .writes = just_x}));
                CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_on_what_i_read,
                                                    .arg = &r,
                                                    .writes = just_y}));
            } else {
                CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_on_what_i_read,
                                                    .arg = &r,
                                                    .reads = just_y}));
            }
            CHECK_OK(vf_bulk_flush(e));
            if (mode == 1)
                CHECK_OK(vf_engine_push(
                    e, &(vf_op){.fn = tu_nop, .writes = just_y}));
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = tu_nop, .reads = just_y, .writes = just_x}));
            CHECK_OK(vf_bulk_flush(e));
            tu_gate_open(&go); /* D is queued behind the batch */
            CHECK_OK(vf_engine_wait_all(e, NULL));
            if (r.rc != 0)
                CHECK_REPORT_("mode %d: the wait returned %s (%s)", mode,
                              vf_error_name(r.rc), r.detail);
            tu_gate_destroy(&go);
            tu_finish_engine(e);
        }
    }
    check_context_ = NULL;
}

/* vf_stats.pending counts bulked pushes as their fused op (varflow.h):
 * none while the batch is open, one from its push until it ends (a user
 * tester read 1 and 2 where 6 ops were pushed, against the header's
 * "pushed and not yet finished"). The batch's ops read what a held op
 * writes, so nothing moves while the counts are read. */
static int held_until_gate(vf_run *run, void *arg)
{
    (void)run;
    CHECK(tu_gate_wait((tu_gate *)arg, TU_TIMEOUT));
    return 0;
}

TEST_CASE(pending_counts_a_batch_as_one)
{
    vf_engine *e = tu_engine(&tu_kinds[2]); /* pooled, 2 workers */
    vf_var v = tu_var(e);
    tu_gate go;
    tu_gate_init(&go);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = held_until_gate, .arg = &go, .writes = VF_VARS(v)}));
    CHECK(vf_bulk_set_size(e, 64) >= 0);
    for (int i = 0; i < 5; i++)
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .reads = VF_VARS(v)}));
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 1); /* the held op; the batch is open */
    CHECK_OK(vf_bulk_flush(e));
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 2); /* and the batch, as one */
    CHECK_EQ(st.bulks, 1);
    CHECK_EQ(st.bulked, 5);
    tu_gate_open(&go);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 0);
    CHECK_EQ(st.completed, 6);
    tu_gate_destroy(&go);
    tu_finish_engine(e);
}

TEST_MAIN("test_bulk", 120)

/* The async op Q writes r; the sync op C (no var of Q's) and Q's function,
 * whichever comes second, complete Q; R reads r. Fused, C and R would make
 * one op that waits for r, so for Q, whose completion is C's. */
typedef struct second_completes {
    vf_var r, out;
    long r_value, out_value;
    atomic_int arrived;
    vf_completion done;
} second_completes;

static void sc_async(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    second_completes *t = arg;
    t->r_value += 40;
    t->done = done;
    if (atomic_exchange(&t->arrived, 1) == 1) /* C came first */
        CHECK_OK(vf_completion_finish(done, 0, NULL));
}

static int sc_complete(vf_run *run, void *arg)
{
    (void)run;
    second_completes *t = arg;
    if (atomic_exchange(&t->arrived, 1) == 1) /* Q's function came first */
        return vf_completion_finish(t->done, 0, NULL);
    return 0;
}

static int sc_read(vf_run *run, void *arg)
{
    (void)run;
    second_completes *t = arg;
    t->out_value = t->r_value + 1;
    return 0;
}

static void sc_push_c_and_r(vf_engine *e, second_completes *t)
{
    CHECK_OK(vf_engine_push(
        e,
        &(vf_op){.fn = sc_complete, .arg = t, .writes = VF_VARS(tu_var(e))}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = sc_read,
                                        .arg = t,
                                        .reads = VF_VARS(t->r),
                                        .writes = VF_VARS(t->out)}));
}

/* A stop holds Q, C and R: Q was counted unfinished only once the start
 * pushed it, so C and R were fused behind it, and the program hung
 * (found by a reviewer of the bulk code; fails without). */
TEST_KIND_CASE(async_held_by_a_stop_fuses_nothing_behind_it, k)
{
    if (!k->threaded) /* the naive engine ignores the bulk size */
        return;
    vf_engine *e = tu_engine(k);
    second_completes t = {.r = tu_var(e), .out = tu_var(e), .r_value = 2};
    CHECK_OK(vf_bulk_set_size(e, 8));
    CHECK_OK(vf_engine_stop(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.async_fn = sc_async, .arg = &t, .writes = VF_VARS(t.r)}));
    sc_push_c_and_r(e, &t);
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_var_wait_timed(e, t.out, 10000, NULL));
    CHECK_EQ(t.out_value, 43);
    CHECK_EQ(bulks_of(e), 0);
    tu_finish_engine(e);
}

/* How P (in a batch [P, C, R]) brings Q, async on r, ahead of R: as its
 * child, after a sync child on r, or as that sync child's child. */
enum { Q_CHILD, Q_SECOND_CHILD, Q_GRANDCHILD, Q_SHAPES };
typedef struct q_shape {
    second_completes *t;
    int shape;
} q_shape;

static int sc_push_q(vf_run *run, void *arg)
{
    second_completes *t = arg;
    return vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.async_fn = sc_async, .arg = t, .writes = VF_VARS(t->r)});
}

static int sc_p(vf_run *run, void *arg)
{
    q_shape *q = arg;
    q->t->r_value = 2;
    vf_engine *e = vf_run_engine(run);
    if (q->shape == Q_CHILD)
        return sc_push_q(run, q->t);
    vf_op x = {.fn = q->shape == Q_GRANDCHILD ? sc_push_q : tu_nop,
               .arg = q->t,
               .writes = VF_VARS(q->t->r)};
    int rc = vf_engine_push(e, &x);
    if (rc == 0 && q->shape == Q_SECOND_CHILD)
        rc = sc_push_q(run, q->t);
    return rc;
}

/* A batch [P, C, R]: P writes r and brings Q ahead of R. The batch ends
 * after P, and its later items went on fused, behind Q on r: C waited
 * for Q, whose completion is C's, and the program hung (found by a
 * reviewer of the bulk code for Q_CHILD, by the next for the other two,
 * where the split came before Q; each fails without). Each goes alone
 * now, as pushed unbulked. */
TEST_KIND_CASE(an_async_child_splits_the_batch_op_by_op, k)
{
    if (!k->threaded)
        return;
    for (int shape = 0; shape < Q_SHAPES; shape++) {
        vf_engine *e = tu_engine(k);
        second_completes t = {.r = tu_var(e), .out = tu_var(e)};
        q_shape q = {&t, shape};
        CHECK_OK(vf_bulk_set_size(e, 8));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = sc_p, .arg = &q, .writes = VF_VARS(t.r)}));
        sc_push_c_and_r(e, &t);
        CHECK_OK(vf_bulk_flush(e));
        if (vf_var_wait_timed(e, t.out, 10000, NULL) != 0) {
            CHECK_REPORT_("shape %d: R never ran: %s", shape,
                          vf_error_detail());
            return; /* C waits for ever: the engine cannot be destroyed */
        }
        CHECK_EQ(t.out_value, 43);
        CHECK_EQ(bulks_of(e), 3); /* the batch, then C and R split off */
        tu_finish_engine(e);
    }
}

/* Another thread's async op, on a var of its own, pushed while this
 * thread's batch is open: in flight as the batch is pushed. */
typedef struct async_elsewhere {
    vf_engine *e;
    vf_var s;
    vf_completion done;
} async_elsewhere;

static void *push_async_elsewhere(void *arg)
{
    async_elsewhere *a = arg;
    CHECK_OK(vf_engine_push(a->e, &(vf_op){.async_fn = tu_keep_completion,
                                           .arg = &a->done,
                                           .writes = VF_VARS(a->s)}));
    return NULL;
}

static int gate_fn(vf_run *run, void *arg)
{
    (void)run;
    return tu_gate_wait(arg, TU_TIMEOUT) ? 0 : -1;
}

/* A batch made while no async op was in flight and pushed while one is
 * goes op by op: pushed fused, where that async op had passed its push on
 * a var a later op of the batch reads, an earlier op completing it waited
 * for it (a hang; found by a reviewer of the bulk code, a race of two
 * threads' pushes; fails without). Its ops go each alone now, the test
 * made under their vars' locks, where such an async op was counted. The
 * workers are kept busy: an idle one would push the batch first. */
TEST_CASE(a_batch_pushed_beside_an_async_op_goes_op_by_op)
{
    for (int k = 1; k <= 2; k++) { /* pooled/1, pooled/2 */
        check_context_ = tu_kinds[k].name;
        vf_engine *e = tu_engine(&tu_kinds[k]);
        tu_gate busy;
        tu_gate_init(&busy);
        for (int w = 0; w < tu_kinds[k].workers; w++)
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = gate_fn, .arg = &busy}));
        async_elsewhere a = {.e = e, .s = tu_var(e)};
        vf_var x = tu_var(e), y = tu_var(e);
        long vx = 0, vy = 0;
        arith add_x = {.x = &vx, .op = '+', .k = 1};
        arith add_y = {.x = &vy, .op = '+', .k = 1};
        CHECK_OK(vf_bulk_set_size(e, 8));
        push_arith(e, x, &add_x);
        push_arith(e, y, &add_y);
        tu_thread_join(tu_thread_start(push_async_elsewhere, &a));
        CHECK_OK(vf_bulk_flush(e));
        CHECK_EQ(bulks_of(e), 0);
        tu_gate_open(&busy);
        CHECK_OK(vf_var_wait(e, x, NULL));
        CHECK_OK(vf_var_wait(e, y, NULL));
        CHECK_EQ(vx, 1);
        CHECK_EQ(vy, 1);
        CHECK_OK(vf_completion_finish(a.done, 0, NULL));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        tu_gate_destroy(&busy);
        tu_finish_engine(e);
    }
    check_context_ = NULL;
}
