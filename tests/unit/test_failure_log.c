/*
 * test_failure_log: the engine's log of failures (src/core/failure.h),
 * alone and in an engine.
 *
 * - claimed_records_are_let_go: 10,000 failures, each reported by a wait
 *   (claimed) as it comes: the log lists at most a bounded number of
 *   them (it kept every one until the next wait_all);
 * - unclaimed_records_stay: failures no wait reported, made between
 *   claimed ones and held (as by the vars they are on), all stay listed,
 *   and wait_all's report gives the first of them in push order;
 * - records_only_the_log_holds_go_but_the_first: failures no wait
 *   reported whose holders let go (their vars deleted), between claimed
 *   ones: the log stays bounded, and wait_all's report gives the first
 *   of them in push order (every one stayed until wait_all: found by two
 *   user testers, a service grew by 430 bytes a step);
 * - a_service_loses_its_side_failures: in an engine, of every kind, two
 *   ops fail each step, a join of theirs is skipped and a var wait
 *   reports the first; the steps' vars are then deleted: the log stays
 *   bounded, and wait_all reports the first step's other failure;
 * - a_service_loop_keeps_no_failure: in an engine, of every kind, an op
 *   fails, the op after it is skipped, a var wait reports the failure and
 *   fresh writes follow, 5,000 times with no wait_all: the log stays
 *   bounded, and wait_all then has nothing to report (found by a user
 *   tester: a service grew by about 400 bytes a failed op);
 * - a_report_lets_the_next_look_come_sooner: after wait_all's report
 *   took away a burst of 1,000 unreported failures, claimed ones pile up
 *   no more than before it (the next look stayed at twice the burst);
 * - no_memory_joins_an_unreported_failure: with malloc failing and the
 *   reserve spent, a failure joins the newest one no wait reported, not a
 *   reported one (where it was never reported and made nothing skip);
 *   with every listed one reported, it is lost (NULL), as failure.h says.
 */
#include "runner.h"

#include "base/alloc.h"
#include "core/engine.h"
#include "core/failure.h"

/* Looking at the log only when it has doubled lets it hold, between two
 * looks, what a look left and as many again; with every record claimed,
 * a look leaves none, and the first look comes at 64. */
#define CLAIMED_BOUND 64u

/* wait_all's report with every op up to `place` pushed. */
static bool report_at(vf__failure_log *log, uint64_t place, vf_error *err)
{
    _Atomic uint64_t pushed = place;
    return vf__failure_log_report(log, &pushed, err);
}

static vf__wait_key top_level_wait(uint64_t after_place)
{
    return (vf__wait_key){.up = NULL, .next = after_place + 1, .self = false};
}

TEST_CASE(claimed_records_are_let_go)
{
    vf__failure_log log;
    REQUIRE(vf__failure_log_init(&log) == 0);
    size_t most = 0;
    for (uint64_t place = 1; place <= 10000; place++) {
        vf__failure *f = vf__failure_log_record(&log, 7, "fails", "", place,
                                                NULL);
        REQUIRE(f != NULL);
        CHECK(vf__failure_claim(f, top_level_wait(place)));
        vf__failure_unref(f); /* the caller's */
        size_t n = vf__failure_log_count(&log);
        if (n > most)
            most = n;
    }
    if (most > CLAIMED_BOUND)
        CHECK_REPORT_("the log listed %zu claimed records at once", most);
    vf_error err;
    CHECK(!report_at(&log, 10000, &err)); /* all reported */
    CHECK_EQ(vf__failure_log_count(&log), 0u);
    vf__failure_log_destroy(&log);
}

TEST_CASE(unclaimed_records_stay)
{
    vf__failure_log log;
    REQUIRE(vf__failure_log_init(&log) == 0);
    size_t unclaimed = 0;
    vf__failure *held[100];
    for (uint64_t place = 1; place <= 5000; place++) {
        char name[32];
        snprintf(name, sizeof name, "op %llu", (unsigned long long)place);
        vf__failure *f = vf__failure_log_record(&log, 7, name, "", place, NULL);
        REQUIRE(f != NULL);
        if (place % 50 == 7) {
            held[unclaimed++] = f; /* the caller's reference: a var's */
        } else {
            CHECK(vf__failure_claim(f, top_level_wait(place)));
            vf__failure_unref(f);
        }
        CHECK(vf__failure_log_count(&log) >= unclaimed);
    }
    vf_error err;
    memset(&err, 0, sizeof err);
    CHECK(report_at(&log, 5000, &err));
    CHECK(strcmp(err.op_name, "op 7") == 0);
    CHECK_EQ(vf__failure_log_count(&log), 0u);
    for (size_t i = 0; i < unclaimed; i++)
        vf__failure_unref(held[i]);
    vf__failure_log_destroy(&log);
}

TEST_CASE(records_only_the_log_holds_go_but_the_first)
{
    vf__failure_log log;
    REQUIRE(vf__failure_log_init(&log) == 0);
    size_t most = 0;
    for (uint64_t place = 1; place <= 5000; place++) {
        char name[32];
        snprintf(name, sizeof name, "op %llu", (unsigned long long)place);
        vf__failure *f = vf__failure_log_record(&log, 7, name, "", place, NULL);
        REQUIRE(f != NULL);
        if (place % 50 != 7) /* reported; the others' vars let go */
            CHECK(vf__failure_claim(f, top_level_wait(place)));
        vf__failure_unref(f);
        size_t n = vf__failure_log_count(&log);
        if (n > most)
            most = n;
    }
    /* At most the first unreported one beside what a look leaves. */
    if (most > CLAIMED_BOUND + 1)
        CHECK_REPORT_("the log listed %zu records at once", most);
    vf_error err;
    memset(&err, 0, sizeof err);
    CHECK(report_at(&log, 5000, &err));
    CHECK(strcmp(err.op_name, "op 7") == 0);
    CHECK_EQ(vf__failure_log_count(&log), 0u);
    vf__failure_log_destroy(&log);
}

static int fails(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 7;
}

static int nothing(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

TEST_CASE(a_service_loop_keeps_no_failure)
{
    for (int kind = 0; kind < TU_NKINDS; kind++) {
        vf_engine *e = tu_engine(&tu_kinds[kind]);
        vf_var a = tu_var(e), b = tu_var(e);
        size_t most = 0;
        int iters = (int)tu_scaled(5000, 500);
        for (int i = 0; i < iters; i++) {
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = fails, .writes = tu_list(&a, 1)}));
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nothing,
                                                .reads = tu_list(&a, 1),
                                                .writes = tu_list(&b, 1)}));
            CHECK_ERR(vf_var_wait(e, b, NULL), VF_EOPFAILED);
            vf_var both[2] = {a, b};
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = nothing, .writes = tu_list(both, 2)}));
            CHECK_OK(vf_var_wait(e, a, NULL));
            size_t n = vf__failure_log_count(&e->failures);
            if (n > most)
                most = n;
        }
        if (most > CLAIMED_BOUND)
            CHECK_REPORT_("%s: the log listed %zu reported failures",
                          tu_kinds[kind].name, most);
        CHECK_OK(vf_engine_wait_all(e, NULL)); /* nothing left to report */
        tu_finish_engine(e);
    }
}

static int fails_named(vf_run *run, void *arg)
{
    vf_run_set_error(run, "%s", (const char *)arg);
    return 7;
}

TEST_CASE(a_service_loses_its_side_failures)
{
    for (int kind = 0; kind < TU_NKINDS; kind++) {
        vf_engine *e = tu_engine(&tu_kinds[kind]);
        size_t most = 0;
        int iters = (int)tu_scaled(3000, 300);
        for (int i = 0; i < iters; i++) {
            vf_var x = tu_var(e), y = tu_var(e), z = tu_var(e);
            char a_name[32], b_name[32];
            snprintf(a_name, sizeof a_name, "a %d", i);
            snprintf(b_name, sizeof b_name, "b %d", i);
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = fails_named,
                                                .arg = a_name,
                                                .arg_size = sizeof a_name,
                                                .writes = tu_list(&x, 1)}));
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = fails_named,
                                                .arg = b_name,
                                                .arg_size = sizeof b_name,
                                                .writes = tu_list(&y, 1)}));
            vf_var xy[2] = {x, y};
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nothing,
                                                .reads = tu_list(xy, 2),
                                                .writes = tu_list(&z, 1)}));
            vf_error err;
            CHECK_ERR(vf_var_wait(e, z, &err), VF_EOPFAILED);
            CHECK(strcmp(err.message, a_name) == 0); /* the first's */
            CHECK_OK(vf_var_destroy(e, x, NULL, NULL));
            CHECK_OK(vf_var_destroy(e, y, NULL, NULL));
            CHECK_OK(vf_var_destroy(e, z, NULL, NULL));
            size_t n = vf__failure_log_count(&e->failures);
            if (n > most)
                most = n;
        }
        /* What a look leaves (the first step's b, and the last steps'
         * whose deletes have not run yet) and as many again. */
        if (most > 2 * CLAIMED_BOUND)
            CHECK_REPORT_("%s: the log listed %zu failures at once",
                          tu_kinds[kind].name, most);
        vf_error err;
        CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
        CHECK(strcmp(err.message, "b 0") == 0);
        CHECK_OK(vf_engine_wait_all(e, NULL)); /* nothing left to report */
        tu_finish_engine(e);
    }
}

TEST_CASE(a_report_lets_the_next_look_come_sooner)
{
    vf__failure_log log;
    REQUIRE(vf__failure_log_init(&log) == 0);
    uint64_t place = 1;
    for (; place <= 1000; place++) /* a burst nobody waits for */
        vf__failure_unref(
            vf__failure_log_record(&log, 7, "burst", "", place, NULL));
    vf_error err;
    CHECK(report_at(&log, place - 1, &err)); /* wait_all's */
    CHECK_EQ(vf__failure_log_count(&log), 0u);
    size_t most = 0;
    for (uint64_t end = place + 1000; place < end; place++) {
        vf__failure *f = vf__failure_log_record(&log, 7, "fails", "", place,
                                                NULL);
        REQUIRE(f != NULL);
        CHECK(vf__failure_claim(f, top_level_wait(place)));
        vf__failure_unref(f);
        size_t n = vf__failure_log_count(&log);
        if (n > most)
            most = n;
    }
    if (most > CLAIMED_BOUND)
        CHECK_REPORT_("after the report, the log listed %zu claimed records",
                      most);
    vf__failure_log_destroy(&log);
}

/* A record made with malloc failing: from the reserve while it lasts. */
static vf__failure *record_without_memory(vf__failure_log *log, uint64_t place)
{
    vf__testing_fail_alloc(1);
    vf__failure *f = vf__failure_log_record(log, 7, "no memory", "", place,
                                            NULL);
    vf__testing_fail_alloc(0);
    return f;
}

TEST_CASE(no_memory_joins_an_unreported_failure)
{
    vf__failure_log log;
    REQUIRE(vf__failure_log_init(&log) == 0);
    vf__failure *unreported = vf__failure_log_record(&log, 7, "unreported", "",
                                                     1, NULL);
    REQUIRE(unreported != NULL);
    /* The reserve's records, each reported by a wait and kept (by the
     * vars that hold them, in an engine): none goes back to the reserve. */
    vf__failure *held[VF__FAILURE_RESERVE];
    for (int i = 0; i < VF__FAILURE_RESERVE; i++) {
        held[i] = record_without_memory(&log, 2 + (uint64_t)i);
        REQUIRE(held[i] != NULL);
        CHECK(vf__failure_claim(held[i], top_level_wait(2 + (uint64_t)i)));
    }
    vf__failure *joined = record_without_memory(&log, 10);
    CHECK(joined == unreported); /* was held[3], reported already */
    if (joined != NULL)
        CHECK(!vf__failure_claimed(joined));
    vf__failure_unref(joined);
    /* Every listed failure reported: the new one is lost, NULL. */
    CHECK(vf__failure_claim(unreported, top_level_wait(20)));
    CHECK(record_without_memory(&log, 21) == NULL);
    vf__failure_unref(unreported);
    for (int i = 0; i < VF__FAILURE_RESERVE; i++)
        vf__failure_unref(held[i]);
    vf__failure_log_destroy(&log);
}

TEST_MAIN("test_failure_log", 120)
