/**
 * @file varflow_cuda.h
 * @brief The CUDA device of varflow (libvarflow-cuda).
 * @ingroup devices
 *
 * varflow_cuda: the CUDA device (VF_DEVICE_CUDA) of varflow, in a library
 * of its own (libvarflow-cuda), so that libvarflow itself needs libc and
 * pthreads only and a CPU-only program runs where CUDA is absent.
 *
 * Link libvarflow-cuda (pkg-config varflow-cuda, or CMake's
 * find_package(varflow COMPONENTS cuda) and varflow::cuda) and call
 * vf_cuda_register() once, before the first use of VF_DEVICE_CUDA (an op
 * pushed with .device = {VF_DEVICE_CUDA, id}, or vf_device_count()). From
 * then on every engine of the process can run ops on the GPUs CUDA sees:
 * each device op's worker owns a cudaStream_t (vf_run_stream()), and varflow
 * orders the streams with CUDA events (see varflow.h, "Devices").
 *
 * Without the registration, VF_DEVICE_CUDA is refused as a device that is
 * not there: vf_device_count(VF_DEVICE_CUDA) is 0 and a push for it returns
 * VF_ENODEV, vf_error_detail() saying to link libvarflow-cuda and call
 * vf_cuda_register(). The registration is an explicit call, not a
 * constructor of the library: a static link (and a shared one with
 * --as-needed) drops a library that nothing calls.
 *
 * This header needs nothing of CUDA's; the library links the CUDA runtime
 * (libcudart) itself. A program that calls CUDA directly (kernels, copies
 * on vf_run_stream()'s stream) includes and links CUDA as usual.
 */
#ifndef VARFLOW_CUDA_H
#define VARFLOW_CUDA_H

#include <varflow.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Register the CUDA device class with varflow, for every engine of the
 * process. Needs no GPU: without one (or without a driver) it succeeds,
 * and vf_device_count(VF_DEVICE_CUDA) then says 0 and why. Idempotent and
 * thread-safe; call it before pushing CUDA ops. 0, or VF_EINVAL when this
 * libvarflow-cuda and the libvarflow it runs with come from different
 * builds of varflow (the detail names both versions): install the two
 * together.
 */
VF_API int vf_cuda_register(void);

#ifdef __cplusplus
}
#endif

#endif /* VARFLOW_CUDA_H */
