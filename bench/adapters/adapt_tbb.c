/*
 * oneTBB's flow graph ("tbb-flow"): one continue_node per op, an edge from
 * each op it must wait for, the roots started, then wait_for_all.
 *
 * A flow graph takes the whole DAG before it runs, where the other engines
 * take a stream of pushes and find the dependencies themselves. So a timed
 * run here does everything from the program's read/write sets on: derive
 * each op's predecessors, create the nodes and make the edges, start the
 * roots, wait for all. Only freeing the graph afterwards is not timed.
 *
 * The edges follow varflow's rules (the ones every engine here implements
 * with its own machinery): an op waits for the last writer of each var it
 * reads or writes, and a write also waits for every read of the var since
 * that writer. Accumulations count as writes, as in the other adapters.
 * Per var we keep the last writer and the list of readers since it, so
 * deriving is linear in the program's var references; an op that meets the
 * same predecessor through two vars gets one edge (an op stamp per
 * predecessor says whether this op already has its edge).
 *
 * Threads: T means T threads in all, the building thread included (it joins
 * the work in wait_for_all), like OpenMP's team of T; varflow and StarPU
 * have T workers besides the pushing thread.
 *
 * W8: a block absent at the start is allocated (bench_op_alloc) by the
 * building thread just before it adds the op that first uses it, inside
 * the clock, as the other engines' pushers do; the graph only starts once
 * it is whole, so every allocation comes before the first kernel.
 *
 * W7 is not run: the graph has one builder, and W7 measures two threads
 * pushing at once. Building both pushers' ops from one thread would give a
 * W5-like number that the tables would set beside the other engines' W7 as
 * if it were the same test.
 *
 * W10 (recursive.h) is not a graph: its tasks are made by its tasks. It
 * runs on "tbb-tg", oneTBB's task_group (tbb_tasks.cpp), which runs only
 * W10, under the same thread limit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "tbb_flow.h"

enum { NONE = UINT32_MAX };

/* One read in a var's list of readers since its last write. */
typedef struct reader {
    uint32_t op;
    uint32_t next; /* the reader before it on the same var, or NONE */
} reader;

typedef struct tbb_run {
    bench_state *s;
    uint32_t *last_writer; /* per var: the op that last wrote it, or NONE */
    uint32_t *readers;     /* per var: its newest reader since then, or NONE */
    reader *reads;         /* one entry per read reference of the program */
    uint32_t *edge_stamp;  /* per op: 1 + the last op given an edge from it */
    uint32_t *roots;       /* the ops without predecessors */
} tbb_run;

static const char *tbb_unsupported(const bench_prog *p)
{
    if (p->npushers > 1)
        return "a flow graph is built by one thread here; W7 measures "
               "concurrent pushers";
    if (p->rec_kind)
        return "W10's tasks are made by its tasks: see tbb-tg (task_group)";
    return NULL;
}

static const char *tg_unsupported(const bench_prog *p)
{
    return p->rec_kind
               ? NULL
               : "task_group runs the recursive W10 only (tbb-flow: W1-W8)";
}

static int tbb_start(void **engine, int threads, char *version, size_t len)
{
    tbb_flow_limit *l = tbb_flow_limit_new(threads, version, len);
    if (!l) {
        fprintf(stderr, "bench: tbb: could not start %d threads\n", threads);
        return -1;
    }
    *engine = l;
    return 0;
}

static int tbb_stop(void *engine)
{
    tbb_flow_limit_free(engine);
    return 0;
}

static void tbb_release(void *run_)
{
    tbb_run *r = run_;
    if (!r)
        return;
    free(r->last_writer);
    free(r->readers);
    free(r->reads);
    free(r->edge_stamp);
    free(r->roots);
    free(r);
}

static int tbb_prepare(void *engine, bench_state *s, void **run)
{
    (void)engine;
    const bench_prog *p = s->prog;
    if (p->nops >= NONE) {
        fprintf(stderr, "bench: tbb: too many ops for 32-bit op numbers\n");
        return -1;
    }
    tbb_run *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    size_t nvars = (size_t)p->nvars ? (size_t)p->nvars : 1,
           nops = p->nops ? p->nops : 1;
    r->s = s;
    r->last_writer = malloc(nvars * sizeof *r->last_writer);
    r->readers = malloc(nvars * sizeof *r->readers);
    r->reads = malloc((p->nvarrefs ? p->nvarrefs : 1) * sizeof *r->reads);
    r->edge_stamp = malloc(nops * sizeof *r->edge_stamp);
    r->roots = malloc(nops * sizeof *r->roots);
    if (!r->last_writer || !r->readers || !r->reads || !r->edge_stamp ||
        !r->roots) {
        tbb_release(r);
        return -1;
    }
    *run = r;
    return 0;
}

static void run_op(void *arg, size_t i)
{
    bench_op_run(arg, i); /* a failure sets s->failed, which the driver reads */
}

/* Make the edge pred -> op unless op already has it. *npreds counts op's. */
static int edge_once(tbb_run *r, tbb_flow *g, uint32_t pred, uint32_t op,
                     int *npreds)
{
    if (pred == NONE || r->edge_stamp[pred] == op + 1)
        return 0;
    r->edge_stamp[pred] = op + 1;
    (*npreds)++;
    return tbb_flow_edge(g, pred, op);
}

/* Add op i's node and its edges; record it as a root when it has none. */
static int add_op(tbb_run *r, tbb_flow *g, uint32_t i, size_t *nroots,
                  size_t *nreads)
{
    const bench_prog *p = r->s->prog;
    const bench_op *o = &p->ops[i];
    const int32_t *v = p->vars + o->first;
    int nw = o->nwrites + o->naccs, npreds = 0;
    if (tbb_flow_add_node(g) != 0)
        return -1;
    for (int k = 0; k < o->nreads; k++)
        if (edge_once(r, g, r->last_writer[v[k]], i, &npreds) != 0)
            return -1;
    for (int k = 0; k < nw; k++) {
        int32_t var = v[o->nreads + k];
        if (edge_once(r, g, r->last_writer[var], i, &npreds) != 0)
            return -1;
        for (uint32_t rd = r->readers[var]; rd != NONE; rd = r->reads[rd].next)
            if (edge_once(r, g, r->reads[rd].op, i, &npreds) != 0)
                return -1;
    }
    /* Only now update the vars: the op's own reads and writes must not
     * become its predecessors. */
    for (int k = 0; k < o->nreads; k++) {
        int32_t var = v[k];
        r->reads[*nreads] = (reader){i, r->readers[var]};
        r->readers[var] = (uint32_t)(*nreads)++;
    }
    for (int k = 0; k < nw; k++) {
        int32_t var = v[o->nreads + k];
        r->last_writer[var] = i;
        r->readers[var] = NONE;
    }
    if (npreds == 0)
        r->roots[(*nroots)++] = i;
    return 0;
}

static int tbb_run_all(void *run_, double *seconds)
{
    tbb_run *r = run_;
    const bench_prog *p = r->s->prog;
    size_t nroots = 0, nreads = 0;
    int rc = 0;
    double t0 = bench_now();
    /* The derivation's state is reset inside the clock: it is part of the
     * work a flow graph needs that a push-based engine does as it goes. */
    memset(r->last_writer, 0xff, (size_t)p->nvars * sizeof *r->last_writer);
    memset(r->readers, 0xff, (size_t)p->nvars * sizeof *r->readers);
    memset(r->edge_stamp, 0, p->nops * sizeof *r->edge_stamp);
    tbb_flow *g = tbb_flow_new(run_op, r->s);
    if (!g)
        return -1;
    for (size_t i = 0; i < p->nops && rc == 0; i++) {
        if (p->lu_nb && bench_op_alloc(r->s, i) == -2)
            rc = -1;
        else
            rc = add_op(r, g, (uint32_t)i, &nroots, &nreads);
    }
    for (size_t k = 0; k < nroots && rc == 0; k++)
        rc = tbb_flow_start(g, r->roots[k]);
    tbb_flow_wait(g);
    *seconds = bench_now() - t0;
    tbb_flow_free(g);
    if (rc != 0)
        fprintf(stderr,
                "bench: tbb: could not build the graph (out of memory)\n");
    return rc;
}

/* The pending-ops row (pending.h): the gate and the n ops as a graph that
 * is built but not started; the gate is the graph's one root, and opening
 * it is starting it. The edges are the ones add_op would derive. */
static void noop(void *arg, size_t i)
{
    (void)arg, (void)i;
}

static int tbb_pending(void *engine, size_t n, bench_pending *out)
{
    (void)engine;
    tbb_flow *g = tbb_flow_new(noop, NULL);
    int rc = g ? tbb_flow_add_node(g) : -1; /* node 0: the gate */
    if (rc != 0) {
        tbb_flow_free(g);
        return -1;
    }
    out->rss_before = bench_rss_bytes();
    double t0 = bench_now();
    for (size_t i = 1; i <= n && rc == 0; i++) {
        rc = tbb_flow_add_node(g);
        if (rc == 0)
            rc = tbb_flow_edge(g, 0, i); /* A, and B[i % 2] for ops 1, 2 */
        if (rc == 0 && i > 2)
            rc = tbb_flow_edge(g, i - 2, i); /* B[i % 2] */
    }
    out->push_s = bench_now() - t0;
    out->rss_after = bench_rss_bytes();
    t0 = bench_now();
    if (rc == 0)
        rc = tbb_flow_start(g, 0);
    tbb_flow_wait(g);
    out->drain_s = bench_now() - t0;
    tbb_flow_free(g);
    return rc;
}

const bench_adapter bench_tbb_flow = {
    .name = "tbb-flow",
    .family = "tbb",
    .threaded = 1,
    .unsupported = tbb_unsupported,
    .start = tbb_start,
    .stop = tbb_stop,
    .prepare = tbb_prepare,
    .run = tbb_run_all,
    .release = tbb_release,
    .pending = tbb_pending,
};

/* ---- tbb-tg: W10 with task_group -------------------------------------------
 */

static int tg_prepare(void *engine, bench_state *s, void **run)
{
    (void)engine;
    *run = s;
    return 0;
}

static int tg_run(void *run, double *seconds)
{
    bench_state *s = run;
    const bench_prog *p = s->prog;
    double t0 = bench_now();
    int rc = p->rec_kind == BENCH_REC_FIB ? tbb_rec_fib(p->rec_n, &s->fib)
                                          : tbb_rec_qsort(s->arr, p->rec_len);
    *seconds = bench_now() - t0;
    return rc;
}

static void tg_release(void *run)
{
    (void)run;
}

const bench_adapter bench_tbb_tg = {
    .name = "tbb-tg",
    .family = "tbb",
    .threaded = 1,
    .unsupported = tg_unsupported,
    .start = tbb_start,
    .stop = tbb_stop,
    .prepare = tg_prepare,
    .run = tg_run,
    .release = tg_release,
};
