/*
 * test_mpi_random: random programs and the W4 wavefront on many ranks give
 * the serial result, bit for bit, with exactly the messages the data flow
 * needs.
 *
 * Every rank draws the same random program (the seed is rank 0's): V
 * distributed variables of L words with random owners, N ops reading and
 * writing random sets, some pushed to a random rank instead of the owner's.
 * Each op mixes what it reads into what it writes, with integer arithmetic,
 * so any op run out of order or on a stale copy changes the result. Every
 * rank also runs the program serially on plain arrays: the reference.
 *
 * The expected message count is worked out here from the program alone, a
 * value being a (variable, version) pair: a rank needs one message for
 * each version of a variable it uses and did not write itself (version 0
 * is the owner's); at vf_mpi_wait_all each owner that lacks the final
 * version of what it owns needs one; vf_mpi_get(VF_MPI_ALL) one per rank
 * lacking it. The sum over ranks of the library's sends and receives must
 * both equal it. A small program whose messages are counted by hand, per
 * sender, checks the rule itself (cache reuse, a value written away going
 * home when its owner needs it, and at the wait).
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

#define L 4 /* words per variable */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct prog_op {
    int nr, nw;
    int r[4], w[3];
    int rank; /* VF_MPI_OWNER or a rank */
    uint64_t salt;
} prog_op;

/* The op's effect on the values (serial and distributed alike). */
static void apply(const prog_op *p, uint64_t *const *rv, uint64_t *const *wv)
{
    uint64_t acc[L];
    for (int k = 0; k < L; k++) {
        acc[k] = p->salt + (uint64_t)k;
        for (int i = 0; i < p->nr; i++)
            acc[k] = acc[k] * 31 + rv[i][k];
    }
    for (int i = 0; i < p->nw; i++)
        for (int k = 0; k < L; k++)
            wv[i][k] = (wv[i][k] ^ acc[k]) * 0x100000001B3ull + (uint64_t)i;
}

/* An op's arg: the program op, the engine's handles, and a count of its
 * done calls. */
typedef struct op_arg {
    const prog_op *p;
    const vf_var *vars;
    int *dones_here, *dones_elsewhere;
} op_arg;

static int op_fn(vf_run *run, void *arg)
{
    op_arg *a = arg;
    vf_engine *e = vf_run_engine(run);
    uint64_t *rv[4], *wv[3];
    for (int i = 0; i < a->p->nr; i++)
        rv[i] = vf_mpi_data(e, a->vars[a->p->r[i]]);
    for (int i = 0; i < a->p->nw; i++)
        wv[i] = vf_mpi_data(e, a->vars[a->p->w[i]]);
    for (int i = 0; i < a->p->nr; i++)
        if (rv[i] == NULL)
            return VF_EINVAL;
    for (int i = 0; i < a->p->nw; i++)
        if (wv[i] == NULL)
            return VF_EINVAL;
    apply(a->p, rv, wv);
    return 0;
}

static void op_done(void *arg, int status)
{
    op_arg *a = arg;
    if (status == VF_MPI_ELSEWHERE)
        (*a->dones_elsewhere)++; /* on the pushing thread */
    else
        __atomic_fetch_add(a->dones_here, 1, __ATOMIC_RELAXED);
    CHECK(status == 0 || status == VF_MPI_ELSEWHERE);
    free(a);
}

/* Push program op `p` (every rank alike); returns the rank it runs on, as
 * vf_mpi_runs_on says, or a negative code. */
static int push_op(vf_engine *e, const prog_op *p, const vf_var *vars,
                   int *dones_here, int *dones_elsewhere)
{
    vf_var r[4], w[3];
    for (int j = 0; j < p->nr; j++)
        r[j] = vars[p->r[j]];
    for (int j = 0; j < p->nw; j++)
        w[j] = vars[p->w[j]];
    op_arg *a = malloc(sizeof *a);
    REQUIRE(a);
    *a = (op_arg){p, vars, dones_here, dones_elsewhere};
    vf_op op = {.fn = op_fn,
                .arg = a,
                .done = op_done,
                .reads = {r, p->nr},
                .writes = {w, p->nw},
                .name = "random"};
    int x = vf_mpi_runs_on(e, &op, p->rank);
    int rc = vf_mpi_push(e, &op, p->rank);
    if (rc != 0) {
        CHECK_OK(rc);
        free(a);
        return rc;
    }
    return x;
}

/* The model: which ranks hold the current version of each variable. */
typedef struct model {
    int nvars, size;
    const int *owner;
    uint64_t *holds; /* bitset per variable (size <= 64 here) */
    uint64_t messages;
} model;

static void model_use(model *m, int v, int rank)
{
    if (!(m->holds[v] >> rank & 1u)) {
        m->messages++;
        m->holds[v] |= 1ull << rank;
    }
}

static int runs_on(const prog_op *p, const int *owner)
{
    if (p->rank != VF_MPI_OWNER)
        return p->rank;
    if (p->nw > 0)
        return owner[p->w[0]];
    return p->nr > 0 ? owner[p->r[0]] : 0;
}

static void model_op(model *m, const prog_op *p)
{
    int x = runs_on(p, m->owner);
    for (int i = 0; i < p->nr; i++)
        model_use(m, p->r[i], x);
    for (int i = 0; i < p->nw; i++)
        model_use(m, p->w[i], x);
    for (int i = 0; i < p->nw; i++)
        m->holds[p->w[i]] = 1ull << x; /* a new version, on x alone */
}

static void model_wait_all(model *m)
{
    for (int v = 0; v < m->nvars; v++)
        model_use(m, v, m->owner[v]);
}

/*
 * Run `nops` ops of `prog` on `nvars` variables owned by `owner`, then
 * check: the owners' values after vf_mpi_wait_all, every rank's values
 * after vf_mpi_get(VF_MPI_ALL), done calls, and the message counts.
 * Returns the messages of the program itself (over all ranks, the gets
 * left out).
 */
static uint64_t run_program(int engine_kind, const prog_op *prog, int nops,
                            int nvars, const int *owner, const char *what)
{
    uint64_t *serial = calloc((size_t)nvars * L, sizeof *serial);
    uint64_t *mine = calloc((size_t)nvars * L, sizeof *mine);
    vf_var *vars = calloc((size_t)nvars, sizeof *vars);
    REQUIRE(serial && mine && vars);
    for (int v = 0; v < nvars; v++)
        for (int k = 0; k < L; k++)
            serial[v * L + k] = mine[v * L + k] = (uint64_t)(v * 7 + k + 1);

    /* The serial reference. */
    for (int i = 0; i < nops; i++) {
        uint64_t *rv[4], *wv[3];
        for (int j = 0; j < prog[i].nr; j++)
            rv[j] = &serial[prog[i].r[j] * L];
        for (int j = 0; j < prog[i].nw; j++)
            wv[j] = &serial[prog[i].w[j] * L];
        apply(&prog[i], rv, wv);
    }

    vf_engine *e = mpi_test_attached(engine_kind);
    for (int v = 0; v < nvars; v++)
        CHECK_OK(vf_mpi_var_create(e, &vars[v],
                                   owner[v] == test_rank_ ? &mine[v * L] : NULL,
                                   L * sizeof(uint64_t), owner[v]));
    int dones_here = 0, dones_elsewhere = 0, ran_here = 0;
    model m = {.nvars = nvars, .size = test_size_, .owner = owner};
    m.holds = calloc((size_t)nvars, sizeof *m.holds);
    REQUIRE(m.holds);
    for (int v = 0; v < nvars; v++)
        m.holds[v] = 1ull << owner[v];
    for (int i = 0; i < nops; i++) {
        int x = runs_on(&prog[i], owner);
        ran_here += x == test_rank_;
        CHECK_EQ(push_op(e, &prog[i], vars, &dones_here, &dones_elsewhere), x);
        model_op(&m, &prog[i]);
    }
    vf_error err;
    CHECK_OK(vf_mpi_wait_all(e, &err));
    model_wait_all(&m);
    /* The program's own messages, before the gets below add theirs. */
    uint64_t program_minimum = m.messages;
    vf_mpi_stats before;
    CHECK_OK(vf_mpi_stats_local(e, &before));
    uint64_t program_sends = mpi_test_sum(before.sends);
    CHECK_EQ(program_sends, program_minimum);
    CHECK_EQ(dones_here, ran_here);
    CHECK_EQ(dones_elsewhere, nops - ran_here);

    /* Each owner holds the serial value of what it owns. */
    for (int v = 0; v < nvars; v++)
        if (owner[v] == test_rank_ &&
            memcmp(&mine[v * L], &serial[v * L], L * sizeof(uint64_t)) != 0)
            CHECK_REPORT_("%s: variable %d differs from serial on its owner",
                          what, v);

    /* Every rank gets every value. */
    for (int v = 0; v < nvars; v++) {
        CHECK_OK(vf_mpi_get(e, vars[v], VF_MPI_ALL, &err));
        for (int r = 0; r < test_size_; r++)
            model_use(&m, v, r);
        const uint64_t *got = vf_mpi_data(e, vars[v]);
        REQUIRE(got != NULL);
        if (memcmp(got, &serial[v * L], L * sizeof(uint64_t)) != 0)
            CHECK_REPORT_("%s: variable %d differs from serial after "
                          "vf_mpi_get",
                          what, v);
    }
    vf_mpi_stats st;
    CHECK_OK(vf_mpi_stats_local(e, &st));
    CHECK_EQ(st.ops_here, (uint64_t)ran_here);
    CHECK_EQ(st.ops_elsewhere, (uint64_t)(nops - ran_here));
    uint64_t sends = mpi_test_sum(st.sends), recvs = mpi_test_sum(st.recvs);
    uint64_t bytes = mpi_test_sum(st.bytes_sent);
    CHECK_EQ(sends, m.messages);
    CHECK_EQ(recvs, m.messages);
    CHECK_EQ(bytes, m.messages * L * sizeof(uint64_t));
    CHECK_EQ(mpi_test_sum(st.bytes_received), bytes);
    if (test_rank_ == 0)
        printf("%s: %d ops, %d vars, %d ranks: %llu messages (the minimum "
               "is %llu), then %llu for every value to every rank (the "
               "minimum is %llu)\n",
               what, nops, nvars, test_size_, (unsigned long long)program_sends,
               (unsigned long long)program_minimum,
               (unsigned long long)(sends - program_sends),
               (unsigned long long)(m.messages - program_minimum));

    /* Delete half the variables while ops that use them may still be
     * waiting to run (they still find their buffers), the rest after. */
    for (int i = 0; i < nops / 4; i++)
        push_op(e, &prog[i], vars, &dones_here, &dones_elsewhere);
    for (int v = 0; v < nvars; v += 2)
        CHECK_OK(vf_mpi_var_destroy(e, vars[v]));
    CHECK_OK(vf_mpi_destroy(e, &err));
    for (int v = 1; v < nvars; v += 2)
        CHECK_OK(vf_var_destroy(e, vars[v], NULL, NULL));
    CHECK_OK(vf_engine_destroy(e));
    free(m.holds);
    free(serial);
    free(mine);
    free(vars);
    return program_sends;
}

static void random_programs(void)
{
    for (int round = 0; round < 7; round++) {
        /* The last round keeps hundreds of transfers in flight at once,
         * past the slots each poll tests (src/mpi/comm.c: inflight), in
         * every order of completion. */
        bool big = round == 6;
        int nvars = big ? 400 + (int)(rnd() % 200) : 4 + (int)(rnd() % 40);
        int nops = big ? 3000 : 50 + (int)(rnd() % 400);
        int *owner = malloc(sizeof *owner * (size_t)nvars);
        prog_op *prog = calloc((size_t)nops, sizeof *prog);
        REQUIRE(owner && prog);
        for (int v = 0; v < nvars; v++)
            owner[v] = (int)(rnd() % (uint64_t)test_size_);
        for (int i = 0; i < nops; i++) {
            prog_op *p = &prog[i];
            p->nr = (int)(rnd() % 5);
            p->nw = (int)(rnd() % 4);
            if (p->nr + p->nw == 0)
                p->nw = 1;
            for (int j = 0; j < p->nr; j++)
                p->r[j] = (int)(rnd() % (uint64_t)nvars);
            for (int j = 0; j < p->nw; j++)
                p->w[j] = (int)(rnd() % (uint64_t)nvars);
            /* One op in five runs where the push says, not at the owner's:
             * values written away from their owners go back at the end. */
            p->rank = rnd() % 5 == 0 ? (int)(rnd() % (uint64_t)test_size_)
                                     : VF_MPI_OWNER;
            p->salt = rnd();
        }
        char what[64];
        snprintf(what, sizeof what, "random program %d", round);
        run_program(round, prog, nops, nvars, owner, what);
        free(owner);
        free(prog);
    }
}

/* W4: a G x G grid, cell (i, j) = f(cell (i-1, j), cell (i, j-1)); rows
 * in blocks over the ranks, so each rank boundary costs one message per
 * column. */
static void wavefront(void)
{
    enum { G = 24 };
    int owner[G * G];
    prog_op prog[G * G];
    int n = 0;
    for (int i = 0; i < G; i++)
        for (int j = 0; j < G; j++)
            owner[i * G + j] = i * test_size_ / G;
    for (int i = 0; i < G; i++) {
        for (int j = 0; j < G; j++) {
            prog_op *p = &prog[n++];
            memset(p, 0, sizeof *p);
            p->rank = VF_MPI_OWNER;
            p->salt = (uint64_t)(i * G + j);
            p->nw = 1;
            p->w[0] = i * G + j;
            if (i > 0)
                p->r[p->nr++] = (i - 1) * G + j;
            if (j > 0)
                p->r[p->nr++] = i * G + j - 1;
        }
    }
    uint64_t sends = run_program(1, prog, n, G * G, owner, "W4 wavefront");
    /* Each rank boundary between two blocks of rows: one message per
     * column, the row above's last value. */
    CHECK_EQ(sends, (uint64_t)G * (uint64_t)(test_size_ - 1));
}

/* A program small enough to count its messages by hand, on ranks 0 and 1
 * (a is rank 0's, b rank 1's): each step is w = w * mul + add (+ r). */
typedef struct step {
    vf_var w, r;
    bool reads;
    int rank; /* where it runs: VF_MPI_OWNER or a rank */
    int64_t add, mul;
    int from0, from1; /* the messages it costs, by sender */
} step;

static int step_fn(vf_run *run, void *arg)
{
    const step *s = arg;
    vf_engine *e = vf_run_engine(run);
    int64_t *w = vf_mpi_data(e, s->w);
    const int64_t *r = s->reads ? vf_mpi_data(e, s->r) : NULL;
    if (w == NULL || (s->reads && r == NULL))
        return VF_EINVAL;
    *w = *w * s->mul + s->add + (r ? *r : 0);
    return 0;
}

static void counted_by_hand(void)
{
    if (test_size_ < 2)
        return;
    vf_engine *e = mpi_test_attached(0);
    int64_t a0 = 0, b0 = 0;
    vf_var a, b;
    CHECK_OK(
        vf_mpi_var_create(e, &a, test_rank_ == 0 ? &a0 : NULL, sizeof a0, 0));
    CHECK_OK(
        vf_mpi_var_create(e, &b, test_rank_ == 1 ? &b0 : NULL, sizeof b0, 1));
    const step prog[] = {
        {b, a, true, VF_MPI_OWNER, 0, 1, 1, 0},   /* b += a: a 0 -> 1 */
        {b, a, true, VF_MPI_OWNER, 0, 1, 0, 0},   /* a is cached on 1 */
        {a, a, false, VF_MPI_OWNER, 10, 1, 0, 0}, /* a = 10 on 0 */
        {b, a, true, VF_MPI_OWNER, 0, 1, 1, 0},   /* b += a: a 0 -> 1 */
        {a, a, false, 1, 1, 1, 0, 0},             /* a = 11 on 1, which has a */
        {a, a, false, VF_MPI_OWNER, 0, 2, 0, 1},  /* a = 22 on 0: a 1 -> 0 */
        {a, a, false, 1, 3, 1, 1, 0},             /* a = 25 on 1: a 0 -> 1 */
    };
    int from0 = 0, from1 = 1; /* vf_mpi_wait_all brings a home: 1 -> 0 */
    for (size_t i = 0; i < sizeof prog / sizeof prog[0]; i++) {
        from0 += prog[i].from0;
        from1 += prog[i].from1;
        vf_op op = {.fn = step_fn,
                    .arg = (void *)&prog[i],
                    .writes = {&prog[i].w, 1},
                    .reads = {&prog[i].r, prog[i].reads ? 1 : 0}};
        CHECK_OK(vf_mpi_push(e, &op, prog[i].rank));
    }
    CHECK_OK(vf_mpi_wait_all(e, NULL));
    vf_mpi_stats st;
    CHECK_OK(vf_mpi_stats_local(e, &st));
    CHECK_EQ(st.sends, test_rank_ == 0 ? from0 : test_rank_ == 1 ? from1 : 0);
    CHECK_EQ(st.recvs, test_rank_ == 0 ? from1 : test_rank_ == 1 ? from0 : 0);
    CHECK_EQ(mpi_test_sum(st.sends), 5);
    if (test_rank_ == 0)
        CHECK_EQ(a0, 25);
    if (test_rank_ == 1)
        CHECK_EQ(b0, 10);
    CHECK_OK(vf_mpi_destroy(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
}

int main(int argc, char **argv)
{
    mpi_test_begin(&argc, &argv);
    rng_state = check_seed_;
    counted_by_hand();
    random_programs();
    wavefront();
    return mpi_test_end("test_mpi_random");
}
