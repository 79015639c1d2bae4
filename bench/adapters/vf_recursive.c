/*
 * W10 on varflow (recursive.h), through the public API only, as a user
 * writes OpenMP's task/taskwait program: each call is an op, pushed with
 * its arguments copied into it (vf_op.arg_size) and no vars; a call that
 * recurses pushes one op per child and waits for both with
 * vf_run_wait_children (from inside the op: the waiting worker runs them
 * meanwhile), then finishes. The program's thread pushes the root call
 * writing a var of its own, and waits on that var; the clock covers that
 * push and that wait.
 */
#include <stdio.h>

#include <varflow.h>

#include "adapt_varflow.h"
#include "workloads.h"

/* One call: fib(n) into *out, or sort a[0..n) (then out is NULL). */
typedef struct rec_call {
    int32_t *a;
    size_t n;
    int64_t *out;
} rec_call;

typedef int (*rec_fn)(vf_run *run, void *arg);

static void say(const char *what, int rc, const vf_error *err)
{
    fprintf(stderr, "bench: varflow W10: %s: %s (%s)\n", what,
            vf_error_string(rc),
            err && err->message[0] ? err->message : vf_error_detail());
}

/* Push fn(call), writing `out` when it is a var (the root), else nothing.
 * Returns 0 or the error. */
static int spawn(vf_engine *e, rec_fn fn, const rec_call *call,
                 const vf_var *out)
{
    vf_op op = {.fn = fn, .arg = (void *)call, .arg_size = sizeof *call};
    if (out != NULL)
        op.writes = (vf_var_list){out, 1};
    return vf_engine_push(e, &op);
}

/* Spawn both children and wait for them. Returns 0, or 1 (the op
 * fails). */
static int fork2(vf_run *run, rec_fn fn, const rec_call *c0, const rec_call *c1)
{
    vf_engine *e = vf_run_engine(run);
    int rc = spawn(e, fn, c0, NULL);
    if (rc == 0)
        rc = spawn(e, fn, c1, NULL);
    if (rc != 0)
        say("push", rc, NULL);
    vf_error err;
    int wrc = vf_run_wait_children(run, &err); /* whatever was pushed */
    if (wrc != 0)
        say("vf_run_wait_children", wrc, &err);
    return rc != 0 || wrc != 0;
}

static int fib_op(vf_run *run, void *arg)
{
    const rec_call *c = arg;
    int n = (int)c->n;
    if (n < 2) {
        *c->out = n;
        return 0;
    }
    int64_t x = 0, y = 0;
    rec_call c0 = {.n = (size_t)(n - 1), .out = &x},
             c1 = {.n = (size_t)(n - 2), .out = &y};
    if (fork2(run, fib_op, &c0, &c1) != 0)
        return 1;
    *c->out = x + y;
    return 0;
}

static int qsort_op(vf_run *run, void *arg)
{
    const rec_call *c = arg;
    if (c->n <= BENCH_QSORT_CUTOFF) {
        bench_qsort_leaf(c->a, c->n);
        return 0;
    }
    size_t k = bench_qsort_partition(c->a, c->n);
    rec_call c0 = {.a = c->a, .n = k}, c1 = {.a = c->a + k, .n = c->n - k};
    return fork2(run, qsort_op, &c0, &c1);
}

int vf_bench_rec_run(vf_engine *e, bench_state *s, int cxx, double *seconds)
{
    const bench_prog *p = s->prog;
#ifdef BENCH_WITH_VARFLOW_CXX
    if (cxx) {
        double t0 = bench_now();
        int rc = p->rec_kind == BENCH_REC_FIB
                     ? vf_bench_cxx_fib(e, p->rec_n, &s->fib)
                     : vf_bench_cxx_qsort(e, s->arr, p->rec_len);
        *seconds = bench_now() - t0;
        return rc;
    }
#else
    (void)cxx;
#endif
    rec_call root = {.a = s->arr,
                     .n = p->rec_kind == BENCH_REC_FIB ? (size_t)p->rec_n
                                                       : p->rec_len,
                     .out = &s->fib};
    rec_fn fn = p->rec_kind == BENCH_REC_FIB ? fib_op : qsort_op;
    vf_var v;
    int rc = vf_var_create(e, &v);
    if (rc != 0) {
        say("vf_var_create", rc, NULL);
        return -1;
    }
    double t0 = bench_now();
    rc = spawn(e, fn, &root, &v);
    if (rc != 0) {
        say("push", rc, NULL);
        vf_var_destroy(e, v, NULL, NULL);
        return -1;
    }
    vf_error err;
    if ((rc = vf_var_wait(e, v, &err)) != 0)
        say("vf_var_wait", rc, &err);
    *seconds = bench_now() - t0;
    vf_var_destroy(e, v, NULL, NULL);
    return rc != 0 ? -1 : 0;
}
