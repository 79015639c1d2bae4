/*
 * exec.h: running ops and finishing them.
 *
 * Dispatch: the thread that makes an op ready (its pusher, or whoever
 * finished the op it waited for) dispatches it. Ops of a pool go to the
 * pool's queues; async ops, wait markers and every op of the naive engine
 * run inline on the dispatching thread. Inline runs can make more ops ready,
 * which would recurse without bound (a chain of 10^6 async ops completing
 * inline); instead, a thread already running an inline op defers the newly
 * ready ones to a thread-local list that the outermost inline run drains in
 * order (a trampoline), so the stack stays flat. An op ready at its own
 * push is the exception: it runs inside the push call even then, which
 * nests only as deep as the program nests pushes.
 *
 * Finish: the `done` callback, the op's vars released (each may make ops
 * ready), statistics, the op counted out of `counts` together with the ops
 * it made ready counted in, then the block freed.
 */
#ifndef VF_EXEC_H
#define VF_EXEC_H

#include "core/engine.h"

/* The failure the op at `place` inherits from the vars it holds, or, when
 * `refs` is not NULL, from those a fused op's item names (bulk.h): of the
 * live ones, the first in push order (failure.h); NULL when none. With
 * `devices`, a var's failed device write counts (device_ops.h). */
vf__failure *vf__inherited_failure(const vf__op *op, const uint32_t *refs,
                                   int nrefs, uint64_t place, bool devices);

/* The op failed with `code` (its function's return, or its completion's):
 * a new failure record at its place. */
void vf__op_failed(vf__op *op, int code, const char *message);

/* Call a `done` callback, marking the thread as in the engine's code (a
 * wait there is refused, wait.c). */
void vf__call_done(const vf_engine *e, vf_done_fn done, void *arg, int status);

/* Count a user op's outcome (ran, failed, or skipped by the engine). */
void vf__count_outcome(vf_engine *e, int status, bool skipped);

/* Finish an async op whose completion was claimed (async.c), its status
 * and failure set: done, its vars released, ready ops dispatched. */
void vf__finish_completed(vf__op *op);

/* Dispatch an op that was ready at its push (its `active` count taken). */
void vf__dispatch_pushed(vf__op *op);

/* Dispatch ops made ready, whose `active` count is already taken. */
void vf__dispatch_list(vf__readylist *ready);

/* Worker loop step: run `op` (from the worker's pool) and finish it, return
 * the op the same worker should run next (or NULL). */
vf__op *vf__worker_execute(vf__worker *w, vf__op *op);

/* The completer's part of a device op whose work completed (op->status
 * and op->failure resolved): `done`, statistics; the op is freed by
 * whichever of this and the release of its vars comes last. */
void vf__device_op_complete(vf__op *op);

/* Run one op that an inline run on this thread deferred. True if one ran. */
bool vf__run_deferred(void);

/* A thread outside the engine's ops waiting for it (vf_wait_all) runs a
 * queued op of the CPU pool itself, and then each op that one makes ready
 * on that pool, first of its list (a chain stays on this thread), instead
 * of sleeping beside busy workers. False when there was none to take. */
bool vf__help_run(vf_engine *e);

/* A nested wait loop: entering makes `w` this thread's innermost loop
 * waiter (saving the outer one), leaving restores it. */
typedef struct vf__loop_frame {
    vf__waiter *waiter;
    vf__op *op;
} vf__loop_frame;

void vf__loop_enter(vf__waiter *w, vf__loop_frame *saved);
void vf__loop_leave(const vf__loop_frame *saved);

/* From a nested wait loop (w IDLE): run one deferred op, or one op of the
 * worker's pool (`me` may be NULL) with its hand-off chain, above the wait,
 * keeping w's state exact (vf__waiter). False when there was nothing to
 * run. */
bool vf__loop_run_one(vf__waiter *w, vf__worker *me);

#endif /* VF_EXEC_H */
