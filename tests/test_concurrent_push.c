/*
 * test_concurrent_push: several threads pushing at once (rule 10), on every
 * engine kind.
 *
 * 1. Four threads each push a few thousand random ops over 16 shared vars
 *    (random read and write sets, with duplicates, and a var may be both
 *    read and written). Every op runs exactly once. Each op appends its id
 *    to the write log of every var it writes and records, for every var it
 *    only reads, how many writes of that var it saw. The engine is correct
 *    only if some serial order explains everything: the graph made of
 *    (a) each thread's push order, (b) each var's write order and (c) each
 *    read placed between the write it saw and the next one must have no
 *    cycle (checked by a topological sort). A cycle means two threads' ops
 *    were ordered differently on two vars, or a read saw a half state.
 * 2. The cycle case MXNet can deadlock on: one thread pushes A(read x,
 *    write y) and another B(read y, write x), thousands of times each, at
 *    the same time: it must finish (the watchdog aborts a hang), with every
 *    op run once.
 */
#include "runner.h"

#define NTHREADS 4
#define NV 16
#define MAXR 4
#define MAXW 3

typedef struct desc {
    int nr, nw;
    int r[MAXR], w[MAXW];
    vf_var vr[MAXR], vw[MAXW];
    /* effective sets (each var once; a var written is not a read) */
    int ner, new_;
    int er[MAXR], ew[MAXW];
    int seen[MAXR]; /* writes of er[i] seen when the op ran */
    int spin;
    atomic_int ran;
} desc;

typedef struct world {
    desc *ops; /* NTHREADS * per */
    long per;
    int *log[NV]; /* op ids in write order */
    int len[NV];
    vf_engine *e;
    vf_var vars[NV];
    tu_rv start;
    atomic_int push_errors;
} world;

static world W;

static int op_fn(vf_run *run, void *arg)
{
    (void)run;
    desc *d = arg;
    int g = (int)(d - W.ops);
    atomic_fetch_add(&d->ran, 1);
    for (int i = 0; i < d->ner; i++)
        d->seen[i] = W.len[d->er[i]];
    if (d->spin)
        tu_spin_us(d->spin);
    for (int i = 0; i < d->new_; i++) {
        int v = d->ew[i];
        W.log[v][W.len[v]] = g;
        W.len[v]++;
    }
    return 0;
}

static bool has(const int *a, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x)
            return true;
    return false;
}

static void gen(desc *d, tu_rng *r)
{
    memset(d, 0, sizeof *d);
    d->nr = tu_range(r, 0, MAXR);
    d->nw = tu_range(r, d->nr ? 0 : 1, MAXW);
    for (int i = 0; i < d->nr; i++)
        d->r[i] = tu_below(r, NV);
    for (int i = 0; i < d->nw; i++)
        d->w[i] = tu_below(r, NV);
    for (int i = 0; i < d->nw; i++)
        if (!has(d->ew, d->new_, d->w[i]))
            d->ew[d->new_++] = d->w[i];
    for (int i = 0; i < d->nr; i++)
        if (!has(d->ew, d->new_, d->r[i]) && !has(d->er, d->ner, d->r[i]))
            d->er[d->ner++] = d->r[i];
    d->spin = tu_below(r, 8) == 0 ? 5 : 0;
}

static void *pusher(void *arg)
{
    int t = (int)(intptr_t)arg;
    CHECK(tu_rv_meet(&W.start, NTHREADS, TU_TIMEOUT));
    for (long i = 0; i < W.per; i++) {
        desc *d = &W.ops[t * W.per + i];
        for (int j = 0; j < d->nr; j++)
            d->vr[j] = W.vars[d->r[j]];
        for (int j = 0; j < d->nw; j++)
            d->vw[j] = W.vars[d->w[j]];
        vf_op op = {.fn = op_fn,
                    .arg = d,
                    .reads = tu_list(d->vr, d->nr),
                    .writes = tu_list(d->vw, d->nw),
                    .name = "random"};
        if (vf_engine_push(W.e, &op) != 0)
            atomic_fetch_add(&W.push_errors, 1);
    }
    return NULL;
}

/* Topological sort of the order graph: returns how many ops could not be
 * placed (0: a serial order explains everything). */
static long unplaced(void)
{
    long n = NTHREADS * W.per;
    long maxe = n * (1 + 2 * MAXR + MAXW) + NV * n;
    long *from = malloc((size_t)maxe * sizeof *from);
    long *to = malloc((size_t)maxe * sizeof *to);
    long *indeg = calloc((size_t)n, sizeof *indeg);
    long *start = calloc((size_t)n + 1, sizeof *start);
    long *adj = malloc((size_t)maxe * sizeof *adj);
    long *queue = malloc((size_t)n * sizeof *queue);
    REQUIRE(from && to && indeg && start && adj && queue);
    long ne = 0;
#define EDGE(a, b) (from[ne] = (a), to[ne] = (b), ne++)
    for (int t = 0; t < NTHREADS; t++)
        for (long i = 0; i + 1 < W.per; i++)
            EDGE(t * W.per + i, t * W.per + i + 1);
    for (int v = 0; v < NV; v++)
        for (int k = 0; k + 1 < W.len[v]; k++)
            EDGE(W.log[v][k], W.log[v][k + 1]);
    for (long g = 0; g < n; g++) {
        desc *d = &W.ops[g];
        for (int i = 0; i < d->ner; i++) {
            int v = d->er[i], c = d->seen[i];
            if (c < 0 || c > W.len[v]) {
                CHECK_REPORT_("op %ld saw %d writes of var %d (of %d)", g, c, v,
                              W.len[v]);
                continue;
            }
            if (c > 0)
                EDGE(W.log[v][c - 1], g);
            if (c < W.len[v])
                EDGE(g, W.log[v][c]);
        }
    }
#undef EDGE
    for (long i = 0; i < ne; i++) {
        indeg[to[i]]++;
        start[from[i] + 1]++;
    }
    for (long i = 0; i < n; i++)
        start[i + 1] += start[i];
    long *fill = calloc((size_t)n, sizeof *fill);
    REQUIRE(fill);
    for (long i = 0; i < ne; i++)
        adj[start[from[i]] + fill[from[i]]++] = to[i];
    long head = 0, tail = 0;
    for (long i = 0; i < n; i++)
        if (indeg[i] == 0)
            queue[tail++] = i;
    while (head < tail) {
        long u = queue[head++];
        for (long j = start[u]; j < start[u + 1]; j++)
            if (--indeg[adj[j]] == 0)
                queue[tail++] = adj[j];
    }
    free(from);
    free(to);
    free(indeg);
    free(start);
    free(adj);
    free(queue);
    free(fill);
    return n - tail;
}

TEST_KIND_CASE(random_overlap, k)
{
    int round = (int)(k - tu_kinds); /* its own workload per kind */
    memset(&W, 0, sizeof W);
    W.per = tu_scaled(4000, 400);
    long n = NTHREADS * W.per;
    W.ops = calloc((size_t)n, sizeof *W.ops);
    REQUIRE(W.ops);
    for (int v = 0; v < NV; v++) {
        W.log[v] = calloc((size_t)n, sizeof(int));
        REQUIRE(W.log[v]);
    }
    tu_rng r = tu_rng_make(100 + (uint64_t)round);
    for (long g = 0; g < n; g++)
        gen(&W.ops[g], &r);
    tu_rv_init(&W.start);
    W.e = tu_engine(k);
    for (int v = 0; v < NV; v++)
        W.vars[v] = tu_var(W.e);

    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        th[t] = tu_thread_start(pusher, (void *)(intptr_t)t);
    for (int t = 0; t < NTHREADS; t++)
        tu_thread_join(th[t]);
    CHECK_OK(vf_engine_wait_all(W.e, NULL));
    CHECK_EQ(atomic_load(&W.push_errors), 0);

    long bad = 0, writes = 0;
    for (long g = 0; g < n; g++) {
        if (atomic_load(&W.ops[g].ran) != 1 && bad++ < 5)
            CHECK_REPORT_("op %ld ran %d times", g, atomic_load(&W.ops[g].ran));
        writes += W.ops[g].new_;
    }
    CHECK_EQ(bad, 0);
    long logged = 0;
    for (int v = 0; v < NV; v++) {
        logged += W.len[v];
        uint64_t ver = 0;
        CHECK_OK(vf_var_version(W.e, W.vars[v], &ver));
        CHECK_EQ(ver, W.len[v]);
    }
    CHECK_EQ(logged, writes);
    long u = unplaced();
    if (u != 0)
        CHECK_REPORT_("%ld ops are on a cycle of the order graph: no serial "
                      "order explains the run",
                      u);
    tu_finish_engine(W.e);
    tu_rv_destroy(&W.start);
    for (int v = 0; v < NV; v++)
        free(W.log[v]);
    free(W.ops);
}

/* ------------------------------------------------------------ cycle */

typedef struct cyc {
    vf_engine *e;
    vf_var x, y;
    long n;
    atomic_long ran_a, ran_b;
    atomic_int push_errors;
    tu_rv start;
    int xval, yval;
} cyc;

static int op_a(vf_run *run, void *arg)
{
    (void)run;
    cyc *c = arg;
    c->yval = c->xval + 1;
    atomic_fetch_add_explicit(&c->ran_a, 1, memory_order_relaxed);
    return 0;
}

static int op_b(vf_run *run, void *arg)
{
    (void)run;
    cyc *c = arg;
    c->xval = c->yval + 1;
    atomic_fetch_add_explicit(&c->ran_b, 1, memory_order_relaxed);
    return 0;
}

static void *cyc_pusher(void *arg)
{
    cyc *c = arg;
    static atomic_int which;
    int me = atomic_fetch_add(&which, 1) & 1;
    CHECK(tu_rv_meet(&c->start, 2, TU_TIMEOUT));
    for (long i = 0; i < c->n; i++) {
        vf_op op = {.fn = me ? op_b : op_a, .arg = c};
        if (me) {
            op.reads = tu_list(&c->y, 1);
            op.writes = tu_list(&c->x, 1);
        } else {
            op.reads = tu_list(&c->x, 1);
            op.writes = tu_list(&c->y, 1);
        }
        if (vf_engine_push(c->e, &op) != 0)
            atomic_fetch_add(&c->push_errors, 1);
    }
    return NULL;
}

TEST_KIND_CASE(cycle, k)
{
    cyc c;
    memset(&c, 0, sizeof c);
    c.e = tu_engine(k);
    c.x = tu_var(c.e);
    c.y = tu_var(c.e);
    c.n = tu_scaled(20000, 2000);
    tu_rv_init(&c.start);
    pthread_t a = tu_thread_start(cyc_pusher, &c);
    pthread_t b = tu_thread_start(cyc_pusher, &c);
    tu_thread_join(a);
    tu_thread_join(b);
    CHECK_OK(vf_engine_wait_all(c.e, NULL));
    CHECK_EQ(atomic_load(&c.push_errors), 0);
    CHECK_EQ(atomic_load(&c.ran_a), c.n);
    CHECK_EQ(atomic_load(&c.ran_b), c.n);
    tu_finish_engine(c.e);
    tu_rv_destroy(&c.start);
}

TEST_MAIN("test_concurrent_push", 200)
