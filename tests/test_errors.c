/*
 * test_errors: op failures (rule 9, issue point 4), on every engine kind.
 *
 * - a failure shows only when a var the failing op wrote (or an op after it
 *   passed it to) is waited on: waiting an unrelated var, or a var the
 *   failing op only read, returns 0;
 * - vf_error: code = what the fn returned, op_name = the failing op's name,
 *   message = what it set with vf_run_set_error (long texts truncated, NUL
 *   terminated: a message keeps its beginning and its end, where a chain
 *   of waits quoting the failure below names its cause);
 * - a reported failure is cleared: the next wait on that var returns 0;
 * - two failures in sequence are each reported once;
 * - an op with two outputs: the first wait returns VF_EOPFAILED, the second 0;
 * - writing to a failed var keeps it failed (the writer is skipped);
 * - skipped ops pass the failure on to what they write, their fn never runs
 *   and their `done` gets VF_ESKIPPED; the error still names the first op;
 * - no_skip ops run anyway;
 * - wait_all returns the first failure, then clears all: a second wait_all
 *   returns 0, and later ops on the failed vars run normally;
 * - a wait that returns VF_EOPFAILED says so in vf_error_detail();
 * - vf_engine_stats counts ran / failed / skipped exactly;
 * - async ops failing through vf_completion_finish (from another thread, and
 * inline) report their code and message; skipped async ops are never started.
 */
#include "runner.h"

#include "rec.h"

#define NOVARS ((vf_var_list){NULL, 0})

/* The wait must report the failure of op `name` with `code` and `msg`. */
#define CHECK_FAILURE(call, want_name, want_code, want_msg)                    \
    do {                                                                       \
        vf_error err_;                                                         \
        memset(&err_, 0x5a, sizeof err_);                                      \
        int rc2_ = (call);                                                     \
        CHECK_ERR(rc2_, VF_EOPFAILED);                                         \
        if (rc2_ == VF_EOPFAILED) {                                            \
            const char *m_ = (want_msg);                                       \
            CHECK_EQ(err_.code, (want_code));                                  \
            if (strncmp(err_.op_name, (want_name), sizeof err_.op_name) != 0)  \
                CHECK_REPORT_("op_name '%.63s' != '%s'", err_.op_name,         \
                              (want_name));                                    \
            if (m_ && strncmp(err_.message, m_, sizeof err_.message) != 0)     \
                CHECK_REPORT_("message '%.255s' != '%s'", err_.message, m_);   \
        }                                                                      \
    } while (0)
#define ERR (&err_)

static void expect_ran(rec *r, int status)
{
    CHECK_EQ(atomic_load(&r->ran), 1);
    CHECK_EQ(atomic_load(&r->done), 1);
    CHECK_EQ(atomic_load(&r->status), status);
}

static void expect_skipped(rec *r)
{
    CHECK_EQ(atomic_load(&r->ran), 0);
    CHECK_EQ(atomic_load(&r->done), 1);
    CHECK_EQ(atomic_load(&r->status), VF_ESKIPPED);
}

/* Failure shows only on dependent vars; the vf_error fields; cleared once
 * reported. */
TEST_KIND_CASE(only_dependent, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), r = tu_var(e);
    rec f, o;
    rec_init(&f, 5, "boom 42");
    rec_init(&o, 0, NULL);
    push_rec(e, &f, VF_VARS(r), VF_VARS(x), "F", false);
    push_rec(e, &o, NOVARS, VF_VARS(y), "O", false);
    CHECK_OK(vf_var_wait(e, y, NULL));
    CHECK_OK(vf_var_wait(e, r, NULL));
    CHECK_FAILURE(vf_var_wait(e, x, ERR), "F", 5, "boom 42");
    expect_ran(&f, 5);
    expect_ran(&o, 0);
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));

    /* Formatted, over-long message and name: truncated and terminated. */
    char longmsg[600], longname[200];
    memset(longmsg, 'm', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = 0;
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    rec g;
    rec_init(&g, -77, longmsg);
    push_rec(e, &g, NOVARS, VF_VARS(x), longname, false);
    vf_error err;
    memset(&err, 0x5a, sizeof err);
    CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, -77);
    CHECK(memchr(err.op_name, 0, sizeof err.op_name) != NULL);
    CHECK(memchr(err.message, 0, sizeof err.message) != NULL);
    CHECK(strncmp(err.op_name, longname, strnlen(err.op_name, 64)) == 0);
    CHECK(strnlen(err.op_name, 64) == 63);
    CHECK(strnlen(err.message, 256) == 255);
    /* An over-long name is cut between UTF-8 characters: 62 bytes and a
     * 3-byte one keep the 62 (it ended in a lone 0xE2: a user tester). */
    char utf8name[70];
    memset(utf8name, 'n', 62);
    memcpy(utf8name + 62, "\xE2\x82\xAC", 4); /* the euro sign */
    rec u;
    rec_init(&u, 5, NULL);
    push_rec(e, &u, NOVARS, VF_VARS(x), utf8name, false);
    CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
    CHECK_EQ(strnlen(err.op_name, 64), 62u);
    CHECK(strncmp(err.op_name, utf8name, 62) == 0);
    /* A detail quoting a longer one cuts it there too, its quote kept:
     * 89 bytes and the euro sign, in an op with no function. */
    char quoted[100];
    memset(quoted, 'q', 89);
    memcpy(quoted + 89, "\xE2\x82\xAC", 4);
    CHECK_ERR(vf_engine_push(e, &(vf_op){.writes = VF_VARS(y), .name = quoted}),
              VF_EINVAL);
    const char *q = strstr(vf_error_detail(), "(op \"qqq");
    CHECK(q != NULL);
    if (q != NULL)
        CHECK(strcmp(q + 5 + 89, "\")") == 0);
    /* NULL err is fine too. */
    rec h;
    rec_init(&h, 9, NULL);
    push_rec(e, &h, NOVARS, VF_VARS(y), "H", false);
    CHECK_ERR(vf_var_wait(e, y, NULL), VF_EOPFAILED);
    CHECK_OK(vf_var_wait(e, y, NULL));
    tu_finish_engine(e);
}

/* --- long messages --------------------------------------------------- */

static int fails_with(vf_run *run, void *arg)
{
    vf_run_set_error(run, "%s", (const char *)arg);
    return 3;
}

/* Whether s is whole UTF-8: no sequence cut. */
static bool whole_utf8(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p != 0;) {
        int n = *p < 0x80             ? 1
                : (*p & 0xE0) == 0xC0 ? 2
                : (*p & 0xF0) == 0xE0 ? 3
                : (*p & 0xF8) == 0xF0 ? 4
                                      : 0;
        if (n == 0)
            return false;
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return false;
        p += n;
    }
    return true;
}

/* A level of a recursion `depth` deep whose leaf fails; each level waits
 * for its child and fails with the message "level N: " + the child's. */
static int chain_level(vf_run *run, void *arg)
{
    int depth = *(int *)arg;
    if (depth == 0) {
        vf_run_set_error(run, "disk full while writing block 42");
        return 5;
    }
    int below = depth - 1;
    CHECK_OK(vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = chain_level, .arg = &below, .arg_size = sizeof below}));
    vf_error err;
    if (vf_run_wait_children(run, &err) == 0)
        return 0;
    vf_run_set_error(run, "level %d: op \"%s\" failed: %s", depth, err.op_name,
                     err.message);
    return err.code;
}

/* An operator's name too is cut between UTF-8 characters, in its runs'
 * names and failures: 62 bytes and a 2-byte one keep the 62 (cut at the
 * byte when the operator was made, they ended in a lone 0xC3: found by
 * an auditor). */
static int fail_7_checking_name(vf_run *run, void *arg)
{
    (void)arg;
    CHECK_EQ(strlen(vf_run_name(run)), 62u);
    return 7;
}

TEST_KIND_CASE(operator_names_cut_between_characters, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    char name[70];
    memset(name, 'o', 62);
    memcpy(name + 62, "\xC3\xA9tape", 7); /* e acute, then more */
    vf_operator *o = NULL;
    CHECK_OK(vf_operator_create(e,
                                &(vf_op){.fn = fail_7_checking_name,
                                         .writes = VF_VARS(x),
                                         .name = name},
                                &o));
    CHECK_OK(vf_operator_push(e, o, 0));
    vf_error err;
    CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 7);
    CHECK_EQ(strnlen(err.op_name, 64), 62u);
    CHECK(strncmp(err.op_name, name, 62) == 0);
    CHECK_OK(vf_operator_destroy(e, o));
    tu_finish_engine(e);
}

/* A message longer than vf_error.message keeps its beginning and its end,
 * " [...] " between, cut between UTF-8 characters; down a chain of waits
 * that quote the failure below (its message: a detail, vf_error_detail(),
 * keeps its beginning only), the top's message ends with the cause (cut
 * off at 255 bytes, it said "level 30: ... level 21: op" and no more:
 * found by a user tester). */
TEST_KIND_CASE(long_messages_keep_their_end, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    char text[600];
    memset(text, 'm', sizeof text - 1);
    memcpy(text, "BEGIN", 5);
    static const char cause[] = "CAUSE: disk full";
    memcpy(text + sizeof text - sizeof cause, cause, sizeof cause);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = fails_with, .arg = text, .writes = VF_VARS(x)}));
    vf_error err;
    CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
    CHECK_EQ(strnlen(err.message, sizeof err.message), 255);
    CHECK(strncmp(err.message, "BEGIN", 5) == 0);
    CHECK(strstr(err.message, " [...] ") != NULL);
    size_t len = strnlen(err.message, sizeof err.message);
    CHECK(len >= sizeof cause - 1 &&
          strcmp(err.message + len - (sizeof cause - 1), cause) == 0);

    /* Two-byte characters: none is cut. */
    char accents[601] = "";
    for (int i = 0; i < 300; i++)
        memcpy(accents + 2 * i, "\xc3\xa9", 2);
    accents[600] = 0;
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = fails_with, .arg = accents, .writes = VF_VARS(x)}));
    CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
    CHECK(strnlen(err.message, sizeof err.message) < sizeof err.message);
    CHECK(strstr(err.message, " [...] ") != NULL);
    CHECK(whole_utf8(err.message));

    /* A chain of 30 waits, each quoting the failure below. */
    int depth = 30;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = chain_level,
                                        .arg = &depth,
                                        .arg_size = sizeof depth,
                                        .writes = VF_VARS(x)}));
    CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 5);
    CHECK(strncmp(err.message, "level 30: ", 10) == 0);
    static const char leaf[] = "disk full while writing block 42";
    len = strnlen(err.message, sizeof err.message);
    if (len < sizeof leaf - 1 ||
        strcmp(err.message + len - (sizeof leaf - 1), leaf) != 0)
        CHECK_REPORT_("the chain's message: %s", err.message);
    tu_finish_engine(e);
}

/* Two failures in sequence, each reported once. */
TEST_KIND_CASE(two_in_sequence, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    rec f1, f2, f3, f4;
    rec_init(&f1, 5, "first");
    rec_init(&f2, 6, "second");
    push_rec(e, &f1, NOVARS, VF_VARS(x), "F1", false);
    CHECK_FAILURE(vf_var_wait(e, x, ERR), "F1", 5, "first");
    push_rec(e, &f2, NOVARS, VF_VARS(x), "F2", false);
    CHECK_FAILURE(vf_var_wait(e, x, ERR), "F2", 6, "second");
    expect_ran(&f2, 6);
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));

    /* Two independent failures, no wait between them. */
    rec_init(&f3, 7, "third");
    rec_init(&f4, 8, "fourth");
    push_rec(e, &f3, NOVARS, VF_VARS(x), "F3", false);
    push_rec(e, &f4, NOVARS, VF_VARS(y), "F4", false);
    CHECK_FAILURE(vf_var_wait(e, y, ERR), "F4", 8, "fourth");
    CHECK_FAILURE(vf_var_wait(e, x, ERR), "F3", 7, "third");
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_OK(vf_var_wait(e, y, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
}

/* One op, two outputs: one chain, reported once (either output first). */
TEST_KIND_CASE(two_outputs, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    rec f, g;
    rec_init(&f, 5, "two");
    push_rec(e, &f, NOVARS, VF_VARS(x, y), "F", false);
    CHECK_FAILURE(vf_var_wait(e, x, ERR), "F", 5, "two");
    CHECK_OK(vf_var_wait(e, y, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));

    rec_init(&g, 6, "two again");
    push_rec(e, &g, NOVARS, VF_VARS(x, y), "G", false);
    CHECK_FAILURE(vf_var_wait(e, y, ERR), "G", 6, "two again");
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
}

/* Writing to a failed var keeps it failed; skipped ops pass the failure on,
 * never run, and get VF_ESKIPPED; the error names the first op. */
TEST_KIND_CASE(propagation, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), z = tu_var(e);
    rec f, g, g2, h;
    rec_init(&f, 5, "root cause");
    rec_init(&g, 0, NULL);
    rec_init(&g2, 0, NULL);
    push_rec(e, &f, NOVARS, VF_VARS(x), "F", false);
    push_rec(e, &g, NOVARS, VF_VARS(x), "G-overwrite", false);
    push_rec(e, &g2, VF_VARS(x), VF_VARS(x), "G-readwrite", false);
    CHECK_FAILURE(vf_var_wait(e, x, ERR), "F", 5, "root cause");
    expect_ran(&f, 5);
    expect_skipped(&g);
    expect_skipped(&g2);
    CHECK_OK(vf_engine_wait_all(e, NULL));

    /* Chain x -> y -> z. */
    rec_init(&f, 5, "root cause");
    rec_init(&g, 0, NULL);
    rec_init(&h, 0, NULL);
    push_rec(e, &f, NOVARS, VF_VARS(x), "F", false);
    push_rec(e, &g, VF_VARS(x), VF_VARS(y), "G", false);
    push_rec(e, &h, VF_VARS(y), VF_VARS(z), "H", false);
    CHECK_FAILURE(vf_var_wait(e, z, ERR), "F", 5, "root cause");
    expect_ran(&f, 5);
    expect_skipped(&g);
    expect_skipped(&h);
    /* One chain, reported once. */
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_OK(vf_var_wait(e, y, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));

    /* Once reported, the vars are usable again. */
    rec ok;
    rec_init(&ok, 0, NULL);
    push_rec(e, &ok, VF_VARS(x, y), VF_VARS(z), "OK", false);
    CHECK_OK(vf_var_wait(e, z, NULL));
    expect_ran(&ok, 0);
    tu_finish_engine(e);
}

/* no_skip ops run even though an input failed. */
TEST_KIND_CASE(no_skip, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    rec f, n1, n2;
    rec_init(&f, 5, "fail");
    rec_init(&n1, 0, NULL);
    rec_init(&n2, 0, NULL);
    push_rec(e, &f, NOVARS, VF_VARS(x), "F", false);
    push_rec(e, &n1, VF_VARS(x), VF_VARS(y), "N1", true);
    push_rec(e, &n2, NOVARS, VF_VARS(x), "N2", true);
    CHECK_FAILURE(vf_var_wait(e, x, ERR), "F", 5, "fail");
    /* Whether N1 passed the failure on to y is not specified; the chain was
     * reported through x either way. */
    (void)vf_var_wait(e, y, NULL);
    expect_ran(&n1, 0);
    expect_ran(&n2, 0);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
}

/* wait_all: the first failure, then everything cleared. */
TEST_KIND_CASE(wait_all_first, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    rec f1, f2, o;
    rec_init(&f1, 5, "one");
    rec_init(&f2, 6, "two");
    push_rec(e, &f1, NOVARS, VF_VARS(x), "F1", false);
    push_rec(e, &f2, NOVARS, VF_VARS(y), "F2", false);
    vf_error err;
    memset(&err, 0, sizeof err);
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    bool is1 = err.code == 5 && strcmp(err.op_name, "F1") == 0 &&
               strcmp(err.message, "one") == 0;
    bool is2 = err.code == 6 && strcmp(err.op_name, "F2") == 0 &&
               strcmp(err.message, "two") == 0;
    if (!is1 && !is2)
        CHECK_REPORT_("wait_all error {%d, '%.64s', '%.256s'} is neither F1 "
                      "nor F2",
                      err.code, err.op_name, err.message);
    if (!k->threaded) /* naive: F1 failed first for sure */
        CHECK(is1);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_OK(vf_var_wait(e, y, NULL));
    rec_init(&o, 0, NULL);
    push_rec(e, &o, VF_VARS(y), VF_VARS(x), "O", false);
    CHECK_OK(vf_var_wait(e, x, NULL));
    expect_ran(&o, 0);

    /* A failure reported by wait_var is not reported again by wait_all. */
    rec_init(&f1, 5, "one");
    push_rec(e, &f1, NOVARS, VF_VARS(x), "F1", false);
    CHECK_FAILURE(vf_var_wait(e, x, ERR), "F1", 5, "one");
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
}

/* A wait that returns VF_EOPFAILED leaves, as every failing call does, its
 * own sentence in vf_error_detail(), naming the failed op: it left the one
 * of an earlier refused call there (found trying async ops as a user). */
TEST_KIND_CASE(wait_failure_detail, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e);
    rec f;
    for (int which = 0; which < 2; which++) {
        rec_init(&f, 5, "one");
        push_rec(e, &f, NOVARS, VF_VARS(x), "F1", false);
        CHECK_ERR(vf_engine_push(e, NULL), VF_EINVAL); /* an earlier detail */
        int rc = which == 0 ? vf_var_wait(e, x, NULL)
                            : vf_engine_wait_all(e, NULL);
        CHECK_ERR(rc, VF_EOPFAILED);
        const char *d = vf_error_detail();
        const char *who = which == 0 ? "vf_var_wait" : "vf_engine_wait_all";
        if (strstr(d, who) == NULL || strstr(d, "\"F1\"") == NULL ||
            strstr(d, "one") == NULL)
            CHECK_REPORT_("detail after a failed wait: %s", d);
    }
    tu_finish_engine(e);
}

/* An op that returns what vf_run_submit refused it with, having said
 * nothing itself: the wait's message is the refusal's detail (it was
 * empty, the detail ending in ": "; found by a user tester). A CPU op (no
 * stream) and a device op (no function). */
static int no_work(void *arg)
{
    (void)arg;
    return 0;
}

/* arg non-NULL: a CPU op's submit of real work; NULL: no function. */
static int submit_and_return(vf_run *run, void *arg)
{
    return vf_run_submit(run, arg != NULL ? no_work : NULL, NULL, 0);
}

TEST_KIND_CASE(submit_refusal_is_the_message, k)
{
    vf_engine *e = tu_engine(k);
    for (int device = 0; device < 2; device++) {
        check_context_ = device ? "device op" : "CPU op";
        vf_var x = tu_var(e);
        vf_op op = {.fn = submit_and_return,
                    .arg = device ? NULL : e,
                    .writes = VF_VARS(x)};
        if (device)
            op.device = (vf_device){VF_DEVICE_EMULATED, 0};
        CHECK_OK(vf_engine_push(e, &op));
        vf_error err;
        memset(&err, 0, sizeof err);
        CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
        CHECK_EQ(err.code, VF_EINVAL);
        if (strstr(err.message, "vf_run_submit: ") != NULL)
            CHECK(strstr(err.message,
                         device ? "fn is NULL" : "is not a device op") != NULL);
        else
            CHECK_REPORT_("message '%s' is not the refusal's", err.message);
        CHECK_OK(vf_engine_wait_all(e, NULL)); /* reported once */
    }
    check_context_ = NULL;
    tu_finish_engine(e);
}

/* Stats count exactly. */
TEST_KIND_CASE(stats, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), a = tu_var(e);
    rec ok[3], f, s1, s2, n;
    for (int i = 0; i < 3; i++) {
        rec_init(&ok[i], 0, NULL);
        push_rec(e, &ok[i], VF_VARS(a), NOVARS, "ok", false);
    }
    rec_init(&f, 5, NULL);
    rec_init(&s1, 0, NULL);
    rec_init(&s2, 0, NULL);
    rec_init(&n, 0, NULL);
    push_rec(e, &f, NOVARS, VF_VARS(x), "F", false);
    push_rec(e, &s1, VF_VARS(x), VF_VARS(y), "S1", false);
    push_rec(e, &s2, VF_VARS(y), NOVARS, "S2", false);
    push_rec(e, &n, VF_VARS(x), NOVARS, "N", true);
    vf_error err;
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    CHECK(strcmp(err.op_name, "F") == 0);
    vf_stats st;
    memset(&st, 0xff, sizeof st);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.completed, 7);
    CHECK_EQ(st.ran, 4);
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.skipped, 2);
    CHECK_EQ(st.pending, 0);
    expect_skipped(&s1);
    expect_skipped(&s2);
    expect_ran(&n, 0);
    tu_finish_engine(e);
}

/* ------------------------------------------------------------ async */

typedef struct async_rec {
    int status;
    const char *msg;
    const char *set_error; /* vf_run_set_error in the async fn */
    bool inline_complete;
    vf_completion done;
    pthread_t helper;
    atomic_int started;
    atomic_int done_calls;
    atomic_int done_status;
    atomic_int complete_rc;
} async_rec;

static void *async_helper(void *arg)
{
    async_rec *a = arg;
    tu_spin_us(500);
    atomic_store(&a->complete_rc,
                 vf_completion_finish(a->done, a->status, a->msg));
    return NULL;
}

static void async_start(vf_run *run, void *arg, vf_completion done)
{
    async_rec *a = arg;
    atomic_fetch_add(&a->started, 1);
    a->done = done;
    if (a->set_error)
        vf_run_set_error(run, "%s", a->set_error);
    if (a->inline_complete)
        atomic_store(&a->complete_rc,
                     vf_completion_finish(done, a->status, a->msg));
    else
        a->helper = tu_thread_start(async_helper, a);
}

static void async_done(void *arg, int status)
{
    async_rec *a = arg;
    atomic_store(&a->done_status, status);
    atomic_fetch_add(&a->done_calls, 1);
}

static void async_init(async_rec *a, int status, const char *msg, bool inl)
{
    memset(a, 0, sizeof *a);
    a->status = status;
    a->msg = msg;
    a->inline_complete = inl;
    atomic_init(&a->complete_rc, 12345);
}

TEST_KIND_CASE(async_failures, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), z = tu_var(e);
    async_rec a, b, s;
    async_init(&a, 7, "async boom", false);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = async_start,
                                        .arg = &a,
                                        .done = async_done,
                                        .writes = VF_VARS(x),
                                        .name = "async-op"}));
    /* Skipped: never started, done gets VF_ESKIPPED. */
    async_init(&s, 0, NULL, true);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = async_start,
                                        .arg = &s,
                                        .done = async_done,
                                        .reads = VF_VARS(x),
                                        .writes = VF_VARS(z),
                                        .name = "skipped"}));
    /* z gets the failure through the skipped op; x's is the same chain,
     * so it is reported once. */
    CHECK_FAILURE(vf_var_wait(e, z, ERR), "async-op", 7, "async boom");
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(atomic_load(&a.started), 1);
    CHECK_EQ(atomic_load(&a.done_calls), 1);
    CHECK_EQ(atomic_load(&a.done_status), 7);
    CHECK_EQ(atomic_load(&s.started), 0);
    CHECK_EQ(atomic_load(&s.done_calls), 1);
    CHECK_EQ(atomic_load(&s.done_status), VF_ESKIPPED);
    if (atomic_load(&a.started))
        tu_thread_join(a.helper);
    CHECK_EQ(atomic_load(&a.complete_rc), 0);

    /* Completed inline, with a NULL message. */
    async_init(&b, 8, NULL, true);
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = async_start,
                                        .arg = &b,
                                        .done = async_done,
                                        .writes = VF_VARS(y),
                                        .name = "async-inline"}));
    CHECK_FAILURE(vf_var_wait(e, y, ERR), "async-inline", 8, NULL);
    CHECK_EQ(atomic_load(&b.complete_rc), 0);
    CHECK_EQ(atomic_load(&b.done_status), 8);
    CHECK_OK(vf_engine_wait_all(e, NULL));

    /* The message set in the async fn, completed later with none. */
    async_rec c;
    async_init(&c, 9, NULL, false);
    c.set_error = "set in async fn";
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = async_start,
                                        .arg = &c,
                                        .done = async_done,
                                        .writes = VF_VARS(y),
                                        .name = "async-set-error"}));
    CHECK_FAILURE(vf_var_wait(e, y, ERR), "async-set-error", 9,
                  "set in async fn");
    if (atomic_load(&c.started))
        tu_thread_join(c.helper);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
}

/* Two naive engines, each op pushing one on the other, alternating:
 * calls nest across engines to the header's depth (32), and a call
 * deeper gets VF_ENOTSUP with a detail that says so. It was VF_ENOMEM
 * ("out of memory") at a depth of 8, a limit the header did not state
 * (found trying recursion across engines as a user). */
typedef struct alternate {
    vf_engine *engines[2];
    long depth, reached, failed_at;
    int rc;
    char detail[256];
} alternate;

static alternate alt;

static int alternate_level(vf_run *run, void *arg)
{
    (void)run;
    long d = (long)(intptr_t)arg;
    alt.reached = d;
    if (d == alt.depth)
        return 0;
    int rc = vf_engine_push(
        alt.engines[(d + 1) & 1],
        &(vf_op){.fn = alternate_level, .arg = (void *)(intptr_t)(d + 1)});
    if (rc != 0 && alt.rc == 0) {
        alt.rc = rc;
        alt.failed_at = d;
        snprintf(alt.detail, sizeof alt.detail, "%s", vf_error_detail());
    }
    return 0;
}

TEST_CASE(nesting_across_engines)
{
    for (int deep = 0; deep < 2; deep++) {
        memset(&alt, 0, sizeof alt);
        alt.depth = deep ? 40 : 31;
        for (int k = 0; k < 2; k++)
            CHECK_OK(vf_engine_create(&alt.engines[k],
                                      &(vf_config){.type = VF_ENGINE_NAIVE}));
        CHECK_OK(vf_engine_push(alt.engines[0],
                                &(vf_op){.fn = alternate_level, .arg = NULL}));
        if (!deep) {
            CHECK_EQ(alt.rc, 0);
            CHECK_EQ(alt.reached, 31);
        } else {
            CHECK_ERR(alt.rc, VF_ENOTSUP);
            CHECK_EQ(alt.failed_at, 31); /* its push is the 33rd call */
            CHECK(strstr(alt.detail, "32 calls on other engines") != NULL);
        }
        for (int k = 0; k < 2; k++)
            CHECK_OK(vf_engine_destroy(alt.engines[k]));
    }
}

/* A sync op that returns VF_ESKIPPED itself failed with that code: its
 * done gets VF_ESKIPPED, as a skipped op's does, and the stats count it
 * failed, not skipped (varflow.h, vf_sync_fn: a user asked). An op after
 * it on its var is skipped for its failure. */
static int returns_eskipped(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return VF_ESKIPPED;
}

static void note_status(void *arg, int status)
{
    *(int *)arg = status;
}

TEST_KIND_CASE(op_returning_eskipped_failed, k)
{
    check_context_ = k->name;
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    int first = 1, second = 1;
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = returns_eskipped,
                                        .done = note_status,
                                        .arg = &first,
                                        .writes = VF_VARS(v)}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                        .done = note_status,
                                        .arg = &second,
                                        .reads = VF_VARS(v)}));
    vf_error err;
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, VF_ESKIPPED);
    CHECK_EQ(first, VF_ESKIPPED);
    CHECK_EQ(second, VF_ESKIPPED);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.skipped, 1);
    tu_finish_engine(e);
    check_context_ = NULL;
}

TEST_MAIN("test_errors", 120)
