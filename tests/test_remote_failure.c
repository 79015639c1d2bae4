/*
 * test_remote_failure: the three calls libvarflow-mpi needs from the core,
 * each on its own terms.
 *
 * vf_completion_fail, on every engine kind:
 * - completed later by a foreign thread (held on a gate until the test has
 *   given a broken engine every chance to run a dependent op early): the
 *   async op's `done` gets VF_ESKIPPED, a dependent sync op and a
 *   dependent async op are skipped (never started, `done` VF_ESKIPPED), a
 *   dependent no_skip op runs after the completion and sees the cause
 *   through vf_run_input_failure, vf_var_wait reports the cause exactly
 *   (code, op name, message; the caller's struct is copied, not kept) and
 *   the chain once; vf_engine_stats counts the op as skipped, not failed;
 *   the var's version is not bumped; a second vf_completion_fail or a
 *   vf_completion_finish is refused with VF_EALREADY and changes nothing;
 * - completed inline with a cause of the longest op name and message a
 *   vf_error holds: vf_engine_wait_all reports it byte for byte;
 * - a NULL cause or one whose code is 0 is refused with VF_EINVAL (the
 *   detail names the call) and leaves the completion usable: a later
 *   vf_completion_finish(done, 0) finishes the op normally (inline and from
 * another thread), after which vf_completion_fail gets VF_EALREADY.
 *
 * vf_run_input_failure, on every engine kind:
 * - a no_skip op reading a var a failed op wrote sees 1 and that op's code,
 *   name and message (out may be NULL); one reading a var the failure
 *   reached through a skipped op sees it too; one on an unrelated var, and
 *   a plain op on clean vars, see 0; an async no_skip op's body sees the
 *   same (1 on the failed var, 0 on an unrelated one); after vf_engine_wait_all
 *   (and, for another failure, vf_var_wait) reported it, a new no_skip op
 *   on the var sees 0; VF_EINVAL for NULL run;
 * - in a bulk (pooled engine, bulk size 8, the stats prove the ops were
 *   fused): a no_skip op batched with a failing op sees 0 when it touches
 *   another var and 1 when it reads the failed one, whether the failure
 *   came from an op of the batch or from before it.
 *
 * vf_error_set_detail: returns its code, vf_error_detail() reads the
 * formatted text (a long one cut to a prefix, NUL terminated), a NULL
 * format gives "", the detail itself may be an argument (prefixed as
 * asked), and the detail is per thread: two threads setting
 * theirs, interleaved, each read their own; a fresh thread reads "".
 */
#include "runner.h"

#include "rec.h"

#define NONE ((vf_var_list){NULL, 0})

/* The wait must report exactly `want` (code, op name, message). */
static void check_error_is(const vf_error *got, const vf_error *want)
{
    CHECK_EQ(got->code, want->code);
    if (strncmp(got->op_name, want->op_name, sizeof got->op_name) != 0)
        CHECK_REPORT_("op_name '%.63s' != '%.63s'", got->op_name,
                      want->op_name);
    if (strncmp(got->message, want->message, sizeof got->message) != 0)
        CHECK_REPORT_("message '%.255s' != '%.255s'", got->message,
                      want->message);
}

static vf_error make_error(int code, const char *op_name, const char *message)
{
    vf_error e;
    memset(&e, 0, sizeof e);
    e.code = code;
    snprintf(e.op_name, sizeof e.op_name, "%s", op_name);
    snprintf(e.message, sizeof e.message, "%s", message);
    return e;
}

/* ------------------------------------------------------------ ops */

/* A rec op (rec.h) ran once with `status`, or was skipped. */
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

/* An op (sync or async, usually no_skip) that asks vf_run_input_failure
 * what its inputs carry. */
typedef struct probe {
    bool null_out; /* pass out = NULL */
    tu_gate *gate; /* record whether it was open when the op ran */
    int rc;
    vf_error err;
    bool gate_was_open;
    atomic_int ran, done, status;
} probe;

static void probe_init(probe *p)
{
    memset(p, 0, sizeof *p);
    p->rc = 12345;
    atomic_init(&p->status, 12345);
}

static void probe_look(vf_run *run, probe *p)
{
    memset(&p->err, 0x5a, sizeof p->err);
    p->rc = vf_run_input_failure(run, p->null_out ? NULL : &p->err);
    if (p->gate)
        p->gate_was_open = tu_gate_is_open(p->gate);
    atomic_fetch_add(&p->ran, 1); /* publishes the above */
}

static int probe_fn(vf_run *run, void *arg)
{
    probe_look(run, arg);
    return 0;
}

static void probe_async(vf_run *run, void *arg, vf_completion done)
{
    probe_look(run, arg);
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

static void probe_done(void *arg, int status)
{
    probe *p = arg;
    atomic_store(&p->status, status);
    atomic_fetch_add(&p->done, 1);
}

static void push_probe(vf_engine *e, probe *p, vf_var_list reads,
                       vf_var_list writes, bool no_skip, bool async)
{
    vf_op op = {.arg = p,
                .done = probe_done,
                .reads = reads,
                .writes = writes,
                .no_skip = no_skip,
                .name = "probe"};
    if (async)
        op.async_fn = probe_async;
    else
        op.fn = probe_fn;
    CHECK_OK(vf_engine_push(e, &op));
}

/* The probe ran once, ok, and saw `want_rc` (and, for 1, `want`). */
#define CHECK_PROBE(p, want_rc, want)                                          \
    do {                                                                       \
        CHECK_EQ(atomic_load(&(p)->ran), 1);                                   \
        CHECK_EQ(atomic_load(&(p)->done), 1);                                  \
        CHECK_EQ(atomic_load(&(p)->status), 0);                                \
        CHECK_EQ((p)->rc, (want_rc));                                          \
        if ((p)->rc == 1 && (want) != NULL && !(p)->null_out)                  \
            check_error_is(&(p)->err, (want));                                 \
    } while (0)

/* ------------------------------------------------------------ remote op */

/* An async op finished by vf_completion_fail (and friends): `act` runs in
 * the async fn (inline) or on a thread of its own once `gate` opens. */
typedef struct remote remote;
typedef void (*remote_act)(remote *r);

struct remote {
    remote_act act;
    bool inline_act;
    tu_gate *gate; /* the thread waits for it (may be NULL) */
    vf_error cause;
    vf_completion done;
    pthread_t th;
    int rc[4];
    char detail[2][256];
    atomic_int started, acted, done_calls, done_status;
};

static void remote_init(remote *r, remote_act act, bool inline_act,
                        tu_gate *gate, const vf_error *cause)
{
    memset(r, 0, sizeof *r);
    r->act = act;
    r->inline_act = inline_act;
    r->gate = gate;
    if (cause)
        r->cause = *cause;
    for (int i = 0; i < 4; i++)
        r->rc[i] = 12345;
    atomic_init(&r->done_status, 12345);
}

static void *remote_thread(void *arg)
{
    remote *r = arg;
    if (r->gate)
        CHECK(tu_gate_wait(r->gate, TU_TIMEOUT));
    r->act(r);
    atomic_fetch_add(&r->acted, 1); /* publishes rc[] and detail[] */
    return NULL;
}

static void remote_start(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    remote *r = arg;
    r->done = done;
    atomic_fetch_add(&r->started, 1);
    if (r->inline_act) {
        r->act(r);
        atomic_fetch_add(&r->acted, 1); /* publishes rc[] and detail[] */
    } else {
        r->th = tu_thread_start(remote_thread, r);
    }
}

static void remote_done(void *arg, int status)
{
    remote *r = arg;
    atomic_store(&r->done_status, status);
    atomic_fetch_add(&r->done_calls, 1);
}

static void push_remote(vf_engine *e, remote *r, vf_var_list reads,
                        vf_var_list writes, const char *name)
{
    CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = remote_start,
                                        .arg = r,
                                        .done = remote_done,
                                        .reads = reads,
                                        .writes = writes,
                                        .name = name}));
}

/* Fail with the cause, then try every way to use the completion again.
 * The cause is overwritten right after the call: the engine must have
 * copied it. */
static void act_fail_then_reuse(remote *r)
{
    r->rc[0] = vf_completion_fail(r->done, &r->cause);
    memset(&r->cause, 'X', sizeof r->cause);
    r->cause.code = 99;
    r->cause.op_name[sizeof r->cause.op_name - 1] = '\0';
    r->cause.message[sizeof r->cause.message - 1] = '\0';
    r->rc[1] = vf_completion_fail(r->done, &r->cause);
    r->rc[2] = vf_completion_finish(r->done, 0, NULL);
    r->rc[3] = vf_completion_finish(r->done, 7, "late");
}

/* Two bad causes (refused), then a normal completion, then a late one. */
static void act_bad_then_ok(remote *r)
{
    r->rc[0] = vf_completion_fail(r->done, NULL);
    snprintf(r->detail[0], sizeof r->detail[0], "%s", vf_error_detail());
    vf_error zero = make_error(0, "zero", "code 0 is no failure");
    r->rc[1] = vf_completion_fail(r->done, &zero);
    snprintf(r->detail[1], sizeof r->detail[1], "%s", vf_error_detail());
    r->rc[2] = vf_completion_finish(r->done, 0, NULL);
    r->rc[3] = vf_completion_fail(r->done, &r->cause);
}

/* Completed later by a foreign thread; dependents skipped; wait_var
 * reports the cause; stats; reuse refused. */
TEST_KIND_CASE(complete_failed_later, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), z = tu_var(e);
    tu_gate gate;
    tu_gate_init(&gate);
    const vf_error cause = make_error(-4242, "remote-op@rank3",
                                      "the buffer on rank 3 was poisoned");
    remote r;
    remote_init(&r, act_fail_then_reuse, false, &gate, &cause);
    push_remote(e, &r, NONE, VF_VARS(x), "recv");
    rec s;
    rec_init(&s, 0, NULL);
    push_rec(e, &s, VF_VARS(x), VF_VARS(y), "S", false);
    probe n;
    probe_init(&n);
    n.gate = &gate;
    push_probe(e, &n, VF_VARS(x), NONE, true, false);
    remote as;
    remote_init(&as, act_fail_then_reuse, true, NULL, &cause);
    push_remote(e, &as, VF_VARS(y), VF_VARS(z), "async-dependent");

    REQUIRE(tu_wait_flag(&r.started, 1, TU_TIMEOUT));
    /* Give a broken engine every chance to release x early. */
    for (int i = 0; i < 100; i++) {
        sched_yield();
        tu_spin_us(20);
    }
    CHECK_EQ(atomic_load(&n.ran), 0);
    CHECK_EQ(atomic_load(&s.done), 0);
    CHECK_EQ(atomic_load(&r.done_calls), 0);
    tu_gate_open(&gate);
    /* n only reads x, so the wait below need not wait for it, and once a
     * wait reported the failure n would rightly see none. */
    REQUIRE(tu_wait_flag(&n.ran, 1, TU_TIMEOUT));

    vf_error err;
    memset(&err, 0x5a, sizeof err);
    CHECK_ERR(vf_var_wait(e, z, &err), VF_EOPFAILED);
    check_error_is(&err, &cause);
    /* One chain, reported once. */
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_OK(vf_var_wait(e, y, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_thread_join(r.th);
    CHECK_EQ(atomic_load(&r.acted), 1);
    CHECK_EQ(r.rc[0], 0);
    CHECK_EQ(r.rc[1], VF_EALREADY);
    CHECK_EQ(r.rc[2], VF_EALREADY);
    CHECK_EQ(r.rc[3], VF_EALREADY);
    CHECK_EQ(atomic_load(&r.done_calls), 1);
    CHECK_EQ(atomic_load(&r.done_status), VF_ESKIPPED);
    expect_skipped(&s);
    CHECK_EQ(atomic_load(&as.started), 0);
    CHECK_EQ(atomic_load(&as.done_calls), 1);
    CHECK_EQ(atomic_load(&as.done_status), VF_ESKIPPED);
    CHECK_PROBE(&n, 1, &cause);
    CHECK(n.gate_was_open);

    vf_stats st;
    memset(&st, 0xff, sizeof st);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.completed, 4);
    CHECK_EQ(st.ran, 1); /* the probe */
    CHECK_EQ(st.failed, 0);
    CHECK_EQ(st.skipped, 3); /* recv, S, async-dependent */
    CHECK_EQ(st.pending, 0);
    uint64_t ver = 77;
    CHECK_OK(vf_var_version(e, x, &ver));
    CHECK_EQ(ver, 0); /* a skipped write does not count */

    /* Reported: x is usable again. */
    rec again;
    rec_init(&again, 0, NULL);
    push_rec(e, &again, NONE, VF_VARS(x), "again", false);
    CHECK_OK(vf_var_wait(e, x, NULL));
    expect_ran(&again, 0);
    tu_finish_engine(e);
    tu_gate_destroy(&gate);
}

/* Completed inline with the longest name and message; wait_all reports
 * them byte for byte, once. */
TEST_KIND_CASE(complete_failed_inline, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    vf_error cause;
    memset(&cause, 0, sizeof cause);
    cause.code = 31337;
    /* Full arrays, no terminator: the engine must stop at their ends. */
    for (size_t i = 0; i < sizeof cause.op_name; i++)
        cause.op_name[i] = (char)('A' + i % 26);
    for (size_t i = 0; i < sizeof cause.message; i++)
        cause.message[i] = (char)('a' + (i * 7) % 26);
    vf_error want = cause; /* what a wait reports: the longest prefixes */
    want.op_name[sizeof want.op_name - 1] = '\0';
    want.message[sizeof want.message - 1] = '\0';
    remote r;
    remote_init(&r, act_fail_then_reuse, true, NULL, &cause);
    push_remote(e, &r, NONE, VF_VARS(x), "recv-inline");
    rec s;
    rec_init(&s, 0, NULL);
    push_rec(e, &s, VF_VARS(x), VF_VARS(y), "S", false);
    vf_error err;
    memset(&err, 0x5a, sizeof err);
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    check_error_is(&err, &want);
    CHECK_EQ(strnlen(err.op_name, sizeof err.op_name), 63);
    CHECK_EQ(strnlen(err.message, sizeof err.message), 255);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_var_wait(e, y, NULL));
    /* The async fn may still be returning from its calls. */
    REQUIRE(tu_wait_flag(&r.acted, 1, TU_TIMEOUT));
    CHECK_EQ(r.rc[0], 0);
    CHECK_EQ(r.rc[1], VF_EALREADY);
    CHECK_EQ(r.rc[2], VF_EALREADY);
    CHECK_EQ(atomic_load(&r.done_status), VF_ESKIPPED);
    expect_skipped(&s);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.skipped, 2);
    CHECK_EQ(st.failed, 0);
    tu_finish_engine(e);
}

/* A cause without an op name: the waits name the op that failed this way
 * (an unnamed one by its label, op #<place>): the failure log named even a
 * named op "op #N" (found by a user tester). A wait's detail with no
 * message ends at the code, with no dangling ": ". */
static void act_fail(remote *r)
{
    r->rc[0] = vf_completion_fail(r->done, &r->cause);
}

TEST_KIND_CASE(cause_without_an_op_name, k)
{
    for (int named = 0; named < 2; named++) {
        check_context_ = named ? "named" : "unnamed";
        vf_engine *e = tu_engine(k);
        vf_var x = tu_var(e);
        vf_error cause = make_error(-7, "", "");
        remote r;
        remote_init(&r, act_fail, true, NULL, &cause);
        push_remote(e, &r, NONE, VF_VARS(x), named ? "recv-named" : NULL);
        vf_error err;
        memset(&err, 0, sizeof err);
        CHECK_ERR(vf_var_wait(e, x, &err), VF_EOPFAILED);
        CHECK_EQ(err.code, -7);
        if (named)
            CHECK(strcmp(err.op_name, "recv-named") == 0);
        else
            CHECK(strcmp(err.op_name, "op #1") == 0);
        const char *d = vf_error_detail();
        size_t n = strlen(d);
        if (n < 4 || strcmp(d + n - 4, "(-7)") != 0)
            CHECK_REPORT_("detail without a message: '%s'", d);
        REQUIRE(tu_wait_flag(&r.acted, 1, TU_TIMEOUT));
        CHECK_OK(r.rc[0]);
        tu_finish_engine(e);
    }
}

/* VF_EINVAL for a bad cause leaves the completion usable. */
static void complete_failed_einval(const tu_kind *k, bool inline_act)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    const vf_error cause = make_error(-5, "never", "must not be recorded");
    remote r;
    remote_init(&r, act_bad_then_ok, inline_act, NULL, &cause);
    push_remote(e, &r, NONE, VF_VARS(x), "recv");
    rec s;
    rec_init(&s, 0, NULL);
    push_rec(e, &s, VF_VARS(x), VF_VARS(y), "S", false);
    CHECK_OK(vf_var_wait(e, y, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    REQUIRE(tu_wait_flag(&r.acted, 1, TU_TIMEOUT));
    if (!inline_act)
        tu_thread_join(r.th);
    CHECK_EQ(r.rc[0], VF_EINVAL);
    CHECK_EQ(r.rc[1], VF_EINVAL);
    CHECK_EQ(r.rc[2], 0);
    CHECK_EQ(r.rc[3], VF_EALREADY);
    for (int i = 0; i < 2; i++)
        if (strncmp(r.detail[i], "vf_completion_fail", 18) != 0)
            CHECK_REPORT_("detail %d '%s' does not name vf_completion_fail", i,
                          r.detail[i]);
    CHECK_EQ(atomic_load(&r.done_calls), 1);
    CHECK_EQ(atomic_load(&r.done_status), 0);
    expect_ran(&s, 0);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.ran, 2);
    CHECK_EQ(st.skipped, 0);
    CHECK_EQ(st.failed, 0);
    uint64_t ver = 77;
    CHECK_OK(vf_var_version(e, x, &ver));
    CHECK_EQ(ver, 1);
    tu_finish_engine(e);
}

TEST_KIND_CASE(complete_failed_einval, k)
{
    complete_failed_einval(k, true);
    complete_failed_einval(k, false);
}

/* ------------------------------------------------------------ input failure */

TEST_KIND_CASE(input_failure, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e), w = tu_var(e), u = tu_var(e), o = tu_var(e);
    const vf_error want = make_error(5, "F", "bad input 17");
    rec f, s;
    rec_init(&f, 5, "bad input 17");
    rec_init(&s, 0, NULL);
    push_rec(e, &f, NONE, VF_VARS(v), "F", false);
    push_rec(e, &s, VF_VARS(v), VF_VARS(w), "S",
             false); /* skipped: w gets it */
    probe on_v, on_v_null, on_w, on_u, plain, async_v, async_u;
    probe_init(&on_v);
    probe_init(&on_v_null);
    on_v_null.null_out = true;
    probe_init(&on_w);
    probe_init(&on_u);
    probe_init(&plain);
    probe_init(&async_v);
    probe_init(&async_u);
    push_probe(e, &on_v, VF_VARS(v), VF_VARS(o), true, false);
    push_probe(e, &on_v_null, VF_VARS(v), NONE, true, false);
    push_probe(e, &on_w, VF_VARS(w), NONE, true, false);
    push_probe(e, &on_u, VF_VARS(u), NONE, true, false);
    push_probe(e, &plain, VF_VARS(u), NONE, false, false);
    push_probe(e, &async_v, VF_VARS(v), NONE, true, true);
    push_probe(e, &async_u, VF_VARS(u), NONE, true, true);
    vf_error err;
    memset(&err, 0x5a, sizeof err);
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    check_error_is(&err, &want);
    expect_ran(&f, 5);
    expect_skipped(&s);
    CHECK_PROBE(&on_v, 1, &want);
    CHECK_PROBE(&on_v_null, 1, NULL);
    CHECK_PROBE(&on_w, 1, &want);
    CHECK_PROBE(&on_u, 0, NULL);
    CHECK_PROBE(&plain, 0, NULL);
    CHECK_PROBE(&async_v, 1, &want);
    CHECK_PROBE(&async_u, 0, NULL);

    /* Reported by wait_all: no longer active. */
    probe after_v, after_w;
    probe_init(&after_v);
    probe_init(&after_w);
    push_probe(e, &after_v, VF_VARS(v), NONE, true, false);
    push_probe(e, &after_w, VF_VARS(w), NONE, true, true);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_PROBE(&after_v, 0, NULL);
    CHECK_PROBE(&after_w, 0, NULL);

    /* Reported by wait_var: likewise. */
    rec g;
    rec_init(&g, -9, "second");
    push_rec(e, &g, NONE, VF_VARS(v), "G", false);
    probe before;
    probe_init(&before);
    push_probe(e, &before, VF_VARS(v), NONE, true, false);
    const vf_error want_g = make_error(-9, "G", "second");
    /* It only reads v: the wait would not wait for it. */
    REQUIRE(tu_wait_flag(&before.ran, 1, TU_TIMEOUT));
    memset(&err, 0x5a, sizeof err);
    CHECK_ERR(vf_var_wait(e, v, &err), VF_EOPFAILED);
    check_error_is(&err, &want_g);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_PROBE(&before, 1, &want_g);
    probe reported;
    probe_init(&reported);
    push_probe(e, &reported, VF_VARS(v), NONE, true, false);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_PROBE(&reported, 0, NULL);

    CHECK_ERR(vf_run_input_failure(NULL, &err), VF_EINVAL);
    CHECK_ERR(vf_run_input_failure(NULL, NULL), VF_EINVAL);
    tu_finish_engine(e);
}

/* In a bulk, only the item's own vars count. */
TEST_CASE(input_failure_bulk)
{
    const tu_kind k = {.name = "pooled/2 bulk",
                       .cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2},
                       .threaded = true,
                       .workers = 2};
    check_context_ = k.name;
    vf_engine *e = tu_engine(&k);
    vf_var a = tu_var(e), b = tu_var(e), c = tu_var(e);
    const vf_error want = make_error(-42, "fails in batch", "batched boom");

    /* The failing op is in the batch. */
    CHECK_EQ(vf_bulk_set_size(e, 8), 0);
    rec f;
    rec_init(&f, -42, "batched boom");
    probe on_b, on_a, on_a_null, on_b_plain;
    probe_init(&on_b);
    probe_init(&on_a);
    probe_init(&on_a_null);
    on_a_null.null_out = true;
    probe_init(&on_b_plain);
    push_rec(e, &f, NONE, VF_VARS(a), "fails in batch", false);
    push_probe(e, &on_b, VF_VARS(b), VF_VARS(c), true, false);
    push_probe(e, &on_a, VF_VARS(a), NONE, true, false);
    push_probe(e, &on_a_null, VF_VARS(a), NONE, true, false);
    push_probe(e, &on_b_plain, VF_VARS(b), NONE, false, false);
    vf_error err;
    memset(&err, 0x5a, sizeof err);
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    check_error_is(&err, &want);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.bulks, 1); /* all five went into one fused op */
    CHECK_EQ(st.bulked, 5);
    expect_ran(&f, -42);
    CHECK_PROBE(&on_b, 0, NULL);
    CHECK_PROBE(&on_a, 1, &want);
    CHECK_PROBE(&on_a_null, 1, NULL);
    CHECK_PROBE(&on_b_plain, 0, NULL);

    /* The failure comes from before the batch (a lone op). */
    CHECK_EQ(vf_bulk_set_size(e, 0), 8);
    rec g;
    rec_init(&g, 6, "before the batch");
    push_rec(e, &g, NONE, VF_VARS(a), "G", false);
    const vf_error want_g = make_error(6, "G", "before the batch");
    CHECK_EQ(vf_bulk_set_size(e, 8), 0);
    probe b1, a1, b2;
    probe_init(&b1);
    probe_init(&a1);
    probe_init(&b2);
    push_probe(e, &b1, VF_VARS(b), NONE, true, false);
    push_probe(e, &a1, VF_VARS(a), VF_VARS(c), true, false);
    push_probe(e, &b2, NONE, VF_VARS(b), true, false);
    memset(&err, 0x5a, sizeof err);
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    check_error_is(&err, &want_g);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.bulks, 2);
    CHECK_EQ(st.bulked, 8);
    expect_ran(&g, 6);
    CHECK_PROBE(&b1, 0, NULL);
    CHECK_PROBE(&a1, 1, &want_g);
    CHECK_PROBE(&b2, 0, NULL);

    /* Reported: a batched no_skip op on a sees nothing. */
    probe a2;
    probe_init(&a2);
    push_probe(e, &a2, VF_VARS(a), NONE, true, false);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_PROBE(&a2, 0, NULL);
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.bulks, 3);
    tu_finish_engine(e);
    check_context_ = NULL;
}

/* ------------------------------------------------------------ detail */

typedef struct detail_ctx {
    tu_gate set, checked;
    int rc;
    char initial[256], mine[256], later[256];
} detail_ctx;

static void *detail_thread(void *arg)
{
    detail_ctx *c = arg;
    snprintf(c->initial, sizeof c->initial, "%s", vf_error_detail());
    c->rc = vf_error_set_detail(VF_EAGAIN, "thread says %d", 2);
    snprintf(c->mine, sizeof c->mine, "%s", vf_error_detail());
    tu_gate_open(&c->set);
    /* The main thread sets its own detail meanwhile. */
    CHECK(tu_gate_wait(&c->checked, TU_TIMEOUT));
    snprintf(c->later, sizeof c->later, "%s", vf_error_detail());
    return NULL;
}

TEST_CASE(error_detail)
{
    check_context_ = "vf_error_set_detail";
    CHECK_EQ(vf_error_set_detail(VF_EINVAL, "vf_mpi_push: %s %d of %s", "rank",
                                 3, "4"),
             VF_EINVAL);
    CHECK(strcmp(vf_error_detail(), "vf_mpi_push: rank 3 of 4") == 0);
    CHECK_EQ(vf_error_set_detail(-1000, "%s", "any code"), -1000);
    CHECK(strcmp(vf_error_detail(), "any code") == 0);
    CHECK_EQ(vf_error_set_detail(0, "zero %c", 'z'), 0);
    CHECK(strcmp(vf_error_detail(), "zero z") == 0);

    /* NULL format: empty. */
    const char *volatile no_fmt = NULL;
    CHECK_EQ(vf_error_set_detail(VF_ENOMEM, no_fmt), VF_ENOMEM);
    CHECK(strcmp(vf_error_detail(), "") == 0);

    /* Longer than the buffer: a prefix, terminated. */
    char big[1000];
    for (size_t i = 0; i + 1 < sizeof big; i++)
        big[i] = (char)('0' + i % 10);
    big[sizeof big - 1] = '\0';
    CHECK_EQ(vf_error_set_detail(VF_EINVAL, "%s", big), VF_EINVAL);
    const char *d = vf_error_detail();
    size_t n = strlen(d);
    CHECK(n > 0 && n < sizeof big - 1);
    CHECK(strncmp(d, big, n) == 0);

    /* The detail itself as an argument: prefixed, as a library over
     * varflow passes a call's detail on (it overwrote itself as it was
     * read: "mylib: mylib: e: not an engine..."; found by a user tester). */
    vf_var unmade;
    CHECK_ERR(vf_var_create(NULL, &unmade), VF_EINVAL);
    char inner[256];
    snprintf(inner, sizeof inner, "%s", vf_error_detail());
    CHECK_EQ(
        vf_error_set_detail(VF_EINVAL, "mylib_open: %s", vf_error_detail()),
        VF_EINVAL);
    char want[300];
    snprintf(want, sizeof want, "mylib_open: %s", inner);
    CHECK(strcmp(vf_error_detail(), want) == 0);
    /* Twice over a long one: still a prefix of what was asked. */
    CHECK_EQ(vf_error_set_detail(VF_EINVAL, "%s", big), VF_EINVAL);
    CHECK_EQ(vf_error_set_detail(VF_EINVAL, "again: %s", vf_error_detail()),
             VF_EINVAL);
    d = vf_error_detail();
    CHECK(strncmp(d, "again: ", 7) == 0 && strncmp(d + 7, big, n - 7) == 0);

    /* Per thread. */
    detail_ctx c;
    memset(&c, 0, sizeof c);
    tu_gate_init(&c.set);
    tu_gate_init(&c.checked);
    CHECK_EQ(vf_error_set_detail(VF_ESTALE, "main says %d", 1), VF_ESTALE);
    pthread_t t = tu_thread_start(detail_thread, &c);
    CHECK(tu_gate_wait(&c.set, TU_TIMEOUT));
    CHECK(strcmp(vf_error_detail(), "main says 1") == 0);
    CHECK_EQ(vf_error_set_detail(VF_ESTALE, "main says %d", 3), VF_ESTALE);
    tu_gate_open(&c.checked);
    tu_thread_join(t);
    CHECK(strcmp(vf_error_detail(), "main says 3") == 0);
    CHECK(strcmp(c.initial, "") == 0);
    CHECK_EQ(c.rc, VF_EAGAIN);
    CHECK(strcmp(c.mine, "thread says 2") == 0);
    CHECK(strcmp(c.later, "thread says 2") == 0);
    tu_gate_destroy(&c.set);
    tu_gate_destroy(&c.checked);
    check_context_ = NULL;
}

TEST_MAIN("test_remote_failure", 120)
