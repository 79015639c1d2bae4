/*
 * test_mpi_failure: a failure travels with the data across ranks, and bad
 * input is refused alike on every rank.
 *
 * A chain of ops hops from rank to rank, each reading the previous one's
 * variable and writing its own; one of them fails. The ops after it are
 * skipped wherever they run (their done gets VF_ESKIPPED), every rank's
 * vf_mpi_wait_all returns VF_EOPFAILED naming the op that failed, and the
 * next round, after the wait cleared the failure, runs normally. A value
 * that carries a failure reaches vf_mpi_get as VF_EOPFAILED too. Stand-ins
 * for ops only the running rank refused keep push order; a variable the
 * core's vf_var_destroy deleted is refused alike on every rank without
 * cutting the flow; a value written away goes home before its delete.
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_test.h"

typedef struct hop {
    vf_var in, out;
    bool fail;
    int *skipped, *ran;
} hop;

static int hop_fn(vf_run *run, void *arg)
{
    hop *h = arg;
    vf_engine *e = vf_run_engine(run);
    int64_t *out = vf_mpi_data(e, h->out);
    const int64_t *in = h->in.id ? vf_mpi_data(e, h->in) : NULL;
    if (out == NULL || (h->in.id && in == NULL))
        return VF_EINVAL;
    if (h->fail) {
        vf_run_set_error(run, "hop failed on purpose");
        return -42;
    }
    *out = (in ? *in : 0) + 1;
    return 0;
}

static void hop_done(void *arg, int status)
{
    hop *h = arg;
    if (status == VF_ESKIPPED)
        __atomic_fetch_add(h->skipped, 1, __ATOMIC_RELAXED);
    else if (status == 0)
        __atomic_fetch_add(h->ran, 1, __ATOMIC_RELAXED);
    free(h);
}

/* A chain of `n` hops, hop i on rank i % size writing v[i]; hop `bad` (or
 * none when -1) fails. Returns after vf_mpi_wait_all, whose result it
 * checks; counts skipped and ran hops of this rank. */
static void chain(vf_engine *e, vf_var *v, int n, int bad, int *skipped,
                  int *ran)
{
    for (int i = 0; i < n; i++) {
        hop *h = malloc(sizeof *h);
        REQUIRE(h);
        *h = (hop){.in = i ? v[i - 1] : (vf_var){0},
                   .out = v[i],
                   .fail = i == bad,
                   .skipped = skipped,
                   .ran = ran};
        vf_op op = {.fn = hop_fn,
                    .arg = h,
                    .done = hop_done,
                    .reads = {i ? &v[i - 1] : NULL, i ? 1 : 0},
                    .writes = {&v[i], 1},
                    .name = i == bad ? "bad hop" : "hop"};
        CHECK_OK(vf_mpi_push(e, &op, VF_MPI_OWNER));
    }
}

static void failure_travels(int kind)
{
    enum { N = 12 };
    int64_t vals[N] = {0};
    vf_var v[N];
    vf_engine *e = mpi_test_attached(kind);
    for (int i = 0; i < N; i++)
        CHECK_OK(vf_mpi_var_create(
            e, &v[i], i % test_size_ == test_rank_ ? &vals[i] : NULL,
            sizeof(int64_t), i % test_size_));
    /* Round 1: hop 3 fails; hops 4.. are skipped on whatever rank. */
    int skipped = 0, ran = 0, bad = 3;
    chain(e, v, N, bad, &skipped, &ran);
    vf_error err;
    memset(&err, 0, sizeof err);
    CHECK_ERR(vf_mpi_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, -42);
    CHECK(strcmp(err.op_name, "bad hop") == 0);
    CHECK(strcmp(err.message, "hop failed on purpose") == 0);
    int mine_skipped = 0, mine_ran = 0;
    for (int i = 0; i < N; i++) {
        if (i % test_size_ != test_rank_)
            continue;
        mine_skipped += i > bad;
        mine_ran += i < bad;
    }
    CHECK_EQ(skipped, mine_skipped);
    CHECK_EQ(ran, mine_ran);
    CHECK_EQ(mpi_test_sum((uint64_t)skipped), N - bad - 1);
    vf_mpi_stats st;
    CHECK_OK(vf_mpi_stats_local(e, &st));
    /* With more than one rank the failed value left its rank: the hop
     * after the bad one, on the next rank, got it with the failure. */
    CHECK_EQ(mpi_test_sum(st.failures_sent), test_size_ > 1 ? N - bad - 1 : 0);

    /* Round 2: the wait cleared the failures; everything runs. */
    skipped = ran = 0;
    chain(e, v, N, -1, &skipped, &ran);
    CHECK_OK(vf_mpi_wait_all(e, &err));
    CHECK_EQ(skipped, 0);
    for (int i = 0; i < N; i++)
        if (i % test_size_ == test_rank_)
            CHECK_EQ(vals[i], i + 1);

    /* Round 3: the failure reaches vf_mpi_get on every rank, with the
     * failing op's own name and code. */
    skipped = ran = 0;
    chain(e, v, 2, 1, &skipped, &ran);
    memset(&err, 0, sizeof err);
    CHECK_ERR(vf_mpi_get(e, v[1], VF_MPI_ALL, &err), VF_EOPFAILED);
    CHECK(strcmp(err.op_name, "bad hop") == 0);
    CHECK_EQ(err.code, -42);
    /* That wait reported it on every rank: nothing is left to report. */
    CHECK_OK(vf_mpi_wait_all(e, &err));

    CHECK_OK(vf_mpi_destroy(e, &err));
    CHECK_OK(vf_engine_destroy(e));
}

static int nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static void nop_async(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    (void)arg;
    vf_completion_finish(done, 0, NULL);
}

static int slow_nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, NULL);
    return 0;
}

/* Rank 0 owns every item but item 2, whose owner is no rank. */
static int bad_third(int index, void *arg)
{
    (void)arg;
    return index == 2 ? -1 : 0;
}

static void bad_input(void)
{
    /* A grid of fewer than one rank is 1 x 1. */
    int gp = 0, gq = 0;
    vf_mpi_grid(0, &gp, &gq);
    CHECK(gp == 1 && gq == 1);
    vf_mpi_grid(-3, &gp, &gq);
    CHECK(gp == 1 && gq == 1);
    vf_engine *e = mpi_test_engine(0);
    vf_var local, d;
    int64_t x = 0;
    /* Not attached yet. */
    CHECK_ERR(vf_mpi_var_create(e, &d, &x, sizeof x, 0), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "vf_mpi_create") != NULL);
    CHECK_ERR(vf_mpi_create(NULL, MPI_COMM_WORLD), VF_EINVAL);
    CHECK_ERR(vf_mpi_create(e, MPI_COMM_NULL), VF_EINVAL);
    CHECK_OK(vf_mpi_create(e, MPI_COMM_WORLD));
    CHECK_ERR(vf_mpi_create(e, MPI_COMM_WORLD), VF_EINVAL);
    CHECK_EQ(vf_mpi_rank(e), test_rank_);
    CHECK_EQ(vf_mpi_size(e), test_size_);

    CHECK_ERR(vf_mpi_var_create(e, &d, &x, 0, 0), VF_EINVAL);
    CHECK_ERR(vf_mpi_var_create(e, &d, &x, sizeof x, test_size_), VF_EINVAL);
    CHECK_ERR(vf_mpi_var_create(e, &d, &x, sizeof x, -1), VF_EINVAL);
    /* Named as this call, with no index it was never given. */
    CHECK(strstr(vf_error_detail(), "vf_mpi_var_create: owner -1 is not") !=
          NULL);
    CHECK_ERR(vf_mpi_var_create(e, &d, NULL, sizeof x, test_rank_), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "NULL on its owner") != NULL);
    CHECK_OK(
        vf_mpi_var_create(e, &d, test_rank_ == 0 ? &x : NULL, sizeof x, 0));
    CHECK_EQ(vf_mpi_var_owner(e, d), 0);
    /* vf_mpi_vars_create is all or nothing: a bad owner for item 2 of 4
     * refuses the call, and none of the four exists afterwards. */
    vf_var four[4] = {{0}};
    CHECK_ERR(vf_mpi_vars_create(e, four, 4, NULL, sizeof x, bad_third, NULL),
              VF_EINVAL);
    if (strncmp(vf_error_detail(), "vf_mpi_vars_create: ", 20) != 0 ||
        strstr(vf_error_detail(), " of variable ") == NULL)
        CHECK_REPORT_("detail '%s' does not name the call and the variable",
                      vf_error_detail());
    for (int i = 0; i < 4; i++)
        CHECK(vf_mpi_var_owner(e, four[i]) < 0);

    /* A plain var in a distributed push is refused on every rank. */
    CHECK_OK(vf_var_create(e, &local));
    vf_op op = {.fn = nop, .reads = VF_VARS(d), .writes = VF_VARS(local)};
    CHECK_ERR(vf_mpi_push(e, &op, VF_MPI_OWNER), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "writes[0] is not a distributed") != NULL);
    CHECK_ERR(vf_mpi_var_owner(e, local), VF_EINVAL);
    CHECK(vf_mpi_data(e, local) == NULL);
    vf_op two = {.fn = nop, .async_fn = nop_async, .writes = VF_VARS(d)};
    CHECK_ERR(vf_mpi_push(e, &two, VF_MPI_OWNER), VF_EINVAL);
    vf_op ok = {.fn = nop, .writes = VF_VARS(d)};
    CHECK_ERR(vf_mpi_push(e, &ok, test_size_), VF_EINVAL);
    CHECK_ERR(vf_mpi_push(e, &ok, -7), VF_EINVAL);
    CHECK_ERR(vf_mpi_push(e, NULL, VF_MPI_OWNER), VF_EINVAL);
    CHECK_ERR(vf_mpi_get(e, local, VF_MPI_ALL, NULL), VF_EINVAL);
    CHECK_ERR(vf_mpi_get(e, d, test_size_, NULL), VF_EINVAL);
    /* None of that pushed anything: the flow is intact. */
    CHECK_OK(vf_mpi_push(e, &ok, VF_MPI_OWNER));
    CHECK_OK(vf_mpi_get(e, d, VF_MPI_ALL, NULL));
    CHECK(vf_mpi_data(e, d) != NULL);
    CHECK_OK(vf_mpi_var_destroy(e, d));
    CHECK_ERR(vf_mpi_var_destroy(e, d), VF_ESTALE);
    CHECK_ERR(vf_mpi_var_owner(e, d), VF_ESTALE);
    CHECK_ERR(vf_mpi_push(e, &ok, VF_MPI_OWNER), VF_ESTALE);
    CHECK_ERR(vf_mpi_get(e, d, VF_MPI_ALL, NULL), VF_ESTALE);
    CHECK_OK(vf_mpi_wait_all(e, NULL));
    CHECK(vf_mpi_data(e, d) == NULL); /* its delete op ran */
    CHECK(strstr(vf_error_detail(), "was deleted") != NULL);
    /* Before its value came, a rank's buffer is the ptr it gave (the
     * owner's, or a non-owner's own), or NULL when it gave none. */
    int64_t given = 0, owned = 0;
    vf_var with_ptr = {0}, without = {0};
    CHECK_OK(vf_mpi_var_create(e, &with_ptr,
                               test_rank_ == 0 ? (void *)&owned : &given,
                               sizeof owned, 0));
    CHECK_OK(vf_mpi_var_create(e, &without, test_rank_ == 0 ? &owned : NULL,
                               sizeof owned, 0));
    CHECK(vf_mpi_data(e, with_ptr) ==
          (test_rank_ == 0 ? (void *)&owned : (void *)&given));
    CHECK(vf_mpi_data(e, without) == (test_rank_ == 0 ? &owned : NULL));
    CHECK_OK(vf_mpi_var_destroy(e, with_ptr));
    CHECK_OK(vf_mpi_var_destroy(e, without));
    CHECK_OK(vf_mpi_wait_all(e, NULL));
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_ERR(vf_mpi_destroy(e, NULL), VF_EINVAL);
    CHECK_OK(vf_var_destroy(e, local, NULL, NULL));
    CHECK_OK(vf_engine_destroy(e));

    /* The naive engine runs ops inside the push: it cannot wait there for
     * another rank, so it is refused. */
    vf_config c = {.type = VF_ENGINE_NAIVE};
    CHECK_OK(vf_engine_create(&e, &c));
    CHECK_ERR(vf_mpi_create(e, MPI_COMM_WORLD), VF_ENOTSUP);
    CHECK_OK(vf_engine_destroy(e));

    CHECK_EQ(vf_mpi_owner_2d(4, 3, 1), 3); /* grid 2 x 2 */
    CHECK_EQ(vf_mpi_owner_2d(6, 1, 4), 4); /* grid 2 x 3: 1*3 + 4%3 */
    CHECK_ERR(vf_mpi_owner_2d(0, 0, 0), VF_EINVAL);
    /* A size whose square root's square overflows int: its grid's loop
     * wrapped and divided by zero (SIGFPE; found trying careless input as
     * a user). 2147395601 = 13 x 165184277; INT_MAX is prime. */
    int p = 0, q = 0;
    vf_mpi_grid(2147395601, &p, &q);
    CHECK_EQ(p, 13);
    CHECK_EQ(q, 165184277);
    CHECK_EQ(vf_mpi_owner_2d(INT_MAX, 5, 5), 5); /* grid 1 x INT_MAX */
}

/* Ranks that disagree on a variable's size, either way round: the
 * receiving op fails with VF_EINVAL and a message saying so, and the wait
 * reports it on every rank. */
static void size_mismatch(bool owner_larger)
{
    if (test_size_ < 2)
        return;
    vf_engine *e = mpi_test_attached(1);
    int64_t x[2] = {1, 2}, y = 0;
    size_t size = (test_rank_ == 0) == owner_larger ? sizeof x : sizeof x[0];
    vf_var d = mpi_test_var(e, x, size, 0);
    vf_var out = mpi_test_var(e, &y, sizeof y, 1);
    vf_op op = {.fn = nop, .reads = VF_VARS(d), .writes = VF_VARS(out)};
    CHECK_OK(vf_mpi_push(e, &op, VF_MPI_OWNER));
    vf_error err;
    memset(&err, 0, sizeof err);
    CHECK_ERR(vf_mpi_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, VF_EINVAL);
    CHECK(strstr(err.message, "variable 0: rank 0 sent") != NULL);
    CHECK(strstr(err.message, owner_larger ? "more than the 8 bytes"
                                           : "sent 8 bytes, this rank made "
                                             "it 16") != NULL);
    CHECK(strstr(err.op_name, "mpi recv v0 from 0") != NULL);
    vf_mpi_destroy(e, &err);
    CHECK_OK(vf_engine_destroy(e));
}

/* vf_mpi_get to one rank reports a failed value there; the rank where the
 * op failed still holds its own report, which the collective wait then
 * gives every rank. */
static void get_one_failed(void)
{
    vf_engine *e = mpi_test_attached(0);
    int64_t x = 0;
    vf_var d = mpi_test_var(e, &x, sizeof x, 0);
    int skipped = 0, ran = 0;
    chain(e, &d, 1, 0, &skipped, &ran); /* the op writing d fails */
    int last = test_size_ - 1;
    vf_error err;
    memset(&err, 0, sizeof err);
    CHECK_ERR(vf_mpi_get(e, d, last, &err),
              test_rank_ == last ? VF_EOPFAILED : 0);
    if (test_rank_ == last)
        CHECK(strcmp(err.op_name, "bad hop") == 0);
    memset(&err, 0, sizeof err);
    CHECK_ERR(vf_mpi_wait_all(e, &err),
              test_size_ > 1 ? VF_EOPFAILED : 0); /* one rank: reported */
    if (test_size_ > 1)
        CHECK(strcmp(err.op_name, "bad hop") == 0);
    CHECK_OK(vf_mpi_destroy(e, &err));
    CHECK_OK(vf_engine_destroy(e));
}

/* An op only its running rank refuses (here a property vf_engine_push rejects
 * there; the same path serves no memory, no such device there): the other
 * ranks have already counted on its writes, so its failure travels with
 * the data and every rank's wait reports it. A nonblocking push is refused
 * on every rank alike. */
static void refused_on_runner(void)
{
    vf_engine *e = mpi_test_attached(1);
    int64_t x = 0, y = 0;
    int last = test_size_ - 1;
    vf_var dx = mpi_test_var(e, &x, sizeof x, 0);
    vf_var dy = mpi_test_var(e, &y, sizeof y, last);
    /* A slow op first, so the stand-in runs after the caller freed the
     * name it gave (a failed push hands nothing over). */
    vf_op slow = {.fn = slow_nop, .writes = VF_VARS(dx)};
    CHECK_OK(vf_mpi_push(e, &slow, VF_MPI_OWNER));
    char *name = strdup("bad property");
    REQUIRE(name);
    vf_op bad = {
        .fn = nop, .writes = VF_VARS(dx), .property = 42, .name = name};
    CHECK_ERR(vf_mpi_push(e, &bad, VF_MPI_OWNER),
              test_rank_ == 0 ? VF_EINVAL : 0);
    memset(name, 'X', strlen(name));
    free(name);
    /* The next op needs dx on the last rank: it is skipped there. */
    int skipped = 0, ran = 0;
    hop *h = malloc(sizeof *h);
    REQUIRE(h);
    *h = (hop){.in = dx, .out = dy, .skipped = &skipped, .ran = &ran};
    vf_op next = {.fn = hop_fn,
                  .arg = h,
                  .done = hop_done,
                  .reads = VF_VARS(dx),
                  .writes = VF_VARS(dy),
                  .name = "next"};
    CHECK_OK(vf_mpi_push(e, &next, VF_MPI_OWNER));
    vf_error err;
    memset(&err, 0, sizeof err);
    CHECK_ERR(vf_mpi_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, VF_EINVAL);
    CHECK(strcmp(err.op_name, "bad property") == 0);
    CHECK(strstr(err.message, "could not push it on rank 0") != NULL);
    CHECK(strstr(err.message, "property 42") != NULL);
    CHECK_EQ(skipped, test_rank_ == last ? 1 : 0);
    CHECK_EQ(ran, 0);

    vf_op nb = {.fn = nop, .writes = VF_VARS(dx), .nonblocking = true};
    CHECK_ERR(vf_mpi_push(e, &nb, VF_MPI_OWNER), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "nonblocking") != NULL);
    /* A copied argument the engine refuses is refused alike on every rank,
     * before anything is pushed: it was the running rank's VF_EINVAL and 0
     * elsewhere, with `done` called there (found trying careless input as
     * a user). */
    static char big[VF_MAX_OP_ARG_SIZE + 1];
    vf_op too_big = {
        .fn = nop, .arg = big, .arg_size = sizeof big, .writes = VF_VARS(dx)};
    CHECK_ERR(vf_mpi_push(e, &too_big, VF_MPI_OWNER), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "VF_MAX_OP_ARG_SIZE") != NULL);
    vf_op no_arg = {.fn = nop, .arg_size = 8, .writes = VF_VARS(dx)};
    CHECK_ERR(vf_mpi_push(e, &no_arg, VF_MPI_OWNER), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "arg is NULL") != NULL);
    CHECK_OK(vf_mpi_wait_all(e, NULL));
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
}

/* Calls in sequence made from ops, where they cannot work, are refused
 * with VF_EDEADLK instead of deadlocking: from an async op that runs
 * inline inside vf_mpi_push (its vars free), and from one made ready by a
 * value that came (the communication thread, a service thread, has a
 * worker start it). */
typedef struct nested {
    vf_var v;
    int rc;
    char detail[256];
} nested;

static atomic_int gate_open;

/* Holds its var until the test opens the gate. */
static int gate_fn(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    struct timespec t = {0, 1000 * 1000};
    while (!atomic_load(&gate_open))
        nanosleep(&t, NULL);
    return 0;
}

static void nested_call(vf_run *run, void *arg, vf_completion done)
{
    nested *n = arg;
    vf_engine *e = vf_run_engine(run);
    vf_op inner = {.fn = nop, .writes = {&n->v, 1}};
    n->rc = vf_mpi_push(e, &inner, VF_MPI_OWNER);
    snprintf(n->detail, sizeof n->detail, "%s", vf_error_detail());
    vf_completion_finish(done, 0, NULL);
}

static void calls_from_ops(void)
{
    vf_engine *e = mpi_test_attached(0);
    int64_t x = 0, y = 0;
    int last = test_size_ - 1;
    vf_var dx = mpi_test_var(e, &x, sizeof x, 0);
    vf_var dy = mpi_test_var(e, &y, sizeof y, last);
    /* Ready at once on rank 0: runs inside vf_mpi_push's own vf_engine_push. */
    nested inline_op = {.v = dx, .rc = 1};
    vf_op a = {
        .async_fn = nested_call, .arg = &inline_op, .writes = VF_VARS(dx)};
    CHECK_OK(vf_mpi_push(e, &a, VF_MPI_OWNER));
    /* On the last rank, ready when dx comes, which a gate on rank 0
     * holds back until every rank has pushed b: a worker starts it, not
     * the communication thread (with one rank, the worker that ran the
     * gate does). */
    atomic_store(&gate_open, 0);
    vf_op gate = {.fn = gate_fn, .writes = VF_VARS(dx)};
    CHECK_OK(vf_mpi_push(e, &gate, VF_MPI_OWNER));
    nested comm_op = {.v = dy, .rc = 1};
    vf_op b = {.async_fn = nested_call,
               .arg = &comm_op,
               .reads = VF_VARS(dx),
               .writes = VF_VARS(dy)};
    CHECK_OK(vf_mpi_push(e, &b, VF_MPI_OWNER));
    MPI_Barrier(MPI_COMM_WORLD); /* the tests have MPI_THREAD_MULTIPLE */
    atomic_store(&gate_open, 1);
    CHECK_OK(vf_mpi_wait_all(e, NULL));
    if (test_rank_ == 0) {
        CHECK_EQ(inline_op.rc, VF_EDEADLK);
        CHECK(strstr(inline_op.detail, "inside another varflow-mpi call") !=
              NULL);
    }
    if (test_rank_ == last && test_size_ > 1) {
        CHECK_EQ(comm_op.rc, VF_EDEADLK);
        CHECK(strstr(comm_op.detail, "called from inside an op") != NULL);
    }
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
}

/* A rank that cannot wait (its engine is stopped with an op held) does
 * not leave the others waiting for it: every rank's collective wait
 * returns its code, and every rank stays attached until it can. */
static void stopped_rank(void)
{
    vf_engine *e = mpi_test_attached(0);
    int64_t x = 0;
    vf_var d = mpi_test_var(e, &x, sizeof x, 0);
    if (test_rank_ == 0)
        CHECK_OK(vf_engine_stop(e));
    vf_op op = {.fn = nop, .writes = VF_VARS(d)};
    CHECK_OK(vf_mpi_push(e, &op, VF_MPI_OWNER)); /* held on rank 0 */
    CHECK_ERR(vf_mpi_wait_all(e, NULL), VF_ESTOPPED);
    CHECK(strstr(vf_error_detail(), "rank 0 could not wait") != NULL);
    CHECK_ERR(vf_mpi_destroy(e, NULL), VF_ESTOPPED);
    CHECK(strstr(vf_error_detail(), "stays attached") != NULL);
    CHECK_EQ(vf_mpi_rank(e), test_rank_); /* still attached */
    if (test_rank_ == 0)
        CHECK_OK(vf_engine_start(e));
    CHECK_OK(vf_mpi_wait_all(e, NULL));
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_ERR(vf_mpi_rank(e), VF_EINVAL); /* detached */
    CHECK_OK(vf_engine_destroy(e));
}

/* Two ops that only the running rank refuses (its device, its property),
 * one after the other on one variable: the second's stand-in is skipped
 * behind the first's failure, as the op would be, so the get reports the
 * first failure, on every rank, and the wait nothing more (found trying
 * MPI as a user: the second stand-in ran, and its failure came first). */
static void stand_ins_in_order(void)
{
    vf_engine *e = mpi_test_attached(0);
    int64_t y = 0;
    int last = test_size_ - 1;
    vf_var dy = mpi_test_var(e, &y, sizeof y, last);
    vf_op first = {.fn = nop,
                   .writes = VF_VARS(dy),
                   .device = {VF_DEVICE_EMULATED, 99},
                   .name = "first"};
    CHECK_ERR(vf_mpi_push(e, &first, VF_MPI_OWNER),
              test_rank_ == last ? VF_ENODEV : 0);
    vf_op second = {
        .fn = nop, .writes = VF_VARS(dy), .property = 77, .name = "second"};
    CHECK_ERR(vf_mpi_push(e, &second, VF_MPI_OWNER),
              test_rank_ == last ? VF_EINVAL : 0);
    vf_error err;
    memset(&err, 0, sizeof err);
    CHECK_ERR(vf_mpi_get(e, dy, VF_MPI_ALL, &err), VF_EOPFAILED);
    CHECK(strcmp(err.op_name, "first") == 0);
    CHECK_EQ(err.code, VF_ENODEV);
    CHECK_OK(vf_mpi_wait_all(e, &err));
    CHECK_OK(vf_mpi_var_destroy(e, dy));
    CHECK_OK(vf_mpi_wait_all(e, NULL));
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
}

static int set_777(vf_run *run, void *arg)
{
    vf_var *v = arg;
    int64_t *p = vf_mpi_data(vf_run_engine(run), *v);
    if (p == NULL)
        return VF_EINVAL;
    *p = 777;
    return 0;
}

/* A distributed variable deleted with the core's vf_var_destroy (against
 * the rules) is refused by every later call in sequence, alike on every
 * rank, the detail naming vf_mpi_var_destroy, and the data flow goes on
 * (found trying MPI as a user: the next push cut the flow, and every
 * later call failed with VF_ESYSTEM, vf_mpi_destroy too). */
static void deleted_by_the_core(void)
{
    vf_engine *e = mpi_test_attached(1);
    int64_t x = 0, z = 0;
    int last = test_size_ - 1;
    vf_var dx = mpi_test_var(e, &x, sizeof x, 0);
    vf_var dz = mpi_test_var(e, &z, sizeof z, last);
    CHECK_OK(vf_var_destroy(e, dx, NULL, NULL));
    /* One whose value was written away from its owner: no transfer home
     * for it (it could not be pushed, and cut the flow: found by a
     * reviewer). */
    int64_t w = 0;
    vf_var dw = mpi_test_var(e, &w, sizeof w, 0);
    vf_op set = {.fn = set_777, .arg = &dw, .writes = VF_VARS(dw)};
    CHECK_OK(vf_mpi_push(e, &set, last));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_var_destroy(e, dw, NULL, NULL));
    vf_op on_x = {.fn = nop, .writes = VF_VARS(dx)};
    CHECK_ERR(vf_mpi_push(e, &on_x, VF_MPI_OWNER), VF_ESTALE);
    CHECK(strstr(vf_error_detail(), "vf_mpi_var_destroy") != NULL);
    CHECK_ERR(vf_mpi_var_owner(e, dx), VF_ESTALE);
    vf_error err;
    CHECK_ERR(vf_mpi_get(e, dx, VF_MPI_ALL, &err), VF_ESTALE);
    CHECK_ERR(vf_mpi_var_destroy(e, dx), VF_ESTALE);
    /* The flow goes on: a value moves, the waits and the detach work. */
    hop *h = malloc(sizeof *h);
    REQUIRE(h);
    int skipped = 0, ran = 0;
    *h = (hop){.out = dz, .skipped = &skipped, .ran = &ran};
    vf_op on_z = {
        .fn = hop_fn, .arg = h, .done = hop_done, .writes = VF_VARS(dz)};
    CHECK_OK(vf_mpi_push(e, &on_z, 0));
    CHECK_OK(vf_mpi_get(e, dz, VF_MPI_ALL, &err));
    const int64_t *got = vf_mpi_data(e, dz);
    CHECK(got != NULL && *got == 1);
    CHECK_OK(vf_mpi_var_destroy(e, dz));
    CHECK_OK(vf_mpi_wait_all(e, &err));
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
}

/* A value written away from its owner goes back to it before the
 * variable is deleted: the owner's buffer holds it (found trying MPI as a
 * user: it was lost). */
static void deleted_away_from_owner(void)
{
    vf_engine *e = mpi_test_attached(0);
    int64_t d = 0;
    int last = test_size_ - 1;
    vf_var dd = mpi_test_var(e, &d, sizeof d, 0);
    vf_op set = {.fn = set_777, .arg = &dd, .writes = VF_VARS(dd)};
    CHECK_OK(vf_mpi_push(e, &set, last));
    CHECK_OK(vf_mpi_var_destroy(e, dd));
    CHECK_OK(vf_mpi_wait_all(e, NULL));
    if (test_rank_ == 0)
        CHECK_EQ(d, 777);
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
}

/* A stand-in keeps its op's whole name: the failure's name is cut between
 * UTF-8 characters, as every op name is (62 bytes and the euro sign keep
 * the 62). It copied the name into 64 bytes, cut at the byte: the name
 * ended in half a character (found by an auditor of the push path). */
static void stand_in_name_cut_between_characters(void)
{
    vf_engine *e = mpi_test_attached(1);
    int64_t x = 0;
    vf_var dx = mpi_test_var(e, &x, sizeof x, 0);
    char name[70];
    memset(name, 'n', 62);
    memcpy(name + 62, "\xE2\x82\xAC", 4); /* the euro sign */
    vf_op bad = {
        .fn = nop, .writes = VF_VARS(dx), .property = 42, .name = name};
    CHECK_ERR(vf_mpi_push(e, &bad, VF_MPI_OWNER),
              test_rank_ == 0 ? VF_EINVAL : 0);
    vf_error err;
    memset(&err, 0, sizeof err);
    int rc = vf_mpi_wait_all(e, &err);
    if (test_rank_ == 0) { /* the rank that runs it: its stand-in failed */
        CHECK_ERR(rc, VF_EOPFAILED);
        CHECK_EQ(strnlen(err.op_name, sizeof err.op_name), 62u);
        CHECK(strncmp(err.op_name, name, 62) == 0);
    }
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
}

int main(int argc, char **argv)
{
    mpi_test_begin(&argc, &argv);
    failure_travels(0);
    failure_travels(1);
    bad_input();
    size_mismatch(true);
    size_mismatch(false);
    get_one_failed();
    refused_on_runner();
    stand_in_name_cut_between_characters();
    calls_from_ops();
    stopped_rank();
    stand_ins_in_order();
    deleted_by_the_core();
    deleted_away_from_owner();
    return mpi_test_end("test_mpi_failure");
}
