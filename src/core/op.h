/*
 * op.h: ops (one pushed run of a function) and operators (a function with
 * its variable set, made once and pushed many times).
 *
 * An op's definition (vf__opdef) is what a push needs to know: the function
 * and the routing. Its variable set is in normal form: each var once, as a
 * write if any use of it writes (a var both read and written would otherwise
 * wait on itself; one only read twice stays a read, so x*x neither
 * serializes with other readers nor bumps x's version), sorted by address
 * so a push can lock all of them in one global order (two pushers can never
 * hold each other's locks); the op block holds it as its entries (vf__dep).
 * Ops share their definitions: a one-shot vf_engine_push the engine's for
 * its kind, route and flags (defs.h), a run of a vf_operator the
 * operator's; each push copies what differs from push to push (function,
 * argument, done, name) into its block, and its var set into its entries.
 *
 * Life cycle of an op block (vf__op):
 *   push:      wait = nvars + 1, appended to every var's queue as one atomic
 *              step (all var locks held); each var that is ready for it at
 *              once takes one off; the push itself takes the last one off.
 *              Its place in each var's queue is its entry for that var
 *              (vf__dep, in the block), so a push allocates nothing per
 *              var.
 *   ready:     the thread that takes `wait` to zero dispatches it (to a
 *              worker queue, or inline for async, wait and naive-engine ops).
 *   run:       the function runs, or is skipped when an input has failed.
 *   finish:    `done` callback, then every var is released (which may make
 *              other ops ready), then the block returns to the free list.
 * A block is the header (vf__op) and 16 bytes per var (vf__op_block_size).
 * Blocks for up to VF__OP_LISTED_VARS vars come from the per-thread free
 * lists (freelist.h), one list per var count; a larger one is the one
 * case that mallocs. An argument copied at push (arg.h) lies in the block
 * itself, after the entries, when it fits a listed block (an op with n
 * vars and an argument of up to 16 k bytes takes the block for n + k,
 * n + k <= VF__OP_LISTED_VARS: no second block to take and give back);
 * otherwise it is a side block of its own. `arg` names it either way. An
 * operator run with an argument of its own (vf_operator_push_arg) takes
 * that in place of the operator's.
 */
#ifndef VF_OP_H
#define VF_OP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/common.h"
#include "core/arg.h"
#include "core/failure.h"
#include "profile/hooks.h"

/* Op blocks for up to this many vars come from the free lists, one list
 * per var count (freelist.h); larger ones are malloc'd. */
#define VF__OP_LISTED_VARS 8

#define VF__HOOK_PROF 1u /* recorded by the profiler */
#define VF__HOOK_INFO 2u /* VF_ENGINE_INFO is on */
/* In a child forked from inside it: its run goes on in the parent only,
 * and its thread here must not finish it (exec.h: vf__exec_call_fn). */
#define VF__HOOK_FORK_DEAD 4u

typedef struct vf__var vf__var;
typedef struct vf__pool vf__pool;
typedef struct vf__op vf__op;
typedef struct vf__devrun vf__devrun;
typedef struct vf__waiter vf__waiter; /* wait.h */

/* A var of an op's var set as a push names it: resolved, with the
 * handle's generation (confirmed under the var lock when the op is
 * queued), in normal form (vf__varset_build). */
typedef struct vf__varref {
    vf__var *var;
    uint32_t gen;
    bool write;
} vf__varref;

/*
 * An op's dependency: one 16-byte entry per var of its set, which is both
 * the op's reference to the var and its place in the var's queue (var.h),
 * so a push allocates nothing per var and the op block grows by 16 bytes
 * per var, no more.
 *
 * `var_w` packs the var (vars are 128-byte aligned: var.h), whether the op
 * writes it, and what a var needs to find the op from its place: the
 * entry's index in its run and whether the run is the first. The first
 * VF__DEP_RUN entries follow the op's header (vf__op.deps), so the op is
 * `index` entries back and then one header back; an op with more vars
 * has its later entries in runs of VF__DEP_RUN - 1, each after a slot that
 * names the op (a back slot), so the op is `index` entries back (the index
 * counts from the slot). Larger sets cost 16 bytes per 31 vars more.
 *
 * `next` is the next place in the var's queue while the op is queued
 * there. Before that, from the var set's staging to its queueing
 * (vf__op_stage_vars, vf__push_enqueue), the same word keeps the
 * handle's generation instead: a held op (lifecycle.h) is queued long
 * after its push checked the handles.
 */
typedef struct vf__dep {
    uintptr_t var_w; /* var | index << 2 | VF__DEP_FAR | VF__DEP_WRITE */
    union {
        struct vf__dep *next; /* queued: the next place, or NULL */
        uintptr_t gen;        /* staged: the handle's generation */
    };
} vf__dep;

#define VF__DEP_WRITE 1u
#define VF__DEP_FAR 2u    /* in a later run: the op is in its back slot */
#define VF__DEP_RUN 32    /* the index has 5 bits */
#define VF__VAR_ALIGN 128 /* 7 low bits of a var's address are free */

static inline vf__var *vf__dep_var(const vf__dep *d)
{
    return (vf__var *)(d->var_w & ~(uintptr_t)(VF__VAR_ALIGN - 1));
}

static inline bool vf__dep_write(const vf__dep *d)
{
    return d->var_w & VF__DEP_WRITE;
}

typedef struct vf__opdef vf__opdef;
struct vf__readylist; /* below */

/*
 * An op kind: what an op's trip needs to know of its kind, in a table
 * beside the code that knows the kind, so the trip names no kind. A user
 * op (vf_engine_push, an operator push; exec.c) is the hot path: its body runs
 * without an indirect call. The others: a device op (device_ops.c), a
 * wait marker (wait.c), a var delete (var_api.c) and a fused batch of user
 * ops (bulk_op.c).
 */
typedef struct vf__op_kind {
    const char *name;
    /* The body of a ready op, which holds its vars (exec.c): true when it
     * is done now. NULL: a user op's (exec.c). `shutdown`: the shutdown
     * notice is on (lifecycle.h). */
    bool (*run)(vf__op *op, int worker, bool shutdown);
    /* `run` returned false on a worker: the op's work is in flight, and
     * the worker lets go of its vars now (ops they make ready go to
     * `ready`, counted active). NULL: the kind's ops never leave work in
     * flight on a worker (an async op runs inline). */
    void (*released_in_flight)(vf__op *op, struct vf__readylist *ready);
    /* With VF__KIND_OWN_RELEASE: the finishing op lets go of its vars
     * (ops they make ready go to `ready`), in the stead of finish's loop
     * over its entries. */
    void (*release_vars)(vf__op *op, struct vf__readylist *ready);
    /* After the finishing op released its vars (NULL: nothing). */
    void (*finished)(vf__op *op);
    /* The op was held while the engine was stopped and cannot be pushed
     * (lifecycle.c): report it failed with `rc`, run what must run, free
     * it. NULL: as a user op. */
    void (*dropped)(vf_engine *e, vf__op *op, int rc);
    /* Free the op's side block (vf__op: `side`) when it has one. NULL:
     * the kind makes none, or its owner frees it (a wait's waiter). */
    void (*free_side)(vf__op *op);
    /* Free the op's argument when the op owns it as its kind's
     * (argcopy VF__ARG_KIND, op.c): a batch. NULL: never. */
    void (*free_arg)(void *arg);
    /* The profile records the op stands for (profile/hooks.h: each gets
     * an id at its push, the op's the last). NULL: one. */
    uint32_t (*records)(const vf__op *op);
    uint16_t flags; /* VF__KIND_*: one load where the trip asks several */
} vf__op_kind;

#define VF__KIND_OBSERVED 1u /* profiled and logged (VF__HOOK_*) */
#define VF__KIND_COUNTED 2u  /* counted in vf_stats at finish (a user op) */
#define VF__KIND_NUMBERED 4u /* takes its place in push order at enqueue */
#define VF__KIND_HELD 8u     /* a push while stopped is held (lifecycle.h) */
#define VF__KIND_BUMPS 16u   /* finish bumps the versions it wrote, if run */
#define VF__KIND_DELETES 32u /* its var is gone once pushed */
/* Its body meets the device work its vars wait for itself (a device op);
 * run_body has any other op meet it on the host first (fences.h). */
#define VF__KIND_OWN_FENCES 64u
/* A node of a graph's replay (graph.h): never queued on its vars; its
 * finish hands its vars on from the graph's plan, and its block is the
 * graph's (exec.c: finish). */
#define VF__KIND_GRAPH 128u
/* A graph's launch op (graph.h): it takes one place in push order per op
 * of its graph. */
#define VF__KIND_LAUNCH 256u
/* Its finish lets go of its vars through its kind's release_vars (a fused
 * batch, which may have released some early: bulk.h). */
#define VF__KIND_OWN_RELEASE 512u
/* Its run calls none of the program's code, so waits for nothing: it may
 * run above any op, later ones included (exec.h: a hold). */
#define VF__KIND_NO_CODE 1024u

extern const vf__op_kind vf__kind_user, vf__kind_device, vf__kind_wait,
    vf__kind_delete, vf__kind_bulk;

/*
 * A definition: what ops of one kind, route and flags share, by
 * reference: the engine keeps one per combination in use (defs.h), an
 * operator its own. An operator's also holds the function, argument,
 * `done` and name that each of its runs copies into its op block; the
 * engine's leave them unset (each push brings its own).
 */
struct vf__opdef {
    vf_engine *engine;
    vf_operator *opr; /* the operator it is part of, or NULL (defs.h) */
    const vf__op_kind *kind;
    vf__pool *pool;            /* where it runs when not inline */
    struct vf__devctx *devctx; /* a device op's device; NULL: the CPU */
    vf_device device;
    vf_property property;
    bool no_skip;
    bool nonblocking; /* at the in-flight bound: VF_EAGAIN */
    bool inline_run;  /* runs on the dispatching thread (async, wait, naive) */
    bool async;       /* its function is an async_fn */
    /* An operator's run: its function (fn or async_fn), argument, done
     * and name (never NULL). */
    vf_sync_fn fn;
    vf_async_fn async_fn;
    void *arg;
    vf_done_fn done;
    const char *name;
    struct vf__opdef *next_shared; /* the engine's list (defs.h) */
};

/*
 * An op block: a 128-byte header and its var entries. What differs from
 * one push to the next is in the header (function, argument, done, name);
 * what ops share is behind `def`. The rare fields are pointers to side
 * blocks made only when used: `side` (a waiter, a device op's run or an
 * async op's message: one per kind) and `prof`.
 */
struct vf__op {
    vf__op *next;  /* ready lists, queue siblings; first word (free lists) */
    vf__op *child; /* ready queue (pairing heap) first child */
    /* acq_rel: the decrement to zero must see every var's release. */
    atomic_int wait;
    int priority;
    int status; /* 0, the op's error code, or VF_ESKIPPED (for `done`) */
    int nvars;  /* its var set's size: fixed when the block is made */
    /* Its place in push order (failure.h): set by the push; a fused op's
     * items have their own (bulk.h). */
    uint64_t place;
    const vf__opdef *def; /* shared: the engine's or its operator's */
    vf__failure *failure; /* own or inherited failure (a reference) */
    union {               /* its function: def->async says which */
        vf_sync_fn fn;
        vf_async_fn async_fn;
        void (*free_fn)(void *); /* a delete: the var's free callback */
    };
    void *arg; /* its argument: the push's, or its copy (argcopy) */
    vf_done_fn done;
    const char *name;       /* never NULL */
    union {                 /* a side block of its kind's, or NULL */
        vf__waiter *waiter; /* a wait marker (wait.h) */
        vf__devrun *dev;    /* a device op, from its start */
        /* async: vf_run_set_error before vf_completion_finish; swapped
         * whole by either thread, acq_rel (async.h) */
        _Atomic(char *) pending_message;
        struct vf__graph_inst *graph; /* a replay's node or launch op
                                         (graph.h): its instance */
        uintptr_t delete_gen;         /* a delete (var_api.c): its var's
                                         handle generation (its entry's
                                         `gen` is the queue's link once
                                         queued) */
    };
    vf__op_prof *prof; /* the profiler's record, when hooks & VF__HOOK_PROF */
    /* The family of the op it was pushed from inside (a reference), or
     * NULL at the top level: where it stands in push order (family.h). */
    vf__family *up;
    union {
        /* The run handle its function was given while it runs (NULL:
         * none, or a free callback's), so a call given a handle checks it
         * before reading it: a handle kept past its op's end points at a
         * dead frame (found trying stale handles as a user:
         * vf_run_wait_children crashed). */
        const vf_run *run;
        /* A delete (var_api.c), from its push until it runs: the family
         * of the op it was pushed from inside (a reference), or NULL; with
         * `place`, where it stands in tree order (family.h: deletes from
         * inside). */
        vf__family *delete_from;
    };
    /* FIFO order among equal priorities (set by the heap); an async op in
     * flight, never queued again, keeps its start there instead (async.h). */
    uint32_t seq;
    /* Observers of this op (VF__HOOK_*), fixed at push: the one byte the
     * hot path tests, so an engine with nothing observing pays one test per
     * hook site. */
    uint8_t hooks;
    /* The engine skipped it (status VF_ESKIPPED): its function never ran.
     * An op whose function returned VF_ESKIPPED itself failed. */
    bool skipped : 1;
    /* It runs alone inside its push (vf__op_on_stack), within its
     * parent's run, which keeps `up` alive: it holds no reference to
     * `up`, and neither does its own family while its run lasts
     * (family.h: up_borrowed). */
    bool alone : 1;
    /* Pushed from inside a running op, it went ahead of ops pushed before
     * it, to its serial place (push.c: child_goes_ahead): it waits for
     * nothing but its ancestors' running writes and the ops that went
     * ahead before it. Set at its push, under its vars' locks; read under
     * a var's lock by a later child's push while it is queued there, not
     * running (so never beside a write of `skipped`, which its run makes). */
    bool ahead : 1;
    /* A replay's node whose children split the graph's hold on a var
     * (graph.h): its finish makes the splits. Set and cleared by the
     * node's own thread, while it runs and at its finish. */
    bool splits : 1;
    /* VF__ARG_*: whether `arg` is a copy it owns (arg.h), or
     * VF__ARG_KIND: its kind's to free (free_arg); or k * VF__ARG_ROOM:
     * room for a copy in the block, k entries' worth (vf__op_alloc_arg). */
    uint8_t argcopy;
    /* How deep its push nests: 0 for an op pushed outside the engine's
     * ops, its parent's + 1 (at most VF__NEST_MAX) for one pushed from
     * inside a running op of the engine (engine.h); such an op goes to
     * the front of its worker's lane (sched.h). */
    uint8_t nest;
    /* Its var set in normal form (sorted by var address, each var once),
     * as entries that are also its places in the vars' queues: see
     * vf__dep; vf__op_dep finds entry i. */
    vf__dep deps[];
};

_Static_assert(sizeof(struct vf__op) == 128,
               "an op header is 128 bytes (a copied argument after its "
               "entries is 16-byte aligned)");

#define VF__NEST_MAX 255 /* vf__op.nest saturates here */

#define VF__ARG_KIND 3 /* beside arg.h's VF__ARG_*: the kind frees `arg` */
#define VF__ARG_ROOM 4 /* argcopy's unit for room in the block (above) */

/* The engine an op belongs to (its definition's). */
static inline vf_engine *vf__op_engine(const vf__op *op)
{
    return op->def->engine;
}

/* Operators: a definition plus a reference count (one for the handle, one
 * per pushed run not finished yet). Each is on its engine's list until it
 * is freed, so that destroy frees those the program forgot. */
struct vf_operator {
    /* Relaxed: a push racing the destroy reads it while the last run's
     * end marks the block spent (op.c). */
    _Atomic uint32_t magic;
    vf_engine *engine;
    vf_operator *prev_live, *next_live; /* engine's operators.lock */
    atomic_int refs;                    /* acq_rel: the last unref frees */
    atomic_bool deleted; /* relaxed: only guards a second delete */
    vf__opdef def;
    int nvars;
    vf__varref *vars;    /* its var set in normal form, or NULL */
    vf__argcopy argcopy; /* the definition's copied argument (arg.h) */
    char name[64];
};

/* An engine's operators not freed yet (a leaf lock). */
typedef struct vf__operators {
    pthread_mutex_t lock;
    vf_operator *head; /* lock */
} vf__operators;

/* A zeroed block for a new operator (op.c: one a freed operator left, or
 * a new one), or NULL without memory. */
vf_operator *vf__operator_block(void);
/* Give back a block whose operator was never made (its create failed). */
void vf__operator_block_spend(vf_operator *opr);

/* List a new operator on its engine (opr->engine set). */
void vf__operator_list(vf_operator *opr);

/* Retire every operator still listed (destroy, no op left; op.c:
 * operator_retire): how many. */
uint64_t vf__operators_retire_all(vf__operators *ops);

/* Ops made ready by one step, in the order they became ready. */
typedef struct vf__readylist {
    vf__op *head, *tail;
    int count;
} vf__readylist;

static inline void vf__readylist_init(vf__readylist *rl)
{
    rl->head = rl->tail = NULL;
    rl->count = 0;
}

static inline void vf__readylist_add(vf__readylist *rl, vf__op *op)
{
    op->next = NULL;
    if (rl->tail)
        rl->tail->next = op;
    else
        rl->head = op;
    rl->tail = op;
    rl->count++;
}

static inline void vf__readylist_push_front(vf__readylist *rl, vf__op *op)
{
    op->next = rl->head;
    rl->head = op;
    if (rl->tail == NULL)
        rl->tail = op;
    rl->count++;
}

static inline vf__op *vf__readylist_pop(vf__readylist *rl)
{
    vf__op *op = rl->head;
    if (op) {
        rl->head = op->next;
        if (rl->head == NULL)
            rl->tail = NULL;
        rl->count--;
    }
    return op;
}

/* Move every op of `from` to the end of `to`, in order. */
static inline void vf__readylist_append(vf__readylist *to, vf__readylist *from)
{
    if (from->head == NULL)
        return;
    if (to->tail != NULL)
        to->tail->next = from->head;
    else
        to->head = from->head;
    to->tail = from->tail;
    to->count += from->count;
    vf__readylist_init(from);
}

/* Take `op` out of the list, where it follows `prev` (NULL: it is the
 * head). */
static inline void vf__readylist_unlink(vf__readylist *rl, vf__op *prev,
                                        vf__op *op)
{
    if (prev != NULL)
        prev->next = op->next;
    else
        rl->head = op->next;
    if (rl->tail == op)
        rl->tail = prev;
    rl->count--;
}

/* Take `n` off the op's wait counter; true when that made it ready (the
 * caller then owns dispatching it). */
static inline bool vf__op_release(vf__op *op, int n)
{
    return atomic_fetch_sub_explicit(&op->wait, n, memory_order_acq_rel) == n;
}

/* The op running on this thread (innermost), or NULL (family.h). */
static inline vf__op *vf__current_op(void)
{
    return vf__running_now.op;
}

/* Entry i of the op's var set (vf__dep). Takes a const op, as strchr
 * does, for readers that only look at the entry. */
vf__dep *vf__op_dep_far(const vf__op *op, int i);
static inline vf__dep *vf__op_dep(const vf__op *op, int i)
{
    return VF__LIKELY(i < VF__DEP_RUN) ? (vf__dep *)&op->deps[i]
                                       : vf__op_dep_far(op, i);
}

/* The index of v in a var set of n in normal form (sorted by address),
 * whose i-th var is var_at(set, i), or -1: a binary search down to a few,
 * then a look at each (a parent of thousands of vars may push a child per
 * var). Inlined, var_at is a direct call. */
#define VF__FIND_LINEAR 8
static inline int
vf__varset_find(const void *set, int n, const struct vf__var *v,
                const struct vf__var *(*var_at)(const void *, int))
{
    int lo = 0, hi = n; /* v, if there, is in [lo, hi) */
    while (hi - lo > VF__FIND_LINEAR) {
        int mid = lo + (hi - lo) / 2;
        if ((uintptr_t)var_at(set, mid) < (uintptr_t)v)
            lo = mid + 1;
        else
            hi = mid + 1;
    }
    for (int i = lo; i < hi; i++)
        if (var_at(set, i) == v)
            return i;
    return -1;
}

static inline const struct vf__var *vf__op_var_at(const void *op, int i)
{
    return vf__dep_var(vf__op_dep(op, i));
}

/* The index of v's entry in `op`, or -1. */
static inline int vf__op_find(const vf__op *op, const struct vf__var *v)
{
    return vf__varset_find(op, op->nvars, v, vf__op_var_at);
}

/* How `op` uses v, by its entries (an op names each var once). */
enum { VF__USES_NOT, VF__USES_TO_READ, VF__USES_TO_WRITE };
static inline int vf__op_uses(const vf__op *op, const struct vf__var *v)
{
    int i = vf__op_find(op, v);
    if (i < 0)
        return VF__USES_NOT;
    return vf__dep_write(vf__op_dep(op, i)) ? VF__USES_TO_WRITE
                                            : VF__USES_TO_READ;
}

/* The op whose entry `d` is (under the lock of d's var, or once d left
 * its queue). */
vf__op *vf__dep_op_far(const vf__dep *d);
static inline vf__op *vf__dep_op(const vf__dep *d)
{
    if (VF__LIKELY(!(d->var_w & VF__DEP_FAR))) {
        const vf__dep *first = d - ((d->var_w >> 2) & (VF__DEP_RUN - 1));
        return (vf__op *)((char *)first - offsetof(vf__op, deps));
    }
    return vf__dep_op_far(d);
}

/* The bytes of an op block with `nvars` var entries. */
size_t vf__op_block_size(int nvars);

/* A fresh op block with room for `nvars` var entries (engine, def and
 * counters unset), or NULL (no memory). */
vf__op *vf__op_alloc(int nvars);

/* vf__op_alloc, with room in the block for an argument of `arg_size`
 * bytes to be copied (vf__op_copy_arg) when it fits a listed block. */
vf__op *vf__op_alloc_arg(int nvars, size_t arg_size);

/* An op block on its caller's stack, for an op with no vars whose whole
 * life lies within the caller's frame (push.c: a child that runs alone,
 * inside its push), with room for an argument copy of up to
 * VF__OP_STACK_ARG bytes. Never freed: the caller lets go of what the op
 * holds (its failure) itself. */
#define VF__OP_STACK_ARG (VF__OP_LISTED_VARS * sizeof(vf__dep))
typedef union vf__op_stack_block {
    vf__op op;
    char bytes[sizeof(vf__op) + VF__OP_STACK_ARG];
    /* The copy at deps[0] is aligned as a heap block's is (arg.h): the
     * op alone asks for 8 bytes, and a compiler may place the block so
     * (clang did: an aligned load of a child's copied __m128 crashed;
     * found by an auditor). */
    max_align_t align;
} vf__op_stack_block;
_Static_assert(offsetof(vf__op, deps) % _Alignof(max_align_t) == 0,
               "a copied argument at deps[0] is aligned to max_align_t");

/* How many var entries' room an argument of `size` bytes takes at the
 * end of a listed block for `nvars`, or 0 when it does not fit. */
static inline int vf__op_arg_room(int nvars, size_t size)
{
    size_t slots = (size + sizeof(vf__dep) - 1) / sizeof(vf__dep);
    return size != 0 && slots <= (size_t)(VF__OP_LISTED_VARS - nvars)
               ? (int)slots
               : 0;
}

/* Set a block's header for `nvars` entries and `room` more for an
 * argument. */
static inline __attribute__((always_inline)) void
vf__op_init_header(vf__op *op, int nvars, int room)
{
    op->nvars = nvars;
    op->next = NULL;
    op->priority = 0;
    op->seq = 0;
    op->def = NULL;
    op->failure = NULL;
    op->waiter = NULL; /* the side block's pointer: none */
    op->argcopy = (uint8_t)(room * VF__ARG_ROOM); /* none, or room */
    op->hooks = 0;
    op->skipped = false;
    op->alone = false;
    op->nest = 0;
    op->ahead = false;
    op->splits = false;
    op->place = 0; /* none yet: the push gives it (push.c) */
    op->prof = NULL;
    op->up = NULL;
}

/* The op of block `b`, as vf__op_alloc_arg(0, arg_size) makes one
 * (arg_size <= VF__OP_STACK_ARG), marked `alone`. */
static inline vf__op *vf__op_on_stack(vf__op_stack_block *b, size_t arg_size)
{
    vf__op *op = &b->op;
    vf__op_init_header(op, 0, vf__op_arg_room(0, arg_size));
    op->alone = true;
    return op;
}

/* Stage the op's var set (op->nvars refs in normal form) in its entries,
 * for vf__push_enqueue: all of it, or entry i. */
void vf__op_stage_var_far(vf__op *op, int i, const vf__varref *ref);
static inline void vf__op_stage_var(vf__op *op, int i, const vf__varref *ref)
{
    if (VF__UNLIKELY(i >= VF__DEP_RUN)) {
        vf__op_stage_var_far(op, i, ref);
        return;
    }
    op->deps[i].var_w = (uintptr_t)ref->var | (uintptr_t)i << 2 |
                        (ref->write ? VF__DEP_WRITE : 0);
    op->deps[i].gen = ref->gen;
}

static inline void vf__op_stage_vars(vf__op *op, const vf__varref *vars)
{
    for (int i = 0; i < op->nvars; i++)
        vf__op_stage_var(op, i, &vars[i]);
}

/* vf__op_copy_arg's side block (its room in the block is none). */
int vf__op_copy_arg_apart(vf__op *op, const char *who, const void *arg,
                          size_t size);

/* Give the op a copy of `size` > 0 bytes of `arg` as its argument
 * (checked: vf__arg_check): in the room its block has for it
 * (vf__op_alloc_arg with this size: then the size is in bounds), or a
 * side block. 0, VF_EINVAL or VF_ENOMEM with a detail naming `who`. */
static inline int vf__op_copy_arg(vf__op *op, const char *who, const void *arg,
                                  size_t size)
{
    if (VF__LIKELY(op->argcopy != VF__ARG_NONE) && arg != NULL) {
        op->arg = memcpy(&op->deps[op->nvars], arg, size);
        return 0;
    }
    return vf__op_copy_arg_apart(op, who, arg, size);
}

/* Drop the op's references (failure, operator, copied argument) and free
 * it. */
void vf__op_free(vf__op *op);

/*
 * Put reads + writes into normal form in `out` (capacity `cap`; when more
 * are needed a new array is malloc'd and returned through *heap, which the
 * caller frees). Resolves handles against the engine (VF_EINVAL, VF_EXDEV,
 * VF_ESTALE with a detail naming `who` and the list position). Returns the
 * var count (>= 0) or a negative code.
 */
int vf__varset_build(vf_engine *e, const char *who, vf_var_list reads,
                     vf_var_list writes, vf__varref *out, int cap,
                     vf__varref **heap);

/* What the var handle `h`, which vf__var_lookup refused with `rc`, is,
 * for a detail: "belongs to another engine" (when a live engine holds its
 * tag; else it is no live engine's), "was deleted" or "is not a variable
 * handle". */
const char *vf__bad_handle_words(int rc, vf_var h);

/* How a detail names an op that was pushed: op "name", or, unnamed,
 * op #<place> as its failure's op_name does (failure.c); "an unnamed op"
 * while it has no place. Written into `buf`, which it returns. */
#define VF__OP_LABEL_MAX 96
const char *vf__op_label(const char *name, uint64_t place,
                         char buf[VF__OP_LABEL_MAX]);

/*
 * A push refused because a var of its op was deleted after its handle
 * resolved (its delete was pushed, not yet run): VF_ESTALE with a detail
 * that names the var as a bad handle's does and the op by its name ("an
 * unnamed op" without one). vf__fail_deleted knows the var only (`v` with
 * the handle's `gen`), so it gives its id; vf__varset_deleted finds it in
 * the caller's lists again and gives its place there too (`v`, `gen`:
 * what to say if none is deleted any more, which a delete never undoes).
 * Cold paths; they take one var lock at a time, the caller holding none.
 */
int vf__fail_deleted(vf_engine *e, const char *who, const char *name,
                     const vf__var *v, uint32_t gen);
int vf__varset_deleted(vf_engine *e, const char *who, const char *name,
                       vf_var_list reads, vf_var_list writes, const vf__var *v,
                       uint32_t gen);

/* Check an op description's fields (not its vars, nor its arg_size: the
 * caller that copies the argument checks it, vf__arg_check; but both for
 * an op of a device the engine has not made yet, which routing makes) and
 * fill a definition: routing included, and the function, argument, done
 * and name. Returns 0 or a VF_E* code with a detail. */
int vf__opdef_fill(vf_engine *e, const char *who, const vf_op *op,
                   vf__opdef *def);

/* Give the op what differs from push to push: its function (`fn`, or
 * `async_fn` when `async`), argument, done and name (NULL: ""). */
static inline void vf__op_set_run(vf__op *op, bool async, vf_sync_fn fn,
                                  vf_async_fn async_fn, void *arg,
                                  vf_done_fn done, const char *name)
{
    if (async)
        op->async_fn = async_fn;
    else
        op->fn = fn;
    op->arg = arg;
    op->done = done;
    op->name = name != NULL ? name : "";
}

/* The same from a definition that holds a run (an operator's). */
static inline void vf__op_take_run(vf__op *op, const vf__opdef *def)
{
    vf__op_set_run(op, def->async, def->fn, def->async_fn, def->arg, def->done,
                   def->name);
}

void vf__operator_unref(vf_operator *opr);

#endif /* VF_OP_H */
