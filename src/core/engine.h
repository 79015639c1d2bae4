/*
 * engine.h: the engine object and the counters every path shares.
 *
 * `counts` (counts.h) are two numbers every path keeps:
 *   pending: ops pushed and not finished (wait_all waits for 0);
 *   active:  ops ready, running, or in flight (async), and not blocked in
 *            a nested wait.
 * Each thread counts in a slot of its own, and a reader sums the slots
 * (vf__counts_sum): a sum with a zero component proves that count was zero
 * at one instant. An op finishing adds the ops it made ready to `active`
 * before taking itself off, in the same atomic add, so active never drops
 * to zero while progress is still possible. active == 0 with pending > 0
 * therefore means every unfinished op is either waiting for a var or
 * blocked in a nested wait: nothing can ever move again, and a nested
 * waiter turns that into VF_EDEADLK (wait.c). Every add and every read of
 * a sum is seq_cst: they pair with waits.watchers in the Dekker-style sleep
 * checks (counts.h). An engine with an in-flight bound also keeps an exact
 * shared pending count for it (counts.inflight).
 *
 * The lock order is the comment on struct vf_engine below.
 */
#ifndef VF_ENGINE_H
#define VF_ENGINE_H

#include <pthread.h>
#include <stdbool.h>

#include "base/common.h"
#include "core/async.h"
#include "core/bulk.h"
#include "core/counts.h"
#include "core/defs.h"
#include "core/device_pools.h"
#include "core/failure.h"
#include "core/guard.h"
#include "core/lifecycle.h"
#include "core/op.h"
#include "core/sched.h"
#include "core/var.h"
#include "core/wait.h"
#include "profile/hooks.h"

#define VF__ENGINE_MAGIC 0x7666656eu     /* "vfen" */
#define VF__OPERATOR_MAGIC 0x76666f70u   /* "vfop" */
#define VF__OPERATOR_RETIRED 0x76666f72u /* "vfor": op.c operator_retire */
#define VF__OPERATOR_SPENT 0x76666f73u   /* "vfos": op.c, spent blocks */
/* The CPU pools, then three per device in use. */
#define VF__MAX_POOLS (2 + 3 * 2 * VF__MAX_DEVICE_IDS)
_Static_assert(VF__MAX_POOLS <= VF__PROF_MAX_POOLS,
               "the profiler describes every pool");

typedef enum vf__engine_state {
    VF__RUNNING = 0,
    VF__SHUTDOWN, /* vf_engine_shutdown: pushes refused, ops skipped */
    VF__DRAINING  /* vf_engine_destroy has begun */
} vf__engine_state;

/* Bits of vf_engine.slow: what sends an op down the slow path. */
#define VF__SLOW_DEVICES 1u  /* a device exists: vars may carry fences */
#define VF__SLOW_SHUTDOWN 2u /* the shutdown notice: user ops skip */
#define VF__SLOW_FAILED 4u   /* a failure was recorded: vars may carry one */
/* In a child forked from inside one of its ops: it runs nothing there
 * (lifecycle.h: life.fork_dead). Set with SHUTDOWN, whose branch a user
 * op takes anyway (exec.c: run_body); the other kinds skip their bodies
 * as under the notice. */
#define VF__SLOW_FORK_DEAD 8u
/* An op may find a failure on its vars: one was recorded, or a device's
 * may be while the op meets its fences (after it read `slow`). */
#define VF__SLOW_MAY_INHERIT (VF__SLOW_FAILED | VF__SLOW_DEVICES)

/*
 * Lock order: the one list of how the locks of src/ nest (docs/DESIGN.md
 * and the modules' headers point here; each module's header says what its
 * locks guard). A lock is taken only after those above it, never before:
 *
 *  1. the registry of live engines the fork handlers walk (lifecycle.c's
 *     registry_lock): held through a whole fork, with everything below
 *     under it; otherwise nothing is taken under it.
 *  2. life.op_lock (lifecycle.h): held through a stop or a start, and by
 *     the fork from its prepare to its parent or child handler. Under it a
 *     stop flushes the bulk batches (4), drains, and takes dev.lock (6) and
 *     life.lock; a start takes dev.lock and life.lock and pushes the held
 *     ops (everything a push takes).
 *  3. vf_var_of's stripes (addr_vars.c): a forward stripe, then at most one
 *     reverse stripe (an insert or a drop); never two of one kind. Under a
 *     forward stripe: vf_var_create (the guard's set_lock, the var table
 *     lock), vf_var_destroy of a var nobody saw (a push), and one var's
 *     spinlock (vf__var_free_slot, vf__var_revive).
 *  4. bulk (bulk.h): bulk.lock, then one thread's bulk lock (a sleeplock),
 * never two (a push that meets another thread's claim lets go of its own
 *     first); a thread's bulk lock is held across the push of its
 *     batch, so it comes before everything a push takes.
 *  5. var spinlocks (var.h), in increasing address order: only a push
 *     holds more than one, and takes no other lock while it holds them;
 *     every other path holds at most one and takes nothing under it. A
 *     push takes its other locks before or after its var locks: the
 *     counts' slots lock, a free-list depot, dev.lock (a device's first
 *     op), a worker's queue lock, the profiler's lock (leaves, and 6);
 *     life.lock before them: a push that an engine holds is checked
 *     under life.lock, one var spinlock at a time (push.c: admit_held),
 *     so a racing destroy's mark is ordered with it.
 *  6. dev.lock (device_pools.h): a device being made, or a stop's or
 *     start's threads; under it the device's pools, its streams and the
 *     completer are made, started or joined (the device layer's locks, the
 *     completer's lock, a pool's spare_lock). Taken under no engine lock
 *     but life.op_lock and the fork's.
 *  7. at fork only (lifecycle.c, fork_prepare), in this order: the
 *     registry lock; each engine's life.op_lock (it is stopped); every
 *     engine's addr_vars_lock (a leaf otherwise: the table's making) and
 *     vf_var_of stripes (forward, then reverse); every engine's
 *     bulk locks; every engine's graphs.lock, then each of its graphs'
 *     locks (graph.h: vf__graph_fork_lock); the free-list depots (in kind
 *     order); the tag table's lock (engine.c); the counts' slots lock
 *     (counts.c); per engine life.lock, the var table lock, the failure
 *     log's lock, the failure reserve's lock, waits.lock, dev.lock,
 *     defs.lock, operators.lock (a thread making or freeing an
 *     operator at the fork left it held in the child: found by a
 *     reviewer) and the profiler's lock; the graph handles' lock
 *     (graph.c); last the guard's set_lock (guard.c). Released in
 *     reverse.
 *  8. leaves: nothing is taken while one is held, but for life.lock,
 *     under which a held push takes one var spinlock at a time (5), and
 *     waits.lock, under which a deadlock's claim takes waits.nested_lock
 *     (wait.h: the nested waiters' list, a sleeplock; under it the wake of
 *     those asleep alone takes their event counts' locks). The
 *     var table lock (var.h); the failure log's lock and the failure
 *     reserve's lock (failure.h), never held together (a record is taken
 *     from the reserve before the log's lock and let go after it); the
 *     async list's lock (async.h); waits.lock and waits.nested_lock
 *     (wait.h); defs.lock;
 *     operators.lock (op.h); graphs.lock (the engine's live graphs) and
 *     a graph's lock (graph_impl.h: its arguments, instances and
 *     stand-ins), each taken alone but at fork; the graph handles' lock
 *     (graph.c); a free-list depot's lock (freelist.c); the
 *     tag table's lock; the counts' slots lock (counts.c: a thread's
 *     first count on an engine, maybe under a bulk lock, life.op_lock or
 *     a forward stripe); the guard's set_lock (guard.c: a public call
 *     whose check misses its cache, and vf_graph_begin / vf_graph_end
 *     looking for a capture's engine; under a forward stripe at most); a
 *     worker's queue lock and a pool's spare_lock (sched.h); a pool's
 *     event count's lock where it has one (ecount.h); the completer's
 *     lock (completer.h); a device's inline_lock (device_pools.h: its
 *     per-thread streams); the profiler's lock (profile/record.c); the
 *     device layer's locks (emulated.c: a stream's lock, then an event's;
 *     cuda.c: a stream's, a status block's, the event pool's, one at a
 *     time).
 *
 * libvarflow-mpi (src/mpi/, on the public API) comes before all of these:
 * a context's `lock` (mpi_internal.h) is held across vf_engine_push, and
 * before its `data_lock`; `data_lock`, `qlock` and the context registry's
 * lock are leaves. The process-wide MPI lock (context.c) is held around
 * MPI calls, and, when MPI itself fails, across the vf_completion_finish
 * of the transfers in flight (comm.c, poll_inflight).
 *
 * User code (op functions, `done`, free callbacks) runs under no engine
 * lock but life.op_lock: a start pushes the held ops under it, and an op
 * that runs inside its push (an async op's function, any op of the naive
 * engine) runs there; a stop, start or destroy called from there is
 * refused (VF_EDEADLK, lifecycle.h).
 */
struct vf_engine {
    uint32_t magic;
    vf_engine_type kind;
    _Atomic int state; /* seq_cst */

    /* The push counter: the place in push order of the last op pushed
     * (failure.h). Advanced (relaxed) by a user push under its vars' locks
     * (so places agree with every var's queue order) and by a batch as it
     * is pushed. Padded onto a line of its own (the engine is not
     * allocated aligned), so that pushes do not evict what workers read. */
    char pushed_pad0_[VF__CACHELINE];
    _Atomic uint64_t pushed;
    char pushed_pad1_[VF__CACHELINE];

    vf__counts counts; /* pending and active, per thread (see above) */

    vf__pool pools[VF__MAX_POOLS];
    /* Pools made so far: fixed after creation but for device pools, which
     * are added under dev.lock and published with a release store. */
    _Atomic int npools;
    vf__pool *cpu_pool;      /* normal ops (NULL: naive engine) */
    vf__pool *priority_pool; /* CPU-prioritized ops */

    vf__waits waits; /* waiters outside ops sleep here (wait.h) */

    vf__failure_log failures; /* since the last wait_all (failure.h) */
    vf__async_ops async;      /* async ops in flight (async.h) */
    /* Async ops pushed and not finished (relaxed: a program orders an
     * op's push after another's by its own means): while any is, bulking
     * fuses nothing (bulk.c: bulkable). */
    atomic_uint async_unfinished;

    /* The in-flight bound (0: none) and the pending count at which blocked
     * pushers are woken (max_inflight - 1, or UINT32_MAX: never). Pushers
     * blocked on the bound sleep on waits.cond, counted in nblocked
     * (seq_cst, paired with counts.inflight as waits.watchers is with the
     * per-thread counts). */
    uint32_t max_inflight;
    uint32_t unblock_at;
    atomic_int nblocked;

    /* Threads inside vf_completion_finish (seq_cst). Such a foreign thread
     * finishes an op and dispatches its successors, so it may still touch the
     * engine after `pending` has reached zero; destroy waits for it to leave.
     * (Workers need no such count: destroy joins them before freeing.) */
    atomic_int completers;

    vf__profiler *prof; /* behind the door (profile/hooks.h) */

    vf__devices dev; /* devices (device_pools.h) */
    /* VF__SLOW_* bits, one relaxed load per op: DEVICES is set once the
     * first device is made (only ops pushed for a device after that can
     * leave fences, and their push orders them); SHUTDOWN by the notice;
     * FAILED by the first failure recorded (every failure a var carries
     * was recorded first, and the op that looks at the var runs after the
     * one that wrote it there, so it sees the bit). */
    _Atomic uint8_t slow;
    bool engine_info;  /* VF_ENGINE_INFO: log ops of waited-on vars */
    bool help_on_wait; /* vf_engine_wait_all runs queued CPU ops (wait.c) */
    bool run_at_push;  /* a ready top-level push may run inside it (exec.c) */
    /* What its pools' threads run (exec.c's trip of an op) and their stack
     * size: every pool it makes gets it (sched.h). */
    vf__pool_runner runner;
    /* Its worker threads (every pool's, spares too) not asleep: idle
     * workers spin only while these and the program's thread fit the
     * CPUs (sched.h: vf__pool_runner.awake). */
    atomic_int awake;
    /* The CPUs its workers are pinned on (vf_config.cpu_affinity: the
     * runner's `cpus`), or NULL; and those the process may run on, which
     * its spares get (the runner's `spare_cpus`). */
    uint16_t *cpu_pins;
    cpu_set_t cpu_usable;
    /* VF__HOOK_* bits new user ops get: the profiler's state and
     * engine_info folded into one relaxed load per push (updated when the
     * profiler starts, stops, pauses or resumes: a seq_cst store,
     * profiling.c). */
    _Atomic uint8_t hooks;

    vf__bulk_engine bulk;    /* bulk execution (bulk.h) */
    vf__defs defs;           /* the definitions its ops share (defs.h) */
    vf__operators operators; /* its operators not freed yet (op.h) */
    /* Its graphs not freed yet (graph.c), a leaf lock; and the counts of
     * vf_stats.launches and replays (relaxed). */
    struct {
        pthread_mutex_t lock;
        vf_graph *head; /* lock */
        _Atomic uint64_t launches, replays;
    } graphs;
    /* The table of vf_var_of (addr_vars.h), made on its first call:
     * acquire/release, so a thread that sees it sees it initialised. */
    _Atomic(struct vf__addr_vars *) addr_vars;
    /* Held while the table is made, and by a fork from before it looks
     * for the table to lock its stripes until after it: a table made in
     * between had its stripes unlocked by the fork's handlers, never
     * locked, one held by the thread making it (found by a reviewer). */
    pthread_mutex_t addr_vars_lock;

    /* Counters of ops that finished outside workers (relaxed). */
    _Atomic uint64_t ran, failed, skipped;

    vf__life life; /* stop, start and fork (lifecycle.h) */

    vf__var_table vars; /* last: large */
};

/* Whether a device was made: vars may carry fences (fences.h). */
static inline bool vf__engine_has_devices(const vf_engine *e)
{
    return atomic_load_explicit(&e->slow, memory_order_relaxed) &
           VF__SLOW_DEVICES;
}

/* Is this an engine's memory? Reads it: only for a handle the caller
 * knows is live (a public call checks its handle by entering a guard,
 * guard.h, which never reads a destroyed engine). */
static inline bool vf__engine_ok(const vf_engine *e)
{
    return e != NULL && e->magic == VF__ENGINE_MAGIC;
}

/* Record a failure in the engine's log (vf__failure_log_record): one
 * reference for the caller. */
static inline vf__failure *
vf__engine_record_failure(vf_engine *e, int code, const char *name,
                          const char *message, uint64_t place, vf__family *up)
{
    if (VF__UNLIKELY(!(atomic_load_explicit(&e->slow, memory_order_relaxed) &
                       VF__SLOW_FAILED)))
        atomic_fetch_or_explicit(&e->slow, VF__SLOW_FAILED,
                                 memory_order_relaxed);
    return vf__failure_log_record(&e->failures, code, name, message, place, up);
}

/* What a lowering of the counts must wake (vf__engine_count_out). */
#define VF__WAKE_BLOCKED 1u  /* pending fell to unblock_at: blocked pushers */
#define VF__WAKE_WATCHERS 2u /* a watcher exists: sum and see (counts.h) */

/* vf__engine_count_in's part on an engine with an in-flight bound: `n`
 * more pending in `inflight`, but for the room this thread's push took as
 * it was admitted (push.c: reserve), which its op's count takes the place
 * of. Out of line: an engine without a bound pays a test. */
void vf__engine_count_in_bounded(vf_engine *e, uint32_t n);

/* Raise the counts by `delta` (VF__COUNT_* multiples) in this thread's
 * slot: a push (pending and active), ops made ready (active). The bound's
 * exact count `inflight` follows the slot's raise and leads its lowering
 * (vf__engine_count_out), so it never exceeds the pending the sums prove
 * but by the pushes admitted and not yet counted (their room): once a
 * wait_all has seen pending at zero, vf_engine_stats, which reads
 * `inflight` on such an engine, reads zero too, unless a push is under
 * way. */
static inline void vf__engine_count_in(vf_engine *e, uint64_t delta)
{
    vf__counts_raise(&e->counts, delta);
    if (VF__UNLIKELY(e->max_inflight != 0) && delta >= VF__COUNT_PENDING)
        vf__engine_count_in_bounded(e, (uint32_t)(delta >> 32));
}

/* Lower the counts by `delta` in this thread's slot, and return what to
 * wake (0 nearly always) for vf__engine_wake, which the caller calls once
 * done with what it still touches. `may_zero`: this step may bring a count
 * to zero; false when the caller made ops ready in the same finish (they
 * keep pending and active above zero), which spares it the watcher check.
 * The lowering, then the load of waits.watchers: the Dekker pair of
 * counts.h. */
static inline unsigned vf__engine_count_out(vf_engine *e, uint64_t delta,
                                            bool may_zero)
{
    unsigned wake = 0;
    if (VF__UNLIKELY(e->max_inflight != 0) && delta >= VF__COUNT_PENDING) {
        /* Before the slot: see vf__engine_count_in. */
        uint32_t n = (uint32_t)(delta >> 32);
        if (atomic_fetch_sub(&e->counts.inflight, n) - n == e->unblock_at)
            wake |= VF__WAKE_BLOCKED;
    }
    vf__counts_lower(&e->counts, delta);
    if (may_zero && VF__UNLIKELY(atomic_load(&e->waits.watchers) != 0))
        wake |= VF__WAKE_WATCHERS;
    return wake;
}

/* Wake whoever waits on a state of the counts that `wake` says may have
 * been reached (nothing when 0). */
void vf__engine_wake(vf_engine *e, unsigned wake);

/* pending << 32 | active, summed (counts.h: a zero component was zero at
 * one instant of the call). */
static inline uint64_t vf__engine_counts(vf_engine *e)
{
    return vf__counts_sum(&e->counts);
}

/* Worker threads of the CPU and device pools made so far. */
int vf__engine_count_workers(const vf_engine *e);

/* Free an engine that no thread uses any more (destroy, or a creation
 * that failed): join its workers, free everything it holds. Returns the
 * operators and vars the program left undestroyed, for the destroy's log. */
void vf__engine_free(vf_engine *e, uint64_t *operators, uint64_t *vars);

/* Whether a live engine holds `tag` (its var handles carry it). */
bool vf__engine_tag_taken(uint16_t tag);

/* Lock or unlock the process-wide table of engine tags (fork). */
void vf__engine_tags_lock(bool lock);

/* In a forked child: the CPU pools anew with fork_child_workers threads
 * each, the device pools with one (device_pools.h); not started. */
void vf__engine_rebuild_for_child(vf_engine *e);

#endif /* VF_ENGINE_H */
