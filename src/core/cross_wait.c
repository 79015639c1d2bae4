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

/* Whether an op of `e` waits, through listed waits for all of an engine,
 * for all of one of cw's `from`. Under `lock`. The listed waits hold no
 * cycle (the wait that would close one is refused), so the search ends;
 * `depth` bounds it all the same, at one step per listed wait. */
static bool reaches(const vf_engine *e, const vf__cross_wait *cw, int depth)
{
    if (has(cw, e))
        return true;
    if (depth == 0)
        return false;
    for (const vf__cross_wait *w = listed; w != NULL; w = w->next)
        if (w->var == NULL && has(w, e) && reaches(w->to, cw, depth - 1))
            return true;
    return false;
}

/* Why the wait `cw` (its `to`, `var` and `op` set) can never finish, or
 * NULL. Under `lock`. */
static const char *never_ends(const vf__cross_wait *cw, int nlisted)
{
    if (cw->var == NULL) {
        if (has(cw, cw->to))
            return "which runs inside an op of this engine on the same "
                   "thread: it would wait for that op, which cannot end "
                   "before this call returns";
        if (reaches(cw->to, cw, nlisted))
            return "while an op of this engine waits for all of that op's "
                   "engine (or of one whose op waits for it, and so on): "
                   "each would wait for the other";
        for (const vf__cross_wait *w = listed; w != NULL; w = w->next)
            if (w->var != NULL && has(w, cw->to) && holder(w->var) == cw->op)
                return "while an op of this engine waits for a variable "
                       "that op writes: each would wait for the other";
        return NULL;
    }
    const vf__op *h = holder(cw->var);
    for (const vf__cross_wait *w = listed; h != NULL && w != NULL; w = w->next)
        if (w->op == h && (w->var == NULL ? reaches(w->to, cw, nlisted)
                                          : holder(w->var) == cw->op))
            return "while the op that writes it waits for that op (or "
                   "for all of its engine): each would wait for the other";
    return NULL;
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
    int nlisted = 0;
    for (const vf__cross_wait *l = listed; l != NULL; l = l->next)
        nlisted++;
    const char *why = never_ends(cw, nlisted);
    if (why != NULL) {
        pthread_mutex_unlock(&lock);
        return vf__fail(VF_EDEADLK, "%s: called inside %s %s", who,
                        vf__push_running_label(cur, label), why);
    }
    cw->listed = list;
    if (list) {
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
