/*
 * test_mpi_cholesky: the tiled Cholesky factorization on 2D block-cyclic
 * tiles gives the serial factor bit for bit on 1, 2 and 4 ranks, with
 * exactly the messages the data flow needs.
 *
 * Every rank fills the same matrix and factors it serially (the
 * reference); then the tiles become distributed variables, every rank
 * pushes every task (examples/cholesky_mpi.h), and after vf_mpi_wait_all
 * each owner's tiles must equal the reference byte for byte. Then rank 0
 * gets every tile (vf_mpi_get) and checks the whole factor.
 */
#include <stdlib.h>
#include <string.h>

#include "cholesky_mpi.h"
#include "mpi_test.h"
#include <varflow_profile.h>

static void factor(int ntiles, int b, int engine_kind)
{
    chol_matrix serial, dist;
    REQUIRE(chol_matrix_alloc(&serial, ntiles, b) == 0);
    REQUIRE(chol_matrix_alloc(&dist, ntiles, b) == 0);
    chol_matrix_fill_spd(&serial, 42);
    chol_matrix_fill_spd(&dist, 42);
    size_t n = chol_tasks(ntiles, NULL);
    chol_task *tasks = malloc(sizeof *tasks * n);
    REQUIRE(tasks);
    chol_tasks(ntiles, tasks);
    for (size_t t = 0; t < n; t++)
        REQUIRE(chol_run(&serial, &tasks[t]) == 0);
    free(tasks);

    size_t ntile = chol_num_tiles(ntiles);
    vf_var *vars = malloc(sizeof *vars * ntile);
    REQUIRE(vars);
    vf_engine *e = mpi_test_attached(engine_kind);
    CHECK_OK(chol_mpi_vars(e, &dist, vars));
    bool profiled = engine_kind == 1; /* transfer ops recorded too */
    if (profiled)
        CHECK_OK(vf_profile_start(e));
    CHECK_OK(chol_mpi_push_all(e, vars, ntiles, b));
    vf_error err;
    CHECK_OK(vf_mpi_wait_all(e, &err));

    size_t tile_bytes = (size_t)b * (size_t)b * sizeof(double);
    int differ = 0, owned = 0;
    for (int i = 0; i < ntiles; i++) {
        for (int j = 0; j <= i; j++) {
            if (vf_mpi_owner_2d(test_size_, i, j) != test_rank_)
                continue;
            owned++;
            differ += memcmp(chol_tile(&dist, i, j), chol_tile(&serial, i, j),
                             tile_bytes) != 0;
        }
    }
    CHECK_EQ(differ, 0);
    CHECK_EQ(mpi_test_sum((uint64_t)owned), ntile);

    vf_mpi_stats st;
    CHECK_OK(vf_mpi_stats_local(e, &st));
    uint64_t sends = mpi_test_sum(st.sends);
    uint64_t expected = chol_mpi_min_messages(ntiles, test_size_);
    CHECK_EQ(sends, expected);
    CHECK_EQ(mpi_test_sum(st.recvs), expected);
    CHECK_EQ(mpi_test_sum(st.bytes_sent), expected * tile_bytes);
    CHECK_EQ(mpi_test_sum(st.ops_here), chol_tasks(ntiles, NULL));
    vf_mpi_stats total; /* the library's own sum over the ranks */
    CHECK_OK(vf_mpi_stats_total(e, &total));
    CHECK_EQ(total.sends, sends);
    CHECK_EQ(total.bytes_received, expected * tile_bytes);
    CHECK_EQ(total.ops_here, chol_tasks(ntiles, NULL));
    CHECK_EQ(total.ops_elsewhere,
             (uint64_t)(test_size_ - 1) * chol_tasks(ntiles, NULL));
    if (profiled) {
        /* The profiler recorded every transfer op by its name. */
        vf_profile *p = NULL;
        CHECK_OK(vf_profile_take(e, &p));
        uint64_t sends_seen = 0, recvs_seen = 0;
        for (size_t i = 0; p != NULL && i < vf_profile_count(p); i++) {
            const char *name = vf_profile_at(p, i)->name;
            sends_seen += strncmp(name, "mpi send v", 10) == 0;
            recvs_seen += strncmp(name, "mpi recv v", 10) == 0;
        }
        CHECK_EQ(sends_seen, st.sends);
        CHECK_EQ(recvs_seen, st.recvs);
        vf_profile_destroy(p);
        CHECK_OK(vf_profile_stop(e));
    }
    if (test_rank_ == 0)
        printf("cholesky %d x %d tiles of %d on %d ranks: %llu messages "
               "(the minimum is %llu)\n",
               ntiles, ntiles, b, test_size_, (unsigned long long)sends,
               (unsigned long long)expected);

    /* The whole factor on rank 0. */
    for (size_t t = 0; t < ntile; t++)
        CHECK_OK(vf_mpi_get(e, vars[t], 0, &err));
    if (test_rank_ == 0) {
        for (int i = 0; i < ntiles; i++)
            for (int j = 0; j <= i; j++) {
                const double *got = vf_mpi_data(
                    e, vars[chol_tile_index(ntiles, i, j)]);
                REQUIRE(got != NULL);
                CHECK(memcmp(got, chol_tile(&serial, i, j), tile_bytes) == 0);
            }
    }
    CHECK_OK(vf_mpi_destroy(e, &err));
    for (size_t t = 0; t < ntile; t++)
        CHECK_OK(vf_var_destroy(e, vars[t], NULL, NULL));
    CHECK_OK(vf_engine_destroy(e));
    free(vars);
    chol_matrix_free(&serial);
    chol_matrix_free(&dist);
}

int main(int argc, char **argv)
{
    mpi_test_begin(&argc, &argv);
    chol_init();
    factor(8, 32, 0);
    factor(6, 48, 1);
    return mpi_test_end("test_mpi_cholesky");
}
