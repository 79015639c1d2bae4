/* config.c: settings from the config struct and VF_* variables. */
#include "core/config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/engine_type.h"
#include "base/error.h"
#include "core/bulk.h"
#include "device/device.h"
#include "varflow_profile.h"

static int online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > VF__MAX_WORKERS ? VF__MAX_WORKERS : (int)n;
}

/* The CPUs this process may run on: its affinity mask, or every online
 * one when that cannot be read. Returns how many, at least 1. */
static int usable_cpus(cpu_set_t *set)
{
    if (sched_getaffinity(0, sizeof *set, set) == 0 && CPU_COUNT(set) > 0)
        return CPU_COUNT(set);
    CPU_ZERO(set);
    int n = online_cores();
    for (int c = 0; c < n; c++)
        CPU_SET(c, set);
    return n;
}

/* A count written in the environment: decimal digits only (no sign, space,
 * suffix or base prefix, which strtol would let through), at most `max`;
 * -1 when it is not one. */
static long long parse_count(const char *s, int max)
{
    long long n = 0;
    if (*s == '\0')
        return -1;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        n = n * 10 + (*s - '0');
        if (n > max) /* n stays below 10 * INT_MAX: no overflow */
            return -1;
    }
    return n;
}

/* A count: the struct's `field` when non-zero, else the variable's (none
 * when `var` is NULL: config.ignore_env), else `fallback`. The field must
 * be in min..max; the variable too, or 0 where `var_zero` says it means
 * "none" there (no bulking, no spinning, no latency, no bandwidth limit),
 * which a field of 0 cannot say. */
static int count_setting(int field, const char *field_name, const char *var,
                         int min, int max, bool var_zero, int fallback,
                         int *out)
{
    if (field != 0 && (field < min || field > max))
        return vf__fail(VF_EINVAL,
                        "vf_engine_create: config.%s = %d (must be "
                        "%d..%d, or 0 for the default)",
                        field_name, field, min, max);
    if (field != 0) {
        *out = field;
        return 0;
    }
    const char *s = var != NULL ? getenv(var) : NULL;
    if (s == NULL || *s == '\0') {
        *out = fallback;
        return 0;
    }
    long long n = parse_count(s, max);
    if (n < 0 || (n < min && !(n == 0 && var_zero)))
        return vf__fail(VF_EINVAL,
                        "vf_engine_create: %s=\"%s\" (must be "
                        "decimal digits only, %s%d..%d)",
                        var, s, var_zero ? "0 for none or " : "", min, max);
    *out = (int)n;
    return 0;
}

/* vf_config.cpu_affinity (`setting` names where `spec` came from): "none"
 * leaves the workers unpinned (n 0); "cores" pins worker i on the i-th CPU
 * the process may run on; a list ("0,2,4-7": decimal CPU numbers and
 * ranges) on its i-th entry, each a CPU the process may run on; worker i
 * wraps round. VF_EINVAL naming the setting for anything else. */
static int cpu_affinity_setting(const char *spec, const char *setting,
                                const cpu_set_t *allowed, uint16_t *pins,
                                int *n)
{
    *n = 0;
    if (strcmp(spec, "none") == 0)
        return 0;
    if (strcmp(spec, "cores") == 0) {
        for (int c = 0; c < CPU_SETSIZE && *n < VF__MAX_CPU_PINS; c++)
            if (CPU_ISSET(c, allowed))
                pins[(*n)++] = (uint16_t)c;
        return 0;
    }
    const char *p = spec;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9')
            break;
        long lo = strtol(p, &end, 10), hi = lo;
        if (*end == '-') {
            if (end[1] < '0' || end[1] > '9')
                break;
            hi = strtol(end + 1, &end, 10);
        }
        if (lo > hi || hi >= CPU_SETSIZE)
            break;
        for (long c = lo; c <= hi; c++) {
            if (!CPU_ISSET((int)c, allowed)) {
                *n = 0;
                return vf__fail(VF_EINVAL,
                                "vf_engine_create: %s\"%s\": CPU %ld is not "
                                "one this process may run on",
                                setting, spec, c);
            }
            if (*n == VF__MAX_CPU_PINS)
                break;
            pins[(*n)++] = (uint16_t)c;
        }
        if (*end == '\0')
            return 0;
        if (*end != ',')
            break;
        p = end + 1;
    }
    *n = 0;
    return vf__fail(VF_EINVAL,
                    "vf_engine_create: %s\"%s\" (must be \"none\", "
                    "\"cores\", or a list of CPU numbers and ranges such as "
                    "\"0,2,4-7\", each below %d)",
                    setting, spec, CPU_SETSIZE);
}

/* A boolean variable: unset, empty or 0 is false, 1 is true (NULL: no
 * variable, config.ignore_env). */
static int flag_setting(const char *var, bool *out)
{
    const char *s = var != NULL ? getenv(var) : NULL;
    if (s == NULL || *s == '\0' || strcmp(s, "0") == 0) {
        *out = false;
        return 0;
    }
    if (strcmp(s, "1") == 0) {
        *out = true;
        return 0;
    }
    return vf__fail(VF_EINVAL, "vf_engine_create: %s=\"%s\" (must be 0 or 1)",
                    var, s);
}

/*
 * The profile is written at destroy with fopen(path, "w") (vf_profile_write;
 * "-" is standard output): refuse now a path that could not be, so the
 * mistake is not found only then. An existing file must be writable and
 * not a directory; a new one needs a directory that exists and can be
 * written to. `setting` names where the path came from.
 */
static int profile_path_check(const char *path, const char *setting)
{
    if (*path == '\0')
        return vf__fail(VF_EINVAL,
                        "vf_engine_create: %s\"\" (a file name, "
                        "\"-\" for standard output, or NULL for "
                        "no profile)",
                        setting);
    if (strcmp(path, "-") == 0)
        return 0;
    struct stat st;
    const char *why = NULL, *what = path;
    char dir[PATH_MAX], cannot[200];
    int fd;
    if (stat(path, &st) == 0) {
        /* Opened to write (not truncated: nothing changes), since root
         * passes access() on /proc and /sys files that refuse writes
         * (the second reviewer); and written nothing to, since root also
         * opens some that refuse every write, /proc/version (found
         * trying the documented promises as a user): their write fails
         * even for no bytes, a regular file's does nothing. */
        if (S_ISDIR(st.st_mode))
            why = "it is a directory";
        else if ((fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
            why = strerror(errno);
        else {
            if (write(fd, "", 0) < 0)
                why = strerror(errno);
            close(fd);
        }
    } else if (errno != ENOENT) {
        why = strerror(errno);
    } else { /* a new file: its directory, "." or "/" included */
        const char *slash = strrchr(path, '/');
        size_t n = slash == NULL || slash == path ? 1 : (size_t)(slash - path);
        if (n >= sizeof dir)
            return vf__fail(VF_EINVAL,
                            "vf_engine_create: %s\"%s\": the "
                            "path is too long",
                            setting, path);
        memcpy(dir, slash == NULL ? "." : path, n);
        dir[n] = '\0';
        what = dir;
        if (stat(dir, &st) != 0) {
            why = strerror(errno);
        } else if (!S_ISDIR(st.st_mode)) {
            why = "not a directory";
        } else {
            /* Made and removed again: access() answers for the mode bits
             * only, and a root process passes it on /proc or /sys, where
             * no file can be made (found trying settings as a user). */
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd >= 0) {
                close(fd);
                unlink(path);
            } else if (errno != EEXIST) { /* EEXIST: made meanwhile */
                snprintf(cannot, sizeof cannot, "no file can be made there: %s",
                         strerror(errno));
                why = cannot;
            }
        }
    }
    /* A relative path is made absolute at create (profile/record.c), so
     * that destroy writes where this looked: it must fit. */
    char cwd[PATH_MAX];
    if (why == NULL && path[0] != '/' &&
        (getcwd(cwd, sizeof cwd) == NULL ||
         strlen(cwd) + 1 + strlen(path) >= PATH_MAX)) {
        what = "the working directory";
        why = "its path and this one are too long together (give an "
              "absolute path)";
    }
    if (why == NULL)
        return 0;
    return vf__fail(VF_EINVAL,
                    "vf_engine_create: %s\"%s\": the profile "
                    "could not be written there (%s: %s)",
                    setting, path, what, why);
}

static int engine_type(vf_engine_type field, bool use_env, vf_engine_type *out)
{
    if (field < VF_ENGINE_DEFAULT || field > VF_ENGINE_PERDEVICE)
        return vf__fail(VF_EINVAL,
                        "vf_engine_create: config.type = %d is "
                        "not a vf_engine_type",
                        (int)field);
    if (field != VF_ENGINE_DEFAULT) {
        *out = field;
        return 0;
    }
    const char *s = use_env ? getenv("VF_ENGINE_TYPE") : NULL;
    if (s == NULL || *s == '\0')
        *out = VF_ENGINE_PERDEVICE;
    else if ((*out = vf__engine_type_parse(s)) == VF_ENGINE_INVALID)
        /* exact, as every VF_* value is */
        return vf__fail(VF_EINVAL,
                        "vf_engine_create: VF_ENGINE_TYPE=\"%s\" "
                        "(must be naive, pooled or perdevice, in "
                        "lower case)",
                        s);
    return 0;
}

int vf__config_resolve(const vf_config *config, vf__settings *out)
{
    static const vf_config defaults;
    if (config == NULL)
        config = &defaults;
    int cores = online_cores();
    /* Each variable's name, or NULL where the struct says the environment
     * is not to be read (config.ignore_env). */
    bool env = !config->ignore_env;
#define VAR(name) (env ? (name) : NULL)
    int rc = engine_type(config->type, env, &out->type);
    if (rc == 0)
        rc = count_setting(config->cpu_workers, "cpu_workers",
                           VAR("VF_CPU_WORKER_NTHREADS"), 1, VF__MAX_WORKERS,
                           false, cores, &out->cpu_workers);
    if (rc == 0)
        rc = count_setting(config->cpu_priority_workers, "cpu_priority_workers",
                           VAR("VF_CPU_PRIORITY_NTHREADS"), 1, VF__MAX_WORKERS,
                           false, cores < 4 ? cores : 4,
                           &out->cpu_priority_workers);
    int inflight = 0;
    if (rc == 0)
        rc = count_setting(config->max_inflight, "max_inflight",
                           VAR("VF_MAX_INFLIGHT"), 1, INT_MAX, false, 0,
                           &inflight);
    out->max_inflight = (uint32_t)inflight;
    if (rc == 0)
        rc = count_setting(config->profile_max_records, "profile_max_records",
                           VAR("VF_PROFILE_MAX_RECORDS"), 1, INT_MAX, false,
                           1 << 20, &out->profile_max_records);
    out->profile_path = config->profile_path;
    if (out->profile_path == NULL) {
        const char *s = env ? getenv("VF_PROFILE") : NULL;
        out->profile_path = s && *s ? s : NULL;
    }
    if (rc == 0 && out->profile_path != NULL)
        rc = profile_path_check(out->profile_path,
                                config->profile_path != NULL
                                    ? "config.profile_path = "
                                    : "VF_PROFILE=");
    out->engine_info = config->engine_info;
    if (rc == 0 && !out->engine_info)
        rc = flag_setting(VAR("VF_ENGINE_INFO"), &out->engine_info);
    if (rc == 0)
        rc = count_setting(config->gpu_workers, "gpu_workers",
                           VAR("VF_GPU_WORKER_NTHREADS"), 1, VF__MAX_WORKERS,
                           false, 2, &out->gpu_workers);
    if (rc == 0)
        rc = count_setting(config->gpu_copy_workers, "gpu_copy_workers",
                           VAR("VF_GPU_COPY_NTHREADS"), 1, VF__MAX_WORKERS,
                           false, 2, &out->gpu_copy_workers);
    if (rc == 0)
        rc = count_setting(config->gpu_priority_workers, "gpu_priority_workers",
                           VAR("VF_GPU_PRIORITY_NTHREADS"), 1, VF__MAX_WORKERS,
                           false, 2, &out->gpu_priority_workers);
    out->device_sync = config->device_sync;
    if (rc == 0 && !out->device_sync)
        rc = flag_setting(VAR("VF_DEVICE_SYNC"), &out->device_sync);
    /* The emulated device's slowness: 0 is a valid setting here (none),
     * so "unset" is the only default. */
    int latency_us = 0, mb_per_s = 0;
    if (rc == 0)
        rc = count_setting(config->emulated_latency_us, "emulated_latency_us",
                           VAR("VF_EMULATED_LATENCY_US"), 1, 10000000, true, 0,
                           &latency_us);
    if (rc == 0)
        rc = count_setting(config->emulated_mb_per_s, "emulated_mb_per_s",
                           VAR("VF_EMULATED_MB_PER_S"), 1, 1000000000, true, 0,
                           &mb_per_s);
    if (rc == 0)
        rc = vf__emulated_costs_read(&out->emulated_costs, env);
    if (rc == 0)
        rc = count_setting(config->fork_child_workers, "fork_child_workers",
                           VAR("VF_FORK_CHILD_NTHREADS"), 1, VF__MAX_WORKERS,
                           false, 1, &out->fork_child_workers);
    out->help_on_wait = config->help_on_wait;
    if (rc == 0 && !out->help_on_wait)
        rc = flag_setting(VAR("VF_HELP_ON_WAIT"), &out->help_on_wait);
    out->run_at_push = config->run_at_push;
    if (rc == 0 && !out->run_at_push)
        rc = flag_setting(VAR("VF_RUN_AT_PUSH"), &out->run_at_push);
    /* Bulking: VF_BULK_SIZE=0 says "off" in so many words. */
    out->bulk_size = 0;
    if (rc == 0)
        rc = count_setting(config->bulk_size, "bulk_size", VAR("VF_BULK_SIZE"),
                           1, VF__BULK_MAX, true, 0, &out->bulk_size);
    out->worker_stack_kib = 0;
    if (rc == 0)
        rc = count_setting(config->worker_stack_kib, "worker_stack_kib",
                           VAR("VF_WORKER_STACK_KIB"), VF__MIN_WORKER_STACK_KIB,
                           VF__MAX_WORKER_STACK_KIB, false, 0,
                           &out->worker_stack_kib);
    /* Idle spinning: -1 in the struct, 0 in the environment, is none. */
    out->idle_spin_us = 0;
    if (rc == 0 && (config->idle_spin_us < -1 ||
                    config->idle_spin_us > VF__MAX_IDLE_SPIN_US))
        rc = vf__fail(VF_EINVAL,
                      "vf_engine_create: config.idle_spin_us = %d (must be "
                      "1..%d, 0 for the default, or -1 for none)",
                      config->idle_spin_us, VF__MAX_IDLE_SPIN_US);
    if (rc == 0 && config->idle_spin_us != -1)
        rc = count_setting(config->idle_spin_us, "idle_spin_us",
                           VAR("VF_IDLE_SPIN_US"), 1, VF__MAX_IDLE_SPIN_US,
                           true, VF__IDLE_SPIN_DEFAULT_US, &out->idle_spin_us);
    /* Pinning: the struct's string, else the environment's. */
    const char *affinity = config->cpu_affinity;
    const char *affinity_from = "config.cpu_affinity = ";
    if (affinity == NULL) {
        affinity = env ? getenv("VF_CPU_AFFINITY") : NULL;
        affinity_from = "VF_CPU_AFFINITY=";
        if (affinity != NULL && *affinity == '\0')
            affinity = NULL;
    }
    out->usable_cpus = usable_cpus(&out->usable_set);
    out->ncpu_pins = 0;
    if (rc == 0 && affinity != NULL)
        rc = cpu_affinity_setting(affinity, affinity_from, &out->usable_set,
                                  out->cpu_pins, &out->ncpu_pins);
    out->emulated_latency_ns = (uint64_t)latency_us * 1000u;
    out->emulated_bytes_per_sec = (uint64_t)mb_per_s * 1000000u;
    return rc;
#undef VAR
}
