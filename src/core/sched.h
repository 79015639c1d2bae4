/*
 * sched.h: worker pools and their ready queues.
 *
 * A pool is a set of worker threads; each worker owns a ready queue ordered
 * by (priority desc, arrival asc) under the worker's own mutex: a FIFO lane
 * for priority 0 (nearly every op: O(1) in and out) and a pairing heap for
 * the others. Both are intrusive (links live in the op), so placing an op
 * never allocates and cannot fail. A worker takes from its own queue
 * first, then steals the best op of another worker's queue; while the pool
 * holds ops of a priority above 0 (queued_above0), one about to run an op
 * of its own takes a higher one from another's queue first (rule 11 across
 * the pool; not in device pools). Ready ops are placed:
 *   - by a worker finishing an op: the first newly ready op of its own pool
 *     runs next on the same worker with no queue round trip (when its own
 *     queue holds nothing better); the others go to its own queue, where
 *     idle workers steal them;
 *   - by any other thread: round-robin over the pool's workers, onto the
 *     worker's inbox (a lock-free stack), which the next take from that
 *     worker moves into its queue.
 *
 * Ready ops go over in batches: a list of ops bound for one pool (the ops
 * one finish made ready) is placed with one lock round trip on the
 * worker's own queue, or one compare-and-swap on one inbox (the whole
 * chain spliced on, so the reversal at drain keeps arrival order), and one
 * wake check; round-robin moves on per batch.
 *
 * Device pools (`spread`) place every op round-robin, batch or not, and a
 * worker takes only from its own queue (see vf__pool); placing wakes every
 * sleeper.
 *
 * Sleeping. A worker with nothing to do spins briefly (longer, up to the
 * runner's spin_ns, while the program waits and the CPUs allow: below),
 * then sleeps on the
 * pool's event count (base/ecount.h: a futex on Linux). Placing work wakes
 * one sleeper only when no worker is spinning (a spinner will find it).
 * The lost-wake-up race is closed Dekker-style with sequentially
 * consistent atomics: a sleeper counts itself in and reads the epoch (one
 * step: prepare) and then rescans every queue length and inbox (and its
 * wake predicate) before it blocks on that epoch; a placer publishes the
 * queue length (or its inbox push) and then reads how many sleepers are
 * owed no wake yet. Either the placer sees such a sleeper, and its notify
 * owes it a wake and bumps the epoch, so the sleeper does not block or is
 * woken; or every sleeper it sees is owed a wake already, so one is awake
 * or waking and rescans before it sleeps again; or the sleeper's rescan
 * sees the work (model/sleep.pml checks this). While workers are busy
 * nobody sleeps: placing costs one load of a line only sleepers and
 * wakers write, and no system call; a burst wakes each sleeper once.
 *
 * Lock order: a worker's queue lock is a leaf: no other lock is taken
 * while holding it, and no user code runs under it. The event count takes
 * no lock (its portable fallback's mutex is a leaf).
 */
#ifndef VF_SCHED_H
#define VF_SCHED_H

#include <pthread.h>
#include <stdbool.h>

#include "base/common.h"
#include "base/deadline.h"
#include "base/ecount.h"
#include "core/op.h"
#include "device/device.h"

typedef struct vf__worker vf__worker;

struct vf__worker {
    pthread_mutex_t qlock;
    vf__op *fifo_head, *fifo_tail; /* qlock: priority-0 ops, in arrival */
    vf__op *root;      /* qlock: the heap's best op (other priorities) */
    int len;           /* qlock: lane and heap */
    uint32_t next_seq; /* qlock: FIFO tie-break (wraps: sched.c) */
    /* seq_cst: mirrors `len` for sleepers and stealers (see above). */
    atomic_int qlen;
    /* Ops queued here so far (wraps; written under qlock, read relaxed):
     * with qlen, what tells a waiter that refused what the pool held
     * whether that changed since (vf__pool_look_same). */
    atomic_uint arrivals;
    /* Relaxed: mirrors the heap's best priority (INT_MIN when empty),
     * written under qlock, for vf__worker_holds_better. */
    atomic_int heap_top;
    /* Ops placed by threads other than this worker (a pusher, another
     * pool's worker): a lock-free stack (seq_cst pushes), moved into the
     * queue, in arrival order, by whoever takes from this worker next. A
     * pusher so pays one compare-and-swap per op, not a lock round trip. */
    _Atomic(vf__op *) inbox;
    /* Ops on the inbox, where the pool counts them (count_inbox; relaxed,
     * a hint: added before the ops go on, taken off after a drain took
     * them, so it may read high for an instant, never low). A worker busy
     * in a long op takes none, and its queue's length alone said the
     * pusher was not ahead (found by a user tester checking run_at_push). */
    atomic_int inbox_len;
    /* Of them, those of a priority above 0 (the same counting; added
     * before the op is on the inbox, release): an inbox of priority-0 ops
     * holds nothing better than a priority-0 op. */
    atomic_int inbox_above0;
    vf__pool *pool;
    int index; /* unique across the engine */
    pthread_t thread;
    bool started;
    /* A device pool's worker owns a stream (NULL in CPU pools). */
    const vf__device_class *dev_cls;
    vf__stream *stream;
    /* Per-worker counters, written only by this worker (relaxed). */
    _Atomic uint64_t ran, failed, skipped;
    /* The place in push order of the op this thread runs now (the
     * innermost, where it runs ops inside one's wait; 0: none, or an op of
     * a kind without a place of its own: exec.c), written only by this
     * thread (relaxed), for the stall reports (stall_report.h): they note
     * it in `seen_place` at `seen_ms`, written by them only. */
    _Atomic uint64_t running_place, seen_place;
    _Atomic int64_t seen_ms;
    /* A spare (see vf__pool_stuck_enter): a thread of the pool beyond its
     * workers, with no queue of its own (it places and takes like a
     * thread outside the pool, and counts in the engine's counters), and
     * the next spare of its pool's list. */
    bool spare;
    vf__worker *next_spare;
    /* The tag its thread's nested waits sleep in the pool with (1 to
     * VF__ECOUNT_TAGS, in the order the pool made its threads: wait.h),
     * so the end of one wakes it and no other, up to 31 threads. */
    unsigned tag;
    /* Nested waits this worker's thread is in (vf__worker_waiting). */
    atomic_int waiting;
    /* A device pool's thread waiting inside an op looked at its queue and
     * took nothing: it refuses what is there. Set (seq_cst) before the
     * look, cleared after it took one, after an op is placed on the queue,
     * and when the wait ends (vf__pool_queued_stuck). */
    atomic_bool refusing;
} __attribute__((aligned(VF__CACHELINE)));

/* What a pool's threads run: the engine's trip of an op (exec.c), given
 * at vf__pool_init, so the pool knows queues and threads, not ops' trips. */
typedef struct vf__pool_runner {
    /* Run `op` (taken from w's pool) and finish it; returns the op the
     * same worker runs next, or NULL. */
    vf__op *(*execute)(vf__worker *w, vf__op *op);
    /* Run one op that an inline run on this thread deferred: true if one
     * ran (a worker passes NULL: it lends no count, exec.h). */
    bool (*run_deferred)(vf_engine *lender);
    /* Each thread's stack in bytes (0: the system's default): it bounds
     * how deep ops nest on the thread (base/stack.h). */
    size_t stack_size;
    /* Work bound for the pool that is held back elsewhere (bulk's open
     * batches, bulk.h): whether there is some (seq_cst: an idle thread
     * counts itself among the sleepers, then asks; the holder, on the first
     * work it holds back, counts it, then wakes a sleeper: vf__pool_nudge),
     * and its release, which an idle thread calls once work was held back
     * for VF__POOL_HELD_BACK_US with nothing queued meanwhile, so that a
     * program waiting for it by its own means never waits for ever. NULL:
     * nothing is ever held back. */
    bool (*held_back)(const vf__pool *p);
    void (*release_held_back)(vf__pool *p);
    /* Idle spinning (vf_config.idle_spin_us): how long, in ns, an idle
     * worker keeps looking for work before it sleeps (0: only the brief
     * look every idle worker takes), and only while a thread of the
     * program sleeps in one of the engine's waits (`program_asleep`) and
     * the engine's threads that are not asleep (`awake`, every pool's:
     * counted by worker_main and vf__pool_idle_wait) fit `ncpus`, the CPUs
     * the process may run on: a spinner must never take a core a thread
     * with work needs. NULL counters: no spinning. */
    uint64_t spin_ns;
    int ncpus;
    atomic_int *awake;
    atomic_int *program_asleep;
    /* Pinning (vf_config.cpu_affinity): a worker of index i starts on CPU
     * cpus[i % ncpus_pinned] alone, a spare on `spare_cpus` (the
     * process's: started by a pinned worker, it would otherwise inherit
     * that worker's CPU); NULL: not pinned. */
    const uint16_t *cpus;
    int ncpus_pinned;
    const cpu_set_t *spare_cpus;
} vf__pool_runner;

struct vf__pool {
    vf_engine *engine;
    vf__pool_runner runner;
    const char *name;
    int nworkers;
    vf__worker *workers;
    atomic_bool stop; /* seq_cst */
    /* Device pools spread their ops round-robin over the workers' queues
     * and neither hand off nor steal: a device op's function only queues
     * work, so one worker would otherwise take every op and put all the
     * work on its one stream. Set before the pool starts. */
    bool spread;
    /* Workers count the ops on their inboxes (inbox_len): the engine's
     * run_at_push reads them (exec.c). Set before the pool starts. */
    bool count_inbox;
    /* The fields above are read by every placer and written almost never;
     * the two below are written by idle workers only, each on a line of
     * its own (padding: the engine that holds pools is not cache-line
     * aligned), so a worker going idle does not evict what placers read. */
    char pad_read_[VF__CACHELINE];
    atomic_int nspinning; /* seq_cst: workers spinning for work */
    /* Long spins begun (may_spin_long; relaxed): what a test reads to see
     * the pool's choice, which a loaded machine's timing cannot show. */
    atomic_uint long_spins;
    /* Sleeps of nested waiters beside queued ops they refused with stack
     * room for them (wait.c; relaxed): what a test reads to see that a
     * waiter with none sleeps alone instead, which timing cannot show. */
    atomic_uint refused_sleeps;
    char pad_spin_[VF__CACHELINE];
    /* Ops of a priority above 0 queued in the pool, in a queue or on an
     * inbox (relaxed; counted before they go on, taken off as they come
     * out of a heap). While there are any, a worker of a pool that steals
     * takes such an op from another worker's queue before a lower one of
     * its own (rule 11: priority orders the pool's ready ops, not only
     * each worker's; found by a user tester: a priority-100 op waited
     * behind 21 priority-0 ops of one worker while another ran). On a
     * line of its own: every op's end reads it. */
    atomic_int queued_above0;
    char pad_prio_[VF__CACHELINE];
    vf__ecount sleepers; /* idle workers and nested waiters (see above) */
    char pad_sleep_[VF__CACHELINE];
    /* Spare threads (vf__pool_stuck_enter). `spare_lock` (a leaf) guards
     * the list and its growth; the counts are seq_cst. */
    pthread_mutex_t spare_lock;
    vf__worker *spares;
    atomic_int nspares; /* spares started (they stay until the pool stops) */
    /* Since when (CLOCK_MONOTONIC, ns; 0: not) every spare the pool
     * tried to start could not be (no thread: pthread_create failed, a
     * thread quota say); seq_cst. Past VF__SPARE_FAIL_MS the pool is out of
     * spares until one starts (vf__pool_stuck_for_good). */
    _Atomic uint64_t spare_failed_since;
    atomic_int nstuck;     /* threads waiting inside an op beside queued ops
                              they will not run (exec.c: vf__exec_loop_run_one) */
    unsigned threads_made; /* spare_lock (or the pool's init): for tags */
};

/* Spare threads a pool may start at most. */
#define VF__MAX_SPARES 1024

/* How long a pool's spares may fail to start before it counts as out of
 * them: a quota that frees a thread within it (threads still exiting, a
 * cgroup at its limit) costs a wait nothing (at once, a failure of 3 ms
 * gave a recursion a false VF_EDEADLK: found by the reviewer). */
#define VF__SPARE_FAIL_MS 100

/* How often a thread counted stuck outside a nested wait (a wait on another
 * engine, a destroy of one, a push at its bound: vf__pool_of_blocked_thread)
 * asks its pool again for a spare that could not start: it sleeps on
 * another engine's condition, where nothing of its own pool wakes it (one
 * refused start, a thread quota for a millisecond, left two engines waiting
 * on each other for ever: found by a user tester). */
#define VF__SPARE_RETRY_MS 10

/* Whether an op of higher priority than `priority` may be waiting for w,
 * read without w's lock: one in its heap, in its lane (0, above a
 * negative priority), or any op in its inbox (not sorted in yet; for
 * priority 0 where the pool counts its inbox, one above 0 there). A
 * child runs at its push only when none is (exec.c: rule 11). */
static inline bool vf__worker_holds_better(const vf__worker *w, int priority)
{
    if (atomic_load_explicit(&w->inbox, memory_order_acquire) != NULL &&
        !(priority == 0 && w->pool->count_inbox &&
          atomic_load_explicit(&w->inbox_above0, memory_order_relaxed) <= 0))
        return true;
    if (priority < 0)
        return atomic_load_explicit(&w->qlen, memory_order_relaxed) != 0;
    return atomic_load_explicit(&w->heap_top, memory_order_relaxed) > priority;
}

/* Make a pool of `n` workers numbered from `first_index`, whose threads
 * run what `runner` says; threads are not started yet. */
int vf__pool_init(vf__pool *p, vf_engine *e, const vf__pool_runner *runner,
                  const char *name, int n, int first_index);

/* How long an idle thread lets work be held back for its pool before it
 * has it released (vf__pool_runner.held_back). */
#define VF__POOL_HELD_BACK_US 1000

/* Wake a sleeper of the pool, unless none sleeps or a thread spins, to
 * look for work again (the first work held back for it: vf__pool_runner).
 * A load when nobody sleeps. */
void vf__pool_nudge(vf__pool *p);

/* Start the pool's threads. VF_ESYSTEM when a thread cannot start (those
 * started are stopped again). */
int vf__pool_start(vf__pool *p);

/* Stop and join the workers (their queues must be empty). Safe to repeat,
 * and on a pool that was only initialized. */
void vf__pool_stop(vf__pool *p);

/* Stop the pool (if not yet) and free its memory. Workers of other pools
 * may submit to this one: an engine stops all its pools before destroying
 * any. */
void vf__pool_destroy(vf__pool *p);

/* Place ready ops bound for the pool (from any thread), as one batch (see
 * above); `ops` is left empty. Takes a worker's queue lock at most. */
void vf__pool_submit_list(vf__pool *p, vf__readylist *ops);

/* Place one ready op on the pool (from any thread): a batch of one. */
void vf__pool_submit(vf__pool *p, vf__op *op);

/* The worker the calling thread is (of any engine); NULL otherwise. Read
 * on every run and finish: inline. */
extern _Thread_local vf__worker *vf__this_worker_;
static inline vf__worker *vf__this_worker(void)
{
    return vf__this_worker_;
}

/* Place an op ready at its push from inside a running op (its nest > 0):
 * on the calling worker's own lane, at the front, when the thread is a
 * worker of `p` and the op has priority 0 (children run before older
 * work, newest first, as Cilk's and TBB's do, and a waiter finds its own
 * children at its queue's head); elsewhere as vf__pool_submit. */
void vf__pool_submit_nested(vf__pool *p, vf__op *op);

/* Place `op` on worker `i` of the pool (its inbox), from any thread: a
 * replay's node at its home (graph.c). Idle workers may still steal it. */
void vf__pool_submit_to(vf__pool *p, int i, vf__op *op);

/* The worker the next placement from this thread outside the pool goes
 * to (round-robin; nothing moves): a pusher reads its queue to tell
 * whether it is ahead of the pool (exec.c: runs_at_top_push). */
const vf__worker *vf__pool_next_target(const vf__pool *p);

/* Take the best op from the worker's own queue, else steal one. NULL when
 * the pool has no queued op. Never blocks beyond a queue lock. */
vf__op *vf__worker_take(vf__worker *w);

/* Which queued ops a thread waiting inside an op may run above its wait
 * (exec.c says: a descendant of its op, say): fn(op, arg). */
typedef struct vf__pool_fits {
    bool (*fn)(const vf__op *op, const void *arg);
    const void *arg;
} vf__pool_fits;

/* vf__worker_take for a thread waiting inside an op: only an op that
 * fits, among the first few of its own lane (from the head) and heap, and
 * of each other worker's (the lane from the tail); in a device pool, whose
 * threads otherwise take only their own queues, of each other worker's
 * that waits too (its op runs on the waiter's stream then, which the
 * fences order as any other). NULL when none. In a device pool it says,
 * until an op is placed on its queue, that its thread refuses what is
 * there when it took nothing (vf__pool_queued_stuck). */
vf__op *vf__worker_take_above(vf__worker *w, const vf__pool_fits *fits);

/* The same for a waiter that takes nothing now (its stack is full): in a
 * device pool it refuses what is on its queue. */
void vf__worker_refuses(vf__worker *w);

/* The worker's thread enters (+1) or leaves (-1) a nested wait (wait.c).
 * While it waits it runs only ops that may run above its wait, so ops of
 * other recursions queued on it would wait for it; in a device pool the
 * other waiters take theirs from it (vf__worker_take_above). An idle
 * device thread still takes only its own queue, and a waiter nothing from
 * an idle thread's: that thread runs it, where the waiter would pile a
 * recursion on its own stack while the other thread's stayed empty. */
void vf__worker_waiting(vf__worker *w, int delta);

/* Whether any worker of the pool has ops queued (a snapshot). */
bool vf__pool_any_queued(const vf__pool *p);

/*
 * A thread of the pool (a worker or a spare) that waits inside an op goes
 * to sleep beside queued ops it will not run above its wait (exec.c), and
 * comes back. When every thread of the pool is so stuck, nobody would run
 * those ops, and the waits may need them: the pool starts a spare thread,
 * which runs the pool's queued ops as a worker does (its ops see worker
 * -1, as help_on_wait's), so the program goes on as the serial one would.
 * At most VF__MAX_SPARES per pool; they stay until the pool stops. Not in
 * device pools (`spread`). Takes spare_lock (a leaf) when it starts one.
 */
void vf__pool_stuck_enter(vf__pool *p);

/* Whether the pool owes a spare: every thread of it is stuck and the last
 * spare it tried to start could not be (no thread since). A thread
 * counted stuck then asks again (vf__pool_stuck_again) every
 * VF__SPARE_RETRY_MS; not while another thread of the pool runs, which
 * makes the try itself once it is stuck too (one refusal made every later
 * block of its workers wake every 10 ms for the pool's life: found by the
 * reviewer). */
bool vf__pool_spare_failing(vf__pool *p);

/* A thread that stays counted stuck (a waiter with no stack room for any
 * op: wait.c) looks again: the pool starts a spare if every thread is
 * stuck now, as vf__pool_stuck_enter does (one that could not be started
 * before, say). */
void vf__pool_stuck_again(vf__pool *p);

/* The CPU pool of the calling thread when it is one of the pool's threads
 * (NULL otherwise, and in device pools, which add no spare), for a block
 * that is not a nested wait of that pool's engine: a wait on another
 * engine, a wait of its own engine from inside an op of another run
 * inline there, a destroy waiting for calls in progress, a push waiting
 * for room under another engine's in-flight bound. Such a thread counts
 * stuck in its pool while it blocks (vf__pool_stuck_enter), for the ops
 * queued there may be what it waits for (found trying recursion across a
 * naive and a pooled engine as a user: the pool's only worker slept in
 * such a wait, beside the op it waited for). */
static inline vf__pool *vf__pool_of_blocked_thread(void)
{
    vf__worker *me = vf__this_worker();
    return me != NULL && !me->pool->spread ? me->pool : NULL;
}

/* For a thread of the pool so stuck: whether no other thread will run
 * what it refuses. In a device pool each thread takes only its own queue
 * (spread) and no spare is added; in another, every thread is so stuck
 * and the pool has VF__MAX_SPARES, or could not start the last it tried
 * (a recursion waited for ever when a thread quota refused its spares:
 * found by a user tester). Then a waiter runs what it refused, its stack
 * permitting, or gives up with VF_EDEADLK (wait.c: HOPELESS_LOOKS). */
bool vf__pool_stuck_for_good(vf__pool *p);

/* What a waiter saw of a pool's queues (vf__pool_look_same). */
typedef struct vf__pool_look {
    uint64_t arrivals, queued;
} vf__pool_look;

/* Look at the pool's queues, into *look: true when they hold what they
 * held at the look before, in *look (no op queued or taken since, none in
 * an inbox). A waiter that refused every op there at that look would
 * refuse them again: a descendant stays one (exec.c: loop_take), so it
 * need not take each queue's lock to find that out. Hundreds of such
 * waiters, each taking every lock at each of its looks, kept one
 * another awake in the locks' queues, never all stuck, so the pool lent
 * no spare for the ops they refused: a recursion whose levels also
 * waited on another engine sat still for tens of seconds (found by a
 * user tester). Snapshots: a change neither look saw shows at the next
 * one. Not for device pools (spread), whose waiters sleep until an op
 * comes to their inbox. */
bool vf__pool_look_same(const vf__pool *p, vf__pool_look *look);

/* The ops queued on the pool's threads, a snapshot (an inbox not sorted in
 * yet counts as one): at most what is queued. */
uint64_t vf__pool_queued(const vf__pool *p);

/* Of those, the ones no thread runs unless a waiter is forced to
 * (wait.c): all of them in a pool stuck for good; in a device pool, those
 * of threads that wait inside an op and refused what is on their queues
 * (an idle one runs them, and a waiting one may run an op placed on its
 * queue since it looked: it counted as stuck, and a wait beside it ran a
 * later op above itself, before the device thread took the op it waited
 * for; found by the second reviewer of the waits inside inline ops).
 * Errs towards fewer. */
uint64_t vf__pool_queued_stuck(vf__pool *p);

/* vf__pool_idle_wait for a thread of a device pool (spread) waiting
 * inside an op beside queued ops it will not run above its wait: it sleeps
 * until an op is placed on its own queue (its inbox: nobody else takes
 * from its queue, so only a new op may be one it runs), or `wake_pred(arg)`
 * holds, or `until` passes. */
void vf__pool_wait_inbox(vf__worker *w, bool (*wake_pred)(void *), void *arg,
                         unsigned tag, const vf__deadline *until);

/* A sleeper of the pool woken for work it will not run (a nested waiter:
 * the ops queued are not its op's) passes the wake-up on to another
 * sleeper, if any, so that work does not wait for nobody. */
void vf__pool_pass_on(vf__pool *p);
void vf__pool_stuck_leave(vf__pool *p);

/* Take a queued op of the pool from any worker (a thread that is not one of
 * its workers helping out). NULL when none is queued. */
vf__op *vf__pool_take(vf__pool *p);

/* A worker places the ops it made ready: returns the one it should run next
 * itself (or NULL), queueing the rest on its own queue. `pool_wide`: the
 * worker may take a higher op of another worker's queue instead (rule 11
 * across the pool); not inside a wait, whose loop runs only what may run
 * above it and would send such an op back with a new turn. */
vf__op *vf__worker_place(vf__worker *w, vf__readylist *mine, bool pool_wide);

/*
 * Sleep as an idle member of `p` until `wake_pred(arg)` holds or work may be
 * queued or the pool stops, or `until` passes (NULL: no deadline; spurious
 * returns are allowed: callers loop). Wakers of `wake_pred` make it true
 * with a seq_cst write and then call vf__pool_wake_all or, for a sleeper
 * with a `tag` (1 to VF__ECOUNT_TAGS; 0: none), vf__pool_wake_tag. The
 * caller holds no lock.
 */
void vf__pool_idle_wait(vf__pool *p, bool (*wake_pred)(void *), void *arg,
                        unsigned tag, const vf__deadline *until);

/* Wake every sleeper of the pool (rare paths: a nested waiter's condition
 * met for all, a stop). Call after publishing what they wait for
 * (seq_cst): it wakes nobody when nobody sleeps. */
void vf__pool_wake_all(vf__pool *p);

/* Wake the sleepers of the pool that sleep with `tag` (a nested waiter
 * whose wait ended: base/ecount.h, "Tags"), after publishing (seq_cst). */
void vf__pool_wake_tag(vf__pool *p, unsigned tag);

#endif /* VF_SCHED_H */
