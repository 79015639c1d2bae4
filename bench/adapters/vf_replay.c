/*
 * vf_replay.c: the "-replay" engines of adapt_varflow.c (extras): a
 * program that repeats (bench_prog.period_ops: W2, W9) is captured once,
 * before the clock, into a graph of the ops of K periods (VF_BENCH_REPLAY_OPS
 * ops, default 1024, rounded up to whole periods, at most the repeating
 * part); the timed run pushes the ops before the repeating part, launches
 * the graph once per K periods (vf_graph_launch), pushes the ops left over
 * one by one, and waits for all, as a user's time loop over a captured
 * step would.
 *
 * Each captured op's function finds which op of the program it runs from
 * how many times it has run: the runs of one captured op are ordered (it
 * writes a var, and each launch of the graph comes after the last on every
 * var), so its j-th run is op period_first + j * K + l of the program.
 * Every op of the program so runs its own kernel on its own inputs, and
 * the final state is checked against the serial run's as for every engine.
 */
#include <stdio.h>
#include <stdlib.h>

#include "adapt_varflow.h"
#include "workloads.h"

typedef struct replay_node {
    bench_state *s;
    size_t first, k, local;
    size_t runs; /* written only by this node's runs, one after another */
} replay_node;

struct vf_bench_replay {
    vf_graph *g;
    replay_node *nodes;
    size_t k;        /* ops in the graph: whole periods */
    size_t launches; /* per run */
};

static int replay_kernel(vf_run *run, void *arg)
{
    (void)run;
    replay_node *n = arg;
    size_t i = n->first + n->runs++ * n->k + n->local;
    return bench_op_run(n->s, i);
}

/* Whether the ops of the repeating part name the vars of the first period
 * (what bench_prog.period_ops promises), so the graph is the program. */
static bool repeats(const bench_prog *p)
{
    for (size_t i = p->period_first + p->period_ops; i < p->nops; i++) {
        const bench_op *a = &p->ops[i];
        const bench_op *b =
            &p->ops[p->period_first + (i - p->period_first) % p->period_ops];
        int n = a->nreads + a->nwrites + a->naccs;
        if (a->kind != b->kind || a->nreads != b->nreads ||
            a->nwrites != b->nwrites || a->naccs != b->naccs)
            return false;
        for (int k = 0; k < n; k++)
            if (p->vars[a->first + k] != p->vars[b->first + k])
                return false;
    }
    return true;
}

const char *vf_bench_replay_unsupported(const bench_prog *p)
{
    if (p->period_ops == 0 || p->nops < p->period_first + p->period_ops)
        return "a replay needs a program that repeats (W2, W9)";
    return NULL;
}

int vf_bench_replay_prepare(vf_engine *e, bench_state *s, const vf_var *refs,
                            vf_bench_replay **out)
{
    const bench_prog *p = s->prog;
    if (vf_bench_replay_unsupported(p) != NULL || !repeats(p)) {
        fprintf(stderr, "bench: varflow: %s does not repeat\n", p->key);
        return -1;
    }
    const char *env = getenv("VF_BENCH_REPLAY_OPS");
    size_t want = env != NULL && atol(env) > 0 ? (size_t)atol(env) : 1024;
    size_t per = p->period_ops, periods = (want + per - 1) / per;
    size_t most = (p->nops - p->period_first) / per;
    if (periods > most)
        periods = most;
    vf_bench_replay *rp = calloc(1, sizeof *rp);
    if (rp == NULL)
        return -1;
    rp->k = periods * per;
    rp->launches = (p->nops - p->period_first) / rp->k;
    rp->nodes = calloc(rp->k, sizeof *rp->nodes);
    if (rp->nodes == NULL) {
        free(rp);
        return -1;
    }
    int rc = vf_graph_begin(e);
    for (size_t l = 0; l < rp->k && rc == 0; l++) {
        const bench_op *o = &p->ops[p->period_first + l];
        const vf_var *v = refs + o->first;
        rp->nodes[l] = (replay_node){s, p->period_first, rp->k, l, 0};
        vf_op op = {
            .fn = replay_kernel,
            .arg = &rp->nodes[l],
            .reads = {o->nreads ? v : NULL, o->nreads},
            .writes = {v + o->nreads, o->nwrites + o->naccs},
        };
        rc = vf_engine_push(e, &op);
    }
    int erc = vf_graph_end(e, &rp->g);
    if (rc != 0 || erc != 0) {
        fprintf(stderr, "bench: varflow: capture: %s (%s)\n",
                vf_error_string(rc ? rc : erc), vf_error_detail());
        if (rp->g != NULL)
            vf_graph_destroy(e, rp->g);
        free(rp->nodes);
        free(rp);
        return -1;
    }
    *out = rp;
    return 0;
}

int vf_bench_replay_run(vf_engine *e, vf_bench_replay *rp,
                        int (*push_range)(void *ctx, int pusher, size_t begin,
                                          size_t end),
                        void *ctx, size_t nops, size_t first)
{
    for (size_t l = 0; l < rp->k; l++)
        rp->nodes[l].runs = 0; /* the last run's ops all finished */
    int rc = push_range(ctx, 0, 0, first);
    for (size_t j = 0; j < rp->launches && rc == 0; j++) {
        rc = vf_graph_launch(e, rp->g);
        if (rc != 0)
            fprintf(stderr, "bench: varflow: vf_graph_launch: %s (%s)\n",
                    vf_error_string(rc), vf_error_detail());
    }
    if (rc == 0)
        rc = push_range(ctx, 0, first + rp->launches * rp->k, nops);
    return rc ? -1 : 0;
}

void vf_bench_replay_free(vf_engine *e, vf_bench_replay *rp)
{
    if (rp == NULL)
        return;
    vf_graph_destroy(e, rp->g);
    free(rp->nodes);
    free(rp);
}
