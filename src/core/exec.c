/* exec.c: dispatching, running and finishing ops (see exec.h). */
#include "core/exec.h"

#include "base/deadline.h"
#include "base/stack.h"
#include "core/async.h"
#include "core/bulk.h"
#include "core/fences.h"
#include "core/graph.h"
#include "core/profiling.h"
#include "core/push.h"
#include "core/run.h"
#include "core/wait.h"

typedef struct exec_tls {
    int inline_depth;        /* > 0 while an inline run is on the stack */
    vf__readylist deferred;  /* ready inline ops waiting for the trampoline */
    vf__waiter *loop_waiter; /* innermost nested wait loop on this thread */
    /* The op the innermost frame that counts one out of `active` counts
     * out: the op waiting in a nested wait loop, or the pusher of a child
     * run at its push (lend_active); NULL: none. */
    const vf__op *out_op;
    /* The ops still to run of the run of inline ops made ready together
     * that runs on this thread (run_inline_list), or NULL. */
    vf__readylist *siblings;
    vf__exec_hold *hold; /* innermost hold on this thread, or NULL */
    /* The op running above a frame of this thread that waits for it to
     * return, or NULL: the one that loop runs right now, or, when
     * `loop_lent`, a child running at its own push above the op that
     * pushed it, which lent it its `active` count (lend_active). */
    vf__op *loop_op;
    bool loop_lent;
    const vf_engine *done_engine; /* whose `done` callback runs, or NULL */
    const vf__op *done_over;      /* the op running under that callback */
    const vf_engine *work_engine; /* whose device work runs, or NULL */
    bool service; /* vf_thread_set_service(): it runs no async start */
    /* The engine's completer (completer.c): it runs no async start either,
     * as only it resolves the fences such a start would wait for. */
    bool completer;
    /* > 0 while deferred ops run with no op under them (a worker's idle
     * loop, a thread outside ops): a worker's engine then has no op
     * running under them (vf__exec_bare). */
    int bare;
} exec_tls;

static _Thread_local exec_tls tls;

vf_engine *vf__exec_current_engine(void)
{
    vf__op *op = vf__current_op();
    return op ? vf__op_engine(op) : NULL;
}

bool vf__exec_in_done(const vf_engine *e)
{
    return tls.done_engine == e;
}

int vf__exec_done_here(const vf_engine *e, const vf__op *op)
{
    if (VF__LIKELY(tls.done_engine == NULL))
        return VF__DONE_NONE;
    if (tls.done_engine == e)
        return VF__DONE_OF_ENGINE;
    return tls.done_over == op ? VF__DONE_ABOVE : VF__DONE_NONE;
}

bool vf__exec_op_innermost(const vf__op *op)
{
    return op != NULL && (tls.done_engine == NULL || tls.done_over != op);
}

bool vf__exec_counted_out(const vf__op *op)
{
    return op != NULL && tls.out_op == op;
}

/* Whether an op of `e` stands still further down this thread, in a hold
 * (a nested wait, a push at the bound, a wait on another engine). */
static bool stands_below(const vf_engine *e)
{
    for (const vf__exec_hold *h = tls.hold; h != NULL; h = h->outer)
        if (h->engine == e)
            return true;
    return false;
}

bool vf__exec_in_engine(const vf_engine *e)
{
    vf__op *op = vf__current_op();
    if ((op != NULL && vf__op_engine(op) == e) || tls.done_engine == e ||
        tls.work_engine == e)
        return true;
    vf__worker *w = vf__this_worker();
    if (w != NULL && w->pool->engine == e)
        return true;
    /* An op of e's further out, around an op of another engine it ran
     * inline (the naive engine's push): user code runs inside a call on e
     * only as e's (found trying two naive engines as a user: a stop from
     * there hung, and vf_engine_in_op said false). Or one standing still
     * further down, whose hold runs ops above it: a call on e made there
     * shows as one with the call on e it is in, which is not further out
     * (found by the reviewer of the holds: a push at e's bound from there
     * blocked for ever on the room the op below held, and
     * vf_engine_in_op said false). */
    return vf__guard_in_outer_call(e) || stands_below(e);
}

VF_API void vf_thread_set_service(bool on)
{
    tls.service = on;
}

bool vf__exec_on_service_thread(void)
{
    return tls.service;
}

void vf__exec_mark_completer(void)
{
    tls.completer = true;
}

int vf__exec_device_work(const void *engine, vf_device_fn fn, void *arg)
{
    const vf_engine *outer = tls.work_engine;
    tls.work_engine = engine;
    int rc = fn(arg);
    tls.work_engine = outer;
    return rc;
}

bool vf__exec_in_device_work(void)
{
    return tls.work_engine != NULL;
}

bool vf__exec_at_top(void)
{
    return vf__current_op() == NULL && tls.done_engine == NULL &&
           tls.work_engine == NULL;
}

int vf__exec_refuse_in_device_work(const char *who)
{
    if (VF__LIKELY(tls.work_engine == NULL))
        return 0;
    return vf__fail(VF_EDEADLK,
                    "%s: called from device work (a function given to "
                    "vf_run_submit), which runs on a device stream inside "
                    "its op: neither that op nor the work queued behind it "
                    "on the stream can go on before it returns (push a "
                    "follow-up op instead)",
                    who);
}

/* Call an op's `done`, marking the thread as in the engine's code. */
void vf__exec_call_done(const vf_engine *e, vf_done_fn done, void *arg,
                        int status)
{
    /* In a child forked inside the op, whose run goes on in the parent
     * (the op's return there finishes it: run_body). */
    if (VF__UNLIKELY(atomic_load_explicit(&e->slow, memory_order_relaxed) &
                     VF__SLOW_FORK_DEAD))
        return;
    const vf_engine *outer = tls.done_engine;
    const vf__op *outer_over = tls.done_over;
    tls.done_engine = e;
    tls.done_over = vf__current_op();
    done(arg, status);
    tls.done_engine = outer;
    tls.done_over = outer_over;
}

/* Out of line: inlined, it grew every finish by a few instructions (4 per
 * op of callgrind's W1, naive engine), though most ops have no `done`. */
static __attribute__((noinline)) void call_done(vf__op *op)
{
    vf__exec_call_done(vf__op_engine(op), op->done, op->arg, op->status);
}

/* An async op's side block: the message vf_run_set_error left before its
 * vf_completion_finish. */
static void free_pending_message(vf__op *op)
{
    if (op->def->async)
        free(vf__async_take_message(op));
}

/* A user op: vf_engine_push or an operator push. Its body is run_body's own. */
const vf__op_kind vf__kind_user = {
    .name = "user",
    .free_side = free_pending_message,
    .flags = VF__KIND_OBSERVED | VF__KIND_COUNTED | VF__KIND_NUMBERED |
             VF__KIND_HELD | VF__KIND_BUMPS};

/* --- running ----------------------------------------------------------- */

/* Of `best` and the failure var v holds, the one the op at `place` under
 * `up` inherits: live for it, and first in push order (failure.h). Read by
 * an op that holds the var, so no write of it races. In an engine with
 * `devices`, v's last device write may have failed after it released v
 * (device_ops.h). */
static vf__failure *earlier_live(vf_engine *e, vf__failure *best, vf__var *v,
                                 const vf__family *up, uint64_t place,
                                 bool devices)
{
    vf__failure *f = atomic_load_explicit(&v->failure, memory_order_acquire);
    if (VF__UNLIKELY(devices))
        f = vf__fences_var_failure(
            e, v, f, f != NULL && vf__failure_live_for(f, up, place));
    if (VF__LIKELY(f == NULL) || !vf__failure_live_for(f, up, place))
        return best;
    return vf__failure_before(f, best) ? f : best;
}

/* The failure the op at `place` under `up` inherits from the vars it
 * holds, or, when `refs` is not NULL, from those of them a fused op's item
 * names (bulk.h): of the live ones, the first in push order, as in the
 * serial program; NULL when there is none. */
vf__failure *vf__exec_inherited_failure(vf__op *op, const uint32_t *refs,
                                        int nrefs, const vf__family *up,
                                        uint64_t place, bool devices)
{
    vf__failure *f = NULL;
    if (refs == NULL)
        for (int i = 0; i < op->nvars; i++)
            f = earlier_live(vf__op_engine(op), f,
                             vf__dep_var(vf__op_dep(op, i)), up, place,
                             devices);
    else
        for (int r = 0; r < nrefs; r++)
            f = earlier_live(vf__op_engine(op), f,
                             vf__dep_var(vf__op_dep(op, (int)(refs[r] >> 1))),
                             up, place, devices);
    return f;
}

/* The op failed with `code` (its function's return, or its completion's):
 * a new failure record at its place. */
void vf__exec_op_failed(vf__op *op, int code, const char *message)
{
    op->status = code;
    op->failure = vf__engine_record_failure(vf__op_engine(op), code, op->name,
                                            message, vf__push_place_of(op),
                                            op->up);
}

void vf__exec_writes_skipped(vf__op *op, vf__failure *f)
{
    for (int i = 0; i < op->nvars; i++) {
        if (!vf__dep_write(vf__op_dep(op, i)))
            continue;
        vf__var *v = vf__dep_var(vf__op_dep(op, i));
        if (f != NULL)
            vf__var_write_skipped(v, f, op->up, op->place);
        else /* the notice's */
            atomic_store_explicit(&v->notice_skipped, true,
                                  memory_order_relaxed);
    }
}

void vf__exec_op_skipped(vf__op *op, vf__failure *f)
{
    if (f != NULL)
        vf__failure_ref(f);
    vf__exec_writes_skipped(op, f);
    op->failure = f;
    op->status = VF_ESKIPPED;
    op->skipped = true;
}

/* What a user op's function is told of its run (`run`'s message buffer is
 * left as it is: 256 bytes; vf__exec_call_fn clears what it needs). */
static inline void run_init(vf_run *run, vf__op *op, int worker)
{
    run->op = op;
    run->name = op->name;
    run->worker = worker;
    run->cls = NULL;
    run->stream = NULL;
    run->item_refs = NULL;
}

void vf__exec_run_fn(vf__op *op, int worker)
{
    vf_run run;
    run_init(&run, op, worker);
    vf__exec_call_fn(op, &run);
}

/*
 * An async op may be completed before its function returns (the function,
 * or a thread it waits for, calls its completion). The op has finished
 * then (done called, vars released, pending counted out), but the call
 * still runs: it reads the block (a copied argument, its run handle), and
 * it may push and wait, so it stays active for the engine's counts (a
 * wait inside it takes its own op's active count out, as any nested wait
 * does: without it the count would be one short, and waits anywhere
 * would see the engine stuck, a false VF_EDEADLK). So the finish that
 * comes while the call runs leaves the op's active count and its block to
 * the call, which gives them back when it returns. The two agree through
 * the block's `wait` (free since the op became ready; 0 when its function
 * never started). The finish's hand-over comes after its counts step, so
 * the active count never goes before the pending one.
 */
/* The states of `wait` while the call runs or after:
 * - ASYNC_CALL: the call runs, the op not finished;
 * - ASYNC_LEFT: the call returned first: the finish owns all;
 * - ASYNC_FINISHING: a finish began while the call ran;
 * - ASYNC_LEFT_LATE: the call returned during that finish, which counts
 *   the op's active out and frees the block;
 * - ASYNC_HANDED: the finish ended while the call ran: the call counts the
 *   active out and frees the block when it returns. */
#define ASYNC_CALL 1
#define ASYNC_LEFT 2
#define ASYNC_FINISHING 3
#define ASYNC_LEFT_LATE 4
#define ASYNC_HANDED 5

/* A finish begins: true when the call still runs (it keeps the op's
 * active count); false when the function never started or returned. */
static inline bool async_finish_begins(vf__op *op)
{
    int s = ASYNC_CALL;
    return atomic_compare_exchange_strong_explicit(
        &op->wait, &s, ASYNC_FINISHING, memory_order_acq_rel,
        memory_order_acquire);
}

/* The finish that began while the call ran is done with the op: true when
 * the call still runs and now owns the op's active count and block; false
 * when it returned meanwhile (the finish owns them). acq_rel: the last
 * owner sees the other's writes to the block. */
static inline bool async_finish_hands_over(vf__op *op)
{
    int s = ASYNC_FINISHING;
    return atomic_compare_exchange_strong_explicit(&op->wait, &s, ASYNC_HANDED,
                                                   memory_order_acq_rel,
                                                   memory_order_acquire);
}

/* The call returned: true when it owns the op's active count and block
 * (a finish handed them over); false when a finish is to come or under
 * way (it will take them). */
static inline bool async_call_returns(vf__op *op)
{
    int s = atomic_load_explicit(&op->wait, memory_order_acquire);
    for (;;) {
        if (s == ASYNC_HANDED)
            return true;
        VF__ASSERT(s == ASYNC_CALL || s == ASYNC_FINISHING);
        int to = s == ASYNC_CALL ? ASYNC_LEFT : ASYNC_LEFT_LATE;
        if (atomic_compare_exchange_weak_explicit(
                &op->wait, &s, to, memory_order_acq_rel, memory_order_acquire))
            return false;
    }
}

bool vf__exec_async_finished(const vf__op *op)
{
    if (!op->def->async)
        return false;
    int s = atomic_load_explicit(&op->wait, memory_order_acquire);
    return s == ASYNC_FINISHING || s == ASYNC_HANDED;
}

/* The call that a finish handed the op over to returned: the op's active
 * count goes, and its block. */
static __attribute__((noinline)) void async_call_ends_op(vf__op *op)
{
    vf_engine *e = vf__op_engine(op);
    unsigned wake = vf__engine_count_out(e, VF__COUNT_ACTIVE, true);
    vf__op_free(op);
    if (wake != 0)
        vf__engine_wake(e, wake);
}

static void loop_op_returned(vf_engine *e, const vf__op *op);

/* The async op's function returned with the op in flight or finished. A
 * nested wait loop ran it (tls.loop_op): its waiter is on top of the
 * thread again, and is counted back in first (when its marker fired
 * meanwhile), while the op still holds its active count. Only then does
 * the call say it returned, which lets a finish on another thread count
 * the op out at once: counted in after that, the waiter left `active` at
 * zero in between, and a waiter on a third thread gave up for a deadlock
 * that was none (a false VF_EDEADLK; found by the reviewer of the nested
 * waiters' wake-ups, first with the finish handing over (fixed, counted
 * in one step), then with a finish under way as the function returned,
 * and as it began just after; model/async.pml checks every order). */
static void async_call_returned(vf__op *op)
{
    /* Its engine read while no finish frees it yet (still CALL or
     * FINISHING). */
    loop_op_returned(vf__op_engine(op), op);
    if (VF__UNLIKELY(async_call_returns(op)))
        async_call_ends_op(op);
}

/* An op of an engine that runs nothing in this process: a child forked
 * from inside an op of it, whose thread, returned from that op, would run
 * the ops it made ready, the ops made ready with it and those queued (the
 * parent runs them; found by the second reviewer of the waits inside
 * inline ops). The op stays as if in flight; a worker's thread ends, as
 * its pool is gone here. */
static __attribute__((noinline, cold)) bool fork_dead_run(void)
{
    if (vf__this_worker() != NULL)
        pthread_exit(NULL);
    return false;
}

void vf__exec_fork_dead_returned(void)
{
    (void)fork_dead_run();
}

/* Run the op's body. True when the op is done now (ran, failed, skipped);
 * false when an async op or a device op's work is in flight (the op may
 * already be freed). */
static bool run_body(vf__op *op, int worker)
{
    const vf__opdef *def = op->def;
    op->status = 0;
    /* An engine with devices: a host-side op first meets the device work
     * its vars wait for (device_ops.h); then the vars it writes take over
     * their fences' failures, before anything of its own is written. A
     * device op meets them in its own body. */
    uint8_t slow = atomic_load_explicit(&vf__op_engine(op)->slow,
                                        memory_order_relaxed);
    if (VF__UNLIKELY(slow & VF__SLOW_DEVICES) &&
        !(def->kind->flags & VF__KIND_OWN_FENCES)) {
        vf__fences_host_wait(op);
        vf__fences_clear_written(op);
    }
    /* Its run starts now: the wait for device work above is waiting, which
     * a profile does not count in the op's length (PROFILING.md). */
    if (VF__UNLIKELY(op->hooks))
        vf__profiling_op_start(op, worker);
    /* The other kinds run their own bodies (op.h). */
    if (VF__UNLIKELY(def->kind->run != NULL))
        return def->kind->run(op, worker, slow & VF__SLOW_SHUTDOWN);
    /* The shutdown notice: user ops skip their function (lifecycle.h),
     * with no failure to pass on. */
    if (VF__UNLIKELY(slow & VF__SLOW_SHUTDOWN)) {
        if (slow & VF__SLOW_FORK_DEAD) /* with SHUTDOWN: no cost here */
            return fork_dead_run();
        vf__exec_op_skipped(op, NULL);
        return true;
    }
    if ((slow & VF__SLOW_MAY_INHERIT) && !def->no_skip && op->nvars != 0) {
        vf__failure *f = vf__exec_inherited_failure(
            op, NULL, 0, op->up, op->place, slow & VF__SLOW_DEVICES);
        if (VF__UNLIKELY(f != NULL)) {
            vf__exec_op_skipped(op, f);
            return true;
        }
    }
    vf_run run;
    run_init(&run, op, worker);
    if (!def->async) {
        vf__exec_call_fn(op, &run);
        return true;
    }
    run.message[0] = '\0';
    /* Before the completion handle is made: whoever gets the handle sees
     * the call's state (ASYNC_CALL above). Async ops are never replayed
     * (graph.c), so `wait` is the op's own. */
    VF__ASSERT(!(def->kind->flags & VF__KIND_GRAPH));
    atomic_store_explicit(&op->wait, ASYNC_CALL, memory_order_relaxed);
    vf_completion done;
    if (VF__UNLIKELY(vf__async_completion(op, &done) != 0)) {
        atomic_store_explicit(&op->wait, 0, memory_order_relaxed);
        vf__exec_op_failed(op, VF_ENOMEM,
                           "out of memory for its completion handle");
        return true; /* its function never started */
    }
    /* In flight until vf_completion_finish. */
    vf_engine *e = vf__op_engine(op);
    vf__async_started(&e->async, op);
    vf__running outer;
    op->run = &run;
    vf__running_enter(&outer, op);
    op->async_fn(&run, op->arg, done);
    /* The op may be finished, even freed, by its completion already: the
     * engine says whether this is a child forked from inside it. */
    bool dead = atomic_load_explicit(&e->slow, memory_order_relaxed) &
                VF__SLOW_FORK_DEAD;
    if (VF__UNLIKELY(dead))
        vf__exec_fork_dead_returned();
    vf__running_leave(&outer);
    async_call_returned(op);
    /* The engine's last touch here. Not in such a child, where nothing
     * waits for the count, and the list's lock may be one a thread of the
     * parent held at the fork (a forked child's return hung on it: found
     * by the reviewer of the count). */
    if (VF__LIKELY(!dead))
        vf__async_call_over(&e->async);
    return false;
}

/* --- finishing --------------------------------------------------------- */

/* Count a user op's outcome (ran, failed, or skipped by the engine: an
 * op whose function returned VF_ESKIPPED ran and failed): in the counters
 * of `mine`, the engine's worker on this thread (not a spare), or, when
 * NULL, in the engine's. */
static inline void count_outcome(vf_engine *e, vf__worker *mine, int status,
                                 bool skipped)
{
    _Atomic uint64_t *slot;
    if (skipped)
        slot = mine ? &mine->skipped : &e->skipped;
    else if (status == 0)
        slot = mine ? &mine->ran : &e->ran;
    else
        slot = mine ? &mine->failed : &e->failed;
    if (mine) /* only this worker writes its own: no locked add */
        atomic_store_explicit(
            slot, atomic_load_explicit(slot, memory_order_relaxed) + 1,
            memory_order_relaxed);
    else
        atomic_fetch_add_explicit(slot, 1, memory_order_relaxed);
}

void vf__exec_count_outcome(vf_engine *e, int status, bool skipped)
{
    vf__worker *w = vf__this_worker();
    count_outcome(e, w && w->pool->engine == e && !w->spare ? w : NULL, status,
                  skipped);
}

/* The op run by the innermost nested wait loop on this thread returns: its
 * waiter is on top of the thread again. Returns what to add to `active` of
 * `e`, the returning op's engine, for the waiter: one when its marker
 * fired meanwhile (DONE_UNCOUNTED), counted in the same step as the op's
 * own counts. A waiter of another engine (its loop ran another engine's
 * deferred op) is counted back in its own engine here, and 0 returned:
 * added to `e`, the count went to the wrong engine, whose active count
 * then never fell to zero, and the waiter's engine's fell below it (its
 * pending count read 2^32 - 1 and wait_all hung: found trying ops of two
 * engines that wait on each other's as a user). Or the child run at its
 * push returns: one for its pusher (loop_lent), of its engine. */
static uint64_t loop_frame_returns(vf_engine *e)
{
    vf__waiter *w = tls.loop_waiter;
    tls.loop_op = NULL;
    if (tls.loop_lent)
        return VF__COUNT_ACTIVE; /* its pusher resumes: the same step */
    for (;;) {
        int s = atomic_load(&w->state);
        if (s == VF__W_BUSY) {
            if (atomic_compare_exchange_weak(&w->state, &s, VF__W_IDLE))
                return 0;
        } else if (s == VF__W_SIGNALING) {
            vf__cpu_relax();
        } else {
            VF__ASSERT(s == VF__W_DONE_UNCOUNTED);
            atomic_store(&w->state, VF__W_DONE);
            if (VF__UNLIKELY(w->engine != e)) {
                vf__engine_count_in(w->engine, VF__COUNT_ACTIVE);
                return 0;
            }
            return VF__COUNT_ACTIVE;
        }
    }
}

/* The run of `op`, which this thread's loop frame names (tls.loop_op),
 * returned with `op` still in flight (on a device, or async: its call
 * before it says it returned, async_call_returned): the frame's count
 * comes back now, as its finish would have given it. */
static void loop_op_returned(vf_engine *e, const vf__op *op)
{
    if (tls.loop_op == op) {
        uint64_t extra = loop_frame_returns(e);
        if (extra)
            vf__engine_count_in(e, extra);
    }
}

uint64_t vf__exec_loop_op_released(const vf__op *op)
{
    return VF__UNLIKELY(op == tls.loop_op)
               ? loop_frame_returns(vf__op_engine(op))
               : 0;
}

/* The counts' step of a finish: `pending` (VF__COUNT_PENDING times the
 * ops finishing here: one, or a run of a replay's nodes) goes out, and the
 * ops the last of them made ready (`act`: their number times
 * VF__COUNT_ACTIVE, already taken) become active in the same step as it
 * stops being active (see engine.h): with m >= 1 of them, m - 1 more
 * active; with none, one fewer. `watch`: look for a watcher to wake when
 * a count may have reached zero (vf__engine_count_out's may_zero), which
 * sums every thread's counts. Returns what to wake. */
static inline unsigned count_finished(vf_engine *e, uint64_t pending,
                                      uint64_t act, bool watch)
{
    if (act > VF__COUNT_ACTIVE)
        vf__engine_count_in(e, act - VF__COUNT_ACTIVE);
    return vf__engine_count_out(
        e, act != 0 ? pending : pending | VF__COUNT_ACTIVE, watch && act == 0);
}

/* Finish a done op: callback, release its vars (ready ops go to `ready`,
 * already counted active), count it out, free it. */
static void finish(vf__op *op, vf__readylist *ready)
{
    vf_engine *e = vf__op_engine(op);
    const vf__opdef *def = op->def;
    if (VF__UNLIKELY(op->hooks)) {
        if (op->hooks & VF__HOOK_FORK_DEAD)
            return; /* as if in flight: its run goes on in the parent */
        vf__profiling_op_end(op);
    }
    if (op->done != NULL) {
        call_done(op);
        /* A child forked from inside the `done`: its thread here must not
         * finish the op (found by a reviewer: it hung on a var's lock). */
        if (VF__UNLIKELY(atomic_load_explicit(&e->slow, memory_order_relaxed) &
                         VF__SLOW_FORK_DEAD)) {
            (void)fork_dead_run();
            return;
        }
    }
    vf__exec_count_op(e, op);
    if (VF__UNLIKELY(def->async)) /* counted in at its push */
        atomic_fetch_sub_explicit(&e->async_unfinished, 1,
                                  memory_order_relaxed);

    uint16_t kflags = def->kind->flags;
    bool ran = !op->skipped && (kflags & VF__KIND_BUMPS);
    int before = ready->count;
    if (VF__LIKELY(!(kflags & (VF__KIND_GRAPH | VF__KIND_OWN_RELEASE)))) {
        for (int i = 0; i < op->nvars; i++) {
            const vf__dep *d = vf__op_dep(op, i);
            if (vf__dep_write(d))
                vf__var_complete_write(vf__dep_var(d), op, op->failure, ran,
                                       ready);
            else
                vf__var_complete_read(vf__dep_var(d), op, ready);
        }
    } else if (kflags & VF__KIND_GRAPH) {
        /* never queued on its vars */
        vf__graph_op_finished(op, op->graph->in_order, ready);
    } else {
        def->kind->release_vars(op, ready);
    }
    if (VF__UNLIKELY(def->kind->finished != NULL))
        def->kind->finished(op);
    /* A child: its parent may wait (a device op in flight tells it from
     * vf__device_op_completed, which keeps this order too). */
    if (VF__UNLIKELY(op->up != NULL))
        vf__wait_child_finished(e, op);
    if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF))
        vf__profiling_op_record(op); /* before the engine may go */

    /* The newly ready ops become active in the same step as this one stops
     * being active (count_finished). */
    uint64_t act = (uint64_t)(ready->count - before) * VF__COUNT_ACTIVE;
    if (VF__UNLIKELY(op == tls.loop_op))
        act += loop_frame_returns(e); /* same step: no transient zero */
    unsigned wake;
    if (VF__UNLIKELY(def->async) && async_finish_begins(op)) {
        /* Its function still runs: it keeps the op's active count (see
         * ASYNC_CALL), unless it returns before the hand-over. */
        if (act != 0)
            vf__engine_count_in(e, act);
        wake = vf__engine_count_out(e, VF__COUNT_PENDING, act == 0);
        if (async_finish_hands_over(op)) {
            if (wake != 0)
                vf__engine_wake(e, wake);
            return; /* the block is the call's now */
        }
        wake |= vf__engine_count_out(e, VF__COUNT_ACTIVE, true);
    } else {
        wake = count_finished(e, VF__COUNT_PENDING, act, true);
    }
    if (VF__UNLIKELY(kflags & VF__KIND_GRAPH)) {
        /* Its launch keeps the engine alive until this returns; its end
         * may be the engine's last touch. */
        if (wake != 0)
            vf__engine_wake(e, wake);
        vf__graph_op_done(op);
        return;
    }
    vf__op_free(op);
    if (VF__UNLIKELY(wake != 0))
        vf__engine_wake(e, wake);
}

/* --- dispatching ------------------------------------------------------- */

/* Ready ops bound for pools, gathered per pool and handed over together
 * (vf__pool_submit_list: one compare-and-swap and one wake check per pool,
 * not per op), each pool's in arrival order. One finish nearly always
 * readies ops of one pool, rarely of a few; a pool beyond BATCH_POOLS
 * hands over those gathered so far first (a later batch of a pool follows
 * its earlier one, so arrival order holds). */
#define BATCH_POOLS 4

typedef struct pool_batches {
    int n;
    vf__pool *pool[BATCH_POOLS];
    vf__readylist ops[BATCH_POOLS];
} pool_batches;

static void batches_submit(pool_batches *b)
{
    for (int i = 0; i < b->n; i++)
        vf__pool_submit_list(b->pool[i], &b->ops[i]);
    b->n = 0;
}

static void batches_add(pool_batches *b, vf__op *op)
{
    vf__pool *p = op->def->pool;
    int i = 0;
    while (i < b->n && b->pool[i] != p)
        i++;
    if (i == b->n) {
        if (i == BATCH_POOLS) {
            batches_submit(b);
            i = 0;
        }
        b->pool[i] = p;
        vf__readylist_init(&b->ops[i]);
        b->n = i + 1;
    }
    vf__readylist_add(&b->ops[i], op);
}

static void dispatch_list(vf__readylist *ready);

static void run_inline_one(vf__op *op)
{
    vf_engine *e = vf__op_engine(op);
    vf__worker *w = vf__this_worker();
    int worker = w && w->pool->engine == e ? w->index : -1;
    if (run_body(op, worker)) {
        vf__readylist ready;
        vf__readylist_init(&ready);
        finish(op, &ready);
        dispatch_list(&ready);
    }
}

/* A child runs at its push, above its parent on the same stack: the parent
 * can do nothing until the child returns, so it stops counting as active
 * (engine.h) and the child's finish counts it again in the same step
 * (finish: tls.loop_op, loop_lent). Otherwise a wait inside the child for
 * something that needs the parent to finish (a var the parent writes) would see
 * the parent active forever and hang, where the serial program's wait can never
 * finish: VF_EDEADLK. The child is active itself: no zero here. */
static inline __attribute__((always_inline)) void
lend_active(vf__op *op, vf__exec_loop_frame *saved)
{
    const vf__op *pusher = vf__current_op();
    /* The pusher's run holds the child's: not its own work. */
    vf__profiling_stretch_begin(pusher, &saved->pushing);
    /* Counted out already, further down (a `done` callback run above its
     * wait, or above a child it lent to, pushes it a child): lent twice,
     * its engine's count read one low while the child ran, and a wait
     * there got VF_EDEADLK (found by the reviewer of the nested waits'
     * counts). The child runs unlent: its finish gives nothing back. */
    saved->counted = pusher == NULL || tls.out_op != pusher;
    if (!saved->counted)
        return;
    vf__engine_count_out(vf__op_engine(op), VF__COUNT_ACTIVE, false);
    saved->op = tls.loop_op;
    saved->lent = tls.loop_lent;
    saved->out_op = tls.out_op;
    tls.loop_op = op;
    tls.loop_lent = true;
    tls.out_op = pusher;
}

/* The child lent to returned (its finish gave the count back). */
static inline __attribute__((always_inline)) void
lent_returned(const vf__exec_loop_frame *saved)
{
    vf__profiling_stretch_end(&saved->pushing);
    if (!saved->counted)
        return;
    tls.loop_op = saved->op;
    tls.loop_lent = saved->lent;
    tls.out_op = saved->out_op;
}

/* The run of `op`, lent its pusher's count (lend_active), returned: when
 * `op` is still in flight (async, or on a device), the pusher counts
 * itself back in now; else its finish did. */
static void lent_run_returned(vf_engine *e, const vf__op *op,
                              const vf__exec_loop_frame *saved)
{
    loop_op_returned(e, op);
    lent_returned(saved);
}

/* Whether `op`, ready at its push, is a child of the op running innermost
 * on this thread (not of another thread's op whose batch this thread
 * flushed): then, run here, it runs above its parent, which can lend it its
 * `active` count. */
static inline bool parent_runs_here(const vf__op *op)
{
    return op->nest != 0 && op->up != NULL && op->up == vf__running_now.family;
}

/* Whether async `op`, ready on this thread, starts on a worker of its CPU
 * pool rather than here: the start first waits on the host for the device
 * work its vars wait for (run_body), which this thread would hold up. Device
 * work (vf_run_submit()): that work may be queued behind this very work on
 * its stream, so never to start. The completer (a device op's `done`, or
 * a completion finished there): only it resolves the fence, so the wait
 * spun for ever (found by an auditor). A service thread: it finishes
 * completions for others and must never be held by an op. An engine without a
 * pool (the naive one) ends each device op with its work: no fence is pending
 * there. */
static inline bool starts_on_pool(const vf__op *op)
{
    return VF__UNLIKELY(op->def->async) &&
           (tls.work_engine != NULL || tls.service || tls.completer) &&
           op->def->pool != NULL;
}

/* Whether dispatch_some runs `op` on this thread (an inline op that does
 * not start on a pool): it may wait there, inside its function, for an op
 * made ready with it, which must not be held unqueued by this thread
 * meanwhile (vf__exec_worker_execute, vf__exec_help_run). */
static inline bool runs_here(const vf__op *op)
{
    return op->def->inline_run && !starts_on_pool(op);
}

static vf__op *deferred_filter(vf__op *op);

/* The next deferred op this thread may run here: under a hold that holds
 * them, one that may run above the hold's op (the others move to it:
 * deferred_filter). Inline: a trampoline with nothing deferred, or no
 * hold, pays a test. */
static inline vf__op *deferred_next(void)
{
    vf__op *op = vf__readylist_pop(&tls.deferred);
    if (VF__UNLIKELY(op != NULL && tls.hold != NULL))
        op = deferred_filter(op);
    return op;
}

static void run_inline(vf__op *op)
{
    if (tls.inline_depth > 0) {
        vf__readylist_add(&tls.deferred, op);
        return;
    }
    tls.inline_depth++;
    do {
        run_inline_one(op);
    } while ((op = deferred_next()) != NULL);
    tls.inline_depth--;
}

static void hold_later_of_run(vf__readylist *inl);

/* Run the inline ops one step made ready, `inl`, one after the other,
 * the rest visible meanwhile to a hold inside the one that runs (exec.h;
 * local_take): it may wait for one of them, pushed before it (the list's
 * order is the order they became ready in; found trying features
 * combined as a user: the first op a completion made ready waited for the
 * second, in this list, for ever). A later one runs after it, as in the
 * serial program, on this thread (vf_completion_finish(): an async op's
 * function runs on the thread that makes it ready). Such runs do not nest:
 * their ops run inside an inline run, where the ops made ready go to its
 * trampoline (tls.deferred). */
static void run_inline_list(vf__readylist *inl)
{
    if (tls.inline_depth > 0) { /* inside an inline run: its trampoline */
        vf__readylist_append(&tls.deferred, inl);
        return;
    }
    VF__ASSERT(tls.siblings == NULL);
    /* Begun above a hold (a pool op that an op's wait runs made them
     * ready): its later ops wait for the hold's op, as its deferred ones
     * do. */
    if (VF__UNLIKELY(tls.hold != NULL))
        hold_later_of_run(inl);
    tls.siblings = inl;
    vf__op *op;
    while ((op = vf__readylist_pop(inl)) != NULL)
        run_inline(op);
    tls.siblings = NULL;
}

/* --- holds ------------------------------------------------------------ */

/* Whether `op`, of the hold's engine, may run above its op (exec.h:
 * vf__exec_hold): one that runs none of the program's code (a wait's
 * marker, held with the later ops, kept the wait from ever returning), a
 * descendant of that op, or an op before its point in push order
 * (failure.h: vf__wait_key). */
static inline bool runs_above(const vf__op *op, const vf__exec_hold *h)
{
    return (op->def->kind->flags & VF__KIND_NO_CODE) ||
           vf__exec_descends(op, h->family) ||
           vf__wait_key_after(op->up, op->place, h->key.up, h->key.next,
                              h->key.self);
}

void vf__exec_hold_enter(vf__exec_hold *h, const vf_engine *e, vf__wait_key key,
                         const vf__family *family, bool deferred_too)
{
    h->engine = e;
    h->key = key;
    h->family = family;
    h->run = tls.siblings;
    h->deferred_too = deferred_too;
    vf__readylist_init(&h->deferred);
    vf__readylist_init(&h->siblings);
    h->outer = tls.hold;
    tls.hold = h;
}

void vf__exec_hold_here(vf__exec_hold *h, bool deferred_too)
{
    vf_engine *e = vf__op_engine(vf__current_op());
    vf__exec_hold_enter(h, e, vf__push_wait_key(e), vf__running_now.family,
                        deferred_too);
}

/* Put `from`'s ops before those of `to`, in order. */
static void list_prepend(vf__readylist *to, vf__readylist *from)
{
    vf__readylist_append(from, to);
    *to = *from;
    vf__readylist_init(from);
}

void vf__exec_hold_leave(vf__exec_hold *h)
{
    VF__ASSERT(tls.hold == h);
    tls.hold = h->outer;
    list_prepend(&tls.deferred, &h->deferred);
    if (h->siblings.head != NULL) /* within that run, which goes on */
        list_prepend(h->run, &h->siblings);
}

/* With nobody else to run them (wait.c: `any`): the first op held by a
 * hold of `h`'s engine, `h` first (the holds of other engines hold none
 * of its ops). */
static vf__op *held_take(vf__exec_hold *h, vf__readylist **from)
{
    for (vf__exec_hold *o = h; o != NULL; o = o->outer) {
        if (o->engine != h->engine)
            continue;
        vf__readylist *l = o->deferred.head != NULL ? &o->deferred
                                                    : &o->siblings;
        vf__op *op = vf__readylist_pop(l);
        if (op != NULL) {
            *from = l;
            return op;
        }
    }
    return NULL;
}

/* The first op of the run `rl` that is of h's engine and may run above
 * its op (`any`: whatever its place), unlinked; those of its engine that
 * may not move to the hold as they are met, once: no later look passes
 * them again (a scan of 20,000 held ops per look took seconds: found by
 * the second reviewer). Another engine's ops stay where they are: not
 * the hold's to take, they are the run's to run after the op. */
static vf__op *run_take(vf__exec_hold *h, vf__readylist *rl, bool any)
{
    vf__op *prev = NULL, *op = rl->head;
    while (op != NULL) {
        vf__op *next = op->next;
        if (vf__op_engine(op) != h->engine) {
            prev = op;
        } else if (any || runs_above(op, h)) {
            vf__readylist_unlink(rl, prev, op);
            return op;
        } else {
            vf__readylist_unlink(rl, prev, op);
            vf__readylist_add(&h->siblings, op);
        }
        op = next;
    }
    return NULL;
}

/* The hold that holds `op` back, from this thread's deferred ops or a run
 * begun above it, or NULL: the innermost of op's engine that holds
 * deferred ops, where `op` is later than its op. Not only the innermost
 * hold: one of another engine above it, or a wait on another engine from
 * an op above the outer one's, let a later op run above that op (found by
 * the reviewer of the holds). */
static vf__exec_hold *holder_of(const vf__op *op)
{
    const vf_engine *e = vf__op_engine(op);
    for (vf__exec_hold *h = tls.hold; h != NULL; h = h->outer)
        if (h->engine == e && h->deferred_too)
            return runs_above(op, h) ? NULL : h;
    return NULL;
}

static __attribute__((noinline)) vf__op *deferred_filter(vf__op *op)
{
    vf__exec_hold *h;
    while (op != NULL && (h = holder_of(op)) != NULL) {
        vf__readylist_add(&h->deferred, op);
        op = vf__readylist_pop(&tls.deferred);
    }
    return op;
}

static __attribute__((noinline)) void hold_later_of_run(vf__readylist *inl)
{
    vf__op *prev = NULL, *op = inl->head;
    while (op != NULL) {
        vf__op *next = op->next;
        vf__exec_hold *h = holder_of(op);
        if (h != NULL) {
            vf__readylist_unlink(inl, prev, op);
            vf__readylist_add(&h->deferred, op);
        } else {
            prev = op;
        }
        op = next;
    }
}

/* Take a ready op that only this thread runs, for a run here: a deferred
 * one, or, for the innermost hold's own frame (`own_hold`), one of the run
 * of inline ops made ready with the hold's op (tls.siblings, as the hold
 * found it: a run begun above the hold is that run's own). Another frame
 * above the hold (a graph's replay between its nodes, a done callback's
 * wait) stands at another point, before the hold's: it took from the
 * hold's run an op between the two, later than itself (found by the
 * reviewer of the holds). Under a hold, an op of its engine that may not
 * run above its op (runs_above) moves to the hold instead: a later one
 * of the run, and a later deferred one where the hold holds those too
 * (`deferred_too`). With `any`, any op of the hold's engine, held ones
 * included. NULL when there is none. */
static vf__op *local_take(bool any, bool own_hold, vf__readylist **from)
{
    vf__exec_hold *h = tls.hold;
    vf__op *op;
    *from = &tls.deferred;
    op = any ? vf__readylist_pop(&tls.deferred) : deferred_next();
    if (op != NULL)
        return op;
    if (h == NULL || !own_hold)
        return NULL;
    if (tls.siblings != NULL && tls.siblings == h->run) {
        *from = tls.siblings;
        if ((op = run_take(h, tls.siblings, any)) != NULL)
            return op;
    }
    return any ? held_take(h, from) : NULL;
}

/* How many ops of `e` the holds on this thread hold (only e's hold its
 * ops). Counted when a look finds nothing to run, not kept: a count kept
 * per hold went stale when a forced run took from a hold further out. */
static int held_of(const vf_engine *e)
{
    int n = 0;
    for (const vf__exec_hold *h = tls.hold; h != NULL; h = h->outer)
        if (h->engine == e)
            n += h->deferred.count + h->siblings.count;
    return n;
}

int vf__exec_local_count(const vf_engine *e)
{
    int n = tls.deferred.count + held_of(e);
    if (tls.siblings != NULL)
        for (vf__op *op = tls.siblings->head; op != NULL; op = op->next)
            n += vf__op_engine(op) == e;
    return n;
}

/* The push's trampoline, after its op ran inside it: the deferred ops
 * left on this thread (tls.deferred), run inside the push's call. No op
 * of the push's engine runs under them unless the pusher is one (its call
 * covers the push's), so the call is hidden meanwhile (cross_wait.h: a
 * stop of that engine from one was refused as a wait for itself: found by
 * the third reviewer of the cross-engine waits). Out of line: a push
 * whose op deferred nothing pays a load and a test. */
static __attribute__((noinline)) void run_deferred_of_push(void)
{
    const vf__op *under = vf__current_op();
    bool hide = under == NULL || vf__guard_innermost() != vf__op_engine(under);
    vf__op *op;
    while ((op = deferred_next()) != NULL) {
        uint32_t was = hide ? vf__guard_hide_innermost() : 0;
        run_inline_one(op);
        if (hide)
            vf__guard_unhide(was);
    }
}

static inline void run_trampoline(void)
{
    if (VF__UNLIKELY(tls.deferred.head != NULL))
        run_deferred_of_push();
}

/* Run `op`, an inline op ready at its push, here: a child of the op
 * running innermost here is lent its parent's count. Lent also to an op
 * still in flight when its run returns (async, or a device op whose work
 * is on its stream): a wait in a device child that can never finish must
 * see the engine stuck. */
static void run_pushed(vf__op *op)
{
    if (VF__LIKELY(!parent_runs_here(op))) {
        run_inline_one(op);
        return;
    }
    vf_engine *e = vf__op_engine(op);
    vf__exec_loop_frame saved;
    lend_active(op, &saved);
    run_inline_one(op);
    lent_run_returned(e, op, &saved);
}

/* An inline op ready at its push inside another inline run (a nested
 * push of the naive engine): see vf__exec_dispatch_pushed. Out of line: the
 * top-level push does not pay for the stack check. */
static __attribute__((noinline)) void dispatch_pushed_nested(vf__op *op)
{
    if (!vf__stack_below(VF__INLINE_PUSH_EIGHTHS)) {
        vf__readylist_add(&tls.deferred, op);
        return;
    }
    tls.inline_depth++;
    run_pushed(op);
    tls.inline_depth--;
}

/* Whether `op`, ready at its push, runs right there
 * (vf__exec_worker_runs_child): a child of the op running innermost here. */
static inline bool runs_at_push(const vf__worker *w, const vf__op *op)
{
    return parent_runs_here(op) &&
           vf__exec_worker_runs_child(w, op->def, op->priority);
}

/* A run and a finish (above) with nothing to release, dispatch or count
 * out: no vars, not queued, not counted (push.c: push_child_alone). */
void vf__exec_run_child_alone(vf__worker *w, vf__op *op)
{
    VF__ASSERT(op->nvars == 0 && op->def->kind == &vf__kind_user &&
               !op->def->async && op->hooks == 0);
    bool done = run_body(op, w->index);
    VF__ASSERT(done);
    (void)done;
    if (op->done != NULL)
        call_done(op);
    /* A user op (counted), on its pool's worker: its counters. */
    count_outcome(vf__op_engine(op), w, op->status, op->skipped);
    if (VF__UNLIKELY(op->failure != NULL)) {
        vf__wait_child_failed(op->up, op->failure, op->place);
        vf__failure_unref(op->failure);
    } else if (VF__UNLIKELY(op->skipped)) {
        /* It finished inside its push: no wait gave up on it (its place,
         * taken only when asked for, may be none). */
        vf__wait_child_notice_skipped(op->up, UINT64_MAX);
    }
    /* Its block is its pusher's (on its stack); its family its parent's
     * run's: nothing else to let go of. */
}

vf__op *vf__exec_worker_execute_lent(vf__worker *w, vf__op *op)
{
    vf_engine *e = vf__op_engine(op);
    vf__exec_loop_frame saved;
    lend_active(op, &saved);
    vf__op *next = vf__exec_worker_execute(w, op);
    lent_run_returned(e, op, &saved);
    return next;
}

/* Run a child ready at its push on the pushing worker (runs_at_push). Its
 * pusher lends it its `active` count meanwhile (lend_active), and an op
 * its finish makes ready goes to the worker's lane: the pusher resumes
 * first, as the serial program does. */
static void run_at_push(vf__worker *w, vf__op *op)
{
    vf__exec_loop_frame saved;
    lend_active(op, &saved);
    vf__op *next = vf__exec_worker_execute(w, op);
    lent_returned(&saved);
    if (next != NULL)
        vf__pool_submit_nested(w->pool, next);
}

/* A child ready at its push: run here (runs_at_push), or to the front of
 * the pushing worker's lane, where its parent's wait finds it. Out of
 * line: a top-level push does not pay for it. */
static __attribute__((noinline)) void dispatch_child(vf__op *op, bool here)
{
    vf__worker *w = vf__this_worker();
    if (here && runs_at_push(w, op))
        run_at_push(w, op);
    else
        vf__pool_submit_nested(op->def->pool, op);
}

/* Whether `op`, ready at a push from outside every engine's ops and
 * threads, runs right there (vf_config.run_at_push): a sync op of a CPU
 * pool whose worker that would take it holds nothing to run while it is
 * the pool's only one (a team of one runs a task at its creation, as
 * libomp's does), or already holds VF__AHEAD_QUEUED ops of which none
 * ranks above it (the pusher is ahead of the pool, and libgomp runs the
 * task then too; rule 11 keeps a better queued op first); while the stack
 * has room and no inline run is on this thread. Out of line: only an
 * engine with the switch on asks. */
static __attribute__((noinline)) bool runs_at_top_push(const vf__op *op)
{
    const vf__pool *p = op->def->pool;
    if (p->spread || !vf__exec_finishes_in_run(op->def) ||
        tls.inline_depth != 0 || vf__current_op() != NULL ||
        vf__this_worker() != NULL || tls.done_engine != NULL ||
        tls.work_engine != NULL || tls.service ||
        !vf__stack_below(VF__INLINE_PUSH_EIGHTHS))
        return false;
    const vf__worker *w = vf__pool_next_target(p);
    /* Its queue and its inbox: a worker busy in a long op has moved none
     * of the pushes in. */
    int queued = atomic_load_explicit(&w->qlen, memory_order_relaxed) +
                 atomic_load_explicit(&w->inbox_len, memory_order_relaxed);
    if (p->nworkers == 1 && queued == 0 &&
        atomic_load_explicit(&w->inbox, memory_order_relaxed) == NULL)
        return true;
    return queued >= VF__AHEAD_QUEUED &&
           !vf__worker_holds_better(w, op->priority);
}

void vf__exec_dispatch_pushed(vf__op *op, bool here)
{
    if (!op->def->inline_run) {
        if (VF__LIKELY(op->nest == 0)) {
            if (VF__UNLIKELY(op->def->engine->run_at_push) && here &&
                runs_at_top_push(op)) {
                tls.inline_depth++;
                run_inline_one(op);
                run_trampoline();
                tls.inline_depth--;
                return;
            }
            vf__pool_submit(op->def->pool, op);
        } else {
            dispatch_child(op, here);
        }
        return;
    }
    if (starts_on_pool(op)) {
        vf__pool_submit(op->def->pool, op);
        return;
    }
    /* Ready at its push: run it now, even inside another inline op (the
     * naive engine runs ops inside push), while the stack has room. A
     * chain of ops each pushing the next would otherwise nest a push per
     * op without bound; past VF__INLINE_PUSH_EIGHTHS of the stack the op
     * goes through the trampoline instead, which the outermost inline
     * run (or a wait) drains once the frames above have returned. Ops it
     * makes ready go through the trampoline too. */
    if (VF__UNLIKELY(tls.inline_depth != 0)) {
        dispatch_pushed_nested(op);
        return;
    }
    /* A child here (an async one, on a worker: not inside an inline run)
     * is lent its parent's count too: unlent, its parent counted as
     * active while it ran, and a wait in it that could never finish hung
     * (found by the reviewer of the nested waits' counts). */
    tls.inline_depth++;
    run_pushed(op);
    run_trampoline();
    tls.inline_depth--;
}

void vf__exec_loop_enter(vf__waiter *w, vf__exec_loop_frame *saved)
{
    saved->waiter = tls.loop_waiter;
    saved->out_op = tls.out_op;
    saved->op = tls.loop_op;
    saved->lent = tls.loop_lent;
    tls.loop_waiter = w;
    tls.out_op = vf__current_op();
    tls.loop_op = NULL;
    tls.loop_lent = false;
}

void vf__exec_loop_leave(const vf__exec_loop_frame *saved)
{
    tls.loop_waiter = saved->waiter;
    tls.out_op = saved->out_op;
    tls.loop_op = saved->op;
    tls.loop_lent = saved->lent;
}

/* Mark the loop's waiter BUSY before running `op` above it; false when its
 * marker fired first (then the op must go back). */
static bool loop_claim(vf__waiter *w)
{
    int s = VF__W_IDLE;
    return atomic_compare_exchange_strong(&w->state, &s, VF__W_BUSY);
}

bool vf__exec_descends_fits(const vf__op *op, const void *family)
{
    return vf__exec_descends(op, family);
}

/* Whether `op`, queued on the waiter's pool, descends from the waiting op
 * or writes the var it waits for (`arg`: the waiter). */
static bool needed_by_waiter(const vf__op *op, const void *arg)
{
    const vf__waiter *w = arg;
    if (vf__exec_descends(op, w->family))
        return true;
    for (int i = 0; w->var != NULL && i < op->nvars; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        if (vf__dep_var(d) == w->var && vf__dep_write(d))
            return true;
    }
    return false;
}

/* A ready op of the waiter's pool that may run above the wait: one that
 * descends from the waiting op (OpenMP's scheduling constraint for tied
 * tasks: a waiting thread runs only descendants of the task it waits in,
 * whose waits run only theirs in turn, so the frames stack only as deep
 * as the program nests pushes), from its own queue or, when another
 * worker took one of its children, from that worker's, while the stack
 * has room for it. Never another of a CPU pool: it could stack without
 * bound, or trap the waiter under work that needs the waiting op to
 * finish. Those are the pool's other threads' (a spare's, when all of
 * them wait). A device's pool lends no spare and its threads take only
 * their own queues: there the waiter also takes an op that writes the var
 * it waits for, which nobody else would ever run (the waiter ran it above
 * itself once it gave up looking, HOPELESS_LOOKS, and a wait beside it
 * counted it stuck meanwhile and ran a later op above itself: found by
 * the second reviewer of the waits inside inline ops). Not any op before
 * the wait in push order: one ready late, not needed, could wait on a var
 * the waiting op writes (its marker queues behind that write), and got
 * VF_EDEADLK (found by the reviewer of that change). */
static vf__op *loop_take(vf__waiter *w, vf__worker *me, bool any, bool room,
                         int *why)
{
    vf__op *op = NULL;
    if (any && room) {
        op = vf__worker_take(me);
    } else if (room && !me->pool->spread && w->family != NULL) {
        /* The queues as they were when it refused all they held: it
         * would refuse them again (sched.h: vf__pool_look_same). */
        if (vf__pool_look_same(me->pool, &w->look) && w->refused_look) {
            if (w->look.queued != 0)
                *why = VF__LOOP_REFUSED_AGAIN;
            return NULL;
        }
        vf__pool_fits fits = {vf__exec_descends_fits, w->family};
        op = vf__worker_take_above(me, &fits);
        w->refused_look = op == NULL;
    } else if (room && me->pool->spread) {
        vf__pool_fits fits = {needed_by_waiter, w};
        op = vf__worker_take_above(me, &fits);
    } else if (!room) {
        vf__worker_refuses(me);
    }
    if (op == NULL && vf__pool_any_queued(me->pool))
        *why = VF__LOOP_REFUSED;
    return op;
}

/* Whether the stack has room for an op above a wait (exec.h), measured
 * in a frame of its own below its caller's: where a frame called from
 * there begins, as the ops taken there are (its caller's frame address
 * is above the caller's own locals, 1-2 KiB of them in an optimized
 * build: measured there, ops ran that far past the line, and a program
 * that fit overflowed: found by the reviewer). */
static __attribute__((noinline)) bool room_below_this_frame(void)
{
    return vf__stack_below(VF__WAIT_CHILD_EIGHTHS);
}

int vf__exec_loop_run_one(vf__waiter *w, vf__worker *me, bool any, int *room)
{
    VF__ASSERT(tls.hold != NULL && tls.hold->engine == w->engine);
    if (*room < 0) /* once a wait (exec.h) */
        *room = room_below_this_frame();
    vf__readylist *from;
    vf__op *op = local_take(any, true, &from);
    if (op != NULL) {
        /* Its frames stack on the wait's, as a pool op's would: a chain
         * of waits on the naive engine, each above the last, overflowed
         * the main thread's stack past ~6,000 levels (found trying deep
         * recursion as a user). */
        if (!*room) {
            vf__readylist_push_front(from, op); /* back where it was */
            if (me != NULL) /* nor anything of its queue (loop_take) */
                vf__worker_refuses(me);
            return VF__LOOP_NO_STACK;
        }
        if (!loop_claim(w)) {
            vf__readylist_push_front(from, op); /* next look */
            return VF__LOOP_RAN;
        }
        /* Its engine first: an async op still in flight when its call
         * returns may be finished and freed by another thread at once. */
        vf_engine *e = vf__op_engine(op);
        tls.loop_op = op;
        tls.inline_depth++;
        run_inline_one(op);
        tls.inline_depth--;
        /* In flight, not async: an async call counted its waiter. */
        loop_op_returned(e, op);
        return VF__LOOP_RAN;
    }
    int why = VF__LOOP_NOTHING;
    if (me == NULL || (op = loop_take(w, me, any, *room, &why)) == NULL)
        return why == VF__LOOP_NOTHING && held_of(w->engine) > 0 ? VF__LOOP_HELD
                                                                 : why;
    /* Taken maybe from a burst its inbox held: a sleeper for the rest, as
     * a worker passes the baton at each take (sched.c: pass_the_baton).
     * The wake owed for the burst went to this waiter, and the rest waited
     * for the whole run of this op while another worker slept (found by a
     * reviewer of the scheduler: a hang where this op waited for one of
     * them by its own means). */
    vf__pool_pass_on(me->pool);
    if (!loop_claim(w)) {
        vf__pool_submit(me->pool, op);
        return VF__LOOP_RAN;
    }
    while (op != NULL) {
        tls.loop_op = op;
        op = vf__exec_worker_execute(me,
                                     op); /* its finish makes w IDLE again */
        /* The op it made ready to run next may come from anywhere (the
         * worker's next pick): above the wait runs only a descendant, as
         * loop_take takes (an op that waits for the waiting one ran above
         * it, and got VF_EDEADLK where the serial program finishes: the
         * second reviewer). */
        if (op != NULL &&
            ((!any && !vf__exec_descends(op, w->family)) || !loop_claim(w))) {
            vf__pool_submit(me->pool, op); /* w resumes first */
            break;
        }
    }
    return VF__LOOP_RAN;
}

/* Whether a helping thread may run another op before `until`: not once it
 * passed, and not at all with a deadline on an engine with devices: an op
 * taken here first meets, on the host and with no limit, the device work
 * its vars wait for, which the program may let finish only after the wait
 * gave up (found by a reviewer: a polling program hung). Asked before each
 * op, a chain's included: the engine's first device op may come during
 * the wait, made by the op just run (found by the next reviewers), and a
 * timed wait ran every op of a chain of 40 before it looked at the time (a
 * user tester: 2 s late for a 20 ms timeout). */
static bool help_may_go_on(vf_engine *e, const vf__deadline *until)
{
    return until == NULL || until->forever ||
           (!vf__deadline_passed(until) && !vf__engine_has_devices(e));
}

bool vf__exec_help_run(vf_engine *e, const vf__deadline *until)
{
    vf__pool *p = e->cpu_pool;
    if (p == NULL || vf__current_op() != NULL || tls.inline_depth > 0 ||
        !help_may_go_on(e, until))
        return false;
    vf__op *op = vf__pool_take(p);
    if (op == NULL)
        return false;
    vf__worker *w = vf__this_worker();
    int worker = w && w->pool->engine == e ? w->index : -1;
    while (op != NULL) {
        /* The CPU pool holds CPU ops that are not inline (routing), and
         * async ops made ready in device work (starts_on_pool). */
        VF__ASSERT(op->def->kind != &vf__kind_device &&
                   (!op->def->inline_run || op->def->async));
        vf__readylist ready, rest;
        vf__readylist_init(&ready);
        vf__readylist_init(&rest);
        if (run_body(op, worker))
            finish(op, &ready);
        vf__op *next = NULL, *r;
        bool here = false;
        while ((r = vf__readylist_pop(&ready)) != NULL) {
            if (next == NULL && r->def->pool == p && !r->def->inline_run) {
                next = r;
            } else {
                here |= runs_here(r);
                vf__readylist_add(&rest, r);
            }
        }
        if (next != NULL && (VF__UNLIKELY(here) || !help_may_go_on(e, until))) {
            vf__pool_submit(p, next); /* as vf__exec_worker_execute's */
            next = NULL;
        }
        dispatch_list(&rest);
        op = next;
    }
    return true;
}

/* Run `op`, taken from the ops only this thread runs, here: above the
 * frame that took it, counted bare when no op runs below it. */
static void run_taken(vf__op *op)
{
    bool bare = vf__current_op() == NULL;
    tls.bare += bare;
    tls.inline_depth++;
    run_inline_one(op);
    tls.inline_depth--;
    tls.bare -= bare;
}

static bool run_local(vf_engine *lender, bool own_hold)
{
    vf__readylist *from;
    vf__op *op = local_take(false, own_hold, &from);
    if (op == NULL)
        return false;
    bool lend = lender != NULL && vf__op_engine(op) == lender; /* another
                                               engine's: its own counts */
    vf__exec_loop_frame saved;
    if (lend)
        lend_active(op, &saved);
    run_taken(op);
    if (lend)
        lent_run_returned(lender, op, &saved);
    return true;
}

bool vf__exec_run_deferred(vf_engine *lender)
{
    return run_local(lender, false);
}

/* Whether `op` is of the launch whose nodes take places [lo, hi): it
 * descends from one of them (its family's root is one), or it is one of
 * the launch's rest ops (graph.h: their run tells the nodes of a child's
 * failure). */
static bool of_launch(const vf__op *op, uint64_t lo, uint64_t hi)
{
    uint64_t at = op->up != NULL            ? op->up->root
                  : vf__graph_holds_for(op) ? op->place
                                            : 0;
    return at >= lo && at < hi;
}

/* A deferred op of the launch whose nodes take places [lo, hi)
 * (of_launch), taken off the list, or NULL; under a hold, one that may
 * run above the hold's op (the others move to the hold, as
 * deferred_filter moves them). */
static vf__op *deferred_of_launch(uint64_t lo, uint64_t hi)
{
    vf__op *prev = NULL, *op = tls.deferred.head;
    while (op != NULL) {
        vf__op *next = op->next;
        if (!of_launch(op, lo, hi)) {
            prev = op;
            op = next;
            continue;
        }
        vf__readylist_unlink(&tls.deferred, prev, op);
        vf__exec_hold *h = tls.hold != NULL ? holder_of(op) : NULL;
        if (h == NULL)
            return op;
        vf__readylist_add(&h->deferred, op);
        op = next;
    }
    return NULL;
}

bool vf__exec_run_held(vf_engine *lender)
{
    return run_local(lender, true);
}

bool vf__exec_bare(void)
{
    return tls.bare > 0;
}

/* Pool ops are handed over, per pool, before the inline ones run: ready
 * at once, they need not wait for them (ready ops are independent: any
 * order of them is the serial program's). */
static void dispatch_some(vf__readylist *ready)
{
    pool_batches batches;
    batches.n = 0;
    vf__readylist inl;
    vf__readylist_init(&inl);
    vf__op *op;
    while ((op = vf__readylist_pop(ready)) != NULL) {
        if (runs_here(op))
            vf__readylist_add(&inl, op);
        else
            batches_add(&batches, op);
    }
    batches_submit(&batches);
    if (inl.head != NULL)
        run_inline_list(&inl);
}

/* Dispatch ops made ready, whose `active` count is already taken. Static,
 * so it inlines where an op finishes: an empty list, the usual
 * case (the naive engine: nothing is pushed yet to be made ready; a
 * worker: every op made ready is its own pool's), costs a test. */
static inline void dispatch_list(vf__readylist *ready)
{
    if (ready->head != NULL)
        dispatch_some(ready);
}

void vf__exec_dispatch_ready(vf__readylist *ready)
{
    dispatch_list(ready);
}

/* --- a replay's nodes (graph.h) ---------------------------------------- */

/* `n` ops ran (status 0) on `mine` (or on a thread that is not a worker
 * of the engine: NULL): count_outcome for a run of nodes at once. */
static inline void count_ran(vf_engine *e, vf__worker *mine, uint64_t n)
{
    if (mine)
        atomic_store_explicit(
            &mine->ran,
            atomic_load_explicit(&mine->ran, memory_order_relaxed) + n,
            memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&e->ran, n, memory_order_relaxed);
}

/* Run a replay's node and do the first half of its finish: what run_body
 * and finish do for a user op, less what a node never has: observers (the
 * engine had none at its launch), device fences (a launch on an engine
 * with devices pushes op by op; devices made after the launch began met
 * its vars' fences when the launch op ran, and no device op reaches its
 * vars before the graph lets them go), a family (nodes are top level), a
 * lent count (no push runs a node above its pusher). Ops it makes ready go
 * to `ready`; a node that ran (status 0) is counted in *ran, for the
 * caller's count_ran, and one that did not is reset for the next launch
 * here (one that ran has nothing to reset). `run` is the caller's, made
 * once for a run of nodes: this sets its op and name. */
static inline __attribute__((always_inline)) void
node_run(vf_engine *e, vf__op *op, vf_run *run, vf__worker *mine, bool in_order,
         uint64_t *ran, vf__readylist *ready)
{
    const vf__opdef *def = op->def;
    /* op->status is 0: a new block's, or vf__graph_node_reset's. */
    vf__failure *f = NULL;
    bool ran_ok = false;
    if (VF__UNLIKELY(atomic_load_explicit(&e->slow, memory_order_relaxed) &
                     VF__SLOW_SHUTDOWN)) {
        vf__exec_op_skipped(op, NULL); /* the notice (lifecycle.h) */
    } else {
        /* Bounds in locals: the atomic loads would make them reloaded. */
        int nvars = !vf__graph_failures_possible(op) || def->no_skip
                        ? 0
                        : op->nvars;
        uint64_t place = op->place;
        for (int i = 0; i < nvars; i++)
            f = earlier_live(e, f, vf__dep_var(vf__op_dep(op, i)), NULL, place,
                             false); /* a node: top level */
        if (VF__UNLIKELY(f != NULL)) {
            vf__exec_op_skipped(op, f);
        } else {
            run->op = op;
            run->name = op->name;
            ran_ok = vf__exec_call_fn(op, run) == 0;
        }
    }
    if (op->done != NULL)
        call_done(op);
    /* Those that ran are counted once per run of nodes (count_ran), before
     * the run's end is told (a wait then sees them). */
    if (VF__LIKELY(ran_ok))
        ++*ran;
    else
        count_outcome(e, mine, op->status, op->skipped);
    vf__graph_op_finished(op, in_order, ready);
    if (VF__UNLIKELY(!ran_ok))
        vf__graph_node_reset(op);
}

/* The finish of `over` nodes run in push order is over, `last` the last
 * of them: counted out of pending and told to the launch in one step (the
 * launch op kept pending above zero meanwhile, so no waiter could tell),
 * with the `ran` among them counted first; the ops they made ready
 * (outside the graph) counted in in the same step, as finish does, and
 * dispatched. With `end`, the launch's last node: its active count goes
 * too; else the next node takes it. */
static void nodes_over(vf_engine *e, vf__op *last, uint32_t over, uint64_t ran,
                       vf__readylist *ready, bool end)
{
    count_ran(e, NULL, ran);
    uint64_t act = (uint64_t)ready->count * VF__COUNT_ACTIVE;
    uint64_t out = (uint64_t)over * VF__COUNT_PENDING;
    unsigned wake;
    if (!end) {
        vf__engine_count_in(e, act);
        wake = vf__engine_count_out(e, out, false);
    } else {
        wake = count_finished(e, out, act, true);
    }
    if (VF__UNLIKELY(wake != 0))
        vf__engine_wake(e, wake);
    vf__graph_ops_done(last, over); /* the launch's last node may end it */
    dispatch_list(ready);
}

void vf__exec_run_in_order(vf__op *const *ops, uint32_t n, uint64_t base,
                           uint32_t from)
{
    vf_engine *e = vf__op_engine(ops[0]);
    vf__graph_inst *in = ops[0]->graph;
    uint64_t ran = 0;
    uint32_t over = 0;   /* nodes whose finish is over, the launch not told */
    vf__readylist ready; /* empty again after each nodes_over */
    vf__readylist_init(&ready);
    vf_run run; /* each node's: its op and name (node_run) */
    run_init(&run, ops[from], -1);
    uint32_t i = from;
    for (;;) {
        if (VF__UNLIKELY(atomic_load_explicit(&in->rests_unrun,
                                              memory_order_acquire) != 0) &&
            i != 0) {
            /* The nodes before told first: once the run stops, a rest op's
             * run may go on at once, on another thread (graph.h). */
            if (over != 0)
                nodes_over(e, ops[i - 1], over, ran, &ready, false);
            over = 0;
            ran = 0;
            if (vf__graph_in_order_waits(in, i))
                return; /* stopped, its active count let go */
        }
        ops[i]->place = base + i;
        node_run(e, ops[i], &run, NULL, true, &ran, &ready);
        over++;
        if (++i == n)
            break;
        /* The launch goes on, unless ops wait on this thread to run
         * first: made ready by the node's finish, or deferred inside it. */
        if (VF__LIKELY(ready.count == 0 && tls.deferred.count == 0))
            continue;
        nodes_over(e, ops[i - 1], over, ran, &ready, false);
        over = 0;
        ran = 0;
        /* What descends from the launch's nodes runs before the next node
         * (an inline run defers it: run_inline): a node's children on a
         * var the graph holds, let go to them at its finish (graph.h),
         * come before the next node's run on that var, as after their
         * pushes. The rest waits for the trampoline: ready before the
         * launch, or pushed after it, such an op may wait for the graph,
         * which runs below it (found by the reviewer of stop 66's
         * children: it hung). */
        vf__op *op;
        while ((op = deferred_of_launch(base, base + n)) != NULL)
            run_taken(op);
    }
    nodes_over(e, ops[n - 1], over, ran, &ready, true);
}

/* Where `op`, a replay's node of w's pool made ready by w, goes instead of
 * staying with w: its home (graph.c: homes) when that is another worker of
 * the pool, else -1 (it has none, or w is its home; a pool of one has no
 * homes, and skips the plan's look-up). A home past the pool's workers
 * was planned before a fork, in a larger pool than the child's (a forked
 * child launching the parent's graph sent nodes past the pool's end:
 * found trying features combined as a user): none then, here and at the
 * launch (vf__exec_dispatch_nodes). */
static inline int node_home_elsewhere(const vf__worker *w, const vf__op *op)
{
    int nworkers = w->pool->nworkers;
    if (nworkers == 1)
        return -1;
    int home = vf__graph_node_home(op);
    return home >= 0 && home < nworkers && &w->pool->workers[home] != w ? home
                                                                        : -1;
}

/* Whether `next`, the one op a node made ready, is a node this worker runs
 * next at once, as vf__worker_place would hand it over (its own queue and
 * inbox empty), without the trip back through the placement: one of its
 * pool that has no home elsewhere. */
static inline bool node_runs_next(const vf__worker *w, const vf__op *next)
{
    return (next->def->kind->flags & VF__KIND_GRAPH) &&
           next->def->pool == w->pool &&
           atomic_load_explicit(&w->qlen, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&w->inbox, memory_order_relaxed) == NULL &&
           node_home_elsewhere(w, next) < 0;
}

/* Place a replay's node made ready, bound for this worker's pool, at its
 * home when that is another worker: true if it went. */
static bool node_sent_home(const vf__worker *w, vf__op *op)
{
    if (!(op->def->kind->flags & VF__KIND_GRAPH))
        return false;
    int home = node_home_elsewhere(w, op);
    if (home < 0)
        return false;
    vf__pool_submit_to(w->pool, home, op);
    return true;
}

void vf__exec_dispatch_nodes(vf__readylist *ready)
{
    vf__readylist rest;
    vf__readylist_init(&rest);
    vf__op *op;
    while ((op = vf__readylist_pop(ready)) != NULL) {
        int home = op->def->inline_run ? -1 : vf__graph_node_home(op);
        if (home >= 0 && home < op->def->pool->nworkers)
            vf__pool_submit_to(op->def->pool, home, op);
        else
            vf__readylist_add(&rest, op);
    }
    dispatch_list(&rest);
}

/* The nodes a node made ready (`ready`, more than one) are all nodes of
 * this worker's pool, one at home here (or with none), the others at home
 * elsewhere: those go home now, counted active first (as a finish counts
 * what it made ready), and the one left runs next on this node's active
 * count. False, with `ready` untouched, otherwise. */
static bool nodes_sent_home_but_one(vf__worker *w, vf_engine *e,
                                    vf__readylist *ready)
{
    vf__op *stays = NULL;
    for (vf__op *op = ready->head; op != NULL; op = op->next) {
        if (!(op->def->kind->flags & VF__KIND_GRAPH) ||
            op->def->pool != w->pool)
            return false;
        if (node_home_elsewhere(w, op) < 0) {
            if (stays != NULL)
                return false;
            stays = op;
        }
    }
    if (stays == NULL)
        return false;
    vf__engine_count_in(e, (uint64_t)(ready->count - 1) * VF__COUNT_ACTIVE);
    vf__op *op;
    while ((op = vf__readylist_pop(ready)) != NULL)
        if (op != stays)
            node_sent_home(w, op);
    vf__readylist_add(ready, stays);
    return true;
}

/* How many pauses a worker watches a node's count (node_watched) before
 * it lets the node go back to the hand-over: about the first phase of an
 * idle worker's spin (sched.c), which it would spend looking at its inbox
 * for the same node. */
#define WATCH_PAUSES 64

/* `op`, a replay's node this worker just ran in a chain, made no node
 * ready, and the worker has nothing queued: a successor at home here whose
 * other predecessors run elsewhere, watched until its count reaches zero
 * and returned to run next in the chain (on the chain's active count, as
 * a node made ready would be), or NULL, the chain over (none to watch,
 * work came, or its count did not reach zero in WATCH_PAUSES pauses; its
 * last predecessor then sends it here as before). Counting the chain
 * active while it watches keeps the engine's counts as they are while
 * the node's other predecessors run: it is their result it waits for. */
static vf__op *node_watched(const vf__worker *w, const vf__op *op)
{
    if (w->pool->nworkers < 2) /* no homes */
        return NULL;
    uint64_t place;
    vf__op *next = vf__graph_watch_begin(op, w->pool,
                                         (int)(w - w->pool->workers), &place);
    if (next == NULL)
        return NULL;
    bool mine = false;
    for (int i = 0; i < WATCH_PAUSES && !mine; i++) {
        if ((mine = vf__graph_watch_ready(next)))
            break;
        if (atomic_load_explicit(&w->qlen, memory_order_relaxed) != 0 ||
            atomic_load_explicit(&w->inbox, memory_order_relaxed) != NULL)
            break;
        vf__cpu_relax();
    }
    if (!mine && vf__graph_watch_end(next))
        return NULL;
    next->place = place; /* its own now, as a finish sets a ready node's */
    return next;
}

/* A worker's run of a node, and of the chain of nodes after it that it
 * runs at once (node_runs_next): node_run each, the counts as finish keeps
 * them (each node of the chain but the last made one node ready, which
 * takes its active count: their pending counts go out in one add, with the
 * last one's), each node's end; the ops the last one made ready as
 * vf__exec_worker_execute places them. */
static void worker_run_nodes(vf__worker *w, vf__op *op, vf__readylist *ready)
{
    vf_engine *e = vf__op_engine(op);
    vf__worker *mine = w->spare ? NULL : w;
    /* Not inside a wait loop, whose waiter may have to resume between two
     * ops: the chain is the hand-off vf__worker_place would make. */
    bool chains = mine != NULL && !w->pool->spread && tls.loop_waiter == NULL;
    uint64_t ran = 0;
    uint32_t over = 0; /* nodes whose finish is over, the launch not told */
    vf_run run;        /* each node's: its op and name (node_run) */
    run_init(&run, op, w->index);
    for (;;) {
        atomic_store_explicit(&w->running_place, op->place,
                              memory_order_relaxed);
        node_run(e, op, &run, mine, false, &ran, ready);
        over++;
        if (!chains)
            break;
        if (ready->count > 1 && !nodes_sent_home_but_one(w, e, ready))
            break;
        if (ready->count == 0 &&
            atomic_load_explicit(&w->qlen, memory_order_relaxed) == 0 &&
            atomic_load_explicit(&w->inbox, memory_order_relaxed) == NULL) {
            vf__op *watched = node_watched(w, op);
            if (watched == NULL)
                break;
            op = watched; /* pending: the launch goes on */
            continue;
        }
        if (ready->count != 1 || !node_runs_next(w, ready->head))
            break;
        op = vf__readylist_pop(ready); /* pending: the launch goes on */
    }
    count_ran(e, mine, ran);
    uint64_t act = (uint64_t)ready->count * VF__COUNT_ACTIVE;
    if (VF__UNLIKELY(op == tls.loop_op)) /* a wait loop's hand-off chain */
        act += loop_frame_returns(e);
    /* A run of nodes never brings pending to zero (the launch stays
     * pending until its end, which looks for watchers after every node's
     * counts: vf__graph_launch_end), so only a nested waiter, which
     * watches for active at zero (a node may wait inside its function),
     * is looked for: the lowering, then nnested, the Dekker pair of
     * wait.c's watch. Looking for any watcher summed every thread's
     * counts at nearly every node while the program waited for the
     * launch, taking the other workers' lines away from them. */
    unsigned wake = count_finished(e, (uint64_t)over * VF__COUNT_PENDING, act,
                                   false);
    if (act == 0 && VF__UNLIKELY(atomic_load(&e->waits.nnested) != 0))
        wake |= VF__WAKE_WATCHERS;
    if (VF__UNLIKELY(wake != 0))
        vf__engine_wake(e, wake);
    vf__graph_ops_done(op, over); /* may end the launch: the last touch */
}

vf__op *vf__exec_worker_execute(vf__worker *w, vf__op *op)
{
    /* Inline ops run where they are dispatched, but for an async op made
     * ready in device work (starts_on_pool). */
    VF__ASSERT(!op->def->inline_run || op->def->async);
    vf__readylist ready, mine;
    vf__readylist_init(&ready);
    vf__readylist_init(&mine);
    const vf__opdef *def = op->def;
    bool graph = def->kind->flags & VF__KIND_GRAPH;
    /* Before the run: an async op left in flight may be finished and freed
     * at once, and with it an operator's def (found by the second
     * reviewer). */
    bool async = def->async;
    /* What the stall reports name (sched.h: running_place): an op of the
     * numbered kinds by its place (a delete's, a wait marker's, a fused
     * batch's is another op's), each node of a run of nodes by its own
     * (worker_run_nodes). */
    uint64_t outer = atomic_load_explicit(&w->running_place,
                                          memory_order_relaxed);
    atomic_store_explicit(&w->running_place,
                          def->kind->flags & VF__KIND_NUMBERED ? op->place : 0,
                          memory_order_relaxed);
    if (graph)
        worker_run_nodes(w, op, &ready);
    else if (VF__LIKELY(run_body(op, w->index)))
        finish(op, &ready);
    else if (!async) /* an async op's call counted its waiter back in */
        op->def->kind->released_in_flight(op, &ready);
    atomic_store_explicit(&w->running_place, outer, memory_order_relaxed);
    vf__readylist rest; /* other pools' ops and inline ones */
    vf__readylist_init(&rest);
    bool here = false; /* one of rest runs on this thread */
    while ((op = vf__readylist_pop(&ready)) != NULL) {
        if (!op->def->inline_run && op->def->pool == w->pool) {
            if (VF__UNLIKELY(graph) && node_sent_home(w, op))
                continue;
            vf__readylist_add(&mine, op);
        } else if (op->def->inline_run && tls.loop_waiter != NULL) {
            vf__readylist_add(&tls.deferred, op); /* the wait loop runs it */
        } else {
            here |= runs_here(op);
            vf__readylist_add(&rest, op);
        }
    }
    if (VF__UNLIKELY(here) && mine.head != NULL) {
        /* It may wait, for one of mine say (runs_here): they go to the pool
         * first, where the other workers find them (kept as this worker's
         * next, none ran while it waited, for ever: found trying async
         * ops with waits inside as a user). */
        vf__pool_submit_list(w->pool, &mine);
    }
    dispatch_list(&rest);
    return vf__worker_place(w, &mine, tls.loop_waiter == NULL);
}

void vf__exec_finish_completed(vf__op *op)
{
    vf_engine *e = vf__op_engine(op); /* alive: this op is still pending */
    atomic_fetch_add(&e->completers, 1);
    vf__readylist ready;
    vf__readylist_init(&ready);
    finish(op, &ready);
    dispatch_list(&ready);
    atomic_fetch_sub(&e->completers, 1); /* the last touch of the engine */
}
