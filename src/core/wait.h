/*
 * wait.h: where threads that wait for the engine sleep (wait.c).
 *
 * A thread outside the engine's ops that waits (vf_var_wait,
 * vf_engine_wait_all, destroy's drain) sleeps on the engine's `waits.cond`.
 * A thread that waits for a state of the counts (pending 0: wait_all,
 * destroy's drain; active 0: a nested waiter) adds itself to its own
 * counter and then to `watchers` before it sums the counts; whoever
 * lowers a count loads `watchers` after its add (engine.h:
 * vf__engine_count_out) and, when it is not zero, sums and wakes the
 * waiters when the state is reached (vf__engine_wake). All seq_cst, a
 * Dekker pair, so no wake-up is lost (counts.h). A wait_var outside ops
 * is woken by its marker and counts in none of them. `lock` is a leaf:
 * nothing else is taken under it; a nested waiter's claim of a deadlock
 * sums under it (wait.c).
 *
 * A nested waiter (inside an op) is woken alone, never with the others: a
 * recursion has one at the top of each thread's share of it, hundreds
 * when it is deeper than a stack holds, and when each wait that ended
 * and each op placed woke all of them, its time grew as the square of
 * its depth (found trying it as a user: 40,000 levels on 128 KiB stacks
 * took 55 s). One with work it may run above its wait sleeps among its
 * pool's sleepers, where the ops placed wake it, with a tag, by which its
 * marker or a deadlock's choice wakes it alone (base/ecount.h: "Tags").
 * Any other sleeps on its own event count (vf__waiter.wake): one with no
 * stack room for an op above its wait, which runs nothing placed (it
 * counts as stuck in its pool from the first queued op it refused, so
 * the pool lends a spare: sched.h), and
 * one that refused the ops queued, which looks again now and then. Active
 * reaching zero wakes them all, the pools' sleepers and those on their
 * own (vf__wait_wake_alone).
 */
#ifndef VF_WAIT_H
#define VF_WAIT_H

#include <pthread.h>

#include "base/common.h"
#include "base/deadline.h"
#include "base/ecount.h"
#include "base/sleeplock.h"
#include "core/failure.h"
#include "core/op.h"
#include "core/sched.h"
#include "core/spinlock.h"

struct vf__waiter;

typedef struct vf__waits {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC (timed waits) */
    atomic_int nwaiters; /* seq_cst: threads waiting for pending == 0 */
    atomic_int nnested;  /* seq_cst: nested waiters that found nothing
                            to run and watch for a deadlock (wait.c) */
    /* seq_cst: nwaiters + nnested, raised after them and lowered before
     * them: the one load a count's lowerer pays (counts.h). */
    atomic_int watchers;
    /* Threads outside the engine's ops asleep in a wait (relaxed: a
     * hint for idle workers, which spin only while one is: sched.h,
     * vf__pool_runner.program_asleep). */
    atomic_int outside_asleep;
    /* Every nested waiter of the engine, from before it stops counting as
     * active to its end (`nested`, linked through vf__waiter.nested_next
     * and nested_prev, under `nested_lock`, a leaf taken also under
     * `lock`): when every op is stuck, the one of them first in push
     * order is the wait that gives up (wait.c: claim_deadlock). Every
     * nested wait joins and leaves it, so a lock whose waiters sleep: a
     * recursion polling with 1 ms timed waits on hundreds of threads
     * queued on it, yielding, and its holder ran once a round of them. */
    vf__sleeplock nested_lock;
    struct vf__waiter *nested;
} vf__waits;

typedef struct vf__pool vf__pool;

/*
 * What wait_var waits on. Shared by the waiting thread and the wait op, and
 * freed by whichever lets go last (`refs`), because a nested waiter that
 * gives up (VF_EDEADLK) leaves its wait op queued behind the ops it could not
 * wait for.
 *
 * `state` (seq_cst) also keeps the engine's `active` count exact for a
 * nested waiter, whose thread may be running other ops on top of the wait:
 *   IDLE      the thread sits in the wait loop (the waiter is not counted);
 *   BUSY      the thread runs an op above the wait (that op is counted);
 *   SIGNALING the wait op is firing (transient);
 *   DONE      fired; the waiter is counted active again and resumes;
 *   DONE_UNCOUNTED  fired while BUSY: the waiter cannot resume before the
 *             op above it returns, so it is not counted yet; that op's
 *             finish counts it, in the same atomic step as it stops
 *             counting itself (exec.c);
 *   ABANDONED the waiter gave up (VF_EDEADLK) before the wait op fired; an
 *             abandoned wait claims no failure, so none is lost to nobody;
 *   DEADLOCKED another nested waiter found every op stuck and chose this
 *             one, IDLE and first in push order, to give up (VF_EDEADLK),
 *             counting it active for it; it goes on to ABANDONED itself.
 * An outside waiter only ever goes IDLE -> SIGNALING -> DONE.
 */
typedef enum vf__waiter_state {
    VF__W_IDLE = 0,
    VF__W_BUSY,
    VF__W_SIGNALING,
    VF__W_DONE,
    VF__W_DONE_UNCOUNTED,
    VF__W_ABANDONED,
    VF__W_DEADLOCKED
} vf__waiter_state;

struct vf__waiter {
    atomic_int state;
    atomic_int refs;
    vf__failure *claimed; /* written in SIGNALING, read after DONE */
    /* The var a marker read when it fired had a write the shutdown
     * notice skipped (vf__var.notice_skipped): written with `claimed`,
     * while the marker still held its read, and read after DONE (later
     * ops on the var, a delete among them, may run once it fired). */
    bool notice_skipped;
    /* The var's last write before the wait was skipped for a later op's
     * failure (skip_mark.h), and that failure (a reference, for the
     * wait's detail; may be NULL): written and read as `notice_skipped`. */
    bool skipped_later;
    vf__failure *skipped_by;
    vf__pool *sleep_pool; /* where the waiter may sleep besides the
                             engine's cond (NULL: there only) */
    bool nested;          /* waits inside an op: counted out of `active` */
    /* A nested waiter's op's own family (family.h), or NULL when it
     * pushed nothing: the ops it may run above the wait descend from it. */
    const vf__family *family;
    /* The var a var wait waits on (NULL: a wait for children): a device's
     * waiter runs its writers queued beside it (exec.c: loop_take). */
    const struct vf__var *var;
    /* The engine waited on: whose push order `key` is in, and whose
     * `active` count a nested waiter leaves and comes back to. */
    vf_engine *engine;
    /* The wait's position in push order (failure.h), at which a var
     * wait's marker claims what it reports, and by which a deadlock picks
     * the waiter that gives up; its family lives while the waiter waits. */
    vf__wait_key key;
    /* The engine's list of nested waiters (vf__waits.nested). */
    struct vf__waiter *nested_next, *nested_prev;
    /* Where a nested waiter sleeps (see the file comment): among its
     * pool's sleepers (`in_pool`, seq_cst, set before it looks at `state`
     * there, read by whoever changes `state` after it did: a Dekker pair),
     * woken by its `tag` (its worker's: vf__worker.tag; 0 with no
     * pool), or else on `wake`, its own. */
    atomic_bool in_pool;
    unsigned tag;
    vf__ecount wake;
    /* A nested waiter of a CPU pool: the pool's queues at its last look
     * for an op it may run above its wait, and whether that look found
     * none (exec.c: loop_take, sched.h: vf__pool_look_same). */
    vf__pool_look look;
    bool refused_look;
};

/* How long a thread of a CPU pool blocked in a wait other than its
 * engine's nested one (sched.h: vf__pool_of_blocked_thread: on another
 * engine, say) sleeps before it counts stuck in its pool. Most such waits
 * end sooner (another engine's short op), and the child its op queued
 * before it is then still there for it to run above its next wait. Counted
 * at once, the pool lent a spare for the child each time, a recursion
 * whose levels waited on another engine left each level on a thread of
 * its own, and hundreds of threads refused what the pool held (found by a
 * user tester: such chains sat still for tens of seconds). */
#define VF__WAIT_STUCK_GRACE_US 1000

/* Drop one reference; the last frees. */
void vf__waiter_unref(vf__waiter *w);

/* Active reached zero with nested waiters watching (vf__engine_wake): wake
 * those that sleep alone, as the ones on the engine's cond and in its pools
 * are, to see it. */
void vf__wait_wake_alone(vf_engine *e);

/* A wait marker fires (exec.c runs it inline once every write before it
 * has finished): hand the var's failure at the marker's place to its
 * waiter, claimed, and wake it, unless the waiter gave up. */
void vf__wait_marker_fire(vf__op *op);

/* A child of the op whose family is `op->up` finished (exec.c: after it
 * released its vars, while it still counts as active): its failure joins
 * the family's, and the last pending one fires the waiter of
 * vf_run_wait_children if one waits; unless a wait gave up on it
 * (family.h: waited_from). */
void vf__wait_child_finished(vf_engine *e, vf__op *op);

/* A failure of the family's child at `place` (or of an op of a batch of
 * them, bulk_op.c): kept if it is the first in push order, and the child
 * was not given up on. */
void vf__wait_child_failed(vf__family *f, vf__failure *failure, uint64_t place);

/* The family's child at `place` was skipped by the shutdown notice (no
 * failure): the next wait for children says so, unless a wait gave up
 * on it. */
void vf__wait_child_notice_skipped(vf__family *f, uint64_t place);

/* Block until no op is pending and no async op's function runs (async.h:
 * calls; outside ops; used by stop, destroy and fork): 0, or VF_ETIMEDOUT
 * once `until` (NULL: never) has passed. */
int vf__wait_drain(vf_engine *e, const vf__deadline *until);

#endif /* VF_WAIT_H */
