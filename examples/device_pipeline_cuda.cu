// device_pipeline_cuda.cu: the CUDA half of examples/device_pipeline.c.
#include "device_pipeline_cuda.h"

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

extern "C" float *pipeline_cuda_host_alloc(size_t n)
{
    void *p = nullptr;
    return cudaMallocHost(&p, n * sizeof(float)) == cudaSuccess
               ? static_cast<float *>(p)
               : nullptr;
}

extern "C" float *pipeline_cuda_device_alloc(int device, size_t n)
{
    void *p = nullptr;
    if (cudaSetDevice(device) != cudaSuccess)
        return nullptr;
    return cudaMalloc(&p, n * sizeof(float)) == cudaSuccess
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
    if (cudaSetDevice(device) != cudaSuccess)
        return 1;
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                           static_cast<cudaStream_t>(stream)) != cudaSuccess;
}

extern "C" int pipeline_cuda_compute(int device, void *stream, float *x,
                                     size_t n, int rounds)
{
    if (cudaSetDevice(device) != cudaSuccess)
        return 1;
    unsigned blocks = (unsigned)((n + 255) / 256);
    scale_add<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(x, n,
                                                                      rounds);
    return cudaGetLastError() != cudaSuccess;
}
