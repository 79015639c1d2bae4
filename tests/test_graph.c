/*
 * test_graph: capture and replay (vf_graph_*), on every engine kind.
 *
 * - a launch is the pushes it recorded: random programs of ops over a few
 *   vars (reads, writes, no_skip, failures on chosen steps, a time step
 *   set per launch with vf_graph_set_arg) captured once and launched many
 *   times, waits between launches, against the same pushes on an engine of
 *   the same kind: every op's done status per launch, the values, the
 *   versions, what each wait returned, the stats; replayed (stats.replays)
 *   where the graph allows it, pushed op by op where it holds an async op;
 * - a launch orders against the pushes around it and lets each var go at
 *   its last use: an op pushed after the launch on a var the graph is
 *   done with runs while the graph's op on another var is still held;
 * - launches from several threads and pushes racing them; a launch from
 *   inside an op (its ops are that op's children); operators in a graph
 *   (destroyed after the capture); pointer arguments set per launch;
 * - what a capture may not contain is refused (VF_EINVAL) and the capture
 *   goes on; bad handles and deleted vars as a push reports them; launch,
 *   set_arg and destroy refuse bad input; a var deleted after the capture
 *   refuses the whole launch (VF_ESTALE, nothing runs);
 * - launches queued behind a held op with vf_graph_set_arg between them
 *   run with the arguments they were launched with (copied and pointed);
 * - a node whose function waits for what a later node writes gets
 *   VF_EDEADLK once the other nodes are over, never a hang; for what a
 *   later node that does not depend on it writes, 0 (its launch's hold),
 *   however many launches follow;
 * - a graph destroyed while its launches run is freed after them; graphs
 *   the program never destroyed are freed by the engine's destroy; a
 *   capture whose engine another thread destroyed is over; a
 *   launch on a stopped engine is held and runs at start, in order; a
 *   launch pushed op by op is whole across another thread's destroy; a
 *   var whose delete a stopped engine holds is refused to a bulked push
 *   and a launch.
 */
#include "runner.h"

#include "base/alloc.h" /* vf__testing_fail_alloc */

#include <sched.h>
#include <string.h>
#include <time.h>

#define NV 10     /* vars of a random program */
#define MAXOPS 40 /* ops of a random program */
#define STEPS 24  /* launches */

typedef struct world {
    uint64_t val[NV];
    /* status[step][op] + 1000: what done reported (0: not yet called) */
    atomic_int status[STEPS][MAXOPS];
    atomic_int dones;
} world;

/* A copied argument: the op and the step it runs for (set per launch). */
typedef struct oparg {
    world *w;
    int op, step;
    int fail_step; /* the step on which it fails (-1: never) */
    int nr, nw;
    int r[3], wv[2];
} oparg;

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

static int op_fn(vf_run *run, void *arg)
{
    const oparg *a = arg;
    if (a->step == a->fail_step) {
        vf_run_set_error(run, "op %d fails at step %d", a->op, a->step);
        return 7;
    }
    uint64_t h = mix((uint64_t)a->op, (uint64_t)a->step);
    for (int i = 0; i < a->nr; i++)
        h = mix(h, a->w->val[a->r[i]]);
    for (int i = 0; i < a->nw; i++)
        a->w->val[a->wv[i]] = mix(a->w->val[a->wv[i]], h);
    return 0;
}

static void op_async(vf_run *run, void *arg, vf_completion done)
{
    int rc = op_fn(run, arg);
    CHECK_OK(vf_completion_finish(done, rc, NULL));
}

static void op_done(void *arg, int status)
{
    const oparg *a = arg;
    atomic_store(&a->w->status[a->step][a->op], status + 1000);
    atomic_fetch_add(&a->w->dones, 1);
}

typedef struct program {
    int nops;
    oparg ops[MAXOPS];
    bool no_skip[MAXOPS], async[MAXOPS];
    int priority[MAXOPS];
    int wait_var[STEPS]; /* after launch s: wait on this var (-1: none) */
    bool wait_all[STEPS];
} program;

static void make_program(program *p, tu_rng *r, bool with_async)
{
    memset(p, 0, sizeof *p);
    p->nops = tu_range(r, 5, MAXOPS);
    for (int i = 0; i < p->nops; i++) {
        oparg *a = &p->ops[i];
        a->op = i;
        a->nr = tu_below(r, 4);
        a->nw = tu_below(r, 3);
        for (int k = 0; k < a->nr; k++)
            a->r[k] = tu_below(r, NV);
        for (int k = 0; k < a->nw; k++)
            a->wv[k] = tu_below(r, NV);
        a->fail_step = tu_below(r, 6) == 0 ? tu_below(r, STEPS) : -1;
        p->no_skip[i] = tu_below(r, 8) == 0;
        p->async[i] = with_async && tu_below(r, 6) == 0;
        p->priority[i] = tu_below(r, 5) == 0 ? tu_below(r, 3) : 0;
    }
    for (int s = 0; s < STEPS; s++) {
        p->wait_var[s] = tu_below(r, 3) == 0 ? tu_below(r, NV) : -1;
        p->wait_all[s] = tu_below(r, 7) == 0;
    }
}

static int push_op(vf_engine *e, const program *p, int i, const vf_var *vars,
                   world *w, int step)
{
    oparg a = p->ops[i];
    a.w = w;
    a.step = step;
    vf_var rl[3], wl[2];
    for (int k = 0; k < a.nr; k++)
        rl[k] = vars[a.r[k]];
    for (int k = 0; k < a.nw; k++)
        wl[k] = vars[a.wv[k]];
    vf_op op = {.arg = &a,
                .arg_size = sizeof a,
                .done = op_done,
                .reads = tu_list(rl, a.nr),
                .writes = tu_list(wl, a.nw),
                .no_skip = p->no_skip[i],
                .priority = p->priority[i],
                .name = "graph op"};
    if (p->async[i])
        op.async_fn = op_async;
    else
        op.fn = op_fn;
    return vf_engine_push(e, &op);
}

/* What a run saw after each launch (or each step's pushes). */
typedef struct seen {
    int wait_rc[STEPS], wait_all_rc[STEPS];
    int wait_code[STEPS];
    uint64_t versions[NV];
    vf_stats stats;
} seen;

static void after_step(vf_engine *e, const program *p, const vf_var *vars,
                       int s, seen *out)
{
    vf_error err;
    memset(&err, 0, sizeof err);
    if (p->wait_var[s] >= 0) {
        out->wait_rc[s] = vf_var_wait(e, vars[p->wait_var[s]], &err);
        out->wait_code[s] = out->wait_rc[s] ? err.code : 0;
    }
    if (p->wait_all[s])
        out->wait_all_rc[s] = vf_engine_wait_all(e, NULL);
}

static void finish_run(vf_engine *e, const vf_var *vars, seen *out)
{
    (void)vf_engine_wait_all(e, NULL);
    for (int v = 0; v < NV; v++)
        CHECK_OK(vf_var_version(e, vars[v], &out->versions[v]));
    CHECK_OK(vf_engine_stats(e, &out->stats));
}

/* The program pushed op by op, STEPS times. */
static void run_pushed(const tu_kind *k, const program *p, world *w, seen *out)
{
    vf_engine *e = tu_engine(k);
    vf_var vars[NV];
    for (int v = 0; v < NV; v++)
        vars[v] = tu_var(e);
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < p->nops; i++)
            CHECK_OK(push_op(e, p, i, vars, w, s));
        after_step(e, p, vars, s, out);
    }
    finish_run(e, vars, out);
    CHECK_OK(vf_engine_destroy(e));
}

/* The program captured once and launched STEPS times, each op's step set
 * before each launch. */
static void run_launched(const tu_kind *k, const program *p, world *w,
                         seen *out)
{
    vf_engine *e = tu_engine(k);
    vf_var vars[NV];
    for (int v = 0; v < NV; v++)
        vars[v] = tu_var(e);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    for (int i = 0; i < p->nops; i++)
        CHECK_OK(push_op(e, p, i, vars, w, 0));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    CHECK_EQ(vf_graph_ops(g), p->nops);
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; s > 0 && i < p->nops; i++) {
            oparg a = p->ops[i];
            a.w = w;
            a.step = s;
            CHECK_OK(vf_graph_set_arg(e, g, (size_t)i, &a, sizeof a));
        }
        CHECK_OK(vf_graph_launch(e, g));
        after_step(e, p, vars, s, out);
    }
    finish_run(e, vars, out);
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
}

static void compare(const program *p, const world *a, const world *b,
                    const seen *sa, const seen *sb, int seed)
{
    int diffs = 0;
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < p->nops; i++)
            if (atomic_load(&a->status[s][i]) !=
                    atomic_load(&b->status[s][i]) &&
                diffs++ < 4)
                CHECK_REPORT_("program %d: op %d of step %d: pushed %d, "
                              "launched %d (status + 1000)",
                              seed, i, s, atomic_load(&a->status[s][i]),
                              atomic_load(&b->status[s][i]));
    for (int v = 0; v < NV; v++) {
        if (a->val[v] != b->val[v] && diffs++ < 8)
            CHECK_REPORT_("program %d: var %d's value differs", seed, v);
        if (sa->versions[v] != sb->versions[v] && diffs++ < 8)
            CHECK_REPORT_("program %d: var %d's version: pushed %llu, "
                          "launched %llu",
                          seed, v, (unsigned long long)sa->versions[v],
                          (unsigned long long)sb->versions[v]);
    }
    for (int s = 0; s < STEPS; s++)
        if ((sa->wait_rc[s] != sb->wait_rc[s] ||
             sa->wait_code[s] != sb->wait_code[s] ||
             sa->wait_all_rc[s] != sb->wait_all_rc[s]) &&
            diffs++ < 12)
            CHECK_REPORT_("program %d: the waits after step %d: pushed %d "
                          "(%d) / %d, launched %d (%d) / %d",
                          seed, s, sa->wait_rc[s], sa->wait_code[s],
                          sa->wait_all_rc[s], sb->wait_rc[s], sb->wait_code[s],
                          sb->wait_all_rc[s]);
    CHECK_EQ(sa->stats.ran, sb->stats.ran);
    CHECK_EQ(sa->stats.failed, sb->stats.failed);
    CHECK_EQ(sa->stats.skipped, sb->stats.skipped);
    CHECK_EQ(sa->stats.completed, sb->stats.completed);
    CHECK_EQ(a->dones, (long)p->nops * STEPS);
    CHECK_EQ(b->dones, (long)p->nops * STEPS);
}

static void replay_programs(const tu_kind *k, bool with_async)
{
    int nprog = (int)tu_scaled(30, 6);
    world *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    program *p = calloc(1, sizeof *p);
    seen *sa = calloc(1, sizeof *sa), *sb = calloc(1, sizeof *sb);
    REQUIRE(a && b && p && sa && sb);
    long replays = 0, launches = 0;
    for (int n = 0; n < nprog; n++) {
        tu_rng r = tu_rng_make(check_seed() * 1000 + (uint64_t)n);
        make_program(p, &r, with_async);
        memset(a, 0, sizeof *a);
        memset(b, 0, sizeof *b);
        memset(sa, 0, sizeof *sa);
        memset(sb, 0, sizeof *sb);
        for (int v = 0; v < NV; v++)
            a->val[v] = b->val[v] = (uint64_t)v * 77;
        run_pushed(k, p, a, sa);
        run_launched(k, p, b, sb);
        compare(p, a, b, sa, sb, n);
        CHECK_EQ(sa->stats.launches, 0);
        CHECK_EQ(sb->stats.launches, STEPS);
        bool any_async = false;
        for (int i = 0; i < p->nops; i++)
            any_async |= p->async[i];
        /* Sync CPU ops replay; an async op makes each launch push. */
        CHECK_EQ(sb->stats.replays, any_async ? 0 : STEPS);
        replays += (long)sb->stats.replays;
        launches += (long)sb->stats.launches;
    }
    if (!with_async)
        CHECK_EQ(replays, launches);
    free(a);
    free(b);
    free(p);
    free(sa);
    free(sb);
}

TEST_KIND_CASE(replay_equals_pushing, k)
{
    replay_programs(k, false);
}

TEST_KIND_CASE(launch_by_push_equals_pushing, k)
{
    replay_programs(k, true);
}

/* --- ordering against the pushes around a launch ------------------------- */

typedef struct held {
    tu_gate gate;
    atomic_int ran_a, ran_b, ran_after;
} held;

static int held_op(vf_run *run, void *arg)
{
    (void)run;
    held *h = arg;
    CHECK(tu_gate_wait(&h->gate, TU_TIMEOUT));
    atomic_store(&h->ran_a, 1);
    return 0;
}

static int mark_b(vf_run *run, void *arg)
{
    (void)run;
    held *h = arg;
    atomic_store(&h->ran_b, 1);
    return 0;
}

static int mark_after(vf_run *run, void *arg)
{
    (void)run;
    held *h = arg;
    atomic_store(&h->ran_after, 1);
    return 0;
}

/* The graph writes x (held on a gate) and y; an op pushed after the launch
 * on y runs, and a wait on y returns, while x is still held; one on x
 * waits for the graph's op on x. */
TEST_KIND_CASE(vars_let_go_at_last_use, k)
{
    if (!k->threaded || k->workers < 2)
        return; /* the held op would hold the only worker (or the push) */
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    held h;
    memset(&h, 0, sizeof h);
    tu_gate_init(&h.gate);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = held_op, .arg = &h, .writes = VF_VARS(x)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = mark_b, .arg = &h, .writes = VF_VARS(y)}));
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = mark_after, .arg = &h, .reads = VF_VARS(y)}));
    CHECK_OK(vf_var_wait(e, y, NULL));
    CHECK(tu_wait_flag(&h.ran_after, 1, TU_TIMEOUT));
    CHECK_EQ(atomic_load(&h.ran_b), 1);
    CHECK_EQ(atomic_load(&h.ran_a), 0); /* still held */
    CHECK_EQ(vf_var_wait_timed(e, x, 20, NULL), VF_ETIMEDOUT);
    tu_gate_open(&h.gate);
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(atomic_load(&h.ran_a), 1);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.replays, 1);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
    tu_gate_destroy(&h.gate);
}

/* An op on x pushed before the launch (held on a gate) keeps the graph's
 * ops from starting; one pushed after waits for the graph's last use of
 * x. The values show the order: ((1 * 3) + 5) * 7. */
typedef struct chainv {
    uint64_t v;
    tu_gate *gate;
} chainv;

static int times3(vf_run *run, void *arg)
{
    (void)run;
    chainv *c = arg;
    if (c->gate)
        CHECK(tu_gate_wait(c->gate, TU_TIMEOUT));
    c->v *= 3;
    return 0;
}

static int plus5(vf_run *run, void *arg)
{
    (void)run;
    ((chainv *)arg)->v += 5;
    return 0;
}

static int times7(vf_run *run, void *arg)
{
    (void)run;
    ((chainv *)arg)->v *= 7;
    return 0;
}

TEST_KIND_CASE(launch_ordered_between_pushes, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    tu_gate gate;
    tu_gate_init(&gate);
    chainv c = {1, k->threaded ? &gate : NULL};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = plus5, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_EQ(c.v, 1); /* recorded, not run */
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = times3, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = times7, .arg = &c, .writes = VF_VARS(x)}));
    tu_gate_open(&gate);
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(c.v, (1 * 3 + 5) * 7);
    uint64_t version = 0;
    CHECK_OK(vf_var_version(e, x, &version));
    CHECK_EQ(version, 3);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
    tu_gate_destroy(&gate);
}

/* Another thread bulks, and its open batch holds a var of the graph: the
 * launch still replays (this thread does not bulk), after that batch, as
 * the recorded push would come after it. */
static int twice_plus1(vf_run *run, void *arg)
{
    (void)run;
    chainv *c = arg;
    c->v = c->v * 2 + 1;
    return 0;
}

typedef struct batcher {
    vf_engine *e;
    vf_var x;
    chainv *c;
    tu_gate opened, go;
} batcher;

static void *open_batch(void *arg)
{
    batcher *b = arg;
    CHECK_OK(vf_bulk_set_size(b->e, 100));
    for (int i = 0; i < 3; i++)
        CHECK_OK(vf_engine_push(
            b->e,
            &(vf_op){.fn = twice_plus1, .arg = b->c, .writes = {&b->x, 1}}));
    tu_gate_open(&b->opened);
    CHECK(tu_gate_wait(&b->go, TU_TIMEOUT));
    return NULL;
}

TEST_KIND_CASE(replay_after_other_threads_batches, k)
{
    if (!k->threaded)
        return; /* the naive engine has no batches */
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    chainv c = {0, NULL};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = plus5, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_OK(vf_graph_end(e, &g));
    batcher b = {.e = e, .x = x, .c = &c};
    tu_gate_init(&b.opened);
    tu_gate_init(&b.go);
    pthread_t t = tu_thread_start(open_batch, &b);
    CHECK(tu_gate_wait(&b.opened, TU_TIMEOUT));
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(c.v, ((0 * 2 + 1) * 2 + 1) * 2 + 1 + 5); /* the batch first */
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.replays, 1);
    CHECK_EQ(st.bulked, 3);
    tu_gate_open(&b.go);
    tu_thread_join(t);
    /* This thread bulks: its launch pushes the op, into its batch. */
    CHECK_OK(vf_bulk_set_size(e, 100));
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_bulk_flush(e));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(c.v, 12 + 5);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.launches, 2);
    CHECK_EQ(st.replays, 1);
    CHECK_EQ(st.bulked, 4); /* the launch's op joined this thread's batch */
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
    tu_gate_destroy(&b.opened);
    tu_gate_destroy(&b.go);
}

/* --- threads, nesting, operators, pointer arguments ---------------------- */

typedef struct counter {
    atomic_long n;
    long plain; /* written under the graph's var: no race */
} counter;

static int count_op(vf_run *run, void *arg)
{
    (void)run;
    counter *c = arg;
    c->plain++;
    atomic_fetch_add(&c->n, 1);
    return 0;
}

/* A graph of `n` ops each counting into `c` and writing x. */
static vf_graph *capture_counts(vf_engine *e, vf_var x, counter *c, int n)
{
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    for (int i = 0; i < n; i++)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = count_op, .arg = c, .writes = VF_VARS(x)}));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    return g;
}

typedef struct launcher {
    vf_engine *e;
    vf_graph *g;
    int times;
} launcher;

static void *launch_many(void *arg)
{
    launcher *l = arg;
    for (int i = 0; i < l->times; i++)
        CHECK_OK(vf_graph_launch(l->e, l->g));
    return NULL;
}

/* Two threads launch one graph (a chain of 3 writes to x) while a third
 * pushes ops on x: every op runs once per launch or push, one at a time
 * (`plain` is written without a lock: TSan sees a race if two overlap). */
TEST_KIND_CASE(concurrent_launches, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    counter c;
    memset(&c, 0, sizeof c);
    vf_graph *g = capture_counts(e, x, &c, 3);
    int times = (int)tu_scaled(300, 30);
    launcher l = {e, g, times};
    pthread_t t1 = tu_thread_start(launch_many, &l);
    pthread_t t2 = tu_thread_start(launch_many, &l);
    for (int i = 0; i < times; i++)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(x)}));
    tu_thread_join(t1);
    tu_thread_join(t2);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&c.n), 7L * times);
    CHECK_EQ(c.plain, 7L * times);
    uint64_t version = 0;
    CHECK_OK(vf_var_version(e, x, &version));
    CHECK_EQ(version, 7L * times);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.launches, 2L * times);
    CHECK_EQ(st.replays, 2L * times);
    CHECK_EQ(st.pending, 0);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* --- a stencil's steps handed between workers ---------------------------- */

enum { SW = 4, SSTEPS = 40 };

/* A 1-D stencil of SW columns over SSTEPS steps, two buffers (W9's
 * shape): node (t, i) reads columns i-1..i+1 of step t-1 and writes column
 * i of step t after some busy work, shorter and longer than a worker
 * waits for a node at home (exec.c: node_watched). */
typedef struct stencil {
    uint64_t val[2][SW];
    atomic_int runs[SSTEPS][SW];
    float spin_us[SSTEPS][SW];
} stencil;

typedef struct snode {
    stencil *s;
    int t, i;
} snode;

static uint64_t stencil_value(const uint64_t *prev, int t, int i)
{
    uint64_t h = (uint64_t)t * 1000003u + (uint64_t)i;
    for (int j = i - 1; t > 0 && j <= i + 1; j++)
        if (j >= 0 && j < SW)
            h = h * 31 + prev[j];
    return h;
}

static int stencil_op(vf_run *run, void *arg)
{
    (void)run;
    const snode *n = arg;
    stencil *s = n->s;
    uint64_t v = stencil_value(s->val[(n->t + 1) % 2], n->t, n->i);
    tu_spin_us(s->spin_us[n->t][n->i]);
    s->val[n->t % 2][n->i] = v;
    atomic_fetch_add(&s->runs[n->t][n->i], 1);
    return 0;
}

/* The stencil captured once and launched again and again: each launch's
 * values are the serial loop's, each node ran once. With two workers the
 * columns' homes split them, and every step hands its boundary over: a
 * worker done with its node waits for its next at home (node_watched),
 * which the other worker's node makes ready or not within the wait, or
 * the hand-over sends it (TSan: no race between the two). */
TEST_KIND_CASE(stencil_steps_handed_over, k)
{
    vf_engine *e = tu_engine(k);
    stencil *s = calloc(1, sizeof *s);
    snode *nodes = calloc(SSTEPS * SW, sizeof *nodes);
    REQUIRE(s && nodes);
    tu_rng r = tu_rng_make(check_seed());
    for (int t = 0; t < SSTEPS; t++)
        for (int i = 0; i < SW; i++)
            s->spin_us[t][i] = 0.25f * (float)tu_below(&r, 13); /* 0-3 us */
    vf_var buf[2][SW];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < SW; i++)
            buf[b][i] = tu_var(e);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    for (int t = 0; t < SSTEPS; t++)
        for (int i = 0; i < SW; i++) {
            vf_var in[3];
            int nin = 0;
            for (int j = i - 1; t > 0 && j <= i + 1; j++)
                if (j >= 0 && j < SW)
                    in[nin++] = buf[(t + 1) % 2][j];
            nodes[t * SW + i] = (snode){s, t, i};
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = stencil_op,
                                           .arg = &nodes[t * SW + i],
                                           .reads = {in, nin},
                                           .writes = VF_VARS(buf[t % 2][i])}));
        }
    CHECK_OK(vf_graph_end(e, &g));
    uint64_t want[2][SW] = {{0}};
    int launches = (int)tu_scaled(30, 5);
    for (int l = 0; l < launches; l++) {
        for (int t = 0; t < SSTEPS; t++) { /* the serial loop */
            uint64_t next[SW];
            for (int i = 0; i < SW; i++)
                next[i] = stencil_value(want[(t + 1) % 2], t, i);
            memcpy(want[t % 2], next, sizeof next);
        }
        CHECK_OK(vf_graph_launch(e, g));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK(memcmp(s->val, want, sizeof want) == 0);
        for (int t = 0; t < SSTEPS; t++)
            for (int i = 0; i < SW; i++)
                CHECK_EQ(atomic_exchange(&s->runs[t][i], 0), 1);
    }
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.replays, launches);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
    free(nodes);
    free(s);
}

typedef struct nest {
    vf_engine *e;
    vf_graph *g;
    counter *c;
    int children_rc;
} nest;

static int launch_inside(vf_run *run, void *arg)
{
    nest *n = arg;
    CHECK_OK(vf_graph_launch(n->e, n->g));
    n->children_rc = vf_run_wait_children(run, NULL);
    CHECK_EQ(atomic_load(&n->c->n), 3); /* its children, waited for */
    return 0;
}

/* A launch from inside an op pushes the graph's ops as that op's children
 * (its vf_run_wait_children waits for them). */
TEST_KIND_CASE(launch_inside_an_op, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    counter c;
    memset(&c, 0, sizeof c);
    vf_graph *g = capture_counts(e, x, &c, 3);
    nest n = {e, g, &c, -99};
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = launch_inside, .arg = &n, .writes = VF_VARS(y)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(n.children_rc, 0);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.launches, 1);
    CHECK_EQ(st.replays, 0); /* inside an op: pushed as children */
    CHECK_EQ(st.ran, 4);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* Operators in a graph (a run, a run with its own copied argument),
 * destroyed right after the capture: the graph keeps them; a pointer
 * argument changed per launch (vf_graph_set_arg with size 0). */
typedef struct acc {
    long sum;
} acc;

static int add_arg(vf_run *run, void *arg)
{
    (void)run;
    const long *v = arg;
    acc *a = (acc *)(uintptr_t)v[0];
    a->sum += v[1];
    return 0;
}

static int add_one(vf_run *run, void *arg)
{
    (void)run;
    ((acc *)arg)->sum += 1;
    return 0;
}

TEST_KIND_CASE(operators_and_pointer_args, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    acc a = {0}, b = {0};
    vf_operator *one = NULL, *add = NULL;
    CHECK_OK(vf_operator_create(
        e, &(vf_op){.fn = add_one, .arg = &a, .writes = VF_VARS(x)}, &one));
    CHECK_OK(vf_operator_create(
        e, &(vf_op){.fn = add_arg, .writes = VF_VARS(x)}, &add));
    long ten[2] = {(long)(uintptr_t)&a, 10};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_operator_push(e, one, 0));
    CHECK_OK(vf_operator_push_arg(e, add, 0, ten, sizeof ten));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = add_one, .arg = &a, .writes = VF_VARS(x)}));
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_operator_destroy(e, one));
    CHECK_OK(vf_operator_destroy(e, add));
    ten[1] = 1000; /* copied at capture: no effect */
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(a.sum, 12);
    long hundred[2] = {(long)(uintptr_t)&a, 100};
    CHECK_OK(vf_graph_set_arg(e, g, 1, hundred, sizeof hundred));
    CHECK_OK(vf_graph_set_arg(e, g, 2, &b, 0)); /* the one-shot's pointer */
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(a.sum, 12 + 101);
    CHECK_EQ(b.sum, 1);
    /* Wrong sizes are refused, and change nothing. */
    CHECK_EQ(vf_graph_set_arg(e, g, 1, hundred, 8), VF_EINVAL);
    CHECK_EQ(vf_graph_set_arg(e, g, 1, NULL, sizeof hundred), VF_EINVAL);
    CHECK_EQ(vf_graph_set_arg(e, g, 2, hundred, sizeof hundred), VF_EINVAL);
    CHECK_EQ(vf_graph_set_arg(e, g, 3, &b, 0), VF_EINVAL);
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(a.sum, 12 + 101 + 101);
    CHECK_EQ(b.sum, 2);
    CHECK_OK(vf_graph_destroy(e, g));
    /* An operator made with a copied argument, pushed with it: the op is
     * recorded with that copied argument, which set_arg changes by its
     * size (and each error says what it was recorded with). */
    vf_operator *five = NULL;
    long five_arg[2] = {(long)(uintptr_t)&b, 5};
    CHECK_OK(vf_operator_create(e,
                                &(vf_op){.fn = add_arg,
                                         .arg = five_arg,
                                         .arg_size = sizeof five_arg,
                                         .writes = VF_VARS(x)},
                                &five));
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_operator_push(e, five, 0));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = add_one, .arg = &b, .writes = VF_VARS(x)}));
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_operator_destroy(e, five));
    CHECK_EQ(vf_graph_set_arg(e, g, 0, &b, 0), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "copied argument of 16 bytes; arg_size "
                                    "must be 16, not 0") != NULL);
    CHECK_EQ(vf_graph_set_arg(e, g, 1, &b, 8), VF_EINVAL);
    CHECK(strstr(vf_error_detail(),
                 "a pointer argument; arg_size must be 0, not 8") != NULL);
    CHECK_OK(vf_graph_launch(e, g));
    long seven[2] = {(long)(uintptr_t)&b, 7};
    CHECK_OK(vf_graph_set_arg(e, g, 0, seven, sizeof seven));
    seven[1] = 1000; /* copied by set_arg: no effect */
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(b.sum, 2 + 5 + 1 + 7 + 1);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* --- what a capture refuses, careless input ------------------------------ */

static int try_begin(vf_run *run, void *arg)
{
    (void)run;
    vf_engine *e = arg;
    CHECK_EQ(vf_graph_begin(e), VF_EINVAL); /* not inside an op */
    return 0;
}

TEST_KIND_CASE(capture_refusals, k)
{
    vf_engine *e = tu_engine(k), *other = tu_engine(k);
    vf_var x = tu_var(e), gone = tu_var(e), ox = tu_var(other);
    CHECK_OK(vf_var_destroy(e, gone, NULL, NULL));
    counter c;
    memset(&c, 0, sizeof c);
    CHECK_EQ(vf_graph_end(e, &(vf_graph *){NULL}), VF_EINVAL); /* no capture */
    CHECK_OK(vf_graph_begin(e));
    CHECK_EQ(vf_graph_begin(e), VF_EINVAL);
    CHECK_EQ(vf_graph_begin(other), VF_EINVAL); /* one capture a thread */
    vf_var v;
    CHECK_EQ(vf_var_create(e, &v), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "captures a graph") != NULL);
    CHECK_EQ(vf_var_destroy(e, x, NULL, NULL), VF_EINVAL);
    CHECK_EQ(vf_var_of(e, &c, &v), VF_EINVAL);
    CHECK_EQ(vf_var_wait(e, x, NULL), VF_EINVAL);
    CHECK_EQ(vf_var_wait_timed(e, x, 0, NULL), VF_EINVAL);
    CHECK_EQ(vf_engine_wait_all(e, NULL), VF_EINVAL);
    CHECK_EQ(vf_engine_wait_all_timed(e, 0, NULL), VF_EINVAL);
    CHECK_EQ(vf_engine_stop(e), VF_EINVAL);
    CHECK_EQ(vf_engine_start(e), VF_EINVAL);
    CHECK_EQ(vf_engine_shutdown(e), VF_EINVAL);
    /* Pushes checked as a push checks them. */
    CHECK_EQ(vf_engine_push(e, NULL), VF_EINVAL);
    CHECK_EQ(vf_engine_push(e, &(vf_op){.arg = &c}), VF_EINVAL); /* no fn */
    CHECK_EQ(
        vf_engine_push(
            e, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(gone)}),
        VF_ESTALE);
    CHECK_EQ(vf_engine_push(
                 e, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(ox)}),
             VF_EXDEV);
    CHECK_EQ(vf_engine_push(e, &(vf_op){.fn = count_op,
                                        .arg = NULL,
                                        .arg_size = 8,
                                        .writes = VF_VARS(x)}),
             VF_EINVAL);
    CHECK_EQ(vf_engine_push(e, &(vf_op){.fn = count_op,
                                        .arg = &c,
                                        .nonblocking = true,
                                        .writes = VF_VARS(x)}),
             VF_EINVAL);
    /* Other engines, and the engine's version reads, go on as usual. */
    CHECK_OK(vf_engine_push(
        other, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(ox)}));
    CHECK_OK(vf_engine_wait_all(other, NULL));
    CHECK_EQ(atomic_load(&c.n), 1);
    uint64_t version;
    CHECK_OK(vf_var_version(e, x, &version));
    /* The capture went on: one op recorded. */
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_EQ(vf_graph_end(e, NULL), VF_EINVAL); /* and goes on */
    CHECK_EQ(vf_graph_end(other, &(vf_graph *){NULL}), VF_EINVAL);
    vf_graph *g = NULL;
    CHECK_EQ(vf_graph_launch(e, g), VF_EINVAL);
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_EQ(vf_graph_ops(g), 1);
    CHECK_EQ(atomic_load(&c.n), 1); /* nothing of it ran */
    /* Not from inside an op. */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = try_begin, .arg = e}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    /* Launch, set_arg and destroy on careless input. */
    CHECK_EQ(vf_graph_launch(e, NULL), VF_EINVAL);
    CHECK_EQ(vf_graph_launch(other, g), VF_EXDEV);
    CHECK_EQ(vf_graph_set_arg(other, g, 0, &c, 0), VF_EXDEV);
    CHECK_EQ(vf_graph_destroy(other, g), VF_EXDEV);
    CHECK_EQ(vf_graph_launch(NULL, g), VF_EINVAL);
    CHECK_EQ(vf_graph_set_arg(NULL, g, 0, &c, 0), VF_EINVAL);
    CHECK_EQ(vf_graph_destroy(NULL, g), VF_EINVAL);
    CHECK_EQ(vf_graph_begin(NULL), VF_EINVAL);
    CHECK_EQ(vf_graph_end(NULL, &g), VF_EINVAL);
    CHECK_EQ(vf_graph_set_arg(e, NULL, 0, &c, 0), VF_EINVAL);
    CHECK_EQ(vf_graph_destroy(e, NULL), VF_EINVAL);
    CHECK_EQ(vf_graph_ops(NULL), 0);
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&c.n), 2);
    /* An empty graph launches nothing. */
    vf_graph *empty = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_graph_end(e, &empty));
    CHECK_EQ(vf_graph_ops(empty), 0);
    CHECK_OK(vf_graph_launch(e, empty));
    CHECK_OK(vf_graph_destroy(e, empty));
    /* A var deleted after the capture refuses the whole launch. */
    vf_var y = tu_var(e);
    vf_graph *gy = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = count_op,
                                        .arg = &c,
                                        .writes = VF_VARS(y),
                                        .name = "on y"}));
    CHECK_OK(vf_graph_end(e, &gy));
    CHECK_OK(vf_var_destroy(e, y, NULL, NULL));
    CHECK_EQ(vf_graph_launch(e, gy), VF_ESTALE);
    /* The detail names the recorded op that uses it, not a launch op. */
    if (strstr(vf_error_detail(), "recorded op 1 (op \"on y\")") == NULL ||
        strstr(vf_error_detail(), "a graph launch") != NULL)
        CHECK_REPORT_("detail '%s'", vf_error_detail());
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&c.n), 2); /* not even the op on x */
    CHECK_OK(vf_graph_destroy(e, gy));
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(other));
    tu_finish_engine(e);
}

/* Ops that run on the capturing thread meanwhile are not part of its
 * capture: an op of a naive engine pushed from it runs inside the push,
 * and an op waiting behind an async op runs inside the thread's
 * completion of it (on the naive engine). Their pushes to the capture's
 * engine were recorded into the graph and never run (their `done` never
 * called), their waits refused (found by an auditor of the graphs). */
typedef struct inside_capture {
    vf_engine *e;
    vf_var v;
    vf_completion held;
    atomic_int held_set, child_ran, child_dones, inner_ran;
} inside_capture;

static int ic_child(vf_run *run, void *arg)
{
    (void)run;
    inside_capture *ic = arg;
    atomic_fetch_add(&ic->child_ran, 1);
    return 0;
}

static void ic_child_done(void *arg, int status)
{
    inside_capture *ic = arg;
    CHECK_OK(status);
    atomic_fetch_add(&ic->child_dones, 1);
}

/* Pushes a child to the capture's engine and waits for it, twice (for it
 * as its child, and on its var), and finds no capture of its own. */
static int ic_inner(vf_run *run, void *arg)
{
    inside_capture *ic = arg;
    CHECK(!vf_graph_capturing(ic->e));
    CHECK_EQ(vf_graph_end(ic->e, &(vf_graph *){NULL}), VF_EINVAL);
    CHECK_OK(vf_engine_push(ic->e, &(vf_op){.fn = ic_child,
                                            .arg = ic,
                                            .done = ic_child_done,
                                            .writes = VF_VARS(ic->v),
                                            .name = "child"}));
    if (vf_run_engine(run) == ic->e)
        CHECK_OK(vf_run_wait_children(run, NULL));
    CHECK_OK(vf_var_wait(ic->e, ic->v, NULL));
    CHECK_EQ(atomic_load(&ic->child_ran), atomic_load(&ic->inner_ran) + 1);
    atomic_fetch_add(&ic->inner_ran, 1);
    return 0;
}

static void ic_hold(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    inside_capture *ic = arg;
    ic->held = done;
    atomic_store(&ic->held_set, 1);
}

TEST_KIND_CASE(ops_run_on_the_capturing_thread_are_not_captured, k)
{
    inside_capture ic;
    memset(&ic, 0, sizeof ic);
    ic.e = tu_engine(k);
    ic.v = tu_var(ic.e);
    vf_engine *naive = tu_engine(&tu_kinds[0]);
    vf_var w = tu_var(naive), x = tu_var(ic.e);
    counter c;
    memset(&c, 0, sizeof c);
    /* An async op, completed while capturing, ahead of one that pushes. */
    CHECK_OK(vf_engine_push(
        ic.e, &(vf_op){.async_fn = ic_hold, .arg = &ic, .writes = VF_VARS(x)}));
    CHECK_OK(vf_engine_push(
        ic.e, &(vf_op){.fn = ic_inner, .arg = &ic, .writes = VF_VARS(x)}));
    CHECK(tu_wait_flag(&ic.held_set, 1, TU_TIMEOUT)); /* it started */
    CHECK_OK(vf_graph_begin(ic.e));
    CHECK_OK(vf_engine_push(
        naive, &(vf_op){.fn = ic_inner, .arg = &ic, .writes = VF_VARS(w)}));
    CHECK_EQ(atomic_load(&ic.inner_ran), 1); /* inside the push */
    CHECK_OK(vf_completion_finish(ic.held, 0, NULL));
    CHECK_OK(vf_engine_push(/* the capture's own push: recorded */
                            ic.e, &(vf_op){.fn = count_op,
                                           .arg = &c,
                                           .writes = VF_VARS(ic.v)}));
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_end(ic.e, &g));
    CHECK_EQ(vf_graph_ops(g), 1);
    CHECK_OK(vf_engine_wait_all(ic.e, NULL));
    CHECK_EQ(atomic_load(&ic.inner_ran), 2);
    CHECK_EQ(atomic_load(&ic.child_ran), 2);
    CHECK_EQ(atomic_load(&ic.child_dones), 2);
    CHECK_EQ(atomic_load(&c.n), 0);
    CHECK_OK(vf_graph_launch(ic.e, g));
    CHECK_OK(vf_engine_wait_all(ic.e, NULL));
    CHECK_EQ(atomic_load(&c.n), 1);
    CHECK_OK(vf_graph_destroy(ic.e, g));
    CHECK_OK(vf_engine_destroy(naive));
    tu_finish_engine(ic.e);
}

/* --- launches made before a set_arg, started after it -------------------- */

typedef struct arg_log {
    int n;
    int v[16];
} arg_log;

typedef struct logged {
    arg_log *log;
    int value;
} logged;

static int log_value(vf_run *run, void *arg)
{
    (void)run;
    const logged *l = arg;
    l->log->v[l->log->n++] = l->value;
    return 0;
}

static int log_pointed(vf_run *run, void *arg)
{
    (void)run;
    const logged *l = arg; /* the program's own struct: its value now */
    l->log->v[l->log->n++] = l->value;
    return 0;
}

/* Launches queued behind a held op, vf_graph_set_arg between them: each
 * runs with the arguments it was launched with (a launch takes its
 * instance only when it starts; set_arg keeps those of the launches made
 * before it), for a copied argument and a pointer. */
TEST_KIND_CASE(queued_launches_keep_their_arguments, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    arg_log log = {0}, plog = {0};
    logged first = {&log, 0}, p1 = {&plog, 10}, p2 = {&plog, 20};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = log_value,
                                        .arg = &first,
                                        .arg_size = sizeof first,
                                        .writes = tu_list(&x, 1)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = log_pointed, .arg = &p1, .writes = tu_list(&x, 1)}));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    static held h;
    memset(&h, 0, sizeof h);
    tu_gate_init(&h.gate);
    if (k->threaded) /* holds x: the launches wait behind it */
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = held_op, .arg = &h, .writes = tu_list(&x, 1)}));
    static const int values[] = {1, 2, 2, 3};
    for (int l = 0; l < 4; l++) {
        if (l == 3 && k->threaded) {
            /* Out of memory keeping the queued launches' arguments: it
             * changes nothing. */
            logged c = {&log, 99};
            vf__testing_fail_alloc(1);
            int rc = vf_graph_set_arg(e, g, 0, &c, sizeof c);
            vf__testing_fail_alloc(0);
            CHECK_ERR(rc, VF_ENOMEM);
        }
        if (l != 2) {
            logged c = {&log, values[l]};
            CHECK_OK(vf_graph_set_arg(e, g, 0, &c, sizeof c));
            CHECK_OK(vf_graph_set_arg(e, g, 1, l == 3 ? &p2 : &p1, 0));
        }
        CHECK_OK(vf_graph_launch(e, g));
    }
    tu_gate_open(&h.gate);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_gate_destroy(&h.gate);
    CHECK_EQ(log.n, 4);
    CHECK_EQ(plog.n, 4);
    for (int l = 0; l < 4 && l < log.n; l++) {
        CHECK_EQ(log.v[l], values[l]);
        CHECK_EQ(plog.v[l], l == 3 ? 20 : 10);
    }
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* An op of a launch that sets the argument a later op of the graph gets
 * from the next launch: the later op of this launch gets the one it was
 * launched with, whether the launch replays or pushes op by op (an
 * in-flight bound; from inside an op), on every engine. Pushing op by op,
 * the launch read each op's argument at that op's push, so the first op,
 * run inside its push (naive) or before the next push, changed it (found
 * trying graphs as a user). */
typedef struct next_arg {
    vf_graph *g;
    int which; /* 0: sets op 1's argument; 1: logs its value */
    int value;
    atomic_int *got;
} next_arg;

static int set_next_or_log(vf_run *run, void *arg)
{
    const next_arg *a = arg;
    if (a->which == 1) {
        atomic_store(a->got, a->value);
        return 0;
    }
    next_arg next = {a->g, 1, 999, a->got};
    return vf_graph_set_arg(vf_run_engine(run), a->g, 1, &next, sizeof next);
}

static int launch_from_op(vf_run *run, void *arg)
{
    return vf_graph_launch(vf_run_engine(run), arg);
}

TEST_KIND_CASE(an_op_setting_the_next_launchs_argument, k)
{
    for (int how = 0; how < 3; how++) { /* top level, bound, inside an op */
        tu_kind bounded = *k;
        if (how == 1)
            bounded.cfg.max_inflight = 64;
        vf_engine *e = tu_engine(&bounded);
        vf_var v = tu_var(e), w = tu_var(e), x = tu_var(e);
        atomic_int got = 0;
        vf_graph *g = NULL;
        next_arg a0 = {NULL, 0, 0, &got}, a1 = {NULL, 1, 11, &got};
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = set_next_or_log,
                                            .arg = &a0,
                                            .arg_size = sizeof a0,
                                            .writes = tu_list(&v, 1)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = set_next_or_log,
                                            .arg = &a1,
                                            .arg_size = sizeof a1,
                                            .writes = tu_list(&w, 1)}));
        CHECK_OK(vf_graph_end(e, &g));
        REQUIRE(g != NULL);
        a0.g = a1.g = g;
        CHECK_OK(vf_graph_set_arg(e, g, 0, &a0, sizeof a0));
        CHECK_OK(vf_graph_set_arg(e, g, 1, &a1, sizeof a1));
        if (how == 2)
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = launch_from_op,
                                                .arg = g,
                                                .writes = tu_list(&x, 1)}));
        else
            CHECK_OK(vf_graph_launch(e, g));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        if (atomic_load(&got) != 11)
            CHECK_REPORT_("%s, launch %s: op 1 got %d, not the 11 it was "
                          "launched with",
                          k->name,
                          how == 0   ? "at top level"
                          : how == 1 ? "at a bound"
                                     : "from an op",
                          atomic_load(&got));
        CHECK_OK(vf_graph_launch(e, g)); /* the next launch: 999 */
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&got), 999);
        CHECK_OK(vf_graph_destroy(e, g));
        tu_finish_engine(e);
    }
}

/* A launch pushing op by op (the naive engine at an in-flight bound runs
 * each op inside its push) whose first op deletes a variable a later op
 * uses: that op's push fails with VF_ESTALE, the launch returns it, and
 * the ops before and after it were pushed and ran (the header says so:
 * such a launch is not taken whole). */
typedef struct deleter {
    vf_var victim;
    atomic_int ran;
} deleter;

static int delete_victim(vf_run *run, void *arg)
{
    deleter *d = arg;
    atomic_fetch_add(&d->ran, 1);
    return vf_var_destroy(vf_run_engine(run), d->victim, NULL, NULL);
}

static int count_deleter(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((deleter *)arg)->ran, 1);
    return 0;
}

TEST_CASE(a_launch_by_push_whose_var_is_deleted_midway)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.type = VF_ENGINE_NAIVE, .max_inflight = 8}));
    REQUIRE(e != NULL);
    deleter d = {.victim = tu_var(e)};
    vf_var a = tu_var(e);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = delete_victim, .arg = &d, .writes = tu_list(&a, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = count_deleter,
                                        .arg = &d,
                                        .writes = tu_list(&d.victim, 1)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_deleter, .arg = &d, .writes = tu_list(&a, 1)}));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    CHECK_ERR(vf_graph_launch(e, g), VF_ESTALE);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&d.ran), 2); /* the first op and the last */
    /* Every later launch is refused whole. */
    CHECK_ERR(vf_graph_launch(e, g), VF_ESTALE);
    CHECK(strstr(vf_error_detail(), "nothing of the graph") != NULL);
    CHECK_EQ(atomic_load(&d.ran), 2);
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
}

/* A launch that replays whose first op deletes a variable a later op
 * uses: the delete goes once the graph's hold on the variable ends, so the
 * later op runs, its launch returns 0, and the next launch is refused
 * whole (the header says so; undocumented until a user tester asked). */
static void count_freed(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

static int delete_victim_freeing(vf_run *run, void *arg)
{
    deleter *d = arg;
    atomic_fetch_add(&d->ran, 1);
    return vf_var_destroy(vf_run_engine(run), d->victim, count_freed, &d->ran);
}

TEST_KIND_CASE(a_replayed_launch_whose_var_is_deleted_midway, k)
{
    vf_engine *e = tu_engine(k);
    deleter d = {.victim = tu_var(e)};
    vf_var a = tu_var(e), z = tu_var(e);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = delete_victim_freeing,
                                        .arg = &d,
                                        .writes = tu_list(&a, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = count_deleter,
                                        .arg = &d,
                                        .reads = tu_list(&a, 1),
                                        .writes = tu_list(&d.victim, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = count_deleter,
                                        .arg = &d,
                                        .reads = tu_list(&d.victim, 1),
                                        .writes = tu_list(&z, 1)}));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    vf_stats before, after;
    CHECK_OK(vf_engine_stats(e, &before));
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_stats(e, &after));
    CHECK_EQ(after.replays - before.replays, 1); /* it replayed */
    /* The three ops, then the free once the last one let the var go. */
    CHECK_EQ(atomic_load(&d.ran), 4);
    CHECK_ERR(vf_graph_launch(e, g), VF_ESTALE);
    CHECK(strstr(vf_error_detail(), "nothing of the graph") != NULL);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&d.ran), 4);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* --- a wait inside a node that can never finish ------------------------ */

typedef struct stuck_node {
    vf_var y;
    atomic_int rc, started;
} stuck_node;

static int wait_for_later_node(vf_run *run, void *arg)
{
    stuck_node *s = arg;
    atomic_store(&s->started, 1);
    int rc = vf_var_wait(vf_run_engine(run), s->y, NULL);
    atomic_store(&s->rc, rc);
    return rc;
}

static int slow_node(vf_run *run, void *arg)
{
    (void)run;
    REQUIRE(tu_wait_flag(arg, 1, 30.0)); /* the waiting node started */
    nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
    return 0;
}

/* A node whose function waits for a var a later node of its graph writes
 * (which follows it): VF_EDEADLK, found when the last other node running
 * ends (its run of nodes brings active to zero), never a hang. */
TEST_KIND_CASE(wait_in_a_node_that_never_ends, k)
{
    if (k->workers < 2) /* the slow node runs beside the waiting one */
        return;
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), u = tu_var(e);
    stuck_node s = {.y = y};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_for_later_node,
                                        .arg = &s,
                                        .writes = tu_list(&x, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                        .reads = tu_list(&x, 1),
                                        .writes = tu_list(&y, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = slow_node,
                                        .arg = &s.started,
                                        .writes = tu_list(&u, 1)}));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    CHECK_OK(vf_graph_launch(e, g));
    vf_error err;
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(atomic_load(&s.rc), VF_EDEADLK);
    CHECK_EQ(err.code, VF_EDEADLK);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.skipped, 1);
    CHECK_EQ(st.ran, 1);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* A node waits on a var a later node of its graph writes, which does not
 * depend on it, the graph launched several times in a row: the wait waits
 * for its launch's hold on the var (the later node's write) and returns
 * 0, as pushing the same ops does, on every engine; a wait on a var the
 * graph only reads is settled at once. The marker went to the var's queue
 * end, behind the later launches' holds, which wait for this launch's end:
 * a false VF_EDEADLK (found trying graphs as a user; on the naive engine
 * too, which runs the nodes in order, and where an in-flight bound, which
 * launches op by op, gave 0). */
typedef struct hold_waiter {
    vf_var a, r, q;
    atomic_int waits, failed;
} hold_waiter;

/* A node that reads q waits on q, after an earlier node wrote it: its own
 * read holds q, so the wait is settled (it waited for the launch's hold,
 * which ends after this node: the second reviewer). */
static int wait_on_own_read(vf_run *run, void *arg)
{
    hold_waiter *h = arg;
    int rc = vf_var_wait_timed(vf_run_engine(run), h->q, 10000, NULL);
    atomic_fetch_add(rc == 0 ? &h->waits : &h->failed, 1);
    return rc;
}

static int wait_for_launch_hold(vf_run *run, void *arg)
{
    hold_waiter *h = arg;
    int rc = vf_var_wait(vf_run_engine(run), h->a, NULL);
    if (rc == 0)
        rc = vf_var_wait_timed(vf_run_engine(run), h->r, 10000, NULL);
    atomic_fetch_add(rc == 0 ? &h->waits : &h->failed, 1);
    return rc;
}

/* Atomic: the nodes that count into one counter share no var (those of
 * two launches reading r may run at once). */
static int count_up(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add((atomic_long *)arg, 1);
    return 0;
}

TEST_KIND_CASE(wait_in_a_node_for_its_launchs_hold, k)
{
    enum { LAUNCHES = 5 };
    vf_engine *e = tu_engine(k);
    hold_waiter h = {.a = tu_var(e), .r = tu_var(e), .q = tu_var(e)};
    vf_var b = tu_var(e);
    atomic_long n = 0, m = 0;
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_for_launch_hold,
                                        .arg = &h,
                                        .writes = tu_list(&b, 1)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_up, .arg = &n, .writes = tu_list(&h.a, 1)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_up, .arg = &m, .reads = tu_list(&h.r, 1)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_up, .arg = &m, .writes = tu_list(&h.q, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wait_on_own_read,
                                        .arg = &h,
                                        .reads = tu_list(&h.q, 1)}));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    for (int i = 0; i < LAUNCHES; i++)
        CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&h.waits), 2 * LAUNCHES);
    CHECK_EQ(atomic_load(&h.failed), 0);
    CHECK_EQ(atomic_load(&n), LAUNCHES);
    CHECK_EQ(atomic_load(&m), 2 * LAUNCHES);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* --- lifetimes ----------------------------------------------------------- */

/* Every call on a destroyed graph's handle is VF_EINVAL (vf_graph_ops 0),
 * whether its launches still hold the graph or it was freed: the handle
 * is looked up before anything it points at is read (ASan without
 * quarantine, Valgrind). */
static void refused_after_destroy(vf_engine *e, vf_graph *g)
{
    int v = 0;
    CHECK_EQ(vf_graph_launch(e, g), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "destroyed") != NULL);
    CHECK_EQ(vf_graph_set_arg(e, g, 0, &v, 0), VF_EINVAL);
    CHECK_EQ(vf_graph_device_replay(e, g, false), VF_EINVAL);
    CHECK_EQ(vf_graph_destroy(e, g), VF_EINVAL);
    CHECK_EQ(vf_graph_ops(g), 0);
}

/* A graph destroyed right after many launches (held on a gate) is freed
 * once they are over; every op runs. A graph never destroyed, and a
 * capture never ended, are freed by the engine's destroy (LSan). */
TEST_KIND_CASE(destroy_while_launched, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    counter c;
    memset(&c, 0, sizeof c);
    tu_gate gate;
    tu_gate_init(&gate);
    chainv first = {1, k->threaded ? &gate : NULL};
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = times3, .arg = &first, .writes = VF_VARS(x)}));
    vf_graph *g = NULL, *kept = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = count_op,
                                        .arg = &c,
                                        .reads = VF_VARS(x),
                                        .writes = VF_VARS(y)}));
    CHECK_OK(vf_graph_end(e, &g));
    for (int i = 0; i < 50; i++)
        CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_graph_destroy(e, g));
    refused_after_destroy(e, g); /* launches still hold it */
    tu_gate_open(&gate);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&c.n), 50);
    refused_after_destroy(e, g); /* freed: nothing of it is read */
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(y)}));
    CHECK_OK(vf_graph_end(e, &kept));
    CHECK_OK(vf_graph_launch(e, kept));
    CHECK_OK(vf_graph_begin(e)); /* never ended */
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(y)}));
    CHECK_OK(vf_engine_destroy(e)); /* drains: kept's launch runs */
    CHECK_EQ(atomic_load(&c.n), 51);
    /* The capture went with the engine: this thread may capture again. */
    vf_engine *e2 = tu_engine(k);
    CHECK_EQ(vf_graph_end(e, &kept), VF_EINVAL);
    CHECK_OK(vf_graph_begin(e2));
    CHECK_OK(vf_graph_end(e2, &kept));
    tu_finish_engine(e2);
    tu_gate_destroy(&gate);
}

static void *destroy_engine(void *arg)
{
    CHECK_OK(vf_engine_destroy(arg));
    return NULL;
}

/* A capture whose engine another thread destroyed is over: this thread
 * may capture again on any engine (it was refused for ever, told both
 * that it captured and that it did not), and a vf_graph_end on another
 * engine than the live capture's says so. */
TEST_KIND_CASE(capture_ended_by_another_threads_destroy, k)
{
    counter c;
    memset(&c, 0, sizeof c);
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(x)}));
    tu_thread_join(tu_thread_start(destroy_engine, e));
    vf_engine *e2 = tu_engine(k);
    vf_var y = tu_var(e2);
    CHECK(!vf_graph_capturing(e2));
    CHECK_OK(vf_graph_begin(e2));
    CHECK_OK(vf_engine_push(
        e2, &(vf_op){.fn = count_op, .arg = &c, .writes = VF_VARS(y)}));
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_end(e2, &g));
    CHECK_OK(vf_graph_launch(e2, g));
    CHECK_OK(vf_engine_wait_all(e2, NULL));
    CHECK_EQ(atomic_load(&c.n), 1); /* the destroyed capture's op never */
    /* The same once more, the new capture's engine at the old address or
     * not: ended by its destroy on another thread, then none captures. */
    CHECK_OK(vf_graph_begin(e2));
    tu_thread_join(tu_thread_start(destroy_engine, e2));
    vf_engine *e3 = tu_engine(k), *e4 = tu_engine(k);
    CHECK_OK(vf_graph_begin(e3));
    CHECK_ERR(vf_graph_end(e4, &g), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "another engine") != NULL);
    CHECK_ERR(vf_graph_begin(e4), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "already captures") != NULL);
    CHECK_OK(vf_graph_end(e3, &g));
    CHECK_ERR(vf_graph_end(e4, &g), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "does not capture") != NULL);
    tu_finish_engine(e4);
    tu_finish_engine(e3);
}

typedef struct racer {
    vf_engine *e;
    vf_graph *g;
    counter *c;
    atomic_bool *destroyed;
    long launched; /* the launches that returned 0 */
} racer;

/* Launch until refused, at most 100 times (then only once the graph is
 * destroyed, which must refuse it). */
static void *launch_until_refused(void *arg)
{
    racer *r = arg;
    for (int i = 0;; i++) {
        while (i >= 100 && !atomic_load(r->destroyed))
            sched_yield();
        bool after = atomic_load(r->destroyed);
        int rc = vf_graph_launch(r->e, r->g);
        if (rc == 0) {
            CHECK(!after); /* a handle destroyed before the call is refused */
            r->launched++;
            continue;
        }
        CHECK_EQ(rc, VF_EINVAL);
        CHECK_EQ(vf_graph_set_arg(r->e, r->g, 0, r->c, 0), VF_EINVAL);
        return NULL;
    }
}

/* Two threads launch a graph while the main thread destroys it: each call
 * either launches (every op of it runs) or, from the destroy on, is
 * VF_EINVAL; none reads the graph once it is freed (a call in progress
 * holds it: ASan without quarantine, TSan, Valgrind). */
TEST_KIND_CASE(destroy_racing_calls, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    counter c;
    memset(&c, 0, sizeof c);
    for (int round = 0; round < (int)tu_scaled(20, 4); round++) {
        atomic_store(&c.n, 0);
        vf_graph *g = capture_counts(e, x, &c, 2);
        atomic_bool destroyed = false;
        racer r1 = {e, g, &c, &destroyed, 0}, r2 = r1;
        pthread_t t1 = tu_thread_start(launch_until_refused, &r1);
        pthread_t t2 = tu_thread_start(launch_until_refused, &r2);
        while (atomic_load(&c.n) < 2 * round) /* some launches first */
            sched_yield();
        CHECK_OK(vf_graph_destroy(e, g));
        atomic_store(&destroyed, true);
        tu_thread_join(t1);
        tu_thread_join(t2);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&c.n), 2 * (r1.launched + r2.launched));
        CHECK_EQ(vf_graph_launch(e, g), VF_EINVAL);
    }
    tu_finish_engine(e);
}

/* A launch on a stopped engine is held with the pushes around it, as one
 * pending op, and runs at start in their order. */
TEST_KIND_CASE(launch_while_stopped, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    chainv c = {1, NULL};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    for (int i = 0; i < 2; i++)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = plus5, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_engine_stop(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = times3, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = times7, .arg = &c, .writes = VF_VARS(x)}));
    CHECK_EQ(c.v, 1);
    /* The launch is one pending op until it runs (the header). */
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.pending, 3);
    CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(c.v, (1 * 3 + 5 + 5) * 7);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* launch_whole_across_destroy: each op of the graph counts its runs. */
#define WHOLE_OPS 400
static atomic_long whole_ran[WHOLE_OPS];

static int whole_op(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&whole_ran[*(const int *)arg], 1);
    return 0;
}

static void whole_async(vf_run *run, void *arg, vf_completion c)
{
    (void)run;
    (void)arg;
    vf_completion_finish(c, 0, NULL);
}

typedef struct whole_launcher {
    vf_engine *e;
    vf_graph *g;
    long ok;
} whole_launcher;

static void *launch_until_refused_whole(void *arg)
{
    whole_launcher *l = arg;
    while (vf_graph_launch(l->e, l->g) == 0)
        l->ok++;
    return NULL;
}

/* A graph holding an async op launches op by op. Another thread destroys
 * the engine while launches run: a launch either returns 0 and all its
 * ops run, or is refused and none does. A launch the destroy began
 * midway returned VF_ESHUTDOWN after its first ops were pushed, which
 * ran (found trying graphs as a user: 8 runs in 9; the header says a
 * launch never half-happens). */
TEST_KIND_CASE(launch_whole_across_destroy, k)
{
    check_context_ = k->name;
    for (int round = 0; round < 5; round++) {
        vf_engine *e = tu_engine(k);
        vf_var x[8];
        for (int i = 0; i < 8; i++)
            x[i] = tu_var(e);
        for (int i = 0; i < WHOLE_OPS; i++)
            atomic_store(&whole_ran[i], 0);
        vf_graph *g = NULL;
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.async_fn = whole_async, .writes = VF_VARS(x[0])}));
        for (int i = 0; i < WHOLE_OPS; i++)
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = whole_op,
                                                .arg = &i,
                                                .arg_size = sizeof i,
                                                .writes = VF_VARS(x[i % 8])}));
        CHECK_OK(vf_graph_end(e, &g));
        whole_launcher l = {e, g, 0};
        pthread_t t = tu_thread_start(launch_until_refused_whole, &l);
        tu_spin_us(2000 + 3000 * round);
        CHECK_OK(vf_engine_destroy(e));
        tu_thread_join(t);
        for (int i = 0; i < WHOLE_OPS; i++)
            if (atomic_load(&whole_ran[i]) != l.ok) {
                CHECK_REPORT_("op %d ran %ld times, %ld launches accepted", i,
                              (long)atomic_load(&whole_ran[i]), l.ok);
                break;
            }
    }
    check_context_ = NULL;
}

/* On a stopped engine a var's delete is held: a push on the var and a
 * launch of a graph that uses it are refused at once (VF_ESTALE), with a
 * bulk size too. Bulked, both returned 0 and the ops failed at start
 * (VF_EOPFAILED from wait_all: a variable was deleted), where unbulked
 * they are refused (found trying graphs as a user; bulking never changes
 * what a program computes). */
TEST_KIND_CASE(deleted_var_refused_on_a_stopped_engine, k)
{
    check_context_ = k->name;
    for (int bulk = 0; bulk <= 8; bulk += 8) {
        vf_config cfg = k->cfg;
        cfg.bulk_size = bulk;
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &cfg));
        REQUIRE(e != NULL);
        vf_var y = tu_var(e);
        vf_graph *g = NULL;
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(y)}));
        CHECK_OK(vf_graph_end(e, &g));
        CHECK_OK(vf_engine_stop(e));
        CHECK_OK(vf_var_destroy(e, y, NULL, NULL));
        CHECK_ERR(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(y)}),
            VF_ESTALE);
        CHECK_ERR(vf_graph_launch(e, g), VF_ESTALE);
        CHECK_OK(vf_engine_start(e));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        vf_stats st;
        CHECK_OK(vf_engine_stats(e, &st));
        CHECK_EQ(st.failed, 0);
        CHECK_OK(vf_engine_destroy(e));
    }
    check_context_ = NULL;
}

/* A graph the program left to its engine's destroy: a call on its handle
 * is VF_EINVAL, saying so, with the engines made since (one may be at the
 * old engine's address), and never touches a graph made since (a C++
 * graph destroyed after its engine destroyed the new engine's graph at its
 * address: found by a user tester). */
TEST_KIND_CASE(graph_outliving_its_engine, k)
{
    for (int round = 0; round < 20; round++) {
        vf_engine *e1 = tu_engine(k);
        counter c1 = {0}, c2 = {0};
        vf_var x1 = tu_var(e1);
        vf_graph *g1 = capture_counts(e1, x1, &c1, 2);
        CHECK_OK(vf_graph_launch(e1, g1));
        tu_finish_engine(e1); /* g1 left to the destroy */
        vf_engine *e2 = tu_engine(k);
        vf_var x2 = tu_var(e2);
        vf_graph *g2 = capture_counts(e2, x2, &c2, 3);
        CHECK(g2 != g1);
        CHECK_ERR(vf_graph_destroy(e2, g1), VF_EINVAL);
        CHECK(strstr(vf_error_detail(), "engine was destroyed") != NULL);
        CHECK_ERR(vf_graph_launch(e2, g1), VF_EINVAL);
        CHECK_EQ(vf_graph_ops(g1), 0);
        CHECK_OK(vf_graph_launch(e2, g2));
        CHECK_OK(vf_engine_wait_all(e2, NULL));
        CHECK_EQ(atomic_load(&c1.n), 2);
        CHECK_EQ(atomic_load(&c2.n), 3);
        CHECK_OK(vf_graph_destroy(e2, g2));
        tu_finish_engine(e2);
    }
}

int main(int argc, char **argv)
{
    return runner_main(argc, argv, "test_graph", 240);
}
