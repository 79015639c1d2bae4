/*
 * device_pipeline.c: the pipeline every GPU program has, on varflow's
 * per-device engine: for each batch, copy it in (a copy worker's stream),
 * compute on it (a compute worker's stream), copy the result out (a copy
 * worker's stream). Each op only puts its work on its stream and returns;
 * varflow orders the ops of different streams with events, so batch b's
 * compute overlaps batch b+1's copy in and batch b-1's copy out.
 *
 * It runs the pipeline twice on the emulated stream device (slowed down
 * with a per-submission latency and a copy bandwidth, so the overlap is
 * real): with event ordering (varflow's default) and with a full
 * synchronize after every op (device_sync, what MXNet 1.x did), each timed
 * on its second pass (the first warms the engine and device up), and prints
 * both times, the host synchronizations each needed, and how long copies
 * and compute overlapped in the profile. Built with libvarflow-cuda (and
 * a CUDA compiler, VF_EXAMPLE_CUDA), it registers the CUDA device
 * (vf_cuda_register, varflow_cuda.h) and, where a GPU is there, runs the
 * same pipeline on CUDA too (real copies and a kernel,
 * examples/device_pipeline_cuda.cu). Built without, it needs nothing of
 * CUDA and runs anywhere. The results of every run are checked against a
 * serial loop.
 *
 * Both devices run with one compute and one copy worker, so one compute
 * stream and one copy stream, as a CUDA program usually has.
 *
 * Usage: device_pipeline [batches [kib]]   (default 64 batches of 16 KiB)
 */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <varflow.h>
#include <varflow_profile.h>

#ifdef VF_EXAMPLE_CUDA
#include <varflow_cuda.h>

#include "device_pipeline_cuda.h"
#endif

#define ROUNDS 8 /* compute passes over a batch */

typedef struct batch {
    float *in, *dev, *out; /* host input, device buffer, host output */
    size_t n;
    vf_var vin, vdev, vout;
} batch;

typedef struct pipe {
    vf_device device;
    batch *b;
    int nbatches;
} pipe;

/* --- the work, on the emulated device (host memory) ---------------------- */

static void compute_serial(float *x, size_t n)
{
    for (int r = 0; r < ROUNDS; r++)
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] * 0.5f + 1.0f;
}

static int emu_copy_in(void *arg)
{
    batch *b = arg;
    memcpy(b->dev, b->in, b->n * sizeof *b->in);
    return 0;
}

static int emu_compute(void *arg)
{
    batch *b = arg;
    compute_serial(b->dev, b->n);
    return 0;
}

static int emu_copy_out(void *arg)
{
    batch *b = arg;
    memcpy(b->out, b->dev, b->n * sizeof *b->out);
    return 0;
}

/* --- the ops -------------------------------------------------------------- */

static int op_copy_in(vf_run *run, void *arg)
{
    batch *b = arg;
#ifdef VF_EXAMPLE_CUDA
    vf_device d = vf_run_device(run);
    if (d.type == VF_DEVICE_CUDA)
        return pipeline_cuda_copy(d.id, vf_run_stream(run), b->dev, b->in,
                                  b->n * sizeof *b->in);
#endif
    return vf_run_submit(run, emu_copy_in, b, b->n * sizeof *b->in);
}

static int op_compute(vf_run *run, void *arg)
{
    batch *b = arg;
#ifdef VF_EXAMPLE_CUDA
    vf_device d = vf_run_device(run);
    if (d.type == VF_DEVICE_CUDA)
        return pipeline_cuda_compute(d.id, vf_run_stream(run), b->dev, b->n,
                                     ROUNDS);
#endif
    return vf_run_submit(run, emu_compute, b, 0);
}

static int op_copy_out(vf_run *run, void *arg)
{
    batch *b = arg;
#ifdef VF_EXAMPLE_CUDA
    vf_device d = vf_run_device(run);
    if (d.type == VF_DEVICE_CUDA)
        return pipeline_cuda_copy(d.id, vf_run_stream(run), b->out, b->dev,
                                  b->n * sizeof *b->out);
#endif
    return vf_run_submit(run, emu_copy_out, b, b->n * sizeof *b->out);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Time during which a copy and a compute op both had device work running
 * (from the profile's device spans), in ms. */
static double overlap_ms(const vf_profile *p)
{
    size_t n = vf_profile_count(p);
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        const vf_profile_record *c = vf_profile_at(p, i);
        if (c->property != VF_PROP_NORMAL || c->device_end_ns == 0)
            continue;
        /* Union of copy spans within this compute span, assuming copies
         * of one direction do not overlap each other much: a lower bound
         * is the largest single overlap plus disjoint ones; keep it simple
         * and sweep the copies in id order, clipping each to the part not
         * yet counted. */
        uint64_t lo = c->device_start_ns, hi = c->device_end_ns, covered = lo;
        for (size_t j = 0; j < n; j++) {
            const vf_profile_record *k = vf_profile_at(p, j);
            if (k->property == VF_PROP_NORMAL || k->device_end_ns == 0)
                continue;
            uint64_t s = k->device_start_ns > covered ? k->device_start_ns
                                                      : covered;
            uint64_t e = k->device_end_ns < hi ? k->device_end_ns : hi;
            if (e > s) {
                total += (double)(e - s) / 1e6;
                covered = e;
            }
        }
    }
    return total;
}

/* Push every batch's three ops; 0 or the first push's error. */
static int push_batches(vf_engine *e, const pipe *pp)
{
    int rc = 0;
    for (int i = 0; i < pp->nbatches && rc == 0; i++) {
        batch *b = &pp->b[i];
        rc = vf_engine_push(e, &(vf_op){.fn = op_copy_in,
                                        .arg = b,
                                        .reads = VF_VARS(b->vin),
                                        .writes = VF_VARS(b->vdev),
                                        .device = pp->device,
                                        .property = VF_PROP_COPY_TO_DEVICE,
                                        .name = "copy in"});
        if (rc == 0)
            rc = vf_engine_push(e, &(vf_op){.fn = op_compute,
                                            .arg = b,
                                            .writes = VF_VARS(b->vdev),
                                            .device = pp->device,
                                            .name = "compute"});
        if (rc == 0)
            rc = vf_engine_push(e,
                                &(vf_op){.fn = op_copy_out,
                                         .arg = b,
                                         .reads = VF_VARS(b->vdev),
                                         .writes = VF_VARS(b->vout),
                                         .device = pp->device,
                                         .property = VF_PROP_COPY_FROM_DEVICE,
                                         .name = "copy out"});
    }
    return rc;
}

/* Run the pipeline once, after one untimed pass; returns the timed pass's
 * wall time in ms (< 0: it failed). */
static double run_pipeline(pipe *pp, const vf_config *cfg, const char *what,
                           const char *profile_path)
{
    vf_engine *e;
    int rc = vf_engine_create(&e, cfg);
    if (rc != 0) {
        fprintf(stderr, "device_pipeline: %s: %s (%s)\n", what,
                vf_error_string(rc), vf_error_detail());
        return -1;
    }
    for (int i = 0; i < pp->nbatches; i++) {
        batch *b = &pp->b[i];
        for (size_t k = 0; k < b->n; k++)
            b->in[k] = (float)(i + k % 97);
        vf_var_create(e, &b->vin);
        vf_var_create(e, &b->vdev);
        vf_var_create(e, &b->vout);
    }
    /* Warm up with the whole pipeline, untimed: the device's pools and
     * streams start on first use, and a device class makes the events it
     * orders streams with as the ops first need them (the CUDA class keeps
     * them in a pool for the next pass). On a GPU a first pass paid that
     * and timed event ordering 0.7-0.9x a synchronize after every op,
     * where warm runs time it faster (docs/PERFORMANCE.md, "Measured on a
     * GPU"). */
    vf_error err;
    int wrc = 0;
    rc = push_batches(e, pp);
    if (rc == 0)
        wrc = vf_engine_wait_all(e, &err);
    for (int i = 0; i < pp->nbatches; i++)
        memset(pp->b[i].out, 0, pp->b[i].n * sizeof(float));
    vf_stats warm; /* what the warm-up pass counted, taken off below */
    vf_engine_stats(e, &warm);
    double t0 = now_ms();
    if (rc == 0 && wrc == 0) {
        if (getenv("VF_PIPELINE_NO_PROFILE") == NULL)
            vf_profile_start(e);
        rc = push_batches(e, pp);
        wrc = vf_engine_wait_all(e, &err);
    }
    double ms = now_ms() - t0;
    if (rc != 0 || wrc != 0) {
        fprintf(stderr, "device_pipeline: %s: %s\n", what,
                rc ? vf_error_detail() : err.message);
        vf_engine_destroy(e);
        return -1;
    }
    vf_stats st;
    vf_engine_stats(e, &st);
    vf_profile *prof = NULL;
    double overlap = 0;
    if (vf_profile_take(e, &prof) == 0) {
        overlap = overlap_ms(prof);
        if (profile_path)
            vf_profile_write(prof, profile_path, VF_PROFILE_AUTO);
        vf_profile_destroy(prof);
    }
    printf("  %-34s %8.2f ms   host syncs %5llu   stream waits %5llu   "
           "copy/compute overlap %7.2f ms\n",
           what, ms, (unsigned long long)(st.host_syncs - warm.host_syncs),
           (unsigned long long)(st.stream_waits - warm.stream_waits), overlap);
    vf_engine_destroy(e);
    return ms;
}

/* The output must equal the serial loop's, bit for bit. */
static bool check(const pipe *pp)
{
    float *x = malloc(pp->b[0].n * sizeof *x);
    bool ok = x != NULL;
    for (int i = 0; ok && i < pp->nbatches; i++) {
        const batch *b = &pp->b[i];
        memcpy(x, b->in, b->n * sizeof *x);
        compute_serial(x, b->n);
        ok = memcmp(x, b->out, b->n * sizeof *x) == 0;
    }
    free(x);
    return ok;
}

static int run_on(pipe *pp, const char *name, vf_config base,
                  const char *profile_path)
{
    vf_config events = base, sync = base;
    sync.device_sync = true;
    char what[96];
    printf("%s, %d batches:\n", name, pp->nbatches);
    snprintf(what, sizeof what, "event ordering (default)");
    double te = run_pipeline(pp, &events, what, profile_path);
    bool ok_e = te > 0 && check(pp);
    snprintf(what, sizeof what, "synchronize after every op");
    double ts = run_pipeline(pp, &sync, what, NULL);
    bool ok_s = ts > 0 && check(pp);
    if (!ok_e || !ok_s) {
        printf("  FAILED: results differ from the serial loop\n");
        return 1;
    }
    printf("  event ordering takes %.2fx the time of synchronizing after "
           "every op; results identical to the serial loop\n",
           te / ts);
    return 0;
}

/* Buffers for `nbatches` batches of n floats: host memory for the
 * emulated device; pinned host and device memory for CUDA. */
static batch *make_batches(int nbatches, size_t n, vf_device dev)
{
    batch *b = calloc((size_t)nbatches, sizeof *b);
    for (int i = 0; b && i < nbatches; i++) {
        b[i].n = n;
#ifdef VF_EXAMPLE_CUDA
        if (dev.type == VF_DEVICE_CUDA) {
            b[i].in = pipeline_cuda_host_alloc(n);
            b[i].out = pipeline_cuda_host_alloc(n);
            b[i].dev = pipeline_cuda_device_alloc(dev.id, n);
        } else
#endif
        {
            b[i].in = malloc(n * sizeof(float));
            b[i].out = malloc(n * sizeof(float));
            b[i].dev = malloc(n * sizeof(float));
        }
        if (!b[i].in || !b[i].out || !b[i].dev) {
            fprintf(stderr, "device_pipeline: out of memory\n");
            exit(1);
        }
    }
    (void)dev;
    return b;
}

static void free_batches(batch *b, int nbatches, vf_device dev)
{
    for (int i = 0; i < nbatches; i++) {
#ifdef VF_EXAMPLE_CUDA
        if (dev.type == VF_DEVICE_CUDA) {
            pipeline_cuda_host_free(b[i].in);
            pipeline_cuda_host_free(b[i].out);
            pipeline_cuda_device_free(b[i].dev);
            continue;
        }
#endif
        free(b[i].in);
        free(b[i].out);
        free(b[i].dev);
    }
    (void)dev;
    free(b);
}

int main(int argc, char **argv)
{
    int nbatches = argc > 1 ? atoi(argv[1]) : 64;
    int kib = argc > 2 ? atoi(argv[2]) : 16;
    if (nbatches < 1 || kib < 1) {
        fprintf(stderr, "usage: device_pipeline [batches [kib]]\n");
        return 2;
    }
    size_t n = (size_t)kib * 1024 / sizeof(float);

    /* The emulated device: 150 us a submission, 2 GB/s copies. */
    pipe pp = {.nbatches = nbatches, .device = {VF_DEVICE_EMULATED, 0}};
    pp.b = make_batches(nbatches, n, pp.device);
    int failed = run_on(&pp, "emulated device (150 us/submission, 2 GB/s)",
                        (vf_config){.type = VF_ENGINE_PERDEVICE,
                                    .gpu_workers = 1,
                                    .gpu_copy_workers = 1,
                                    .emulated_latency_us = 150,
                                    .emulated_mb_per_s = 2000},
                        getenv("VF_PIPELINE_PROFILE"));
    free_batches(pp.b, nbatches, pp.device);

#ifdef VF_EXAMPLE_CUDA
    /* The CUDA device is libvarflow-cuda's: registered, it is used where a
     * GPU is there. */
    if (vf_cuda_register() != 0) {
        printf("CUDA: vf_cuda_register: %s\n", vf_error_detail());
        failed = 1;
    } else if (vf_device_count(VF_DEVICE_CUDA) > 0) {
        pipe pc = {.nbatches = nbatches, .device = {VF_DEVICE_CUDA, 0}};
        pc.b = make_batches(nbatches, n, pc.device);
        failed |= run_on(&pc, "CUDA device 0",
                         (vf_config){.type = VF_ENGINE_PERDEVICE,
                                     .gpu_workers = 1,
                                     .gpu_copy_workers = 1},
                         NULL);
        free_batches(pc.b, nbatches, pc.device);
    } else {
        printf("CUDA: not run (%s)\n", vf_error_detail());
    }
#else
    printf("CUDA: not run (this example was built without libvarflow-cuda "
           "or without a CUDA compiler)\n");
#endif
    return failed;
}
