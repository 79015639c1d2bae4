/*
 * The tiled Cholesky of cholesky_tiles.h on many MPI ranks with
 * libvarflow-mpi, shared by examples/mpi_cholesky.c, the MPI tests and the
 * benchmark suite: one definition, included by all.
 *
 * Each tile is a distributed variable owned by rank vf_mpi_owner_2d(size,
 * i, j) (2D block-cyclic, as ScaLAPACK and StarPU-MPI's examples lay it
 * out), so each task runs on the owner of the tile it writes, and the
 * tiles it reads come to it as the data flow needs. Every rank pushes every
 * task; the op body finds its tiles with vf_mpi_data.
 */
#ifndef VF_CHOLESKY_MPI_H
#define VF_CHOLESKY_MPI_H

#include <varflow_mpi.h>

#include "cholesky_tiles.h"

/* The tile (i, j), i >= j, stored at index `index` (chol_tile_index). */
static inline void chol_tile_at(int index, int *i, int *j)
{
    int row = 0;
    while ((row + 1) * (row + 2) / 2 <= index)
        row++;
    *i = row;
    *j = index - row * (row + 1) / 2;
}

static inline int chol_mpi_owner(int index, void *size)
{
    int i, j;
    chol_tile_at(index, &i, &j);
    return vf_mpi_owner_2d(*(const int *)size, i, j);
}

/*
 * Make the tiles of `m` distributed variables of engine `e` (attached):
 * vars[chol_tile_index(i, j)]. On each rank `m` holds the tiles that rank
 * owns (the others are not read, and become nobody's buffer).
 */
static inline int chol_mpi_vars(vf_engine *e, const chol_matrix *m,
                                vf_var *vars)
{
    int size = vf_mpi_size(e), rank = vf_mpi_rank(e);
    int count = (int)chol_num_tiles(m->ntiles);
    void **ptrs = malloc(sizeof *ptrs * (size_t)count);
    if (ptrs == NULL)
        return VF_ENOMEM;
    for (int t = 0; t < count; t++) {
        int i, j;
        chol_tile_at(t, &i, &j);
        ptrs[t] = vf_mpi_owner_2d(size, i, j) == rank ? chol_tile(m, i, j)
                                                      : NULL;
    }
    size_t bytes = (size_t)m->b * (size_t)m->b * sizeof(double);
    int rc = vf_mpi_vars_create(e, vars, count, ptrs, bytes, chol_mpi_owner,
                                &size);
    free(ptrs);
    return rc;
}

/* One task's op: the task, the tiles' variables, the tile size. */
typedef struct chol_mpi_op {
    chol_task task;
    const vf_var *vars;
    int ntiles, b;
} chol_mpi_op;

static inline int chol_mpi_run(vf_run *run, void *arg)
{
    const chol_mpi_op *o = arg;
    vf_engine *e = vf_run_engine(run);
    int reads[2][2], nreads, wi, wj;
    chol_task_tiles(&o->task, reads, &nreads, &wi, &wj);
    const double *r[2] = {NULL, NULL};
    for (int k = 0; k < nreads; k++)
        r[k] = vf_mpi_data(
            e, o->vars[chol_tile_index(o->ntiles, reads[k][0], reads[k][1])]);
    double *w = vf_mpi_data(e, o->vars[chol_tile_index(o->ntiles, wi, wj)]);
    if (w == NULL || (nreads > 0 && r[0] == NULL) ||
        (nreads > 1 && r[1] == NULL)) {
        vf_run_set_error(run, "a tile is missing on this rank");
        return VF_EINVAL;
    }
    int rc = chol_run_tiles(&o->task, r, w, o->b);
    if (rc != 0)
        vf_run_set_error(run, "POTRF(%d): tile not positive definite",
                         o->task.k);
    return rc;
}

static inline void chol_mpi_done(void *arg, int status)
{
    (void)status;
    free(arg);
}

static const char *const chol_mpi_names[] = {"potrf", "trsm", "syrk", "gemm"};

/* Push every task of the factorization (every rank, in the same order). */
static inline int chol_mpi_push_all(vf_engine *e, const vf_var *vars,
                                    int ntiles, int b)
{
    size_t n = chol_tasks(ntiles, NULL);
    chol_task *tasks = malloc(sizeof *tasks * n);
    if (tasks == NULL)
        return VF_ENOMEM;
    chol_tasks(ntiles, tasks);
    int rc = 0;
    for (size_t t = 0; t < n && rc == 0; t++) {
        chol_mpi_op *o = malloc(sizeof *o);
        if (o == NULL) {
            rc = VF_ENOMEM;
            break;
        }
        *o = (chol_mpi_op){tasks[t], vars, ntiles, b};
        int reads[2][2], nreads, wi, wj;
        chol_task_tiles(&tasks[t], reads, &nreads, &wi, &wj);
        vf_var r[2], w = vars[chol_tile_index(ntiles, wi, wj)];
        for (int k = 0; k < nreads; k++)
            r[k] = vars[chol_tile_index(ntiles, reads[k][0], reads[k][1])];
        vf_op op = {.fn = chol_mpi_run,
                    .arg = o,
                    .done = chol_mpi_done,
                    .reads = {r, nreads},
                    .writes = {&w, 1},
                    .name = chol_mpi_names[tasks[t].kind]};
        rc = vf_mpi_push(e, &op, VF_MPI_OWNER);
        if (rc != 0)
            free(o);
    }
    free(tasks);
    return rc;
}

/*
 * The fewest messages the factorization needs on `size` ranks, counted
 * from the task list alone: a rank needs a tile's value once per version
 * it reads and did not write (each tile is written by its owner only, so
 * nothing goes back at the end).
 */
static inline uint64_t chol_mpi_min_messages(int ntiles, int size)
{
    size_t ntile = chol_num_tiles(ntiles);
    uint64_t *version = calloc(ntile, sizeof *version);
    /* seen[t * size + r]: 1 + the version of tile t rank r last got */
    uint64_t *seen = calloc(ntile * (size_t)size, sizeof *seen);
    size_t n = chol_tasks(ntiles, NULL);
    chol_task *tasks = malloc(sizeof *tasks * (n ? n : 1));
    uint64_t messages = 0;
    if (version == NULL || seen == NULL || tasks == NULL) {
        messages = UINT64_MAX;
        n = 0;
    } else {
        chol_tasks(ntiles, tasks);
    }
    for (size_t k = 0; k < n; k++) {
        int reads[2][2], nreads, wi, wj;
        chol_task_tiles(&tasks[k], reads, &nreads, &wi, &wj);
        int x = vf_mpi_owner_2d(size, wi, wj);
        for (int r = 0; r < nreads; r++) {
            size_t t = chol_tile_index(ntiles, reads[r][0], reads[r][1]);
            if (vf_mpi_owner_2d(size, reads[r][0], reads[r][1]) != x &&
                seen[t * (size_t)size + (size_t)x] != version[t] + 1) {
                seen[t * (size_t)size + (size_t)x] = version[t] + 1;
                messages++;
            }
        }
        version[chol_tile_index(ntiles, wi, wj)]++;
    }
    free(version);
    free(seen);
    free(tasks);
    return messages;
}

#endif /* VF_CHOLESKY_MPI_H */
