/*
 * test_random_serial: random programs give exactly the serial result, on
 * every engine kind, for several seeds.
 *
 * Each program is a few thousand ops over 24 vars with random read and
 * write lists (repeats included, a var may be read and written), random
 * priorities, a little busy work, some async ops (completed inline), and
 * some ops that push 1..2 children from inside (the children write a var
 * private to their parent, with a value the parent computed from its
 * reads, so the serial order of their effects is fixed). An op hashes what
 * it reads, in list order, into its own result slot and writes a function
 * of that hash to every var it writes. The main thread sometimes waits on
 * a var and checks it holds the serial value at that point of the program.
 * At the end every op's result slot, every var and every private var must
 * equal the serial program's, and every op ran exactly once.
 *
 * Bulk rounds (rule 13) run the same kind of program with bulking on:
 * once set by the main thread alone (vf_bulk_set_size), once for every
 * pushing thread through config.bulk_size (the children pushed from inside
 * ops sit in their workers' batches until a wait flushes them). Most of
 * their ops get priority 0, so batches grow; the rest, and async ops,
 * break them. A round turns help_on_wait on: the main thread runs queued
 * ops at its waits too. The last two turn run_at_push on, where the main
 * thread runs ops at their pushes, once with bulking and help_on_wait.
 */
#include "runner.h"

#define NV 24
#define MAXR 5
#define MAXW 3
#define MAXKIDS 2

typedef struct desc {
    int nr, nw;
    int r[MAXR], w[MAXW];
    vf_var vr[MAXR], vw[MAXW];
    int priority;
    int spin;
    bool async;
    int kids;             /* children pushed from inside */
    int priv;             /* private var index, when kids > 0 */
    int wait_on;          /* after pushing this op, wait on this var (-1: no) */
    uint64_t expect_wait; /* serial value of wait_on at that point */
    atomic_int ran;
} desc;

typedef struct prog {
    vf_engine *e;
    desc *ops;
    int n;
    uint64_t val[NV];
    uint64_t *out;  /* per op */
    uint64_t *pval; /* per private var */
    vf_var *pvars;
    int npriv;
    atomic_int kids_ran;
    atomic_int push_errors;
} prog;

typedef struct kid_arg {
    prog *p;
    int priv;
    uint64_t value;
} kid_arg;

static uint64_t body(const desc *d, int g, const uint64_t *val, uint64_t *out,
                     uint64_t *newval)
{
    uint64_t h = tu_mix(0x1234, (uint64_t)g);
    for (int i = 0; i < d->nr; i++)
        h = tu_mix(h, val[d->r[i]]);
    *out = h;
    for (int i = 0; i < d->nw; i++)
        newval[i] = tu_mix(h, (uint64_t)(i + 1));
    return h;
}

static void kid_effect(uint64_t *pv, uint64_t value, int j)
{
    *pv = tu_mix(*pv, value + (uint64_t)j);
}

static int kid_fn(vf_run *run, void *arg)
{
    (void)run;
    kid_arg *k = arg;
    kid_effect(&k->p->pval[k->priv], k->value, 0);
    atomic_fetch_add(&k->p->kids_ran, 1);
    return 0;
}

static void kid_free(void *arg, int status)
{
    CHECK_EQ(status, 0);
    free(arg);
}

static prog *P; /* the program being run */

static void run_desc(vf_run *run, desc *d)
{
    int g = (int)(d - P->ops);
    uint64_t nv[MAXW];
    atomic_fetch_add(&d->ran, 1);
    uint64_t h = body(d, g, P->val, &P->out[g], nv);
    if (d->spin)
        tu_spin_us(d->spin);
    for (int i = 0; i < d->nw; i++)
        P->val[d->w[i]] = nv[i];
    for (int j = 0; j < d->kids; j++) {
        kid_arg *k = malloc(sizeof *k);
        REQUIRE(k);
        k->p = P;
        k->priv = d->priv;
        k->value = h + (uint64_t)j;
        vf_op op = {.fn = kid_fn,
                    .arg = k,
                    .done = kid_free,
                    .writes = tu_list(&P->pvars[d->priv], 1),
                    .priority = d->priority,
                    .name = "kid"};
        if (vf_engine_push(vf_run_engine(run), &op) != 0) {
            atomic_fetch_add(&P->push_errors, 1);
            free(k);
        }
    }
}

static int sync_fn(vf_run *run, void *arg)
{
    run_desc(run, arg);
    return 0;
}

static void async_fn(vf_run *run, void *arg, vf_completion done)
{
    run_desc(run, arg);
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

static void generate(prog *p, tu_rng *r, bool bulk)
{
    p->npriv = 0;
    for (int g = 0; g < p->n; g++) {
        desc *d = &p->ops[g];
        memset(d, 0, sizeof *d);
        d->nr = tu_range(r, 0, MAXR);
        d->nw = tu_range(r, 0, MAXW);
        for (int i = 0; i < d->nr; i++)
            d->r[i] = tu_below(r, NV);
        for (int i = 0; i < d->nw; i++)
            d->w[i] = tu_below(r, NV);
        d->priority = bulk && tu_below(r, 8) != 0 ? 0 : tu_range(r, -3, 3);
        d->spin = tu_below(r, 4) == 0 ? tu_range(r, 1, 3) : 0;
        d->async = tu_below(r, 10) == 0;
        d->kids = tu_below(r, 10) == 0 ? tu_range(r, 1, MAXKIDS) : 0;
        if (d->kids)
            d->priv = p->npriv++;
        d->wait_on = tu_below(r, 30) == 0 ? tu_below(r, NV) : -1;
    }
}

/* The serial program: results into out/val/pval; the values expected at
 * each wait into the descs. */
static void serial(prog *p, uint64_t *out, uint64_t *val, uint64_t *pval)
{
    for (int i = 0; i < NV; i++)
        val[i] = (uint64_t)i * 1000003;
    for (int i = 0; i < p->npriv; i++)
        pval[i] = (uint64_t)i;
    for (int g = 0; g < p->n; g++) {
        desc *d = &p->ops[g];
        uint64_t nv[MAXW];
        uint64_t h = body(d, g, val, &out[g], nv);
        for (int i = 0; i < d->nw; i++)
            val[d->w[i]] = nv[i];
        for (int j = 0; j < d->kids; j++)
            kid_effect(&pval[d->priv], h + (uint64_t)j, 0);
        if (d->wait_on >= 0)
            d->expect_wait = val[d->wait_on];
    }
}

/* Settings of a round beyond its engine kind's. */
typedef struct settings {
    bool help_on_wait, run_at_push;
    int idle_spin_us;
} settings;

/* bulk: 0 off; > 0 the main thread's bulk size; < 0 config.bulk_size. */
static void run_program(const tu_kind *k, int round, int bulk, settings set)
{
    prog p;
    memset(&p, 0, sizeof p);
    P = &p;
    p.n = (int)tu_scaled(4000, 500);
    p.ops = calloc((size_t)p.n, sizeof *p.ops);
    p.out = calloc((size_t)p.n, sizeof *p.out);
    REQUIRE(p.ops && p.out);
    tu_rng r = tu_rng_make(1000 + (uint64_t)round);
    generate(&p, &r, bulk != 0);
    p.pval = calloc((size_t)p.npriv + 1, sizeof *p.pval);
    p.pvars = calloc((size_t)p.npriv + 1, sizeof *p.pvars);
    uint64_t *s_out = calloc((size_t)p.n, sizeof *s_out);
    uint64_t *s_pval = calloc((size_t)p.npriv + 1, sizeof *s_pval);
    uint64_t s_val[NV];
    REQUIRE(p.pval && p.pvars && s_out && s_pval);
    serial(&p, s_out, s_val, s_pval);

    tu_kind kb = *k;
    if (bulk < 0)
        kb.cfg.bulk_size = -bulk;
    kb.cfg.help_on_wait = set.help_on_wait;
    kb.cfg.run_at_push = set.run_at_push;
    kb.cfg.idle_spin_us = set.idle_spin_us;
    p.e = tu_engine(&kb);
    if (bulk > 0)
        CHECK_EQ(vf_bulk_set_size(p.e, bulk), 0);
    vf_var vars[NV];
    for (int i = 0; i < NV; i++) {
        vars[i] = tu_var(p.e);
        p.val[i] = (uint64_t)i * 1000003;
    }
    for (int i = 0; i < p.npriv; i++) {
        p.pvars[i] = tu_var(p.e);
        p.pval[i] = (uint64_t)i;
    }
    int wait_bad = 0, nkids = 0;
    for (int g = 0; g < p.n; g++) {
        desc *d = &p.ops[g];
        nkids += d->kids;
        for (int i = 0; i < d->nr; i++)
            d->vr[i] = vars[d->r[i]];
        for (int i = 0; i < d->nw; i++)
            d->vw[i] = vars[d->w[i]];
        vf_op op = {.arg = d,
                    .reads = tu_list(d->vr, d->nr),
                    .writes = tu_list(d->vw, d->nw),
                    .priority = d->priority,
                    .name = "random"};
        if (d->async)
            op.async_fn = async_fn;
        else
            op.fn = sync_fn;
        if (vf_engine_push(p.e, &op) != 0)
            atomic_fetch_add(&p.push_errors, 1);
        if (d->wait_on >= 0) {
            CHECK_OK(vf_var_wait(p.e, vars[d->wait_on], NULL));
            if (p.val[d->wait_on] != d->expect_wait && wait_bad++ < 3)
                CHECK_REPORT_("round %d: after op %d, var %d = %" PRIu64
                              ", serial %" PRIu64,
                              round, g, d->wait_on, p.val[d->wait_on],
                              d->expect_wait);
        }
    }
    CHECK_OK(vf_engine_wait_all(p.e, NULL));
    CHECK_EQ(atomic_load(&p.push_errors), 0);
    CHECK_EQ(wait_bad, 0);
    CHECK_EQ(atomic_load(&p.kids_ran), nkids);
    int bad = 0;
    for (int g = 0; g < p.n; g++) {
        if (atomic_load(&p.ops[g].ran) != 1 && bad++ < 3)
            CHECK_REPORT_("round %d: op %d ran %d times", round, g,
                          atomic_load(&p.ops[g].ran));
        if (p.out[g] != s_out[g] && bad++ < 3)
            CHECK_REPORT_("round %d: op %d read differently than serial", round,
                          g);
    }
    for (int i = 0; i < NV; i++)
        if (p.val[i] != s_val[i] && bad++ < 6)
            CHECK_REPORT_("round %d: var %d = %" PRIu64 ", serial %" PRIu64,
                          round, i, p.val[i], s_val[i]);
    for (int i = 0; i < p.npriv; i++)
        if (p.pval[i] != s_pval[i] && bad++ < 9)
            CHECK_REPORT_("round %d: private var %d differs", round, i);
    CHECK_EQ(bad, 0);
    vf_stats st;
    CHECK_OK(vf_engine_stats(p.e, &st));
    CHECK_EQ(st.ran, p.n + nkids);
    CHECK_EQ(st.pending, 0);
    if (bulk != 0 && k->threaded) /* the naive engine ignores bulking */
        CHECK(st.bulks > 0 && st.bulked > st.bulks);
    else
        CHECK_EQ(st.bulks, 0);
    tu_finish_engine(p.e);
    free(p.ops);
    free(p.out);
    free(p.pval);
    free(p.pvars);
    free(s_out);
    free(s_pval);
    P = NULL;
}

/* Rounds 0-3: the programs as they come. */
TEST_KIND_CASE(programs, k)
{
    for (int round = 0; round < 4; round++)
        run_program(k, round, 0, (settings){0});
}

/* Round 4: bulking set by the main thread alone (vf_bulk_set_size 8). */
TEST_KIND_CASE(bulk_main_thread, k)
{
    run_program(k, 4, 8, (settings){0});
}

/* Round 5: bulking for every pushing thread (config.bulk_size 5). */
TEST_KIND_CASE(bulk_every_thread, k)
{
    run_program(k, 5, -5, (settings){0});
}

/* Round 6: help_on_wait. */
TEST_KIND_CASE(help_on_wait, k)
{
    run_program(k, 6, 0, (settings){.help_on_wait = true});
}

/* Round 7: ops run at their pushes on the main thread (run_at_push: a
 * pool of one worker that holds nothing runs a ready op there, a pusher
 * ahead of its worker runs its own), idle workers asleep at once. */
TEST_KIND_CASE(run_at_push, k)
{
    run_program(k, 7, 0, (settings){.run_at_push = true, .idle_spin_us = -1});
}

/* Round 8: the same with bulking for every pushing thread and help_on_wait
 * (bulking keeps a pusher from running queued ops at the bound). */
TEST_KIND_CASE(run_at_push_bulk_help, k)
{
    run_program(k, 8, -4,
                (settings){.run_at_push = true, .help_on_wait = true});
}

TEST_MAIN("test_random_serial", 200)
