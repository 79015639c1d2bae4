/*
 * bulk.h: bulk execution (rule 13 of DESIGN.md, MXNet's set_bulk_size).
 *
 * A pushing thread with a bulk size n > 0 does not enqueue each sync CPU op
 * of normal property on its own: it collects consecutive ones into a batch
 * and pushes the batch as one fused op (kind vf__kind_bulk) whose var set is
 * the union of theirs in normal form (each var once, a write if any of
 * them writes it). The fused op runs their functions in push order. So n
 * ops pay one enqueue, one dispatch and one release of each var instead of
 * n of each.
 *
 * A batch is pushed (flushed) when it holds n ops; before a push from the
 * same thread that cannot join it (async, another property, device or
 * priority, nonblocking, an op of the naive engine); when the thread's bulk
 * size changes; on vf_bulk_flush; for every thread's batch of the
 * engine, on any wait (wait_var, wait_all, stop, shutdown, destroy, fork)
 * and on vf_var_destroy (a batch may name the var); and by a push of
 * another thread that names a var of the batch (below).
 *
 * Order across threads (rule 13). A batch is pushed late, but an op the
 * program pushed before another thread's push (ordered by any
 * synchronization it used) must come first on every var they share, at
 * any bulk size (MXNet leaves that to the program: a flush). So a batch
 * claims each var it takes: the var's `bulk` (var.h) names the thread's
 * state, set under the var's lock when it is NULL. A push that names a var
 * claimed by another thread's state has that state's batch pushed first,
 * if it holds the var (under the state's lock, the union tells), and
 * clears the claim; a push that joins its own batch does this before it
 * takes the var. The program's synchronization that orders A's push before
 * B's also orders A's claim before B's look at it, so B never misses it;
 * a claim is only ever set from NULL, under the var's lock, so two
 * batches never hold one var at once. Any push that may meet a claim goes
 * through bulk.c: vf__bulk_maybe holds while any thread has bulk state.
 * A thread pushing alone meets only its own claims (one load and compare
 * per var of an op); a var shared by two threads' batches moves from one
 * to the other by a flush each time (read-only sharing included).
 *
 * Failures inside a batch behave as if each op had been pushed alone: an op
 * whose function fails records its failure on the vars it writes, at once,
 * so the later ops of the batch that touch them are skipped (unless
 * no-skip) and the others run; each op's done callback gets its own status,
 * and versions are bumped per write. The fused op itself never fails.
 *
 * State. Each (thread, engine) pair with bulking on has a vf__bulk, owned
 * by the engine (freed at destroy) and found through a small thread-local
 * cache, else the thread's own table of its states (never by a walk of
 * the engine's, under its lock). A thread's exit gives its states back,
 * each batch pushed, onto the engine's spares, and the next thread to
 * bulk on that engine takes one over (its claims hold nothing then), so
 * an engine keeps as many as threads bulk at once
 * (vf__bulk_thread_exit). Its lock (sleeplock.h) orders the owner's pushes
 * against flushes from other threads (a waiter flushing every batch, a
 * push meeting a claim); it is held across a flush's enqueue, so a batch
 * taken out can never be overtaken by the next one. Lock order: the engine's
 * bulk.lock, then a vf__bulk's lock (one at a time: a push that meets another
 * thread's claim lets its own go first), then what an enqueue takes (var locks,
 * queue locks). No user code runs under either.
 *
 * Files: bulk.c keeps each thread's state and collects its pushes into its
 * batch; bulk_op.c seals a batch and pushes it as the fused op, runs it,
 * and reports its ops when it cannot be pushed or run.
 */
#ifndef VF_BULK_H
#define VF_BULK_H

#include <pthread.h>
#include <stdbool.h>

#include "base/common.h"
#include "core/op.h"

#define VF__BULK_MAX 4096 /* the largest bulk size accepted */

/* One op of a batch: what running it and reporting it needs. */
typedef struct vf__bulk_item {
    vf_sync_fn fn;
    void *arg;
    vf_done_fn done;
    const char *name;
    vf_operator *opr;    /* an operator push holds a reference; or NULL */
    vf__argcopy argcopy; /* `arg` when it is a copy the item owns (arg.h) */
    bool no_skip;
    int first, nrefs; /* its vars: refs[first .. first + nrefs) */
    /* Its place in push order, taken at its own push, as a lone op's is:
     * another thread's op pushed after it (and before the batch is) comes
     * after it in push order too, so failures compare as in the serial
     * program (failure.h); its root is the batch's. */
    uint64_t place;
} vf__bulk_item;

/* A fused op's payload (the fused op's `arg`), freed with the op. */
typedef struct vf__bulk_batch {
    int nitems, cap_items;
    vf__bulk_item *items;
    /* Per item var: index into `vars` << 1 | write. */
    uint32_t *refs;
    int nrefs, cap_refs;
    /* The union, in normal form once flushed (sorted by address). */
    vf__varref *vars;
    int nvars, cap_vars;
    int priority;
    vf__pool *pool;
    /* The family its ops were pushed from (family.h: a reference; NULL
     * at the top level), which each op takes as a lone op would; a push
     * from another run starts a new batch. While an op of it runs, the
     * ops it pushes are its children (bulk_op.c). */
    vf__family *up;
    /* With `up`, the op whose run pushed its ops (a fused op, when its
     * running item did), still running while the batch is open: that
     * run's end pushes it (vf__bulk_run_over), under the lock of its
     * thread's state, which any other thread's push of it holds. So a
     * push of it from another thread (an idle worker, a wait, a claim)
     * places its ops beside their parent as the parent's own would
     * (push.c: enqueue_child). */
    vf__op *parent;
    /* Set when it is pushed (possibly by another thread): the first op's
     * place in push order (each op has its own: items[i].place). */
    uint64_t place;
    /* The index in items[] of the op running, while one runs (run_batch
     * sets it on its thread; a descendant's push on any thread reads it:
     * vf__bulk_watch_running). After a split it stays at the first item
     * moved out, which no op descends from yet. */
    _Atomic int running;
    /* A descendant of an item may have gone ahead behind the fused op
     * (vf__bulk_watch_running): the batch then looks, before its next
     * item, whether it must let that descendant run first (run_batch). */
    atomic_bool watched;
    /* Made at the first early release (vf__bulk_release_ran,
     * vf__bulk_before_child): per var of the union, the last op of the
     * batch that uses it and the last that writes it (-1: none), and
     * whether the fused op released it already. NULL until then; one
     * block. */
    int *last_use;
    int *last_write;
    bool *released;
    int released_before; /* the ops before this index had theirs released */
    /* Its ops were each recorded by the profiler (bulk_op.c: the fused op
     * then is not). */
    bool prof_parts;
    /* Pushed from inside a running op of the engine (`up` is its
     * family): the nest its ops get (op.h). The fused op is then the op's
     * child, and never held by a stopped engine, whichever thread pushes
     * the batch (its parent may wait for it). */
    uint8_t nest;
} vf__bulk_batch;

typedef struct vf__bulk vf__bulk;

/* An engine's bulk state (the engine's `bulk`): the size threads start
 * with, and every thread's state (`lock`; `nstates` counts those a live
 * thread owns, relaxed, so waits skip the lock when nobody bulks; a
 * thread's exit gives its state back, flushed, for the next thread to
 * take over: vf__bulk_thread_exit). `serial`
 * tells this engine apart from any other made at the same address. Lock
 * order: `lock`, then a thread's lock (sleeplock.h), held across a batch's
 * push. */
typedef struct vf__bulk_engine {
    int size;
    pthread_mutex_t lock;
    vf__bulk *list;  /* lock: every state */
    vf__bulk *spare; /* lock: those given back, for the next thread */
    _Atomic int nstates;
    uint64_t serial;
    _Atomic uint64_t bulks, bulked; /* fused ops pushed, ops in them */
    /* Batches open, every thread's (seq_cst: idle workers watch them,
     * sched.h's held-back work). */
    atomic_int open;
} vf__bulk_engine;

/* Whether a push to `e` (whose default bulk size is `engine_default`)
 * may have to go through bulk.c: when this thread may join a batch, or
 * when some thread of the process has bulk state, whose open batch the
 * push may have to come after (a cheap test for the hot path: the count
 * changes when a thread first bulks on an engine, takes a state over,
 * or exits, and at destroy). Relaxed: a push that must come after an
 * exited thread's batch is ordered after that thread's exit by the
 * program (a join), which pushed the batch before the count fell. */
extern _Atomic int vf__bulk_states_alive;
static inline bool vf__bulk_maybe(int engine_default)
{
    return engine_default > 0 || atomic_load_explicit(&vf__bulk_states_alive,
                                                      memory_order_relaxed) > 0;
}

/* The calling thread exits (thread_exit.h): its state on each engine it
 * bulked on goes back, its batch pushed, for another thread to take. */
void vf__bulk_thread_exit(void);

/* The states on `e`'s list, owned or given back (tests). */
int vf__bulk_states_listed(vf_engine *e);

/* The engines the calling thread remembers a state of its own on, for its
 * exit to give back (tests). */
int vf__bulk_owned_count(void);

/* --- collecting (bulk.c) ------------------------------------------------ */

/*
 * Offer a push to the calling thread's batch: a one-shot op (`desc`) or an
 * operator push (`opr`, `priority`, with `arg` and `arg_size` as
 * vf_operator_push_arg's: the operator's own arg and 0 for a plain
 * vf_operator_push; unused for `desc`, which has its own). An argument
 * with a size is copied into the item. Returns 1 when the op joined a batch
 * (it will run or be reported), 0 when the caller must push it as usual
 * (the thread's batch, if any, was flushed first, and so was every other
 * thread's batch that holds one of its vars), or a negative VF_E* code
 * (a bad description, out of memory).
 */
int vf__bulk_push(vf_engine *e, const char *who, const vf_op *desc,
                  vf_operator *opr, int priority, void *arg, size_t arg_size);

/* A graph's launch (graph.c), which replays only where the same pushes
 * would not be batched. Whether this thread's pushes to `e` would join a
 * batch now (its size, or the engine's default for a thread without
 * state; never on the naive engine). And, for a launch that replays, what
 * vf__bulk_push does for a push that joins no batch: every other thread's
 * batch that holds one of `vars` (the launch's var set, in normal form)
 * is pushed first. */
bool vf__bulk_this_thread_bulks(vf_engine *e);
void vf__bulk_after_batches(vf_engine *e, const vf__varref *vars, int nvars);

/* Another thread's batch claims `v` (a delete of it is about to be
 * queued): push that batch if it holds `v`, and clear the claim. Holding
 * no bulk lock. */
void vf__bulk_settle_var(vf_engine *e, struct vf__var *v);

/* The run of `op` (on this thread), whose family is `f`, ends: this
 * thread's open batch of the ops it pushed, if any, is pushed now, while
 * its parent still holds its vars (the batch's `parent` is valid only
 * until then). */
void vf__bulk_run_over(vf__op *op, const struct vf__family *f);

/* Push every open batch of the engine, every thread's. */
void vf__bulk_flush_all(vf_engine *e);

/* Whether any batch of the engine holds ops (a drain loops until not). */
bool vf__bulk_any_open(vf_engine *e);

/* Engine life cycle: set up, free every vf__bulk (no batch open), and the
 * fork handlers' locking of every bulk lock. */
void vf__bulk_engine_init(vf_engine *e);
void vf__bulk_engine_destroy(vf_engine *e);
void vf__bulk_fork_lock(vf_engine *e, bool lock);

/* The runner's held-back work (sched.h: vf__pool_runner): batches are open
 * (they are bound for the CPU pool), and their release, every thread's
 * batch pushed. */
bool vf__bulk_held_back(const vf__pool *p);
void vf__bulk_release(vf__pool *p);

/* Free a batch (the fused op's payload; operator references dropped). */
void vf__bulk_batch_free(vf__bulk_batch *b);

/* The place of the op that runs as `op` on this thread, as the ops it
 * pushes see their parent's (family.h): a fused op's running item's,
 * any other op's own. */
static inline uint64_t vf__bulk_running_place(const vf__op *op)
{
    if (VF__LIKELY(op->def->kind != &vf__kind_bulk))
        return op->place;
    const vf__bulk_batch *b = op->arg;
    return b->items[atomic_load_explicit(&b->running, memory_order_relaxed)]
        .place;
}

/* A push from inside a descendant of an item of the fused op `op` (on any
 * thread) meets it holding a var of the push's: mark the batch watched,
 * then read the index of its running item (both seq_cst, as run_batch's
 * moving on and its look at the mark: either that look sees the mark, or
 * this read sees the next item, whose descendant the push is not). */
int vf__bulk_watch_running(const vf__op *op);

/* The place of item `item` of the fused op `op` when it writes v, or reads
 * it and `write` is false: its descendants go ahead behind the batch there
 * (var.c). Else 0. */
uint64_t vf__bulk_item_place_on(const vf__op *op, int item,
                                const struct vf__var *v, bool write);

/* The place of the first item of the fused op `op` that uses v (queued on
 * v, `op` stands there for that item: var.c, queued_before), or, when none
 * of the items it still holds does (a split gave them away), its own. */
uint64_t vf__bulk_first_place_on(const vf__op *op, const struct vf__var *v);

/* Does the running item of the fused op `op` write `v`? */
bool vf__bulk_running_writes(const vf__op *op, const vf__var *v);

/* Does it read `v` (and not write it)? */
bool vf__bulk_running_reads(const vf__op *op, const vf__var *v);

/* The vars of the running item of the fused op `op`: *refs (index into
 * the op's entries << 1 | write), and how many. */
int vf__bulk_running_refs(const vf__op *op, const uint32_t **refs);

/*
 * The running item of the fused op `op` (on this thread) is about to push
 * a child or to wait: the batch lets go of the vars that no op of it from
 * this one on uses (their last op has run), as those ops alone would have
 * when they finished. Otherwise a child on such a var queues behind the
 * batch, which waits for its running item, which waits for the child: a
 * VF_EDEADLK that the serial program, or the same program without
 * bulking, never meets. The ops this makes ready are counted and
 * dispatched (an inline one runs here: call it where user code may run,
 * under no lock); the released vars are not let go again at the batch's
 * end (its kind's release_vars). Out of memory, nothing is released.
 */
void vf__bulk_release_ran(vf__op *op);

/*
 * The running item of the fused op `op` (on this thread) is about to push
 * `child` (its var set staged), or, with `child` NULL, to wait for its
 * children. When the child must come before a later item of the batch
 * on a var (a wait: when any later item is left), the batch ends after
 * the running item: the later items go each alone (a fused op of one),
 * queued where they stood (bulk_op.c: split_after), as the items alone
 * would have stood behind the running one. Then the batch holds only what
 * its running item needs: the vars it does not use are let go (as
 * vf__bulk_release_ran does), and a var held to write that it only reads
 * is held to read (var.h: vf__var_downgrade), so a child reading it runs
 * beside it, as beside the item alone. Call it where user code may run,
 * under no lock (ops made ready are dispatched). Out of memory, the batch
 * keeps what it holds (the child then waits for the batch's end).
 */
void vf__bulk_before_child(vf__op *op, const vf__op *child);

/* The profile id of the recorded fused op `op`'s item at `place` (the
 * one whose run is the family at that place), as its record will have
 * it; 0 when none of its items is there. */
uint64_t vf__bulk_item_record_id(const vf__op *op, uint64_t place);

/* Whether the fused op `op` released `v` early (vf__bulk_release_ran);
 * vf__bulk_let_go: its var `x` (the profiler's note of its last op on x
 * was made then, not at the batch's end). */
bool vf__bulk_released(const vf__op *op, const vf__var *v);
bool vf__bulk_let_go(const vf__op *op, int x);

#endif /* VF_BULK_H */
