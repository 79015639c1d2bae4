/*
 * sets.h: the two size sets of the device pipeline benchmark (issue 20),
 * shared by the hand-written CUDA baseline (baseline_cuda.cu) and the
 * varflow driver (pipeline_vf.c), so both run the same program:
 *
 *   large  copies and kernels each >= 50 us on an H100: 4 MiB copies
 *          (84 us at 50 GB/s, 168 us at 25 GB/s over PCIe) and a kernel of
 *          1024 rounds of x = x * 0.5 + 1 over the batch's 1 Mi floats
 *          (2 Gi dependent fp32 instructions: ~60 us at the H100's ~33 T
 *          instructions/s); overlap matters;
 *   tiny   empty kernels (one thread, no work) and 4 KiB copies: per-op
 *          cost is all there is.
 *
 * Per batch: copy in (host -> device), kernel, copy out (device -> host),
 * one compute stream and one copy stream (varflow: one compute worker and
 * one copy worker), as examples/device_pipeline.c. Results are checked on
 * the first CHECK_FLOATS floats of every batch against a serial loop.
 *
 * The emulated device (varflow driver, no GPU) models each set: a kernel
 * sleeps `emu_kernel_us` on its stream, a copy costs bytes / emu_mb_per_s,
 * every submission at least emu_latency_us; defaults below, from the GPU
 * figures above (not measured on our GPU yet: see docs/PERFORMANCE.md).
 */
#ifndef VF_BENCH_DEVICE_SETS_H
#define VF_BENCH_DEVICE_SETS_H

#include <stddef.h>
#include <string.h>

#define CHECK_FLOATS 64

typedef struct dp_set {
    const char *name;
    size_t floats; /* per batch: copy size / 4 */
    int rounds;    /* kernel rounds; 0: the empty kernel */
    int batches;   /* default batch count */
    /* The emulated device's model of the set. */
    int emu_kernel_us;
    int emu_mb_per_s;
    int emu_latency_us;
} dp_set;

static const dp_set dp_sets[] = {
    {"large", 1u << 20, 1024, 64, 60, 50000, 0},
    {"tiny", 1024, 0, 400, 0, 50000, 2},
};

static inline const dp_set *dp_set_named(const char *name)
{
    for (size_t i = 0; i < sizeof dp_sets / sizeof dp_sets[0]; i++)
        if (strcmp(dp_sets[i].name, name) == 0)
            return &dp_sets[i];
    return NULL;
}

/* The serial loop every result is checked against. */
static inline void dp_serial(float *x, size_t n, int rounds)
{
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] * 0.5f + 1.0f;
}

/* A batch's input value at index i. */
static inline float dp_input(int batch, size_t i)
{
    return (float)(batch % 89) + (float)(i % 97) * 0.25f;
}

#endif
