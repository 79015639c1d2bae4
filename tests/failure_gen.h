/*
 * failure_gen.h: random programs of failure_oracle.h, for the tests
 * (tests/test_failure_diff.c, tests/test_chaos.c; needs util.h's PRNG).
 *
 * The pieces a program is made of: an op with random read and write
 * lists (repeats, a var both read and written), how it runs (sync, async
 * inline or by another thread, device), its failure, its name, and the
 * children a sync op pushes from inside over scratch vars of its own and
 * waits for: at depth > 1 a child may have children in turn (a kid of a
 * kid's subtree touches only that kid's scratch vars, so the effect is
 * the serial program's whatever runs when). The programs themselves
 * (what steps, which threads) are each test's.
 */
#ifndef VF_TEST_FAILURE_GEN_H
#define VF_TEST_FAILURE_GEN_H

#include "failure_oracle.h"
#include "util.h"

typedef struct gen {
    fo_prog *p;
    tu_rng *r;
    bool devices;
    bool prefix; /* no nested push or segment yet: unnamed ops allowed */
    int alive[FO_MAXVARS], nalive; /* main vars not deleted */
    int dead[FO_MAXVARS], ndead;
    fo_result *scratch; /* for the oracle at a segment */
    bool simple;        /* sync ops only, all named, no children */
    bool named;         /* every op named, none returns VF_ESKIPPED */
    int depth;          /* levels of children below a top-level op (0: 1) */
    int kids_in;        /* a top-level sync op has children once in so many
                           (0: 16) */
} gen;

static inline int pick(gen *g, const int *pool, int n)
{
    return pool[tu_below(g->r, n)];
}

static inline void gen_lists(gen *g, fo_op *o, const int *pool, int n, int maxr,
                             int maxw)
{
    o->nr = tu_range(g->r, 0, maxr);
    o->nw = tu_range(g->r, 0, maxw);
    for (int k = 0; k < o->nr; k++)
        o->r[k] = pick(g, pool, n);
    for (int k = 0; k < o->nw; k++)
        o->w[k] = pick(g, pool, n);
    if (o->nw > 0 && o->nr < FO_MAXR && tu_below(g->r, 6) == 0)
        o->r[o->nr++] = o->w[tu_below(g->r, o->nw)]; /* read and written */
    if (o->nw > 0 && o->nw < FO_MAXW && tu_below(g->r, 8) == 0)
        o->w[o->nw] = o->w[o->nw - 1], o->nw++; /* written twice */
}

/* How it runs, where, and whether (and how) it fails. */
static inline void gen_kind(gen *g, fo_op *o, bool can_fail, bool top)
{
    tu_rng *r = g->r;
    int roll = tu_below(r, 100);
    if (g->simple)
        roll = 0;
    o->how = roll < 72          ? FO_SYNC
             : roll < 80        ? FO_ASYNC_INLINE
             : roll < 88 && top ? FO_ASYNC_THREAD
             : g->devices       ? FO_DEVICE /* children too */
                                : FO_SYNC;
    o->device = tu_below(r, 2);
    static const int dprops[] = {VF_PROP_NORMAL, VF_PROP_COPY_TO_DEVICE,
                                 VF_PROP_COPY_FROM_DEVICE,
                                 VF_PROP_DEVICE_PRIORITIZED};
    if (o->how == FO_DEVICE)
        o->property = dprops[tu_below(r, 4)];
    else if (tu_below(r, 16) == 0)
        o->property = VF_PROP_CPU_PRIORITIZED;
    o->priority = tu_below(r, 3) == 0 ? tu_range(r, -2, 2) : 0;
    o->no_skip = tu_below(r, 12) == 0;
    o->message = tu_below(r, 4) != 0;
    if (!can_fail || tu_below(r, 100) >= (top ? 7 : 20))
        return;
    o->code = tu_range(r, 1, 250);
    if (o->how == FO_SYNC && !g->simple && !g->named && tu_below(r, 8) == 0)
        o->code = VF_ESKIPPED; /* it ran: counts as failed */
    if ((o->how == FO_ASYNC_INLINE || o->how == FO_ASYNC_THREAD) &&
        tu_below(r, 4) == 0)
        o->cause = true;
}

static inline void gen_name(gen *g, fo_op *o, int i)
{
    if (g->prefix && !g->simple && !g->named && tu_below(g->r, 6) == 0)
        o->name[0] = '\0';
    else
        snprintf(o->name, sizeof o->name, "o%d", i);
}

/* Room for the children of one more parent. */
static inline bool gen_room(const gen *g)
{
    return g->p->nvars + FO_MAXSCR <= FO_MAXVARS &&
           g->p->nops + FO_MAXKIDS < FO_MAXOPS;
}

/* Children of op i (at `level`, 1 for a top-level op's) over 1-2 new
 * scratch vars, their own children while level < g->depth, and the nested
 * waits. */
static inline void gen_kids(gen *g, int i, bool can_fail, int level)
{
    fo_prog *p = g->p;
    fo_op *o = &p->ops[i];
    int scr[FO_MAXSCR], nscr = tu_range(g->r, 1, FO_MAXSCR);
    for (int k = 0; k < nscr; k++)
        scr[k] = p->nvars++;
    o->nkids = tu_range(g->r, 1, FO_MAXKIDS);
    o->kid0 = p->nops;
    bool written[FO_MAXSCR] = {false};
    for (int j = 0; j < o->nkids; j++) {
        int c = p->nops++;
        fo_op *k = &p->ops[c];
        memset(k, 0, sizeof *k);
        k->parent = i;
        gen_lists(g, k, scr, nscr, 2, 2);
        if (k->nw == 0)
            k->w[k->nw++] = scr[tu_below(g->r, nscr)];
        gen_kind(g, k, can_fail, false);
        snprintf(k->name, sizeof k->name, "o%d", c);
        for (int m = 0; m < k->nw; m++)
            written[k->w[m] - scr[0]] = true;
    }
    for (int j = 0; j < o->nkids && level < g->depth; j++) {
        int c = o->kid0 + j;
        if (p->ops[c].how == FO_SYNC && gen_room(g) && tu_below(g->r, 3) == 0)
            gen_kids(g, c, can_fail, level + 1);
    }
    o = &p->ops[i];
    /* Half the parents wait for their children as such too (OpenMP's
     * taskwait), before their var waits. */
    o->kidwait = tu_below(g->r, 2) == 0;
    if (o->kidwait)
        o->kwait = p->nwaits++;
    o->wait0 = p->nwaits;
    for (int k = 0; k < nscr; k++)
        if (written[k])
            o->wvar[o->nwait++] = scr[k];
    p->nwaits += o->nwait;
}

/* A new op over the vars in pool (and its children); its index. */
static inline int gen_op(gen *g, const int *pool, int n, bool can_fail)
{
    fo_prog *p = g->p;
    int i = p->nops++;
    fo_op *o = &p->ops[i];
    memset(o, 0, sizeof *o);
    o->parent = -1;
    gen_lists(g, o, pool, n, 4, 3);
    gen_kind(g, o, can_fail, true);
    int in = g->kids_in > 0 ? g->kids_in : 16;
    if (o->how == FO_SYNC && gen_room(g) && !g->simple &&
        tu_below(g->r, in) == 0) {
        g->prefix = false;
        gen_kids(g, i, can_fail, 1);
    }
    gen_name(g, o, i);
    return i;
}

static inline void add_step(gen *g, int kind, int thread, int arg)
{
    fo_prog *p = g->p;
    fo_step *st = &p->steps[p->nsteps++];
    *st = (fo_step){kind, thread, arg, 0};
    if (kind == FO_WAIT_VAR || kind == FO_WAIT_ALL)
        st->wait = p->nwaits++;
}

/* A delete of a main var, made by `thread`. */
static inline void gen_delete(gen *g, int thread)
{
    int k = tu_below(g->r, g->nalive);
    int v = g->alive[k];
    g->alive[k] = g->alive[--g->nalive];
    g->dead[g->ndead++] = v;
    add_step(g, FO_DELETE, thread, v);
}

#endif /* VF_TEST_FAILURE_GEN_H */
