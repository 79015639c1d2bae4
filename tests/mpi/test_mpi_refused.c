/*
 * test_mpi_refused: what libvarflow-mpi refuses alike on every rank, and
 * that the job goes on after it (varflow_mpi.h, vf_mpi_push: "Refused
 * alike on every rank, before anything is pushed").
 *
 * - Calls in sequence while this thread captures a graph on the engine
 *   (vf_graph_begin): vf_mpi_push, vf_mpi_get, vf_mpi_wait_all and
 *   vf_mpi_var_create are VF_EINVAL, naming the capture, and the capture
 *   goes on (its own ops are kept). vf_mpi_push's transfers were captured,
 *   and a graph launched twice replayed a transfer the first launch had
 *   freed: every rank crashed (found by a user tester).
 * - An op whose lists hold more than VF_MAX_OP_VARS handles is VF_EINVAL
 *   on every rank. The running rank alone refused it (in vf_engine_push),
 *   which cut its data flow for good: every later call there said
 *   VF_ESYSTEM, and vf_mpi_destroy never detached (found by a user
 *   tester, on 1 rank too).
 * After each, a ring of adds over the ranks gives the serial values and
 * every rank detaches cleanly.
 */
#include <stdlib.h>

#include "mpi_test.h"

static int nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

/* A ring: value i on rank i % size, each the one before plus one; every
 * rank gives a buffer for every value (vf_mpi_data finds it there). */
typedef struct ring_op {
    uint64_t *from, *to;
} ring_op;

static int ring_add(vf_run *run, void *arg)
{
    (void)run;
    ring_op *r = arg;
    *r->to = *r->from + 1;
    return 0;
}

static void ring(vf_engine *e)
{
    enum { N = 8 };
    uint64_t buf[N] = {0};
    vf_var v[N];
    for (int i = 0; i < N; i++)
        CHECK_OK(vf_mpi_var_create(e, &v[i], &buf[i], sizeof buf[i],
                                   i % test_size_));
    for (int i = 1; i < N; i++) {
        ring_op r = {.from = &buf[i - 1], .to = &buf[i]};
        CHECK_OK(vf_mpi_push(e,
                             &(vf_op){.fn = ring_add,
                                      .arg = &r,
                                      .arg_size = sizeof r,
                                      .reads = VF_VARS(v[i - 1]),
                                      .writes = VF_VARS(v[i])},
                             i % test_size_));
    }
    vf_error err;
    CHECK_OK(vf_mpi_get(e, v[N - 1], VF_MPI_ALL, &err));
    CHECK_EQ(buf[N - 1], N - 1);
    CHECK_OK(vf_mpi_wait_all(e, &err));
    for (int i = 0; i < N; i++)
        CHECK_OK(vf_mpi_var_destroy(e, v[i]));
    CHECK_OK(vf_mpi_wait_all(e, &err));
}

static bool names_capture(void)
{
    return strstr(vf_error_detail(), "captures a graph") != NULL;
}

static void calls_in_a_capture(int i)
{
    vf_engine *e = mpi_test_attached(i);
    uint64_t a = 0;
    vf_var v = mpi_test_var(e, &a, sizeof a, 0);
    vf_var local = {0};
    CHECK_OK(vf_var_create(e, &local));
    CHECK_OK(vf_graph_begin(e));
    CHECK_ERR(
        vf_mpi_push(e, &(vf_op){.fn = nop, .writes = VF_VARS(v)}, VF_MPI_OWNER),
        VF_EINVAL);
    CHECK(names_capture());
    vf_error err;
    CHECK_ERR(vf_mpi_get(e, v, VF_MPI_ALL, &err), VF_EINVAL);
    CHECK(names_capture());
    CHECK_ERR(vf_mpi_wait_all(e, &err), VF_EINVAL);
    CHECK(names_capture());
    vf_var made = {0};
    uint64_t made_buf = 0;
    CHECK_ERR(vf_mpi_var_create(e, &made, &made_buf, 8, 0), VF_EINVAL);
    CHECK(names_capture());
    /* The capture goes on: its own op is kept. */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nop, .writes = VF_VARS(local)}));
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    CHECK_EQ(vf_graph_ops(g), 1);
    for (int k = 0; k < 3; k++)
        CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_graph_destroy(e, g));
    ring(e);
    CHECK_OK(vf_mpi_destroy(e, &err));
    CHECK_OK(vf_engine_destroy(e));
}

static void too_many_handles(int i)
{
    vf_engine *e = mpi_test_attached(i);
    uint64_t a = 0;
    vf_var v = mpi_test_var(e, &a, sizeof a, test_size_ - 1);
    vf_var *many = calloc((size_t)VF_MAX_OP_VARS + 1, sizeof *many);
    REQUIRE(many != NULL);
    for (int k = 0; k <= VF_MAX_OP_VARS; k++)
        many[k] = v;
    CHECK_ERR(vf_mpi_push(e,
                          &(vf_op){.fn = nop,
                                   .reads = {many, VF_MAX_OP_VARS},
                                   .writes = VF_VARS(v)},
                          VF_MPI_OWNER),
              VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "VF_MAX_OP_VARS") != NULL);
    free(many);
    ring(e);
    vf_error err;
    CHECK_OK(vf_mpi_destroy(e, &err));
    CHECK_OK(vf_engine_destroy(e));
}

int main(int argc, char **argv)
{
    mpi_test_begin(&argc, &argv);
    for (int i = 0; i < 2; i++) {
        calls_in_a_capture(i);
        too_many_handles(i);
    }
    return mpi_test_end("test_mpi_refused");
}
