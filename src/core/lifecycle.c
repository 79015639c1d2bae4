/* lifecycle.c: stop, start, the shutdown notice, fork (see lifecycle.h). */
#include "core/lifecycle.h"

#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/cancel.h"
#include "core/addr_vars.h"
#include "core/bulk.h"
#include "core/cross_wait.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/freelist.h"
#include "core/graph.h"
#include "core/push.h"
#include "core/stall_report.h"
#include "core/thread_exit.h"
#include "core/wait.h"

static _Thread_local const vf_engine *releasing_held;

/* How long a push from another thread waits for a start to end before it
 * is held (vf__lifecycle_hold): the pushes a start's run races are slowed
 * to one in this time each, so the start catches up. */
#define START_WAIT_MS 10

/* How often a fork's drain looks at each engine it stops (drain). */
#define DRAIN_LOOK_MS 10

bool vf__lifecycle_releasing_held(const vf_engine *e)
{
    return releasing_held == e;
}

int vf__lifecycle_hold(vf_engine *e, vf__op *op,
                       int (*admit)(vf_engine *e, vf__op *op, const void *arg),
                       const void *arg, bool may_wait)
{
    pthread_mutex_lock(&e->life.lock);
    if (!atomic_load(&e->life.holding)) {
        pthread_mutex_unlock(&e->life.lock);
        return 1; /* started meanwhile: enqueue it */
    }
    if (may_wait && e->life.starting && !vf__lifecycle_releasing_held(e)) {
        /* A start pushes the held ops: wait till it has (a while at most),
         * then look again (started: enqueue it; stopped again, or still
         * starting: held). Held at once, while other threads pushed faster
         * than the start ran what it released (the naive engine runs each
         * on the starting thread), the start never ended (found by a user
         * test); waited for without a limit, a held op that waits for what
         * this thread does after its push would hang the start. */
        pthread_mutex_unlock(&e->life.lock);
        /* On the wall clock: pthread_mutex_clocklock would take the
         * monotonic one (deadline.h), but TSan does not know it, and then
         * calls the unlock below one of a mutex never locked. A clock
         * change only makes this one wait shorter or longer. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += START_WAIT_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_mutex_timedlock(&e->life.op_lock, &until) == 0)
            pthread_mutex_unlock(&e->life.op_lock);
        return vf__lifecycle_hold(e, op, admit, arg, false); /* once */
    }
    int rc = admit(e, op, arg);
    if (rc != 0) {
        pthread_mutex_unlock(&e->life.lock);
        return rc;
    }
    op->next = NULL;
    if (e->life.held_tail != NULL)
        e->life.held_tail->next = op;
    else
        e->life.held_head = op;
    e->life.held_tail = op;
    e->life.nheld++;
    pthread_mutex_unlock(&e->life.lock);
    return 0;
}

uint64_t vf__lifecycle_held(vf_engine *e)
{
    if (!atomic_load(&e->life.holding))
        return 0;
    pthread_mutex_lock(&e->life.lock);
    uint64_t n = e->life.nheld;
    pthread_mutex_unlock(&e->life.lock);
    return n;
}

int vf__lifecycle_refuse_fork_dead(const vf_engine *e, const char *who)
{
    if (VF__LIKELY(!e->life.fork_dead))
        return 0;
    return vf__fail(VF_ESHUTDOWN, "%s: the engine " VF__FORK_DEAD_WORDS, who);
}

static int start_locked(vf_engine *e);

/* A wait finds the engine stopped because its restart after a fork could
 * not start its threads (restart_after_fork): it starts it now, and waits
 * as usual; VF_ESYSTEM while the threads still cannot start. */
static int restart_for_wait(vf_engine *e, const char *who)
{
    pthread_mutex_lock(&e->life.op_lock);
    pthread_mutex_lock(&e->life.lock);
    bool still = e->life.fork_restart_failed;
    pthread_mutex_unlock(&e->life.lock);
    int rc = still ? start_locked(e) : 0;
    pthread_mutex_unlock(&e->life.op_lock);
    if (rc != 0) {
        char why[256]; /* quoted in ours (vf__fail rewrites it) */
        snprintf(why, sizeof why, "%s", vf_error_detail());
        return vf__fail(VF_ESYSTEM,
                        "%s: the engine's threads could not be started again "
                        "after fork() (%s); its pushed ops wait for them "
                        "(each wait tries again, as vf_engine_start() does)",
                        who, why);
    }
    return vf__lifecycle_check_waitable(e, who);
}

int vf__lifecycle_check_waitable(vf_engine *e, const char *who)
{
    if (!atomic_load(&e->life.holding))
        return 0;
    /* One look under life.lock. Whose stop: a fork sets forking before its
     * stop holds and clears it after its start let go, both under this
     * lock, so a hold seen here with forking clear is not a fork's. (Read
     * apart, a fork's start could end between the two reads: its stop
     * then looked like the program's, "wait for vf_engine_start".) */
    pthread_mutex_lock(&e->life.lock);
    bool holding = atomic_load(&e->life.holding);
    bool forking = atomic_load(&e->life.forking);
    bool starting = e->life.starting;
    bool restart_failed = e->life.fork_restart_failed;
    uint64_t n = e->life.nheld;
    pthread_mutex_unlock(&e->life.lock);
    if (!holding)
        return 0;
    if (restart_failed && !forking)
        return restart_for_wait(e, who);
    if (starting && !vf__lifecycle_releasing_held(e)) {
        /* A start is pushing the held ops (maybe this caller's; it took
         * them off the list, so n may read 0): wait until they are all
         * pushed, then wait as usual. */
        pthread_mutex_lock(&e->life.op_lock);
        pthread_mutex_unlock(&e->life.op_lock);
        return vf__lifecycle_check_waitable(e, who);
    }
    if (n == 0)
        return 0;
    /* A fork's stop is not waited out: its drain may need this thread (an
     * async op it completes, an op of another engine it runs). */
    if (forking)
        return vf__fail(VF_ESTOPPED,
                        "%s: another thread's fork() has stopped the "
                        "engine for as long as it lasts, and %llu pushed "
                        "ops wait for it: wait again",
                        who, (unsigned long long)n);
    return vf__fail(VF_ESTOPPED,
                    "%s: the engine is stopped and %llu pushed "
                    "ops wait for vf_engine_start",
                    who, (unsigned long long)n);
}

/* --- threads ------------------------------------------------------------- */

/* Join every worker of every pool, and the completer (nothing pending).
 * Under dev.lock, so that a device made meanwhile (a push for it is held,
 * but its pools are made at push) waits for start to run its threads. */
static void join_threads(vf_engine *e)
{
    pthread_mutex_lock(&e->dev.lock);
    for (int i = 0; i < e->npools; i++)
        vf__pool_stop(&e->pools[i]);
    vf__devices_stop(e);
    e->dev.threads_down = true;
    pthread_mutex_unlock(&e->dev.lock);
}

static int start_threads(vf_engine *e)
{
    pthread_mutex_lock(&e->dev.lock);
    int rc = vf__devices_start(e);
    for (int i = 0; i < e->npools && rc == 0; i++)
        rc = vf__pool_start(&e->pools[i]);
    if (rc == 0)
        e->dev.threads_down = false;
    pthread_mutex_unlock(&e->dev.lock);
    if (rc != 0)
        join_threads(e);
    return rc;
}

/* A stop begins (life.op_lock held): pushes from outside are held from
 * now on, but a service thread's while it drains (draining, set with
 * holding: vf__lifecycle_passes_drain). */
static void stop_begin(vf_engine *e)
{
    vf__bulk_flush_all(e); /* batched ops were pushed before the stop */
    pthread_mutex_lock(&e->life.lock);
    e->life.draining = !e->life.stopped;
    atomic_store(&e->life.holding, true);
    pthread_mutex_unlock(&e->life.lock);
}

bool vf__lifecycle_passes_drain(vf_engine *e, const vf__op *op)
{
    if (!vf__exec_on_service_thread())
        return false;
    pthread_mutex_lock(&e->life.lock);
    bool passes = e->life.draining && (op->nvars == 0 || e->life.nheld == 0);
    pthread_mutex_unlock(&e->life.lock);
    return passes;
}

/* The draining engines of a stop: `e` alone, or with `all`, every engine
 * of the list from `e` on (next_live) that drains and that the caller (a
 * fork) stops: not one whose op it runs in (fork_inside), which another
 * thread may be stopping (its `draining` is that thread's). */
#define FOR_EACH_DRAINING(d, e, all)                                           \
    for (vf_engine *d = (e); d != NULL; d = (all) ? d->life.next_live : NULL)  \
        if (!((all) && d->life.fork_inside) && d->life.draining)

/* Wait until each draining engine had nothing pending once: while one
 * drains, a service thread's push to another goes through
 * (vf__lifecycle_passes_drain), and it may complete an async op of the
 * first (a fork that stopped them one by one held that push, and waited
 * for ever), so each is looked at in turn, every DRAIN_LOOK_MS. */
static void drain(vf_engine *e, bool all)
{
    /* What it waits for said on stderr after a while, as destroy says it:
     * a fork from the thread that would complete an async op in flight
     * waits for ever, and said nothing (found by a user tester). */
    vf__stall_report report;
    vf__stall_report_start(&report, all ? "fork()" : "vf_engine_stop");
    FOR_EACH_DRAINING(d, e, all)
    {
        vf__stall_sample(d, true); /* what each runs now, for the reports */
    }
    for (bool drained = false; !drained;) {
        drained = true;
        bool due = vf__stall_report_due_in_ms(&report) == 0;
        FOR_EACH_DRAINING(d, e, all)
        {
            /* A fork's names the usual cause too: an op that waits for
             * what the forking thread holds across fork() (Python's
             * os.fork holds the GIL: a user tester's fork hung while an
             * op ran Python code, and the line said only "no async op"). */
            if (due && (vf__counts_pending(vf__engine_counts(d)) != 0 ||
                        vf__async_calls(&d->async) != 0))
                vf__stall_report_say(
                    &report, d,
                    all ? "its pushed ops to finish (one that needs what the "
                          "forking thread holds, a lock or Python's GIL, "
                          "never does: stop the engine before fork())"
                        : "its pushed ops to finish");
            vf__deadline look = vf__deadline_in_ms(
                all ? DRAIN_LOOK_MS : vf__stall_report_due_in_ms(&report));
            if (vf__wait_drain(d, &look) != 0)
                drained = false;
        }
    }
}

/* Whether every draining engine has nothing pending at one instant, every
 * one's life.lock held; if so they all stop draining. A service thread's push
 * counts itself pending before it takes life.lock to see `draining`: either
 * this look sees it pending, or it sees the drain over and is held. Cleared
 * once a drain had seen nothing pending, a request that went through between
 * the two was waited for, its completion then held: for ever (found by the
 * reviewer). Taken in the list's order, as the fork takes them. */
static bool drained_at_once(vf_engine *e, bool all)
{
    bool drained = true;
    FOR_EACH_DRAINING(d, e, all)
    {
        pthread_mutex_lock(&d->life.lock);
    }
    FOR_EACH_DRAINING(d, e, all)
    {
        /* The calls first: a function's push comes before its return. */
        if (vf__async_calls(&d->async) != 0 ||
            vf__counts_pending(vf__engine_counts(d)) != 0)
            drained = false;
    }
    FOR_EACH_DRAINING(d, e, all)
    {
        d->life.draining = !drained; /* each looked at before it changes */
        pthread_mutex_unlock(&d->life.lock);
    }
    return drained;
}

/* Drain the stopping engines (e alone, or a fork's list) until they are
 * drained at once. */
static void drain_at_once(vf_engine *e, bool all)
{
    do
        drain(e, all);
    while (!drained_at_once(e, all));
}

/* The stop of a drained engine ends (life.op_lock held): its threads are
 * joined, unless it was stopped already. */
static void stop_end(vf_engine *e)
{
    pthread_mutex_lock(&e->life.lock);
    bool stopped = e->life.stopped;
    pthread_mutex_unlock(&e->life.lock);
    if (stopped)
        return;
    /* A foreign thread that finished the last op may still be in
     * vf_completion_finish, dispatching: let it leave before the workers go. */
    while (atomic_load(&e->completers) != 0)
        sched_yield();
    join_threads(e);
    pthread_mutex_lock(&e->life.lock);
    e->life.stopped = true;
    pthread_mutex_unlock(&e->life.lock);
}

/* Drain and join (life.op_lock held). */
static void stop_locked(vf_engine *e)
{
    stop_begin(e);
    drain_at_once(e, false);
    stop_end(e);
}

/* A held op that cannot be pushed at start (`rc`: out of memory, a var
 * deleted by a held delete before it, workers that cannot start): it
 * fails with that code like an op whose function failed, so `done` and
 * the waits report it; nothing pushed is lost silently. */
static void drop_held(vf_engine *e, vf__op *op, int rc)
{
    if (op->def->kind->dropped != NULL)
        op->def->kind->dropped(e, op, rc);
    else
        vf__lifecycle_drop_op(e, op, rc);
}

void vf__lifecycle_drop_op(vf_engine *e, vf__op *op, int rc)
{
    if (op->place == 0) /* never enqueued: its number now */
        vf__push_place_op(e, op, 1);
    vf__failure_unref(vf__engine_record_failure(
        e, rc, op->name,
        "held while the engine was stopped, and could "
        "not be pushed at start",
        op->place, op->up));
    if (op->done != NULL)
        op->done(op->arg, rc);
    atomic_fetch_add_explicit(&e->failed, 1, memory_order_relaxed);
    vf__op_free(op);
}

/* Start the threads and push the held ops (life.op_lock held). */
static int start_locked(vf_engine *e)
{
    pthread_mutex_lock(&e->life.lock);
    bool stopped = e->life.stopped;
    e->life.starting = atomic_load(
        &e->life.holding); /* waits block till it ends */
    pthread_mutex_unlock(&e->life.lock);
    if (stopped) {
        int rc = start_threads(e);
        if (rc == 0) {
            pthread_mutex_lock(&e->life.lock);
            e->life.fork_restart_failed = false;
            pthread_mutex_unlock(&e->life.lock);
        }
        if (rc != 0) {     /* as it was: stopped */
            char why[256]; /* quoted in ours (vf__fail rewrites it) */
            snprintf(why, sizeof why, "%s", vf_error_detail());
            pthread_mutex_lock(&e->life.lock);
            e->life.starting = false;
            pthread_mutex_unlock(&e->life.lock);
            return vf__fail(rc, "vf_engine_start: cannot start the workers: %s",
                            why);
        }
    }
    const vf_engine *outer = releasing_held;
    releasing_held = e;
    for (;;) {
        pthread_mutex_lock(&e->life.lock);
        vf__op *op = e->life.held_head;
        e->life.held_head = e->life.held_tail = NULL;
        e->life.nheld = 0;
        if (op == NULL) {
            e->life.starting = false;
            e->life.stopped = false;
            atomic_store(&e->life.holding, false);
            pthread_mutex_unlock(&e->life.lock);
            break;
        }
        pthread_mutex_unlock(&e->life.lock);
        while (op != NULL) {
            vf__op *next = op->next;
            int rc = vf__push_enqueue_held(e, op);
            if (rc != 0)
                drop_held(e, op, rc);
            op = next;
        }
    }
    releasing_held = outer;
    return 0;
}

/* Inside the call's guard (guard.h). */
static int check_outside(vf_engine *e, const char *who)
{
    int rc = vf__exec_refuse_in_device_work(who);
    if (rc != 0)
        return rc;
    if (vf__exec_in_engine(e) || vf__lifecycle_releasing_held(e))
        return vf__fail(VF_EDEADLK,
                        "%s: called from the engine's own code "
                        "(an op, a done callback, a worker, or "
                        "a start running held ops), which a "
                        "drain would wait for",
                        who);
    if ((rc = vf__lifecycle_refuse_fork_dead(e, who)) != 0)
        return rc;
    if (atomic_load(&e->state) == VF__DRAINING)
        return vf__fail(VF_ESHUTDOWN, "%s: the engine is being destroyed", who);
    return 0;
}

/* `cross`: the engines of the thread's calls before this one
 * (vf__cross_wait_calls). */
static int stop(vf_engine *e, vf__cross_wait *cross)
{
    static const char who[] = "vf_engine_stop";
    int rc = check_outside(e, who);
    if (rc != 0 || (rc = vf__graph_refuse(e, who)) != 0)
        return rc;
    /* Its drain waits for every op of e, as vf_engine_wait_all does: from
     * inside an op of another engine, refused where it never could end
     * (cross_wait.h; found trying stop across engines as a user). */
    const vf__op *cur = vf__current_op();
    if (cur != NULL &&
        (rc = vf__cross_wait_enter(cross, e, NULL, cur, true, who)) != 0)
        return rc;
    pthread_mutex_lock(&e->life.op_lock);
    stop_locked(e);
    pthread_mutex_unlock(&e->life.op_lock);
    if (cur != NULL)
        vf__cross_wait_leave(cross);
    return 0;
}

VF_API int vf_engine_stop(vf_engine *e)
{
    vf__cross_wait cross;
    vf__cross_wait_calls(&cross); /* before this call's guard */
    return VF__UNCANCELLED(VF__GUARDED(e, "vf_engine_stop", stop(e, &cross)));
}

static int start(vf_engine *e)
{
    int rc = check_outside(e, "vf_engine_start");
    if (rc != 0 || (rc = vf__graph_refuse(e, "vf_engine_start")) != 0)
        return rc;
    pthread_mutex_lock(&e->life.op_lock);
    rc = start_locked(e);
    pthread_mutex_unlock(&e->life.op_lock);
    return rc;
}

VF_API int vf_engine_start(vf_engine *e)
{
    return VF__UNCANCELLED(VF__GUARDED(e, "vf_engine_start", start(e)));
}

/* vf__lifecycle_unstop with life.op_lock held. */
static void unstop_locked(vf_engine *e)
{
    start_locked(e); /* a failure leaves it stopped: destroy then hangs no
                        thread, and the held ops fail (VF_ESYSTEM) */
    pthread_mutex_lock(&e->life.lock);
    vf__op *op = e->life.held_head;
    e->life.held_head = e->life.held_tail = NULL;
    e->life.nheld = 0;
    pthread_mutex_unlock(&e->life.lock);
    while (op != NULL) {
        vf__op *next = op->next;
        drop_held(e, op, VF_ESYSTEM);
        op = next;
    }
}

void vf__lifecycle_unstop(vf_engine *e)
{
    pthread_mutex_lock(&e->life.op_lock);
    unstop_locked(e);
    pthread_mutex_unlock(&e->life.op_lock);
}

bool vf__lifecycle_try_unstop(vf_engine *e)
{
    if (pthread_mutex_trylock(&e->life.op_lock) != 0)
        return false;
    unstop_locked(e);
    pthread_mutex_unlock(&e->life.op_lock);
    return true;
}

static int shut_down(vf_engine *e)
{
    int rc = vf__graph_refuse(e, "vf_engine_shutdown");
    if (rc != 0)
        return rc;
    int expected = VF__RUNNING;
    if (!atomic_compare_exchange_strong(&e->state, &expected, VF__SHUTDOWN) &&
        expected == VF__DRAINING)
        return vf__fail(VF_ESHUTDOWN, "vf_engine_shutdown: the engine is "
                                      "being destroyed");
    atomic_fetch_or(&e->slow, VF__SLOW_SHUTDOWN);
    vf__bulk_flush_all(e); /* batched ops are skipped, not lost */
    return 0;
}

VF_API int vf_engine_shutdown(vf_engine *e)
{
    return VF__GUARDED_LIVE(e, "vf_engine_shutdown", shut_down(e));
}

/* --- fork ------------------------------------------------------------------
 */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static vf_engine *live; /* registry_lock: the live engines */
/* The engines being destroyed (destroy_begins). A fork takes dying_lock
 * last, once it has drained (a destroy's end may wait for it, and a drain
 * may wait for the destroying thread), after registry_lock: the order a
 * destroy's beginning takes them in. */
static pthread_mutex_t dying_lock = PTHREAD_MUTEX_INITIALIZER;
static vf_engine *dying; /* dying_lock */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

static void register_atfork(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void vf__lifecycle_register(vf_engine *e)
{
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&registry_lock);
    e->life.next_live = live;
    live = e;
    pthread_mutex_unlock(&registry_lock);
}

/* Take e off the list at *head (its lock held). */
static void unlink_engine(vf_engine **head, vf_engine *e)
{
    vf_engine **p = head;
    while (*p != NULL && *p != e)
        p = &(*p)->life.next_live;
    if (*p == e)
        *p = e->life.next_live;
}

/* From one list to the other, both locks held: in neither, even for a
 * moment, a fork would not see it. */
static void move_engine(vf_engine **from, vf_engine **to, vf_engine *e)
{
    pthread_mutex_lock(&registry_lock);
    pthread_mutex_lock(&dying_lock);
    e->life.destroyer = pthread_self();
    unlink_engine(from, e);
    e->life.next_live = *to;
    *to = e;
    pthread_mutex_unlock(&dying_lock);
    pthread_mutex_unlock(&registry_lock);
}

void vf__lifecycle_destroy_begins(vf_engine *e)
{
    move_engine(&live, &dying, e);
}

void vf__lifecycle_destroy_gives_up(vf_engine *e)
{
    move_engine(&dying, &live, e);
}

void vf__lifecycle_destroy_ends(vf_engine *e)
{
    pthread_mutex_lock(&dying_lock);
    unlink_engine(&dying, e);
    pthread_mutex_unlock(&dying_lock);
}

/* The locks another thread could hold inside an engine at the fork, in
 * the lock order (engine.h, on struct vf_engine). */
static void engine_locks(vf_engine *e, bool lock)
{
    pthread_mutex_t *m[] = {&e->life.lock,     &e->vars.lock,
                            &e->failures.lock, &e->failures.reserve.lock,
                            &e->waits.lock,    &e->dev.lock,
                            &e->defs.lock,     &e->operators.lock};
    int n = (int)(sizeof m / sizeof m[0]);
    if (!lock)
        vf__prof_fork_lock(e->prof, false);
    for (int i = 0; i < n; i++) {
        if (lock)
            pthread_mutex_lock(m[i]);
        else
            pthread_mutex_unlock(m[n - 1 - i]);
    }
    if (lock)
        vf__prof_fork_lock(e->prof, true); /* a leaf: last */
}

/* The forking thread's cancel state, held off from the prepare (its drain
 * waits) to the parent's or child's handler (base/cancel.h). */
static _Thread_local int fork_cancel_state;

static void fork_prepare(void)
{
    fork_cancel_state = vf__cancel_hold();
    pthread_mutex_lock(&registry_lock);
    for (vf_engine *e = live; e != NULL; e = e->life.next_live) {
        e->life.fork_inside = vf__exec_in_engine(e);
        e->life.fork_restart = false;
        if (e->life.fork_inside)
            continue; /* cannot drain under our own feet */
        pthread_mutex_lock(&e->life.op_lock);
        pthread_mutex_lock(&e->life.lock);
        e->life.fork_restart = !e->life.stopped;
        pthread_mutex_unlock(&e->life.lock);
        atomic_store(&e->life.forking, true); /* before waits are refused */
        stop_begin(e);
        /* life.op_lock stays held until after the fork */
    }
    /* Drained together: an async op of one may be completed by an op
     * pushed to another (drain). */
    drain_at_once(live, true);
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        if (!e->life.fork_inside)
            stop_end(e);
    /* vf_var_of's stripes come first (one is held across vf_var_create),
     * then the bulk locks: a flush holds them while it pushes, which takes
     * the others (free lists included). */
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        vf__addr_vars_fork_lock(e, true);
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        vf__bulk_fork_lock(e, true);
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        vf__graph_fork_lock(e, true);
    vf__fl_fork_lock(true);
    vf__engine_tags_lock(true);
    vf__counts_fork_lock(true); /* a thread's first count on an engine */
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        engine_locks(e, true);
    vf__graph_handles_fork_lock(true); /* a leaf */
    vf__thread_exit_fork_lock(true);   /* a leaf */
    vf__guard_fork_lock(true);         /* a leaf */
    pthread_mutex_lock(&dying_lock);   /* a leaf: last */
}

static void release_fork_locks(void)
{
    vf__guard_fork_lock(false);
    vf__thread_exit_fork_lock(false);
    vf__graph_handles_fork_lock(false);
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        engine_locks(e, false);
    vf__counts_fork_lock(false);
    vf__engine_tags_lock(false);
    vf__fl_fork_lock(false);
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        vf__graph_fork_lock(e, false);
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        vf__bulk_fork_lock(e, false);
    for (vf_engine *e = live; e != NULL; e = e->life.next_live)
        vf__addr_vars_fork_lock(e, false);
}

/* Start `e` again after a fork stopped it (life.op_lock held). Its
 * threads may not start (a thread quota: the child took a process slot):
 * it stays stopped, saying so to the waits that find its ops held, which
 * try again (vf__lifecycle_check_waitable). It stayed stopped silently:
 * pushes were held and a wait said VF_ESTOPPED, "wait for
 * vf_engine_start", to a program that never stopped it (found by a user
 * tester). */
static void restart_after_fork(vf_engine *e)
{
    if (start_locked(e) == 0)
        return;
    pthread_mutex_lock(&e->life.lock);
    e->life.fork_restart_failed = true;
    pthread_mutex_unlock(&e->life.lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&dying_lock);
    release_fork_locks();
    for (vf_engine *e = live; e != NULL; e = e->life.next_live) {
        if (e->life.fork_inside)
            continue;
        if (e->life.fork_restart)
            restart_after_fork(e);
        atomic_store(&e->life.forking, false);
        pthread_mutex_unlock(&e->life.op_lock);
    }
    pthread_mutex_unlock(&registry_lock);
    vf__cancel_restore(fork_cancel_state);
}

/* In the child: an engine whose op the fork came from inside, or which
 * another thread was destroying, runs nothing here. */
static void leave_dead(vf_engine *e)
{
    /* The op this thread forked from inside, if it is one of e's: its
     * function's return here must not finish it (exec.h). */
    vf__op *mine = vf__running_now.op;
    if (mine != NULL && vf__op_engine(mine) == e)
        mine->hooks |= VF__HOOK_FORK_DEAD;
    e->life.fork_dead = true;
    atomic_store(&e->state, VF__DRAINING);
    atomic_fetch_or(&e->slow, VF__SLOW_FORK_DEAD | VF__SLOW_SHUTDOWN);
    /* A worker of its own (a CPU or device pool's) forked: once its op
     * returns here, it stops, as its pool has nothing to run here (it
     * slept for ever in its loop, and the child with it: found by the
     * reviewer of the fork's fix, and for an engine being destroyed by
     * the reviewer of the dying list). */
    vf__worker *w = vf__this_worker();
    if (w != NULL && w->pool->engine == e)
        atomic_store(&w->pool->stop, true);
}

static void fork_child(void)
{
    vf__guard_after_fork(); /* other threads' calls are gone */
    pthread_t self = pthread_self();
    /* Not one this thread destroys (it forked from a held op its destroy
     * ran): that destroy goes on here, and left dead, it waited for ever
     * for the ops still held (found by the reviewer of the dying list). */
    for (vf_engine *e = dying; e != NULL; e = e->life.next_live)
        if (!pthread_equal(e->life.destroyer, self))
            leave_dead(e);
    pthread_mutex_unlock(&dying_lock);
    release_fork_locks();
    for (vf_engine *e = live; e != NULL; e = e->life.next_live) {
        if (e->life.fork_inside) {
            /* Its op runs on in the parent only: nothing can finish it. */
            leave_dead(e);
            continue;
        }
        if (atomic_load(&e->state) == VF__DRAINING) {
            /* Its destroy began on another thread, which waits for the
             * registry to move it to the dying (the fork held it): dying
             * too. Rebuilt and restarted as live, its waits returned 0
             * and its threads could never be stopped (found by the
             * reviewer of the dying list). */
            leave_dead(e);
        } else {
            vf__engine_rebuild_for_child(e);
            if (e->life.fork_restart)
                restart_after_fork(e);
        }
        atomic_store(&e->life.forking, false);
        pthread_mutex_unlock(&e->life.op_lock);
    }
    pthread_mutex_unlock(&registry_lock);
    vf__cancel_restore(fork_cancel_state);
}
