/*
 * test_device_emulated: the emulated stream device (src/device/emulated.c),
 * through its class in the table (device.h), without an engine.
 *
 * It checks, with no slowness and again with latency and bandwidth on
 * (device_check.h): order within a stream; asynchrony (submit returns
 * while the stream's work is held back) and host waits/queries from
 * several threads; an event recorded on an idle stream is complete when
 * record returns; cross-stream waits order work (B reads what A wrote,
 * hundreds of rounds in flight between random pairs of streams on two
 * devices, with random latencies); segments of errors (skip, code and
 * message in the closing event, clean next segment) and their inheritance
 * through stream_wait (inherited = true); event times monotone along a
 * stream; destroy drains pending work; references; out of memory in every
 * allocation in turn is a clean VF_ENOMEM. Then what only this device has:
 * the class table (CPU none, CUDA absent until a library registers it,
 * with a detail saying what to link and call), ids 0..7 and
 * VF_ENODEV outside, the handle is the stream, the modeled cost of a
 * submission (latency, bytes / bandwidth) as a lower bound on event times
 * (a guarantee, not a speed), a ring of waits over all 8 devices, and
 * callers' mistakes (NULLs, an event of another class) as VF_EINVAL.
 * Last, the registration door (vf__device_class_register) with a stand-in
 * CUDA class: the refusals (NULLs, another build's stamp, a built-in type,
 * a second class for a type), the core's allocation funnel handed back,
 * idempotence, and the registered class reached through the table, by
 * vf_device_count and by a push.
 */
#include "runner.h"

#include "device_check.h"

/* The table: CPU has no class, EMULATED is this one, CUDA is absent (this
 * test does not link libvarflow-cuda) with a detail naming what to link and
 * call; an unknown type has none. */
TEST_CASE(table)
{
    tu_phase("class table");
    CHECK(vf__device_class_of(VF_DEVICE_CPU) == NULL);
    const vf__device_class *emu = vf__device_class_of(VF_DEVICE_EMULATED);
    REQUIRE(emu != NULL);
    CHECK_EQ(emu->type, VF_DEVICE_EMULATED);
    CHECK(strcmp(emu->name, "emulated") == 0);
    CHECK(vf__device_class_of(VF_DEVICE_CUDA) == NULL);
    if (strstr(vf_error_detail(), "libvarflow-cuda") == NULL ||
        strstr(vf_error_detail(), "vf_cuda_register") == NULL)
        CHECK_REPORT_("no CUDA class, and the detail '%s' does not say to "
                      "link libvarflow-cuda and call vf_cuda_register",
                      vf_error_detail());
    CHECK_EQ(vf_device_count(VF_DEVICE_CUDA), 0);
    CHECK(strstr(vf_error_detail(), "vf_cuda_register") != NULL);
    CHECK(vf__device_class_of((vf_device_type)42) == NULL);
    CHECK(vf_error_detail()[0] != '\0');
}

/* The class: the table must give one. */
static const vf__device_class *emulated(void)
{
    const vf__device_class *cls = vf__device_class_of(VF_DEVICE_EMULATED);
    REQUIRE(cls != NULL);
    return cls;
}

/* Ids 0..7 exist, others are VF_ENODEV with a detail (and no stream);
 * NULL params mean no slowness; the handle is the stream itself. (The
 * class is an internal interface: the engine never passes it NULLs, and
 * its contracts are not re-checked at run time.) */
TEST_CASE(ids)
{
    tu_phase("ids");
    const vf__device_class *cls = emulated();
    CHECK_EQ(cls->count(), 8);
    vf__stream *s = (vf__stream *)&s;
    CHECK_ERR(cls->stream_create(-1, NULL, &s), VF_ENODEV);
    CHECK(s == NULL);
    CHECK(strstr(vf_error_detail(), "-1") != NULL);
    CHECK_ERR(cls->stream_create(8, NULL, &s), VF_ENODEV);
    CHECK_OK(cls->stream_create(7, NULL, &s)); /* NULL params: no slowness */
    REQUIRE(s != NULL);
    CHECK(cls->stream_handle(s) == (void *)s);
    cls->stream_destroy(s);
}

/* ------------------------------------------------------------ contract */

/* What every device must do (device_check.h), one case per check, each
 * with no slowness and again with latency 20 us and 1 GB/s on every
 * stream (and more epochs, with random latencies, of cross-stream waits). */
static const dc_ctx plain = {.id = 0, .id2 = 3, .idle_complete_at_once = true};
static const vf__device_params slow = {.latency_ns = 20000,
                                       .bytes_per_sec = 1000000000};

static void both(void (*check)(const dc_ctx *))
{
    dc_ctx c = plain;
    c.cls = emulated();
    check_context_ = "no slowness";
    check(&c);
    c.params = slow;
    check_context_ = "latency 20 us, 1 GB/s";
    check(&c);
    check_context_ = NULL;
}

TEST_CASE(order)
{
    both(dc_order);
}

TEST_CASE(async)
{
    both(dc_async);
}

TEST_CASE(idle_record)
{
    both(dc_idle_record);
}

TEST_CASE(cross)
{
    dc_ctx c = plain;
    c.cls = emulated();
    check_context_ = "no slowness";
    dc_cross(&c, 3, false);
    c.params = slow;
    check_context_ = "latency 20 us, 1 GB/s";
    dc_cross(&c, 5, true);
    check_context_ = NULL;
}

TEST_CASE(segment)
{
    both(dc_segment);
}

TEST_CASE(inherit)
{
    both(dc_inherit);
}

TEST_CASE(times)
{
    both(dc_times);
}

TEST_CASE(destroy_drains)
{
    both(dc_destroy_drains);
}

TEST_CASE(refs)
{
    both(dc_refs);
}

TEST_CASE(fault_injection)
{
    both(dc_fault_injection);
}

/* ------------------------------------------------------------ this device */

/* One submission costs at least latency + bytes / bandwidth: the events
 * around it are at least that far apart. Copies and plain work interleave
 * in order. */
TEST_CASE(cost)
{
    tu_phase_limit("latency and bandwidth", 60);
    const vf__device_class *cls = emulated();
    const uint64_t lat = 2000000;  /* 2 ms */
    const uint64_t bw = 100000000; /* 100 MB/s */
    const size_t bytes = 300000;   /* 3 ms at bw */
    vf__device_params p = {.latency_ns = lat, .bytes_per_sec = bw};
    vf__stream *s = NULL;
    CHECK_OK(cls->stream_create(1, &p, &s));
    REQUIRE(s != NULL);
    static dc_log log;
    static dc_append a[4];
    log.n = 0;
    vf__event *e0 = NULL, *e1 = NULL, *e2 = NULL;
    CHECK_OK(cls->record(s, &e0));
    for (int i = 0; i < 2; i++) {
        a[i] = (dc_append){&log, i};
        CHECK_OK(cls->submit(s, dc_fn_append, &a[i], 0)); /* latency */
    }
    CHECK_OK(cls->record(s, &e1));
    for (int i = 2; i < 4; i++) {
        a[i] = (dc_append){&log, i};
        CHECK_OK(cls->submit(s, dc_fn_append, &a[i], i == 2 ? bytes : 0));
    }
    CHECK_OK(cls->record(s, &e2));
    CHECK_OK(cls->event_wait(e2, NULL));
    CHECK_OK(cls->event_wait(e0, NULL));
    uint64_t t0 = cls->event_time_ns(e0), t1 = cls->event_time_ns(e1),
             t2 = cls->event_time_ns(e2);
    uint64_t want1 = 2 * lat, want2 = 2 * lat + bytes * 1000000000ull / bw;
    if (t1 - t0 < want1 || t2 - t1 < want2)
        CHECK_REPORT_("event gaps %llu and %llu ns, at least %llu and %llu "
                      "expected",
                      (unsigned long long)(t1 - t0),
                      (unsigned long long)(t2 - t1), (unsigned long long)want1,
                      (unsigned long long)want2);
    CHECK_EQ(log.n, 4);
    for (int i = 0; i < log.n; i++)
        CHECK_EQ(log.v[i], i);
    cls->event_release(e0);
    cls->event_release(e1);
    cls->event_release(e2);
    cls->stream_destroy(s);
}

/* A ring over all 8 devices: stream k waits for stream k-1's event before
 * adding to a plain counter, so the adds are ordered (never lost, never a
 * race under TSan), round after round. */
typedef struct ring_add {
    int *counter;
    int *seen;
} ring_add;

static int fn_ring_add(void *arg)
{
    ring_add *r = arg;
    *r->seen = *r->counter;
    (*r->counter)++;
    return 0;
}

TEST_CASE(ring)
{
    tu_phase_limit("ring over 8 devices", 120);
    const vf__device_class *cls = emulated();
    enum { ND = 8 };
    int rounds = (int)tu_scaled(50, 10);
    vf__stream *s[ND];
    tu_rng r = tu_rng_make(0x219);
    for (int k = 0; k < ND; k++) {
        vf__device_params p = {.latency_ns = (uint64_t)tu_range(&r, 0, 50) *
                                             1000};
        s[k] = NULL;
        CHECK_OK(cls->stream_create(k, &p, &s[k]));
        REQUIRE(s[k] != NULL);
    }
    int counter = 0;
    int n = rounds * ND;
    ring_add *adds = calloc((size_t)n, sizeof *adds);
    int *seen = calloc((size_t)n, sizeof *seen);
    REQUIRE(adds != NULL && seen != NULL);
    vf__event *prev = NULL;
    for (int i = 0; i < n; i++) {
        vf__stream *cur = s[i % ND];
        if (prev != NULL) {
            CHECK_OK(cls->stream_wait(cur, prev, true));
            cls->event_release(prev);
        }
        adds[i] = (ring_add){&counter, &seen[i]};
        CHECK_OK(cls->submit(cur, fn_ring_add, &adds[i], 0));
        prev = NULL;
        CHECK_OK(cls->record(cur, &prev));
    }
    CHECK_OK(cls->event_wait(prev, NULL));
    cls->event_release(prev);
    CHECK_EQ(counter, n);
    for (int i = 0; i < n; i++)
        if (seen[i] != i) {
            CHECK_REPORT_("add %d saw %d", i, seen[i]);
            break;
        }
    for (int k = 0; k < ND; k++)
        cls->stream_destroy(s[k]);
    free(seen);
    free(adds);
}

/* A stand-in for a device library's class: CUDA's type, no devices. */
static int fake_count(void)
{
    return vf_error_set_detail(0, "fake class: no device");
}

static const vf__device_class fake_cuda = {
    .type = VF_DEVICE_CUDA, .name = "fake-cuda", .count = fake_count};
static const vf__device_class fake_cuda2 = {
    .type = VF_DEVICE_CUDA, .name = "fake-cuda-2", .count = fake_count};

/* The registration door, as libvarflow-cuda uses it (it must be the last
 * case: a registered class stays for the life of the process). */
TEST_CASE(registration)
{
    tu_phase("registration");
    const vf__device_host *host = NULL;
    const uint64_t abi = VF__DEVICE_ABI;
    CHECK_ERR(vf__device_class_register(NULL, abi, &host), VF_EINVAL);
    CHECK_ERR(vf__device_class_register(&fake_cuda, abi, NULL), VF_EINVAL);
    CHECK_ERR(vf__device_class_register(&fake_cuda, abi + 1, &host), VF_EINVAL);
    CHECK(strstr(vf_error_detail(), "one build") != NULL);
    CHECK_ERR(vf__device_class_register(&fake_cuda, abi ^ (1ull << 48), &host),
              VF_EINVAL);
    /* Built with params of another size (before they carried run_work). */
    CHECK_ERR(vf__device_class_register(&fake_cuda, abi + (8ull << 20), &host),
              VF_EINVAL);
    const vf__device_class *emu = vf__device_class_of(VF_DEVICE_EMULATED);
    CHECK_ERR(vf__device_class_register(emu, abi, &host), VF_EINVAL);
    vf__device_class other = fake_cuda;
    other.type = VF_DEVICE_CPU;
    CHECK_ERR(vf__device_class_register(&other, abi, &host), VF_EINVAL);
    other.type = (vf_device_type)42;
    CHECK_ERR(vf__device_class_register(&other, abi, &host), VF_EINVAL);
    CHECK(vf__device_class_of(VF_DEVICE_CUDA) == NULL);
    CHECK(host == NULL);

    CHECK_OK(vf__device_class_register(&fake_cuda, abi, &host));
    REQUIRE(host != NULL);
    CHECK(vf__device_class_of(VF_DEVICE_CUDA) == &fake_cuda);
    CHECK_OK(vf__device_class_register(&fake_cuda, abi, &host));
    CHECK_ERR(vf__device_class_register(&fake_cuda2, abi, &host), VF_EINVAL);
    CHECK(vf__device_class_of(VF_DEVICE_CUDA) == &fake_cuda);
    CHECK(vf__device_class_of(VF_DEVICE_EMULATED) == emu);

    /* The funnel handed back is the core's: fault injection reaches it. */
    vf__testing_fail_alloc(1);
    CHECK(host->malloc(16) == NULL);
    CHECK_EQ(vf__testing_alloc_count(), 1);
    void *p = host->calloc(2, 8);
    CHECK(p != NULL);
    vf__testing_fail_alloc(0);
    free(p);

    /* The engine reaches it through the table like a built-in class. */
    CHECK_EQ(vf_device_count(VF_DEVICE_CUDA), 0);
    CHECK(strstr(vf_error_detail(), "fake class") != NULL);
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_workers = 1}));
    CHECK_ERR(vf_engine_push(
                  e, &(vf_op){.fn = tu_nop, .device = {VF_DEVICE_CUDA, 0}}),
              VF_ENODEV);
    CHECK(strstr(vf_error_detail(), "no fake-cuda device 0") != NULL);
    CHECK_OK(vf_engine_destroy(e));
}

TEST_MAIN("test_device_emulated", 240)
