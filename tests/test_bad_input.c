/*
 * test_bad_input: every caller mistake returns a clear error and never
 * crashes; the engine stays usable afterwards (issue point 6), on every
 * engine kind.
 *
 * - NULL engine, NULL out pointers, NULL op, var lists with count > 0 and
 *   NULL vars, negative counts: VF_EINVAL;
 * - the zero handle and a made-up handle: refused (VF_EINVAL, VF_ESTALE or
 *   VF_EXDEV: the header does not pin which), never dereferenced;
 * - a var of another engine: VF_EXDEV (push reads/writes, wait, version,
 *   delete); a deleted var: VF_ESTALE, its delete pushed or run, the
 *   detail naming its list place, its id and the op;
 * - an op with neither or both of fn/async_fn: VF_EINVAL; a non-CPU device
 *   or device id: VF_ENODEV; a device copy on the CPU or an unknown
 *   property: VF_EINVAL;
 * - a failed push never calls `done` and sets a non-empty detail;
 * - push from another thread while vf_engine_destroy drains a long op:
 *   VF_ESHUTDOWN (pushes from inside the draining op still work);
 *   vf_engine_destroy from inside an op: VF_EDEADLK;
 * - vf_error_string / vf_error_name for every code and for unknown ones;
 * - vf_error_detail: "" on a thread where nothing failed, non-empty
 *   after a failure.
 */
#include "runner.h"

static atomic_int ran, done_calls;

static int nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_fetch_add(&ran, 1);
    return 0;
}

static void anop(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    (void)arg;
    atomic_fetch_add(&ran, 1);
    vf_completion_finish(done, 0, NULL);
}

static void count_done(void *arg, int status)
{
    (void)arg;
    (void)status;
    atomic_fetch_add(&done_calls, 1);
}

/* The push must fail with `code`, set a detail, and not call done. */
static void expect_push_err(vf_engine *e, vf_op op, int code, const char *what)
{
    op.done = count_done;
    int before = atomic_load(&done_calls), ran_before = atomic_load(&ran);
    int rc = vf_engine_push(e, &op);
    if (rc != code)
        CHECK_REPORT_("%s: vf_engine_push returned %s, expected %s", what,
                      vf_error_name(rc), vf_error_name(code));
    else if (*vf_error_detail() == 0)
        CHECK_REPORT_("%s: no detail message", what);
    if (rc == 0)
        (void)vf_engine_wait_all(e, NULL);
    if (atomic_load(&done_calls) != before || atomic_load(&ran) != ran_before)
        CHECK_REPORT_("%s: a refused op ran or called done", what);
}

/* A refused handle: any of the codes that mean "not a var of yours". */
static bool refused(int rc)
{
    return rc == VF_EINVAL || rc == VF_ESTALE || rc == VF_EXDEV;
}

static void usable(vf_engine *e)
{
    vf_var v = tu_var(e);
    int before = atomic_load(&ran);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = nop, .writes = VF_VARS(v)}));
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.async_fn = anop, .reads = VF_VARS(v)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&ran), before + 2);
    CHECK_OK(vf_var_destroy(e, v, NULL, NULL));
}

TEST_KIND_CASE(bad_args, k)
{
    vf_engine *e = tu_engine(k);
    vf_engine *other = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e), dead = tu_var(e);
    vf_var foreign = tu_var(other);
    vf_var zero = {0};
    vf_var made_up = {0xdeadbeefcafef00dULL};
    vf_var near = {x.id + 1000003};
    CHECK_OK(vf_var_destroy(e, dead, NULL, NULL));
    uint64_t ver;
    vf_stats st;
    vf_error err;

    /* NULL engine / out pointers. */
    CHECK_ERR(vf_engine_destroy(NULL), VF_EINVAL);
    CHECK_ERR(vf_var_create(NULL, &x), VF_EINVAL);
    CHECK_ERR(vf_var_create(e, NULL), VF_EINVAL);
    CHECK_ERR(vf_var_destroy(NULL, x, NULL, NULL), VF_EINVAL);
    CHECK_ERR(vf_var_version(NULL, x, &ver), VF_EINVAL);
    CHECK_ERR(vf_var_version(e, x, NULL), VF_EINVAL);
    CHECK_ERR(vf_engine_push(NULL, &(vf_op){.fn = nop}), VF_EINVAL);
    CHECK_ERR(vf_engine_push(e, NULL), VF_EINVAL);
    CHECK_ERR(vf_var_wait(NULL, x, &err), VF_EINVAL);
    CHECK_ERR(vf_engine_wait_all(NULL, &err), VF_EINVAL);
    CHECK_ERR(vf_engine_stats(NULL, &st), VF_EINVAL);
    CHECK_ERR(vf_engine_stats(e, NULL), VF_EINVAL);
    CHECK(*vf_error_detail() != 0);

    /* Bad lists. */
    expect_push_err(e, (vf_op){.fn = nop, .reads = {NULL, 2}}, VF_EINVAL,
                    "reads NULL/2");
    expect_push_err(e, (vf_op){.fn = nop, .writes = {NULL, 1}}, VF_EINVAL,
                    "writes NULL/1");
    expect_push_err(e, (vf_op){.fn = nop, .reads = {&x, -1}}, VF_EINVAL,
                    "reads count -1");
    expect_push_err(e, (vf_op){.fn = nop, .writes = {&x, -5}}, VF_EINVAL,
                    "writes count -5");
    /* A NULL list with count 0 is fine. */
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = nop, .reads = {NULL, 0}, .writes = {NULL, 0}}));
    CHECK_OK(vf_engine_wait_all(e, NULL));

    /* Functions. */
    expect_push_err(e, (vf_op){.writes = VF_VARS(x)}, VF_EINVAL, "no fn");
    expect_push_err(e,
                    (vf_op){.fn = nop, .async_fn = anop, .writes = VF_VARS(x)},
                    VF_EINVAL, "both fns");

    /* Devices and properties. */
    expect_push_err(e, (vf_op){.fn = nop, .device = {VF_DEVICE_CUDA, 99}},
                    VF_ENODEV, "CUDA device 99");
    expect_push_err(e, (vf_op){.fn = nop, .device = {VF_DEVICE_EMULATED, 8}},
                    VF_ENODEV, "emulated device 8");
    expect_push_err(e, (vf_op){.fn = nop, .device = {VF_DEVICE_EMULATED, -1}},
                    VF_ENODEV, "emulated device -1");
    expect_push_err(e, (vf_op){.fn = nop, .property = VF_PROP_COPY_TO_DEVICE},
                    VF_EINVAL, "copy to device, on the CPU");
    expect_push_err(e, (vf_op){.fn = nop, .property = VF_PROP_COPY_FROM_DEVICE},
                    VF_EINVAL, "copy from device, on the CPU");
    {
        vf_op op = {.fn = nop, .done = count_done, .property = (vf_property)77};
        int rc = vf_engine_push(e, &op);
        CHECK(rc == VF_EINVAL || rc == VF_ENODEV);
        vf_op op2 = {
            .fn = nop, .done = count_done, .device = {(vf_device_type)55, 0}};
        rc = vf_engine_push(e, &op2);
        CHECK(rc == VF_EINVAL || rc == VF_ENODEV);
    }

    /* Handles: zero, made up, near a real one, foreign, deleted. */
    vf_var bad[] = {zero, made_up, near};
    for (int i = 0; i < 3; i++) {
        vf_var b = bad[i];
        int rc;
        CHECK(refused(rc = vf_engine_push(
                          e, &(vf_op){.fn = nop, .reads = VF_VARS(x, b)})));
        CHECK(refused(
            rc = vf_engine_push(e, &(vf_op){.fn = nop, .writes = VF_VARS(b)})));
        CHECK(refused(rc = vf_var_wait(e, b, &err)));
        CHECK(refused(rc = vf_var_version(e, b, &ver)));
        CHECK(refused(rc = vf_var_destroy(e, b, NULL, NULL)));
        (void)rc;
    }
    expect_push_err(e, (vf_op){.fn = nop, .reads = VF_VARS(foreign)}, VF_EXDEV,
                    "foreign read");
    expect_push_err(
        e,
        (vf_op){.fn = nop, .reads = VF_VARS(x), .writes = VF_VARS(y, foreign)},
        VF_EXDEV, "foreign write");
    CHECK_ERR(vf_var_wait(e, foreign, &err), VF_EXDEV);
    /* A wait's details say what the handle is, as a push's do. */
    CHECK(strstr(vf_error_detail(), "belongs to another engine") != NULL);
    CHECK_ERR(vf_var_wait(e, (vf_var){0}, &err), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "is not a variable handle") != NULL);
    CHECK_ERR(vf_var_version(e, foreign, &ver), VF_EXDEV);
    CHECK(strstr(vf_error_detail(), "belongs to another engine") != NULL);
    /* A handle of an engine gone, or of none, is not said to be another
     * engine's (found trying made-up handles as a user). */
    vf_engine *gone;
    CHECK_OK(vf_engine_create(&gone, &(vf_config){.type = VF_ENGINE_NAIVE}));
    vf_var orphan;
    CHECK_OK(vf_var_create(gone, &orphan));
    CHECK_OK(vf_engine_destroy(gone));
    CHECK_ERR(vf_var_wait(e, orphan, &err), VF_EXDEV);
    CHECK(strstr(vf_error_detail(), "is no live engine's") != NULL);
    expect_push_err(e, (vf_op){.fn = nop, .writes = VF_VARS(orphan)}, VF_EXDEV,
                    "orphan write");
    CHECK(strstr(vf_error_detail(), "is no live engine's") != NULL);
    CHECK_ERR(vf_var_destroy(e, foreign, NULL, NULL), VF_EXDEV);
    expect_push_err(e, (vf_op){.fn = nop, .reads = VF_VARS(dead)}, VF_ESTALE,
                    "deleted read");
    expect_push_err(e, (vf_op){.fn = nop, .writes = VF_VARS(x, dead)},
                    VF_ESTALE, "deleted write");
    CHECK_ERR(vf_var_wait(e, dead, &err), VF_ESTALE);
    CHECK_ERR(vf_var_version(e, dead, &ver), VF_ESTALE);
    CHECK_ERR(vf_var_destroy(e, dead, NULL, NULL), VF_ESTALE);
    /* The foreign var is untouched and its engine fine. */
    CHECK_OK(
        vf_engine_push(other, &(vf_op){.fn = nop, .writes = VF_VARS(foreign)}));
    CHECK_OK(vf_var_wait(other, foreign, NULL));
    CHECK_OK(vf_var_version(other, foreign, &ver));
    CHECK_EQ(ver, 1);

    /* Completions that were never handed out. */
    vf_completion none = {NULL, 0};
    int rc = vf_completion_finish(none, 0, NULL);
    CHECK(rc == VF_EINVAL || rc == VF_EALREADY);

    CHECK_EQ(atomic_load(&done_calls), 0);
    usable(e);
    CHECK_OK(vf_var_version(e, x, &ver));
    CHECK_EQ(ver, 0);
    tu_finish_engine(e);
    tu_finish_engine(other);
}

/* ------------------------------------------------------------ shutdown */

typedef struct shut {
    vf_engine *e;
    tu_gate long_started, release;
    atomic_int destroy_called;
    int destroy_rc;
    int nested_rc;
    atomic_int nested_ran, pushed_ok, long_ran;
} shut;

static int nested_op(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((shut *)arg)->nested_ran, 1);
    return 0;
}

static int long_op(vf_run *run, void *arg)
{
    shut *s = arg;
    atomic_fetch_add(&s->long_ran, 1);
    tu_gate_open(&s->long_started);
    CHECK(tu_gate_wait(&s->release, TU_TIMEOUT));
    /* Destroy has begun; a push from inside an op still works. */
    s->nested_rc = vf_engine_push(vf_run_engine(run),
                                  &(vf_op){.fn = nested_op, .arg = s});
    return 0;
}

static void *destroyer(void *arg)
{
    shut *s = arg;
    atomic_store(&s->destroy_called, 1);
    s->destroy_rc = vf_engine_destroy(s->e);
    return NULL;
}

static int counted(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

TEST_KIND_CASE(shutdown_push, k)
{
    if (!k->threaded)
        return; /* the long op would run inside its own push */
    shut s;
    memset(&s, 0, sizeof s);
    tu_gate_init(&s.long_started);
    tu_gate_init(&s.release);
    s.e = tu_engine(k);
    vf_var x = tu_var(s.e);
    CHECK_OK(vf_engine_push(
        s.e, &(vf_op){.fn = long_op, .arg = &s, .writes = VF_VARS(x)}));
    CHECK(tu_gate_wait(&s.long_started, TU_TIMEOUT));
    pthread_t th = tu_thread_start(destroyer, &s);
    /* Push until destroy has begun (the long op keeps it draining). */
    double end = tu_now() + TU_TIMEOUT;
    int rc = 0, refusals = 0;
    while (tu_now() < end) {
        rc = vf_engine_push(s.e, &(vf_op){.fn = counted, .reads = VF_VARS(x)});
        if (rc == 0) {
            atomic_fetch_add(&s.pushed_ok, 1);
        } else {
            refusals++;
            break;
        }
        sched_yield();
    }
    CHECK_ERR(rc, VF_ESHUTDOWN);
    if (rc == VF_ESHUTDOWN)
        CHECK(*vf_error_detail() != 0);
    tu_gate_open(&s.release);
    tu_thread_join(th);
    CHECK_OK(s.destroy_rc);
    CHECK_EQ(refusals, 1);
    CHECK_OK(s.nested_rc);
    CHECK_EQ(atomic_load(&s.nested_ran), s.nested_rc == 0 ? 1 : 0);
    CHECK_EQ(atomic_load(&s.long_ran), 1);
    tu_gate_destroy(&s.long_started);
    tu_gate_destroy(&s.release);
}

typedef struct destroyed_inside {
    int rc;
    char detail[256];
} destroyed_inside;

static int destroy_inside(vf_run *run, void *arg)
{
    destroyed_inside *d = arg;
    d->rc = vf_engine_destroy(vf_run_engine(run));
    snprintf(d->detail, sizeof d->detail, "%s", vf_error_detail());
    return 0;
}

/* Refused as the engine's own code, on every engine kind: the pooled ones
 * said "inside op X which runs inside an op of this engine" of a top-level
 * op (the check of calls nested across engines; found by a user tester). */
TEST_KIND_CASE(destroy_from_op, k)
{
    vf_engine *e = tu_engine(k);
    destroyed_inside d = {.rc = 99};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = destroy_inside, .arg = &d}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_ERR(d.rc, VF_EDEADLK);
    if (strstr(d.detail, "the engine's own code") == NULL)
        CHECK_REPORT_("the detail: %s", d.detail);
    usable(e);
    tu_finish_engine(e);
}

/* ------------------------------------------------------------ deleted var */

static int gated(vf_run *run, void *arg)
{
    (void)run;
    CHECK(tu_gate_wait(arg, TU_TIMEOUT));
    return 0;
}

/* The detail must hold `want` (NULL: skip) and `also`. */
static void expect_detail(int rc, const char *want, const char *also,
                          const char *what)
{
    if (rc != VF_ESTALE)
        CHECK_REPORT_("%s: returned %s, expected VF_ESTALE", what,
                      vf_error_name(rc));
    const char *d = vf_error_detail();
    if ((want != NULL && strstr(d, want) == NULL) || strstr(d, also) == NULL)
        CHECK_REPORT_("%s: detail \"%s\" lacks \"%s\" or \"%s\"", what, d,
                      want ? want : "", also);
}

/*
 * A push naming a var whose delete is pushed but has not run yet (an op
 * holds the var) says which var, as the other handle errors do: its place
 * in the op's lists and its id, and the op by its name or as "an unnamed
 * op" (it said `a variable of op "" was deleted`). The naive engine runs
 * the delete at once, so there the handle itself is stale: the same place
 * and id, from the handle check.
 */
TEST_KIND_CASE(deleted_var_detail, k)
{
    vf_engine *e = tu_engine(k);
    vf_var x = tu_var(e), y = tu_var(e);
    vf_operator *opr = NULL;
    CHECK_OK(vf_operator_create(
        e, &(vf_op){.fn = nop, .reads = VF_VARS(x), .name = "scale"}, &opr));
    tu_gate go;
    tu_gate_init(&go);
    if (k->threaded)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = gated, .arg = &go, .writes = VF_VARS(x)}));
    CHECK_OK(vf_var_destroy(e, x, NULL, NULL));
    char id[64], at[96];
    snprintf(id, sizeof id, "(id %#llx)", (unsigned long long)x.id);
    const char *unnamed = k->threaded ? "an unnamed op" : NULL;
    const char *step = k->threaded ? "op \"step\"" : NULL;

    snprintf(at, sizeof at, "reads[1] %s was deleted", id);
    expect_detail(
        vf_engine_push(e, &(vf_op){.fn = nop, .reads = VF_VARS(y, x)}), unnamed,
        at, "unnamed push");
    snprintf(at, sizeof at, "writes[1] %s", id);
    expect_detail(vf_engine_push(e, &(vf_op){.fn = nop,
                                             .name = "step",
                                             .reads = VF_VARS(y),
                                             .writes = VF_VARS(y, x)}),
                  step, at, "named push");
    snprintf(at, sizeof at, "reads[0] %s", id);
    vf_operator *late = NULL;
    expect_detail(
        vf_operator_create(
            e, &(vf_op){.fn = nop, .name = "step", .reads = VF_VARS(x)}, &late),
        step, at, "operator create");
    /* An operator's lists are gone once it is made: its var's id. */
    expect_detail(vf_operator_push(e, opr, 0),
                  k->threaded ? "op \"scale\"" : NULL, id, "operator push");
    if (k->threaded) {
        CHECK(vf_bulk_set_size(e, 8) >= 0);
        snprintf(at, sizeof at, "writes[0] %s", id);
        expect_detail(
            vf_engine_push(e, &(vf_op){.fn = nop, .writes = VF_VARS(x)}),
            unnamed, at, "bulk push");
        expect_detail(vf_operator_push(e, opr, 0), "op \"scale\"", id,
                      "bulk operator push");
        CHECK_OK(vf_bulk_set_size(e, 0) >= 0 ? 0 : -1);
    }
    tu_gate_open(&go);
    CHECK_OK(vf_operator_destroy(e, opr));
    tu_finish_engine(e);
    tu_gate_destroy(&go);
}

/* ------------------------------------------------------------ strings */

TEST_CASE(strings)
{
#define CHECK_CODE(name, value, message)                                       \
    do {                                                                       \
        CHECK_EQ(VF_##name, value);                                            \
        if (strcmp(vf_error_name(value), "VF_" #name) != 0)                    \
            CHECK_REPORT_("vf_error_name(%d) = '%s'", value,                   \
                          vf_error_name(value));                               \
        if (strcmp(vf_error_string(value), message) != 0)                      \
            CHECK_REPORT_("vf_error_string(%d) = '%s'", value,                 \
                          vf_error_string(value));                             \
    } while (0);
    VF_ERRNO_MAP(CHECK_CODE)
#undef CHECK_CODE
    int unknown[] = {-17, -999, 1, 12345, -2147483647 - 1, 2147483647};
    for (int i = 0; i < 6; i++) {
        CHECK(strcmp(vf_error_string(unknown[i]), "unknown error") == 0);
        CHECK(strcmp(vf_error_name(unknown[i]), "VF_UNKNOWN") == 0);
    }
    CHECK(vf_error_string(0) != NULL);
    CHECK(vf_error_name(0) != NULL);
    CHECK(strcmp(vf_error_name(0), "0") == 0); /* as varflow.h says */
}

static void *detail_thread(void *arg)
{
    (void)arg;
    /* Nothing failed on this thread yet. */
    CHECK(vf_error_detail() != NULL);
    CHECK(strcmp(vf_error_detail(), "") == 0);
    vf_var v;
    CHECK_ERR(vf_var_create(NULL, &v), VF_EINVAL);
    CHECK(strlen(vf_error_detail()) > 0);
    return NULL;
}

TEST_CASE(details)
{
    pthread_t t = tu_thread_start(detail_thread, NULL);
    tu_thread_join(t);
}

TEST_MAIN("test_bad_input", 120)
