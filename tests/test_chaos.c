/*
 * test_chaos: random programs that do everything at once give the serial
 * program's result (issue 27: "never a crash, never a different result").
 *
 * A program (tests/failure_oracle.h, made with tests/failure_gen.h's
 * pieces) is a list of steps, each made by one of 2-4 real pushing
 * threads in handshake order (failure_chaos.h: a token passes from step
 * to step, so the pushes happen in the generated order, on shared vars,
 * with no flush or wait between threads), so the oracle is the serial
 * program in that order: every op's outcome, every var's value and
 * version, every wait's code, error, value and version, the stats. The
 * moves, each behind a switch:
 *
 *   threads  2-4 handshake pushers (else one)
 *   nest     ops that push children and wait for them from inside,
 *            children that push and wait in turn (up to 4 levels)
 *   addr     address vars: vf_var_of on a few data cells' addresses,
 *            vf_var_destroy and a new lookup of the same address (the new
 *            var must come after every op of the old one: they write the
 *            same cell), lookups that must return the same handle
 *   stop     vf_engine_stop / vf_engine_start by thread 0, pushes, deletes
 *            and lookups of every thread held between them
 *   bulk     bulking that no thread asked for: VF_BULK_SIZE 1, 8 or 64 in
 *            the environment at engine creation, or config.bulk_size 4
 *   destroy  after the program, vf_engine_destroy while 3 threads push
 *            (with children), look up and wait: each call returns 0 or
 *            VF_ESHUTDOWN (VF_EINVAL once destroy began), every push
 *            accepted runs with its done, nothing crashes
 * and throughout: failures (sync, async, by another thread, device work,
 * vf_completion_fail), no_skip, priorities, deletes and pushes with a
 * deleted var, wait_var and wait_all from any thread at random places.
 *
 * Cases: handshake (every move but bulk and destroy), bulk (bulk with
 * several pushers, nesting and address vars, no stops), destroy (every
 * move but bulk), every_move, each on naive, pooled/1, pooled/2 and
 * perdevice/2 (bulk cycles through the bulk settings).
 *
 *   VF_TEST_SEED=n         seed (default 27); a difference prints it
 *   VF_CHAOS_MOVES=list    the moves on, comma separated (default: all):
 *                          threads,nest,addr,stop,bulk,destroy
 *   VF_CHAOS_PROGRAMS=n    programs per case (default 40; fewer under
 *                          sanitizers)
 *   VF_CHAOS_ONLY=k        only program k; VF_CHAOS_CONFIG=name: one engine
 *   VF_CHAOS_DUMP=1        print each program with the oracle's result
 */
#include "runner.h"

#include "failure_gen.h"
#include "failure_run.h"

enum {
    M_THREADS = FR_M_THREADS,
    M_NEST = FR_M_NEST,
    M_ADDR = FR_M_ADDR,
    M_STOP = FR_M_STOP,
    M_BULK = FR_M_BULK,
    M_DESTROY = FR_M_DESTROY,
    M_ALL = FR_M_ALL
};

/* ------------------------------------------------------------ programs */

typedef struct chaos {
    gen g;
    int moves;
    int addr_cur[FO_MAXADDRS]; /* an address's var, -1 between its destroy
                                  and the next lookup */
    int naddr;
    bool stopped;
    int held; /* steps since the stop */
} chaos;

static int who(chaos *c)
{
    return tu_below(c->g.r, c->g.p->nthreads);
}

/* The vars an op may name now: the main vars alive, and the address
 * vars looked up and not destroyed. */
static int reach(chaos *c, int *pool)
{
    int n = 0;
    for (int k = 0; k < c->g.nalive; k++)
        pool[n++] = c->g.alive[k];
    for (int a = 0; a < c->naddr; a++)
        if (c->addr_cur[a] >= 0)
            pool[n++] = c->addr_cur[a];
    return n;
}

/* A lookup of address a: its var again, or after a destroy a new var on
 * the same data cell. */
static void gen_lookup(chaos *c, int a)
{
    fo_prog *p = c->g.p;
    if (c->addr_cur[a] < 0) {
        int old = -c->addr_cur[a] - 2, v = p->nvars++;
        p->same[v] = fo_cell(p, old) + 1;
        p->addr[v] = a + 1;
        c->addr_cur[a] = v;
    }
    add_step(&c->g, FO_ADDR, who(c), c->addr_cur[a]);
}

/* vf_var_destroy of address a's var (addr_cur keeps the old var, coded). */
static void gen_addr_destroy(chaos *c, int a)
{
    int v = c->addr_cur[a];
    add_step(&c->g, FO_DELETE, who(c), v);
    c->addr_cur[a] = -v - 2;
}

static void gen_addr_move(chaos *c)
{
    int a = tu_below(c->g.r, c->naddr);
    if (c->addr_cur[a] >= 0 && tu_below(c->g.r, 2) == 0)
        gen_addr_destroy(c, a);
    else if (c->g.p->nvars < FO_MAXVARS - FO_MAXSCR * 8)
        gen_lookup(c, a);
}

static void gen_stop_move(chaos *c)
{
    if (!c->stopped) {
        add_step(&c->g, FO_STOP, 0, 0);
        c->stopped = true;
        c->held = 0;
    } else {
        add_step(&c->g, FO_START, 0, 0);
        c->stopped = false;
    }
}

/* One step (no top-level wait while stopped: it would get VF_ESTOPPED). */
static void gen_step(chaos *c)
{
    gen *g = &c->g;
    int pool[FO_MAXVARS], n = reach(c, pool);
    int roll = tu_below(g->r, 1000);
    /* No push with a deleted var while stopped: it is held unchecked (0)
     * and fails with VF_ESTALE at the start (vf_engine_stop), where the
     * serial program's push is refused at once. */
    int stale = c->stopped ? 0 : g->ndead;
    if (c->stopped && ++c->held > 2 && tu_below(g->r, 8) == 0) {
        gen_stop_move(c); /* the start */
        return;
    }
    if (roll < 60 && !c->stopped)
        add_step(g, FO_WAIT_VAR, who(c), pick(g, pool, n));
    else if (roll < 75 && !c->stopped)
        add_step(g, FO_WAIT_ALL, who(c), 0);
    else if (roll < 85 && g->nalive > 6)
        gen_delete(g, who(c));
    else if (roll < 90 && stale > 0)
        add_step(g, FO_STALE, who(c), pick(g, g->dead, stale));
    else if (roll < 150 && (c->moves & M_ADDR))
        gen_addr_move(c);
    else if (roll < 165 && (c->moves & M_STOP) && !c->stopped)
        gen_stop_move(c);
    else
        add_step(g, FO_PUSH, who(c), gen_op(g, pool, n, true));
}

/* Program k (devices in the odd ones). */
static void gen_program(chaos *c, int k)
{
    gen *g = &c->g;
    fo_prog *p = g->p;
    tu_rng *r = g->r;
    memset(p, 0, sizeof *p);
    p->seed = tu_next(r);
    p->nthreads = c->moves & M_THREADS ? tu_range(r, 2, FO_MAXTHREADS) : 1;
    p->nvars = tu_range(r, 6, 16);
    g->devices = k % 2 == 1;
    g->prefix = false; /* every op named: children make "op #N" vary */
    g->nalive = g->ndead = 0;
    g->depth = c->moves & M_NEST ? 4 : 0;
    g->kids_in = c->moves & M_NEST ? 6 : 1 << 30;
    for (int v = 0; v < p->nvars; v++)
        g->alive[g->nalive++] = v;
    c->naddr = c->moves & M_ADDR ? tu_range(r, 1, 4) : 0;
    c->stopped = false;
    for (int a = 0; a < c->naddr; a++) {
        int v = p->nvars++;
        p->addr[v] = a + 1;
        c->addr_cur[a] = v;
        add_step(g, FO_ADDR, who(c), v);
    }
    int target = tu_range(r, 40, 160);
    while (p->nsteps < target && p->nsteps < FO_MAXSTEPS - 4 &&
           p->nops < FO_MAXOPS - 400 && p->nvars < FO_MAXVARS - 40)
        gen_step(c);
    if (c->stopped)
        add_step(g, FO_START, 0, 0);
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
    {"perdevice/2",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 2,
      .cpu_priority_workers = 1,
      DEV}},
};
#define NCONFIGS ((int)(sizeof configs / sizeof configs[0]))

/* The bulk settings a run cycles through: VF_BULK_SIZE, else (0) the
 * config's bulk_size 4. */
static const char *const bulk_env[] = {"1", "8", "64", NULL};

static struct {
    long programs, runs, diffs, runs_differing, printed;
    long ops, parents, deep, waits, handoffs, lookups, reuses, stops;
    fr_race_stats race;
} tot;

static void count_coverage(const fo_prog *p, const fo_result *want)
{
    tot.programs++;
    for (int i = 0; i < p->nops; i++) {
        const fo_op *o = &p->ops[i];
        tot.ops += want->ops[i].done;
        tot.parents += o->nkids > 0;
        tot.deep += o->nkids > 0 && o->parent >= 0;
    }
    for (int w = 0; w < p->nwaits; w++)
        tot.waits += want->waits[w].happened;
    for (int s = 0; s < p->nsteps; s++) {
        const fo_step *st = &p->steps[s];
        tot.handoffs += s > 0 && st->thread != p->steps[s - 1].thread;
        tot.lookups += st->kind == FO_ADDR;
        tot.reuses += st->kind == FO_ADDR && p->same[st->arg] != 0;
        tot.stops += st->kind == FO_STOP;
    }
}

/* Run program k on config c with bulk setting b (-1: none). */
static void run_one(const fo_prog *p, const fo_result *want, fo_result *got,
                    int k, int c, int b, int moves)
{
    char phase[128], why[256], bulk[32] = "no bulk";
    vf_config cfg = configs[c].cfg;
    const char *old = getenv("VF_BULK_SIZE");
    char *saved = old != NULL ? strdup(old) : NULL;
    unsetenv("VF_BULK_SIZE");
    if (b >= 0 && bulk_env[b] != NULL) {
        setenv("VF_BULK_SIZE", bulk_env[b], 1);
        snprintf(bulk, sizeof bulk, "VF_BULK_SIZE=%s", bulk_env[b]);
    } else if (b >= 0) {
        cfg.bulk_size = 4;
        snprintf(bulk, sizeof bulk, "config.bulk_size=4");
    }
    snprintf(phase, sizeof phase, "program %d on %s, %s", k, configs[c].name,
             bulk);
    tu_phase_limit(phase, 60);
    fr_run_opts o = {.racers = moves & M_DESTROY ? 3 : 0, .race = &tot.race};
    int api = fr_run_program_opts(p, &cfg, &o, got, why);
    unsetenv("VF_BULK_SIZE");
    if (saved != NULL)
        setenv("VF_BULK_SIZE", saved, 1);
    free(saved);
    fr_diffs d;
    fr_compare(p, want, got, api, why, &d);
    tot.runs++;
    if (d.count == 0)
        return;
    tot.diffs += d.count;
    tot.runs_differing++;
    if (tot.printed++ >= 8)
        return;
    fprintf(stderr,
            "test_chaos: program %d on %s, %s, %d threads: %d "
            "difference(s) (VF_TEST_SEED=%llu VF_CHAOS_ONLY=%d "
            "VF_CHAOS_CONFIG=%s), first:\n",
            k, configs[c].name, bulk, p->nthreads, d.count,
            (unsigned long long)check_seed(), k, configs[c].name);
    for (int i = 0; i < d.nlines && i < 4; i++)
        fprintf(stderr, "    %s\n", d.lines[i]);
}

static long programs_to_run(void)
{
    const char *s = getenv("VF_CHAOS_PROGRAMS");
    if (s && *s)
        return atol(s);
    long n = tu_scaled(40, 4);
#if defined(TU_ASAN)
    n /= 3;
#endif
    return n;
}

/* The programs of one case with `moves` (and VF_CHAOS_MOVES's). */
static void run_case(const char *name, int moves)
{
    int env = fr_moves_from_env();
    if (env < 0) {
        CHECK_REPORT_("VF_CHAOS_MOVES=%s: a name that is none of threads, "
                      "nest, addr, stop, bulk, destroy",
                      getenv("VF_CHAOS_MOVES"));
        return;
    }
    moves &= env;
    memset(&tot, 0, sizeof tot);
    long nprog = programs_to_run();
    const char *only = getenv("VF_CHAOS_ONLY");
    const char *only_cfg = getenv("VF_CHAOS_CONFIG");
    fo_prog *p = calloc(1, sizeof *p);
    fo_result *want = calloc(1, sizeof *want), *got = calloc(1, sizeof *got);
    REQUIRE(p && want && got);
    double t0 = tu_now();
    for (int k = 0; k < nprog; k++) {
        if (only && atoi(only) != k)
            continue;
        tu_rng r = tu_rng_make(27000 + (uint64_t)k);
        chaos c = {.g = {.p = p, .r = &r}, .moves = moves};
        gen_program(&c, k);
        fo_interpret(p, want);
        count_coverage(p, want);
        if (getenv("VF_CHAOS_DUMP"))
            fr_dump_program(stdout, p, want);
        for (int i = 0; i < NCONFIGS; i++) {
            if (only_cfg && strcmp(only_cfg, configs[i].name) != 0)
                continue;
            int b = moves & M_BULK ? (k + i) % 4 : -1;
            run_one(p, want, got, k, i, b, moves);
        }
    }
    printf("test_chaos %s: moves", name);
    for (int m = 0; m < 6; m++)
        if (moves & (1 << m))
            printf(" %s", fr_move_names[m]);
    printf("; %ld programs, %ld runs, %ld differences (%ld runs differ), "
           "%.1f s\n",
           tot.programs, tot.runs, tot.diffs, tot.runs_differing,
           tu_now() - t0);
    printf("  %ld ops (%ld pushing children, %ld of them children), %ld "
           "waits, %ld hand-offs between threads, %ld lookups (%ld after a "
           "destroy), %ld stops",
           tot.ops, tot.parents, tot.deep, tot.waits, tot.handoffs, tot.lookups,
           tot.reuses, tot.stops);
    if (moves & M_DESTROY)
        printf(", %ld pushes accepted and %ld calls refused racing destroy",
               tot.race.accepted, tot.race.refused);
    printf("\n");
    CHECK_EQ(tot.diffs, 0);
    free(p);
    free(want);
    free(got);
}

/* Every move but bulk and destroy. */
TEST_CASE(handshake)
{
    run_case("handshake", M_ALL & ~(M_BULK | M_DESTROY));
}

/* Every move but destroy and stop, under bulk sizes the program never
 * asked for (with stops too: every_move). */
TEST_CASE(bulk)
{
    run_case("bulk", M_ALL & ~(M_DESTROY | M_STOP));
}

/* Every move, and destroy racing pushes at the end of each run. */
TEST_CASE(destroy)
{
    run_case("destroy", M_ALL & ~M_BULK);
}

/* Every move at once: stops with bulk the program never asked for, with
 * nested waits and several pushers. It found six causes of runs unlike the
 * serial program, now fixed: a batched op took its place in push order
 * when its batch was pushed, not at its own push; a held op took its place
 * when the engine started again; a batched op's failure was ordered by its
 * batch's first op; a batch of children, pushed by another thread while the
 * engine stopped, was held, so the parent's nested wait returned before
 * them; a top-level batch flushed while a start pushed the held ops (by a
 * nested wait of one of them) went ahead of those not pushed yet
 * (test_lifecycle_stop.batch_flushed_during_start_keeps_order); and a
 * child's failure was ordered after its parent's later children when it
 * ran later (test_failure_order.nested_failures_in_tree_order). With 400
 * programs (1,600 runs) for each of seeds 1-5 and 14-40: no difference. */
TEST_CASE(every_move)
{
    run_case("every_move", M_ALL);
}

int main(int argc, char **argv)
{
    if (getenv("VF_TEST_SEED") == NULL)
        check_seed_ = 27;
    return runner_main(argc, argv, "test_chaos", 250);
}
