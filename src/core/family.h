/*
 * family.h: where an op stands in the tree of pushes, for push order.
 *
 * The problem. Push order decides which failure comes first (failure.h).
 * An op pushed from inside a running op must come where the serial program
 * has it: there each op runs at its push, so an op's children, and theirs,
 * come before the ops its parent pushes after it. A place in push order is
 * a number taken at the push, so it cannot say that: with workers, a
 * child's children are pushed when the child runs, maybe long after its
 * parent pushed its later children. Places order the top-level ops and
 * the children of one op (one thread pushes them, in program order); the
 * tree orders the rest.
 *
 * A family is the node of a running op that pushes: its place, and its
 * parent's family (`up`, a reference). It is made at the op's first push
 * from inside it and lives as long as its run or any op pushed from it
 * (each holds a reference, vf__op.up; a child that runs alone inside its
 * push, within this run, needs none, nor does its own family while its
 * run lasts: up_borrowed), so a failure of any descendant can still name
 * its path. An op's key in push order is its path: the places
 * of its ancestors' families from the top, then its own place; two keys
 * compare in tree order (the first place that differs decides; an
 * ancestor comes before its descendants). A top-level op has no family
 * above it: its key is its place, as before.
 *
 * Depth. A family deeper than VF__FAMILY_DEPTH takes its parent's `up` as
 * its own, standing beside its parent: past that depth, ops compare by
 * their parents' places, then their own (push order in time, where the
 * tree would give the serial program's), and a chain of ops each pushing
 * the next holds at most VF__FAMILY_DEPTH families above any op, not one
 * per op.
 *
 * Waiting for children. A family also counts its op's children that have
 * not finished (`pending`: raised by each push, lowered by each finish
 * once the child released its vars), keeps the first failure among them in
 * push order (`first`), and names the waiter of vf_run_wait_children while
 * it waits (`waiter`): the finish that takes `pending` to zero fires it, as
 * a wait marker fires a var wait's (wait.c).
 *
 * Waits on an ancestor's vars. A family keeps the vars its op writes, so
 * that a wait inside a descendant on one of them is refused at once, as
 * the serial program's can never finish (the ancestor is still running
 * around it), whether or not a worker happens to run the descendant
 * after its ancestor ended.
 *
 * Deletes from inside. A delete pushed from inside an op (vf_var_destroy)
 * takes no place of its own (failure.h) and joins no family as a child,
 * for its op's wait for children must not wait for it (it waits for its
 * op, which writes the var). It holds its op's family instead (op.h:
 * vf__op.delete_from), and with the last place taken at its push that
 * is its key in tree order: an op pushed after it on the var, which the
 * serial program refuses or runs after the free, is placed behind it
 * (vf__family_after_delete, var.c: queued_before). Past VF__FAMILY_DEPTH
 * the families keep, beside their `up`, the place at that level of the
 * ancestor they stand for (`path_place`), so that the tree still tells
 * an op of a child pushed before the delete from one of a child pushed
 * after it, down to the levels the families no longer tell apart.
 *
 * Nothing of this is on the path of a top-level op: its `up` is NULL, and a
 * run makes a family only when it pushes.
 */
#ifndef VF_FAMILY_H
#define VF_FAMILY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "core/spinlock.h"

#define VF__FAMILY_DEPTH 128

/* vf__family.pending's parts (below): children not finished (2^31 op
 * blocks would fill 128 GiB), and whether a wait waits for them. */
#define VF__FAMILY_COUNT ((uint64_t)0x7fffffff)
#define VF__FAMILY_WAITING ((uint64_t)1 << 31)

typedef struct vf__op vf__op;
typedef struct vf__family vf__family;
struct vf__failure;
struct vf__waiter;
struct vf__var;

/* A var the family's op writes, as its push named it (the generation
 * tells a var deleted meanwhile from its slot's next one). */
typedef struct vf__family_var {
    const struct vf__var *var;
    uint32_t gen;
} vf__family_var;

#define VF__FAMILY_OWN_WRITES 2 /* kept in the family; more are malloc'd */

struct vf__family {
    atomic_int refs; /* acq_rel: the last unref frees (and unrefs `up`) */
    uint32_t depth;  /* 1: a top-level op's (to VF__FAMILY_DEPTH) */
    /* Its op's nesting level, 1: a top-level op's, past VF__FAMILY_DEPTH
     * too: the levels a wait's refusal counts (vf__family_writes; counted
     * along the chain, which skips levels there, it said 123 levels where
     * there were 295: found by a user tester). */
    uint32_t level;
    uint64_t place; /* the op's place in push order (a batch item's) */
    /* The place, among the children of `up`'s op, of the op's ancestor
     * there: `place` itself, but past VF__FAMILY_DEPTH, where `up` skips
     * levels, the place of the ancestor it stands for (deletes from
     * inside, above). */
    uint64_t path_place;
    uint64_t root;  /* its top-level ancestor's place */
    vf__family *up; /* its parent's family (a reference), or NULL */
    /* It holds no reference to `up` yet: its op runs alone inside its
     * push (op.h: vf__op.alone), within its parent's run, which keeps `up`
     * alive. Its run's end takes one when the family outlives it
     * (vf__family_run_over), before it lets go of its own: so a family
     * that only its run held (a recursion's, whose children all ran
     * alone too) costs no locked add or subtract on `up`. */
    bool up_borrowed;
    /* Children pushed and not finished, in the low 31 bits
     * (VF__FAMILY_COUNT: a push adds 1); the last one's lowering (release)
     * is what a waiter acquires. Bit 31 (VF__FAMILY_WAITING): `waiter`
     * waits for this count, set by the wait only while the count is not
     * zero, and cleared in the same step as the lowering to zero, whose
     * finish alone then fires it. (A finish that took the count to zero
     * and then looked at `waiter` fired the next wait's, registered in
     * between for a child pushed after the zero, before that child ran:
     * found as a wrong fib under TSan.) Above them, a count of waits that
     * gave up (VF_EDEADLK): a give-up bumps it as it drops the count to
     * zero, so a child's lowering that raced it fails its
     * compare-and-swap and looks at `waited_from` again (wait.c). */
    _Atomic uint64_t pending;
    /* Children pushed before this place were given up on by a wait that
     * could never finish (VF_EDEADLK; 0: none): the next wait waits only
     * for the children pushed since, as the header promises, so these
     * lower no count and keep no failure in `first` when they finish.
     * A child's place and this one compare as numbers: the op's children
     * are pushed by its own thread, in order (lock: with `first`). */
    _Atomic uint64_t waited_from;
    /* A child the next wait waits for was skipped by the shutdown notice
     * (its function never ran, and no failure says so): the wait says
     * VF_ESHUTDOWN (wait.c). Cleared by the wait that reports it. */
    atomic_bool notice_skipped;
    /* A child the next wait waits for was skipped for the failure of an op
     * after that child in push order (failure.h: vf__failure_after): the
     * wait says VF_ESKIPPED when it has no failure to report. Cleared as
     * `notice_skipped`. */
    atomic_bool skipped_by_later;
    /* 0, or how many levels above a child of this family an op writes a
     * var that child uses (1: its parent, this family's op; the highest
     * such level of its children): the child waits for that op's end,
     * which in the serial program encloses the wait for children, so the
     * wait can never end (wait.c refuses it at once, on every engine, but
     * for an async parent's own writes, which its completion lets go of;
     * on a pool an ancestor may have ended by then, and the answer would
     * be timing's; the parent's own writes, met in the queues, were left
     * to the wait's search for progress, which an unrelated async op in
     * flight held up, for ever on the naive engine where the waiting
     * thread was to complete it: found by a user tester). Set once the
     * child's push can no longer fail (vf__family_child_var); cleared
     * when a wait's children settle. */
    atomic_int waits_up;
    vf__spinlock lock; /* orders the writers of `first` and `waited_from` */
    /* Of the children's failures, the first in push order (a reference),
     * or NULL. seq_cst, as `run_over`: once the op's run has ended nobody
     * waits for its children, and `first` must keep nothing (a record
     * holds its family: a cycle); whichever of the run's end and a child's
     * failure comes second takes it out (vf__family_take_first). */
    _Atomic(struct vf__failure *) first;
    atomic_bool run_over;
    /* The waiter of vf_run_wait_children, or NULL (a reference): stored
     * before the wait sets VF__FAMILY_WAITING; whoever clears that bit
     * (the last child's finish, or the wait giving up) takes it out and
     * owns it (wait.c). */
    _Atomic(struct vf__waiter *) waiter;
    /* The vars its op writes (`own`, or malloc'd beyond it): a wait of a
     * descendant on one of them can never finish (vf__family_writes). */
    int nwrites;
    vf__family_var *writes;
    vf__family_var own[VF__FAMILY_OWN_WRITES];
};

/* The key's first part (failure.h: records compare by it first): the
 * place of the top-level op an op with family `up` descends from. */
static inline uint64_t vf__family_root(const vf__family *up, uint64_t place)
{
    return up != NULL ? up->root : place;
}

/* Whether the op whose family is `up` descends from the op whose family is
 * `anc` (is its child, or a child's, ...). Past VF__FAMILY_DEPTH a
 * family's `up` skips its parent (above), so there only `anc`'s children
 * match. */
static inline bool vf__family_within(const vf__family *up,
                                     const vf__family *anc)
{
    for (; up != NULL; up = up->up)
        if (up == anc)
            return true;
    return false;
}

static inline void vf__family_ref(vf__family *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

/* Drop a reference (NULL: nothing); the last one frees it and drops its
 * reference to `up`, and so on up the chain (a loop, not a recursion). */
void vf__family_unref(vf__family *f);

/* Whether the op at `a_place` under `a_up` comes before the op at
 * `b_place` under `b_up` in push order (tree order, above). */
bool vf__family_before(const vf__family *a_up, uint64_t a_place,
                       const vf__family *b_up, uint64_t b_place);

/*
 * The op running on this thread, innermost (exec.c, bulk_op.c and
 * var_api.c set it around an op's function): read by every push, so
 * inline. `family` is the run's family once it pushed (the run holds one
 * reference to it). Two words: every op's run saves and restores them.
 */
typedef struct vf__running {
    vf__op *op;
    vf__family *family;
} vf__running;

extern _Thread_local vf__running vf__running_now;

/* Enter the run of `op` on this thread (`saved` keeps the outer run, for
 * vf__running_leave). */
static inline void vf__running_enter(vf__running *saved, vf__op *op)
{
    *saved = vf__running_now;
    vf__running_now.op = op;
    vf__running_now.family = NULL;
}

/* The run of a family's op ended: its children's failures are kept no
 * more, and the run's reference goes. */
void vf__family_run_over(vf__family *f);

/* The run of `op`, whose family is `f`, ends on this thread: its children
 * still in this thread's batch are pushed first (bulk.h:
 * vf__bulk_run_over), then vf__family_run_over. */
void vf__family_run_ended(vf__op *op, vf__family *f);

/* Take the kept failure out (a reference, or NULL). */
struct vf__failure *vf__family_take_first_slow(vf__family *f);
static inline struct vf__failure *vf__family_take_first(vf__family *f)
{
    if (atomic_load(&f->first) == NULL)
        return NULL; /* as if taken before a failure that comes now */
    return vf__family_take_first_slow(f);
}

/* The run ends: drop its reference to its family; the outer run again. */
static inline void vf__running_leave(const vf__running *saved)
{
    if (VF__UNLIKELY(vf__running_now.family != NULL))
        vf__family_run_ended(vf__running_now.op, vf__running_now.family);
    vf__running_now = *saved;
}

/* The running op's family, made at its first call with the running op's
 * own `up` and `place` (a fused op's: its running item's) and the vars
 * `op` (the running op) writes; NULL out of memory. No new reference: the
 * run's keeps it until the run ends (an op pushed from it that may
 * outlive the run takes one of its own, vf__family_ref). */
vf__family *vf__running_family(const vf__op *op, vf__family *up,
                               uint64_t place);

/* How many levels above an op whose family is `up` the nearest ancestor
 * that writes `var` (at generation `gen`) stands: 1 for its parent; 0
 * when none does. In the serial program each op runs inside its
 * parent's, so a wait of a descendant on what an ancestor writes can
 * never finish (wait.c refuses it, on every engine kind). Past
 * VF__FAMILY_DEPTH the chain skips the levels between that depth and the
 * parent (above): their writes are not seen. */
int vf__family_writes(const vf__family *up, const struct vf__var *var,
                      uint32_t gen);

/* A child of family `f` (its parent's run family) uses var `var` of
 * handle generation `gen`: when its parent or an op above writes it, `f`
 * notes the level (waits_up). */
void vf__family_child_var(vf__family *f, const struct vf__var *var,
                          uint32_t gen);

/*
 * Whether the op at `place` under `up`, which goes ahead on a var behind
 * the op at `holder` (its ancestor), comes after a delete queued behind
 * that op, pushed from inside the op of family `from` when the last place
 * taken was `at` (deletes from inside, above). Not when the delete was
 * pushed outside the holder's run: it queued behind the holder as behind
 * what the program pushed meanwhile, and what the holder pushes comes
 * before it. Within it, as in the serial program: within the deleting
 * op's subtree, when the op descends from a child pushed after the
 * delete, or is one; outside that, when it comes after the deleting op in
 * tree order. Where the families no longer tell (past VF__FAMILY_DEPTH),
 * when it is pushed after the delete in time. An op not numbered yet
 * passes UINT64_MAX: it is pushed now, after the delete.
 */
bool vf__family_after_delete(const vf__family *up, uint64_t place,
                             uint64_t holder, const vf__family *from,
                             uint64_t at);

#endif /* VF_FAMILY_H */
