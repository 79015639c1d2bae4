/*
 * var.h: a variable's dependency queue (the state machine at the heart of the
 * engine) and the table that turns vf_var handles into var slots.
 *
 * The queue (MXNet's ThreadedVar). Each var keeps a FIFO of the ops waiting
 * for it, as a singly-linked list of their places (vf__dep, op.h: each op
 * brings its own, so queueing allocates nothing), from `head` to `tail`.
 * Running reads are not in the queue: they are counted in `nreaders`. A
 * read only queues behind a write, so the queue is either empty or starts
 * with a write, the oldest one still to finish (running or not). The rules:
 *   append read:    queue empty -> ready now (nreaders++); else queue.
 *   append write:   queue it; if it is the head and nreaders == 0, it is
 *                   ready now (nreaders = VF__WRITE_RUNNING).
 *   complete read:  nreaders--; the last reader releases the head write.
 *   complete write: (the head) leaves; it releases every read up to the next
 *                   write (nreaders = their count) or, if none is between,
 *                   the next write itself.
 * So reads pushed between two writes run after the first and before the
 * second (neither reader- nor writer-preferring), conflicting ops run in push
 * order, and reads with no write ahead of them run together. A finishing
 * write walks the reads it releases under the lock (as MXNet does): they
 * are the work it hands over, and keeping no count beside each place keeps
 * a place at 16 bytes.
 *
 * A var's fields are guarded by its spinlock, except `version` and
 * `failure` (atomics, see below) and the handle fields owned by the table.
 * A push holds the locks of all its vars at once (in address order); every
 * other path holds at most one var lock and takes no other lock under it.
 *
 * Handles. A vf_var is 64 bits: engine tag (16) | generation (24) | slot
 * index (24). Slots live in chunks that are never freed while the engine
 * lives, so a stale handle can always be looked at safely: its generation no
 * longer matches once the slot was freed (VF_ESTALE), and a handle of
 * another engine has another tag (VF_EXDEV). A slot's generations run
 * from 1 to 2^24 - 1: once its last is deleted, it retires (generation 0,
 * which no handle has, never on the free list again), so a stale handle
 * never names a new var (its generation wrapped after 16M reuses, and the
 * handle of the first was taken for the new one: found by a user tester).
 * A table has 2^24 slots: retiring takes one per 16M creates of a slot.
 * Engine tags (16 bits) do go round, after 65,535 engines: a var handle
 * kept past its engine's destroy and that many creates after may name a
 * var of a new engine (varflow.h says so at vf_var).
 */
#ifndef VF_VAR_H
#define VF_VAR_H

#include <pthread.h>
#include <stdbool.h>

#include "base/common.h"
#include "core/failure.h"
#include "core/fences.h"
#include "core/op.h"
#include "core/skip_mark.h"
#include "core/spinlock.h"

#define VF__WRITE_RUNNING (-1)

#define VF__VAR_INDEX_BITS 24
#define VF__VAR_GEN_BITS 24
#define VF__VAR_GEN_RETIRED 0u /* a slot whose generations are spent */
#define VF__VAR_CHUNK_BITS 10
#define VF__VAR_CHUNK (1u << VF__VAR_CHUNK_BITS)
#define VF__VAR_MAX_CHUNKS (1u << (VF__VAR_INDEX_BITS - VF__VAR_CHUNK_BITS))

typedef enum vf__var_state {
    VF__VAR_FREE = 0, /* slot unused */
    VF__VAR_LIVE,     /* usable */
    VF__VAR_DELETING  /* delete op pushed: refuses new ops */
} vf__var_state;

struct vf__var {
    vf__spinlock lock;
    uint8_t state; /* lock (and the table lock when freeing) */
    /* lock: a stopped engine holds its delete (lifecycle.h): a push held
     * after it is refused as one after a queued delete is (VF_ESTALE),
     * while the ops held before the delete still enqueue on it at start.
     * Cleared when the delete is queued (the state says DELETING then) or
     * vf_var_of keeps the var (var_api.h). */
    bool delete_held;
    int32_t nreaders; /* lock: running reads, or VF__WRITE_RUNNING */
    vf__dep *head;    /* lock: the oldest place queued (a write), or NULL */
    vf__dep *tail;    /* lock: the newest place queued, or NULL */
    /* The thread's bulk state (bulk.h) whose open batch may name this var:
     * a hint, set by that thread under `lock` when its batch takes the var
     * while it is NULL, cleared by whoever finds it stale (a
     * compare-and-swap). A push of another thread that meets it has that
     * batch pushed first (bulk.c). The program's own synchronization
     * orders a claim before the pushes it must precede; the claim's store
     * is a release and the other thread's load an acquire all the same,
     * for the state it names was made (calloc, its lock's init) by the
     * claiming thread, and the other one takes that lock (TSan found the
     * race, found by a second reviewer's random differential). */
    _Atomic(struct vf__bulk *) bulk;
    /* Written only by a write finishing (it holds the var exclusively);
     * read by ops that hold the var. Release/acquire so a reader sees the
     * record's contents. */
    _Atomic(vf__failure *) failure;
    /* Bumped by a finishing write (relaxed: a counter for users, ordered for
     * them by their own waits). */
    _Atomic uint64_t version;
    /* lock: `version` still counts a destroyed var's writes: vf_var_of
     * revived the slot under a new generation before the delete of the
     * generation before it ran (vf__var_revive); that delete's run, which
     * sets `version` to 0, clears it. Meanwhile the new handle's version
     * is 0 (its ops all queue after the delete). `deleted_gen`: the
     * generation of the last delete that ran (lock; none: UINT32_MAX).
     * `pending_from` (lock, while version_old): the oldest generation
     * whose delete is queued and has not run (vf__var_delete_pending). */
    bool version_old;
    /* lock: deletes vf_var_of kept the var's handle through while they
     * were held (vf__var_api_revive_held) and that have not run: `version`
     * counts the old var's writes until the last of them runs (or is
     * dropped); meanwhile the handle's version is 0 (it showed the old
     * var's, found by a user tester's soak). */
    uint32_t kept_deletes;
    uint32_t deleted_gen;
    uint32_t pending_from;
    /* Handle generation: changed under the lock when the slot is freed;
     * relaxed loads give a fast early VF_ESTALE, the authoritative check is
     * made under the lock. */
    _Atomic uint32_t gen;
    /* VF_ENGINE_INFO: someone waited on it, so its ops are logged
     * (relaxed: a debugging aid). */
    atomic_bool watched;
    /* The shutdown notice skipped an op that writes it (vf__exec_op_
     * skipped): it does not hold what the program computes, and its waits
     * say so (VF_ESHUTDOWN). Set by that op while it holds the var, read
     * by waits after the var was released; cleared when the slot is made
     * again. */
    atomic_bool notice_skipped;
    /* Its last write was skipped for the failure of an op after that write
     * in push order (skip_mark.c), or NULL: changed and read under `lock`;
     * a relaxed load tells a write with nothing to clear at once. */
    _Atomic(struct vf__skip_mark *) skip_mark;
    uint32_t index;
    struct vf__var *next_free; /* table lock */
    /* Device work in flight on this var (fences.h): the last device
     * write's fence and the fences of device reads since. Under `lock`;
     * the write fence changes only while an op holds the var exclusively. */
    vf__fence *wfence;
    vf__fence *rfences[VF__VAR_READ_FENCES];
    uint8_t nrfences;
} __attribute__((aligned(VF__VAR_ALIGN))); /* low bits free: vf__dep */

typedef struct vf__var_table {
    pthread_mutex_t lock; /* guards nslots, free list, chunk creation */
    uint16_t tag;
    uint32_t nslots;                               /* lock */
    vf__var *free_head;                            /* lock */
    _Atomic(vf__var *) chunks[VF__VAR_MAX_CHUNKS]; /* acquire/release */
} vf__var_table;

int vf__var_table_init(vf__var_table *t, uint16_t tag);

/* Free every slot's leftovers (its failure) and the chunks. The
 * engine must be idle. Returns the vars that were never deleted. */
uint64_t vf__var_table_destroy(vf__var_table *t);

/* In a forked child (one thread): every var lock free again (a thread of
 * the parent may have held one at the fork: a wait's quick look), and
 * every fence forgotten, not released (its events are the parent's; all
 * of them completed before the fork). */
void vf__var_table_after_fork(vf__var_table *t);

/* Drop every var's fences (fences.h), before the engine's streams go.
 * No op may be running. */
void vf__var_table_drop_fences(vf__var_table *t);

/* A new live var and its handle. VF_ENOMEM when out of memory or slots,
 * the detail naming `who` (the API call). */
int vf__var_create(vf__var_table *t, vf_var *out, const char *who);

/* The slot a handle names: 0, VF_EINVAL (zero or malformed), VF_EXDEV, or
 * VF_ESTALE. Lock-free; a live answer must be confirmed under the var lock
 * (vf__var_usable) by a caller about to enqueue. */
int vf__var_lookup(vf__var_table *t, vf_var h, vf__var **out);

/* The slot a handle's index names, whatever its tag and generation
 * (NULL: no such slot): vf__var_lookup's first step, and the slot of a
 * handle it refused with VF_ESTALE (another generation's now). */
vf__var *vf__var_slot(vf__var_table *t, vf_var h);

/* The handle of slot `v` at generation `gen` (for details, and for
 * vf_var_of reviving a slot, addr_vars.h). */
vf_var vf__var_handle(const vf__var_table *t, const vf__var *v, uint32_t gen);

/* Under the var lock: is the slot still the handle's live var? */
static inline bool vf__var_usable(const vf__var *v, uint32_t gen)
{
    return v->state == VF__VAR_LIVE &&
           atomic_load_explicit(&v->gen, memory_order_relaxed) == gen;
}

/* vf__var_usable, and no delete of it held by a stopped engine: from its
 * delete's push on, every call refuses the handle (VF_ESTALE). Under
 * v->lock. */
static inline bool vf__var_nameable(const vf__var *v, uint32_t gen)
{
    return vf__var_usable(v, gen) && !v->delete_held;
}

/* Whether the delete of v's generation `gen` is queued and has not run:
 * v is deleting at `gen`, or vf_var_of revived it since (vf__var_revive)
 * and that delete is still to run (generations only grow in a slot: a
 * slot at its last one retires). A child of an op pushed before the
 * delete may still go ahead of it (push.c). Under v->lock. */
static inline bool vf__var_delete_pending(const vf__var *v, uint32_t gen)
{
    uint32_t now = atomic_load_explicit(&v->gen, memory_order_relaxed);
    if (v->state == VF__VAR_DELETING && now == gen)
        return true;
    return v->version_old && gen >= v->pending_from && gen < now;
}

static inline uint32_t vf__var_handle_gen(vf_var h)
{
    return (uint32_t)(h.id >> VF__VAR_INDEX_BITS) &
           ((1u << VF__VAR_GEN_BITS) - 1);
}

/* The tag of the engine whose table made `h` (vf__var_table.tag). */
static inline uint16_t vf__var_handle_tag(vf_var h)
{
    return (uint16_t)(h.id >> (VF__VAR_INDEX_BITS + VF__VAR_GEN_BITS));
}

/* --- v's mark (skip_mark.h): its last write skipped for a later op's
 * failure (skip_mark.c). The var's next write replaces it: one that runs,
 * fails, or is skipped in push order clears it. A device write's own is
 * its fence's; the var's goes when the write lets go of it with its work
 * in flight. */

/* The write of v by the op at `place` under `up` (its key), v's holder,
 * was skipped for `f`: marked when `f` is a later op's
 * (vf__failure_after), cleared otherwise. */
void vf__var_write_skipped(vf__var *v, struct vf__failure *f,
                           struct vf__family *up, uint64_t place);

/* v's mark goes (a write ran, or a delete). */
void vf__var_unmark(vf__var *v);

/* A write of v ran, or let go of v with its work in flight: v's mark, if
 * any, goes (one relaxed load when there is none). */
static inline void vf__var_recomputed(vf__var *v)
{
    if (VF__UNLIKELY(
            atomic_load_explicit(&v->skip_mark, memory_order_relaxed) != NULL))
        vf__var_unmark(v);
}

/* A write of v ran (its holder, or the graph or batch that holds v for
 * it): its version counts it (relaxed: ordered for other threads by the
 * var's release), and v holds what the program computes. */
static inline void vf__var_wrote(vf__var *v)
{
    atomic_fetch_add_explicit(&v->version, 1, memory_order_relaxed);
    vf__var_recomputed(v);
}

/* Under v's lock: whether v's last write was skipped for a later op's
 * failure and comes before a wait at `key`; then *cause is the failure
 * it was skipped for (a new reference, or NULL when not known). */
bool vf__var_skip_before(const vf__var *v, vf__wait_key key,
                         struct vf__failure **cause);

/* A delete of generation `gen` of v ran: the var's version goes to 0,
 * and a slot revived after that generation counts its new var's writes
 * from now on (version_old). */
void vf__var_delete_ran(vf__var *v, uint32_t gen);

/* A delete the handle was kept through (kept_deletes) ran, or was dropped
 * unrun: the var's version goes to 0, its count of them down by one. */
void vf__var_kept_delete_ran(vf__var *v);

/* Return a var's slot to the table once its delete op (pushed with the
 * handle generation `gen`) has finished: true when it went back. False
 * when the slot is no longer that deleting var: vf_var_of revived it
 * (vf__var_revive) for ops pushed after the delete, or another delete of
 * it is still to finish (addr_vars.h). */
bool vf__var_free_slot(vf__var_table *t, vf__var *v, uint32_t gen);

/* vf_var_of of an address whose var `v` (handle generation `gen`) was
 * destroyed: when its delete is queued (VF__VAR_DELETING), the slot lives
 * on under a new generation, live again, and *out is its new handle (the
 * old one stays refused): ops pushed with it queue after the delete, so
 * after every op of the destroyed var. 0 then; 1 when the var is live
 * with that generation (its delete is held by a stopped engine, not yet
 * queued); VF_ESTALE when the slot is no longer that var. */
int vf__var_revive(vf__var_table *t, vf__var *v, uint32_t gen, vf_var *out);

/*
 * Queue operations. Append needs the var's lock held and the op's place
 * for this var (`d`, queued when the op has to wait; its `write` bit says
 * which it is). It returns true when the var is ready for the op at once;
 * the caller then takes one off the op's wait counter.
 */
bool vf__var_append(vf__var *v, vf__dep *d);

/* What vf__var_append would return for a read or write (`write`) now,
 * without queueing anything (lock held). */
static inline bool vf__var_free_for(const vf__var *v, bool write)
{
    return v->head == NULL && (!write || v->nreaders == 0);
}

/* Whether `holder`'s write is the one running on v (lock held). */
bool vf__var_write_held_by(const vf__var *v, const vf__op *holder);

/* The place of `holder`'s write on v, running at the head or queued
 * before any read runs, or NULL (lock held). */
vf__dep *vf__var_write_place_of(const vf__var *v, const vf__op *holder);

/* The place of the last write queued on v (at the head, running, or
 * waiting) by an op before the wait at `key` in push order (failure.h),
 * or NULL (lock held). */
vf__dep *vf__var_last_write_before(const vf__var *v, vf__wait_key key);

/* A read's place `d` right behind the write place `at` (lock held;
 * vf__var_write_place_of) and the ops queued there that went ahead of
 * their pushes (a graph node's children: graph.h): it is released with
 * that write's end. */
void vf__var_insert_behind(vf__var *v, vf__dep *d, vf__dep *at);

/* Where a child goes on a var (push.c: child_goes_ahead), `op` pushed
 * from inside `parent` (the op running on this thread; NULL: another
 * thread's, whose batch this one pushes), lock held. In the serial program
 * `op` runs inside its ancestors, so before every op pushed after them:
 *   VF__CHILD_BEHIND_ANCESTOR  the write at v's head is an ancestor's (it
 *                              runs: its descendant exists); `op` goes
 *                              right behind it and the ops of its other
 *                              descendants there that went ahead before
 *                              `op` in tree order (family.h), ahead of the
 *                              ops pushed after it, when none of those
 *                              comes before `op` in tree order;
 *   VF__CHILD_BESIDE_PARENT    `op` reads v, which `parent` reads (a
 *                              running read), with ops queued behind the
 *                              reads, none before `op` in tree order nor
 *                              gone ahead: it runs at once, beside the
 *                              parent's read;
 *   VF__CHILD_FREE             a place appended now is ready at once;
 *   VF__CHILD_BEFORE_REST      `parent` is a node of a replay that runs its
 *                              nodes one after the other, whose hold on v
 *                              waits, split, behind `parent`'s children
 *                              there only (graph.h:
 *                              vf__graph_rest_ahead): `op` goes before it,
 *                              ready at once where it reads v beside the
 *                              reads running at the head;
 *   VF__CHILD_QUEUED           any other: it would wait for queued ops. */
enum {
    VF__CHILD_QUEUED,
    VF__CHILD_FREE,
    VF__CHILD_BEHIND_ANCESTOR,
    VF__CHILD_BESIDE_PARENT,
    VF__CHILD_BEFORE_REST
};
/* A fused op (bulk.h) at a var's head stands for its running item, whose
 * descendants go ahead behind it; one push looks at that item once
 * (another thread may move the batch on meanwhile): the first fused holder
 * it meets and the item then running. Zeroed before the push's first
 * look. */
typedef struct vf__child_look {
    const vf__op *batch;
    int item;
    /* The child's parent when known (vf__var_child_place's): a replay's
     * node, whose launch op holds the var for it (graph.h). */
    const vf__op *parent;
} vf__child_look;

int vf__var_child_place(const vf__var *v, const vf__dep *d, const vf__op *op,
                        const vf__op *parent, vf__child_look *look);

/* Put the place `d` of `op` where vf__var_child_place said
 * (VF__CHILD_BEHIND_ANCESTOR, VF__CHILD_BESIDE_PARENT or
 * VF__CHILD_BEFORE_REST; lock held), with the same `look`. True when it
 * is ready at once (a read beside its parent's, or beside the reads
 * before a graph's rest op). */
bool vf__var_insert_child(vf__var *v, vf__dep *d, const vf__op *op, int where,
                          vf__child_look *look);

/* The fused op `holder` (bulk.h) ends its run early, its later items
 * made into the fused op `rest`: `d`, rest's place on v, goes where those
 * items stood, right behind holder's running write and the ops its
 * descendants queued ahead there (they come before the items in the
 * serial program), or, on a var holder reads, beside its read (lock
 * held). True when it is ready at once. */
bool vf__var_insert_rest(vf__var *v, vf__dep *d, const vf__op *holder);

/* The fused op whose place `d` holds v's running write reads v from now
 * on (bulk_op.c: narrow): its place leaves the queue, a running read now,
 * and the reads queued right behind it run beside it (collected in
 * `ready`); the next write waits for them all. Takes the lock. */
void vf__var_downgrade(vf__var *v, vf__dep *d, vf__readylist *ready);

/* For a graph's node that reads v, which the graph holds to write, and
 * lets a child read v beside it (graph_child.c), lock held, v's running
 * write at its head (the graph's hold). vf__var_hold_to_read_locked: that
 * write's place leaves the queue, a running read now (v->nreaders 1), and
 * the write place `rest` heads the queue, ahead of everything that waited
 * behind it. vf__var_downgrade_locked: the write at the head becomes a
 * running read, and the reads right behind it run beside it: their count,
 * from *first_read, for vf__var_release_reads once the lock is let go
 * (`from`: the op they waited for, for the profiler's edges). */
void vf__var_hold_to_read_locked(vf__var *v, vf__dep *rest);
int vf__var_downgrade_locked(vf__var *v, vf__dep **first_read);
void vf__var_release_reads(const vf__var *v, vf__dep *first_read, int n,
                           const vf__op *from, vf__readylist *ready);

/* Whether an op queued right behind `holder`'s running write on v went
 * ahead there and comes before the op at `place` under `up` in tree order
 * (a batch's next item: bulk_op.c, must_split; takes the lock). */
bool vf__var_ahead_behind(vf__var *v, const vf__op *holder,
                          const struct vf__family *up, uint64_t place);

/* Make `f` (a reference the caller gives; NULL: none) v's failure, and let
 * go of the one it replaces. Under v's lock, which a wait that reads v's
 * failure holds until it has its own reference (wait.c: wait_settled): a
 * nested wait may read it while a later write of v finishes, and the
 * replaced record, freed between the two, was used after its free (found
 * by a reviewer). Call it without v's lock; only where v is written (its
 * writer, its delete, its fences). */
void vf__var_set_failure(vf__var *v, vf__failure *f);

/* The same for a caller that holds v's lock, changing v's fences with it
 * in one step (fences.c: a wait that settles reads both under the lock,
 * and between two steps saw the fence gone and the older failure, so it
 * reported nothing: found by a reviewer). Returns the record replaced, for
 * the caller to let go of once it unlocked (its free takes the log's
 * reserve lock). */
static inline vf__failure *vf__var_swap_failure_locked(vf__var *v,
                                                       vf__failure *f)
{
    return atomic_exchange_explicit(&v->failure, f, memory_order_acq_rel);
}

/* Release a read / the head write held by the finishing op `from` (take the
 * lock themselves). Ops this makes ready are added to `ready`. A write passes
 * on `failure` (may be NULL) to the var and, when `ran`, bumps its version. */
void vf__var_complete_read(vf__var *v, const vf__op *from,
                           vf__readylist *ready);
void vf__var_complete_write(vf__var *v, const vf__op *from,
                            vf__failure *failure, bool ran,
                            vf__readylist *ready);

#endif /* VF_VAR_H */
