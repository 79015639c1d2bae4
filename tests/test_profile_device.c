/*
 * test_profile_device: the profile's figures count device work (issue 20):
 * the critical path runs through device stages and stream waits
 * (src/profile/critical.c), the verdict counts work on streams
 * (src/profile/verdict.c), and the parallelism levels count device ops
 * whose work runs (summary.c, vf__prof_levels).
 *
 * First on hand-made snapshots whose answers are worked out in the
 * comments: a device chain ending in a host op that waited for it (exact
 * length, ids, per-op weights, device flags, elapsed), a device op whose
 * work ran inside its own function (device_sync: the device stage adds
 * nothing), and a host op whose device pred finished before it started.
 * A figure within 10 points of its threshold gives the verdict "between"
 * (both verdicts, the figure, both sentences), in every output. A run on
 * one worker is "one worker" only where the figures say worker-bound.
 * Then on emulated runs whose right verdict is known:
 *   - a chain of device ops over one var, each 4 ms of device work: the
 *     critical path holds every op and covers their device time, the
 *     verdict is "dependency" (never "idle": ops too small), and the text
 *     summary, its JSON and the HTML report's data say so;
 *   - independent device ops on one stream, each 3 ms: the verdict is
 *     "device" (one stream busy the whole run), the path is one op;
 *   - in both, the time-weighted integral of the device level equals the
 *     sum of the device spans exactly, and the level ends at zero.
 * The chain is pushed behind a gate op that is not recorded (pushed before
 * the profile starts), so every edge between the chain's ops is recorded.
 */
#include "runner.h"

#include <unistd.h>

#include "profile/out.h"
#include "profile/snapshot.h"
#include <varflow_profile.h>

/* --- hand-made snapshots ------------------------------------------------ */

static vf_profile_record rec(uint64_t id, uint64_t s, uint64_t e, uint64_t ds,
                             uint64_t de, int worker)
{
    return (vf_profile_record){
        .id = id,
        .name = "op",
        .pool = 0,
        .worker = worker,
        .device = {de ? VF_DEVICE_EMULATED : VF_DEVICE_CPU, 0},
        .push_ns = s,
        .ready_ns = s,
        .start_ns = s,
        .end_ns = e,
        .device_start_ns = ds,
        .device_end_ns = de};
}

static const char *pools4[] = {"cpu", "cpu", "emu", "emu-copy"};

static vf_profile snapshot(vf_profile_record *r, size_t n, uint64_t *deps)
{
    vf_profile p = {.kind = VF_ENGINE_PERDEVICE,
                    .nworkers = 4,
                    .worker_pool = pools4,
                    .count = n,
                    .records = r,
                    .deps = deps,
                    .names = NULL};
    for (size_t i = 0; i < n; i++) {
        if (r[i].end_ns > p.span_ns)
            p.span_ns = r[i].end_ns;
        if (r[i].device_end_ns > p.span_ns)
            p.span_ns = r[i].device_end_ns;
    }
    return p;
}

/*
 * Ops a worker ran above a wait (children inside vf_run_wait_children)
 * lie inside the waiting op's span on the same worker: counted once in the
 * work, the busy figure and the running level (found trying the profiler
 * as a user: one worker showed an average parallelism of 2). Worker 0:
 * parent 0..100, its children 10..30, 30..50, 50..70, 70..90; worker 1:
 * 0..50; a thread of the program (-1): 0..20; an async op on worker 0:
 * 0..1000, its own time (not the workers'). Work: 100 + 50 + 20 = 170;
 * running at most 4 (both workers, the thread, the async op), 3 after 20.
 */
TEST_CASE(nested_runs_count_once)
{
    vf_profile_record r[8] = {
        rec(1, 0, 100, 0, 0, 0), rec(2, 10, 30, 0, 0, 0),
        rec(3, 30, 50, 0, 0, 0), rec(4, 50, 70, 0, 0, 0),
        rec(5, 70, 90, 0, 0, 0), rec(6, 0, 50, 0, 0, 1),
        rec(7, 0, 20, 0, 0, -1), rec(8, 0, 1000, 0, 0, 0)};
    r[7].async = true;
    vf_profile p = snapshot(r, 8, NULL);
    vf__prof_verdict v;
    CHECK_OK(vf__prof_verdict_of(&p, NULL, NULL, "op", &v));
    CHECK_EQ(v.host_ns, 170);
    CHECK_EQ(v.async_ns, 1000);
    vf__prof_level *lv = NULL;
    size_t n = 0;
    CHECK_OK(vf__prof_levels(&p, &lv, &n));
    uint32_t most = 0;
    for (size_t i = 0; i < n; i++) {
        if (lv[i].running > most)
            most = lv[i].running;
        if (lv[i].t >= 20 && lv[i].t < 50)
            CHECK_EQ(lv[i].running, 3);
    }
    CHECK_EQ(most, 4);
    REQUIRE(n > 0);
    CHECK_EQ(lv[n - 1].running, 0);
    free(lv);
}

/*
 * A (device, worker 2): function 0..10, work 5..1000;
 * B (device, worker 2, dep A): function 20..30, work 1000..2000 (it waited
 *   on its stream for A's work);
 * C (host, worker 0, dep B): 25..2100, of which 25..2000 waiting on the
 *   host for B's work.
 * H(A) = 10, D(A) = 10 + (1000 - 10) = 1000; H(B) = 10 + 10 = 20, D(B) =
 * max(20, 1000) + 1000 = 2000; H(C) = D(B) + (2100 - 2000) = 2100.
 * Path A, B, C; weights 1000 (host 10 + device 990), 1000 (device only),
 * 100; device flags 1, 1, 0; elapsed 2100 - 0.
 */
TEST_CASE(hand_made_device_chain)
{
    vf_profile_record r[3] = {rec(1, 0, 10, 5, 1000, 2),
                              rec(2, 20, 30, 1000, 2000, 2),
                              rec(3, 25, 2100, 0, 0, 0)};
    uint64_t deps[2] = {1, 2};
    r[1].ndeps = 1;
    r[1].deps = &deps[0];
    r[2].ndeps = 1;
    r[2].deps = &deps[1];
    vf_profile p = snapshot(r, 3, deps);
    vf_profile_path path;
    vf__prof_crit_stages st;
    CHECK_OK(vf__prof_critical(&p, &path, &st));
    REQUIRE(path.count == 3);
    CHECK_EQ(path.ids[0], 1);
    CHECK_EQ(path.ids[1], 2);
    CHECK_EQ(path.ids[2], 3);
    CHECK_EQ(path.length_ns, 2100);
    CHECK_EQ(path.elapsed_ns, 2100);
    CHECK_EQ(st.weight[0], 1000);
    CHECK_EQ(st.weight[1], 1000);
    CHECK_EQ(st.weight[2], 100);
    CHECK_EQ(st.device[0], 1);
    CHECK_EQ(st.device[1], 1);
    CHECK_EQ(st.device[2], 0);
    CHECK_EQ(st.device_ns[0], 990);
    CHECK_EQ(st.device_ns[1], 1000);
    CHECK_EQ(st.device_ns[2], 0);
    /* The public call gives the same path. */
    vf_profile_path pub;
    CHECK_OK(vf_profile_critical_path(&p, &pub));
    CHECK_EQ(pub.length_ns, path.length_ns);
    CHECK_EQ(pub.count, path.count);
    /* 2100 of a 2100 span: dependency-bound, 1990 of it device work. */
    vf__prof_verdict v;
    CHECK_OK(vf__prof_verdict_of(&p, &path, &st, "op", &v));
    CHECK_EQ(v.kind, VF__VERDICT_DEPENDENCY);
    CHECK_EQ(v.critical_device_ns, 1990);
    CHECK_EQ(v.streams, 1);
    CHECK_EQ(v.workers, 2);
    CHECK_EQ(v.device_ns, 995 + 1000);
    vf_profile_path_destroy(&pub);
    vf_profile_path_destroy(&path);
    vf__prof_crit_stages_free(&st);
}

/* The verdict of a CPU snapshot with workers 0 and 1 busy `w0` and `w1`
 * ns of a 1000 ns span, and a critical path of `crit` ns. */
static vf__prof_verdict verdict_at(uint64_t w0, uint64_t w1, uint64_t crit)
{
    vf_profile_record r[2] = {rec(1, 0, w0, 0, 0, 0), rec(2, 0, w1, 0, 0, 1)};
    vf_profile p = snapshot(r, 2, NULL);
    p.span_ns = 1000;
    vf_profile_path path = {.length_ns = crit};
    vf__prof_verdict v;
    CHECK_OK(vf__prof_verdict_of(&p, &path, NULL, "op", &v));
    return v;
}

static void expect_verdict(vf__prof_verdict v, const char *key,
                           const char *title, const char *has)
{
    if (strcmp(v.key, key) != 0 || strcmp(v.title, title) != 0 ||
        (has != NULL && strstr(v.text, has) == NULL))
        CHECK_REPORT_("verdict %s \"%s %s\": %s \"%s\" with \"%s\" "
                      "expected",
                      v.key, v.title, v.text, key, title, has ? has : "");
}

/* Async ops in flight are not workers at work: 100 reads, each started
 * inline (worker -1) and completed 1000 ns later by an I/O thread, 50 at a
 * time over a 2000 ns span, and one sync op of 100 ns on worker 0. The
 * verdict counted their spans as busy workers and said "One worker. Ops
 * ran one at a time" (or worker-bound, more workers would help) with 50
 * in flight (found trying pipelines with the profiler as a user). */
TEST_CASE(async_ops_are_not_worker_time)
{
    vf_profile_record r[101];
    for (int i = 0; i < 100; i++) {
        uint64_t s0 = (uint64_t)(i / 50) * 1000;
        r[i] = rec((uint64_t)i + 1, s0, s0 + 1000, 0, 0, -1);
        r[i].async = true;
    }
    r[100] = rec(101, 0, 100, 0, 0, 0);
    vf_profile p = snapshot(r, 101, NULL);
    vf_profile_path path = {.length_ns = 1000};
    vf__prof_verdict v;
    CHECK_OK(vf__prof_verdict_of(&p, &path, NULL, "op", &v));
    CHECK_EQ(v.host_ns, 100);
    CHECK_EQ(v.async_ns, 100 * 1000);
    expect_verdict(v, "idle", "Workers were idle.",
                   "Async ops were in flight 50.0 at a time");
    /* All async: not "one worker" either. */
    p = snapshot(r, 100, NULL);
    CHECK_OK(vf__prof_verdict_of(&p, &path, NULL, "op", &v));
    CHECK(strcmp(v.key, "one-worker") != 0);
    CHECK_EQ(v.host_ns, 0);
}

/* Ops on worker 0 alone, of a pool of 4: `n` ops back to back over
 * `busy` ns of a 1000 ns span, the critical path `crit` ns. */
static vf__prof_verdict one_worker_at(int n, uint64_t busy, uint64_t crit)
{
    vf_profile_record r[10];
    for (int i = 0; i < n; i++)
        r[i] = rec((uint64_t)i + 1, busy * (uint64_t)i / (uint64_t)n,
                   busy * (uint64_t)(i + 1) / (uint64_t)n, 0, 0, 0);
    vf_profile p = snapshot(r, (size_t)n, NULL);
    p.span_ns = 1000;
    vf_profile_path path = {.length_ns = crit};
    vf__prof_verdict v;
    CHECK_OK(vf__prof_verdict_of(&p, &path, NULL, "op", &v));
    return v;
}

/* One worker ran every op: "One worker." unless the figures say plainly
 * dependency-bound or idle (each 10 points past its line): a chain on one of
 * four workers is dependency-bound, a worker mostly idle is idle (both
 * were "One worker.", which read as a pool of one: found by a user
 * tester, whose chain of 40 ops on 4 workers turned "Dependency-bound"
 * whenever one unrelated op landed on a second worker). */
TEST_CASE(one_worker_only_where_it_is_the_answer)
{
    expect_verdict(one_worker_at(10, 1000, 1000), "dependency",
                   "Dependency-bound.", "The critical path alone is 100.0%");
    /* Idle, with the pools' reason for idle workers left out: one op
     * ran, not an op routed elsewhere (found by a reviewer). */
    vf__prof_verdict idle = one_worker_at(1, 6, 6);
    expect_verdict(idle, "idle", "Workers were idle.",
                   "of 1 worker was busy (3 of the 4 workers ran no op)");
    expect_verdict(one_worker_at(10, 1000, 100), "one-worker", "One worker.",
                   "the DAG would allow a parallelism of 10.0 (3 of the 4 "
                   "workers ran no op");
    /* Near a line, one lane's figures decide nothing: one worker. */
    expect_verdict(one_worker_at(10, 1000, 650), "one-worker", "One worker.",
                   "a parallelism of 1.5");
    expect_verdict(one_worker_at(10, 700, 70), "one-worker", "One worker.",
                   "a parallelism of 10.0");
}

/*
 * A figure within 10 points of its threshold decides nothing: the two runs
 * of issue 27 (critical path 79% and 62% of the span against 70%) get the
 * same verdict, "between", naming both and the figure; 10 points past
 * the line either way the verdict is plain again.
 */
TEST_CASE(verdict_near_a_line)
{
    const char *dep_idle = "Between dependency-bound and idle.";
    vf__prof_verdict v = verdict_at(1000, 100, 790);
    CHECK_EQ(v.kind, VF__VERDICT_BETWEEN);
    expect_verdict(v, "between", dep_idle,
                   "the critical path is 79.0% of the span "
                   "(dependency-bound from 70%)");
    CHECK_EQ(v.lo, VF__VERDICT_DEPENDENCY);
    CHECK_EQ(v.hi, VF__VERDICT_IDLE);
    CHECK(strcmp(v.lo_key, "dependency") == 0);
    CHECK(strcmp(v.hi_key, "idle") == 0);
    /* Both sentences, each whole. */
    CHECK(strstr(v.text, "Dependency-bound. The critical path alone is "
                         "79.0%") != NULL);
    CHECK(strstr(v.text, "Workers were idle. On average") != NULL);
    expect_verdict(verdict_at(1000, 100, 620), "between", dep_idle, "62.0%");
    expect_verdict(verdict_at(1000, 100, 700), "between", dep_idle, "70.0%");
    /* Clear of the band: one verdict. */
    expect_verdict(verdict_at(1000, 100, 950), "dependency",
                   "Dependency-bound.", "95.0%");
    expect_verdict(verdict_at(1000, 100, 810), "dependency",
                   "Dependency-bound.", NULL);
    expect_verdict(verdict_at(1000, 100, 400), "idle", "Workers were idle.",
                   NULL);
    expect_verdict(verdict_at(1000, 100, 590), "idle", "Workers were idle.",
                   NULL);
    /* The workers' line (75% busy): 80% and 70% busy are between, 90%
     * and 55% are not. */
    const char *work_idle = "Between worker-bound and idle.";
    expect_verdict(verdict_at(1000, 600, 100), "between", work_idle,
                   "80.0% of the workers and streams were busy on average "
                   "(worker-bound from 75%)");
    expect_verdict(verdict_at(1000, 400, 100), "between", work_idle, "70.0%");
    expect_verdict(verdict_at(1000, 800, 100), "workers", "Worker-bound.",
                   NULL);
    expect_verdict(verdict_at(1000, 100, 100), "idle", "Workers were idle.",
                   NULL);
    /* Both lines near: the path at 75% and 80% busy. The figures of
     * both, and the ends of the chain as the two verdicts. */
    v = verdict_at(1000, 600, 750);
    expect_verdict(v, "between", dep_idle, "75.0% of the span");
    CHECK(strstr(v.text, " and 80.0% of the workers") != NULL);
    CHECK(strstr(v.text, "within 10 points of those lines") != NULL);
}

/* The outputs of a real snapshot near the line: A (worker 0) 0..400, B
 * (worker 1, after A) 400..790, C (worker 0) 400..1000 alone. The path
 * A, B is 79% of the span; 69.5% busy. The JSON summary and the report's
 * data say "between" and name both kinds; the text summary both. */
TEST_CASE(verdict_between_in_outputs)
{
    vf_profile_record r[3] = {rec(1, 0, 400, 0, 0, 0),
                              rec(2, 400, 790, 0, 0, 1),
                              rec(3, 400, 1000, 0, 0, 0)};
    uint64_t deps[1] = {1};
    r[1].ndeps = 1;
    r[1].deps = &deps[0];
    vf_profile p = snapshot(r, 3, deps);
    char path[64];
    snprintf(path, sizeof path, "/tmp/vf_profile_between_%d", (int)getpid());
    const char *want[][2] = {
        {"verdict: Between dependency-bound and idle. Near the line: the "
         "critical path is 79.0% of the span",
         NULL},
        {"\"verdict\":{\"kind\":\"between\",\"text\":\"Between "
         "dependency-bound and idle.",
         "\"between\":[\"dependency\",\"idle\"]}"},
        {"\"verdict\":{\"kind\":\"between\",\"title\":\"Between "
         "dependency-bound and idle.\"",
         "\"between\":[\"dependency\",\"idle\"]}"}};
    vf_profile_format fmt[] = {VF_PROFILE_SUMMARY_TEXT, VF_PROFILE_SUMMARY_JSON,
                               VF_PROFILE_HTML};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(vf_profile_write(&p, path, fmt[i]));
        char *text = tu_read_file(path);
        REQUIRE(text != NULL);
        for (int j = 0; j < 2; j++)
            if (want[i][j] != NULL && strstr(text, want[i][j]) == NULL)
                CHECK_REPORT_("format %d: no '%s' in:\n%.900s", i, want[i][j],
                              text);
        free(text);
    }
    unlink(path);
}

/* device_sync: the op's function waited for its own work (100..400 inside
 * 0..500): the device stage adds nothing, the op weighs 500; its host
 * successor (600..700) weighs 100. Without device spans the same DAG gives
 * the same path: run times only. */
TEST_CASE(hand_made_sync_and_host)
{
    vf_profile_record r[2] = {rec(1, 0, 500, 100, 400, 2),
                              rec(2, 600, 700, 0, 0, 0)};
    uint64_t deps[1] = {1};
    r[1].ndeps = 1;
    r[1].deps = deps;
    vf_profile p = snapshot(r, 2, deps);
    vf_profile_path path;
    vf__prof_crit_stages st;
    CHECK_OK(vf__prof_critical(&p, &path, &st));
    REQUIRE(path.count == 2);
    CHECK_EQ(path.length_ns, 600);
    CHECK_EQ(st.weight[0], 500);
    CHECK_EQ(st.weight[1], 100);
    CHECK_EQ(st.device_ns[0], 0);
    /* Its stream was busy 300, but as work that is inside its 500 of run:
     * 600 of work in a span of 700 (it counted both: 900, a parallelism
     * above 1 for a chain; found by a user tester). */
    vf__prof_verdict v;
    CHECK_OK(vf__prof_verdict_of(&p, &path, &st, "op", &v));
    CHECK_EQ(v.device_ns, 300);
    CHECK_EQ(v.host_ns, 600);
    CHECK(v.parallelism == 600.0 / 700.0);
    vf_profile_path_destroy(&path);
    vf__prof_crit_stages_free(&st);
    r[0].device_start_ns = r[0].device_end_ns = 0;
    r[0].device.type = VF_DEVICE_CPU;
    CHECK_OK(vf__prof_critical(&p, &path, &st));
    CHECK_EQ(path.length_ns, 600);
    CHECK_EQ(path.elapsed_ns, 700);
    vf_profile_path_destroy(&path);
    vf__prof_crit_stages_free(&st);
}

/* --- emulated runs -------------------------------------------------------- */

static tu_gate gate;

static int wait_gate(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return tu_gate_wait(&gate, 60) ? 0 : 1;
}

static int dev_nothing(void *arg)
{
    (void)arg;
    return 0;
}

static int op_device(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, dev_nothing, NULL, 0);
}

static vf_engine *device_engine(int latency_us)
{
    vf_engine *e = NULL;
    CHECK_OK(
        vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                          .cpu_workers = 1,
                                          .cpu_priority_workers = 1,
                                          .gpu_workers = 1,
                                          .gpu_copy_workers = 1,
                                          .gpu_priority_workers = 1,
                                          .emulated_latency_us = latency_us}));
    REQUIRE(e != NULL);
    /* Start the device's pools before the profile does. */
    vf_var w = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = op_device,
                                        .writes = VF_VARS(w),
                                        .device = {VF_DEVICE_EMULATED, 0}}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    return e;
}

/* The device level's integral over time equals the device spans' sum, and
 * the last level is zero. */
static void check_levels(const vf_profile *p)
{
    vf__prof_level *lv = NULL;
    size_t n = 0;
    CHECK_OK(vf__prof_levels(p, &lv, &n));
    REQUIRE(n > 0);
    uint64_t integral = 0, sum = 0;
    for (size_t i = 0; i + 1 < n; i++)
        integral += (uint64_t)lv[i].device * (lv[i + 1].t - lv[i].t);
    for (size_t i = 0; i < p->count; i++)
        sum += vf__prof_device_dur(&p->records[i]);
    CHECK(sum > 0);
    if (integral != sum)
        CHECK_REPORT_("device level integral %llu ns, device spans %llu ns",
                      (unsigned long long)integral, (unsigned long long)sum);
    CHECK_EQ(lv[n - 1].device, 0);
    CHECK_EQ(lv[n - 1].running, 0);
    free(lv);
}

/* The outputs' words: the text summary's verdict line, the JSON summary's
 * verdict kind, the report's data. */
static void check_outputs(const vf_profile *p, const char *kind,
                          const char *title)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/vf_profile_device_%d.txt", (int)getpid());
    CHECK_OK(vf_profile_write(p, path, VF_PROFILE_SUMMARY_TEXT));
    char *text = tu_read_file(path);
    REQUIRE(text != NULL);
    char want[96];
    snprintf(want, sizeof want, "verdict: %s", title);
    if (strstr(text, want) == NULL || strstr(text, "too small") != NULL)
        CHECK_REPORT_("summary: no '%s', or an idle verdict, in:\n%s", want,
                      text);
    free(text);
    CHECK_OK(vf_profile_write(p, path, VF_PROFILE_SUMMARY_JSON));
    text = tu_read_file(path);
    REQUIRE(text != NULL);
    snprintf(want, sizeof want, "\"verdict\":{\"kind\":\"%s\"", kind);
    if (strstr(text, want) == NULL)
        CHECK_REPORT_("summary JSON: no '%s' in:\n%.600s", want, text);
    free(text);
    CHECK_OK(vf_profile_write(p, path, VF_PROFILE_HTML));
    text = tu_read_file(path);
    REQUIRE(text != NULL);
    if (strstr(text, want) == NULL || strstr(text, "\"crit_w\":[") == NULL ||
        strstr(text, "\"device_busy\":") == NULL)
        CHECK_REPORT_("report: no '%s', crit_w or device_busy in its data",
                      want);
    free(text);
    unlink(path);
}

/* A chain over one var: every op's device work waits for the previous
 * one's (a stream wait, or the same stream's order). The span counts from
 * the profile's start: the ops' latency is long enough that a loaded
 * machine's delay before the first op starts (20 ms seen in CI, against a
 * chain of 24 ms then: "between" at 64.5 %) leaves the path above 80 %. */
TEST_CASE(device_chain_is_dependency_bound)
{
    enum { N = 6, LAT_US = 20000 };
    vf_engine *e = device_engine(LAT_US);
    vf_var x = tu_var(e);
    tu_gate_init(&gate);
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = wait_gate, .writes = VF_VARS(x)}));
    CHECK_OK(vf_profile_start(e));
    for (int i = 0; i < N; i++)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = op_device,
                        .writes = VF_VARS(x),
                        .device = {VF_DEVICE_EMULATED, 0},
                        .property = i % 2 ? VF_PROP_COPY_TO_DEVICE
                                          : VF_PROP_NORMAL,
                        .name = "step"}));
    tu_gate_open(&gate);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_profile_stop(e));
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    CHECK_EQ(vf_profile_count(p), N);
    vf_profile_path path;
    vf__prof_crit_stages st;
    CHECK_OK(vf__prof_critical(p, &path, &st));
    uint64_t dev = 0;
    for (size_t i = 0; i < path.count; i++)
        dev += st.device_ns[i];
    /* Every op, and (nearly) all of their device time: the first op's
     * work may start while its function still returns. */
    CHECK_EQ(path.count, N);
    uint64_t want = (uint64_t)N * LAT_US * 1000 - LAT_US * 500;
    if (dev < want || path.length_ns < dev)
        CHECK_REPORT_("critical path %llu ns, %llu of it device work: at "
                      "least %llu of device work expected",
                      (unsigned long long)path.length_ns,
                      (unsigned long long)dev, (unsigned long long)want);
    vf__prof_verdict v;
    CHECK_OK(vf__prof_verdict_of(p, &path, &st, "step", &v));
    if (v.kind != VF__VERDICT_DEPENDENCY)
        CHECK_REPORT_("verdict %s (%s %s), dependency expected: path %llu "
                      "ns of a %llu ns span",
                      v.key, v.title, v.text,
                      (unsigned long long)path.length_ns,
                      (unsigned long long)vf_profile_span_ns(p));
    CHECK_EQ(v.streams, 2); /* compute and copy */
    check_levels(p);
    check_outputs(p, "dependency", "Dependency-bound.");
    vf_profile_path_destroy(&path);
    vf__prof_crit_stages_free(&st);
    vf_profile_destroy(p);
    tu_finish_engine(e);
    tu_gate_destroy(&gate);
}

/* Independent ops on one stream: nothing to wait for but the stream (a
 * latency long enough for a loaded machine, as above). */
TEST_CASE(one_busy_stream_is_device_bound)
{
    enum { N = 8, LAT_US = 15000 };
    vf_engine *e = device_engine(LAT_US);
    vf_var vars[N];
    for (int i = 0; i < N; i++)
        vars[i] = tu_var(e);
    CHECK_OK(vf_profile_start(e));
    for (int i = 0; i < N; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = op_device,
                                            .writes = VF_VARS(vars[i]),
                                            .device = {VF_DEVICE_EMULATED, 0},
                                            .name = "kernel"}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_profile_stop(e));
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    vf_profile_path path;
    vf__prof_crit_stages st;
    CHECK_OK(vf__prof_critical(p, &path, &st));
    CHECK_EQ(path.count, 1);
    CHECK(path.length_ns >= LAT_US * 500);
    vf__prof_verdict v;
    CHECK_OK(vf__prof_verdict_of(p, &path, &st, "kernel", &v));
    if (v.kind != VF__VERDICT_DEVICE)
        CHECK_REPORT_("verdict %s (%s %s), device expected: busiest stream "
                      "%llu ns of a %llu ns span",
                      v.key, v.title, v.text,
                      (unsigned long long)v.busiest_stream_ns,
                      (unsigned long long)vf_profile_span_ns(p));
    CHECK_EQ(v.streams, 1);
    check_levels(p);
    check_outputs(p, "device", "Device-bound.");
    vf_profile_path_destroy(&path);
    vf__prof_crit_stages_free(&st);
    vf_profile_destroy(p);
    tu_finish_engine(e);
}

/* A device op that spends long on the host before it puts its work on
 * the stream: the device span starts at that work, not at the function's
 * start, so the host's preparation is not device work and the run is not
 * device-bound (a user tester auditing the profiler: 4 ms of preparation
 * before 0.1 ms of work made 98 % of the span "device work", and the
 * verdict "Device-bound"). A device op that puts no work has an empty
 * span. */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How long each function spent on the host before it put work (or, for
 * the one that puts none, before it returned), by its own clock. */
static uint64_t prepared_ns, empty_ns;

static int prepare_then_submit(vf_run *run, void *arg)
{
    (void)arg;
    uint64_t t0 = mono_ns();
    tu_spin_us(20000);
    prepared_ns = mono_ns() - t0;
    return vf_run_submit(run, dev_nothing, NULL, 0);
}

static int puts_nothing(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    uint64_t t0 = mono_ns();
    tu_spin_us(5000);
    empty_ns = mono_ns() - t0;
    return 0;
}

TEST_CASE(host_preparation_is_not_device_work)
{
    enum { LAT_US = 1000 };
    vf_engine *e = device_engine(LAT_US);
    vf_var x = tu_var(e), y = tu_var(e);
    CHECK_OK(vf_profile_start(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = prepare_then_submit,
                                        .writes = VF_VARS(x),
                                        .device = {VF_DEVICE_EMULATED, 0},
                                        .name = "prepared"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = puts_nothing,
                                        .writes = VF_VARS(y),
                                        .device = {VF_DEVICE_EMULATED, 0},
                                        .name = "empty"}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_profile_stop(e));
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    REQUIRE(vf_profile_count(p) == 2);
    const vf_profile_record *a = vf_profile_at(p, 0), *b = vf_profile_at(p, 1);
    CHECK(a->device_end_ns - a->device_start_ns >= LAT_US * 1000ull);
    /* Each span starts once its function's host time was over: the
     * record's start comes before the function's own clock started. (A
     * bound on the end is timing's: on a loaded machine the function may
     * return, and the stream run, well after the work was put.) */
    if (a->device_start_ns < a->start_ns + prepared_ns)
        CHECK_REPORT_("device span from %llu ns, the function from %llu ns "
                      "spent %llu ns before it put its work",
                      (unsigned long long)a->device_start_ns,
                      (unsigned long long)a->start_ns,
                      (unsigned long long)prepared_ns);
    if (b->device_start_ns < b->start_ns + empty_ns)
        CHECK_REPORT_("an op that put no work: device span from %llu ns, "
                      "its function from %llu ns for %llu ns",
                      (unsigned long long)b->device_start_ns,
                      (unsigned long long)b->start_ns,
                      (unsigned long long)empty_ns);
    vf_profile_destroy(p);
    tu_finish_engine(e);
}

/* A host op that reads what device work writes waits for that work before
 * its function starts: the wait is not its run (PROFILING.md: waiting is
 * not counted in an op's length). Before, its start was taken before the
 * wait, and an empty op's record lasted as long as the device work. */
static int empty_fn(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

TEST_CASE(host_wait_for_device_work_is_not_run_time)
{
    enum { LAT_US = 30000 };
    vf_engine *e = device_engine(LAT_US);
    vf_var x = tu_var(e);
    CHECK_OK(vf_profile_start(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = op_device,
                                        .writes = VF_VARS(x),
                                        .device = {VF_DEVICE_EMULATED, 0},
                                        .name = "kernel"}));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = empty_fn, .reads = VF_VARS(x), .name = "reader"}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_profile_stop(e));
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    REQUIRE(vf_profile_count(p) == 2);
    const vf_profile_record *k = vf_profile_at(p, 0), *r = vf_profile_at(p, 1);
    CHECK(strcmp(k->name, "kernel") == 0 && strcmp(r->name, "reader") == 0);
    CHECK(k->device_end_ns - k->device_start_ns >= LAT_US * 1000ull);
    if (r->start_ns < k->device_end_ns)
        CHECK_REPORT_("reader started at %llu ns, before the device work it "
                      "waited for ended (%llu ns)",
                      (unsigned long long)r->start_ns,
                      (unsigned long long)k->device_end_ns);
    vf_profile_destroy(p);
    tu_finish_engine(e);
}

/* A device op whose function ran before an input's work failed (the host
 * does not wait for the device) is skipped on its stream: its record has
 * no device span, its host span stands (found trying the profiler as a
 * user: the skipped op had a device span). */
static int dev_fails(void *arg)
{
    (void)arg;
    return 9;
}

static int op_device_failing(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, dev_fails, NULL, 0);
}

TEST_CASE(skipped_device_work_has_no_device_span)
{
    vf_engine *e = device_engine(20000); /* B's function runs meanwhile */
    vf_var x = tu_var(e), y = tu_var(e);
    CHECK_OK(vf_profile_start(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = op_device_failing,
                                        .writes = VF_VARS(x),
                                        .device = {VF_DEVICE_EMULATED, 0},
                                        .name = "fails"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = op_device,
                                        .reads = VF_VARS(x),
                                        .writes = VF_VARS(y),
                                        .device = {VF_DEVICE_EMULATED, 0},
                                        .name = "behind"}));
    CHECK_ERR(vf_engine_wait_all(e, NULL), VF_EOPFAILED);
    vf_profile *p = NULL;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(p != NULL);
    REQUIRE(vf_profile_count(p) == 2);
    const vf_profile_record *a = vf_profile_at(p, 0), *b = vf_profile_at(p, 1);
    CHECK(strcmp(a->name, "fails") == 0 && strcmp(b->name, "behind") == 0);
    CHECK_EQ(a->status, 9);
    CHECK(a->device_end_ns > a->device_start_ns);
    CHECK_EQ(b->status, VF_ESKIPPED);
    CHECK_EQ(b->device_start_ns, 0);
    CHECK_EQ(b->device_end_ns, 0);
    CHECK(b->start_ns <= b->end_ns);
    vf_profile_destroy(p);
    tu_finish_engine(e);
}

/* A record's pool, as varflow_profile.h numbers them: 0 the CPU pool,
 * then the per-device engine's CPU priority pool (1), then the device's
 * pools, from 2 there and from 1 on the pooled engine, which has no
 * priority pool (the header said "2 and up" for both: found trying the
 * profiler as a user). */
TEST_CASE(pool_numbers_per_engine_kind)
{
    for (int kind = 0; kind < 2; kind++) {
        bool perdev = kind == 1;
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(
            &e, &(vf_config){.type = perdev ? VF_ENGINE_PERDEVICE
                                            : VF_ENGINE_POOLED,
                             .cpu_workers = 1,
                             .cpu_priority_workers = perdev ? 1 : 0,
                             .gpu_workers = 1}));
        REQUIRE(e != NULL);
        vf_var x = tu_var(e);
        CHECK_OK(vf_profile_start(e));
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = empty_fn, .writes = VF_VARS(x), .name = "cpu"}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = op_device,
                                            .writes = VF_VARS(x),
                                            .device = {VF_DEVICE_EMULATED, 0},
                                            .name = "device"}));
        if (perdev)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = empty_fn,
                                           .writes = VF_VARS(x),
                                           .property = VF_PROP_CPU_PRIORITIZED,
                                           .name = "prio"}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_OK(vf_profile_stop(e));
        vf_profile *p = NULL;
        CHECK_OK(vf_profile_take(e, &p));
        REQUIRE(p != NULL);
        REQUIRE(vf_profile_count(p) == (perdev ? 3u : 2u));
        CHECK_EQ(vf_profile_at(p, 0)->pool, 0);
        CHECK_EQ(vf_profile_at(p, 1)->pool, perdev ? 2 : 1);
        if (perdev)
            CHECK_EQ(vf_profile_at(p, 2)->pool, 1);
        vf_profile_destroy(p);
        tu_finish_engine(e);
    }
}

/* The path of a two-op profile whose op 1 (A) has host 0..10 and device
 * work 5..1000 is A alone, 1000 of 1000. */
static void check_path_is_a_alone(const vf_profile *p)
{
    vf_profile_path path;
    CHECK_OK(vf_profile_critical_path(p, &path));
    REQUIRE(path.count == 1);
    CHECK_EQ(path.ids[0], 1);
    CHECK_EQ(path.length_ns, 1000);
    CHECK_EQ(path.elapsed_ns, 1000);
    vf_profile_path_destroy(&path);
}

/* A device op whose stream skipped its work (a pred's work failed after
 * its function ran) has no device stage, but its function did not wait
 * for the pred's work: its host stage follows the pred's host stage, and
 * the path's length stays within its elapsed time. A (device, host 0..10,
 * work 5..1000) and B (device, skipped, host 20..30, after A): H(B) = 10 +
 * 10 = 20, not D(A) + 0; the path is A, 1000 of 1000. (B followed A's
 * work: length 1000 over an elapsed 30, and elapsed - length wrapped:
 * found by a user tester.) */
TEST_CASE(skipped_device_work_does_not_follow_its_preds_work)
{
    vf_profile_record r[2] = {rec(1, 0, 10, 5, 1000, 2),
                              rec(2, 20, 30, 0, 0, 2)};
    r[1].device = (vf_device){VF_DEVICE_EMULATED, 0};
    r[1].status = VF_ESKIPPED;
    uint64_t deps[1] = {1};
    r[1].ndeps = 1;
    r[1].deps = &deps[0];
    vf_profile p = snapshot(r, 2, deps);
    check_path_is_a_alone(&p);
    /* With B's host stage longer than A's work, the path is A's host
     * stage and B's: 10 + 2000. */
    r[1].end_ns = 2020;
    p = snapshot(r, 2, deps);
    vf_profile_path path;
    CHECK_OK(vf_profile_critical_path(&p, &path));
    REQUIRE(path.count == 2);
    CHECK_EQ(path.length_ns, 10 + 2000);
    CHECK(path.length_ns <= path.elapsed_ns);
    vf_profile_path_destroy(&path);
}

/* A parent edge is the functions' only: a CPU child of a device op (no
 * var in common) follows its parent's function, not its work. P (device,
 * host 0..10, work 5..1000) pushed C (CPU, 20..30), which outlived P's
 * function: H(C) = 10 + 10, and the path is P, 1000 of 1000. (C followed
 * P's work: length 1010 over an elapsed 30; found by a reviewer.) */
TEST_CASE(parent_edge_does_not_follow_device_work)
{
    vf_profile_record r[2] = {rec(1, 0, 10, 5, 1000, 2),
                              rec(2, 20, 30, 0, 0, 0)};
    r[1].parent = 1;
    vf_profile p = snapshot(r, 2, NULL);
    check_path_is_a_alone(&p);
}

TEST_MAIN("test_profile_device", 120)
