/*
 * The shared part of the W6-across-ranks benchmarks (see mpi_bench.h): the
 * problem, the serial factor and the check, the timing and the report, and
 * the message counters.
 *
 * The counters use MPI's profiling interface: this file defines the MPI
 * send calls, counts, and forwards to their PMPI_ twins. The definitions
 * in the executable take the place of the MPI library's for every caller
 * in the process, the runtime's libraries included, so both runtimes are
 * counted by the same code and no runtime's own statistics need be
 * trusted. Collectives are not wrapped: Open MPI runs them below the
 * MPI_ layer, and the benchmark's barrier and reductions fall outside the
 * counted window anyway. Persistent sends (MPI_Send_init and kin) would be
 * counted at MPI_Start, which needs the request's size remembered; they
 * are counted apart at creation instead, and a run where any appear says so
 * on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include "mpi_bench.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- message counters (PMPI) -------------------------------------------- */

/* Relaxed: plain event counts, read after the traffic they count has
 * completed (after the runtime's wait, which synchronizes with its
 * communication thread). */
static _Atomic uint64_t sent_msgs, sent_bytes, sent_tile_msgs, sent_tile_bytes;
static _Atomic uint64_t persistent_sends;
/* Bytes of one tile; set by mpib_init before any runtime starts. A message
 * of at least that many bytes carries a tile (varflow-mpi sends a header
 * in the same message, StarPU-MPI an envelope in a message of its own). */
static uint64_t tile_payload = UINT64_MAX;

static void count_send(int count, MPI_Datatype type)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    uint64_t bytes = (uint64_t)count * (uint64_t)size;
    atomic_fetch_add_explicit(&sent_msgs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&sent_bytes, bytes, memory_order_relaxed);
    if (bytes >= tile_payload) {
        atomic_fetch_add_explicit(&sent_tile_msgs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&sent_tile_bytes, bytes,
                                  memory_order_relaxed);
    }
}

#define MPIB_WRAP_SEND(name)                                                   \
    int MPI_##name(const void *buf, int count, MPI_Datatype type, int dest,    \
                   int tag, MPI_Comm comm)                                     \
    {                                                                          \
        count_send(count, type);                                               \
        return PMPI_##name(buf, count, type, dest, tag, comm);                 \
    }
#define MPIB_WRAP_ISEND(name)                                                  \
    int MPI_##name(const void *buf, int count, MPI_Datatype type, int dest,    \
                   int tag, MPI_Comm comm, MPI_Request *req)                   \
    {                                                                          \
        count_send(count, type);                                               \
        return PMPI_##name(buf, count, type, dest, tag, comm, req);            \
    }
#define MPIB_WRAP_PERSISTENT(name)                                             \
    int MPI_##name(const void *buf, int count, MPI_Datatype type, int dest,    \
                   int tag, MPI_Comm comm, MPI_Request *req)                   \
    {                                                                          \
        atomic_fetch_add_explicit(&persistent_sends, 1, memory_order_relaxed); \
        return PMPI_##name(buf, count, type, dest, tag, comm, req);            \
    }

MPIB_WRAP_SEND(Send)
MPIB_WRAP_SEND(Ssend)
MPIB_WRAP_SEND(Rsend)
MPIB_WRAP_SEND(Bsend)
MPIB_WRAP_ISEND(Isend)
MPIB_WRAP_ISEND(Issend)
MPIB_WRAP_ISEND(Irsend)
MPIB_WRAP_ISEND(Ibsend)
MPIB_WRAP_PERSISTENT(Send_init)
MPIB_WRAP_PERSISTENT(Ssend_init)
MPIB_WRAP_PERSISTENT(Rsend_init)
MPIB_WRAP_PERSISTENT(Bsend_init)

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest,
                 int stag, void *rbuf, int rcount, MPI_Datatype rtype,
                 int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    count_send(scount, stype);
    return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype,
                         source, rtag, comm, status);
}

static void counts_now(mpib_counts *c)
{
    c->msgs = atomic_load_explicit(&sent_msgs, memory_order_relaxed);
    c->bytes = atomic_load_explicit(&sent_bytes, memory_order_relaxed);
    c->tile_msgs = atomic_load_explicit(&sent_tile_msgs, memory_order_relaxed);
    c->tile_bytes = atomic_load_explicit(&sent_tile_bytes,
                                         memory_order_relaxed);
}

/* ---- the problem -------------------------------------------------------- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* p x q = size, p <= q, p the largest divisor of size up to its root. */
static void grid(int size, int *p, int *q)
{
    *p = 1;
    for (int d = 1; d * d <= size; d++)
        if (size % d == 0)
            *p = d;
    *q = size / *p;
}

int mpib_owner_2d(int size, int i, int j)
{
    int p, q;
    grid(size, &p, &q);
    return (i % p) * q + (j % q);
}

int mpib_kernel(const chol_task *t, double *const *tiles, int b)
{
    int reads[2][2], nreads, wi, wj;
    chol_task_tiles(t, reads, &nreads, &wi, &wj);
    return chol_run_tiles(t, (const double *const *)tiles, tiles[nreads], b);
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > (1L << 30))
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(mpib *B, int argc, char **argv)
{
    B->warmup = 1;
    if (argc < 5 || argc > 6 || parse_int(argv[1], 1, &B->n) != 0 ||
        parse_int(argv[2], 1, &B->b) != 0 ||
        parse_int(argv[3], 1, &B->reps) != 0 ||
        parse_int(argv[4], 1, &B->workers) != 0 ||
        (argc == 6 && parse_int(argv[5], 0, &B->warmup) != 0))
        return -1;
    return B->n % B->b == 0 ? 0 : -1;
}

/* Every rank factors the input alone, in the task list's order: the
 * reference each owner's tiles must equal bit for bit. */
static int serial_factor(mpib *B)
{
    memcpy(B->ref.data, B->mat0.data, chol_matrix_bytes(&B->mat0));
    for (size_t t = 0; t < B->ntasks; t++)
        if (chol_run(&B->ref, &B->tasks[t]) != 0)
            return -1;
    return 0;
}

int mpib_init(mpib *B, int *argc, char ***argv, const char *engine,
              mpib_owner_fn owner)
{
    memset(B, 0, sizeof *B);
    B->engine = engine;
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &B->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &B->size);
    const char *why = NULL;
    if (parse_args(B, *argc, *argv) != 0)
        why = "usage";
    else if (provided < MPI_THREAD_MULTIPLE)
        why = "MPI does not provide MPI_THREAD_MULTIPLE";
    if (why) {
        if (B->rank == 0 && strcmp(why, "usage") == 0)
            fprintf(stderr,
                    "usage: mpirun -np R %s N B REPS WORKERS [WARMUP]\n"
                    "  N a multiple of B; WORKERS: worker threads per rank\n",
                    (*argv)[0]);
        else if (B->rank == 0)
            fprintf(stderr, "%s: %s\n", engine, why);
        MPI_Finalize();
        return -1;
    }
    chol_init();
    B->ntiles = B->n / B->b;
    tile_payload = (uint64_t)B->b * (uint64_t)B->b * sizeof(double);
    B->ntasks = chol_tasks(B->ntiles, NULL);
    B->tasks = malloc(B->ntasks * sizeof *B->tasks);
    B->owner = malloc(chol_num_tiles(B->ntiles) * sizeof *B->owner);
    int ok = B->tasks && B->owner &&
             chol_matrix_alloc(&B->mat0, B->ntiles, B->b) == 0 &&
             chol_matrix_alloc(&B->mat, B->ntiles, B->b) == 0 &&
             chol_matrix_alloc(&B->ref, B->ntiles, B->b) == 0;
    if (ok) {
        chol_tasks(B->ntiles, B->tasks);
        for (int i = 0; i < B->ntiles; i++)
            for (int j = 0; j <= i; j++)
                B->owner[chol_tile_index(B->ntiles, i, j)] = owner(B->size, i,
                                                                   j);
        chol_matrix_fill_spd(&B->mat0, 0x5eed0006); /* W6's seed */
        ok = serial_factor(B) == 0;
    }
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all_ok) {
        if (B->rank == 0)
            fprintf(stderr, "%s: out of memory, or the serial factor failed\n",
                    engine);
        mpib_finish(B);
        return -1;
    }
    return 0;
}

#ifdef VF_CHOL_CBLAS
#define MPIB_KERNELS "OpenBLAS + LAPACKE, one thread"
#else
#define MPIB_KERNELS "plain C loops"
#endif

void mpib_info(const mpib *B, const char *runtime, const char *rt_counts)
{
    if (B->rank != 0)
        return;
    int p, q;
    grid(B->size, &p, &q);
    printf("{\"type\":\"info\",\"engine\":\"%s\",\"rank_count\":%d,"
           "\"workers\":%d,\"n\":%d,\"b\":%d,\"tiles\":%zu,\"tasks\":%zu,"
           "\"grid_p\":%d,\"grid_q\":%d,\"gflop\":%.6f,\"runtime\":\"%s\","
           "\"kernels\":\"" MPIB_KERNELS "\","
           "\"counts\":\"point-to-point sends counted through the MPI "
           "profiling interface (every MPI_*send of the process)\","
           "\"rt_counts\":\"%s\"}\n",
           B->engine, B->size, B->workers, B->n, B->b,
           chol_num_tiles(B->ntiles), B->ntasks, p, q, chol_flops(B->n) * 1e-9,
           runtime, rt_counts);
    fflush(stdout);
}

void mpib_reset(mpib *B)
{
    memcpy(B->mat.data, B->mat0.data, chol_matrix_bytes(&B->mat0));
}

void mpib_rep_start(mpib_rep *r, int index)
{
    r->index = index;
    counts_now(&r->c0);
    MPI_Barrier(MPI_COMM_WORLD);
    r->t0 = now();
}

void mpib_rep_stop(mpib_rep *r)
{
    r->seconds = now() - r->t0;
    counts_now(&r->c1);
}

/* This rank's tiles against the serial factor: the largest absolute
 * difference (NaN wins) and how many tiles differ in any bit. */
static void check_tiles(const mpib *B, double *max_diff, long *differing)
{
    size_t bb = (size_t)B->b * (size_t)B->b;
    *max_diff = 0.0;
    *differing = 0;
    for (int i = 0; i < B->ntiles; i++) {
        for (int j = 0; j <= i; j++) {
            if (mpib_owner(B, i, j) != B->rank)
                continue;
            const double *a = chol_tile(&B->mat, i, j);
            const double *r = chol_tile(&B->ref, i, j);
            if (memcmp(a, r, bb * sizeof *a) == 0)
                continue;
            (*differing)++;
            for (size_t e = 0; e < bb; e++) {
                double d = fabs(a[e] - r[e]);
                if (!(d <= *max_diff))
                    *max_diff = d;
            }
        }
    }
}

int mpib_rep_report(mpib *B, const mpib_rep *r, int64_t rt_msgs,
                    int64_t rt_bytes)
{
    double diff, max_diff, seconds;
    long differing, all_differing;
    check_tiles(B, &diff, &differing);
    uint64_t mine[4] = {r->c1.msgs - r->c0.msgs, r->c1.bytes - r->c0.bytes,
                        r->c1.tile_msgs - r->c0.tile_msgs,
                        r->c1.tile_bytes - r->c0.tile_bytes};
    uint64_t sums[4];
    /* -1 (unknown) on any rank makes the sum unknown. */
    int64_t rt[2] = {rt_msgs, rt_bytes}, rt_sum[2], rt_min[2];
    MPI_Reduce(&r->seconds, &seconds, 1, MPI_DOUBLE, MPI_MAX, 0,
               MPI_COMM_WORLD);
    MPI_Reduce(mine, sums, 4, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(rt, rt_sum, 2, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(rt, rt_min, 2, MPI_INT64_T, MPI_MIN, 0, MPI_COMM_WORLD);
    /* MPI_MAX may drop a NaN: whether the factor is the serial one is
     * decided by the count of differing tiles, never by the difference. */
    MPI_Reduce(&diff, &max_diff, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&differing, &all_differing, 1, MPI_LONG, MPI_SUM,
                  MPI_COMM_WORLD);
    if (B->rank == 0) {
        for (int k = 0; k < 2; k++)
            if (rt_min[k] < 0)
                rt_sum[k] = -1;
        char diff_text[32] = "null"; /* JSON has no NaN */
        if (isfinite(max_diff))
            snprintf(diff_text, sizeof diff_text, "%.17g", max_diff);
        printf("{\"type\":\"rep\",\"engine\":\"%s\",\"rank_count\":%d,"
               "\"workers\":%d,\"n\":%d,\"b\":%d,\"rep\":%d,\"warmup\":%s,"
               "\"seconds\":%.6f,\"gflops\":%.4f,\"msgs\":%" PRIu64
               ",\"bytes\":%" PRIu64 ",\"tile_msgs\":%" PRIu64
               ",\"tile_bytes\":%" PRIu64 ",\"rt_msgs\":%" PRId64
               ",\"rt_bytes\":%" PRId64 ",\"max_abs_diff\":%s,"
               "\"tiles_differing\":%ld}\n",
               B->engine, B->size, B->workers, B->n, B->b, r->index,
               r->index < B->warmup ? "true" : "false", seconds,
               chol_flops(B->n) / seconds * 1e-9, sums[0], sums[1], sums[2],
               sums[3], rt_sum[0], rt_sum[1], diff_text, all_differing);
        fflush(stdout);
    }
    uint64_t persistent = atomic_load_explicit(&persistent_sends,
                                               memory_order_relaxed);
    if (persistent)
        fprintf(stderr,
                "%s: rank %d created %" PRIu64 " persistent sends, which the "
                "message counts leave out\n",
                B->engine, B->rank, persistent);
    return all_differing ? 1 : 0;
}

void mpib_finish(mpib *B)
{
    chol_matrix_free(&B->mat0);
    chol_matrix_free(&B->mat);
    chol_matrix_free(&B->ref);
    free(B->tasks);
    free(B->owner);
    MPI_Finalize();
}
