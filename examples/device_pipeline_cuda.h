/*
 * device_pipeline_cuda.h: the CUDA half of examples/device_pipeline.c (built
 * only with libvarflow-cuda and a CUDA compiler): real asynchronous copies and
 * a kernel, put on the stream varflow gives the op (vf_run_stream). The
 * device pipeline benchmark (bench/device/) uses the same functions. A
 * call that CUDA refused also says why on stderr.
 */
#ifndef DEVICE_PIPELINE_CUDA_H
#define DEVICE_PIPELINE_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pinned host memory and device memory for the pipeline's buffers; NULL
 * when out of memory. Free with pipeline_cuda_free_*. */
float *pipeline_cuda_host_alloc(size_t n);
float *pipeline_cuda_device_alloc(int device, size_t n);
void pipeline_cuda_host_free(float *p);
void pipeline_cuda_device_free(float *p);

/* Queue a copy of `bytes` (either direction) on `stream`. 0, or non-zero
 * when CUDA refused (the op then fails). */
int pipeline_cuda_copy(int device, void *stream, void *dst, const void *src,
                       size_t bytes);

/* Queue `rounds` passes of x = x * 0.5 + 1 over n floats on `stream`,
 * rounded exactly as the serial C loop rounds (no fused multiply-add);
 * rounds 0: the empty kernel (one thread, no work). */
int pipeline_cuda_compute(int device, void *stream, float *x, size_t n,
                          int rounds);

/* The name of device `device`, or "" (no such device). */
const char *pipeline_cuda_device_name(int device);

#ifdef __cplusplus
}
#endif

#endif
