/*
 * The tiled Cholesky factorization on many processes with libvarflow-mpi:
 * the program of examples/cholesky.c, unchanged in shape, with its tiles
 * spread over MPI ranks. No send, no receive, no barrier is written here:
 * every rank pushes every tile op, each op runs on the rank that owns the
 * tile it writes, and the tiles it reads travel to it as the read/write
 * sets say (docs/DISTRIBUTED.md).
 *
 *   make demo-mpi                         (2 ranks; NP=4 for four)
 *   scripts/mpirun-local 4 build/examples/mpi_cholesky [n [b]]
 *   mpirun -np 4 build/examples/mpi_cholesky [n [b]]      (a cluster)
 *
 * Every rank factors its share; rank 0 then gathers the factor
 * (vf_mpi_get), checks it against a serial factorization bit for bit, and
 * prints the time, the messages moved and the fewest the data flow needs.
 * Exits non-zero when anything differs.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <varflow_mpi.h>

#include "cholesky_mpi.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define TRY(call)                                                              \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_ != 0) {                                                        \
            fprintf(stderr, "mpi_cholesky: %s: %s (%s)\n", #call,              \
                    vf_error_string(rc_), vf_error_detail());                  \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int b = argc > 2 ? atoi(argv[2]) : 128;
    if (n <= 0 || b <= 0 || n % b != 0) {
        fprintf(stderr, "usage: mpi_cholesky [n [b]] (b divides n)\n");
        return 2;
    }
    int ntiles = n / b;
    chol_init();

    /* One engine per rank (its workers: VF_CPU_WORKER_NTHREADS, else the
     * cores), attached to MPI_COMM_WORLD: vf_mpi_create initializes MPI
     * itself here. */
    vf_engine *e;
    TRY(vf_engine_create(&e, NULL));
    TRY(vf_mpi_create(e, MPI_COMM_WORLD));
    int rank = vf_mpi_rank(e), size = vf_mpi_size(e);

    /* Every rank fills the same matrix; each keeps the tiles it owns. */
    chol_matrix a;
    if (chol_matrix_alloc(&a, ntiles, b) != 0) {
        fprintf(stderr, "mpi_cholesky: out of memory\n");
        return 1;
    }
    chol_matrix_fill_spd(&a, 7);
    size_t ntile = chol_num_tiles(ntiles);
    vf_var *tiles = malloc(sizeof *tiles * ntile);
    if (tiles == NULL)
        return 1;
    TRY(chol_mpi_vars(e, &a, tiles));

    double t0 = now();
    TRY(chol_mpi_push_all(e, tiles, ntiles, b));
    vf_error err;
    int rc = vf_mpi_wait_all(e, &err);
    double seconds = now() - t0;
    if (rc != 0) {
        fprintf(stderr, "rank %d: the factorization failed: op %s: %s\n", rank,
                err.op_name, err.message);
        return 1;
    }
    vf_mpi_stats st;
    TRY(vf_mpi_stats_local(e, &st));
    printf("rank %d: ran %llu of the tile ops, sent %llu tiles (%.1f MiB), "
           "received %llu\n",
           rank, (unsigned long long)st.ops_here, (unsigned long long)st.sends,
           (double)st.bytes_sent / 1048576.0, (unsigned long long)st.recvs);
    fflush(stdout);

    /* The messages of the factorization over all ranks, against the
     * fewest its data flow needs. */
    vf_mpi_stats total;
    TRY(vf_mpi_stats_total(e, &total));

    /* Every tile to rank 0, to check it there. */
    for (size_t t = 0; t < ntile; t++)
        TRY(vf_mpi_get(e, tiles[t], 0, &err));
    int ok = 1;
    if (rank == 0) {
        chol_matrix serial;
        if (chol_matrix_alloc(&serial, ntiles, b) != 0)
            return 1;
        chol_matrix_fill_spd(&serial, 7);
        size_t ntasks = chol_tasks(ntiles, NULL);
        chol_task *tasks = malloc(sizeof *tasks * ntasks);
        if (tasks == NULL)
            return 1;
        chol_tasks(ntiles, tasks);
        double s0 = now();
        for (size_t t = 0; t < ntasks; t++)
            chol_run(&serial, &tasks[t]);
        double serial_seconds = now() - s0;
        size_t bytes = (size_t)b * (size_t)b * sizeof(double);
        for (int i = 0; i < ntiles; i++)
            for (int j = 0; j <= i; j++)
                ok &= memcmp(
                          vf_mpi_data(e, tiles[chol_tile_index(ntiles, i, j)]),
                          chol_tile(&serial, i, j), bytes) == 0;
        int p, q;
        vf_mpi_grid(size, &p, &q);
        printf("\nn = %d, tiles of %d x %d on a %d x %d grid of ranks\n", n, b,
               b, p, q);
        printf("  serial (rank 0)  %7.3f s  %6.2f GFLOP/s\n", serial_seconds,
               chol_flops(n) / serial_seconds * 1e-9);
        printf("  varflow-mpi      %7.3f s  %6.2f GFLOP/s  on %d rank(s)\n",
               seconds, chol_flops(n) / seconds * 1e-9, size);
        uint64_t fewest = chol_mpi_min_messages(ntiles, size);
        printf("  messages: %llu (%.1f MiB); the data flow needs at least "
               "%llu\n",
               (unsigned long long)total.sends,
               (double)total.bytes_sent / 1048576.0,
               (unsigned long long)fewest);
        int identical = ok;
        ok &= total.sends == fewest;
        printf("  factor identical to serial, bit for bit: %s\n",
               identical ? "yes" : "NO");
        free(tasks);
        chol_matrix_free(&serial);
    }
    TRY(vf_mpi_destroy(e, &err));
    for (size_t t = 0; t < ntile; t++)
        TRY(vf_var_destroy(e, tiles[t], NULL, NULL));
    TRY(vf_engine_destroy(e));
    free(tiles);
    chol_matrix_free(&a);
    return ok ? 0 : 1;
}
