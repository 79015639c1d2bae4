/*
 * test_device_cuda: the CUDA stream device (src/device/cuda.c,
 * libvarflow-cuda), through its class in the table (device.h), without an
 * engine. Built only with libvarflow-cuda. It registers the class
 * (vf_cuda_register: 0, idempotent, the class then in the table) and exits
 * 77 (skipped), saying why, where count() is 0 (no GPU, no driver).
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
 * Device ids outside 0..count-1 are VF_ENODEV.
 */
#include "util.h"

#include <cuda_runtime_api.h>
#include <varflow_cuda.h>

#include "device_check.h"

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

int main(void)
{
    if (vf__device_class_of(VF_DEVICE_CUDA) != NULL ||
        vf_cuda_register() != 0 || vf_cuda_register() != 0) {
        printf("test_device_cuda: FAILED: registration: %s\n",
               vf_last_error_detail());
        return 1;
    }
    const vf__device_class *cls = vf__device_class_of(VF_DEVICE_CUDA);
    if (cls == NULL || cls->type != VF_DEVICE_CUDA ||
        strcmp(cls->name, "cuda") != 0) {
        printf("test_device_cuda: FAILED: no CUDA class after "
               "vf_cuda_register: %s\n",
               vf_last_error_detail());
        return 1;
    }
    int n = cls->count();
    if (n == 0) {
        printf("test_device_cuda: SKIPPED: %s\n", vf_last_error_detail());
        return 77;
    }
    tu_init("test_device_cuda", 240);
    printf("test_device_cuda: %d CUDA device(s)\n", n);
    vf__stream *s = (vf__stream *)&s;
    CHECK_ERR(cls->stream_create(-1, NULL, &s), VF_ENODEV);
    CHECK(s == NULL);
    CHECK_ERR(cls->stream_create(n, NULL, &s), VF_ENODEV);

    dc_ctx c = {.cls = cls,
                .id = 0,
                .id2 = n > 1 ? 1 : 0,
                .idle_complete_at_once = false};
    dc_run_all(&c, 3, false);
    check_device_memory(&c);
    return check_finish("test_device_cuda");
}
