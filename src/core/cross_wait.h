/*
 * cross_wait.h: vf_engine_wait_all on one engine from inside an op of
 * another, where it could never finish.
 *
 * wait_all(e) from inside an op of e is refused (it would wait for
 * itself). From inside an op of another engine it is a wait like any
 * other, but it can never end when an op that cannot end before it
 * returns is one of e's, or waits for e's: it hung (found trying recursion
 * across engines as a user). The ops that cannot end before the wait
 * returns are the calling op and every op running further out on its
 * thread: the ops of the engines of the thread's calls in progress (user
 * code runs inside a call only as an op of that engine run inline, in a
 * push or a wait that helps, or its done), and, on a worker, the op of the
 * worker's engine under everything it runs. Call their engines the wait's
 * `from`. The wait can never finish when
 * - `e` is one of `from`: an op of e's is pending until the wait returns;
 * - an op of e's waits, through waits for all of an engine listed here,
 *   for all of one of `from` (e -> ... -> from): a cycle, each op of which
 *   is pending on its engine while it waits for all of the next.
 * Either way the wait returns VF_EDEADLK at once. Of a cycle's waits the
 * one that would close it is refused (the later one to arrive), under a
 * process-wide lock that orders them: only waits for all of an engine
 * from inside an op of another take it, so no push or other wait pays.
 * A wait that goes on is listed, edges from each of `from` to `e`, until
 * it returns.
 *
 * Not covered: a cycle through var waits (an op of `e` waits for a var
 * of the caller's engine whose writer is the caller's op): whether a var
 * wait depends on the calling op needs the var's queue searched.
 */
#ifndef VF_CROSS_WAIT_H
#define VF_CROSS_WAIT_H

#include "base/common.h"
#include "core/guard.h"
#include "core/op.h"

#define VF__CROSS_FROM (VF__GUARD_DEPTH + 2)

/* A wait for all of `to` from inside an op of another engine, while it
 * waits (on the waiting thread's stack, listed process-wide). */
typedef struct vf__cross_wait {
    const vf_engine *from[VF__CROSS_FROM]; /* no two the same */
    int nfrom;
    const vf_engine *to;
    struct vf__cross_wait *next, *prev;
} vf__cross_wait;

/* Before the wait enters its guard on its engine: the engines of the
 * thread's calls in progress, into cw->from. */
void vf__cross_wait_calls(vf__cross_wait *cw);

/* The wait for all of `e`, from inside `cur`, an op of another engine,
 * after vf__cross_wait_calls(cw): 0, and the wait is listed until
 * vf__cross_wait_leave; or VF_EDEADLK (the detail says why, `who` the
 * call) and nothing to leave. */
int vf__cross_wait_enter(vf__cross_wait *cw, vf_engine *e, const vf__op *cur,
                         const char *who);
void vf__cross_wait_leave(vf__cross_wait *cw);

#endif /* VF_CROSS_WAIT_H */
