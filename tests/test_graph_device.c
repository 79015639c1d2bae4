/*
 * test_graph_device: graphs of device ops replayed as device graphs
 * (vf_graph_device_replay), on the emulated device, on every engine kind
 * and with device_sync.
 *
 * - a launch is the pushes it recorded: random programs of device ops over
 *   a few vars, captured once and launched many times, against the same
 *   pushes on an engine of the same kind: each op's outcomes, the values
 *   the device work computed, the versions, what each wait returned, the
 *   stats; with work failing on the device on chosen launches
 *   (vf_graph_set_arg), functions failing while the graph is recorded
 *   (behind work failing on the device too: skipped, as their pushes are),
 *   failing CPU ops and failing device ops pushed between launches (a
 *   failure the host knows at the launch, and one still in flight on the
 *   device), and waits between launches; in half of the programs CPU ops
 *   among the device ops (the device ops between two CPU ops a device
 *   graph of their own); every launch replayed (stats.replays), most
 *   without calling a device op's function;
 * - the next launch's write of a var waits for every read of it by the
 *   launch before (a slow reader on the copy lane, a fast one beside);
 * - a replay calls no function: a graph launched many times calls each
 *   op's function once, and again after vf_graph_set_arg; without the
 *   switch every launch calls them;
 * - an op a recorded function pushes is an ordinary push, made once; on
 *   the naive engine, which would run it on the stream being recorded, it
 *   fails (VF_EINVAL) and its work stays out of the graph;
 * - a launch that starts under the shutdown notice skips its ops, calling
 *   no function; one that runs while another launch of the graph records
 *   it runs its ops as pushes (their functions called) without waiting;
 * - out of memory at any allocation of a launch is VF_ENOMEM for the
 *   launch, or in the outcomes of its ops, nothing else;
 * - a graph destroyed while its launches run, and one the program never
 *   destroyed, are freed after them and by the engine's destroy;
 * - vf_graph_device_replay refuses graphs it cannot replay (VF_ENOTSUP:
 *   no device op, two devices, no_skip) and bad handles, and takes CPU ops
 *   among device ops;
 * - in a graph replayed so, a child of its CPU op on the graph's var runs
 *   after the graph's later ops, and the op's wait for it is VF_EDEADLK,
 *   on every engine kind;
 * - a device op captured (never launched) brings its device's pools, as
 *   the header says, and with them CPU graphs launch op by op; a device
 *   op refused (pushed, or made an operator) brings none;
 * - the emulated class's device graphs directly: nodes run in order, a
 *   failed node skips the nodes that carry from it and no other, a
 *   carrying input's failure reaches its node, record and wait are
 *   refused while recording.
 */
#include "runner.h"

#include <string.h>

#include "base/alloc.h" /* vf__testing_fail_alloc: fault injection */
#include "device/device.h"

#define NV 8      /* vars of a random program */
#define MAXOPS 24 /* ops of a random program */
#define STEPS 16  /* launches */

static const vf_device emu = {VF_DEVICE_EMULATED, 0};

typedef struct world {
    uint64_t val[NV]; /* written by device work only */
    atomic_int calls; /* functions called */
    /* outcomes[op][k]: the k-th done status of the op, + 1000 */
    atomic_int outcomes[MAXOPS][STEPS + 1];
    atomic_int ndone[MAXOPS];
} world;

/* A copied argument, set per launch where it changes. */
typedef struct oparg {
    world *w;
    int op;
    uint64_t salt;
    int dev_fail;  /* the work fails with this on the device (0: no) */
    int host_fail; /* the function fails with this (0: no) */
    bool cpu;      /* a CPU op: its function does the work itself */
    int nr, nw;
    int r[3], wv[2];
} oparg;

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

static int work(void *arg)
{
    const oparg *a = arg;
    if (a->dev_fail != 0)
        return a->dev_fail;
    uint64_t h = mix((uint64_t)a->op, a->salt);
    for (int i = 0; i < a->nr; i++)
        h = mix(h, a->w->val[a->r[i]]);
    for (int i = 0; i < a->nw; i++)
        a->w->val[a->wv[i]] = mix(a->w->val[a->wv[i]], h);
    return 0;
}

static int op_fn(vf_run *run, void *arg)
{
    oparg *a = arg;
    atomic_fetch_add(&a->w->calls, 1);
    if (a->host_fail != 0) {
        vf_run_set_error(run, "op %d fails on the host", a->op);
        return a->host_fail;
    }
    if (a->cpu) /* between device ops: a launch's segments (graph_device.c) */
        return work(a);
    /* Odd ops copy (bytes): a launch's copy lane runs them (emulated.c). */
    return vf_run_submit(run, work, a, (size_t)(a->op % 2) * 64);
}

static void op_done(void *arg, int status)
{
    const oparg *a = arg;
    int k = atomic_fetch_add(&a->w->ndone[a->op], 1);
    if (k <= STEPS)
        atomic_store(&a->w->outcomes[a->op][k], status + 1000);
}

/* What happens around launch s besides the launch itself. */
typedef struct step {
    int set_op;   /* an op whose argument changes before it (-1: none) */
    oparg set;    /* its new argument (w filled in by the run) */
    int cpu_fail; /* a failing CPU op writing this var after it (-1) */
    int dev_fail; /* a device op failing on the device, writing it (-1) */
    int wait_var; /* then a wait on this var (-1) */
    bool wait_all;
} step;

typedef struct program {
    bool on_device; /* its failures: on the device, or functions' */
    int nops;
    oparg ops[MAXOPS];
    step steps[STEPS];
} program;

static void make_program(program *p, tu_rng *r)
{
    memset(p, 0, sizeof *p);
    p->nops = tu_range(r, 3, MAXOPS);
    bool mixed = tu_below(r, 2) == 0; /* CPU ops among the device ops */
    for (int i = 0; i < p->nops; i++) {
        oparg *a = &p->ops[i];
        a->op = i;
        a->salt = (uint64_t)i;
        a->cpu = mixed && i > 0 && tu_below(r, 4) == 0; /* op 0 a device op */
        a->nr = tu_below(r, 4);
        a->nw = tu_range(r, 1, 2); /* each op writes: its launches in order */
        for (int k = 0; k < a->nr; k++)
            a->r[k] = tu_below(r, NV);
        for (int k = 0; k < a->nw; k++)
            a->wv[k] = tu_below(r, NV);
    }
    /* Failures on the device, functions that fail, or both: a function
     * that fails while the work it depends on is failing on the device is
     * skipped, as the serial program skips it (its push meets that work
     * on the host, and so does the launch that records it). */
    int failing = tu_below(r, 3); /* 0: on the device, 1: functions, 2 */
    bool on_device = p->on_device = failing != 1;
    bool on_host = failing != 0;
    /* The arguments as they stand at each step: a change is a set_arg. */
    oparg cur[MAXOPS];
    memcpy(cur, p->ops, sizeof cur);
    for (int s = 0; s < STEPS; s++) {
        step *st = &p->steps[s];
        st->set_op = -1;
        if (s > 0 && tu_below(r, 3) == 0) {
            int i = tu_below(r, p->nops);
            oparg a = cur[i];
            if (tu_below(r, 2) == 0)
                a.salt = a.salt * 31 + (uint64_t)s;
            else if (on_device && (!on_host || tu_below(r, 2) == 0))
                a.dev_fail = a.dev_fail ? 0 : 5;
            else
                a.host_fail = a.host_fail ? 0 : 6;
            cur[i] = a;
            st->set_op = i;
            st->set = a;
        }
        st->cpu_fail = tu_below(r, 8) == 0 ? tu_below(r, NV) : -1;
        st->dev_fail = on_device && tu_below(r, 8) == 0 ? tu_below(r, NV) : -1;
        st->wait_var = tu_below(r, 3) == 0 ? tu_below(r, NV) : -1;
        st->wait_all = tu_below(r, 6) == 0;
    }
}

static int fail_cpu(vf_run *run, void *arg)
{
    (void)arg;
    vf_run_set_error(run, "a CPU op between launches fails");
    return 9;
}

static int fail_dev_work(void *arg)
{
    (void)arg;
    return 8;
}

static int fail_dev(vf_run *run, void *arg)
{
    (void)arg;
    return vf_run_submit(run, fail_dev_work, NULL, 0);
}

static int push_op(vf_engine *e, const oparg *proto, const vf_var *vars,
                   world *w)
{
    oparg a = *proto;
    a.w = w;
    vf_var rl[3], wl[2];
    for (int k = 0; k < a.nr; k++)
        rl[k] = vars[a.r[k]];
    for (int k = 0; k < a.nw; k++)
        wl[k] = vars[a.wv[k]];
    vf_op op = {.fn = op_fn,
                .arg = &a,
                .arg_size = sizeof a,
                .done = op_done,
                .reads = tu_list(rl, a.nr),
                .writes = tu_list(wl, a.nw),
                .device = a.cpu ? (vf_device){VF_DEVICE_CPU, 0} : emu,
                .name = a.cpu ? "CPU graph op" : "device graph op"};
    return vf_engine_push(e, &op);
}

typedef struct seen {
    int wait_rc[STEPS], wait_code[STEPS], wait_all_rc[STEPS];
    uint64_t versions[NV];
    vf_stats stats;
} seen;

/* After launch (or the pushes of step) s: the failing ops, the waits. */
static void after_step(vf_engine *e, const step *st, const vf_var *vars, int s,
                       seen *out)
{
    if (st->cpu_fail >= 0)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = fail_cpu,
                        .writes = tu_list(&vars[st->cpu_fail], 1),
                        .name = "failing CPU op"}));
    if (st->dev_fail >= 0)
        CHECK_OK(vf_engine_push(
            e, &(vf_op){.fn = fail_dev,
                        .writes = tu_list(&vars[st->dev_fail], 1),
                        .device = emu,
                        .name = "failing device op"}));
    vf_error err;
    memset(&err, 0, sizeof err);
    if (st->wait_var >= 0) {
        out->wait_rc[s] = vf_var_wait(e, vars[st->wait_var], &err);
        out->wait_code[s] = out->wait_rc[s] ? err.code : 0;
    }
    /* After a var's wait, all: its claim of a failure is then not raced
     * by device work still in flight that carries the same failure on the
     * device (a device op skipped on the device by a failure a wait has
     * since claimed reports it as its own: device_ops.h; the same for
     * pushes, but a race a comparison of two runs cannot hold still). */
    if (st->wait_all || st->wait_var >= 0)
        out->wait_all_rc[s] = vf_engine_wait_all(e, NULL);
}

static void finish_run(vf_engine *e, const vf_var *vars, seen *out)
{
    (void)vf_engine_wait_all(e, NULL);
    for (int v = 0; v < NV; v++)
        CHECK_OK(vf_var_version(e, vars[v], &out->versions[v]));
    CHECK_OK(vf_engine_stats(e, &out->stats));
}

static vf_engine *engine(const tu_kind *k, bool sync)
{
    vf_config cfg = k->cfg;
    cfg.device_sync = sync;
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &cfg));
    REQUIRE(e != NULL);
    return e;
}

static void run_pushed(const tu_kind *k, bool sync, const program *p, world *w,
                       seen *out)
{
    vf_engine *e = engine(k, sync);
    vf_var vars[NV];
    for (int v = 0; v < NV; v++)
        vars[v] = tu_var(e);
    oparg cur[MAXOPS];
    memcpy(cur, p->ops, sizeof cur);
    for (int s = 0; s < STEPS; s++) {
        if (p->steps[s].set_op >= 0)
            cur[p->steps[s].set_op] = p->steps[s].set;
        for (int i = 0; i < p->nops; i++)
            CHECK_OK(push_op(e, &cur[i], vars, w));
        after_step(e, &p->steps[s], vars, s, out);
    }
    finish_run(e, vars, out);
    CHECK_OK(vf_engine_destroy(e));
}

static void run_launched(const tu_kind *k, bool sync, const program *p,
                         world *w, seen *out)
{
    vf_engine *e = engine(k, sync);
    vf_var vars[NV];
    for (int v = 0; v < NV; v++)
        vars[v] = tu_var(e);
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    for (int i = 0; i < p->nops; i++)
        CHECK_OK(push_op(e, &p->ops[i], vars, w));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    CHECK_OK(vf_graph_device_replay(e, g, true));
    for (int s = 0; s < STEPS; s++) {
        const step *st = &p->steps[s];
        if (st->set_op >= 0) {
            oparg a = st->set;
            a.w = w;
            CHECK_OK(vf_graph_set_arg(e, g, (size_t)st->set_op, &a, sizeof a));
        }
        CHECK_OK(vf_graph_launch(e, g));
        after_step(e, st, vars, s, out);
    }
    finish_run(e, vars, out);
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
}

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

static void compare(const program *p, world *a, world *b, const seen *sa,
                    const seen *sb, int seed)
{
    int diffs = 0;
    for (int i = 0; i < p->nops; i++) {
        CHECK_EQ(atomic_load(&a->ndone[i]), STEPS);
        CHECK_EQ(atomic_load(&b->ndone[i]), STEPS);
        /* An op's outcomes launch by launch, as a multiset: a done called
         * on the host may overtake the completer's for the launch before
         * (in both runs alike). */
        int oa[STEPS], ob[STEPS];
        for (int s = 0; s < STEPS; s++) {
            oa[s] = atomic_load(&a->outcomes[i][s]);
            ob[s] = atomic_load(&b->outcomes[i][s]);
        }
        qsort(oa, STEPS, sizeof oa[0], int_cmp);
        qsort(ob, STEPS, sizeof ob[0], int_cmp);
        if (memcmp(oa, ob, sizeof oa) != 0 && diffs++ < 4)
            CHECK_REPORT_("program %d: op %d's outcomes differ", seed, i);
    }
    for (int v = 0; v < NV; v++) {
        if (a->val[v] != b->val[v] && diffs++ < 8)
            CHECK_REPORT_("program %d: var %d's value differs", seed, v);
        if (sa->versions[v] != sb->versions[v] && diffs++ < 8)
            CHECK_REPORT_("program %d: var %d's version: pushed %llu, "
                          "launched %llu",
                          seed, v, (unsigned long long)sa->versions[v],
                          (unsigned long long)sb->versions[v]);
    }
    /* Which failure a wait names when two are live: on the device, the
     * one each skipped op meets first, which depends on what the host has
     * seen complete (device_ops.h), for pushes and replays alike; with
     * failures on the host only, the first in push order. */
    for (int s = 0; s < STEPS; s++)
        if ((sa->wait_rc[s] != sb->wait_rc[s] ||
             (!p->on_device && sa->wait_code[s] != sb->wait_code[s]) ||
             sa->wait_all_rc[s] != sb->wait_all_rc[s]) &&
            diffs++ < 12)
            CHECK_REPORT_("program %d: the waits after step %d: pushed %d "
                          "(%d) / %d, launched %d (%d) / %d",
                          seed, s, sa->wait_rc[s], sa->wait_code[s],
                          sa->wait_all_rc[s], sb->wait_rc[s], sb->wait_code[s],
                          sb->wait_all_rc[s]);
    CHECK_EQ(sa->stats.ran, sb->stats.ran);
    CHECK_EQ(sa->stats.failed, sb->stats.failed);
    CHECK_EQ(sa->stats.skipped, sb->stats.skipped);
    CHECK_EQ(sb->stats.launches, STEPS);
    CHECK_EQ(sb->stats.replays, STEPS);
}

static void replay_programs(const tu_kind *k, bool sync)
{
    int nprog = (int)tu_scaled(12, 3);
    world *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    program *p = calloc(1, sizeof *p);
    seen *sa = calloc(1, sizeof *sa), *sb = calloc(1, sizeof *sb);
    REQUIRE(a && b && p && sa && sb);
    int fewer = 0; /* programs whose launches called fewer functions */
    /* Past nprog only while no program has shown fewer calls (below). */
    for (int n = 0; n < nprog || (fewer == 0 && n < 40); n++) {
        tu_rng r = tu_rng_make(check_seed() * 1000 + (uint64_t)n);
        make_program(p, &r);
        memset(a, 0, sizeof *a);
        memset(b, 0, sizeof *b);
        memset(sa, 0, sizeof *sa);
        memset(sb, 0, sizeof *sb);
        for (int v = 0; v < NV; v++)
            a->val[v] = b->val[v] = (uint64_t)v * 77;
        run_pushed(k, sync, p, a, sa);
        run_launched(k, sync, p, b, sb);
        compare(p, a, b, sa, sb, n);
        fewer += atomic_load(&b->calls) < atomic_load(&a->calls);
    }
    /* The replays ran recorded work: fewer calls than the pushes. Not in
     * every program (a launch records again after a set_arg, and one
     * whose vars carry a failure pushes), nor in total over the few
     * programs a sanitizer runs (a seed's first three: 206 calls pushed,
     * 211 launched), but in some: the loop goes on past the sanitizers'
     * three until one shows it (a seed whose three all relaunched failed
     * CI's TSan stage, 2026-12-05). */
    CHECK(fewer > 0);
    free(a);
    free(b);
    free(p);
    free(sa);
    free(sb);
}

TEST_KIND_CASE(replay_equals_pushing, k)
{
    replay_programs(k, false);
}

TEST_KIND_CASE(replay_equals_pushing_device_sync, k)
{
    replay_programs(k, true);
}

/* --- a function failing behind failing work, at the recording ----------- */

static int fails_on_host(vf_run *run, void *arg)
{
    (void)arg;
    vf_run_set_error(run, "B fails on the host");
    return 7;
}

static void status_done(void *arg, int status)
{
    atomic_store((atomic_int *)arg, status);
}

/* A records work that fails on the device; B, reading what A writes,
 * fails in its function while that work has not run (it is being
 * recorded). Pushed, B is skipped (rule 9: the serial program never
 * calls it); the launch that records it must say the same: B skipped
 * with A's failure, its write not counted, the wait naming A. */
static void recorded_failure_behind(const tu_kind *k, bool sync)
{
    vf_engine *e = engine(k, sync);
    vf_var a = tu_var(e), b = tu_var(e);
    atomic_int a_done = 0, b_done = 0;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = fail_dev, /* its work: 8 */
                                        .done = status_done,
                                        .arg = &a_done,
                                        .writes = VF_VARS(a),
                                        .device = emu,
                                        .name = "A"}));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = fails_on_host,
                                        .done = status_done,
                                        .arg = &b_done,
                                        .reads = VF_VARS(a),
                                        .writes = VF_VARS(b),
                                        .device = emu,
                                        .name = "B"}));
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_graph_device_replay(e, g, true));
    CHECK_OK(vf_graph_launch(e, g));
    vf_error err;
    CHECK_ERR(vf_engine_wait_all(e, &err), VF_EOPFAILED);
    CHECK_EQ(err.code, 8);
    CHECK(strcmp(err.op_name, "A") == 0);
    CHECK_EQ(atomic_load(&a_done), 8);
    CHECK_EQ(atomic_load(&b_done), VF_ESKIPPED);
    uint64_t version = 99;
    CHECK_OK(vf_var_version(e, b, &version));
    CHECK_EQ(version, 0);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.failed, 1);
    CHECK_EQ(st.skipped, 1);
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
}

TEST_KIND_CASE(recorded_failure_behind_failing_work, k)
{
    recorded_failure_behind(k, false);
    recorded_failure_behind(k, true);
}

/* --- a replay calls no function ------------------------------------------ */

typedef struct chain_arg {
    atomic_int *calls;
    unsigned *cell; /* written by the work only */
    unsigned add;
} chain_arg;

static int chain_work(void *arg)
{
    const chain_arg *c = arg;
    *c->cell = *c->cell * 3 + c->add;
    return 0;
}

static int chain_fn(vf_run *run, void *arg)
{
    chain_arg *c = arg;
    atomic_fetch_add(c->calls, 1);
    return vf_run_submit(run, chain_work, c, 0);
}

/* A graph of n device ops, a chain through x and y (op i reads one and
 * writes the other), op i adding first_add + i to *cell; device replay
 * `on` or not. */
static vf_graph *chain_graph(vf_engine *e, vf_var x, vf_var y,
                             atomic_int *calls, unsigned *cell, int n,
                             unsigned first_add, bool on)
{
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    for (int i = 0; i < n; i++) {
        chain_arg c = {calls, cell, first_add + (unsigned)i};
        vf_var r = i % 2 ? x : y, w = i % 2 ? y : x;
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = chain_fn,
                                            .arg = &c,
                                            .arg_size = sizeof c,
                                            .reads = tu_list(&r, 1),
                                            .writes = tu_list(&w, 1),
                                            .device = emu}));
    }
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    CHECK_OK(vf_graph_device_replay(e, g, on));
    return g;
}

TEST_KIND_CASE(functions_called_when_recorded, k)
{
    for (int on = 0; on < 2; on++) {
        vf_engine *e = engine(k, false);
        vf_var x = tu_var(e), y = tu_var(e);
        unsigned cell = 1;
        atomic_int calls = 0;
        vf_graph *g = chain_graph(e, x, y, &calls, &cell, 4, 1, on);
        unsigned expect = 1;
        for (int s = 0; s < 10; s++) {
            if (s == 6) { /* a new argument: recorded again */
                chain_arg c = {&calls, &cell, 10};
                CHECK_OK(vf_graph_set_arg(e, g, 2, &c, sizeof c));
            }
            CHECK_OK(vf_graph_launch(e, g));
            for (int i = 0; i < 4; i++)
                expect = expect * 3 +
                         (i == 2 && s >= 6 ? 10u : (unsigned)i + 1);
        }
        uint64_t version = 0;
        CHECK_OK(vf_var_wait(e, x, NULL));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_OK(vf_var_version(e, x, &version));
        CHECK_EQ(version, 20);
        CHECK_EQ(cell, expect);
        /* On: recorded at the first launch and at the seventh. */
        CHECK_EQ(atomic_load(&calls), (on ? 8 : 40));
        vf_stats st;
        CHECK_OK(vf_engine_stats(e, &st));
        CHECK_EQ(st.ran, 40);
        CHECK_EQ(st.replays, (on ? 10 : 0));
        CHECK_OK(vf_graph_destroy(e, g));
        CHECK_OK(vf_engine_destroy(e));
    }
}

/* --- the reads of a launch, all met --------------------------------------- */

typedef struct reader {
    int *cell; /* written by the writer's work */
    int *seen; /* what each launch's read saw */
    int *runs;
    bool slow;
} reader;

static int writer_work(void *arg)
{
    (*(int *)arg)++;
    return 0;
}

static int reader_work(void *arg)
{
    reader *r = arg;
    if (r->slow) { /* read late, on the copy lane, after the other reader */
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    r->seen[(*r->runs)++] = *r->cell;
    return 0;
}

static int writer_fn(vf_run *run, void *arg)
{
    return vf_run_submit(run, writer_work, arg, 0);
}

static int reader_fn(vf_run *run, void *arg)
{
    reader *r = arg;
    return vf_run_submit(run, reader_work, r, r->slow ? 64 : 0);
}

/* A var one node of a graph writes and two read, a slow one on the copy
 * lane and a fast one on the other: the next launch's write waits for
 * both reads. (A device graph's nodes complete in no order, so one node's
 * read fence cannot stand for another's: a launch leaves one fence of its
 * own for the reads.) */
TEST_KIND_CASE(reads_of_a_launch_all_met, k)
{
    vf_engine *e = engine(k, false);
    vf_var v = tu_var(e);
    int cell = 0, saw[2][8], runs[2] = {0, 0};
    reader r[2] = {{&cell, saw[0], &runs[0], true},
                   {&cell, saw[1], &runs[1], false}};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = writer_fn,
                                        .arg = &cell,
                                        .writes = tu_list(&v, 1),
                                        .device = emu}));
    for (int i = 0; i < 2; i++)
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = reader_fn,
                                            .arg = &r[i],
                                            .reads = tu_list(&v, 1),
                                            .device = emu}));
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_graph_device_replay(e, g, true));
    for (int s = 0; s < 6; s++)
        CHECK_OK(vf_graph_launch(e, g));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(cell, 6);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(runs[i], 6);
        for (int s = 0; s < runs[i] && s < 6; s++)
            CHECK_EQ(saw[i][s], s + 1); /* the launch's own write */
    }
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
}

/* --- lifetimes ----------------------------------------------------------- */

/* Launches in flight when the graph is destroyed, then the engine (with a
 * second graph, recorded, never destroyed): every launch runs (the
 * functions called once a graph, at its recording), the graphs and their
 * recordings freed by their last launch or by the engine's destroy (ASan
 * without quarantine and Valgrind see any use after free). With a slow device
 * the launches are still in flight. */
TEST_KIND_CASE(destroy_while_launched, k)
{
    vf_config cfg = k->cfg;
    cfg.emulated_latency_us = 200;
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &cfg));
    REQUIRE(e != NULL);
    vf_var x = tu_var(e), y = tu_var(e);
    unsigned cell = 1;
    atomic_int calls = 0;
    vf_graph *g[2];
    for (int n = 0; n < 2; n++)
        g[n] = chain_graph(e, x, y, &calls, &cell, 3, 0, true);
    for (int s = 0; s < 6; s++)
        CHECK_OK(vf_graph_launch(e, g[s % 2]));
    CHECK_OK(vf_graph_destroy(e, g[0])); /* its launches still run */
    CHECK_OK(vf_engine_destroy(e));      /* g[1] freed here */
    CHECK_EQ(atomic_load(&calls), 6);    /* each recorded once */
    unsigned expect = 1;
    for (int s = 0; s < 6; s++)
        for (unsigned i = 0; i < 3; i++)
            expect = expect * 3 + i;
    CHECK_EQ(cell, expect); /* every launch's work ran, in order */
}

/* --- a push from inside a recorded function ------------------------------ */

typedef struct inner_arg {
    unsigned *cell;     /* its work's (plain: the work writes it) */
    atomic_int *status; /* its done's status + 1000 */
} inner_arg;

typedef struct pusher {
    vf_var other;
    inner_arg inner;
    unsigned *cell; /* the recorded work's */
} pusher;

static int bump_work(void *arg)
{
    (*(unsigned *)arg)++;
    return 0;
}

static int inner_fn(vf_run *run, void *arg)
{
    return vf_run_submit(run, bump_work, ((inner_arg *)arg)->cell, 0);
}

static void inner_done(void *arg, int status)
{
    atomic_store(((inner_arg *)arg)->status, status + 1000);
}

/* Pushes an ordinary device op and records its own work (called once: at
 * the recording). */
static int pushing_fn(vf_run *run, void *arg)
{
    pusher *p = arg;
    vf_op op = {.fn = inner_fn,
                .arg = &p->inner,
                .done = inner_done,
                .writes = tu_list(&p->other, 1),
                .device = emu,
                .name = "inner"};
    int rc = vf_engine_push(vf_run_engine(run), &op);
    return rc != 0 ? rc : vf_run_submit(run, bump_work, p->cell, 0);
}

/* An op a recorded function pushes is an ordinary push, made once (at the
 * recording); on the naive engine, where it would run on the stream being
 * recorded, it fails with VF_EINVAL instead, and its work is not recorded
 * into the graph. */
TEST_KIND_CASE(push_from_recorded_function, k)
{
    vf_engine *e = engine(k, false);
    vf_var x = tu_var(e);
    unsigned cells[2] = {0, 0}; /* the inner op's, the recorded op's */
    atomic_int status = -1;
    pusher p = {tu_var(e), {&cells[0], &status}, &cells[1]};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = pushing_fn,
                                        .arg = &p,
                                        .writes = tu_list(&x, 1),
                                        .device = emu}));
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_graph_device_replay(e, g, true));
    for (int s = 0; s < 3; s++)
        CHECK_OK(vf_graph_launch(e, g));
    vf_error err;
    memset(&err, 0, sizeof err);
    int rc = vf_engine_wait_all(e, &err);
    CHECK_EQ(cells[1], 3); /* the recorded work, every launch */
    if (k->threaded) {     /* the inner op ran once, on its own stream */
        CHECK_OK(rc);
        CHECK_EQ(atomic_load(&status), 1000);
        CHECK_EQ(cells[0], 1);
    } else {
        CHECK_EQ(rc, VF_EOPFAILED);
        CHECK_EQ(err.code, VF_EINVAL);
        CHECK(strstr(err.message, "being recorded") != NULL);
        CHECK_EQ(atomic_load(&status), 1000 + VF_EINVAL);
        CHECK_EQ(cells[0], 0);
    }
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
}

/* --- launches that run their ops as pushes ------------------------------- */

typedef struct held {
    tu_gate *gate;
    atomic_int started;
} held;

static int held_fn(vf_run *run, void *arg)
{
    (void)run;
    held *h = arg;
    atomic_store(&h->started, 1);
    REQUIRE(tu_gate_wait(h->gate, 30.0));
    return 0;
}

/* A launch that starts under the shutdown notice (pushed before it, held
 * back by an op still running) runs its ops as their pushes would: each
 * skipped, no function called, no work run. */
TEST_KIND_CASE(launch_under_shutdown, k)
{
    if (!k->threaded) /* a launch there runs inside its call */
        return;
    vf_engine *e = engine(k, false);
    vf_var x = tu_var(e), y = tu_var(e);
    unsigned cell = 1;
    atomic_int calls = 0;
    vf_graph *g = chain_graph(e, x, y, &calls, &cell, 4, 1, true);
    CHECK_OK(vf_graph_launch(e, g)); /* recorded */
    CHECK_OK(vf_engine_wait_all(e, NULL));
    unsigned after_first = cell;
    tu_gate gate;
    tu_gate_init(&gate);
    held h = {.gate = &gate};
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = held_fn, .arg = &h, .writes = tu_list(&x, 1)}));
    CHECK(tu_wait_flag(&h.started, 1, 30.0));
    CHECK_OK(vf_graph_launch(e, g)); /* after the held op */
    CHECK_OK(vf_engine_shutdown(e));
    tu_gate_open(&gate);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&calls), 4);
    CHECK_EQ(cell, after_first);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.ran, 5);
    CHECK_EQ(st.skipped, 4);
    CHECK_EQ(st.launches, 2);
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
    tu_gate_destroy(&gate);
}

typedef struct first_held {
    tu_gate *gate;
    atomic_int calls, recording, work;
} first_held;

static int count_work(void *arg)
{
    atomic_fetch_add(&((first_held *)arg)->work, 1);
    return 0;
}

/* Its first call (the recording) waits for the gate. */
static int first_held_fn(vf_run *run, void *arg)
{
    first_held *f = arg;
    if (atomic_fetch_add(&f->calls, 1) == 0) {
        atomic_store(&f->recording, 1);
        REQUIRE(tu_gate_wait(f->gate, 30.0));
    }
    return vf_run_submit(run, count_work, f, 0);
}

/* A launch that runs while another launch of the graph records it does
 * not wait for the recording: it runs its ops as their pushes would (their
 * functions called). The launches read only, so they run at once, on the
 * device's two workers. The next launch replays the recording. */
TEST_CASE(launch_while_another_records)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                               .cpu_workers = 1,
                                               .gpu_workers = 2}));
    REQUIRE(e != NULL);
    vf_var x = tu_var(e);
    tu_gate gate;
    tu_gate_init(&gate);
    first_held f = {.gate = &gate};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = first_held_fn,
                                        .arg = &f,
                                        .reads = tu_list(&x, 1),
                                        .device = emu}));
    CHECK_OK(vf_graph_end(e, &g));
    REQUIRE(g != NULL);
    CHECK_OK(vf_graph_device_replay(e, g, true));
    CHECK_OK(vf_graph_launch(e, g)); /* records: held in the function */
    CHECK(tu_wait_flag(&f.recording, 1, 30.0));
    CHECK_OK(vf_graph_launch(e, g)); /* by hand, beside it */
    CHECK(tu_wait_flag(&f.work, 1, 30.0));
    CHECK_EQ(atomic_load(&f.calls), 2);
    tu_gate_open(&gate);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&f.work), 2);
    CHECK_OK(vf_graph_launch(e, g)); /* replays the first one's recording */
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&f.calls), 2);
    CHECK_EQ(atomic_load(&f.work), 3);
    vf_stats st;
    CHECK_OK(vf_engine_stats(e, &st));
    CHECK_EQ(st.ran, 3);
    CHECK_EQ(st.launches, 3);
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
    tu_gate_destroy(&gate);
}

/* --- out of memory ---------------------------------------------------- */

typedef struct counted {
    atomic_int *dones, *bad; /* `done` calls; statuses no push could give */
    unsigned *cell;
} counted;

static void counted_done(void *arg, int status)
{
    const counted *c = arg;
    atomic_fetch_add(c->dones, 1);
    if (status != 0 && status != VF_ENOMEM && status != VF_ESKIPPED)
        atomic_fetch_add(c->bad, 1);
}

static int counted_fn(vf_run *run, void *arg)
{
    const counted *c = arg;
    return vf_run_stream(run) != NULL
               ? vf_run_submit(run, bump_work, c->cell, 0)
               : bump_work(c->cell);
}

/* Launches with the n-th allocation failing (vf__testing_fail_alloc): a
 * launch refused with VF_ENOMEM runs nothing; every other calls each op's
 * `done` once, with 0, VF_ENOMEM or VF_ESKIPPED; the engine goes on and
 * is destroyed cleanly (LeakSanitizer checks nothing leaked). Returns
 * whether the fault fired. */
static bool launch_failing(const tu_kind *k, uint64_t n)
{
    vf_engine *e = engine(k, false);
    vf_var x = tu_var(e);
    unsigned cell = 0; /* every op writes it: a chain on x */
    atomic_int dones = 0, bad = 0;
    counted c = {&dones, &bad, &cell};
    vf_graph *g = NULL;
    CHECK_OK(vf_graph_begin(e));
    for (int i = 0; i < 4; i++) { /* device, device, CPU, device */
        CHECK_OK(vf_engine_push(
            e,
            &(vf_op){.fn = counted_fn,
                     .arg = &c,
                     .arg_size = sizeof c,
                     .done = counted_done,
                     .writes = tu_list(&x, 1),
                     .device = i == 2 ? (vf_device){VF_DEVICE_CPU, 0} : emu}));
    }
    CHECK_OK(vf_graph_end(e, &g));
    CHECK_OK(vf_graph_device_replay(e, g, true));
    int launched = 0;
    vf__testing_fail_alloc(n);
    for (int s = 0; s < 3; s++) {
        int rc = vf_graph_launch(e, g);
        if (rc != 0 && rc != VF_ENOMEM)
            CHECK_REPORT_("N=%llu: launch returned %s", (unsigned long long)n,
                          vf_error_name(rc));
        launched += rc == 0;
    }
    (void)vf_engine_wait_all(e, NULL);
    bool fired = vf__testing_alloc_count() >= n;
    vf__testing_fail_alloc(0);
    CHECK_EQ(atomic_load(&dones), 4 * launched);
    CHECK_EQ(atomic_load(&bad), 0);
    CHECK_OK(vf_graph_launch(e, g)); /* usable after the fault */
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&dones), 4 * launched + 4);
    CHECK_OK(vf_graph_destroy(e, g));
    CHECK_OK(vf_engine_destroy(e));
    return fired;
}

TEST_KIND_CASE(out_of_memory_in_a_launch, k)
{
    uint64_t n = 1;
    while (launch_failing(k, n) && n < 400)
        n++;
    CHECK(n > 1 && n < 400); /* the faults ran out before the limit */
    printf("  %s: %llu allocations failed in turn\n", k->name,
           (unsigned long long)(n - 1));
}

/* --- refusals ------------------------------------------------------------ */

TEST_CASE(device_replay_refusals)
{
    vf_engine *e = engine(&tu_kinds[2], false);
    vf_var x = tu_var(e);
    vf_graph *cpu = NULL, *two = NULL, *noskip = NULL;
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = tu_list(&x, 1)}));
    CHECK_OK(vf_graph_end(e, &cpu));
    /* Each refusal says its reason, naming the op (one sentence for all
     * of them before: a user tester). */
    CHECK_ERR(vf_graph_device_replay(e, cpu, true), VF_ENOTSUP);
    CHECK(strstr(vf_error_detail(), "it recorded no device op") != NULL);
    CHECK_OK(vf_graph_device_replay(e, cpu, false)); /* off: nothing to do */

    CHECK_OK(vf_graph_begin(e));
    for (int id = 0; id < 2; id++)
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = chain_fn,
                                       .writes = tu_list(&x, 1),
                                       .device = {VF_DEVICE_EMULATED, id}}));
    CHECK_OK(vf_graph_end(e, &two));
    CHECK_ERR(vf_graph_device_replay(e, two, true), VF_ENOTSUP);
    CHECK(strstr(vf_error_detail(), "recorded op 2 (an unnamed op) runs on a "
                                    "second device") != NULL);

    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = chain_fn,
                                        .writes = tu_list(&x, 1),
                                        .no_skip = true,
                                        .device = emu}));
    CHECK_OK(vf_graph_end(e, &noskip));
    CHECK_ERR(vf_graph_device_replay(e, noskip, true), VF_ENOTSUP);
    CHECK(strstr(vf_error_detail(), "recorded op 1 (an unnamed op) is a "
                                    "no_skip device op") != NULL);

    vf_graph *mixed = NULL; /* CPU ops among device ops: allowed */
    CHECK_OK(vf_graph_begin(e));
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = chain_fn, .writes = tu_list(&x, 1), .device = emu}));
    CHECK_OK(
        vf_engine_push(e, &(vf_op){.fn = tu_nop, .writes = tu_list(&x, 1)}));
    CHECK_OK(vf_graph_end(e, &mixed));
    CHECK_OK(vf_graph_device_replay(e, mixed, true));
    CHECK_OK(vf_graph_destroy(e, mixed));

    CHECK_ERR(vf_graph_device_replay(e, NULL, true), VF_EINVAL);
    CHECK_ERR(vf_graph_device_replay(NULL, cpu, true), VF_EINVAL);
    vf_engine *other = engine(&tu_kinds[0], false);
    CHECK_ERR(vf_graph_device_replay(other, cpu, true), VF_EXDEV);
    CHECK_OK(vf_engine_destroy(other));
    CHECK_OK(vf_graph_destroy(e, cpu));
    CHECK_OK(vf_graph_destroy(e, two));
    CHECK_OK(vf_graph_destroy(e, noskip));
    CHECK_OK(vf_engine_destroy(e));
}

/* --- the emulated class's device graphs ---------------------------------- */

typedef struct node_arg {
    int *log; /* written by the stream only */
    int *n;
    int v, rc;
} node_arg;

static int node_work(void *arg)
{
    const node_arg *a = arg;
    a->log[(*a->n)++] = a->v;
    return a->rc;
}

static int fail_with_3(void *arg)
{
    (void)arg;
    return 3;
}

TEST_CASE(emulated_device_graph)
{
    const vf__device_class *cls = vf__device_class_of(VF_DEVICE_EMULATED);
    REQUIRE(cls != NULL);
    vf__stream *s = NULL, *other = NULL;
    CHECK_OK(cls->stream_create(0, NULL, &s));
    CHECK_OK(cls->stream_create(1, NULL, &other));
    REQUIRE(s != NULL && other != NULL);
    int log[16], n = 0;
    /* Node 0 fails; node 1 carries from it; node 2 carries from none;
     * node 3 carries from node 1 (so from 0 through it). */
    node_arg a[4] = {
        {log, &n, 10, 4}, {log, &n, 11, 0}, {log, &n, 12, 0}, {log, &n, 13, 0}};
    const uint32_t from0[] = {0}, from1[] = {1};
    CHECK_OK(cls->capture_begin(s));
    CHECK_ERR(cls->capture_begin(s), VF_EINVAL);
    CHECK_ERR(cls->submit(s, node_work, &a[0], 0), VF_EINVAL); /* no node */
    CHECK_OK(cls->capture_node(s, NULL, 0, NULL, 0));
    CHECK_OK(cls->submit(s, node_work, &a[0], 0));
    vf__event *ev = NULL;
    CHECK_ERR(cls->record(s, &ev), VF_EINVAL);
    CHECK_OK(cls->capture_node(s, from0, 1, from0, 1));
    CHECK_OK(cls->submit(s, node_work, &a[1], 0));
    CHECK_OK(cls->capture_node(s, NULL, 0, NULL, 0));
    CHECK_OK(cls->submit(s, node_work, &a[2], 0));
    const uint32_t later[] = {5};
    CHECK_ERR(cls->capture_node(s, later, 1, later, 1), VF_EINVAL);
    CHECK_OK(cls->capture_node(s, from1, 1, from1, 1));
    CHECK_OK(cls->submit(s, node_work, &a[3], 0));
    vf__devgraph *g = NULL;
    CHECK_OK(cls->capture_end(s, &g));
    REQUIRE(g != NULL);
    CHECK_EQ(n, 0); /* recorded, not run */

    for (int round = 0; round < 2; round++) {
        n = 0;
        /* An input failing on another stream, carried into node 2. */
        CHECK_OK(cls->submit(other, fail_with_3, NULL, 0));
        vf__event *in_ev = NULL;
        CHECK_OK(cls->record(other, &in_ev));
        vf__devgraph_input in = {in_ev, 2, round == 1};
        vf__event *evs[4] = {0};
        CHECK_OK(cls->graph_launch(g, s, &in, 1, evs));
        vf__event_status st[4];
        for (int i = 0; i < 4; i++) {
            REQUIRE(evs[i] != NULL);
            cls->event_wait(evs[i], &st[i]);
            cls->event_release(evs[i]);
        }
        cls->event_release(in_ev);
        CHECK_EQ(st[0].code, 4);
        CHECK(!st[0].inherited);
        CHECK_EQ(st[1].code, 4);
        CHECK(st[1].inherited);
        CHECK_EQ(st[3].code, 4);
        CHECK(st[3].inherited);
        if (round == 0) {
            CHECK_EQ(st[2].code, 0); /* ordered only */
            CHECK_EQ(n, 2);
            CHECK_EQ(log[0], 10);
            CHECK_EQ(log[1], 12);
        } else {
            CHECK_EQ(st[2].code, 3); /* carried */
            CHECK(st[2].inherited);
            CHECK_EQ(n, 1);
            CHECK_EQ(log[0], 10);
        }
    }
    /* A clean segment after the graph: the stream's own work is its own. */
    CHECK_OK(cls->record(s, &ev));
    CHECK_EQ(cls->event_wait(ev, NULL), 0);
    cls->event_release(ev);
    cls->graph_release(g);
    /* A capture dropped at its end runs nothing. */
    n = 0;
    CHECK_OK(cls->capture_begin(s));
    CHECK_OK(cls->capture_node(s, NULL, 0, NULL, 0));
    CHECK_OK(cls->submit(s, node_work, &a[2], 0));
    CHECK_OK(cls->capture_end(s, NULL));
    CHECK_ERR(cls->capture_end(s, NULL), VF_EINVAL);
    CHECK_EQ(cls->stream_sync(s), 0);
    CHECK_EQ(n, 0);
    cls->stream_destroy(s);
    cls->stream_destroy(other);
}

/* --- a child of a CPU op ------------------------------------------------ */

/* In a graph replayed as device graphs, a child that the graph's CPU op
 * pushes on a var the graph holds runs after the graph's later ops on it,
 * as a push after the launch would (the header's exception), so the CPU
 * op's wait for it can never finish: VF_EDEADLK (the header did not say:
 * found trying graphs as a user). */
typedef struct kid_log {
    atomic_int n;
    char order[64];
    atomic_int wait_rc;
} kid_log;

static void kid_log_add(kid_log *l, char c)
{
    int i = atomic_fetch_add(&l->n, 1);
    if (i < (int)sizeof l->order - 1)
        l->order[i] = c;
}

typedef struct kid_step {
    kid_log *log;
    char c;
} kid_step;

static int kid_work(void *arg)
{
    const kid_step *k = arg;
    kid_log_add(k->log, k->c);
    return 0;
}

static int kid_device(vf_run *run, void *arg)
{
    return vf_run_submit(run, kid_work, arg, 0);
}

static int kid_child(vf_run *run, void *arg)
{
    (void)run;
    kid_log_add(arg, 'K');
    return 0;
}

static vf_var kid_x;

static int kid_parent(vf_run *run, void *arg)
{
    kid_log *l = arg;
    kid_log_add(l, 'C');
    CHECK_OK(vf_engine_push(
        vf_run_engine(run),
        &(vf_op){.fn = kid_child, .arg = l, .writes = tu_list(&kid_x, 1)}));
    atomic_store(&l->wait_rc, vf_run_wait_children(run, NULL));
    return 0;
}

TEST_CASE(device_replay_cpu_child_runs_after_the_graph)
{
    for (int k = 0; k < TU_NKINDS; k++) {
        check_context_ = tu_kinds[k].name;
        vf_engine *e = tu_engine(&tu_kinds[k]);
        kid_x = tu_var(e);
        kid_log log;
        kid_step a = {&log, 'A'}, b = {&log, 'B'};
        vf_graph *g = NULL;
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = kid_device,
                                            .arg = &a,
                                            .writes = tu_list(&kid_x, 1),
                                            .device = emu}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = kid_parent,
                                            .arg = &log,
                                            .writes = tu_list(&kid_x, 1)}));
        CHECK_OK(vf_engine_push(e, &(vf_op){.fn = kid_device,
                                            .arg = &b,
                                            .writes = tu_list(&kid_x, 1),
                                            .device = emu}));
        CHECK_OK(vf_graph_end(e, &g));
        REQUIRE(g != NULL);
        CHECK_OK(vf_graph_device_replay(e, g, true));
        for (int launch = 0; launch < 3; launch++) {
            memset(&log, 0, sizeof log);
            atomic_store(&log.wait_rc, 1);
            CHECK_OK(vf_graph_launch(e, g));
            CHECK_OK(vf_engine_wait_all(e, NULL));
            CHECK_EQ(atomic_load(&log.n), 4);
            if (strcmp(log.order, "ACBK") != 0)
                CHECK_REPORT_("launch %d ran %s, not ACBK", launch, log.order);
            CHECK_EQ(atomic_load(&log.wait_rc), VF_EDEADLK);
        }
        vf_stats st;
        CHECK_OK(vf_engine_stats(e, &st));
        CHECK_EQ(st.replays, 3);
        CHECK_OK(vf_graph_destroy(e, g));
        tu_finish_engine(e);
    }
    check_context_ = NULL;
}

/* A device op captured in a graph, which is never launched, makes its
 * device's pools (vf_engine_num_workers grows), and from then on a graph
 * of CPU ops launches op by op, its results the same (the header: "has a
 * device's pools"; it said "has run a device op": found by a user
 * tester). */
static int add_one(vf_run *run, void *arg)
{
    (void)run;
    (*(int *)arg)++;
    return 0;
}

TEST_CASE(a_captured_device_op_brings_its_pools)
{
    for (int k = 0; k < TU_NKINDS; k++) {
        check_context_ = tu_kinds[k].name;
        vf_engine *e = tu_engine(&tu_kinds[k]);
        vf_var x = tu_var(e), y = tu_var(e);
        int count = 0;
        vf_graph *cpu = NULL, *dev = NULL;
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(vf_engine_push(
            e,
            &(vf_op){.fn = add_one, .arg = &count, .writes = tu_list(&x, 1)}));
        CHECK_OK(vf_graph_end(e, &cpu));
        CHECK_OK(vf_graph_launch(e, cpu));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        vf_stats st;
        CHECK_OK(vf_engine_stats(e, &st));
        CHECK_EQ(st.replays, 1);
        int before = vf_engine_num_workers(e);
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(vf_engine_push(
            e,
            &(vf_op){.fn = tu_nop, .writes = tu_list(&y, 1), .device = emu}));
        CHECK_OK(vf_graph_end(e, &dev));
        if (tu_kinds[k].threaded) /* the naive engine has no threads */
            CHECK(vf_engine_num_workers(e) > before);
        CHECK_OK(vf_graph_launch(e, cpu));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_OK(vf_engine_stats(e, &st));
        CHECK_EQ(st.replays, 1); /* pushed one by one */
        CHECK_EQ(count, 2);
        CHECK_OK(vf_graph_destroy(e, dev));
        CHECK_OK(vf_graph_destroy(e, cpu));
        tu_finish_engine(e);
    }
    check_context_ = NULL;
}

/* A device op refused (an unknown property, a deleted var, a negative list
 * count, an argument too large; pushed, or made an operator) makes none of
 * its device's pools: vf_engine_num_workers stays, and a graph of CPU ops
 * still replays (the header: "On error nothing was pushed"; found by an
 * auditor: each such push made the device's pools, and CPU graphs went op
 * by op from then on, every time). */
TEST_CASE(a_refused_device_op_brings_no_pools)
{
    static char big[VF_MAX_OP_ARG_SIZE + 1];
    for (int k = 0; k < TU_NKINDS; k++) {
        check_context_ = tu_kinds[k].name;
        vf_engine *e = tu_engine(&tu_kinds[k]);
        vf_var x = tu_var(e), gone = tu_var(e);
        CHECK_OK(vf_var_destroy(e, gone, NULL, NULL));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        int count = 0;
        vf_graph *cpu = NULL;
        CHECK_OK(vf_graph_begin(e));
        CHECK_OK(vf_engine_push(
            e,
            &(vf_op){.fn = add_one, .arg = &count, .writes = tu_list(&x, 1)}));
        CHECK_OK(vf_graph_end(e, &cpu));
        int before = vf_engine_num_workers(e);
        const vf_op refused[] = {
            {.fn = tu_nop, .device = emu, .property = (vf_property)42},
            {.fn = tu_nop, .writes = tu_list(&gone, 1), .device = emu},
            {.fn = tu_nop, .reads = {&x, -1}, .device = emu},
            {.fn = tu_nop, .arg = big, .arg_size = sizeof big, .device = emu}};
        for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
            int rc = vf_engine_push(e, &refused[i]);
            CHECK(rc == VF_EINVAL || rc == VF_ESTALE);
            vf_operator *opr = NULL;
            rc = vf_operator_create(e, &refused[i], &opr);
            CHECK(rc == VF_EINVAL || rc == VF_ESTALE);
            CHECK(opr == NULL);
        }
        CHECK_EQ(vf_engine_num_workers(e), before);
        CHECK_OK(vf_graph_launch(e, cpu));
        CHECK_OK(vf_engine_wait_all(e, NULL));
        vf_stats st;
        CHECK_OK(vf_engine_stats(e, &st));
        CHECK_EQ(st.replays, 1); /* replayed, not pushed one by one */
        CHECK_EQ(count, 1);
        CHECK_OK(vf_graph_destroy(e, cpu));
        tu_finish_engine(e);
    }
    check_context_ = NULL;
}

TEST_MAIN("test_graph_device", 300)
