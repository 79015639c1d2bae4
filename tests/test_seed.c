/*
 * test_seed: the two seed programs of the design, on every engine kind.
 *
 * Program 1: A=2; B=A+1; C=A+2; D=B*C. D must be 12, and on engines with
 * two workers B and C (both only read A) must run at the same time: each
 * waits at a rendezvous until the other has started (10 s timeout).
 *
 * Program 2: A=2; B=2; B=A+B; C=A+2; delete A (with a free callback).
 * Values B=4, C=4; B=A+B starts after both A=2 and B=2 ended; C=A+2 after
 * A=2; the free callback runs exactly once, after every op that used A;
 * versions: A 1 before its delete (and VF_ESTALE after), B 2, C 1.
 */
#include "runner.h"

/* ------------------------------------------------------------ program 1 */

typedef struct prog1 {
    double a, b, c, d;
    tu_rv rv;        /* B and C meet here */
    bool rendezvous; /* B and C must meet */
    atomic_int met;  /* how many of B, C saw the other */
    atomic_int worker_b, worker_c;
} prog1;

static int p1_set_a(vf_run *run, void *arg)
{
    (void)run;
    ((prog1 *)arg)->a = 2;
    return 0;
}

static int p1_b(vf_run *run, void *arg)
{
    prog1 *p = arg;
    atomic_store(&p->worker_b, vf_run_worker(run));
    if (p->rendezvous && tu_rv_meet(&p->rv, 2, TU_TIMEOUT))
        atomic_fetch_add(&p->met, 1);
    p->b = p->a + 1;
    return 0;
}

static int p1_c(vf_run *run, void *arg)
{
    prog1 *p = arg;
    atomic_store(&p->worker_c, vf_run_worker(run));
    if (p->rendezvous && tu_rv_meet(&p->rv, 2, TU_TIMEOUT))
        atomic_fetch_add(&p->met, 1);
    p->c = p->a + 2;
    return 0;
}

static int p1_d(vf_run *run, void *arg)
{
    (void)run;
    prog1 *p = arg;
    p->d = p->b * p->c;
    return 0;
}

TEST_KIND_CASE(program1, k)
{
    prog1 p;
    memset(&p, 0, sizeof p);
    tu_rv_init(&p.rv);
    p.rendezvous = k->threaded && k->workers >= 2;

    vf_engine *e = tu_engine(k);
    vf_var A = tu_var(e), B = tu_var(e), C = tu_var(e), D = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p1_set_a,
                                        .arg = &p,
                                        .writes = VF_VARS(A),
                                        .name = "A=2"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p1_b,
                                        .arg = &p,
                                        .reads = VF_VARS(A),
                                        .writes = VF_VARS(B),
                                        .name = "B=A+1"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p1_c,
                                        .arg = &p,
                                        .reads = VF_VARS(A),
                                        .writes = VF_VARS(C),
                                        .name = "C=A+2"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p1_d,
                                        .arg = &p,
                                        .reads = VF_VARS(B, C),
                                        .writes = VF_VARS(D),
                                        .name = "D=B*C"}));
    CHECK_OK(vf_var_wait(e, D, NULL));
    CHECK(p.d == 12.0);
    CHECK(p.b == 3.0 && p.c == 4.0);
    if (p.rendezvous) {
        /* Both saw the other running: B and C ran at the same time. */
        CHECK_EQ(atomic_load(&p.met), 2);
        CHECK(atomic_load(&p.worker_b) != atomic_load(&p.worker_c));
        CHECK(atomic_load(&p.worker_b) >= 0);
        CHECK(atomic_load(&p.worker_c) >= 0);
    }
    uint64_t ver = 99;
    CHECK_OK(vf_var_version(e, D, &ver));
    CHECK_EQ(ver, 1);
    CHECK_OK(vf_var_version(e, A, &ver));
    CHECK_EQ(ver, 1);
    tu_finish_engine(e);
    tu_rv_destroy(&p.rv);
}

/* ------------------------------------------------------------ program 2 */

typedef struct stamps {
    uint64_t start, end;
} stamps;

typedef struct prog2 {
    double a, b, c;
    stamps set_a, set_b, b_ab, c_a2, freed;
    atomic_int free_calls;
    bool a_alive; /* the "buffer" behind A: the free callback clears it */
} prog2;

/* Each op of program 2 records when it started and ended; the readers of A
 * are slow so that an early free would show. */
static int p2_set_a(vf_run *run, void *arg)
{
    (void)run;
    prog2 *p = arg;
    p->set_a.start = tu_stamp();
    tu_spin_us(300);
    p->a = 2;
    p->set_a.end = tu_stamp();
    return 0;
}

static int p2_set_b(vf_run *run, void *arg)
{
    (void)run;
    prog2 *p = arg;
    p->set_b.start = tu_stamp();
    tu_spin_us(300);
    p->b = 2;
    p->set_b.end = tu_stamp();
    return 0;
}

static int p2_b_ab(vf_run *run, void *arg)
{
    (void)run;
    prog2 *p = arg;
    p->b_ab.start = tu_stamp();
    CHECK(p->a_alive);
    tu_spin_us(1000);
    p->b = p->a + p->b;
    CHECK(p->a_alive);
    p->b_ab.end = tu_stamp();
    return 0;
}

static int p2_c_a2(vf_run *run, void *arg)
{
    (void)run;
    prog2 *p = arg;
    p->c_a2.start = tu_stamp();
    CHECK(p->a_alive);
    tu_spin_us(2000);
    p->c = p->a + 2;
    CHECK(p->a_alive);
    p->c_a2.end = tu_stamp();
    return 0;
}

static void p2_free_a(void *arg)
{
    prog2 *p = arg;
    p->freed.start = tu_stamp();
    p->a_alive = false;
    atomic_fetch_add(&p->free_calls, 1);
    p->freed.end = tu_stamp();
}

TEST_KIND_CASE(program2, k)
{
    prog2 p;
    memset(&p, 0, sizeof p);
    p.a_alive = true;

    vf_engine *e = tu_engine(k);
    vf_var A = tu_var(e), B = tu_var(e), C = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p2_set_a,
                                        .arg = &p,
                                        .writes = VF_VARS(A),
                                        .name = "A=2"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p2_set_b,
                                        .arg = &p,
                                        .writes = VF_VARS(B),
                                        .name = "B=2"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p2_b_ab,
                                        .arg = &p,
                                        .reads = VF_VARS(A, B),
                                        .writes = VF_VARS(B),
                                        .name = "B=A+B"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = p2_c_a2,
                                        .arg = &p,
                                        .reads = VF_VARS(A),
                                        .writes = VF_VARS(C),
                                        .name = "C=A+2"}));
    CHECK_OK(vf_var_wait(e, A, NULL));
    uint64_t ver = 99;
    CHECK_OK(vf_var_version(e, A, &ver));
    CHECK_EQ(ver, 1);
    CHECK_OK(vf_var_destroy(e, A, p2_free_a, &p));
    CHECK_ERR(vf_var_version(e, A, &ver), VF_ESTALE);

    CHECK_OK(vf_var_wait(e, B, NULL));
    CHECK_OK(vf_var_wait(e, C, NULL));
    CHECK(p.b == 4.0);
    CHECK(p.c == 4.0);
    CHECK_OK(vf_var_version(e, B, &ver));
    CHECK_EQ(ver, 2);
    CHECK_OK(vf_var_version(e, C, &ver));
    CHECK_EQ(ver, 1);

    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&p.free_calls), 1);
    /* B=A+B after A=2 and after B=2. */
    CHECK(p.set_a.end < p.b_ab.start);
    CHECK(p.set_b.end < p.b_ab.start);
    /* C=A+2 after A=2. */
    CHECK(p.set_a.end < p.c_a2.start);
    /* The free after every op that used A. */
    CHECK(p.set_a.end < p.freed.start);
    CHECK(p.b_ab.end < p.freed.start);
    CHECK(p.c_a2.end < p.freed.start);
    if (p.b_ab.end >= p.freed.start || p.c_a2.end >= p.freed.start)
        fprintf(stderr,
                "  stamps: B=A+B ended %" PRIu64 ", C=A+2 ended %" PRIu64
                ", free started %" PRIu64 "\n",
                p.b_ab.end, p.c_a2.end, p.freed.start);
    CHECK_OK(vf_engine_destroy(e));
}

TEST_MAIN("test_seed", 120)
