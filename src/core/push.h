/*
 * push.h: an op's place in push order, and enqueueing it on all its vars
 * as one atomic step (push.c, which also has the public push calls).
 */
#ifndef VF_PUSH_H
#define VF_PUSH_H

#include "core/bulk.h"
#include "core/engine.h"

/* Take `n` places in push order for ops that get no push of their own (a
 * batch's items, ops dropped unpushed): returns the first. */
static inline uint64_t vf__push_take_places(vf_engine *e, uint64_t n)
{
    return atomic_fetch_add_explicit(&e->pushed, n, memory_order_relaxed) + 1;
}

/* The nest of an op pushed from inside `parent` (op.h: vf__op.nest). */
static inline uint8_t vf__push_nest_below(const vf__op *parent)
{
    return (uint8_t)(parent->nest + (parent->nest < VF__NEST_MAX));
}

/* The nest an op pushed now from this thread gets. */
static inline uint8_t vf__push_nest(vf_engine *e)
{
    vf__op *parent = vf__current_op();
    if (VF__LIKELY(parent == NULL) || vf__op_engine(parent) != e)
        return 0;
    return vf__push_nest_below(parent);
}

/* The place in push order of `op`, running on this thread. A child that
 * runs alone inside its push (push.c: push_child_alone) takes its place
 * only when something needs it (its failure's record, its family), most
 * never do: still above every place taken before its push, and below
 * every one its pusher takes after it returns, which is all push order
 * asks of it. */
static inline uint64_t vf__push_place_of(vf__op *op)
{
    if (VF__UNLIKELY(op->place == 0) && op->alone)
        op->place = vf__push_take_places(vf__op_engine(op), 1);
    return op->place;
}

/* How a detail names `op`, running on this thread (vf__op_label), its
 * place taken now where it runs alone without one (vf__push_place_of): the
 * same "op #N" on every engine kind (a child run at its push on a pool of
 * one worker was "an unnamed op" where the others said "op #2": found by
 * a user tester). The place is the running op's own to take. */
static inline const char *vf__push_running_label(const vf__op *op,
                                                 char buf[VF__OP_LABEL_MAX])
{
    return vf__op_label(op->name, vf__push_place_of((vf__op *)op), buf);
}

/* The family an op pushed now from inside `parent` (running on this
 * thread) joins, the run's (family.h: no new reference); NULL out of
 * memory. */
static inline vf__family *vf__push_family_of_run(vf__op *parent)
{
    if (VF__UNLIKELY(parent->def->kind == &vf__kind_bulk))
        vf__bulk_release_ran(parent); /* before the child queues */
    return vf__running_family(parent, parent->up,
                              VF__UNLIKELY(parent->alone)
                                  ? vf__push_place_of(parent)
                                  : vf__bulk_running_place(parent));
}

/* vf__push_family_of_run, as a new reference: for an op that may outlive
 * its parent's run. */
static inline vf__family *vf__push_family(vf__op *parent)
{
    vf__family *f = vf__push_family_of_run(parent);
    if (f != NULL)
        vf__family_ref(f);
    return f;
}

/* Give an op the program pushes its place in push order: the next `n`
 * numbers (failure.h); pushed from inside a running op of this engine,
 * also its nesting (op.h: vf__op.nest; its family it joined when its push
 * began, push.c). */
static inline void vf__push_place_op(vf_engine *e, vf__op *op, uint64_t n)
{
    op->place = vf__push_take_places(e, n);
    vf__op *parent = vf__current_op();
    if (VF__LIKELY(parent == NULL) || vf__op_engine(parent) != e)
        return; /* nest 0, from vf__op_alloc */
    op->nest = vf__push_nest_below(parent);
}

/* The place of a wait (or a var delete) pushed now: the last op's before
 * it (an op that never fails needs no number of its own). */
static inline uint64_t vf__push_wait_place(vf_engine *e)
{
    return atomic_load_explicit(&e->pushed, memory_order_relaxed);
}

/* Where a wait called now on this thread stands in push order (failure.h:
 * vf__wait_key): after what was pushed so far, and, inside an op of `e`,
 * within that op, before the children it pushes later. */
static inline vf__wait_key vf__push_wait_key(vf_engine *e)
{
    uint64_t next = vf__push_wait_place(e) + 1;
    vf__op *cur = vf__current_op();
    if (VF__LIKELY(cur == NULL) || vf__op_engine(cur) != e)
        return (vf__wait_key){.up = NULL, .next = next, .self = false};
    if (vf__running_now.family != NULL)
        return (vf__wait_key){
            .up = vf__running_now.family, .next = next, .self = false};
    /* It pushed nothing (no family): the op itself is before the wait,
     * every op after it, its children to come included, after. */
    return (vf__wait_key){.up = cur->up,
                          .next = VF__UNLIKELY(cur->alone)
                                      ? vf__push_place_of(cur)
                                      : vf__bulk_running_place(cur),
                          .self = true};
}

/* Push a prepared op: `op->def` set, its var set normalized. A user op
 * with no place yet takes the next number once the push can no longer
 * fail; any other op comes with its place (failure.h). Appends it
 * to every var atomically, counts it, and dispatches it when ready.
 */
int vf__push_enqueue(vf_engine *e, vf__op *op, const char *who);

/* vf__push_enqueue for a caller that holds a lock (a batch's push, under
 * its thread's bulk lock: bulk.h): the op is never run inside the push
 * (exec.h), where its function could push to that batch again. */
int vf__push_enqueue_locked(vf_engine *e, vf__op *op, const char *who);

/* vf__push_enqueue_locked for a fused op (bulk_op.c): 0, a code, or a
 * positive value when an async op is unfinished, which a fused op must
 * not be pushed beside (bulk.c: bulkable): the caller pushes its ops
 * each alone. */
int vf__push_enqueue_fused(vf_engine *e, vf__op *op, const char *who);

/* vf__push_enqueue for vf_engine_start pushing an op it held: never held
 * again, while any other push during the start still is (push.c). */
int vf__push_enqueue_held(vf_engine *e, vf__op *op);

/* Queue `rest`, the later items of the fused op `holder` running on this
 * thread, split off it (bulk_op.c: split_after), where they stood on
 * each var (vf__var_insert_rest). It continues a push already admitted:
 * never held by a stop, and its vars, all held by `holder`, are never
 * refused (a delete queued behind the batch stays behind it). */
void vf__push_enqueue_rest(vf_engine *e, vf__op *rest, const vf__op *holder);

/* vf__push_enqueue for a wait's marker (one var, a read) of the replay's
 * node `node` (wait.c: a node waits for its launch's hold) that goes right
 * behind the write place holding its var for the node's graph (the launch
 * op's, or a rest op's: graph.h, looked up under the var's lock, where
 * the graph changes it), running or queued, and the ops that went ahead
 * behind it, rather than at the queue's end: 1, with nothing pushed, when
 * the graph holds the var so no more. */
int vf__push_enqueue_behind(vf_engine *e, vf__op *op, const vf__op *node,
                            const char *who);

/* vf__push_enqueue for the marker of a wait inside an op (one var, a
 * read; its waiter set): right behind the last write queued on its var by
 * an op before the wait in push order (op->waiter->key), not behind the
 * writes of ops after it, which the serial program had not pushed when
 * its wait ran (one that waits for the waiting op: VF_EDEADLK where the
 * serial program gets 0): 1, with nothing pushed, when no such write is
 * left. */
int vf__push_enqueue_before(vf_engine *e, vf__op *op, const char *who);

/* vf__push_enqueue for a var's delete (var_api.c): one that a stop begins
 * to hold behind after its look is held too, after the pushes held
 * meanwhile (push.c). */
int vf__push_enqueue_delete(vf_engine *e, vf__op *op, const char *who);

/* Whether the engine takes a push-like call from this caller (running,
 * or shutting down and called from inside one of its ops): 0 or
 * VF_ESHUTDOWN with a detail naming `who`. */
int vf__push_check_engine(vf_engine *e, const char *who);
/* This thread's launch pushing op by op on `e` was admitted (NULL: over);
 * returns the one before, to put back (a launch from an op run inside a push).
 */
vf_engine *vf__push_admit_launch(vf_engine *e);

/* Push a recorded op again, as vf_engine_push (graph.c's launch op by op);
 * and an operator's run, as vf_operator_push_arg with arg_size 0 taking
 * `arg` as it is, whether or not the operator's handle was deleted (the
 * graph holds it). */
int vf__push_recorded(vf_engine *e, const vf_op *desc, const char *who);
int vf__push_operator_run(vf_engine *e, vf_operator *opr, int priority,
                          void *arg, size_t arg_size, const char *who);

#endif /* VF_PUSH_H */
