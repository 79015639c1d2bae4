/*
 * OpenMP tasks with depend clauses: one thread of a team of T creates a task
 * per op with depend(in:) on its reads and depend(inout:) on its writes and
 * accumulations (OpenMP 5.0 iterators, since the lists vary in length); the
 * team runs them; the region's closing barrier waits for all. The depend
 * items are one distinct byte per var (bench_state.deps).
 *
 * Built twice from this file: by GCC against libgomp ("omp-gcc") and by
 * clang against LLVM's libomp ("omp-clang").
 *
 * W7 cannot be expressed: depend orders sibling tasks only, and tasks
 * created by two different threads are not siblings, so their accesses to
 * the shared var would race.
 *
 * W8 is written as a C user writes BOTS's SparseLU with OpenMP dependences
 * (its omp-tasks-deps form, as in KASTORS): not from the program's op list
 * but the loop itself over the block pointers, a NULL test for each absent
 * block, allocate_clean_block in the creating thread, and one task per
 * kernel naming its blocks by address, depend(in:) on the blocks it reads
 * and depend(inout:) on the one it writes. It must make the same ops in
 * the same order as the list (sparselu.h), and the check against the serial
 * run says whether it did.
 *
 * W10 (recursive.h) is the recursion with `task` and `taskwait`, as BOTS's
 * fib and a textbook parallel quicksort write it: one thread of the team
 * makes the root call, each call makes a task per child and waits for
 * both (tied tasks, the default).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "adapter.h"

#if defined(__clang__)
#define OMP_NAME "omp-clang"
#define OMP_RUNTIME "LLVM libomp, clang " __clang_version__
#else
#define OMP_NAME "omp-gcc"
#define OMP_RUNTIME "GNU libgomp, GCC " __VERSION__
#endif

typedef struct omp_bench {
    int threads;
    bench_state *s;
} omp_bench;

static const char *omp_unsupported(const bench_prog *p)
{
    if (p->npushers > 1)
        return "OpenMP depend orders sibling tasks only; tasks of two pushing "
               "threads are not siblings";
    return NULL;
}

static int omp_start(void **engine, int threads, char *version, size_t len)
{
    omp_bench *b = calloc(1, sizeof *b);
    if (!b)
        return -1;
    b->threads = threads;
    int team = 0;
    /* Start the team (its threads stay for later regions). */
#pragma omp parallel num_threads(threads)
    {
#pragma omp single
        team = omp_get_num_threads();
    }
    snprintf(version, len, "%s, OpenMP %d, team of %d", OMP_RUNTIME, _OPENMP,
             team);
    *engine = b;
    return 0;
}

static int omp_stop(void *engine)
{
    free(engine);
    return 0;
}

static int omp_prepare(void *engine, bench_state *s, void **run)
{
    omp_bench *b = engine;
    b->s = s;
    *run = b;
    return 0;
}

/* W8: BOTS's sparselu_par_call with depend clauses. Returns 0, or -1 when
 * a block could not be allocated. */
static int omp_sparselu(omp_bench *ob)
{
    lu_grid *g = &ob->s->lu;
    float **a = g->blk;
    int nb = g->nb, b = g->b, bb = b * b, oom = 0;
#pragma omp parallel num_threads(ob->threads)
#pragma omp single
    {
        for (int kk = 0; kk < nb && !oom; kk++) {
            float *diag = a[kk * nb + kk];
#pragma omp task firstprivate(diag) depend(inout : diag [0:bb])
            lu_lu0(diag, b);
            for (int jj = kk + 1; jj < nb; jj++) {
                float *col = a[kk * nb + jj];
                if (col) {
#pragma omp task firstprivate(diag, col) depend(in                             \
                                                : diag [0:bb])                 \
    depend(inout                                                               \
           : col [0:bb])
                    lu_fwd(diag, col, b);
                }
            }
            for (int ii = kk + 1; ii < nb; ii++) {
                float *row = a[ii * nb + kk];
                if (row) {
#pragma omp task firstprivate(diag, row) depend(in                             \
                                                : diag [0:bb])                 \
    depend(inout                                                               \
           : row [0:bb])
                    lu_bdiv(diag, row, b);
                }
            }
            for (int ii = kk + 1; ii < nb && !oom; ii++) {
                float *row = a[ii * nb + kk];
                if (!row)
                    continue;
                for (int jj = kk + 1; jj < nb; jj++) {
                    float *col = a[kk * nb + jj], *inner = a[ii * nb + jj];
                    if (!col)
                        continue;
                    if (!inner && !(inner = lu_grid_alloc(g, ii * nb + jj))) {
                        oom = 1;
                        break;
                    }
#pragma omp task firstprivate(row, col, inner)                                 \
    depend(in                                                                  \
           : row [0:bb], col [0:bb]) depend(inout                              \
                                            : inner [0:bb])
                    lu_bmod(row, col, inner, b);
                }
            }
        }
    }
    return oom ? -1 : 0;
}

static int64_t omp_fib(int n)
{
    if (n < 2)
        return n;
    int64_t x, y;
#pragma omp task shared(x) firstprivate(n)
    x = omp_fib(n - 1);
#pragma omp task shared(y) firstprivate(n)
    y = omp_fib(n - 2);
#pragma omp taskwait
    return x + y;
}

static void omp_qsort(int32_t *a, size_t n)
{
    if (n <= BENCH_QSORT_CUTOFF) {
        bench_qsort_leaf(a, n);
        return;
    }
    size_t k = bench_qsort_partition(a, n);
#pragma omp task firstprivate(a, k)
    omp_qsort(a, k);
#pragma omp task firstprivate(a, k, n)
    omp_qsort(a + k, n - k);
#pragma omp taskwait
}

/* W10: the root call in a region of the team. */
static void omp_recursive(omp_bench *b, double *seconds)
{
    bench_state *s = b->s;
    const bench_prog *p = s->prog;
    double t0 = bench_now();
#pragma omp parallel num_threads(b->threads)
#pragma omp single
    {
        if (p->rec_kind == BENCH_REC_FIB)
            s->fib = omp_fib(p->rec_n);
        else
            omp_qsort(s->arr, p->rec_len);
    }
    *seconds = bench_now() - t0;
}

static int omp_run(void *run, double *seconds)
{
    omp_bench *b = run;
    bench_state *s = b->s;
    if (s->prog->rec_kind) {
        omp_recursive(b, seconds);
        return 0;
    }
    if (s->prog->lu_nb) {
        double t0 = bench_now();
        int rc = omp_sparselu(b);
        *seconds = bench_now() - t0;
        return rc;
    }
    const bench_prog *p = s->prog;
    const bench_op *ops = p->ops;
    const int32_t *vars = p->vars;
    char *d = s->deps;
    size_t n = p->nops;
    double t0 = bench_now();
#pragma omp parallel num_threads(b->threads)
#pragma omp single
    {
        for (size_t i = 0; i < n; i++) {
            const int32_t *v = vars + ops[i].first;
            int nr = ops[i].nreads, nw = ops[i].nwrites + ops[i].naccs;
            (void)nw, (void)d; /* GCC does not see their use in the iterators */
#pragma omp task firstprivate(i) depend(iterator(j = 0                         \
                                                 : nr),                        \
                                        in                                     \
                                        : d[v[j]]) depend(iterator(j = 0       \
                                                                   : nw),      \
                                                          inout                \
                                                          : d[v[nr + j]])
            bench_op_run(s, i);
        }
    }
    *seconds = bench_now() - t0;
    return 0;
}

static void omp_release(void *run)
{
    (void)run;
}

const bench_adapter bench_omp = {
    .name = OMP_NAME,
    .family = "openmp",
    .threaded = 1,
    .unsupported = omp_unsupported,
    .start = omp_start,
    .stop = omp_stop,
    .prepare = omp_prepare,
    .run = omp_run,
    .release = omp_release,
};
