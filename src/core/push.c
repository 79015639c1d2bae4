/*
 * push.c: enqueueing an op on all its vars as one atomic step, and the
 * public push calls (vf_engine_push, operators).
 *
 * Atomicity. A push locks every var of the op (in address order, so two
 * pushers can never each hold a lock the other wants), confirms each is still
 * the live var its handle named, appends the op to every queue, and only then
 * unlocks. So ops pushed from different threads are ordered the same way on
 * every var they share, and no cycle can ever form between them (MXNet
 * appends var by var, and two threads pushing A(read x, write y) and
 * B(read y, write x) can deadlock it).
 */
#include "core/push.h"
#include "core/stall_report.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/cancel.h"
#include "base/deadline.h"
#include "base/stack.h"
#include "core/arg.h"
#include "core/async.h"
#include "core/bulk.h"
#include "core/defs.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/freelist.h"
#include "core/graph.h"
#include "core/lifecycle.h"
#include "core/profiling.h"

/* Take `delta` off the engine's counts, waking whoever waits for the state
 * that reaches. */
static void uncount(vf_engine *e, uint64_t delta)
{
    unsigned wake = vf__engine_count_out(e, delta, true);
    if (VF__UNLIKELY(wake != 0))
        vf__engine_wake(e, wake);
}

/* A push blocked at the bound waits for ever if the ops in flight wait
 * for something only a later push would bring (an async op completed by
 * an op pushed after it, a program whose pushing thread also completes):
 * like destroy, it says so on stderr after the grace period, and again
 * every period (stall_report.h), naming the async ops in flight (the
 * usual reason). It looks for room at least this often (ms). */
#define BLOCKED_LOOK_MS 500

static void report_blocked(vf_engine *e, vf__stall_report *r)
{
    char ops[512], running[384];
    vf__async_describe(&e->async, ops, sizeof ops);
    vf__stall_running(e, running, sizeof running, true);
    double waited_s = vf__stall_report_said(r);
    /* The count the bound holds, and every op not finished: ops held by
     * a stop are outside the bound (it printed the bound as the count in
     * flight, 2 where 1500 were pending: found by a user tester). */
    vf__stall_write(
        "varflow: %s has waited %.1f s for room under max_inflight %u "
        "(%u ops counted against it, %u not finished in all); %s%s\n",
        r->who, waited_s, e->max_inflight,
        atomic_load_explicit(&e->counts.inflight, memory_order_relaxed),
        vf__counts_pending(vf__engine_counts(e)), ops, running);
}

/* The room under e's bound this thread's push took (reserve), already in
 * `inflight`, until its op's count takes its place or the push gives it
 * back (unreserve). NULL: none. */
static _Thread_local const vf_engine *vf__push_room;

void vf__engine_count_in_bounded(vf_engine *e, uint32_t n)
{
    if (vf__push_room == e) { /* counted at its admission */
        vf__push_room = NULL;
        n--;
    }
    if (n != 0)
        atomic_fetch_add(&e->counts.inflight, n);
}

/* Room for one push under the bound, taken at once: true when `inflight`
 * was below it, which then counts the push, its op's count in its place
 * (vf__push_room), until the push ends (unreserve). A look, then the
 * push's own count, let pushers from several threads all pass at the
 * bound minus one (found trying several pushers as a user: two ops ran at
 * once under a bound of 1). */
static bool reserve(vf_engine *e)
{
    uint32_t n = atomic_load(&e->counts.inflight);
    while (n < e->max_inflight)
        if (atomic_compare_exchange_weak(&e->counts.inflight, &n, n + 1)) {
            vf__push_room = e;
            return true;
        }
    return false;
}

/* A push that goes over the bound counts as reserve's does. */
static void reserve_over(vf_engine *e)
{
    atomic_fetch_add(&e->counts.inflight, 1);
    vf__push_room = e;
}

/* The push that admit_slow let in ended: unless its op's count took its room
 * (vf__engine_count_in), the room goes back, waking the blocked pushers
 * when that makes room. */
static void unreserve(vf_engine *e)
{
    if (vf__push_room != e)
        return;
    vf__push_room = NULL;
    if (atomic_fetch_sub(&e->counts.inflight, 1) - 1 == e->unblock_at)
        vf__engine_wake(e, VF__WAKE_BLOCKED);
}

static int admit_slow(vf_engine *e, bool nonblocking, const char *who)
{
    if (reserve(e))
        return 0;
    if (nonblocking)
        return vf__fail(VF_EAGAIN, "%s: %u ops in flight (max_inflight)", who,
                        e->max_inflight);
    /* From a done callback: its op counts until the callback returns, so
     * the room could be its own: over the limit, as from inside an op. So
     * from device work, on any engine: the work's op, and every op after
     * it on its vars, wait for it to return (vf__exec_refuse_in_device
     * _work). So from a service thread: the ops in flight may be async ops
     * only it finishes (found by a reviewer: an I/O reactor's push at the
     * bound hung). */
    if (VF__UNLIKELY(vf__exec_in_done(e) || vf__exec_in_device_work() ||
                     vf__exec_on_service_thread())) {
        reserve_over(e);
        return 0;
    }
    vf__op *cur = vf__current_op();
    if (cur != NULL && vf__op_engine(cur) == e) {
        /* Inside an op, blocking could wait for this very op: help run
         * ready ops instead, and go over the bound when none is left. */
        vf__worker *me = vf__this_worker();
        if (me != NULL && me->pool->engine != e)
            me = NULL;
        vf__family *mine = vf__running_now.family; /* NULL: no child yet */
        vf__exec_hold hold; /* what it runs: ops that may run above it */
        vf__exec_hold_here(&hold, true);
        while (!reserve(e)) {
            if (vf__exec_run_held(e))
                continue;
            /* Each op runs on top of this push: only one that descends
             * from the pushing op, while the stack has room (exec.h), as
             * a nested wait takes them. Another could wait for the
             * pushing op itself (a var it writes), which goes on only
             * once that op is over: on one worker, for ever. */
            vf__op *op = me && mine && vf__stack_below(VF__WAIT_CHILD_EIGHTHS)
                             ? vf__worker_take_above(
                                   me, &(vf__pool_fits){vf__exec_descends_fits,
                                                        mine})
                             : NULL;
            if (op == NULL) {
                reserve_over(e);
                break;
            }
            vf__pool_pass_on(me->pool); /* as a nested wait's take (exec.c) */
            /* This op goes on only once those above it are over: it
             * lends each its active count (exec.h), so a wait in one
             * that can never finish finds the engine stuck, and a device
             * pool's waiter does not wait for this one (wait.c:
             * only_queued_active: a recursion through device ops at the
             * bound waited for ever, every thread asleep). */
            while ((op = vf__exec_worker_execute_lent(me, op)) != NULL) {
                if (!vf__exec_descends(op, mine)) { /* not here: exec.c */
                    vf__pool_submit(me->pool, op);
                    break;
                }
            }
        }
        vf__exec_hold_leave(&hold);
        return 0;
    }
    /* Inside an op of e further out on this thread (one that pushed to a
     * naive engine, whose op runs inside that push and pushes back here),
     * above one that stands still below (a push at the bound running
     * ready ops, a nested wait), or on a worker of e's pool
     * (vf__exec_in_engine): the room may be that op's own, or the ops
     * that would make room this worker's to run. Over the limit, as from
     * inside an op of e (found by the reviewers of the bound's fix and of
     * the holds: it blocked for ever). */
    if (vf__exec_in_engine(e)) {
        reserve_over(e);
        return 0;
    }
    /* With run_at_push, a pusher that is ahead runs queued ops rather than
     * sleep (vf_config.run_at_push), unless bulk is in use (the engine's
     * default, or some thread's state): an op it ran could wait for a
     * batch this thread holds back. */
    if (e->run_at_push && !vf__bulk_maybe(e->bulk.size)) {
        bool room;
        while (!(room = reserve(e)) && vf__exec_help_run(e, NULL))
            ;
        if (room || reserve(e))
            return 0;
    }
    /* A worker (of another engine, pushing from inside its op) counts
     * stuck in its pool while it blocks (sched.h: vf__pool_of_blocked_
     * thread): the ops in flight here may wait for ops queued there
     * (found trying pushes across engines at a bound as a user). */
    vf__pool *stuck = vf__pool_of_blocked_thread();
    if (stuck != NULL)
        vf__pool_stuck_enter(stuck);
    int cancel_state = vf__cancel_hold(); /* base/cancel.h */
    atomic_fetch_add(&e->nblocked, 1);
    pthread_mutex_lock(&e->waits.lock);
    vf__stall_report report;
    vf__stall_report_start(&report, who);
    vf__stall_sample(e, true);
    while (!reserve(e)) {
        int64_t due_ms = vf__stall_report_due_in_ms(&report);
        int64_t look_ms = BLOCKED_LOOK_MS;
        if (stuck != NULL && vf__pool_spare_failing(stuck)) {
            /* Ask again for the spare that could not start (sched.h). */
            pthread_mutex_unlock(&e->waits.lock);
            vf__pool_stuck_again(stuck);
            pthread_mutex_lock(&e->waits.lock);
            look_ms = VF__SPARE_RETRY_MS;
            if (reserve(e))
                break;
        }
        vf__deadline d = vf__deadline_in_ms(due_ms < look_ms ? due_ms
                                                             : look_ms);
        vf__cond_wait_until(&e->waits.cond, &e->waits.lock, &d);
        if (vf__stall_report_due_in_ms(&report) == 0) {
            pthread_mutex_unlock(&e->waits.lock);
            report_blocked(e, &report);
            pthread_mutex_lock(&e->waits.lock);
        }
    }
    pthread_mutex_unlock(&e->waits.lock);
    atomic_fetch_sub(&e->nblocked, 1);
    vf__cancel_restore(cancel_state);
    if (stuck != NULL)
        vf__pool_stuck_leave(stuck);
    return 0;
}

/* vf__push_enqueue of a user push on an engine with an in-flight bound:
 * it waits for room first (see vf_engine_push) and takes it (reserve)
 * while it enqueues. Only here, once the op is built and checked: a push
 * that fails for its own reasons (a stale var, bad input, no memory) held
 * room meanwhile, refusing others (found by the reviewer of reserve). */
static __attribute__((noinline)) int
enqueue_bounded(vf_engine *e, vf__op *op, bool nonblocking, const char *who)
{
    int rc = admit_slow(e, nonblocking, who);
    if (rc != 0)
        return rc;
    rc = vf__push_enqueue(e, op, who);
    unreserve(e);
    return rc;
}

/* vf__push_enqueue of a user push: admitted under the in-flight bound, if
 * any. 0, or VF_EAGAIN when `nonblocking` and there is no room. */
static inline int enqueue_admitted(vf_engine *e, vf__op *op, bool nonblocking,
                                   const char *who)
{
    if (VF__LIKELY(e->max_inflight == 0))
        return vf__push_enqueue(e, op, who);
    return enqueue_bounded(e, op, nonblocking, who);
}

static void unlock_vars(vf__op *op, int n)
{
    for (int i = 0; i < n; i++)
        vf__spin_unlock(&vf__dep_var(vf__op_dep(op, i))->lock);
}

/* A push about to be held by a stopped engine: refused (VF_ESTALE) when a
 * var it names was deleted, or its delete is held before it, as the push
 * would be on a running engine; a held delete marks its var so. */
static int hold_vars(vf_engine *e, vf__op *op, const char *who)
{
    bool deletes = op->def->kind->flags & VF__KIND_DELETES;
    for (int i = 0; i < op->nvars; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        vf__var *v = vf__dep_var(d);
        vf__spin_lock(&v->lock);
        bool usable = vf__var_nameable(v, (uint32_t)d->gen);
        if (usable && deletes)
            v->delete_held = true;
        vf__spin_unlock(&v->lock);
        if (!usable)
            return vf__fail_deleted(e, who, op->name, v, (uint32_t)d->gen);
    }
    return 0;
}

/* Whether a push while the engine holds (stopped, or a start still
 * pushing what it held) is held too. An op of a running op (nest > 0) is
 * never: its parent may wait for it. Whose it is, its nest says when it
 * comes with its place (a batch's fused op or item, or a delete), whichever
 * thread pushes it: a top-level batch that a nested wait flushes, or
 * another thread's push, is held, so it queues behind every op held
 * before it, even while a start pushes those (the start then pushes it
 * after them). A lone op's nest comes with its place, once the push cannot
 * fail (vf__push_place_op): the pushing thread tells. */
static bool held_by_stop(vf_engine *e, const vf__op *op)
{
    if (!(op->def->kind->flags & VF__KIND_HELD))
        return false;
    return op->place != 0 ? op->nest == 0 : vf__exec_current_engine() != e;
}

/* A push from inside a running op of `e` joins that op's family
 * (family.h: op->up, a reference the block frees), before the push can no
 * longer fail: its parent's wait for its children must count it (wait.h).
 * 0, or VF_ENOMEM. */
static __attribute__((noinline)) int join_family_of(vf__op *parent, vf__op *op,
                                                    const char *who)
{
    /* A fused parent (bulk.h) first holds only what its running item
     * needs, ending before its later items when the child must come
     * first. */
    if (VF__UNLIKELY(parent->def->kind == &vf__kind_bulk))
        vf__bulk_before_child(parent, op);
    /* A replay's node's child on a var the node writes: the graph's hold
     * on it splits around the node's children. */
    if (VF__UNLIKELY(parent->def->kind->flags & VF__KIND_GRAPH)) {
        int rc = vf__graph_child_pushed(parent, op, who);
        if (rc != 0)
            return rc;
    }
    if ((op->up = vf__push_family(parent)) == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    return 0;
}

/* A child whose push can no longer fail: its vars against its parent's
 * and ancestors' writes (staged: each entry keeps its handle's
 * generation), for its parent's wait for children, which one that uses
 * such a var makes a wait that can never end (family.h: waits_up). Not at
 * join_family_of: a push refused after it (a var deleted meanwhile) would
 * have made the next wait refuse. */
static __attribute__((noinline)) void note_ancestors_writes(const vf__op *op)
{
    for (int i = 0; i < op->nvars; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        vf__family_child_var(op->up, vf__dep_var(d), (uint32_t)d->gen);
    }
}

/* Out of line past the test: a push from the top level pays one load. */
static inline int join_family(vf_engine *e, vf__op *op, const char *who)
{
    vf__op *parent = vf__current_op();
    if (VF__LIKELY(parent == NULL) || vf__op_engine(parent) != e)
        return 0;
    return join_family_of(parent, op, who);
}

/* The places in push order a numbered op takes: one, or a graph
 * launch's one per op (graph.h). */
static inline uint64_t places_of(const vf__op *op)
{
    return VF__UNLIKELY(op->def->kind->flags & VF__KIND_LAUNCH)
               ? vf__graph_launch_places(op)
               : 1;
}

/* Whether `op`, pushed from inside a running op (its vars locked), goes
 * where the serial program has it on its vars, ahead of ops pushed after
 * its ancestors that touch them (vf__var_child_place): the serial program
 * runs it inside its parent, so before them; in time order they came
 * first, with another value than the serial program's and a wait on the
 * var finished before the child (found trying nested pushes as a user).
 * Only when every var of its is free for it at once or goes ahead, and
 * one goes ahead of something: then it waits only for its ancestors'
 * running writes and the ops that went ahead there before it, which wait
 * for nothing else, so no cycle can form (on a var where it would queue,
 * an op it passes elsewhere could be ahead of it: each would wait for the
 * other). Otherwise it takes its place at its push on every var. */
static __attribute__((noinline)) bool child_goes_ahead(const vf__op *op, int n,
                                                       const vf__op *parent,
                                                       vf__child_look *look)
{
    bool any = false, beside = false;
    const vf__op *holder = NULL; /* the running write it waits behind */
    for (int i = 0; i < n; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        const vf__var *v = vf__dep_var(d);
        int where = vf__var_child_place(v, d, op, parent, look);
        if (where == VF__CHILD_QUEUED)
            return false;
        if (where == VF__CHILD_BEHIND_ANCESTOR) {
            const vf__op *h = vf__dep_op(v->head);
            /* A graph's holders (its launch op, its splits' rest ops)
             * stand for the same running node: one holder. */
            if (VF__UNLIKELY(vf__graph_holds_for(h)))
                h = h->graph->launch;
            if (holder != NULL && h != holder)
                return false; /* a second holder */
            holder = h;
        }
        beside |= where == VF__CHILD_BESIDE_PARENT;
        any |= where != VF__CHILD_FREE;
    }
    /* The ops it passes wait for it from now on, so for what it waits
     * for: safe only where they waited for that already. An op passed
     * behind `holder` waits for `holder`; a write passed beside the
     * parent's read waits for the parent. Two holders, or a holder other
     * than the reading parent, would make a passed op wait for an
     * ancestor it never waited for, and that ancestor may wait (inside:
     * vf_var_wait, vf_run_wait_children) for it. A graph's holder that a
     * child goes behind stands for its parent, a node (var.c:
     * holder_place), and every op queued behind the holder waits for
     * that node already. */
    if (beside && holder != NULL && holder != parent &&
        !vf__graph_holds_for(holder))
        return false;
    return any;
}

/* The running op a child `op` is pushed from, when known: this thread's
 * running op if it is `op`'s parent (NULL if another thread pushes it),
 * and for a batch of children its parent, whichever thread pushes it
 * (bulk.h: vf__bulk_batch.parent). */
static const vf__op *parent_of_child(const vf__op *op)
{
    if (op->def->kind == &vf__kind_bulk)
        return ((vf__bulk_batch *)op->arg)->parent;
    return op->up == vf__running_now.family ? vf__running_now.op : NULL;
}

/* Queue the places of `op` (its vars locked) at the vars' ends; the
 * number ready at once. */
static inline int append_all(vf__op *op, int n)
{
    int nready = 0;
    for (int i = 0; i < n; i++) {
        vf__dep *d = vf__op_dep(op, i);
        nready += vf__var_append(vf__dep_var(d), d);
    }
    return nready;
}

/* Queue the places of `op`, pushed from inside a running op (its vars
 * locked), each where child_goes_ahead says; the number ready at once. */
static __attribute__((noinline)) int enqueue_child(vf__op *op, int n)
{
    const vf__op *parent = parent_of_child(op);
    if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF))
        vf__profiling_held_at_push(op, n, parent);
    vf__child_look look = {NULL, 0, parent};
    bool ahead = child_goes_ahead(op, n, parent, &look);
    op->ahead = ahead;
    int nready = 0;
    for (int i = 0; i < n; i++) {
        vf__dep *d = vf__op_dep(op, i);
        vf__var *v = vf__dep_var(d);
        int where = ahead ? vf__var_child_place(v, d, op, parent, &look)
                          : VF__CHILD_FREE;
        if (where != VF__CHILD_FREE)
            nready += vf__var_insert_child(v, d, op, where, &look);
        else
            nready += vf__var_append(v, d);
    }
    return nready;
}

/* A child, pushed from inside a running op (its vars locked), on a var
 * `d` whose delete the program pushed after that op: the serial program
 * runs it inside its parent, before the delete, so it is taken where it
 * goes ahead of the delete (child_goes_ahead: a delete stands after its
 * ancestors and what descends from them), and refused, as any push after
 * a delete, where it would queue behind it (found trying destroy while
 * ops push as a user: the child of an op pushed before the delete was
 * refused with VF_ESTALE, the naive engine ran it; the helper's patch).
 * Out of line: only a push that meets a deleted var comes here. */
static __attribute__((noinline)) bool child_passes_delete(vf__op *op, int n,
                                                          const vf__dep *d)
{
    const vf__var *v = vf__dep_var(d);
    if (op->up == NULL || !vf__var_delete_pending(v, (uint32_t)d->gen))
        return false;
    const vf__op *parent = parent_of_child(op);
    vf__child_look look = {NULL, 0, parent};
    /* A user op takes its number once its push cannot fail: until then
     * it stands after every op pushed so far (family.h:
     * vf__family_after_delete), as it will. */
    uint64_t place = op->place;
    if (place == 0)
        op->place = UINT64_MAX;
    bool ahead = child_goes_ahead(op, n, parent, &look);
    op->place = place;
    return ahead;
}

/* A push that a stopped engine holds, checked and numbered under the lock
 * that orders the held ops (vf__lifecycle_hold): a delete held after it
 * is held after it, so a held push the program was told was taken is
 * never refused at start by a delete it was checked before. */
static int admit_held(vf_engine *e, vf__op *op, const void *who)
{
    int rc = hold_vars(e, op, (const char *)who);
    if (rc != 0)
        return rc;
    /* Its number now, at its push, not at the start that pushes it:
     * the ops batched (bulk.h) and held after it come after it. */
    if ((op->def->kind->flags & VF__KIND_NUMBERED) && op->place == 0)
        vf__push_place_op(e, op, places_of(op));
    return 0;
}

static int enqueue(vf_engine *e, vf__op *op, const char *who, bool unheld,
                   bool locked);

/* enqueue_as of a delete whose var another thread's batch holds (not an
 * error code: VF_E* are negative, and 1 is a hold that is over). */
#define DELETE_BEHIND_A_BATCH 2
/* enqueue_as of a fused op while an async op is unfinished (the same). */
#define FUSED_BESIDE_ASYNC 3

/* vf__push_enqueue; `unheld`: a start pushing a held op (never held
 * again); `locked`: the caller holds a lock (its op must not run here);
 * `behind`: vf__push_enqueue_behind's node (else NULL), `before_key`:
 * vf__push_enqueue_before's; `deleting`: vf__push_enqueue_delete's;
 * `fused`: vf__push_enqueue_fused's.
 * Inlined into enqueue and the others, so that the one-shot push, whose
 * `behind` is a constant NULL and the flags constant false, pays nothing
 * for them (12 and 11 instructions an op as parameters: callgrind). */
static inline __attribute__((always_inline)) int
enqueue_as(vf_engine *e, vf__op *op, const char *who, bool unheld, bool locked,
           const vf__op *behind, bool before_key, bool deleting, bool fused)
{
    const vf__opdef *def = op->def;
    int n = op->nvars;
    /* Numbered at its push (below): a nested one joins a family now. */
    bool joins = (def->kind->flags & VF__KIND_NUMBERED) && op->place == 0;
    if (joins) {
        int rc = join_family(e, op, who);
        if (VF__UNLIKELY(rc != 0))
            return rc;
    }

    atomic_store_explicit(&op->wait, n + 1, memory_order_relaxed);

    /* The push counts as pending and active before any var can see the op:
     * until its own last release it is progress in the making, so a nested
     * waiter never sees active == 0 while the op is about to become ready
     * (engine.h). The active count passes to the op if that release makes
     * it ready; otherwise whoever releases it last counts it then. */
    vf__engine_count_in(e, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
    /* Stopped or stopping: a push from outside the engine's ops is held
     * (lifecycle.h). Tested after counting pending, so a stopper's drain
     * either sees this push or this push sees the stop (both seq_cst). */
    if (VF__UNLIKELY(atomic_load(&e->life.holding)) && !unheld &&
        held_by_stop(e, op) &&
        !(behind == NULL && !before_key && !deleting &&
          vf__lifecycle_passes_drain(e, op))) {
        uncount(e, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        int rc = vf__lifecycle_hold(e, op, admit_held, who,
                                    !locked && !def->nonblocking);
        if (rc <= 0)
            return rc; /* held, or refused */
        /* Started meanwhile: pushed as usual (a call: never inlined). */
        if (behind != NULL)
            return vf__push_enqueue_behind(e, op, behind, who);
        if (before_key)
            return vf__push_enqueue_before(e, op, who);
        return deleting ? vf__push_enqueue_delete(e, op, who)
                        : enqueue(e, op, who, false, locked);
    }
    /* Observed from here: a held op gets its hooks (and its profile
     * record) when start pushes it, not twice. */
    if (def->kind->flags & VF__KIND_OBSERVED) {
        op->hooks = atomic_load_explicit(&e->hooks, memory_order_relaxed);
        if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF) &&
            (op->prof = vf__prof_op_pushed(
                 e->prof, n,
                 def->kind->records ? def->kind->records(op) : 1)) == NULL)
            op->hooks &= (uint8_t)~VF__HOOK_PROF;
    }
    for (int i = 0; i < n; i++)
        vf__spin_lock(&vf__dep_var(vf__op_dep(op, i))->lock);
    for (int i = 0; i < n; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        /* A delete pushed while one of its var is held (by a stop, the
         * start not yet at it) goes after it, so is refused: from an op
         * a stop's drain waits for, or a held op the start runs before
         * it pushes the held delete, it freed the var first, and the
         * start then dropped the held one, calling its free callback too
         * (a double free: found by an auditor). */
        if ((!vf__var_usable(vf__dep_var(d), (uint32_t)d->gen) ||
             (deleting && vf__dep_var(d)->delete_held)) &&
            !child_passes_delete(op, n, d)) {
            unlock_vars(op, n);
            uncount(e, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
            return vf__fail_deleted(e, who, op->name, vf__dep_var(d),
                                    (uint32_t)d->gen);
        }
    }
    /* A fused op while an async op is unfinished: its ops go each alone
     * instead (vf__push_enqueue_fused). Under its vars' locks: an async
     * op queued on one of them was counted (below) under the same lock, so
     * one that would be ahead of the batch is seen, and one pushed after
     * comes after it (a batch made while none was, which another thread's
     * async op then passed on a var a later op of the batch reads: that
     * op, fused with an earlier one completing it, waited for it; found by
     * a reviewer of the bulk code). */
    if (fused &&
        atomic_load_explicit(&e->async_unfinished, memory_order_relaxed) != 0) {
        unlock_vars(op, n);
        uncount(e, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        return FUSED_BESIDE_ASYNC;
    }
    /* Another thread's open batch holds the var (its claim: bulk.h): a
     * push that joined it returned 0 before this delete, so the batch goes
     * first (vf__push_enqueue_delete settles it and comes back). Queued
     * behind the delete, its ops failed at the batch's push (VF_ESTALE:
     * found trying vf_var_of from two threads with VF_BULK_SIZE as a
     * user). Under the lock that marks the var deleting below: no push can
     * claim it in between. */
    if (deleting &&
        VF__UNLIKELY(atomic_load_explicit(&vf__dep_var(&op->deps[0])->bulk,
                                          memory_order_relaxed) != NULL)) {
        unlock_vars(op, n);
        uncount(e, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        return DELETE_BEHIND_A_BATCH;
    }
    /* A delete that a stop began to hold behind, between its look above
     * and its var's lock: another thread's push held meanwhile found the
     * var live, and the start pushes it after this delete had freed the
     * var (VF_ESTALE for a push that returned 0: found trying vf_var_of,
     * destroy and stop from three threads as a user). Held too, it goes
     * after that push (and a later push sees its mark: hold_vars). */
    if (deleting && !unheld && atomic_load(&e->life.holding) &&
        held_by_stop(e, op)) {
        unlock_vars(op, n);
        uncount(e, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
        int rc = vf__lifecycle_hold(e, op, admit_held, who, false);
        if (rc <= 0)
            return rc;                              /* held, or refused */
        return vf__push_enqueue_delete(e, op, who); /* started meanwhile */
    }
    vf__dep *behind_at = NULL; /* the graph's hold's place, or the write's */
    if (VF__UNLIKELY(behind != NULL || before_key)) {
        vf__var *v = vf__dep_var(vf__op_dep(op, 0));
        behind_at = before_key ? vf__var_last_write_before(v, op->waiter->key)
                               : vf__var_write_place_of(
                                     v, vf__graph_var_holder(behind, v));
        if (behind_at == NULL) {
            unlock_vars(op, n);
            uncount(e, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
            return 1; /* the hold is over, or no such write is left */
        }
    }
    /* A user op's number, now that the push cannot fail any more (a
     * refused push takes none); ops of other kinds come with their place
     * (a fused op's, an op of a batch pushed alone, a wait's, a delete's). */
    if ((def->kind->flags & VF__KIND_NUMBERED) && op->place == 0)
        vf__push_place_op(e, op, places_of(op));
    /* A child: its parent's vf_run_wait_children waits for it (wait.h).
     * Relaxed: the parent pushed it, or another thread's flush of its
     * batch did under the lock the parent's wait takes first (bulk.h). */
    if (VF__UNLIKELY(op->up != NULL)) {
        atomic_fetch_add_explicit(&op->up->pending, 1, memory_order_relaxed);
        if (joins && op->nvars != 0)
            note_ancestors_writes(op);
    }
    if (VF__UNLIKELY(def->async)) /* finish counts it out */
        atomic_fetch_add_explicit(&e->async_unfinished, 1,
                                  memory_order_relaxed);
    int nready = 0;
    if (VF__UNLIKELY(behind_at != NULL)) {
        VF__ASSERT(n == 1); /* a wait's marker */
        vf__dep *d = vf__op_dep(op, 0);
        vf__var_insert_behind(vf__dep_var(d), d, behind_at);
    } else if (VF__UNLIKELY(op->up != NULL)) {
        nready = enqueue_child(op, n);
    } else if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF)) {
        /* Apart from the plain loop, which this call would cost 17
         * instructions a push (callgrind, naive W1: 999 against 1016). */
        vf__profiling_held_at_push(op, n, NULL);
        nready = append_all(op, n);
    } else {
        nready = append_all(op, n);
    }
    if (def->kind->flags & VF__KIND_DELETES) {
        vf__var *v = vf__dep_var(&op->deps[0]);
        v->state = VF__VAR_DELETING;
        v->delete_held = false; /* queued now (a start pushing it) */
    }
    unlock_vars(op, n);

    /* A child: read before the release, after which another thread may
     * run and free it. */
    bool child = VF__UNLIKELY(op->up != NULL);
    if (!vf__op_release(op, nready + 1)) {
        uncount(e, VF__COUNT_ACTIVE); /* a var will release it */
        if (VF__UNLIKELY(child))      /* behind a replay's hold (graph.h) */
            vf__graph_child_queued(vf__current_op());
        return 0;
    }
    if (VF__UNLIKELY(op->hooks & VF__HOOK_PROF) && nready < n)
        vf__prof_op_ready(e->prof, op->prof);
    vf__exec_dispatch_pushed(op, !locked);
    return 0;
}

static int enqueue(vf_engine *e, vf__op *op, const char *who, bool unheld,
                   bool locked)
{
    return enqueue_as(e, op, who, unheld, locked, NULL, false, false, false);
}

int vf__push_enqueue(vf_engine *e, vf__op *op, const char *who)
{
    return enqueue(e, op, who, false, false);
}

int vf__push_enqueue_locked(vf_engine *e, vf__op *op, const char *who)
{
    return enqueue(e, op, who, false, true);
}

int vf__push_enqueue_fused(vf_engine *e, vf__op *op, const char *who)
{
    return enqueue_as(e, op, who, false, true, NULL, false, false, true);
}

int vf__push_enqueue_held(vf_engine *e, vf__op *op)
{
    return enqueue(e, op, "vf_engine_start", true, false);
}

int vf__push_enqueue_behind(vf_engine *e, vf__op *op, const vf__op *node,
                            const char *who)
{
    VF__ASSERT(op->nvars == 1 && !vf__dep_write(vf__op_dep(op, 0)));
    return enqueue_as(e, op, who, false, false, node, false, false, false);
}

int vf__push_enqueue_before(vf_engine *e, vf__op *op, const char *who)
{
    VF__ASSERT(op->nvars == 1 && !vf__dep_write(vf__op_dep(op, 0)) &&
               op->waiter != NULL);
    return enqueue_as(e, op, who, false, false, NULL, true, false, false);
}

void vf__push_enqueue_rest(vf_engine *e, vf__op *rest, const vf__op *holder)
{
    int n = rest->nvars;
    atomic_store_explicit(&rest->wait, n + 1, memory_order_relaxed);
    vf__engine_count_in(e, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
    for (int i = 0; i < n; i++)
        vf__spin_lock(&vf__dep_var(vf__op_dep(rest, i))->lock);
    if (rest->up != NULL) /* its parent's wait for children waits for it */
        atomic_fetch_add_explicit(&rest->up->pending, 1, memory_order_relaxed);
    int nready = 0;
    for (int i = 0; i < n; i++) {
        vf__dep *d = vf__op_dep(rest, i);
        nready += vf__var_insert_rest(vf__dep_var(d), d, holder);
    }
    unlock_vars(rest, n);
    if (!vf__op_release(rest, nready + 1)) {
        uncount(e, VF__COUNT_ACTIVE); /* a var will release it */
        return;
    }
    if (VF__UNLIKELY(rest->hooks & VF__HOOK_PROF))
        vf__prof_op_ready(e->prof, rest->prof);
    vf__exec_dispatch_pushed(rest, false);
}

int vf__push_enqueue_delete(vf_engine *e, vf__op *op, const char *who)
{
    VF__ASSERT(op->def->kind->flags & VF__KIND_DELETES);
    int rc;
    while ((rc = enqueue_as(e, op, who, false, false, NULL, false, true,
                            false)) == DELETE_BEHIND_A_BATCH)
        vf__bulk_settle_var(e, vf__dep_var(&op->deps[0]));
    return rc;
}

/* A one-shot push builds its var set on the stack up to this size. */
#define SMALL_VARSET 16

/* Delete-var ops jump to the front of the ready queue (free memory early). */
static int push_priority(const vf__opdef *def, int priority)
{
    return def->property == VF_PROP_DELETE_VAR ? INT_MAX : priority;
}

/* The engine whose vf_graph_launch pushing op by op this thread is in,
 * admitted whole by its first check (graph.c: launch_by_push): a destroy
 * or shutdown beginning midway waits for the call (destroy's step 2) and
 * must not cut the launch in two. */
static _Thread_local vf_engine *launch_admitted;

vf_engine *vf__push_admit_launch(vf_engine *e)
{
    vf_engine *was = launch_admitted;
    launch_admitted = e;
    return was;
}

/* Common checks of every push-like call, inside its guard (guard.h: the
 * state is read after the guard's slot names the engine, so a destroy
 * either sees this call or this call sees DRAINING): an engine that
 * accepts work from this caller. */
static int check_engine(vf_engine *e, const char *who)
{
    int state = atomic_load(&e->state);
    if (VF__UNLIKELY(state != VF__RUNNING) && launch_admitted != e &&
        (vf__exec_current_engine() != e || e->life.fork_dead))
        return vf__fail(VF_ESHUTDOWN, "%s: the engine %s", who,
                        e->life.fork_dead       ? VF__FORK_DEAD_WORDS
                        : state == VF__SHUTDOWN ? "was told to shut down"
                                                : "is being destroyed");
    return 0;
}

int vf__push_check_engine(vf_engine *e, const char *who)
{
    return check_engine(e, who);
}

/* A one-shot push's run (function, argument, done, name) and its
 * priority, into its op of definition `def`. */
static inline void fill_run(vf__op *op, const vf__opdef *def, const vf_op *desc)
{
    op->def = def;
    vf__op_set_run(op, def->async, desc->fn, desc->async_fn, desc->arg,
                   desc->done, desc->name);
    op->priority = push_priority(def, desc->priority);
}

/* push_child_alone: not run here, push it as usual (no VF_E* code). */
#define PUSH_USUAL INT_MIN

/* A child with no vars is ready at its push. When it is to run right here
 * (exec.h: vf__exec_child_runner), its whole life lies inside this push,
 * within its parent's run, on this thread: its block is on this frame,
 * and it runs without a trip through the vars, the queues or the counts
 * (its parent, stuck below it, stays pending and active for both, as the
 * lent count of a child run at its push the usual way would make it:
 * exec.c, lend_active); it holds its parent's family through the
 * parent's run, and takes its place in push order once something needs
 * it (push.h: vf__push_place_of). An
 * observed engine (the profiler, VF_ENGINE_INFO), one with an in-flight
 * bound, and an argument copy too large for the frame's block take the
 * usual path. 0 when it ran, PUSH_USUAL, or the argument copy's error. */
static int push_child_alone(vf_engine *e, const vf__opdef *def,
                            const vf_op *desc, const char *who)
{
    vf__op *parent = vf__current_op();
    if (vf__op_engine(parent) != e ||
        atomic_load_explicit(&e->hooks, memory_order_relaxed) != 0 ||
        e->max_inflight != 0 || desc->arg_size > VF__OP_STACK_ARG)
        return PUSH_USUAL;
    vf__worker *w = vf__exec_child_runner(def,
                                          push_priority(def, desc->priority));
    vf__family *up;
    if (w == NULL || (up = vf__push_family_of_run(parent)) == NULL)
        return PUSH_USUAL; /* out of memory: the usual path reports it */
    vf__op_stack_block block;
    vf__op *op = vf__op_on_stack(&block, desc->arg_size);
    fill_run(op, def, desc);
    int rc;
    if (VF__UNLIKELY(desc->arg_size != 0) &&
        (rc = vf__op_copy_arg(op, who, desc->arg, desc->arg_size)) != 0)
        return rc; /* nothing taken: no place, no copy */
    op->up = up;
    op->nest = vf__push_nest_below(parent); /* its place when needed */
    vf__exec_run_child_alone(w, op);
    return 0;
}

/* The body of vf_engine_push (inline in its guard: the hot path). */
static inline __attribute__((always_inline)) int
push(vf_engine *e, const vf_op *desc, const char *who)
{
    int rc = check_engine(e, who);
    if (rc != 0)
        return rc;
    if (vf__graph_capturing(e)) /* recorded, not run (graph.h) */
        return vf__graph_record(e, who, desc, NULL, 0, false, NULL, 0);
    if (VF__UNLIKELY(vf__bulk_maybe(e->bulk.size)) &&
        (rc = vf__bulk_push(e, who, desc, NULL, 0, NULL, 0)) != 0)
        return rc < 0 ? rc : 0;
    /* The definition and the var set first: the set's size is the op
     * block's. */
    const vf__opdef *def = vf__defs_seen(&e->defs, desc);
    if (VF__UNLIKELY(def == NULL) &&
        (rc = vf__defs_for_push(e, who, desc, &def)) != 0)
        return rc;
    int nvars = 0;
    vf__varref small[SMALL_VARSET], *heap = NULL;
    if ((desc->reads.count | desc->writes.count) != 0) {
        if ((nvars = vf__varset_build(e, who, desc->reads, desc->writes, small,
                                      SMALL_VARSET, &heap)) < 0)
            return nvars;
    } else if (VF__UNLIKELY(vf__current_op() != NULL) &&
               (rc = push_child_alone(e, def, desc, who)) != PUSH_USUAL) {
        return rc;
    }
    vf__op *op = VF__LIKELY(desc->arg_size == 0)
                     ? vf__op_alloc(nvars)
                     : vf__op_alloc_arg(nvars, desc->arg_size);
    if (op == NULL) {
        free(heap);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    vf__op_stage_vars(op, heap ? heap : small);
    if (VF__UNLIKELY(heap != NULL))
        free(heap);
    fill_run(op, def, desc);
    if (VF__UNLIKELY(desc->arg_size != 0) &&
        (rc = vf__op_copy_arg(op, who, desc->arg, desc->arg_size)) != 0)
        goto fail;
    if ((rc = enqueue_admitted(e, op, desc->nonblocking, who)) != 0)
        goto fail;
    return 0;
fail:
    if (rc == VF_ESTALE && op->nvars > 0) /* a delete came first: which? */
        rc = vf__varset_deleted(e, who, desc->name, desc->reads, desc->writes,
                                vf__dep_var(vf__op_dep(op, 0)),
                                (uint32_t)vf__op_dep(op, 0)->gen);
    vf__op_free(op);
    return rc;
}

VF_API int vf_engine_push(vf_engine *e, const vf_op *desc)
{
    static const char who[] = "vf_engine_push";
    return VF__GUARDED(e, who, push(e, desc, who));
}

int vf__push_recorded(vf_engine *e, const vf_op *desc, const char *who)
{
    return push(e, desc, who);
}

/* --- operators --------------------------------------------------------- */

/* Under v->lock, v's delete pending: whether the op running on this
 * thread comes before that delete in the serial program (its top-level
 * ancestor pushed before it, the delete pushed from outside the ops), so
 * an operator it makes on v may still be pushed from here ahead of the
 * delete, as its other children are (child_passes_delete, asked at each
 * push). The naive engine, which ran such an op inside its push, before
 * the delete, made the operator; the others refused it (found by a user
 * tester); an op pushed after the delete is refused on every engine (the
 * reviewer). A delete from inside an op, or a fused or graph op running:
 * refused, as before. */
static bool runs_before_pending_delete(const vf__var *v)
{
    const vf__op *cur = vf__current_op();
    if (cur == NULL || !(cur->def->kind->flags & VF__KIND_NUMBERED))
        return false;
    uint64_t root = cur->up != NULL ? cur->up->root : cur->place;
    for (const vf__dep *n = v->head; n != NULL; n = n->next) {
        const vf__op *o = vf__dep_op(n);
        if (o->def->kind->flags & VF__KIND_DELETES)
            return o->delete_from == NULL && root <= o->place;
    }
    return false;
}

static int operator_create(vf_engine *e, const vf_op *desc, vf_operator **out,
                           const char *who)
{
    int rc = check_engine(e, who);
    if (rc != 0)
        return rc;
    if (out == NULL)
        return vf__fail(VF_EINVAL, "%s: out is NULL", who);
    vf_operator *opr = vf__operator_block();
    if (opr == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    if ((rc = vf__opdef_fill(e, who, desc, &opr->def)) != 0 ||
        (rc = vf__arg_check(who, desc->arg, desc->arg_size)) != 0) {
        vf__operator_block_spend(opr);
        return rc;
    }
    vf__varref *heap;
    vf__varref none;
    rc = vf__varset_build(e, who, desc->reads, desc->writes, &none, 0, &heap);
    if (rc < 0) {
        vf__operator_block_spend(opr);
        return rc;
    }
    opr->nvars = rc;
    opr->vars = heap; /* NULL when the op has no vars */
    if (desc->arg_size != 0) {
        /* The operator's own argument: copied once, freed with it. */
        if (!vf__argcopy_make(&opr->argcopy, desc->arg, desc->arg_size)) {
            free(opr->vars);
            vf__operator_block_spend(opr);
            return vf__fail(VF_ENOMEM, "%s: out of memory", who);
        }
        opr->def.arg = opr->argcopy.ptr;
    }
    bool in_op = vf__exec_current_engine() == e;
    for (int i = 0; i < opr->nvars; i++) {
        /* A var whose delete is pending is refused now, as a push would. */
        vf__var *v = opr->vars[i].var;
        vf__spin_lock(&v->lock);
        bool usable = vf__var_usable(v, opr->vars[i].gen) ||
                      (in_op && vf__var_delete_pending(v, opr->vars[i].gen) &&
                       runs_before_pending_delete(v));
        vf__spin_unlock(&v->lock);
        if (!usable) {
            rc = vf__varset_deleted(e, who, opr->def.name, desc->reads,
                                    desc->writes, v, opr->vars[i].gen);
            free(opr->vars);
            vf__argcopy_free(&opr->argcopy);
            vf__operator_block_spend(opr);
            return rc;
        }
    }
    /* Cut between UTF-8 characters, as every name is (cut at the byte,
     * its runs' and failures' names ended in half a character: found by
     * an auditor). */
    vf__name_fit(opr->name, sizeof opr->name, opr->def.name);
    opr->def.name = opr->name;
    opr->def.opr = opr; /* its runs hold a reference (op.c) */
    opr->engine = e;
    vf__operator_list(opr); /* destroy frees it if the program does not */
    /* Published last, with release: a push on a stale handle to this
     * block (the header allows it) takes a reference only once refs is
     * not 0, and passes the magic only once it reads MAGIC, after which
     * it sees every field above (op.c: vf__operator_block keeps refs and
     * the magic out of its zeroing). */
    atomic_store_explicit(&opr->deleted, false, memory_order_relaxed);
    atomic_store_explicit(&opr->refs, 1, memory_order_release);
    atomic_store_explicit(&opr->magic, VF__OPERATOR_MAGIC,
                          memory_order_release);
    *out = opr;
    return 0;
}

VF_API int vf_operator_create(vf_engine *e, const vf_op *desc,
                              vf_operator **out)
{
    static const char who[] = "vf_operator_create";
    return VF__GUARDED(e, who, operator_create(e, desc, out, who));
}

/* A call on an operator its destroy freed (its block kept: op.c), or
 * deleted and not freed yet (its last run's block goes a moment after
 * vf_engine_wait_all returns): one message, as the program did one thing
 * (a second destroy said "deleted" under TSan's timing: CI). */
static int refuse_destroyed(const char *who)
{
    return vf__fail(
        VF_EINVAL, "%s: the operator was destroyed (vf_operator_destroy)", who);
}

/* The handle's magic: 0 when it names a live operator. Acquire: a block
 * a later create took over is published by its magic's release (op.h),
 * with its fields. */
static int check_operator_magic(vf_operator *opr, const char *who)
{
    uint32_t magic = opr != NULL ? atomic_load_explicit(&opr->magic,
                                                        memory_order_acquire)
                                 : 0;
    if (magic == VF__OPERATOR_RETIRED)
        return vf__fail(VF_EINVAL, "%s: the operator's engine was destroyed",
                        who);
    if (magic == VF__OPERATOR_SPENT)
        return refuse_destroyed(who);
    if (magic != VF__OPERATOR_MAGIC)
        return vf__fail(VF_EINVAL, "%s: not an operator (NULL or deleted)",
                        who);
    return 0;
}

/* The operator's engine: 0 when it is `e` (a push reads it only once it
 * holds a reference: operator_take_on). */
static int check_operator_engine(vf_engine *e, const vf_operator *opr,
                                 const char *who)
{
    if (opr->engine != e)
        return vf__fail(VF_EXDEV,
                        "%s: the operator belongs to another "
                        "engine",
                        who);
    return 0;
}

/* The handle's checks. Whether it was deleted is each caller's to ask, in
 * the step that needs it (operator_take, the destroy's exchange). */
static int check_operator(vf_engine *e, vf_operator *opr, const char *who)
{
    int rc = check_operator_magic(opr, who);
    return rc != 0 ? rc : check_operator_engine(e, opr, who);
}

/* A reference to the operator for a push of it, taken before the push
 * reads anything of it: none is left once its last run ended after a
 * destroy, which frees its var set (a push racing the destroy on another
 * thread read it: found by a user tester), and the push is then refused
 * as after the destroy. The run takes it over (operator_op_push), or the
 * push gives it back. */
static inline int operator_take(vf_operator *opr, const char *who)
{
    int r = atomic_load_explicit(&opr->refs, memory_order_relaxed);
    do {
        if (VF__UNLIKELY(r == 0))
            return refuse_destroyed(who);
    } while (!atomic_compare_exchange_weak_explicit(
        &opr->refs, &r, r + 1, memory_order_acquire, memory_order_relaxed));
    if (VF__UNLIKELY(
            atomic_load_explicit(&opr->deleted, memory_order_relaxed))) {
        vf__operator_unref(opr);
        return refuse_destroyed(who);
    }
    return 0;
}

/* operator_take, then the operator's engine, read only now: a stale
 * handle's block may be taken over by a later create meanwhile, which
 * writes it before it publishes the block (found by a user tester: TSan). */
static inline int operator_take_on(vf_engine *e, vf_operator *opr,
                                   const char *who)
{
    int rc = operator_take(opr, who);
    if (rc == 0 && VF__UNLIKELY((rc = check_operator_engine(e, opr, who)) != 0))
        vf__operator_unref(opr);
    return rc;
}

/* An op block for a run of the operator, its var set staged; NULL
 * (VF_ENOMEM, with a detail naming `who`) without memory. */
static inline vf__op *operator_op_alloc(const vf_operator *opr, size_t arg_size,
                                        const char *who)
{
    vf__op *op = vf__op_alloc_arg(opr->nvars, arg_size);
    if (op == NULL) {
        vf__fail(VF_ENOMEM, "%s: out of memory", who);
        return NULL;
    }
    vf__op_stage_vars(op, opr->vars);
    return op;
}

/* Push a run of the operator whose definition (op->def) is set: it holds
 * the push's reference to the operator (operator_take) until it is
 * freed. */
static inline int operator_op_push(vf_engine *e, vf_operator *opr, vf__op *op,
                                   int priority, const char *who)
{
    op->def = &opr->def; /* holds the reference: freed with the op */
    op->priority = push_priority(&opr->def, priority);
    int rc = enqueue_admitted(e, op, opr->def.nonblocking, who);
    if (rc != 0)
        vf__op_free(op);
    return rc;
}

static inline __attribute__((always_inline)) int
operator_push(vf_engine *e, vf_operator *opr, int priority, const char *who)
{
    int rc = check_engine(e, who);
    if (rc != 0 || (rc = check_operator_magic(opr, who)) != 0 ||
        (rc = operator_take_on(e, opr, who)) != 0)
        return rc;
    if (vf__graph_capturing(e)) { /* recorded, not run (graph.h) */
        rc = vf__graph_record(e, who, NULL, opr, priority, false, NULL, 0);
        vf__operator_unref(opr);
        return rc;
    }
    if (VF__UNLIKELY(vf__bulk_maybe(e->bulk.size)) &&
        (rc = vf__bulk_push(e, who, NULL, opr, priority, opr->def.arg, 0)) !=
            0) {
        vf__operator_unref(opr); /* the batch took its own */
        return rc < 0 ? rc : 0;
    }
    vf__op *op = operator_op_alloc(opr, 0, who);
    if (op == NULL) {
        vf__operator_unref(opr);
        return VF_ENOMEM;
    }
    vf__op_take_run(op, &opr->def);
    return operator_op_push(e, opr, op, priority, who);
}

VF_API int vf_operator_push(vf_engine *e, vf_operator *opr, int priority)
{
    static const char who[] = "vf_operator_push";
    return VF__GUARDED(e, who, operator_push(e, opr, priority, who));
}

/* The push of an operator's run with its own argument (arg_size 0: the
 * pointer `arg` as it is), once the calls' checks passed and the push took
 * its reference (operator_take), which it hands to the run or gives back. */
static inline __attribute__((always_inline)) int
operator_run_push(vf_engine *e, vf_operator *opr, int priority, void *arg,
                  size_t arg_size, const char *who)
{
    int rc;
    if (VF__UNLIKELY(vf__bulk_maybe(e->bulk.size)) &&
        (rc = vf__bulk_push(e, who, NULL, opr, priority, arg, arg_size)) != 0) {
        vf__operator_unref(opr); /* the batch took its own */
        return rc < 0 ? rc : 0;
    }
    vf__op *op = operator_op_alloc(opr, arg_size, who);
    if (op == NULL) {
        vf__operator_unref(opr);
        return VF_ENOMEM;
    }
    vf__op_take_run(op, &opr->def);
    op->arg = arg;
    if (arg_size != 0 && (rc = vf__op_copy_arg(op, who, arg, arg_size)) != 0) {
        vf__op_free(op); /* def is not set: the block holds no reference */
        vf__operator_unref(opr);
        return rc;
    }
    return operator_op_push(e, opr, op, priority, who);
}

/* As vf_operator_push, with an argument of this run's own: the op shares
 * the operator's definition and var set, and takes `arg` (or its copy)
 * in place of the operator's argument. */
static inline __attribute__((always_inline)) int
operator_push_arg(vf_engine *e, vf_operator *opr, int priority, void *arg,
                  size_t arg_size, const char *who)
{
    int rc = check_engine(e, who);
    if (rc != 0 || (rc = check_operator_magic(opr, who)) != 0 ||
        (rc = vf__arg_check(who, arg, arg_size)) != 0 ||
        (rc = operator_take_on(e, opr, who)) != 0)
        return rc;
    if (vf__graph_capturing(e)) { /* recorded, not run (graph.h) */
        rc = vf__graph_record(e, who, NULL, opr, priority, true, arg, arg_size);
        vf__operator_unref(opr);
        return rc;
    }
    return operator_run_push(e, opr, priority, arg, arg_size, who);
}

VF_API int vf_operator_push_arg(vf_engine *e, vf_operator *opr, int priority,
                                void *arg, size_t arg_size)
{
    static const char who[] = "vf_operator_push_arg";
    return VF__GUARDED(e, who,
                       operator_push_arg(e, opr, priority, arg, arg_size, who));
}

int vf__push_operator_run(vf_engine *e, vf_operator *opr, int priority,
                          void *arg, size_t arg_size, const char *who)
{
    int rc = check_engine(e, who);
    if (rc != 0)
        return rc;
    /* The graph holds the operator (a reference of its own). */
    atomic_fetch_add_explicit(&opr->refs, 1, memory_order_relaxed);
    return operator_run_push(e, opr, priority, arg, arg_size, who);
}

static int operator_destroy(vf_engine *e, vf_operator *opr, const char *who)
{
    int rc = check_operator(e, opr, who);
    if (rc != 0)
        return rc;
    bool expected = false;
    if (!atomic_compare_exchange_strong(&opr->deleted, &expected, true))
        return refuse_destroyed(who);
    vf__operator_unref(opr);
    return 0;
}

VF_API int vf_operator_destroy(vf_engine *e, vf_operator *opr)
{
    static const char who[] = "vf_operator_destroy";
    return VF__GUARDED_LIVE(e, who, operator_destroy(e, opr, who));
}
