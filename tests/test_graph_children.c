/*
 * test_graph_children: ops pushed from inside a replayed launch's ops are
 * ordinary pushes (varflow.h, "Ops pushed from inside a launched op"), on
 * every engine kind.
 *
 * - a child on a var its node writes runs right behind the node, before
 *   the graph's later ops on the var and before what the program pushed
 *   after the launch, as the same pushes would order it; so do its own
 *   children, and a child that also reads a var its node only reads (of
 *   a node of 8 to 200 vars);
 * - random programs whose ops push children (and grandchildren) on the
 *   vars they write, with failures, captured once and launched many
 *   times, against the same pushes on an engine of the same kind: every
 *   op's and child's done status per launch, the values (an
 *   order-sensitive hash per var), the versions, what each wait returned;
 *   and each launch replayed (vf_stats.replays);
 * - a node that waits for such a child (vf_run_wait_children) gets
 *   VF_EDEADLK, as the same push does (the child needs the node to end),
 *   and one whose child uses only what the node reads gets 0;
 * - on the naive engine, a child on a var the graph writes later and its
 *   node does not use runs before the graph's later ops, and the node's
 *   wait for it (for its children, or on the var) returns what the push's
 *   would; random programs there push children on such vars too, and
 *   wait for them inside their ops (or look); an op ready beside such a
 *   launch runs after its ops; a launch waits for a node's async child
 *   before the ops that use its var; a child's wait on what its node
 *   reads returns 0;
 * - a node's wait on a new var in the slot of a var the graph let go of
 *   (deleted meanwhile) waits for the child that writes it; one on a
 *   handle vf_var_of revived for a var the graph still holds returns 0,
 *   as the pushes' does, and so does one on a var the launch does not
 *   take, written only by an op pushed after the launch; a wait whose
 *   last earlier write is a launch starting on another worker;
 * - many nodes reading a var, each with children reading it beside it,
 *   launches pipelined: every child sees the value before the graph's
 *   next write; children a node bulks go beside it too.
 */
#include "runner.h"

#include <string.h>

/* --- a child right behind its node ---------------------------------------- */

#define LOGMAX 64

typedef struct logbook {
    vf_engine *e;
    vf_var v, x;
    int n;
    int id[LOGMAX];
} logbook;

typedef struct entry {
    logbook *lb;
    int id;
    int children; /* how many children it pushes (ids id*10+1, ...) */
    bool grandchild;
    bool read_x; /* the children read x too (the node reads it) */
} entry;

static void note(logbook *lb, int id)
{
    REQUIRE(lb->n < LOGMAX);
    lb->id[lb->n++] = id;
}

static int logged(vf_run *run, void *arg)
{
    const entry *en = arg;
    note(en->lb, en->id);
    for (int c = 1; c <= en->children; c++) {
        entry child = {en->lb, en->id * 10 + c, en->grandchild ? 1 : 0, false,
                       false};
        vf_var reads[1] = {en->lb->x};
        CHECK_OK(vf_engine_push(en->lb->e,
                                &(vf_op){.fn = logged,
                                         .arg = &child,
                                         .arg_size = sizeof child,
                                         .reads = {reads, en->read_x ? 1 : 0},
                                         .writes = VF_VARS(en->lb->v),
                                         .name = "child"}));
    }
    (void)run;
    return 0;
}

/* Three nodes on v (the first two push children, the second's a
 * grandchild each), a fourth reading it; after the launch, a push on v. */
static void push_logged(logbook *lb, const entry *en, int n)
{
    for (int i = 0; i < n; i++) {
        vf_var reads[1] = {lb->x};
        if (en[i].id == 4) /* reads v */
            CHECK_OK(
                vf_engine_push(lb->e, &(vf_op){.fn = logged,
                                               .arg = (void *)&en[i],
                                               .reads = VF_VARS(lb->v, lb->x),
                                               .name = "reader"}));
        else
            CHECK_OK(vf_engine_push(lb->e, &(vf_op){.fn = logged,
                                                    .arg = (void *)&en[i],
                                                    .reads = {reads, 1},
                                                    .writes = VF_VARS(lb->v),
                                                    .name = "node"}));
    }
}

static void check_order(const tu_kind *k, bool read_x)
{
    vf_engine *e = tu_engine(k);
    logbook lb = {.e = e, .v = tu_var(e), .x = tu_var(e)};
    entry en[4] = {{&lb, 1, 2, false, read_x},
                   {&lb, 2, 1, true, read_x},
                   {&lb, 3, 0, false, false},
                   {&lb, 4, 0, false, false}};
    entry after = {&lb, 9, 0, false, false};
    /* The serial program: 1, its children 11 and 12, 2, its child 21 and
     * that child's 211, 3, 4, then the push after the launch. */
    const int want[] = {1, 11, 12, 2, 21, 211, 3, 4, 9};
    const int nwant = (int)(sizeof want / sizeof want[0]);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    push_logged(&lb, en, 4);
    CHECK_OK(vf_graph_end(e, &g));
    for (int pass = 0; pass < 2; pass++) { /* pushed, then launched */
        int launches = pass == 0 ? 1 : (int)tu_scaled(20, 4);
        for (int l = 0; l < launches; l++) {
            lb.n = 0;
            if (pass == 0)
                push_logged(&lb, en, 4);
            else
                CHECK_OK(vf_graph_launch(e, g));
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = logged,
                                                .arg = &after,
                                                .writes = VF_VARS(lb.v),
                                                .name = "after"}));
            CHECK_OK(vf_var_wait(e, lb.v, NULL));
            CHECK_EQ(lb.n, nwant);
            for (int i = 0; i < nwant && i < lb.n; i++)
                CHECK_EQ(lb.id[i], want[i]);
        }
    }
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK(st.replays >= 1); /* replayed, not pushed op by op */
    CHECK_EQ(st.replays, st.launches);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

TEST_KIND_CASE(child_runs_before_the_graphs_later_ops, k)
{
    check_order(k, false);
}

TEST_KIND_CASE(child_reading_beside_its_node, k)
{
    check_order(k, true);
}

/* A node of more vars than a look at each would take: it reads x and
 * writes `WIDE` others, and its child reads x beside it, before the
 * graph's next op, which writes x (before, past 64 vars the child queued
 * behind that write when launched on the naive engine and when pushed on
 * the threaded ones: found trying graphs as a user). */
#define WIDE 200

typedef struct wide {
    vf_engine *e;
    vf_var x, w[WIDE];
    int nw; /* how many of w the node writes */
    logbook lb;
} wide;

static int wide_child(vf_run *run, void *arg)
{
    (void)run;
    note(&((wide *)arg)->lb, 2);
    return 0;
}

static int wide_node(vf_run *run, void *arg)
{
    wide *t = arg;
    note(&t->lb, 1);
    CHECK_OK(vf_engine_push(vf_run_engine(run), &(vf_op){.fn = wide_child,
                                                         .arg = t,
                                                         .reads = VF_VARS(t->x),
                                                         .name = "child"}));
    return 0;
}

static int wide_writer(vf_run *run, void *arg)
{
    (void)run;
    note(&((wide *)arg)->lb, 3);
    return 0;
}

static void push_wide(wide *t)
{
    CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = wide_node,
                                           .arg = t,
                                           .reads = VF_VARS(t->x),
                                           .writes = {t->w, t->nw},
                                           .name = "wide node"}));
    CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = wide_writer,
                                           .arg = t,
                                           .writes = VF_VARS(t->x),
                                           .name = "writer"}));
}

TEST_KIND_CASE(child_reading_beside_a_wide_node, k)
{
    static const int widths[] = {8, 64, 65, WIDE};
    wide *t = calloc(1, sizeof *t);
    REQUIRE(t != NULL);
    for (int wi = 0; wi < 4; wi++) {
        t->e = tu_engine(k);
        t->x = tu_var(t->e);
        t->nw = widths[wi];
        for (int i = 0; i < t->nw; i++)
            t->w[i] = tu_var(t->e);
        vf_graph *g = NULL;
        CHECK_OK(vf_graph_begin(t->e));
        push_wide(t);
        CHECK_OK(vf_graph_end(t->e, &g));
        for (int pass = 0; pass < 2; pass++) /* pushed, then launched */
            for (int l = 0; l < (int)tu_scaled(10, 3); l++) {
                t->lb.n = 0;
                if (pass == 0)
                    push_wide(t);
                else
                    CHECK_OK(vf_graph_launch(t->e, g));
                CHECK_OK(vf_engine_wait_all(t->e, NULL));
                CHECK_EQ(t->lb.n, 3);
                for (int i = 0; i < 3 && i < t->lb.n; i++)
                    CHECK_EQ(t->lb.id[i], i + 1);
            }
        CHECK_OK(vf_graph_destroy(t->e, g));
        tu_finish_engine(t->e);
    }
    free(t);
}

/* --- waits for such children --------------------------------------------- */

typedef struct waiter {
    vf_engine *e;
    vf_var v, x;
    bool child_writes_v; /* else it reads x, which the node reads */
    int rc;
} waiter;

static int child_nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static int waits_for_child(vf_run *run, void *arg)
{
    waiter *w = arg;
    vf_var x[1] = {w->x}, v[1] = {w->v};
    CHECK_OK(vf_engine_push(
        w->e,
        &(vf_op){
            .fn = child_nop,
            .reads = {w->child_writes_v ? NULL : x, w->child_writes_v ? 0 : 1},
            .writes = {w->child_writes_v ? v : NULL, w->child_writes_v ? 1 : 0},
            .name = "child"}));
    w->rc = vf_run_wait_children(run, NULL);
    return 0;
}

/* The waiting op (reads x, writes v), then one writing both. */
static void push_waiter(vf_engine *e, waiter *w)
{
    vf_var x[1] = {w->x};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = waits_for_child,
                                        .arg = w,
                                        .reads = {x, 1},
                                        .writes = VF_VARS(w->v)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = child_nop, .writes = VF_VARS(w->v, w->x)}));
}

static void wait_case(const tu_kind *k, bool child_writes_v)
{
    vf_engine *e = tu_engine(k);
    waiter w = {e, tu_var(e), tu_var(e), child_writes_v, -99};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    push_waiter(e, &w);
    CHECK_OK(vf_graph_end(e, &g));
    int want = child_writes_v ? VF_EDEADLK : 0;
    for (int pass = 0; pass < 2; pass++) { /* the same pushes, a launch */
        w.rc = -99;
        if (pass == 0)
            push_waiter(e, &w);
        else
            CHECK_OK(vf_graph_launch(e, g));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(w.rc, want);
    }
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

TEST_KIND_CASE(wait_for_a_child_on_the_nodes_write, k)
{
    wait_case(k, true);
}

TEST_KIND_CASE(wait_for_a_child_reading_beside, k)
{
    wait_case(k, false);
}

/* --- a new var in the slot of a var the graph let go of ------------------ */

/* R reads x, N writes z; the program launches them and deletes x, which
 * the graph lets go of once R has finished, so the delete runs while N
 * runs. N then makes new vars (the first takes x's freed slot, at a new
 * generation), pushes a child writing each, and waits on it: each wait
 * waits for its child. The launch matched vars by their slot and took the
 * new var for x, which it only reads: the wait returned at once, the
 * child not run (found by a user tester, 100 runs in 100). On kinds of
 * two workers or more. */
typedef struct slot_reuse {
    vf_engine *e;
    vf_var x;
    atomic_int x_freed, child_done;
    int reused, early;
} slot_reuse;

static void x_freed(void *arg)
{
    atomic_store(&((slot_reuse *)arg)->x_freed, 1);
}

static int read_x(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static int slow_child(vf_run *run, void *arg)
{
    (void)run;
    tu_spin_us(20000);
    atomic_store(&((slot_reuse *)arg)->child_done, 1);
    return 0;
}

static int new_vars_node(vf_run *run, void *arg)
{
    (void)run;
    slot_reuse *r = arg;
    CHECK(tu_wait_flag(&r->x_freed, 1, TU_TIMEOUT));
    for (int i = 0; i < 4; i++) {
        vf_var s;
        CHECK_OK(vf_var_create(r->e, &s));
        if ((s.id & 0xffffff) == (r->x.id & 0xffffff))
            r->reused++;
        atomic_store(&r->child_done, 0);
        CHECK_OK(vf_engine_push(
            r->e, &(vf_op){.fn = slow_child, .arg = r, .writes = VF_VARS(s)}));
        CHECK_OK(vf_var_wait(r->e, s, NULL));
        if (!atomic_load(&r->child_done))
            r->early++;
    }
    return 0;
}

TEST_KIND_CASE(wait_on_a_new_var_in_a_slot_the_graph_let_go, k)
{
    /* The naive engine runs the launch before the delete is pushed; with
     * one worker, N, spinning until the delete ran, holds the worker the
     * delete would run on. */
    if (!k->threaded || k->workers < 2)
        return;
    vf_engine *e = tu_engine(k);
    slot_reuse r = {.e = e};
    vf_var y, z;
    CHECK_OK(vf_var_create(e, &r.x));
    CHECK_OK(vf_var_create(e, &y));
    CHECK_OK(vf_var_create(e, &z));
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e,
        &(vf_op){.fn = read_x, .reads = VF_VARS(r.x), .writes = VF_VARS(y)}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = new_vars_node, .arg = &r, .writes = VF_VARS(z)}));
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_var_destroy(e, r.x, x_freed, &r));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.replays, 1);
    CHECK(r.reused > 0); /* else this case tries nothing */
    CHECK_EQ(r.early, 0);
    CHECK_OK(vf_graph_destroy(e, g));
    tu_finish_engine(e);
}

/* The `n` ops of `ops` pushed one by one (`graph` false: NULL), or
 * captured into a graph and launched once (the graph, to destroy after
 * the waits): the two runs the cases below compare. */
static vf_graph *push_or_launch(vf_engine *e, const vf_op *ops, int n,
                                bool graph)
{
    vf_graph *g = NULL;
    if (graph)
        CHECK_OK(vf_graph_begin(e));
    for (int i = 0; i < n; i++)
        CHECK_OK(vf_engine_push(e, &ops[i]));
    if (graph) {
        CHECK_OK(vf_graph_end(e, &g));
        CHECK_OK(vf_graph_launch(e, g));
    }
    return g;
}

/* N0 reads x; N1 waits until the program destroyed x and vf_var_of gave
 * x's address a new handle (the same slot, revived at a new generation
 * behind the graph's hold), then waits on that handle; N2 reads x, its
 * last use, after N1. The pushes' wait returns 0 (nothing on the revived
 * var comes before N1); so must the launch's, which holds the slot still.
 * Taken for a var the launch never held, its marker went behind the
 * delete, which waits for the graph's hold, so for N2, so for N1:
 * VF_EDEADLK (the first fix of the case above, found by its reviewer). */
typedef struct revive {
    vf_engine *e;
    vf_var x1;
    atomic_int published;
    int rc;
} revive;

static int revived_wait_node(vf_run *run, void *arg)
{
    (void)run;
    revive *r = arg;
    CHECK(tu_wait_flag(&r->published, 1, TU_TIMEOUT));
    r->rc = vf_var_wait(r->e, r->x1, NULL);
    return 0;
}

TEST_KIND_CASE(wait_on_a_revived_var_the_graph_holds, k)
{
    if (!k->threaded || k->workers < 2)
        return; /* N1 waits for the program while it runs (as above) */
    static char addr;
    for (int graph = 0; graph <= 1; graph++) {
        vf_engine *e = tu_engine(k);
        revive r = {.e = e, .rc = -1};
        vf_var x, a, z, b;
        CHECK_OK(vf_var_of(e, &addr, &x));
        CHECK_OK(vf_var_create(e, &a));
        CHECK_OK(vf_var_create(e, &z));
        CHECK_OK(vf_var_create(e, &b));
        const vf_op ops[] = {
            {.fn = tu_nop, .reads = VF_VARS(x), .writes = VF_VARS(a)},
            {.fn = revived_wait_node, .arg = &r, .writes = VF_VARS(z)},
            {.fn = tu_nop, .reads = VF_VARS(x, z), .writes = VF_VARS(b)}};
        vf_graph *g = push_or_launch(e, ops, 3, graph);
        CHECK_OK(vf_var_destroy(e, x, NULL, NULL));
        CHECK_OK(vf_var_of(e, &addr, &r.x1));
        CHECK_EQ(r.x1.id & 0xffffff, x.id & 0xffffff); /* x's slot */
        atomic_store(&r.published, 1);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        if (r.rc != 0)
            CHECK_REPORT_("%s: the wait on the revived handle returned %s",
                          graph ? "the launch" : "the pushes",
                          vf_error_name(r.rc));
        if (g != NULL)
            CHECK_OK(vf_graph_destroy(e, g));
        tu_finish_engine(e);
    }
}

/* N writes z and, once the program pushed M (reads z, writes w) after
 * the launch, waits on w: M comes after N in push order, so the wait
 * waits for nothing, and returns 0, as the pushes' does. Its marker went
 * to w's end, behind M, which waits for N: VF_EDEADLK (found by the
 * reviewer of the slot fix). Not on the naive engine, whose launch runs N
 * before M is pushed. */
typedef struct later_write {
    vf_engine *e;
    vf_var w;
    atomic_int published;
    int rc;
} later_write;

static int wait_on_a_later_write(vf_run *run, void *arg)
{
    (void)run;
    later_write *l = arg;
    CHECK(tu_wait_flag(&l->published, 1, TU_TIMEOUT));
    l->rc = vf_var_wait(l->e, l->w, NULL);
    return 0;
}

TEST_KIND_CASE(wait_on_a_var_the_launch_does_not_take, k)
{
    if (!k->threaded)
        return;
    for (int graph = 0; graph <= 1; graph++) {
        vf_engine *e = tu_engine(k);
        later_write l = {.e = e, .rc = -1};
        vf_var z;
        CHECK_OK(vf_var_create(e, &z));
        CHECK_OK(vf_var_create(e, &l.w));
        const vf_op n = {
            .fn = wait_on_a_later_write, .arg = &l, .writes = VF_VARS(z)};
        vf_graph *g = push_or_launch(e, &n, 1, graph);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                            .reads = VF_VARS(z),
                                            .writes = VF_VARS(l.w)}));
        atomic_store(&l.published, 1);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        if (l.rc != 0)
            CHECK_REPORT_("%s: the wait returned %s",
                          graph ? "the launch" : "the pushes",
                          vf_error_name(l.rc));
        if (g != NULL)
            CHECK_OK(vf_graph_destroy(e, g));
        tu_finish_engine(e);
    }
}

/* A wait inside an op (a node of G, or a pushed op) on w, whose last
 * earlier write is a launch of H starting on another worker: the wait
 * reads the launch op's instance as the start replaces its stand-in
 * (vf__graph_hold_is_over, vf__graph_bind). Every wait returns 0; under
 * TSan the read and the write are ordered (a data race there: found by a
 * reviewer, 1 report a run of 6000). */
typedef struct bind_race {
    vf_engine *e;
    vf_var w;
    atomic_int spin, bad;
} bind_race;

static int wait_on_w(vf_run *run, void *arg)
{
    (void)run;
    bind_race *b = arg;
    for (int i = atomic_load(&b->spin); i > 0; i--)
        atomic_signal_fence(memory_order_seq_cst);
    if (vf_var_wait(b->e, b->w, NULL) != 0)
        atomic_fetch_add(&b->bad, 1);
    return 0;
}

TEST_KIND_CASE(a_nested_wait_meets_a_launch_as_it_starts, k)
{
    if (k->workers < 2)
        return;
    int rounds = (int)tu_scaled(1500, 200);
    for (int node = 0; node <= 1; node++) {
        vf_engine *e = tu_engine(k);
        bind_race b = {.e = e};
        vf_var z;
        CHECK_OK(vf_var_create(e, &b.w));
        CHECK_OK(vf_var_create(e, &z));
        vf_op h = {.fn = tu_nop, .writes = VF_VARS(b.w)};
        vf_op n = {.fn = wait_on_w, .arg = &b, .writes = VF_VARS(z)};
        vf_graph *gh = NULL, *gn = NULL;
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(vf_engine_push(e, &h));
        CHECK_OK(vf_graph_end(e, &gh));
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(vf_engine_push(e, &n));
        CHECK_OK(vf_graph_end(e, &gn));
        for (int i = 0; i < rounds; i++) {
            atomic_store(&b.spin, (i * 7919) % 3000);
            CHECK_OK(vf_graph_launch(e, gh));
            CHECK_OK(vf_graph_launch(e, gh));
            CHECK_OK(node ? vf_graph_launch(e, gn) : vf_engine_push(e, &n));
            if (i % 8 == 7)
                CHECK_OK(vf_engine_wait_all(e, NULL));
        }
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&b.bad), 0);
        CHECK_OK(vf_graph_destroy(e, gh));
        CHECK_OK(vf_graph_destroy(e, gn));
        tu_finish_engine(e);
    }
}

/* --- the naive engine: a child on a var its node does not use ------------- */

/* P writes x and pushes C, which writes v; L reads x and writes v. The
 * naive engine runs a push inside it, so the pushes run P, C, L, P's wait
 * for its children gets 0 and its wait on v finds C's value; a launch of
 * the same pushes, replayed, the same (it ran P, L, C: the child queued
 * behind the graph's hold on v, which L's end let go; the wait for the
 * children got VF_EDEADLK, and the wait on v returned before C had run:
 * found by a user tester). */
typedef struct unused {
    vf_engine *e;
    vf_var x, v;
    int mode; /* 0: no wait, 1: vf_run_wait_children, 2: vf_var_wait(v) */
    int wait_rc, seen;
    int value; /* v's */
    logbook lb;
} unused;

static int unused_child(vf_run *run, void *arg)
{
    (void)run;
    unused *u = arg;
    note(&u->lb, 2);
    u->value = 2;
    return 0;
}

static int unused_node(vf_run *run, void *arg)
{
    unused *u = arg;
    note(&u->lb, 1);
    CHECK_OK(vf_engine_push(u->e, &(vf_op){.fn = unused_child,
                                           .arg = u,
                                           .writes = VF_VARS(u->v),
                                           .name = "C"}));
    if (u->mode == 1)
        u->wait_rc = vf_run_wait_children(run, NULL);
    if (u->mode == 2) {
        u->wait_rc = vf_var_wait(u->e, u->v, NULL);
        u->seen = u->value;
    }
    return 0;
}

static int unused_later(vf_run *run, void *arg)
{
    (void)run;
    unused *u = arg;
    note(&u->lb, 3);
    u->value = 3;
    return 0;
}

static void push_unused(unused *u)
{
    CHECK_OK(vf_engine_push(u->e, &(vf_op){.fn = unused_node,
                                           .arg = u,
                                           .writes = VF_VARS(u->x),
                                           .name = "P"}));
    CHECK_OK(vf_engine_push(u->e, &(vf_op){.fn = unused_later,
                                           .arg = u,
                                           .reads = VF_VARS(u->x),
                                           .writes = VF_VARS(u->v),
                                           .name = "L"}));
}

TEST_CASE(naive_child_on_a_var_its_node_does_not_use)
{
    for (int mode = 0; mode < 3; mode++) {
        unused u = {.mode = mode};
        CHECK_OK(vf_engine_create(
            &u.e, &(vf_config){.type = VF_ENGINE_NAIVE, .ignore_env = true}));
        u.x = tu_var(u.e);
        u.v = tu_var(u.e);
        u.lb.e = u.e;
        vf_graph *g = NULL;
        CHECK_OK(vf_graph_begin(u.e));
        push_unused(&u);
        CHECK_OK(vf_graph_end(u.e, &g));
        for (int pass = 0; pass < 4; pass++) { /* pushed, then launched */
            u.lb.n = 0;
            u.wait_rc = -99;
            u.seen = u.value = 0;
            if (pass == 0)
                push_unused(&u);
            else
                CHECK_OK(vf_graph_launch(u.e, g));
            CHECK_OK(vf_engine_wait_all(u.e, NULL));
            CHECK_EQ(u.lb.n, 3);
            for (int i = 0; i < 3 && i < u.lb.n; i++)
                CHECK_EQ(u.lb.id[i], i + 1); /* P, C, L */
            CHECK_EQ(u.value, 3);
            if (mode != 0)
                CHECK_EQ(u.wait_rc, 0);
            if (mode == 2)
                CHECK_EQ(u.seen, 2); /* C's write, before L's */
        }
        vf_stats st;
        CHECK_OK(vf_engine_stats(u.e, &st));
        CHECK_EQ(st.replays, 3);
        CHECK_OK(vf_graph_destroy(u.e, g));
        CHECK_OK(vf_engine_destroy(u.e));
    }
}

/* An async op A writes x and y; a launch of two ops writing x (the first
 * pushing a child on x), and D, which reads y and waits on x inside, queue
 * behind it; Z completes A from inside its function, making the launch
 * and D ready together. The naive engine runs the launch's ops and the
 * child, then D, whose wait gets 0 (it ran D between them, whose wait
 * waited for the graph below it: it timed out, or hung without a timeout;
 * found by the reviewer of the fix above, older than it: the child made
 * the launch run what it found deferred). */
typedef struct beside_launch {
    vf_engine *e;
    vf_var x, y;
    vf_completion a;
    int wait_rc;
    logbook lb;
} beside_launch;

typedef struct bl_arg {
    beside_launch *t;
    int id;
} bl_arg;

static int bl_node(vf_run *run, void *arg)
{
    (void)run;
    const bl_arg *a = arg;
    note(&a->t->lb, a->id);
    if (a->id == 1) {
        static bl_arg child;
        child = (bl_arg){a->t, 4};
        CHECK_OK(vf_engine_push(a->t->e, &(vf_op){.fn = bl_node,
                                                  .arg = &child,
                                                  .writes = VF_VARS(a->t->x),
                                                  .name = "child"}));
    }
    return 0;
}

static void bl_async(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((beside_launch *)arg)->a = done;
}

static int bl_later(vf_run *run, void *arg)
{
    (void)run;
    beside_launch *t = arg;
    note(&t->lb, 3);
    t->wait_rc = vf_var_wait_timed(t->e, t->x, 2000, NULL);
    return 0;
}

static int bl_finish(vf_run *run, void *arg)
{
    (void)run;
    CHECK_OK(vf_completion_finish(((beside_launch *)arg)->a, 0, NULL));
    return 0;
}

TEST_CASE(naive_replay_runs_no_later_op_between_its_ops)
{
    beside_launch t = {.wait_rc = -99};
    CHECK_OK(vf_engine_create(
        &t.e, &(vf_config){.type = VF_ENGINE_NAIVE, .ignore_env = true}));
    t.x = tu_var(t.e);
    t.y = tu_var(t.e);
    t.lb.e = t.e;
    vf_var w = tu_var(t.e);
    bl_arg n1 = {&t, 1}, n2 = {&t, 2};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(t.e));
    CHECK_OK(vf_engine_push(
        t.e, &(vf_op){.fn = bl_node, .arg = &n1, .writes = VF_VARS(t.x)}));
    CHECK_OK(vf_engine_push(
        t.e, &(vf_op){.fn = bl_node, .arg = &n2, .writes = VF_VARS(t.x)}));
    CHECK_OK(vf_graph_end(t.e, &g));
    CHECK_OK(vf_engine_push(t.e, &(vf_op){.async_fn = bl_async,
                                          .arg = &t,
                                          .writes = VF_VARS(t.x, t.y)}));
    CHECK_OK(vf_graph_launch(t.e, g));
    CHECK_OK(vf_engine_push(
        t.e, &(vf_op){.fn = bl_later, .arg = &t, .reads = VF_VARS(t.y)}));
    CHECK_OK(vf_engine_push(
        t.e, &(vf_op){.fn = bl_finish, .arg = &t, .writes = VF_VARS(w)}));
    CHECK_OK(vf_engine_wait_all(t.e, NULL));
    CHECK_EQ(t.wait_rc, 0);
    static const int want[] = {1, 4, 2, 3}; /* the launch's ops, then D */
    CHECK_EQ(t.lb.n, 4);
    for (int i = 0; i < 4 && i < t.lb.n; i++)
        CHECK_EQ(t.lb.id[i], want[i]);
    vf_stats st;
    CHECK_OK(vf_engine_stats(t.e, &st));
    CHECK_EQ(st.replays, 1);
    CHECK_OK(vf_graph_destroy(t.e, g));
    CHECK_OK(vf_engine_destroy(t.e));
}

/* n0 (writing w, or x too) pushes an async child C writing x, which the
 * graph writes later, in n1; T, an op pushed after the launch on another
 * var, finishes C. The naive engine runs n0, C, T, n1, then A, pushed
 * after T on x, as the pushes do: n1 sees T's value (it ran n1 before C's
 * completion, and the rest op that held x for the graph, let go before
 * its grant, corrupted x's queue: A never ran, wait_all hung; found by the
 * reviewer of stop 66's children, older than them where n0 writes x). The
 * run stops before n1 and C's end resumes it. */
typedef struct async_kid {
    vf_engine *e;
    vf_var w, x, z;
    vf_completion done;
    bool n0_writes_x;
    int x_val, n1_saw;
    logbook lb;
} async_kid;

static void ak_child(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    async_kid *t = arg;
    note(&t->lb, 2);
    t->done = done;
}

static int ak_n0(vf_run *run, void *arg)
{
    (void)run;
    async_kid *t = arg;
    note(&t->lb, 1);
    CHECK_OK(vf_engine_push(t->e, &(vf_op){.async_fn = ak_child,
                                           .arg = t,
                                           .writes = VF_VARS(t->x),
                                           .name = "C"}));
    return 0;
}

static int ak_n1(vf_run *run, void *arg)
{
    (void)run;
    async_kid *t = arg;
    note(&t->lb, 4);
    t->n1_saw = t->x_val;
    t->x_val = 4;
    return 0;
}

static int ak_finish(vf_run *run, void *arg)
{
    (void)run;
    async_kid *t = arg;
    note(&t->lb, 3);
    t->x_val = 3;
    CHECK_OK(vf_completion_finish(t->done, 0, NULL));
    return 0;
}

static int ak_after(vf_run *run, void *arg)
{
    (void)run;
    note(&((async_kid *)arg)->lb, 5);
    return 0;
}

static void push_ak(async_kid *t)
{
    vf_var wx[2] = {t->w, t->x};
    CHECK_OK(
        vf_engine_push(t->e, &(vf_op){.fn = ak_n0,
                                      .arg = t,
                                      .writes = {wx, t->n0_writes_x ? 2 : 1},
                                      .name = "n0"}));
    CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = ak_n1,
                                           .arg = t,
                                           .writes = VF_VARS(t->x),
                                           .name = "n1"}));
}

TEST_CASE(naive_replay_waits_for_an_async_child)
{
    for (int writes = 0; writes < 2; writes++) {
        async_kid t = {.n0_writes_x = writes != 0};
        CHECK_OK(vf_engine_create(
            &t.e, &(vf_config){.type = VF_ENGINE_NAIVE, .ignore_env = true}));
        t.w = tu_var(t.e);
        t.x = tu_var(t.e);
        t.z = tu_var(t.e);
        t.lb.e = t.e;
        vf_graph *g = NULL;
        CHECK_OK(vf_graph_begin(t.e));
        push_ak(&t);
        CHECK_OK(vf_graph_end(t.e, &g));
        for (int pass = 0; pass < 3; pass++) { /* pushed, then launched */
            t.lb.n = 0;
            t.x_val = t.n1_saw = 0;
            if (pass == 0)
                push_ak(&t);
            else
                CHECK_OK(vf_graph_launch(t.e, g));
            CHECK_OK(vf_engine_push(
                t.e,
                &(vf_op){.fn = ak_finish, .arg = &t, .writes = VF_VARS(t.z)}));
            CHECK_OK(vf_engine_push(
                t.e,
                &(vf_op){.fn = ak_after, .arg = &t, .writes = VF_VARS(t.x)}));
            CHECK_OK(vf_engine_wait_all_timed(t.e, 5000, NULL));
            CHECK_EQ(t.lb.n, 5);
            for (int i = 0; i < 5 && i < t.lb.n; i++)
                CHECK_EQ(t.lb.id[i], i + 1); /* n0, C, T, n1, A */
            CHECK_EQ(t.n1_saw, 3);
            vf_stats st;
            CHECK_OK(vf_engine_stats(t.e, &st));
            CHECK_EQ(st.pending, 0);
        }
        vf_stats st;
        CHECK_OK(vf_engine_stats(t.e, &st));
        CHECK_EQ(st.replays, 2);
        CHECK_OK(vf_graph_destroy(t.e, g));
        CHECK_OK(vf_engine_destroy(t.e));
    }
}

/* A child of a launched op, on a var that op only reads and no later op
 * of the graph uses, waits on it and looks at it: 0 and 0, as the same
 * pushes (VF_EDEADLK and VF_ETIMEDOUT: it waited for the graph's hold,
 * which its node's end lets go; found by the reviewer of stop 66's
 * children, older than them). */
typedef struct kid_wait {
    vf_engine *e;
    vf_var x, y;
    int rc_look, rc_wait;
} kid_wait;

static int kw_child(vf_run *run, void *arg)
{
    (void)run;
    kid_wait *t = arg;
    t->rc_look = vf_var_wait_timed(t->e, t->x, 0, NULL);
    t->rc_wait = vf_var_wait(t->e, t->x, NULL);
    return 0;
}

static int kw_reader(vf_run *run, void *arg)
{
    (void)run;
    kid_wait *t = arg;
    CHECK_OK(vf_engine_push(
        t->e, &(vf_op){.fn = kw_child, .arg = t, .writes = VF_VARS(t->y)}));
    return 0;
}

static void push_kw(kid_wait *t)
{
    CHECK_OK(vf_engine_push(
        t->e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(t->x), .name = "n0"}));
    CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = kw_reader,
                                           .arg = t,
                                           .reads = VF_VARS(t->x),
                                           .name = "n1"}));
}

TEST_CASE(naive_child_waits_on_what_its_node_reads)
{
    kid_wait t = {0};
    CHECK_OK(vf_engine_create(
        &t.e, &(vf_config){.type = VF_ENGINE_NAIVE, .ignore_env = true}));
    t.x = tu_var(t.e);
    t.y = tu_var(t.e);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(t.e));
    push_kw(&t);
    CHECK_OK(vf_graph_end(t.e, &g));
    for (int pass = 0; pass < 3; pass++) { /* pushed, then launched */
        t.rc_look = t.rc_wait = -99;
        if (pass == 0)
            push_kw(&t);
        else
            CHECK_OK(vf_graph_launch(t.e, g));
        CHECK_OK(vf_engine_wait_all(t.e, NULL));
        CHECK_EQ(t.rc_look, 0);
        CHECK_EQ(t.rc_wait, 0);
    }
    CHECK_OK(vf_graph_destroy(t.e, g));
    CHECK_OK(vf_engine_destroy(t.e));
}

/* --- many readers, each with children reading beside it ------------------ */

#define NREADERS 6
#define RSTEPS 400

/* W0 writes v, NREADERS nodes read it, each pushing two children that
 * read it (and wait for them, every other step), and W writes it: every
 * child sees W0's value, never W's or a later launch's, with launches
 * pipelined (a reading node's child was queued at the var's end when
 * another reader had moved the graph's hold meanwhile, and a rest op was
 * freed before its run: found by the second reviewer of the splits). */
typedef struct readers {
    vf_engine *e;
    vf_var v;
    uint64_t val; /* v's value */
    uint64_t want[RSTEPS];
    uint64_t seen[RSTEPS][NREADERS][2];
    atomic_int wait_fails;
} readers;

typedef struct rstep {
    readers *r;
    int step, node, slot;
} rstep;

static int r_child(vf_run *run, void *arg)
{
    (void)run;
    const rstep *a = arg;
    a->r->seen[a->step][a->node][a->slot] = a->r->val;
    return 0;
}

static int r_node(vf_run *run, void *arg)
{
    const rstep *a = arg;
    for (int c = 0; c < 2; c++) {
        rstep ca = {a->r, a->step, a->node, c};
        CHECK_OK(vf_engine_push(a->r->e, &(vf_op){.fn = r_child,
                                                  .arg = &ca,
                                                  .arg_size = sizeof ca,
                                                  .reads = VF_VARS(a->r->v)}));
    }
    if (a->step % 2 == 1 && vf_run_wait_children(run, NULL) != 0)
        atomic_fetch_add(&a->r->wait_fails, 1);
    return 0;
}

static int r_first(vf_run *run, void *arg)
{
    (void)run;
    const rstep *a = arg;
    a->r->val = a->r->val * 31 + (uint64_t)a->step + 1;
    a->r->want[a->step] = a->r->val;
    return 0;
}

static int r_last(vf_run *run, void *arg)
{
    (void)run;
    const rstep *a = arg;
    a->r->val = a->r->val * 7 + 3;
    return 0;
}

TEST_KIND_CASE(many_readers_with_children_beside, k)
{
    readers *r = calloc(1, sizeof *r);
    REQUIRE(r != NULL);
    r->e = tu_engine(k);
    r->v = tu_var(r->e);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(r->e));
    rstep a = {r, 0, 0, 0};
    CHECK_OK(vf_engine_push(r->e, &(vf_op){.fn = r_first,
                                           .arg = &a,
                                           .arg_size = sizeof a,
                                           .writes = VF_VARS(r->v)}));
    for (int n = 0; n < NREADERS; n++) {
        a.node = n;
        CHECK_OK(vf_engine_push(r->e, &(vf_op){.fn = r_node,
                                               .arg = &a,
                                               .arg_size = sizeof a,
                                               .reads = VF_VARS(r->v)}));
    }
    CHECK_OK(vf_engine_push(r->e, &(vf_op){.fn = r_last,
                                           .arg = &a,
                                           .arg_size = sizeof a,
                                           .writes = VF_VARS(r->v)}));
    CHECK_OK(vf_graph_end(r->e, &g));
    int steps = (int)tu_scaled(RSTEPS, 40);
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; s > 0 && i < vf_graph_ops(g); i++) {
            rstep b = {r, s, i == 0 ? 0 : (int)i - 1, 0};
            CHECK_OK(vf_graph_set_arg(r->e, g, i, &b, sizeof b));
        }
        CHECK_OK(vf_graph_launch(r->e, g));
        if (s % 50 == 49)
            CHECK_OK(vf_engine_wait_all(r->e, NULL));
    }
    CHECK_OK(vf_engine_wait_all(r->e, NULL));
    int bad = 0;
    for (int s = 0; s < steps; s++)
        for (int n = 0; n < NREADERS; n++)
            for (int c = 0; c < 2; c++)
                bad += r->seen[s][n][c] != r->want[s];
    CHECK_EQ(bad, 0);
    CHECK_EQ(atomic_load(&r->wait_fails), 0);
    vf_stats st;
    CHECK_OK(vf_engine_stats(r->e, &st));
    CHECK_EQ(st.replays, (uint64_t)steps);
    CHECK_OK(vf_graph_destroy(r->e, g));
    tu_finish_engine(r->e);
    free(r);
}

/* --- bulking inside a node ----------------------------------------------- */

/* A node that reads v bulks its children (vf_bulk_set_size inside it),
 * which read v: they still run beside it, before the graph's next write
 * of v and the push after the launch, and its wait for them returns 0
 * (a batch's push missed the split: the children came after both, and
 * the wait got VF_EDEADLK; found by the second reviewer of the splits). */
typedef struct bulked {
    vf_engine *e;
    vf_var v;
    atomic_int n;
    int id[8];
    int wait_rc;
} bulked;

static void bnote(bulked *b, int id)
{
    int at = atomic_fetch_add(&b->n, 1);
    REQUIRE(at < 8);
    b->id[at] = id;
}

typedef struct bleaf {
    bulked *b;
    int id;
} bleaf;

static int b_leaf(vf_run *run, void *arg)
{
    (void)run;
    const bleaf *a = arg;
    bnote(a->b, a->id);
    return 0;
}

static int b_reader(vf_run *run, void *arg)
{
    bulked *b = arg;
    bnote(b, 2);
    CHECK(vf_bulk_set_size(b->e, 4) >= 0);
    for (int c = 1; c <= 2; c++) {
        bleaf ca = {b, 20 + c};
        CHECK_OK(vf_engine_push(b->e, &(vf_op){.fn = b_leaf,
                                               .arg = &ca,
                                               .arg_size = sizeof ca,
                                               .reads = VF_VARS(b->v)}));
    }
    CHECK(vf_bulk_set_size(b->e, 0) >= 0);
    b->wait_rc = vf_run_wait_children(run, NULL);
    return 0;
}

static int b_writer(vf_run *run, void *arg)
{
    (void)run;
    bnote(arg, 3);
    return 0;
}

TEST_KIND_CASE(bulked_children_beside_their_node, k)
{
    bulked b;
    memset(&b, 0, sizeof b);
    b.e = tu_engine(k);
    b.v = tu_var(b.e);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(b.e));
    CHECK_OK(vf_engine_push(
        b.e, &(vf_op){.fn = b_reader, .arg = &b, .reads = VF_VARS(b.v)}));
    CHECK_OK(vf_engine_push(
        b.e, &(vf_op){.fn = b_writer, .arg = &b, .writes = VF_VARS(b.v)}));
    CHECK_OK(vf_graph_end(b.e, &g));
    for (int l = 0; l < 10; l++) {
        atomic_store(&b.n, 0);
        b.wait_rc = -99;
        CHECK_OK(vf_graph_launch(b.e, g));
        CHECK_OK(vf_engine_wait_all(b.e, NULL));
        CHECK_EQ(b.wait_rc, 0);
        CHECK_EQ(atomic_load(&b.n), 4);
        CHECK_EQ(b.id[0], 2);
        CHECK_EQ(b.id[3], 3); /* the children (21, 22) before the writer */
    }
    vf_stats st;
    CHECK_OK(vf_engine_stats(b.e, &st));
    CHECK_EQ(st.replays, 10);
    CHECK_OK(vf_graph_destroy(b.e, g));
    tu_finish_engine(b.e);
}

/* --- random programs ----------------------------------------------------- */

#define NV 8
#define MAXOPS 24
#define MAXKIDS 2
#define SLOTS (1 + MAXKIDS + MAXKIDS) /* the op, its children, theirs */
#define STEPS 12

typedef struct kid {
    int nr, nw;
    int r[2], wv[2];
    int fail_step;
    bool grandchild; /* it pushes one on its first write */
} kid;

/* What an op does after pushing its children (the naive engine only):
 * WAIT_LOOK looks at a var (a timed wait of 0 ms, which runs nothing). */
enum { WAIT_NONE, WAIT_CHILDREN, WAIT_VAR, WAIT_LOOK };

typedef struct rop {
    int nr, nw;
    int r[3], wv[2];
    int fail_step;
    int nkids;
    kid kids[MAXKIDS];
    int wait, wait_on; /* WAIT_*, and WAIT_VAR's or WAIT_LOOK's var */
} rop;

typedef struct program {
    int nops;
    rop ops[MAXOPS];
    int wait_var[STEPS]; /* after launch s: wait on this var (-1: none) */
} program;

typedef struct world {
    vf_engine *e;
    vf_var vars[NV];
    const program *p;
    uint64_t val[NV];
    atomic_int status[STEPS][MAXOPS][SLOTS]; /* done's status + 1000 */
    int wait_rc[STEPS][MAXOPS];              /* an op's own wait's */
    uint64_t waited[STEPS][MAXOPS];          /* its var after WAIT_VAR, _LOOK */
} world;

/* A copied argument: who runs (op, slot) at which step. */
typedef struct rarg {
    world *w;
    int op, slot, step;
} rarg;

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

static void rdone(void *arg, int status)
{
    const rarg *a = arg;
    atomic_store(&a->w->status[a->step][a->op][a->slot], status + 1000);
}

static int rfn(vf_run *run, void *arg);

/* Push slot `slot` of op `op` (0 the op, 1..MAXKIDS a child, beyond a
 * grandchild) for `step`, reading vars r[0..nr) and writing wv[0..nw). */
static void push_slot(world *w, int op, int slot, int step, int nr,
                      const int *r, int nw, const int *wv)
{
    rarg a = {w, op, slot, step};
    vf_var rl[3], wl[2];
    for (int i = 0; i < nr; i++)
        rl[i] = w->vars[r[i]];
    for (int i = 0; i < nw; i++)
        wl[i] = w->vars[wv[i]];
    CHECK_OK(vf_engine_push(w->e, &(vf_op){.fn = rfn,
                                           .arg = &a,
                                           .arg_size = sizeof a,
                                           .done = rdone,
                                           .reads = tu_list(rl, nr),
                                           .writes = tu_list(wl, nw),
                                           .name = slot ? "kid" : "op"}));
}

static void push_kid(world *w, int op, int slot, int step, const kid *k)
{
    push_slot(w, op, slot, step, k->nr, k->r, k->nw, k->wv);
}

static int rfn(vf_run *run, void *arg)
{
    const rarg *a = arg;
    world *w = a->w;
    const rop *o = &w->p->ops[a->op];
    int nr, nw, fail_step;
    const int *r, *wv;
    const kid *k = NULL;
    if (a->slot == 0) {
        nr = o->nr, nw = o->nw, r = o->r, wv = o->wv, fail_step = o->fail_step;
    } else {
        k = &o->kids[(a->slot - 1) % MAXKIDS];
        nr = k->nr, nw = k->nw, r = k->r, wv = k->wv, fail_step = k->fail_step;
        if (a->slot > MAXKIDS) /* a grandchild: the kid's first write */
            nr = 0, nw = 1, fail_step = -1;
    }
    if (a->step == fail_step) {
        vf_run_set_error(run, "op %d slot %d fails at step %d", a->op, a->slot,
                         a->step);
        return 7;
    }
    uint64_t h = mix((uint64_t)(a->op * SLOTS + a->slot), (uint64_t)a->step);
    for (int i = 0; i < nr; i++)
        h = mix(h, w->val[r[i]]);
    for (int i = 0; i < nw; i++)
        w->val[wv[i]] = mix(w->val[wv[i]], h);
    if (a->slot == 0) {
        for (int c = 0; c < o->nkids; c++)
            push_kid(w, a->op, 1 + c, a->step, &o->kids[c]);
        if (o->wait == WAIT_CHILDREN) {
            w->wait_rc[a->step][a->op] = vf_run_wait_children(run, NULL);
        } else if (o->wait == WAIT_VAR || o->wait == WAIT_LOOK) {
            w->wait_rc[a->step][a->op] = vf_var_wait_timed(
                w->e, w->vars[o->wait_on], o->wait == WAIT_LOOK ? 0 : -1, NULL);
            w->waited[a->step][a->op] = w->val[o->wait_on];
        }
    } else if (a->slot <= MAXKIDS && k->grandchild)
        push_kid(w, a->op, a->slot + MAXKIDS, a->step,
                 &(kid){.nw = 1, .wv = {k->wv[0]}, .fail_step = -1});
    return 0;
}

/* A child of op i of the naive engine's program: on vars the graph holds
 * to write while op i runs (a later op uses them), which op i writes or
 * does not use (the naive engine runs a node's children there before the
 * graph's later ops, as their pushes: varflow.h, "Ops pushed from inside a
 * launched op"); none when there are none. */
static void naive_kid(const program *p, int i, tu_rng *r, kid *k)
{
    int cand[NV], ncand = 0;
    for (int v = 0; v < NV; v++) {
        bool written = false, later = false, read = false;
        for (int j = 0; j < p->nops; j++) {
            const rop *o = &p->ops[j];
            for (int q = 0; q < o->nw; q++)
                written |= o->wv[q] == v;
            for (int q = 0; q < o->nr; q++)
                later |= j > i && o->r[q] == v;
            for (int q = 0; q < o->nw; q++)
                later |= j > i && o->wv[q] == v;
        }
        for (int q = 0; q < p->ops[i].nr; q++)
            read |= p->ops[i].r[q] == v;
        for (int q = 0; q < p->ops[i].nw; q++)
            read &= p->ops[i].wv[q] != v;
        if (written && later && !read)
            cand[ncand++] = v;
    }
    if (ncand == 0)
        return;
    k->nw = tu_below(r, 3);
    for (int j = 0; j < k->nw; j++)
        k->wv[j] = cand[tu_below(r, ncand)];
    if (k->nw == 2 && k->wv[0] == k->wv[1])
        k->nw = 1;
    k->nr = tu_below(r, k->nw == 0 ? 3 : 2);
    for (int j = 0; j < k->nr; j++)
        k->r[j] = cand[tu_below(r, ncand)];
}

static void make_program(program *p, tu_rng *r, bool naive)
{
    memset(p, 0, sizeof *p);
    p->nops = tu_range(r, 4, MAXOPS);
    for (int i = 0; i < p->nops; i++) {
        rop *o = &p->ops[i];
        o->nr = tu_below(r, 4);
        o->nw = tu_below(r, 3);
        for (int k = 0; k < o->nr; k++)
            o->r[k] = tu_below(r, NV);
        for (int k = 0; k < o->nw; k++)
            o->wv[k] = tu_below(r, NV);
    }
    for (int i = 0; i < p->nops; i++) {
        rop *o = &p->ops[i];
        o->fail_step = tu_below(r, 6) == 0 ? tu_below(r, STEPS) : -1;
        if (naive) {
            o->nkids = tu_below(r, MAXKIDS + 1);
            for (int c = 0; c < o->nkids; c++) {
                naive_kid(p, i, r, &o->kids[c]);
                o->kids[c].fail_step = tu_below(r, 8) == 0 ? tu_below(r, STEPS)
                                                           : -1;
                o->kids[c].grandchild = o->kids[c].nw > 0 &&
                                        tu_below(r, 3) == 0;
            }
            o->wait = tu_below(r, 4);
            o->wait_on = tu_below(r, NV);
            continue;
        }
        /* Children on the vars it writes: the serial program's place is
         * theirs on every engine, so the values compare. */
        o->nkids = o->nw > 0 ? tu_below(r, MAXKIDS + 1) : 0;
        for (int c = 0; c < o->nkids; c++) {
            kid *k = &o->kids[c];
            int n = tu_range(r, 1, o->nw);
            for (int j = 0; j < n; j++) {
                int v = o->wv[tu_below(r, o->nw)];
                if (tu_below(r, 2) == 0 && k->nw < 2)
                    k->wv[k->nw++] = v;
                else if (k->nr < 2)
                    k->r[k->nr++] = v;
            }
            /* And one the op only reads, beside it. */
            for (int j = 0; j < o->nr && k->nr < 2; j++) {
                bool written = false;
                for (int q = 0; q < o->nw; q++)
                    written |= o->wv[q] == o->r[j];
                if (!written && tu_below(r, 3) == 0) {
                    k->r[k->nr++] = o->r[j];
                    break;
                }
            }
            k->fail_step = tu_below(r, 8) == 0 ? tu_below(r, STEPS) : -1;
            k->grandchild = k->nw > 0 && tu_below(r, 3) == 0;
        }
    }
    for (int s = 0; s < STEPS; s++)
        p->wait_var[s] = tu_below(r, 3) == 0 ? tu_below(r, NV) : -1;
}

static void push_op(world *w, int i, int step)
{
    const rop *o = &w->p->ops[i];
    push_slot(w, i, 0, step, o->nr, o->r, o->nw, o->wv);
}

typedef struct seen {
    int wait_rc[STEPS];
    uint64_t versions[NV];
    vf_stats stats;
} seen;

static void run(const tu_kind *k, const program *p, world *w, seen *out,
                bool launched)
{
    w->e = tu_engine(k);
    w->p = p;
    for (int v = 0; v < NV; v++) {
        w->vars[v] = tu_var(w->e);
        w->val[v] = (uint64_t)v * 77;
    }
    vf_graph *g = NULL;
    if (launched) {
        CHECK_OK(vf_graph_begin(w->e));
        for (int i = 0; i < p->nops; i++)
            push_op(w, i, 0);
        CHECK_OK(vf_graph_end(w->e, &g));
    }
    for (int s = 0; s < STEPS; s++) {
        if (launched) {
            for (int i = 0; s > 0 && i < p->nops; i++) {
                rarg a = {w, i, 0, s};
                CHECK_OK(vf_graph_set_arg(w->e, g, (size_t)i, &a, sizeof a));
            }
            CHECK_OK(vf_graph_launch(w->e, g));
        } else {
            for (int i = 0; i < p->nops; i++)
                push_op(w, i, s);
        }
        if (p->wait_var[s] >= 0)
            out->wait_rc[s] = vf_var_wait(w->e, w->vars[p->wait_var[s]], NULL);
    }
    (void)vf_engine_wait_all(w->e, NULL);
    for (int v = 0; v < NV; v++)
        CHECK_OK(vf_var_version(w->e, w->vars[v], &out->versions[v]));
    CHECK_OK(vf_engine_stats(w->e, &out->stats));
    if (g != NULL)
        CHECK_OK(vf_graph_destroy(w->e, g));
    CHECK_OK(vf_engine_destroy(w->e));
}

TEST_KIND_CASE(random_programs_with_children, k)
{
    program *p = calloc(1, sizeof *p);
    world *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    seen *sa = calloc(1, sizeof *sa), *sb = calloc(1, sizeof *sb);
    REQUIRE(p && a && b && sa && sb);
    int nprog = (int)tu_scaled(30, 6);
    for (int n = 0; n < nprog; n++) {
        tu_rng r = tu_rng_make(check_seed() * 1000 + (uint64_t)n);
        make_program(p, &r, !k->threaded);
        memset(a, 0, sizeof *a);
        memset(b, 0, sizeof *b);
        memset(sa, 0, sizeof *sa);
        memset(sb, 0, sizeof *sb);
        run(k, p, a, sa, false);
        run(k, p, b, sb, true);
        int diffs = 0;
        for (int s = 0; s < STEPS; s++)
            for (int i = 0; i < p->nops; i++)
                for (int c = 0; c < SLOTS; c++)
                    if (atomic_load(&a->status[s][i][c]) !=
                            atomic_load(&b->status[s][i][c]) &&
                        diffs++ < 3)
                        CHECK_REPORT_("program %d step %d op %d slot %d: "
                                      "pushed %d, launched %d",
                                      n, s, i, c,
                                      atomic_load(&a->status[s][i][c]) - 1000,
                                      atomic_load(&b->status[s][i][c]) - 1000);
        CHECK_EQ(diffs, 0);
        CHECK(memcmp(a->wait_rc, b->wait_rc, sizeof a->wait_rc) == 0);
        CHECK(memcmp(a->waited, b->waited, sizeof a->waited) == 0);
        CHECK(memcmp(a->val, b->val, sizeof a->val) == 0);
        CHECK(memcmp(sa->versions, sb->versions, sizeof sa->versions) == 0);
        CHECK(memcmp(sa->wait_rc, sb->wait_rc, sizeof sa->wait_rc) == 0);
        CHECK_EQ(sa->stats.ran, sb->stats.ran);
        CHECK_EQ(sa->stats.failed, sb->stats.failed);
        CHECK_EQ(sa->stats.skipped, sb->stats.skipped);
        CHECK_EQ(sb->stats.replays, STEPS);
    }
    free(p);
    free(a);
    free(b);
    free(sa);
    free(sb);
}

int main(int argc, char **argv)
{
    return runner_main(argc, argv, "test_graph_children", 240);
}
