/*
 * lifecycle.h: stopping and starting an engine, the shutdown notice, and
 * fork (rule 14).
 *
 * Stop. vf_engine_stop sets `holding`: from then on a push from outside
 * the engine's ops is *held* (appended to a FIFO of held ops, counted
 * nowhere else) instead of being enqueued on its vars, while ops already
 * pushed, and the ops they push, run to the end. Once nothing is pending,
 * every worker (CPU and device pools) and the completer are joined: the
 * engine runs no thread. vf_engine_start starts them again, then enqueues
 * the held ops in push order (a push racing with that is held behind them)
 * and only then lets pushes through. The hold test in vf__push_enqueue
 * follows the push's own count of `pending`, Dekker-style with the stopper
 * (both seq_cst): either the stopper's drain sees the push pending, or the
 * push sees `holding` and holds itself; no push slips past a stop.
 *
 * A service thread's push goes through a drain. The drain may wait for an
 * async op that the program completes by pushing an op (one that calls
 * vf_completion_finish): held, it never came, and the stop waited for
 * ever. A service thread (vf_thread_set_service) is the program's way of
 * saying its pushes bring completions: while the engine drains, such a
 * push is not held when it names no variable (nothing held can be
 * ordered with it) or nothing is held yet (it comes before whatever is
 * held after it); the drain waits for it as for the ops pushed before the
 * stop (it counted itself pending first). The drain is over when nothing
 * is pending at one instant, seen with life.lock held, under which
 * `draining` is then cleared: from then on every push is held. A fork
 * begins every engine's stop, then drains them together, over when all
 * of them have nothing pending at once: a service thread's push to one
 * may complete another's async op.
 *
 * A wait cannot finish while ops it would wait for are held: vf_var_wait
 * and vf_engine_wait_all on a stopped engine with held ops return VF_ESTOPPED
 * at once; while a start is pushing them (`starting`) they wait for it to end
 * first, so a wait that returns 0 saw every held op pushed; with nothing
 * held they behave as usual. A held op that cannot be pushed at start
 * fails with the push's code (reported by done and the waits). Stop, start
 * and destroy from the engine's own code (an op, a done callback, a
 * worker, or a start running held ops) are refused (VF_EDEADLK): a drain
 * would wait for itself. Stop and start are idempotent and serialized by
 * life.op_lock.
 *
 * Shutdown notice. vf_engine_shutdown refuses further pushes from outside
 * ops (VF_ESHUTDOWN), and every user op that starts from then on skips its
 * function (done gets VF_ESKIPPED) while its vars are still released, so
 * the engine drains fast; deletes still run their free callbacks.
 *
 * Fork. pthread_atfork handlers (registered once): before a fork every
 * live engine is stopped (drained and joined) unless the forking thread
 * runs its code (vf__exec_in_engine), and every lock another thread
 * could hold inside an engine is taken, in the order of the lock-order
 * comment on struct vf_engine (engine.h, its item 7). In
 * the child the counters of threads that are gone (pending pushes caught
 * half way, waiters, blocked pushers, foreign completers) go back to zero,
 * the count slots they owned are free, every var lock is free and the wait
 * condition forgets its waiters. The parent releases them and starts again what
 * it stopped. The child releases them and rebuilds each stopped engine with
 * fork_child_workers workers per CPU pool and one worker per device pool
 * (the parent's streams and CUDA contexts cannot be used there: an
 * emulated device gets a new stream per pool; CUDA refuses after fork,
 * VF_ENODEV; device_pools.c, vf__devices_rebuild_for_child); an
 * engine the fork came from inside is left unusable in the child (its
 * calls return VF_ESHUTDOWN).
 */
#ifndef VF_LIFECYCLE_H
#define VF_LIFECYCLE_H

#include <pthread.h>
#include <stdbool.h>

#include "base/common.h"
#include "core/guard.h"
#include "core/op.h"

/* An engine's stop, start and fork state (the engine's `life`). How its
 * two locks nest with the others: the lock order on struct vf_engine
 * (engine.h). */
typedef struct vf__life {
    pthread_mutex_t op_lock; /* held through a whole stop or start */
    pthread_mutex_t lock;    /* the held ops and `stopped` */
    atomic_bool holding;     /* seq_cst: pushes from outside are held */
    /* seq_cst: the stop is a fork's (from fork_prepare until the handler
     * after the fork restarts it): a wait refused meanwhile says so. (Not
     * waited out: the fork's drain may need the waiting thread.) */
    atomic_bool forking;
    bool stopped;  /* lock: workers joined */
    bool starting; /* lock: a start pushes held ops */
    bool draining; /* lock: a stop (or a fork's) drains it, holding */
    vf__op *held_head, *held_tail; /* lock: held pushes, in order */
    uint64_t nheld;                /* lock */
    int fork_child_workers;
    /* Fork handlers only (under the registry lock). */
    bool fork_restart, fork_inside, fork_dead;
    /* lock: the restart after a fork could not start the threads (a thread
     * quota): the engine stays stopped until a start succeeds, which a
     * wait tries (vf__lifecycle_check_waitable). */
    bool fork_restart_failed;
    vf_engine *next_live;
    /* The thread destroying it, from destroy_begins (registry and dying
     * locks): a fork it makes itself (from a held op its destroy runs)
     * leaves the engine to that destroy in the child. */
    pthread_t destroyer;
} vf__life;

/* Ops pushed while stopped and held (vf_stats.pending counts them). */
uint64_t vf__lifecycle_held(vf_engine *e);

/* An op held while stopped that cannot be pushed at start fails with
 * `rc` (its record, `done`, counted failed) and is freed: what a user op
 * does (op.h: vf__op_kind.dropped); other kinds add their part. */
void vf__lifecycle_drop_op(vf_engine *e, vf__op *op, int rc);

/* Called by vf__push_enqueue when `holding` was seen set: hold the op
 * (returns 0) once `admit(e, op, arg)` took it (0; else its error code is
 * returned, nothing held), or return 1 when the engine stopped holding
 * meanwhile (the caller enqueues it then; `admit` not called). `admit`
 * runs under the lock that orders the held ops: what it checks (that its
 * vars are not deleted, nor their deletes held) and what it takes (its
 * place in push order, a delete's mark on its var) are in the order the
 * ops are held, and so pushed at start. `may_wait`: the caller holds no
 * lock and may block: during a start it first waits for the start to
 * end, 10 ms at most (lifecycle.c: START_WAIT_MS), then looks again
 * (started: returns 1; else held), so pushes from other threads cannot
 * keep a start going for ever; otherwise (a batch's push under its
 * thread's bulk lock, which a start may take; a nonblocking op) it is
 * held at once. */
int vf__lifecycle_hold(vf_engine *e, vf__op *op,
                       int (*admit)(vf_engine *e, vf__op *op, const void *arg),
                       const void *arg, bool may_wait);

/* Whether a push (from outside e's ops, e holding) goes through instead:
 * from a service thread while e drains, the op naming no variable or
 * nothing held yet (lifecycle.h). */
bool vf__lifecycle_passes_drain(vf_engine *e, const struct vf__op *op);

/* Whether this thread is the one enqueuing e's held ops (vf_engine_start),
 * and so maybe running ops inline meanwhile (a naive engine's, an async
 * op's body). */
bool vf__lifecycle_releasing_held(const vf_engine *e);

/* VF_ESHUTDOWN (with a detail naming `who`) in a child forked from inside
 * an op of `e`, where the engine runs nothing (life.fork_dead): a wait
 * there would wait for ever, a completion dispatch into no thread (found
 * by a reviewer); else 0. */
int vf__lifecycle_refuse_fork_dead(const vf_engine *e, const char *who);

/* VF__GUARDED for a call that needs the engine to work in this process:
 * refused as above on an engine left dead in a forked child before `call`
 * runs, as a lock it takes there may be held for good by a thread of the
 * parent's (stats, vf_var_of, bulk, the profiler, a graph's end, launch
 * data and destroy, stop, start, shutdown: they waited for ever or
 * answered as if the engine were usable). */
#define VF__GUARDED_LIVE(e, who, call)                                         \
    VF__GUARDED((e), (who), __extension__({                                    \
                    int dead_ = vf__lifecycle_refuse_fork_dead((e), (who));    \
                    dead_ != 0 ? dead_ : (call);                               \
                }))

/* VF_ESTOPPED (with a detail naming `who`) when waits cannot finish
 * because ops are held; else 0. */
int vf__lifecycle_check_waitable(vf_engine *e, const char *who);

/* Add a new engine to the registry fork handlers walk (and register the
 * handlers, once). */
void vf__lifecycle_register(vf_engine *e);

/* A destroy (destroy.c) begins: `e` leaves the engines a fork drains,
 * stops and restarts for those a fork leaves dead in the child, where the
 * thread destroying it is not (every call there VF_ESHUTDOWN, not freed);
 * a timed one that gives up makes it live again; the destroy's end, before
 * it frees `e`, takes it off. Left in neither list, the child had the
 * engine half destroyed, the op it ran on a worker the child lacks: a
 * wait there never returned (found by a user tester). */
void vf__lifecycle_destroy_begins(vf_engine *e);
void vf__lifecycle_destroy_gives_up(vf_engine *e);
void vf__lifecycle_destroy_ends(vf_engine *e);

/* Before destroy drains: a stopped engine is started again (its held ops
 * must run). */
void vf__lifecycle_unstop(vf_engine *e);

/* vf__lifecycle_unstop unless another thread's stop or start is under
 * way (false: nothing done), for a timed destroy that gives up. */
bool vf__lifecycle_try_unstop(vf_engine *e);

/* How a refusal names an engine left in a child forked from inside one of
 * its ops, or while another thread destroyed it (life.fork_dead): nothing
 * can run there any more. */
#define VF__FORK_DEAD_WORDS                                                    \
    "cannot run in this forked child (the fork came from inside one of its "   \
    "ops, or while another thread destroyed it, or the child had no memory "   \
    "to rebuild it)"

#endif /* VF_LIFECYCLE_H */
