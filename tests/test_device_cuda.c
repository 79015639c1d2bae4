/*
 * test_device_cuda: the CUDA stream device (src/device/cuda.c,
 * libvarflow-cuda), through its class in the table (device.h), without an
 * engine. Built only with libvarflow-cuda. It registers the class
 * (vf_cuda_register: 0, idempotent, the class then in the table: the case
 * `registration`, which needs no GPU); every other case skips (exit 77),
 * saying why, where count() is 0 (no GPU, no driver).
 *
 * It checks the essentials every device has (device_check.h): order within
 * a stream; asynchrony and host waits/queries from several threads; an
 * event recorded on an idle stream completes; cross-stream waits order
 * work (B reads what A wrote, rounds in flight between random pairs of
 * streams, on two devices where there are two); segments of errors in the
 * closing event and their inheritance through stream_wait; event times
 * monotone along a stream; destroy drains; references; out of memory in
 * every varflow allocation in turn is a clean VF_ENOMEM. Then that the
 * handle is a real cudaStream_t whose device work the class's events
 * order: A memsets device memory behind a slow host function, B waits for
 * A's event and copies the memory back; B must see A's value, every round.
 * A device graph (two chains of a memset and a copy back, recorded once,
 * launched again and again) leaves each copy's result by its node's event,
 * and refuses host work and records while recording. Device ids outside
 * 0..count-1 are VF_ENODEV.
 */
#include "runner.h"

#include <cuda_runtime_api.h>
#include <varflow_cuda.h>

#include "device_check.h"

/* ------------------------------------------------------------ setup */

/* The CUDA class, registered: the first call in the process checks that
 * it is absent before vf_cuda_register, that the call returns 0 twice
 * (idempotent) and that the table then holds it as "cuda". Nothing can run
 * without it: a failure stops the test. */
static const vf__device_class *cuda_class(void)
{
    static const vf__device_class *cls;
    if (cls != NULL)
        return cls;
    if (vf__device_class_of(VF_DEVICE_CUDA) != NULL ||
        vf_cuda_register() != 0 || vf_cuda_register() != 0) {
        CHECK_REPORT_("registration: %s", vf_error_detail());
        exit(1);
    }
    const vf__device_class *c = vf__device_class_of(VF_DEVICE_CUDA);
    if (c == NULL || c->type != VF_DEVICE_CUDA ||
        strcmp(c->name, "cuda") != 0) {
        CHECK_REPORT_("no CUDA class after vf_cuda_register: %s",
                      vf_error_detail());
        exit(1);
    }
    return cls = c;
}

static char no_gpu[256]; /* why there is none, for TEST_SKIP */

/* The context of the checks: device 0, and device 1 for a second stream
 * where there are two. False where there is no CUDA device (no_gpu says
 * why). */
static bool gpu(dc_ctx *c)
{
    static int n = -1;
    const vf__device_class *cls = cuda_class();
    if (n < 0) {
        n = cls->count();
        if (n == 0)
            snprintf(no_gpu, sizeof no_gpu, "%s", vf_error_detail());
        else
            printf("test_device_cuda: %d CUDA device(s)\n", n);
    }
    *c = (dc_ctx){.cls = cls,
                  .id = 0,
                  .id2 = n > 1 ? 1 : 0,
                  .idle_complete_at_once = false};
    return n > 0;
}

TEST_CASE(registration)
{
    (void)cuda_class();
}

/* Device ids outside 0..count-1 are VF_ENODEV, and no stream. */
TEST_CASE(ids)
{
    dc_ctx c;
    if (!gpu(&c))
        TEST_SKIP("%s", no_gpu);
    int n = c.cls->count();
    vf__stream *s = (vf__stream *)&s;
    CHECK_ERR(c.cls->stream_create(-1, NULL, &s), VF_ENODEV);
    CHECK(s == NULL);
    CHECK_ERR(c.cls->stream_create(n, NULL, &s), VF_ENODEV);
}

/* ------------------------------------------------------------ contract */

/* What every device must do (device_check.h), one case per check: runs
 * `check` on device 0 (and 1); false, having run nothing, without a GPU. */
static bool on_gpu(void (*check)(const dc_ctx *))
{
    dc_ctx c;
    if (!gpu(&c))
        return false;
    check(&c);
    return true;
}

TEST_CASE(order)
{
    if (!on_gpu(dc_order))
        TEST_SKIP("%s", no_gpu);
}

TEST_CASE(async)
{
    if (!on_gpu(dc_async))
        TEST_SKIP("%s", no_gpu);
}

TEST_CASE(idle_record)
{
    if (!on_gpu(dc_idle_record))
        TEST_SKIP("%s", no_gpu);
}

static void cross(const dc_ctx *c)
{
    dc_cross(c, 3, false);
}

TEST_CASE(cross)
{
    if (!on_gpu(cross))
        TEST_SKIP("%s", no_gpu);
}

TEST_CASE(segment)
{
    if (!on_gpu(dc_segment))
        TEST_SKIP("%s", no_gpu);
}

TEST_CASE(inherit)
{
    if (!on_gpu(dc_inherit))
        TEST_SKIP("%s", no_gpu);
}

TEST_CASE(times)
{
    if (!on_gpu(dc_times))
        TEST_SKIP("%s", no_gpu);
}

TEST_CASE(destroy_drains)
{
    if (!on_gpu(dc_destroy_drains))
        TEST_SKIP("%s", no_gpu);
}

TEST_CASE(refs)
{
    if (!on_gpu(dc_refs))
        TEST_SKIP("%s", no_gpu);
}

TEST_CASE(fault_injection)
{
    if (!on_gpu(dc_fault_injection))
        TEST_SKIP("%s", no_gpu);
}

/* ------------------------------------------------------------ this device */

/* Host work that holds a stream for a while (a plain spin: host functions
 * must not call CUDA). */
static int fn_slow(void *arg)
{
    tu_spin_us(*(const double *)arg);
    return 0;
}

/* A memset on stream A behind a slow host function, a copy back on stream
 * B after B waits for A's event: the copy sees the memset, round after
 * round with changing values. */
static void check_device_memory(const dc_ctx *c)
{
    tu_phase_limit("device memory ordering", 120);
    enum { N = 1 << 20 };
    vf__stream *a = dc_stream(c, c->id), *b = dc_stream(c, c->id2);
    cudaStream_t ca = (cudaStream_t)c->cls->stream_handle(a);
    cudaStream_t cb = (cudaStream_t)c->cls->stream_handle(b);
    REQUIRE(ca != NULL && cb != NULL && ca != cb);
    REQUIRE(cudaSetDevice(c->id) == cudaSuccess);
    unsigned char *dev = NULL, *host = NULL;
    REQUIRE(cudaMalloc((void **)&dev, N) == cudaSuccess);
    REQUIRE(cudaMallocHost((void **)&host, N) == cudaSuccess);
    double slow_us = 2000;
    int rounds = (int)tu_scaled(20, 5);
    for (int i = 0; i < rounds; i++) {
        int value = (i * 37 + 1) & 0xff;
        memset(host, 0, N);
        CHECK_OK(c->cls->submit(a, fn_slow, &slow_us, 0));
        CHECK(cudaMemsetAsync(dev, value, N, ca) == cudaSuccess);
        vf__event *ev = dc_record(c, a);
        CHECK_OK(c->cls->stream_wait(b, ev, true));
        CHECK(cudaMemcpyAsync(host, dev, N, cudaMemcpyDeviceToHost, cb) ==
              cudaSuccess);
        vf__event *eb = dc_record(c, b);
        CHECK_OK(c->cls->event_wait(eb, NULL));
        CHECK(c->cls->event_time_ns(eb) >= c->cls->event_time_ns(ev));
        int bad = -1;
        for (int k = 0; k < N; k += 4093)
            if (host[k] != value) {
                bad = k;
                break;
            }
        if (bad >= 0 || host[N - 1] != value)
            CHECK_REPORT_("round %d: copy saw %d at %d, memset wrote %d", i,
                          host[bad >= 0 ? bad : N - 1], bad, value);
        c->cls->event_release(ev);
        c->cls->event_release(eb);
    }
    CHECK_OK(c->cls->stream_sync(a));
    CHECK_OK(c->cls->stream_sync(b));
    cudaFreeHost(host);
    cudaFree(dev);
    c->cls->stream_destroy(a);
    c->cls->stream_destroy(b);
}

TEST_CASE(device_memory)
{
    if (!on_gpu(check_device_memory))
        TEST_SKIP("%s", no_gpu);
}

/* A device graph (device.h) on CUDA: two chains of a memset and a copy
 * back, recorded once on one stream and launched again and again; each
 * node's event completes after its work (the copies' results are there),
 * host work cannot be recorded, and record and wait are refused while
 * recording. */
static void check_device_graph(const dc_ctx *c)
{
    tu_phase_limit("device graph", 120);
    enum { N = 1 << 16 };
    const vf__device_class *cls = c->cls;
    vf__stream *s = dc_stream(c, c->id);
    cudaStream_t cs = (cudaStream_t)cls->stream_handle(s);
    REQUIRE(cudaSetDevice(c->id) == cudaSuccess);
    unsigned char *dev = NULL, *host = NULL;
    REQUIRE(cudaMalloc((void **)&dev, 2 * N) == cudaSuccess);
    REQUIRE(cudaMallocHost((void **)&host, 2 * N) == cudaSuccess);
    const uint32_t first[] = {0}, third[] = {2};
    CHECK_OK(cls->capture_begin(s));
    CHECK_OK(cls->capture_node(s, NULL, 0, NULL, 0));
    CHECK(cudaMemsetAsync(dev, 0x5a, N, cs) == cudaSuccess);
    double us = 1;
    CHECK_ERR(cls->submit(s, fn_slow, &us, 0), VF_ENOTSUP);
    vf__event *ev = NULL;
    CHECK_ERR(cls->record(s, &ev), VF_EINVAL);
    CHECK_OK(cls->capture_node(s, first, 1, first, 1));
    CHECK(cudaMemcpyAsync(host, dev, N, cudaMemcpyDeviceToHost, cs) ==
          cudaSuccess);
    CHECK_OK(cls->capture_node(s, NULL, 0, NULL, 0));
    CHECK(cudaMemsetAsync(dev + N, 0xa5, N, cs) == cudaSuccess);
    CHECK_OK(cls->capture_node(s, third, 1, third, 1));
    CHECK(cudaMemcpyAsync(host + N, dev + N, N, cudaMemcpyDeviceToHost, cs) ==
          cudaSuccess);
    vf__devgraph *g = NULL;
    CHECK_OK(cls->capture_end(s, &g));
    REQUIRE(g != NULL);
    for (int round = 0; round < 5; round++) {
        memset(host, 0, 2 * N);
        vf__event *evs[4] = {0};
        CHECK_OK(cls->graph_launch(g, s, NULL, 0, evs));
        for (int k = 0; k < 4; k++) {
            REQUIRE(evs[k] != NULL);
            CHECK_OK(cls->event_wait(evs[k], NULL));
        }
        CHECK(host[0] == 0x5a && host[N - 1] == 0x5a);
        CHECK(host[N] == 0xa5 && host[2 * N - 1] == 0xa5);
        for (int k = 0; k < 4; k++)
            cls->event_release(evs[k]);
    }
    cls->graph_release(g);
    /* A stream's own work after its graphs is its own again. */
    ev = dc_record(c, s);
    CHECK_OK(cls->event_wait(ev, NULL));
    cls->event_release(ev);
    cudaFreeHost(host);
    cudaFree(dev);
    cls->stream_destroy(s);
}

TEST_CASE(device_graph)
{
    if (!on_gpu(check_device_graph))
        TEST_SKIP("%s", no_gpu);
}

TEST_MAIN("test_device_cuda", 240)
