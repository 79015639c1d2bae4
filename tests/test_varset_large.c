/*
 * test_varset_large: the normal form of large var sets (vf_op's contract:
 * each variable counts once, as a write if any use of it writes) and the
 * limit on the handles one op names (VF_MAX_OP_VARS). Behaviour only, no
 * timing.
 *
 * - N vars, some only read, some only written, some both, some not named,
 *   with repeats in both lists, named in creation order, in reverse and
 *   shuffled (each var's lists shuffled too): the op runs once (a var
 *   queued twice for it would wait on itself forever), every var it writes
 *   goes up by exactly one version and every other var keeps its version,
 *   and it is ordered as a write after a slow reader of a var it reads and
 *   writes; the same through an operator pushed twice, and through a bulk
 *   (threaded engines), on every engine kind;
 * - an op on N vars (N around the op block's runs of 32 and 31 entries,
 *   and 1000) queued behind a write of every one of them, and a reader of
 *   them all behind it: each var's release finds the op from its place in
 *   the var's queue, so it runs once, after the write and before the
 *   reader (threaded engines);
 * - exactly VF_MAX_OP_VARS (2^20) handles: all distinct, half read and half
 *   written, shuffled (naive and pooled engines); a thousand vars repeated
 *   up to that count, in both lists and in reads alone (every kind):
 *   accepted, run once, versions as above;
 * - one handle more, over both lists or in one: refused with VF_EINVAL and
 *   a detail that names the count and the limit, by vf_engine_push,
 *   vf_operator_create and a push that would join a bulk; nothing runs,
 *   `done` is not called, no version moves.
 */
#include "runner.h" /* first: it sets _GNU_SOURCE */

#include <string.h>

#define NONE ((vf_var_list){NULL, 0})

typedef struct big_op {
    uint64_t start, end;
    atomic_int ran, done;
    double us;
} big_op;

static int big_fn(vf_run *run, void *arg)
{
    (void)run;
    big_op *b = arg;
    b->start = tu_stamp();
    atomic_fetch_add(&b->ran, 1);
    tu_spin_us(b->us);
    b->end = tu_stamp();
    return 0;
}

static void big_done(void *arg, int status)
{
    (void)status;
    atomic_fetch_add(&((big_op *)arg)->done, 1);
}

static vf_op big_desc(big_op *b, vf_var_list r, vf_var_list w)
{
    return (vf_op){.fn = big_fn,
                   .arg = b,
                   .done = big_done,
                   .reads = r,
                   .writes = w,
                   .name = "big"};
}

static uint64_t version(vf_engine *e, vf_var v)
{
    uint64_t ver = 999;
    CHECK_OK(vf_var_version(e, v, &ver));
    return ver;
}

static void shuffle(vf_var *a, int n, tu_rng *r)
{
    for (int i = n - 1; i > 0; i--) {
        int j = tu_below(r, i + 1);
        vf_var t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static vf_var *new_vars(vf_engine *e, int n)
{
    vf_var *v = malloc((size_t)n * sizeof *v);
    REQUIRE(v != NULL);
    for (int i = 0; i < n; i++)
        v[i] = tu_var(e);
    return v;
}

/* What an op does with a var. */
enum { UNNAMED, READ, WRITE, BOTH };

/* Each var's version must be `writes` for those in the op's write set
 * (WRITE and BOTH) and 0 for the others, but var `skip`; reports the first
 * that differs. */
static void check_versions(vf_engine *e, const vf_var *v, const uint8_t *cls,
                           int n, uint64_t writes, int skip)
{
    for (int i = 0; i < n; i++) {
        if (i == skip)
            continue;
        uint64_t want = cls[i] >= WRITE ? writes : 0;
        uint64_t got = version(e, v[i]);
        if (got != want) {
            CHECK_REPORT_("var %d of %d (class %d): version %" PRIu64
                          ", expected %" PRIu64,
                          i, n, cls[i], got, want);
            return;
        }
    }
}

/* --- a large set with repeats, in three orders ----------------------- */

typedef struct lists {
    vf_var *r, *w;
    int nr, nw;
} lists;

/* The op's lists over v[0, n): class by `cls`, 1-3 copies of a read, 1-2
 * of a write; order 0 as made, 1 reversed, 2 shuffled. */
static lists make_lists(const vf_var *v, const uint8_t *cls, int n, int order,
                        tu_rng *rng)
{
    lists l = {malloc((size_t)n * 3 * sizeof(vf_var)),
               malloc((size_t)n * 2 * sizeof(vf_var)), 0, 0};
    REQUIRE(l.r != NULL && l.w != NULL);
    for (int k = 0; k < n; k++) {
        int i = order == 1 ? n - 1 - k : k;
        if (cls[i] == READ || cls[i] == BOTH)
            for (int c = 1 + tu_below(rng, 3); c > 0; c--)
                l.r[l.nr++] = v[i];
        if (cls[i] == WRITE || cls[i] == BOTH)
            for (int c = 1 + tu_below(rng, 2); c > 0; c--)
                l.w[l.nw++] = v[i];
    }
    if (order == 2) {
        shuffle(l.r, l.nr, rng);
        shuffle(l.w, l.nw, rng);
    }
    return l;
}

static void large_set(const tu_kind *k, int n, int order)
{
    tu_rng rng = tu_rng_make(check_seed() * 31 + (uint64_t)order);
    vf_engine *e = tu_engine(k);
    vf_var *v = new_vars(e, n);
    uint8_t *cls = malloc((size_t)n);
    REQUIRE(cls != NULL);
    for (int i = 0; i < n; i++)
        cls[i] = (uint8_t)tu_below(&rng, 4);
    int both = 0; /* a var read and written: the ordering probe */
    cls[both] = BOTH;
    lists l = make_lists(v, cls, n, order, &rng);

    /* A slow reader of a var the op also writes: the op waits for it. */
    big_op slow = {.us = 2000}, b = {0};
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = big_fn, .arg = &slow, .reads = VF_VARS(v[both])}));
    vf_op d = big_desc(&b, tu_list(l.r, l.nr), tu_list(l.w, l.nw));
    CHECK_OK(vf_engine_push(e, &d));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&b.ran), 1);
    CHECK_EQ(atomic_load(&b.done), 1);
    if (!(slow.end < b.start))
        CHECK_REPORT_("the op started before the slow reader of var %d ended "
                      "(it must count as a write)",
                      both);
    check_versions(e, v, cls, n, 1, -1);

    /* The same lists through an operator, pushed twice. */
    big_op ob = {0};
    vf_operator *o = NULL;
    vf_op od = big_desc(&ob, tu_list(l.r, l.nr), tu_list(l.w, l.nw));
    CHECK_OK(vf_operator_create(e, &od, &o));
    REQUIRE(o != NULL);
    CHECK_OK(vf_operator_push(e, o, 0));
    CHECK_OK(vf_operator_push(e, o, 0));
    CHECK_OK(vf_operator_destroy(e, o));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&ob.ran), 2);
    check_versions(e, v, cls, n, 3, -1);

    /* Through a bulk (a one-var op on each side joins it too). */
    if (k->threaded) {
        big_op bb = {0}, before = {0}, after = {0};
        CHECK(vf_bulk_set_size(e, 8) >= 0);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = big_fn,
                                            .arg = &before,
                                            .writes = VF_VARS(v[both])}));
        vf_op bd = big_desc(&bb, tu_list(l.r, l.nr), tu_list(l.w, l.nw));
        CHECK_OK(vf_engine_push(e, &bd));
        CHECK_OK(vf_engine_push(
            e,
            &(vf_op){.fn = big_fn, .arg = &after, .writes = VF_VARS(v[both])}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK(vf_bulk_set_size(e, 0) >= 0);
        CHECK_EQ(atomic_load(&bb.ran), 1);
        CHECK_EQ(atomic_load(&before.ran) + atomic_load(&after.ran), 2);
        /* v[both]: 3 + before, the op, after; the rest 3 + the op. */
        CHECK_EQ(version(e, v[both]), 6);
        check_versions(e, v, cls, n, 4, both);
    }
    free(l.r);
    free(l.w);
    free(cls);
    free(v);
    tu_finish_engine(e);
}

/* N vars: 100000, scaled by tu_scale() (at least 20000). */
static int large_n(void)
{
    return (int)tu_scaled(100000, 20000);
}

TEST_KIND_CASE(large_set_as_made, k)
{
    large_set(k, large_n(), 0);
}

TEST_KIND_CASE(large_set_reversed, k)
{
    large_set(k, large_n(), 1);
}

TEST_KIND_CASE(large_set_shuffled, k)
{
    large_set(k, large_n(), 2);
}

/* Holds the vars until the gate opens: what follows queues on them all. */
static int gate_fn(vf_run *run, void *arg)
{
    (void)run;
    return tu_gate_wait(arg, TU_TIMEOUT) ? 0 : VF_EAGAIN;
}

TEST_KIND_CASE(wide_op_queues_on_every_var, k)
{
    if (!k->threaded)
        return; /* the gate would block inside its own push */
    static const int sizes[] = {1, 31, 32, 33, 62, 63, 64, 94, 95, 96, 1000};
    vf_engine *e = tu_engine(k);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        vf_var *v = new_vars(e, n);
        int nr = n / 2, nw = n - nr; /* the wide op reads v[0, nr) */
        tu_gate gate;
        tu_gate_init(&gate);
        big_op wide = {0}, reader = {0};
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = gate_fn, .arg = &gate, .writes = tu_list(v, n)}));
        vf_op d = big_desc(&wide, tu_list(v, nr), tu_list(v + nr, nw));
        CHECK_OK(vf_engine_push(e, &d));
        vf_op rd = big_desc(&reader, tu_list(v, n), NONE);
        CHECK_OK(vf_engine_push(e, &rd));
        CHECK_EQ(atomic_load(&wide.ran), 0); /* behind the gate */
        tu_gate_open(&gate);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&wide.ran), 1);
        CHECK_EQ(atomic_load(&reader.ran), 1);
        if (nw > 0 && !(wide.end <= reader.start))
            CHECK_REPORT_("%d vars: the reader started before the wide op "
                          "that writes %d of them ended",
                          n, nw);
        for (int i = 0; i < n; i++)
            CHECK_EQ(version(e, v[i]), i < nr ? 1u : 2u);
        tu_gate_destroy(&gate);
        free(v);
    }
    tu_finish_engine(e);
}

/* --- the limit ---------------------------------------------------------- */

/* The limit is what the header documents. */
TEST_CASE(documented_limit)
{
    CHECK_EQ(VF_MAX_OP_VARS, 1048576);
}

/* VF_MAX_OP_VARS distinct vars, half read, half written, shuffled: on the
 * naive and pooled engines (the first three kinds). */
TEST_KIND_CASE(at_limit_distinct, k)
{
    if (k - tu_kinds > 2)
        return;
    enum { M = VF_MAX_OP_VARS, H = VF_MAX_OP_VARS / 2 };
    tu_rng rng = tu_rng_make(check_seed() * 7 + 1);
    vf_engine *e = tu_engine(k);
    vf_var *v = new_vars(e, M);
    uint8_t *cls = malloc(M);
    REQUIRE(cls != NULL);
    vf_var *r = malloc((size_t)H * sizeof *r),
           *w = malloc((size_t)H * sizeof *w);
    REQUIRE(r != NULL && w != NULL);
    /* Var i is read when i is even, written when odd. */
    for (int i = 0; i < M; i++) {
        cls[i] = i % 2 ? WRITE : READ;
        (i % 2 ? w : r)[i / 2] = v[i];
    }
    shuffle(r, H, &rng);
    shuffle(w, H, &rng);
    big_op b = {0};
    vf_op d = big_desc(&b, tu_list(r, H), tu_list(w, H));
    CHECK_OK(vf_engine_push(e, &d));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&b.ran), 1);
    check_versions(e, v, cls, M, 1, -1);
    free(r);
    free(w);
    free(cls);
    free(v);
    tu_finish_engine(e);
}

/* A list of `n` handles cycling through v[0, nv). */
static vf_var *cycle(const vf_var *v, int nv, int n)
{
    vf_var *l = malloc((size_t)n * sizeof *l);
    REQUIRE(l != NULL);
    for (int i = 0; i < n; i++)
        l[i] = v[(i * 7 + i / nv) % nv];
    return l;
}

/* Exactly VF_MAX_OP_VARS handles over a few vars, then one more. */
TEST_KIND_CASE(limit_with_repeats, k)
{
    enum { NV = 1000, M = VF_MAX_OP_VARS, H = VF_MAX_OP_VARS / 2 };
    vf_engine *e = tu_engine(k);
    vf_var *v = new_vars(e, NV);
    uint8_t cls[NV];
    /* Reads cycle over all NV vars, writes over the first NV / 2. */
    for (int i = 0; i < NV; i++)
        cls[i] = i < NV / 2 ? BOTH : READ;
    vf_var *r = cycle(v, NV, M + 1), *w = cycle(v, NV / 2, H);

    big_op b = {0};
    vf_op d = big_desc(&b, tu_list(r, H), tu_list(w, H));
    CHECK_OK(vf_engine_push(e, &d));
    d.reads = tu_list(r, M); /* all reads: no version moves */
    d.writes = NONE;
    CHECK_OK(vf_engine_push(e, &d));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&b.ran), 2);
    CHECK_EQ(atomic_load(&b.done), 2);
    check_versions(e, v, cls, NV, 1, -1);

    /* One over: refused by every way in, with the limit in the detail. */
    big_op over = {0};
    vf_op od = big_desc(&over, tu_list(r, H + 1), tu_list(w, H));
    CHECK_ERR(vf_engine_push(e, &od), VF_EINVAL);
    const char *detail = vf_error_detail();
    if (strstr(detail, "1048577") == NULL ||
        strstr(detail, "1048576") == NULL ||
        strstr(detail, "VF_MAX_OP_VARS") == NULL)
        CHECK_REPORT_(
            "vf_engine_push over the limit: detail \"%s\" does not name "
            "the count and VF_MAX_OP_VARS (1048576)",
            detail);
    vf_operator *o = NULL;
    CHECK_ERR(vf_operator_create(e, &od, &o), VF_EINVAL);
    CHECK(o == NULL);
    CHECK(strstr(vf_error_detail(), "VF_MAX_OP_VARS") != NULL);
    od.reads = NONE;
    od.writes = tu_list(r, M + 1); /* one list alone */
    CHECK_ERR(vf_engine_push(e, &od), VF_EINVAL);
    if (k->threaded) {
        CHECK(vf_bulk_set_size(e, 8) >= 0);
        CHECK_ERR(vf_engine_push(e, &od), VF_EINVAL);
        CHECK(vf_bulk_set_size(e, 0) >= 0);
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&over.ran), 0);
    CHECK_EQ(atomic_load(&over.done), 0);
    check_versions(e, v, cls, NV, 1, -1);
    free(r);
    free(w);
    free(v);
    tu_finish_engine(e);
}

/* A graph whose ops, each within the limit, name VF_MAX_OP_VARS + 1 vars
 * together: more than one launch op may hold, so its launches push it op
 * by op. vf_graph_end refused it with VF_EINVAL, not among its errors,
 * and ended the capture (found by an auditor of the graphs). */
TEST_KIND_CASE(graph_wider_than_one_op, k)
{
    if (k - tu_kinds > 2)
        return;
    enum { M = VF_MAX_OP_VARS };
    vf_engine *e = tu_engine(k);
    vf_var *v = new_vars(e, M + 1);
    big_op wide = {0}, one = {0};
    vf_op wd = big_desc(&wide, tu_list(v, 0), tu_list(v, M));
    vf_op od = big_desc(&one, tu_list(v, 0), tu_list(v + M, 1));
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &wd));
    CHECK_OK(vf_engine_push(e, &od));
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_end(e, &g));
    CHECK(!vf_graph_capturing(e));
    CHECK_EQ(vf_graph_ops(g), 2);
    for (int launch = 1; launch <= 2; launch++) {
        CHECK_OK(vf_graph_launch(e, g));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&wide.ran), launch);
        CHECK_EQ(atomic_load(&one.ran), launch);
    }
    CHECK_EQ(version(e, v[0]), 2);
    CHECK_EQ(version(e, v[M]), 2);
    CHECK_OK(vf_graph_destroy(e, g));
    free(v);
    tu_finish_engine(e);
}

TEST_MAIN("test_varset_large", 240)
