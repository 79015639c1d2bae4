/*
 * test_profile_critical: the critical path, exactly, and the Graphviz
 * export.
 *
 * - Hand-made traces (written as Chrome JSON, read with vf_profile_load, so
 *   every time is known to the nanosecond): a DAG whose heaviest chain is
 *   neither the one with the most ops nor the one through the longest
 *   single op; an edge from a larger id to a smaller one; ties (equal
 *   weight: the predecessor that ended last, then the smaller id);
 *   repeated deps (kept once) and deps on ops not in the snapshot
 *   (ignored); a cycle (the load refuses it); an empty profile. The expected
 * ids, length and elapsed time are written out by hand.
 * - Real runs: random DAGs of ops with random work on a 2-worker engine,
 *   held back by a gate so that every edge is recorded; the path returned
 *   must follow recorded edges, its length must be the sum of its ops' run
 *   times, and no path found by brute force (every path of the DAG) may
 *   be longer.
 * - What the DAG allows (the verdict's figure): the work weighed as the
 *   path weighs it, each op's own time, over the path's length.
 * - Graphviz: a node per op, an edge per distinct dependency, the path's
 *   edges in red; past 1000 ops only the first 1000 and a note.
 */
#include "runner.h"

#include <unistd.h>

#include "profile/trace_load.h"
#include <varflow_profile.h>

static char dir[64];

typedef struct synth {
    uint64_t id, push, ready, start, end;
    int worker;
    const char *name;
    int ndeps;
    uint64_t deps[4];
} synth;

static void us(FILE *f, uint64_t ns)
{
    fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

/* Write ops as a varflow Chrome trace and load it: what the load
 * returns (`want`), and the profile when it loaded. `inside`: each op's
 * time not its own (inside_us), or NULL for none; `parent`: each op's
 * parent's id (0: none), or NULL for none. */
static vf_profile *load_synth_with(const synth *ops, const uint64_t *inside,
                                   const uint64_t *parent, int n, int want)
{
    char path[128];
    snprintf(path, sizeof path, "%s/synth.json", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fprintf(f, "{\"traceEvents\":[");
    for (int i = 0; i < n; i++) {
        const synth *o = &ops[i];
        fprintf(f, "%s{\"ph\":\"X\",\"name\":\"", i ? "," : "");
        for (const char *c = o->name ? o->name : "op"; *c; c++)
            fprintf(f, "%s%c", *c == '"' || *c == '\\' ? "\\" : "", *c);
        fprintf(f, "\",\"ts\":");
        us(f, o->start);
        fprintf(f, ",\"dur\":");
        us(f, o->end - o->start);
        fprintf(f,
                ",\"args\":{\"id\":%" PRIu64 ",\"code\":0,\"push_us\":", o->id);
        us(f, o->push);
        fprintf(f, ",\"ready_us\":");
        us(f, o->ready);
        if (inside != NULL && inside[i] != 0) {
            fprintf(f, ",\"inside_us\":");
            us(f, inside[i]);
        }
        if (parent != NULL && parent[i] != 0)
            fprintf(f, ",\"parent\":%" PRIu64, parent[i]);
        fprintf(f, ",\"worker\":%d,\"pool\":0,\"deps\":[", o->worker);
        for (int k = 0; k < o->ndeps; k++)
            fprintf(f, "%s%" PRIu64, k ? "," : "", o->deps[k]);
        fprintf(f, "]}}");
    }
    fprintf(f, "],\"otherData\":{\"varflow\":1,\"engine\":\"pooled\","
               "\"workers\":2,\"worker_pools\":[\"cpu\",\"cpu\"]}}");
    fclose(f);
    vf_profile *p = NULL;
    CHECK_ERR(vf_profile_load(path, &p), want);
    REQUIRE((p != NULL) == (want == 0));
    return p;
}

static vf_profile *load_synth_inside(const synth *ops, const uint64_t *inside,
                                     int n, int want)
{
    return load_synth_with(ops, inside, NULL, n, want);
}

static vf_profile *load_synth_as(const synth *ops, int n, int want)
{
    return load_synth_inside(ops, NULL, n, want);
}

static vf_profile *load_synth(const synth *ops, int n)
{
    return load_synth_as(ops, n, 0);
}

static void expect_path(const vf_profile *p, const uint64_t *ids, size_t n,
                        uint64_t length, uint64_t elapsed, const char *what)
{
    check_context_ = what;
    vf_profile_path path;
    CHECK_OK(vf_profile_critical_path(p, &path));
    CHECK_EQ(path.count, n);
    CHECK_EQ(path.length_ns, length);
    CHECK_EQ(path.elapsed_ns, elapsed);
    CHECK_EQ(path.span_ns, vf_profile_span_ns(p));
    for (size_t i = 0; i < n && i < path.count; i++)
        if (path.ids[i] != ids[i])
            CHECK_REPORT_("path[%zu] = %" PRIu64 ", expected %" PRIu64, i,
                          path.ids[i], ids[i]);
    vf_profile_path_destroy(&path);
    CHECK(path.ids == NULL && path.count == 0);
    check_context_ = NULL;
}

TEST_CASE(synthetic)
{
    tu_phase_limit("synthetic", 20);
    /* 1 -> {2, 3}; {2, 3} -> 4; 3 -> 5; {4, 5} -> 6; 7 alone, the longest
     * single op. Chains: 1-2-4-6 = 130, 1-3-5-6 = 210 (5 starts 10 ns
     * after it was ready, 6 5 ns after), 1-3-4-6 = 50, 7 = 150. */
    const synth a[] = {
        {1, 0, 0, 0, 10, 0, "a", 0, {0}},
        {2, 1, 10, 10, 110, 0, "b", 1, {1}},
        {3, 2, 10, 10, 30, 1, "c", 1, {1}},
        {4, 3, 110, 110, 120, 0, "d", 2, {2, 3}},
        {5, 4, 30, 40, 210, 1, "e", 1, {3}},
        {6, 5, 210, 215, 225, 0, "f", 2, {4, 5}},
        {7, 6, 6, 6, 156, 0, "g", 0, {0}},
    };
    vf_profile *p = load_synth(a, 7);
    expect_path(p, (const uint64_t[]){1, 3, 5, 6}, 4, 210, 225, "diamond");
    vf_profile_destroy(p);

    /* An edge from a larger id to a smaller one: 5 -> 3. */
    const synth b[] = {
        {3, 0, 50, 50, 60, 0, "x", 1, {5}},
        {4, 0, 0, 0, 20, 1, "y", 0, {0}},
        {5, 0, 0, 0, 50, 0, "z", 0, {0}},
    };
    p = load_synth(b, 3);
    expect_path(p, (const uint64_t[]){5, 3}, 2, 60, 60, "backward edge");
    vf_profile_destroy(p);

    /* Ties: equal weight and end -> smaller id; equal weight -> ended
     * last; deps repeated or not in the snapshot (99) are ignored. */
    const synth c[] = {
        {1, 0, 0, 0, 10, 0, "p", 0, {0}},
        {2, 0, 0, 0, 10, 1, "q", 0, {0}},
        {3, 0, 10, 10, 20, 0, "r", 4, {2, 1, 2, 99}},
    };
    p = load_synth(c, 3);
    expect_path(p, (const uint64_t[]){1, 3}, 2, 20, 20, "tie by id");
    vf_profile_destroy(p);
    const synth d[] = {
        {1, 0, 0, 0, 10, 0, "p", 0, {0}},
        {2, 0, 0, 2, 12, 1, "q", 0, {0}},
        {3, 0, 12, 12, 20, 0, "r", 2, {1, 2}},
    };
    p = load_synth(d, 3);
    expect_path(p, (const uint64_t[]){2, 3}, 2, 18, 18, "tie by end");
    vf_profile_destroy(p);

    /* Two end nodes of equal weight: the one that ended last. */
    const synth e[] = {
        {1, 0, 0, 0, 30, 0, "p", 0, {0}},
        {2, 0, 0, 5, 35, 1, "q", 0, {0}},
    };
    p = load_synth(e, 2);
    expect_path(p, (const uint64_t[]){2}, 1, 30, 30, "last end");
    vf_profile_destroy(p);

    /* A cycle can only come from a corrupt file: the load refuses it (it
     * took it, and every analysis of it failed after: found fuzzing the
     * report tool's input), so does one op depending on itself. */
    const synth cyc[] = {
        {1, 0, 0, 0, 10, 0, "p", 1, {2}},
        {2, 0, 0, 0, 10, 1, "q", 1, {1}},
    };
    CHECK(load_synth_as(cyc, 2, VF_EINVAL) == NULL);
    CHECK(strstr(vf_error_detail(), "cycle") != NULL);
    const synth self[] = {{1, 0, 0, 0, 10, 0, "p", 1, {1}}};
    CHECK(load_synth_as(self, 1, VF_EINVAL) == NULL);
    vf_profile_path path;

    /* A parent that waited 80 of its 100 for its two children, which ran
     * inside it: it weighs 20, each child 30 (they could run beside each
     * other), so the path is one child, the one that ended last. It was
     * the parent alone, 100, as if nothing could run beside it. */
    const synth w[] = {
        {1, 0, 0, 0, 100, 0, "parent", 0, {0}},
        {2, 5, 5, 10, 40, 0, "child", 0, {0}},
        {3, 6, 6, 40, 70, 0, "child", 0, {0}},
    };
    p = load_synth_inside(w, (const uint64_t[]){80, 0, 0}, 3, 0);
    expect_path(p, (const uint64_t[]){3}, 1, 30, 30, "parent waiting");
    vf_profile_destroy(p);
    /* The same with each child's parent recorded: the parent's end waits
     * for them (they ended before it), so the path is the child that
     * ended last, then the parent's own 20. It was the child alone, as if
     * the parent could end before its children did (found by a user
     * tester: a recursion's path was one leaf). */
    const synth wp[] = {
        {1, 0, 0, 0, 100, 0, "parent", 0, {0}},
        {2, 5, 5, 10, 40, 0, "child", 0, {0}},
        {3, 6, 6, 40, 70, 0, "child", 0, {0}},
    };
    p = load_synth_with(wp, (const uint64_t[]){80, 0, 0},
                        (const uint64_t[]){0, 1, 1}, 3, 0);
    expect_path(p, (const uint64_t[]){3, 1}, 2, 50, 60, "fork-join");
    vf_profile_destroy(p);
    /* Three levels: the grandchild, its parent's own 30, the root's 10. */
    const synth nest[] = {
        {1, 0, 0, 0, 100, 0, "root", 0, {0}},
        {2, 5, 5, 10, 90, 0, "mid", 0, {0}},
        {3, 15, 15, 20, 70, 0, "leaf", 0, {0}},
    };
    p = load_synth_with(nest, (const uint64_t[]){90, 50, 0},
                        (const uint64_t[]){0, 1, 2}, 3, 0);
    expect_path(p, (const uint64_t[]){3, 2, 1}, 3, 90, 80, "nested");
    vf_profile_destroy(p);
    /* A child that outlived its parent (pushed, not waited for) comes
     * after it; one that ended with it has no edge; a parent not in the
     * snapshot (7: dropped while recording) is ignored. */
    const synth out[] = {
        {1, 0, 0, 0, 10, 0, "p", 0, {0}},
        {2, 5, 12, 20, 60, 0, "c", 0, {0}},
        {3, 5, 5, 5, 10, 1, "same end", 0, {0}},
        {9, 5, 5, 5, 35, 1, "orphan", 0, {0}},
    };
    p = load_synth_with(out, NULL, (const uint64_t[]){0, 1, 1, 7}, 4, 0);
    expect_path(p, (const uint64_t[]){1, 2}, 2, 50, 60, "outlived");
    vf_profile_destroy(p);
    /* More of it not its own than its run: a corrupt file. */
    const synth over[] = {{1, 0, 0, 0, 10, 0, "p", 0, {0}}};
    CHECK(load_synth_inside(over, (const uint64_t[]){11}, 1, VF_EINVAL) ==
          NULL);
    CHECK(strstr(vf_error_detail(), "more than the op's run") != NULL);

    p = load_synth(NULL, 0);
    expect_path(p, NULL, 0, 0, 0, "empty");
    CHECK_ERR(vf_profile_critical_path(NULL, &path), VF_EINVAL);
    vf_profile_destroy(p);
}

/* --- real runs, against brute force ------------------------------------ */

#define NV 4
#define NOPS 12

typedef struct work {
    tu_gate *gate;
    double us;
} work;

static int work_fn(vf_run *run, void *arg)
{
    (void)run;
    work *w = arg;
    if (w->gate)
        CHECK(tu_gate_wait(w->gate, TU_TIMEOUT));
    tu_spin_us(w->us);
    return 0;
}

static uint64_t run_of(const vf_profile_record *r)
{
    return r->end_ns - r->start_ns - r->inside_ns;
}

/* The heaviest chain ending at record i, by trying every path. */
static uint64_t heaviest_to(const vf_profile *p, size_t i)
{
    const vf_profile_record *r = vf_profile_at(p, i);
    uint64_t best = 0;
    for (int k = 0; k < r->ndeps; k++)
        for (size_t j = 0; j < vf_profile_count(p); j++)
            if (vf_profile_at(p, j)->id == r->deps[k]) {
                uint64_t w = heaviest_to(p, j);
                best = w > best ? w : best;
            }
    return best + run_of(r);
}

static bool has_edge(const vf_profile *p, uint64_t from, uint64_t to)
{
    for (size_t i = 0; i < vf_profile_count(p); i++) {
        const vf_profile_record *r = vf_profile_at(p, i);
        if (r->id != to)
            continue;
        for (int k = 0; k < r->ndeps; k++)
            if (r->deps[k] == from)
                return true;
    }
    return false;
}

TEST_CASE(random_runs)
{
    tu_rng rng = {check_seed()};
    int rounds = (int)tu_scaled(15, 4);
    for (int round = 0; round < rounds; round++) {
        tu_phase_limit("random run", 30);
        vf_engine *e = tu_engine(&tu_kinds[2]); /* pooled, 2 workers */
        vf_var v[NV];
        for (int i = 0; i < NV; i++)
            v[i] = tu_var(e);
        tu_gate gate;
        tu_gate_init(&gate);
        work w[NOPS + 1];
        CHECK_OK(vf_profile_start(e));
        w[0] = (work){&gate, 0};
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = work_fn,
                                            .arg = &w[0],
                                            .writes = tu_list(v, NV),
                                            .name = "gate"}));
        for (int i = 1; i <= NOPS; i++) {
            vf_var rd[NV], wr[NV];
            int nr = 0, nw = 0;
            for (int k = 0; k < NV; k++) {
                int x = tu_range(&rng, 0, 3);
                if (x == 1)
                    rd[nr++] = v[k];
                else if (x == 2)
                    wr[nw++] = v[k];
            }
            w[i] = (work){NULL, (double)tu_range(&rng, 0, 300)};
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = work_fn,
                                                .arg = &w[i],
                                                .reads = tu_list(rd, nr),
                                                .writes = tu_list(wr, nw),
                                                .name = "op"}));
        }
        tu_gate_open(&gate);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        vf_profile *p = NULL;
        CHECK_OK(vf_profile_take(e, &p));
        REQUIRE(vf_profile_count(p) == NOPS + 1);
        vf_profile_path path;
        CHECK_OK(vf_profile_critical_path(p, &path));
        uint64_t best = 0, sum = 0;
        for (size_t i = 0; i < vf_profile_count(p); i++) {
            uint64_t h = heaviest_to(p, i);
            best = h > best ? h : best;
        }
        for (size_t i = 0; i < path.count; i++) {
            const vf_profile_record *r = vf_profile_at(p, path.ids[i] - 1);
            sum += run_of(r);
            if (i > 0 && !has_edge(p, path.ids[i - 1], path.ids[i]))
                CHECK_REPORT_("round %d: %" PRIu64 " -> %" PRIu64
                              " is not a recorded edge",
                              round, path.ids[i - 1], path.ids[i]);
        }
        CHECK_EQ(path.length_ns, sum);
        CHECK_EQ(path.length_ns, best);
        CHECK(path.count >= 1);
        CHECK(path.elapsed_ns >= path.length_ns);
        CHECK(path.length_ns <= vf_profile_span_ns(p));
        vf_profile_path_destroy(&path);
        vf_profile_destroy(p);
        tu_gate_destroy(&gate);
        tu_finish_engine(e);
    }
}

/* A parent that pushes children and waits for them holds their runs in
 * its own (they run at their push or above its wait, on its thread): its
 * record says how much of its run was not its own (inside_ns), at least
 * their runs, and the path weighs it without them. The path was the
 * parent alone, its run holding all of theirs, and the report said the
 * DAG allowed no parallelism for independent children (found going over
 * last stop's open points). */
static int spin_child(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    tu_spin_us(2000);
    return 0;
}

static int parent_fn(vf_run *run, void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++)
        CHECK_OK(vf_engine_push(vf_run_engine(run),
                                &(vf_op){.fn = spin_child, .name = "child"}));
    CHECK_OK(vf_run_wait_children(run, NULL));
    return 0;
}

TEST_CASE(parent_waiting_for_its_children)
{
    for (int kind = 0; kind < 2; kind++) { /* naive; pooled, 1 worker */
        vf_engine *e = tu_engine(&tu_kinds[kind]);
        CHECK_OK(vf_profile_start(e));
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = parent_fn, .name = "parent"}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        vf_profile *p = NULL;
        CHECK_OK(vf_profile_take(e, &p));
        REQUIRE(vf_profile_count(p) == 5);
        const vf_profile_record *parent = vf_profile_at(p, 0);
        CHECK_EQ(strcmp(parent->name, "parent"), 0);
        CHECK_EQ(parent->parent, 0); /* pushed by the program */
        uint64_t children = 0, heaviest = 0, last = 0;
        for (size_t i = 1; i < 5; i++) {
            const vf_profile_record *c = vf_profile_at(p, i);
            CHECK_EQ(c->inside_ns, 0);
            CHECK_EQ(c->parent, parent->id);
            children += run_of(c);
            if (run_of(c) > heaviest ||
                (run_of(c) == heaviest &&
                 c->end_ns > vf_profile_at(p, last)->end_ns))
                last = i;
            heaviest = run_of(c) > heaviest ? run_of(c) : heaviest;
        }
        uint64_t whole = parent->end_ns - parent->start_ns;
        CHECK(parent->inside_ns >= children);
        CHECK(parent->inside_ns <= whole);
        vf_profile_path path;
        CHECK_OK(vf_profile_critical_path(p, &path));
        /* The parent's end waits for its children (they ended before
         * it): the path is the heaviest child, then the parent's own. It
         * was the heavier of the two alone, as if the parent's end could
         * come before its children's (found by a user tester). */
        CHECK_EQ(path.length_ns, run_of(parent) + heaviest);
        REQUIRE(path.count == 2);
        CHECK_EQ(path.ids[0], vf_profile_at(p, last)->id);
        CHECK_EQ(path.ids[1], parent->id);
        CHECK(path.length_ns < whole);
        vf_profile_path_destroy(&path);
        vf_profile_destroy(p);
        tu_finish_engine(e);
    }
}

/* Each child names the op whose function pushed it: with the parents
 * fused into one bulk batch, its own item, not the batch's last (found
 * by the reviewer of the parents); an async op's children name none (its
 * record may be freed by another thread's finish while its function
 * pushes, and spans its completion, not its own work). */
static vf_engine *named_e;

static int named_parent(vf_run *run, void *arg)
{
    (void)run;
    for (int k = 0; k < 2; k++)
        CHECK_OK(vf_engine_push(
            named_e, &(vf_op){.fn = tu_nop, .name = (const char *)arg}));
    return 0;
}

/* A `done` callback's push, and an op of another engine's: no parent (the
 * header's other cases of 0). */
static void named_done(void *arg, int status)
{
    (void)status;
    CHECK_OK(vf_engine_push(named_e,
                            &(vf_op){.fn = tu_nop, .name = (const char *)arg}));
}

static int named_other(vf_run *run, void *arg)
{
    (void)run;
    CHECK_OK(vf_engine_push(named_e,
                            &(vf_op){.fn = tu_nop, .name = (const char *)arg}));
    return 0;
}

static void *named_finish(void *arg)
{
    CHECK_OK(vf_completion_finish(*(vf_completion *)arg, 0, NULL));
    return NULL;
}

/* Its completion finished on another thread while it pushes (TSan saw
 * the push read the record that finish freed). */
static void named_async(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    pthread_t t = tu_thread_start(named_finish, &done);
    for (int k = 0; k < 20; k++)
        CHECK_OK(vf_engine_push(
            named_e, &(vf_op){.fn = tu_nop, .name = (const char *)arg}));
    tu_thread_join(t);
}

TEST_CASE(parents_of_batches_and_async_ops)
{
    static const char *const kids[] = {"kid of P0", "kid of P1", "kid of P2",
                                       "kid of P3", "kid of A",  "kid of D",
                                       "kid of O"};
    for (int kind = 0; kind < 3; kind++) {
        check_context_ = tu_kinds[kind].name;
        named_e = tu_engine(&tu_kinds[kind]);
        CHECK_OK(vf_profile_start(named_e));
        CHECK(vf_bulk_set_size(named_e, 4) >= 0);
        for (int i = 0; i < 4; i++)
            CHECK_OK(vf_engine_push(named_e,
                                    &(vf_op){.fn = named_parent,
                                             .arg = (void *)kids[i],
                                             .writes = VF_VARS(tu_var(named_e)),
                                             .name = kids[i] + 7}));
        CHECK_EQ(vf_bulk_set_size(named_e, 0), 4);
        CHECK_OK(vf_engine_push(named_e, &(vf_op){.async_fn = named_async,
                                                  .arg = (void *)kids[4],
                                                  .name = "A"}));
        CHECK_OK(vf_engine_push(named_e, &(vf_op){.fn = tu_nop,
                                                  .done = named_done,
                                                  .arg = (void *)kids[5],
                                                  .name = "D"}));
        vf_engine *other = tu_engine(&tu_kinds[kind]);
        CHECK_OK(vf_engine_push(
            other,
            &(vf_op){.fn = named_other, .arg = (void *)kids[6], .name = "O"}));
        CHECK_OK(vf_engine_wait_all(other, NULL));
        tu_finish_engine(other);
        CHECK_OK(vf_engine_wait_all(named_e, NULL));
        vf_profile *p = NULL;
        CHECK_OK(vf_profile_take(named_e, &p));
        REQUIRE(p != NULL);
        int seen = 0;
        for (size_t i = 0; i < vf_profile_count(p); i++) {
            const vf_profile_record *r = vf_profile_at(p, i);
            if (strncmp(r->name, "kid of ", 7) != 0)
                continue;
            seen++;
            if (strcmp(r->name, "kid of A") == 0 ||
                strcmp(r->name, "kid of D") == 0 ||
                strcmp(r->name, "kid of O") == 0) {
                CHECK_EQ(r->parent, 0);
                continue;
            }
            ptrdiff_t at = -1;
            for (size_t j = 0; j < vf_profile_count(p); j++)
                if (vf_profile_at(p, j)->id == r->parent)
                    at = (ptrdiff_t)j;
            REQUIRE(at >= 0);
            CHECK_EQ(strcmp(vf_profile_at(p, (size_t)at)->name, r->name + 7),
                     0);
        }
        CHECK_EQ(seen, 8 + 20 + 2);
        vf_profile_destroy(p);
        tu_finish_engine(named_e);
    }
    check_context_ = NULL;
}

/* --- Graphviz ---------------------------------------------------------- */

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *s = text; (s = strstr(s, what)) != NULL; s++)
        n++;
    return n;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    REQUIRE(f != NULL);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    REQUIRE(buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* What the DAG allows is its work weighed as the path weighs it (each
 * op's own time) over the path's length: a parent of 100 us whose two
 * children of 40 us each ran inside it on the program's thread (the
 * naive engine's, at their push: 80 us not its own) allows 100 / 60, and
 * said 180 / 60, the busy time of ops on the program's threads counting
 * the children twice (found by a user tester: a recursion
 * of 30 ms of work on a span of 8 "allowed" 12.1). */
TEST_CASE(what_the_dag_allows_weighs_as_the_path)
{
    const synth ops[] = {
        {1, 0, 0, 0, 100000, -1, "parent", 0, {0}},
        {2, 10000, 10000, 10000, 50000, -1, "child", 0, {0}},
        {3, 50000, 50000, 50000, 90000, -1, "child", 0, {0}},
    };
    const uint64_t inside[] = {80000, 0, 0}, parent[] = {0, 1, 1};
    vf_profile *p = load_synth_with(ops, inside, parent, 3, 0);
    REQUIRE(p != NULL);
    const uint64_t ids[] = {3, 1};
    expect_path(p, ids, 2, 60000, 50000, "parent and inline children");
    char path[128];
    snprintf(path, sizeof path, "%s/allows.txt", dir);
    CHECK_OK(vf_profile_write(p, path, VF_PROFILE_SUMMARY_TEXT));
    char *text = tu_read_file(path);
    REQUIRE(text != NULL);
    if (strstr(text, "would allow a parallelism of 1.7 (") == NULL)
        CHECK_REPORT_("the verdict: %s", text);
    free(text);
    vf_profile_destroy(p);
}

TEST_CASE(graphviz)
{
    tu_phase_limit("graphviz", 30);
    const synth a[] = {
        {1, 0, 0, 0, 10, 0, "a", 0, {0}},
        {2, 1, 10, 10, 110, 0, "b \"quoted\"", 1, {1}},
        {3, 2, 10, 10, 30, 1, "c", 2, {1, 1}},
        {4, 3, 110, 110, 120, 0, "d", 2, {2, 3}},
        {5, 4, 30, 40, 210, 1, "e", 1, {3}},
        {6, 5, 210, 215, 225, 0, "f", 2, {4, 5}},
    };
    vf_profile *p = load_synth(a, 6);
    char path[128];
    snprintf(path, sizeof path, "%s/dag.dot", dir);
    CHECK_OK(vf_profile_write(p, path, VF_PROFILE_AUTO));
    char *text = read_all(path);
    CHECK(strncmp(text, "digraph varflow {", 17) == 0);
    CHECK_EQ(count(text, " [label="), 6);
    CHECK_EQ(count(text, " -> "), 7);       /* 3's repeated dep counts once */
    CHECK_EQ(count(text, "penwidth=3"), 3); /* 1->3->5->6 */
    CHECK(strstr(text, "n3 -> n5 [color=") != NULL);
    CHECK(strstr(text, "b \\\"quoted\\\"") != NULL);
    CHECK(strstr(text, "truncated") == NULL);
    free(text);
    vf_profile_destroy(p);

    /* Children: a dashed edge from each one's parent, red where the path
     * goes through it (2 -> 1 here: 2 ended first, then its parent). */
    const synth fork[] = {
        {1, 0, 0, 0, 100, 0, "parent", 0, {0}},
        {2, 5, 5, 10, 90, 0, "long child", 0, {0}},
        {3, 6, 6, 10, 20, 1, "short child", 0, {0}},
    };
    p = load_synth_with(fork, (const uint64_t[]){80, 0, 0},
                        (const uint64_t[]){0, 1, 1}, 3, 0);
    CHECK_OK(vf_profile_write(p, path, VF_PROFILE_DOT));
    text = read_all(path);
    CHECK_EQ(count(text, " -> "), 2);
    CHECK(strstr(text, "n1 -> n2 [style=dashed, color=") != NULL);
    CHECK(strstr(text, "n1 -> n3 [style=dashed];") != NULL);
    free(text);
    vf_profile_destroy(p);

    /* Past the limit: the first 1000 ops and a note. */
    vf_engine *e = tu_engine(&tu_kinds[0]);
    vf_var v = tu_var(e);
    CHECK_OK(vf_profile_start(e));
    for (int i = 0; i < 1005; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = work_fn,
                                            .arg = &(work){NULL, 0},
                                            .writes = VF_VARS(v),
                                            .name = "many"}));
    CHECK_OK(vf_profile_take(e, &p));
    CHECK_OK(vf_profile_write(p, path, VF_PROFILE_DOT));
    text = read_all(path);
    CHECK_EQ(count(text, " [label="), 1000);
    CHECK(strstr(text, "truncated: showing the first 1000 of 1005 ops") !=
          NULL);
    free(text);
    vf_profile_destroy(p);
    tu_finish_engine(e);
}

/* The cases write their files into one temporary directory, removed
 * after a run where no check failed. */
int main(int argc, char **argv)
{
    snprintf(dir, sizeof dir, "%s/vf-critical-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    int rc = runner_main(argc, argv, "test_profile_critical", 120);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (atomic_load(&check_failures_) == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
