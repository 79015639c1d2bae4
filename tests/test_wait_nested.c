/*
 * test_wait_nested: waits from inside running ops (rule 10), on the naive,
 * pooled (1 and 2 workers) and perdevice engines.
 *
 * - an op pushes B (writes v) and waits on v: returns 0 with B's effect
 *   visible; with one worker this only finishes if the waiting worker runs
 *   B itself; nested three deep (B pushes C and waits too);
 * - no false alarms: waiting on a var whose writer waits behind another,
 *   unrelated op, or whose writer only reads what the waiting op reads,
 *   returns 0;
 * - an op waiting on a var it writes itself (or reads and writes) gets
 *   VF_EDEADLK at once; wait_all inside an op gets VF_EDEADLK;
 * - wait cycles get VF_EDEADLK instead of hanging: A (writes a) pushes
 *   B (reads a, writes b) and waits on b; the same with a chain A -> B -> C;
 *   the same with B pushed by the main thread after A started; and two ops
 *   each waiting on what the other writes (at least one is told
 *   VF_EDEADLK, both finish);
 * - after all that the engine is fine: everything pushed ran once.
 * A hang is caught by the watchdog, which names the scenario.
 */
#include "util.h"

typedef struct ctx {
    vf_var a, b, c, v, s;
    int bval, cval;
    atomic_int ran_b, ran_c, ran_s;
    int rc1, rc2, rc3;
    tu_gate go;
    bool use_gate;
    atomic_int p_rc, q_rc;
    atomic_int p_done, q_done;
} ctx;

static int set_b(vf_run *run, void *arg)
{
    (void)run;
    ctx *c = arg;
    c->bval = 1;
    atomic_fetch_add(&c->ran_b, 1);
    return 0;
}

static int set_c(vf_run *run, void *arg)
{
    (void)run;
    ctx *c = arg;
    c->cval = 1;
    atomic_fetch_add(&c->ran_c, 1);
    return 0;
}

static int slow_s(vf_run *run, void *arg)
{
    (void)run;
    ctx *c = arg;
    tu_spin_us(2000);
    atomic_fetch_add(&c->ran_s, 1);
    return 0;
}

/* ---- push and wait, nested three deep */

static int level2(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(vf_push(e, &(vf_op){.fn = set_c, .arg = c,
                                 .writes = tu_list(&c->c, 1)}));
    c->rc2 = vf_wait_var(e, c->c, NULL);
    c->bval = c->cval + 1; /* C's effect must be visible */
    atomic_fetch_add(&c->ran_b, 1);
    return 0;
}

static int level1(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(vf_push(e, &(vf_op){.fn = level2, .arg = c,
                                 .writes = tu_list(&c->b, 1)}));
    c->rc1 = vf_wait_var(e, c->b, NULL);
    CHECK_EQ(c->bval, 2);
    return 0;
}

static void push_and_wait(const tu_kind *k)
{
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.c = tu_var(e);
    c.rc1 = c.rc2 = 99;
    CHECK_OK(vf_push(e, &(vf_op){.fn = level1, .arg = &c,
                                 .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_wait_all(e, NULL));
    CHECK_EQ(c.rc1, 0);
    CHECK_EQ(c.rc2, 0);
    CHECK_EQ(c.bval, 2);
    CHECK_EQ(atomic_load(&c.ran_b), 1);
    CHECK_EQ(atomic_load(&c.ran_c), 1);
    tu_finish_engine(e);
}

/* ---- no false alarms */

static int waits_behind_slow(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    /* S (slow, writes s) then B (reads s, writes b): B waits for S, which
     * does not depend on this op: the wait must succeed. */
    CHECK_OK(vf_push(e, &(vf_op){.fn = slow_s, .arg = c,
                                 .writes = tu_list(&c->s, 1)}));
    CHECK_OK(vf_push(e, &(vf_op){.fn = set_b, .arg = c,
                                 .reads = tu_list(&c->s, 1),
                                 .writes = tu_list(&c->b, 1)}));
    c->rc1 = vf_wait_var(e, c->b, NULL);
    CHECK_EQ(atomic_load(&c->ran_s), 1);
    /* C only reads a, which this op only reads: no conflict. */
    CHECK_OK(vf_push(e, &(vf_op){.fn = set_c, .arg = c,
                                 .reads = tu_list(&c->a, 1),
                                 .writes = tu_list(&c->c, 1)}));
    c->rc2 = vf_wait_var(e, c->c, NULL);
    CHECK_EQ(c->cval, 1);
    return 0;
}

static void no_false_alarm(const tu_kind *k)
{
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.c = tu_var(e);
    c.s = tu_var(e);
    c.rc1 = c.rc2 = 99;
    CHECK_OK(vf_push(e, &(vf_op){.fn = waits_behind_slow, .arg = &c,
                                 .reads = tu_list(&c.a, 1)}));
    CHECK_OK(vf_wait_all(e, NULL));
    CHECK_EQ(c.rc1, 0);
    CHECK_EQ(c.rc2, 0);
    CHECK_EQ(atomic_load(&c.ran_b), 1);
    CHECK_EQ(atomic_load(&c.ran_c), 1);
    tu_finish_engine(e);
}

/* ---- self waits */

static int self_wait(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    c->rc1 = vf_wait_var(e, c->a, NULL); /* writes a itself */
    c->rc2 = vf_wait_all(e, NULL);
    c->rc3 = vf_wait_var(e, c->b, NULL); /* reads and writes b */
    return 0;
}

static void self_waits(const tu_kind *k)
{
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.rc1 = c.rc2 = c.rc3 = 99;
    CHECK_OK(vf_push(e, &(vf_op){.fn = self_wait, .arg = &c,
                                 .reads = tu_list(&c.b, 1),
                                 .writes = VF_VARS(c.a, c.b)}));
    CHECK_OK(vf_wait_all(e, NULL));
    CHECK_ERR(c.rc1, VF_EDEADLK);
    CHECK_ERR(c.rc2, VF_EDEADLK);
    CHECK_ERR(c.rc3, VF_EDEADLK);
    tu_finish_engine(e);
}

/* ---- wait cycles */

static int cycle_nested(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    /* B needs a, which this op holds: waiting on b can never finish. */
    CHECK_OK(vf_push(e, &(vf_op){.fn = set_b, .arg = c,
                                 .reads = tu_list(&c->a, 1),
                                 .writes = tu_list(&c->b, 1)}));
    c->rc1 = vf_wait_var(e, c->b, NULL);
    /* Longer: C needs b, B needs a. */
    CHECK_OK(vf_push(e, &(vf_op){.fn = set_c, .arg = c,
                                 .reads = tu_list(&c->b, 1),
                                 .writes = tu_list(&c->c, 1)}));
    c->rc2 = vf_wait_var(e, c->c, NULL);
    CHECK_EQ(atomic_load(&c->ran_b), 0);
    CHECK_EQ(atomic_load(&c->ran_c), 0);
    return 0;
}

static void cycles_nested(const tu_kind *k)
{
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.c = tu_var(e);
    c.rc1 = c.rc2 = 99;
    CHECK_OK(vf_push(e, &(vf_op){.fn = cycle_nested, .arg = &c,
                                 .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_wait_all(e, NULL));
    CHECK_ERR(c.rc1, VF_EDEADLK);
    CHECK_ERR(c.rc2, VF_EDEADLK);
    CHECK_EQ(atomic_load(&c.ran_b), 1);
    CHECK_EQ(atomic_load(&c.ran_c), 1);
    tu_finish_engine(e);
}

/* B pushed by the main thread after A started; A then waits on b. */
static int cycle_outer_a(vf_run *run, void *arg)
{
    ctx *c = arg;
    CHECK(tu_gate_wait(&c->go, TU_TIMEOUT));
    c->rc1 = vf_wait_var(vf_run_engine(run), c->b, NULL);
    return 0;
}

static void cycle_outer(const tu_kind *k)
{
    if (!k->threaded)
        return; /* A would run inside its push, before B exists */
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    tu_gate_init(&c.go);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.rc1 = 99;
    CHECK_OK(vf_push(e, &(vf_op){.fn = cycle_outer_a, .arg = &c,
                                 .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_push(e, &(vf_op){.fn = set_b, .arg = &c,
                                 .reads = tu_list(&c.a, 1),
                                 .writes = tu_list(&c.b, 1)}));
    tu_gate_open(&c.go);
    CHECK_OK(vf_wait_all(e, NULL));
    CHECK_ERR(c.rc1, VF_EDEADLK);
    CHECK_EQ(atomic_load(&c.ran_b), 1);
    tu_finish_engine(e);
    tu_gate_destroy(&c.go);
}

/* P (writes p=a) waits on q=b, Q (writes q) waits on p. */
static int op_p(vf_run *run, void *arg)
{
    ctx *c = arg;
    CHECK(tu_gate_wait(&c->go, TU_TIMEOUT));
    atomic_store(&c->p_rc, vf_wait_var(vf_run_engine(run), c->b, NULL));
    atomic_store(&c->p_done, 1);
    return 0;
}

static int op_q(vf_run *run, void *arg)
{
    ctx *c = arg;
    CHECK(tu_gate_wait(&c->go, TU_TIMEOUT));
    atomic_store(&c->q_rc, vf_wait_var(vf_run_engine(run), c->a, NULL));
    atomic_store(&c->q_done, 1);
    return 0;
}

static void mutual_wait(const tu_kind *k)
{
    if (!k->threaded)
        return;
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    tu_gate_init(&c.go);
    c.a = tu_var(e);
    c.b = tu_var(e);
    atomic_store(&c.p_rc, 99);
    atomic_store(&c.q_rc, 99);
    CHECK_OK(vf_push(e, &(vf_op){.fn = op_p, .arg = &c,
                                 .writes = tu_list(&c.a, 1), .name = "P"}));
    CHECK_OK(vf_push(e, &(vf_op){.fn = op_q, .arg = &c,
                                 .writes = tu_list(&c.b, 1), .name = "Q"}));
    tu_gate_open(&c.go);
    CHECK_OK(vf_wait_all(e, NULL));
    int p = atomic_load(&c.p_rc), q = atomic_load(&c.q_rc);
    CHECK(p == 0 || p == VF_EDEADLK);
    CHECK(q == 0 || q == VF_EDEADLK);
    if (p != VF_EDEADLK && q != VF_EDEADLK)
        CHECK_REPORT_("neither wait of the cycle was refused: P %s, Q %s",
                      vf_err_name(p), vf_err_name(q));
    CHECK_EQ(atomic_load(&c.p_done), 1);
    CHECK_EQ(atomic_load(&c.q_done), 1);
    tu_finish_engine(e);
    tu_gate_destroy(&c.go);
}

int main(void)
{
    tu_init("test_wait_nested", 120);
    for (int i = 0; i < TU_NKINDS; i++) {
        const tu_kind *k = &tu_kinds[i];
        check_context_ = k->name;
        tu_phase("push_and_wait");
        push_and_wait(k);
        tu_phase("no_false_alarm");
        no_false_alarm(k);
        tu_phase("self_waits");
        self_waits(k);
        tu_phase("cycles_nested");
        cycles_nested(k);
        tu_phase("cycle_outer");
        cycle_outer(k);
        tu_phase("mutual_wait");
        mutual_wait(k);
    }
    check_context_ = NULL;
    return check_finish("test_wait_nested");
}
