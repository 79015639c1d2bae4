/*
 * test_failure_diff: failures are part of the serial result (issue 17).
 *
 * A differential test: random programs with failures run on every engine
 * configuration, and each run must equal the serial program that
 * tests/failure_oracle.h interprets without varflow: every op's outcome
 * (ran, failed, skipped: done status and whether its body ran), every
 * var's final value and version, every wait's return code and error (code,
 * op name, message) and the value and version right after it, and the
 * ran/failed/skipped stats.
 *
 * The programs (8-24 vars, 50-400 steps): ops with random read and write
 * lists (repeats, vars both read and written), some no_skip, some failing
 * (a code and a message, or VF_ESKIPPED itself), sync, async completed
 * inline or by another thread (with a code, or vf_completion_fail), on
 * the CPU priority pool now and then, with priorities; device ops on two
 * emulated devices in half the programs (their work fails or not), as
 * top-level ops and as children;
 * wait_var and wait_all at random points; deletes and pushes with a
 * deleted var; ops that push 1-3 children over scratch vars of their own
 * and wait on them from inside, failing when such a wait reports; and
 * segments where a second thread pushes over vars of its own while the
 * main thread pushes over the others, joined before the main thread goes
 * on. Unnamed ops come only before the first nested push or segment,
 * where their place in push order ("op #N") is fixed.
 *
 * A segment is deterministic by construction: the vars are split so that
 * no unreported failure is held on both sides, only one side's ops may
 * fail, and no wait_all runs inside it (see gen_segment).
 *
 *   VF_TEST_SEED=n        seed (default 17); a difference prints it
 *   VF_DIFF_PROGRAMS=n    programs (default 100, fewer under sanitizers)
 *   VF_DIFF_ONLY=k        only program k; VF_DIFF_CONFIG=name: one config
 *   VF_DIFF_VERBOSE=1     every run that differs, and up to 16 of its
 *                         differences (default: 12 runs, 4 each)
 *   VF_DIFF_DUMP=1        print each program with the oracle's result
 * To tell bugs apart (they narrow the programs or the run, not the oracle):
 *   VF_DIFF_SIMPLE=1      sync ops of one thread only, every op named,
 *                         none returning VF_ESKIPPED, no devices, children
 *                         or segments (on the naive engine time order is
 *                         then push order)
 *   VF_DIFF_NAMED=1       every op named, none returns VF_ESKIPPED
 *   VF_DIFF_SETTLE=1      before each wait, the thread's ops finish (so a
 *                         wait clearing failures when it runs, rather than
 *                         at its place in push order, no longer shows)
 */
#include "runner.h"

#include "failure_gen.h"
#include "failure_run.h"

/* VF_DIFF_SIMPLE=1 and VF_DIFF_NAMED=1 (see the top of the file). */
static bool simple;
static bool named;

/* Split the alive vars into two sides (side[v]) such that no unreported
 * failure is held on both (fo_components); false when a side would get
 * fewer than two vars. */
static bool gen_split(gen *g, int *side)
{
    int comp[FO_MAXVARS], comp_side[FO_MAXVARS], count[2] = {0, 0};
    fo_components_now(g->p, g->scratch, comp);
    for (int v = 0; v < g->p->nvars; v++)
        comp_side[v] = -1;
    for (int k = 0; k < g->nalive; k++) {
        int v = g->alive[k], c = comp[v];
        if (comp_side[c] < 0)
            comp_side[c] = tu_below(g->r, 2);
        side[v] = comp_side[c];
        count[side[v]]++;
    }
    return count[0] >= 2 && count[1] >= 2;
}

/*
 * A segment: FORK, steps of the main thread (0) and the second pusher (1)
 * over their own vars, JOIN, then maybe waits. Deterministic because the
 * split keeps every unreported failure on one side (a wait on one side
 * never reports what the other side sees), only one side may fail (so
 * records made meanwhile have one order, whatever the interleaving, for a
 * later wait_all), and there is no wait_all in it.
 */
static void gen_segment(gen *g)
{
    int side[FO_MAXVARS];
    bool ok = gen_split(g, side);
    if (!ok) {
        add_step(g, FO_WAIT_ALL, 0, 0); /* reports everything */
        for (int t = 0; t < 4 && !ok; t++)
            ok = gen_split(g, side);
        if (!ok)
            return;
    }
    int pool[2][FO_MAXVARS], n[2] = {0, 0};
    for (int k = 0; k < g->nalive; k++) {
        int v = g->alive[k];
        pool[side[v]][n[side[v]]++] = v;
    }
    int fails = tu_below(g->r, 2), len = tu_range(g->r, 10, 60);
    g->prefix = false;
    add_step(g, FO_FORK, 0, 0);
    for (int k = 0; k < len; k++) {
        int t = tu_below(g->r, 2);
        if (tu_below(g->r, 10) == 0)
            add_step(g, FO_WAIT_VAR, t, pick(g, pool[t], n[t]));
        else
            add_step(g, FO_PUSH, t, gen_op(g, pool[t], n[t], t == fails));
    }
    add_step(g, FO_JOIN, 0, 0);
    int after = tu_below(g->r, 3);
    if (after == 1)
        add_step(g, FO_WAIT_ALL, 0, 0);
    for (int k = 0; after == 2 && k < n[1] && k < 6; k++)
        add_step(g, FO_WAIT_VAR, 0, pool[1][k]);
}

/* Program k: devices in the odd ones. */
static void gen_program(gen *g, int k)
{
    fo_prog *p = g->p;
    tu_rng *r = g->r;
    memset(p, 0, sizeof *p);
    p->seed = tu_next(r);
    p->nvars = tu_range(r, 8, 24);
    g->devices = k % 2 == 1 && !simple;
    g->prefix = true;
    g->nalive = g->ndead = 0;
    for (int v = 0; v < p->nvars; v++)
        g->alive[g->nalive++] = v;
    int target = tu_range(r, 50, 400);
    while (p->nsteps < target && p->nsteps < FO_MAXSTEPS - 80 &&
           p->nops < FO_MAXOPS - 300) {
        int roll = tu_below(r, 1000);
        if (roll < 60)
            add_step(g, FO_WAIT_VAR, 0, pick(g, g->alive, g->nalive));
        else if (roll < 80)
            add_step(g, FO_WAIT_ALL, 0, 0);
        else if (roll < 95 && g->nalive > 6)
            gen_delete(g, 0);
        else if (roll < 100 && g->ndead > 0)
            add_step(g, FO_STALE, 0, pick(g, g->dead, g->ndead));
        else if (roll < 101)
            add_step(g, FO_STALE, 0, -1);
        else if (roll < 105 && !simple)
            gen_segment(g);
        else
            add_step(g, FO_PUSH, 0, gen_op(g, g->alive, g->nalive, true));
    }
    add_step(g, FO_WAIT_ALL, 0, 0);
}

/* ------------------------------------------------------------ running */

#define DEV .gpu_workers = 1, .gpu_copy_workers = 1, .gpu_priority_workers = 1

static const struct {
    const char *name;
    vf_config cfg;
} configs[] = {
    {"naive", {.type = VF_ENGINE_NAIVE}},
    {"pooled/1", {.type = VF_ENGINE_POOLED, .cpu_workers = 1, DEV}},
    {"pooled/2", {.type = VF_ENGINE_POOLED, .cpu_workers = 2, DEV}},
    {"perdevice/1",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 1,
      .cpu_priority_workers = 1,
      DEV}},
    {"perdevice/2+latency",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 2,
      .cpu_priority_workers = 1,
      .emulated_latency_us = 20,
      DEV}},
    {"pooled/2+bulk4",
     {.type = VF_ENGINE_POOLED, .cpu_workers = 2, .bulk_size = 4, DEV}},
    {"perdevice/2+bulk16",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 2,
      .cpu_priority_workers = 1,
      .bulk_size = 16,
      DEV}},
    {"pooled/1+help",
     {.type = VF_ENGINE_POOLED, .cpu_workers = 1, .help_on_wait = true, DEV}},
    {"perdevice/1+help+bulk4",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 1,
      .cpu_priority_workers = 1,
      .help_on_wait = true,
      .bulk_size = 4,
      DEV}},
    {"pooled/2+inflight2",
     {.type = VF_ENGINE_POOLED, .cpu_workers = 2, .max_inflight = 2, DEV}},
    {"perdevice/2+inflight5+help",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 2,
      .cpu_priority_workers = 1,
      .max_inflight = 5,
      .help_on_wait = true,
      DEV}},
    /* An engine with a bound fuses nothing (bulk.c: bulkable): the two
     * below check that a bulk size set there changes nothing. */
    {"pooled/1+bulk16+inflight5",
     {.type = VF_ENGINE_POOLED,
      .cpu_workers = 1,
      .bulk_size = 16,
      .max_inflight = 5,
      DEV}},
    {"perdevice/1+inflight2+bulk4",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 1,
      .cpu_priority_workers = 1,
      .max_inflight = 2,
      .bulk_size = 4,
      DEV}},
    /* Ops run at their pushes on the program's thread (a team of one runs
     * a ready op there; a pusher ahead of its worker runs its op), with
     * idle workers that sleep at once, or pinned, or at a bound. */
    {"pooled/1+at_push",
     {.type = VF_ENGINE_POOLED, .cpu_workers = 1, .run_at_push = true, DEV}},
    {"pooled/2+at_push+nospin",
     {.type = VF_ENGINE_POOLED,
      .cpu_workers = 2,
      .run_at_push = true,
      .idle_spin_us = -1,
      DEV}},
    {"perdevice/1+at_push+bulk4+help",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 1,
      .cpu_priority_workers = 1,
      .run_at_push = true,
      .bulk_size = 4,
      .help_on_wait = true,
      DEV}},
    {"pooled/2+at_push+inflight3+pinned",
     {.type = VF_ENGINE_POOLED,
      .cpu_workers = 2,
      .run_at_push = true,
      .max_inflight = 3,
      .cpu_affinity = "cores",
      DEV}},
};
#define NCONFIGS ((int)(sizeof configs / sizeof configs[0]))

static struct {
    long programs, runs, diffs, runs_differing, printed;
    long by_kind[FR_NDKINDS], by_config[NCONFIGS];
    long ops, failing, skipped, reporting_waits, waits, parents, segments,
        devices, choices, configs, launched, replayed, dev_replays;
    bool verbose, settle, graphs;
} tot;

static void run_one(const fo_prog *p, const fo_result *want, fo_result *got,
                    int k, int c)
{
    char phase[96], why[256];
    snprintf(phase, sizeof phase, "program %d on %s", k, configs[c].name);
    tu_phase_limit(phase, 60);
    fr_run_opts o = {.settle = tot.settle, .graphs = tot.graphs};
    int api = fr_run_program_opts(p, &configs[c].cfg, &o, got, why);
    tot.launched += o.launched;
    tot.replayed += o.replayed;
    tot.dev_replays += o.dev_replays;
    fr_diffs d;
    fr_compare(p, want, got, api, why, &d);
    tot.runs++;
    if (d.count == 0)
        return;
    tot.diffs += d.count;
    tot.runs_differing++;
    tot.by_config[c] += d.count;
    for (int i = 0; i < FR_NDKINDS; i++)
        tot.by_kind[i] += d.by_kind[i];
    if (tot.printed++ >= 12 && !tot.verbose)
        return;
    fprintf(stderr,
            "program %d on %s%s: %d difference(s) (VF_TEST_SEED=%llu "
            "VF_DIFF_ONLY=%d VF_DIFF_CONFIG=%s; %llu skip(s) chose among "
            "failures), first:\n",
            k, configs[c].name, tot.graphs ? " as graphs" : "", d.count,
            (unsigned long long)check_seed(), k, configs[c].name,
            (unsigned long long)want->choices);
    for (int i = 0; i < d.nlines && (i < 4 || tot.verbose); i++)
        fprintf(stderr, "    %s\n", d.lines[i]);
}

/* What the programs contain, from the oracle (to see what was covered). */
static void count_coverage(const fo_prog *p, const fo_result *want)
{
    tot.programs++;
    for (int i = 0; i < p->nops; i++) {
        const fo_op *o = &p->ops[i];
        tot.ops += want->ops[i].done;
        tot.failing += want->ops[i].done && want->ops[i].body &&
                       want->ops[i].status != 0;
        tot.skipped += want->ops[i].done && !want->ops[i].body;
        tot.parents += o->nkids > 0;
        tot.devices += o->how == FO_DEVICE;
    }
    for (int w = 0; w < p->nwaits; w++) {
        tot.waits += want->waits[w].happened;
        tot.reporting_waits += want->waits[w].rc == VF_EOPFAILED;
    }
    for (int s = 0; s < p->nsteps; s++)
        tot.segments += p->steps[s].kind == FO_FORK;
    tot.choices += (long)want->choices;
}

static long programs_to_run(void)
{
    const char *s = getenv("VF_DIFF_PROGRAMS");
    if (s && *s)
        return atol(s);
    long n = tu_scaled(100, 10);
#if defined(TU_ASAN)
    n /= 2;
#endif
    return n;
}

static void print_summary(double secs)
{
    printf("failure_diff: %ld programs x %ld configurations compared, %ld "
           "differences (%ld of %ld runs differ), %.1f s\n",
           tot.programs, tot.configs, tot.diffs, tot.runs_differing, tot.runs,
           secs);
    printf("  programs held %ld ops (%ld failing, %ld skipped, of which %ld "
           "chose among failures; %ld device ops, %ld pushing children), "
           "%ld two-thread segments, %ld waits (%ld report a failure)\n",
           tot.ops, tot.failing, tot.skipped, tot.choices, tot.devices,
           tot.parents, tot.segments, tot.waits, tot.reporting_waits);
    if (tot.graphs)
        printf("  as graphs: %ld launches, %ld of them replayed (%ld as "
               "device graphs; the others pushed op by op)\n",
               tot.launched, tot.replayed, tot.dev_replays);
    if (tot.diffs == 0)
        return;
    for (int i = 0; i < FR_NDKINDS; i++)
        if (tot.by_kind[i])
            printf("  %-34s %ld\n", fr_dkind_names[i], tot.by_kind[i]);
    for (int c = 0; c < NCONFIGS; c++)
        if (tot.by_config[c])
            printf("  on %-31s %ld\n", configs[c].name, tot.by_config[c]);
}

/* A long run (VF_DIFF_PROGRAMS) gets a whole-test limit in proportion,
 * where tu_init's is capped below CTest's timeout (main then starts none);
 * each run keeps its own limit (tu_phase_limit) either way. */
static void start_watchdog(long nprog)
{
    if (getenv("VF_DIFF_PROGRAMS") == NULL)
        return; /* tu_init's */
    double *secs = malloc(sizeof *secs);
    REQUIRE(secs != NULL);
    *secs = (250.0 + 2.0 * (double)nprog) * tu_watchdog_scale_;
    pthread_detach(tu_thread_start(tu_watchdog_, secs));
}

/* The programs on every configuration, against the oracle; with
 * `graphs`, each run of the main thread's pushes captured into a graph
 * and launched (a launch must be the pushes it recorded, whether it
 * replays or pushes them again). */
static void run_programs(bool graphs)
{
    tot.graphs = graphs;
    long nprog = programs_to_run();
    start_watchdog(nprog);
    const char *only = getenv("VF_DIFF_ONLY");
    const char *only_cfg = getenv("VF_DIFF_CONFIG");
    tot.verbose = getenv("VF_DIFF_VERBOSE") != NULL;
    simple = getenv("VF_DIFF_SIMPLE") != NULL;
    named = getenv("VF_DIFF_NAMED") != NULL;
    tot.settle = getenv("VF_DIFF_SETTLE") != NULL;
    fo_prog *p = calloc(1, sizeof *p);
    fo_result *want = calloc(1, sizeof *want), *got = calloc(1, sizeof *got);
    fo_result *scratch = calloc(1, sizeof *scratch);
    REQUIRE(p && want && got && scratch);
    double t0 = tu_now();
    for (int k = 0; k < nprog; k++) {
        if (only && atoi(only) != k)
            continue;
        tu_rng r = tu_rng_make((uint64_t)k);
        gen g = {.p = p,
                 .r = &r,
                 .scratch = scratch,
                 .simple = simple,
                 .named = named};
        gen_program(&g, k);
        fo_interpret(p, want);
        count_coverage(p, want);
        if (getenv("VF_DIFF_DUMP"))
            fr_dump_program(stdout, p, want);
        tot.configs = 0;
        for (int c = 0; c < NCONFIGS; c++) {
            if (only_cfg && strcmp(only_cfg, configs[c].name) != 0)
                continue;
            tot.configs++;
            run_one(p, want, got, k, c);
        }
    }
    print_summary(tu_now() - t0);
    CHECK_EQ(tot.diffs, 0);
    if (graphs && only == NULL && only_cfg == NULL) /* both ways ran */
        CHECK(tot.replayed > 0 && tot.replayed < tot.launched &&
              tot.dev_replays > 0);
    free(p);
    free(want);
    free(got);
    free(scratch);
}

TEST_CASE(programs)
{
    run_programs(false);
}

TEST_CASE(programs_as_graphs)
{
    run_programs(true);
}

int main(int argc, char **argv)
{
    if (getenv("VF_TEST_SEED") == NULL)
        check_seed_ = 17;
    return runner_main(argc, argv, "test_failure_diff",
                       getenv("VF_DIFF_PROGRAMS") == NULL ? 250 : 0);
}
