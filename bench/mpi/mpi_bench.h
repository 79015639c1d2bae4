/*
 * W6 across MPI ranks: what the two benchmarks share, so they differ only
 * in the runtime they drive. mpi_cholesky_vf.c runs the tiled Cholesky of
 * examples/cholesky_tiles.h on libvarflow-mpi (include/varflow_mpi.h),
 * mpi_cholesky_starpu.c the same program on StarPU-MPI; bench/mpi/mpi_run.py
 * runs both and prints the table.
 *
 *   vfbench-mpi-X N B REPS WORKERS [WARMUP]
 *
 * Every rank builds the same matrix (chol_matrix_fill_spd, W6's seed), the
 * same task list (chol_tasks) and, untimed, the serial factor. Tile (i, j)
 * belongs to the rank of a 2D block-cyclic map; each task runs on the owner
 * of the tile it writes, which is also the rank that ends up with the
 * factor's tile, so each rank checks the tiles it owns against the serial
 * factor bit for bit and no gather is needed.
 *
 * A rep is: reset the tiles, register them with the runtime (untimed), a
 * barrier, push every task and wait for all (timed, on every rank; the rep
 * takes the slowest rank's time), unregister, check. Rank 0 prints one JSON
 * line per rep on stdout:
 *
 *   {"type":"rep", "engine", "rank_count", "workers", "n", "b", "rep",
 *    "warmup", "seconds", "gflops", "msgs", "bytes", "tile_msgs",
 *    "tile_bytes", "rt_msgs", "rt_bytes", "max_abs_diff", "tiles_differing"}
 *
 * msgs/bytes: every point-to-point message any rank sent during the timed
 * part, counted by the MPI profiling interface (the MPI_*send wrappers in
 * mpi_bench.c, so every runtime is counted the same way, envelopes and
 * control messages included); tile_msgs/tile_bytes: those that carry a
 * tile (at least one tile's bytes: the data, with whatever header the
 * runtime puts in the same message). rt_msgs/rt_bytes: what the runtime says it
 * sent, summed over ranks (-1 where it does not say). The counters are
 * read before the start barrier and after the wait, so the benchmark's own
 * collectives (barrier, reductions) never count.
 */
#ifndef VF_BENCH_MPI_BENCH_H
#define VF_BENCH_MPI_BENCH_H

#include <mpi.h>
#include <stdint.h>

#include "cholesky_tiles.h"

/* The owner of tile (i, j) among `size` ranks. */
typedef int (*mpib_owner_fn)(int size, int i, int j);

typedef struct mpib {
    int n, b, reps, warmup, workers;
    int rank, size;
    int ntiles;
    chol_matrix mat0; /* the input, the same on every rank */
    chol_matrix mat;  /* the working tiles (this rank's owned ones are used) */
    chol_matrix ref;  /* the serial factor */
    chol_task *tasks;
    size_t ntasks;
    int *owner; /* by chol_tile_index */
    const char *engine;
} mpib;

/* Point-to-point traffic this process has sent so far (cumulative). */
typedef struct mpib_counts {
    uint64_t msgs, bytes;           /* every message */
    uint64_t tile_msgs, tile_bytes; /* messages that carry a tile */
} mpib_counts;

/* One rep in flight. */
typedef struct mpib_rep {
    int index;
    double t0, seconds;
    mpib_counts c0, c1;
} mpib_rep;

/*
 * Parse the arguments, initialize MPI (MPI_THREAD_MULTIPLE: the runtimes'
 * communication threads call MPI while the benchmark's barrier and
 * reductions do), build the problem with `owner` as the tile map and
 * compute the serial factor. Prints the usage or the error and returns -1
 * when the benchmark cannot run (MPI is finalized then).
 */
int mpib_init(mpib *B, int *argc, char ***argv, const char *engine,
              mpib_owner_fn owner);

/* Print the run's "info" line (rank 0): `runtime` says which runtime and
 * how it was set up, `rt_counts` where rt_msgs/rt_bytes come from. */
void mpib_info(const mpib *B, const char *runtime, const char *rt_counts);

/* The owner of tile (i, j) (i >= j). */
static inline int mpib_owner(const mpib *B, int i, int j)
{
    return B->owner[chol_tile_index(B->ntiles, i, j)];
}

/* ScaLAPACK's 2D block-cyclic map: a p x q grid of ranks, p * q = size,
 * p <= q and as square as size allows; rank (i % p) * q + (j % q). */
int mpib_owner_2d(int size, int i, int j);

/*
 * Run task `t` on its tiles: tiles[0..nreads-1] the tiles it reads and
 * tiles[nreads] the one it writes, in chol_task_tiles' order. Returns what
 * chol_potrf returns for POTRF (non-zero: not positive definite), else 0.
 */
int mpib_kernel(const chol_task *t, double *const *tiles, int b);

/* Put the input back into the working tiles (before registering them). */
void mpib_reset(mpib *B);

/* Start the timed part of a rep: read the counters, barrier, clock. */
void mpib_rep_start(mpib_rep *r, int index);

/* End the timed part (after the runtime's wait for all): clock, counters. */
void mpib_rep_stop(mpib_rep *r);

/*
 * After the tiles are unregistered: check this rank's tiles against the
 * serial factor, sum the counts over the ranks and print the rep's line
 * (rank 0). `rt_msgs`, `rt_bytes`: this rank's runtime-reported counts
 * for the rep (-1: unknown). Returns 0, or 1 when a tile differs from the
 * serial factor (on every rank).
 */
int mpib_rep_report(mpib *B, const mpib_rep *r, int64_t rt_msgs,
                    int64_t rt_bytes);

/* Free the problem and finalize MPI. */
void mpib_finish(mpib *B);

#endif /* VF_BENCH_MPI_BENCH_H */
