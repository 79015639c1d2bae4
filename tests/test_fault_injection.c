/*
 * test_fault_injection: out of memory anywhere is a clean VF_ENOMEM and
 * nothing else (issue 4, point 3).
 *
 * A workload that uses every allocating path (engine create, var new, pushes
 * of ops with more than 8 vars, operators, waits from outside and from
 * inside ops, nested pushes, deletes with free callbacks and var re-creation,
 * sync and async failing ops, 150 async ops held in flight so op blocks run
 * out of the free lists, completions from a foreign thread, wait_all,
 * destroy) runs with vf__testing_fail_alloc(N), for N = 1, 2, ... until a run
 * completes without reaching its N-th allocation; on every engine kind.
 * Each run checks:
 * - at most one call returned VF_ENOMEM, only when the fault fired, with a
 *   non-empty vf_error_detail(); the call is then retried (it must
 *   succeed: the fault is one-shot), so every run pushes the same program;
 * - every other call behaved: each op's `done` fired exactly once with its
 *   expected status (0, the failing op's code, VF_ESKIPPED), the values
 *   equal the serial program's, failures reach wait_var with the failing
 *   op's code and message (when the fault hit the record itself it comes
 *   from the engine's reserve; a record carrying VF_ENOMEM instead is
 *   accepted too), every free callback ran once, vf_engine_stats adds up;
 * - the engine stays usable after the fault (more pushes and waits), and is
 *   destroyed cleanly; under `make asan` LeakSanitizer checks nothing leaked.
 * It prints how many faults were injected, how many surfaced as VF_ENOMEM
 * and how many were absorbed (a failure record taken from the reserve, an
 * async op's message dropped).
 *
 * (An op failure whose record could not be allocated used to be lost once
 * the shared static fallback record had been reported; since 860cc5e each
 * engine keeps a reserve of records, and this test would catch a lost
 * failure again: tests/test_enomem.c is the focused check.)
 */
#include "runner.h"

/* the testing aid vf__testing_fail_alloc (fault injection) */
#include "base/alloc.h"

enum {
    NGEN = 10,  /* vars 0..9: general */
    VF_ = 10,   /* the failing sync op writes it */
    VG = 11,    /* its follower reads F and writes G (skipped) */
    VH = 12,    /* the failing async op writes it */
    VR = 13,    /* 150 async ops read it */
    VNEST = 14, /* written by an op pushed from inside an op */
    VY = 15,    /* waited on from inside an op */
    VDEL = 16,  /* 16..18 are deleted */
    VUSE = 19,  /* the after-fault usability check */
    VNEW = 20,  /* a var created after the deletes */
    NV = 21,
    NHOLD = 150,
    MAXOPS = 400
};

typedef struct wl wl;

/* One pushed op (or operator): what `done` saw. */
typedef struct opctx {
    wl *w;
    int a, b; /* writes val[a]; reads val[b] when b >= 0 */
    int64_t k;
    int expect; /* expected `done` status */
    int expect_done;
    atomic_int done;
    atomic_int status;
} opctx;

/* The foreign thread that completes async ops once the gate opens. */
typedef struct completer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    vf_completion q[NHOLD + 8];
    int status[NHOLD + 8];
    int n, head;
    bool stop;
    tu_gate gate;
    pthread_t th;
} completer;

struct wl {
    const tu_kind *k;
    vf_engine *e;
    vf_var v[NV];
    int64_t val[NV];   /* written by ops only (ordered by the engine) */
    int64_t model[NV]; /* the serial program, main thread */
    opctx ops[MAXOPS];
    int nops;
    atomic_int enomem;         /* calls that returned VF_ENOMEM */
    atomic_int missing_detail; /* ... without a detail */
    atomic_int frees;          /* free callbacks run */
    atomic_int nested_errors;
    completer c;
    struct nestarg {
        opctx *self, *child;
        int64_t y_expected;
    } nest;
};

/* ------------------------------------------------------------ retry */

static void note_enomem(wl *w, const char *what)
{
    atomic_fetch_add(&w->enomem, 1);
    if (vf_error_detail()[0] == 0) {
        atomic_fetch_add(&w->missing_detail, 1);
        CHECK_REPORT_("%s: VF_ENOMEM without a detail", what);
    }
}

/* rc = call; on VF_ENOMEM note it and call once more (the fault is
 * one-shot: the retry must not fail for memory). */
#define RETRY(w, rc, call)                                                     \
    do {                                                                       \
        (rc) = (call);                                                         \
        if ((rc) == VF_ENOMEM) {                                               \
            note_enomem((w), #call);                                           \
            (rc) = (call);                                                     \
            if ((rc) == VF_ENOMEM)                                             \
                CHECK_REPORT_("%s: VF_ENOMEM twice", #call);                   \
        }                                                                      \
    } while (0)

/* The call must succeed (after at most one VF_ENOMEM). */
#define MUST(w, call)                                                          \
    do {                                                                       \
        int m_;                                                                \
        RETRY(w, m_, call);                                                    \
        if (m_ != 0)                                                           \
            CHECK_REPORT_("%s returned %s (%s)", #call, vf_error_name(m_),     \
                          vf_error_detail());                                  \
    } while (0)

/* ------------------------------------------------------------ ops */

static void on_done(void *arg, int status)
{
    opctx *c = arg;
    atomic_store(&c->status, status);
    atomic_fetch_add(&c->done, 1);
}

static int f_write(vf_run *run, void *arg)
{
    (void)run;
    opctx *c = arg;
    int64_t *val = c->w->val;
    val[c->a] = val[c->a] * 31 + c->k + (c->b >= 0 ? val[c->b] : 0);
    return 0;
}

static void m_write(wl *w, const opctx *c)
{
    w->model[c->a] = w->model[c->a] * 31 + c->k +
                     (c->b >= 0 ? w->model[c->b] : 0);
}

/* Reads vars 0..4, writes 5..9 (ten distinct vars: the array is malloc'd). */
static int f_big(vf_run *run, void *arg)
{
    (void)run;
    opctx *c = arg;
    int64_t *val = c->w->val, sum = 0;
    for (int i = 0; i < 5; i++)
        sum += val[i];
    for (int i = 5; i < 10; i++)
        val[i] = val[i] * 7 + sum + c->k;
    return 0;
}

static void m_big(wl *w, const opctx *c)
{
    int64_t sum = 0;
    for (int i = 0; i < 5; i++)
        sum += w->model[i];
    for (int i = 5; i < 10; i++)
        w->model[i] = w->model[i] * 7 + sum + c->k;
}

static int f_fail(vf_run *run, void *arg)
{
    (void)arg;
    vf_run_set_error(run, "sync boom %d", 42);
    return 42;
}

static void completer_give(completer *c, vf_completion done, int status)
{
    pthread_mutex_lock(&c->mu);
    REQUIRE(c->n < NHOLD + 8);
    c->q[c->n] = done;
    c->status[c->n] = status;
    c->n++;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void a_hold(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    opctx *c = arg;
    completer_give(&c->w->c, done, 0);
}

static void a_fail(vf_run *run, void *arg, vf_completion done)
{
    opctx *c = arg;
    vf_run_set_error(run, "async boom");
    completer_give(&c->w->c, done, 7);
}

static void *completer_main(void *arg)
{
    completer *c = arg;
    CHECK(tu_gate_wait(&c->gate, TU_TIMEOUT));
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->head == c->n && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->head == c->n)
            break;
        vf_completion d = c->q[c->head];
        int status = c->status[c->head];
        c->head++;
        pthread_mutex_unlock(&c->mu);
        CHECK_OK(vf_completion_finish(d, status, NULL));
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static opctx *new_ctx(wl *w, int a, int b, int64_t k, int expect)
{
    REQUIRE(w->nops < MAXOPS);
    opctx *c = &w->ops[w->nops++];
    c->w = w;
    c->a = a;
    c->b = b;
    c->k = k;
    c->expect = expect;
    c->expect_done = 1;
    atomic_store(&c->done, 0);
    atomic_store(&c->status, -999);
    return c;
}

/* Inside an op: push a child (writes NEST) and wait on Y; both retried on
 * VF_ENOMEM. */
static int f_nested(vf_run *run, void *arg)
{
    wl *w = ((opctx *)arg)->w;
    vf_engine *e = vf_run_engine(run);
    int rc;
    RETRY(w, rc,
          vf_engine_push(e, &(vf_op){.fn = f_write,
                                     .arg = w->nest.child,
                                     .done = on_done,
                                     .writes = VF_VARS(w->v[VNEST]),
                                     .name = "child"}));
    if (rc != 0) {
        atomic_fetch_add(&w->nested_errors, 1);
        CHECK_OK(rc);
    }
    RETRY(w, rc, vf_var_wait(e, w->v[VY], NULL));
    if (rc != 0) {
        atomic_fetch_add(&w->nested_errors, 1);
        CHECK_OK(rc);
    } else if (w->val[VY] != w->nest.y_expected) {
        atomic_fetch_add(&w->nested_errors, 1);
        CHECK_REPORT_("nested wait: val[Y] %lld, expected %lld",
                      (long long)w->val[VY], (long long)w->nest.y_expected);
    }
    return 0;
}

typedef struct freebuf {
    wl *w;
    char pad[48];
} freebuf;

static void free_buf(void *arg)
{
    freebuf *b = arg;
    atomic_fetch_add(&b->w->frees, 1);
    free(b);
}

/* ------------------------------------------------------------ workload */

/* Push a write of val[a] (reading val[b] when b >= 0) and model it. */
static void push_write(wl *w, int a, int b, int64_t k)
{
    opctx *c = new_ctx(w, a, b, k, 0);
    vf_op op = {.fn = f_write,
                .arg = c,
                .done = on_done,
                .writes = VF_VARS(w->v[a]),
                .name = "write"};
    if (b >= 0)
        op.reads = (vf_var_list){&w->v[b], 1};
    MUST(w, vf_engine_push(w->e, &op));
    m_write(w, c);
}

typedef struct outcome {
    int lost;     /* failures that were not reported */
    int absorbed; /* the fault hit a path that returns no error */
} outcome;

/* wait_var(`var`) must report a failure: the op's own record, or the static
 * out-of-memory one when the fault hit the record. A failure not reported
 * at all is counted in out->lost, for the caller to judge. */
static void expect_failure(wl *w, int var, int code, const char *op_name,
                           const char *message, outcome *out)
{
    vf_error err;
    int rc;
    RETRY(w, rc, vf_var_wait(w->e, w->v[var], &err));
    if (rc == 0) {
        out->lost++;
        return;
    }
    CHECK_ERR(rc, VF_EOPFAILED);
    if (err.code == VF_ENOMEM) {
        out->absorbed++; /* the static record */
        return;
    }
    CHECK_EQ(err.code, code);
    if (strcmp(err.op_name, op_name) != 0)
        CHECK_REPORT_("failure names op '%s', expected '%s'", err.op_name,
                      op_name);
    if (strcmp(err.message, message) != 0) {
        if (err.message[0] == 0 && code == 7)
            out->absorbed++; /* vf_run_set_error could not keep a copy */
        else
            CHECK_REPORT_("failure message '%s', expected '%s'", err.message,
                          message);
    }
}

static void workload(wl *w, outcome *out)
{
    /* Engine and vars. */
    MUST(w, vf_engine_create(&w->e, &w->k->cfg));
    REQUIRE(w->e != NULL);
    for (int i = 0; i < NV - 1; i++)
        MUST(w, vf_var_create(w->e, &w->v[i]));

    /* Chains over the general vars, with reads across them. */
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < NGEN; i++)
            push_write(w, i, (i & 1) ? (i + 3) % NGEN : -1, r * 10 + i);

    /* An op with ten vars (its var array is malloc'd). */
    {
        opctx *c = new_ctx(w, 5, -1, 5, 0);
        vf_var *v = w->v;
        MUST(w,
             vf_engine_push(
                 w->e, &(vf_op){.fn = f_big,
                                .arg = c,
                                .done = on_done,
                                .reads = VF_VARS(v[0], v[1], v[2], v[3], v[4]),
                                .writes = VF_VARS(v[5], v[6], v[7], v[8], v[9]),
                                .name = "big"}));
        m_big(w, c);
    }

    /* An operator, pushed three times: val[0] = val[0] * 31 + 9 + val[1]. */
    {
        opctx *c = new_ctx(w, 0, 1, 9, 0);
        c->expect_done = 3;
        vf_operator *opr = NULL;
        MUST(w, vf_operator_create(w->e,
                                   &(vf_op){.fn = f_write,
                                            .arg = c,
                                            .done = on_done,
                                            .reads = VF_VARS(w->v[1]),
                                            .writes = VF_VARS(w->v[0]),
                                            .name = "operator"},
                                   &opr));
        for (int i = 0; i < 3; i++) {
            MUST(w, vf_operator_push(w->e, opr, i));
            m_write(w, c);
        }
        MUST(w, vf_operator_destroy(w->e, opr));
    }

    /* 150 async reads of R held in flight (more op blocks than a thread's
     * free-list cache holds), then a write of R behind them. */
    for (int i = 0; i < NHOLD; i++) {
        opctx *c = new_ctx(w, VR, -1, 0, 0);
        MUST(w, vf_engine_push(w->e, &(vf_op){.async_fn = a_hold,
                                              .arg = c,
                                              .done = on_done,
                                              .reads = VF_VARS(w->v[VR]),
                                              .name = "hold"}));
    }
    push_write(w, VR, -1, 77);

    /* A failing sync op and a follower it makes skip. */
    opctx *failer = new_ctx(w, VF_, -1, 0, 42);
    MUST(w, vf_engine_push(w->e, &(vf_op){.fn = f_fail,
                                          .arg = failer,
                                          .done = on_done,
                                          .writes = VF_VARS(w->v[VF_]),
                                          .name = "failer"}));
    opctx *follower = new_ctx(w, VG, VF_, 1, VF_ESKIPPED);
    MUST(w, vf_engine_push(w->e, &(vf_op){.fn = f_write,
                                          .arg = follower,
                                          .done = on_done,
                                          .reads = VF_VARS(w->v[VF_]),
                                          .writes = VF_VARS(w->v[VG]),
                                          .name = "follower"}));

    /* A failing async op (completed by the foreign thread). */
    opctx *afail = new_ctx(w, VH, -1, 0, 7);
    MUST(w, vf_engine_push(w->e, &(vf_op){.async_fn = a_fail,
                                          .arg = afail,
                                          .done = on_done,
                                          .writes = VF_VARS(w->v[VH]),
                                          .name = "afail"}));

    /* Nested: an op pushes a child and waits on Y from inside. */
    push_write(w, VY, -1, 5);
    w->nest.self = new_ctx(w, VNEST, -1, 0, 0);
    w->nest.child = new_ctx(w, VNEST, -1, 3, 0);
    w->nest.y_expected = w->model[VY];
    MUST(w, vf_engine_push(w->e, &(vf_op){.fn = f_nested,
                                          .arg = w->nest.self,
                                          .done = on_done,
                                          .name = "nested"}));
    m_write(w, w->nest.child);

    /* Deletes: write each var, then delete it with a free callback; then a
     * new var (it may reuse a slot). */
    for (int i = VDEL; i < VDEL + 3; i++) {
        push_write(w, i, -1, i);
        freebuf *b = calloc(1, sizeof *b);
        REQUIRE(b != NULL);
        b->w = w;
        MUST(w, vf_var_destroy(w->e, w->v[i], free_buf, b));
    }
    MUST(w, vf_var_create(w->e, &w->v[VNEW]));
    push_write(w, VNEW, -1, 11);

    /* Release the async ops; wait by var; failures are reported. */
    tu_gate_open(&w->c.gate);
    int waited[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, VR, VY, VNEST, VNEW};
    for (int i = 0; i < (int)(sizeof waited / sizeof waited[0]); i++)
        MUST(w, vf_var_wait(w->e, w->v[waited[i]], NULL));
    int lost_before = out->lost;
    expect_failure(w, VG, 42, "failer", "sync boom 42", out);
    if (out->lost > lost_before) {
        /* The follower then ran: model it, so only the loss is reported. */
        m_write(w, follower);
        follower->expect = 0;
    }
    MUST(w, vf_var_wait(w->e, w->v[VF_], NULL)); /* same chain: reported */
    expect_failure(w, VH, 7, "afail", "async boom", out);
    MUST(w, vf_engine_wait_all(w->e, NULL));

    /* Usable after the fault. */
    for (int i = 0; i < 5; i++)
        push_write(w, VUSE, -1, 100 + i);
    MUST(w, vf_var_wait(w->e, w->v[VUSE], NULL));
    MUST(w, vf_engine_wait_all(w->e, NULL));
}

/* ------------------------------------------------------------ one run */

typedef struct totals {
    int runs, fired, enomem, absorbed;
} totals;

/* One run with the n-th allocation failing; returns whether it fired. */
static bool run_one(const tu_kind *k, uint64_t n, totals *t)
{
    static wl w_; /* large: not on the stack */
    wl *w = &w_;
    memset(w, 0, sizeof *w);
    w->k = k;
    pthread_mutex_init(&w->c.mu, NULL);
    pthread_cond_init(&w->c.cv, NULL);
    tu_gate_init(&w->c.gate);
    w->c.th = tu_thread_start(completer_main, &w->c);
    outcome out = {0, 0};

    vf__testing_fail_alloc(n);
    workload(w, &out);
    bool fired = vf__testing_alloc_count() >= n;
    vf__testing_fail_alloc(0);

    /* Values equal the serial program's (deleted vars excepted). */
    for (int i = 0; i < NV; i++) {
        if (i >= VDEL && i < VDEL + 3)
            continue;
        if (w->val[i] != w->model[i])
            CHECK_REPORT_("N=%llu: val[%d] = %lld, serial %lld",
                          (unsigned long long)n, i, (long long)w->val[i],
                          (long long)w->model[i]);
    }
    /* Accounting. */
    vf_stats st;
    CHECK_OK(vf_engine_stats(w->e, &st));
    uint64_t total = 0, failed = 0, skipped = 0;
    for (int i = 0; i < w->nops; i++) {
        opctx *c = &w->ops[i];
        total += (uint64_t)c->expect_done;
        failed += c->expect != 0 && c->expect != VF_ESKIPPED;
        skipped += c->expect == VF_ESKIPPED;
        if (atomic_load(&c->done) != c->expect_done)
            CHECK_REPORT_("N=%llu: op %d: done fired %d times, expected %d",
                          (unsigned long long)n, i, atomic_load(&c->done),
                          c->expect_done);
        else if (atomic_load(&c->status) != c->expect)
            CHECK_REPORT_("N=%llu: op %d: done status %s, expected %s",
                          (unsigned long long)n, i,
                          vf_error_name(atomic_load(&c->status)),
                          vf_error_name(c->expect));
    }
    CHECK_EQ(st.completed, total);
    CHECK_EQ(st.failed, failed);
    CHECK_EQ(st.skipped, skipped);
    CHECK_EQ(st.ran, total - failed - skipped);
    CHECK_EQ(st.pending, 0);
    CHECK_OK(vf_engine_destroy(w->e));
    CHECK_EQ(atomic_load(&w->frees), 3);
    CHECK_EQ(atomic_load(&w->nested_errors), 0);

    pthread_mutex_lock(&w->c.mu);
    w->c.stop = true;
    pthread_cond_signal(&w->c.cv);
    pthread_mutex_unlock(&w->c.mu);
    tu_thread_join(w->c.th);
    CHECK_EQ(w->c.head, NHOLD + 1);
    pthread_mutex_destroy(&w->c.mu);
    pthread_cond_destroy(&w->c.cv);
    tu_gate_destroy(&w->c.gate);

    int enomem = atomic_load(&w->enomem);
    if (enomem > 1 || (enomem == 1 && !fired))
        CHECK_REPORT_("N=%llu: %d calls returned VF_ENOMEM (fault %s)",
                      (unsigned long long)n, enomem,
                      fired ? "fired" : "did not fire");
    if (out.lost > 0)
        CHECK_REPORT_("N=%llu: %d op failure(s) were never reported (fault "
                      "%s)",
                      (unsigned long long)n, out.lost,
                      fired ? "fired" : "did not fire");
    if (out.absorbed > 0 && !fired)
        CHECK_REPORT_("N=%llu: a failure was degraded without a fault",
                      (unsigned long long)n);
    t->runs++;
    t->fired += fired;
    t->enomem += enomem;
    t->absorbed += fired && enomem == 0;
    return fired;
}

/* The workload with a fault at each allocation in turn, on every kind. */
TEST_CASE(every_allocation)
{
    totals all = {0, 0, 0, 0};
    for (int i = 0; i < TU_NKINDS; i++) {
        const tu_kind *k = &tu_kinds[i];
        check_context_ = k->name;
        tu_phase_limit(k->name, 120);
        totals t = {0, 0, 0, 0};
        uint64_t n = 1;
        while (run_one(k, n, &t)) {
            n++;
            REQUIRE(n < 100000);
        }
        printf("%-12s %4d runs: %4d faults injected, %4d returned VF_ENOMEM, "
               "%3d absorbed\n",
               k->name, t.runs, t.fired, t.enomem, t.absorbed);
        all.runs += t.runs;
        all.fired += t.fired;
        all.enomem += t.enomem;
        all.absorbed += t.absorbed;
    }
    check_context_ = NULL;
    printf("fault injection: %d faults injected in %d runs: %d returned "
           "VF_ENOMEM, %d absorbed (no call needed to fail: a failure "
           "record from the reserve, an async op's message dropped)\n",
           all.fired, all.runs, all.enomem, all.absorbed);
}

/* Out of memory as a device op ends: its event or the fence on its vars
 * cannot be made, after its work was submitted. The op waits for its
 * work right there instead, and succeeds when the work did: its `done`
 * gets 0 and its reader runs. It got VF_ENOMEM, which no call returned,
 * its reader was skipped and wait_all said VF_EOPFAILED (found by a user
 * tester). On every engine kind; the fault is armed inside the op's
 * function, after its submit, so the allocation it hits is one of the
 * op's end (the op's thread is the only one allocating then). */
typedef struct dev_end {
    int x;
    tu_gate go;
    atomic_int done_status, reader_ran, armed;
} dev_end;

static int dev_end_work(void *arg)
{
    ((dev_end *)arg)->x = 1;
    return 0;
}

static int dev_end_op(vf_run *run, void *arg)
{
    dev_end *d = arg;
    CHECK(tu_gate_wait(&d->go, TU_TIMEOUT));
    int rc = vf_run_submit(run, dev_end_work, d, 0);
    vf__testing_fail_alloc(1); /* the next allocation, the op's end's */
    atomic_store(&d->armed, 1);
    return rc;
}

static void dev_end_done(void *arg, int status)
{
    atomic_store(&((dev_end *)arg)->done_status, status);
}

static int dev_end_reader(vf_run *run, void *arg)
{
    (void)run;
    dev_end *d = arg;
    atomic_store(&d->reader_ran, d->x);
    return 0;
}

TEST_KIND_CASE(device_op_end_out_of_memory, k)
{
    vf_engine *e = tu_engine(k);
    dev_end d = {.done_status = 99};
    tu_gate_init(&d.go);
    if (!k->threaded) /* the op runs inside its push */
        tu_gate_open(&d.go);
    vf_var v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = dev_end_op,
                                        .arg = &d,
                                        .done = dev_end_done,
                                        .writes = VF_VARS(v),
                                        .device = {VF_DEVICE_EMULATED, 0}}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = dev_end_reader, .arg = &d, .reads = VF_VARS(v)}));
    tu_gate_open(&d.go);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK(atomic_load(&d.armed));
    vf__testing_fail_alloc(0);
    CHECK_EQ(atomic_load(&d.done_status), 0);
    CHECK_EQ(atomic_load(&d.reader_ran), 1);
    tu_gate_destroy(&d.go);
    tu_finish_engine(e);
}

TEST_MAIN("test_fault_injection", 240)
