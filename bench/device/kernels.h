/*
 * kernels.h: the CUDA half of the device pipeline benchmark (kernels.cu),
 * used by the hand-written baseline and by the varflow driver alike, so
 * both queue the same kernels and copies. Every call queues work on
 * `stream` (a cudaStream_t) and returns at once; 0, or non-zero when CUDA
 * refused (its message on stderr).
 */
#ifndef VF_BENCH_DEVICE_KERNELS_H
#define VF_BENCH_DEVICE_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pinned host memory, device memory (NULL when out of memory). */
float *dpk_host_alloc(size_t floats);
float *dpk_device_alloc(int device, size_t floats);
void dpk_host_free(float *p);
void dpk_device_free(float *p);

/* A copy of `bytes` either way. */
int dpk_copy(int device, void *stream, void *dst, const void *src,
             size_t bytes);
/* `rounds` of x = x * 0.5 + 1 over n floats, rounded as the serial C loop
 * (no fused multiply-add); rounds 0: the empty kernel (one thread, no
 * work). */
int dpk_compute(int device, void *stream, float *x, size_t n, int rounds);

/* The name of device `device`, or "" (no device). */
const char *dpk_device_name(int device);

#ifdef __cplusplus
}
#endif

#endif
