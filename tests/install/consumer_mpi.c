/*
 * consumer_mpi.c: a program that lives outside the varflow tree and is built
 * against an *installed* libvarflow-mpi by scripts/check-install: through
 * `pkg-config --cflags --libs varflow-mpi` and through a CMake project that
 * links varflow::mpi (CMakeLists.txt beside this file), each against the
 * shared and the static library, and run on 2 ranks (mpirun -np 2).
 *
 * It checks that the installed header, both libraries and MPI's flags work
 * together. The program starts MPI itself and calls MPI directly too, so
 * the flags must bring MPI's headers and library, not only varflow's. Each
 * rank owns one distributed int, x[r] = 10 * (r + 1); one op, x[0] +=
 * x[1 % size], runs on rank 0 and reads rank 1's var, whose value comes in
 * a message. After vf_mpi_wait_all, vf_mpi_get brings x[0] to every rank,
 * and every rank checks it: 10 + 20 = 30 on 2 ranks (20 on 1). It is built
 * with -std=c11 -Wall -Wextra -Wpedantic -Werror, so a public header that
 * is not warning-clean for users fails here too.
 */
#include <stdio.h>
#include <stdlib.h>

#include <varflow_mpi.h>

typedef struct add_arg {
    vf_engine *e;
    vf_var out; /* x[0] += in */
    vf_var in;
} add_arg;

/* The buffers come from vf_mpi_data: the owner's on the owner, the copy
 * that arrived elsewhere. */
static int op_add(vf_run *run, void *arg)
{
    const add_arg *a = arg;
    int *out = vf_mpi_data(a->e, a->out);
    const int *in = vf_mpi_data(a->e, a->in);
    (void)run;
    if (out == NULL || in == NULL)
        return 1;
    *out += *in;
    return 0;
}

static void fail(const char *what, int rc)
{
    fprintf(stderr, "consumer_mpi: %s: %s (%s) %s\n", what, vf_error_name(rc),
            vf_error_string(rc), vf_error_detail());
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

int main(int argc, char **argv)
{
    /* MPI started here: vf_mpi_create then leaves MPI_Finalize to us. */
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS) {
        fprintf(stderr, "consumer_mpi: MPI_Init_thread failed\n");
        return 1;
    }
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);

    vf_engine *e = NULL;
    vf_config cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2};
    int rc = vf_engine_create(&e, &cfg);
    if (rc != 0)
        fail("vf_engine_create", rc);
    if ((rc = vf_mpi_create(e, MPI_COMM_WORLD)) != 0)
        fail("vf_mpi_create", rc);
    int rank = vf_mpi_rank(e), size = vf_mpi_size(e);

    /* One var per rank, owned by it; the other ranks pass no buffer. */
    int mine = 10 * (rank + 1);
    vf_var *x = malloc(sizeof *x * (size_t)size);
    if (x == NULL)
        fail("malloc", VF_ENOMEM);
    for (int r = 0; r < size; r++)
        if ((rc = vf_mpi_var_create(e, &x[r], r == rank ? &mine : NULL,
                                    sizeof(int), r)) != 0)
            fail("vf_mpi_var_create", rc);

    /* Pushed by every rank alike; runs on rank 0, the owner of x[0]. */
    int other = 1 % size;
    add_arg arg = {.e = e, .out = x[0], .in = x[other]};
    vf_op op = {.fn = op_add,
                .arg = &arg,
                .reads = VF_VARS(x[other]),
                .writes = VF_VARS(x[0]),
                .name = "x0+=x1"};
    if ((rc = vf_mpi_push(e, &op, VF_MPI_OWNER)) != 0)
        fail("vf_mpi_push", rc);

    vf_error err = {0};
    if ((rc = vf_mpi_wait_all(e, &err)) != 0) {
        fprintf(stderr, "consumer_mpi: rank %d: op %s failed: %s\n", rank,
                err.op_name, err.message);
        fail("vf_mpi_wait_all", rc);
    }
    if ((rc = vf_mpi_get(e, x[0], VF_MPI_ALL, &err)) != 0)
        fail("vf_mpi_get", rc);
    const int *x0 = vf_mpi_data(e, x[0]);
    int want = 10 + 10 * (other + 1);
    int ok = x0 != NULL && *x0 == want;
    vf_mpi_stats total;
    if ((rc = vf_mpi_stats_total(e, &total)) != 0)
        fail("vf_mpi_stats_total", rc);
    int got = x0 != NULL ? *x0 : -1;

    if ((rc = vf_mpi_destroy(e, &err)) != 0)
        fail("vf_mpi_destroy", rc);
    for (int r = 0; r < size; r++)
        if ((rc = vf_var_destroy(e, x[r], NULL, NULL)) != 0)
            fail("vf_var_destroy", rc);
    if ((rc = vf_engine_destroy(e)) != 0)
        fail("vf_engine_destroy", rc);
    free(x);

    /* Detached: the program's own MPI calls are its own again. */
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("consumer_mpi: varflow %d.%d.%d, %d rank(s): x0 = 10 + %d = "
               "%d (want %d), %llu message(s): %s\n",
               VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH, size,
               10 * (other + 1), got, want, (unsigned long long)total.sends,
               all_ok ? "ok" : "FAILED");
    else if (!ok)
        fprintf(stderr, "consumer_mpi: rank %d: x0 = %d (want %d)\n", rank, got,
                want);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
