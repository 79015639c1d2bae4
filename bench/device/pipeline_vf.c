/*
 * pipeline_vf.c: the device pipeline of examples/device_pipeline.c on
 * varflow's per-device engine, with the sizes of bench/device/sets.h, to
 * set beside the hand-written CUDA baseline (baseline_cuda.cu), whose
 * lines it prints in the same form (issue 20).
 *
 * Per batch: copy in (a copy worker's stream), kernel (the compute
 * worker's stream), copy out (the copy worker's stream), and with
 * --host-op on a CPU op that reads the batch's output (a replay then has a
 * device graph per batch between them: its segments); one compute and
 * one copy worker, so one stream of each, as the baseline. Three modes:
 *   events  varflow's default: the streams are ordered with events;
 *   sync    device_sync: the host waits for each op's work before its vars
 *           are released (a synchronize after every op, MXNet 1.x);
 *   replay  events, the whole pipeline captured once as a graph with
 *           device replay (vf_graph_device_replay): each run is one
 *           vf_graph_launch, its work one device graph (a CUDA graph on
 *           CUDA) recorded at the warm-up.
 * On a CUDA device (built with libvarflow-cuda and a CUDA compiler, and a
 * GPU there) the ops queue the baseline's own kernels and copies
 * (examples/device_pipeline_cuda.cu) on vf_run_stream; on the emulated
 * device (no GPU, or --device emulated) each op's work is modelled: a
 * copy costs bytes / --emu-mb-per-s, a kernel sleeps --emu-kernel-us on
 * its stream, every submission at least --emu-latency-us (defaults per set,
 * sets.h), and the emulated device charges its CUDA-call costs
 * (VF_EMULATED_*_NS, docs/PERFORMANCE.md). Results are checked on each batch's
 * first CHECK_FLOATS floats against the serial loop (the emulated work computes
 * only those).
 *
 * Each mode runs --reps timed runs after a warm-up, from the first push
 * (or the launch) to the return of vf_engine_wait_all (profiler off), then,
 * but for replay (a profiled engine pushes a graph's ops one by one), one
 * profiled run, whose device spans give each op's device time and whose
 * function run times give each op's host time on its worker (--profile PATH
 * writes the events mode's profile there: .html for the report).
 *
 * Output (key=value; the baseline's RESULT and OP lines, impl=varflow-cuda
 * or varflow-emulated, and a mode= on each):
 *   # device=... set=... batches=... model=...
 *   RESULT impl=... mode=events|sync set=... batches=... total_us=<median>
 *          min_us=... max_us=... per_batch_us=... per_op_us=...
 *          host_syncs=... stream_waits=...
 *   OP impl=... mode=... set=... op=copy_in|kernel|copy_out device_us=...
 *          host_us=...
 *   RATIO impl=... set=... sync_over_events=... [replay_over_events=...]
 *
 * Usage: vfbench-device [--set large|tiny] [--batches N] [--reps N]
 *          [--device auto|cuda|emulated] [--mode both|events|sync|replay|all]
 *          [--emu-kernel-us N] [--emu-mb-per-s N] [--emu-latency-us N]
 *          [--profile PATH] [--host-op on|off]
 * Exit 0, 1 on a wrong result or an engine error, 2 on bad usage.
 */
#define _GNU_SOURCE 1

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <varflow.h>
#include <varflow_profile.h>

#include "sets.h"

#ifdef VFB_CUDA
#include <varflow_cuda.h>

#include "device_pipeline_cuda.h" /* examples/: the kernels and copies */
#endif

typedef struct batch {
    float *in, *dev, *out;
    size_t n;     /* floats the work touches (the sample on the emulator) */
    size_t bytes; /* what a copy moves */
    vf_var vin, vdev, vout, vsum;
    double sum; /* --host-op: the host's sum of the batch's output */
} batch;

typedef struct pipe {
    const dp_set *set;
    vf_device device;
    bool host_op; /* a CPU op a batch after its copy out */
    int nbatches;
    int kernel_us; /* emulated */
    batch *b;
} pipe;

static pipe P;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* --- the work on the emulated device ------------------------------------- */

static int emu_copy_in(void *arg)
{
    batch *b = arg;
    memcpy(b->dev, b->in, b->n * sizeof *b->in);
    return 0;
}

static int emu_kernel(void *arg)
{
    batch *b = arg;
    dp_serial(b->dev, b->n, P.set->rounds);
    if (P.kernel_us > 0) { /* the stream is busy for the kernel's time */
        struct timespec ts = {P.kernel_us / 1000000,
                              (long)(P.kernel_us % 1000000) * 1000};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
    }
    return 0;
}

static int emu_copy_out(void *arg)
{
    batch *b = arg;
    memcpy(b->out, b->dev, b->n * sizeof *b->out);
    return 0;
}

/* --- the ops ----------------------------------------------------------------
 */

static int op_copy_in(vf_run *run, void *arg)
{
    batch *b = arg;
#ifdef VFB_CUDA
    vf_device d = vf_run_device(run);
    if (d.type == VF_DEVICE_CUDA)
        return pipeline_cuda_copy(d.id, vf_run_stream(run), b->dev, b->in,
                                  b->bytes);
#endif
    return vf_run_submit(run, emu_copy_in, b, b->bytes);
}

static int op_kernel(vf_run *run, void *arg)
{
    batch *b = arg;
#ifdef VFB_CUDA
    vf_device d = vf_run_device(run);
    if (d.type == VF_DEVICE_CUDA)
        return pipeline_cuda_compute(d.id, vf_run_stream(run), b->dev,
                                     P.set->floats, P.set->rounds);
#endif
    return vf_run_submit(run, emu_kernel, b, 0);
}

static int op_copy_out(vf_run *run, void *arg)
{
    batch *b = arg;
#ifdef VFB_CUDA
    vf_device d = vf_run_device(run);
    if (d.type == VF_DEVICE_CUDA)
        return pipeline_cuda_copy(d.id, vf_run_stream(run), b->out, b->dev,
                                  b->bytes);
#endif
    return vf_run_submit(run, emu_copy_out, b, b->bytes);
}

/* --host-op: the host reads the batch's output (a CPU op between the
 * device ops: a replay's segments, DESIGN.md "Device replay"). */
static int op_host_sum(vf_run *run, void *arg)
{
    (void)run;
    batch *b = arg;
    double sum = 0;
    size_t n = b->n < CHECK_FLOATS ? b->n : CHECK_FLOATS;
    for (size_t k = 0; k < n; k++)
        sum += b->out[k];
    b->sum = sum;
    return 0;
}

static const char *const op_names[3] = {"copy_in", "kernel", "copy_out"};

static int push_all(vf_engine *e)
{
    int rc = 0;
    for (int i = 0; i < P.nbatches && rc == 0; i++) {
        batch *b = &P.b[i];
        rc = vf_engine_push(e, &(vf_op){.fn = op_copy_in,
                                        .arg = b,
                                        .reads = VF_VARS(b->vin),
                                        .writes = VF_VARS(b->vdev),
                                        .device = P.device,
                                        .property = VF_PROP_COPY_TO_DEVICE,
                                        .name = op_names[0]});
        if (rc == 0)
            rc = vf_engine_push(e, &(vf_op){.fn = op_kernel,
                                            .arg = b,
                                            .writes = VF_VARS(b->vdev),
                                            .device = P.device,
                                            .name = op_names[1]});
        if (rc == 0)
            rc = vf_engine_push(e,
                                &(vf_op){.fn = op_copy_out,
                                         .arg = b,
                                         .reads = VF_VARS(b->vdev),
                                         .writes = VF_VARS(b->vout),
                                         .device = P.device,
                                         .property = VF_PROP_COPY_FROM_DEVICE,
                                         .name = op_names[2]});
        if (rc == 0 && P.host_op)
            rc = vf_engine_push(e, &(vf_op){.fn = op_host_sum,
                                            .arg = b,
                                            .reads = VF_VARS(b->vout),
                                            .writes = VF_VARS(b->vsum),
                                            .name = "host_sum"});
    }
    return rc;
}

static int check(void)
{
    float x[CHECK_FLOATS];
    for (int i = 0; i < P.nbatches; i++) {
        batch *b = &P.b[i];
        size_t n = b->n < CHECK_FLOATS ? b->n : CHECK_FLOATS;
        for (size_t k = 0; k < n; k++)
            x[k] = dp_input(i, k);
        dp_serial(x, n, P.set->rounds);
        if (memcmp(x, b->out, n * sizeof *x) != 0) {
            fprintf(stderr,
                    "vfbench-device: batch %d differs from the "
                    "serial loop\n",
                    i);
            return 1;
        }
        memset(b->out, 0, n * sizeof *x);
    }
    return 0;
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The pipeline once: pushed, or the graph launched (`g`). */
static int run_once(vf_engine *e, vf_graph *g)
{
    int rc = g != NULL ? vf_graph_launch(e, g) : push_all(e);
    return rc != 0 || vf_engine_wait_all(e, NULL) != 0;
}

/* The pipeline captured as a graph with device replay; NULL on failure. */
static vf_graph *capture(vf_engine *e)
{
    vf_graph *g = NULL;
    if (vf_graph_begin(e) != 0)
        return NULL;
    int rc = push_all(e);
    if (vf_graph_end(e, &g) != 0 || rc != 0)
        return NULL;
    if (vf_graph_device_replay(e, g, true) != 0) {
        vf_graph_destroy(e, g);
        return NULL;
    }
    return g;
}

/* Runs one mode: warm-up, `reps` timed runs, one profiled run (not for
 * replay). Returns the median time in us (< 0: failed). */
static double run_mode(const char *impl, const char *mode, vf_config cfg,
                       int reps, const char *profile_path)
{
    bool replay = strcmp(mode, "replay") == 0;
    vf_engine *e;
    int rc = vf_engine_create(&e, &cfg);
    if (rc != 0) {
        fprintf(stderr, "vfbench-device: %s: %s (%s)\n", mode,
                vf_error_string(rc), vf_error_detail());
        return -1;
    }
    for (int i = 0; i < P.nbatches; i++) {
        vf_var_create(e, &P.b[i].vin);
        vf_var_create(e, &P.b[i].vdev);
        vf_var_create(e, &P.b[i].vout);
        vf_var_create(e, &P.b[i].vsum);
    }
    double *t = calloc((size_t)reps, sizeof *t);
    vf_graph *g = replay ? capture(e) : NULL;
    /* The warm-up starts every pool and stream (and records the graph). */
    rc = t == NULL || (replay && g == NULL) || run_once(e, g) != 0 ||
         check() != 0;
    vf_stats s0, s1;
    vf_engine_stats(e, &s0);
    for (int r = 0; r < reps && rc == 0; r++) {
        double t0 = now_us();
        rc = run_once(e, g);
        t[r] = now_us() - t0;
        rc = rc || check() != 0;
    }
    vf_engine_stats(e, &s1);
    if (replay && rc == 0 && s1.replays - s0.replays != (uint64_t)reps) {
        fprintf(stderr, "vfbench-device: replay: %llu of %d runs replayed\n",
                (unsigned long long)(s1.replays - s0.replays), reps);
        rc = 1;
    }
    /* The profiled run: each op's device and host time. */
    vf_profile *prof = NULL;
    rc = rc || (!replay &&
                (vf_profile_start(e) != 0 || push_all(e) != 0 ||
                 vf_engine_wait_all(e, NULL) != 0 || vf_profile_stop(e) != 0 ||
                 vf_profile_take(e, &prof) != 0 || check() != 0));
    double med = -1;
    if (rc == 0) {
        qsort(t, (size_t)reps, sizeof *t, by_double);
        med = t[reps / 2];
        printf("RESULT impl=%s mode=%s set=%s batches=%d total_us=%.1f "
               "min_us=%.1f max_us=%.1f per_batch_us=%.2f per_op_us=%.2f "
               "host_syncs=%llu stream_waits=%llu\n",
               impl, mode, P.set->name, P.nbatches, med, t[0], t[reps - 1],
               med / P.nbatches, med / ((P.host_op ? 4.0 : 3.0) * P.nbatches),
               (unsigned long long)((s1.host_syncs - s0.host_syncs) /
                                    (uint64_t)reps),
               (unsigned long long)((s1.stream_waits - s0.stream_waits) /
                                    (uint64_t)reps));
        for (int k = 0; k < 3 && prof != NULL; k++) {
            double dev = 0, host = 0;
            int n = 0, nd = 0;
            for (size_t i = 0; i < vf_profile_count(prof); i++) {
                const vf_profile_record *r = vf_profile_at(prof, i);
                if (strcmp(r->name, op_names[k]) != 0)
                    continue;
                n++;
                host += (double)(r->end_ns - r->start_ns) / 1e3;
                if (r->device_end_ns > r->device_start_ns) {
                    nd++;
                    dev += (double)(r->device_end_ns - r->device_start_ns) /
                           1e3;
                }
            }
            printf("OP impl=%s mode=%s set=%s op=%s device_us=%.2f "
                   "host_us=%.2f\n",
                   impl, mode, P.set->name, op_names[k], nd ? dev / nd : 0.0,
                   n ? host / n : 0.0);
        }
        if (profile_path != NULL && prof != NULL &&
            vf_profile_write(prof, profile_path, VF_PROFILE_AUTO) != 0)
            fprintf(stderr, "vfbench-device: %s: %s\n", profile_path,
                    vf_error_detail());
    } else {
        fprintf(stderr, "vfbench-device: %s: %s\n", mode, vf_error_detail());
    }
    vf_profile_destroy(prof);
    free(t);
    if (g != NULL)
        vf_graph_destroy(e, g);
    vf_engine_destroy(e);
    return med;
}

static int make_batches(void)
{
    P.b = calloc((size_t)P.nbatches, sizeof *P.b);
    if (P.b == NULL)
        return 1;
    for (int i = 0; i < P.nbatches; i++) {
        batch *b = &P.b[i];
        b->bytes = P.set->floats * sizeof(float);
#ifdef VFB_CUDA
        if (P.device.type == VF_DEVICE_CUDA) {
            b->n = P.set->floats;
            b->in = pipeline_cuda_host_alloc(b->n);
            b->out = pipeline_cuda_host_alloc(b->n);
            b->dev = pipeline_cuda_device_alloc(P.device.id, b->n);
        } else
#endif
        {
            /* The emulated work touches the checked floats only. */
            b->n = P.set->floats < CHECK_FLOATS ? P.set->floats : CHECK_FLOATS;
            b->in = calloc(b->n, sizeof(float));
            b->out = calloc(b->n, sizeof(float));
            b->dev = calloc(b->n, sizeof(float));
        }
        if (!b->in || !b->out || !b->dev)
            return 1;
        for (size_t k = 0; k < b->n; k++)
            b->in[k] = dp_input(i, k);
    }
    return 0;
}

static void free_batches(void)
{
    for (int i = 0; P.b && i < P.nbatches; i++) {
#ifdef VFB_CUDA
        if (P.device.type == VF_DEVICE_CUDA) {
            pipeline_cuda_host_free(P.b[i].in);
            pipeline_cuda_host_free(P.b[i].out);
            pipeline_cuda_device_free(P.b[i].dev);
            continue;
        }
#endif
        free(P.b[i].in);
        free(P.b[i].out);
        free(P.b[i].dev);
    }
    free(P.b);
}

static int usage(void)
{
    fprintf(stderr, "usage: vfbench-device [--set large|tiny] [--batches N] "
                    "[--reps N]\n"
                    "         [--device auto|cuda|emulated] [--mode "
                    "both|events|sync|replay|all]\n"
                    "         [--emu-kernel-us N] [--emu-mb-per-s N] "
                    "[--emu-latency-us N]\n"
                    "         [--profile PATH] [--host-op on|off]\n");
    return 2;
}

/* A whole number in [lo, hi] from `s`, or -1. */
static long number(const char *s, long lo, long hi)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : -1;
    return s && *s && *end == '\0' && v >= lo && v <= hi ? v : -1;
}

int main(int argc, char **argv)
{
    const dp_set *set = dp_set_named("large");
    const char *device = "auto", *mode = "both", *profile = NULL;
    long batches = 0, reps = 5, kernel_us = -1, mb_per_s = -1, lat_us = -1;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = v != NULL;
        if (!ok)
            ;
        else if (strcmp(a, "--set") == 0)
            ok = (set = dp_set_named(v)) != NULL;
        else if (strcmp(a, "--batches") == 0)
            ok = (batches = number(v, 1, 1000000)) > 0;
        else if (strcmp(a, "--reps") == 0)
            ok = (reps = number(v, 1, 1000)) > 0;
        else if (strcmp(a, "--device") == 0)
            ok = !strcmp(v, "auto") || !strcmp(v, "cuda") ||
                 !strcmp(v, "emulated");
        else if (strcmp(a, "--mode") == 0)
            ok = !strcmp(v, "both") || !strcmp(v, "events") ||
                 !strcmp(v, "sync") || !strcmp(v, "replay") ||
                 !strcmp(v, "all");
        else if (strcmp(a, "--emu-kernel-us") == 0)
            ok = (kernel_us = number(v, 0, 10000000)) >= 0;
        else if (strcmp(a, "--emu-mb-per-s") == 0)
            ok = (mb_per_s = number(v, 0, 1000000000)) >= 0;
        else if (strcmp(a, "--emu-latency-us") == 0)
            ok = (lat_us = number(v, 0, 10000000)) >= 0;
        else if (strcmp(a, "--profile") == 0)
            profile = v;
        else if (strcmp(a, "--host-op") == 0)
            ok = !strcmp(v, "on") || !strcmp(v, "off");
        else
            ok = false;
        if (!ok)
            return usage();
        if (strcmp(a, "--device") == 0)
            device = v;
        else if (strcmp(a, "--host-op") == 0)
            P.host_op = strcmp(v, "on") == 0;
        else if (strcmp(a, "--mode") == 0)
            mode = v;
    }
    P.set = set;
    P.nbatches = batches ? (int)batches : set->batches;
    P.kernel_us = kernel_us >= 0 ? (int)kernel_us : set->emu_kernel_us;
    P.device = (vf_device){VF_DEVICE_EMULATED, 0};
    const char *impl = "varflow-emulated";
#ifdef VFB_CUDA
    if (strcmp(device, "emulated") != 0) {
        if (vf_cuda_register() == 0 && vf_device_count(VF_DEVICE_CUDA) > 0) {
            P.device = (vf_device){VF_DEVICE_CUDA, 0};
            impl = "varflow-cuda";
        } else if (strcmp(device, "cuda") == 0) {
            printf("vfbench-device: SKIPPED: no CUDA device (%s)\n",
                   vf_error_detail());
            return 77;
        }
    }
#else
    if (strcmp(device, "cuda") == 0) {
        printf("vfbench-device: SKIPPED: built without libvarflow-cuda and "
               "a CUDA compiler\n");
        return 77;
    }
#endif
    vf_config cfg = {.type = VF_ENGINE_PERDEVICE,
                     .cpu_workers = 1,
                     .cpu_priority_workers = 1,
                     .gpu_workers = 1,
                     .gpu_copy_workers = 1,
                     .gpu_priority_workers = 1};
    if (P.device.type == VF_DEVICE_EMULATED) {
        cfg.emulated_mb_per_s = (int)(mb_per_s >= 0 ? mb_per_s
                                                    : set->emu_mb_per_s);
        cfg.emulated_latency_us = (int)(lat_us >= 0 ? lat_us
                                                    : set->emu_latency_us);
    }
    if (make_batches() != 0) {
        fprintf(stderr, "vfbench-device: out of memory\n");
        return 1;
    }
#ifdef VFB_CUDA
    const char *devname = P.device.type == VF_DEVICE_CUDA
                              ? pipeline_cuda_device_name(P.device.id)
                              : "emulated";
#else
    const char *devname = "emulated";
#endif
    printf("# device=\"%s\" set=%s batches=%d floats=%zu bytes=%zu "
           "rounds=%d reps=%ld host_op=%s",
           devname, set->name, P.nbatches, set->floats,
           set->floats * sizeof(float), set->rounds, reps,
           P.host_op ? "on" : "off");
    if (P.device.type == VF_DEVICE_EMULATED) {
        printf(" model=\"kernel %d us, copies at %d MB/s, every submission "
               ">= %d us",
               P.kernel_us, cfg.emulated_mb_per_s, cfg.emulated_latency_us);
        static const char *const costs[] = {
            "VF_EMULATED_LAUNCH_NS",    "VF_EMULATED_RECORD_NS",
            "VF_EMULATED_WAIT_NS",      "VF_EMULATED_QUERY_NS",
            "VF_EMULATED_HOSTFN_NS",    "VF_EMULATED_GRAPH_LAUNCH_NS",
            "VF_EMULATED_GRAPH_NODE_NS"};
        for (size_t i = 0; i < sizeof costs / sizeof costs[0]; i++) {
            const char *v = getenv(costs[i]);
            if (v != NULL)
                printf(", %s=%s", costs[i], v);
        }
        printf(" (other costs: defaults)\"");
    }
    printf("\n");
    fflush(stdout);
    double te = -1, ts = -1, tr = -1;
    int failed = 0;
    bool all = strcmp(mode, "all") == 0;
    if (all || strcmp(mode, "both") == 0 || strcmp(mode, "events") == 0) {
        te = run_mode(impl, "events", cfg, (int)reps, profile);
        failed |= te < 0;
    }
    if (all || strcmp(mode, "both") == 0 || strcmp(mode, "sync") == 0) {
        vf_config sync = cfg;
        sync.device_sync = true;
        ts = run_mode(impl, "sync", sync, (int)reps, NULL);
        failed |= ts < 0;
    }
    if (all || strcmp(mode, "replay") == 0) {
        tr = run_mode(impl, "replay", cfg, (int)reps, NULL);
        failed |= tr < 0;
    }
    if (te > 0 && ts > 0)
        printf("RATIO impl=%s set=%s sync_over_events=%.2f (above 1: event "
               "ordering is faster)\n",
               impl, set->name, ts / te);
    if (te > 0 && tr > 0)
        printf("RATIO impl=%s set=%s replay_over_events=%.2f (below 1: "
               "the replay is faster)\n",
               impl, set->name, tr / te);
    free_batches();
    return failed;
}
