/*
 * test_soak: a long random run where nothing is lost, hung or raced (issue
 * 4, point 2). A few seconds in `make test`; `make soak` runs it for
 * VF_SOAK_SECONDS (default there: 300).
 *
 * The run is a series of rounds, each on a fresh engine of a different
 * kind (pooled/2, per-device/2 with CPU-prioritized ops, naive, pooled/1
 * with max_inflight 256, per-device/1). In each round 4 threads push at
 * once, each its own deterministic random program (seed, round, thread):
 * - mixed ops over the thread's 4 private vars and 8 shared vars (read and
 *   write sets with repeats, a var both read and written, 1% with 11 vars),
 *   random priorities, 5% async (completed by 2 foreign completer threads),
 *   3% no-skip, and 1% of all ops fail (sync return or async status);
 * - ops on a "pure" private var that nothing else touches, and waits on it
 *   from the pushing thread;
 * - ops that wait from inside (vf_var_wait on a counter var that only
 *   independent ops write, so the wait can always finish);
 * - private vars deleted (their cell freed by the delete's free callback)
 *   and recreated; thread 0 replaces shared vars the same way while the
 *   others push on them (a push that finds its var deleted gets
 *   VF_ESTALE and retries with the new one).
 * Checks, per round:
 * - every op's `done` fires exactly once (a second one is reported; the op
 *   argument is freed by it, so ASan sees a double call too), with 0, the
 *   op's own code (it failed) or VF_ESKIPPED; a no-skip op is never
 *   skipped; an op that does not fail never reports a failure;
 * - vf_engine_stats (completed, ran, failed, skipped, pending) equals the
 *   tally of the done statuses;
 * - the pure var: every op's status, every wait's result (code of the
 *   failing op, or 0) and the final value equal a model of rule 9 run by
 *   the pushing thread;
 * - private vars: a serial replay of the thread's program, applying exactly
 *   the ops whose status was 0, gives every private cell's final value
 *   (logged by the free callback when the var is deleted, or at the end);
 * - shared vars: writers never overlap with each other or with readers
 *   (a plain counter and an atomic one, bumped by writers, must agree
 *   whenever a reader or the free callback looks), and the writes that ran
 *   add up;
 * - a wait from inside an op returns 0 (never VF_EDEADLK: it can always
 *   finish) and sees every counter write pushed before its op. (This found
 *   a false VF_EDEADLK under TSan: a push counted its op active only after
 *   making it ready, so `active` could read 0 in between; fixed in
 *   6fb54d1.)
 * ASan/LSan (make asan) finds no leak or use after free (a free callback
 * frees the var's cell: an op running after it would touch freed memory);
 * TSan (make tsan) reports no race: the engine's ordering is what makes the
 * plain accesses to cells safe. It prints the ops soaked.
 */
#include "runner.h"

enum {
    NT = 4,   /* pushing threads */
    NP = 4,   /* private (mixed) vars per thread */
    NS = 8,   /* shared vars */
    NCOMP = 2 /* completer threads */
};

/* A status slot: FIRED once `done` ran, plus the status. */
#define FIRED 0x40000000
#define NOT_EXPECTED 0x7fffffff /* pure op: (unused) */

/* ------------------------------------------------------------ cells */

struct pusher;

/* The data behind a private var (one per var generation). */
typedef struct pcell {
    uint64_t value;
    int id; /* index in its thread's log */
    struct pusher *owner;
} pcell;

/* The data behind a shared var: `count` (plain) and `acount` (atomic) are
 * both bumped by writers; they differ only if a reader or writer overlaps
 * a writer. */
typedef struct scell {
    uint64_t count;
    _Atomic uint64_t acount;
    struct soak *s;
} scell;

typedef struct sslot {
    vf_var h;
    scell *cell;
} sslot;

/* ------------------------------------------------------------ completers */

typedef struct pending_c {
    vf_completion c;
    int status;
} pending_c;

typedef struct completers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pending_c *q;
    size_t head, tail, cap; /* ring */
    bool stop;
    pthread_t th[NCOMP];
    atomic_long completed;
} completers;

static void comp_give(completers *c, vf_completion d, int status)
{
    pthread_mutex_lock(&c->mu);
    if (c->tail - c->head == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 256;
        pending_c *nq = malloc(ncap * sizeof *nq);
        REQUIRE(nq != NULL);
        for (size_t i = c->head; i < c->tail; i++)
            nq[i - c->head] = c->q[i % c->cap];
        free(c->q);
        c->q = nq;
        c->tail -= c->head;
        c->head = 0;
        c->cap = ncap;
    }
    c->q[c->tail++ % c->cap] = (pending_c){d, status};
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void *comp_main(void *arg)
{
    completers *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->head == c->tail && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->head == c->tail)
            break;
        pending_c p = c->q[c->head++ % c->cap];
        pthread_mutex_unlock(&c->mu);
        CHECK_OK(vf_completion_finish(p.c, p.status,
                                      p.status ? "async failure" : NULL));
        atomic_fetch_add(&c->completed, 1);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ------------------------------------------------------------ state */

typedef struct soak {
    vf_engine *e;
    vf_property prio_prop; /* CPU-prioritized on per-device engines */
    pthread_mutex_t smu;   /* guards S */
    sslot S[NS];
    completers comp;
    atomic_long overlaps;       /* shared writers overlapped */
    atomic_long shared_counted; /* writes counted by freed shared cells */
    atomic_long stale_retries;
    atomic_long nested_waits;
    atomic_long other_waits;
    atomic_long nested_errors;
    atomic_long double_done;
    atomic_long bad_status;
    double deadline;
    long cap; /* ops per thread per round */
} soak;

/* What a pushing thread keeps (also replayed from). */
typedef struct pusher {
    soak *s;
    int t;
    uint64_t seed;
    /* private vars and their cells */
    vf_var P[NP];
    pcell *Pc[NP];
    int ncells;
    uint64_t *log; /* final value by cell id */
    char *logged;  /* log written */
    int log_cap;
    /* the pure var (rule 9 model) and the counter var */
    vf_var X, Q;
    pcell *Xc;
    _Atomic uint64_t qv;
    uint64_t q_pushed;
    int pure_failed;   /* model: code of the active failure on X, or 0 */
    uint64_t pure_val; /* model value of X */
    /* per op */
    long nops;
    _Atomic int *rec; /* FIRED | status, by `done` */
    int *expect;      /* pure ops: expected status; else NOT_EXPECTED */
    long pure_waits, pure_wait_fail;
    long pushed_async;
} pusher;

/* ------------------------------------------------------------ ops */

enum { K_MIXED, K_PURE, K_QWRITE, K_NESTED };

typedef struct sop {
    pusher *p;
    long idx;
    int kind;
    int fail; /* 0, or the code it fails with */
    int nw, nr, nsr, nsw;
    pcell *w[2], *r[NP];
    scell *sr[5], *sw[1];
    uint64_t k;
    uint64_t q_min; /* nested: counter writes pushed before */
} sop;

static int sop_code(const pusher *p, long idx)
{
    return (p->t + 1) * 10000000 + (int)idx;
}

/* Reads and writes of shared cells: check nobody overlaps a writer. */
static void shared_check(sop *o)
{
    for (int i = 0; i < o->nsr; i++) {
        scell *c = o->sr[i];
        if (c->count != atomic_load_explicit(&c->acount, memory_order_relaxed))
            atomic_fetch_add(&c->s->overlaps, 1);
    }
    for (int i = 0; i < o->nsw; i++) {
        scell *c = o->sw[i];
        if (c->count != atomic_load_explicit(&c->acount, memory_order_relaxed))
            atomic_fetch_add(&c->s->overlaps, 1);
    }
}

static void shared_write(sop *o)
{
    for (int i = 0; i < o->nsw; i++) {
        scell *c = o->sw[i];
        c->count++;
        atomic_fetch_add_explicit(&c->acount, 1, memory_order_relaxed);
    }
}

/* The private effect of a mixed op (also used by the replay). */
static uint64_t mix_sum(pcell *const *r, int nr)
{
    uint64_t sum = 0;
    for (int i = 0; i < nr; i++)
        sum += r[i]->value;
    return sum;
}

static uint64_t step(uint64_t v, uint64_t k, uint64_t sum)
{
    return v * 6364136223846793005ULL + k + sum;
}

/* Run the op's body; returns its status (0 or its code). */
static int body(vf_run *run, sop *o)
{
    pusher *p = o->p;
    switch (o->kind) {
    case K_MIXED: {
        shared_check(o);
        if (o->fail) {
            vf_run_set_error(run, "mixed op %ld fails", o->idx);
            return o->fail;
        }
        uint64_t sum = mix_sum(o->r, o->nr);
        for (int i = 0; i < o->nw; i++)
            o->w[i]->value = step(o->w[i]->value, o->k, sum);
        shared_write(o);
        return 0;
    }
    case K_PURE:
        if (o->fail)
            return o->fail;
        p->Xc->value = step(p->Xc->value, o->k, 0);
        return 0;
    case K_QWRITE:
        atomic_fetch_add_explicit(&p->qv, 1, memory_order_relaxed);
        return 0;
    case K_NESTED: {
        int rc = vf_var_wait(vf_run_engine(run), p->Q, NULL);
        atomic_fetch_add(&p->s->nested_waits, 1);
        uint64_t q = atomic_load_explicit(&p->qv, memory_order_relaxed);
        if (rc != 0 || q < o->q_min) {
            atomic_fetch_add(&p->s->nested_errors, 1);
            CHECK_REPORT_("thread %d op %ld: nested wait returned %s, "
                          "counter %llu < %llu",
                          p->t, o->idx, vf_error_name(rc),
                          (unsigned long long)q, (unsigned long long)o->q_min);
        }
        return 0;
    }
    }
    return 0;
}

static int sync_fn(vf_run *run, void *arg)
{
    return body(run, arg);
}

static void async_fn(vf_run *run, void *arg, vf_completion done)
{
    sop *o = arg;
    int st = body(run, o);
    comp_give(&o->p->s->comp, done, st);
}

static void sop_done(void *arg, int status)
{
    sop *o = arg;
    pusher *p = o->p;
    int old = atomic_exchange(&p->rec[o->idx], FIRED | (status & 0x3fffffff));
    if (old & FIRED) {
        atomic_fetch_add(&p->s->double_done, 1);
        CHECK_REPORT_("thread %d op %ld: done fired twice", p->t, o->idx);
    }
    if (status != 0 && status != VF_ESKIPPED && status != o->fail) {
        atomic_fetch_add(&p->s->bad_status, 1);
        CHECK_REPORT_("thread %d op %ld: done status %d, op fails with %d",
                      p->t, o->idx, status, o->fail);
    }
    free(o);
}

static void free_pcell(void *arg)
{
    pcell *c = arg;
    pusher *p = c->owner;
    p->log[c->id] = c->value;
    p->logged[c->id] = 1;
    free(c);
}

static void free_scell(void *arg)
{
    scell *c = arg;
    if (c->count != atomic_load(&c->acount))
        atomic_fetch_add(&c->s->overlaps, 1);
    atomic_fetch_add(&c->s->shared_counted, (long)c->count);
    free(c);
}

/* ------------------------------------------------------------ program */

/* One generated step of a thread's program. The generator consumes the
 * random stream identically in the pusher and in the replay. */
enum {
    G_MIXED,
    G_PURE,
    G_QWRITE,
    G_NESTED,
    G_WAIT_PURE,
    G_WAIT_OTHER,
    G_DEL_PRIV,
    G_REPL_SHARED
};

typedef struct gen {
    int what;
    bool async, no_skip, prio_prop;
    int fail; /* bool here; the code is sop_code() */
    int priority;
    uint64_t k;
    int nw, nr, nsr, nsw;
    int w[2], r[NP], sr[5], sw[1];
    int slot; /* G_DEL_PRIV / G_REPL_SHARED */
} gen;

static void generate(tu_rng *rng, int t, gen *g)
{
    memset(g, 0, sizeof *g);
    int r = tu_below(rng, 1000);
    g->k = tu_next(rng);
    g->fail = tu_below(rng, 100) == 0;
    g->no_skip = tu_below(rng, 100) < 3;
    g->async = tu_below(rng, 100) < 5;
    g->prio_prop = tu_below(rng, 8) == 0;
    g->priority = tu_range(rng, -2, 2);
    g->slot = tu_below(rng, t == 0 ? NS : NP);
    if (r < 3) {
        g->what = G_DEL_PRIV;
        g->slot = tu_below(rng, NP);
    } else if (r < 4) {
        g->what = t == 0 ? G_REPL_SHARED : G_QWRITE;
    } else if (r < 14) {
        g->what = G_NESTED;
    } else if (r < 34) {
        g->what = G_QWRITE;
    } else if (r < 44) {
        g->what = G_WAIT_PURE;
    } else if (r < 144) {
        g->what = G_PURE;
    } else if (r < 164) {
        /* A wait from the pusher on a private or shared var: reports (and
         * so clears) the failure chain that reached it. */
        g->what = G_WAIT_OTHER;
        g->slot = tu_below(rng, NP + NS);
    } else {
        g->what = G_MIXED;
        bool big = tu_below(rng, 100) == 0;
        g->nw = big ? 1 : 1 + (tu_below(rng, 4) == 0);
        g->w[0] = tu_below(rng, NP);
        if (g->nw == 2)
            g->w[1] = (g->w[0] + 1 + tu_below(rng, NP - 1)) % NP;
        g->nr = big ? NP : tu_below(rng, 3);
        for (int i = 0; i < g->nr; i++)
            g->r[i] = big ? i : tu_below(rng, NP); /* repeats allowed */
        g->nsr = big ? 5 : tu_below(rng, 3);
        for (int i = 0; i < g->nsr; i++)
            g->sr[i] = tu_below(rng, NS); /* repeats allowed */
        g->nsw = big ? 1 : tu_below(rng, 3) == 0;
        if (g->nsw)
            g->sw[0] = tu_below(rng, NS);
    }
}

/* ------------------------------------------------------------ pusher */

static pcell *new_pcell(pusher *p)
{
    pcell *c = calloc(1, sizeof *c);
    REQUIRE(c != NULL);
    REQUIRE(p->ncells < p->log_cap);
    c->id = p->ncells++;
    c->owner = p;
    return c;
}

static vf_var new_var(vf_engine *e)
{
    vf_var v = {0};
    int rc = vf_var_create(e, &v);
    if (rc != 0)
        CHECK_REPORT_("vf_var_create returned %s (%s)", vf_error_name(rc),
                      vf_error_detail());
    REQUIRE(rc == 0);
    return v;
}

/* Push; a shared var deleted meanwhile (VF_ESTALE) makes the caller
 * retry. Any other error is a failure. */
static int push_op(pusher *p, const gen *g, sop *o, const vf_var *reads,
                   int nreads, const vf_var *writes, int nwrites)
{
    soak *s = p->s;
    vf_op op = {.arg = o,
                .done = sop_done,
                .reads = tu_list(reads, nreads),
                .writes = tu_list(writes, nwrites),
                .priority = g->priority,
                .no_skip = g->no_skip && o->kind != K_NESTED,
                .name = o->kind == K_PURE ? "pure" : "soak"};
    if (g->async && (o->kind == K_MIXED || o->kind == K_PURE))
        op.async_fn = async_fn;
    else
        op.fn = sync_fn;
    if (g->prio_prop)
        op.property = s->prio_prop;
    return vf_engine_push(s->e, &op);
}

/* The pure var's model (rule 9), advanced by each pure op and wait. */
static int model_pure_op(pusher *p, const gen *g, int code)
{
    if (p->pure_failed && !g->no_skip)
        return VF_ESKIPPED;
    if (g->fail) {
        p->pure_failed = code;
        return code;
    }
    p->pure_val = step(p->pure_val, g->k, 0);
    return 0;
}

static void wait_pure(pusher *p, const char *when)
{
    vf_error err;
    int rc = vf_var_wait(p->s->e, p->X, &err);
    p->pure_waits++;
    int want = p->pure_failed ? VF_EOPFAILED : 0;
    if (rc != want)
        CHECK_REPORT_("thread %d (%s, op %ld): wait on the pure var "
                      "returned %s, model %s",
                      p->t, when, p->nops, vf_error_name(rc),
                      vf_error_name(want));
    else if (rc == VF_EOPFAILED && err.code != p->pure_failed)
        CHECK_REPORT_("thread %d (%s): pure var failure code %d, model %d",
                      p->t, when, err.code, p->pure_failed);
    if (rc == VF_EOPFAILED)
        p->pure_wait_fail++;
    p->pure_failed = 0;
    if (p->Xc->value != p->pure_val)
        CHECK_REPORT_("thread %d (%s): pure var %llu, model %llu", p->t, when,
                      (unsigned long long)p->Xc->value,
                      (unsigned long long)p->pure_val);
}

static void *pusher_main(void *arg)
{
    pusher *p = arg;
    soak *s = p->s;
    tu_rng rng = {p->seed};
    for (int i = 0; i < NP; i++) {
        p->P[i] = new_var(s->e);
        p->Pc[i] = new_pcell(p);
    }
    p->X = new_var(s->e);
    p->Q = new_var(s->e);
    p->Xc = new_pcell(p);
    while (p->nops < s->cap &&
           ((p->nops & 255) != 0 || tu_now() < s->deadline)) {
        gen g;
        generate(&rng, p->t, &g);
        if (g.what == G_WAIT_PURE) {
            wait_pure(p, "during");
            continue;
        }
        if (g.what == G_WAIT_OTHER) {
            vf_var v = p->P[g.slot % NP];
            if (g.slot >= NP) {
                pthread_mutex_lock(&s->smu);
                v = s->S[g.slot - NP].h;
                pthread_mutex_unlock(&s->smu);
            }
            int rc = vf_var_wait(s->e, v, NULL);
            /* (a shared var may have been replaced meanwhile: stale) */
            if (rc != 0 && rc != VF_EOPFAILED && rc != VF_ESTALE)
                CHECK_REPORT_("thread %d: wait returned %s", p->t,
                              vf_error_name(rc));
            atomic_fetch_add(&s->other_waits, 1);
            continue;
        }
        if (g.what == G_DEL_PRIV) {
            int j = g.slot;
            CHECK_OK(vf_var_destroy(s->e, p->P[j], free_pcell, p->Pc[j]));
            p->P[j] = new_var(s->e);
            p->Pc[j] = new_pcell(p);
            continue;
        }
        if (g.what == G_REPL_SHARED) {
            scell *c = calloc(1, sizeof *c);
            REQUIRE(c != NULL);
            c->s = s;
            vf_var nv = new_var(s->e);
            pthread_mutex_lock(&s->smu);
            sslot old = s->S[g.slot];
            s->S[g.slot] = (sslot){nv, c};
            pthread_mutex_unlock(&s->smu);
            CHECK_OK(vf_var_destroy(s->e, old.h, free_scell, old.cell));
            continue;
        }
        long idx = p->nops++;
        int code = sop_code(p, idx);
        sop *o = calloc(1, sizeof *o);
        REQUIRE(o != NULL);
        o->p = p;
        o->idx = idx;
        o->k = g.k;
        p->expect[idx] = NOT_EXPECTED;
        vf_var reads[NP + 5], writes[2 + 1];
        int nreads = 0, nwrites = 0;
        switch (g.what) {
        case G_PURE:
            o->kind = K_PURE;
            o->fail = g.fail ? code : 0;
            writes[nwrites++] = p->X;
            p->expect[idx] = model_pure_op(p, &g, code);
            break;
        case G_QWRITE:
            o->kind = K_QWRITE;
            writes[nwrites++] = p->Q;
            p->q_pushed++;
            break;
        case G_NESTED:
            o->kind = K_NESTED;
            o->q_min = p->q_pushed;
            reads[nreads++] = p->P[tu_below(&rng, NP)];
            break;
        default:
            o->kind = K_MIXED;
            o->fail = g.fail ? code : 0;
            o->nw = g.nw;
            o->nr = g.nr;
            for (int i = 0; i < g.nw; i++) {
                o->w[i] = p->Pc[g.w[i]];
                writes[nwrites++] = p->P[g.w[i]];
            }
            for (int i = 0; i < g.nr; i++) {
                o->r[i] = p->Pc[g.r[i]];
                reads[nreads++] = p->P[g.r[i]];
            }
            break;
        }
        int rc;
        int base_r = nreads, base_w = nwrites;
        for (;;) {
            if (o->kind == K_MIXED) {
                nreads = base_r;
                nwrites = base_w;
                pthread_mutex_lock(&s->smu);
                for (int i = 0; i < g.nsr; i++) {
                    o->sr[i] = s->S[g.sr[i]].cell;
                    reads[nreads++] = s->S[g.sr[i]].h;
                }
                for (int i = 0; i < g.nsw; i++) {
                    o->sw[i] = s->S[g.sw[i]].cell;
                    writes[nwrites++] = s->S[g.sw[i]].h;
                }
                pthread_mutex_unlock(&s->smu);
                o->nsr = g.nsr;
                o->nsw = g.nsw;
            }
            int nshared = o->nsr + o->nsw; /* before the push hands o over */
            rc = push_op(p, &g, o, reads, nreads, writes, nwrites);
            if (rc != VF_ESTALE || nshared == 0)
                break;
            atomic_fetch_add(&s->stale_retries, 1);
        }
        if (rc != 0) {
            CHECK_REPORT_("thread %d op %ld: vf_engine_push returned %s (%s)",
                          p->t, idx, vf_error_name(rc), vf_error_detail());
            free(o);
            atomic_store(&p->rec[idx], FIRED | 0x3fffffff);
        }
        /* (o may be freed by now: its `done` may have run) */
        if (g.async && (g.what == G_MIXED || g.what == G_PURE))
            p->pushed_async++;
    }
    /* Everything of this thread is done once these return. */
    wait_pure(p, "end");
    for (int i = 0; i < NP; i++) {
        int rc = vf_var_wait(s->e, p->P[i], NULL);
        CHECK(rc == 0 || rc == VF_EOPFAILED);
    }
    return NULL;
}

/* ------------------------------------------------------------ replay */

/* Replay thread p's program serially, applying the ops whose status was 0,
 * and compare every private cell's final value and every status. Returns
 * the ops of each fate. */
static void replay(pusher *p, long *ran, long *failed, long *skipped,
                   long *shared_writes, long *async_ran)
{
    tu_rng rng = {p->seed};
    uint64_t *val = calloc((size_t)p->log_cap, sizeof *val);
    REQUIRE(val != NULL);
    int cell[NP];
    int ncells = 0;
    for (int i = 0; i < NP; i++)
        cell[i] = ncells++;
    ncells++; /* the pure var's cell */
    long idx = 0;
    long errors = 0;
    while (idx < p->nops) {
        gen g;
        generate(&rng, p->t, &g);
        if (g.what == G_WAIT_PURE || g.what == G_WAIT_OTHER ||
            g.what == G_REPL_SHARED)
            continue;
        if (g.what == G_DEL_PRIV) {
            cell[g.slot] = ncells++;
            continue;
        }
        long i = idx++;
        int rec = atomic_load(&p->rec[i]);
        if (!(rec & FIRED)) {
            CHECK_REPORT_("thread %d op %ld: done never fired", p->t, i);
            errors++;
            continue;
        }
        int st = rec & 0x3fffffff;
        if (st & 0x20000000)
            st |= (int)0xc0000000; /* sign-extend the negative codes */
        int code = sop_code(p, i);
        if (g.what == G_NESTED)
            (void)tu_below(&rng, NP);
        bool may_fail = g.fail && (g.what == G_MIXED || g.what == G_PURE);
        bool may_skip = !(g.no_skip && g.what != G_NESTED);
        if (!((st == 0) || (st == VF_ESKIPPED && may_skip) ||
              (st == code && may_fail))) {
            if (errors++ < 10)
                CHECK_REPORT_("thread %d op %ld (kind %d%s%s): status %d", p->t,
                              i, g.what, may_fail ? ", fails" : "",
                              may_skip ? "" : ", no-skip", st);
        }
        if (p->expect[i] != NOT_EXPECTED && st != p->expect[i] && errors++ < 10)
            CHECK_REPORT_("thread %d pure op %ld: status %d, model %d", p->t, i,
                          st, p->expect[i]);
        *ran += st == 0;
        *failed += st != 0 && st != VF_ESKIPPED;
        *skipped += st == VF_ESKIPPED;
        *async_ran += g.async && (g.what == G_MIXED || g.what == G_PURE) &&
                      st != VF_ESKIPPED;
        if (g.what == G_MIXED && st == 0) {
            uint64_t sum = 0;
            for (int r = 0; r < g.nr; r++)
                sum += val[cell[g.r[r]]];
            for (int w = 0; w < g.nw; w++)
                val[cell[g.w[w]]] = step(val[cell[g.w[w]]], g.k, sum);
            *shared_writes += g.nsw;
        }
    }
    /* The pusher tests its deadline before every step, so it may stop
     * after steps that push no op: replay the var replacements among them
     * (a replaced private var's cell keeps its last value). */
    while (ncells < p->ncells) {
        gen g;
        generate(&rng, p->t, &g);
        if (g.what == G_DEL_PRIV)
            cell[g.slot] = ncells++;
        else if (g.what != G_WAIT_PURE && g.what != G_WAIT_OTHER &&
                 g.what != G_REPL_SHARED)
            break; /* an op: the pusher did not get this far */
    }
    for (int c = 0; c < ncells; c++) {
        if (c == NP)
            continue; /* the pure var: checked by wait_pure */
        if (!p->logged[c]) {
            CHECK_REPORT_("thread %d: cell %d was never freed", p->t, c);
            continue;
        }
        if (p->log[c] != val[c] && errors++ < 10)
            CHECK_REPORT_("thread %d: private cell %d = %llu, serial replay "
                          "%llu",
                          p->t, c, (unsigned long long)p->log[c],
                          (unsigned long long)val[c]);
    }
    REQUIRE(ncells == p->ncells);
    free(val);
}

/* ------------------------------------------------------------ rounds */

typedef struct kindcfg {
    const char *name;
    vf_config cfg;
} kindcfg;

static const kindcfg kinds[] = {
    {"pooled/2", {.type = VF_ENGINE_POOLED, .cpu_workers = 2}},
    {"perdevice/2",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 2,
      .cpu_priority_workers = 1}},
    {"naive", {.type = VF_ENGINE_NAIVE}},
    {"pooled/1 max_inflight=256",
     {.type = VF_ENGINE_POOLED, .cpu_workers = 1, .max_inflight = 256}},
    {"perdevice/1",
     {.type = VF_ENGINE_PERDEVICE,
      .cpu_workers = 1,
      .cpu_priority_workers = 1}},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

typedef struct totals {
    long ops, ran, failed, skipped, async, stale, nested, waits, pure_waits,
        pure_wait_fail, rounds;
} totals;

static void round_run(int round, double secs, long cap, totals *tot)
{
    const kindcfg *k = &kinds[round % NKINDS];
    check_context_ = k->name;
    static soak s_;
    soak *s = &s_;
    memset(s, 0, sizeof *s);
    REQUIRE(vf_engine_create(&s->e, &k->cfg) == 0);
    s->prio_prop = k->cfg.type == VF_ENGINE_PERDEVICE ? VF_PROP_CPU_PRIORITIZED
                                                      : VF_PROP_NORMAL;
    pthread_mutex_init(&s->smu, NULL);
    for (int i = 0; i < NS; i++) {
        s->S[i].h = new_var(s->e);
        s->S[i].cell = calloc(1, sizeof(scell));
        REQUIRE(s->S[i].cell != NULL);
        s->S[i].cell->s = s;
    }
    pthread_mutex_init(&s->comp.mu, NULL);
    pthread_cond_init(&s->comp.cv, NULL);
    for (int i = 0; i < NCOMP; i++)
        s->comp.th[i] = tu_thread_start(comp_main, &s->comp);
    s->cap = cap;
    s->deadline = tu_now() + secs;

    static pusher ps[NT];
    pthread_t th[NT];
    for (int t = 0; t < NT; t++) {
        pusher *p = &ps[t];
        memset(p, 0, sizeof *p);
        p->s = s;
        p->t = t;
        p->seed = check_seed() * 0x9e3779b97f4a7c15ULL + (uint64_t)round * 131 +
                  (uint64_t)t;
        p->log_cap = (int)(cap / 100 + 64);
        p->log = calloc((size_t)p->log_cap, sizeof *p->log);
        p->logged = calloc((size_t)p->log_cap, 1);
        p->rec = calloc((size_t)cap, sizeof *p->rec);
        p->expect = calloc((size_t)cap, sizeof *p->expect);
        REQUIRE(p->log && p->logged && p->rec && p->expect);
        th[t] = tu_thread_start(pusher_main, p);
    }
    for (int t = 0; t < NT; t++)
        tu_thread_join(th[t]);
    int rc = vf_engine_wait_all(s->e, NULL);
    CHECK(rc == 0 || rc == VF_EOPFAILED);
    vf_stats st;
    CHECK_OK(vf_engine_stats(s->e, &st));
    CHECK_EQ(st.pending, 0);
    /* Destroy, then free what is still alive (logging the cells). */
    CHECK_OK(vf_engine_destroy(s->e));
    pthread_mutex_lock(&s->comp.mu);
    s->comp.stop = true;
    pthread_cond_broadcast(&s->comp.cv);
    pthread_mutex_unlock(&s->comp.mu);
    for (int i = 0; i < NCOMP; i++)
        tu_thread_join(s->comp.th[i]);
    for (int i = 0; i < NS; i++)
        free_scell(s->S[i].cell);

    long ran = 0, failed = 0, skipped = 0, shared_writes = 0, nops = 0;
    long async = 0, async_ran = 0;
    for (int t = 0; t < NT; t++) {
        pusher *p = &ps[t];
        for (int i = 0; i < NP; i++)
            free_pcell(p->Pc[i]);
        free(p->Xc);
        replay(p, &ran, &failed, &skipped, &shared_writes, &async_ran);
        nops += p->nops;
        async += p->pushed_async;
        tot->pure_waits += p->pure_waits;
        tot->pure_wait_fail += p->pure_wait_fail;
        free(p->log);
        free(p->logged);
        free((void *)p->rec);
        free(p->expect);
    }
    CHECK_EQ(st.completed, nops);
    CHECK_EQ(st.ran, ran);
    CHECK_EQ(st.failed, failed);
    CHECK_EQ(st.skipped, skipped);
    CHECK_EQ(atomic_load(&s->shared_counted), shared_writes);
    CHECK_EQ(atomic_load(&s->overlaps), 0);
    CHECK_EQ(atomic_load(&s->nested_errors), 0);
    CHECK_EQ(atomic_load(&s->double_done), 0);
    CHECK_EQ(atomic_load(&s->bad_status), 0);
    CHECK_EQ(atomic_load(&s->comp.completed), async_ran);
    free(s->comp.q);
    pthread_mutex_destroy(&s->comp.mu);
    pthread_cond_destroy(&s->comp.cv);
    pthread_mutex_destroy(&s->smu);

    tot->rounds++;
    tot->ops += nops;
    tot->ran += ran;
    tot->failed += failed;
    tot->skipped += skipped;
    tot->async += async;
    tot->stale += atomic_load(&s->stale_retries);
    tot->nested += atomic_load(&s->nested_waits);
    tot->waits += atomic_load(&s->other_waits);
    check_context_ = NULL;
}

/* The whole soak: its rounds, and their totals. */
TEST_CASE(soak)
{
    const char *env = getenv("VF_SOAK_SECONDS");
    double total = env && *env ? atof(env) : 3.0;
    if (total <= 0)
        total = 3.0;
    bool long_run = total > 30;
    /* Short: 5 rounds (one per engine kind); long: rounds of ~5 s. */
    int rounds = long_run ? (int)(total / 5.0) : NKINDS;
    double secs = total / rounds;
    long cap = long_run ? 4000000 : tu_scaled(400000, 20000);

    /* tu_init's watchdog stops at 280 s; the soak sets its own (main
     * starts none). */
    double *wd = malloc(sizeof *wd);
    REQUIRE(wd != NULL);
    *wd = total * 2 + 120;
    pthread_t wdt = tu_thread_start(tu_watchdog_, wd);
    pthread_detach(wdt);
    printf("test_soak: seed %llu, %.0f s, %d rounds\n",
           (unsigned long long)check_seed(), total, rounds);

    totals tot;
    memset(&tot, 0, sizeof tot);
    double t0 = tu_now();
    for (int r = 0; r < rounds; r++) {
        char phase[64];
        snprintf(phase, sizeof phase, "round %d (%s)", r,
                 kinds[r % NKINDS].name);
        tu_phase_limit(phase, secs + 90);
        long before = tot.ops;
        round_run(r, secs, cap, &tot);
        if (long_run || getenv("VF_SOAK_VERBOSE"))
            printf("round %d %-26s %9ld ops (%ld in all, %.0f s)\n", r,
                   kinds[r % NKINDS].name, tot.ops - before, tot.ops,
                   tu_now() - t0);
    }
    tu_phase("end");
    printf("soak: %ld ops soaked in %d rounds, %.1f s: %ld ran, %ld failed, "
           "%ld skipped; %ld async, %ld nested waits, %ld other waits, %ld "
           "waits on pure vars (%ld reported a failure), %ld pushes retried "
           "after a shared var was replaced\n",
           tot.ops, (int)tot.rounds, tu_now() - t0, tot.ran, tot.failed,
           tot.skipped, tot.async, tot.nested, tot.waits, tot.pure_waits,
           tot.pure_wait_fail, tot.stale);
}

TEST_MAIN("test_soak", 0)
