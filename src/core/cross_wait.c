/* cross_wait.c: waits for all of an engine from inside an op of another
 * that could never finish (cross_wait.h). */
#include "core/cross_wait.h"

#include <pthread.h>

#include "base/error.h"
#include "core/sched.h"

/* Every wait for all of an engine from inside an op of another, in
 * progress. Few (one per waiting thread), and only such waits take the
 * lock. */
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

/* Whether an op of `e` waits, through listed waits, for all of one of
 * cw's `from`. Under `lock`. The listed waits hold no cycle (the wait
 * that would close one is refused), so the search ends; `depth` bounds it
 * all the same, at one step per listed wait. */
static bool reaches(const vf_engine *e, const vf__cross_wait *cw, int depth)
{
    if (has(cw, e))
        return true;
    if (depth == 0)
        return false;
    for (const vf__cross_wait *w = listed; w != NULL; w = w->next)
        if (has(w, e) && reaches(w->to, cw, depth - 1))
            return true;
    return false;
}

void vf__cross_wait_calls(vf__cross_wait *cw)
{
    const vf_engine *calls[VF__GUARD_DEPTH];
    int n = vf__guard_calls(calls);
    cw->nfrom = 0;
    for (int i = 0; i < n; i++)
        add(cw, calls[i]);
}

int vf__cross_wait_enter(vf__cross_wait *cw, vf_engine *e, const vf__op *cur,
                         const char *who)
{
    char label[VF__OP_LABEL_MAX];
    const vf__worker *w = vf__this_worker();
    add(cw, vf__op_engine(cur));
    if (w != NULL)
        add(cw, w->pool->engine);
    if (has(cw, e))
        return vf__fail(VF_EDEADLK,
                        "%s: called inside %s, which runs inside an op of "
                        "this engine on the same thread: it would wait for "
                        "that op, which cannot end before this call returns",
                        who, vf__op_label(cur->name, cur->place, label));
    pthread_mutex_lock(&lock);
    int nlisted = 0;
    for (const vf__cross_wait *l = listed; l != NULL; l = l->next)
        nlisted++;
    if (reaches(e, cw, nlisted)) {
        pthread_mutex_unlock(&lock);
        return vf__fail(VF_EDEADLK,
                        "%s: called inside %s while an op of this engine "
                        "waits for all of that op's engine (or of one whose "
                        "op waits for it, and so on): each would wait for "
                        "the other",
                        who, vf__op_label(cur->name, cur->place, label));
    }
    cw->to = e;
    cw->prev = NULL;
    cw->next = listed;
    if (listed != NULL)
        listed->prev = cw;
    listed = cw;
    pthread_mutex_unlock(&lock);
    return 0;
}

void vf__cross_wait_leave(vf__cross_wait *cw)
{
    pthread_mutex_lock(&lock);
    if (cw->prev != NULL)
        cw->prev->next = cw->next;
    else
        listed = cw->next;
    if (cw->next != NULL)
        cw->next->prev = cw->prev;
    pthread_mutex_unlock(&lock);
}
