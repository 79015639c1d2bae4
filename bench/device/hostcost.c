/*
 * hostcost.c: the engine's host-side cost per device op, for callgrind
 * (issue 20, item 2, the part that needs no GPU): device ops on the
 * emulated device with zero latency and every CUDA-call cost of the
 * emulated device off, so what is counted is varflow's own work and the
 * emulated device's bookkeeping (which bench/device/callgrind_device.py
 * reports apart).
 *
 * Shapes (--shape):
 *   independent  N device ops, op i writes var i, all on the compute
 *                stream: push, dispatch, begin, launch, record, release,
 *                completion, with nothing to wait for;
 *   chain        N device ops over one var, alternating the compute and
 *                the copy stream: each op's work waits for the previous
 *                one's on the device (a stream wait), and the op is
 *                dispatched when the previous one's function released the
 *                var (event ordering) or its work completed (--sync).
 * Modes: event ordering (default), or --sync (device_sync: the worker
 * waits for each op's work on the host before releasing its vars), or
 * --replay K: the shape's first K ops captured once (before the measured
 * part) as a graph with device replay (vf_graph_device_replay), launched
 * N / K times (N a multiple of K).
 *
 * The pushes and the final vf_engine_wait_all are the measured part (its wall
 * time per op is printed: a rough figure, wake-ups included); the engine
 * is made and its device started before (one warm-up op), so that
 * callgrind_device.py's difference of two runs, N and 2N ops, divided by
 * N, is the cost of one op.
 *
 * Usage: vfbench-device-hostcost [--ops N] [--shape independent|chain]
 *                                [--sync] [--replay K]
 */
#define _GNU_SOURCE 1

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <varflow.h>

static int dev_nothing(void *arg)
{
    (void)arg;
    return 0;
}

/* The op's function: it launches one piece of (empty) work on its stream,
 * what a kernel launch is on a GPU. */
static int op_launch(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, dev_nothing, NULL, 0);
}

/* The shape's n ops (see the top of the file). 0 or the first error. */
static int push_ops(vf_engine *e, const vf_var *vars, long n, int chain,
                    vf_device dev)
{
    int rc = 0;
    for (long i = 0; i < n && rc == 0; i++)
        rc = vf_engine_push(
            e, &(vf_op){.fn = op_launch,
                        .writes = VF_VARS(vars[chain ? 0 : i + 1]),
                        .device = dev,
                        .property = chain && i % 2 ? VF_PROP_COPY_TO_DEVICE
                                                   : VF_PROP_NORMAL});
    return rc;
}

int main(int argc, char **argv)
{
    long n = 10000, replay = 0;
    int chain = 0, sync = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
            n = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc)
            chain = strcmp(argv[++i], "chain") == 0;
        else if (strcmp(argv[i], "--sync") == 0)
            sync = 1;
        else if (strcmp(argv[i], "--replay") == 0 && i + 1 < argc)
            replay = strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: vfbench-device-hostcost [--ops N] "
                            "[--shape independent|chain] [--sync] "
                            "[--replay K]\n");
            return 2;
        }
    }
    if (n < 1 || replay < 0 || (replay > 0 && n % replay != 0)) {
        fprintf(stderr, "vfbench-device-hostcost: --ops must be >= 1, and a "
                        "multiple of --replay's K\n");
        return 2;
    }
    /* Zero latency: no modelled CUDA-call cost (the spins would count). */
    static const char *const costs[] = {
        "VF_EMULATED_LAUNCH_NS", "VF_EMULATED_RECORD_NS", "VF_EMULATED_WAIT_NS",
        "VF_EMULATED_QUERY_NS", "VF_EMULATED_HOSTFN_NS"};
    for (size_t i = 0; i < sizeof costs / sizeof costs[0]; i++)
        setenv(costs[i], "0", 1);
    setenv("VF_EMULATED_GRAPH_LAUNCH_NS", "0", 1);
    vf_engine *e;
    int rc = vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                               .cpu_workers = 1,
                                               .cpu_priority_workers = 1,
                                               .gpu_workers = 1,
                                               .gpu_copy_workers = 1,
                                               .gpu_priority_workers = 1,
                                               .device_sync = sync});
    if (rc != 0) {
        fprintf(stderr, "vfbench-device-hostcost: %s\n", vf_error_detail());
        return 1;
    }
    long nvars = replay > 0 ? replay : n; /* a replay's ops: the graph's */
    vf_var *vars = calloc((size_t)nvars + 1, sizeof *vars);
    if (vars == NULL)
        return 1;
    for (long i = 0; i <= (chain ? 0 : nvars); i++)
        vf_var_create(e, &vars[i]);
    vf_device dev = {VF_DEVICE_EMULATED, 0};
    /* Warm-up: the device's pools, streams and completer start here. */
    rc = vf_engine_push(
        e,
        &(vf_op){.fn = op_launch, .writes = VF_VARS(vars[0]), .device = dev});
    rc = rc || vf_engine_push(e, &(vf_op){.fn = op_launch,
                                          .writes = VF_VARS(vars[0]),
                                          .device = dev,
                                          .property = VF_PROP_COPY_TO_DEVICE});
    rc = rc || vf_engine_wait_all(e, NULL);
    vf_graph *g = NULL;
    if (replay > 0) { /* captured and recorded (one launch) before */
        rc = rc || vf_graph_begin(e);
        rc = rc || push_ops(e, vars, replay, chain, dev);
        rc = rc || vf_graph_end(e, &g);
        rc = rc || vf_graph_device_replay(e, g, true);
        rc = rc || vf_graph_launch(e, g);
        rc = rc || vf_engine_wait_all(e, NULL);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (replay > 0)
        for (long i = 0; i < n / replay && rc == 0; i++)
            rc = vf_graph_launch(e, g);
    else
        rc = rc || push_ops(e, vars, n, chain, dev);
    rc = rc || vf_engine_wait_all(e, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
    vf_stats st;
    vf_engine_stats(e, &st);
    if (rc != 0)
        fprintf(stderr, "vfbench-device-hostcost: %s\n", vf_error_detail());
    printf("ops %ld shape %s mode %s: %.2f us per op (push to the last "
           "completion, wall); host syncs %llu, stream waits %llu, same "
           "stream %llu\n",
           n, chain ? "chain" : "independent",
           replay ? "replay"
           : sync ? "sync"
                  : "events",
           us / (double)n, (unsigned long long)st.host_syncs,
           (unsigned long long)st.stream_waits,
           (unsigned long long)st.same_stream);
    if (g != NULL)
        vf_graph_destroy(e, g);
    vf_engine_destroy(e);
    free(vars);
    return rc != 0;
}
