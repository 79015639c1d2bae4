/*
 * varflow's engines (naive, pooled, per-device) through the public API only:
 * one vf_var per program var, one vf_push per op with the op's reads as
 * `reads` and its writes and accumulations as `writes`, then vf_wait_all.
 * The var handle lists are laid out before the clock starts, so the timed
 * loop is exactly what a user's loop would be.
 *
 * "vf-pooled-opr" (an extra, not in the default tables) pushes the same
 * program through reusable operators: one vf_operator per op, created before
 * the clock starts, then vf_operator_push per op: the hot path of a program
 * that pushes the same ops again and again (no var list to check, sort and
 * de-duplicate per push).
 *
 * "vf-naive-cxx", "vf-pooled-cxx" and "vf-pooled-cxx-heap" (extras, built
 * when the bench has a C++ compiler) run the same timed loop through
 * include/varflow.hpp (adapt_varflow_cxx.cpp): its cost over vf_push.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <varflow.h>

#include "adapt_varflow.h"
#include "adapter.h"

typedef struct vf_bench_engine {
    vf_engine *e;
    vf_engine_type type;
    bool operators; /* push through vf_operator (vf-pooled-opr) */
    int cxx;        /* 0, or how varflow.hpp pushes (vf_bench_cxx_kind) */
} vf_bench_engine;

typedef struct vf_bench_run {
    vf_engine *e;
    bench_state *s;
    vf_var *vars;        /* one handle per program var */
    vf_var *refs;        /* the handles of each op's var list, in order */
    vf_bench_task *tasks;
    vf_operator **oprs;  /* vf-pooled-opr: one operator per op */
    int cxx;             /* as vf_bench_engine's */
} vf_bench_run;

static void report(const char *what, int rc)
{
    fprintf(stderr, "bench: varflow: %s: %s (%s)\n", what, vf_strerror(rc),
            vf_last_error_detail());
}

static int kernel(vf_run *run, void *arg)
{
    (void)run;
    vf_bench_task *t = arg;
    return bench_op_run(t->s, t->i);
}

static int start(vf_engine_type type, void **engine, int threads, char *version,
                 size_t len)
{
    vf_bench_engine *be = calloc(1, sizeof *be);
    if (!be)
        return -1;
    be->type = type;
    vf_config cfg = {.type = type, .cpu_workers = threads};
    int rc = vf_engine_create(&be->e, &cfg);
    if (rc != 0) {
        report("vf_engine_create", rc);
        free(be);
        return -1;
    }
    snprintf(version, len, "varflow %d.%d.%d %s, %d worker threads", VF_VERSION_MAJOR,
             VF_VERSION_MINOR, VF_VERSION_PATCH,
             vf_engine_type_name(vf_engine_kind(be->e)), vf_engine_num_workers(be->e));
    *engine = be;
    return 0;
}

static int start_naive(void **engine, int threads, char *version, size_t len)
{
    return start(VF_ENGINE_NAIVE, engine, threads, version, len);
}

static int start_pooled(void **engine, int threads, char *version, size_t len)
{
    return start(VF_ENGINE_POOLED, engine, threads, version, len);
}

static int start_perdevice(void **engine, int threads, char *version, size_t len)
{
    return start(VF_ENGINE_PERDEVICE, engine, threads, version, len);
}

static int start_pooled_opr(void **engine, int threads, char *version, size_t len)
{
    int rc = start(VF_ENGINE_POOLED, engine, threads, version, len);
    if (rc == 0) {
        ((vf_bench_engine *)*engine)->operators = true;
        size_t used = strlen(version);
        snprintf(version + used, len - used, ", reusable operators");
    }
    return rc;
}

#ifdef BENCH_WITH_VARFLOW_CXX
static int start_cxx(vf_engine_type type, vf_bench_cxx_kind kind, void **engine,
                     int threads, char *version, size_t len)
{
    int rc = start(type, engine, threads, version, len);
    if (rc == 0) {
        ((vf_bench_engine *)*engine)->cxx = kind;
        size_t used = strlen(version);
        snprintf(version + used, len - used, ", varflow.hpp (%s callable)",
                 kind == VF_BENCH_CXX_INLINE ? "inline" : "heap");
    }
    return rc;
}

static int start_naive_cxx(void **engine, int threads, char *version, size_t len)
{
    return start_cxx(VF_ENGINE_NAIVE, VF_BENCH_CXX_INLINE, engine, threads, version, len);
}

static int start_pooled_cxx(void **engine, int threads, char *version, size_t len)
{
    return start_cxx(VF_ENGINE_POOLED, VF_BENCH_CXX_INLINE, engine, threads, version, len);
}

static int start_pooled_cxx_heap(void **engine, int threads, char *version, size_t len)
{
    return start_cxx(VF_ENGINE_POOLED, VF_BENCH_CXX_HEAP, engine, threads, version, len);
}
#endif

static int stop(void *engine)
{
    vf_bench_engine *be = engine;
    int rc = vf_engine_destroy(be->e);
    if (rc != 0)
        report("vf_engine_destroy", rc);
    free(be);
    return rc ? -1 : 0;
}

static void release(void *run_)
{
    vf_bench_run *r = run_;
    if (!r)
        return;
    if (r->oprs) {
        for (size_t i = 0; i < r->s->prog->nops; i++)
            if (r->oprs[i])
                vf_operator_delete(r->e, r->oprs[i]);
        free(r->oprs);
    }
    if (r->vars) {
        for (int v = 0; v < r->s->prog->nvars; v++)
            if (r->vars[v].id != 0)
                vf_var_delete(r->e, r->vars[v], NULL, NULL);
        vf_wait_all(r->e, NULL);
    }
    free(r->vars);
    free(r->refs);
    free(r->tasks);
    free(r);
}

/* The description of op i (what push_range pushes). */
static void op_of(vf_bench_run *r, size_t i, vf_op *out)
{
    const bench_op *o = &r->s->prog->ops[i];
    const vf_var *v = r->refs + o->first;
    *out = (vf_op){
        .fn = kernel,
        .arg = &r->tasks[i],
        .reads = {o->nreads ? v : NULL, o->nreads},
        .writes = {v + o->nreads, o->nwrites + o->naccs},
    };
}

static int prepare(void *engine, bench_state *s, void **run)
{
    vf_bench_engine *be = engine;
    const bench_prog *p = s->prog;
    vf_bench_run *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    r->e = be->e;
    r->s = s;
    r->cxx = be->cxx;
    r->vars = calloc((size_t)p->nvars, sizeof *r->vars);
    r->refs = malloc((p->nvarrefs ? p->nvarrefs : 1) * sizeof *r->refs);
    r->tasks = malloc(p->nops * sizeof *r->tasks);
    if (!r->vars || !r->refs || !r->tasks) {
        release(r);
        return -1;
    }
    for (int v = 0; v < p->nvars; v++) {
        int rc = vf_var_new(be->e, &r->vars[v]);
        if (rc != 0) {
            report("vf_var_new", rc);
            release(r);
            return -1;
        }
    }
    for (size_t k = 0; k < p->nvarrefs; k++)
        r->refs[k] = r->vars[p->vars[k]];
    for (size_t i = 0; i < p->nops; i++)
        r->tasks[i] = (vf_bench_task){s, i};
    if (be->operators) {
        r->oprs = calloc(p->nops ? p->nops : 1, sizeof *r->oprs);
        if (!r->oprs) {
            release(r);
            return -1;
        }
        for (size_t i = 0; i < p->nops; i++) {
            vf_op def;
            op_of(r, i, &def);
            int rc = vf_operator_new(be->e, &def, &r->oprs[i]);
            if (rc != 0) {
                report("vf_operator_new", rc);
                release(r);
                return -1;
            }
        }
    }
    *run = r;
    return 0;
}

/* Push ops [begin, end). */
static int push_range(void *ctx, int pusher, size_t begin, size_t end)
{
    (void)pusher;
    vf_bench_run *r = ctx;
    const bench_op *ops = r->s->prog->ops;
#ifdef BENCH_WITH_VARFLOW_CXX
    if (r->cxx)
        return vf_bench_cxx_push_range(r->e, ops, r->refs, r->tasks, begin, end,
                                       (vf_bench_cxx_kind)r->cxx);
#endif
    if (r->oprs) {
        for (size_t i = begin; i < end; i++) {
            int rc = vf_operator_push(r->e, r->oprs[i], 0);
            if (rc != 0) {
                report("vf_operator_push", rc);
                return -1;
            }
        }
        return 0;
    }
    for (size_t i = begin; i < end; i++) {
        const bench_op *o = &ops[i];
        const vf_var *v = r->refs + o->first;
        vf_op op = {
            .fn = kernel,
            .arg = &r->tasks[i],
            .reads = {o->nreads ? v : NULL, o->nreads},
            .writes = {v + o->nreads, o->nwrites + o->naccs},
        };
        /* (spelled out rather than op_of(): this is the timed loop) */
        int rc = vf_push(r->e, &op);
        if (rc != 0) {
            report("vf_push", rc);
            return -1;
        }
    }
    return 0;
}

static int run(void *run_, double *seconds)
{
    vf_bench_run *r = run_;
    const bench_prog *p = r->s->prog;
    double t0;
    int rc;
    if (p->npushers == 1) {
        t0 = bench_now();
        rc = push_range(r, 0, 0, p->nops);
    } else {
        rc = bench_run_pushers(p, push_range, r, &t0);
    }
    vf_error err;
    int wrc = vf_wait_all(r->e, &err);
    *seconds = bench_now() - t0;
    if (wrc != 0) {
        fprintf(stderr, "bench: varflow: vf_wait_all: %s (op %s: %s)\n", vf_strerror(wrc),
                err.op_name, err.message);
        return -1;
    }
    return rc;
}

#define VF_ADAPTER(var, label, threads_, extra_, start_fn)                             \
    const bench_adapter var = {                                                        \
        .name = label,                                                                 \
        .family = "varflow",                                                           \
        .threaded = threads_,                                                          \
        .extra = extra_,                                                               \
        .start = start_fn,                                                             \
        .stop = stop,                                                                  \
        .prepare = prepare,                                                            \
        .run = run,                                                                    \
        .release = release,                                                            \
    }

VF_ADAPTER(bench_vf_naive, "vf-naive", 0, 0, start_naive);
VF_ADAPTER(bench_vf_pooled, "vf-pooled", 1, 0, start_pooled);
VF_ADAPTER(bench_vf_perdevice, "vf-perdev", 1, 0, start_perdevice);
VF_ADAPTER(bench_vf_pooled_opr, "vf-pooled-opr", 1, 1, start_pooled_opr);
#ifdef BENCH_WITH_VARFLOW_CXX
VF_ADAPTER(bench_vf_naive_cxx, "vf-naive-cxx", 0, 1, start_naive_cxx);
VF_ADAPTER(bench_vf_pooled_cxx, "vf-pooled-cxx", 1, 1, start_pooled_cxx);
VF_ADAPTER(bench_vf_pooled_cxx_heap, "vf-pooled-cxx-heap", 1, 1, start_pooled_cxx_heap);
#endif
