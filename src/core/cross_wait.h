/*
 * cross_wait.h: waits across engines from inside ops that could never
 * finish: vf_engine_wait_all, and vf_var_wait, on one engine from inside
 * an op of another.
 *
 * A wait on an op's own engine is the engine's business (wait.c: nested
 * waits, families, claim_deadlock). From inside an op of another engine
 * it is a wait like any other, but some never end, and hung (found trying
 * recursion across engines as a user). The ops that cannot end before the
 * wait returns are the calling op and every op further out on its
 * thread: the ops of the engines of the thread's calls in progress (user
 * code runs inside a call only as an op of that engine run inline, in a
 * push or a wait that helps, or its done), and, on a worker, the op of the
 * worker's engine under everything it runs. Call their engines the wait's
 * `from`. A wait never finishes when
 * - it waits for all of an engine among `from`: an op of it is pending
 *   until the wait returns;
 * - it closes a cycle of waits, each of which waits for the next to
 *   return: a wait for all of an engine E waits for every listed wait
 *   whose `from` holds E (an op of E is pending until it returns), a var
 *   wait for the listed wait of the op whose write of the var runs now;
 *   the cycle is closed when the search from the wait, through the listed
 *   waits, finds one that waits for all of one of its `from`, or for a var
 *   whose running write is the calling op's.
 * Then it returns VF_EDEADLK at once. Each check and the listing of the
 * wait that goes on are one step under a process-wide lock, so of the
 * waits that close a cycle the last is refused and the others finish,
 * whatever their kinds and order (a search through waits for all of an
 * engine, with one step to a var wait at its ends only, missed a cycle of
 * three engines with a var wait inside when a wait for all of an engine
 * came last, which hung: found by an auditor); only these waits take the
 * lock, so no push or other wait pays for it.
 *
 * Not covered: cycles through a var whose writer is queued, not running
 * (it waits for an op queued behind another), and a wait on a var that an op
 * further out on the same thread writes: the engine knows the ops that
 * run further out on a thread by their engines only.
 */
#ifndef VF_CROSS_WAIT_H
#define VF_CROSS_WAIT_H

#include "base/common.h"
#include "core/guard.h"
#include "core/op.h"

#define VF__CROSS_FROM (VF__GUARD_DEPTH + 2)

struct vf__var;

/* A wait from inside `op`, an op of another engine than `to`, while it
 * waits (on the waiting thread's stack, listed process-wide): for all of
 * `to`, or for `var` (one of to's). */
typedef struct vf__cross_wait {
    const vf_engine *from[VF__CROSS_FROM]; /* no two the same */
    int nfrom;
    const vf__op *op;
    const vf_engine *to;
    struct vf__var *var; /* NULL: all of `to` */
    bool listed;         /* not a timed wait's (below) */
    struct vf__cross_wait *next, *prev;
    /* Under the lock, for the search of a wait being checked: visited,
     * and the next wait still to visit (cross_wait.c, closes_cycle). */
    bool seen;
    struct vf__cross_wait *todo;
} vf__cross_wait;

/* Before the wait enters its guard on its engine: the engines of the
 * thread's calls in progress, into cw->from. */
void vf__cross_wait_calls(vf__cross_wait *cw);

/* The wait for all of `e` (`var` NULL) or for its var `var`, from inside
 * `cur`, an op of another engine, after vf__cross_wait_calls(cw): 0, and
 * the wait is listed, when `list`, until vf__cross_wait_leave; or
 * VF_EDEADLK (the detail says why, `who` the call) and nothing to leave.
 * A timed wait is checked but not listed: it gives up, so it closes no
 * cycle another wait could be refused for (found by the second reviewer).
 * A var wait is checked only against the listed waits, not against
 * `from` (an op of e's further out on the thread may well not hold
 * `var`). */
int vf__cross_wait_enter(vf__cross_wait *cw, vf_engine *e, struct vf__var *var,
                         const vf__op *cur, bool list, const char *who);
void vf__cross_wait_leave(vf__cross_wait *cw);

#endif /* VF_CROSS_WAIT_H */
