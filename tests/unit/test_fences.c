/*
 * test_fences: the fences device ops leave on vars (src/core/device_ops.h),
 * alone, on the emulated device.
 *
 * A fence is made by hand around an event of an emulated stream whose
 * work waits on a gate the test opens, and resolved by hand (the
 * completer's part). It checks: references (the last unref lets go of the
 * failure the fence carries); a host wait blocks until the work is done
 * and the fence resolved, counts one host synchronization, and returns
 * the fence's failure, while a resolved fence needs no wait at all; which
 * failure a var holds for an op (its last device write's, when that work
 * failed, else its own), waiting only when the answer depends on it; that
 * a host op waits for the write fence of what it reads and for every
 * fence of what it writes; and that a host write takes over its fence's
 * failure and drops the var's fences.
 */
#include "runner.h"

#include "core/device_ops.h"
#include "core/engine.h"

/* Long enough for a thread that should block to be seen not to have
 * returned (a broken module then fails the check; a correct one never
 * waits for this). */
#define BLOCKED_MS 30

typedef struct rig {
    vf_engine *e;
    const vf__device_class *cls;
    vf__stream *s;
    tu_gate gate;
    vf__failure_log log;
} rig;

static int gated_work(void *arg)
{
    (void)tu_gate_wait(arg, TU_TIMEOUT);
    return 0;
}

static void rig_init(rig *r)
{
    memset(r, 0, sizeof *r);
    REQUIRE(vf_engine_create(&r->e, &(vf_config){.type = VF_ENGINE_NAIVE}) ==
            0);
    r->cls = vf__device_class_of(VF_DEVICE_EMULATED);
    REQUIRE(r->cls != NULL);
    vf__device_params params = {.latency_ns = 0};
    REQUIRE(vf__emulated_costs_read(&params.costs, true) == 0);
    REQUIRE(r->cls->stream_create(0, &params, &r->s) == 0);
    tu_gate_init(&r->gate);
    REQUIRE(vf__failure_log_init(&r->log) == 0);
}

static void rig_destroy(rig *r)
{
    tu_gate_open(&r->gate);
    r->cls->stream_destroy(r->s);
    tu_gate_destroy(&r->gate);
    vf__failure_log_destroy(&r->log);
    CHECK_OK(vf_engine_destroy(r->e));
}

static uint64_t host_syncs(rig *r)
{
    vf_stats st;
    CHECK_OK(vf_engine_stats(r->e, &st));
    return st.host_syncs;
}

/* A fence (one reference) on the stream's work so far; `gated`: the
 * stream first runs work that waits for the rig's gate. */
static vf__fence *fence_new(rig *r, bool gated)
{
    if (gated)
        REQUIRE(r->cls->submit(r->s, gated_work, &r->gate, 0) == 0);
    vf__fence *f = calloc(1, sizeof *f);
    REQUIRE(f != NULL);
    atomic_init(&f->refs, 1);
    f->cls = r->cls;
    f->stream = r->s;
    atomic_init(&f->resolved, false);
    REQUIRE(r->cls->record(r->s, &f->ev) == 0);
    return f;
}

/* The completer's part: the fence carries `failure` (a reference of its
 * own; NULL: none), then it is resolved. */
static void resolve(vf__fence *f, vf__failure *failure)
{
    if (failure != NULL)
        vf__failure_ref(failure);
    f->failure = failure;
    atomic_store_explicit(&f->resolved, true, memory_order_release);
}

static vf__failure *record(rig *r, uint64_t place)
{
    vf__failure *f = vf__failure_log_record(&r->log, VF_EDEVICE, "op", "m",
                                            place, NULL);
    REQUIRE(f != NULL);
    return f;
}

static void var_init(vf__var *v)
{
    memset(v, 0, sizeof *v);
    vf__spin_init(&v->lock);
    atomic_init(&v->failure, NULL);
    v->state = VF__VAR_LIVE;
}

/* Give a var a fence (it takes a reference). */
static void set_wfence(vf__var *v, vf__fence *f)
{
    vf__fence_ref(f);
    v->wfence = f;
}

static void add_rfence(vf__var *v, vf__fence *f)
{
    vf__fence_ref(f);
    v->rfences[v->nrfences++] = f;
}

/* A host op of engine e on one var. */
typedef struct hop {
    vf__op *op; /* in `block`, with its one var entry */
    vf__opdef def;
    _Alignas(vf__op) unsigned char block[sizeof(vf__op) + sizeof(vf__dep)];
} hop;

static void hop_init(hop *h, vf_engine *e, vf__var *v, bool write)
{
    memset(h, 0, sizeof *h);
    h->op = (vf__op *)h->block;
    h->op->nvars = 1;
    vf__op_stage_var(h->op, 0,
                     &(vf__varref){.var = v, .gen = 1, .write = write});
    h->def.engine = e;
    h->def.kind = &vf__kind_user;
    h->op->name = "host op";
    h->op->def = &h->def;
}

/* Something a thread runs while the test checks whether it returned. */
typedef struct bg {
    pthread_t t;
    tu_gate returned;
    rig *r;
    vf__fence *fence;
    vf__var *var;
    uint64_t place;
    hop *op;
    vf__failure *result;
} bg;

static void *bg_host_wait(void *arg)
{
    bg *b = arg;
    b->result = vf__fence_host_wait(b->r->e, b->fence);
    tu_gate_open(&b->returned);
    return NULL;
}

/* The failure v holds for a top-level op at `place`, as exec.c asks. */
static vf__failure *var_failure_for(vf_engine *e, vf__var *v, uint64_t place)
{
    vf__failure *own = atomic_load(&v->failure);
    return vf__fences_var_failure(
        e, v, own, own != NULL && vf__failure_live_for(own, NULL, place));
}

static void *bg_var_failure(void *arg)
{
    bg *b = arg;
    b->result = var_failure_for(b->r->e, b->var, b->place);
    tu_gate_open(&b->returned);
    return NULL;
}

static void *bg_fences_host_wait(void *arg)
{
    bg *b = arg;
    vf__fences_host_wait(b->op->op);
    tu_gate_open(&b->returned);
    return NULL;
}

static void bg_start(bg *b, void *(*fn)(void *))
{
    tu_gate_init(&b->returned);
    b->t = tu_thread_start(fn, b);
}

static void bg_join(bg *b)
{
    tu_thread_join(b->t);
    tu_gate_destroy(&b->returned);
}

static bool returns_soon(bg *b)
{
    return tu_gate_wait(&b->returned, TU_TIMEOUT);
}

static bool still_blocked(bg *b)
{
    return !tu_gate_wait(&b->returned, BLOCKED_MS / 1000.0);
}

TEST_CASE(last_unref_lets_go)
{
    rig r;
    rig_init(&r);
    vf__failure *fail = record(&r, 1);
    vf__fence *f = fence_new(&r, false);
    resolve(f, fail);
    int refs = atomic_load(&fail->refs);
    vf__fence_ref(f);
    CHECK_EQ(atomic_load(&f->refs), 2);
    vf__fence_unref(f);
    CHECK_EQ(atomic_load(&f->refs), 1);
    CHECK_EQ(atomic_load(&fail->refs), refs);
    vf__fence_unref(f); /* the last: frees, and lets go of the failure */
    CHECK_EQ(atomic_load(&fail->refs), refs - 1);
    vf__fence_unref(NULL);
    vf__failure_unref(fail);
    rig_destroy(&r);
}

TEST_CASE(host_wait_waits_for_work_and_resolution)
{
    rig r;
    rig_init(&r);
    vf__failure *fail = record(&r, 1);
    vf__fence *f = fence_new(&r, true);
    bg b = {.r = &r, .fence = f};
    bg_start(&b, bg_host_wait);
    CHECK(still_blocked(&b)); /* the work has not run */
    tu_gate_open(&r.gate);
    CHECK_OK(r.cls->event_wait(f->ev, NULL));
    CHECK(still_blocked(&b)); /* complete, but not resolved */
    resolve(f, fail);
    CHECK(returns_soon(&b));
    bg_join(&b);
    CHECK(b.result == fail);
    CHECK_EQ(host_syncs(&r), 1);
    vf__fence_unref(f);
    vf__failure_unref(fail);
    rig_destroy(&r);
}

TEST_CASE(resolved_fence_needs_no_wait)
{
    rig r;
    rig_init(&r);
    vf__fence *f = fence_new(&r, true); /* its work never runs meanwhile */
    resolve(f, NULL);
    bg b = {.r = &r, .fence = f};
    bg_start(&b, bg_host_wait);
    CHECK(returns_soon(&b));
    bg_join(&b);
    CHECK(b.result == NULL);
    CHECK_EQ(host_syncs(&r), 0);
    vf__fence_unref(f);
    rig_destroy(&r);
}

/* The failure a var holds for an op: its last device write's when that
 * work failed (newer), else its own. */
TEST_CASE(var_failure_prefers_failed_device_write)
{
    rig r;
    rig_init(&r);
    vf__failure *own = record(&r, 1), *dev = record(&r, 2);
    vf__var v;
    var_init(&v);
    vf__failure_ref(own); /* the var's reference, as a write gives it */
    atomic_store(&v.failure, own);
    CHECK(var_failure_for(r.e, &v, 5) == own); /* no fence */

    vf__fence *ok = fence_new(&r, false);
    resolve(ok, NULL);
    set_wfence(&v, ok);
    CHECK(var_failure_for(r.e, &v, 5) == own); /* the write did not fail */
    vf__fences_drop(&v);

    vf__fence *failed = fence_new(&r, false);
    resolve(failed, dev);
    set_wfence(&v, failed);
    CHECK(var_failure_for(r.e, &v, 5) == dev);
    vf__fences_drop(&v);
    /* Dropped, the failed write's failure is the var's own now. */
    CHECK(atomic_load(&v.failure) == dev);
    CHECK(var_failure_for(r.e, &v, 5) == dev);
    CHECK_EQ(host_syncs(&r), 0);

    vf__failure_unref(atomic_exchange(&v.failure, NULL));
    vf__fence_unref(ok);
    vf__fence_unref(failed);
    vf__failure_unref(own);
    vf__failure_unref(dev);
    rig_destroy(&r);
}

/* A write still in flight: with no failure of its own on the var, the
 * answer is met on the device (no host wait); with one that is live for
 * the op, the host waits, since the write's outcome decides. */
TEST_CASE(var_failure_waits_only_when_it_matters)
{
    rig r;
    rig_init(&r);
    vf__failure *own = record(&r, 1), *dev = record(&r, 2);
    vf__var v;
    var_init(&v);
    vf__fence *f = fence_new(&r, true);
    set_wfence(&v, f);
    bg b = {.r = &r, .var = &v, .place = 5};
    bg_start(&b, bg_var_failure);
    CHECK(returns_soon(&b)); /* own is NULL: nothing to wait for */
    bg_join(&b);
    CHECK(b.result == NULL);
    CHECK_EQ(host_syncs(&r), 0);

    vf__failure_ref(own); /* the var's reference */
    atomic_store(&v.failure, own);
    bg_start(&b, bg_var_failure);
    CHECK(still_blocked(&b));
    tu_gate_open(&r.gate);
    CHECK_OK(r.cls->event_wait(f->ev, NULL));
    resolve(f, dev);
    CHECK(returns_soon(&b));
    bg_join(&b);
    CHECK(b.result == dev);
    CHECK_EQ(host_syncs(&r), 1);

    vf__fences_drop(&v);
    CHECK(atomic_load(&v.failure) == dev); /* dropped: the var's own now */
    vf__failure_unref(atomic_exchange(&v.failure, NULL));
    vf__fence_unref(f);
    vf__failure_unref(own);
    vf__failure_unref(dev);
    rig_destroy(&r);
}

/* A host op reading v waits for v's write fence only (device reads of v
 * are no concern of a reader); one writing v waits for the read fences
 * too (it overwrites what they read). */
TEST_CASE(host_op_waits_for_the_fences_it_depends_on)
{
    rig r;
    rig_init(&r);
    vf__var v;
    var_init(&v);
    vf__fence *w = fence_new(&r, false);
    resolve(w, NULL);
    vf__fence *rd = fence_new(&r, true); /* a device read in flight */
    set_wfence(&v, w);
    add_rfence(&v, rd);

    hop reader, writer;
    hop_init(&reader, r.e, &v, false);
    hop_init(&writer, r.e, &v, true);
    bg b = {.r = &r, .op = &reader};
    bg_start(&b, bg_fences_host_wait);
    CHECK(returns_soon(&b));
    bg_join(&b);

    b.op = &writer;
    bg_start(&b, bg_fences_host_wait);
    CHECK(still_blocked(&b));
    tu_gate_open(&r.gate);
    CHECK_OK(r.cls->event_wait(rd->ev, NULL));
    resolve(rd, NULL);
    CHECK(returns_soon(&b));
    bg_join(&b);
    CHECK_EQ(atomic_load(&w->refs), 2); /* the var's and ours: none leaked */
    CHECK_EQ(atomic_load(&rd->refs), 2);

    vf__fences_drop(&v);
    vf__fence_unref(w);
    vf__fence_unref(rd);
    rig_destroy(&r);
}

/* Before a host write runs: v takes its last device write's failure (it
 * sticks, rule 9) and forgets its fences. A host read changes nothing. */
TEST_CASE(host_write_takes_over_and_drops_fences)
{
    rig r;
    rig_init(&r);
    vf__failure *dev = record(&r, 2);
    vf__var v;
    var_init(&v);
    vf__fence *w = fence_new(&r, false), *r1 = fence_new(&r, false),
              *r2 = fence_new(&r, false);
    resolve(w, dev);
    resolve(r1, NULL);
    resolve(r2, NULL);
    set_wfence(&v, w);
    add_rfence(&v, r1);
    add_rfence(&v, r2);

    hop reader, writer;
    hop_init(&reader, r.e, &v, false);
    hop_init(&writer, r.e, &v, true);
    vf__fences_clear_written(reader.op);
    CHECK(v.wfence == w && v.nrfences == 2);
    CHECK(atomic_load(&v.failure) == NULL);

    int dev_refs = atomic_load(&dev->refs);
    vf__fences_clear_written(writer.op);
    CHECK(atomic_load(&v.failure) == dev);
    CHECK_EQ(atomic_load(&dev->refs), dev_refs + 1);
    CHECK(v.wfence == NULL);
    CHECK_EQ(v.nrfences, 0);
    CHECK_EQ(atomic_load(&w->refs), 1); /* only ours are left */
    CHECK_EQ(atomic_load(&r1->refs), 1);
    CHECK_EQ(atomic_load(&r2->refs), 1);

    vf__failure_unref(atomic_exchange(&v.failure, NULL));
    vf__fence_unref(w);
    vf__fence_unref(r1);
    vf__fence_unref(r2);
    vf__failure_unref(dev);
    rig_destroy(&r);
}

TEST_MAIN("test_fences", 120)
