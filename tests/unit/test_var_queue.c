/*
 * test_var_queue: the var queue state machine (src/core/var.h), alone.
 *
 * Each case drives one vf__var through the four calls of var.h (append
 * read, append write, complete read, complete write) with hand-made ops
 * and checks what the contract says: which appends are ready at once, the
 * ops each completion makes ready and in what order, and the queue's
 * fields after each step (nreaders, head, tail, the queue's links through
 * the ops' places). Then the handle table: lookups of
 * live, stale, foreign and malformed handles, slot reuse, and a slot that
 * retires at its last generation.
 */
#include "runner.h"

#include "core/var.h"

/* An op that waits for one var (or `waits` vars, up to two): its block,
 * whose entries are its places (`place`: the first). */
typedef struct top {
    vf__op *op;
    vf__dep *place;
    _Alignas(vf__op) unsigned char block[sizeof(vf__op) + 2 * sizeof(vf__dep)];
} top;

static void var_init(vf__var *v)
{
    memset(v, 0, sizeof *v);
    vf__spin_init(&v->lock);
    atomic_init(&v->failure, NULL);
    atomic_init(&v->version, 0);
    atomic_init(&v->gen, 1);
    atomic_init(&v->watched, false);
    v->state = VF__VAR_LIVE;
}

static void op_init(top *t, int waits)
{
    memset(t, 0, sizeof *t);
    t->op = (vf__op *)t->block;
    t->op->nvars = waits;
    t->place = &t->op->deps[0];
    atomic_init(&t->op->wait, waits);
}

/* The append call for the op's entry i, a read or a write of v, under the
 * var's lock as var.h requires. */
static bool append_at(vf__var *v, top *t, int i, bool write)
{
    vf__op_stage_var(t->op, i,
                     &(vf__varref){.var = v, .gen = 1, .write = write});
    vf__spin_lock(&v->lock);
    bool ready = vf__var_append(v, &t->op->deps[i]);
    vf__spin_unlock(&v->lock);
    CHECK(vf__dep_op(&t->op->deps[i]) == t->op);
    CHECK(vf__dep_var(&t->op->deps[i]) == v);
    CHECK(vf__dep_write(&t->op->deps[i]) == write);
    return ready;
}

static bool append_read(vf__var *v, top *t)
{
    return append_at(v, t, 0, false);
}

static bool append_write(vf__var *v, top *t)
{
    return append_at(v, t, 0, true);
}

/* Check that a completion made exactly want[0..n) ready, in that order. */
static void check_ready(vf__readylist *rl, top **want, int n, const char *what)
{
    CHECK_EQ(rl->count, n);
    for (int i = 0; i < n; i++) {
        vf__op *op = vf__readylist_pop(rl);
        if (op != want[i]->op)
            CHECK_REPORT_("%s: ready op %d is not the expected one", what, i);
        else
            CHECK_EQ(atomic_load(&op->wait), 0);
    }
    CHECK(vf__readylist_pop(rl) == NULL);
}

/* COMPLETE_READ(v, t, ops..., NULL) / COMPLETE_WRITE: complete a read or
 * a write of `t` (it ran, no failure) and check that it made exactly
 * `ops` ready, in that order (NULL ends the list, and is not counted). */
#define READY(...) ((top *[]){__VA_ARGS__})
#define NREADY(...) ((int)(sizeof(READY(__VA_ARGS__)) / sizeof(top *)))

#define COMPLETE_READ(v, t, ...)                                               \
    do {                                                                       \
        vf__readylist rl_;                                                     \
        vf__readylist_init(&rl_);                                              \
        vf__var_complete_read(v, (t)->op, &rl_);                               \
        check_ready(&rl_, READY(__VA_ARGS__), NREADY(__VA_ARGS__) - 1,         \
                    "complete read of " #t);                                   \
    } while (0)

#define COMPLETE_WRITE(v, t, ...)                                              \
    do {                                                                       \
        vf__readylist rl_;                                                     \
        vf__readylist_init(&rl_);                                              \
        vf__var_complete_write(v, (t)->op, NULL, true, &rl_);                  \
        check_ready(&rl_, READY(__VA_ARGS__), NREADY(__VA_ARGS__) - 1,         \
                    "complete write of " #t);                                  \
    } while (0)

static void check_idle(const vf__var *v, int nreaders)
{
    CHECK_EQ(v->nreaders, nreaders);
    CHECK(v->head == NULL);
    CHECK(v->tail == NULL);
}

TEST_CASE(read_on_idle_var_is_ready_at_once)
{
    vf__var v;
    top r1, r2;
    var_init(&v);
    op_init(&r1, 1);
    op_init(&r2, 1);
    CHECK(append_read(&v, &r1));
    CHECK(append_read(&v, &r2));
    check_idle(&v, 2); /* running reads are counted, not queued */
    COMPLETE_READ(&v, &r1, NULL);
    CHECK_EQ(v.nreaders, 1);
    COMPLETE_READ(&v, &r2, NULL);
    check_idle(&v, 0);
    CHECK_EQ(atomic_load(&v.version), 0); /* reads leave it */
}

TEST_CASE(write_on_idle_var_is_ready_at_once)
{
    vf__var v;
    top w;
    var_init(&v);
    op_init(&w, 1);
    CHECK(append_write(&v, &w));
    CHECK_EQ(v.nreaders, VF__WRITE_RUNNING);
    CHECK(v.head == w.place);
    CHECK(v.tail == w.place);
    CHECK(vf__dep_write(w.place));
    CHECK(w.place->next == NULL);
    COMPLETE_WRITE(&v, &w, NULL);
    check_idle(&v, 0);
    CHECK_EQ(atomic_load(&v.version), 1);
}

TEST_CASE(write_waits_for_running_reads)
{
    vf__var v;
    top r1, r2, w;
    var_init(&v);
    op_init(&r1, 1);
    op_init(&r2, 1);
    op_init(&w, 1);
    CHECK(append_read(&v, &r1));
    CHECK(append_read(&v, &r2));
    CHECK(!append_write(&v, &w));
    CHECK_EQ(v.nreaders, 2);
    CHECK(v.head == w.place);
    COMPLETE_READ(&v, &r1, NULL);
    CHECK_EQ(v.nreaders, 1);
    COMPLETE_READ(&v, &r2, &w, NULL); /* the last reader releases it */
    CHECK_EQ(v.nreaders, VF__WRITE_RUNNING);
    COMPLETE_WRITE(&v, &w, NULL);
    check_idle(&v, 0);
}

TEST_CASE(reads_queue_behind_a_write)
{
    vf__var v;
    top w, r1, r2;
    var_init(&v);
    op_init(&w, 1);
    op_init(&r1, 1);
    op_init(&r2, 1);
    CHECK(append_write(&v, &w));
    CHECK(!append_read(&v, &r1));
    CHECK(!append_read(&v, &r2));
    CHECK(w.place->next == r1.place && r1.place->next == r2.place);
    CHECK(!vf__dep_write(r1.place));
    CHECK(v.tail == r2.place);
    COMPLETE_WRITE(&v, &w, &r1, &r2, NULL); /* together, in push order */
    check_idle(&v, 2);
    COMPLETE_READ(&v, &r2, NULL);
    COMPLETE_READ(&v, &r1, NULL);
    check_idle(&v, 0);
}

/* Rule 2: reads pushed between two writes run after the first and before
 * the second, all together. */
TEST_CASE(reads_between_writes_are_released_together)
{
    vf__var v;
    top w1, r1, r2, w2, r3, r4, w3;
    var_init(&v);
    top *all[] = {&w1, &r1, &r2, &w2, &r3, &r4, &w3};
    for (int i = 0; i < 7; i++)
        op_init(all[i], 1);
    CHECK(append_write(&v, &w1));
    CHECK(!append_read(&v, &r1));
    CHECK(!append_read(&v, &r2));
    CHECK(!append_write(&v, &w2));
    CHECK(!append_read(&v, &r3));
    CHECK(!append_read(&v, &r4));
    CHECK(!append_write(&v, &w3));
    /* One list in push order, through every op's place. */
    for (int i = 0; i + 1 < 7; i++)
        CHECK(all[i]->place->next == all[i + 1]->place);
    CHECK(w3.place->next == NULL);
    CHECK(v.head == w1.place);
    CHECK(v.tail == w3.place);

    COMPLETE_WRITE(&v, &w1, &r1, &r2, NULL); /* not w2, not r3 */
    CHECK_EQ(v.nreaders, 2);
    CHECK(v.head == w2.place);
    COMPLETE_READ(&v, &r2, NULL); /* in any order */
    COMPLETE_READ(&v, &r1, &w2, NULL);
    CHECK_EQ(v.nreaders, VF__WRITE_RUNNING);
    COMPLETE_WRITE(&v, &w2, &r3, &r4, NULL);
    CHECK_EQ(v.nreaders, 2);
    CHECK(v.head == w3.place);
    COMPLETE_READ(&v, &r3, NULL);
    COMPLETE_READ(&v, &r4, &w3, NULL);
    COMPLETE_WRITE(&v, &w3, NULL);
    check_idle(&v, 0);
    CHECK_EQ(atomic_load(&v.version), 3);
}

TEST_CASE(writes_run_one_after_another)
{
    vf__var v;
    top w1, w2, w3;
    var_init(&v);
    op_init(&w1, 1);
    op_init(&w2, 1);
    op_init(&w3, 1);
    CHECK(append_write(&v, &w1));
    CHECK(!append_write(&v, &w2));
    CHECK(!append_write(&v, &w3));
    CHECK(w1.place->next == w2.place && w2.place->next == w3.place);
    COMPLETE_WRITE(&v, &w1, &w2, NULL);
    CHECK_EQ(v.nreaders, VF__WRITE_RUNNING);
    CHECK(v.head == w2.place);
    COMPLETE_WRITE(&v, &w2, &w3, NULL);
    CHECK(v.head == w3.place);
    COMPLETE_WRITE(&v, &w3, NULL);
    check_idle(&v, 0);
}

/* A read pushed after a queued write waits for it, even while earlier
 * reads run: no reader preference, so the write cannot starve. */
TEST_CASE(read_does_not_overtake_a_queued_write)
{
    vf__var v;
    top r1, w, r2;
    var_init(&v);
    op_init(&r1, 1);
    op_init(&w, 1);
    op_init(&r2, 1);
    CHECK(append_read(&v, &r1));
    CHECK(!append_write(&v, &w));
    CHECK(!append_read(&v, &r2));
    CHECK_EQ(v.nreaders, 1);
    CHECK(v.head == w.place && w.place->next == r2.place);
    COMPLETE_READ(&v, &r1, &w, NULL);
    COMPLETE_WRITE(&v, &w, &r2, NULL);
    check_idle(&v, 1);
    COMPLETE_READ(&v, &r2, NULL);
    check_idle(&v, 0);
}

/* An op on two vars is ready only once both released it (its wait
 * counter); the first release alone does not list it. */
TEST_CASE(op_is_ready_after_its_last_var)
{
    vf__var a, b;
    top wa, rb, x;
    var_init(&a);
    var_init(&b);
    op_init(&wa, 1);
    op_init(&rb, 1);
    op_init(&x, 2);
    CHECK(append_write(&a, &wa));
    CHECK(append_read(&b, &rb));
    CHECK(!append_read(&a, &x)); /* x reads a, writes b */
    CHECK(!append_at(&b, &x, 1, true));
    COMPLETE_WRITE(&a, &wa, NULL);
    CHECK_EQ(atomic_load(&x.op->wait), 1);
    COMPLETE_READ(&b, &rb, &x, NULL);
    CHECK_EQ(a.nreaders, 1);
    CHECK_EQ(b.nreaders, VF__WRITE_RUNNING);
}

/* A finishing write bumps the version when it ran, and leaves the failure
 * it carries on the var (one reference), replacing an older one. */
TEST_CASE(write_sets_version_and_failure)
{
    vf__failure_log log;
    REQUIRE(vf__failure_log_init(&log) == 0);
    vf__failure *f = vf__failure_log_record(&log, VF_EDEVICE, "f", "m", 1,
                                            NULL);
    vf__failure *g = vf__failure_log_record(&log, VF_EDEVICE, "g", "m", 2,
                                            NULL);
    REQUIRE(f != NULL && g != NULL && f != g);
    vf__var v;
    top w1, w2, w3;
    var_init(&v);
    op_init(&w1, 1);
    op_init(&w2, 1);
    op_init(&w3, 1);
    vf__readylist rl;
    vf__readylist_init(&rl);

    int f_refs = atomic_load(&f->refs);
    CHECK(append_write(&v, &w1));
    vf__var_complete_write(&v, w1.op, f, true, &rl);
    CHECK(atomic_load(&v.failure) == f);
    CHECK_EQ(atomic_load(&f->refs), f_refs + 1);
    CHECK_EQ(atomic_load(&v.version), 1);

    CHECK(append_write(&v, &w2)); /* skipped: no bump, no new failure */
    vf__var_complete_write(&v, w2.op, NULL, false, &rl);
    CHECK(atomic_load(&v.failure) == f);
    CHECK_EQ(atomic_load(&v.version), 1);

    int g_refs = atomic_load(&g->refs);
    CHECK(append_write(&v, &w3));
    vf__var_complete_write(&v, w3.op, g, true, &rl);
    CHECK(atomic_load(&v.failure) == g);
    CHECK_EQ(atomic_load(&f->refs), f_refs); /* the var let f go */
    CHECK_EQ(atomic_load(&g->refs), g_refs + 1);
    CHECK_EQ(atomic_load(&v.version), 2);
    CHECK_EQ(rl.count, 0);

    vf__failure_unref(atomic_exchange(&v.failure, NULL));
    vf__failure_unref(f);
    vf__failure_unref(g);
    vf__failure_log_destroy(&log);
}

/* Handles: a live one finds its slot; a freed slot's old handle is stale,
 * also once the slot is reused; another engine's tag and a zero handle
 * are refused. */
TEST_CASE(handle_table)
{
    vf__var_table t;
    REQUIRE(vf__var_table_init(&t, 7) == 0);
    vf_var h1 = {0}, h2 = {0}, h3 = {0};
    CHECK_OK(vf__var_create(&t, &h1, "test"));
    CHECK_OK(vf__var_create(&t, &h2, "test"));
    CHECK(h1.id != h2.id);
    vf__var *v1 = NULL, *v2 = NULL, *v = NULL;
    CHECK_OK(vf__var_lookup(&t, h1, &v1));
    CHECK_OK(vf__var_lookup(&t, h2, &v2));
    REQUIRE(v1 != NULL && v2 != NULL && v1 != v2);
    CHECK(vf__var_usable(v1, vf__var_handle_gen(h1)));
    check_idle(v1, 0);

    CHECK_ERR(vf__var_lookup(&t, (vf_var){0}, &v), VF_EINVAL);
    vf_var foreign = {
        h1.id ^ ((uint64_t)(7 ^ 8) << (VF__VAR_INDEX_BITS + VF__VAR_GEN_BITS))};
    CHECK_ERR(vf__var_lookup(&t, foreign, &v), VF_EXDEV);

    vf__spin_lock(&v1->lock);
    v1->state = VF__VAR_DELETING; /* as a delete op leaves it */
    vf__spin_unlock(&v1->lock);
    CHECK(vf__var_free_slot(&t, v1, vf__var_handle_gen(h1)));
    CHECK(!vf__var_free_slot(&t, v1, vf__var_handle_gen(h1))); /* once */
    CHECK_ERR(vf__var_lookup(&t, h1, &v), VF_ESTALE);
    CHECK_OK(
        vf__var_create(&t, &h3, "test")); /* the freed slot, a new generation */
    CHECK_OK(vf__var_lookup(&t, h3, &v));
    CHECK(v == v1);
    CHECK(h3.id != h1.id);
    CHECK_ERR(vf__var_lookup(&t, h1, &v), VF_ESTALE);
    CHECK(!vf__var_usable(v1, vf__var_handle_gen(h1)));

    /* vf_var_of's revival (addr_vars.h): a live var is not revived; a
     * deleting one lives on under a new handle, and its delete (pushed
     * with the old one) no longer frees the slot. */
    vf_var h4 = {0};
    uint32_t g3 = vf__var_handle_gen(h3);
    CHECK_EQ(vf__var_revive(&t, v1, g3, &h4), 1);
    vf__spin_lock(&v1->lock);
    v1->state = VF__VAR_DELETING;
    vf__spin_unlock(&v1->lock);
    CHECK_OK(vf__var_revive(&t, v1, g3, &h4));
    CHECK(h4.id != h3.id);
    CHECK_ERR(vf__var_lookup(&t, h3, &v), VF_ESTALE);
    CHECK_OK(vf__var_lookup(&t, h4, &v));
    CHECK(v == v1 && vf__var_usable(v1, vf__var_handle_gen(h4)));
    CHECK(!vf__var_free_slot(&t, v1, g3));
    CHECK_ERR(vf__var_revive(&t, v1, g3, &h4), VF_ESTALE);
    CHECK(vf__var_usable(v1, vf__var_handle_gen(h4)));
    vf__var_table_destroy(&t);
}

/* A slot whose generations are spent (2^24 - 1 of them) retires when its
 * last is deleted: no handle names it again, and the next create takes
 * another slot. Its generation wrapped, and after 16M reuses a stale
 * handle named the new var (found by a user tester: 6 s of create and
 * destroy on the naive engine). A revival at the last generation is
 * refused (vf_var_of then makes a new var). */
static void delete_and_free(vf__var_table *t, vf_var h)
{
    vf__var *v = NULL;
    REQUIRE(vf__var_lookup(t, h, &v) == 0);
    vf__spin_lock(&v->lock);
    v->state = VF__VAR_DELETING;
    vf__spin_unlock(&v->lock);
    CHECK(vf__var_free_slot(t, v, vf__var_handle_gen(h)));
}

TEST_CASE(a_slot_whose_generations_are_spent_retires)
{
    const uint32_t last = (1u << VF__VAR_GEN_BITS) - 1;
    vf__var_table t;
    REQUIRE(vf__var_table_init(&t, 7) == 0);
    vf_var h = {0}, next = {0};
    CHECK_OK(vf__var_create(&t, &h, "test"));
    vf__var *v = NULL;
    CHECK_OK(vf__var_lookup(&t, h, &v));
    /* As if the slot had been reused 2^24 - 3 times. */
    delete_and_free(&t, h);
    atomic_store(&v->gen, last - 1);
    vf_var before_last = {0}, at_last = {0};
    CHECK_OK(vf__var_create(&t, &before_last, "test"));
    CHECK_OK(vf__var_lookup(&t, before_last, &v));
    CHECK_EQ(vf__var_handle_gen(before_last), last - 1);
    delete_and_free(&t, before_last);
    CHECK_OK(vf__var_create(&t, &at_last, "test"));
    vf__var *w = NULL;
    CHECK_OK(vf__var_lookup(&t, at_last, &w));
    CHECK(w == v); /* the same slot, at its last generation */
    CHECK_EQ(vf__var_handle_gen(at_last), last);
    /* Deleting: not revived at its last generation. */
    vf__spin_lock(&v->lock);
    v->state = VF__VAR_DELETING;
    vf__spin_unlock(&v->lock);
    vf_var revived = {0};
    CHECK_ERR(vf__var_revive(&t, v, last, &revived), VF_ESTALE);
    CHECK(vf__var_free_slot(&t, v, last));
    /* Retired: every handle it gave is stale, and a create takes another
     * slot. */
    CHECK_ERR(vf__var_lookup(&t, at_last, &w), VF_ESTALE);
    CHECK_ERR(vf__var_lookup(&t, before_last, &w), VF_ESTALE);
    CHECK_ERR(vf__var_lookup(&t, h, &w), VF_ESTALE);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(vf__var_create(&t, &next, "test"));
        CHECK_OK(vf__var_lookup(&t, next, &w));
        CHECK(w != v);
        delete_and_free(&t, next);
    }
    CHECK_ERR(vf__var_lookup(&t, h, &w), VF_ESTALE);
    vf__var_table_destroy(&t);
}

TEST_MAIN("test_var_queue", 60)

/* Every entry of an op finds its op, its var and its kind, whatever the
 * var set's size: entries of the first run by their index, those of later
 * runs through their run's back slot (op.h). Each lies inside the block
 * vf__op_block_size reserves, and no two share a slot. */
TEST_CASE(entries_find_their_op_at_every_size)
{
    for (int n = 0; n <= 200; n++) {
        size_t size = vf__op_block_size(n);
        CHECK(size >= sizeof(vf__op) + (size_t)n * sizeof(vf__dep));
        if (n <= VF__DEP_RUN)
            CHECK_EQ(size, sizeof(vf__op) + (size_t)n * sizeof(vf__dep));
        vf__op *op = calloc(1, size);
        REQUIRE(op != NULL);
        op->nvars = n;
        for (int i = 0; i < n; i++) {
            /* vars are never looked at: aligned addresses stand in */
            vf__varref ref = {
                .var = (vf__var *)(uintptr_t)((i + 1) * VF__VAR_ALIGN),
                .gen = 7,
                .write = i % 3 == 0};
            vf__op_stage_var(op, i, &ref);
        }
        const char *end = (const char *)op + size;
        for (int i = 0; i < n; i++) {
            vf__dep *d = vf__op_dep(op, i);
            CHECK((const char *)d >= (const char *)op->deps &&
                  (const char *)(d + 1) <= end);
            CHECK(i == 0 || d != vf__op_dep(op, i - 1));
            CHECK(vf__dep_op(d) == op);
            CHECK(vf__dep_var(d) ==
                  (vf__var *)(uintptr_t)((i + 1) * VF__VAR_ALIGN));
            CHECK(vf__dep_write(d) == (i % 3 == 0));
            CHECK_EQ(d->gen, 7);
        }
        free(op);
    }
}
