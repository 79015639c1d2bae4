/*
 * wait.c: wait_var and wait_all, from outside ops and from inside them.
 *
 * wait_var(v) pushes a wait marker that reads v (MXNet's WaitForVar): it
 * becomes ready once every write pushed before it has finished, and then
 * wakes the waiter (inline, on the thread that released it). When v has no
 * write queued or running, the wait returns at once without a push.
 *
 * A wait from inside an op must neither hang the pool nor hang forever,
 * nor grow the waiting thread's stack without bound (rule 10):
 * - the waiting worker keeps running ready ops of its pool (and a thread
 *   running inline ops runs its deferred ones) until its marker fires;
 *   each runs on top of the wait, so it takes only ops that descend from
 *   the waiting op (OpenMP's constraint for tied tasks: the frames stack
 *   only as deep as the program nests pushes; a push from inside an op
 *   goes to the front of the worker's lane, where its waiter finds it,
 *   or another worker took it and its descendants are in that one's),
 *   and only while the stack has room (exec.c: vf__exec_loop_run_one). Beside
 *   queued ops it will not run it sleeps on its own (wait.h), looking
 *   again every NESTED_POLL_US; when every thread of the pool does, the
 *   pool starts a spare thread to run them (sched.h);
 * - it stops counting as active while it waits. If active reaches zero with
 *   its marker still pending, every unfinished op waits for a var or for a
 *   nested wait, so nothing can ever move (see engine.h). One such wait
 *   gives up with VF_EDEADLK, the first in push order (claim_deadlock);
 *   the others go on waiting, since its op finishing may well unblock
 *   them.
 * Waiting on a var the running op itself writes is refused at once, and so
 * is any wait from a `done` callback of the engine's own ops.
 *
 * What a wait reports is fixed by its place in push order (failure.h):
 * the marker (or the quick answer) reports the failure the var holds once
 * every earlier write has finished, and claiming it at the wait's place
 * leaves it live for the ops pushed before the wait that have still to
 * run. wait_all drains, then reports the first failure in push order.
 *
 * A timed wait that gives up abandons its marker (it fires later and
 * claims nothing) and names the async ops nobody completed (async.h).
 */
#include <string.h>

#include "base/alloc.h"
#include "base/cancel.h"
#include "base/ref.h"
#include "core/async.h"
#include "core/bulk.h"
#include "core/cross_wait.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/freelist.h"
#include "core/graph.h"
#include "core/lifecycle.h"
#include "core/profiling.h"
#include "core/push.h"
#include "core/run.h"
#include "core/stall_report.h"
#include "core/wait.h"

/* Waiters come from the free lists (freelist.h): a recursion waits at
 * every level. waiter_free(NULL) does nothing, as free's. */
static void waiter_free(vf__waiter *w)
{
    if (w != NULL) {
        vf__ecount_destroy(&w->wake);
        vf__fl_free(VF__FL_WAITER, w);
    }
}

/* A waiter for a wait of `e` (`nested`: inside an op of it, whose family
 * is `family`) on `var` (NULL: for children), IDLE, with its two
 * references (the waiting thread's and its marker's or family's); NULL
 * when out of memory. `me` is the calling thread's worker of `e`, if any:
 * a nested waiter may sleep in its pool. */
static vf__waiter *waiter_new(vf_engine *e, bool nested,
                              const vf__family *family, const vf__var *var,
                              vf__worker *me)
{
    vf__waiter *w = vf__fl_alloc(VF__FL_WAITER);
    if (w == NULL)
        return NULL;
    if (vf__ecount_init(&w->wake) != 0) {
        vf__fl_free(VF__FL_WAITER, w);
        return NULL;
    }
    atomic_init(&w->state, VF__W_IDLE);
    atomic_init(&w->refs, 2);
    w->claimed = NULL;
    w->notice_skipped = false;
    w->skipped_later = false;
    w->skipped_by = NULL;
    w->sleep_pool = nested && me != NULL ? me->pool : NULL;
    w->nested = nested;
    w->family = family;
    w->var = var;
    w->engine = e;
    w->key = vf__push_wait_key(e);
    atomic_init(&w->in_pool, false);
    w->tag = me != NULL ? me->tag : 0;
    w->look = (vf__pool_look){0, 0};
    w->refused_look = false;
    return w;
}

void vf__waiter_unref(vf__waiter *w)
{
    if (vf__ref_drop(&w->refs)) {
        vf__failure_unref(w->claimed);
        vf__failure_unref(w->skipped_by);
        waiter_free(w);
    }
}

/* Whether failure `f` (may be NULL) is one a wait at `key` may report: of
 * an op before the wait in push order. A wait inside an op counts no op
 * pushed after it, whose failure may be on the var already (it claimed
 * it, and the program's own wait after that op found nothing: found by
 * the reviewer of the waits' push order). */
static bool failure_before(const vf__failure *f, vf__wait_key key)
{
    return f != NULL &&
           vf__wait_key_after(f->up, f->place, key.up, key.next, key.self);
}

/* What a var wait's marker reports once every write pushed before the wait
 * has finished: the var's failure (or its last device write's), which is
 * the one at the wait's position `key`, claimed there, so it is cleared
 * from there on (failure.h); NULL: none. */
static vf__failure *marker_claim(vf_engine *e, vf__op *op, vf__wait_key key)
{
    vf__var *v = vf__dep_var(&op->deps[0]);
    vf__failure *f = atomic_load_explicit(&v->failure, memory_order_acquire);
    if (vf__engine_has_devices(e))
        f = vf__fences_var_failure(e, v, f,
                                   f != NULL && vf__failure_live_at(f, key));
    return failure_before(f, key) && vf__failure_claim(f, key) ? f : NULL;
}

/* Under v's lock: whether v's last write, before a wait at `key`, was
 * skipped for a later op's failure (skip_mark.h), its own or, for a
 * device write, its fence's once resolved (a host write drops the fence,
 * a device write's release clears v's own); then *cause is that failure
 * (a new reference, or NULL). A marker met the write's fence before it
 * fired (exec.c: run_body). */
static bool last_write_skipped(const vf__var *v, vf__wait_key key,
                               vf__failure **cause)
{
    const vf__fence *wf = v->wfence;
    return vf__var_skip_before(v, key, cause) ||
           (wf != NULL &&
            atomic_load_explicit(&wf->resolved, memory_order_acquire) &&
            vf__skip_mark_before(wf->mark, key, cause));
}

/* Wake the waiter `w` where it sleeps (wait.h): a thread outside the
 * engine's ops on the engine's cond, a nested waiter among its pool's
 * sleepers by its tag, or else on its own event count. */
static void waiter_wake(vf_engine *e, vf__waiter *w)
{
    if (!w->nested) {
        pthread_mutex_lock(&e->waits.lock);
        pthread_cond_broadcast(&e->waits.cond);
        pthread_mutex_unlock(&e->waits.lock);
    } else if (atomic_load(&w->in_pool)) {
        vf__pool_wake_tag(w->sleep_pool, w->tag);
    } else if (vf__ecount_unwoken(&w->wake) > 0) {
        vf__ecount_notify(&w->wake, true);
    }
}

/* The wait is over: hand the waiter what `marker` (a var wait's; NULL for
 * a wait for children, which reports by itself) claims, and wake it,
 * unless the waiter gave up. A nested waiter sitting in its loop is
 * counted active again here, while the firing op (the marker, or the last
 * child finishing) still counts as active itself, so active never touches
 * zero while the waiter is about to run (engine.h); one whose thread is
 * busy above the wait is counted when that op returns (vf__waiter). The
 * caller drops its reference to `w` after. */
static void waiter_fire(vf_engine *e, vf__waiter *w, vf__op *marker)
{
    int s = atomic_load(&w->state);
    while ((s == VF__W_IDLE || s == VF__W_BUSY) &&
           !atomic_compare_exchange_weak(&w->state, &s, VF__W_SIGNALING)) {
    }
    if (s == VF__W_IDLE || s == VF__W_BUSY) {
        vf__failure *f = marker != NULL ? marker_claim(e, marker, w->key)
                                        : NULL;
        if (f != NULL) {
            vf__failure_ref(f);
            w->claimed = f;
        }
        if (marker != NULL) {
            vf__var *v = vf__dep_var(vf__op_dep(marker, 0));
            w->notice_skipped = atomic_load_explicit(&v->notice_skipped,
                                                     memory_order_relaxed);
            /* Nothing to look at under the lock, most waits: no mark (its
             * writer, which set it, released v before the marker ran) and
             * no fence (an engine without devices). */
            if (atomic_load_explicit(&v->skip_mark, memory_order_relaxed) !=
                    NULL ||
                vf__engine_has_devices(e)) {
                vf__spin_lock(&v->lock);
                w->skipped_later = last_write_skipped(v, w->key,
                                                      &w->skipped_by);
                vf__spin_unlock(&v->lock);
            }
        }
        bool on_top = s == VF__W_IDLE;
        if (w->nested && on_top)
            vf__engine_count_in(e, VF__COUNT_ACTIVE);
        atomic_store(&w->state, on_top ? VF__W_DONE : VF__W_DONE_UNCOUNTED);
        /* Where it sleeps (waiter_wake). The waiter holds a reference:
         * `w` lives on after DONE. */
        waiter_wake(e, w);
    }
}

void vf__wait_marker_fire(vf__op *op)
{
    vf__waiter *w = op->waiter;
    waiter_fire(vf__op_engine(op), w, op);
    op->waiter = NULL;
    vf__waiter_unref(w);
}

/* --- waiting for children ----------------------------------------------- */

void vf__wait_child_failed(vf__family *f, vf__failure *failure, uint64_t place)
{
    vf__failure *old = NULL;
    vf__spin_lock(&f->lock);
    vf__failure *cur = atomic_load_explicit(&f->first, memory_order_relaxed);
    bool waited = place >=
                  atomic_load_explicit(&f->waited_from, memory_order_relaxed);
    if (waited && vf__failure_before(failure, cur)) {
        vf__failure_ref(failure);
        old = cur;
        atomic_store(&f->first, failure);
    }
    /* Skipped for it (a child's own failure is at its own place). */
    if (waited && vf__failure_after(failure, f, place))
        atomic_store(&f->skipped_by_later, true);
    vf__spin_unlock(&f->lock);
    vf__failure_unref(old);
    /* The run is over (family.h): keep nothing. */
    if (atomic_load(&f->run_over))
        vf__failure_unref(vf__family_take_first(f));
}

void vf__wait_child_notice_skipped(vf__family *f, uint64_t place)
{
    /* Under the lock: a give-up (children_given_up) clears the flag, and
     * sets waited_from, in one step. */
    vf__spin_lock(&f->lock);
    if (place >= atomic_load(&f->waited_from))
        atomic_store(&f->notice_skipped, true);
    vf__spin_unlock(&f->lock);
}

void vf__wait_child_finished(vf_engine *e, vf__op *op)
{
    vf__family *f = op->up;
    if (VF__UNLIKELY(op->failure != NULL))
        vf__wait_child_failed(f, op->failure, op->place);
    else if (VF__UNLIKELY(op->skipped))
        vf__wait_child_notice_skipped(f, op->place);
    /* The lowering to zero clears VF__FAMILY_WAITING in the same step:
     * the waiter it fires then waits for this very count (family.h). A
     * give-up (children_given_up) between the look at `waited_from` and
     * the compare-and-swap changes the word: the loop looks again. */
    uint64_t p = atomic_load(&f->pending), next;
    do {
        if (VF__UNLIKELY(op->place < atomic_load(&f->waited_from)))
            return; /* a wait gave up on it: nobody counts it */
        next = p - 1;
        if ((p & VF__FAMILY_COUNT) == 1)
            next &= ~VF__FAMILY_WAITING;
    } while (!atomic_compare_exchange_weak(&f->pending, &p, next));
    if ((p & VF__FAMILY_COUNT) != 1 || !(p & VF__FAMILY_WAITING))
        return;
    vf__waiter *w = atomic_exchange(&f->waiter, NULL);
    VF__ASSERT(w != NULL);
    waiter_fire(e, w, NULL);
    vf__waiter_unref(w); /* the family's */
}

static bool run_marker(vf__op *op, int worker, bool shutdown)
{
    (void)worker;
    (void)shutdown; /* a wait still ends */
    vf__wait_marker_fire(op);
    return true;
}

/* wait_var's marker: reads the var; its body wakes the waiter. A push
 * while stopped is not held (a wait on a stopped engine with held ops is
 * refused before it pushes, lifecycle.h). */
const vf__op_kind vf__kind_wait = {.name = "wait marker",
                                   .run = run_marker,
                                   .flags = VF__KIND_BUMPS | VF__KIND_NO_CODE};

/* A wait reports `f`: into `err`, and as the calling thread's detail
 * (vf_error_detail() says what the last failing call met; it said what an
 * earlier refused call had: found trying async ops as a user). Returns
 * VF_EOPFAILED. */
static int report_info(const vf_error *info, vf_error *err, const char *who)
{
    if (err != NULL)
        *err = *info;
    /* No message (an op that returned its code and said nothing): no
     * dangling ": " (found by a user tester). */
    return vf__fail(VF_EOPFAILED, "%s: op \"%s\" failed (%d)%s%s", who,
                    info->op_name, info->code, info->message[0] ? ": " : "",
                    info->message);
}

static int report(const vf__failure *f, vf_error *err, const char *who)
{
    return report_info(&f->info, err, who);
}

static void clear_error(vf_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
}

static bool is_done(vf__waiter *w)
{
    return atomic_load(&w->state) == VF__W_DONE;
}

/* Done, or chosen to give up for a deadlock (claim_deadlock): either way
 * the waiter is counted active again and goes on. */
static bool is_over(vf__waiter *w)
{
    int s = atomic_load(&w->state);
    return s == VF__W_DONE || s == VF__W_DEADLOCKED;
}

struct nested_pred {
    vf_engine *e;
    vf__waiter *w;
};

static bool nested_should_wake(void *arg)
{
    const struct nested_pred *p = arg;
    return is_over(p->w) || vf__counts_active(vf__engine_counts(p->e)) == 0;
}

/* A thread outside the engine's ops goes to sleep in a wait (+1), or
 * wakes (-1). */
static void asleep_outside(vf_engine *e, int delta)
{
    atomic_fetch_add_explicit(&e->waits.outside_asleep, delta,
                              memory_order_relaxed);
}

/* A thread outside the engine's ops sleeps on the engine's condition until
 * `w` is done or `until` passes. Spurious returns are fine: callers loop.
 * Its marker wakes it. */
static void sleep_outside(vf_engine *e, vf__waiter *w,
                          const vf__deadline *until)
{
    asleep_outside(e, 1);
    pthread_mutex_lock(&e->waits.lock);
    if (!is_over(w) && !vf__deadline_passed(until))
        vf__cond_wait_until(&e->waits.cond, &e->waits.lock, until);
    pthread_mutex_unlock(&e->waits.lock);
    asleep_outside(e, -1);
}

/* A thread of a CPU pool blocked in a wait other than a nested wait of
 * its engine (sched.h: vf__pool_of_blocked_thread): on another engine, or
 * on its own from inside an op of another. */
typedef struct blocked {
    vf__pool *pool; /* NULL: no pool's thread */
    vf__deadline grace;
    vf__deadline retry; /* the next ask for a spare that could not start */
    bool counted;       /* stuck in `pool` */
} blocked;

/* The grace of a thread's timed waits that gave up in a row, from inside
 * one op (`place` tells it from an op in its block later): the next goes
 * on with it. A loop of 1 ms timed waits began a grace at each and never
 * reached its end, so the pool never lent the spare the waits needed
 * (found by the reviewer of the grace: it polled for ever); and counted
 * stuck at once instead, a recursion whose levels each polled another
 * engine's quick op got a spare for each level (its second reviewer:
 * 6,000 levels on 560 threads, 17 times slower). */
static _Thread_local struct {
    const vf__op *op;
    uint64_t place;
    vf__deadline grace;
} blocked_carried;

static void blocked_begin(blocked *b)
{
    b->pool = vf__pool_of_blocked_thread();
    b->counted = false;
    const vf__op *cur = vf__current_op();
    if (cur != NULL && cur->place != 0 && blocked_carried.op == cur &&
        blocked_carried.place == cur->place)
        b->grace = blocked_carried.grace;
    else
        b->grace = vf__deadline_within_us(NULL, VF__WAIT_STUCK_GRACE_US);
    blocked_carried.op = NULL;
}

/* Before a sleep, no lock held (the pool may start a spare): the
 * deadline to sleep to, `until` or the grace's end if that comes first;
 * once the grace is over, the thread counts stuck (wait.h:
 * VF__WAIT_STUCK_GRACE_US) until blocked_wake, and while the pool's spare
 * could not start, it wakes to ask again (sched.h: VF__SPARE_RETRY_MS). */
static const vf__deadline *blocked_sleep(blocked *b, const vf__deadline *until)
{
    if (b->pool == NULL)
        return until;
    if (b->counted) {
        vf__pool_stuck_again(b->pool);
    } else if (vf__deadline_passed(&b->grace)) {
        vf__pool_stuck_enter(b->pool);
        b->counted = true;
    } else {
        return vf__deadline_earlier(until, &b->grace);
    }
    if (!vf__pool_spare_failing(b->pool))
        return until;
    b->retry = vf__deadline_within_us(until, VF__SPARE_RETRY_MS * 1000);
    return &b->retry;
}

static void blocked_wake(blocked *b)
{
    if (b->counted)
        vf__pool_stuck_leave(b->pool);
    b->counted = false;
}

/* The wait is over; `gave_up` (timed out): its op's next wait goes on
 * with its grace (blocked_carried). */
static void blocked_end(blocked *b, bool gave_up)
{
    blocked_wake(b);
    const vf__op *cur = vf__current_op();
    if (gave_up && b->pool != NULL && cur != NULL && cur->place != 0) {
        blocked_carried.op = cur;
        blocked_carried.place = cur->place;
        blocked_carried.grace = b->grace;
    }
}

/* A nested waiter sleeps alone (wait.h) until `w` is done or chosen,
 * active may be zero, or `until` passes. Spurious returns are fine:
 * callers loop. */
static void sleep_alone(vf_engine *e, vf__waiter *w, const vf__deadline *until)
{
    /* Out of the pool before the looks at `state` (waiter_wake's Dekker
     * pair), counted in before them, which then see any change made
     * before a notifier could read the count as zero (ecount.h). */
    atomic_store(&w->in_pool, false);
    uint32_t key = vf__ecount_prepare(&w->wake);
    if (is_over(w) || vf__counts_active(vf__engine_counts(e)) == 0 ||
        vf__deadline_passed(until))
        vf__ecount_cancel(&w->wake);
    else
        vf__ecount_wait(&w->wake, key, until);
}

/* A nested waiter of worker `me` sleeps among its pool's sleepers, by its
 * tag (wait.h), until work comes that it may run, `w` is done or chosen,
 * active may be zero, or `until` passes; with `inbox`, work on its own
 * inbox only (a device's pool: vf__pool_wait_inbox). */
static void sleep_in_pool(vf_engine *e, vf__waiter *w, vf__worker *me,
                          bool inbox, const vf__deadline *until)
{
    struct nested_pred pred = {e, w};
    atomic_store(&w->in_pool, true); /* before the looks, as above */
    if (inbox)
        vf__pool_wait_inbox(me, nested_should_wake, &pred, w->tag, until);
    else
        vf__pool_idle_wait(me->pool, nested_should_wake, &pred, w->tag, until);
    /* Awake: its marker need not wake the pool's sleepers by its tag (an
     * epoch moved sends those about to block back to look again). It
     * looks at its state again before it sleeps, wherever. */
    atomic_store(&w->in_pool, false);
}

/* A system call a sleeper under the list's lock: only when active reached
 * zero with nested waiters watching, which a program meets at a deadlock,
 * not in its steady state. */
void vf__wait_wake_alone(vf_engine *e)
{
    vf__sleeplock_lock(&e->waits.nested_lock);
    for (vf__waiter *w = e->waits.nested; w != NULL; w = w->nested_next)
        if (vf__ecount_unwoken(&w->wake) > 0)
            vf__ecount_notify(&w->wake, true);
    vf__sleeplock_unlock(&e->waits.nested_lock);
}

/* The engine's list of nested waiters (vf__waits.nested): `w` joins it
 * before it stops counting as active, and leaves once it ended. */
static void nested_join(vf_engine *e, vf__waiter *w)
{
    vf__sleeplock_lock(&e->waits.nested_lock);
    w->nested_prev = NULL;
    w->nested_next = e->waits.nested;
    if (w->nested_next != NULL)
        w->nested_next->nested_prev = w;
    e->waits.nested = w;
    vf__sleeplock_unlock(&e->waits.nested_lock);
}

static void nested_leave(vf_engine *e, vf__waiter *w)
{
    vf__sleeplock_lock(&e->waits.nested_lock);
    if (w->nested_prev != NULL)
        w->nested_prev->nested_next = w->nested_next;
    else
        e->waits.nested = w->nested_next;
    if (w->nested_next != NULL)
        w->nested_next->nested_prev = w->nested_prev;
    vf__sleeplock_unlock(&e->waits.nested_lock);
}

/* Of the engine's nested waiters sitting in their wait loops (IDLE: one
 * busy under an op above its wait has a waiter of that op's above it,
 * which comes first in push order), the first in push order: the wait
 * the serial program reaches first. Under nested_lock. */
static vf__waiter *first_idle_nested(vf_engine *e)
{
    vf__waiter *first = NULL;
    for (vf__waiter *w = e->waits.nested; w != NULL; w = w->nested_next)
        if (atomic_load(&w->state) == VF__W_IDLE &&
            (first == NULL ||
             vf__family_before(w->key.up, w->key.next, first->key.up,
                               first->key.next)))
            first = w;
    return first;
}

/* A nested waiter `self` found active at zero: every op of the engine
 * waits, for a var or in a nested wait, so nothing can move unless a wait
 * gives up. Which one is not the first to notice: it is the nested wait
 * first in push order (first_idle_nested), as in the serial program,
 * where the waits come in that order and the first that can never finish
 * is the one that fails; the later ones may well finish once it did (a
 * wait for children whose child is stuck in such a wait, say), and when
 * the first to notice gave up, the answer was timing's. `self` chooses it
 * under waits.lock, with the sum taken again there, and counts it active
 * (so a later claimer sees active at zero only if the engine got stuck
 * again after that): true when that is `self`, which then gives up; else
 * the chosen one is DEADLOCKED and woken, and `self` goes on waiting. */
static bool claim_deadlock(vf_engine *e, vf__waiter *self)
{
    /* The slot first: finding it may take the slots lock (counts.h). */
    vf__count_slot *slot = vf__counts_slot(&e->counts);
    vf__waiter *chosen = NULL;
    pthread_mutex_lock(&e->waits.lock);
    if (vf__counts_active(vf__engine_counts(e)) == 0) {
        vf__sleeplock_lock(&e->waits.nested_lock);
        chosen = first_idle_nested(e);
        int idle = VF__W_IDLE;
        if (chosen != NULL && chosen != self &&
            !atomic_compare_exchange_strong(&chosen->state, &idle,
                                            VF__W_DEADLOCKED))
            chosen = NULL; /* its marker fires: that is progress */
        if (chosen != NULL) {
            atomic_fetch_add(&slot->start, VF__COUNT_ACTIVE);
            if (chosen != self)
                atomic_fetch_add(&chosen->refs, 1); /* for the wake below */
        }
        vf__sleeplock_unlock(&e->waits.nested_lock);
    }
    pthread_mutex_unlock(&e->waits.lock);
    if (chosen == NULL || chosen == self)
        return chosen != NULL;
    waiter_wake(e, chosen);
    vf__waiter_unref(chosen);
    return false;
}

/* Take `w` back from its marker (a wait that gives up): true when that
 * happened before the marker fired, which then reports nothing (an
 * abandoned wait claims no failure); false when the marker fired first
 * (it is DONE on return and its result stands) or another waiter chose
 * `w` to give up for a deadlock (`*chosen`: it is ABANDONED on return,
 * counted active by the chooser, and its result is VF_EDEADLK). */
static bool abandon(vf__waiter *w, bool *chosen)
{
    *chosen = false;
    int expected = VF__W_IDLE;
    if (atomic_compare_exchange_strong(&w->state, &expected, VF__W_ABANDONED))
        return true;
    if (expected == VF__W_DEADLOCKED) { /* only its waiter moves it on */
        atomic_store(&w->state, VF__W_ABANDONED);
        *chosen = true;
        return false;
    }
    while (atomic_load(&w->state) != VF__W_DONE)
        vf__cpu_relax(); /* SIGNALING: the marker is finishing */
    return false;
}

/* A nested waiter starts (`on`) or stops watching the counts for active
 * at zero (a deadlock): counted in waits.nnested and waits.watchers, the
 * watcher count before any sum it takes (counts.h). */
static void watch(vf_engine *e, bool *watching, bool on)
{
    if (*watching == on)
        return;
    if (on) {
        atomic_fetch_add(&e->waits.nnested, 1);
        atomic_fetch_add(&e->waits.watchers, 1);
    } else {
        atomic_fetch_sub(&e->waits.watchers, 1);
        atomic_fetch_sub(&e->waits.nnested, 1);
    }
    *watching = on;
}

/* How often a nested waiter that sleeps beside queued ops it would not run
 * looks again for one it would. */
#define NESTED_POLL_US 200

/* How many looks in a row (HOPELESS_POLL_US apart after the first: 0.4
 * ms in all with the two before) a stuck waiter finds
 * that no other thread will run what it refuses (sched.h:
 * vf__pool_stuck_for_good) while no op of the engine runs (not merely
 * while every thread of its device pool waits: an op of another pool may
 * be running that they wait for, and a forced run above a wait may wait
 * for what that wait's op holds, a false VF_EDEADLK: the second reviewer
 * found one), before it runs
 * one of those ops itself, its stack permitting, though the op may not
 * descend from its own (vf__exec_loop_run_one with `any`): nobody else
 * ever will. That happens in a device's pool (whose threads take only
 * their own queues, and which adds no spare), past VF__FAMILY_DEPTH
 * levels of nesting, where a waiter knows only its op's children as its
 * descendants (family.h), and in a pool with all its spares stuck too. */
#define HOPELESS_LOOKS 10

/* How often a waiter looks again once it found nobody else would run what
 * it refuses: the state it saw (every active op of the engine queued, no
 * thread of the pool to take them) holds until someone runs one, so the
 * looks only make sure of a snapshot; each forced run of a recursion on a
 * device's pool costs their sum (it was 10 ms, and a recursion across
 * two devices' pools took seconds for fib(16): found trying it as a user). */
#define HOPELESS_POLL_US 20

/* How long a waiter that sleeps alone (no stack room above its wait:
 * wait.h) sleeps between its looks at the most, its sleeps doubling from
 * NESTED_POLL_US. Its marker, a deadlock's choice and active at zero wake
 * it; its looks only see whether the pool got stuck for good, or needs a
 * spare that could not be started before (sched.h), and a deep recursion
 * has hundreds of such waiters: at NESTED_POLL_US each, their looks took
 * both cores of a small machine. */
#define ALONE_POLL_MAX_US 20000
/* The same for one not counted stuck yet: its looks are what counts it,
 * so the pool lends a spare for an op queued after its first look. */
#define ALONE_POLL_UNCOUNTED_US 1000
/* How long a waiter that refused what the pool holds sleeps at the most
 * while the pool's queues stay as they were, its sleeps doubling from
 * NESTED_POLL_US (nested_wait). */
#define REFUSE_POLL_MAX_US 2000

/* Whether no op of the engine runs: every active op is one queued on a
 * pool that will not run it (vf__pool_queued_stuck: a pool with a thread
 * free, or a spare to lend, runs what is queued on it, however late its
 * thread wakes on a loaded machine, and a device's thread what is on its
 * own queue, unless it waits and refused it) (snapshots; an inbox counts
 * as one op, so this errs towards no). An op whose push at the in-flight
 * bound runs ops above it lends them its count (exec.h), as it goes on
 * only once they are over.
 * A CPU op queued and about to start counted as stuck: a device pool's
 * waiter then forced a run above its wait that the CPU op's end would
 * have made needless (test_wait_recursive's
 * device_waiters_beside_a_running_cpu_op, 1 run in 60). */
static bool only_queued_active(vf_engine *e)
{
    uint64_t queued = 0;
    int n = atomic_load_explicit(&e->npools, memory_order_acquire);
    for (int i = 0; i < n; i++)
        queued += vf__pool_queued_stuck(&e->pools[i]);
    /* The ops only this thread runs (it refuses them while its stack is
     * full, and holds later ones: exec.h). */
    queued += (uint64_t)vf__exec_local_count(e);
    return vf__counts_active(vf__engine_counts(e)) <= queued;
}

/* A nested wait of `op` (running on this thread; `place` tells it from an
 * op in its block later: blocks are reused at once) timed out after
 * `hopeless` hopeless looks and `refusals` refusals in a row: its next
 * wait goes on from there, one look short of a forced run (the state is
 * looked at again first). A loop of 1 ms timed waits began at zero every
 * time and never reached the forced run that the untimed wait comes to in
 * about 0.4 ms: a recursion through device ops 15-30 times slower, for
 * ever under TSan (found trying it as a user). */
static _Thread_local struct {
    const vf__op *op;
    uint64_t place;
    int hopeless, refusals;
} carried;

/* The last nested_wait of this thread gave up with VF_EDEADLK for want
 * of stack (its detail says so), not for a cycle. */
static _Thread_local bool starved_stack;
/* Or for ops nobody runs while its stack had room. */
static _Thread_local bool starved_other;

/* Run ready ops while waiting inside an op; see the file comment.
 * Returns 0 when the marker fired, VF_EDEADLK when this waiter gave up for
 * a deadlock (or, `starved_stack`, for want of stack), VF_ETIMEDOUT when
 * `until` passed first. Either way the caller
 * is counted active again on return: by the marker (or the op that ran
 * above the wait) when it fired, by the waiter itself when it gave up. */
static int nested_wait(vf_engine *e, vf__waiter *w, vf__worker *me,
                       const vf__deadline *until)
{
    starved_stack = starved_other = false;
    /* Its own lowering wakes the waiters that watch if it was the last
     * active op. It watches the counts itself only while it finds nothing
     * to run (watch): while it runs an op above the wait, that op counts
     * as active, so nothing can get stuck, and the finishes of a
     * recursion need not sum the counts for it (counts.h). Listed among
     * the nested waiters first: a deadlock its lowering makes picks among
     * them (claim_deadlock). */
    nested_join(e, w);
    /* Its op waits further down this thread already, counted out there
     * (a `done` callback of another engine's op that wait ran above it
     * waits now): counted in for this wait, which counts it out and back
     * as any does, and out again after. Counted out twice, the engine's
     * `active` read zero with an op of it in flight: a false VF_EDEADLK
     * (found by the reviewer of the nested waits' counts). */
    const vf__op *cur = vf__current_op();
    bool out_below = vf__exec_counted_out(cur);
    if (out_below)
        vf__engine_count_in(e, VF__COUNT_ACTIVE);
    vf__engine_wake(e, vf__engine_count_out(e, VF__COUNT_ACTIVE, true));
    bool watching = false;
    vf__exec_loop_frame saved;
    vf__exec_loop_enter(w, &saved);
    vf__exec_hold hold; /* the ops after the wait, and not its op's */
    vf__exec_hold_enter(&hold, e, w->key, w->family, true);
    if (me != NULL)
        vf__worker_waiting(me, 1);
    /* The top of its thread's stack for the whole wait: with no room for
     * an op above it, it takes none and sleeps alone (wait.h). Its first
     * look measures that, where the ops are taken (exec.c), once: the
     * waiter measured it here, and each look again, deeper, and one whose
     * frames straddled the line refused its own child and slept as a
     * refuser, counted stuck only while asleep: a recursion's hundreds
     * such took 4-15 s for 40,000 levels on 128 KiB stacks, or 0.3 s, as
     * the frame sizes fell (test_sched_wake). Measured here alone, ops
     * ran 1-2 KiB past the line, and a program that fit overflowed (the
     * reviewer). */
    int room = -1;
    bool alone = false;
    /* Such a waiter never runs a queued op: in its pool it counts as stuck
     * from the first it refused to its wait's end, so a pool whose threads
     * are all so stuck lends a spare (sched.h) without each of them waking
     * to refuse again. Counted from its wait's start instead, every such
     * waiter of a deep recursion went for the pool's spare lock as its
     * wait began, a convoy as slow as the herd (40,000 levels: 9 s). */
    bool counted_stuck = false;
    long alone_poll_us = NESTED_POLL_US;
    long refuse_poll_us = NESTED_POLL_US;
    /* Its last sleep was among the pool's sleepers, where a wake owed for
     * an op placed may have come to it (see the loop's end). */
    bool slept_in_pool = false;
    int rc = 0, refusals = 0, hopeless = 0;
    if (cur != NULL && carried.op == cur && carried.place == cur->place) {
        refusals = carried.refusals;
        hopeless = carried.hopeless < HOPELESS_LOOKS ? carried.hopeless
                                                     : HOPELESS_LOOKS - 1;
    }
    carried.op = NULL;
    for (;;) {
        int s = atomic_load(&w->state);
        if (s == VF__W_DONE)
            break;
        if (s == VF__W_SIGNALING) {
            vf__cpu_relax();
            continue;
        }
        if (s == VF__W_DEADLOCKED) { /* chosen, and counted active */
            atomic_store(&w->state, VF__W_ABANDONED);
            rc = VF_EDEADLK;
            break;
        }
        VF__ASSERT(s == VF__W_IDLE);
        /* Nobody else will ever run the ops this waiter refuses (below):
         * it runs one itself if its stack has room (past that, and past
         * VF__MAX_SPARES spares, a recursion waits for ever). */
        int ran = vf__exec_loop_run_one(w, me, hopeless >= HOPELESS_LOOKS,
                                        &room);
        alone = room == 0;
        if (ran == VF__LOOP_RAN) {
            refusals = 0;
            hopeless = 0;
            watch(e, &watching, false);
            continue;
        }
        watch(e, &watching, true); /* before the sum (counts.h) */
        bool stuck = vf__counts_active(vf__engine_counts(e)) == 0;
        /* Nobody else will run what it waits for, and it could not either
         * in as many looks again as it waited before trying: its stack is
         * full (a recursion deeper than the stack allows, where no spare
         * thread is lent: a device's pool), or the ops are not ones it may
         * take. Waiting on would be for ever. */
        bool starved = hopeless > 2 * HOPELESS_LOOKS;
        if (stuck || starved || vf__deadline_passed(until)) {
            /* Count ourselves active again before giving up, so active
             * never reads zero while we still might go on (engine.h). A
             * deadlock is claimed by one waiter, which makes active
             * non-zero again for the one first in push order, maybe
             * itself (claim_deadlock). */
            if (!stuck)
                vf__engine_count_in(e, VF__COUNT_ACTIVE);
            else if (!claim_deadlock(e, w))
                continue;
            bool chosen;
            if (abandon(w, &chosen)) {
                rc = stuck || starved ? VF_EDEADLK : VF_ETIMEDOUT;
                if (rc == VF_ETIMEDOUT && cur != NULL && cur->place != 0) {
                    carried.op = cur;
                    carried.place = cur->place;
                    carried.hopeless = hopeless;
                    carried.refusals = refusals;
                }
                starved_stack = starved && !stuck && alone;
                starved_other = starved && !stuck && !starved_stack;
                break;
            }
            /* The marker fired, or a deadlock's claimer chose us, and
             * counted us back too: undo our own (we stay counted once: no
             * count reaches zero here). */
            vf__engine_count_out(e, VF__COUNT_ACTIVE, false);
            if (chosen)
                rc = VF_EDEADLK;
            break;
        }
        slept_in_pool = false;
        if (alone) {
            if (ran == VF__LOOP_REFUSED && me != NULL) {
                if (counted_stuck) /* one not started before, say */
                    vf__pool_stuck_again(me->pool);
                else
                    vf__pool_stuck_enter(me->pool);
                counted_stuck = true;
            }
            /* A hopeless look, as in the branches below: beside queued ops
             * nobody else will run, or its own held ones. With nothing
             * queued (NOTHING) it is not one: the count starts again. */
            bool hopeless_look = ran == VF__LOOP_REFUSED
                                     ? vf__pool_stuck_for_good(me->pool) &&
                                           only_queued_active(e)
                                     : ran != VF__LOOP_NOTHING &&
                                           only_queued_active(e);
            hopeless = hopeless_look ? hopeless + 1 : 0;
            vf__deadline soon = vf__deadline_within_us(
                until, hopeless > 0 ? HOPELESS_POLL_US : alone_poll_us);
            /* Not counted stuck yet (it found nothing queued), it looks
             * more often: an op queued later, which only its look counts
             * it stuck for, may need a spare (found by the reviewer: 20 ms
             * late; among the pool's sleepers it absorbed the wakes of a
             * deep recursion's pushes, and counted from its wait's start
             * the recursion's waiters made a convoy on the spare lock). */
            if (alone_poll_us <
                (counted_stuck ? ALONE_POLL_MAX_US : ALONE_POLL_UNCOUNTED_US))
                alone_poll_us *= 2;
            sleep_alone(e, w, &soon);
        } else if (ran == VF__LOOP_NO_STACK || ran == VF__LOOP_HELD) {
            /* Its deferred ops wait, which no other thread runs, and its
             * stack is full (a recursion deeper than the stack allows, on
             * the naive engine), or ops made ready with its op, after the
             * wait, wait for its op to return: once nothing else of the
             * engine runs either, they never will. Past the hopeless
             * looks it runs one anyway (`any`; a child of the waiting op
             * that took its place behind one at its push, say). */
            hopeless = only_queued_active(e) ? hopeless + 1 : 0;
            vf__deadline soon = vf__deadline_within_us(
                until, hopeless > 0 ? HOPELESS_POLL_US : NESTED_POLL_US);
            sleep_alone(e, w, &soon);
        } else if (me != NULL && ran == VF__LOOP_NOTHING) {
            refusals = 0;
            sleep_in_pool(e, w, me, false, until);
            slept_in_pool = true;
        } else if (me != NULL) {
            /* Queued ops this waiter will not run above its wait
             * (vf__exec_loop_run_one): other workers run them. Sleep alone,
             * where their placing does not wake it (it would take a
             * wake-up an idle worker needs), looking again now and then
             * for one it would run; its marker and a deadlock wake it at
             * once. From
             * its second refusal in a row on, it counts as stuck: when
             * every thread of the pool is, a spare runs them (sched.h). */
            atomic_fetch_add_explicit(&me->pool->refused_sleeps, 1,
                                      memory_order_relaxed);
            vf__pool_pass_on(me->pool); /* the wake may have been for them */
            bool counted = ++refusals > 1;
            if (counted)
                vf__pool_stuck_enter(me->pool);
            hopeless = counted && vf__pool_stuck_for_good(me->pool) &&
                               only_queued_active(e)
                           ? hopeless + 1
                           : 0;
            /* Nothing came or went since it refused all there was: its
             * looks double apart, up to REFUSE_POLL_MAX_US. Hundreds of
             * such waiters at every NESTED_POLL_US took both cores of a
             * small machine; at 20 ms a few were that late for an op
             * placed from outside the pool, which wakes no one sleeping
             * alone (found by the reviewer); a bound that grew with the
             * pool's threads made a 40,000-level recursion on small
             * stacks 40 times slower at times (its waiters queued on the
             * spare lock). */
            if (ran != VF__LOOP_REFUSED_AGAIN)
                refuse_poll_us = NESTED_POLL_US;
            else if (refuse_poll_us < REFUSE_POLL_MAX_US)
                refuse_poll_us *= 2;
            vf__deadline soon = vf__deadline_within_us(
                until, hopeless > 0 ? HOPELESS_POLL_US : refuse_poll_us);
            if (me->pool->spread) {
                /* Nobody else takes from its queue: the op that lets it
                 * go on may be one placed there (its child's child, say),
                 * which wakes only the pool's sleepers. */
                sleep_in_pool(e, w, me, true, &soon);
                slept_in_pool = true;
            } else {
                sleep_alone(e, w, &soon);
            }
            if (counted)
                vf__pool_stuck_leave(me->pool);
        } else {
            sleep_alone(e, w, until);
        }
    }
    /* A notify-one for an op placed may have woken this sleeper just as
     * its wait ended, which then owes it to another: with a marker's wake
     * for this waiter alone, the other waiter that the op needed slept on
     * (found by the reviewer: a second's delay). */
    if (slept_in_pool)
        vf__pool_pass_on(me->pool);
    if (counted_stuck)
        vf__pool_stuck_leave(me->pool);
    if (me != NULL)
        vf__worker_waiting(me, -1);
    vf__exec_hold_leave(&hold);
    vf__exec_loop_leave(&saved);
    watch(e, &watching, false);
    nested_leave(e, w);
    if (out_below)
        vf__engine_wake(e, vf__engine_count_out(e, VF__COUNT_ACTIVE, true));
    return rc;
}

/* VF_EDEADLK from nested_wait, with a detail saying why. */
static int deadlock_detail(const char *who, const vf__op *cur,
                           char label[VF__OP_LABEL_MAX])
{
    vf__push_running_label(cur, label);
    /* Not a worker's: the thread that pushed the op and runs it inside
     * the push (the naive engine; its stack is the system's), whose
     * detail named worker_stack_kib (found porting OpenMP programs as a
     * user). */
    if (starved_stack && vf__this_worker() == NULL)
        return vf__fail(VF_EDEADLK,
                        "%s: the wait can never finish: %s waits on a "
                        "thread whose stack is full (not a worker's: its "
                        "size is the system's, ulimit -s, or the "
                        "thread's own) for ops only that thread runs (an "
                        "engine without workers runs every op on the "
                        "thread that pushed it: a recursion with a wait "
                        "at every level is too deep for that stack)",
                        who, label);
    if (starved_stack)
        return vf__fail(VF_EDEADLK,
                        "%s: the wait can never finish: %s waits on a "
                        "thread whose stack is full (a worker's: "
                        "worker_stack_kib) for ops no other thread will run "
                        "(a device's pool lends no spare thread, a CPU pool "
                        "at most 1024, or none when no thread can be "
                        "started, and the naive engine runs every op on the "
                        "thread that pushed it: a recursion with a wait at "
                        "every level is too deep for the stacks)",
                        who, label);
    if (starved_other)
        return vf__fail(VF_EDEADLK,
                        "%s: the wait can never finish: %s waits for ops "
                        "queued where no thread will run them (every thread "
                        "of their pool waits, and a device's pool lends no "
                        "spare)",
                        who, label);
    return vf__fail(VF_EDEADLK,
                    "%s: the wait can never finish (%s would wait for ops "
                    "that wait for it)",
                    who, label);
}

/* Whether `op`, running, holds v to read (an async op's read ends at its
 * completion). */
static bool holds_to_read(const vf__op *op, const vf__var *v)
{
    return vf__op_uses(op, v) == VF__USES_TO_READ &&
           !vf__exec_async_finished(op);
}

/* A wait inside `cur` on a var that an op it descends from writes can
 * never finish: in the serial program each op runs inside its parent's,
 * which is still running around the wait (family.h). Refused at once, on
 * every engine kind, whether or not this run happens to come after its
 * ancestor's end. */
static int refuse_ancestor_write(const vf__op *cur, const vf__var *v,
                                 uint32_t gen, const char *who)
{
    char label[VF__OP_LABEL_MAX];
    int level = VF__UNLIKELY(cur->up != NULL)
                    ? vf__family_writes(cur->up, v, gen)
                    : 0;
    if (level != 0)
        return vf__fail(VF_EDEADLK,
                        "%s: %s waits on a variable that an op "
                        "it was pushed from (%d level%s up) writes, which "
                        "cannot finish before it",
                        who, vf__push_running_label(cur, label), level,
                        level == 1 ? "" : "s");
    return 0;
}

/* Whether `op` (running here) writes `v` and still holds it: not an async
 * op completed while its function runs, nor a fused batch that let go of
 * v early (bulk.h), which released it. */
static bool holds_to_write(const vf__op *op, const vf__var *v)
{
    if (vf__op_uses(op, v) != VF__USES_TO_WRITE)
        return false;
    if (VF__UNLIKELY(op->def->kind == &vf__kind_bulk))
        return !vf__bulk_released(op, v);
    return !vf__exec_async_finished(op);
}

/* The same for a var `cur` writes itself and still holds. */
static int refuse_own_write(const vf__op *cur, const vf__var *v, uint32_t gen,
                            const char *who)
{
    char label[VF__OP_LABEL_MAX];
    if (holds_to_write(cur, v))
        return vf__fail(VF_EDEADLK,
                        "%s: %s waits on a variable it writes itself", who,
                        vf__push_running_label(cur, label));
    return refuse_ancestor_write(cur, v, gen, who);
}

/* A wait from a `done` callback of this engine would wait for the op whose
 * callback runs (it has not released its vars) or, in the naive engine,
 * for the push that is running it: refused, as stop does. */
static int refuse_in_done(const char *who)
{
    return vf__fail(VF_EDEADLK,
                    "%s: called from a done callback of this "
                    "engine, which would wait for its own op "
                    "(wait after the push, or push a follow-up "
                    "op instead)",
                    who);
}

/* VF_ETIMEDOUT, with the async ops nobody completed (the usual reason)
 * and the ops e's threads run (a hung one). */
static int timed_out(vf_engine *e, const char *who, int64_t ms)
{
    return vf__stall_fail(e, VF_ETIMEDOUT, "%s: timed out after %lld ms; ", who,
                          (long long)ms);
}

/* A wait's deadline, from now. A timed one notes what e's threads run
 * now, so that its time-out says how long each has run since. */
static vf__deadline wait_deadline(vf_engine *e, int64_t timeout_ms)
{
    if (timeout_ms > 0)
        vf__stall_sample(e, false);
    return vf__deadline_in_ms(timeout_ms);
}

/* VF_ESHUTDOWN for a wait on a var with no failure to report whose write
 * the shutdown notice skipped (vf__var.notice_skipped): the function that
 * would have written it never ran. */
static int notice_skipped(const char *who)
{
    return vf__fail(VF_ESHUTDOWN,
                    "%s: the shutdown notice (vf_engine_shutdown) skipped "
                    "an op that writes the variable: it does not hold what "
                    "the program computes",
                    who);
}

/* VF_ESKIPPED for a wait with no failure to report when `what` (an op
 * that writes its var, a child it waited for) was skipped for `f` (NULL:
 * not known), the failure of an op after it in push order (skip_mark.h),
 * which the serial program runs first. */
static int skipped_by_later(const vf__failure *f, const char *what,
                            const char *who)
{
    char failed[sizeof f->info.op_name + 16] = "an op";
    if (f != NULL)
        snprintf(failed, sizeof failed, "op \"%s\" (%d)", f->info.op_name,
                 f->info.code);
    return vf__fail(VF_ESKIPPED,
                    "%s: %s was skipped for the failure of %s, pushed after "
                    "it (a child placed by time): what it writes is not what "
                    "the program computes",
                    who, what, failed);
}

static const char var_writer[] = "an op that writes the variable";

/* Whether the host met the device work of `fence` within `timeout_ms`
 * (negative: no limit; then it waits as vf__fence_host_wait). A timed
 * wait polls the fence, which the completer resolves, rather than block
 * on its event: it gave up after its timeout on the first wait and then
 * blocked for the whole work on the next (found by a user tester: a
 * program polling a var with timed waits hung). Its naps grow from 50 us
 * to 1 ms (a long wait costs little CPU); met so, the fence counts as a
 * host sync, as vf__fence_host_wait counts it. */
static bool fence_met_by(vf_engine *e, vf__fence *fence, int64_t timeout_ms)
{
    if (timeout_ms < 0 ||
        atomic_load_explicit(&fence->resolved, memory_order_acquire))
        return true;
    vf__deadline until = wait_deadline(e, timeout_ms);
    long nap_ns = 50 * 1000;
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&fence->resolved, memory_order_acquire)) {
            atomic_fetch_add_explicit(&e->dev.host_syncs, 1,
                                      memory_order_relaxed);
            return true;
        }
        if (vf__deadline_passed(&until))
            return false;
        if (spins < 64) {
            sched_yield();
        } else {
            nanosleep(&(struct timespec){0, nap_ns}, NULL);
            if (nap_ns < 1000 * 1000)
                nap_ns *= 2;
        }
    }
}

/* wait_var's answer when no write of v is queued or running: every write
 * pushed before the wait has finished, so v's failure is final for the
 * wait's place (readers pushed before it may still be to run: they still
 * see it, failure.h). The host waits for a device write's work. Called
 * with v's lock held; releases it. Also a replayed node's answer when its
 * launch's writes of v it waits for are over (launch_hold, and a hold
 * ended meanwhile): a write queued after them may have run since, and its
 * failure or skip is what v carries then. */
static int wait_settled(vf_engine *e, vf__var *v, int64_t timeout_ms,
                        vf_error *err, const char *who)
{
    vf__fence *fence = v->wfence;
    if (fence != NULL)
        vf__fence_ref(fence);
    vf__failure *f = atomic_load_explicit(&v->failure, memory_order_acquire);
    if (f != NULL)
        vf__failure_ref(f);
    bool skipped = atomic_load_explicit(&v->notice_skipped,
                                        memory_order_relaxed);
    vf__wait_key key = vf__push_wait_key(e);
    vf__failure *skipped_by = NULL;
    bool later = last_write_skipped(v, key, &skipped_by);
    vf__spin_unlock(&v->lock);
    vf__failure *fenced = NULL;
    if (fence != NULL && !fence_met_by(e, fence, timeout_ms)) {
        vf__fence_unref(fence);
        vf__failure_unref(f);
        vf__failure_unref(skipped_by);
        return timed_out(e, who, timeout_ms);
    }
    if (fence != NULL) {
        fenced = vf__fence_host_wait(e, fence);
        if (fenced != NULL)
            vf__failure_ref(fenced);
        /* Resolved now: its work's skip is known. */
        if (!later)
            later = vf__skip_mark_before(fence->mark, key, &skipped_by);
        vf__fence_unref(fence);
    }
    /* Of an op before the wait, each (a later op's is not its to report:
     * marker_claim's filter). */
    if (f != NULL && !failure_before(f, key)) {
        vf__failure_unref(f);
        f = NULL;
    }
    if (fenced != NULL && !failure_before(fenced, key)) {
        vf__failure_unref(fenced);
        fenced = NULL;
    }
    vf__failure *claimed = vf__failure_report(f, fenced, key);
    int rc = claimed != NULL ? report(claimed, err, who) : 0;
    vf__failure_unref(f);
    vf__failure_unref(fenced);
    if (rc == 0 && skipped)
        rc = notice_skipped(who);
    else if (rc == 0 && later)
        rc = skipped_by_later(skipped_by, var_writer, who);
    vf__failure_unref(skipped_by);
    return rc;
}

/* The marker a timed wait on v left queued when it gave up (its waiter
 * abandoned), if it is v's newest place and not ready yet, or NULL; v's
 * lock held. A wait on v now waits for exactly the ops that marker waits
 * for (nothing was queued on v since), so it takes the marker over (its
 * waiter, place and name) rather than queue one more: a program polling
 * a var with timed waits while its writer runs leaves one marker, not one
 * a poll, in memory and in the in-flight bound. Under v's lock the marker
 * cannot become ready (only v's writes release it). */
static vf__op *marker_given_up(vf__var *v)
{
    if (v->tail == NULL)
        return NULL;
    vf__op *op = vf__dep_op(v->tail);
    if (op->def->kind != &vf__kind_wait ||
        atomic_load_explicit(&op->wait, memory_order_relaxed) == 0 ||
        atomic_load(&op->waiter->state) != VF__W_ABANDONED)
        return NULL;
    return op;
}

/* Whether the place `d`, queued on v behind its head, is a wait marker
 * whose waiter gave up, which nothing waits for (a marker only reads);
 * v's lock held. Its waiter stays ABANDONED, and, queued behind the head,
 * it cannot become ready under the lock. */
static bool marker_abandoned(const vf__dep *d)
{
    const vf__op *op = vf__dep_op(d);
    return op->def->kind == &vf__kind_wait &&
           atomic_load(&op->waiter->state) == VF__W_ABANDONED;
}

/* A wait that gave up takes off v's queue every marker nothing waits for
 * (marker_abandoned) but the newest place, its own and those other waits
 * that gave up left there, so polling a var leaves no marker a poll behind
 * it: the newest stays for the next wait to take over (marker_given_up),
 * and once anything is queued after it, it goes at the next give-up.
 * Taking only its own, it kept one at the tail, and a poll after a push on
 * the var queued one more, a poll each (found by an auditor: 200 polls
 * with a reader pushed between each left 200 markers, and with
 * max_inflight 64 only 32 readers found room). The walk looks at places
 * only, never at the wait's own marker by address: that may have fired
 * and been freed meanwhile. The head is a write (var.h). */
static void drop_markers(vf_engine *e, vf__var *v)
{
    vf__dep *gone = NULL; /* linked through their `next` */
    vf__spin_lock(&v->lock);
    for (vf__dep *prev = v->head; prev != NULL && prev->next != NULL;) {
        vf__dep *d = prev->next;
        if (d != v->tail && marker_abandoned(d)) {
            prev->next = d->next;
            d->next = gone;
            gone = d;
        } else {
            prev = d;
        }
    }
    vf__spin_unlock(&v->lock);
    while (gone != NULL) {
        vf__op *op = vf__dep_op(gone);
        gone = gone->next;
        vf__waiter_unref(op->waiter); /* the marker's reference */
        op->waiter = NULL;
        vf__op_free(op);
        vf__engine_wake(e, vf__engine_count_out(e, VF__COUNT_PENDING, true));
    }
}

/* A node of a replayed launch waits on v (graph.h): the launch took the
 * graph's vars together, as one op does, and the wait waits for its hold
 * on v (the header's promise), not for what is queued on v behind that
 * hold: later launches of the same graph, which wait for this launch's
 * end, so for the waiting node (a false VF_EDEADLK where pushing the same
 * ops waited to 0: found trying graphs as a user). The node itself when
 * the launch takes v to write (the marker then goes right behind the
 * graph's hold: vf__push_enqueue_behind), else NULL, with *settled when the
 * node reads v itself, or the launch takes v to read only (the graph writes no
 * v, and every write before the launch has finished). Where the launch runs
 * its nodes one after the other (the naive engine), NULL unsettled: those
 * before this one have finished, and the wait waits for what the node pushed
 * on v before it, as its push would have (wait_var: before its key). */
static const vf__op *launch_hold(const vf__op *cur, const vf__var *v,
                                 uint32_t gen, bool *settled)
{
    /* The node reads v itself (a write is refused before): the graph's
     * writes of v before it are its predecessors, over; those after it
     * wait for it, which waiting for them would wait for itself. */
    *settled = true;
    if (vf__op_uses(cur, v) != VF__USES_NOT)
        return NULL;
    *settled = false;
    if (cur->graph->in_order)
        return NULL;
    bool write;
    if (!vf__graph_launch_takes(cur, v, gen, &write))
        return NULL;
    *settled = !write;
    /* The node, whose graph's hold the marker goes behind: the launch op's
     * place, or the rest op's that holds v for the graph since a node's
     * children split it (graph.h), found under v's lock, where the graph
     * changes its holder (push.c). */
    return *settled ? NULL : cur;
}

/* The refusals a wait for a var or for all meets first, whoever calls:
 * from device work (exec.h), while this thread captures a graph on `e`
 * (graph.h), in a child forked from inside an op of `e` (lifecycle.h). */
static int refuse_wait(vf_engine *e, const char *who)
{
    int rc = vf__exec_refuse_in_device_work(who);
    if (rc == 0)
        rc = vf__graph_refuse(e, who);
    if (rc == 0)
        rc = vf__lifecycle_refuse_fork_dead(e, who);
    return rc;
}

/* wait_var's wait, once it is neither refused nor settled by the op that
 * calls it (`cur`, NULL outside ops): queues a marker on v (behind `hold`,
 * a replayed launch's hold, when not NULL) and waits for it, or answers at
 * once when v is `settled` or holds no write. */
static int wait_queued(vf_engine *e, vf__var *v, uint32_t gen,
                       const vf__op *cur, const vf__op *hold, bool settled,
                       int64_t timeout_ms, vf_error *err, const char *who)
{
    char label[VF__OP_LABEL_MAX];
    /* 0 unless a step says otherwise: a wait that takes over a marker
     * given up pushes none, and an outside wait sets it only when it gives
     * up (left unset, a wait that took one over returned what the stack
     * held: VF_UNKNOWN under ASan, its failure lost; found by CI). */
    int rc = 0;
    bool nested = cur != NULL && vf__op_engine(cur) == e;
    vf__worker *me = vf__this_worker();
    if (me != NULL && me->pool->engine != e)
        me = NULL;
    /* The waiter's and the wait op's references. */
    vf__waiter *w = waiter_new(e, nested,
                               nested ? vf__running_now.family : NULL, v, me);
    if (w == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);

    vf__spin_lock(&v->lock);
    if (!vf__var_nameable(v, gen)) {
        vf__spin_unlock(&v->lock);
        waiter_free(w);
        return vf__fail(VF_ESTALE, "%s: variable was deleted", who);
    }
    /* Inside an op, the wait waits for the writes of ops before it in push
     * order only: a later op's queued write, which the serial program had
     * not pushed when its wait ran, may wait for the waiting op (it reads
     * what that op writes): waited for, the wait got VF_EDEADLK where the
     * serial program and the naive engine got 0 (found by the reviewer of
     * the device waiters' rule). Its marker goes right behind the last
     * earlier write (vf__push_enqueue_before, which looks again under the
     * lock: appended, it went behind a later write pushed meanwhile, found
     * by the reviewer of this rule). */
    bool before = false;
    /* An op of a fused batch too: its key is its own item's place
     * (vf__push_wait_key), and the batch holds v no more unless a later op
     * of it uses v (it let go of what its earlier ops used last, above),
     * where it reads v (settled above) or writes it (refused above).
     * Appended at the end, its marker waited for writes pushed after the
     * op: VF_EDEADLK, a later value or a hang where the op alone got 0
     * (found by a user tester). */
    if (!settled && nested && hold == NULL) {
        /* The hold of a launch the waiting op is a node of or descends
         * from, on the naive engine (whose nodes before that one have
         * finished), holds nothing the wait waits for (a child's wait on
         * a var its node reads got VF_EDEADLK: found by the reviewer of
         * stop 66's children). A node of a threaded launch on a var the
         * launch does not take, too: appended, its marker waited for
         * writes pushed after the launch (VF_EDEADLK where one of them
         * needs the launch: found by a reviewer). */
        const vf__dep *last = vf__var_last_write_before(v, w->key);
        settled = last == NULL || vf__graph_hold_is_over(vf__dep_op(last), cur);
        before = !settled;
    }
    if (settled || (v->head == NULL && v->nreaders != VF__WRITE_RUNNING)) {
        waiter_free(w);
        return wait_settled(e, v, timeout_ms, err, who); /* unlocks */
    }
    if (timeout_ms == 0) { /* only a look: no marker to leave behind */
        vf__spin_unlock(&v->lock);
        waiter_free(w);
        return timed_out(e, who, 0);
    }
    vf__waiter *old = NULL;
    /* A marker given up at the tail is behind the later writes too. */
    vf__op *op = hold == NULL && !before ? marker_given_up(v) : NULL;
    if (op != NULL) { /* it waits for the same ops: it is this wait's now */
        old = op->waiter;
        op->waiter = w;
        op->name = who;
        op->place = vf__push_wait_place(e);
    }
    vf__spin_unlock(&v->lock);
    if (old != NULL)
        vf__waiter_unref(old);

    if (op == NULL) {
        const vf__opdef *def = vf__defs_share(
            &e->defs, &(vf__opdef){.engine = e,
                                   .kind = &vf__kind_wait,
                                   .inline_run = true});
        op = def != NULL ? vf__op_alloc(1) : NULL;
        if (op == NULL) {
            waiter_free(w);
            return vf__fail(VF_ENOMEM, "%s: out of memory", who);
        }
        op->fn = NULL;
        op->arg = NULL;
        op->done = NULL;
        op->name = who;
        vf__op_stage_vars(op,
                          &(vf__varref){.var = v, .gen = gen, .write = false});
        op->def = def;
        op->waiter = w;
        /* Its place: after every op this thread pushed (failure.h). */
        op->place = vf__push_wait_place(e);
        rc = hold != NULL ? vf__push_enqueue_behind(e, op, hold, who)
             : before     ? vf__push_enqueue_before(e, op, who)
                          : vf__push_enqueue(e, op, who);
        if (rc != 0) {
            vf__op_free(op);
            waiter_free(w);
            if (rc != 1)
                return rc;
            /* The launch's hold on v ended meanwhile: the graph's writes
             * of v have finished, and those before it. */
            vf__spin_lock(&v->lock);
            return wait_settled(e, v, timeout_ms, err, who); /* unlocks */
        }
    }

    vf__deadline until = wait_deadline(e, timeout_ms);
    vf__prof_stretch waiting; /* not the op's own work (profiling.h) */
    vf__profiling_stretch_begin(cur, &waiting);
    if (nested) {
        rc = nested_wait(e, w, me, &until);
    } else {
        /* This thread may be running an inline op of another engine, whose
         * trampoline holds our marker: run it rather than sleep on it. A
         * worker, of this engine (under an op of another it ran inline)
         * or of another, counts stuck in its pool meanwhile (sched.h), so
         * the pool lends a spare for the ops queued there, which the wait
         * may need (an op it waits for pushes one there and waits for it:
         * a pool's only worker slept here, found trying recursion across
         * two engines as a user), once the grace is over (blocked_sleep). */
        blocked b;
        blocked_begin(&b);
        /* Inside an op (of another engine), the ops run here are those
         * that may run above it (exec.h: a hold), ops made ready with it
         * included: the wait may need one pushed before it (found by the
         * second reviewer: it hung). */
        vf__exec_hold above;
        bool own = vf__exec_op_innermost(cur); /* not a done callback's */
        if (own)
            vf__exec_hold_here(&above, false);
        while (!is_done(w)) {
            /* A deferred op runs here as no op of e's: this call says
             * nothing of what runs under it (cross_wait.h). */
            uint32_t hidden = vf__guard_hide_innermost();
            bool ran = own ? vf__exec_run_held(NULL)
                           : vf__exec_run_deferred(NULL);
            vf__guard_unhide(hidden);
            if (ran)
                continue;
            bool chosen; /* never: an outside waiter is not nested */
            if (vf__deadline_passed(&until) && abandon(w, &chosen)) {
                rc = VF_ETIMEDOUT;
                break;
            }
            /* Stuck while it sleeps, not while it runs ops. */
            sleep_outside(e, w, blocked_sleep(&b, &until));
            blocked_wake(&b);
        }
        blocked_end(&b, rc == VF_ETIMEDOUT);
        if (own)
            vf__exec_hold_leave(&above);
    }
    vf__profiling_stretch_end(&waiting);
    if (rc == 0 && w->claimed != NULL) {
        rc = report(w->claimed, err, who);
    } else if (rc == 0 && w->notice_skipped) {
        rc = notice_skipped(who);
    } else if (rc == 0 && w->skipped_later) {
        rc = skipped_by_later(w->skipped_by, var_writer, who);
    } else if (rc == VF_EDEADLK) {
        deadlock_detail(who, cur, label);
    } else if (rc == VF_ETIMEDOUT) {
        timed_out(e, who, timeout_ms);
    }
    if (rc == VF_ETIMEDOUT || rc == VF_EDEADLK)
        drop_markers(e, v); /* its own among them */
    vf__waiter_unref(w);
    return rc;
}

/* `cross`: the engines of the thread's calls before this one
 * (vf__cross_wait_calls). */
static int wait_var(vf_engine *e, vf_var h, int64_t timeout_ms,
                    vf__cross_wait *cross, vf_error *err, const char *who)
{
    clear_error(err);
    int refused = refuse_wait(e, who);
    if (refused != 0)
        return refused;
    vf__var *v;
    int rc = vf__var_lookup(&e->vars, h, &v);
    if (rc != 0)
        return vf__fail(rc, "%s: variable (id %#llx) %s", who,
                        (unsigned long long)h.id, vf__bad_handle_words(rc, h));
    if (vf__exec_in_done(e))
        return refuse_in_done(who);
    if (VF__UNLIKELY(e->engine_info)) {
        atomic_store_explicit(&v->watched, true, memory_order_relaxed);
        fprintf(stderr, "varflow: wait on var %#llx\n",
                (unsigned long long)h.id);
    }
    vf__bulk_flush_all(e); /* the ops it waits for may sit in a batch */
    vf__op *cur = vf__current_op();
    bool nested = cur != NULL && vf__op_engine(cur) == e;
    uint32_t gen = vf__var_handle_gen(h);
    /* An op of a fused batch: the batch lets go of the vars its ops
     * before this one were the last to use (bulk.h), v among them
     * perhaps, which the wait then meets as the op alone would. */
    bool batched = nested && VF__UNLIKELY(cur->def->kind == &vf__kind_bulk);
    if (batched)
        vf__bulk_release_ran(cur);
    if (batched && holds_to_write(cur, v) && !vf__bulk_running_writes(cur, v)) {
        /* An op of a fused batch (bulk.h) waits on a var another op of
         * its batch writes, which it does not write itself: the batch
         * holds v for all its ops, so every op on v pushed before this one
         * has run (those before the batch, and the batch's own before
         * it). With nothing queued on v behind the batch, that is what
         * the op alone would find once they had: a settled wait. Waiting
         * for the batch would wait for itself (VF_EDEADLK), and bulking,
         * which a setting turns on, would change what the program gets.
         * With a write queued behind it (a child the op pushed, another
         * thread's), the op alone would wait for that too, which its batch
         * cannot let run: VF_EDEADLK, saying so (it said "waits on a
         * variable it writes itself", of the fused op). */
        if ((rc = refuse_ancestor_write(cur, v, gen, who)) != 0)
            return rc;
        vf__spin_lock(&v->lock);
        if (!vf__var_nameable(v, gen)) {
            vf__spin_unlock(&v->lock);
            return vf__fail(VF_ESTALE, "%s: variable was deleted", who);
        }
        /* An op that reads v itself waits for nothing, whatever is
         * queued behind its batch (below; found trying waits in bulked
         * ops as a user: refused as "waits on a variable it writes
         * itself"). */
        if (vf__bulk_running_reads(cur, v) ||
            (v->head != NULL && vf__dep_op(v->head) == cur &&
             v->head->next == NULL))
            return wait_settled(e, v, timeout_ms, err, who); /* unlocks */
        vf__spin_unlock(&v->lock);
        return vf__fail(VF_EDEADLK,
                        "%s: the op waits on a variable that a later op of its "
                        "batch writes (vf_bulk_set_size()), and an op queued "
                        "behind the batch on it cannot run before that one "
                        "(do not bulk ops that wait inside themselves)",
                        who);
    }
    if (nested && (rc = refuse_own_write(cur, v, gen, who)) != 0)
        return rc;
    if (!nested && (rc = vf__lifecycle_check_waitable(e, who)) != 0) {
        /* A stale handle first, a delete held by the stop included, as
         * every other call says (it said VF_ESTOPPED, and a wait again
         * after the start VF_ESTALE; found by a user tester). */
        vf__spin_lock(&v->lock);
        bool deleted = !vf__var_nameable(v, gen);
        vf__spin_unlock(&v->lock);
        return deleted ? vf__fail(VF_ESTALE, "%s: variable was deleted", who)
                       : rc;
    }
    const vf__op *hold = NULL;
    bool settled = false;
    bool node = nested && VF__UNLIKELY(cur->def->kind->flags & VF__KIND_GRAPH);
    if (node)
        hold = launch_hold(cur, v, gen, &settled);
    else if (nested)
        /* The op reads v itself: every op before it on v has finished,
         * and the serial program's wait waits for no later one. Queued at
         * the var's end, it waited for a write pushed after the op in time
         * (before the wait): VF_EDEADLK where that write read what the op
         * writes, and 0 where the write came later (found trying waits
         * inside ops as a user). An op of a batch reads v itself when it
         * names v and does not write it. */
        settled = batched ? vf__bulk_running_reads(cur, v)
                          : holds_to_read(cur, v);

    if (nested || cur == NULL)
        return wait_queued(e, v, gen, cur, hold, settled, timeout_ms, err, who);
    /* From inside an op of another engine: checked for a cycle, and
     * listed, before anything is queued, so a refused wait leaves nothing
     * behind. Checked after its marker was pushed, a refused wait left the
     * marker queued with its waiter still waiting, which then claimed the
     * var's writer's failure for no one: no wait reported it, and the
     * var's later readers ran on the failed input (found by an auditor,
     * every run). The check looks at v's running writer, not the marker:
     * a write that starts later is checked by its own waits, with this one
     * listed. */
    if ((rc = vf__cross_wait_enter(cross, e, v, cur, timeout_ms < 0, who)) != 0)
        return rc;
    rc = wait_queued(e, v, gen, cur, hold, settled, timeout_ms, err, who);
    vf__cross_wait_leave(cross);
    return rc;
}

VF_API int vf_var_wait(vf_engine *e, vf_var v, vf_error *err)
{
    vf__cross_wait cross;
    vf__cross_wait_calls(&cross); /* before this call's guard */
    return VF__UNCANCELLED(VF__GUARDED(
        e, "vf_var_wait", wait_var(e, v, -1, &cross, err, "vf_var_wait")));
}

VF_API int vf_var_wait_timed(vf_engine *e, vf_var v, int64_t timeout_ms,
                             vf_error *err)
{
    vf__cross_wait cross;
    vf__cross_wait_calls(&cross);
    return VF__UNCANCELLED(VF__GUARDED(
        e, "vf_var_wait_timed",
        wait_var(e, v, timeout_ms, &cross, err, "vf_var_wait_timed")));
}

/* Wait inside the running op whose family is `f` until it has no pending
 * child: the finish that takes the count to zero with the waiting flag set
 * fires the waiter (see vf__wait_child_finished). 0, VF_EDEADLK or VF_ETIMEDOUT
 * as nested_wait; VF_ENOMEM. */
static int wait_pending(vf_engine *e, vf__family *f, const vf__deadline *until,
                        const char *who)
{
    vf__worker *me = vf__this_worker();
    if (me != NULL && me->pool->engine != e)
        me = NULL;
    /* The waiter's and the family's references. */
    vf__waiter *w = waiter_new(e, true, f, NULL, me);
    if (w == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    /* `w` first, then the flag, and only while children are pending: the
     * finish that lowers the count to zero clears the flag in the same
     * step and fires `w` (vf__wait_child_finished). */
    atomic_store(&f->waiter, w);
    uint64_t p = atomic_load(&f->pending);
    do {
        if ((p & VF__FAMILY_COUNT) == 0) { /* the last finished meanwhile */
            atomic_store(&f->waiter, NULL);
            waiter_free(w);
            return 0;
        }
    } while (
        !atomic_compare_exchange_weak(&f->pending, &p, p | VF__FAMILY_WAITING));
    vf__prof_stretch waiting; /* not the op's own work (profiling.h) */
    vf__profiling_stretch_begin(vf__current_op(), &waiting);
    int rc = nested_wait(e, w, me, until);
    vf__profiling_stretch_end(&waiting);
    if (rc != 0) {
        /* Given up: take the flag back, and with it `w`. Failing that,
         * the last child cleared it first: it fires `w` (abandoned: that
         * does nothing) and drops the family's reference; the next wait
         * may store its own waiter only once that child took this one
         * out (a moment: SIGNALING). */
        p = atomic_load(&f->pending);
        while ((p & VF__FAMILY_WAITING) &&
               !atomic_compare_exchange_weak(&f->pending, &p,
                                             p & ~VF__FAMILY_WAITING)) {
        }
        if (p & VF__FAMILY_WAITING) {
            atomic_store(&f->waiter, NULL);
            vf__waiter_unref(w); /* the family's */
        } else {
            while (atomic_load(&f->waiter) != NULL)
                vf__cpu_relax();
        }
    }
    vf__waiter_unref(w);
    return rc;
}

/* A wait for the children of the op whose family is `f` can never finish
 * (VF_EDEADLK): the next one waits only for the children pushed from now
 * on and reports only their failures (varflow.h), so those pushed so far
 * are given up on: they count in `pending` no more and keep no failure in
 * `first` (family.h: waited_from). A timed-out wait gives up on nothing:
 * the next waits for them again. */
static void children_given_up(vf_engine *e, vf__family *f)
{
    vf__spin_lock(&f->lock);
    atomic_store(&f->waited_from, vf__push_wait_place(e) + 1);
    vf__failure *first = atomic_exchange(&f->first, NULL);
    atomic_store(&f->notice_skipped, false);
    atomic_store(&f->skipped_by_later, false);
    vf__spin_unlock(&f->lock);
    vf__failure_unref(first);
    uint64_t p = atomic_load(&f->pending);
    while (!atomic_compare_exchange_weak(
        &f->pending, &p, (p & ~(uint64_t)UINT32_MAX) + ((uint64_t)1 << 32)))
        ;
}

static int wait_children(vf_run *run, int64_t timeout_ms, vf_error *err,
                         const char *who)
{
    char label[VF__OP_LABEL_MAX];
    clear_error(err);
    int in_work = vf__exec_refuse_in_device_work(who);
    if (in_work != 0)
        return in_work;
    if (run == NULL)
        return vf__fail(VF_EINVAL, "%s: run is NULL", who);
    vf__op *cur = vf__run_op_here(run);
    if (cur == NULL)
        return vf__fail(VF_EINVAL,
                        "%s: not called from the function of the op whose "
                        "run handle it was given (the handle is valid only "
                        "there, on its thread)",
                        who);
    vf_engine *e = vf__op_engine(cur);
    int done = vf__exec_done_here(e, cur);
    if (VF__UNLIKELY(done == VF__DONE_OF_ENGINE))
        return refuse_in_done(who); /* above its own wait, say */
    if (VF__UNLIKELY(done == VF__DONE_ABOVE))
        /* Another engine's callback, run above the op's wait: the wait
         * would be the op's, which is not where the program is (it
         * replaced the op's own waiter, which then got VF_EDEADLK: found
         * by the reviewer of the nested waits' counts). */
        return vf__fail(VF_EINVAL,
                        "%s: called from a done callback run above the op "
                        "whose run handle it was given (the handle is valid "
                        "only in that op's function)",
                        who);
    int dead = vf__lifecycle_refuse_fork_dead(e, who);
    if (dead != 0)
        return dead;
    vf__family *f = vf__running_now.family;
    if (f == NULL)
        return 0; /* it pushed nothing */
    /* An item of a fused batch (bulk.h): its later items go on as a fused
     * op of their own, and the batch holds what the item needs, so its
     * children meet what they would meet beside the item alone. */
    if (VF__UNLIKELY(cur->def->kind == &vf__kind_bulk))
        vf__bulk_before_child(cur, NULL);
    vf__bulk_flush_all(e); /* children may sit in a batch */
    /* A child waits for an op this wait's op runs within (family.h:
     * waits_up): never, in the serial program, whether or not that op has
     * ended here; or for this wait's op itself, which holds what it
     * writes until it returns. Not an async op's: its completion lets go
     * of what it writes, and may come from anywhere, one of these very
     * children included (found by the reviewer of this refusal), so its
     * wait is left to the search for progress below. As for any wait that
     * can never finish, the next wait waits only for the children pushed
     * after this one. */
    int up = atomic_load_explicit(&f->waits_up, memory_order_relaxed);
    if (VF__UNLIKELY(up > 1 || (up == 1 && !cur->def->async))) {
        atomic_store_explicit(&f->waits_up, 0, memory_order_relaxed);
        children_given_up(e, f);
        return up == 1 ? vf__fail(VF_EDEADLK,
                                  "%s: the wait can never finish: %s pushed "
                                  "a child that uses a variable it writes "
                                  "itself, which the child cannot have "
                                  "before it ends",
                                  who, vf__push_running_label(cur, label))
                       : vf__fail(VF_EDEADLK,
                                  "%s: the wait can never finish: %s pushed "
                                  "a child that uses a variable an op %d "
                                  "levels above that child writes, which "
                                  "cannot finish before this wait",
                                  who, vf__push_running_label(cur, label), up);
    }
    int rc = 0;
    if ((atomic_load_explicit(&f->pending, memory_order_acquire) &
         VF__FAMILY_COUNT) != 0) {
        vf__deadline until = wait_deadline(e, timeout_ms);
        rc = wait_pending(e, f, &until, who);
    }
    /* Its children settled (finished, or given up on below), what they
     * noted is over: the next wait's children note their own (an async
     * op's note, or one given up on by the search, made a later wait for
     * unrelated children refuse: found by the reviewer). Only this thread
     * pushes its children, and it is here. A wait that timed out, or had
     * no memory to wait with, leaves them to the next. */
    if (rc != VF_ETIMEDOUT && rc != VF_ENOMEM)
        atomic_store_explicit(&f->waits_up, 0, memory_order_relaxed);
    if (rc == VF_EDEADLK) {
        children_given_up(e, f);
        return deadlock_detail(who, cur, label);
    }
    if (rc == VF_ETIMEDOUT)
        return timed_out(e, who, timeout_ms);
    if (rc != 0)
        return rc;
    /* Every child has finished: the first failure among them, reported
     * at this wait's place unless a wait reported it before (failure.h).
     * The next wait reports only what children pushed after this one
     * bring. */
    vf__failure *first = vf__family_take_first(f);
    bool unrun = atomic_exchange(&f->notice_skipped, false);
    bool later = atomic_load_explicit(&f->skipped_by_later,
                                      memory_order_relaxed) &&
                 atomic_exchange(&f->skipped_by_later, false);
    /* A child skipped for a later op's failure met one that is not this
     * wait's to report (failure_before): a wait at its place after that
     * op reports it, and the ops between still see it. */
    bool claimed = false;
    if (first != NULL) {
        vf__wait_key key = vf__push_wait_key(e);
        claimed = failure_before(first, key) && vf__failure_claim(first, key);
    }
    rc = claimed ? report(first, err, who) : 0;
    vf__failure_unref(first);
    if (rc != 0)
        return rc;
    if (unrun)
        return vf__fail(VF_ESHUTDOWN,
                        "%s: the shutdown notice skipped a child it waited "
                        "for (its function never ran)",
                        who);
    return later ? skipped_by_later(NULL, "a child it waited for", who) : 0;
}

/* The engine of the op whose run handle `run` is, running on this thread
 * (its function's call), or NULL (run.h: vf__run_op_here). */
static vf_engine *running_engine(const vf_run *run)
{
    const vf__op *cur = vf__run_op_here(run);
    return cur != NULL ? vf__op_engine(cur) : NULL;
}

VF_API int vf_run_wait_children(vf_run *run, vf_error *err)
{
    static const char who[] = "vf_run_wait_children";
    vf_engine *e = running_engine(run);
    if (e == NULL)
        return wait_children(run, -1, err, who); /* refuses it */
    return VF__UNCANCELLED(
        VF__GUARDED(e, who, wait_children(run, -1, err, who)));
}

VF_API int vf_run_wait_children_timed(vf_run *run, int64_t timeout_ms,
                                      vf_error *err)
{
    static const char who[] = "vf_run_wait_children_timed";
    vf_engine *e = running_engine(run);
    if (e == NULL)
        return wait_children(run, timeout_ms, err, who); /* refuses it */
    return VF__UNCANCELLED(
        VF__GUARDED(e, who, wait_children(run, timeout_ms, err, who)));
}

/* Block until no op is pending and no batch is open (outside ops only):
 * ops running meanwhile may push into their threads' batches, so the
 * batches are flushed again until none is left. With `help`, the thread
 * runs queued ops of the CPU pool itself while there are any, and sleeps
 * only when there are none (every pending op then runs or waits
 * elsewhere); a pending op it wakes for later is still the workers'.
 * VF_ETIMEDOUT when `until` (NULL: none) passes first. */
static int wait_idle(vf_engine *e, bool help, const vf__deadline *until)
{
    do {
        vf__bulk_flush_all(e);
        /* Until its deadline (exec.c: help_may_go_on). */
        while (help && vf__counts_pending(vf__engine_counts(e)) != 0 &&
               vf__exec_help_run(e, until)) {
        }
        bool late = false;
        /* A watcher before the sums below: the finisher of the last op
         * then sees it, or this sum sees that finish (counts.h). */
        atomic_fetch_add(&e->waits.nwaiters, 1);
        atomic_fetch_add(&e->waits.watchers, 1);
        asleep_outside(e, 1);
        /* A worker counts stuck in its pool while it sleeps here, once
         * the grace is over (blocked_sleep). */
        blocked b;
        blocked_begin(&b);
        bool idle = false;
        while (!idle && !late) {
            const vf__deadline *to = blocked_sleep(&b, until);
            pthread_mutex_lock(&e->waits.lock);
            while (!(idle = vf__counts_pending(vf__engine_counts(e)) == 0) &&
                   !(late = vf__deadline_passed(until)) &&
                   !vf__deadline_passed(to))
                vf__cond_wait_until(&e->waits.cond, &e->waits.lock, to);
            pthread_mutex_unlock(&e->waits.lock);
        }
        blocked_end(&b, late);
        asleep_outside(e, -1);
        atomic_fetch_sub(&e->waits.watchers, 1);
        atomic_fetch_sub(&e->waits.nwaiters, 1);
        if (late)
            return VF_ETIMEDOUT;
        /* A flush counts a batch's ops pending under its thread's lock,
         * which vf__bulk_any_open takes: a batch flushed after the wait
         * above saw pending at zero is not open any more, but its ops are
         * pending, so pending is read again (TSan caught test_bulk.nested
         * reading a value its children were still writing). */
    } while (vf__bulk_any_open(e) ||
             vf__counts_pending(vf__engine_counts(e)) != 0);
    return 0;
}

/* Stop, destroy and fork drain without helping: a fork handler, above all,
 * must not run user code. An async op completed inside its function has
 * finished, but the function runs on and may push (async.h: calls): the
 * drain waits for it too, looking every millisecond (nothing wakes it:
 * the function's return counts nothing pending), the calls read before
 * pending (a function's push comes before its return). */
int vf__wait_drain(vf_engine *e, const vf__deadline *until)
{
    for (;;) {
        int rc = wait_idle(e, false, until);
        if (rc != 0)
            return rc;
        if (vf__async_calls(&e->async) == 0) {
            if (vf__counts_pending(vf__engine_counts(e)) == 0)
                return 0;
        } else if (vf__deadline_passed(until)) {
            return VF_ETIMEDOUT;
        } else {
            nanosleep(&(struct timespec){0, 1000000}, NULL); /* 1 ms */
        }
    }
}

/* `cross`: the engines of the thread's calls before this one
 * (vf__cross_wait_calls). */
static int wait_all(vf_engine *e, int64_t timeout_ms, vf__cross_wait *cross,
                    vf_error *err, const char *who)
{
    char label[VF__OP_LABEL_MAX];
    clear_error(err);
    int refused = refuse_wait(e, who);
    if (refused != 0)
        return refused;
    if (vf__exec_in_done(e))
        return refuse_in_done(who);
    vf__op *cur = vf__current_op();
    if (cur != NULL && vf__op_engine(cur) == e)
        return vf__fail(VF_EDEADLK,
                        "%s: called inside %s, which would wait for itself",
                        who, vf__push_running_label(cur, label));
    /* Batched ops first: pushed to a stopped engine, they are held, and
     * the wait must say so. Looked at before their flush (the wait's own,
     * below), none was held yet, and the wait returned 0 with an op that
     * had not run (found by a user tester, bulk_size 5). */
    vf__bulk_flush_all(e);
    int held = vf__lifecycle_check_waitable(e, who);
    if (held != 0)
        return held;
    if (cur != NULL) {
        int rc = vf__cross_wait_enter(cross, e, NULL, cur, timeout_ms < 0, who);
        if (rc != 0)
            return rc;
    }
    vf__deadline until = wait_deadline(e, timeout_ms);
    vf__prof_stretch waiting; /* not the op's own work (profiling.h) */
    vf__profiling_stretch_begin(cur, &waiting);
    int late = wait_idle(e, e->help_on_wait, &until);
    vf__profiling_stretch_end(&waiting);
    if (cur != NULL)
        vf__cross_wait_leave(cross);
    if (late != 0)
        return timed_out(e, who, timeout_ms); /* nothing reported, cleared */

    /* Every op pushed so far has finished: report the first failure in
     * push order that no wait reported, and clear them all from here on
     * (failure.h; the place read there). */
    vf_error first;
    if (!vf__failure_log_report(&e->failures, &e->pushed, &first))
        return 0;
    return report_info(&first, err, who);
}

VF_API int vf_engine_wait_all(vf_engine *e, vf_error *err)
{
    vf__cross_wait cross;
    vf__cross_wait_calls(&cross); /* before this call's guard */
    return VF__UNCANCELLED(
        VF__GUARDED(e, "vf_engine_wait_all",
                    wait_all(e, -1, &cross, err, "vf_engine_wait_all")));
}

VF_API int vf_engine_wait_all_timed(vf_engine *e, int64_t timeout_ms,
                                    vf_error *err)
{
    vf__cross_wait cross;
    vf__cross_wait_calls(&cross);
    return VF__UNCANCELLED(VF__GUARDED(
        e, "vf_engine_wait_all_timed",
        wait_all(e, timeout_ms, &cross, err, "vf_engine_wait_all_timed")));
}
