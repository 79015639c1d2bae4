/*
 * device.c: the table of device classes. A device kind is one file of
 * src/device/ that fills a vf__device_class, plus one line here.
 */
#include "device/device.h"

#include "base/error.h"

extern const vf__device_class vf__emulated_class;
#ifdef VF_HAVE_CUDA
extern const vf__device_class vf__cuda_class;
#endif

const vf__device_class *vf__device_class_of(vf_device_type type)
{
    switch (type) {
    case VF_DEVICE_EMULATED:
        return &vf__emulated_class;
    case VF_DEVICE_CUDA:
#ifdef VF_HAVE_CUDA
        return &vf__cuda_class;
#else
        vf__fail(VF_ENODEV, "varflow was built without CUDA "
                            "(configure with -DVF_WITH_CUDA=ON where the "
                            "CUDA toolkit is installed)");
        return NULL;
#endif
    case VF_DEVICE_CPU:
        break;
    }
    vf__fail(VF_ENODEV, "device type %d has no device class", (int)type);
    return NULL;
}
