/*
 * test_device_costs: the emulated device's model of what CUDA calls cost
 * (src/device/emulated.c, "Costs"), through its class in the table.
 *
 * It checks that each cost is charged where CUDA charges it, as a lower
 * bound (a guarantee of the model, not a speed): every submit, record,
 * stream_wait, event_query, event_wait and stream_sync keeps the calling
 * thread at least its cost (the defaults when the environment says
 * nothing, and values set through it); a host-function latency holds each
 * piece of work on the stream (event times at least that far apart); 0
 * turns a cost off; an empty variable counts as unset; a malformed or
 * out-of-range value makes stream_create fail with VF_EINVAL naming the
 * variable and its value, vf_engine_create refuses it so (as every VF_*
 * setting), and a value made bad after the create changes nothing (the
 * engine read them once, at create). Last, an engine's device ops
 * are still ordered right with every cost on (a chain on two streams of one
 * device, values checked).
 */
#include "runner.h"

#include "device/device.h"

static const char *const cost_vars[] = {
    "VF_EMULATED_LAUNCH_NS",    "VF_EMULATED_RECORD_NS",
    "VF_EMULATED_WAIT_NS",      "VF_EMULATED_QUERY_NS",
    "VF_EMULATED_HOSTFN_NS",    "VF_EMULATED_GRAPH_LAUNCH_NS",
    "VF_EMULATED_GRAPH_NODE_NS"};
#define NCOSTS ((int)(sizeof cost_vars / sizeof cost_vars[0]))

static void unset_costs(void)
{
    for (int i = 0; i < NCOSTS; i++)
        unsetenv(cost_vars[i]);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const vf__device_class *emu(void)
{
    const vf__device_class *cls = vf__device_class_of(VF_DEVICE_EMULATED);
    REQUIRE(cls != NULL);
    return cls;
}

static int fn_nothing(void *arg)
{
    (void)arg;
    return 0;
}

/* Host time of `n` calls of each kind on one stream, in ns per call. */
typedef struct per_call {
    uint64_t submit, record, wait, query, event_wait, sync;
} per_call;

static per_call measure(int n)
{
    const vf__device_class *cls = emu();
    vf__stream *s = NULL, *s2 = NULL;
    CHECK_OK(cls->stream_create(0, NULL, &s));
    CHECK_OK(cls->stream_create(1, NULL, &s2));
    REQUIRE(s != NULL && s2 != NULL);
    per_call pc = {0};
    vf__event *ev = NULL;
    uint64_t t = now_ns();
    for (int i = 0; i < n; i++)
        CHECK_OK(cls->submit(s, fn_nothing, NULL, 0));
    pc.submit = (now_ns() - t) / (uint64_t)n;
    CHECK_OK(cls->stream_sync(s));
    t = now_ns();
    for (int i = 0; i < n; i++) {
        vf__event *e = NULL;
        CHECK_OK(cls->record(s, &e));
        if (i + 1 == n)
            ev = e;
        else
            cls->event_release(e);
    }
    pc.record = (now_ns() - t) / (uint64_t)n;
    REQUIRE(ev != NULL);
    CHECK_OK(cls->event_wait(ev, NULL));
    t = now_ns();
    for (int i = 0; i < n; i++)
        CHECK_OK(cls->stream_wait(s2, ev, true));
    pc.wait = (now_ns() - t) / (uint64_t)n;
    t = now_ns();
    for (int i = 0; i < n; i++)
        CHECK_OK(cls->event_query(ev));
    pc.query = (now_ns() - t) / (uint64_t)n;
    t = now_ns();
    for (int i = 0; i < n; i++)
        CHECK_OK(cls->event_wait(ev, NULL));
    pc.event_wait = (now_ns() - t) / (uint64_t)n;
    CHECK_OK(cls->stream_sync(s2));
    t = now_ns();
    for (int i = 0; i < n; i++)
        CHECK_OK(cls->stream_sync(s2));
    pc.sync = (now_ns() - t) / (uint64_t)n;
    cls->event_release(ev);
    cls->stream_destroy(s2);
    cls->stream_destroy(s);
    return pc;
}

static void at_least(const char *what, uint64_t got, uint64_t want)
{
    if (got < want)
        CHECK_REPORT_("%s: %llu ns a call, at least %llu expected", what,
                      (unsigned long long)got, (unsigned long long)want);
}

/* Unset, each call costs at least its default (emulated.c). */
TEST_CASE(defaults_charged)
{
    unset_costs();
    per_call pc = measure(200);
    at_least("submit (launch, default 2650)", pc.submit, 2650);
    at_least("record (default 1290)", pc.record, 1290);
    at_least("stream_wait (default 200)", pc.wait, 200);
    at_least("event_query (default 190)", pc.query, 190);
    at_least("event_wait (query, default 190)", pc.event_wait, 190);
    at_least("stream_sync (query, default 190)", pc.sync, 190);
}

/* Values from the environment are charged; "" is unset (the default). */
TEST_CASE(values_from_environment)
{
    unset_costs();
    setenv("VF_EMULATED_LAUNCH_NS", "20000", 1);
    setenv("VF_EMULATED_RECORD_NS", "15000", 1);
    setenv("VF_EMULATED_WAIT_NS", "10000", 1);
    setenv("VF_EMULATED_QUERY_NS", "", 1); /* the default */
    per_call pc = measure(50);
    at_least("submit", pc.submit, 20000);
    at_least("record", pc.record, 15000);
    at_least("stream_wait", pc.wait, 10000);
    at_least("event_query (empty: default)", pc.query, 190);
    setenv("VF_EMULATED_QUERY_NS", "25000", 1);
    pc = measure(50);
    at_least("event_query", pc.query, 25000);
    at_least("event_wait", pc.event_wait, 25000);
    at_least("stream_sync", pc.sync, 25000);
    unset_costs();
}

/* A host-function latency holds each piece of work on the stream: the
 * events around k pieces are at least k latencies apart, and the work
 * still runs in order. */
static int fn_append(void *arg)
{
    int *log = arg;
    log[log[0] + 1] = log[0];
    log[0]++;
    return 0;
}

TEST_CASE(hostfn_latency_holds_the_stream)
{
    unset_costs();
    setenv("VF_EMULATED_HOSTFN_NS", "500000", 1); /* 0.5 ms */
    const vf__device_class *cls = emu();
    vf__stream *s = NULL;
    CHECK_OK(cls->stream_create(2, NULL, &s));
    REQUIRE(s != NULL);
    static int log[16];
    log[0] = 0;
    vf__event *e0 = NULL, *e1 = NULL;
    CHECK_OK(cls->record(s, &e0));
    for (int i = 0; i < 4; i++)
        CHECK_OK(cls->submit(s, fn_append, log, 0));
    CHECK_OK(cls->record(s, &e1));
    CHECK_OK(cls->event_wait(e1, NULL));
    uint64_t gap = cls->event_time_ns(e1) - cls->event_time_ns(e0);
    at_least("4 pieces of work", gap, 4 * 500000);
    CHECK_EQ(log[0], 4);
    for (int i = 0; i < log[0]; i++)
        CHECK_EQ(log[i + 1], i);
    cls->event_release(e0);
    cls->event_release(e1);
    cls->stream_destroy(s);
    unset_costs();
}

/* Bad values: VF_EINVAL from stream_create, naming the variable and the
 * value; the largest value (1 s) and 0 are accepted. */
TEST_CASE(bad_values_refused)
{
    static const char *const bad[] = {
        "abc", " 3", "3 ", "-1", "0x10", "1000000001", "99999999999999999999"};
    const vf__device_class *cls = emu();
    for (int v = 0; v < NCOSTS; v++) {
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            unset_costs();
            setenv(cost_vars[v], bad[b], 1);
            vf__stream *s = (vf__stream *)&s;
            CHECK_ERR(cls->stream_create(0, NULL, &s), VF_EINVAL);
            CHECK(s == NULL);
            const char *d = vf_error_detail();
            if (strstr(d, cost_vars[v]) == NULL || strstr(d, bad[b]) == NULL)
                CHECK_REPORT_("%s=\"%s\": the detail '%s' does not name both",
                              cost_vars[v], bad[b], d);
        }
        unset_costs();
        setenv(cost_vars[v], "1000000000", 1);
        vf__stream *s = NULL;
        CHECK_OK(cls->stream_create(0, NULL, &s));
        if (s != NULL)
            cls->stream_destroy(s);
        setenv(cost_vars[v], "0", 1);
        CHECK_OK(cls->stream_create(0, NULL, &s));
        if (s != NULL)
            cls->stream_destroy(s);
    }
    unset_costs();
}

/* Through an engine: vf_engine_create refuses a bad value, naming the
 * variable and its value (it took the first emulated push to see it); one
 * made bad after the create fails the push that makes the device's
 * streams, with that detail. */
TEST_CASE(bad_value_refused)
{
    const vf_config cfg = {.type = VF_ENGINE_PERDEVICE,
                           .gpu_workers = 1,
                           .gpu_copy_workers = 1,
                           .gpu_priority_workers = 1};
    for (int v = 0; v < NCOSTS; v++) {
        unset_costs();
        setenv(cost_vars[v], "fast", 1);
        vf_engine *e = (vf_engine *)&e;
        CHECK_ERR(vf_engine_create(&e, &cfg), VF_EINVAL);
        CHECK(e == NULL);
        const char *d = vf_error_detail();
        if (strstr(d, cost_vars[v]) == NULL || strstr(d, "fast") == NULL)
            CHECK_REPORT_("create: the detail '%s' does not name %s=\"fast\"",
                          d, cost_vars[v]);
    }
    /* Read once, at create: a value made bad after it fails no push nor
     * op, on any engine kind (it failed the naive engine's op and the
     * threaded ones' push: found fuzzing the environment). */
    static const vf_engine_type kinds[] = {VF_ENGINE_NAIVE, VF_ENGINE_POOLED,
                                           VF_ENGINE_PERDEVICE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        unset_costs();
        vf_config kc = cfg;
        kc.type = kinds[k];
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &kc));
        REQUIRE(e != NULL);
        setenv("VF_EMULATED_RECORD_NS", "fast", 1);
        vf_var v = tu_var(e);
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                       .writes = VF_VARS(v),
                                       .device = {VF_DEVICE_EMULATED, 3}}));
        CHECK_OK(vf_var_wait(e, v, NULL));
        unset_costs();
        tu_finish_engine(e);
    }
}

/* With every cost on (host-function latency included), a chain of device
 * ops over two streams of one device (compute and copy) keeps the serial
 * program's values. */
typedef struct step {
    uint64_t *x;
    uint64_t add;
} step;

static int dev_step(void *arg)
{
    step *s = arg;
    *s->x = *s->x * 3 + s->add; /* wraps: unsigned */
    return 0;
}

static int op_step(vf_run *run, void *arg)
{
    return vf_run_submit(run, dev_step, arg, 64);
}

TEST_CASE(chain_ordered_with_costs)
{
    unset_costs();
    setenv("VF_EMULATED_HOSTFN_NS", "20000", 1);
    enum { N = 200 };
    static step steps[N];
    static uint64_t x; /* written by the streams, read after the wait */
    x = 1;
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                               .gpu_workers = 1,
                                               .gpu_copy_workers = 1}));
    REQUIRE(e != NULL);
    vf_var v = tu_var(e);
    for (int i = 0; i < N; i++) {
        steps[i] = (step){&x, (uint64_t)(i % 7)};
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = op_step,
                        .arg = &steps[i],
                        .writes = VF_VARS(v),
                        .device = {VF_DEVICE_EMULATED, 4},
                        .property = i % 2 ? VF_PROP_COPY_TO_DEVICE
                                          : VF_PROP_NORMAL}));
    }
    CHECK_OK(vf_var_wait(e, v, NULL));
    uint64_t want = 1;
    for (int i = 0; i < N; i++)
        want = want * 3 + (uint64_t)(i % 7);
    if (x != want)
        CHECK_REPORT_("x = %llu, the serial program gives %llu",
                      (unsigned long long)x, (unsigned long long)want);
    tu_finish_engine(e);
    unset_costs();
}

TEST_MAIN("test_device_costs", 120)
