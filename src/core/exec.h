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
 * push is the exception: it runs inside the push call even then, while
 * the stack has room (VF__INLINE_PUSH_EIGHTHS), and through the
 * trampoline beyond, so a chain of ops each pushing the next (10^6 deep)
 * keeps the stack bounded too.
 *
 * Ops of a pool pushed from inside a running op (nest > 0, op.h) go to the
 * front of the pushing worker's own lane: children run before older work,
 * newest first, and a worker waiting inside an op finds its own children
 * near the head of its queue (and its descendants another worker took
 * near the tail of that one's: family.h names their ancestors). A child
 * ready at its push may instead run inside the push, on the pushing
 * worker, as the serial program runs it: on a pool of one worker, or when
 * the worker's queue already holds VF__AT_PUSH_QUEUED ops for the others
 * to take (exec.c: runs_at_push). Its parent, stuck below it, lends it
 * its `active` count meanwhile (engine.h), so a wait inside the child that
 * needs the parent to end is found to be stuck (VF_EDEADLK), not hung.
 * One with no vars skips the vars, the queues and the counts altogether
 * (vf__exec_run_child_alone): its parent's pending and active counts
 * stand for it, as lending makes them.
 *
 * Finish: the `done` callback, the op's vars released (each may make ops
 * ready), statistics, the op counted out of `counts` together with the ops
 * it made ready counted in, then the block freed. A device op whose work
 * is in flight is finished in two halves instead (device_ops.c): its vars
 * released at once, the rest when the completer sees its work complete.
 */
#ifndef VF_EXEC_H
#define VF_EXEC_H

#include "base/stack.h"
#include "core/engine.h"
#include "core/profiling.h"
#include "core/run.h"

/* How much of a thread's stack (in eighths, base/stack.h) frames the
 * engine nests may fill: a push that runs its op inside itself (the
 * naive engine; a child ready at its push, exec.c), up to half; a nested wait
 * running a child of the waiting op, up to three quarters (it runs no other); a
 * push at the in-flight bound from inside an op running ready ops, up to three
 * eighths. The rest is the program's own. */
#define VF__INLINE_PUSH_EIGHTHS 4u
#define VF__WAIT_CHILD_EIGHTHS 6u
#define VF__WAIT_ANY_EIGHTHS 3u

/* On a pool of several workers, a child ready at its push runs inside the
 * push once the pushing worker's own queue holds this many ops (exec.c:
 * runs_at_push); fewer, and it is queued for whoever is idle. */
#define VF__AT_PUSH_QUEUED 8

/* With run_at_push, an op ready at a push from outside the engine's ops
 * and threads runs inside the push once the worker it would go to holds
 * this many ops: the pusher is ahead of the pool, and runs work rather
 * than queue more, as libgomp runs a task at its creation past 64 queued
 * per thread (exec.c: runs_at_top_push). */
#define VF__AHEAD_QUEUED 64

/* The failure the op at `place` under `up` (its key, family.h) inherits
 * from the vars it holds, or, when `refs` is not NULL, from those a fused
 * op's item names (bulk.h): of the live ones, the first in push order
 * (failure.h); NULL when none. With `devices`, a var's failed device write
 * counts (device_ops.h). */
vf__failure *vf__exec_inherited_failure(vf__op *op, const uint32_t *refs,
                                        int nrefs, const vf__family *up,
                                        uint64_t place, bool devices);

/* The engine skips the op: `done` gets VF_ESKIPPED, and `f` (a reference
 * the op takes) goes on to the vars it writes; NULL: the shutdown notice
 * skips it (lifecycle.h), which the vars it writes keep for their waits
 * (vf__var.notice_skipped). */
void vf__exec_op_skipped(vf__op *op, vf__failure *f);

/* The vars the skipped op `op` (it holds them) writes learn why: the
 * shutdown notice (`f` NULL: vf__var.notice_skipped), or `f`, which marks
 * them when it is a later op's and clears their marks otherwise (var.h:
 * vf__var_write_skipped). Part of
 * vf__exec_op_skipped; a device op whose work its stream skipped calls it
 * itself. */
void vf__exec_writes_skipped(vf__op *op, vf__failure *f);

/* The op failed with `code` (its function's return, or its completion's):
 * a new failure record at its place. */
void vf__exec_op_failed(vf__op *op, int code, const char *message);

/* The function of an op a child was forked from inside returned in that
 * child (VF__HOOK_FORK_DEAD): a worker's thread ends here, before it
 * touches the op's family, vars or queue, whose locks a thread of the
 * parent may hold for good (it hung in 1 fork in 500: found by a
 * reviewer); another thread goes on, and the op's finish does nothing. */
void vf__exec_fork_dead_returned(void);

/* Call the op's sync function with `run`, as the op running on this
 * thread; a non-zero return fails the op. Inline: every user op's body
 * calls it (and a device op's, device_ops.c). */
static inline int vf__exec_call_fn(vf__op *op, vf_run *run)
{
    run->message[0] = '\0';
    vf__running outer;
    op->run = run; /* vf__op.run */
    vf__running_enter(&outer, op);
    int rc = op->fn(run, op->arg);
    if (VF__UNLIKELY(op->hooks & VF__HOOK_FORK_DEAD))
        vf__exec_fork_dead_returned();
    vf__running_leave(&outer);
    if (rc != 0)
        vf__exec_op_failed(op, rc, run->message);
    return rc;
}

/* Call a sync user op's function as `worker` (vf_run_worker) runs it:
 * run_body's call, for a body run elsewhere (a device replay's CPU node:
 * graph_device.c). */
void vf__exec_run_fn(vf__op *op, int worker);

/* Whether this thread runs a `done` callback of an op of `e` (a wait
 * there would wait for that op, which is still finishing), or an op run
 * inside one. */
bool vf__exec_in_done(const vf_engine *e);

/* Whether the running op `op` (vf__current_op()) is the innermost frame of
 * this thread: not under a `done` callback of another op (an op finishing
 * above it), which stands at that op's point. */
bool vf__exec_op_innermost(const vf__op *op);

/* Both at once, for a call that takes the running op `op`'s run handle
 * (one test where no callback runs): VF__DONE_NONE, VF__DONE_OF_ENGINE
 * (vf__exec_in_done(e)), or VF__DONE_ABOVE (a callback of another
 * engine's op runs above `op`: !vf__exec_op_innermost(op)). */
#define VF__DONE_NONE 0
#define VF__DONE_OF_ENGINE 1
#define VF__DONE_ABOVE 2
int vf__exec_done_here(const vf_engine *e, const vf__op *op);

/* Whether the running op `op` (vf__current_op()) is counted out of its
 * engine's `active` count by the innermost frame of this thread that
 * counts one out: it waits in a nested wait loop (wait.c: nested_wait),
 * or lent its count to a child run at its push, and the code running now
 * runs above (a `done` callback of an op that frame ran). */
bool vf__exec_counted_out(const vf__op *op);

/* Device work (vf_run_submit's fn) of the engine `engine`: fn(arg), the
 * thread marked as in that engine's code meanwhile (vf_engine_in_op says
 * so). Every stream of the engine runs its work through it
 * (vf__device_params.run_work). */
int vf__exec_device_work(const void *engine, vf_device_fn fn, void *arg);

/* Whether this thread runs device work (of any engine). */
bool vf__exec_in_device_work(void);

/* Whether this thread runs the program's own code: no op, `done` callback
 * or device work (of any engine) runs on it now. */
bool vf__exec_at_top(void);

/* Whether this thread is a service thread (vf_thread_set_service()). */
bool vf__exec_on_service_thread(void);

/* Mark this thread as an engine's completer (completer.c), for good: an
 * async op made ready on it (by a device op's `done`, or a completion
 * finished there) starts on a worker of its CPU pool, as from device work,
 * since its start may wait on the host for a fence only the completer
 * resolves. Does not block. */
void vf__exec_mark_completer(void);

/* 0, or VF_EDEADLK (its detail naming `who`) when this thread runs device
 * work: a call that blocks (a wait, a stop, a start, a destroy), on any
 * engine, would hold the stream, and so the op that submitted the work and
 * every op after it on its vars, as CUDA allows no CUDA call in a host
 * function (found trying device ops as a user: a wait for all from there
 * hung). */
int vf__exec_refuse_in_device_work(const char *who);

/* The running op's engine on this thread (inside an op), else NULL. */
vf_engine *vf__exec_current_engine(void);

/* Whether the code running on this thread is a deferred op run with no
 * op under it (vf__exec_run_deferred from a worker's idle loop, or from a
 * thread outside ops): then no op of a worker's engine runs under it
 * (cross_wait.h). */
bool vf__exec_bare(void);

/* Whether this thread runs code of engine `e` that a drain of `e` would
 * wait for: one of its ops (the innermost, one further out that ran the
 * innermost inline inside a call on another engine, or one standing still
 * further down, in a hold: a nested wait, a push at the bound), one of its
 * `done` callbacks, or any code on one of its workers (lifecycle: stop,
 * start, destroy and fork must not wait for themselves). */
bool vf__exec_in_engine(const vf_engine *e);

/* Whether `op`, running on this thread, is an async op whose completion
 * came while its function runs: it has finished and released its vars,
 * and the call goes on (exec.c: ASYNC_CALL). */
bool vf__exec_async_finished(const vf__op *op);

/* Call a `done` callback, marking the thread as in the engine's code (a
 * wait there is refused, wait.c). */
void vf__exec_call_done(const vf_engine *e, vf_done_fn done, void *arg,
                        int status);

/* Count a user op's outcome (ran, failed, or skipped by the engine). */
void vf__exec_count_outcome(vf_engine *e, int status, bool skipped);

/* Count a finished op's outcome, when its kind is counted (op.h). */
static inline void vf__exec_count_op(vf_engine *e, const vf__op *op)
{
    if (op->def->kind->flags & VF__KIND_COUNTED)
        vf__exec_count_outcome(e, op->status, op->skipped);
}

/* Finish an async op whose completion was claimed (async.c), its status
 * and failure set: done, its vars released, ready ops dispatched. */
void vf__exec_finish_completed(vf__op *op);

/* Dispatch an op that was ready at its push (its `active` count taken);
 * `here`: a child of the op running on this thread may run inside the
 * push (false when the pusher holds a lock). */
void vf__exec_dispatch_pushed(vf__op *op, bool here);

/* Whether an op of `def` is finished when its body returns: a user op
 * or a batch of them that is not async (an async op, or a device op,
 * finishes later, elsewhere: it cannot give a lent count back). */
static inline bool vf__exec_finishes_in_run(const vf__opdef *def)
{
    return !def->async &&
           (def->kind == &vf__kind_user || def->kind == &vf__kind_bulk);
}

/* Whether a child of `def` at `priority`, ready at its push by `w`, a
 * thread of its pool, runs right there, inside the push, as the serial
 * program runs it (and as libgomp and libomp run a task at its creation
 * when their queues are long or their team has one thread): on a pool of
 * one worker always, on a larger one when the pusher's own queue already
 * holds enough for the others to take (VF__AT_PUSH_QUEUED), so the child
 * costs no queue round trip and runs while what its parent wrote is in
 * this core's cache. Never ahead of a queued op of higher priority (rule
 * 11), nor of one not yet sorted into the queue. Only an op of this
 * worker's pool that finishes in its run, only on a worker thread (not a
 * spare, nor the stepped engine's stand-in, testing.h, whose steps run one
 * op each), and only while at most half the stack is used, as for the
 * naive engine's pushes (VF__INLINE_PUSH_EIGHTHS; a chain of ops each
 * pushing the next queues its ops past that, and a nested wait still has
 * room). Inline: every push from inside an op asks. */
static inline bool vf__exec_worker_runs_child(const vf__worker *w,
                                              const vf__opdef *def,
                                              int priority)
{
    if (w == NULL || w->pool != def->pool || w->spare || !w->started ||
        !vf__exec_finishes_in_run(def))
        return false;
    if (w->pool->nworkers > 1 &&
        atomic_load_explicit(&w->qlen, memory_order_relaxed) <
            VF__AT_PUSH_QUEUED)
        return false;
    if (vf__worker_holds_better(w, priority))
        return false; /* rule 11: a better ready op runs first */
    return vf__stack_below(VF__INLINE_PUSH_EIGHTHS);
}

/* The worker of this thread, when a child of `def`'s at `priority`, ready
 * at its push from inside the op running innermost here, is to run right
 * here, inside the push (vf__exec_worker_runs_child); else NULL. */
static inline vf__worker *vf__exec_child_runner(const vf__opdef *def,
                                                int priority)
{
    vf__worker *w = vf__this_worker();
    return vf__exec_worker_runs_child(w, def, priority) ? w : NULL;
}

/* Run a child with no vars on `w`, the runner vf__exec_child_runner
 * gave, inside its push and all of its life there: a sync user op, not
 * observed (hooks 0), with its parent's run's family (no reference of its
 * own) and its place in push order to take when it needs one (push.h:
 * vf__push_place_of), but not queued nor counted, for it runs and
 * finishes within its parent's run and counts (push.c:
 * push_child_alone). A failure goes to its parent's family, as a queued
 * child's would. Its block is the caller's to keep (vf__op_on_stack). */
void vf__exec_run_child_alone(vf__worker *w, vf__op *op);

/* Dispatch ops made ready, whose `active` count the caller took: pool ops
 * to their pools, inline ones run here (through the trampoline inside an
 * inline run). */
void vf__exec_dispatch_ready(vf__readylist *ready);

/* Run the `n` nodes of a replay (graph.h) here, now, one after the other
 * (the naive engine: graph.c), from node `from`, node i at place `base` +
 * i, the first with the active count the caller passes (the launch op's,
 * or a rest op's that resumes the run), each of the others taking the one
 * before it's, their pending counts taken by the caller; the ops they make
 * ready are dispatched (inline ones through the trampoline). Before a node
 * whose vars wait for a predecessor's children (vf__graph_in_order_waits),
 * the run stops, the active count let go. The last node's end may end the
 * launch: nothing of `ops` is read after it. */
void vf__exec_run_in_order(vf__op *const *ops, uint32_t n, uint64_t base,
                           uint32_t from);

/* Worker loop step: run `op` (from the worker's pool) and finish it, return
 * the op the same worker should run next (or NULL). */
vf__op *vf__exec_worker_execute(vf__worker *w, vf__op *op);

/* vf__exec_worker_execute for a push at the in-flight bound from inside an
 * op, which runs `op` above it (push.c: admit_slow): the pushing op goes on
 * only once `op` is over, as a nested waiter does, so it lends `op` its
 * `active` count meanwhile (the same step that counts `op` out counts the
 * pusher back in; when `op` is still in flight as its run returns, async
 * or on a device, the pusher counts itself back in then). A wait in `op`
 * that can never finish then finds the engine stuck, as it would below a
 * nested wait (a pusher counted active kept it from ever seeing that:
 * the program hung). */
vf__op *vf__exec_worker_execute_lent(vf__worker *w, vf__op *op);

/* Whether `op` descends from the op whose family is `f` (NULL: none):
 * what may run above that op's wait, or its push at the in-flight bound
 * (family.h: vf__family_within). */
static inline bool vf__exec_descends(const vf__op *op, const vf__family *f)
{
    return f != NULL && op->up != NULL && vf__family_within(op->up, f);
}

/* vf__exec_descends as a pool's test of what a waiter takes (sched.h:
 * vf__pool_fits), the family its argument. */
bool vf__exec_descends_fits(const vf__op *op, const void *family);

/* Run one op that an inline run on this thread deferred. True if one ran.
 * `lender`: the engine of an op of which this thread pushes at the
 * in-flight bound (push.c: admit_slow), which lends an op of that engine
 * its active count, as vf__exec_worker_execute_lent does; NULL: none (a
 * wait from outside the ops). */
bool vf__exec_run_deferred(vf_engine *lender);

/* The same from the frame of the innermost hold on this thread (exec.h:
 * vf__exec_hold), which may also take from its op's run. */
bool vf__exec_run_held(vf_engine *lender);

/* A thread outside the engine's ops waiting for it (vf_engine_wait_all) runs a
 * queued op of the CPU pool itself, and then each op that one makes ready
 * on that pool, first of its list (a chain stays on this thread), instead
 * of sleeping beside busy workers, until `until` passes (NULL: none): the
 * op it would run next then goes to the pool. With a deadline, none on an
 * engine with devices. False when it took none. */
bool vf__exec_help_run(vf_engine *e, const struct vf__deadline *until);

/* Dispatch a replay's nodes made ready at its start (graph.c): each to its
 * home worker, where it has one; the rest as vf__exec_dispatch_ready. */
void vf__exec_dispatch_nodes(vf__readylist *ready);

/* A nested wait loop: entering makes `w` this thread's innermost loop
 * waiter (saving the outer one), leaving restores it. (A child run at
 * its push saves the op above in one too: exec.c.) */
typedef struct vf__exec_loop_frame {
    vf__waiter *waiter;
    const vf__op *out_op;
    vf__op *op;
    bool lent;
    bool counted;             /* a child's: its pusher was lent (exec.c) */
    vf__prof_stretch pushing; /* a child's: its pusher's time in it */
} vf__exec_loop_frame;

void vf__exec_loop_enter(vf__waiter *w, vf__exec_loop_frame *saved);
void vf__exec_loop_leave(const vf__exec_loop_frame *saved);

/* An op lets go of its vars while its work is still in flight (a device
 * op, device_ops.c): when the innermost nested wait loop on this thread
 * runs it, its waiter is on top of the thread again. Returns what to add
 * to `counts` for that waiter, in the same step as the ops the release
 * made ready (VF__COUNT_ACTIVE when its marker fired meanwhile); 0 for
 * any other op. */
uint64_t vf__exec_loop_op_released(const vf__op *op);

/* From a nested wait loop (w IDLE): run one deferred op, or one op of the
 * worker's pool (`me` may be NULL) with its hand-off chain, above the wait,
 * keeping w's state exact (vf__waiter). A pool op runs there only when
 * the waiting op pushed it, and while the stack has room (`*room`:
 * VF__WAIT_CHILD_EIGHTHS, measured by a wait's first call, -1 until then,
 * here where the ops are taken, and kept for the rest of the wait, which
 * sleeps alone without it: measured at every look, and by the wait in
 * its own frame, the two disagreed when the line fell between them, and
 * the waiter refused its own child, sleeping as a refuser); with `any`,
 * while the stack has room, any op of the pool the worker may take
 * (wait.c: when nobody else ever will).
 * A deferred op, which only this thread runs, too runs only while the
 * stack has room (`*room`: the wait's marker, made ready by a child that
 * ran above the wait, was refused here as the child had not been); so
 * does, when none is, an
 * inline op made ready with an op running on this thread, of w's engine
 * and before the wait in push order (unless `any`).
 * VF__LOOP_RAN, VF__LOOP_NOTHING, VF__LOOP_REFUSED when the pool holds
 * ops, but none this stack may take (the waiter then sleeps beside them,
 * wait.c), VF__LOOP_NO_STACK when a deferred op waits and the stack is
 * full, or VF__LOOP_HELD when only inline ops made ready with an op
 * running here, after the wait, wait. */
#define VF__LOOP_NOTHING 0       /* nothing to run */
#define VF__LOOP_RAN 1           /* it ran one (or gave one back: look again) */
#define VF__LOOP_REFUSED 2       /* the pool has queued ops it will not run */
#define VF__LOOP_NO_STACK 3      /* a deferred op waits: no stack left for it */
#define VF__LOOP_HELD 4          /* ops made ready with one running here wait */
#define VF__LOOP_REFUSED_AGAIN 5 /* REFUSED, the pool's queues unchanged */
int vf__exec_loop_run_one(vf__waiter *w, vf__worker *me, bool any, int *room);

/* How many ready ops only this thread runs (inline ops deferred above an
 * inline run, held ones, and those of `e` made ready with an op running
 * here): no other thread runs them. */
int vf__exec_local_count(const vf_engine *e);

/*
 * A hold: a frame of this thread where an op of `engine` stands still (a
 * nested wait, a wait on another engine, a push at the in-flight bound)
 * while the thread runs ready ops above it that only it runs (those it
 * deferred, and under a hold those of the run of inline ops made ready
 * together with the op). Of `engine`, only an op that descends from the
 * op whose family is `family`, or comes before `key` in push order
 * (failure.h: vf__wait_key), or runs none of the program's code, runs
 * there: the serial program runs any other after the op, and it could
 * wait for it (VF_EDEADLK where the serial program gets 0; found by the
 * second reviewer of the waits inside inline ops). The others move to
 * the hold as they are found (those of a run of inline ops begun above
 * it too: exec.c, run_inline_list), and go back to their lists, first
 * and in order, when it is left: the thread runs them once the op goes
 * on. Holds nest, innermost first; a wait's `any` (wait.c) takes held ops
 * too.
 */
typedef struct vf__exec_hold {
    const vf_engine *engine;
    vf__wait_key key;
    const vf__family *family;
    /* The run of inline ops made ready together on this thread when the
     * hold began (tls.siblings), whose ops it takes and holds; NULL:
     * none. A run begun above the hold is that run's alone. */
    vf__readylist *run;
    /* Later deferred ops are held too. Not by a wait on another engine:
     * that engine's op may need one (it has no forced run to end such a
     * wait, found by the reviewer of the holds: it hung), and the serial
     * order across engines is the pushes' order in time. */
    bool deferred_too;
    vf__readylist deferred; /* held deferred ops, of `engine` */
    vf__readylist siblings; /* held ops of `run`, of `engine` */
    struct vf__exec_hold *outer;
} vf__exec_hold;

void vf__exec_hold_enter(vf__exec_hold *h, const vf_engine *e, vf__wait_key key,
                         const vf__family *family, bool deferred_too);
/* A hold for the op running on this thread, at this point of it. */
void vf__exec_hold_here(vf__exec_hold *h, bool deferred_too);
void vf__exec_hold_leave(vf__exec_hold *h);

#endif /* VF_EXEC_H */
