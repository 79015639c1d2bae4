/*
 * consumer_cuda.c: a program that lives outside the varflow tree and is
 * built against an *installed* libvarflow-cuda by scripts/check-install:
 * through `pkg-config --cflags --libs varflow-cuda` and through a CMake
 * project that calls find_package(varflow CONFIG REQUIRED COMPONENTS cuda)
 * and links varflow::cuda (CMakeLists.txt beside this file), each against
 * the shared and the static library.
 *
 * It checks what a CUDA user of varflow relies on, with or without a GPU:
 * before vf_cuda_register(), VF_DEVICE_CUDA is refused (VF_ENODEV) with a
 * detail that says to call it; vf_cuda_register() returns 0, twice; after
 * it, vf_device_count(VF_DEVICE_CUDA) is the GPUs CUDA sees, and when it
 * is 0 the reason is CUDA's (no device, no driver), not a missing
 * registration. Where a GPU is there, one op on CUDA device 0 gets a
 * stream and runs host work on it (vf_run_submit), and the value it wrote
 * is checked after vf_var_wait. It is built with -std=c11 -Wall -Wextra
 * -Wpedantic -Werror, so varflow_cuda.h must be warning-clean for users.
 */
#include <stdio.h>
#include <string.h>

#include <varflow_cuda.h>

static int fail(const char *what, int rc)
{
    fprintf(stderr, "consumer_cuda: %s: %s (%s) %s\n", what, vf_error_name(rc),
            vf_error_string(rc), vf_error_detail());
    return 1;
}

/* Host work on the op's stream: runs after the work queued before it. */
static int set_42(void *arg)
{
    *(int *)arg = 42;
    return 0;
}

static int on_stream(vf_run *run, void *arg)
{
    if (vf_run_stream(run) == NULL) {
        vf_run_set_error(run, "a CUDA op without a stream");
        return 1;
    }
    return vf_run_submit(run, set_42, arg, 0) != 0;
}

/* One op on CUDA device 0 (a GPU is there). */
static int run_on_gpu(void)
{
    vf_engine *e = NULL;
    vf_config cfg = {.type = VF_ENGINE_PERDEVICE, .cpu_workers = 1};
    int rc = vf_engine_create(&e, &cfg);
    if (rc != 0)
        return fail("vf_engine_create", rc);
    vf_var v;
    if ((rc = vf_var_create(e, &v)) != 0)
        return fail("vf_var_create", rc);
    int value = 0;
    vf_op op = {.fn = on_stream,
                .arg = &value,
                .writes = VF_VARS(v),
                .device = {VF_DEVICE_CUDA, 0},
                .name = "on_stream"};
    if ((rc = vf_engine_push(e, &op)) != 0)
        return fail("vf_engine_push on CUDA device 0", rc);
    if ((rc = vf_var_wait(e, v, NULL)) != 0)
        return fail("vf_var_wait", rc);
    if ((rc = vf_engine_destroy(e)) != 0)
        return fail("vf_engine_destroy", rc);
    printf("consumer_cuda: an op on CUDA device 0 wrote %d (want 42): %s\n",
           value, value == 42 ? "ok" : "FAILED");
    return value != 42;
}

int main(void)
{
    /* Not registered yet: refused, and the detail says what to do. */
    if (vf_device_count(VF_DEVICE_CUDA) != 0 ||
        strstr(vf_error_detail(), "vf_cuda_register") == NULL) {
        fprintf(stderr,
                "consumer_cuda: before vf_cuda_register, CUDA is "
                "not refused with a detail naming it: '%s'\n",
                vf_error_detail());
        return 1;
    }
    int rc = vf_cuda_register();
    if (rc != 0)
        return fail("vf_cuda_register", rc);
    if ((rc = vf_cuda_register()) != 0)
        return fail("vf_cuda_register (again)", rc);
    int n = vf_device_count(VF_DEVICE_CUDA);
    if (n == 0) {
        if (strstr(vf_error_detail(), "vf_cuda_register") != NULL) {
            fprintf(stderr, "consumer_cuda: registered, yet: %s\n",
                    vf_error_detail());
            return 1;
        }
        printf("consumer_cuda: varflow %d.%d.%d, CUDA class registered; no "
               "GPU here (%s): ok\n",
               VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH,
               vf_error_detail());
        return 0;
    }
    printf("consumer_cuda: varflow %d.%d.%d, CUDA class registered, %d "
           "GPU(s)\n",
           VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH, n);
    return run_on_gpu();
}
