// device_pipeline_cuda.cu: the CUDA half of examples/device_pipeline.c,
// and of the device pipeline benchmark (bench/device/), so the example,
// the hand-written baseline and the benchmark's varflow run queue the same
// kernels and copies.
#include "device_pipeline_cuda.h"

#include <cstdio>

#include <cuda_runtime.h>

// __fmul_rn / __fadd_rn: no contraction into an FMA, so the result is bit
// for bit the serial C loop's.
__global__ static void scale_add(float *x, size_t n, int rounds)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i];
    for (int r = 0; r < rounds; r++)
        v = __fadd_rn(__fmul_rn(v, 0.5f), 1.0f);
    x[i] = v;
}

__global__ static void empty_kernel()
{
}

static int failed(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    std::fprintf(stderr, "CUDA: %s: %s\n", what, cudaGetErrorString(err));
    return 1;
}

extern "C" float *pipeline_cuda_host_alloc(size_t floats)
{
    void *p = nullptr;
    return cudaMallocHost(&p, floats * sizeof(float)) == cudaSuccess
               ? static_cast<float *>(p)
               : nullptr;
}

extern "C" float *pipeline_cuda_device_alloc(int device, size_t floats)
{
    void *p = nullptr;
    if (cudaSetDevice(device) != cudaSuccess)
        return nullptr;
    return cudaMalloc(&p, floats * sizeof(float)) == cudaSuccess
               ? static_cast<float *>(p)
               : nullptr;
}

extern "C" void pipeline_cuda_host_free(float *p)
{
    cudaFreeHost(p);
}

extern "C" void pipeline_cuda_device_free(float *p)
{
    cudaFree(p);
}

extern "C" int pipeline_cuda_copy(int device, void *stream, void *dst,
                                  const void *src, size_t bytes)
{
    if (failed(cudaSetDevice(device), "cudaSetDevice"))
        return 1;
    return failed(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                  static_cast<cudaStream_t>(stream)),
                  "cudaMemcpyAsync");
}

extern "C" int pipeline_cuda_compute(int device, void *stream, float *x,
                                     size_t n, int rounds)
{
    if (failed(cudaSetDevice(device), "cudaSetDevice"))
        return 1;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (rounds == 0)
        empty_kernel<<<1, 1, 0, s>>>();
    else
        scale_add<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, n, rounds);
    return failed(cudaGetLastError(), "kernel launch");
}

extern "C" const char *pipeline_cuda_device_name(int device)
{
    static char name[256];
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return "";
    std::snprintf(name, sizeof name, "%s", prop.name);
    return name;
}
