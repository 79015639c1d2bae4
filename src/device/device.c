/*
 * device.c: the table of device classes. A class built into the core (the
 * emulated device) is one line of the table; a class in a library of its
 * own (CUDA, libvarflow-cuda) fills its slot at run time through
 * vf__device_class_register (device.h), so the core links no vendor
 * runtime and names none here except in the sentence that says what to
 * link.
 */
#include "device/device.h"

#include "base/alloc.h"
#include "base/error.h"

extern const vf__device_class vf__emulated_class;

#define DEVICE_TYPES (VF_DEVICE_EMULATED + 1)

/* The class of each type. Written once per type (a compare-and-swap from
 * NULL, release: the class and what register handed the library are
 * complete before the pointer is seen), read with acquire; never cleared. */
static _Atomic(const vf__device_class *) classes[DEVICE_TYPES] = {
    [VF_DEVICE_EMULATED] = &vf__emulated_class,
};

/* For a type whose class lives in a library of its own: what to link and
 * call to have it (the detail of VF_ENODEV when it is not registered). */
static const char *const how_to_register[DEVICE_TYPES] = {
    [VF_DEVICE_CUDA] = "the CUDA device class is not registered: link "
                       "libvarflow-cuda (pkg-config varflow-cuda, CMake "
                       "varflow::cuda; built where the CUDA toolkit is "
                       "found) and call vf_cuda_register() (varflow_cuda.h) "
                       "before using VF_DEVICE_CUDA",
};

static const vf__device_host host_services = {
    .malloc = vf__malloc,
    .calloc = vf__calloc,
};

const vf__device_class *vf__device_class_of(vf_device_type type)
{
    if ((unsigned)type < DEVICE_TYPES && type != VF_DEVICE_CPU) {
        const vf__device_class *cls = atomic_load_explicit(
            &classes[type], memory_order_acquire);
        if (cls != NULL)
            return cls;
        if (how_to_register[type] != NULL) {
            vf__fail(VF_ENODEV, "%s", how_to_register[type]);
            return NULL;
        }
    }
    vf__fail(VF_ENODEV, "device type %d has no device class", (int)type);
    return NULL;
}

/* Exported from libvarflow.so (VF_API, and by name in cmake/varflow.map)
 * though internal: the door the device libraries come in by. */
VF_API int vf__device_class_register(const vf__device_class *cls, uint64_t abi,
                                     const vf__device_host **host)
{
    if (cls == NULL || host == NULL)
        return vf__fail(VF_EINVAL, "device class registration: NULL %s",
                        cls == NULL ? "class" : "host");
    if (abi != VF__DEVICE_ABI)
        return vf__fail(
            VF_EINVAL,
            "the %s device library was built for libvarflow "
            "%u.%u.%u (class of %u bytes), this is libvarflow "
            "%d.%d.%d (%u bytes): install the two from one "
            "build of varflow",
            cls->name != NULL ? cls->name : "?", (unsigned)(abi >> 48),
            (unsigned)(abi >> 32) & 0xffffu, (unsigned)(abi >> 16) & 0xffffu,
            (unsigned)(abi & 0xffffu), VF_VERSION_MAJOR, VF_VERSION_MINOR,
            VF_VERSION_PATCH, (unsigned)sizeof(vf__device_class));
    vf_device_type type = cls->type;
    if ((unsigned)type >= DEVICE_TYPES || how_to_register[type] == NULL)
        return vf__fail(VF_EINVAL,
                        "device class registration: type %d is not a "
                        "device type a library can register",
                        (int)type);
    *host = &host_services;
    const vf__device_class *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&classes[type], &expected, cls,
                                                memory_order_acq_rel,
                                                memory_order_acquire) ||
        expected == cls)
        return 0;
    return vf__fail(VF_EINVAL,
                    "device class registration: another %s class is "
                    "registered already (two copies of its library in "
                    "one process?)",
                    cls->name != NULL ? cls->name : "device");
}
