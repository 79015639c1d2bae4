/*
 * test_version: the var version counter (rule 8), on every engine kind.
 *
 * A new var is at version 0; 10 reads leave it at 0; 10 writes bring it to
 * 10; an op that reads and writes it counts once; a write skipped because
 * an input failed does not count; a read-only op that fails does not bump
 * it; after vf_var_destroy the version call returns VF_ESTALE.
 */
#include "runner.h"

static int fail(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 3;
}

TEST_KIND_CASE(version_counter, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e), w = tu_var(e), x = tu_var(e);
    uint64_t ver = 99;

    CHECK_OK(vf_var_version(e, v, &ver));
    CHECK_EQ(ver, 0);
    for (int i = 0; i < 10; i++)
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .reads = VF_VARS(v)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_var_version(e, v, &ver));
    CHECK_EQ(ver, 0);

    for (int i = 0; i < 10; i++)
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = VF_VARS(v)}));
    CHECK_OK(vf_var_wait(e, v, NULL));
    CHECK_OK(vf_var_version(e, v, &ver));
    CHECK_EQ(ver, 10);

    /* Read and written by one op: one write. */
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = tu_nop, .reads = VF_VARS(v), .writes = VF_VARS(v)}));
    CHECK_OK(vf_var_wait(e, v, NULL));
    CHECK_OK(vf_var_version(e, v, &ver));
    CHECK_EQ(ver, 11);

    /* Reads of w around writes of another var do not touch w. */
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = tu_nop, .reads = VF_VARS(w), .writes = VF_VARS(v)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_var_version(e, w, &ver));
    CHECK_EQ(ver, 0);
    CHECK_OK(vf_var_version(e, v, &ver));
    CHECK_EQ(ver, 12);

    /* A failing op that only reads w leaves w's version alone; a write
     * skipped because its input x failed does not count on w. */
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = fail, .reads = VF_VARS(w), .name = "fail-reader"}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = fail, .writes = VF_VARS(x), .name = "fail-x"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                        .reads = VF_VARS(x),
                                        .writes = VF_VARS(w),
                                        .name = "skipped"}));
    CHECK_ERR(vf_var_wait(e, w, NULL), VF_EOPFAILED);
    CHECK_OK(vf_var_version(e, w, &ver));
    CHECK_EQ(ver, 0);
    (void)vf_engine_wait_all(e, NULL); /* clear whatever is left */

    CHECK_OK(vf_var_destroy(e, v, NULL, NULL));
    CHECK_ERR(vf_var_version(e, v, &ver), VF_ESTALE);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_ERR(vf_var_version(e, v, &ver), VF_ESTALE);
    CHECK_OK(vf_engine_destroy(e));
}

TEST_MAIN("test_version", 60)
