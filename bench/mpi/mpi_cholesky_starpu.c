/*
 * W6 across MPI ranks on StarPU-MPI 1.3 (the peer of mpi_cholesky_vf.c;
 * what both share and what they print: mpi_bench.h).
 *
 *   mpirun -np R vfbench-mpi-starpu N B REPS WORKERS [WARMUP]
 *
 * Each tile is a b x b matrix handle, registered on every rank with
 * starpu_mpi_data_register: on its owner over the owner's tile, elsewhere
 * with no home (StarPU allocates a copy when one is received). Every rank
 * inserts every task with starpu_mpi_task_insert, in the order of
 * chol_tasks, STARPU_R on the tiles a task reads and STARPU_RW on the one
 * it writes; StarPU-MPI runs each task on the owner of the tile it writes
 * and posts the sends and receives, caching received tiles until they are
 * written again (STARPU_MPI_CACHE, on by default). starpu_mpi_wait_for_all
 * waits; unregistering brings nothing back, as every tile is written only
 * on its owner.
 *
 * WORKERS CPU workers (conf.ncpus, over STARPU_NCPU), scheduler lws, the
 * StarPU default; StarPU-MPI adds its own communication thread, as
 * varflow-mpi does.
 *
 * Runtime counts: StarPU-MPI counts the bytes of each data send per
 * destination when STARPU_COMM_STATS=1 (set here, before init) and hands
 * them out through starpu_mpi_comm_amounts_retrieve, read before and after
 * each rep; it counts no messages (rt_msgs is -1). With the variable set it
 * also prints the totals at shutdown, "[starpu_comm_stats][src:dst] ... B",
 * as floats (rounded beyond 2^24 bytes); bench/mpi/mpi_run.py reads those as a
 * cross-check.
 */
#define _POSIX_C_SOURCE 200809L
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_bench.h"

static mpib B;

static void tile_kernel(void *buffers[], void *cl_arg)
{
    const chol_task *t = cl_arg;
    double *tiles[3];
    int n = t->kind == CHOL_POTRF ? 1 : t->kind == CHOL_GEMM ? 3 : 2;
    for (int k = 0; k < n; k++)
        tiles[k] = (double *)STARPU_MATRIX_GET_PTR(buffers[k]);
    int rc = mpib_kernel(t, tiles, B.b);
    if (rc != 0) {
        /* A StarPU task cannot fail: stop loudly rather than go on with a
         * factor the check would reject anyway. */
        fprintf(stderr, "mpi-starpu: tile (%d,%d) not positive definite\n",
                t->k, t->k);
        abort();
    }
}

static struct starpu_codelet tile_codelet = {
    .cpu_funcs = {tile_kernel},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "chol_tile",
};

static void register_tiles(starpu_data_handle_t *h)
{
    for (int i = 0; i < B.ntiles; i++) {
        for (int j = 0; j <= i; j++) {
            size_t idx = chol_tile_index(B.ntiles, i, j);
            int owner = mpib_owner(&B, i, j);
            if (owner == B.rank)
                starpu_matrix_data_register(&h[idx], STARPU_MAIN_RAM,
                                            (uintptr_t)chol_tile(&B.mat, i, j),
                                            B.b, B.b, B.b, sizeof(double));
            else
                starpu_matrix_data_register(&h[idx], -1, 0, B.b, B.b, B.b,
                                            sizeof(double));
            starpu_mpi_data_register(h[idx], (starpu_mpi_tag_t)idx, owner);
        }
    }
}

static int insert_tasks(starpu_data_handle_t *h)
{
    for (size_t t = 0; t < B.ntasks; t++) {
        int reads[2][2], nreads, wi, wj;
        chol_task_tiles(&B.tasks[t], reads, &nreads, &wi, &wj);
        struct starpu_data_descr d[3];
        for (int k = 0; k < nreads; k++) {
            d[k].handle =
                h[chol_tile_index(B.ntiles, reads[k][0], reads[k][1])];
            d[k].mode = STARPU_R;
        }
        d[nreads].handle = h[chol_tile_index(B.ntiles, wi, wj)];
        d[nreads].mode = STARPU_RW;
        int rc = starpu_mpi_task_insert(MPI_COMM_WORLD, &tile_codelet,
                                        STARPU_DATA_MODE_ARRAY, d, nreads + 1,
                                        STARPU_CL_ARGS_NFREE, &B.tasks[t],
                                        sizeof B.tasks[t], 0);
        if (rc != 0) {
            fprintf(stderr, "mpi-starpu: starpu_mpi_task_insert: %d\n", rc);
            return -1;
        }
    }
    return 0;
}

/* Bytes this rank's StarPU-MPI has sent so far (all destinations). */
static int64_t starpu_bytes_sent(size_t *amounts)
{
    starpu_mpi_comm_amounts_retrieve(amounts);
    int64_t sum = 0;
    for (int r = 0; r < B.size; r++)
        sum += (int64_t)amounts[r];
    return sum;
}

int main(int argc, char **argv)
{
    if (mpib_init(&B, &argc, &argv, "starpu-mpi", mpib_owner_2d) != 0)
        return 1;
    setenv("STARPU_COMM_STATS", "1", 1);
    setenv("STARPU_SILENT", "1", 0);
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = B.workers;
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.sched_policy_name = "lws";
    conf.precedence_over_environment_variables = 1;
    int rc = starpu_mpi_init_conf(&argc, &argv, 0, MPI_COMM_WORLD, &conf);
    if (rc != 0) {
        fprintf(stderr, "mpi-starpu: starpu_mpi_init_conf: %d\n", rc);
        mpib_finish(&B);
        return 1;
    }
    int maj, min, rel;
    starpu_get_version(&maj, &min, &rel);
    char runtime[160];
    snprintf(runtime, sizeof runtime,
             "StarPU-MPI %d.%d.%d, lws scheduler, %u CPU worker%s per rank, "
             "MPI cache %s",
             maj, min, rel, starpu_cpu_worker_get_count(),
             starpu_cpu_worker_get_count() == 1 ? "" : "s",
             starpu_mpi_cache_is_enabled() ? "on" : "off");
    mpib_info(&B, runtime,
              "bytes: starpu_mpi_comm_amounts_retrieve (STARPU_COMM_STATS=1) "
              "before and after the rep, summed over ranks; messages: not "
              "counted by StarPU-MPI 1.3");

    size_t ntiles = chol_num_tiles(B.ntiles);
    starpu_data_handle_t *h = malloc(ntiles * sizeof *h);
    size_t *amounts = calloc((size_t)B.size, sizeof *amounts);
    int status = h && amounts ? 0 : 1;
    for (int rep = 0; status == 0 && rep < B.warmup + B.reps; rep++) {
        mpib_reset(&B);
        register_tiles(h);
        mpib_rep r;
        int64_t bytes0 = starpu_bytes_sent(amounts);
        mpib_rep_start(&r, rep);
        if (insert_tasks(h) != 0)
            status = 1;
        starpu_mpi_wait_for_all(MPI_COMM_WORLD);
        mpib_rep_stop(&r);
        int64_t bytes = starpu_bytes_sent(amounts) - bytes0;
        for (size_t t = 0; t < ntiles; t++)
            starpu_data_unregister(h[t]);
        if (mpib_rep_report(&B, &r, -1, bytes) != 0)
            status = 3;
    }
    free(h);
    free(amounts);
    starpu_mpi_shutdown();
    mpib_finish(&B);
    return status;
}
