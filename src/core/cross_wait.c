/* cross_wait.c: waits across engines from inside ops that could never
 * finish (cross_wait.h). */
#include "core/cross_wait.h"

#include <pthread.h>

#include "base/error.h"
#include "core/exec.h"
#include "core/push.h"
#include "core/sched.h"
#include "core/var.h"

/* Every wait from inside an op on another engine, in progress. Few (one
 * per waiting thread), and only such waits take the lock. Lock order: a
 * var's lock under it (holder). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static vf__cross_wait *listed;

static bool has(const vf__cross_wait *cw, const vf_engine *e)
{
    for (int i = 0; i < cw->nfrom; i++)
        if (cw->from[i] == e)
            return true;
    return false;
}

static void add(vf__cross_wait *cw, const vf_engine *e)
{
    if (e != NULL && !has(cw, e) && cw->nfrom < VF__CROSS_FROM)
        cw->from[cw->nfrom++] = e;
}

/* The op whose write of v runs now, or NULL. */
static const vf__op *holder(vf__var *v)
{
    vf__spin_lock(&v->lock);
    const vf__op *h = v->nreaders == VF__WRITE_RUNNING && v->head != NULL
                          ? vf__dep_op(v->head)
                          : NULL;
    vf__spin_unlock(&v->lock);
    return h;
}

/* Whether the listed wait `x` waits for something the wait `cw` holds up:
 * for all of one of cw's `from` (an op of it is pending until cw
 * returns), or for a var whose running write is cw's op's. `h`: the
 * running writer of x's var. */
static bool needs(const vf__cross_wait *x, const vf__op *h,
                  const vf__cross_wait *cw)
{
    return x->var == NULL ? has(cw, x->to) : h != NULL && h == cw->op;
}

/* Whether the wait `x` (`h` the running writer of its var) waits for the
 * listed wait `w` to return: x waits for all of an engine one of whose
 * ops is pending on w's thread, or for a var whose running writer is w's
 * op. */
static bool waits_for(const vf__cross_wait *x, const vf__op *h,
                      const vf__cross_wait *w)
{
    return x->var == NULL ? has(w, x->to) : h != NULL && w->op == h;
}

/* Whether the wait `cw` (its `to`, `var` and `op` set, not listed) waits,
 * through listed waits each of which waits for the next (waits_for), for
 * one that waits for something cw holds up (needs): a cycle. Under
 * `lock`. A search over the listed waits, each visited once (`seen`,
 * cleared after), the waits still to visit linked through `todo`. A
 * running writer that leads anywhere stays while the search lasts: it
 * waits in a listed wait, or is cw's op, and cannot end meanwhile. */
static bool closes_cycle(vf__cross_wait *cw)
{
    vf__cross_wait *todo = cw;
    cw->todo = NULL;
    bool found = false;
    while (todo != NULL) {
        vf__cross_wait *x = todo;
        todo = x->todo;
        const vf__op *h = x->var != NULL ? holder(x->var) : NULL;
        if (x != cw && needs(x, h, cw)) {
            found = true;
            break;
        }
        for (vf__cross_wait *w = listed; w != NULL; w = w->next)
            if (!w->seen && waits_for(x, h, w)) {
                w->seen = true;
                w->todo = todo;
                todo = w;
            }
    }
    for (vf__cross_wait *w = listed; w != NULL; w = w->next)
        w->seen = false;
    return found;
}

/* Why the wait `cw` (its `to`, `var` and `op` set) can never finish, or
 * NULL. Under `lock`. */
static const char *never_ends(vf__cross_wait *cw)
{
    if (cw->var == NULL && has(cw, cw->to))
        return "which runs inside an op of this engine on the same "
               "thread: it would wait for that op, which cannot end "
               "before this call returns";
    if (!closes_cycle(cw))
        return NULL;
    return cw->var == NULL
               ? "while an op of this engine waits for all of that op's "
                 "engine or for a variable that op writes (or waits for "
                 "an op that does, and so on): each would wait for the "
                 "other"
               : "while the op that writes it waits for that op, for all "
                 "of its engine or for a variable it writes (or waits for "
                 "an op that does, and so on): each would wait for the "
                 "other";
}

void vf__cross_wait_calls(vf__cross_wait *cw)
{
    const vf_engine *calls[VF__GUARD_DEPTH];
    int n = vf__guard_calls(calls);
    cw->nfrom = 0;
    for (int i = 0; i < n; i++)
        add(cw, calls[i]);
}

int vf__cross_wait_enter(vf__cross_wait *cw, vf_engine *e, struct vf__var *var,
                         const vf__op *cur, bool list, const char *who)
{
    char label[VF__OP_LABEL_MAX];
    const vf__worker *w = vf__this_worker();
    /* User code that runs inside a call on an engine (a push that ran an
     * op inline, a wait that helped) is an op of that engine's or its
     * descendant run there; a worker runs its engine's op under
     * everything it runs. */
    add(cw, vf__op_engine(cur));
    if (w != NULL && !vf__exec_bare())
        add(cw, w->pool->engine);
    cw->op = cur;
    cw->to = e;
    cw->var = var;
    pthread_mutex_lock(&lock);
    const char *why = never_ends(cw);
    if (why != NULL) {
        pthread_mutex_unlock(&lock);
        return vf__fail(VF_EDEADLK, "%s: called inside %s %s", who,
                        vf__push_running_label(cur, label), why);
    }
    cw->listed = list;
    if (list) {
        cw->seen = false;
        cw->prev = NULL;
        cw->next = listed;
        if (listed != NULL)
            listed->prev = cw;
        listed = cw;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

void vf__cross_wait_leave(vf__cross_wait *cw)
{
    if (!cw->listed)
        return;
    pthread_mutex_lock(&lock);
    if (cw->prev != NULL)
        cw->prev->next = cw->next;
    else
        listed = cw->next;
    if (cw->next != NULL)
        cw->next->prev = cw->prev;
    pthread_mutex_unlock(&lock);
}
