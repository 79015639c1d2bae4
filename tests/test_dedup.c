/*
 * test_dedup: a var named more than once by one op (rule 5 and vf_op's
 * contract: "each variable counts once, as a write if any use of it
 * writes"), on every engine kind.
 *
 * - listed twice in writes, or in reads and writes: the op runs once (no
 *   self-deadlock), the var's version goes up by exactly one, and it is
 *   ordered as a write: after the slow reader pushed before it, before the
 *   reader pushed after it;
 * - listed twice in reads only: the op runs once, ordered after the write
 *   before it and before the write after it, and the version is unchanged
 *   (it is a read: on two workers it runs at the same time as another
 *   reader, shown by a rendezvous);
 * - mixed lists (reads x,y,x; writes y,z,z) and lists longer than the
 *   engine's inline capacity full of repeats; an operator with repeats
 *   pushed many times.
 */
#include "runner.h"

typedef struct stamp_op {
    double us;
    tu_rv *rv; /* meet here when set */
    uint64_t start, end;
    atomic_int ran;
    bool met;
} stamp_op;

static int stamp_fn(vf_run *run, void *arg)
{
    (void)run;
    stamp_op *s = arg;
    s->start = tu_stamp();
    atomic_fetch_add(&s->ran, 1);
    if (s->rv)
        s->met = tu_rv_meet(s->rv, 2, TU_TIMEOUT);
    tu_spin_us(s->us);
    s->end = tu_stamp();
    return 0;
}

static void push_stamp(vf_engine *e, stamp_op *s, vf_var_list r, vf_var_list w)
{
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = stamp_fn, .arg = s, .reads = r, .writes = w}));
}

#define NONE ((vf_var_list){NULL, 0})

static uint64_t version(vf_engine *e, vf_var v)
{
    uint64_t ver = 999;
    CHECK_OK(vf_var_version(e, v, &ver));
    return ver;
}

#define CHECK_BEFORE(a, b)                                                     \
    do {                                                                       \
        if (!((a).end < (b).start))                                            \
            CHECK_REPORT_("%s (ended %" PRIu64 ") not before %s (started "     \
                          "%" PRIu64 ")",                                      \
                          #a, (a).end, #b, (b).start);                         \
    } while (0)

/* D names x twice as a write (or read+write): ordered as a write. */
static void as_write(const tu_kind *k, int form)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    stamp_op r1 = {.us = 2000}, d = {.us = 200}, r2 = {.us = 0};
    push_stamp(e, &r1, VF_VARS(x), NONE);
    if (form == 0)
        push_stamp(e, &d, NONE, VF_VARS(x, x));
    else if (form == 1)
        push_stamp(e, &d, VF_VARS(x), VF_VARS(x));
    else
        push_stamp(e, &d, VF_VARS(x, x, x), VF_VARS(x, x));
    push_stamp(e, &r2, VF_VARS(x), NONE);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&d.ran), 1);
    CHECK_BEFORE(r1, d);
    CHECK_BEFORE(d, r2);
    CHECK_EQ(version(e, x), 1);
    tu_finish_engine(e);
}

TEST_KIND_CASE(writes_twice, k)
{
    as_write(k, 0);
}

TEST_KIND_CASE(read_and_write, k)
{
    as_write(k, 1);
}

TEST_KIND_CASE(reads_and_writes_repeated, k)
{
    as_write(k, 2);
}

/* D names x twice as a read: ordered as a read. */
TEST_KIND_CASE(as_read, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    tu_rv rv;
    tu_rv_init(&rv);
    bool meet = k->threaded && k->workers >= 2;
    stamp_op w1 = {.us = 1000}, d = {.us = 500}, r = {.us = 500},
             w2 = {.us = 0};
    if (meet)
        d.rv = r.rv = &rv;
    push_stamp(e, &w1, NONE, VF_VARS(x));
    push_stamp(e, &d, VF_VARS(x, x), NONE);
    push_stamp(e, &r, VF_VARS(x), NONE);
    push_stamp(e, &w2, NONE, VF_VARS(x));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&d.ran), 1);
    CHECK_BEFORE(w1, d);
    CHECK_BEFORE(d, w2);
    CHECK_BEFORE(r, w2);
    if (meet) {
        CHECK(d.met);
        CHECK(r.met);
    }
    CHECK_EQ(version(e, x), 2);
    tu_finish_engine(e);
    tu_rv_destroy(&rv);
}

TEST_KIND_CASE(mixed, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), z = tu_var(e);
    stamp_op ry = {.us = 1000}, d = {.us = 100}, after = {.us = 0};
    push_stamp(e, &ry, VF_VARS(y), NONE);
    push_stamp(e, &d, VF_VARS(x, y, x), VF_VARS(y, z, z));
    push_stamp(e, &after, VF_VARS(z, y), NONE);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&d.ran), 1);
    CHECK_BEFORE(ry, d);
    CHECK_BEFORE(d, after);
    CHECK_EQ(version(e, x), 0);
    CHECK_EQ(version(e, y), 1);
    CHECK_EQ(version(e, z), 1);

    /* Longer than any inline capacity, full of repeats. */
    vf_var rl[40], wl[24];
    for (int i = 0; i < 40; i++)
        rl[i] = (i % 3 == 0) ? x : (i % 3 == 1) ? y : z;
    for (int i = 0; i < 24; i++)
        wl[i] = (i % 2) ? y : z;
    stamp_op big = {.us = 0};
    push_stamp(e, &big, tu_list(rl, 40), tu_list(wl, 24));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&big.ran), 1);
    CHECK_EQ(version(e, x), 0);
    CHECK_EQ(version(e, y), 2);
    CHECK_EQ(version(e, z), 2);

    /* An operator with repeats, pushed many times. */
    stamp_op rep = {.us = 0};
    vf_operator *o = NULL;
    CHECK_OK(vf_operator_create(e,
                                &(vf_op){.fn = stamp_fn,
                                         .arg = &rep,
                                         .reads = VF_VARS(x, z, x),
                                         .writes = VF_VARS(z, z)},
                                &o));
    REQUIRE(o);
    for (int i = 0; i < 1000; i++)
        CHECK_OK(vf_operator_push(e, o, 0));
    CHECK_OK(vf_operator_destroy(e, o));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&rep.ran), 1000);
    CHECK_EQ(version(e, z), 1002);
    CHECK_EQ(version(e, x), 0);
    tu_finish_engine(e);
}

TEST_MAIN("test_dedup", 60)
