/*
 * Tiled Cholesky factorization with varflow: the canonical demo of task
 * runtimes (StarPU, PLASMA/QUARK, OmpSs).
 *
 * An n x n symmetric positive definite matrix is cut into b x b tiles; each
 * tile is a varflow variable. The program below is the serial loop nest of
 * the right-looking algorithm (see cholesky_tiles.h), except that each tile
 * kernel is pushed as an op that names the tiles it reads and the tile it
 * writes. varflow runs every kernel as soon as the kernels it depends on are
 * done, so independent TRSM/SYRK/GEMM updates run in parallel, and the
 * result is bit-for-bit the serial one.
 *
 * The program factors the same matrix serially and through varflow, prints
 * GFLOP/s for both, checks that the factors are identical and that the
 * residual ||A - L L^T|| / ||A|| is tiny, and exits non-zero otherwise.
 *
 *   cholesky [n [b]]          default: n = 1024, b = 128
 *   VF_ENGINE_TYPE=pooled VF_CPU_WORKER_NTHREADS=4 cholesky 2048 64
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <varflow.h>

#include "cholesky_tiles.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What one op needs: the matrix and which tile kernel to run. */
typedef struct tile_op {
    const chol_matrix *m;
    chol_task task;
} tile_op;

/* The op function: run one tile kernel. A POTRF that meets a tile that is
 * not positive definite fails the op; varflow then skips every op that
 * depends on it and vf_engine_wait_all reports the failure. */
static int run_tile_op(vf_run *run, void *arg)
{
    tile_op *op = arg;
    int rc = chol_run(op->m, &op->task);
    if (rc != 0)
        vf_run_set_error(run,
                         "tile (%d,%d) is not positive definite (column %d)",
                         op->task.k, op->task.k, rc);
    return rc;
}

static const char *kind_name(enum chol_kind k)
{
    static const char *const names[] = {"potrf", "trsm", "syrk", "gemm"};
    return names[k];
}

/* Factor m in place through varflow. Returns 0, or the error. */
static int factor_varflow(vf_engine *e, const chol_matrix *m,
                          const chol_task *tasks, size_t ntasks, tile_op *ops)
{
    int nt = m->ntiles;
    size_t ntiles = chol_num_tiles(nt);
    vf_var *tile_var = malloc(ntiles * sizeof *tile_var);
    if (!tile_var)
        return VF_ENOMEM;
    int rc = 0;
    size_t created = 0;
    for (; created < ntiles && rc == 0; created++)
        rc = vf_var_create(e, &tile_var[created]);
    if (rc != 0)
        created--;

    /* The serial loop nest, with each kernel pushed instead of called. */
    for (size_t t = 0; t < ntasks && rc == 0; t++) {
        int reads[2][2], nreads, wi, wj;
        chol_task_tiles(&tasks[t], reads, &nreads, &wi, &wj);
        vf_var r[2];
        for (int k = 0; k < nreads; k++)
            r[k] = tile_var[chol_tile_index(nt, reads[k][0], reads[k][1])];
        ops[t] = (tile_op){m, tasks[t]};
        rc = vf_engine_push(
            e, &(vf_op){
                   .fn = run_tile_op,
                   .arg = &ops[t],
                   .reads = {nreads ? r : NULL, nreads},
                   .writes = VF_VARS(tile_var[chol_tile_index(nt, wi, wj)]),
                   .name = kind_name(tasks[t].kind),
               });
        if (rc != 0)
            fprintf(stderr, "cholesky: vf_engine_push: %s\n",
                    vf_error_detail());
    }

    vf_error err;
    int wrc = vf_engine_wait_all(e, &err);
    if (wrc != 0) {
        fprintf(stderr, "cholesky: %s: op '%s' failed: %s\n",
                vf_error_string(wrc), err.op_name, err.message);
        if (rc == 0)
            rc = wrc;
    }
    for (size_t v = 0; v < created; v++)
        vf_var_destroy(e, tile_var[v], NULL, NULL);
    free(tile_var);
    return rc;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int b = argc > 2 ? atoi(argv[2]) : 128;
    if (n <= 0 || b <= 0 || n % b != 0) {
        fprintf(stderr, "usage: cholesky [n [b]]  (b must divide n)\n");
        return 2;
    }
    int nt = n / b;
    size_t ntasks = chol_tasks(nt, NULL);
    chol_task *tasks = malloc(ntasks * sizeof *tasks);
    tile_op *ops = malloc(ntasks * sizeof *ops);
    chol_matrix a, ls, lv;
    if (!tasks || !ops || chol_matrix_alloc(&a, nt, b) ||
        chol_matrix_alloc(&ls, nt, b) || chol_matrix_alloc(&lv, nt, b)) {
        fprintf(stderr, "cholesky: out of memory\n");
        return 1;
    }
    chol_init();
    chol_tasks(nt, tasks);
    chol_matrix_fill_spd(&a, 42);
    memcpy(ls.data, a.data, chol_matrix_bytes(&a));
    memcpy(lv.data, a.data, chol_matrix_bytes(&a));
    double gflop = chol_flops(n) * 1e-9;
    printf("tiled Cholesky: n = %d, %d x %d tiles of %d x %d, %zu tile ops, "
           "%.2f GFLOP\n",
           n, nt, nt, b, b, ntasks, gflop);

    /* Serial: the loop nest itself. */
    double t0 = now();
    for (size_t t = 0; t < ntasks; t++) {
        if (chol_run(&ls, &tasks[t]) != 0) {
            fprintf(stderr, "cholesky: the matrix is not positive definite\n");
            return 1;
        }
    }
    double serial = now() - t0;
    printf("  serial      %8.3f s  %7.2f GFLOP/s\n", serial, gflop / serial);

    /* varflow: the same loop nest, pushed. */
    vf_engine *e;
    t0 = now();
    int rc = vf_engine_create(&e, NULL); /* defaults, or VF_* environment */
    double startup = now() - t0;
    if (rc != 0) {
        fprintf(stderr, "cholesky: vf_engine_create: %s (%s)\n",
                vf_error_string(rc), vf_error_detail());
        return 1;
    }
    t0 = now();
    rc = factor_varflow(e, &lv, tasks, ntasks, ops);
    double par = now() - t0;
    printf("  varflow     %8.3f s  %7.2f GFLOP/s  (%s engine, %d workers, "
           "started in %.1f "
           "ms)  speedup %.2fx\n",
           par, gflop / par, vf_engine_type_name(vf_engine_type_of(e)),
           vf_engine_num_workers(e), startup * 1e3, serial / par);
    vf_engine_destroy(e);

    int same = memcmp(ls.data, lv.data, chol_matrix_bytes(&ls)) == 0;
    double res = chol_residual(&a, &lv);
    printf("  factors identical to serial: %s;  residual ||A - L L^T|| / ||A|| "
           "= %.2e\n",
           same ? "yes" : "NO", res);
    int ok = rc == 0 && same && res < 1e-12;
    printf("%s\n", ok ? "cholesky: ok" : "cholesky: FAILED");
    chol_matrix_free(&a);
    chol_matrix_free(&ls);
    chol_matrix_free(&lv);
    free(tasks);
    free(ops);
    return ok ? 0 : 1;
}
