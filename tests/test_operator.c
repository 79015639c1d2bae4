/*
 * test_operator: reusable operators, on every engine kind.
 *
 * - an operator that writes x and reads y pushed 100 000 times (x = x*K + y,
 *   not commutative, so any reordering shows) interleaved with a second
 *   operator that writes y: the final values equal the serial program's and
 *   each operator ran exactly as often as it was pushed;
 * - a read-only operator pushed many times runs that many times;
 * - vf_operator_destroy right after the pushes (some held on a gate): every
 *   pushed run still runs, and the operator's memory stays valid (ASan);
 * - the priority given to vf_operator_push reaches the scheduler: on a
 *   1-worker pool with the worker blocked, runs go highest priority first;
 * - an operator whose var was deleted: push returns VF_ESTALE; an operator
 *   of another engine: VF_EXDEV for push and delete; bad definitions are
 *   refused like vf_engine_push.
 */
#include "runner.h"

#define K 6364136223846793005ULL

typedef struct state {
    uint64_t x, y;
    atomic_long runs_x, runs_y, runs_r;
    tu_gate *gate;
} state;

static int op_x(vf_run *run, void *arg)
{
    (void)run;
    state *s = arg;
    if (s->gate && atomic_load(&s->runs_x) == 0)
        CHECK(tu_gate_wait(s->gate, TU_TIMEOUT));
    s->x = s->x * K + s->y;
    atomic_fetch_add_explicit(&s->runs_x, 1, memory_order_relaxed);
    return 0;
}

static int op_y(vf_run *run, void *arg)
{
    (void)run;
    state *s = arg;
    s->y = s->y * 3 + 1;
    atomic_fetch_add_explicit(&s->runs_y, 1, memory_order_relaxed);
    return 0;
}

static int op_r(vf_run *run, void *arg)
{
    (void)run;
    state *s = arg;
    (void)s->y;
    atomic_fetch_add_explicit(&s->runs_r, 1, memory_order_relaxed);
    return 0;
}

TEST_KIND_CASE(hot_loop, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    state s;
    memset(&s, 0, sizeof s);
    s.x = 1;
    s.y = 2;
    vf_operator *ox = NULL, *oy = NULL, *orr = NULL;
    CHECK_OK(vf_operator_create(e,
                                &(vf_op){.fn = op_x,
                                         .arg = &s,
                                         .reads = VF_VARS(y),
                                         .writes = VF_VARS(x),
                                         .name = "x=x*K+y"},
                                &ox));
    CHECK_OK(vf_operator_create(
        e,
        &(vf_op){.fn = op_y, .arg = &s, .writes = VF_VARS(y), .name = "y=3y+1"},
        &oy));
    CHECK_OK(vf_operator_create(
        e,
        &(vf_op){
            .fn = op_r, .arg = &s, .reads = VF_VARS(y, y), .name = "read y"},
        &orr));
    REQUIRE(ox && oy && orr);

    long n = tu_scaled(100000, 5000);
    uint64_t sx = 1, sy = 2;
    long nx = 0, ny = 0, nr = 0;
    int push_errors = 0;
    tu_rng r = tu_rng_make(1);
    for (long i = 0; i < n; i++) {
        int which = tu_below(&r, 8);
        vf_operator *o;
        if (which == 0) {
            o = oy;
            sy = sy * 3 + 1;
            ny++;
        } else if (which == 1) {
            o = orr;
            nr++;
        } else {
            o = ox;
            sx = sx * K + sy;
            nx++;
        }
        if (vf_operator_push(e, o, 0) != 0 && push_errors++ == 0)
            CHECK_OK(vf_operator_push(e, o, 0));
    }
    CHECK_EQ(push_errors, 0);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK(s.x == sx);
    CHECK(s.y == sy);
    CHECK_EQ(atomic_load(&s.runs_x), nx);
    CHECK_EQ(atomic_load(&s.runs_y), ny);
    CHECK_EQ(atomic_load(&s.runs_r), nr);
    uint64_t ver;
    CHECK_OK(vf_var_version(e, x, &ver));
    CHECK_EQ(ver, nx);
    CHECK_OK(vf_operator_destroy(e, ox));
    CHECK_OK(vf_operator_destroy(e, oy));
    CHECK_OK(vf_operator_destroy(e, orr));
    tu_finish_engine(e);
}

/* Delete while runs are pending: they all still run. */
TEST_KIND_CASE(delete_after_use, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    tu_gate gate;
    tu_gate_init(&gate);
    state s;
    memset(&s, 0, sizeof s);
    s.x = 1;
    s.gate = k->threaded ? &gate : NULL;
    /* A long name on the stack: the operator must have copied it. */
    char name[32];
    snprintf(name, sizeof name, "op-%d", 42);
    vf_operator *ox = NULL;
    CHECK_OK(vf_operator_create(e,
                                &(vf_op){.fn = op_x,
                                         .arg = &s,
                                         .reads = VF_VARS(y),
                                         .writes = VF_VARS(x),
                                         .name = name},
                                &ox));
    REQUIRE(ox);
    memset(name, 'X', sizeof name - 1);
    uint64_t sx = 1;
    for (int i = 0; i < 1000; i++) {
        CHECK_OK(vf_operator_push(e, ox, i % 7));
        sx = sx * K;
    }
    CHECK_OK(vf_operator_destroy(e, ox));
    if (s.gate)
        tu_gate_open(&gate);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&s.runs_x), 1000);
    CHECK(s.x == sx);
    tu_finish_engine(e);
    tu_gate_destroy(&gate);
}

/* ------------------------------------------------------------ priority */

typedef struct prio_log {
    tu_gate started, release;
    atomic_int n;
    int order[16];
} prio_log;

typedef struct prio_arg {
    prio_log *log;
    int id;
} prio_arg;

static int blocker(vf_run *run, void *arg)
{
    (void)run;
    prio_log *l = arg;
    tu_gate_open(&l->started);
    CHECK(tu_gate_wait(&l->release, TU_TIMEOUT));
    return 0;
}

static int logged(vf_run *run, void *arg)
{
    (void)run;
    prio_arg *a = arg;
    int i = atomic_fetch_add(&a->log->n, 1);
    if (i < 16)
        a->log->order[i] = a->id;
    return 0;
}

TEST_KIND_CASE(priority, k)
{
    if (!k->threaded || k->workers != 1)
        return;
    vf_engine *e = tu_engine(k);
    prio_log l;
    memset(&l, 0, sizeof l);
    tu_gate_init(&l.started);
    tu_gate_init(&l.release);
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = blocker, .arg = &l, .name = "block"}));
    CHECK(tu_gate_wait(&l.started, TU_TIMEOUT));
    /* Three operators, pushed with priorities 1, 3, 2; the defs' own
     * priorities (20, 10, 0) would give the opposite order, and must be
     * ignored ("its `priority` field is not used"). */
    prio_arg a[3] = {{&l, 0}, {&l, 1}, {&l, 2}};
    vf_operator *o[3];
    for (int i = 0; i < 3; i++)
        CHECK_OK(vf_operator_create(
            e, &(vf_op){.fn = logged, .arg = &a[i], .priority = 10 * (2 - i)},
            &o[i]));
    CHECK_OK(vf_operator_push(e, o[0], 1));
    CHECK_OK(vf_operator_push(e, o[1], 3));
    CHECK_OK(vf_operator_push(e, o[2], 2));
    tu_gate_open(&l.release);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&l.n), 3);
    CHECK_EQ(l.order[0], 1);
    CHECK_EQ(l.order[1], 2);
    CHECK_EQ(l.order[2], 0);
    for (int i = 0; i < 3; i++)
        CHECK_OK(vf_operator_destroy(e, o[i]));
    tu_finish_engine(e);
    tu_gate_destroy(&l.started);
    tu_gate_destroy(&l.release);
}

/* ------------------------------------------------------------ errors */

TEST_KIND_CASE(misuse, k)
{
    vf_engine *e = tu_engine(k);
    vf_engine *e2 = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), z2 = tu_var(e2);
    state s;
    memset(&s, 0, sizeof s);
    vf_operator *o = NULL, *bad = NULL;
    CHECK_OK(vf_operator_create(
        e,
        &(vf_op){
            .fn = op_y, .arg = &s, .reads = VF_VARS(x), .writes = VF_VARS(y)},
        &o));
    REQUIRE(o);
    /* Another engine's operator. */
    CHECK_ERR(vf_operator_push(e2, o, 0), VF_EXDEV);
    CHECK_ERR(vf_operator_destroy(e2, o), VF_EXDEV);
    /* Bad definitions. */
    CHECK_ERR(vf_operator_create(e, &(vf_op){.arg = &s}, &bad), VF_EINVAL);
    CHECK_ERR(vf_operator_create(e, &(vf_op){.fn = op_y, .writes = VF_VARS(z2)},
                                 &bad),
              VF_EXDEV);
    CHECK_ERR(
        vf_operator_create(e, &(vf_op){.fn = op_y, .reads = {NULL, 2}}, &bad),
        VF_EINVAL);
    CHECK_ERR(vf_operator_create(e, NULL, &bad), VF_EINVAL);
    CHECK_ERR(vf_operator_create(e, &(vf_op){.fn = op_y}, NULL), VF_EINVAL);
    CHECK_ERR(vf_operator_push(e, NULL, 0), VF_EINVAL);
    CHECK_ERR(vf_operator_destroy(e, NULL), VF_EINVAL);
    /* Still works; then its var is deleted: VF_ESTALE. */
    CHECK_OK(vf_operator_push(e, o, 0));
    CHECK_OK(vf_var_wait(e, y, NULL));
    CHECK_EQ(atomic_load(&s.runs_y), 1);
    CHECK_OK(vf_var_destroy(e, x, NULL, NULL));
    CHECK_ERR(vf_operator_push(e, o, 0), VF_ESTALE);
    CHECK_OK(vf_operator_destroy(e, o));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&s.runs_y), 1);
    tu_finish_engine(e);
    tu_finish_engine(e2);
}

/* An operator its program left undestroyed outlives its engine's destroy
 * as a refused handle: a call on it, with another engine (made at the old
 * one's address, say), is VF_EINVAL, never a read of freed memory (found
 * trying the C++ API as a user: a reusable_op destroyed after its engine,
 * a new engine at the same address). */
TEST_KIND_CASE(outlives_its_engine, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    state s;
    memset(&s, 0, sizeof s);
    vf_operator *o = NULL;
    CHECK_OK(vf_operator_create(
        e, &(vf_op){.fn = op_y, .arg = &s, .writes = VF_VARS(x)}, &o));
    CHECK_OK(vf_operator_push(e, o, 0));
    tu_finish_engine(e);
    vf_engine *next = tu_engine(k);
    CHECK_ERR(vf_operator_push(next, o, 0), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "engine was destroyed") != NULL);
    CHECK_ERR(vf_operator_destroy(next, o), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "engine was destroyed") != NULL);
    CHECK_EQ(atomic_load(&s.runs_y), 1);
    tu_finish_engine(next);
}

/* A destroyed operator's handle, once its runs finished and it was freed,
 * is refused: a push (with or without an argument of its own) and a
 * second destroy are VF_EINVAL, saying it was destroyed, never a read of
 * freed memory (found going over last stop's open points; ASan's
 * heap-use-after-free). A new operator may take its memory since. */
TEST_KIND_CASE(destroyed_handle_is_refused, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    state s;
    memset(&s, 0, sizeof s);
    for (int round = 0; round < 3; round++) {
        vf_operator *o = NULL;
        CHECK_OK(vf_operator_create(
            e, &(vf_op){.fn = op_y, .arg = &s, .writes = VF_VARS(x)}, &o));
        REQUIRE(o);
        CHECK_OK(vf_operator_push(e, o, 0));
        CHECK_OK(vf_operator_destroy(e, o));
        CHECK_OK(vf_engine_wait_all(e, NULL)); /* its run over: freed */
        CHECK_ERR(vf_operator_push(e, o, 0), VF_EINVAL);
        CHECK(strstr(vf_error_detail(), "operator was destroyed") != NULL);
        int one = 1;
        CHECK_ERR(vf_operator_push_arg(e, o, 0, &one, sizeof one), VF_EINVAL);
        CHECK(strstr(vf_error_detail(), "operator was destroyed") != NULL);
        CHECK_ERR(vf_operator_destroy(e, o), VF_EINVAL);
        CHECK(strstr(vf_error_detail(), "operator was destroyed") != NULL);
    }
    /* A create that fails leaves no handle behind, and the next one
     * works. */
    vf_operator *bad = NULL;
    CHECK_ERR(vf_operator_create(e, &(vf_op){.arg = &s}, &bad), VF_EINVAL);
    CHECK(bad == NULL);
    vf_operator *o = NULL;
    CHECK_OK(vf_operator_create(
        e, &(vf_op){.fn = op_y, .arg = &s, .writes = VF_VARS(x)}, &o));
    CHECK_OK(vf_operator_push(e, o, 0));
    CHECK_OK(vf_operator_destroy(e, o));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&s.runs_y), 4);
    tu_finish_engine(e);
}

/* Pushes racing the operator's destroy on another thread: each either
 * runs (its done called) or is refused with VF_EINVAL; none reads the
 * freed var set (a push that passed its checks read it once the last run
 * ended: a crash 9 runs in 10, found by a user tester). */
typedef struct racing {
    vf_engine *e;
    vf_operator *_Atomic opr;
    atomic_int round, pushed, accepted, refused, other;
    atomic_long dones;
} racing;

static void racing_done(void *arg, int status)
{
    (void)status;
    atomic_fetch_add(&((racing *)arg)->dones, 1);
}

#define RACING_ROUNDS 300

static void *racing_pusher(void *arg)
{
    racing *r = arg;
    for (int round = 1; round <= RACING_ROUNDS; round++) {
        CHECK(tu_wait_flag(&r->round, round, TU_TIMEOUT));
        for (int i = 0; i < 20; i++) {
            int rc = vf_operator_push(r->e, atomic_load(&r->opr), 0);
            atomic_fetch_add(rc == 0           ? &r->accepted
                             : rc == VF_EINVAL ? &r->refused
                                               : &r->other,
                             1);
        }
        atomic_store(&r->pushed, round);
    }
    return NULL;
}

TEST_KIND_CASE(push_racing_destroy, k)
{
    racing r;
    memset(&r, 0, sizeof r);
    r.e = tu_engine(k);
    vf_var v[16];
    for (int i = 0; i < 16; i++)
        v[i] = tu_var(r.e);
    pthread_t t = tu_thread_start(racing_pusher, &r);
    for (int round = 1; round <= RACING_ROUNDS; round++) {
        /* The pushes of the round before are over: a create now may take
         * the block of the operator they pushed (the handle would then
         * name the new one, as the header says). */
        CHECK(tu_wait_flag(&r.pushed, round - 1, TU_TIMEOUT));
        vf_operator *o = NULL;
        CHECK_OK(vf_operator_create(r.e,
                                    &(vf_op){.fn = tu_nop,
                                             .done = racing_done,
                                             .arg = &r,
                                             .reads = tu_list(v, 16)},
                                    &o));
        atomic_store(&r.opr, o);
        atomic_store(&r.round, round);
        for (volatile int spin = 0; spin < (round % 7) * 300; spin++)
            ;
        CHECK_OK(vf_operator_destroy(r.e, o));
    }
    tu_thread_join(t);
    CHECK_OK(vf_engine_wait_all(r.e, NULL));
    CHECK_EQ(atomic_load(&r.other), 0);
    CHECK_EQ(atomic_load(&r.accepted) + atomic_load(&r.refused),
             RACING_ROUNDS * 20);
    CHECK_EQ(atomic_load(&r.dones), atomic_load(&r.accepted));
    tu_finish_engine(r.e);
}

/* Pushes on a handle its operator's destroy left, while a create takes
 * the block over (the header: the handle then names that operator): each
 * push runs one of them or is refused with VF_EINVAL. The create wrote
 * the block and published it with relaxed stores, so a push could read
 * its fields half made (found by a user tester: TSan, every run). */
typedef struct reusing {
    vf_engine *e;
    vf_operator *_Atomic opr;
    atomic_int stop;
    atomic_long accepted, refused, other, dones;
} reusing;

static void reusing_done(void *arg, int status)
{
    (void)status;
    atomic_fetch_add(&((reusing *)arg)->dones, 1);
}

static void *reusing_pusher(void *arg)
{
    reusing *r = arg;
    while (!atomic_load(&r->stop)) {
        int rc = vf_operator_push(r->e, atomic_load(&r->opr), 0);
        atomic_fetch_add(rc == 0           ? &r->accepted
                         : rc == VF_EINVAL ? &r->refused
                                           : &r->other,
                         1);
    }
    return NULL;
}

TEST_KIND_CASE(push_on_a_handle_a_create_took_over, k)
{
    reusing r;
    memset(&r, 0, sizeof r);
    r.e = tu_engine(k);
    vf_var v = tu_var(r.e);
    vf_op def = {
        .fn = tu_nop, .done = reusing_done, .arg = &r, .writes = VF_VARS(v)};
    vf_operator *o = NULL;
    CHECK_OK(vf_operator_create(r.e, &def, &o));
    atomic_store(&r.opr, o);
    pthread_t t = tu_thread_start(reusing_pusher, &r);
    for (int i = 0; i < 2000; i++) {
        CHECK_OK(vf_operator_destroy(r.e, atomic_load(&r.opr)));
        CHECK_OK(vf_operator_create(r.e, &def, &o));
        atomic_store(&r.opr, o);
    }
    atomic_store(&r.stop, 1);
    tu_thread_join(t);
    CHECK_OK(vf_operator_destroy(r.e, atomic_load(&r.opr)));
    CHECK_OK(vf_engine_wait_all(r.e, NULL));
    CHECK_EQ(atomic_load(&r.other), 0);
    CHECK_EQ(atomic_load(&r.dones), atomic_load(&r.accepted));
    tu_finish_engine(r.e);
}

/* An operator made inside an op pushed before its var's delete, the delete
 * pushed meanwhile: made, as the naive engine makes it (it runs the op
 * inside its push, before the delete), and its push from there, like the
 * op's other children, runs before the delete; pushed from outside after
 * the delete, refused. The pooled engines refused the create with
 * VF_ESTALE (found by a user tester porting MXNet code). */
typedef struct before_delete {
    vf_var v;
    tu_gate go;
    bool gated;
    atomic_int runs, runs_at_free;
    int create_rc, push_rc, after_rc;
    atomic_int after_ran;
    vf_operator *made;
} before_delete;

static int count_child(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((before_delete *)arg)->runs, 1);
    return 0;
}

static int make_and_push(vf_run *run, void *arg)
{
    before_delete *b = arg;
    if (b->gated)
        tu_gate_wait(&b->go, 60); /* the delete is pushed by now */
    vf_engine *e = vf_run_engine(run);
    b->create_rc = vf_operator_create(
        e, &(vf_op){.fn = count_child, .arg = b, .writes = VF_VARS(b->v)},
        &b->made);
    if (b->create_rc == 0)
        b->push_rc = vf_operator_push(e, b->made, 0);
    return 0;
}

/* An op pushed after the delete (naming no var, so it may run while the
 * delete waits): its create is refused on every engine, as the naive
 * engine, where the delete ran first, refuses it (the reviewer). */
static int make_after_the_delete(vf_run *run, void *arg)
{
    before_delete *b = arg;
    vf_operator *opr = NULL;
    b->after_rc = vf_operator_create(
        vf_run_engine(run),
        &(vf_op){.fn = count_child, .arg = b, .writes = VF_VARS(b->v)}, &opr);
    if (b->after_rc == 0)
        vf_operator_destroy(vf_run_engine(run), opr);
    atomic_store(&b->after_ran, 1);
    return 0;
}

static void note_free(void *arg)
{
    before_delete *b = arg;
    atomic_store(&b->runs_at_free, atomic_load(&b->runs));
}

TEST_KIND_CASE(made_inside_an_op_before_a_delete, k)
{
    vf_engine *e = tu_engine(k);
    before_delete b;
    memset(&b, 0, sizeof b);
    tu_gate_init(&b.go);
    b.gated = k->threaded;
    b.v = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = make_and_push, .arg = &b, .writes = VF_VARS(b.v)}));
    CHECK_OK(vf_var_destroy(e, b.v, note_free, &b));
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = make_after_the_delete, .arg = &b}));
    if (k->threaded && k->workers > 1) /* it runs while the delete waits */
        CHECK(tu_wait_flag(&b.after_ran, 1, TU_TIMEOUT));
    tu_gate_open(&b.go);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(b.create_rc);
    CHECK_OK(b.push_rc);
    CHECK_ERR(b.after_rc, VF_ESTALE);
    CHECK_EQ(atomic_load(&b.runs), 1);
    CHECK_EQ(atomic_load(&b.runs_at_free), 1); /* before the delete */
    if (b.create_rc == 0) {
        CHECK_ERR(vf_operator_push(e, b.made, 0), VF_ESTALE);
        CHECK_OK(vf_operator_destroy(e, b.made));
    }
    tu_gate_destroy(&b.go);
    tu_finish_engine(e);
}

TEST_MAIN("test_operator", 120)
