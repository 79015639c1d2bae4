/*
 * test_graph_homes: where a replay's nodes go (graph.c: homes). A node's
 * home is the CPU worker it is placed on when it becomes ready: the nodes
 * at one depth of the graph are split into as many runs, in capture
 * order, as the pool has workers. Placement never changes a result (the
 * graph tests compare replays with pushing); these cases pin the plan:
 * a stencil's columns keep their worker step after step, a chain stays on
 * one worker, independent nodes split evenly, and nodes of another pool
 * or of a pool of one worker have none.
 */
#include "runner.h"

#include "core/graph.h"

static int nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static vf_engine *engine(vf_engine_type type, int workers)
{
    return tu_engine(&(tu_kind){.name = "homes",
                                .cfg = {.type = type,
                                        .cpu_workers = workers,
                                        .cpu_priority_workers = 1}});
}

/* A 1-D stencil of `width` columns and `steps` steps, double-buffered: the
 * task of column i reads columns i-1..i+1 of one buffer and writes column
 * i of the other. */
static vf_graph *stencil(vf_engine *e, vf_var *cols, int width, int steps)
{
    CHECK_OK(vf_graph_begin(e));
    for (int t = 0; t < steps; t++) {
        vf_var *in = cols + (t % 2) * width, *out = cols + (1 - t % 2) * width;
        for (int i = 0; i < width; i++) {
            int lo = i > 0 ? i - 1 : i, hi = i + 1 < width ? i + 1 : i;
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = nop,
                            .reads = {in + lo, (size_t)(hi - lo + 1)},
                            .writes = {out + i, 1}}));
        }
    }
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_end(e, &g));
    return g;
}

/* A graph of n nodes, node i writing writes[i]. */
static vf_graph *writers(vf_engine *e, const vf_var *writes, int n)
{
    CHECK_OK(vf_graph_begin(e));
    for (int i = 0; i < n; i++)
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = nop, .writes = {&writes[i], 1}}));
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_end(e, &g));
    return g;
}

TEST_CASE(stencil_columns_keep_their_worker)
{
    vf_engine *e = engine(VF_ENGINE_POOLED, 2);
    enum { W = 8, S = 6 };
    vf_var cols[2 * W];
    for (int i = 0; i < 2 * W; i++)
        cols[i] = tu_var(e);
    vf_graph *g = stencil(e, cols, W, S);
    int home[W * S];
    CHECK_EQ(vf__graph_homes(g, home, W * S), (size_t)(W * S));
    for (int t = 0; t < S; t++)
        for (int i = 0; i < W; i++)
            CHECK_EQ(home[t * W + i], i < W / 2 ? 0 : 1);
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

TEST_CASE(chain_on_one_worker_independent_split)
{
    vf_engine *e = engine(VF_ENGINE_POOLED, 3);
    vf_var x = tu_var(e);
    enum { N = 9 };
    vf_var same[N], v[N];
    for (int i = 0; i < N; i++) {
        same[i] = x;
        v[i] = tu_var(e);
    }
    vf_graph *chain = writers(e, same, N), *apart = writers(e, v, N);
    int home[N];
    CHECK_EQ(vf__graph_homes(chain, home, N), (size_t)N);
    for (int i = 0; i < N; i++)
        CHECK_EQ(home[i], 0);
    CHECK_EQ(vf__graph_homes(apart, home, N), (size_t)N);
    for (int i = 0; i < N; i++)
        CHECK_EQ(home[i], i / 3); /* 3 workers, 3 nodes each */
    CHECK_OK(vf_graph_destroy(e, chain));
    CHECK_OK(vf_graph_destroy(e, apart));
    tu_finish_engine(e);
}

TEST_CASE(no_home_elsewhere)
{
    /* A pool of one worker: nowhere else to go. */
    vf_engine *e = engine(VF_ENGINE_POOLED, 1);
    vf_var x = tu_var(e);
    vf_graph *g = writers(e, &x, 1);
    int home[1] = {7};
    CHECK_EQ(vf__graph_homes(g, home, 1), (size_t)1);
    CHECK_EQ(home[0], -1);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
    /* The per-device engine's priority pool is not the CPU pool. */
    e = engine(VF_ENGINE_PERDEVICE, 2);
    vf_var y = tu_var(e), z = tu_var(e);
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nop,
                                        .writes = VF_VARS(y),
                                        .property = VF_PROP_CPU_PRIORITIZED}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nop, .writes = VF_VARS(z)}));
    CHECK_OK(vf_graph_end(e, &g));
    int two[2] = {7, 7};
    CHECK_EQ(vf__graph_homes(g, two, 2), (size_t)2);
    CHECK_EQ(two[0], -1);
    CHECK_EQ(two[1], 0);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
    /* The naive engine runs its nodes in push order, where they are: no
     * homes. */
    e = engine(VF_ENGINE_NAIVE, 0);
    vf_var n = tu_var(e);
    g = writers(e, &n, 1);
    home[0] = 7;
    CHECK_EQ(vf__graph_homes(g, home, 1), (size_t)1);
    CHECK_EQ(home[0], -1);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

TEST_MAIN("test_graph_homes", 60)
