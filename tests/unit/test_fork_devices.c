/*
 * test_fork_devices: what a forked child does with the parent's device
 * objects (device_pools.c, fences.c). The fork's stop joins every stream's
 * threads first, so on a device usable after a fork (the emulated one) the
 * child frees the parent's streams, and the events of the fences its vars
 * kept, when it rebuilds the engine, and makes its own. It forgot them: a
 * child that destroyed its engine lost about 3 KB per device the parent
 * had used (found by a user tester under valgrind and LeakSanitizer). The
 * emulated device counts its live streams and events (vf__emulated_live),
 * so the test sees the child's counts come back to what they were before
 * the engine was made, as the parent's do.
 */
#include "runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"

static int sleep_1ms(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 1000000L}, NULL);
    return 0;
}

static int submits_sleep(vf_run *run, void *arg)
{
    return vf_run_submit(run, sleep_1ms, arg, 0);
}

/* Device ops on devices 0 and 1, on each kind of pool, writing and
 * reading: streams, and read and write fences on the vars. */
static int push_device_ops(vf_engine *e, vf_var x, vf_var y)
{
    static const vf_property props[] = {VF_PROP_NORMAL, VF_PROP_COPY_TO_DEVICE,
                                        VF_PROP_DEVICE_PRIORITIZED};
    for (int dev = 0; dev < 2; dev++) {
        for (int k = 0; k < 3; k++) {
            int rc = vf_engine_push(
                e, &(vf_op){.fn = submits_sleep,
                            .reads = VF_VARS(y),
                            .writes = VF_VARS(x),
                            .property = props[k],
                            .device = {VF_DEVICE_EMULATED, dev}});
            if (rc != 0)
                return rc;
        }
        int rc = vf_engine_push(e,
                                &(vf_op){.fn = submits_sleep,
                                         .reads = VF_VARS(x),
                                         .device = {VF_DEVICE_EMULATED, dev}});
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* In the child: use the device, destroy the engine; 0 when no stream or
 * event is left beyond the `streams`, `events` there were before the
 * engine was made, else which check failed. */
static int child_frees_all(vf_engine *e, vf_var x, vf_var y, long streams,
                           long events)
{
    if (push_device_ops(e, x, y) != 0 || vf_engine_wait_all(e, NULL) != 0)
        return 1;
    if (vf_engine_destroy(e) != 0)
        return 2;
    long s = 0, ev = 0;
    vf__emulated_live(&s, &ev);
    if (s != streams)
        return 3;
    return ev == events ? 0 : 4;
}

TEST_CASE(a_forked_child_frees_the_parents_streams_and_events)
{
#if defined(TU_TSAN)
    TEST_SKIP("under TSan (its runtime cannot follow threads started in a "
              "forked child: see test_lifecycle_fork)");
#endif
    static const char *const why[] = {
        "", "its device ops failed", "its destroy failed",
        "the parent's streams were left", "the parent's events were left"};
    const struct {
        const char *name;
        vf_config cfg;
    } kinds[] = {
        {"naive", {.type = VF_ENGINE_NAIVE}},
        {"pooled", {.type = VF_ENGINE_POOLED, .cpu_workers = 2}},
        {"perdevice", {.type = VF_ENGINE_PERDEVICE, .cpu_workers = 2}},
    };
    for (int k = 0; k < 3; k++) {
        for (int in_flight = 0; in_flight < 2; in_flight++) {
            long streams0 = 0, events0 = 0;
            vf__emulated_live(&streams0, &events0);
            vf_engine *e = NULL;
            CHECK_OK(vf_engine_create(&e, &kinds[k].cfg));
            REQUIRE(e != NULL);
            vf_var x = tu_var(e), y = tu_var(e);
            CHECK_OK(push_device_ops(e, x, y));
            if (!in_flight) /* else the fork's stop waits for them */
                CHECK_OK(vf_engine_wait_all(e, NULL));
            long made = 0, unused = 0;
            vf__emulated_live(&made, &unused);
            CHECK(made > streams0); /* the parent made streams */
            fflush(NULL);
            pid_t pid = fork();
            REQUIRE(pid >= 0);
            if (pid == 0) {
                alarm(20); /* a hung child is killed: the parent sees it */
                _exit(child_frees_all(e, x, y, streams0, events0));
            }
            int status = 0;
            REQUIRE(waitpid(pid, &status, 0) == pid);
            if (WIFSIGNALED(status))
                CHECK_REPORT_("%s%s: the child died of signal %d",
                              kinds[k].name, in_flight ? ", in flight" : "",
                              WTERMSIG(status));
            else if (WEXITSTATUS(status) != 0)
                CHECK_REPORT_("%s%s: in the child, %s", kinds[k].name,
                              in_flight ? ", in flight" : "",
                              WEXITSTATUS(status) < 5
                                  ? why[WEXITSTATUS(status)]
                                  : "(unknown exit status)");
            CHECK_OK(push_device_ops(e, x, y)); /* the parent's go on */
            CHECK_OK(vf_engine_wait_all(e, NULL));
            CHECK_OK(vf_engine_destroy(e));
            long s = 0, ev = 0;
            vf__emulated_live(&s, &ev);
            CHECK_EQ(s, streams0);
            CHECK_EQ(ev, events0);
        }
    }
}

TEST_MAIN("test_fork_devices", 120)
