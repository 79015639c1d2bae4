/*
 * varflow's engines (naive, pooled, per-device) through the public API only:
 * one vf_var per program var, one vf_engine_push per op with the op's reads as
 * `reads` and its writes and accumulations as `writes`, then
 * vf_engine_wait_all. The var handle lists are laid out before the clock
 * starts, so the timed loop is exactly what a user's loop would be.
 *
 * W8 (blocked sparse LU) has a var per block that exists: one per block
 * present at the start, made before the clock starts, and one per block
 * allocated on the way, made by the pushing thread with vf_var_create right
 * after it allocates the block, just before the op that first uses it, in
 * the timed loop (as a user porting BOTS's loop would). So that loop looks
 * each op's handles up in the per-block table as it goes, instead of
 * reading lists laid out beforehand. The vars made on the way are deleted
 * after the clock stops, before the next run allocates the blocks again.
 * vf-pooled-opr does not run W8: its operators are made before the clock
 * from var lists that W8 only has as the pusher goes.
 *
 * "vf-pooled-opr" (an extra, not in the default tables) pushes the same
 * program through reusable operators: one vf_operator per op, created before
 * the clock starts, then vf_operator_push per op: the hot path of a program
 * that pushes the same ops again and again (no var list to check, sort and
 * de-duplicate per push).
 *
 * "vf-bulk64" is the per-device engine with bulk execution on
 * (config.bulk_size = 64, rule 13): up to 64 consecutive pushes fused into
 * one op. Only on W1 and W2, the rows that measure the engine's overhead
 * (MXNet's engine with bulk 64 runs an empty W2 at 0.04-0.06 us/op); a
 * fused op runs its ops one after the other, so where ops carry work it
 * trades parallelism for overhead and is not a fair column.
 *
 * The pending-ops row (pending.h) is measured for vf-pooled and vf-perdev
 * with the engine's in-flight limit off (vf_config.max_inflight left 0, and
 * no VF_MAX_INFLIGHT in the environment): the row holds every op at once.
 * vf-naive runs each op inside its push, so it cannot hold any.
 *
 * The wide-op row (adapter.h: one op over 2^20 vars) is measured for
 * vf-naive, vf-pooled and vf-perdev.
 *
 * "vf-naive-cxx", "vf-pooled-cxx" and "vf-pooled-cxx-heap" (extras, built
 * when the bench has a C++ compiler) run the same timed loop through
 * include/varflow.hpp (adapt_varflow_cxx.cpp): its cost over vf_engine_push.
 *
 * "vf-naive-replay", "vf-pooled-replay" and "vf-perdev-replay" (extras)
 * capture a program that repeats (W2, W9) once, before the clock, and
 * launch the graph once per K of its periods (vf_replay.c).
 *
 * W10 (recursive.h) has no op list: its ops push ops and wait for them
 * (vf_recursive.c; the -cxx extras through varflow.hpp). vf-bulk64 and
 * vf-pooled-opr do not run it.
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
    int bulk_size;  /* config.bulk_size (vf-bulk64) */
    int cxx;        /* 0, or how varflow.hpp pushes (vf_bench_cxx_kind) */
    bool replay;    /* capture once, launch per period (vf-*-replay) */
} vf_bench_engine;

typedef struct vf_bench_run {
    vf_engine *e;
    bench_state *s;
    vf_var *vars; /* one handle per program var */
    vf_var *refs; /* the handles of each op's var list, in order */
    vf_bench_task *tasks;
    vf_operator **oprs;      /* vf-pooled-opr: one operator per op */
    int cxx;                 /* as vf_bench_engine's */
    vf_bench_replay *replay; /* vf-*-replay: the captured graph */
} vf_bench_run;

static void report(const char *what, int rc)
{
    fprintf(stderr, "bench: varflow: %s: %s (%s)\n", what, vf_error_string(rc),
            vf_error_detail());
}

static int kernel(vf_run *run, void *arg)
{
    (void)run;
    vf_bench_task *t = arg;
    return bench_op_run(t->s, t->i);
}

static int start_bulk(vf_engine_type type, int bulk_size, void **engine,
                      int threads, char *version, size_t len)
{
    vf_bench_engine *be = calloc(1, sizeof *be);
    if (!be)
        return -1;
    be->type = type;
    be->bulk_size = bulk_size;
    vf_config cfg = {
        .type = type, .cpu_workers = threads, .bulk_size = bulk_size};
    int rc = vf_engine_create(&be->e, &cfg);
    if (rc != 0) {
        report("vf_engine_create", rc);
        free(be);
        return -1;
    }
    snprintf(version, len, "varflow %d.%d.%d %s, %d worker threads",
             VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH,
             vf_engine_type_name(vf_engine_type_of(be->e)),
             vf_engine_num_workers(be->e));
    if (bulk_size > 0) {
        size_t used = strlen(version);
        snprintf(version + used, len - used, ", bulk size %d", bulk_size);
    }
    *engine = be;
    return 0;
}

static int start(vf_engine_type type, void **engine, int threads, char *version,
                 size_t len)
{
    return start_bulk(type, 0, engine, threads, version, len);
}

static int start_bulk64(void **engine, int threads, char *version, size_t len)
{
    return start_bulk(VF_ENGINE_PERDEVICE, 64, engine, threads, version, len);
}

static const char *bulk_unsupported(const bench_prog *p)
{
    return strcmp(p->id, "W1") == 0 || strcmp(p->id, "W2") == 0
               ? NULL
               : "bulk execution is measured on W1 and W2 only (a fused op "
                 "runs its ops one after the other)";
}

static int start_naive(void **engine, int threads, char *version, size_t len)
{
    return start(VF_ENGINE_NAIVE, engine, threads, version, len);
}

static int start_pooled(void **engine, int threads, char *version, size_t len)
{
    return start(VF_ENGINE_POOLED, engine, threads, version, len);
}

static int start_perdevice(void **engine, int threads, char *version,
                           size_t len)
{
    return start(VF_ENGINE_PERDEVICE, engine, threads, version, len);
}

static const char *opr_unsupported(const bench_prog *p)
{
    if (p->rec_kind)
        return "W10's ops are made by its ops, not before the clock";
    return p->lu_nb
               ? "operators are made before the clock from each op's var list; "
                 "W8 makes its vars as the pusher goes"
               : NULL;
}

static int start_pooled_opr(void **engine, int threads, char *version,
                            size_t len)
{
    int rc = start(VF_ENGINE_POOLED, engine, threads, version, len);
    if (rc == 0) {
        ((vf_bench_engine *)*engine)->operators = true;
        size_t used = strlen(version);
        snprintf(version + used, len - used, ", reusable operators");
    }
    return rc;
}

/* The -replay engines (vf_replay.c). */
static int start_replay(vf_engine_type type, void **engine, int threads,
                        char *version, size_t len)
{
    int rc = start(type, engine, threads, version, len);
    if (rc == 0) {
        ((vf_bench_engine *)*engine)->replay = true;
        size_t used = strlen(version);
        snprintf(version + used, len - used, ", graph replay");
    }
    return rc;
}

static int start_naive_replay(void **engine, int threads, char *version,
                              size_t len)
{
    return start_replay(VF_ENGINE_NAIVE, engine, threads, version, len);
}

static int start_pooled_replay(void **engine, int threads, char *version,
                               size_t len)
{
    return start_replay(VF_ENGINE_POOLED, engine, threads, version, len);
}

static int start_perdevice_replay(void **engine, int threads, char *version,
                                  size_t len)
{
    return start_replay(VF_ENGINE_PERDEVICE, engine, threads, version, len);
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

static int start_naive_cxx(void **engine, int threads, char *version,
                           size_t len)
{
    return start_cxx(VF_ENGINE_NAIVE, VF_BENCH_CXX_INLINE, engine, threads,
                     version, len);
}

static int start_pooled_cxx(void **engine, int threads, char *version,
                            size_t len)
{
    return start_cxx(VF_ENGINE_POOLED, VF_BENCH_CXX_INLINE, engine, threads,
                     version, len);
}

static int start_pooled_cxx_heap(void **engine, int threads, char *version,
                                 size_t len)
{
    return start_cxx(VF_ENGINE_POOLED, VF_BENCH_CXX_HEAP, engine, threads,
                     version, len);
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
    vf_bench_replay_free(r->e, r->replay);
    r->replay = NULL;
    if (r->oprs) {
        for (size_t i = 0; i < r->s->prog->nops; i++)
            if (r->oprs[i])
                vf_operator_destroy(r->e, r->oprs[i]);
        free(r->oprs);
    }
    if (r->vars) {
        for (int v = 0; v < r->s->prog->nvars; v++)
            if (r->vars[v].id != 0)
                vf_var_destroy(r->e, r->vars[v], NULL, NULL);
        vf_engine_wait_all(r->e, NULL);
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
    if (p->rec_kind) { /* W10: no vars or ops before the clock */
        *run = r;
        return 0;
    }
    r->vars = calloc((size_t)p->nvars, sizeof *r->vars);
    r->refs = malloc((p->nvarrefs ? p->nvarrefs : 1) * sizeof *r->refs);
    r->tasks = malloc(p->nops * sizeof *r->tasks);
    if (!r->vars || !r->refs || !r->tasks) {
        release(r);
        return -1;
    }
    for (int v = 0; v < p->nvars; v++) {
        if (!bench_var_at_start(p, v))
            continue; /* W8: made by the pusher as it goes */
        int rc = vf_var_create(be->e, &r->vars[v]);
        if (rc != 0) {
            report("vf_var_create", rc);
            release(r);
            return -1;
        }
    }
    for (size_t k = 0; k < p->nvarrefs; k++)
        r->refs[k] = r->vars[p->vars[k]];
    for (size_t i = 0; i < p->nops; i++)
        r->tasks[i] = (vf_bench_task){s, i};
    if (be->replay && vf_bench_replay_prepare(be->e, s, r->refs, &r->replay)) {
        release(r);
        return -1;
    }
    if (be->operators) {
        r->oprs = calloc(p->nops ? p->nops : 1, sizeof *r->oprs);
        if (!r->oprs) {
            release(r);
            return -1;
        }
        for (size_t i = 0; i < p->nops; i++) {
            vf_op def;
            op_of(r, i, &def);
            int rc = vf_operator_create(be->e, &def, &r->oprs[i]);
            if (rc != 0) {
                report("vf_operator_create", rc);
                release(r);
                return -1;
            }
        }
    }
    *run = r;
    return 0;
}

/* W8: push ops [begin, end), making each block's var when the block is
 * allocated and looking each op's handles up in the per-block table. */
static int push_range_lu(vf_bench_run *r, size_t begin, size_t end)
{
    const bench_prog *p = r->s->prog;
    for (size_t i = begin; i < end; i++) {
        const bench_op *o = &p->ops[i];
        const int32_t *blocks = p->vars + o->first;
        int made = bench_op_alloc(r->s, i);
        if (made == -2)
            return -1;
        if (made >= 0) {
            int rc = vf_var_create(r->e, &r->vars[made]);
            if (rc != 0) {
                report("vf_var_create", rc);
                return -1;
            }
        }
        for (int k = 0; k < o->nreads + o->nwrites; k++)
            r->refs[o->first + k] = r->vars[blocks[k]];
#ifdef BENCH_WITH_VARFLOW_CXX
        if (r->cxx) {
            if (vf_bench_cxx_push_range(r->e, p->ops, r->refs, r->tasks, i,
                                        i + 1, (vf_bench_cxx_kind)r->cxx) != 0)
                return -1;
            continue;
        }
#endif
        const vf_var *v = r->refs + o->first;
        vf_op op = {
            .fn = kernel,
            .arg = &r->tasks[i],
            .reads = {o->nreads ? v : NULL, o->nreads},
            .writes = {v + o->nreads, o->nwrites},
        };
        int rc = vf_engine_push(r->e, &op);
        if (rc != 0) {
            report("vf_engine_push", rc);
            return -1;
        }
    }
    return 0;
}

/* After a W8 run (not timed): delete the vars of the blocks made on the way,
 * which the next run allocates again. */
static int delete_made_vars(vf_bench_run *r)
{
    const bench_prog *p = r->s->prog;
    for (int v = 0; v < p->nvars; v++) {
        if (bench_var_at_start(p, v) || r->vars[v].id == 0)
            continue;
        vf_var_destroy(r->e, r->vars[v], NULL, NULL);
        r->vars[v] = (vf_var){0};
    }
    int rc = vf_engine_wait_all(r->e, NULL);
    if (rc != 0)
        report("vf_engine_wait_all (deleting W8's vars)", rc);
    return rc ? -1 : 0;
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
        int rc = vf_engine_push(r->e, &op);
        if (rc != 0) {
            report("vf_engine_push", rc);
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
    if (p->rec_kind)
        return vf_bench_rec_run(r->e, r->s, r->cxx, seconds);
    if (r->replay) {
        t0 = bench_now();
        rc = vf_bench_replay_run(r->e, r->replay, push_range, r, p->nops,
                                 p->period_first);
    } else if (p->lu_nb) {
        t0 = bench_now();
        rc = push_range_lu(r, 0, p->nops);
    } else if (p->npushers == 1) {
        t0 = bench_now();
        rc = push_range(r, 0, 0, p->nops);
    } else {
        rc = bench_run_pushers(p, push_range, r, &t0);
    }
    vf_error err;
    int wrc = vf_engine_wait_all(r->e, &err);
    *seconds = bench_now() - t0;
    if (wrc != 0) {
        fprintf(stderr, "bench: varflow: vf_engine_wait_all: %s (op %s: %s)\n",
                vf_error_string(wrc), err.op_name, err.message);
        return -1;
    }
    if (p->lu_nb && delete_made_vars(r) != 0)
        return -1;
    return rc;
}

/* ---- the pending-ops row
 * ----------------------------------------------------- */

static int gate_fn(vf_run *run, void *arg)
{
    (void)run;
    bench_gate_wait(arg);
    return 0;
}

static int noop_fn(vf_run *run, void *arg)
{
    (void)run, (void)arg;
    return 0;
}

static int pending(void *engine, size_t n, bench_pending *out)
{
    vf_bench_engine *be = engine;
    vf_var v[3] = {{0}}; /* A, B0, B1 */
    bench_gate gate;
    int rc = 0;
    if (getenv("VF_MAX_INFLIGHT")) {
        /* With a limit the pushes would wait for room behind the gate. */
        fprintf(stderr,
                "bench: varflow: unset VF_MAX_INFLIGHT for the pending row\n");
        return -1;
    }
    for (int k = 0; k < 3 && rc == 0; k++)
        rc = vf_var_create(be->e, &v[k]);
    if (rc != 0) {
        report("vf_var_create", rc);
        for (int k = 0; k < 3; k++)
            if (v[k].id != 0)
                vf_var_destroy(be->e, v[k], NULL, NULL);
        return -1;
    }
    bench_gate_init(&gate);
    vf_op gate_op = {.fn = gate_fn, .arg = &gate, .writes = {v, 3}};
    rc = vf_engine_push(be->e, &gate_op);
    if (rc != 0)
        report("vf_engine_push", rc);
    out->rss_before = bench_rss_bytes();
    double t0 = bench_now();
    for (size_t i = 1; i <= n && rc == 0; i++) {
        vf_op op = {
            .fn = noop_fn, .reads = {&v[0], 1}, .writes = {&v[1 + i % 2], 1}};
        rc = vf_engine_push(be->e, &op);
        if (rc != 0)
            report("vf_engine_push", rc);
    }
    out->push_s = bench_now() - t0;
    out->rss_after = bench_rss_bytes();
    t0 = bench_now();
    bench_gate_open(&gate);
    int wrc = vf_engine_wait_all(be->e, NULL);
    out->drain_s = bench_now() - t0;
    for (int k = 0; k < 3; k++)
        vf_var_destroy(be->e, v[k], NULL, NULL);
    vf_engine_wait_all(be->e, NULL); /* the deletes */
    bench_gate_destroy(&gate);
    if (wrc != 0)
        report("vf_engine_wait_all", wrc);
    return rc || wrc ? -1 : 0;
}

/* ---- the wide-op row (adapter.h)
 * ---------------------------------------------- */

static int wide(void *engine, size_t n, int reps, bench_wide *out)
{
    vf_bench_engine *be = engine;
    if (n > (size_t)VF_MAX_OP_VARS || reps < 1 || reps > BENCH_WIDE_MAX_REPS) {
        fprintf(stderr,
                "bench: varflow: the wide-op row takes at most %d vars and "
                "1..%d reps\n",
                VF_MAX_OP_VARS, BENCH_WIDE_MAX_REPS);
        return -1;
    }
    vf_var *v = calloc(n ? n : 1, sizeof *v);
    if (v == NULL) {
        fprintf(stderr, "bench: varflow: out of memory for %zu vars\n", n);
        return -1;
    }
    int rc = 0;
    size_t made = 0;
    double t0 = bench_now();
    for (; made < n && rc == 0; made++)
        rc = vf_var_create(be->e, &v[made]);
    out->new_s = bench_now() - t0;
    if (rc != 0) {
        report("vf_var_create", rc);
        made--;
    }
    /* Named in a shuffled order (xorshift, a fixed seed): the sort's worst. */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = n; rc == 0 && i > 1; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t j = (size_t)(x % i);
        vf_var t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
    vf_op op = {.fn = noop_fn, .writes = {v, (int)n}, .name = "wide"};
    for (int r = 0; r < reps && rc == 0; r++) {
        t0 = bench_now();
        rc = vf_engine_push(be->e, &op);
        double t1 = bench_now();
        if (rc != 0) {
            report("vf_engine_push", rc);
            break;
        }
        rc = vf_engine_wait_all(be->e, NULL);
        out->push_s[r] = t1 - t0;
        out->run_s[r] = bench_now() - t1;
        if (rc != 0)
            report("vf_engine_wait_all", rc);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint64_t version = 0;
        rc = vf_var_version(be->e, v[i], &version);
        if (rc == 0 && version != (uint64_t)reps) {
            fprintf(stderr,
                    "bench: varflow: wide op: a var was written %llu times, "
                    "not %d\n",
                    (unsigned long long)version, reps);
            rc = -1;
        }
    }
    t0 = bench_now();
    for (size_t i = 0; i < made; i++)
        vf_var_destroy(be->e, v[i], NULL, NULL);
    int wrc = vf_engine_wait_all(be->e, NULL); /* the deletes */
    out->delete_s = bench_now() - t0;
    free(v);
    return rc || wrc ? -1 : 0;
}

#define VF_ADAPTER_ONLY(var, label, threads_, extra_, start_fn, pending_fn,    \
                        wide_fn, unsupported_)                                 \
    const bench_adapter var = {                                                \
        .name = label,                                                         \
        .family = "varflow",                                                   \
        .threaded = threads_,                                                  \
        .extra = extra_,                                                       \
        .unsupported = unsupported_,                                           \
        .start = start_fn,                                                     \
        .stop = stop,                                                          \
        .prepare = prepare,                                                    \
        .run = run,                                                            \
        .release = release,                                                    \
        .pending = pending_fn,                                                 \
        .wide = wide_fn,                                                       \
    }

#define VF_ADAPTER(var, label, threads_, extra_, start_fn, pending_fn)         \
    VF_ADAPTER_ONLY(var, label, threads_, extra_, start_fn, pending_fn, NULL,  \
                    NULL)

VF_ADAPTER_ONLY(bench_vf_naive, "vf-naive", 0, 0, start_naive, NULL, wide,
                NULL);
VF_ADAPTER_ONLY(bench_vf_pooled, "vf-pooled", 1, 0, start_pooled, pending, wide,
                NULL);
VF_ADAPTER_ONLY(bench_vf_perdevice, "vf-perdev", 1, 0, start_perdevice, pending,
                wide, NULL);
VF_ADAPTER_ONLY(bench_vf_pooled_opr, "vf-pooled-opr", 1, 1, start_pooled_opr,
                NULL, NULL, opr_unsupported);
VF_ADAPTER_ONLY(bench_vf_bulk64, "vf-bulk64", 1, 0, start_bulk64, NULL, NULL,
                bulk_unsupported);
VF_ADAPTER_ONLY(bench_vf_naive_replay, "vf-naive-replay", 0, 1,
                start_naive_replay, NULL, NULL, vf_bench_replay_unsupported);
VF_ADAPTER_ONLY(bench_vf_pooled_replay, "vf-pooled-replay", 1, 1,
                start_pooled_replay, NULL, NULL, vf_bench_replay_unsupported);
VF_ADAPTER_ONLY(bench_vf_perdevice_replay, "vf-perdev-replay", 1, 1,
                start_perdevice_replay, NULL, NULL,
                vf_bench_replay_unsupported);
#ifdef BENCH_WITH_VARFLOW_CXX
VF_ADAPTER(bench_vf_naive_cxx, "vf-naive-cxx", 0, 1, start_naive_cxx, NULL);
VF_ADAPTER(bench_vf_pooled_cxx, "vf-pooled-cxx", 1, 1, start_pooled_cxx, NULL);
VF_ADAPTER(bench_vf_pooled_cxx_heap, "vf-pooled-cxx-heap", 1, 1,
           start_pooled_cxx_heap, NULL);
#endif
