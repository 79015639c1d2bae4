// cuda_check.h: what the CUDA programs of bench/device/ share: CK, which
// ends the program when a CUDA call fails, naming the program and the call,
// and a monotonic clock.
#ifndef VFB_CUDA_CHECK_H
#define VFB_CUDA_CHECK_H

#include <cerrno> // program_invocation_short_name (GNU)
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <cuda_runtime.h>

#define CK(call)                                                               \
    do {                                                                       \
        cudaError_t err_ = (call);                                             \
        if (err_ != cudaSuccess) {                                             \
            std::fprintf(stderr, "%s: %s: %s\n",                               \
                         program_invocation_short_name, #call,                 \
                         cudaGetErrorString(err_));                            \
            std::exit(1);                                                      \
        }                                                                      \
    } while (0)

static inline double now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

#endif
