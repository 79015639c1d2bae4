/*
 * test_enomem: out of memory never crashes, leaks or loses work
 * (vf__testing_fail_alloc), on every engine kind.
 *
 * 1. A sweep: for n = 1, 2, ... the n-th allocation of a small program
 *    fails (engine create, vars, pushes with small and large var sets,
 *    a failing op and its dependents, an operator, a nested push, waits, a
 *    delete), until a run needs fewer than n allocations. Every call
 *    returns 0 or VF_ENOMEM (waits: 0 or VF_EOPFAILED); every op whose push
 *    succeeded finishes exactly once (its `done` runs once) and an op whose
 *    push failed never does; afterwards the engine works and destroys
 *    cleanly (LSan checks for leaks in `make asan`).
 * 2. An op failure whose record cannot be allocated is still reported (as
 *    VF_ENOMEM or the op's own code) and still makes dependents skip: the
 *    first time, again the second time, and after a wait_all.
 * 3. With the profiler on, each push with its first, second or third
 *    allocation failing: every op whose push returned 0 is in the profile
 *    or counted in vf_profile_dropped (a push that found no memory for its
 *    record was in neither: found trying memory limits as a user).
 * 4. A destroy whose profile (profile_path) cannot be taken for want of
 *    memory is VF_ESYSTEM, as for a write that fails, never VF_ENOMEM (a
 *    caller took that for a destroy that did not happen; found trying
 *    memory limits as a user), and the engine is destroyed all the same.
 * 5. vf_var_of that finds no memory for a new address's var says so in its
 *    own name (its detail named vf_var_create, which it calls).
 * 6. vf_run_wait_children with no memory to wait returns VF_ENOMEM having
 *    waited for nothing, and the next call waits for the same children and
 *    reports their failure (the header did not list VF_ENOMEM).
 */
#include "runner.h"

#include "varflow_profile.h"

#include <unistd.h>

/* the testing aid vf__testing_fail_alloc (fault injection) */
#include "base/alloc.h"

/* ------------------------------------------------------------ sweep */

typedef struct opstat {
    atomic_int ran, done, status;
} opstat;

#define NOPS 16

typedef struct prog {
    opstat ops[NOPS];
    bool pushed[NOPS];
    atomic_int nested_rc;
    int opr_pushed; /* runs of the operator pushed */
    int bad_rc;
} prog;

static int ok_fn(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((opstat *)arg)->ran, 1);
    return 0;
}

static int fail_fn(vf_run *run, void *arg)
{
    atomic_fetch_add(&((opstat *)arg)->ran, 1);
    vf_run_set_error(run, "failing on purpose");
    return 5;
}

static void on_done(void *arg, int status)
{
    opstat *s = arg;
    atomic_store(&s->status, status);
    atomic_fetch_add(&s->done, 1);
}

static prog *P;

static int nesting_fn(vf_run *run, void *arg)
{
    atomic_fetch_add(&((opstat *)arg)->ran, 1);
    int rc = vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = ok_fn, .arg = &P->ops[NOPS - 1], .done = on_done});
    atomic_store(&P->nested_rc, rc);
    return 0;
}

/* The call's result must be 0 or one of the codes allowed. */
#define EXPECT(rc, alt)                                                        \
    do {                                                                       \
        int r_ = (rc);                                                         \
        if (r_ != 0 && r_ != (alt)) {                                          \
            CHECK_REPORT_("%s returned %s (n = %llu)", #rc, vf_error_name(r_), \
                          (unsigned long long)fail_n);                         \
            P->bad_rc++;                                                       \
        }                                                                      \
    } while (0)

static uint64_t fail_n;

static void push_op(vf_engine *e, int i, vf_sync_fn fn, vf_var_list r,
                    vf_var_list w)
{
    int rc = vf_engine_push(e, &(vf_op){.fn = fn,
                                        .arg = &P->ops[i],
                                        .done = on_done,
                                        .reads = r,
                                        .writes = w,
                                        .name = "op"});
    EXPECT(rc, VF_ENOMEM);
    P->pushed[i] = rc == 0;
}

/* Run the program with allocation `n` failing; returns false when no
 * allocation failed (the sweep is over). */
static bool sweep_one(const tu_kind *k, uint64_t n)
{
    prog p;
    memset(&p, 0, sizeof p);
    P = &p;
    fail_n = n;
    atomic_store(&p.nested_rc, 12345);
    vf__testing_fail_alloc(n);

    vf_engine *e = NULL;
    int rc = vf_engine_create(&e, &k->cfg);
    EXPECT(rc, VF_ENOMEM);
    if (rc != 0) {
        CHECK(e == NULL);
        vf__testing_fail_alloc(0);
        return true;
    }
    enum { NV = 12 };
    vf_var v[NV];
    bool have[NV];
    for (int i = 0; i < NV; i++) {
        rc = vf_var_create(e, &v[i]);
        EXPECT(rc, VF_ENOMEM);
        have[i] = rc == 0;
    }
    bool all = true;
    for (int i = 0; i < NV; i++)
        all = all && have[i];
    if (have[0] && have[1] && have[2]) {
        /* F fails on x=v0; G (x -> y) and H (y -> z) are skipped. */
        push_op(e, 0, fail_fn, (vf_var_list){NULL, 0}, tu_list(&v[0], 1));
        push_op(e, 1, ok_fn, tu_list(&v[0], 1), tu_list(&v[1], 1));
        push_op(e, 2, ok_fn, tu_list(&v[1], 1), tu_list(&v[2], 1));
    }
    if (all) {
        /* More vars than an op holds inline. */
        push_op(e, 3, ok_fn, tu_list(&v[3], 5), tu_list(&v[8], 4));
        push_op(e, 4, nesting_fn, tu_list(&v[3], 2), tu_list(&v[5], 1));
    }
    vf_operator *o = NULL;
    if (have[6]) {
        rc = vf_operator_create(e,
                                &(vf_op){.fn = ok_fn,
                                         .arg = &p.ops[5],
                                         .reads = tu_list(&v[6], 1),
                                         .name = "operator"},
                                &o);
        EXPECT(rc, VF_ENOMEM);
        int pushed = 0;
        for (int i = 0; o && i < 3; i++) {
            rc = vf_operator_push(e, o, i);
            EXPECT(rc, VF_ENOMEM);
            pushed += rc == 0;
        }
        if (o) {
            CHECK_OK(vf_operator_destroy(e, o));
            p.opr_pushed = pushed;
        }
    }
    if (have[1]) {
        rc = vf_var_wait(e, v[1], NULL);
        if (rc != 0 && rc != VF_EOPFAILED && rc != VF_ENOMEM)
            CHECK_REPORT_("wait_var returned %s (n = %llu)", vf_error_name(rc),
                          (unsigned long long)n);
    }
    if (have[7]) {
        rc = vf_var_destroy(e, v[7], NULL, NULL);
        EXPECT(rc, VF_ENOMEM);
        have[7] = rc != 0; /* deleted: no longer ours */
    }
    /* Waits may fail for memory (wait_var's marker) or report F. */
    if (have[2]) {
        rc = vf_var_wait(e, v[2], NULL);
        if (rc != 0 && rc != VF_EOPFAILED && rc != VF_ENOMEM)
            CHECK_REPORT_("wait_var returned %s (n = %llu)", vf_error_name(rc),
                          (unsigned long long)n);
    }
    rc = vf_engine_wait_all(e, NULL);
    if (rc != 0 && rc != VF_EOPFAILED)
        CHECK_REPORT_("wait_all returned %s (n = %llu)", vf_error_name(rc),
                      (unsigned long long)n);
    bool injected = vf__testing_alloc_count() >= n;
    vf__testing_fail_alloc(0);

    /* Every pushed op finished once; the others never ran. */
    for (int i = 0; i < 5; i++) {
        int want = p.pushed[i] ? 1 : 0;
        if (atomic_load(&p.ops[i].done) != want)
            CHECK_REPORT_("op %d: done called %d times, expected %d (n = "
                          "%llu)",
                          i, atomic_load(&p.ops[i].done), want,
                          (unsigned long long)n);
        if (!p.pushed[i])
            CHECK_EQ(atomic_load(&p.ops[i].ran), 0);
    }
    if (p.pushed[0]) {
        CHECK_EQ(atomic_load(&p.ops[0].ran), 1);
        CHECK_EQ(atomic_load(&p.ops[0].status), 5);
    }
    /* Dependents of F never ran (F's failure reached them). */
    if (p.pushed[0] && p.pushed[1])
        CHECK_EQ(atomic_load(&p.ops[1].ran), 0);
    if (p.pushed[4]) {
        int nrc = atomic_load(&p.nested_rc);
        CHECK(nrc == 0 || nrc == VF_ENOMEM);
        CHECK_EQ(atomic_load(&p.ops[NOPS - 1].done), nrc == 0 ? 1 : 0);
    }
    if (o)
        CHECK_EQ(atomic_load(&p.ops[5].ran), p.opr_pushed);

    /* The engine works. */
    vf_var fresh;
    CHECK_OK(vf_var_create(e, &fresh));
    opstat last;
    memset(&last, 0, sizeof last);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = ok_fn,
                                        .arg = &last,
                                        .done = on_done,
                                        .writes = VF_VARS(fresh)}));
    CHECK_OK(vf_var_wait(e, fresh, NULL));
    CHECK_EQ(atomic_load(&last.ran), 1);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
    P = NULL;
    return injected;
}

TEST_KIND_CASE(sweep, k)
{
    uint64_t n = 1;
    int limit = 2000;
    while (sweep_one(k, n) && limit-- > 0)
        n++;
    CHECK(limit > 0);
}

/* ------------------------------------------------------------ records */

typedef struct rec {
    tu_gate go;
    atomic_int done;
} rec;

static int fail_after_gate(vf_run *run, void *arg)
{
    (void)run;
    rec *r = arg;
    CHECK(tu_gate_wait(&r->go, TU_TIMEOUT));
    return 7;
}

static void rec_done(void *arg, int status)
{
    (void)status;
    atomic_fetch_add(&((rec *)arg)->done, 1);
}

static int dependent(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add((atomic_int *)arg, 1);
    return 0;
}

/* Fail one op while its failure record cannot be allocated: the failure
 * must still be reported and still make its dependent skip. */
static void lost_record(vf_engine *e, int round)
{
    vf_var x = tu_var(e), y = tu_var(e);
    rec r;
    memset(&r, 0, sizeof r);
    tu_gate_init(&r.go);
    atomic_int dep_ran = 0;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = fail_after_gate,
                                        .arg = &r,
                                        .done = rec_done,
                                        .writes = VF_VARS(x),
                                        .name = "F"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = dependent,
                                        .arg = &dep_ran,
                                        .reads = VF_VARS(x),
                                        .writes = VF_VARS(y)}));
    /* The next allocation anywhere is the failure record (this thread
     * allocates nothing until F is done). */
    vf__testing_fail_alloc(1);
    tu_gate_open(&r.go);
    CHECK(tu_wait_flag(&r.done, 1, TU_TIMEOUT));
    bool hit = vf__testing_alloc_count() >= 1;
    vf__testing_fail_alloc(0);
    vf_error err;
    memset(&err, 0, sizeof err);
    int rc = vf_var_wait(e, y, &err);
    if (rc != VF_EOPFAILED)
        CHECK_REPORT_("round %d (record allocation %s): wait_var returned %s; "
                      "the failure was lost",
                      round, hit ? "failed" : "did not fail",
                      vf_error_name(rc));
    else
        CHECK(err.code == 7 || err.code == VF_ENOMEM);
    CHECK_EQ(atomic_load(&dep_ran), 0);
    (void)vf_engine_wait_all(e, NULL);
    CHECK_OK(vf_var_destroy(e, x, NULL, NULL));
    CHECK_OK(vf_var_destroy(e, y, NULL, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_gate_destroy(&r.go);
}

TEST_KIND_CASE(records, k)
{
    if (!k->threaded)
        return; /* the op must run while this thread allocates nothing */
    vf_engine *e = tu_engine(k);
    lost_record(e, 1); /* before any wait_all */
    lost_record(e, 2); /* the same again: still reported */
    CHECK_OK(vf_engine_wait_all(e, NULL));
    lost_record(e, 3); /* after a wait_all */
    tu_finish_engine(e);
}

/* ------------------------------------------------------------ profile */

TEST_KIND_CASE(profile_counts_what_it_could_not_record, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    CHECK_OK(vf_profile_start(e));
    uint64_t pushed = 0, refused = 0;
    /* Every other push with no failure: a name is copied at its op's
     * end, by allocations after the record's, which a failure among the
     * first three of every push (the naive engine runs the op inside it)
     * would always hit. */
    for (int i = 0; i < 300; i++) {
        vf__testing_fail_alloc(i % 2 ? 0 : 1 + (uint64_t)(i / 2 % 3));
        int rc = vf_engine_push(
            e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v), .name = "op"});
        vf__testing_fail_alloc(0);
        if (rc == 0)
            pushed++;
        else if (rc == VF_ENOMEM)
            refused++;
        else
            CHECK_REPORT_("push %d: %s", i, vf_error_name(rc));
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    uint64_t kept = vf_profile_count(p), dropped = vf_profile_dropped(p);
    if (kept + dropped != pushed)
        CHECK_REPORT_("%s: %" PRIu64 " ops pushed, %" PRIu64
                      " recorded, %" PRIu64 " dropped",
                      k->name, pushed, kept, dropped);
    CHECK(dropped > 0); /* some record's allocation failed */
    CHECK(kept > 0);
    vf_profile_destroy(p);
    tu_finish_engine(e);
}

TEST_KIND_CASE(destroy_without_memory_for_its_profile, k)
{
    char dir[] = "/tmp/vf-enomem-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/p.json", dir);
    int unwritten = 0;
    for (uint64_t n = 1; n <= 40; n++) {
        vf_config cfg = k->cfg;
        cfg.profile_path = path;
        vf_engine *e = tu_engine_cfg(k, &cfg);
        vf_var v = tu_var(e);
        for (int i = 0; i < 10; i++)
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        vf__testing_fail_alloc(n);
        int rc = vf_engine_destroy(e);
        vf__testing_fail_alloc(0);
        if (rc == VF_ESYSTEM)
            unwritten++;
        else if (rc != 0)
            CHECK_REPORT_("%s: the destroy with allocation %" PRIu64
                          " failing: %s (%s)",
                          k->name, n, vf_error_name(rc), vf_error_detail());
        CHECK_ERR(vf_engine_destroy(e), VF_EINVAL); /* destroyed */
        unlink(path);
    }
    CHECK(unwritten > 0); /* some failing allocation was the profile's */
    rmdir(dir);
}

TEST_CASE(var_of_without_memory_says_so)
{
    static char addrs[10000];
    int refused = 0;
    for (uint64_t n = 1; n <= 6; n++) {
        vf_engine *e = tu_engine(&tu_kinds[0]);
        vf__testing_fail_alloc(n);
        for (size_t i = 0; i < sizeof addrs; i++) {
            vf_var v;
            int rc = vf_var_of(e, &addrs[i], &v);
            if (rc == 0)
                continue;
            CHECK_EQ(rc, VF_ENOMEM);
            if (strncmp(vf_error_detail(), "vf_var_of: ", 11) != 0)
                CHECK_REPORT_("allocation %" PRIu64 ": %s", n,
                              vf_error_detail());
            refused++;
            break;
        }
        vf__testing_fail_alloc(0);
        tu_finish_engine(e);
    }
    CHECK(refused > 0);
}

typedef struct held_child {
    atomic_bool released;
    atomic_int ran;
    int first_rc, second_rc;
} held_child;

static int held_child_fn(vf_run *run, void *arg)
{
    (void)run;
    held_child *h = *(held_child **)arg;
    double until = tu_now() + 5;
    while (!atomic_load(&h->released) && tu_now() < until)
        sched_yield();
    atomic_fetch_add(&h->ran, 1);
    return 7;
}

static int parent_without_memory(vf_run *run, void *arg)
{
    held_child *h = *(held_child **)arg;
    CHECK_OK(vf_engine_push(vf_run_engine(run), &(vf_op){.fn = held_child_fn,
                                                         .arg = &h,
                                                         .arg_size = sizeof h,
                                                         .name = "child"}));
    vf__testing_fail_alloc(1);
    h->first_rc = vf_run_wait_children(run, NULL);
    vf__testing_fail_alloc(0);
    atomic_store(&h->released, true);
    h->second_rc = vf_run_wait_children(run, NULL);
    return 0;
}

TEST_CASE(wait_children_without_memory)
{
    vf_engine *e = tu_engine(&tu_kinds[2]); /* pooled/2 */
    held_child h = {.first_rc = -1};
    held_child *hp = &h;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = parent_without_memory,
                                        .arg = &hp,
                                        .arg_size = sizeof hp}));
    CHECK_OK(vf_engine_wait_all(e, NULL)); /* the second wait reported */
    CHECK_EQ(h.first_rc, VF_ENOMEM);
    CHECK_EQ(atomic_load(&h.ran), 1);
    CHECK_EQ(h.second_rc, VF_EOPFAILED); /* it waited for the child */
    tu_finish_engine(e);
}

TEST_MAIN("test_enomem", 200)
