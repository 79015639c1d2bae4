// calls_cuda.cu: the host-side cost of each CUDA call the engine makes
// around a device op, measured on the GPU at hand, to calibrate the
// emulated device's costs (src/device/emulated.c, VF_EMULATED_*_NS;
// docs/PERFORMANCE.md, "Device ops").
//
// Each figure is the median over rounds of the mean host time of one call
// in a round's loop (the loop timed alone: queued work is drained between
// rounds, outside the timing), in nanoseconds; `reps` rounds of `calls`
// calls, except launches and copies, which go in rounds of at most 512
// (as many calls in all) so that the launch queue never fills:
//   launch       an empty kernel <<<1, 1, 0, stream>>>  (cudaLaunchKernel)
//   copy         cudaMemcpyAsync of 4 KiB, pinned host to device
//   record       cudaEventRecord of a timing event (cudaEventCreate: the
//                kind the CUDA class makes, since its events also time the
//                profiler's spans)
//   record_nt    the same with cudaEventDisableTiming
//   wait         cudaStreamWaitEvent on an event of another stream
//   query        cudaEventQuery of a completed event
//   hostfn       the latency of cudaLaunchHostFunc on an idle stream: from
//                the call to the function running on CUDA's thread
//   signal       the latency of an event on an idle stream: from
//                cudaEventRecord to cudaEventQuery first seeing it done
//   graph1       cudaGraphLaunch of a CUDA graph of 1 node, and
//   graph64      of 64, each node an empty kernel and an external event
//                record (what the CUDA class captures for a device op of a
//                replayed graph: src/device/cuda.c), made by stream capture
//   graph_node   (graph64 - graph1) / 63: what a node adds to a launch
// and last a line of the environment that sets the emulated device to them:
//   ENV VF_EMULATED_LAUNCH_NS=... VF_EMULATED_RECORD_NS=...
//       VF_EMULATED_WAIT_NS=... VF_EMULATED_QUERY_NS=...
//       VF_EMULATED_GRAPH_LAUNCH_NS=... VF_EMULATED_GRAPH_NODE_NS=...
// (launch: the mean of launch and copy, which the emulated device's one
// submit cost stands for; the host-function latency is left out: the
// emulated device charges it only to model vf_run_submit work, off by
// default, docs/PERFORMANCE.md).
//
// Output: CALL name=... ns=<median> min_ns=... max_ns=..., then ENV.
// Exit 0; 1 when CUDA fails; 77 when there is no GPU.
//
// Usage: vfbench-device-calls [--calls N] [--reps N] [--device N]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.h"

__global__ void empty_kernel()
{
}

struct Stat {
    double median, min, max;
};

static Stat stat_of(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2], v.front(), v.back()};
}

static void print(const char *name, Stat s)
{
    std::printf("CALL name=%s ns=%.0f min_ns=%.0f max_ns=%.0f\n", name,
                s.median, s.min, s.max);
}

// Rounds of `calls` calls of `f(i)`, the loop alone timed; `drain` after
// each round, untimed. The mean per call of each round.
template <class F, class D> static Stat loop(int reps, int calls, F f, D drain)
{
    std::vector<double> per;
    for (int r = 0; r <= reps; r++) { // round 0: warm-up
        double t0 = now_ns();
        for (int i = 0; i < calls; i++)
            f(i);
        double t = (now_ns() - t0) / calls;
        drain();
        if (r > 0)
            per.push_back(t);
    }
    return stat_of(per);
}

static std::atomic<double> hostfn_ran{0};
static void CUDART_CB hostfn(void *)
{
    hostfn_ran.store(now_ns());
}

int main(int argc, char **argv)
{
    int calls = 20000, reps = 7, device = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (std::strcmp(a, "--calls") == 0 && v && std::atoi(v) > 0)
            calls = std::atoi(argv[++i]);
        else if (std::strcmp(a, "--reps") == 0 && v && std::atoi(v) > 0)
            reps = std::atoi(argv[++i]);
        else if (std::strcmp(a, "--device") == 0 && v && std::atoi(v) >= 0)
            device = std::atoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: vfbench-device-calls [--calls N] "
                                 "[--reps N] [--device N]\n");
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev <= device) {
        std::fprintf(stderr, "vfbench-device-calls: no CUDA device %d\n",
                     device);
        return 77;
    }
    CK(cudaSetDevice(device));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, device));
    std::printf("# device=\"%s\" calls=%d reps=%d\n", prop.name, calls, reps);

    cudaStream_t s, other;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    auto drain = [&] { CK(cudaDeviceSynchronize()); };
    // A launch queue holds about a thousand launches before a launch
    // blocks: rounds of at most 512 queued calls keep it from filling.
    int queued = std::min(calls, 512);

    Stat launch = loop(
        reps * (calls / queued), queued,
        [&](int) { empty_kernel<<<1, 1, 0, s>>>(); }, drain);
    CK(cudaGetLastError());
    print("launch", launch);

    char *host, *dev;
    CK(cudaMallocHost(&host, 4096));
    CK(cudaMalloc(&dev, 4096));
    std::memset(host, 1, 4096);
    Stat copy = loop(
        reps * (calls / queued), queued,
        [&](int) {
            CK(cudaMemcpyAsync(dev, host, 4096, cudaMemcpyHostToDevice, s));
        },
        drain);
    print("copy", copy);

    std::vector<cudaEvent_t> ev(calls), ev_nt(calls);
    for (int i = 0; i < calls; i++) {
        CK(cudaEventCreate(&ev[i]));
        CK(cudaEventCreateWithFlags(&ev_nt[i], cudaEventDisableTiming));
    }
    Stat record = loop(
        reps, calls, [&](int i) { CK(cudaEventRecord(ev[i], s)); }, drain);
    print("record", record);
    Stat record_nt = loop(
        reps, calls, [&](int i) { CK(cudaEventRecord(ev_nt[i], s)); }, drain);
    print("record_nt", record_nt);
    // ev[] now holds completed events of `s`.
    Stat wait = loop(
        reps, calls, [&](int i) { CK(cudaStreamWaitEvent(other, ev[i], 0)); },
        drain);
    print("wait", wait);
    Stat query = loop(
        reps, calls, [&](int i) { CK(cudaEventQuery(ev[i])); }, drain);
    print("query", query);

    // Latencies, one at a time on an idle stream.
    int lat_calls = std::min(calls, 200);
    std::vector<double> hf, sig;
    for (int r = 0; r <= reps; r++) {
        double sum_hf = 0, sum_sig = 0;
        for (int i = 0; i < lat_calls; i++) {
            hostfn_ran.store(0);
            double t0 = now_ns();
            CK(cudaLaunchHostFunc(s, hostfn, nullptr));
            double ran;
            while ((ran = hostfn_ran.load()) == 0) {
            }
            sum_hf += ran - t0;
            CK(cudaStreamSynchronize(s));

            t0 = now_ns();
            CK(cudaEventRecord(ev[i], s));
            cudaError_t q;
            while ((q = cudaEventQuery(ev[i])) == cudaErrorNotReady) {
            }
            CK(q);
            sum_sig += now_ns() - t0;
        }
        if (r > 0) {
            hf.push_back(sum_hf / lat_calls);
            sig.push_back(sum_sig / lat_calls);
        }
    }
    Stat hostfn_lat = stat_of(hf), signal = stat_of(sig);
    print("hostfn", hostfn_lat);
    print("signal", signal);

    // Graph launches: graphs of 1 and of 64 nodes, as the CUDA class makes
    // them (a node's work, then an external record of its event).
    Stat graphs[2];
    const int sizes[2] = {1, 64};
    for (int g = 0; g < 2; g++) {
        int n = sizes[g];
        std::vector<cudaEvent_t> ends(n);
        for (int k = 0; k < n; k++)
            CK(cudaEventCreate(&ends[k]));
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int k = 0; k < n; k++) {
            empty_kernel<<<1, 1, 0, s>>>();
            CK(cudaEventRecordWithFlags(ends[k], s, cudaEventRecordExternal));
        }
        cudaGraph_t graph;
        CK(cudaStreamEndCapture(s, &graph));
        cudaGraphExec_t exec;
        CK(cudaGraphInstantiate(&exec, graph, 0));
        int per_round = std::max(1, std::min(queued, 512 / n));
        graphs[g] = loop(
            reps * std::max(1, calls / 64 / per_round), per_round,
            [&](int) { CK(cudaGraphLaunch(exec, s)); }, drain);
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(graph));
        for (int k = 0; k < n; k++)
            CK(cudaEventDestroy(ends[k]));
    }
    print("graph1", graphs[0]);
    print("graph64", graphs[1]);
    double node_ns = std::max(0.0, (graphs[1].median - graphs[0].median) / 63);
    std::printf("CALL name=graph_node ns=%.0f\n", node_ns);

    std::printf("ENV VF_EMULATED_LAUNCH_NS=%.0f VF_EMULATED_RECORD_NS=%.0f "
                "VF_EMULATED_WAIT_NS=%.0f VF_EMULATED_QUERY_NS=%.0f "
                "VF_EMULATED_GRAPH_LAUNCH_NS=%.0f "
                "VF_EMULATED_GRAPH_NODE_NS=%.0f\n",
                (launch.median + copy.median) / 2, record.median, wait.median,
                query.median, std::max(0.0, graphs[0].median - node_ns),
                node_ns);

    for (int i = 0; i < calls; i++) {
        CK(cudaEventDestroy(ev[i]));
        CK(cudaEventDestroy(ev_nt[i]));
    }
    CK(cudaFree(dev));
    CK(cudaFreeHost(host));
    CK(cudaStreamDestroy(s));
    CK(cudaStreamDestroy(other));
    return 0;
}
