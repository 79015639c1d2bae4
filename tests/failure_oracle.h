/*
 * failure_oracle.h: programs with failures, and what the serial program
 * gives for them (issue 17). Shared by tests/test_failure_diff.c and
 * fuzz/fuzz_engine.c (through tests/failure_run.h, which runs a program on
 * a real engine); nothing here calls varflow (varflow.h gives the codes).
 *
 * A program is a list of steps: pushes of ops, var deletes, wait_var,
 * wait_all, pushes with a bad handle, and FORK/JOIN around a segment where
 * a second thread pushes the steps marked thread 1 while the main thread
 * pushes the others, over disjoint vars. An op may push child ops over
 * scratch vars of its own and then wait on them from inside (nested
 * waits). Every var holds a uint64; an op hashes its id and the values of
 * the vars it reads and writes (in list order) and writes hash + k to the
 * k-th var of its write list (repeats: the last one wins); a failing op
 * writes ~hash + k instead, unless its failure comes from the device's
 * work or from vf_completion_fail (then it writes nothing); a skipped op
 * writes nothing.
 *
 * The oracle is the failure semantics of issue 17, run in push order:
 * - each var holds err(v): a failure record or none; a record (one chain)
 *   is {code, op name, message, key}, key = place in push order (a child's
 *   comes right after its parent's: the serial program runs children
 *   inside their parent); a record reported by a wait is inert everywhere;
 * - an op whose reads or writes hold unreported records is skipped (unless
 *   no_skip) and passes on the one with the smallest key to its writes;
 *   otherwise it runs: a failure (code != 0) makes a new record on its
 *   writes; a success leaves err() of its writes as it was (sticky);
 *   vf_completion_fail makes a new record and counts as skipped; writes
 *   of ops that ran (failed or not) bump versions;
 * - wait_var(v) reports err(v) if unreported; wait_all reports the
 *   unreported record with the smallest key, then marks every one
 *   reported; an unnamed op is reported as "op #N", N its place in push
 *   order (ops that run a function, 1-based; a var delete, which never
 *   fails, takes no number).
 * Stats count ran, failed (an op returning VF_ESKIPPED included) and
 * skipped (vf_completion_fail included) user ops.
 *
 * The chaos moves (issue 27; tests/test_chaos.c, fuzz/fuzz_engine.c):
 * - several pushing threads in handshake order (nthreads > 1): step s is
 *   made by thread steps[s].thread once step s - 1 has returned, so the
 *   engine sees the steps in program order, whichever thread makes them,
 *   and the oracle is the same serial program (FORK/JOIN not used then);
 * - children may have children (any depth; a parent's subtree touches only
 *   scratch vars of its own, so its effect has one serial order);
 * - address vars: var v with addr[v] = k + 1 is vf_var_of of address k (the
 *   address of its data cell); an FO_ADDR step looks it up (the first
 *   lookup makes it; later ones must return the same handle); after its
 *   delete, the next incarnation is a new var that shares the old one's
 *   data cell (same[v] = cell + 1: fo_cell) and starts at version 0 with
 *   no failure, as the header promises;
 * - FO_STOP / FO_START (vf_engine_stop / start, by thread 0): steps between
 *   them are held and run at the start, as if pushed then (no top-level
 *   waits between them: they would return VF_ESTOPPED).
 * None of them changes the semantics above; only fo_cell is new to it.
 */
#ifndef VF_TEST_FAILURE_ORACLE_H
#define VF_TEST_FAILURE_ORACLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <varflow.h>

#define FO_MAXR 6    /* read list entries of an op */
#define FO_MAXW 4    /* write list entries */
#define FO_MAXKIDS 3 /* children of a parent */
#define FO_MAXSCR 2  /* scratch vars of a parent */
#define FO_MAXVARS 256
#define FO_MAXTHREADS 4 /* handshake pushers */
#define FO_MAXADDRS 8   /* addresses of address vars */
#define FO_MAXOPS 2048
#define FO_MAXSTEPS 768
#define FO_MAXWAITS 1024
#define FO_NESTED_CODE 4242 /* a parent whose nested wait reported fails so */

typedef enum fo_how {
    FO_SYNC,         /* fn returns the code */
    FO_ASYNC_INLINE, /* async_fn completes before it returns */
    FO_ASYNC_THREAD, /* another thread completes it later */
    FO_DEVICE        /* work on an emulated device's stream fails or not */
} fo_how;

typedef enum fo_kind {
    FO_PUSH,     /* arg: op */
    FO_DELETE,   /* arg: var; never named again */
    FO_WAIT_VAR, /* arg: var; wait: its entry */
    FO_WAIT_ALL, /* wait: its entry */
    FO_FORK,     /* steps marked thread 1 up to the JOIN: a second thread */
    FO_JOIN,
    FO_STALE, /* arg: a deleted var (-1: another engine's); refused */
    FO_ADDR,  /* arg: an address var: vf_var_of (the chaos moves) */
    FO_STOP,  /* vf_engine_stop (thread 0) */
    FO_START  /* vf_engine_start (thread 0) */
} fo_kind;

typedef struct fo_op {
    int nr, nw;
    int r[FO_MAXR], w[FO_MAXW]; /* vars, in list order, repeats kept */
    fo_how how;
    int device;   /* FO_DEVICE: emulated device id */
    int property; /* a vf_property */
    int priority;
    bool no_skip;
    bool cause;    /* ends with vf_completion_fail (cause code = code) */
    bool message;  /* its failure carries a message */
    int code;      /* 0, or the code it fails with */
    char name[24]; /* "" unnamed */
    int parent;    /* -1, or the op that pushes it */
    int nkids;     /* children: ops kid0 .. kid0 + nkids - 1 */
    int kid0;
    int nwait; /* nested waits after the children, in order */
    int wvar[FO_MAXSCR];
    int wait0; /* their entries: wait0 .. wait0 + nwait - 1 */
    /* A wait for its children (vf_run_wait_children) right after pushing
     * them, before the var waits: its entry is waits[kwait]. */
    bool kidwait;
    int kwait;
} fo_op;

typedef struct fo_step {
    int kind;   /* fo_kind */
    int thread; /* 0 main, 1 the second pusher; with nthreads > 1 the
                   handshake pusher that makes the step */
    int arg;
    int wait;
} fo_step;

typedef struct fo_prog {
    uint64_t seed; /* initial values */
    int nvars, nops, nsteps, nwaits;
    int nthreads;         /* > 1: handshake pushers (the chaos moves) */
    int same[FO_MAXVARS]; /* 0, or 1 + the var whose data cell v shares */
    int addr[FO_MAXVARS]; /* 0, or 1 + the address v is the var of */
    fo_op ops[FO_MAXOPS];
    fo_step steps[FO_MAXSTEPS];
} fo_prog;

/* What happened (expected or observed): the same shape both ways. */
typedef struct fo_xop {
    int done;   /* done calls: 1, or 0 for a child never pushed */
    int status; /* what done got */
    int body;   /* fn calls (a device op: its work's runs) */
} fo_xop;

typedef struct fo_xwait {
    int happened;
    int rc;
    vf_error err;            /* when rc is VF_EOPFAILED */
    uint64_t value, version; /* wait_var: the var after the wait */
} fo_xwait;

typedef struct fo_xvar {
    bool deleted;
    uint64_t value;   /* at the end, or what the delete's free saw */
    uint64_t version; /* at the end (not compared once deleted) */
} fo_xvar;

typedef struct fo_result {
    fo_xop ops[FO_MAXOPS];
    fo_xwait waits[FO_MAXWAITS];
    fo_xvar vars[FO_MAXVARS];
    uint64_t ran, failed, skipped;
    uint64_t choices; /* oracle only: skips that chose among records */
} fo_result;

/* ------------------------------------------------------------ kernels */

static inline uint64_t fo_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

/* The data cell var v names (its own, or the one an earlier incarnation
 * of its address had). */
static inline int fo_cell(const fo_prog *p, int v)
{
    return p->same[v] ? p->same[v] - 1 : v;
}

static inline uint64_t fo_init_value(const fo_prog *p, int v)
{
    return fo_mix(p->seed, (uint64_t)v + 1);
}

/* What op i computes; `down` is what its parent handed it (0 at top). */
static inline uint64_t fo_hash(const fo_prog *p, int i, const uint64_t *val,
                               uint64_t down)
{
    const fo_op *o = &p->ops[i];
    uint64_t h = fo_mix(down, (uint64_t)i + 1);
    for (int k = 0; k < o->nr; k++)
        h = fo_mix(h, val[fo_cell(p, o->r[k])]);
    for (int k = 0; k < o->nw; k++)
        h = fo_mix(h, val[fo_cell(p, o->w[k])]);
    return h;
}

/* What a parent hands its child j. */
static inline uint64_t fo_down(uint64_t h, int j)
{
    return fo_mix(h, 0x6b1d + (uint64_t)j);
}

/* Whether the op writes values when it ends with `code`. */
static inline bool fo_stores(const fo_op *o, int code)
{
    return code == 0 || (o->how != FO_DEVICE && !o->cause);
}

static inline void fo_store(const fo_prog *p, const fo_op *o, uint64_t h,
                            int code, uint64_t *val)
{
    if (!fo_stores(o, code))
        return;
    for (int k = 0; k < o->nw; k++)
        val[fo_cell(p, o->w[k])] = (code ? ~h : h) + (uint64_t)k;
}

/* The message op i fails with (its own code), into msg[256]. */
static inline void fo_message(const fo_prog *p, int i, char *msg)
{
    const fo_op *o = &p->ops[i];
    if (o->how == FO_DEVICE)
        snprintf(msg, 256, "emulated device work failed with %d", o->code);
    else if (o->message)
        snprintf(msg, 256, "op %d failed with %d", i, o->code);
    else
        msg[0] = '\0';
}

/* The cause a vf_completion_fail op passes. */
static inline vf_error fo_cause(const fo_prog *p, int i)
{
    vf_error c;
    memset(&c, 0, sizeof c);
    c.code = p->ops[i].code;
    snprintf(c.op_name, sizeof c.op_name, "remote%d", i);
    fo_message(p, i, c.message);
    return c;
}

/* A nested wait returned rc (err): the parent fails with FO_NESTED_CODE
 * and the first reported failure's name, else keeps code and msg. */
static inline void fo_nested_result(int rc, const vf_error *err, int *code,
                                    char *msg)
{
    if (rc == 0 || *code == FO_NESTED_CODE)
        return;
    *code = FO_NESTED_CODE;
    if (rc == VF_EOPFAILED)
        snprintf(msg, 256, "nested wait: %.63s failed", err->op_name);
    else
        snprintf(msg, 256, "nested wait returned %d", rc);
}

/* ------------------------------------------------------------ oracle */

typedef struct fo_rec {
    int code;
    bool reported;
    uint64_t key;
    char name[64];
    char msg[256];
} fo_rec;

typedef struct fo_interp {
    const fo_prog *p;
    fo_result *x;
    uint64_t val[FO_MAXVARS], ver[FO_MAXVARS];
    int err[FO_MAXVARS]; /* record, or -1 */
    fo_rec recs[FO_MAXOPS];
    int nrecs;
    uint64_t keys, pushes;
    int oprec[FO_MAXOPS]; /* the record op i ended with (failed, or skipped
                             by), or -1: what a wait for children reports */
} fo_interp;

static inline bool fo_unreported(const fo_interp *it, int r)
{
    return r >= 0 && !it->recs[r].reported;
}

/* The unreported record with the smallest key on the op's vars, or -1. */
static inline int fo_live(fo_interp *it, const fo_op *o)
{
    int best = -1;
    bool choice = false;
    for (int k = 0; k < o->nr + o->nw; k++) {
        int r = it->err[k < o->nr ? o->r[k] : o->w[k - o->nr]];
        if (!fo_unreported(it, r))
            continue;
        choice |= best >= 0 && r != best;
        if (best < 0 || it->recs[r].key < it->recs[best].key)
            best = r;
    }
    if (choice && !o->no_skip)
        it->x->choices++;
    return best;
}

static inline int fo_new_rec(fo_interp *it, int code, const char *name,
                             const char *msg, uint64_t key)
{
    fo_rec *r = &it->recs[it->nrecs];
    r->code = code;
    r->reported = false;
    r->key = key;
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    return it->nrecs++;
}

static inline void fo_report(fo_interp *it, int r, fo_xwait *w)
{
    it->recs[r].reported = true;
    w->rc = VF_EOPFAILED;
    w->err.code = it->recs[r].code;
    snprintf(w->err.op_name, sizeof w->err.op_name, "%s", it->recs[r].name);
    snprintf(w->err.message, sizeof w->err.message, "%s", it->recs[r].msg);
}

static inline void fo_wait_var(fo_interp *it, int v, int wait)
{
    fo_xwait *w = &it->x->waits[wait];
    memset(w, 0, sizeof *w);
    w->happened = 1;
    if (fo_unreported(it, it->err[v]))
        fo_report(it, it->err[v], w);
    w->value = it->val[fo_cell(it->p, v)];
    w->version = it->ver[v];
}

static inline void fo_wait_all(fo_interp *it, int wait)
{
    fo_xwait *w = &it->x->waits[wait];
    memset(w, 0, sizeof *w);
    w->happened = 1;
    int best = -1;
    for (int r = 0; r < it->nrecs; r++)
        if (fo_unreported(it, r) &&
            (best < 0 || it->recs[r].key < it->recs[best].key))
            best = r;
    if (best >= 0)
        fo_report(it, best, w);
    for (int r = 0; r < it->nrecs; r++)
        it->recs[r].reported = true;
}

static inline void fo_mark(fo_interp *it, const fo_op *o, int rec)
{
    for (int k = 0; k < o->nw; k++)
        it->err[o->w[k]] = rec;
}

static inline void fo_run_op(fo_interp *it, int i, uint64_t down);

/* Whether w[k] is the first mention of its var in the write list (a
 * write bumps a version once, however often it is listed). */
static inline bool fo_first_write(const fo_op *o, int k)
{
    for (int j = 0; j < k; j++)
        if (o->w[j] == o->w[k])
            return false;
    return true;
}

/* A wait for op i's children: of the records they ended with (a failure,
 * or the one that skipped one), the first in push order, if no wait
 * reported it yet. */
static inline void fo_wait_kids(fo_interp *it, int i)
{
    const fo_op *o = &it->p->ops[i];
    fo_xwait *w = &it->x->waits[o->kwait];
    memset(w, 0, sizeof *w);
    w->happened = 1;
    int best = -1;
    for (int j = 0; j < o->nkids; j++) {
        int r = it->oprec[o->kid0 + j];
        if (r >= 0 && (best < 0 || it->recs[r].key < it->recs[best].key))
            best = r;
    }
    if (fo_unreported(it, best))
        fo_report(it, best, w);
}

/* A parent's children, then its wait for them, then its var waits. */
static inline void fo_run_kids(fo_interp *it, int i, uint64_t h, int *code,
                               char *msg)
{
    const fo_op *o = &it->p->ops[i];
    for (int j = 0; j < o->nkids; j++)
        fo_run_op(it, o->kid0 + j, fo_down(h, j));
    if (o->kidwait) {
        fo_wait_kids(it, i);
        const fo_xwait *w = &it->x->waits[o->kwait];
        fo_nested_result(w->rc, &w->err, code, msg);
    }
    for (int k = 0; k < o->nwait; k++) {
        fo_wait_var(it, o->wvar[k], o->wait0 + k);
        const fo_xwait *w = &it->x->waits[o->wait0 + k];
        fo_nested_result(w->rc, &w->err, code, msg);
    }
}

/* Op i ran and ends with `code`: its record, versions, counts. */
static inline void fo_end_op(fo_interp *it, int i, int code, const char *msg,
                             uint64_t key, uint64_t place)
{
    const fo_op *o = &it->p->ops[i];
    fo_xop *x = &it->x->ops[i];
    x->status = o->cause ? VF_ESKIPPED : code;
    if (code != 0) {
        char name[64];
        if (o->cause)
            snprintf(name, sizeof name, "remote%d", i);
        else if (o->name[0])
            snprintf(name, sizeof name, "%s", o->name);
        else
            snprintf(name, sizeof name, "op #%llu", (unsigned long long)place);
        it->oprec[i] = fo_new_rec(it, code, name, msg, key);
        fo_mark(it, o, it->oprec[i]);
    }
    if (!o->cause)
        for (int k = 0; k < o->nw; k++)
            it->ver[o->w[k]] += fo_first_write(o, k) ? 1 : 0;
    if (o->cause)
        it->x->skipped++;
    else if (code)
        it->x->failed++;
    else
        it->x->ran++;
}

static inline void fo_run_op(fo_interp *it, int i, uint64_t down)
{
    const fo_op *o = &it->p->ops[i];
    fo_xop *x = &it->x->ops[i];
    uint64_t key = ++it->keys, place = ++it->pushes;
    x->done = 1;
    int live = fo_live(it, o);
    if (live >= 0 && !o->no_skip) {
        x->status = VF_ESKIPPED;
        fo_mark(it, o, live);
        it->oprec[i] = live;
        it->x->skipped++;
        return;
    }
    x->body = 1;
    uint64_t h = fo_hash(it->p, i, it->val, down);
    int code = o->code;
    char msg[256];
    fo_message(it->p, i, msg);
    if (o->nkids)
        fo_run_kids(it, i, h, &code, msg);
    fo_end_op(it, i, code, msg, key, place);
    fo_store(it->p, o, h, o->cause ? o->code : code, it->val);
}

static inline void fo_interp_init(fo_interp *it, const fo_prog *p, fo_result *x)
{
    memset(it, 0, sizeof *it);
    memset(x, 0, sizeof *x);
    it->p = p;
    it->x = x;
    for (int v = 0; v < p->nvars; v++) {
        it->val[v] = fo_init_value(p, v);
        it->err[v] = -1;
    }
    for (int i = 0; i < p->nops; i++)
        it->oprec[i] = -1;
}

static inline void fo_interp_step(fo_interp *it, int s)
{
    const fo_step *st = &it->p->steps[s];
    switch (st->kind) {
    case FO_PUSH:
        fo_run_op(it, st->arg, 0);
        break;
    case FO_DELETE: /* never fails: takes no number (engine.h) */
        it->x->vars[st->arg].deleted = true;
        it->x->vars[st->arg].value = it->val[fo_cell(it->p, st->arg)];
        break;
    case FO_WAIT_VAR:
        fo_wait_var(it, st->arg, st->wait);
        break;
    case FO_WAIT_ALL:
        fo_wait_all(it, st->wait);
        break;
    default: /* FORK, JOIN, STALE, ADDR, STOP, START: nothing happens to
                the program */
        break;
    }
}

static inline void fo_interp_finish(fo_interp *it)
{
    for (int v = 0; v < it->p->nvars; v++) {
        fo_xvar *x = &it->x->vars[v];
        if (!x->deleted) {
            x->value = it->val[fo_cell(it->p, v)];
            x->version = it->ver[v];
        }
    }
}

/* The serial program's result. */
static inline void fo_interpret(const fo_prog *p, fo_result *x)
{
    fo_interp *it = malloc(sizeof *it);
    if (it == NULL)
        abort();
    fo_interp_init(it, p, x);
    for (int s = 0; s < p->nsteps; s++)
        fo_interp_step(it, s);
    fo_interp_finish(it);
    free(it);
}

/*
 * For a FORK after the steps run so far: group the vars so that no
 * unreported record is held by two groups (comp[v] = a group's smallest
 * var). A wait on one side then never reports what the other side's ops
 * would see, so the two threads' pushes may interleave freely.
 */
static inline void fo_components(const fo_interp *it, int *comp)
{
    int nv = it->p->nvars;
    for (int v = 0; v < nv; v++)
        comp[v] = v;
    for (int v = 0; v < nv; v++) {
        if (!fo_unreported(it, it->err[v]))
            continue;
        for (int u = 0; u < v; u++) {
            if (it->err[u] != it->err[v])
                continue;
            int a = comp[u], b = comp[v];
            for (int t = 0; t < nv; t++)
                if (comp[t] == b)
                    comp[t] = a;
            break;
        }
    }
}

/* fo_components after the program's steps so far (`scratch` takes the
 * oracle's result meanwhile). */
static inline void fo_components_now(const fo_prog *p, fo_result *scratch,
                                     int *comp)
{
    fo_interp *it = malloc(sizeof *it);
    if (it == NULL)
        abort();
    fo_interp_init(it, p, scratch);
    for (int s = 0; s < p->nsteps; s++)
        fo_interp_step(it, s);
    fo_components(it, comp);
    free(it);
}

#endif /* VF_TEST_FAILURE_ORACLE_H */
