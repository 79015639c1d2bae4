/*
 * W6 across MPI ranks on libvarflow-mpi (the peer of mpi_cholesky_starpu.c;
 * what both share and what they print: mpi_bench.h).
 *
 *   mpirun -np R vfbench-mpi-vf N B REPS WORKERS [WARMUP]
 *
 * One per-device engine per rank with WORKERS CPU workers, attached to
 * MPI_COMM_WORLD (vf_mpi_create). Each rep makes the tiles distributed
 * variables (vf_mpi_vars_create, owners from vf_mpi_owner_2d, the owner's
 * buffer its tile of the working matrix, the other ranks' NULL: varflow
 * allocates a cached copy when a value comes), pushes every task with
 * vf_mpi_push(VF_MPI_OWNER), in the order of chol_tasks, reading the tiles
 * it reads and writing the one it writes, so each runs on the owner of the
 * tile it writes; vf_mpi_wait_all waits. An op finds its tiles with
 * vf_mpi_data. Runtime counts: vf_mpi_stats (sends, bytes_sent) before and
 * after the timed part.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include <varflow_mpi.h>

#include "mpi_bench.h"

static mpib B;

/* One task's op: the task and its variables, reads first. */
typedef struct tile_op {
    const chol_task *task;
    vf_var vars[3];
    int nreads;
} tile_op;

static int run_tile_op(vf_run *run, void *arg)
{
    const tile_op *op = arg;
    vf_engine *e = vf_run_engine(run);
    double *tiles[3];
    for (int k = 0; k <= op->nreads; k++)
        tiles[k] = vf_mpi_data(e, op->vars[k]);
    int rc = mpib_kernel(op->task, tiles, B.b);
    if (rc != 0)
        vf_run_set_error(run, "tile (%d,%d) not positive definite (column %d)",
                         op->task->k, op->task->k, rc);
    return rc;
}

static const char *kind_name(enum chol_kind k)
{
    static const char *const names[] = {"potrf", "trsm", "syrk", "gemm"};
    return names[k];
}

/* vf_mpi_vars_create's map: the variables are made in chol_tile_index order,
 * and B.owner holds vf_mpi_owner_2d of each tile (mpib_init). */
static int tile_owner(int index, void *map_arg)
{
    return ((const mpib *)map_arg)->owner[index];
}

static int report(const char *what, int rc)
{
    fprintf(stderr, "mpi-vf: rank %d: %s: %s (%s)\n", B.rank, what,
            vf_error_string(rc), vf_error_detail());
    return -1;
}

/* Make the tiles distributed variables (this rank's tiles over its
 * buffers) and bind the ops to them. */
static int make_vars(vf_engine *e, vf_var *vars, void **ptrs, tile_op *ops)
{
    for (int i = 0; i < B.ntiles; i++)
        for (int j = 0; j <= i; j++)
            ptrs[chol_tile_index(B.ntiles, i, j)] =
                mpib_owner(&B, i, j) == B.rank ? chol_tile(&B.mat, i, j) : NULL;
    size_t bytes = (size_t)B.b * (size_t)B.b * sizeof(double);
    int rc = vf_mpi_vars_create(e, vars, (int)chol_num_tiles(B.ntiles), ptrs,
                                bytes, tile_owner, &B);
    if (rc != 0)
        return report("vf_mpi_vars_create", rc);
    for (size_t t = 0; t < B.ntasks; t++) {
        int reads[2][2], wi, wj;
        ops[t].task = &B.tasks[t];
        chol_task_tiles(&B.tasks[t], reads, &ops[t].nreads, &wi, &wj);
        for (int k = 0; k < ops[t].nreads; k++)
            ops[t].vars[k] =
                vars[chol_tile_index(B.ntiles, reads[k][0], reads[k][1])];
        ops[t].vars[ops[t].nreads] = vars[chol_tile_index(B.ntiles, wi, wj)];
    }
    return 0;
}

static int push_tasks(vf_engine *e, tile_op *ops)
{
    for (size_t t = 0; t < B.ntasks; t++) {
        vf_op op = {
            .fn = run_tile_op,
            .arg = &ops[t],
            .reads = {ops[t].vars, ops[t].nreads},
            .writes = {&ops[t].vars[ops[t].nreads], 1},
            .name = kind_name(ops[t].task->kind),
        };
        int rc = vf_mpi_push(e, &op, VF_MPI_OWNER);
        if (rc != 0)
            return report("vf_mpi_push", rc);
    }
    return 0;
}

static int wait_all(vf_engine *e)
{
    vf_error err;
    int rc = vf_mpi_wait_all(e, &err);
    if (rc == VF_EOPFAILED)
        fprintf(stderr, "mpi-vf: rank %d: op '%s' failed: %s\n", B.rank,
                err.op_name, err.message);
    else if (rc != 0)
        report("vf_mpi_wait_all", rc);
    return rc;
}

/* One rep; returns 0, 1 on a runtime error, 3 when the factor differs. */
static int rep(vf_engine *e, int index, vf_var *vars, void **ptrs, tile_op *ops)
{
    mpib_reset(&B);
    if (make_vars(e, vars, ptrs, ops) != 0)
        return 1;
    vf_mpi_stats s0, s1;
    vf_mpi_stats_local(e, &s0);
    mpib_rep r;
    mpib_rep_start(&r, index);
    int status = push_tasks(e, ops) == 0 ? 0 : 1;
    if (wait_all(e) != 0)
        status = 1;
    mpib_rep_stop(&r);
    vf_mpi_stats_local(e, &s1);
    /* Deleted and waited for, untimed, before the next rep's reset
     * writes into the owners' buffers. */
    for (size_t v = 0; v < chol_num_tiles(B.ntiles); v++)
        vf_mpi_var_destroy(e, vars[v]);
    if (wait_all(e) != 0)
        status = 1;
    if (mpib_rep_report(&B, &r, (int64_t)(s1.sends - s0.sends),
                        (int64_t)(s1.bytes_sent - s0.bytes_sent)) != 0 &&
        status == 0)
        status = 3;
    return status;
}

/* Both benchmarks must run the same distribution: vf_mpi_owner_2d here,
 * mpib_owner_2d in the StarPU one. */
static int same_map(void)
{
    for (int i = 0; i < B.ntiles; i++)
        for (int j = 0; j <= i; j++)
            if (mpib_owner(&B, i, j) != mpib_owner_2d(B.size, i, j))
                return 0;
    return 1;
}

int main(int argc, char **argv)
{
    if (mpib_init(&B, &argc, &argv, "vf-mpi", vf_mpi_owner_2d) != 0)
        return 1;
    if (!same_map()) {
        fprintf(stderr, "mpi-vf: vf_mpi_owner_2d is not the map of the "
                        "StarPU-MPI benchmark (mpib_owner_2d)\n");
        mpib_finish(&B);
        return 1;
    }
    vf_engine *e = NULL;
    vf_config cfg = {.type = VF_ENGINE_PERDEVICE, .cpu_workers = B.workers};
    int rc = vf_engine_create(&e, &cfg);
    if (rc == 0 && (rc = vf_mpi_create(e, MPI_COMM_WORLD)) != 0)
        report("vf_mpi_create", rc);
    else if (rc != 0)
        report("vf_engine_create", rc);
    if (rc != 0) {
        if (e)
            vf_engine_destroy(e);
        mpib_finish(&B);
        return 1;
    }
    char runtime[160];
    snprintf(runtime, sizeof runtime,
             "libvarflow-mpi %d.%d, %s engine, %d CPU worker%s per rank",
             VF_MPI_VERSION_MAJOR, VF_MPI_VERSION_MINOR,
             vf_engine_type_name(vf_engine_type_of(e)), B.workers,
             B.workers == 1 ? "" : "s");
    mpib_info(
        &B, runtime,
        "vf_mpi_stats_local (sends, bytes_sent) before and after the rep, "
        "summed over ranks");

    size_t ntiles = chol_num_tiles(B.ntiles);
    vf_var *vars = malloc(ntiles * sizeof *vars);
    void **ptrs = malloc(ntiles * sizeof *ptrs);
    tile_op *ops = malloc(B.ntasks * sizeof *ops);
    int status = vars && ptrs && ops ? 0 : 1;
    for (int k = 0; status == 0 && k < B.warmup + B.reps; k++)
        status = rep(e, k, vars, ptrs, ops);
    vf_error err;
    if ((rc = vf_mpi_destroy(e, &err)) != 0 && status == 0)
        status = 1;
    vf_engine_destroy(e);
    free(vars);
    free(ptrs);
    free(ops);
    mpib_finish(&B);
    return status;
}
