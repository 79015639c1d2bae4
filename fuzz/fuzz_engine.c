/*
 * fuzz_engine.c: a libFuzzer harness for varflow (issue 4, point 5).
 *
 * Each input is decoded into a program, run on a real engine while a
 * serial oracle computes what the program must give, and every difference
 * aborts (libFuzzer then keeps the input as a crash).
 *
 * Input format (every byte string is a valid program; decoding stops at the
 * end of the input or after MAXOPS instructions):
 *   byte 0     engine: kind = b % 3 (naive, pooled, per-device),
 *              workers = 1 + (b / 3) % 2, the main thread's bulk size
 *              (rule 13) = {0, 4, 64}[(b / 6) % 3]
 *   byte 1     main vars: 1 + b % MAXV
 *   then instructions, opcode = b % 8:
 *     0,1,2 push:    flags, counts (reads = c & 3, writes = (c >> 2) & 3),
 *                    then one byte per read and per write (slot = b % nvars;
 *                    repeats and a var both read and written allowed).
 *                    flags: 1 async, 2 and 4 both set: fails, 8 no-skip,
 *                    16 CPU-prioritized, priority = (flags >> 5) - 3.
 *     3 nested push: as push, then one byte: 1 + b % 3 children, which the
 *                    op pushes from inside when it runs (and succeeds); each
 *                    writes a var of the parent's own with a value handed
 *                    down from what the parent read; child i fails if bit
 *                    2+i is set.
 *     4 wait:        slot byte: waits until every pushed op is done, then
 *                    vf_wait_var on the slot and vf_var_version.
 *     5 wait_all.
 *     6 delete:      slot byte: vf_var_delete (the free callback logs the
 *                    var's final value) and a new var takes the slot.
 *     7 stale:       a push with a handle deleted earlier: VF_ESTALE (before
 *                    any delete: a handle of another engine, VF_EXDEV), and
 *                    its `done` never fires.
 *
 * The oracle runs the program serially: each op hashes the values of its
 * read list and, unless it fails, steps every var it writes with that hash;
 * rule 9 decides which ops are skipped and which failure each wait reports.
 * Checked: every op's `done` fires exactly once with the oracle's status
 * (0, its own code, VF_ESKIPPED), children only when their parent ran, and
 * no op body runs when the op is skipped; values equal the oracle's at
 * every wait and at the end (deleted vars: the value their free callback
 * saw, and it runs exactly once, after every op on the var: an op touching
 * the var's data afterwards is caught); wait_var returns the oracle's
 * failure (code, op name, message) or 0, and the version counts the writes
 * that ran; wait_all returns a failure not yet reported when there is one
 * (any: which is "first" is a race between independent ops), else 0;
 * vf_engine_stats adds up; stale and foreign handles are refused; destroy
 * succeeds.
 *
 * What the oracle does not decide, the harness keeps deterministic:
 * - a wait claims a failure, which changes which later ops are skipped; so
 *   before each wait the harness lets every pushed op call `done` (a
 *   quiescent point), and every claim falls between the same ops as in the
 *   serial program;
 * - an op that would inherit two different failures (the engine takes the
 *   first by var address, which the header leaves open) is made no-skip;
 * - children only touch their parent's own var, so their order against the
 *   main program's ops does not matter.
 * Nested waits (from inside ops) are not generated: the soak test has them.
 *
 * Build: `make fuzz` (clang -fsanitize=fuzzer,address,undefined). Compiled
 * with VF_FUZZ_NO_MAIN defined by tests/test_fuzz_replay.c, which replays
 * the checked-in corpus (fuzz/corpus) and random inputs as a regular test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <varflow.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXV 8
#define MAXOPS 160 /* instructions per program */
#define MAXKIDS 3
#define MAXFOPS (MAXOPS * (1 + MAXKIDS))
#define MAXCELLS (MAXV + 2 * MAXOPS)
#define MAXLIST 3

/* ------------------------------------------------------------ state */

/* The data behind one var (one per var ever created); ops touch it. */
typedef struct cell {
    uint64_t value;
    atomic_int freed; /* set by the free callback */
    atomic_int free_calls;
    uint64_t final; /* the value the free callback saw */
} cell;

/* The oracle's view of a var. */
typedef struct ocell {
    uint64_t value, version;
    int rec; /* failure record on it, or -1 */
    bool deleted;
    uint64_t final; /* value at deletion */
} ocell;

/* The oracle's failure records (one per failing op). */
typedef struct orec {
    int code;
    int op;
    bool claimed;
    int epoch;
} orec;

struct prog;

typedef struct fop {
    struct prog *P;
    int id;
    bool kid;
    /* the push */
    vf_var rl[MAXLIST], wl[MAXLIST];
    int nrl, nwl;
    bool async, no_skip, prio;
    int priority;
    /* what the body touches */
    int nr, nw;
    int rd[MAXLIST];     /* cells of the read list (repeats kept) */
    int wr[2 * MAXLIST]; /* distinct written cells */
    int fail;            /* 0, or the code it fails with */
    uint64_t k;
    /* nested pushes */
    int nkids;
    int kids[MAXKIDS];
    int kid_cell;
    vf_var kid_var;
    uint64_t h; /* a child: the hash handed down by its parent */
    char name[16];
    /* what happened */
    atomic_int done;
    atomic_int status;
    atomic_int ran_fn;
    /* what the oracle says */
    int want_done; /* 0 or 1 */
    int want_status;
} fop;

typedef struct prog {
    vf_engine *e;
    vf_engine *other; /* for foreign handles */
    vf_var foreign;
    int nvars;
    int slot_cell[MAXV];
    vf_var slot_var[MAXV];
    cell cells[MAXCELLS];
    ocell oc[MAXCELLS];
    int ncells;
    orec recs[MAXFOPS];
    int nrecs;
    int epoch;
    fop ops[MAXFOPS];
    int nops;
    vf_var dead[MAXOPS];
    int ndead;
    atomic_int outstanding; /* pushed ops whose done has not fired */
    long fired_total;
} prog;

/* Named in a failure report when set (the replay test sets the input). */
static const char *fuzz_context = "";

static void fail_at(const char *what, long a, long b)
{
    fprintf(stderr, "fuzz_engine: invariant broken: %s (%ld, %ld)%s%s\n", what,
            a, b, *fuzz_context ? " in " : "", fuzz_context);
    fflush(stderr);
    abort();
}

#define ENSURE(cond, what, a, b)                                               \
    do {                                                                       \
        if (!(cond))                                                           \
            fail_at(what, (long)(a), (long)(b));                               \
    } while (0)

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static uint64_t step(uint64_t v, uint64_t h, uint64_t k)
{
    return v * 6364136223846793005ULL + h + k;
}

/* ------------------------------------------------------------ engine side */

static void on_done(void *arg, int status)
{
    fop *o = arg;
    atomic_store(&o->status, status);
    int n = atomic_fetch_add(&o->done, 1);
    ENSURE(n == 0, "done fired twice for op", o->id, n + 1);
    atomic_fetch_sub(&o->P->outstanding, 1);
}

static void free_cell(void *arg)
{
    cell *c = arg;
    c->final = c->value;
    atomic_store(&c->freed, 1);
    atomic_fetch_add(&c->free_calls, 1);
}

static int push_fop(vf_engine *e, fop *o);

/* The body of sync and async ops: 0, or the op's failure code. */
static int body(vf_run *run, fop *o)
{
    prog *P = o->P;
    atomic_fetch_add(&o->ran_fn, 1);
    uint64_t h = o->h;
    if (!o->kid) {
        h = (uint64_t)o->id;
        for (int i = 0; i < o->nr; i++) {
            cell *c = &P->cells[o->rd[i]];
            ENSURE(!atomic_load(&c->freed), "op read a deleted var's data",
                   o->id, o->rd[i]);
            h = mix(h, c->value);
        }
    }
    if (o->fail) {
        vf_run_set_error(run, "op %d failed", o->id);
        return o->fail;
    }
    for (int i = 0; i < o->nw; i++) {
        cell *c = &P->cells[o->wr[i]];
        ENSURE(!atomic_load(&c->freed), "op wrote a deleted var's data", o->id,
               o->wr[i]);
        c->value = step(c->value, h, o->k);
    }
    for (int i = 0; i < o->nkids; i++) {
        fop *kid = &P->ops[o->kids[i]];
        kid->h = mix(h, (uint64_t)i + 1);
        int rc = push_fop(vf_run_engine(run), kid);
        ENSURE(rc == 0, "nested push failed", o->id, rc);
    }
    return 0;
}

static int sync_fn(vf_run *run, void *arg)
{
    return body(run, arg);
}

static void async_fn(vf_run *run, void *arg, vf_completion done)
{
    int rc = body(run, arg);
    int r2 = vf_complete(done, rc, NULL);
    ENSURE(r2 == 0, "vf_complete failed", ((fop *)arg)->id, r2);
}

static int push_fop(vf_engine *e, fop *o)
{
    atomic_fetch_add(&o->P->outstanding, 1);
    vf_op op = {.arg = o,
                .done = on_done,
                .reads = {o->nrl ? o->rl : NULL, o->nrl},
                .writes = {o->nwl ? o->wl : NULL, o->nwl},
                .priority = o->priority,
                .no_skip = o->no_skip,
                .property = o->prio ? VF_PROP_CPU_PRIORITIZED : VF_PROP_NORMAL,
                .name = o->name};
    if (o->async)
        op.async_fn = async_fn;
    else
        op.fn = sync_fn;
    int rc = vf_push(e, &op);
    if (rc != 0)
        atomic_fetch_sub(&o->P->outstanding, 1);
    return rc;
}

/* Wait until every pushed op has called `done`. */
static void quiesce(prog *P)
{
    /* Ops in the main thread's open batch run once it is pushed. */
    int rc = vf_bulk_flush(P->e);
    ENSURE(rc == 0, "vf_bulk_flush failed", rc, 0);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&P->outstanding) != 0) {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
        ENSURE(t.tv_sec - t0.tv_sec < 60, "ops never finished (hang)",
               atomic_load(&P->outstanding), 0);
    }
}

/* ------------------------------------------------------------ oracle */

static bool active(const prog *P, int rec)
{
    return rec >= 0 && !P->recs[rec].claimed && P->recs[rec].epoch == P->epoch;
}

static int new_rec(prog *P, int code, int op)
{
    int r = P->nrecs++;
    P->recs[r] = (orec){code, op, false, P->epoch};
    return r;
}

/* Run op `o` (whose cells are set) in the oracle. */
static void oracle_op(prog *P, fop *o)
{
    /* The op's var set: read cells and written cells. */
    int inherited = -1;
    bool ambiguous = false;
    if (!o->no_skip) {
        int cand[2 * MAXLIST + MAXLIST];
        int n = 0;
        for (int i = 0; i < o->nr; i++)
            cand[n++] = o->rd[i];
        for (int i = 0; i < o->nw; i++)
            cand[n++] = o->wr[i];
        for (int i = 0; i < n; i++) {
            int r = P->oc[cand[i]].rec;
            if (!active(P, r))
                continue;
            if (inherited < 0)
                inherited = r;
            else if (inherited != r)
                ambiguous = true;
        }
        if (ambiguous) {
            /* Which one the engine passes on is not specified. */
            o->no_skip = true;
            inherited = -1;
        }
    }
    o->want_done = 1;
    if (inherited >= 0) {
        o->want_status = VF_ESKIPPED;
        for (int i = 0; i < o->nw; i++)
            P->oc[o->wr[i]].rec = inherited;
        return;
    }
    uint64_t h = o->h;
    if (!o->kid) {
        h = (uint64_t)o->id;
        for (int i = 0; i < o->nr; i++)
            h = mix(h, P->oc[o->rd[i]].value);
    }
    for (int i = 0; i < o->nw; i++)
        P->oc[o->wr[i]].version++;
    if (o->fail) {
        o->want_status = o->fail;
        int r = new_rec(P, o->fail, o->id);
        for (int i = 0; i < o->nw; i++)
            P->oc[o->wr[i]].rec = r;
        return;
    }
    o->want_status = 0;
    for (int i = 0; i < o->nw; i++)
        P->oc[o->wr[i]].value = step(P->oc[o->wr[i]].value, h, o->k);
    for (int i = 0; i < o->nkids; i++) {
        fop *kid = &P->ops[o->kids[i]];
        kid->h = mix(h, (uint64_t)i + 1);
        oracle_op(P, kid);
    }
}

/* ------------------------------------------------------------ decoding */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static bool next(reader *r, uint8_t *out)
{
    if (r->n == 0)
        return false;
    *out = *r->p++;
    r->n--;
    return true;
}

static int new_cell(prog *P, vf_var *handle)
{
    ENSURE(P->ncells < MAXCELLS, "too many cells", P->ncells, MAXCELLS);
    int c = P->ncells++;
    memset(&P->cells[c], 0, sizeof P->cells[c]);
    P->oc[c] = (ocell){0, 0, -1, false, 0};
    int rc = vf_var_new(P->e, handle);
    ENSURE(rc == 0, "vf_var_new failed", rc, 0);
    return c;
}

static fop *new_fop(prog *P, bool kid)
{
    fop *o = &P->ops[P->nops];
    memset(o, 0, sizeof *o);
    o->P = P;
    o->id = P->nops++;
    o->kid = kid;
    o->k = mix(0x5eed, (uint64_t)o->id);
    snprintf(o->name, sizeof o->name, "%s%d", kid ? "kid" : "op", o->id);
    return o;
}

/* Decode a push (and its children); false at the end of the input. */
static bool decode_push(prog *P, reader *r, bool nested)
{
    uint8_t flags, counts;
    if (!next(r, &flags) || !next(r, &counts))
        return false;
    fop *o = new_fop(P, false);
    o->async = flags & 1;
    o->fail = (flags & 6) == 6 ? 1000 + o->id : 0;
    o->no_skip = flags & 8;
    o->prio = flags & 16;
    o->priority = (flags >> 5) - 3;
    int nr = counts & 3, nw = (counts >> 2) & 3;
    for (int i = 0; i < nr + nw; i++) {
        uint8_t b;
        if (!next(r, &b))
            b = (uint8_t)i;
        int slot = b % P->nvars, c = P->slot_cell[slot];
        if (i < nr) {
            o->rl[o->nrl++] = P->slot_var[slot];
            o->rd[o->nr++] = c;
        } else {
            o->wl[o->nwl++] = P->slot_var[slot];
            bool seen = false;
            for (int j = 0; j < o->nw; j++)
                seen |= o->wr[j] == c;
            if (!seen)
                o->wr[o->nw++] = c;
        }
    }
    /* A var both read and written counts as a write (rule 5): that only
     * matters to the engine's ordering; the body reads it first. */
    if (nested) {
        uint8_t b = 0;
        (void)next(r, &b);
        o->nkids = 1 + b % MAXKIDS;
        o->kid_cell = new_cell(P, &o->kid_var);
        for (int i = 0; i < o->nkids; i++) {
            fop *kid = new_fop(P, true);
            kid->wl[kid->nwl++] = o->kid_var;
            kid->wr[kid->nw++] = o->kid_cell;
            kid->fail = (b >> (2 + i)) & 1 ? 2000 + kid->id : 0;
            kid->async = (b >> 6) & 1;
            o->kids[i] = kid->id;
        }
    }
    oracle_op(P, o);
    int rc = push_fop(P->e, o);
    ENSURE(rc == 0, "vf_push failed", o->id, rc);
    return true;
}

/* ------------------------------------------------------------ checks */

static void check_values(prog *P)
{
    for (int c = 0; c < P->ncells; c++) {
        if (P->oc[c].deleted)
            continue;
        ENSURE(P->cells[c].value == P->oc[c].value,
               "value differs from the serial program (cell)", c, 0);
    }
}

static void check_ops(prog *P)
{
    for (int i = 0; i < P->nops; i++) {
        fop *o = &P->ops[i];
        int done = atomic_load(&o->done);
        ENSURE(done == o->want_done, "done fired (times, expected) for an op",
               done, o->want_done);
        if (done)
            ENSURE(atomic_load(&o->status) == o->want_status,
                   "done status differs from the oracle's (got, want)",
                   atomic_load(&o->status), o->want_status);
        int ran = atomic_load(&o->ran_fn);
        ENSURE(ran == (o->want_done && o->want_status != VF_ESKIPPED),
               "body ran (times) for an op skipped or never pushed", ran,
               o->id);
    }
}

static void do_wait(prog *P, int slot)
{
    quiesce(P);
    int c = P->slot_cell[slot];
    vf_error err;
    int rc = vf_wait_var(P->e, P->slot_var[slot], &err);
    int rec = P->oc[c].rec;
    if (active(P, rec)) {
        ENSURE(rc == VF_EOPFAILED, "wait_var: expected VF_EOPFAILED, got", rc,
               P->recs[rec].code);
        ENSURE(err.code == P->recs[rec].code, "wait_var: failure code",
               err.code, P->recs[rec].code);
        char name[16], msg[32];
        snprintf(name, sizeof name, "op%d", P->recs[rec].op);
        if (P->ops[P->recs[rec].op].kid)
            snprintf(name, sizeof name, "kid%d", P->recs[rec].op);
        snprintf(msg, sizeof msg, "op %d failed", P->recs[rec].op);
        ENSURE(strcmp(err.op_name, name) == 0, "wait_var: op name", 0,
               P->recs[rec].op);
        ENSURE(strcmp(err.message, msg) == 0, "wait_var: message", 0,
               P->recs[rec].op);
        P->recs[rec].claimed = true;
    } else {
        ENSURE(rc == 0, "wait_var: expected 0, got", rc, 0);
    }
    uint64_t ver = 0;
    rc = vf_var_version(P->e, P->slot_var[slot], &ver);
    ENSURE(rc == 0, "vf_var_version failed", rc, 0);
    ENSURE(ver == P->oc[c].version, "version (got, want)", (long)ver,
           (long)P->oc[c].version);
    check_values(P);
    check_ops(P);
}

static void do_wait_all(prog *P)
{
    vf_error err;
    int rc = vf_wait_all(P->e, &err);
    bool any = false, match = false;
    for (int i = 0; i < P->nrecs; i++) {
        if (!active(P, i))
            continue;
        any = true;
        if (rc == VF_EOPFAILED && err.code == P->recs[i].code)
            match = true;
    }
    if (any) {
        ENSURE(rc == VF_EOPFAILED, "wait_all: expected VF_EOPFAILED, got", rc,
               0);
        ENSURE(match, "wait_all reported a failure nobody had left", err.code,
               0);
    } else {
        ENSURE(rc == 0, "wait_all: expected 0, got", rc, 0);
    }
    P->epoch++;
    check_values(P);
    check_ops(P);
}

static void do_delete(prog *P, int slot)
{
    int c = P->slot_cell[slot];
    int rc = vf_var_delete(P->e, P->slot_var[slot], free_cell, &P->cells[c]);
    ENSURE(rc == 0, "vf_var_delete failed", rc, 0);
    P->oc[c].deleted = true;
    P->oc[c].final = P->oc[c].value;
    if (P->ndead < MAXOPS)
        P->dead[P->ndead++] = P->slot_var[slot];
    P->slot_cell[slot] = new_cell(P, &P->slot_var[slot]);
}

static int nop_fn(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    fail_at("a refused push ran", 0, 0);
    return 0;
}

static void nop_done(void *arg, int status)
{
    (void)arg;
    fail_at("a refused push called done", status, 0);
}

static void do_stale(prog *P, uint8_t b)
{
    vf_var v = P->ndead ? P->dead[b % P->ndead] : P->foreign;
    int want = P->ndead ? VF_ESTALE : VF_EXDEV;
    vf_var ok = P->slot_var[b % P->nvars];
    int rc = vf_push(P->e, &(vf_op){.fn = nop_fn,
                                    .done = nop_done,
                                    .reads = {&ok, 1},
                                    .writes = {&v, 1}});
    ENSURE(rc == want, "push with a bad handle (got, want)", rc, want);
    ENSURE(vf_last_error_detail()[0] != 0, "no detail for a refused push", rc,
           0);
}

/* ------------------------------------------------------------ program */

static prog *the_prog(void)
{
    static prog *P;
    if (P == NULL) {
        P = calloc(1, sizeof *P);
        ENSURE(P != NULL, "out of memory", 0, 0);
    }
    return P;
}

static void run_program(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    uint8_t kind_b = 0, nv_b = 0;
    (void)next(&r, &kind_b);
    (void)next(&r, &nv_b);
    prog *P = the_prog();
    memset(P, 0, sizeof *P);
    int workers = 1 + (kind_b / 3) % 2;
    vf_config cfg = {.cpu_workers = workers, .cpu_priority_workers = 1};
    cfg.type = kind_b % 3 == 0   ? VF_ENGINE_NAIVE
               : kind_b % 3 == 1 ? VF_ENGINE_POOLED
                                 : VF_ENGINE_PERDEVICE;
    int rc = vf_engine_create(&P->e, &cfg);
    ENSURE(rc == 0, "vf_engine_create failed", rc, 0);
    static const int bulk_sizes[3] = {0, 4, 64};
    rc = vf_set_bulk_size(P->e, bulk_sizes[(kind_b / 6) % 3]);
    ENSURE(rc == 0, "vf_set_bulk_size failed", rc, 0);
    rc = vf_engine_create(&P->other, &(vf_config){.type = VF_ENGINE_NAIVE});
    ENSURE(rc == 0, "vf_engine_create failed", rc, 0);
    rc = vf_var_new(P->other, &P->foreign);
    ENSURE(rc == 0, "vf_var_new failed", rc, 0);
    P->nvars = 1 + nv_b % MAXV;
    for (int i = 0; i < P->nvars; i++)
        P->slot_cell[i] = new_cell(P, &P->slot_var[i]);

    for (int n = 0; n < MAXOPS; n++) {
        uint8_t op, b = 0;
        if (!next(&r, &op))
            break;
        switch (op % 8) {
        case 0:
        case 1:
        case 2:
        case 3:
            if (!decode_push(P, &r, op % 8 == 3))
                n = MAXOPS;
            break;
        case 4:
            (void)next(&r, &b);
            do_wait(P, b % P->nvars);
            break;
        case 5:
            do_wait_all(P);
            break;
        case 6:
            (void)next(&r, &b);
            do_delete(P, b % P->nvars);
            break;
        default:
            (void)next(&r, &b);
            do_stale(P, b);
            break;
        }
    }

    /* The end: everything ran as the oracle says, counts add up. */
    do_wait_all(P);
    quiesce(P);
    vf_stats st;
    rc = vf_engine_stats(P->e, &st);
    ENSURE(rc == 0, "vf_engine_stats failed", rc, 0);
    uint64_t ran = 0, failed = 0, skipped = 0;
    for (int i = 0; i < P->nops; i++) {
        fop *o = &P->ops[i];
        if (!o->want_done)
            continue;
        ran += o->want_status == 0;
        skipped += o->want_status == VF_ESKIPPED;
        failed += o->want_status != 0 && o->want_status != VF_ESKIPPED;
    }
    ENSURE(st.ran == ran, "stats.ran (got, want)", (long)st.ran, (long)ran);
    ENSURE(st.failed == failed, "stats.failed", (long)st.failed, (long)failed);
    ENSURE(st.skipped == skipped, "stats.skipped", (long)st.skipped,
           (long)skipped);
    ENSURE(st.completed == ran + failed + skipped, "stats.completed",
           (long)st.completed, (long)(ran + failed + skipped));
    ENSURE(st.pending == 0, "stats.pending", (long)st.pending, 0);
    rc = vf_engine_destroy(P->e);
    ENSURE(rc == 0, "vf_engine_destroy failed", rc, 0);
    rc = vf_engine_destroy(P->other);
    ENSURE(rc == 0, "vf_engine_destroy failed", rc, 0);
    /* Deleted vars: the free callback ran once, after every op on them. */
    for (int c = 0; c < P->ncells; c++) {
        if (!P->oc[c].deleted)
            continue;
        ENSURE(atomic_load(&P->cells[c].free_calls) == 1,
               "free callback calls (deleted cell)", c,
               atomic_load(&P->cells[c].free_calls));
        ENSURE(P->cells[c].final == P->oc[c].final,
               "a deleted var's final value differs (cell)", c, 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_program(data, size);
    return 0;
}

#ifndef VF_FUZZ_NO_MAIN
#ifndef VF_FUZZ_LIBFUZZER
/* Without libFuzzer (gcc, or clang without -fsanitize=fuzzer): run the
 * files named on the command line. */
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            perror(argv[i]);
            return 1;
        }
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    return 0;
}
#endif
#endif
