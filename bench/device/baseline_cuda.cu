// baseline_cuda.cu: the device pipeline of examples/device_pipeline.c
// written by hand in CUDA, with no engine (issue 20, item 1): the physical
// bound of this program on the GPU at hand, to put beside the varflow run
// of the same sizes (pipeline_vf.c, which prints the same lines).
//
// Per batch: copy in (pinned host -> device), a kernel on the batch, copy
// out (device -> pinned host), with the sizes of bench/device/sets.h.
// Two ways:
//   two-streams  a copy stream and a compute stream, ordered by events
//                (cudaEventDisableTiming), issued software-pipelined: the
//                copy stream gets copy-in b+1 before copy-out b, so batch
//                b's kernel runs while b+1 comes in and b-1 goes out. The
//                host never waits until the end.
//   one-stream   everything on one stream in program order, no events:
//                no overlap at all.
// Each is run `reps` times after one warm-up; a run is timed on the host
// from the first call to the return of cudaDeviceSynchronize (what
// vf_engine_wait_all covers in the varflow run). Then one more pass on one
// stream with a timing event between every two ops gives each op's own
// device time, and the two-stream run's issue loop, timed alone, gives the
// host time the hand-written program spends per op (its API calls): the
// figure the engine's own per-op cost is compared with.
//
// Output (one line each, key=value):
//   # device=... set=... batches=... floats=... bytes=... rounds=... reps=...
//   RESULT impl=cuda mode=two-streams|one-stream set=... batches=...
//          total_us=<median> min_us=... max_us=... per_batch_us=...
//          per_op_us=...
//   OP impl=cuda set=... op=copy_in|kernel|copy_out device_us=<mean>
//          min_us=... max_us=...
//   HOST impl=cuda set=... issue_us_per_op=...
// Exit 0; 1 when a result differs from the serial loop or CUDA fails; 77
// when there is no GPU (nothing measured).
//
// Usage: vfbench-device-cuda [--set large|tiny] [--batches N] [--reps N]
//                            [--device N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.h"
#include "device_pipeline_cuda.h" /* examples/: the kernels and copies */
#include "sets.h"

static double now_us()
{
    return now_ns() / 1e3;
}

struct Batch {
    float *in, *dev, *out;
};

struct Pipe {
    const dp_set *set;
    int device, nbatches;
    std::vector<Batch> b;
    cudaStream_t copy, comp;
    std::vector<cudaEvent_t> in_done, k_done;
};

static void need(int rc)
{
    if (rc != 0)
        std::exit(1);
}

static void copy_in(Pipe &p, int i, cudaStream_t s)
{
    need(pipeline_cuda_copy(p.device, s, p.b[i].dev, p.b[i].in,
                            p.set->floats * sizeof(float)));
}

static void kernel(Pipe &p, int i, cudaStream_t s)
{
    need(pipeline_cuda_compute(p.device, s, p.b[i].dev, p.set->floats,
                               p.set->rounds));
}

static void copy_out(Pipe &p, int i, cudaStream_t s)
{
    need(pipeline_cuda_copy(p.device, s, p.b[i].out, p.b[i].dev,
                            p.set->floats * sizeof(float)));
}

// Two streams and events, software-pipelined (see the top).
static void two_streams(Pipe &p)
{
    int n = p.nbatches;
    copy_in(p, 0, p.copy);
    CK(cudaEventRecord(p.in_done[0], p.copy));
    for (int i = 0; i < n; i++) {
        if (i + 1 < n) {
            copy_in(p, i + 1, p.copy);
            CK(cudaEventRecord(p.in_done[i + 1], p.copy));
        }
        CK(cudaStreamWaitEvent(p.comp, p.in_done[i], 0));
        kernel(p, i, p.comp);
        CK(cudaEventRecord(p.k_done[i], p.comp));
        CK(cudaStreamWaitEvent(p.copy, p.k_done[i], 0));
        copy_out(p, i, p.copy);
    }
}

static void one_stream(Pipe &p)
{
    for (int i = 0; i < p.nbatches; i++) {
        copy_in(p, i, p.comp);
        kernel(p, i, p.comp);
        copy_out(p, i, p.comp);
    }
}

static bool check(const Pipe &p)
{
    float x[CHECK_FLOATS];
    size_t n = std::min<size_t>(CHECK_FLOATS, p.set->floats);
    for (int i = 0; i < p.nbatches; i++) {
        for (size_t k = 0; k < n; k++)
            x[k] = dp_input(i, k);
        dp_serial(x, n, p.set->rounds);
        if (std::memcmp(x, p.b[i].out, n * sizeof(float)) != 0) {
            std::fprintf(stderr,
                         "vfbench-device-cuda: batch %d differs from "
                         "the serial loop\n",
                         i);
            return false;
        }
    }
    return true;
}

static void clear_outputs(Pipe &p)
{
    for (int i = 0; i < p.nbatches; i++)
        std::memset(p.b[i].out, 0, p.set->floats * sizeof(float));
}

// `reps` timed runs of `run` after a warm-up; prints its RESULT line.
static bool measure(Pipe &p, const char *mode, void (*run)(Pipe &), int reps)
{
    std::vector<double> t;
    clear_outputs(p);
    run(p); // warm-up
    CK(cudaDeviceSynchronize());
    for (int r = 0; r < reps; r++) {
        clear_outputs(p);
        CK(cudaDeviceSynchronize());
        double t0 = now_us();
        run(p);
        CK(cudaDeviceSynchronize());
        t.push_back(now_us() - t0);
        if (!check(p))
            return false;
    }
    std::sort(t.begin(), t.end());
    double med = t[t.size() / 2];
    std::printf("RESULT impl=cuda mode=%s set=%s batches=%d total_us=%.1f "
                "min_us=%.1f max_us=%.1f per_batch_us=%.2f per_op_us=%.2f\n",
                mode, p.set->name, p.nbatches, med, t.front(), t.back(),
                med / p.nbatches, med / (3.0 * p.nbatches));
    return true;
}

// Each op's own device time: one stream, a timing event between every two
// ops.
static void op_times(Pipe &p)
{
    int n = p.nbatches;
    std::vector<cudaEvent_t> ev(3 * (size_t)n + 1);
    for (auto &e : ev)
        CK(cudaEventCreate(&e));
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(ev[0], p.comp));
    for (int i = 0; i < n; i++) {
        copy_in(p, i, p.comp);
        CK(cudaEventRecord(ev[3 * i + 1], p.comp));
        kernel(p, i, p.comp);
        CK(cudaEventRecord(ev[3 * i + 2], p.comp));
        copy_out(p, i, p.comp);
        CK(cudaEventRecord(ev[3 * i + 3], p.comp));
    }
    CK(cudaDeviceSynchronize());
    static const char *const names[3] = {"copy_in", "kernel", "copy_out"};
    for (int k = 0; k < 3; k++) {
        double sum = 0, lo = 1e30, hi = 0;
        for (int i = 0; i < n; i++) {
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, ev[3 * i + k], ev[3 * i + k + 1]));
            double us = ms * 1e3;
            sum += us;
            lo = std::min(lo, us);
            hi = std::max(hi, us);
        }
        std::printf("OP impl=cuda set=%s op=%s device_us=%.2f min_us=%.2f "
                    "max_us=%.2f\n",
                    p.set->name, names[k], sum / n, lo, hi);
    }
    for (auto &e : ev)
        CK(cudaEventDestroy(e));
}

// The host time the two-stream program's calls take per op (its issue
// loop alone, the device drained before and after).
static void issue_cost(Pipe &p, int reps)
{
    std::vector<double> t;
    for (int r = 0; r < reps; r++) {
        CK(cudaDeviceSynchronize());
        double t0 = now_us();
        two_streams(p);
        t.push_back(now_us() - t0);
        CK(cudaDeviceSynchronize());
    }
    std::sort(t.begin(), t.end());
    std::printf("HOST impl=cuda set=%s issue_us_per_op=%.3f (copy or kernel, "
                "with its event record and stream wait; median of %d)\n",
                p.set->name, t[t.size() / 2] / (3.0 * p.nbatches), reps);
}

int main(int argc, char **argv)
{
    const dp_set *set = dp_set_named("large");
    int batches = 0, reps = 5, device = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (std::strcmp(a, "--set") == 0 && v && dp_set_named(v))
            set = dp_set_named(v), i++;
        else if (std::strcmp(a, "--batches") == 0 && v && std::atoi(v) > 0)
            batches = std::atoi(v), i++;
        else if (std::strcmp(a, "--reps") == 0 && v && std::atoi(v) > 0)
            reps = std::atoi(v), i++;
        else if (std::strcmp(a, "--device") == 0 && v && std::atoi(v) >= 0)
            device = std::atoi(v), i++;
        else {
            std::fprintf(stderr, "usage: vfbench-device-cuda [--set "
                                 "large|tiny] [--batches N] [--reps N] "
                                 "[--device N]\n");
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || device >= ndev) {
        std::printf("vfbench-device-cuda: SKIPPED: no CUDA device %d\n",
                    device);
        return 77;
    }
    CK(cudaSetDevice(device));
    Pipe p;
    p.set = set;
    p.device = device;
    p.nbatches = batches ? batches : set->batches;
    p.b.resize((size_t)p.nbatches);
    for (auto &b : p.b) {
        b.in = pipeline_cuda_host_alloc(set->floats);
        b.out = pipeline_cuda_host_alloc(set->floats);
        b.dev = pipeline_cuda_device_alloc(device, set->floats);
        if (!b.in || !b.out || !b.dev) {
            std::fprintf(stderr, "vfbench-device-cuda: out of memory\n");
            return 1;
        }
    }
    for (int i = 0; i < p.nbatches; i++)
        for (size_t k = 0; k < set->floats; k++)
            p.b[i].in[k] = dp_input(i, k);
    CK(cudaStreamCreateWithFlags(&p.copy, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&p.comp, cudaStreamNonBlocking));
    p.in_done.resize((size_t)p.nbatches);
    p.k_done.resize((size_t)p.nbatches);
    for (int i = 0; i < p.nbatches; i++) {
        CK(cudaEventCreateWithFlags(&p.in_done[i], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&p.k_done[i], cudaEventDisableTiming));
    }
    std::printf("# device=\"%s\" set=%s batches=%d floats=%zu bytes=%zu "
                "rounds=%d reps=%d\n",
                pipeline_cuda_device_name(device), set->name, p.nbatches,
                set->floats, set->floats * sizeof(float), set->rounds, reps);
    bool ok = measure(p, "two-streams", two_streams, reps) &&
              measure(p, "one-stream", one_stream, reps);
    if (ok) {
        op_times(p);
        issue_cost(p, reps);
    }
    for (int i = 0; i < p.nbatches; i++) {
        cudaEventDestroy(p.in_done[i]);
        cudaEventDestroy(p.k_done[i]);
        pipeline_cuda_host_free(p.b[i].in);
        pipeline_cuda_host_free(p.b[i].out);
        pipeline_cuda_device_free(p.b[i].dev);
    }
    cudaStreamDestroy(p.copy);
    cudaStreamDestroy(p.comp);
    return ok ? 0 : 1;
}
