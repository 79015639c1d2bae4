/*
 * device_check.h: the behaviour every device class must have (device.h),
 * checked through the class table directly; test_device_emulated and
 * test_device_cuda run each dc_* check below as a case of its own
 * (tests/runner.h), on their class, then checks of their own: a check
 * added here is a case to add to both.
 *
 * Everything is proven by behaviour, never by speed: a gate holds a
 * stream's work back where a test needs work to be pending, and values
 * written by one stream and read by another are plain (non-atomic) ints, so
 * that under ThreadSanitizer a missing happens-before in the device's
 * ordering is a reported race, and everywhere a missing order is a wrong
 * value. Include util.h first.
 */
#ifndef VF_TEST_DEVICE_CHECK_H
#define VF_TEST_DEVICE_CHECK_H

#include "base/alloc.h" /* vf__testing_fail_alloc: fault injection */
#include "device/device.h"

/* Which class to check, and how. */
typedef struct dc_ctx {
    const vf__device_class *cls;
    int id;                     /* device for single-stream checks */
    int id2;                    /* device of the second stream (may be id) */
    vf__device_params params;   /* for every stream the checks create */
    bool idle_complete_at_once; /* record on an idle stream is complete when
                                   record returns (the emulated device; on
                                   CUDA it completes soon, not at once) */
} dc_ctx;

/* A new stream on device `id`; the test stops if it cannot be made. */
static inline vf__stream *dc_stream(const dc_ctx *c, int id)
{
    vf__stream *s = NULL;
    int rc = c->cls->stream_create(id, &c->params, &s);
    if (rc != 0)
        CHECK_REPORT_("%s stream_create(%d): %s (%s)", c->cls->name, id,
                      vf_error_name(rc), vf_error_detail());
    REQUIRE(rc == 0 && s != NULL);
    return s;
}

static inline vf__event *dc_record(const dc_ctx *c, vf__stream *s)
{
    vf__event *ev = NULL;
    CHECK_OK(c->cls->record(s, &ev));
    REQUIRE(ev != NULL);
    return ev;
}

/* ------------------------------------------------------------ work */

/* Appends `v` to a log only the stream writes (plain ints, see above). */
typedef struct dc_log {
    int n;
    int v[512];
} dc_log;

typedef struct dc_append {
    dc_log *log;
    int v;
} dc_append;

static inline int dc_fn_append(void *arg)
{
    dc_append *a = arg;
    a->log->v[a->log->n++] = a->v;
    return 0;
}

static inline int dc_fn_count(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
    return 0;
}

/* Fails with the int it points at. */
static inline int dc_fn_fail(void *arg)
{
    return *(const int *)arg;
}

/* Blocks the stream until the gate opens (fails after TU_TIMEOUT). */
static inline int dc_fn_gate(void *arg)
{
    return tu_gate_wait(arg, TU_TIMEOUT) ? 0 : VF_EAGAIN;
}

/* ------------------------------------------------------------ checks */

/* Work on one stream runs in submission order. */
static inline void dc_order(const dc_ctx *c)
{
    tu_phase_limit("order", 60);
    vf__stream *s = dc_stream(c, c->id);
    static dc_log log;
    static dc_append a[300];
    log.n = 0;
    for (int i = 0; i < 300; i++) {
        a[i] = (dc_append){&log, i};
        CHECK_OK(c->cls->submit(s, dc_fn_append, &a[i], 0));
    }
    CHECK_OK(c->cls->stream_sync(s));
    CHECK_EQ(log.n, 300);
    for (int i = 0; i < log.n; i++)
        if (log.v[i] != i) {
            CHECK_EQ(log.v[i], i);
            break;
        }
    c->cls->stream_destroy(s);
}

typedef struct dc_waiter {
    const dc_ctx *c;
    vf__event *ev;
    int rc;
} dc_waiter;

static inline void *dc_waiter_main(void *arg)
{
    dc_waiter *w = arg;
    vf__event_status st;
    w->rc = w->c->cls->event_wait(w->ev, &st);
    return NULL;
}

/* Submit returns before the work runs; an event is not complete (query
 * VF_EAGAIN, time 0) until the work before it is, then the host's waits
 * (several threads on one event) and queries see it complete. */
static inline void dc_async(const dc_ctx *c)
{
    tu_phase_limit("async", 60);
    vf__stream *s = dc_stream(c, c->id);
    tu_gate gate;
    tu_gate_init(&gate);
    atomic_int ran = 0;
    CHECK_OK(c->cls->submit(s, dc_fn_gate, &gate, 0));
    CHECK_OK(c->cls->submit(s, dc_fn_count, &ran, 0));
    CHECK_EQ(atomic_load(&ran), 0); /* held behind the gate */
    vf__event *ev = dc_record(c, s);
    CHECK_EQ(c->cls->event_query(ev), VF_EAGAIN);
    CHECK_EQ(c->cls->event_time_ns(ev), 0);
    dc_waiter w[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (dc_waiter){c, ev, -1};
        th[i] = tu_thread_start(dc_waiter_main, &w[i]);
    }
    CHECK_EQ(atomic_load(&ran), 0);
    tu_gate_open(&gate);
    vf__event_status st = {.code = -1};
    CHECK_OK(c->cls->event_wait(ev, &st));
    CHECK_EQ(st.code, 0);
    CHECK(!st.inherited);
    CHECK_EQ(atomic_load(&ran), 1);
    CHECK_EQ(c->cls->event_query(ev), 0);
    CHECK(c->cls->event_time_ns(ev) > 0);
    for (int i = 0; i < 3; i++) {
        tu_thread_join(th[i]);
        CHECK_EQ(w[i].rc, 0);
    }
    c->cls->event_release(ev);
    c->cls->stream_destroy(s);
    tu_gate_destroy(&gate);
}

/* An event recorded on an idle stream (new, or drained) completes with
 * nothing to wait for: at once on the emulated device. */
static inline void dc_idle_record(const dc_ctx *c)
{
    tu_phase_limit("idle record", 60);
    vf__stream *s = dc_stream(c, c->id);
    for (int round = 0; round < 2; round++) {
        vf__event *ev = dc_record(c, s);
        if (c->idle_complete_at_once)
            CHECK_EQ(c->cls->event_query(ev), 0);
        CHECK_OK(c->cls->event_wait(ev, NULL));
        CHECK_EQ(c->cls->event_query(ev), 0);
        c->cls->event_release(ev);
        atomic_int ran = 0;
        CHECK_OK(c->cls->submit(s, dc_fn_count, &ran, 0));
        CHECK_OK(c->cls->stream_sync(s));
        CHECK_EQ(atomic_load(&ran), 1);
    }
    c->cls->stream_destroy(s);
}

/* One round of dc_cross: the writer on stream A, the reader on B. */
typedef struct dc_slot {
    int x;    /* written on A (plain int) */
    int seen; /* what B read */
    double spin_us;
} dc_slot;

/* Writes `value` into the slot's x, after spinning the slot's spin_us. */
typedef struct dc_wr {
    dc_slot *slot;
    int value;
} dc_wr;

static inline int dc_fn_set(void *arg)
{
    dc_wr *w = arg;
    tu_spin_us(w->slot->spin_us);
    w->slot->x = w->value;
    return 0;
}

static inline int dc_fn_read(void *arg)
{
    dc_slot *sl = arg;
    sl->seen = sl->x;
    return 0;
}

/* A stream waiting on an event of another runs its later work after the
 * work before the event: B reads what A wrote, round after round, many
 * rounds in flight at once, between random pairs of 4 streams (on two
 * devices), with random work lengths (and, on the emulated device, random
 * latencies). The event is released right after the wait is queued. */
static inline void dc_cross(const dc_ctx *c, int epochs, bool random_latency)
{
    tu_phase_limit("cross-stream waits", 120);
    enum { NS = 4 };
    int rounds = (int)tu_scaled(300, 40);
    dc_slot *slot = calloc((size_t)rounds, sizeof *slot);
    dc_wr *wr = calloc((size_t)rounds, sizeof *wr);
    REQUIRE(slot != NULL && wr != NULL);
    tu_rng r = tu_rng_make(0xc055);
    for (int ep = 0; ep < epochs; ep++) {
        vf__stream *s[NS];
        for (int k = 0; k < NS; k++) {
            dc_ctx ck = *c;
            if (random_latency)
                ck.params.latency_ns = (uint64_t)tu_range(&r, 0, 100) * 1000;
            s[k] = dc_stream(&ck, k % 2 ? c->id2 : c->id);
        }
        memset(slot, 0, (size_t)rounds * sizeof *slot);
        for (int i = 0; i < rounds; i++) {
            int a = tu_below(&r, NS), b = (a + 1 + tu_below(&r, NS - 1)) % NS;
            slot[i].spin_us = tu_below(&r, 4) == 0 ? tu_range(&r, 1, 60) : 0;
            wr[i] = (dc_wr){&slot[i], i + 1};
            CHECK_OK(c->cls->submit(s[a], dc_fn_set, &wr[i], 0));
            vf__event *ev = dc_record(c, s[a]);
            CHECK_OK(c->cls->stream_wait(s[b], ev, true));
            c->cls->event_release(ev);
            CHECK_OK(c->cls->submit(s[b], dc_fn_read, &slot[i], 0));
        }
        for (int k = 0; k < NS; k++)
            CHECK_OK(c->cls->stream_sync(s[k]));
        for (int i = 0; i < rounds; i++)
            if (slot[i].seen != i + 1) {
                CHECK_REPORT_("epoch %d round %d: the reader saw %d, the "
                              "writer wrote %d",
                              ep, i, slot[i].seen, i + 1);
                break;
            }
        for (int k = 0; k < NS; k++)
            c->cls->stream_destroy(s[k]);
    }
    free(wr);
    free(slot);
}

/* Segments: the first failure fails the segment, later work of it is
 * skipped, stream_sync reports it, the closing event carries code and
 * message (not inherited), and the next segment starts clean. */
static inline void dc_segment(const dc_ctx *c)
{
    tu_phase_limit("segment failure", 60);
    vf__stream *s = dc_stream(c, c->id);
    atomic_int ran = 0;
    int seven = 7, nine = 9;
    CHECK_OK(c->cls->submit(s, dc_fn_count, &ran, 0));
    CHECK_OK(c->cls->submit(s, dc_fn_fail, &seven, 0));
    CHECK_OK(c->cls->submit(s, dc_fn_count, &ran, 0)); /* skipped */
    CHECK_OK(c->cls->submit(s, dc_fn_fail, &nine, 0)); /* skipped */
    CHECK_EQ(c->cls->stream_sync(s), 7);
    CHECK_OK(c->cls->submit(s, dc_fn_count, &ran, 16)); /* still skipped */
    vf__event *e1 = dc_record(c, s);
    vf__event_status st = {0};
    CHECK_EQ(c->cls->event_wait(e1, &st), 7);
    CHECK_EQ(st.code, 7);
    CHECK(!st.inherited);
    CHECK(st.message[0] != '\0');
    if (strstr(st.message, "7") == NULL)
        CHECK_REPORT_("message '%s' does not name the code 7", st.message);
    CHECK_EQ(c->cls->event_query(e1), 7);
    CHECK_EQ(atomic_load(&ran), 1);
    /* The next segment is clean. */
    CHECK_OK(c->cls->submit(s, dc_fn_count, &ran, 0));
    vf__event *e2 = dc_record(c, s);
    memset(&st, 0x55, sizeof st);
    CHECK_OK(c->cls->event_wait(e2, &st));
    CHECK_EQ(st.code, 0);
    CHECK(!st.inherited);
    CHECK_EQ(st.message[0], '\0');
    CHECK_EQ(atomic_load(&ran), 2);
    CHECK_OK(c->cls->stream_sync(s));
    c->cls->event_release(e1);
    c->cls->event_release(e2);
    c->cls->stream_destroy(s);
}

/* A stream that waits for a failed event inherits its failure into the
 * segment where the wait stands (inherited, same code and message): work
 * queued before the wait still runs, work after it is skipped; its own
 * earlier failure wins over an inherited one; a clean event passes nothing
 * on; the following segment is clean; a wait that only orders (carry
 * false) passes no failure on. */
static inline void dc_inherit(const dc_ctx *c)
{
    tu_phase_limit("inherited failure", 60);
    vf__stream *a = dc_stream(c, c->id);
    vf__stream *b = dc_stream(c, c->id2);
    tu_gate gate;
    tu_gate_init(&gate);
    atomic_int ran = 0;
    int seven = 7, nine = 9;
    /* A fails while B's wait is already queued (the event pending). */
    CHECK_OK(c->cls->submit(a, dc_fn_gate, &gate, 0));
    CHECK_OK(c->cls->submit(a, dc_fn_fail, &seven, 0));
    vf__event *ea = dc_record(c, a);
    CHECK_OK(c->cls->submit(b, dc_fn_count, &ran, 0)); /* runs */
    CHECK_OK(c->cls->stream_wait(b, ea, true));
    CHECK_OK(c->cls->submit(b, dc_fn_count, &ran, 0)); /* skipped */
    vf__event *eb = dc_record(c, b);
    tu_gate_open(&gate);
    vf__event_status sa = {0}, sb = {0};
    CHECK_EQ(c->cls->event_wait(eb, &sb), 7);
    CHECK_EQ(c->cls->event_wait(ea, &sa), 7);
    CHECK(!sa.inherited);
    CHECK(sb.inherited);
    if (strcmp(sa.message, sb.message) != 0)
        CHECK_REPORT_("inherited message '%s' != '%s'", sb.message, sa.message);
    CHECK_EQ(atomic_load(&ran), 1);

    /* The next segment of B is clean; a wait on the complete failed event
     * (B idle) inherits again; B's own earlier failure wins. */
    CHECK_OK(c->cls->submit(b, dc_fn_count, &ran, 0));
    vf__event *eb2 = dc_record(c, b);
    CHECK_OK(c->cls->event_wait(eb2, NULL));
    CHECK_EQ(atomic_load(&ran), 2);
    CHECK_OK(c->cls->stream_wait(b, ea, true));
    vf__event *eb3 = dc_record(c, b);
    memset(&sb, 0, sizeof sb);
    CHECK_EQ(c->cls->event_wait(eb3, &sb), 7);
    CHECK(sb.inherited);
    CHECK_OK(c->cls->submit(b, dc_fn_fail, &nine, 0));
    CHECK_OK(c->cls->stream_wait(b, ea, true));
    vf__event *eb4 = dc_record(c, b);
    memset(&sb, 0, sizeof sb);
    CHECK_EQ(c->cls->event_wait(eb4, &sb), 9);
    CHECK(!sb.inherited);
    /* A clean event passes nothing on. */
    CHECK_OK(c->cls->submit(a, dc_fn_count, &ran, 0));
    vf__event *ea2 = dc_record(c, a);
    CHECK_OK(c->cls->stream_wait(b, ea2, true));
    CHECK_OK(c->cls->submit(b, dc_fn_count, &ran, 0));
    vf__event *eb5 = dc_record(c, b);
    CHECK_OK(c->cls->event_wait(eb5, NULL));
    CHECK_EQ(atomic_load(&ran), 4);
    /* A wait that only orders (its work read what B overwrites) passes no
     * failure on: B's work runs and its segment is clean. */
    CHECK_OK(c->cls->stream_wait(b, ea, false));
    CHECK_OK(c->cls->submit(b, dc_fn_count, &ran, 0));
    vf__event *eb6 = dc_record(c, b);
    CHECK_OK(c->cls->event_wait(eb6, NULL));
    CHECK_EQ(atomic_load(&ran), 5);

    vf__event *all[] = {ea, eb, eb2, eb3, eb4, ea2, eb5, eb6};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        c->cls->event_release(all[i]);
    c->cls->stream_destroy(a);
    c->cls->stream_destroy(b);
    tu_gate_destroy(&gate);
}

/* Completion times of a stream's events are non-zero and monotone. */
static inline void dc_times(const dc_ctx *c)
{
    tu_phase_limit("event times", 60);
    enum { NE = 40 };
    vf__stream *s = dc_stream(c, c->id);
    vf__event *ev[NE];
    static dc_slot sl[NE];
    static dc_wr w[NE];
    tu_rng r = tu_rng_make(0x7173);
    for (int i = 0; i < NE; i++) {
        sl[i].spin_us = tu_range(&r, 0, 30);
        w[i] = (dc_wr){&sl[i], i};
        if (tu_below(&r, 3))
            CHECK_OK(c->cls->submit(s, dc_fn_set, &w[i], 0));
        ev[i] = dc_record(c, s);
    }
    uint64_t prev = 0;
    for (int i = NE - 1; i >= 0; i--)
        CHECK_OK(c->cls->event_wait(ev[i], NULL));
    for (int i = 0; i < NE; i++) {
        uint64_t t = c->cls->event_time_ns(ev[i]);
        if (t == 0 || t < prev) {
            CHECK_REPORT_("event %d: time %llu after %llu", i,
                          (unsigned long long)t, (unsigned long long)prev);
            break;
        }
        prev = t;
    }
    for (int i = 0; i < NE; i++)
        c->cls->event_release(ev[i]);
    c->cls->stream_destroy(s);
}

/* stream_destroy waits for the work still queued; an event recorded
 * before it stays valid (complete) after it. */
static inline void dc_destroy_drains(const dc_ctx *c)
{
    tu_phase_limit("destroy drains", 60);
    vf__stream *s = dc_stream(c, c->id);
    atomic_int ran = 0;
    static dc_slot sl;
    static dc_wr w;
    sl.spin_us = 50;
    w = (dc_wr){&sl, 1};
    for (int i = 0; i < 100; i++) {
        CHECK_OK(c->cls->submit(s, i % 10 ? dc_fn_count : dc_fn_set,
                                i % 10 ? (void *)&ran : (void *)&w, 8));
    }
    vf__event *ev = dc_record(c, s);
    c->cls->stream_destroy(s);
    CHECK_EQ(atomic_load(&ran), 90);
    CHECK_EQ(c->cls->event_query(ev), 0);
    CHECK(c->cls->event_time_ns(ev) > 0);
    c->cls->event_release(ev);
}

/* References: an event lives until its last release, whoever holds it
 * (ASan's leak check sees the rest); a caller may release an event before
 * it completes, and a stream may wait on it still. */
static inline void dc_refs(const dc_ctx *c)
{
    tu_phase_limit("references", 60);
    vf__stream *a = dc_stream(c, c->id), *b = dc_stream(c, c->id2);
    tu_gate gate;
    tu_gate_init(&gate);
    CHECK_OK(c->cls->submit(a, dc_fn_gate, &gate, 0));
    vf__event *ev = dc_record(c, a);
    for (int i = 0; i < 3; i++)
        c->cls->event_retain(ev);
    CHECK_OK(c->cls->stream_wait(b, ev, true));
    for (int i = 0; i < 3; i++)
        c->cls->event_release(ev);
    CHECK_EQ(c->cls->event_query(ev), VF_EAGAIN);
    vf__event *eb = dc_record(c, b);
    c->cls->event_release(ev); /* the last of the caller's */
    c->cls->event_release(eb); /* before it completes */
    tu_gate_open(&gate);
    CHECK_OK(c->cls->stream_sync(b));
    CHECK_OK(c->cls->stream_sync(a));
    c->cls->stream_destroy(a);
    c->cls->stream_destroy(b);
    tu_gate_destroy(&gate);
}

/* Out of memory in any call (vf__testing_fail_alloc(n) for n = 1, 2, ...
 * until a run needs fewer than n allocations) is VF_ENOMEM with a detail
 * and no other effect: retried, the call succeeds and the program's
 * results are whole; ASan's leak check sees nothing left. */
static inline void dc_fault_injection(const dc_ctx *c)
{
    tu_phase_limit("fault injection", 120);
    int faults = 0, surfaced = 0;
    for (uint64_t n = 1; n < 10000; n++) {
        atomic_int ran = 0;
        int seven = 7;
        int rc;
        vf__stream *s[2] = {NULL, NULL};
        vf__event *ev[3] = {NULL, NULL, NULL};
        vf__testing_fail_alloc(n);
#define DC_TRY(call)                                                           \
    do {                                                                       \
        rc = (call);                                                           \
        if (rc == VF_ENOMEM) {                                                 \
            surfaced++;                                                        \
            if (vf_error_detail()[0] == '\0')                                  \
                CHECK_REPORT_("n=%llu: %s: VF_ENOMEM without a detail",        \
                              (unsigned long long)n, #call);                   \
            rc = (call);                                                       \
        }                                                                      \
        if (rc != 0)                                                           \
            CHECK_REPORT_("n=%llu: %s returned %s (%s)",                       \
                          (unsigned long long)n, #call, vf_error_name(rc),     \
                          vf_error_detail());                                  \
    } while (0)
        for (int k = 0; k < 2; k++)
            DC_TRY(
                c->cls->stream_create(k ? c->id2 : c->id, &c->params, &s[k]));
        if (s[0] == NULL || s[1] == NULL)
            break;
        DC_TRY(c->cls->submit(s[0], dc_fn_count, &ran, 0));
        DC_TRY(c->cls->submit(s[0], dc_fn_fail, &seven, 0));
        DC_TRY(c->cls->record(s[0], &ev[0]));
        DC_TRY(c->cls->submit(s[1], dc_fn_count, &ran, 0));
        if (ev[0] != NULL)
            DC_TRY(c->cls->stream_wait(s[1], ev[0], true));
        DC_TRY(c->cls->submit(s[1], dc_fn_count, &ran, 0)); /* skipped */
        DC_TRY(c->cls->record(s[1], &ev[1]));
        DC_TRY(c->cls->submit(s[1], dc_fn_count, &ran, 0));
        DC_TRY(c->cls->record(s[1], &ev[2]));
#undef DC_TRY
        bool reached = vf__testing_alloc_count() >= n;
        vf__testing_fail_alloc(0);
        if (reached)
            faults++;
        vf__event_status st = {0};
        if (ev[1] != NULL) {
            CHECK_EQ(c->cls->event_wait(ev[1], &st), 7);
            CHECK(st.inherited);
        }
        if (ev[2] != NULL)
            CHECK_OK(c->cls->event_wait(ev[2], NULL));
        CHECK_OK(c->cls->stream_sync(s[1]));
        CHECK_EQ(c->cls->stream_sync(s[0]), 0);
        if (atomic_load(&ran) != 3)
            CHECK_REPORT_("n=%llu: %d submissions ran, expected 3",
                          (unsigned long long)n, atomic_load(&ran));
        for (int k = 0; k < 3; k++)
            c->cls->event_release(ev[k]);
        for (int k = 0; k < 2; k++)
            c->cls->stream_destroy(s[k]);
        if (!reached)
            break;
    }
    printf("  fault injection: %d allocations failed in turn, %d surfaced "
           "as VF_ENOMEM\n",
           faults, surfaced);
    CHECK(faults > 0);
    CHECK_EQ(surfaced, faults);
}

#endif /* VF_TEST_DEVICE_CHECK_H */
