/*
 * test_device_engine: the per-device engine on the emulated stream device.
 *
 * - Routing: every (device, property) pair runs on the pool MXNet's table
 *   names (read back from the profile: pool name and device of each op),
 *   printed as a table; each worker owns one stream, distinct from every
 *   other worker's; CPU ops have no stream.
 * - Cross-stream ordering: random programs over the CPU and two emulated
 *   devices (compute, copy and priority pools, so many streams), whose
 *   device ops do their work on the stream (vf_run_submit) with emulated
 *   latency, so the host runs far ahead of the devices; the final values,
 *   and the values seen by waits in the middle, equal the serial program's
 *   bit for bit. Run with event ordering (stream waits must happen), with
 *   device_sync, on the naive and the pooled engine, for several seeds.
 * - Failures (rule 9) across streams: work failing on a device fails its
 *   op; ops depending on it on another stream, on the same device and on
 *   the CPU are skipped and their work never runs; independent ops run;
 *   vf_var_wait and vf_engine_wait_all report the first failure with its op
 *   name and message; every done callback runs once. Of two failures, the
 *   first in push order, even when it is still failing on the device as
 *   the op starts; a wait of another thread claiming a failure that work in
 *   flight inherited does not make an op pushed meanwhile fail on its own,
 *   nor skip one pushed after the wait, even through an op before the wait
 *   that began after the claim; a wait for device work is not held up by
 *   work handed over after it. A failure of a device op's work stays its
 *   own when a child runs on its stream while its function runs. An op
 *   skipped behind failing work on a device gets VF_ESKIPPED, and with
 *   device_sync or on the naive engine its function is never called.
 * - Device writes bump their var's version (rule 8).
 * - A delete waits for the device work on its var; bad input is refused
 *   with the right code (a device op outside a stream, an async device
 *   op, a device id that is not there, a CUDA op while no CUDA class is
 *   registered: VF_ENODEV, the detail naming vf_cuda_register).
 * - Device work calling back: every wait, stop, start and destroy from it
 *   is VF_EDEADLK, its push goes over max_inflight, vf_engine_in_op is
 *   true for its engine; a CPU op it pushes never runs on the stream's
 *   thread (under run_at_push either), where it could wait for a fence
 *   queued behind the work. An async op made ready in a device op's
 *   `done` starts on a CPU worker, not on the completer.
 * The last two cases, cuda_random_programs and cuda_failures (built with
 * libvarflow-cuda, VF_TEST_CUDA), register the CUDA class, then run the
 * random programs and failures on CUDA device 0 beside an emulated one;
 * they skip (exit 77) without a GPU, or without libvarflow-cuda.
 */
#include "runner.h"

#include <sched.h>
#include <string.h>
#include <time.h>

#include <varflow_profile.h>
#ifdef VF_TEST_CUDA
#include <varflow_cuda.h>
#endif

#define NV 16
#define MAXR 3
#define MAXW 2

/* --- routing ------------------------------------------------------------ */

typedef struct route_probe {
    atomic_int worker;
    _Atomic(void *) stream;
} route_probe;

static int probe_fn(vf_run *run, void *arg)
{
    route_probe *p = arg;
    atomic_store(&p->worker, vf_run_worker(run));
    atomic_store(&p->stream, vf_run_stream(run));
    return 0;
}

TEST_CASE(routing)
{
    static const struct {
        vf_device dev;
        vf_property prop;
        const char *pool; /* expected pool name */
    } table[] = {
        {{VF_DEVICE_CPU, 0}, VF_PROP_NORMAL, "cpu"},
        {{VF_DEVICE_CPU, 0}, VF_PROP_CPU_PRIORITIZED, "prio"},
        {{VF_DEVICE_CPU, 0}, VF_PROP_DEVICE_PRIORITIZED, "cpu"},
        {{VF_DEVICE_EMULATED, 0}, VF_PROP_NORMAL, "emu"},
        {{VF_DEVICE_EMULATED, 0}, VF_PROP_COPY_TO_DEVICE, "emu-copy"},
        {{VF_DEVICE_EMULATED, 0}, VF_PROP_COPY_FROM_DEVICE, "emu-copy"},
        {{VF_DEVICE_EMULATED, 0}, VF_PROP_DEVICE_PRIORITIZED, "emu-prio"},
        {{VF_DEVICE_EMULATED, 0}, VF_PROP_CPU_PRIORITIZED, "emu"},
        {{VF_DEVICE_EMULATED, 0}, VF_PROP_DELETE_VAR, "emu"},
        {{VF_DEVICE_EMULATED, 1}, VF_PROP_NORMAL, "emu"},
        {{VF_DEVICE_EMULATED, 1}, VF_PROP_COPY_TO_DEVICE, "emu-copy"},
        {{VF_DEVICE_EMULATED, 1}, VF_PROP_DEVICE_PRIORITIZED, "emu-prio"},
    };
    enum { N = sizeof table / sizeof table[0], REPS = 40 };
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                               .cpu_workers = 2,
                                               .cpu_priority_workers = 1,
                                               .gpu_workers = 2,
                                               .gpu_copy_workers = 2,
                                               .gpu_priority_workers = 1}));
    CHECK_OK(vf_profile_start(e));
    static route_probe probes[N * REPS];
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < N; i++)
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = probe_fn,
                                                .arg = &probes[r * N + i],
                                                .device = table[i].dev,
                                                .property = table[i].prop,
                                                .name = "probe"}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    vf_profile *p;
    CHECK_OK(vf_profile_take(e, &p));
    REQUIRE(vf_profile_count(p) == N * REPS);

    /* Records are in push order: record k is probe k. */
    printf("routing (device, property -> pool, workers seen):\n");
    void *stream_of[64] = {0};
    for (int i = 0; i < N; i++) {
        unsigned seen = 0;
        for (int r = 0; r < REPS; r++) {
            const vf_profile_record *rec = vf_profile_at(p, r * N + i);
            route_probe *pr = &probes[r * N + i];
            int w = atomic_load(&pr->worker);
            void *s = atomic_load(&pr->stream);
            const char *pool = vf_profile_worker_pool(p, rec->worker);
            CHECK(rec->worker == w);
            if (pool == NULL || strcmp(pool, table[i].pool) != 0)
                CHECK_REPORT_("op %d (device %d:%d, property %d) ran on "
                              "pool %s, expected %s",
                              i, (int)table[i].dev.type, table[i].dev.id,
                              (int)table[i].prop, pool ? pool : "(none)",
                              table[i].pool);
            CHECK(rec->device.type == table[i].dev.type &&
                  rec->device.id == table[i].dev.id);
            /* A stream for device ops only; one stream per worker. */
            CHECK((s != NULL) == (table[i].dev.type != VF_DEVICE_CPU));
            REQUIRE(w >= 0 && w < 64);
            if (s != NULL) {
                if (stream_of[w] == NULL)
                    stream_of[w] = s;
                CHECK(stream_of[w] == s);
            }
            seen |= 1u << (w & 31);
        }
        printf("  %-9s %d  %-22s -> %-9s workers %#x\n",
               table[i].dev.type == VF_DEVICE_CPU ? "cpu" : "emulated",
               table[i].dev.id,
               table[i].prop == VF_PROP_NORMAL             ? "normal"
               : table[i].prop == VF_PROP_COPY_TO_DEVICE   ? "copy_to_device"
               : table[i].prop == VF_PROP_COPY_FROM_DEVICE ? "copy_from_device"
               : table[i].prop == VF_PROP_CPU_PRIORITIZED  ? "cpu_prioritized"
               : table[i].prop == VF_PROP_DEVICE_PRIORITIZED
                   ? "device_prioritized"
               : table[i].prop == VF_PROP_DELETE_VAR ? "delete_var"
                                                     : "?",
               table[i].pool, seen);
    }
    for (int a = 0; a < 64; a++)
        for (int b = a + 1; b < 64; b++)
            if (stream_of[a] != NULL && stream_of[a] == stream_of[b])
                CHECK_REPORT_("workers %d and %d share a stream", a, b);
    vf_profile_destroy(p);
    CHECK_OK(vf_engine_destroy(e));
}

/* --- random programs over streams --------------------------------------- */

typedef struct rop {
    vf_device dev;
    vf_property prop;
    int nr, nw;
    int r[MAXR], w[MAXW];
    int split;        /* device work in two submissions */
    uint64_t scratch; /* between the two submissions */
    uint64_t *val;    /* the program's values */
    int g;
    atomic_int done_calls;
    atomic_int done_status;
} rop;

static uint64_t rop_hash(const rop *o)
{
    uint64_t h = tu_mix(0x5eed, (uint64_t)o->g);
    for (int k = 0; k < o->nr; k++)
        h = tu_mix(h, o->val[o->r[k]]);
    for (int k = 0; k < o->nw; k++)
        h = tu_mix(h, o->val[o->w[k]]); /* writes read-modify-write */
    return h;
}

static void rop_store(rop *o, uint64_t h)
{
    for (int k = 0; k < o->nw; k++)
        o->val[o->w[k]] = tu_mix(h, (uint64_t)o->w[k]);
}

static int dev_whole(void *arg)
{
    rop *o = arg;
    rop_store(o, rop_hash(o));
    return 0;
}

static int dev_first(void *arg)
{
    rop *o = arg;
    o->scratch = rop_hash(o);
    return 0;
}

static int dev_second(void *arg)
{
    rop *o = arg;
    rop_store(o, o->scratch);
    return 0;
}

static int rop_fn(vf_run *run, void *arg)
{
    rop *o = arg;
    if (o->dev.type == VF_DEVICE_CPU) {
        if (vf_run_stream(run) != NULL)
            return 91;
        rop_store(o, rop_hash(o));
        return 0;
    }
    if (vf_run_stream(run) == NULL)
        return 92;
    size_t bytes = o->prop == VF_PROP_COPY_TO_DEVICE ||
                           o->prop == VF_PROP_COPY_FROM_DEVICE
                       ? 4096
                       : 0;
    if (!o->split)
        return vf_run_submit(run, dev_whole, o, bytes);
    int rc = vf_run_submit(run, dev_first, o, 0);
    return rc ? rc : vf_run_submit(run, dev_second, o, bytes);
}

static void rop_done(void *arg, int status)
{
    rop *o = arg;
    atomic_store(&o->done_status, status);
    atomic_fetch_add(&o->done_calls, 1);
}

static void pick_distinct(tu_rng *rng, int *out, int n, const int *avoid,
                          int navoid)
{
    for (int k = 0; k < n; k++) {
        int v, clash;
        do {
            v = tu_below(rng, NV);
            clash = 0;
            for (int j = 0; j < k; j++)
                clash |= out[j] == v;
            for (int j = 0; j < navoid; j++)
                clash |= avoid[j] == v;
        } while (clash);
        out[k] = v;
    }
}

/* The devices random programs use besides the CPU. */
static vf_device devices[2] = {{VF_DEVICE_EMULATED, 0},
                               {VF_DEVICE_EMULATED, 1}};

static void make_program(tu_rng *rng, rop *ops, int n, int ndev)
{
    static const vf_property props[] = {
        VF_PROP_NORMAL, VF_PROP_COPY_TO_DEVICE, VF_PROP_COPY_FROM_DEVICE,
        VF_PROP_DEVICE_PRIORITIZED, VF_PROP_CPU_PRIORITIZED};
    for (int g = 0; g < n; g++) {
        rop *o = &ops[g];
        memset(o, 0, sizeof *o);
        o->g = g;
        int d = tu_below(rng, ndev + 1); /* 0: CPU */
        o->dev = d == 0 ? (vf_device){VF_DEVICE_CPU, 0} : devices[d - 1];
        o->prop = d == 0 ? (tu_below(rng, 4) == 0 ? VF_PROP_CPU_PRIORITIZED
                                                  : VF_PROP_NORMAL)
                         : props[tu_below(rng, 5)];
        o->nr = tu_below(rng, MAXR + 1);
        o->nw = 1 + tu_below(rng, MAXW);
        pick_distinct(rng, o->w, o->nw, NULL, 0);
        pick_distinct(rng, o->r, o->nr, o->w, o->nw);
        o->split = tu_below(rng, 3) == 0;
    }
}

typedef struct run_cfg {
    const char *name;
    vf_config cfg;
    bool expect_stream_waits;
} run_cfg;

/* Run one random program under `rc`; compare with the serial run. */
static void run_program(const run_cfg *rc, uint64_t seed, int n)
{
    tu_rng rng = tu_rng_make(seed);
    rop *ops = calloc((size_t)n, sizeof *ops);
    uint64_t *serial_at = calloc((size_t)n * NV, sizeof *serial_at);
    REQUIRE(ops && serial_at);
    make_program(&rng, ops, n, 2);
    /* The serial program, with the values after every op. */
    uint64_t sval[NV];
    for (int v = 0; v < NV; v++)
        sval[v] = (uint64_t)v * 0x9e3779b97f4a7c15u;
    for (int g = 0; g < n; g++) {
        ops[g].val = sval;
        rop_store(&ops[g], rop_hash(&ops[g]));
        memcpy(serial_at + (size_t)g * NV, sval, sizeof sval);
    }

    uint64_t val[NV];
    for (int v = 0; v < NV; v++)
        val[v] = (uint64_t)v * 0x9e3779b97f4a7c15u;
    vf_engine *e;
    int crc = vf_engine_create(&e, &rc->cfg);
    if (crc != 0)
        CHECK_REPORT_("create %s: %s (%s)", rc->name, vf_error_name(crc),
                      vf_error_detail());
    REQUIRE(crc == 0);
    vf_var vars[NV];
    for (int v = 0; v < NV; v++)
        vars[v] = tu_var(e);
    for (int g = 0; g < n; g++) {
        rop *o = &ops[g];
        o->val = val;
        vf_var rv[MAXR], wv[MAXW];
        for (int k = 0; k < o->nr; k++)
            rv[k] = vars[o->r[k]];
        for (int k = 0; k < o->nw; k++)
            wv[k] = vars[o->w[k]];
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = rop_fn,
                                            .arg = o,
                                            .done = rop_done,
                                            .reads = tu_list(rv, o->nr),
                                            .writes = tu_list(wv, o->nw),
                                            .device = o->dev,
                                            .property = o->prop,
                                            .name = "rop"}));
        if (tu_below(&rng, 50) == 0) { /* a wait in the middle */
            int v = o->w[0];
            CHECK_OK(vf_var_wait(e, vars[v], NULL));
            if (val[v] != serial_at[(size_t)g * NV + v])
                CHECK_REPORT_(
                    "%s: after op %d var %d = %#llx, serial %#llx", rc->name, g,
                    v, (unsigned long long)val[v],
                    (unsigned long long)serial_at[(size_t)g * NV + v]);
        }
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    for (int v = 0; v < NV; v++)
        if (val[v] != sval[v])
            CHECK_REPORT_("%s: var %d = %#llx, serial %#llx", rc->name, v,
                          (unsigned long long)val[v],
                          (unsigned long long)sval[v]);
    for (int g = 0; g < n; g++) {
        CHECK_EQ(atomic_load(&ops[g].done_calls), 1);
        CHECK_EQ(atomic_load(&ops[g].done_status), 0);
    }
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.ran, (uint64_t)n);
    CHECK_EQ(st.failed + st.skipped, 0);
    if (rc->expect_stream_waits)
        CHECK(st.stream_waits > 0);
    else
        CHECK_EQ(st.stream_waits, 0);
    static int printed;
    if (printed++ < 8)
        printf("  %-22s seed %#llx: %d ops, host syncs %llu, stream waits "
               "%llu, same stream %llu: identical to serial\n",
               rc->name, (unsigned long long)seed, n,
               (unsigned long long)st.host_syncs,
               (unsigned long long)st.stream_waits,
               (unsigned long long)st.same_stream);
    CHECK_OK(vf_engine_destroy(e));
    free(ops);
    free(serial_at);
}

TEST_CASE(random_programs)
{
    const run_cfg cfgs[] = {
        {"perdevice/events",
         {.type = VF_ENGINE_PERDEVICE,
          .cpu_workers = 2,
          .cpu_priority_workers = 1,
          .gpu_workers = 2,
          .gpu_copy_workers = 2,
          .gpu_priority_workers = 1,
          .emulated_latency_us = 30,
          .emulated_mb_per_s = 1000},
         true},
        {"perdevice/1-worker",
         {.type = VF_ENGINE_PERDEVICE,
          .cpu_workers = 1,
          .cpu_priority_workers = 1,
          .gpu_workers = 1,
          .gpu_copy_workers = 1,
          .gpu_priority_workers = 1,
          .emulated_latency_us = 10},
         true},
        {"perdevice/device_sync",
         {.type = VF_ENGINE_PERDEVICE,
          .cpu_workers = 2,
          .gpu_workers = 2,
          .device_sync = true,
          .emulated_latency_us = 10},
         false},
        {"pooled/events",
         {.type = VF_ENGINE_POOLED,
          .cpu_workers = 2,
          .emulated_latency_us = 20},
         true},
        {"naive", {.type = VF_ENGINE_NAIVE, .emulated_latency_us = 5}, false},
    };
    int rounds = (int)tu_scaled(6, 2);
    printf("random programs over the CPU and two emulated devices:\n");
    for (int round = 0; round < rounds; round++)
        for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
            run_program(&cfgs[c],
                        tu_mix(check_seed(), (uint64_t)round * 31 + c),
                        (int)tu_scaled(400, 100));
}

/* --- failures across streams -------------------------------------------- */

typedef struct fop {
    int fail_on_device; /* the device work returns this (0: succeeds) */
    atomic_int work_ran;
    atomic_int fn_ran;
    atomic_int done_calls;
    atomic_int done_status;
} fop;

static int fwork(void *arg)
{
    fop *o = arg;
    atomic_fetch_add(&o->work_ran, 1);
    return o->fail_on_device;
}

static int ffn(vf_run *run, void *arg)
{
    fop *o = arg;
    atomic_fetch_add(&o->fn_ran, 1);
    if (vf_run_stream(run) == NULL)
        return 0;
    if (o->fail_on_device)
        vf_run_set_error(run, "unused"); /* the device's message wins */
    return vf_run_submit(run, fwork, o, 0);
}

static void fdone(void *arg, int status)
{
    fop *o = arg;
    atomic_store(&o->done_status, status);
    atomic_fetch_add(&o->done_calls, 1);
}

static void push_f(vf_engine *e, fop *o, vf_device dev, vf_var_list reads,
                   vf_var_list writes, const char *name)
{
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = ffn,
                                        .arg = o,
                                        .done = fdone,
                                        .reads = reads,
                                        .writes = writes,
                                        .device = dev,
                                        .name = name}));
}

static void test_failures(const char *name, const vf_config *cfg)
{
    check_context_ = name;
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, cfg));
    vf_var x = tu_var(e), y = tu_var(e), z = tu_var(e), w = tu_var(e),
           u = tu_var(e);
    const vf_device emu0 = devices[0], emu1 = devices[1],
                    cpu = {VF_DEVICE_CPU, 0};
    fop a = {.fail_on_device = 77}, b = {0}, c = {0}, d = {0}, f = {0}, g = {0};
    push_f(e, &a, emu0, VF_VARS(u), VF_VARS(x), "A"); /* fails on emu0 */
    push_f(e, &b, emu1, VF_VARS(x), VF_VARS(y), "B"); /* other device */
    push_f(e, &c, cpu, VF_VARS(y), VF_VARS(z), "C");  /* on the host */
    push_f(e, &d, emu0, VF_VARS(x), VF_VARS(u), "D"); /* same device */
    push_f(e, &f, emu1, VF_VARS(u), VF_VARS(w), "F"); /* after D: skipped */
    push_f(e, &g, emu1, (vf_var_list){0}, VF_VARS(tu_var(e)), "G");
    /* X depends on all of them, so every skip is decided before the wait
     * on its output claims the failure (after a claim, ops run again). */
    fop x_op = {0};
    vf_var out = tu_var(e);
    push_f(e, &x_op, cpu, VF_VARS(z, u, w), VF_VARS(out), "X");
    vf_error err;
    CHECK_ERR(vf_var_wait(e, out, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 77);
    CHECK(strcmp(err.op_name, "A") == 0);
    CHECK_OK(
        vf_engine_wait_all(e, NULL)); /* the failure was reported already */
    CHECK_EQ(atomic_load(&a.work_ran), 1);
    CHECK_EQ(atomic_load(&a.done_status), 77);
    CHECK_EQ(atomic_load(&b.work_ran), 0); /* skipped on the device */
    CHECK_EQ(atomic_load(&b.done_status), VF_ESKIPPED);
    CHECK_EQ(atomic_load(&c.fn_ran), 0); /* skipped on the host */
    CHECK_EQ(atomic_load(&c.done_status), VF_ESKIPPED);
    CHECK_EQ(atomic_load(&d.work_ran), 0);
    CHECK_EQ(atomic_load(&d.done_status), VF_ESKIPPED);
    CHECK_EQ(atomic_load(&f.done_status), VF_ESKIPPED);
    CHECK_EQ(atomic_load(&g.work_ran), 1); /* independent: runs */
    CHECK_EQ(atomic_load(&g.done_status), 0);
    CHECK_EQ(atomic_load(&x_op.done_status), VF_ESKIPPED);
    fop *all[] = {&a, &b, &c, &d, &f, &g, &x_op};
    for (int i = 0; i < 7; i++)
        CHECK_EQ(atomic_load(&all[i]->done_calls), 1);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.skipped, 5);

    /* wait_all reports a device failure nobody waited for. */
    fop h = {.fail_on_device = 5};
    push_f(e, &h, emu1, (vf_var_list){0}, VF_VARS(y), "H");
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 5);
    CHECK(strcmp(err.op_name, "H") == 0);
    /* After the report, the var is usable again. */
    fop k = {0};
    push_f(e, &k, emu0, VF_VARS(y), VF_VARS(x), "K");
    CHECK_OK(vf_var_wait(e, x, NULL));
    CHECK_EQ(atomic_load(&k.work_ran), 1);
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

TEST_CASE(failures)
{
    test_failures("perdevice", &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                            .cpu_workers = 2,
                                            .emulated_latency_us = 200});
    test_failures("pooled", &(vf_config){.type = VF_ENGINE_POOLED,
                                         .cpu_workers = 1,
                                         .emulated_latency_us = 50});
    test_failures("device_sync", &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                              .device_sync = true});
    test_failures("naive", &(vf_config){.type = VF_ENGINE_NAIVE});
}

/* A device write replaces the var's write fence; the failure the replaced
 * write left must stay the var's (rule 9: a success keeps it). Found by the
 * fuzzer: a var held a host op's failure A, then a device write's failure
 * B (newer), reported by a wait; a later device write succeeded and
 * dropped B's fence, and the var went back to A, unreported: the next
 * reader was skipped where the serial program runs it. */
static int host_fail(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 10;
}

static void test_replaced_fence(const char *name, const vf_config *cfg)
{
    check_context_ = name;
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, cfg));
    const vf_device emu0 = devices[0], emu1 = devices[1],
                    cpu = {VF_DEVICE_CPU, 0};
    vf_error err;

    /* A (host) fails, then B (device, no_skip) fails: v holds B. */
    vf_var v = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = host_fail, .writes = VF_VARS(v), .name = "A"}));
    fop b = {.fail_on_device = 20}, c = {0}, d = {0};
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = ffn,
                                        .arg = &b,
                                        .done = fdone,
                                        .writes = VF_VARS(v),
                                        .device = emu0,
                                        .no_skip = true,
                                        .name = "B"}));
    CHECK_ERR(vf_var_wait(e, v, &err), VF_EOPFAILED); /* claims B */
    CHECK_EQ(err.code, 20);
    push_f(e, &c, emu1, (vf_var_list){0}, VF_VARS(v), "C"); /* succeeds */
    push_f(e, &d, cpu, VF_VARS(v), VF_VARS(tu_var(e)), "D");
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 10); /* A: nobody reported it */
    CHECK_EQ(atomic_load(&c.done_status), 0);
    CHECK_EQ(atomic_load(&d.done_status), 0); /* B is v's, reported */
    CHECK_EQ(atomic_load(&d.fn_ran), 1);

    /* B2 fails on the device while C2, a no_skip write on the other
     * device, replaces its fence (B2 may still be in flight: C2's waits
     * only order): D2 inherits B2. */
    vf_var v2 = tu_var(e);
    fop b2 = {.fail_on_device = 30}, c2 = {0}, d2 = {0};
    push_f(e, &b2, emu0, (vf_var_list){0}, VF_VARS(v2), "B2");
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = ffn,
                                        .arg = &c2,
                                        .done = fdone,
                                        .writes = VF_VARS(v2),
                                        .device = emu1,
                                        .no_skip = true,
                                        .name = "C2"}));
    push_f(e, &d2, cpu, VF_VARS(v2), VF_VARS(tu_var(e)), "D2");
    CHECK_ERR(vf_var_wait(e, v2, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 30);
    CHECK(strcmp(err.op_name, "B2") == 0);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&c2.done_status), 0);
    CHECK_EQ(atomic_load(&d2.done_status), VF_ESKIPPED);
    CHECK_EQ(atomic_load(&d2.fn_ran), 0);
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

/* A device op that says why with vf_run_set_error() and returns 0, its
 * work then failing: a wait reports the op's message, as for any op
 * (varflow.h, vf_error.message), not the device's own words, which
 * replaced it (a user tester: a device function has no run handle to say
 * it with, so the op's function is the only place). On every engine. */
static int work_fails_42(void *arg)
{
    (void)arg;
    return 42;
}

static int says_then_submits(vf_run *run, void *arg)
{
    (void)arg;
    vf_run_set_error(run, "kernel launch for tile 7 failed");
    return vf_run_submit(run, work_fails_42, NULL, 0);
}

TEST_CASE(device_failure_keeps_the_ops_message)
{
    const vf_engine_type types[3] = {VF_ENGINE_NAIVE, VF_ENGINE_POOLED,
                                     VF_ENGINE_PERDEVICE};
    for (int t = 0; t < 3; t++) {
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &(vf_config){.type = types[t]}));
        REQUIRE(e != NULL);
        vf_var v = tu_var(e);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = says_then_submits,
                                            .writes = VF_VARS(v),
                                            .device = {VF_DEVICE_EMULATED, 0},
                                            .name = "tile"}));
        vf_error err = {0};
        CHECK_ERR(vf_var_wait(e, v, &err), VF_EOPFAILED);
        CHECK_EQ(err.code, 42);
        CHECK(strcmp(err.op_name, "tile") == 0);
        if (strcmp(err.message, "kernel launch for tile 7 failed") != 0)
            CHECK_REPORT_("engine %d: message '%s'", t, err.message);
        CHECK_OK(vf_engine_destroy(e));
    }
}

TEST_CASE(replaced_write_fence)
{
    test_replaced_fence("perdevice", &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                                  .cpu_workers = 2,
                                                  .emulated_latency_us = 200});
    test_replaced_fence(
        "perdevice, no latency",
        &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_workers = 2});
    test_replaced_fence("pooled", &(vf_config){.type = VF_ENGINE_POOLED,
                                               .cpu_workers = 1,
                                               .emulated_latency_us = 50});
    test_replaced_fence("device_sync", &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                                    .device_sync = true});
    test_replaced_fence("naive", &(vf_config){.type = VF_ENGINE_NAIVE});
}

/* --- which failure, and when a wait claims it --------------------------- */

/* Device work that waits for its gate (or sleeps `sleep_ms`), then
 * returns `fail`. */
typedef struct gop {
    tu_gate *gate;
    int sleep_ms;
    int fail;
    atomic_int work_ran;
    atomic_int done_status;
} gop;

static int gwork(void *arg)
{
    gop *o = arg;
    if (o->gate != NULL)
        REQUIRE(tu_gate_wait(o->gate, 30.0));
    if (o->sleep_ms != 0)
        nanosleep(&(struct timespec){0, o->sleep_ms * 1000000L}, NULL);
    atomic_fetch_add(&o->work_ran, 1);
    return o->fail;
}

static int gfn(vf_run *run, void *arg)
{
    gop *o = arg;
    if (vf_run_stream(run) == NULL)
        return o->fail; /* a host op fails on the host */
    return vf_run_submit(run, gwork, o, 0);
}

static void gdone(void *arg, int status)
{
    atomic_store(&((gop *)arg)->done_status, status);
}

static void push_g(vf_engine *e, gop *o, vf_device dev, vf_var_list reads,
                   vf_var_list writes, const char *name)
{
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = gfn,
                                        .arg = o,
                                        .done = gdone,
                                        .reads = reads,
                                        .writes = writes,
                                        .device = dev,
                                        .name = name}));
}

static uint64_t stat_pending(vf_engine *e)
{
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    return st.pending;
}

/* Of two failures a device op inherits, the one whose op was pushed first
 * (rule 9), whatever the host knew when the op started: A1's work is
 * still failing on the device when C starts, A2's failure (pushed after
 * it) already known on the host. */
static void test_first_of_two(const char *name, const vf_config *cfg)
{
    check_context_ = name;
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, cfg));
    const vf_device emu0 = devices[0], emu1 = devices[1],
                    cpu = {VF_DEVICE_CPU, 0};
    vf_var x = tu_var(e), y = tu_var(e), w = tu_var(e);
    gop a1 = {.sleep_ms = 100, .fail = 11}, a2 = {.fail = 22}, c = {0};
    push_g(e, &a1, emu0, (vf_var_list){0}, VF_VARS(x), "A1");
    push_g(e, &a2, cpu, (vf_var_list){0}, VF_VARS(y), "A2");
    push_g(e, &c, emu1, VF_VARS(x, y), VF_VARS(w), "C");
    vf_error err;
    CHECK_ERR(vf_var_wait(e, w, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 11); /* C's chain is A1's */
    CHECK(strcmp(err.op_name, "A1") == 0);
    CHECK_EQ(atomic_load(&c.done_status), VF_ESKIPPED);
    CHECK_EQ(atomic_load(&c.work_ran), 0);
    CHECK_OK(vf_var_wait(e, x, NULL)); /* the same chain: reported */
    CHECK_ERR(vf_var_wait(e, y, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 22);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

TEST_CASE(first_of_two_failures)
{
    test_first_of_two("perdevice", &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                                .cpu_workers = 2});
    test_first_of_two("pooled",
                      &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1});
    test_first_of_two("device_sync", &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                                  .device_sync = true});
    test_first_of_two("naive", &(vf_config){.type = VF_ENGINE_NAIVE});
}

/* A device op whose own function fails while the work it follows is still
 * failing on the device is skipped, as the serial program skips it (rule
 * 9): A's work fails after 100 ms; B's function (device, reads A's var)
 * returns 7 on the host before that. Before, B counted as failed with its
 * own 7, and C after it inherited that rather than A's. When A's work
 * succeeds, B's own failure stands and C inherits it. */
typedef struct own_fail {
    int fail;
    atomic_int fn_ran;
    atomic_int done_status;
} own_fail;

static int own_fail_fn(vf_run *run, void *arg)
{
    own_fail *o = arg;
    atomic_fetch_add(&o->fn_ran, 1);
    vf_run_set_error(run, "its own check");
    return o->fail;
}

static void own_fail_done(void *arg, int status)
{
    atomic_store(&((own_fail *)arg)->done_status, status);
}

static void test_own_failure_behind(const char *name, const vf_config *cfg)
{
    check_context_ = name;
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, cfg));
    for (int a_fails = 1; a_fails >= 0; a_fails--) {
        vf_var x = tu_var(e), y = tu_var(e), z = tu_var(e);
        gop a = {.sleep_ms = 100, .fail = a_fails ? 11 : 0};
        own_fail b = {.fail = 7};
        gop c = {0};
        push_g(e, &a, devices[0], (vf_var_list){0}, VF_VARS(x), "A");
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = own_fail_fn,
                                            .arg = &b,
                                            .done = own_fail_done,
                                            .reads = VF_VARS(x),
                                            .writes = VF_VARS(y),
                                            .device = devices[0],
                                            .name = "B"}));
        push_g(e, &c, devices[1], VF_VARS(y), VF_VARS(z), "C");
        vf_error err;
        CHECK_ERR(vf_var_wait(e, z, &err), VF_EOPFAILED);
        CHECK_EQ(err.code, a_fails ? 11 : 7);
        CHECK(strcmp(err.op_name, a_fails ? "A" : "B") == 0);
        CHECK_EQ(atomic_load(&b.done_status), a_fails ? VF_ESKIPPED : 7);
        CHECK_EQ(atomic_load(&c.done_status), VF_ESKIPPED);
        CHECK_EQ(atomic_load(&c.work_ran), 0);
        uint64_t version = 99;
        CHECK_OK(vf_var_version(e, y, &version));
        CHECK_EQ(version, a_fails ? 0 : 1);    /* a failed write ran */
        CHECK_OK(vf_engine_wait_all(e, NULL)); /* each claimed above */
    }
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.failed, 2); /* A, then B */
    CHECK_EQ(st.skipped, 3);
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

TEST_CASE(own_failure_behind_failing_work)
{
    test_own_failure_behind(
        "perdevice",
        &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_workers = 2});
    test_own_failure_behind(
        "pooled", &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1});
    test_own_failure_behind(
        "device_sync",
        &(vf_config){.type = VF_ENGINE_PERDEVICE, .device_sync = true});
    test_own_failure_behind("naive", &(vf_config){.type = VF_ENGINE_NAIVE});
}

/* A device op P puts failing work (44) on its stream, then pushes a
 * device child D on the same device, whose work succeeds, and E (on the
 * CPU) that reads what D wrote, then waits for its children or for E's
 * var. D runs on P's stream while P's function runs (inside its push on
 * the naive engine, above P's wait on a pool): P's failure is its own, D
 * and E run, P's wait returns 0, wait_all reports P, and Q (pushed after
 * P, reading what it wrote) is skipped. D was charged
 * with P's failure on every engine kind (its work came next in P's open
 * segment), E was skipped and P's wait reported "D": found trying devices
 * as a user. */
typedef struct seg_test {
    vf_engine *e;
    vf_var dv, ev;
    bool wait_var;
    atomic_int st_p, st_d, st_e, st_q;
    int rc_wait;
    vf_error err;
} seg_test;

static int seg_fail(void *arg)
{
    (void)arg;
    return 44;
}

static int seg_ok(void *arg)
{
    (void)arg;
    return 0;
}

static int seg_d(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, seg_ok, NULL, 0);
}

static int seg_e(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static void seg_done(void *arg, int status)
{
    atomic_store((atomic_int *)arg, status);
}

static void seg_p_done(void *arg, int status)
{
    atomic_store(&((seg_test *)arg)->st_p, status);
}

static int seg_p(vf_run *run, void *arg)
{
    seg_test *t = arg;
    CHECK_OK(vf_run_submit(run, seg_fail, NULL, 0));
    CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = seg_d,
                                           .done = seg_done,
                                           .arg = &t->st_d,
                                           .name = "D",
                                           .writes = VF_VARS(t->dv),
                                           .device = devices[0]}));
    CHECK_OK(vf_engine_push(t->e, &(vf_op){.fn = seg_e,
                                           .done = seg_done,
                                           .arg = &t->st_e,
                                           .name = "E",
                                           .reads = VF_VARS(t->dv),
                                           .writes = VF_VARS(t->ev)}));
    t->rc_wait = t->wait_var ? vf_var_wait(t->e, t->ev, &t->err)
                             : vf_run_wait_children(run, &t->err);
    return vf_run_submit(run, seg_ok, NULL, 0); /* more work, clean */
}

static void test_failure_stays_its_ops(const char *name, const vf_config *cfg)
{
    check_context_ = name;
    for (int wait_var = 0; wait_var <= 1; wait_var++) {
        static seg_test t;
        memset(&t, 0, sizeof t);
        t.wait_var = wait_var;
        CHECK_OK(vf_engine_create(&t.e, cfg));
        t.dv = tu_var(t.e);
        t.ev = tu_var(t.e);
        vf_var pv = tu_var(t.e);
        CHECK_OK(vf_engine_push(t.e, &(vf_op){.fn = seg_p,
                                              .arg = &t,
                                              .done = seg_p_done,
                                              .name = "P",
                                              .writes = VF_VARS(pv),
                                              .device = devices[0]}));
        /* Q reads what P wrote: skipped with P's failure, which P's work
         * after the child carries on to its event (Q ran clean on the
         * device before: the second reviewer). */
        CHECK_OK(vf_engine_push(t.e, &(vf_op){.fn = seg_d,
                                              .done = seg_done,
                                              .arg = &t.st_q,
                                              .name = "Q",
                                              .reads = VF_VARS(pv),
                                              .device = devices[wait_var]}));
        vf_error err;
        CHECK_ERR(vf_engine_wait_all(t.e, &err), VF_EOPFAILED);
        CHECK(strcmp(err.op_name, "P") == 0);
        CHECK_EQ(err.code, 44);
        CHECK_EQ(atomic_load(&t.st_p), 44);
        CHECK_EQ(atomic_load(&t.st_d), 0);
        CHECK_EQ(atomic_load(&t.st_e), 0);
        CHECK_EQ(atomic_load(&t.st_q), VF_ESKIPPED);
        CHECK_OK(t.rc_wait);
        CHECK_OK(vf_engine_destroy(t.e));
    }
    check_context_ = NULL;
}

/* The same with a device op on another device between them: P (device 0)
 * pushes Q (device 1), which pushes R (device 0) and waits for it. On the
 * naive engine R runs inside Q inside P, on P's stream: P's segment is
 * the one to close, not Q's (R took P's failure; the second reviewer). */
typedef struct chain_test {
    vf_engine *e;
    atomic_int st_p, st_q, st_r;
} chain_test;

static void chain_done(void *arg, int status)
{
    atomic_store((atomic_int *)arg, status);
}

static int chain_r(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, seg_ok, NULL, 0);
}

static chain_test chain;

static int chain_q(vf_run *run, void *arg)
{
    (void)arg;
    CHECK_OK(vf_engine_push(chain.e, &(vf_op){.fn = chain_r,
                                              .done = chain_done,
                                              .arg = &chain.st_r,
                                              .name = "R",
                                              .device = devices[0]}));
    CHECK_OK(vf_run_wait_children(run, NULL));
    return 0;
}

static int chain_p(vf_run *run, void *arg)
{
    (void)arg;
    CHECK_OK(vf_run_submit(run, seg_fail, NULL, 0));
    CHECK_OK(vf_engine_push(chain.e, &(vf_op){.fn = chain_q,
                                              .done = chain_done,
                                              .arg = &chain.st_q,
                                              .name = "Q",
                                              .device = devices[1]}));
    CHECK_OK(vf_run_wait_children(run, NULL));
    return 0;
}

static void test_failure_stays_through_a_chain(const char *name,
                                               const vf_config *cfg)
{
    check_context_ = name;
    memset(&chain, 0, sizeof chain);
    CHECK_OK(vf_engine_create(&chain.e, cfg));
    CHECK_OK(vf_engine_push(chain.e, &(vf_op){.fn = chain_p,
                                              .done = chain_done,
                                              .arg = &chain.st_p,
                                              .name = "P",
                                              .device = devices[0]}));
    vf_error err;
    CHECK_ERR(vf_engine_wait_all(chain.e, &err), VF_EOPFAILED);
    CHECK(strcmp(err.op_name, "P") == 0);
    CHECK_EQ(atomic_load(&chain.st_p), 44);
    CHECK_EQ(atomic_load(&chain.st_q), 0);
    CHECK_EQ(atomic_load(&chain.st_r), 0);
    CHECK_OK(vf_engine_destroy(chain.e));
    check_context_ = NULL;
}

TEST_CASE(failure_stays_its_ops)
{
    test_failure_stays_through_a_chain("naive",
                                       &(vf_config){.type = VF_ENGINE_NAIVE});
    test_failure_stays_through_a_chain(
        "perdevice", &(vf_config){.type = VF_ENGINE_PERDEVICE});
    test_failure_stays_its_ops(
        "perdevice",
        &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_workers = 2});
    test_failure_stays_its_ops(
        "pooled", &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1});
    test_failure_stays_its_ops("naive", &(vf_config){.type = VF_ENGINE_NAIVE});
}

/* A device op B that reads what failing device work wrote (A's, slow to
 * fail): B's done gets VF_ESKIPPED on every engine; its function, which
 * only puts work on its stream, may have been called meanwhile on a pool
 * (the host does not wait for A's work), but never with device_sync or on
 * the naive engine, where the host meets A's work first (varflow.h,
 * vf_run_stream). */
typedef struct skip_test {
    atomic_int b_called, st_b;
} skip_test;

static int skip_slow_fail(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
    return 44;
}

static int skip_a(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, skip_slow_fail, NULL, 0);
}

static int skip_b(vf_run *run, void *arg)
{
    atomic_store(&((skip_test *)arg)->b_called, 1);
    return vf_run_submit(run, seg_ok, NULL, 0);
}

static void skip_b_done(void *arg, int status)
{
    atomic_store(&((skip_test *)arg)->st_b, status);
}

static void test_skipped_behind_work(const char *name, const vf_config *cfg,
                                     bool host_meets_work)
{
    check_context_ = name;
    for (int dev = 0; dev <= 1; dev++) {
        skip_test t = {0};
        vf_engine *e;
        CHECK_OK(vf_engine_create(&e, cfg));
        vf_var v = tu_var(e), w = tu_var(e);
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = skip_a,
                                            .name = "A",
                                            .writes = VF_VARS(v),
                                            .device = devices[0]}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = skip_b,
                                            .arg = &t,
                                            .done = skip_b_done,
                                            .name = "B",
                                            .reads = VF_VARS(v),
                                            .writes = VF_VARS(w),
                                            .device = devices[dev]}));
        vf_error err;
        CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
        CHECK(strcmp(err.op_name, "A") == 0);
        CHECK_EQ(atomic_load(&t.st_b), VF_ESKIPPED);
        if (host_meets_work)
            CHECK_EQ(atomic_load(&t.b_called), 0);
        CHECK_OK(vf_engine_destroy(e));
    }
    check_context_ = NULL;
}

TEST_CASE(skipped_behind_failing_work)
{
    test_skipped_behind_work("perdevice",
                             &(vf_config){.type = VF_ENGINE_PERDEVICE}, false);
    test_skipped_behind_work(
        "device_sync",
        &(vf_config){.type = VF_ENGINE_PERDEVICE, .device_sync = true}, true);
    test_skipped_behind_work("naive", &(vf_config){.type = VF_ENGINE_NAIVE},
                             true);
}

typedef struct waiter_arg {
    vf_engine *e;
    vf_var v;
    int rc;
    vf_error err;
} waiter_arg;

static void *var_waiter(void *arg)
{
    waiter_arg *w = arg;
    w->rc = vf_var_wait(w->e, w->v, &w->err);
    return NULL;
}

/* A wait of another thread claims a failure while device work that
 * inherited it is in flight. C, pushed while the wait was in progress,
 * started before the claim: it may run or be skipped (its pusher did not
 * order it after the wait), but it never reports the claimed failure as
 * a failure of its own. D, pushed once the wait returned, is after it: it
 * runs, though the work it follows (C's) was skipped on the device. */
static void test_claimed_in_flight(const char *name, const vf_config *cfg)
{
    check_context_ = name;
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, cfg));
    const vf_device emu0 = devices[0], emu1 = devices[1];
    const vf_device cpu = {VF_DEVICE_CPU, 0};
    vf_var v = tu_var(e), v2 = tu_var(e), r = tu_var(e), w = tu_var(e),
           z = tu_var(e);
    tu_gate gate_a, gate_b;
    tu_gate_init(&gate_a);
    tu_gate_init(&gate_b);
    gop a = {.gate = &gate_a, .fail = 33}, b = {.gate = &gate_b};
    gop h = {0}, c = {0}, d = {0};
    /* B overwrites what A reads, so it reaches the completer after A:
     * which resolves them in that order, and A's wait must not need B. */
    push_g(e, &a, emu0, VF_VARS(r), VF_VARS(v, v2), "A");
    push_g(e, &b, emu1, (vf_var_list){0}, VF_VARS(r), "B");
    /* H meets A's work on the host (skipped), so that the wait on v2 has
     * a write to follow: a marker, counted pending. */
    push_g(e, &h, cpu, (vf_var_list){0}, VF_VARS(v2), "H");
    uint64_t before = stat_pending(e);
    waiter_arg wa = {.e = e, .v = v2};
    pthread_t t = tu_thread_start(var_waiter, &wa);
    /* The wait's marker is pushed (counted pending) before C. */
    double until = tu_now() + 30.0;
    while (stat_pending(e) <= before && tu_now() < until)
        sched_yield();
    REQUIRE(stat_pending(e) > before);
    push_g(e, &c, emu0, VF_VARS(v, r), VF_VARS(w), "C");
    nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL); /* C starts */
    tu_gate_open(&gate_a); /* A fails; the wait claims it */
    tu_thread_join(t);
    CHECK_ERR(wa.rc, VF_EOPFAILED);
    CHECK_EQ(wa.err.code, 33);
    push_g(e, &d, emu0, VF_VARS(w), VF_VARS(z), "D");
    nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL); /* D starts */
    tu_gate_open(&gate_b);
    CHECK_OK(vf_var_wait(e, z, NULL));
    CHECK_OK(vf_var_wait(e, w, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    int cs = atomic_load(&c.done_status);
    CHECK(cs == 0 || cs == VF_ESKIPPED);
    CHECK_EQ(atomic_load(&c.work_ran), cs == 0 ? 1 : 0);
    CHECK_EQ(atomic_load(&d.done_status), 0);
    CHECK_EQ(atomic_load(&d.work_ran), 1);
    CHECK_EQ(atomic_load(&h.done_status), VF_ESKIPPED);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.failed, 1);
    CHECK_OK(vf_engine_destroy(e));
    tu_gate_destroy(&gate_a);
    tu_gate_destroy(&gate_b);
    check_context_ = NULL;
}

/* A wait for device work returns once that work (and what was handed to
 * the completer before it) completed, not after work handed over later:
 * B, which follows A (it reads what A wrote), is held on another device.
 * Before, the completer waited for the newest work of every stream it had
 * taken at once, and A's wait for B's whenever one batch held both. */
static void test_not_held_up(const char *name, const vf_config *cfg)
{
    check_context_ = name;
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, cfg));
    vf_var x = tu_var(e), y = tu_var(e);
    /* B's work waits at a gate opened only once the wait for A returned
     * (a sleep of 250 ms was overtaken by the wait on a loaded machine):
     * a wait held up by B times out (20 s, below the gate's 30) rather
     * than hang. */
    gop a = {0}, b = {0};
    for (int round = 0; round < 10; round++) {
        tu_gate b_go;
        tu_gate_init(&b_go);
        b.gate = &b_go;
        push_g(e, &a, devices[0], (vf_var_list){0}, VF_VARS(x), "A");
        push_g(e, &b, devices[1], VF_VARS(x), VF_VARS(y), "B");
        int rc = vf_var_wait_timed(e, x, 20000, NULL);
        CHECK_OK(rc);
        CHECK_EQ(atomic_load(&b.work_ran), round); /* B's still to come */
        tu_gate_open(&b_go);
        CHECK_OK(vf_var_wait(e, y, NULL));
        CHECK_EQ(atomic_load(&b.work_ran), round + 1);
        tu_gate_destroy(&b_go);
        if (rc != 0)
            break; /* held up: one round says so */
    }
    CHECK_EQ(atomic_load(&a.work_ran), 10);
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

TEST_CASE(wait_not_held_up_by_later_work)
{
    test_not_held_up("perdevice", &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                               .cpu_workers = 2});
    test_not_held_up("pooled",
                     &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1});
}

/* An op that began after a claim but is before the wait in push order
 * inherits the claimed failure on the device: its fence must not pass for
 * one that began after the claim. F's work fails (after K began, K2's
 * after the wait); K, whose function returns only once the wait claimed
 * F, waits on its stream for G's failed work and K2's held work; M begins
 * after the claim, meets K's fence on the host (it is from before the
 * claim) and carries it (F is live for M, which is before the wait); C,
 * pushed after the wait, starts while M's work is still unresolved (K's
 * `done` holds the completer until C's function runs, or 300 ms). C is
 * after the wait: its own failure stands (rule 9). Before, M's fence bore
 * the count after the claim, C carried it on the device without meeting
 * it on the host and was skipped with F; the wait on d returned 0. */
typedef struct hold_fn {
    gop *work;           /* its device work (gfn's), or NULL: none */
    tu_gate *open_first; /* its function opens this, */
    tu_gate *wait_for;   /* then waits for this (30 s) */
    tu_gate *done_waits; /* its done holds the completer for this (0.3 s) */
    atomic_int done_status;
} hold_fn;

static int hold_fn_fn(vf_run *run, void *arg)
{
    hold_fn *h = arg;
    if (h->open_first != NULL)
        tu_gate_open(h->open_first);
    if (h->wait_for != NULL)
        REQUIRE(tu_gate_wait(h->wait_for, 30.0));
    return h->work != NULL ? gfn(run, h->work) : 0;
}

static void hold_fn_done(void *arg, int status)
{
    hold_fn *h = arg;
    atomic_store(&h->done_status, status);
    if (h->done_waits != NULL)
        (void)tu_gate_wait(h->done_waits, 0.3);
}

static void push_hold(vf_engine *e, hold_fn *h, vf_device dev,
                      vf_var_list writes, const char *name)
{
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = hold_fn_fn,
                                        .arg = h,
                                        .done = hold_fn_done,
                                        .writes = writes,
                                        .device = dev,
                                        .name = name}));
}

static void test_claimed_before_begin(const char *name, const vf_config *cfg)
{
    check_context_ = name;
    vf_engine *e;
    CHECK_OK(vf_engine_create(&e, cfg));
    const vf_device emu0 = devices[0], emu1 = devices[1];
    for (int round = 0; round < 3; round++) {
        vf_var a = tu_var(e), b = tu_var(e), c = tu_var(e), d = tu_var(e),
               r = tu_var(e);
        tu_gate gate_f, gate_k, gate_k2, gate_c;
        tu_gate_init(&gate_f);
        tu_gate_init(&gate_k);
        tu_gate_init(&gate_k2);
        tu_gate_init(&gate_c);
        gop f = {.gate = &gate_f, .fail = 44}, g = {0}, k2 = {.gate = &gate_k2},
            m = {0}, cc = {.fail = 45};
        hold_fn k = {
            .open_first = &gate_f, .wait_for = &gate_k, .done_waits = &gate_c};
        hold_fn ch = {.work = &cc, .open_first = &gate_c};
        push_g(e, &f, emu0, (vf_var_list){0}, VF_VARS(a), "F");
        push_g(e, &g, emu1, VF_VARS(r), VF_VARS(a, b), "G");
        /* K2 overwrites what G reads: handed to the completer after G. */
        push_g(e, &k2, emu0, (vf_var_list){0}, VF_VARS(r), "K2");
        push_hold(e, &k, emu0, VF_VARS(b, c, r), "K");
        push_g(e, &m, emu1, (vf_var_list){0}, VF_VARS(c, d), "M");
        vf_error err;
        CHECK_ERR(vf_var_wait(e, a, &err), VF_EOPFAILED); /* claims F */
        CHECK(strcmp(err.op_name, "F") == 0);
        tu_gate_open(&gate_k); /* K's fence: from before the claim */
        /* C's function lets K's done go (the completer then resolves M). */
        push_hold(e, &ch, emu0, VF_VARS(d), "C");
        nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL); /* M starts */
        tu_gate_open(&gate_k2);
        memset(&err, 0, sizeof err);
        CHECK_ERR(vf_var_wait(e, d, &err), VF_EOPFAILED);
        CHECK(strcmp(err.op_name, "C") == 0);
        CHECK_EQ(err.code, 45);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&ch.done_status), 45);
        CHECK_EQ(atomic_load(&cc.work_ran), 1);
        CHECK_EQ(atomic_load(&m.done_status), VF_ESKIPPED);
        CHECK_EQ(atomic_load(&k.done_status), VF_ESKIPPED);
        CHECK_EQ(atomic_load(&k2.done_status), 0);
        tu_gate_destroy(&gate_f);
        tu_gate_destroy(&gate_k);
        tu_gate_destroy(&gate_k2);
        tu_gate_destroy(&gate_c);
    }
    CHECK_OK(vf_engine_destroy(e));
    check_context_ = NULL;
}

TEST_CASE(claimed_before_a_later_op_began)
{
    test_claimed_before_begin("perdevice",
                              &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                           .cpu_workers = 1,
                                           .gpu_workers = 1});
    test_claimed_before_begin(
        "pooled", &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 1});
}

TEST_CASE(claimed_while_in_flight)
{
    test_claimed_in_flight(
        "perdevice",
        &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_workers = 2});
    test_claimed_in_flight(
        "pooled", &(vf_config){.type = VF_ENGINE_POOLED, .cpu_workers = 2});
}

/* --- deletes and bad input ---------------------------------------------- */

static atomic_int slow_done;

static int slow_work(void *arg)
{
    (void)arg;
    tu_spin_us(2000);
    atomic_store(&slow_done, 1);
    return 0;
}

static int slow_fn(vf_run *run, void *arg)
{
    return vf_run_submit(run, slow_work, arg, 0);
}

static atomic_int freed_after_work;

static void free_cb(void *arg)
{
    (void)arg;
    atomic_store(&freed_after_work, atomic_load(&slow_done) ? 1 : -1);
}

static int submit_outside(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, slow_work, NULL, 0) == VF_EINVAL ? 0 : 1;
}

static void async_nop(vf_run *run, void *arg, vf_completion c)
{
    (void)run;
    (void)arg;
    vf_completion_finish(c, 0, NULL);
}

TEST_CASE(delete_and_bad_input)
{
    vf_engine *e;
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_workers = 1}));
    vf_var v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = slow_fn,
                                        .writes = VF_VARS(v),
                                        .device = {VF_DEVICE_EMULATED, 0}}));
    CHECK_OK(vf_var_destroy(e, v, free_cb, NULL));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&freed_after_work), 1);

    /* Rule 8: every device write that ran bumps the version (once its
     * work completed); the wait sees them all. */
    vf_var w = tu_var(e);
    for (int i = 0; i < 3; i++)
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = slow_fn,
                                       .writes = VF_VARS(w),
                                       .device = {VF_DEVICE_EMULATED, 1}}));
    CHECK_OK(vf_var_wait(e, w, NULL));
    uint64_t version = 0;
    CHECK_OK(vf_var_version(e, w, &version));
    CHECK_EQ(version, 3);

    /* vf_run_submit from a CPU op: VF_EINVAL (the op checks it). */
    vf_var t = tu_var(e);
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = submit_outside, .writes = VF_VARS(t)}));
    CHECK_OK(vf_var_wait(e, t, NULL));
    CHECK_ERR(vf_run_submit(NULL, slow_work, NULL, 0), VF_EINVAL);
    CHECK_ERR(vf_engine_push(e, &(vf_op){.async_fn = async_nop,
                                         .device = {VF_DEVICE_EMULATED, 0}}),
              VF_ENOTSUP);
    CHECK(strstr(vf_error_detail(), "must be a sync fn") != NULL);
    CHECK_ERR(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                         .device = {VF_DEVICE_EMULATED, 99}}),
              VF_ENODEV);
    CHECK(strstr(vf_error_detail(), "99") != NULL);
    CHECK_ERR(vf_engine_push(e, &(vf_op){.fn = tu_nop,
                                         .property = VF_PROP_COPY_TO_DEVICE}),
              VF_EINVAL);
    /* Nothing registered the CUDA class (only the cuda_* cases do, and
     * they come last). */
    CHECK_EQ(vf_device_count(VF_DEVICE_CUDA), 0);
    CHECK_ERR(vf_engine_push(
                  e, &(vf_op){.fn = tu_nop, .device = {VF_DEVICE_CUDA, 0}}),
              VF_ENODEV);
    CHECK(strstr(vf_error_detail(), "vf_cuda_register") != NULL);
    printf("CUDA refused as expected: %s\n", vf_error_detail());
    CHECK_EQ(vf_device_count(VF_DEVICE_CPU), 1);
    CHECK(vf_device_count(VF_DEVICE_EMULATED) >= 2);
    CHECK_OK(vf_engine_destroy(e));
}

/* --- device work calling back ------------------------------------------ */

/* What device work (vf_run_submit's fn) got from the calls it made. */
typedef struct work_calls {
    vf_engine *e, *other;
    vf_var own, elsewhere;
    bool in_op, in_op_other;
    int rc[9];
    int begin_rc, push_rc;
    atomic_int child_ran;
} work_calls;

static int work_child(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((work_calls *)arg)->child_ran, 1);
    return 0;
}

static int calling_work(void *arg)
{
    work_calls *c = arg;
    c->in_op = vf_engine_in_op(c->e);
    c->in_op_other = vf_engine_in_op(c->other);
    int n = 0;
    c->rc[n++] = vf_engine_wait_all(c->e, NULL);
    c->rc[n++] = vf_engine_wait_all_timed(c->e, 1000, NULL);
    c->rc[n++] = vf_var_wait(c->e, c->own, NULL);
    c->rc[n++] = vf_var_wait(c->e, c->elsewhere, NULL);
    c->rc[n++] = vf_var_wait_timed(c->e, c->elsewhere, 1000, NULL);
    c->rc[n++] = vf_engine_wait_all(c->other, NULL);
    c->rc[n++] = vf_engine_stop(c->other);
    c->rc[n++] = vf_engine_start(c->e);
    c->rc[n++] = vf_engine_destroy_timed(c->other, 1000);
    c->begin_rc = vf_graph_begin(c->e);
    /* At max_inflight 1, the work's own op fills the engine: the push
     * goes over the limit rather than wait for that op. */
    c->push_rc = vf_engine_push(
        c->e, &(vf_op){.fn = work_child, .arg = c, .writes = VF_VARS(c->own)});
    return 0;
}

static int submit_calling_work(vf_run *run, void *arg)
{
    return vf_run_submit(run, calling_work, arg, 0);
}

/* Device work must not block on varflow (it runs inside its op, ahead of
 * the stream's later work): every wait, stop, start and destroy from it,
 * on its engine or another, is VF_EDEADLK at once, its pushes never wait
 * for room, vf_graph_begin is refused, and vf_engine_in_op is true for
 * its engine (found trying device ops as a user: a wait for all from
 * there hung, and destroy waited for itself). On every engine kind. */
TEST_CASE(device_work_may_not_block)
{
    static const vf_engine_type kinds[] = {VF_ENGINE_NAIVE, VF_ENGINE_POOLED,
                                           VF_ENGINE_PERDEVICE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        work_calls c = {0};
        atomic_init(&c.child_ran, 0);
        CHECK_OK(vf_engine_create(
            &c.e, &(vf_config){.type = kinds[k], .max_inflight = 1}));
        CHECK_OK(
            vf_engine_create(&c.other, &(vf_config){.type = VF_ENGINE_POOLED}));
        c.own = tu_var(c.e);
        c.elsewhere = tu_var(c.e);
        CHECK_OK(
            vf_engine_push(c.e, &(vf_op){.fn = submit_calling_work,
                                         .arg = &c,
                                         .writes = VF_VARS(c.own),
                                         .device = {VF_DEVICE_EMULATED, 0}}));
        CHECK_OK(vf_engine_wait_all(c.e, NULL));
        CHECK(c.in_op);
        CHECK(!c.in_op_other);
        for (int i = 0; i < (int)(sizeof c.rc / sizeof c.rc[0]); i++) {
            if (c.rc[i] != VF_EDEADLK)
                printf("kind %d call %d: %s\n", (int)kinds[k], i,
                       vf_error_name(c.rc[i]));
            CHECK_ERR(c.rc[i], VF_EDEADLK);
        }
        CHECK_ERR(c.begin_rc, VF_EINVAL);
        CHECK_OK(c.push_rc);
        CHECK_EQ(atomic_load(&c.child_ran), 1);
        /* The calls refused left both engines as they were. */
        CHECK_OK(vf_engine_wait_all(c.other, NULL));
        CHECK_OK(vf_engine_destroy(c.other));
        CHECK_OK(vf_engine_destroy(c.e));
    }
}

/* A CPU op pushed from device work never runs on the stream's thread,
 * under run_at_push either: reading what the work's op writes, it would
 * wait there, on the host, for that op's fence, queued behind the work on
 * the same stream (found by a reviewer: it hung the stream). */
typedef struct work_reader {
    vf_engine *e;
    vf_var own;
    atomic_int ran;
} work_reader;

static int reader_sync(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(&((work_reader *)arg)->ran, 1);
    return 0;
}

static int reader_work(void *arg)
{
    work_reader *r = arg;
    /* Let the op's function return: its var goes with a fence. */
    struct timespec t = {0, 20 * 1000 * 1000};
    nanosleep(&t, NULL);
    return vf_engine_push(
        r->e, &(vf_op){.fn = reader_sync, .arg = r, .reads = VF_VARS(r->own)});
}

static int submit_reader_work(vf_run *run, void *arg)
{
    return vf_run_submit(run, reader_work, arg, 0);
}

TEST_CASE(device_work_runs_no_cpu_op_here)
{
    const vf_config configs[] = {
        {.type = VF_ENGINE_NAIVE},
        {.type = VF_ENGINE_POOLED},
        {.type = VF_ENGINE_PERDEVICE},
        {.type = VF_ENGINE_POOLED, .cpu_workers = 1, .run_at_push = true}};
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        work_reader r = {0};
        atomic_init(&r.ran, 0);
        CHECK_OK(vf_engine_create(&r.e, &configs[k]));
        r.own = tu_var(r.e);
        CHECK_OK(
            vf_engine_push(r.e, &(vf_op){.fn = submit_reader_work,
                                         .arg = &r,
                                         .writes = VF_VARS(r.own),
                                         .device = {VF_DEVICE_EMULATED, 0}}));
        CHECK_OK(vf_engine_wait_all(r.e, NULL));
        CHECK_EQ(atomic_load(&r.ran), 1);
        CHECK_OK(vf_engine_destroy(r.e));
    }
}

/* An async op made ready in device work (pushed there, or made ready by a
 * completion finished there) starts on a CPU worker, not on the stream's
 * thread: it reads what a device op writes whose work is queued behind
 * this work on the same stream, and its start waits on the host for that
 * work, which could never start (a limitation the header stated before). */
typedef struct later_reader {
    vf_engine *e;
    vf_var a_out, x, gate, out;
    atomic_int b_returned; /* the later op's function returned */
    atomic_int started;    /* R's starts */
    vf_completion gate_done;
    bool by_completion; /* R waits on gate: made ready by its completion */
} later_reader;

static void later_r(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    atomic_fetch_add(&((later_reader *)arg)->started, 1);
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

static void gate_async(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((later_reader *)arg)->gate_done = done; /* finished in device work */
}

static int later_work_a(void *arg)
{
    later_reader *r = arg;
    /* The later op (its work queued behind this one) has left its fence
     * on x by now, as far as a bounded wait can tell. */
    for (int i = 0; i < 5000 && !atomic_load(&r->b_returned); i++) {
        struct timespec t = {0, 1000 * 1000};
        nanosleep(&t, NULL);
    }
    struct timespec t = {0, 20 * 1000 * 1000};
    nanosleep(&t, NULL);
    if (r->by_completion)
        return vf_completion_finish(r->gate_done, 0, NULL);
    return vf_engine_push(r->e, &(vf_op){.async_fn = later_r,
                                         .arg = r,
                                         .reads = VF_VARS(r->x),
                                         .writes = VF_VARS(r->out)});
}

static int later_op_a(vf_run *run, void *arg)
{
    return vf_run_submit(run, later_work_a, arg, 0);
}

static int later_work_b(void *arg)
{
    (void)arg;
    return 0;
}

static int later_op_b(vf_run *run, void *arg)
{
    int rc = vf_run_submit(run, later_work_b, NULL, 0);
    atomic_store(&((later_reader *)arg)->b_returned, 1);
    return rc;
}

TEST_CASE(device_work_starts_async_op_elsewhere)
{
    const vf_config configs[] = {
        {.type = VF_ENGINE_POOLED, .gpu_workers = 1},
        {.type = VF_ENGINE_PERDEVICE, .gpu_workers = 1},
        {.type = VF_ENGINE_POOLED,
         .gpu_workers = 1,
         .cpu_workers = 1,
         .run_at_push = true}};
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        for (int by_completion = 0; by_completion < 2; by_completion++) {
            later_reader r = {.by_completion = by_completion};
            atomic_init(&r.b_returned, 0);
            atomic_init(&r.started, 0);
            CHECK_OK(vf_engine_create(&r.e, &configs[k]));
            r.a_out = tu_var(r.e);
            r.x = tu_var(r.e);
            r.gate = tu_var(r.e);
            r.out = tu_var(r.e);
            if (by_completion) {
                /* Its completion, in A's work, makes R ready there. */
                CHECK_OK(
                    vf_engine_push(r.e, &(vf_op){.async_fn = gate_async,
                                                 .arg = &r,
                                                 .writes = VF_VARS(r.gate)}));
            }
            CHECK_OK(vf_engine_push(
                r.e, &(vf_op){.fn = later_op_a,
                              .arg = &r,
                              .writes = VF_VARS(r.a_out),
                              .device = {VF_DEVICE_EMULATED, 0}}));
            CHECK_OK(vf_engine_push(
                r.e, &(vf_op){.fn = later_op_b,
                              .arg = &r,
                              .writes = VF_VARS(r.x),
                              .device = {VF_DEVICE_EMULATED, 0}}));
            if (by_completion) /* after B: it reads what B writes */
                CHECK_OK(
                    vf_engine_push(r.e, &(vf_op){.async_fn = later_r,
                                                 .arg = &r,
                                                 .reads = VF_VARS(r.x, r.gate),
                                                 .writes = VF_VARS(r.out)}));
            vf_error err;
            int rc = vf_engine_wait_all_timed(r.e, 20000, &err);
            if (rc != 0) { /* the stream hung: no destroy can end */
                CHECK_REPORT_("config %zu, R made ready by a %s in device "
                              "work: wait_all %s, R started %d times",
                              k, by_completion ? "completion" : "push",
                              vf_error_name(rc), atomic_load(&r.started));
                return;
            }
            CHECK_EQ(atomic_load(&r.started), 1);
            CHECK_OK(vf_engine_destroy(r.e));
        }
    }
}

/* An operator's async op made ready in device work runs on a CPU worker,
 * and finishes inside its call there, with the operator destroyed: the op
 * held the operator's last reference, so its finish frees the def the
 * worker's run came from, which the worker read after the run (found by
 * the second reviewer of the fix above: a use after free under ASan). */
typedef struct opr_gate {
    vf_completion done;
    atomic_int set, ran;
} opr_gate;

static void opr_gate_fn(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    opr_gate *g = arg;
    g->done = done;
    atomic_store(&g->set, 1);
}

static void opr_finish_at_once(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    atomic_fetch_add(&((opr_gate *)arg)->ran, 1);
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

static int opr_gate_work(void *arg)
{
    opr_gate *g = arg;
    while (!atomic_load(&g->set))
        sched_yield();
    return vf_completion_finish(g->done, 0, NULL);
}

static int opr_gate_op(vf_run *run, void *arg)
{
    return vf_run_submit(run, opr_gate_work, arg, 0);
}

TEST_CASE(device_work_readies_a_destroyed_operators_async_op)
{
    opr_gate g;
    atomic_init(&g.ran, 0);
    for (int it = 0; it < 20; it++) {
        atomic_init(&g.set, 0);
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED,
                                                   .cpu_workers = 2,
                                                   .gpu_workers = 1}));
        REQUIRE(e != NULL);
        vf_var gate = tu_var(e), out = tu_var(e), d = tu_var(e);
        CHECK_OK(vf_engine_push(e, &(vf_op){.async_fn = opr_gate_fn,
                                            .arg = &g,
                                            .writes = VF_VARS(gate)}));
        vf_operator *opr = NULL;
        CHECK_OK(vf_operator_create(e,
                                    &(vf_op){.async_fn = opr_finish_at_once,
                                             .arg = &g,
                                             .reads = VF_VARS(gate),
                                             .writes = VF_VARS(out)},
                                    &opr));
        CHECK_OK(vf_operator_push(e, opr, 0));
        CHECK_OK(vf_operator_destroy(e, opr)); /* its run holds the last */
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = opr_gate_op,
                                       .arg = &g,
                                       .writes = VF_VARS(d),
                                       .device = {VF_DEVICE_EMULATED, 0}}));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_OK(vf_engine_destroy(e));
    }
    CHECK_EQ(atomic_load(&g.ran), 20);
}

/* A device op's `done` runs on the engine's completer, the one thread that
 * resolves device ops' fences: an async op it makes ready (by a push, or
 * by finishing a completion) that reads what device work still in flight
 * writes starts on a CPU worker, whose start waits on the host for that
 * work, not on the completer, where that wait could never end (found by
 * an auditor: the completer spun for ever, every time). A's work ends once
 * D's function has left its fence on w, and D's work runs on past A's
 * `done` on another stream (the copy pool's). */
typedef struct done_reader {
    vf_engine *e;
    vf_var a_out, w, gate;
    atomic_int a_returned, d_returned, d_done;
    atomic_int d_pending_at_done; /* D's fence unresolved as A's done ran */
    atomic_int started;           /* R's starts */
    vf_completion gate_done;
    bool by_completion; /* R waits on gate too: made ready by its completion */
    int push_rc;
} done_reader;

static void done_r(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    atomic_fetch_add(&((done_reader *)arg)->started, 1);
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

static void done_gate(vf_run *run, void *arg, vf_completion done)
{
    (void)run;
    ((done_reader *)arg)->gate_done = done; /* finished in A's done */
}

static int done_a_work(void *arg)
{
    done_reader *r = arg;
    for (int i = 0; i < 5000 && !atomic_load(&r->d_returned); i++)
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    return 0;
}

static int done_a_op(vf_run *run, void *arg)
{
    int rc = vf_run_submit(run, done_a_work, arg, 0);
    atomic_store(&((done_reader *)arg)->a_returned, 1);
    return rc;
}

static void done_a_done(void *arg, int status)
{
    done_reader *r = arg;
    CHECK_OK(status);
    atomic_store(&r->d_pending_at_done,
                 atomic_load(&r->d_returned) && !atomic_load(&r->d_done));
    if (r->by_completion)
        r->push_rc = vf_completion_finish(r->gate_done, 0, NULL);
    else
        r->push_rc = vf_engine_push(
            r->e,
            &(vf_op){.async_fn = done_r, .arg = r, .reads = VF_VARS(r->w)});
}

static int done_d_work(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    return 0;
}

static int done_d_op(vf_run *run, void *arg)
{
    done_reader *r = arg;
    /* A goes to the completer first: it waits for A's work, then D's. */
    for (int i = 0; i < 5000 && !atomic_load(&r->a_returned); i++)
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    int rc = vf_run_submit(run, done_d_work, arg, 0);
    atomic_store(&r->d_returned, 1);
    return rc;
}

static void done_d_done(void *arg, int status)
{
    CHECK_OK(status);
    atomic_store(&((done_reader *)arg)->d_done, 1);
}

TEST_CASE(device_done_starts_async_op_elsewhere)
{
    const vf_config configs[] = {{.type = VF_ENGINE_POOLED},
                                 {.type = VF_ENGINE_PERDEVICE}};
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        for (int by_completion = 0; by_completion < 2; by_completion++) {
            done_reader r = {.by_completion = by_completion};
            atomic_init(&r.a_returned, 0);
            atomic_init(&r.d_returned, 0);
            atomic_init(&r.d_done, 0);
            atomic_init(&r.d_pending_at_done, 0);
            atomic_init(&r.started, 0);
            CHECK_OK(vf_engine_create(&r.e, &configs[k]));
            r.a_out = tu_var(r.e);
            r.w = tu_var(r.e);
            r.gate = tu_var(r.e);
            if (by_completion)
                CHECK_OK(
                    vf_engine_push(r.e, &(vf_op){.async_fn = done_gate,
                                                 .arg = &r,
                                                 .writes = VF_VARS(r.gate)}));
            CHECK_OK(vf_engine_push(
                r.e, &(vf_op){.fn = done_a_op,
                              .arg = &r,
                              .done = done_a_done,
                              .writes = VF_VARS(r.a_out),
                              .device = {VF_DEVICE_EMULATED, 0}}));
            CHECK_OK(vf_engine_push(
                r.e, &(vf_op){.fn = done_d_op,
                              .arg = &r,
                              .done = done_d_done,
                              .writes = VF_VARS(r.w),
                              .device = {VF_DEVICE_EMULATED, 0},
                              .property = VF_PROP_COPY_TO_DEVICE}));
            if (by_completion) /* after D: it reads what D writes */
                CHECK_OK(vf_engine_push(
                    r.e, &(vf_op){.async_fn = done_r,
                                  .arg = &r,
                                  .reads = VF_VARS(r.w, r.gate)}));
            vf_error err;
            int rc = vf_engine_wait_all_timed(r.e, 10000, &err);
            if (rc != 0) { /* the completer hung: no destroy can end */
                CHECK_REPORT_("config %zu, R made ready by a %s in A's done: "
                              "wait_all %s, R started %d times",
                              k, by_completion ? "completion" : "push",
                              vf_error_name(rc), atomic_load(&r.started));
                return;
            }
            /* Else the case did not show what it is for. */
            CHECK_EQ(atomic_load(&r.d_pending_at_done), 1);
            CHECK_OK(r.push_rc);
            CHECK_EQ(atomic_load(&r.started), 1);
            CHECK_OK(vf_engine_destroy(r.e));
        }
    }
}

/* --- CUDA -------------------------------------------------------------- */

/* The CUDA class registered (it stays for the life of the process: these
 * cases come last), or false, with the reason in `why`: no GPU, no
 * driver, or a build without libvarflow-cuda. */
static bool cuda(char *why, size_t size)
{
#ifdef VF_TEST_CUDA
    CHECK_OK(vf_cuda_register());
#endif
    if (vf_device_count(VF_DEVICE_CUDA) > 0)
        return true;
    snprintf(why, size, "%s", vf_error_detail());
    return false;
}

/* The random programs on CUDA device 0 and emulated device 1. */
TEST_CASE(cuda_random_programs)
{
    char why[256];
    if (!cuda(why, sizeof why))
        TEST_SKIP("%s", why);
    const vf_device saved = devices[0];
    devices[0] = (vf_device){VF_DEVICE_CUDA, 0};
    const run_cfg cfgs[] = {
        {"cuda+emu/events",
         {.type = VF_ENGINE_PERDEVICE,
          .cpu_workers = 2,
          .emulated_latency_us = 20},
         true},
        {"cuda+emu/device_sync",
         {.type = VF_ENGINE_PERDEVICE, .cpu_workers = 2, .device_sync = true},
         false},
        {"cuda+emu/naive", {.type = VF_ENGINE_NAIVE}, false},
    };
    printf("random programs over the CPU, CUDA device 0 and an emulated "
           "device:\n");
    for (int round = 0; round < 4; round++)
        for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
            run_program(&cfgs[c],
                        tu_mix(check_seed(), (uint64_t)round * 31 + c), 400);
    devices[0] = saved;
}

/* The failures across streams, every device op on CUDA device 0. */
TEST_CASE(cuda_failures)
{
    char why[256];
    if (!cuda(why, sizeof why))
        TEST_SKIP("%s", why);
    const vf_device saved[2] = {devices[0], devices[1]};
    devices[0] = devices[1] = (vf_device){VF_DEVICE_CUDA, 0};
    test_failures("cuda", &(vf_config){.type = VF_ENGINE_PERDEVICE});
    devices[0] = saved[0];
    devices[1] = saved[1];
}

/* A timed wait on a var whose device write has its work in flight gives
 * up after its timeout, each time, a look (0) at once; the work is
 * waited for only by an untimed wait. (The second timed wait blocked for
 * the whole work, and a program polling until it let the work finish
 * hung: found by a user tester.) */
static atomic_int tw_go, tw_polled;

static int tw_work(void *arg)
{
    (void)arg;
    while (!atomic_load(&tw_go)) {
        struct timespec nap = {0, 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    return 0;
}

static int tw_op(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, tw_work, NULL, 0);
}

/* The work's end, once the polls are over (or after 5 s, a stuck poll's
 * answer then 0 instead of VF_ETIMEDOUT). */
static void *tw_release(void *arg)
{
    (void)arg;
    (void)tu_wait_flag(&tw_polled, 1, 5.0);
    atomic_store(&tw_go, 1);
    return NULL;
}

TEST_CASE(timed_waits_on_device_work_in_flight_time_out)
{
    atomic_store(&tw_go, 0);
    atomic_store(&tw_polled, 0);
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(
        &e, &(vf_config){.type = VF_ENGINE_PERDEVICE, .cpu_workers = 1}));
    REQUIRE(e != NULL);
    vf_var q = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = tw_op,
                                        .writes = VF_VARS(q),
                                        .device = {VF_DEVICE_EMULATED, 0}}));
    pthread_t t = tu_thread_start(tw_release, NULL);
    for (int i = 0; i < 6; i++) /* the op's function returns meanwhile */
        CHECK_ERR(vf_var_wait_timed(e, q, i % 2 ? 10 : 0, NULL), VF_ETIMEDOUT);
    /* Its write counts once its work completed, not before (the header
     * said at its function's return: found by a user tester). */
    uint64_t version = 99;
    CHECK_OK(vf_var_version(e, q, &version));
    CHECK_EQ(version, 0);
    atomic_store(&tw_polled, 1);
    CHECK_OK(vf_var_wait(e, q, NULL));
    CHECK_OK(vf_var_version(e, q, &version));
    CHECK_EQ(version, 1);
    tu_thread_join(t);
    CHECK_OK(vf_engine_destroy(e));
}

/* A CPU op pushed from device work runs off the stream's thread and its
 * waits return 0 on the engines with pools; on the naive engine, which has
 * no thread but the pusher's, it runs there, inside the work, and its
 * waits are refused as the work's own are (the header's exception: a user
 * tester found the engines' answers differ, undocumented). */
typedef struct work_pusher {
    vf_engine *e;
    vf_var y, z;
    pthread_t work_thread;
    int on_work_thread, wait_rc, children_rc;
} work_pusher;

static int wp_set(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static int wp_cpu_op(vf_run *run, void *arg)
{
    work_pusher *w = arg;
    w->on_work_thread = pthread_equal(pthread_self(), w->work_thread);
    w->wait_rc = vf_var_wait(w->e, w->z, NULL); /* its writer is over */
    CHECK_OK(vf_engine_push(w->e, &(vf_op){.fn = wp_set}));
    w->children_rc = vf_run_wait_children(run, NULL);
    return 0;
}

static int wp_work(void *arg)
{
    work_pusher *w = arg;
    w->work_thread = pthread_self();
    return vf_engine_push(
        w->e, &(vf_op){.fn = wp_cpu_op, .arg = w, .writes = VF_VARS(w->y)});
}

static int wp_dev_op(vf_run *run, void *arg)
{
    return vf_run_submit(run, wp_work, arg, 0);
}

TEST_CASE(op_pushed_from_device_work_on_each_engine)
{
    const vf_engine_type kinds[] = {VF_ENGINE_NAIVE, VF_ENGINE_POOLED,
                                    VF_ENGINE_PERDEVICE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        work_pusher w = {.wait_rc = 1, .children_rc = 1};
        CHECK_OK(vf_engine_create(&w.e, &(vf_config){.type = kinds[k]}));
        w.y = tu_var(w.e);
        w.z = tu_var(w.e);
        vf_var x = tu_var(w.e);
        CHECK_OK(vf_engine_push(
            w.e, &(vf_op){.fn = wp_set, .writes = VF_VARS(w.z)}));
        CHECK_OK(vf_engine_wait_all(w.e, NULL));
        CHECK_OK(
            vf_engine_push(w.e, &(vf_op){.fn = wp_dev_op,
                                         .arg = &w,
                                         .writes = VF_VARS(x),
                                         .device = {VF_DEVICE_EMULATED, 0}}));
        CHECK_OK(vf_engine_wait_all(w.e, NULL));
        bool naive = kinds[k] == VF_ENGINE_NAIVE;
        CHECK_EQ(w.on_work_thread, naive ? 1 : 0);
        CHECK_ERR(w.wait_rc, naive ? VF_EDEADLK : 0);
        CHECK_ERR(w.children_rc, naive ? VF_EDEADLK : 0);
        CHECK_OK(vf_engine_destroy(w.e));
    }
}

/* vf_engine_wait_all_timed with help_on_wait on an engine with devices
 * does not take a queued op that would first meet device work on the
 * host: its polls time out while that work is in flight (one took the
 * reader of a device write and blocked until the work ended, past its
 * deadline; found by a reviewer). */
static atomic_int wh_returned, wh_busy_started, wh_busy_go;

static int wh_dev_op(vf_run *run, void *arg)
{
    (void)arg;
    int rc = vf_run_submit(run, tw_work, NULL, 0);
    atomic_store(&wh_returned, 1);
    return rc;
}

static int wh_busy(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_store(&wh_busy_started, 1);
    CHECK(tu_wait_flag(&wh_busy_go, 1, TU_TIMEOUT));
    return 0;
}

/* Run by the helping wait itself (the worker is busy): the engine's first
 * device op, then, once its function returned, a CPU reader of what it
 * writes (the wait decided to help before the engine had devices: found
 * by the second reviewer). */
static vf_var wh_v;

static int wh_first(vf_run *run, void *arg)
{
    (void)arg;
    vf_engine *e = vf_run_engine(run);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wh_dev_op,
                                        .writes = VF_VARS(wh_v),
                                        .device = {VF_DEVICE_EMULATED, 0}}));
    CHECK(tu_wait_flag(&wh_returned, 1, TU_TIMEOUT));
    nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL); /* released */
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wp_set, .reads = VF_VARS(wh_v)}));
    return 0;
}

TEST_CASE(wait_all_timed_helping_times_out_with_device_work)
{
    for (int first_during_wait = 0; first_during_wait < 2;
         first_during_wait++) {
        atomic_store(&tw_go, 0);
        atomic_store(&tw_polled, 0);
        atomic_store(&wh_returned, 0);
        atomic_store(&wh_busy_go, 0);
        atomic_store(&wh_busy_started, 0);
        vf_engine *e = NULL;
        CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                                   .cpu_workers = 1,
                                                   .help_on_wait = true}));
        REQUIRE(e != NULL);
        wh_v = tu_var(e);
        vf_var x = tu_var(e);
        if (!first_during_wait)
            CHECK_OK(
                vf_engine_push(e, &(vf_op){.fn = wh_dev_op,
                                           .writes = VF_VARS(wh_v),
                                           .device = {VF_DEVICE_EMULATED, 0}}));
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = wh_busy, .writes = VF_VARS(x)}));
        CHECK(tu_wait_flag(&wh_busy_started, 1, TU_TIMEOUT)); /* worker's */
        if (first_during_wait) {
            /* Queued on the busy worker's pool: the wait runs it. */
            CHECK_OK(vf_engine_push(e, &(vf_op){.fn = wh_first}));
        } else {
            CHECK(tu_wait_flag(&wh_returned, 1, TU_TIMEOUT));
            nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
            /* Queued on the busy worker's pool, v's work in flight. */
            CHECK_OK(vf_engine_push(
                e, &(vf_op){.fn = wp_set, .reads = VF_VARS(wh_v)}));
        }
        pthread_t t = tu_thread_start(tw_release, NULL);
        for (int i = 0; i < 3; i++) {
            CHECK_ERR(vf_engine_wait_all_timed(e, 20, NULL), VF_ETIMEDOUT);
            CHECK_EQ(atomic_load(&tw_go), 0); /* before the work could end */
        }
        atomic_store(&tw_polled, 1);
        atomic_store(&wh_busy_go, 1);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        tu_thread_join(t);
        CHECK_OK(vf_engine_destroy(e));
    }
}

TEST_MAIN("test_device_engine", 240)
