/*
 * W10 on varflow (recursive.h), through the public API only, as a user
 * writes a recursive program with vars: each call is an op, pushed with its
 * arguments copied into it (vf_op.arg_size); a call that recurses makes two
 * fresh vars (vf_var_create), pushes one op per child writing one of them,
 * waits on both (vf_var_wait, from inside the op: the waiting worker runs
 * other ops meanwhile), destroys them and finishes. The program's thread
 * pushes the root call the same way, writing a var of its own, and waits
 * on that var; the clock covers that push and that wait.
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

/* Push fn(call) writing a new var into *v. Returns 0 or the error. */
static int spawn(vf_engine *e, rec_fn fn, const rec_call *call, vf_var *v)
{
    int rc = vf_var_create(e, v);
    if (rc != 0)
        return rc;
    vf_op op = {.fn = fn,
                .arg = (void *)call,
                .arg_size = sizeof *call,
                .writes = {v, 1}};
    rc = vf_engine_push(e, &op);
    if (rc != 0)
        vf_var_destroy(e, *v, NULL, NULL);
    return rc;
}

/* Wait on v. Returns 0 or the wait's error. */
static int join(vf_engine *e, vf_var v)
{
    vf_error err;
    int rc = vf_var_wait(e, v, &err);
    if (rc != 0)
        say("vf_var_wait", rc, &err);
    return rc;
}

/* Spawn both children, wait on both, destroy both vars. Returns 0, or 1
 * (the op fails). */
static int fork2(vf_run *run, rec_fn fn, const rec_call *c0, const rec_call *c1)
{
    vf_engine *e = vf_run_engine(run);
    vf_var v0, v1;
    int rc = spawn(e, fn, c0, &v0);
    if (rc != 0) {
        say("push", rc, NULL);
        return 1;
    }
    int rc1 = spawn(e, fn, c1, &v1);
    if (rc1 != 0)
        say("push", rc1, NULL);
    rc = join(e, v0);
    if (rc1 == 0 && join(e, v1) != 0)
        rc = 1;
    vf_var_destroy(e, v0, NULL, NULL);
    if (rc1 == 0)
        vf_var_destroy(e, v1, NULL, NULL);
    return rc != 0 || rc1 != 0;
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
    double t0 = bench_now();
    int rc = spawn(e, fn, &root, &v);
    if (rc != 0) {
        say("push", rc, NULL);
        return -1;
    }
    rc = join(e, v);
    *seconds = bench_now() - t0;
    vf_var_destroy(e, v, NULL, NULL);
    return rc != 0 ? -1 : 0;
}
