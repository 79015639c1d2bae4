/*
 * mpi_test.h: what every libvarflow-mpi test shares. Each test is one
 * program that mpirun starts on 1, 2 and 4 ranks (tests/CMakeLists.txt);
 * every rank runs it whole, as a user's program would.
 *
 * The seed is rank 0's (VF_TEST_SEED or the clock), broadcast, so every
 * rank draws the same random program. Every failure names its rank, and
 * the verdict is agreed: a check that failed on any rank fails the test on
 * every rank.
 */
#ifndef VF_MPI_TEST_H
#define VF_MPI_TEST_H

#include <string.h>

#include <varflow_mpi.h>

#include "check.h"

static int test_rank_, test_size_;
static char test_context_[64];

static inline void mpi_test_begin(int *argc, char ***argv)
{
    /* The tests sum counts with MPI while engines are attached, which
     * (varflow_mpi.h) needs MPI_THREAD_MULTIPLE. */
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "this MPI lacks MPI_THREAD_MULTIPLE, which the "
                        "tests need\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &test_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &test_size_);
    uint64_t seed = check_seed();
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    check_seed_ = seed;
    snprintf(test_context_, sizeof test_context_, "rank %d of %d", test_rank_,
             test_size_);
    check_context_ = test_context_;
}

/* A pooled or per-device engine with two workers (alternating by `i`). */
static inline vf_engine *mpi_test_engine(int i)
{
    vf_config c = {.type = i % 2 ? VF_ENGINE_POOLED : VF_ENGINE_PERDEVICE,
                   .cpu_workers = 2};
    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, &c);
    if (rc != 0) {
        fprintf(stderr, "vf_engine_create: %s\n", vf_error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return e;
}

/* mpi_test_engine(i), attached to MPI_COMM_WORLD. */
static inline vf_engine *mpi_test_attached(int i)
{
    vf_engine *e = mpi_test_engine(i);
    CHECK_OK(vf_mpi_create(e, MPI_COMM_WORLD));
    return e;
}

/* A distributed var of `size` bytes owned by `owner`, whose buffer there
 * is `buf` (this rank's own, unused elsewhere). */
static inline vf_var mpi_test_var(vf_engine *e, void *buf, size_t size,
                                  int owner)
{
    vf_var v = {0};
    CHECK_OK(vf_mpi_var_create(e, &v, test_rank_ == owner ? buf : NULL, size,
                               owner));
    return v;
}

/* Sum a count over the ranks. */
static inline uint64_t mpi_test_sum(uint64_t mine)
{
    uint64_t all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

static inline int mpi_test_end(const char *test)
{
    int mine = atomic_load(&check_failures_), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (all != 0 && mine == 0)
        fprintf(stderr, "%s: %d check(s) failed on other ranks\n", test, all);
    if (all == 0 && test_rank_ == 0)
        printf("%s: ok on %d rank(s) (seed %" PRIu64 ")\n", test, test_size_,
               check_seed_);
    else if (mine != 0)
        check_finish(test);
    return all ? 1 : 0;
}

#endif /* VF_MPI_TEST_H */
