/*
 * profile.c: profile a run and write every output of the profiler.
 *
 * The run is a tiled Cholesky factorization (cholesky_tiles.h: potrf, trsm,
 * syrk and gemm ops on matrix tiles), a DAG whose shape limits how parallel
 * it can be: its critical path is the chain potrf -> trsm -> syrk -> potrf
 * down the diagonal. The profiler records it (vf_profile_start ... take),
 * then writes into DIR (default: the current directory):
 *
 *   profile-trace.json    Chrome trace: open in https://ui.perfetto.dev or
 *                         chrome://tracing (a track per worker, arrows for
 *                         dependencies, counters of running and ready ops)
 *   profile-report.html   the HTML report: open in any browser, offline
 *   profile-summary.txt   the per-name table (also printed below)
 *   profile-dag.dot       the DAG for Graphviz (dot -Tsvg), critical path red
 *
 * Usage: profile [DIR [n [b]]]   (matrix n x n in tiles of b x b; b | n)
 * The engine comes from the environment as usual (VF_ENGINE_TYPE,
 * VF_CPU_WORKER_NTHREADS, ...). The same files come from any program with
 * VF_PROFILE=path (written when the engine is destroyed), or from a saved
 * trace with tools/varflow-report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <varflow.h>
#include <varflow_profile.h>

#include "cholesky_tiles.h"

typedef struct tile_op {
    const chol_matrix *m;
    chol_task task;
} tile_op;

static int run_tile_op(vf_run *run, void *arg)
{
    tile_op *op = arg;
    int rc = chol_run(op->m, &op->task);
    if (rc != 0)
        vf_run_set_error(run, "tile (%d,%d) is not positive definite",
                         op->task.k, op->task.k);
    return rc;
}

static const char *const kind_names[] = {"potrf", "trsm", "syrk", "gemm"};

/* Push the loop nest of the factorization, one op per tile kernel. */
static int push_factorization(vf_engine *e, const chol_matrix *m,
                              const chol_task *tasks, size_t ntasks,
                              tile_op *ops, vf_var *tile_var)
{
    int nt = m->ntiles;
    for (size_t t = 0; t < ntasks; t++) {
        int reads[2][2], nreads, wi, wj;
        chol_task_tiles(&tasks[t], reads, &nreads, &wi, &wj);
        vf_var r[2];
        for (int k = 0; k < nreads; k++)
            r[k] = tile_var[chol_tile_index(nt, reads[k][0], reads[k][1])];
        ops[t] = (tile_op){m, tasks[t]};
        int rc = vf_engine_push(
            e, &(vf_op){
                   .fn = run_tile_op,
                   .arg = &ops[t],
                   .reads = {nreads ? r : NULL, nreads},
                   .writes = VF_VARS(tile_var[chol_tile_index(nt, wi, wj)]),
                   .name = kind_names[tasks[t].kind],
               });
        if (rc != 0)
            return rc;
    }
    return vf_engine_wait_all(e, NULL);
}

/* Write one output and say where it went. */
static int write_one(const vf_profile *p, const char *dir, const char *file,
                     const char *what)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = vf_profile_write(p, path, VF_PROFILE_AUTO);
    if (rc != 0)
        fprintf(stderr, "profile: %s\n", vf_error_detail());
    else
        printf("  %-11s %s\n", what, path);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    int n = argc > 2 ? atoi(argv[2]) : 1024;
    int b = argc > 3 ? atoi(argv[3]) : 128;
    if (n <= 0 || b <= 0 || n % b != 0) {
        fprintf(stderr, "usage: profile [DIR [n [b]]]  (b must divide n)\n");
        return 2;
    }
    int nt = n / b;
    size_t ntasks = chol_tasks(nt, NULL), ntiles = chol_num_tiles(nt);
    chol_task *tasks = malloc(ntasks * sizeof *tasks);
    tile_op *ops = malloc(ntasks * sizeof *ops);
    vf_var *tile_var = malloc(ntiles * sizeof *tile_var);
    chol_matrix m;
    if (!tasks || !ops || !tile_var || chol_matrix_alloc(&m, nt, b)) {
        fprintf(stderr, "profile: out of memory\n");
        return 1;
    }
    chol_init();
    chol_tasks(nt, tasks);
    chol_matrix_fill_spd(&m, 42);

    vf_engine *e;
    if (vf_engine_create(&e, NULL) != 0) {
        fprintf(stderr, "profile: %s\n", vf_error_detail());
        return 1;
    }
    int rc = 0;
    for (size_t v = 0; v < ntiles && rc == 0; v++)
        rc = vf_var_create(e, &tile_var[v]);

    /* Record only the factorization. */
    vf_profile_start(e);
    if (rc == 0)
        rc = push_factorization(e, &m, tasks, ntasks, ops, tile_var);
    vf_profile_stop(e);
    vf_profile *p = NULL;
    if (rc == 0)
        rc = vf_profile_take(e, &p);
    if (rc != 0)
        fprintf(stderr, "profile: %s (%s)\n", vf_error_string(rc),
                vf_error_detail());
    printf("tiled Cholesky, %d x %d tiles of %d x %d: %zu ops on the %s "
           "engine with %d workers\n",
           nt, nt, b, b, ntasks, vf_engine_type_name(vf_engine_type_of(e)),
           vf_engine_num_workers(e));
    vf_engine_destroy(e);

    if (rc == 0) {
        vf_profile_path path;
        if (vf_profile_critical_path(p, &path) == 0) {
            printf("critical path: %zu ops, %.3f ms of a %.3f ms span "
                   "(%.0f%%)\n",
                   path.count, path.length_ns / 1e6, path.span_ns / 1e6,
                   path.span_ns ? 100.0 * path.length_ns / path.span_ns : 0);
            vf_profile_path_destroy(&path);
        }
        printf("\n");
        vf_profile_summary_write(p, "-", VF_PROFILE_SUMMARY_TEXT,
                                 VF_PROFILE_SORT_TOTAL);
        printf("\nwrote:\n");
        rc |= write_one(p, dir, "profile-trace.json", "trace");
        rc |= write_one(p, dir, "profile-report.html", "report");
        rc |= write_one(p, dir, "profile-summary.txt", "summary");
        rc |= write_one(p, dir, "profile-dag.dot", "graphviz");
    }
    vf_profile_destroy(p);
    chol_matrix_free(&m);
    free(tasks);
    free(ops);
    free(tile_var);
    return rc == 0 ? 0 : 1;
}
