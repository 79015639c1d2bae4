/*
 * test_wait_nested: waits from inside running ops (rule 10), on the naive,
 * pooled (1 and 2 workers) and perdevice engines.
 *
 * - an op pushes B (writes v) and waits on v: returns 0 with B's effect
 *   visible; with one worker this only finishes if the waiting worker runs
 *   B itself; nested three deep (B pushes C and waits too);
 * - no false alarms: waiting on a var whose writer waits behind another,
 *   unrelated op, or whose writer only reads what the waiting op reads,
 *   returns 0; so does a wait on a var the op reads itself, with a later
 *   write of it queued that waits for the op;
 * - an op waiting on a var it writes itself (or reads and writes) gets
 *   VF_EDEADLK at once; wait_all inside an op gets VF_EDEADLK;
 * - so does a child, or a grandchild, waiting on a var an op it descends
 *   from writes (the naive engine hung there; a threaded one returned 0
 *   when the child ran after its parent), and not on one it only reads;
 * - wait cycles get VF_EDEADLK instead of hanging: A (writes a) pushes
 *   B (reads a, writes b) and waits on b; the same with a chain A -> B -> C;
 * - a wait inside an op counts no write of an op pushed after it, as in
 *   the serial program: B (reads a, writes b) pushed by the main thread
 *   after A (writes a) started, A's wait on b returns 0 at once; two ops
 *   each waiting on what the other writes: the first's wait returns 0, the
 *   second's once the first has ended;
 * - no false alarm with async ops: an op waiting on a var written by an
 *   async op that a foreign thread completes later gets 0, not VF_EDEADLK;
 * - the trapped waiter (1 worker): op A (writes a) waits on v; while it
 *   waits, the worker runs B (higher priority, pushed by the main thread
 *   while A ran), and B waits on a. A's wait can finish, but A cannot
 *   return before B does, and B waits for A: B's wait can never finish and
 *   must be refused with VF_EDEADLK (or the engine must not have stacked B
 *   on A's worker, and then B's wait returns 0 after A); it must not hang.
 * - a look (a timed wait of 0) inside an op runs nothing: B, ready but
 *   needing the op's thread, stays unrun however often it looks; a timed
 *   wait runs it (naive, one worker);
 * - after all that the engine is fine: everything pushed ran once.
 * A hang is caught by the watchdog, which names the scenario.
 */
#include "runner.h"

#include <string.h>
#include <time.h>

typedef struct ctx {
    vf_var a, b, c, v, s;
    int bval, cval;
    atomic_int ran_b, ran_c, ran_s;
    int rc1, rc2, rc3;
    char detail1[256], detail2[256]; /* what rc1, rc2 came with */
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
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = set_c, .arg = c, .writes = tu_list(&c->c, 1)}));
    c->rc2 = vf_var_wait(e, c->c, NULL);
    c->bval = c->cval + 1; /* C's effect must be visible */
    atomic_fetch_add(&c->ran_b, 1);
    return 0;
}

static int level1(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = level2, .arg = c, .writes = tu_list(&c->b, 1)}));
    c->rc1 = vf_var_wait(e, c->b, NULL);
    CHECK_EQ(c->bval, 2);
    return 0;
}

TEST_KIND_CASE(push_and_wait, k)
{
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.c = tu_var(e);
    c.rc1 = c.rc2 = 99;
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = level1, .arg = &c, .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
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
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = slow_s, .arg = c, .writes = tu_list(&c->s, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = set_b,
                                        .arg = c,
                                        .reads = tu_list(&c->s, 1),
                                        .writes = tu_list(&c->b, 1)}));
    c->rc1 = vf_var_wait(e, c->b, NULL);
    CHECK_EQ(atomic_load(&c->ran_s), 1);
    /* C only reads a, which this op only reads: no conflict. */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = set_c,
                                        .arg = c,
                                        .reads = tu_list(&c->a, 1),
                                        .writes = tu_list(&c->c, 1)}));
    c->rc2 = vf_var_wait(e, c->c, NULL);
    CHECK_EQ(c->cval, 1);
    return 0;
}

TEST_KIND_CASE(no_false_alarm, k)
{
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.c = tu_var(e);
    c.s = tu_var(e);
    c.rc1 = c.rc2 = 99;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = waits_behind_slow,
                                        .arg = &c,
                                        .reads = tu_list(&c.a, 1)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(c.rc1, 0);
    CHECK_EQ(c.rc2, 0);
    CHECK_EQ(atomic_load(&c.ran_b), 1);
    CHECK_EQ(atomic_load(&c.ran_c), 1);
    tu_finish_engine(e);
}

/* ---- a wait on a var the op reads itself */

typedef struct read_wait {
    vf_engine *e;
    vf_var x, y;
    tu_gate pushed; /* the later write of x is queued */
    int rc;
} read_wait;

static int waits_on_own_read(vf_run *run, void *arg)
{
    (void)run;
    read_wait *t = arg;
    REQUIRE(tu_gate_wait(&t->pushed, TU_TIMEOUT));
    t->rc = vf_var_wait(t->e, t->x, NULL);
    return 0;
}

/* P reads x and writes y; Q, pushed after P, reads y and writes x. P waits
 * on x once Q is queued: the serial program's wait (inside P, before Q's
 * push) has nothing to wait for: 0, on every engine and whatever the
 * timing (the threaded engines got VF_EDEADLK: the marker went behind Q,
 * which waits for P; found trying waits inside ops as a user). */
TEST_KIND_CASE(wait_on_a_var_the_op_reads, k)
{
    read_wait t;
    memset(&t, 0, sizeof t);
    t.e = tu_engine(k);
    t.x = tu_var(t.e);
    t.y = tu_var(t.e);
    tu_gate_init(&t.pushed);
    for (int i = 0; i < 10; i++) {
        t.rc = -99;
        if (!k->threaded) /* P runs inside its push */
            tu_gate_open(&t.pushed);
        CHECK_OK(vf_engine_push(t.e, &(vf_op){.fn = waits_on_own_read,
                                              .arg = &t,
                                              .reads = tu_list(&t.x, 1),
                                              .writes = tu_list(&t.y, 1)}));
        CHECK_OK(vf_engine_push(t.e, &(vf_op){.fn = tu_nop,
                                              .reads = tu_list(&t.y, 1),
                                              .writes = tu_list(&t.x, 1)}));
        tu_gate_open(&t.pushed);
        CHECK_OK(vf_engine_wait_all(t.e, NULL));
        CHECK_OK(t.rc);
        tu_gate_destroy(&t.pushed);
        tu_gate_init(&t.pushed);
    }
    tu_gate_destroy(&t.pushed);
    tu_finish_engine(t.e);
}

/* ---- self waits */

static int self_wait(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    c->rc1 = vf_var_wait(e, c->a, NULL); /* writes a itself */
    snprintf(c->detail1, sizeof c->detail1, "%s", vf_error_detail());
    c->rc2 = vf_engine_wait_all(e, NULL);
    snprintf(c->detail2, sizeof c->detail2, "%s", vf_error_detail());
    c->rc3 = vf_var_wait(e, c->b, NULL); /* reads and writes b */
    return 0;
}

/* The detail names an unnamed op as its failure would: op #<place>. */
static void check_names_op(const char *detail)
{
    if (strstr(detail, "op #") == NULL || strstr(detail, "op \"\"") != NULL)
        CHECK_REPORT_("detail '%s' does not name the unnamed op as op #N",
                      detail);
}

TEST_KIND_CASE(self_waits, k)
{
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.rc1 = c.rc2 = c.rc3 = 99;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = self_wait,
                                        .arg = &c,
                                        .reads = tu_list(&c.b, 1),
                                        .writes = VF_VARS(c.a, c.b)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_ERR(c.rc1, VF_EDEADLK);
    CHECK_ERR(c.rc2, VF_EDEADLK);
    CHECK_ERR(c.rc3, VF_EDEADLK);
    check_names_op(c.detail1);
    check_names_op(c.detail2);
    tu_finish_engine(e);
}

/* ---- waits on what an ancestor writes: A (writes a, reads s) pushes C,
 * C pushes G; each waits on a (never: A runs around them in the serial
 * program) and on s (A only reads it: 0). */

typedef struct anc_ctx {
    vf_var a, s;
    int rc_child, rc_grand, rc_read;
    char detail_child[256], detail_grand[256];
    atomic_int ran;
} anc_ctx;

static int anc_grand(vf_run *run, void *arg)
{
    anc_ctx *c = arg;
    c->rc_grand = vf_var_wait(vf_run_engine(run), c->a, NULL);
    snprintf(c->detail_grand, sizeof c->detail_grand, "%s", vf_error_detail());
    atomic_fetch_add(&c->ran, 1);
    return 0;
}

static int anc_child(vf_run *run, void *arg)
{
    anc_ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    c->rc_child = vf_var_wait(e, c->a, NULL);
    snprintf(c->detail_child, sizeof c->detail_child, "%s", vf_error_detail());
    c->rc_read = vf_var_wait(e, c->s, NULL);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = anc_grand, .arg = c}));
    CHECK_OK(vf_run_wait_children(run, NULL));
    atomic_fetch_add(&c->ran, 1);
    return 0;
}

static int anc_parent(vf_run *run, void *arg)
{
    anc_ctx *c = arg;
    CHECK_OK(vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = anc_child, .arg = c}));
    return 0;
}

TEST_KIND_CASE(ancestor_writes, k)
{
    vf_engine *e = tu_engine(k);
    anc_ctx c;
    memset(&c, 0, sizeof c);
    c.rc_child = c.rc_grand = c.rc_read = 99;
    c.a = tu_var(e);
    c.s = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = anc_parent,
                                        .arg = &c,
                                        .reads = tu_list(&c.s, 1),
                                        .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&c.ran), 2);
    CHECK_ERR(c.rc_child, VF_EDEADLK);
    CHECK(strstr(c.detail_child, "pushed from (1 level up)") != NULL);
    CHECK_ERR(c.rc_grand, VF_EDEADLK);
    CHECK(strstr(c.detail_grand, "(2 levels up)") != NULL);
    CHECK_OK(c.rc_read);
    tu_finish_engine(e);
}

/* An op at level 5 writes a; its descendants down to level `bottom` push
 * on, the one at `bottom` waits on a (VF_EDEADLK) and, pushing a child
 * that reads a, for its children (VF_EDEADLK too): each detail counts the
 * levels between, past VF__FAMILY_DEPTH (128) too (counted along the
 * family chain, which skips levels there, they said 123 for 130 and 295:
 * found by a user tester). */
typedef struct deep_anc {
    vf_var a;
    int bottom;
    int rc_var, rc_children;
    char detail_var[256], detail_children[256];
} deep_anc;

typedef struct deep_level {
    deep_anc *c;
    int level;
} deep_level;

static int deep_reader(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static int deep_op(vf_run *run, void *arg)
{
    const deep_level *l = arg;
    deep_anc *c = l->c;
    vf_engine *e = vf_run_engine(run);
    if (l->level == c->bottom) {
        c->rc_var = vf_var_wait(e, c->a, NULL);
        snprintf(c->detail_var, sizeof c->detail_var, "%s", vf_error_detail());
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = deep_reader, .reads = tu_list(&c->a, 1)}));
        c->rc_children = vf_run_wait_children(run, NULL);
        snprintf(c->detail_children, sizeof c->detail_children, "%s",
                 vf_error_detail());
        return 0;
    }
    deep_level next = {c, l->level + 1};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = deep_op,
                                        .arg = &next,
                                        .arg_size = sizeof next,
                                        .writes = l->level + 1 == 5
                                                      ? tu_list(&c->a, 1)
                                                      : tu_list(NULL, 0)}));
    /* Waited for above the writer only: its wait cannot finish. */
    if (l->level < 5)
        CHECK_OK(vf_run_wait_children(run, NULL));
    return 0;
}

TEST_KIND_CASE(ancestor_writes_far_up, k)
{
    static const int bottoms[] = {6, 128, 129, 135, 300};
    for (int i = 0; i < 5; i++) {
        vf_engine *e = tu_engine(k);
        deep_anc c = {.a = tu_var(e), .bottom = bottoms[i]};
        deep_level top = {&c, 1};
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = deep_op, .arg = &top, .arg_size = sizeof top}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        int up = c.bottom - 5;
        char want[64];
        snprintf(want, sizeof want, "(%d level%s up)", up, up == 1 ? "" : "s");
        CHECK_ERR(c.rc_var, VF_EDEADLK);
        if (strstr(c.detail_var, want) == NULL)
            CHECK_REPORT_("level %d: %s", c.bottom, c.detail_var);
        snprintf(want, sizeof want, "an op %d levels above", up + 1);
        CHECK_ERR(c.rc_children, VF_EDEADLK);
        if (strstr(c.detail_children, want) == NULL)
            CHECK_REPORT_("level %d: %s", c.bottom, c.detail_children);
        tu_finish_engine(e);
    }
}

/* An unnamed child with no vars (run at its push, where a pool of one
 * worker runs it) waits on a var its parent writes: the refusal names it
 * "op #N" on every engine kind (it said "an unnamed op" there, where the
 * others said "op #2": found by a user tester). */
typedef struct named_ctx {
    vf_var a;
    int rc;
    char detail[256];
} named_ctx;

static int named_child(vf_run *run, void *arg)
{
    named_ctx *c = arg;
    c->rc = vf_var_wait(vf_run_engine(run), c->a, NULL);
    snprintf(c->detail, sizeof c->detail, "%s", vf_error_detail());
    return 0;
}

static int named_parent(vf_run *run, void *arg)
{
    CHECK_OK(vf_engine_push(vf_run_engine(run),
                            &(vf_op){.fn = named_child, .arg = arg}));
    return 0;
}

TEST_KIND_CASE(a_child_run_at_its_push_is_named_by_its_place, k)
{
    vf_engine *e = tu_engine(k);
    named_ctx c = {.a = tu_var(e), .rc = 99};
    CHECK_OK(vf_engine_push(
        e,
        &(vf_op){.fn = named_parent, .arg = &c, .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_ERR(c.rc, VF_EDEADLK);
    if (strstr(c.detail, "op #") == NULL || strstr(c.detail, "unnamed") != NULL)
        CHECK_REPORT_("the detail: %s", c.detail);
    tu_finish_engine(e);
}

/* ---- wait cycles */

static int cycle_nested(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    /* B needs a, which this op holds: waiting on b can never finish. */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = set_b,
                                        .arg = c,
                                        .reads = tu_list(&c->a, 1),
                                        .writes = tu_list(&c->b, 1)}));
    c->rc1 = vf_var_wait(e, c->b, NULL);
    /* Longer: C needs b, B needs a. */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = set_c,
                                        .arg = c,
                                        .reads = tu_list(&c->b, 1),
                                        .writes = tu_list(&c->c, 1)}));
    c->rc2 = vf_var_wait(e, c->c, NULL);
    CHECK_EQ(atomic_load(&c->ran_b), 0);
    CHECK_EQ(atomic_load(&c->ran_c), 0);
    return 0;
}

TEST_KIND_CASE(cycles_nested, k)
{
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.c = tu_var(e);
    c.rc1 = c.rc2 = 99;
    CHECK_OK(vf_engine_push(
        e,
        &(vf_op){.fn = cycle_nested, .arg = &c, .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_ERR(c.rc1, VF_EDEADLK);
    CHECK_ERR(c.rc2, VF_EDEADLK);
    CHECK_EQ(atomic_load(&c.ran_b), 1);
    CHECK_EQ(atomic_load(&c.ran_c), 1);
    tu_finish_engine(e);
}

/* B (reads a, writes b) pushed by the main thread after A (writes a)
 * started; A then waits on b. The serial program (and the naive engine,
 * where A runs inside its push) runs A's wait before B exists: 0, and B
 * runs after A. The wait waited for B, which waited for A: VF_EDEADLK on
 * the pools, where the naive engine got 0 (found by the reviewer of the
 * device waiters' rule). */
static int cycle_outer_a(vf_run *run, void *arg)
{
    ctx *c = arg;
    CHECK(tu_gate_wait(&c->go, TU_TIMEOUT));
    c->rc1 = vf_var_wait(vf_run_engine(run), c->b, NULL);
    return 0;
}

TEST_KIND_CASE(later_write_is_not_waited_for, k)
{
    if (!k->threaded)
        return; /* A runs inside its push, before B exists: the same 0 */
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    tu_gate_init(&c.go);
    c.a = tu_var(e);
    c.b = tu_var(e);
    c.rc1 = 99;
    CHECK_OK(vf_engine_push(
        e,
        &(vf_op){.fn = cycle_outer_a, .arg = &c, .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = set_b,
                                        .arg = &c,
                                        .reads = tu_list(&c.a, 1),
                                        .writes = tu_list(&c.b, 1)}));
    tu_gate_open(&c.go);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(c.rc1);
    CHECK_EQ(atomic_load(&c.ran_b), 1);
    tu_finish_engine(e);
    tu_gate_destroy(&c.go);
}

/* P (writes p=a) waits on q=b, Q (writes q), pushed after P, waits on p.
 * As in the serial program, P's wait waits for no write of Q's (pushed
 * after P): 0; Q's waits for P's: 0. One of the two got VF_EDEADLK, and
 * on the naive engine neither did. */
static int op_p(vf_run *run, void *arg)
{
    ctx *c = arg;
    CHECK(tu_gate_wait(&c->go, TU_TIMEOUT));
    atomic_store(&c->p_rc, vf_var_wait(vf_run_engine(run), c->b, NULL));
    atomic_store(&c->p_done, 1);
    return 0;
}

static int op_q(vf_run *run, void *arg)
{
    ctx *c = arg;
    CHECK(tu_gate_wait(&c->go, TU_TIMEOUT));
    atomic_store(&c->q_rc, vf_var_wait(vf_run_engine(run), c->a, NULL));
    atomic_store(&c->q_done, 1);
    return 0;
}

TEST_KIND_CASE(mutual_wait, k)
{
    if (!k->threaded)
        return; /* P runs inside its push, before Q exists: the same */
    vf_engine *e = tu_engine(k);
    ctx c;
    memset(&c, 0, sizeof c);
    tu_gate_init(&c.go);
    c.a = tu_var(e);
    c.b = tu_var(e);
    atomic_store(&c.p_rc, 99);
    atomic_store(&c.q_rc, 99);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = op_p,
                                        .arg = &c,
                                        .writes = tu_list(&c.a, 1),
                                        .name = "P"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = op_q,
                                        .arg = &c,
                                        .writes = tu_list(&c.b, 1),
                                        .name = "Q"}));
    tu_gate_open(&c.go);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(atomic_load(&c.p_rc));
    CHECK_OK(atomic_load(&c.q_rc));
    CHECK_EQ(atomic_load(&c.p_done), 1);
    CHECK_EQ(atomic_load(&c.q_done), 1);
    tu_finish_engine(e);
    tu_gate_destroy(&c.go);
}

/* ---- async in flight: no false alarm */

typedef struct async_ctx {
    vf_var a, x;
    int xval;
    int rc;
    vf_completion done;
    pthread_t helper;
    atomic_int started;
} async_ctx;

static void *complete_later(void *arg)
{
    async_ctx *c = arg;
    tu_spin_us(3000);
    c->xval = 42;
    CHECK_OK(vf_completion_finish(c->done, 0, NULL));
    return NULL;
}

static void async_x(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    async_ctx *c = arg;
    c->done = done;
    c->helper = tu_thread_start(complete_later, c);
    atomic_store(&c->started, 1);
}

static int waits_for_async(vf_run *run, void *arg)
{
    async_ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = async_x,
                                        .arg = c,
                                        .writes = tu_list(&c->x, 1),
                                        .name = "async"}));
    c->rc = vf_var_wait(e, c->x, NULL);
    CHECK_EQ(c->xval, 42);
    return 0;
}

TEST_KIND_CASE(async_wait, k)
{
    vf_engine *e = tu_engine(k);
    async_ctx c;
    memset(&c, 0, sizeof c);
    c.a = tu_var(e);
    c.x = tu_var(e);
    c.rc = 99;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = waits_for_async,
                                        .arg = &c,
                                        .writes = tu_list(&c.a, 1)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_ERR(c.rc, 0);
    if (atomic_load(&c.started))
        tu_thread_join(c.helper);
    tu_finish_engine(e);
}

/* ---- the trapped waiter */

typedef struct trap {
    vf_var a, v;
    tu_gate a_started, b_pushed;
    atomic_int rc_a, rc_b, ran_v;
} trap;

static int trap_v(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((trap *)arg)->ran_v, 1);
    return 0;
}

static int trap_a(vf_run *run, void *arg)
{
    trap *t = arg;
    vf_engine *e = vf_run_engine(run);
    tu_gate_open(&t->a_started);
    CHECK(tu_gate_wait(&t->b_pushed, TU_TIMEOUT));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = trap_v,
                                        .arg = t,
                                        .writes = tu_list(&t->v, 1),
                                        .name = "V"}));
    atomic_store(&t->rc_a, vf_var_wait(e, t->v, NULL));
    return 0;
}

static int trap_b(vf_run *run, void *arg)
{
    trap *t = arg;
    atomic_store(&t->rc_b, vf_var_wait(vf_run_engine(run), t->a, NULL));
    return 0;
}

TEST_KIND_CASE(trapped, k)
{
    if (!k->threaded || k->workers != 1)
        return;
    /* When the engine gets it wrong it hangs: the watchdog ends the
     * program, naming this phase. */
    tu_phase_limit("trapped waiter (B waits on A, stacked on A's worker)", 30);
    vf_engine *e = tu_engine(k);
    trap t;
    memset(&t, 0, sizeof t);
    tu_gate_init(&t.a_started);
    tu_gate_init(&t.b_pushed);
    atomic_store(&t.rc_a, 99);
    atomic_store(&t.rc_b, 99);
    t.a = tu_var(e);
    t.v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = trap_a,
                                        .arg = &t,
                                        .writes = tu_list(&t.a, 1),
                                        .name = "A"}));
    CHECK(tu_gate_wait(&t.a_started, TU_TIMEOUT));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = trap_b, .arg = &t, .priority = 10, .name = "B"}));
    tu_gate_open(&t.b_pushed);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_ERR(atomic_load(&t.rc_a), 0);
    int b = atomic_load(&t.rc_b);
    CHECK(b == 0 || b == VF_EDEADLK);
    CHECK_EQ(atomic_load(&t.ran_v), 1);
    tu_finish_engine(e);
    tu_gate_destroy(&t.a_started);
    tu_gate_destroy(&t.b_pushed);
}

/* ---- a look runs nothing, a timed wait runs what it waits for
 * (varflow.h, timed waits): an op pushes B on v behind an async op it then
 * completes itself, so B is ready but needs the op's thread (a pool of one
 * worker, the naive engine's deferred list). A look (0) gives VF_ETIMEDOUT
 * with B not run, as often as it is made; a timed wait runs B and gives 0. */
static vf_completion look_x_done;

static int look_then_wait(vf_run *run, void *arg)
{
    ctx *c = arg;
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = set_b, .arg = c, .writes = tu_list(&c->v, 1)}));
    CHECK_OK(vf_completion_finish(look_x_done, 0, NULL));
    for (int i = 0; i < 1000; i++)
        CHECK_ERR(vf_var_wait_timed(e, c->v, 0, NULL), VF_ETIMEDOUT);
    CHECK_EQ(atomic_load(&c->ran_b), 0);
    c->rc1 = vf_var_wait_timed(e, c->v, 10000, NULL);
    CHECK_EQ(atomic_load(&c->ran_b), 1);
    return 0;
}

TEST_CASE(a_look_runs_nothing_a_timed_wait_does)
{
    for (int k = 0; k < 2; k++) { /* naive, pooled/1 */
        check_context_ = tu_kinds[k].name;
        vf_engine *e = tu_engine(&tu_kinds[k]);
        ctx c;
        memset(&c, 0, sizeof c);
        c.v = tu_var(e);
        c.rc1 = -1;
        CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = tu_keep_completion,
                                            .arg = &look_x_done,
                                            .writes = tu_list(&c.v, 1)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = look_then_wait, .arg = &c}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_OK(c.rc1);
        tu_finish_engine(e);
    }
    check_context_ = NULL;
}

/* next_op_only_a_descendant: after an op run above a wait (or above a
 * push at the in-flight bound) finishes, the op its end made ready runs
 * there next only if it descends from the waiting op too. P, on one of
 * two workers (S keeps the other busy), pushes A2 and A (A writes u) and
 * then waits for them, or pushes at the bound; the program meanwhile
 * pushes X, which reads u and waits on p, which P writes. A's end makes X
 * ready; run above P, X's wait could never finish: VF_EDEADLK, where the
 * serial program (P ends, then X runs) returns 0; at the bound it hung
 * before the lending, after it VF_EDEADLK (the second reviewer). */
typedef struct next_test {
    vf_engine *e;
    vf_var p, u;
    bool bound;
    atomic_int a_pushed, s_started, rc_x;
} next_test;

static next_test nt;

static void next_ms(int n)
{
    nanosleep(&(struct timespec){n / 1000, (n % 1000) * 1000000L}, NULL);
}

static int next_nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static int next_s(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_store(&nt.s_started, 1);
    next_ms(300);
    return 0;
}

static int next_x(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_store(&nt.rc_x, vf_var_wait(nt.e, nt.p, NULL));
    return 0;
}

static int next_p(vf_run *run, void *arg)
{
    (void)arg;
    CHECK_OK(vf_engine_push(nt.e, &(vf_op){.fn = next_nop, .name = "A2"}));
    CHECK_OK(vf_engine_push(
        nt.e, &(vf_op){.fn = next_nop, .name = "A", .writes = VF_VARS(nt.u)}));
    atomic_store(&nt.a_pushed, 1);
    next_ms(50); /* the program pushes X now */
    if (nt.bound)
        CHECK_OK(vf_engine_push(nt.e, &(vf_op){.fn = next_nop, .name = "B"}));
    else
        CHECK_OK(vf_run_wait_children(run, NULL));
    return 0;
}

TEST_CASE(next_op_only_a_descendant)
{
    for (int round = 0; round < 6; round++) {
        memset(&nt, 0, sizeof nt);
        nt.bound = round % 2;
        atomic_init(&nt.rc_x, 1);
        vf_config cfg = {.type = VF_ENGINE_POOLED,
                         .cpu_workers = 2,
                         .max_inflight = nt.bound ? 4 : 0};
        CHECK_OK(vf_engine_create(&nt.e, &cfg));
        nt.p = tu_var(nt.e);
        nt.u = tu_var(nt.e);
        CHECK_OK(vf_engine_push(nt.e, &(vf_op){.fn = next_s, .name = "S"}));
        while (!atomic_load(&nt.s_started))
            next_ms(1);
        CHECK_OK(vf_engine_push(
            nt.e,
            &(vf_op){.fn = next_p, .name = "P", .writes = VF_VARS(nt.p)}));
        while (!atomic_load(&nt.a_pushed))
            next_ms(1);
        CHECK_OK(vf_engine_push(nt.e, &(vf_op){.fn = next_x,
                                               .name = "X",
                                               .priority = 5,
                                               .reads = VF_VARS(nt.u)}));
        CHECK_OK(vf_engine_wait_all_timed(nt.e, 30000, NULL));
        CHECK_OK(atomic_load(&nt.rc_x));
        CHECK_OK(vf_engine_destroy(nt.e));
    }
}

/* Recursion across two engines: an op of one pushes two children on the
 * other and waits for them (on their vars, or, at the top, for the whole
 * other engine), and so on to `depth`; each leaf counts 1. */
typedef struct cross {
    vf_engine *engines[2];
    int depth;
    bool wait_all_at_top;
} cross;

typedef struct cross_arg {
    cross *c;
    int k, d;
    long *out;
} cross_arg;

static int cross_op(vf_run *run, void *arg)
{
    (void)run;
    cross_arg *a = arg;
    if (a->d >= a->c->depth) {
        *a->out = 1;
        return 0;
    }
    vf_engine *o = a->c->engines[1 - a->k];
    long x = 0, y = 0;
    vf_var v1 = tu_var(o), v2 = tu_var(o);
    cross_arg c1 = {a->c, 1 - a->k, a->d + 1, &x};
    cross_arg c2 = {a->c, 1 - a->k, a->d + 1, &y};
    CHECK_OK(vf_engine_push(o, &(vf_op){.fn = cross_op,
                                        .arg = &c1,
                                        .arg_size = sizeof c1,
                                        .writes = VF_VARS(v1)}));
    CHECK_OK(vf_engine_push(o, &(vf_op){.fn = cross_op,
                                        .arg = &c2,
                                        .arg_size = sizeof c2,
                                        .writes = VF_VARS(v2)}));
    if (a->d == 0 && a->c->wait_all_at_top) {
        CHECK_OK(vf_engine_wait_all(o, NULL));
    } else {
        CHECK_OK(vf_var_wait(o, v1, NULL));
        CHECK_OK(vf_var_wait(o, v2, NULL));
    }
    CHECK_OK(vf_var_destroy(o, v1, NULL, NULL));
    CHECK_OK(vf_var_destroy(o, v2, NULL, NULL));
    *a->out = x + y;
    return 0;
}

/* It finishes with one worker per engine: a worker of one engine asleep
 * in a wait on the other is counted stuck in its own pool, which lends a
 * spare for the ops the other engine's ops push back there. Before, both
 * workers slept (found trying recursion across two engines as a user: 5
 * runs in 5 hung, with the default configuration too). */
TEST_CASE(waits_across_two_engines)
{
    vf_engine_type types[] = {VF_ENGINE_POOLED, VF_ENGINE_PERDEVICE};
    for (int t = 0; t < 2; t++)
        for (int depth = 2; depth <= 4; depth++)
            for (int top = 0; top < 2; top++) {
                char phase[96];
                snprintf(phase, sizeof phase,
                         "waits across two engines: %s, depth %d, %s",
                         t ? "perdevice" : "pooled", depth,
                         top ? "wait_all at the top" : "var waits");
                tu_phase(phase);
                cross c = {.depth = depth, .wait_all_at_top = top};
                vf_config cfg = {.type = types[t], .cpu_workers = 1};
                for (int k = 0; k < 2; k++)
                    CHECK_OK(vf_engine_create(&c.engines[k], &cfg));
                long res = 0;
                cross_arg a = {&c, 0, 0, &res};
                vf_var v = tu_var(c.engines[0]);
                CHECK_OK(vf_engine_push(
                    c.engines[0],
                    &(vf_op){.fn = cross_op, .arg = &a, .writes = VF_VARS(v)}));
                CHECK_OK(vf_var_wait(c.engines[0], v, NULL));
                CHECK_EQ(res, 1L << depth);
                for (int k = 0; k < 2; k++)
                    CHECK_OK(vf_engine_destroy(c.engines[k]));
            }
}

/* A child run at its push on a worker outside any inline run (an async
 * child: its function runs there) is lent its parent's count, as an
 * inline child is: O writes a and pushes C; C pushes B, which reads a (so
 * waits for O to end) and writes b, and waits on b: a wait that can never
 * finish (C runs inside O's push), which returns VF_EDEADLK. Unlent, O
 * counted as active while it could do nothing, and the wait hung (found
 * by the reviewer of the nested waits' counts). The sync child, lent
 * before, is the control. */
static vf_engine *ac_e;
static vf_var ac_a, ac_b;
static atomic_int ac_rc, ac_b_ran;

static int ac_b_fn(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_store(&ac_b_ran, 1);
    return 0;
}

static int ac_child_wait(vf_run *run)
{
    CHECK_OK(
        vf_engine_push(vf_run_engine(run), &(vf_op){.fn = ac_b_fn,
                                                    .reads = VF_VARS(ac_a),
                                                    .writes = VF_VARS(ac_b)}));
    return vf_var_wait(ac_e, ac_b, NULL);
}

static int ac_sync(vf_run *run, void *arg)
{
    (void)arg;
    atomic_store(&ac_rc, ac_child_wait(run));
    return 0;
}

static void ac_async(vf_run *run, void *arg, vf_completion done)
{
    (void)arg;
    atomic_store(&ac_rc, ac_child_wait(run));
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

static int ac_parent(vf_run *run, void *arg)
{
    bool async = *(const bool *)arg;
    vf_op child = {0};
    if (async)
        child.async_fn = ac_async;
    else
        child.fn = ac_sync;
    CHECK_OK(vf_engine_push(vf_run_engine(run), &child));
    return 0;
}

TEST_CASE(child_at_its_push_on_a_worker_is_lent_its_parents_count)
{
    for (int async = 0; async < 2; async++) {
        ac_e = tu_engine(&tu_kinds[1]); /* pooled, 1 worker */
        ac_a = tu_var(ac_e);
        ac_b = tu_var(ac_e);
        atomic_store(&ac_rc, -1);
        atomic_store(&ac_b_ran, 0);
        bool is_async = async;
        CHECK_OK(vf_engine_push(ac_e, &(vf_op){.fn = ac_parent,
                                               .arg = &is_async,
                                               .arg_size = sizeof is_async,
                                               .writes = VF_VARS(ac_a)}));
        CHECK_OK(vf_engine_wait_all_timed(ac_e, 20000, NULL));
        CHECK_ERR(atomic_load(&ac_rc), VF_EDEADLK);
        CHECK_EQ(atomic_load(&ac_b_ran), 1); /* after O */
        tu_finish_engine(ac_e);
    }
}

TEST_MAIN("test_wait_nested", 120)
