/*
 * config.h: turning a vf_config (zero = default) and the VF_* environment
 * into the settings an engine runs with. The struct wins over the
 * environment; the environment wins over built-in defaults. A malformed
 * environment value is an error (VF_EINVAL naming the variable), not
 * silently ignored.
 */
#ifndef VF_CONFIG_H
#define VF_CONFIG_H

#include <sched.h>

#include "base/common.h"
#include "device/device.h"

#define VF__MAX_WORKERS 1024
/* A worker's stack, when set (KiB): room for the engine's frames and the
 * program's, up to 1 GiB. */
#define VF__MIN_WORKER_STACK_KIB 128
#define VF__MAX_WORKER_STACK_KIB (1 << 20)
/* An idle worker's spin before it sleeps (vf_config.idle_spin_us), in
 * microseconds: the default, and the most. */
#define VF__IDLE_SPIN_DEFAULT_US 50
#define VF__MAX_IDLE_SPIN_US 100000
/* Most entries of a CPU list (vf_config.cpu_affinity). */
#define VF__MAX_CPU_PINS 1024

typedef struct vf__settings {
    vf_engine_type type;
    int cpu_workers;
    int cpu_priority_workers;
    uint32_t max_inflight;    /* 0: unlimited */
    const char *profile_path; /* NULL: none (points into config or env) */
    int profile_max_records;
    bool engine_info;
    int gpu_workers, gpu_copy_workers, gpu_priority_workers;
    bool device_sync;
    uint64_t emulated_latency_ns;
    uint64_t emulated_bytes_per_sec; /* 0: unlimited */
    vf__emulated_costs emulated_costs;
    int fork_child_workers;
    int bulk_size; /* 0: off */
    bool help_on_wait;
    bool run_at_push;
    int worker_stack_kib; /* 0: the system's default */
    int idle_spin_us;     /* 0: none */
    int usable_cpus;      /* the CPUs the process may run on, at least 1 */
    cpu_set_t usable_set; /* which they are */
    /* Workers pinned (vf_config.cpu_affinity): worker i on CPU
     * cpu_pins[i % ncpu_pins]; none when ncpu_pins is 0. */
    int ncpu_pins;
    uint16_t cpu_pins[VF__MAX_CPU_PINS];
} vf__settings;

int vf__config_resolve(const vf_config *config, vf__settings *out);

#endif /* VF_CONFIG_H */
