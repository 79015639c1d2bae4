/*
 * test_mpi_in_op: libvarflow-mpi's calls in sequence made from inside an
 * op are refused alike on every rank (varflow_mpi.h, "Rules of use").
 *
 * Every rank runs one op (vf_mpi_push to that rank) and one rank-local op
 * (plain vf_engine_push) that make every call in sequence: vf_mpi_wait_all,
 * vf_mpi_push, vf_mpi_get, vf_mpi_var_create, vf_mpi_vars_create,
 * vf_mpi_var_destroy, vf_mpi_stats_total, vf_mpi_destroy and vf_mpi_create.
 * Each must return VF_EDEADLK on the calling rank without entering a
 * collective, while the other ranks are in the program's own
 * vf_mpi_wait_all. Before issue 27, the in-op vf_mpi_wait_all joined the
 * other ranks' agreement (they got VF_EDEADLK) and the job hung in
 * vf_mpi_destroy, and an in-op vf_mpi_push returned 0 on one rank only
 * and hung the job. Then every rank runs a normal program (a ring of adds
 * over the ranks), checks its values, and detaches and destroys cleanly.
 * The same calls from the op's `done` are refused on every rank too, where
 * vf_mpi_push calls it (VF_MPI_ELSEWHERE) as where the op ran.
 * Registered on 1, 2, 3 and 4 ranks; an alarm ends a hung rank (and so
 * the job) instead of blocking CI.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "mpi_test.h"

enum { NCALLS = 9 };
static const char *const call_names[NCALLS] = {
    "vf_mpi_wait_all",    "vf_mpi_push",        "vf_mpi_get",
    "vf_mpi_var_create",  "vf_mpi_vars_create", "vf_mpi_var_destroy",
    "vf_mpi_stats_total", "vf_mpi_destroy",     "vf_mpi_create"};

typedef struct misuse {
    vf_engine *e;
    vf_var v;          /* a distributed var every rank knows */
    int codes[NCALLS]; /* what each call returned here */
    bool detail_ok[NCALLS];
    bool ran;
    /* From the op's `done` (vf_mpi_push's own, with VF_MPI_ELSEWHERE, on
     * the ranks that do not run it): how many, and the first code that
     * was not VF_EDEADLK of each call (0: none). */
    atomic_int dones;
    atomic_int done_bad[NCALLS];
} misuse;

static int nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static int owner_zero(int index, void *arg)
{
    (void)index;
    (void)arg;
    return 0;
}

/* Every call in sequence, on `e`, each one's code and whether its detail
 * names it. */
static void calls_in_sequence(vf_engine *e, vf_var v, int codes[NCALLS],
                              bool detail_ok[NCALLS])
{
    uint64_t buf = 0;
    void *ptrs[1] = {&buf};
    vf_var made = {0};
    vf_error err;
    vf_mpi_stats st;
    int rc[NCALLS];
    for (int i = 0; i < NCALLS; i++) {
        switch (i) {
        case 0:
            rc[i] = vf_mpi_wait_all(e, &err);
            break;
        case 1:
            rc[i] = vf_mpi_push(e, &(vf_op){.fn = nop, .writes = VF_VARS(v)},
                                VF_MPI_OWNER);
            break;
        case 2:
            rc[i] = vf_mpi_get(e, v, VF_MPI_ALL, &err);
            break;
        case 3:
            rc[i] = vf_mpi_var_create(e, &made, &buf, sizeof buf, 0);
            break;
        case 4:
            rc[i] = vf_mpi_vars_create(e, &made, 1, ptrs, sizeof buf,
                                       owner_zero, NULL);
            break;
        case 5:
            rc[i] = vf_mpi_var_destroy(e, v);
            break;
        case 6:
            rc[i] = vf_mpi_stats_total(e, &st);
            break;
        case 7:
            rc[i] = vf_mpi_destroy(e, &err);
            break;
        default:
            rc[i] = vf_mpi_create(e, MPI_COMM_WORLD);
            break;
        }
        codes[i] = rc[i];
        detail_ok[i] = strstr(vf_error_detail(), call_names[i]) != NULL;
    }
}

/* Every call in sequence, from inside an op. */
static int misuse_fn(vf_run *run, void *arg)
{
    misuse *m = arg;
    calls_in_sequence(vf_run_engine(run), m->v, m->codes, m->detail_ok);
    m->ran = true;
    return 0;
}

/* Every call in sequence, from the op's `done`: where vf_mpi_push calls
 * it (VF_MPI_ELSEWHERE) too, they are refused, as the rank that runs the
 * op refuses them in its `done` (found trying MPI as a user: a wait from
 * there joined the agreement on one rank only, and the job hung). */
static void misuse_done(void *arg, int status)
{
    (void)status;
    misuse *m = arg;
    int codes[NCALLS];
    bool detail_ok[NCALLS];
    calls_in_sequence(m->e, m->v, codes, detail_ok);
    for (int i = 0; i < NCALLS; i++) {
        int none = 0;
        if (codes[i] != VF_EDEADLK || !detail_ok[i])
            atomic_compare_exchange_strong(&m->done_bad[i], &none,
                                           codes[i] != VF_EDEADLK ? codes[i]
                                                                  : -1000);
    }
    atomic_fetch_add(&m->dones, 1);
}

static void check_refused(const misuse *m, const char *where)
{
    if (!m->ran) {
        CHECK_REPORT_("%s: the misusing op did not run", where);
        return;
    }
    for (int i = 0; i < NCALLS; i++) {
        if (m->codes[i] != VF_EDEADLK)
            CHECK_REPORT_("%s: %s from inside an op returned %s, not "
                          "VF_EDEADLK",
                          where, call_names[i], vf_error_name(m->codes[i]));
        else if (!m->detail_ok[i])
            CHECK_REPORT_("%s: %s's detail does not name it", where,
                          call_names[i]);
    }
}

/* The dones of `pushed` ops: each ran, and refused every call. */
static void check_refused_in_done(misuse *m, int pushed)
{
    CHECK_EQ(atomic_load(&m->dones), pushed);
    for (int i = 0; i < NCALLS; i++) {
        int bad = atomic_load(&m->done_bad[i]);
        if (bad != 0)
            CHECK_REPORT_("%s from a done: %s", call_names[i],
                          bad == -1000 ? "its detail does not name it"
                                       : vf_error_name(bad));
    }
}

typedef struct add_arg {
    vf_var in, out;
} add_arg;

static int add(vf_run *run, void *arg)
{
    const add_arg *a = arg;
    vf_engine *e = vf_run_engine(run);
    const uint64_t *in = vf_mpi_data(e, a->in);
    uint64_t *out = vf_mpi_data(e, a->out);
    if (in == NULL || out == NULL)
        return VF_EINVAL;
    *out += *in + 1;
    return 0;
}

/* The program every rank then runs: value i starts at i; each value in
 * turn is added (+1) into the next, around the ring twice. */
static void normal_program(vf_engine *e)
{
    int n = test_size_ + 1;
    uint64_t bufs[8], want[8];
    vf_var vars[8];
    add_arg args[16];
    for (int i = 0; i < n; i++) {
        bufs[i] = want[i] = (uint64_t)i;
        vars[i] = mpi_test_var(e, &bufs[i], sizeof bufs[i], i % test_size_);
    }
    for (int k = 0; k < 2 * n; k++) {
        int i = k % n, j = (k + 1) % n;
        args[k] = (add_arg){vars[i], vars[j]};
        want[j] += want[i] + 1;
        CHECK_OK(vf_mpi_push(e,
                             &(vf_op){.fn = add,
                                      .arg = &args[k],
                                      .reads = {&vars[i], 1},
                                      .writes = {&vars[j], 1}},
                             VF_MPI_OWNER));
    }
    vf_error err;
    CHECK_OK(vf_mpi_wait_all(e, &err));
    for (int i = 0; i < n; i++) {
        CHECK_OK(vf_mpi_get(e, vars[i], VF_MPI_ALL, &err));
        const uint64_t *got = vf_mpi_data(e, vars[i]);
        if (got == NULL || *got != want[i])
            CHECK_REPORT_("value %d is %llu, the serial program's %llu", i,
                          got ? (unsigned long long)*got : 0ull,
                          (unsigned long long)want[i]);
    }
    for (int i = 0; i < n; i++)
        CHECK_OK(vf_mpi_var_destroy(e, vars[i]));
    /* The owners' buffers are this frame's: a sending rank's vf_mpi_get
     * returned once its send was pushed (varflow_mpi.h), so the sends and
     * the deletes must be done before the frame goes. */
    CHECK_OK(vf_mpi_wait_all(e, &err));
}

int main(int argc, char **argv)
{
    mpi_test_begin(&argc, &argv);
    alarm(120); /* a hung job fails (SIGALRM ends this rank) */
    for (int kind = 0; kind < 2; kind++) {
        vf_engine *e = mpi_test_attached(kind);
        uint64_t owned = 7;
        static misuse distributed[4], local[4];
        misuse *m = &distributed[kind], *l = &local[kind];
        memset(m, 0, sizeof *m);
        memset(l, 0, sizeof *l);
        m->e = l->e = e;
        m->v = l->v = mpi_test_var(e, &owned, sizeof owned, 0);
        /* One misusing op on each rank, pushed in sequence everywhere;
         * and a rank-local one here. The program's own wait_all follows
         * at once, so a misusing op may run while the other ranks are in
         * its agreement. */
        vf_var anchors[4];
        uint64_t abuf[4] = {0};
        for (int r = 0; r < test_size_ && r < 4; r++) {
            anchors[r] = mpi_test_var(e, &abuf[r], sizeof abuf[r], r);
            CHECK_OK(vf_mpi_push(e,
                                 &(vf_op){.fn = misuse_fn,
                                          .arg = m,
                                          .done = misuse_done,
                                          .writes = {&anchors[r], 1}},
                                 r));
        }
        vf_var lv;
        CHECK_OK(vf_var_create(e, &lv));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = misuse_fn, .arg = l, .writes = VF_VARS(lv)}));
        vf_error err;
        CHECK_OK(vf_mpi_wait_all(e, &err));
        check_refused(m, "an op pushed with vf_mpi_push");
        check_refused_in_done(m, test_size_ < 4 ? test_size_ : 4);
        check_refused(l, "a rank-local op");
        for (int r = 0; r < test_size_ && r < 4; r++)
            CHECK_OK(vf_mpi_var_destroy(e, anchors[r]));
        CHECK_OK(vf_mpi_var_destroy(e, m->v));
        CHECK_OK(vf_var_destroy(e, lv, NULL, NULL));

        normal_program(e);
        CHECK_OK(vf_mpi_destroy(e, &err));
        CHECK_OK(vf_engine_destroy(e));
    }
    alarm(0);
    return mpi_test_end("test_mpi_in_op");
}
