/*
 * graph.h: capture and replay (vf_graph_*, varflow.h; graph.c).
 *
 * Capture. vf_graph_begin marks this thread as capturing on one engine
 * (vf__capture_now); a push to that engine from this thread is then checked
 * as a push and recorded as a node of the graph (push.c calls
 * vf__graph_record). The calls a replay could not repeat ask
 * vf__graph_refuse first.
 *
 * The plan. vf_graph_end works out, once, what a launch needs (graph.c):
 *   - the graph's vars (its boundary), each with how the graph uses it as
 *     one op would (written if any node writes it), in normal form (sorted
 *     by address): the var set of the launch op;
 *   - each node's in-graph predecessors (the nodes before it it conflicts
 *     with on some var, as the var queues would order them) as a count,
 *     and its successors;
 *   - per var, its last uses (the reads after the graph's last write of it,
 *     or that write), and per node the vars it uses last.
 *
 * A replay. The launch op (kind vf__kind_launch) is queued on the
 * boundary as one op with that var set, so the launch is ordered against
 * everything pushed before and after it, atomically, as a push is; it
 * takes as many places in push order as the graph has nodes. Once it is
 * ready (every earlier conflicting op finished), it starts the graph: the
 * nodes without predecessors go to the pools, and each node that finishes
 * makes its successors ready from the counts (vf__graph_op_finished, called
 * where a finishing op would release its vars: exec.c), and lets go of
 * each boundary var it used last once the var's last uses have all
 * finished, so later ops on it go on without waiting for the rest. The
 * launch op finishes when its last node has (vf__graph_op_done). A node
 * of a replay is an op block of kind vf__kind_graph_op, made once per
 * instance (the blocks a launch in flight uses; a graph launched again
 * before its last launch finished gets a second instance), never queued
 * on a var, never freed by its finish: it holds its var set only to read
 * the failures its inputs carry, and to pass its own on and bump the
 * versions it writes, as a finishing write would.
 *
 * The launches that cannot replay push the recorded ops one by one
 * (vf__push_recorded): same result (varflow.h says when).
 */
#ifndef VF_GRAPH_H
#define VF_GRAPH_H

#include "core/engine.h"

/* This thread's capture: the engine (and its serial number, never reused,
 * so an engine destroyed meanwhile is never taken for a new one at the
 * same address) and the graph being recorded. */
typedef struct vf__capture {
    vf_engine *engine;
    uint64_t serial;
    vf_graph *graph;
} vf__capture;

extern _Thread_local vf__capture vf__capture_now;

/* Whether this thread captures on `e`: one compare on every push. */
static inline bool vf__graph_capturing(const vf_engine *e)
{
    return VF__UNLIKELY(vf__capture_now.engine == e) &&
           vf__capture_now.serial == e->counts.serial;
}

/* Record a push this thread makes while capturing on `e` (the op's
 * description, or an operator's run: `opr`, `priority`, and with
 * `with_arg` its own `arg` of `arg_size` bytes): checked as the push, 0
 * or its error. */
int vf__graph_record(vf_engine *e, const char *who, const vf_op *desc,
                     vf_operator *opr, int priority, bool with_arg, void *arg,
                     size_t arg_size);

/* 0, or VF_EINVAL with a detail when this thread captures on `e`: `who`
 * may not be part of a capture. */
int vf__graph_refuse_slow(const vf_engine *e, const char *who);
static inline int vf__graph_refuse(const vf_engine *e, const char *who)
{
    return vf__graph_capturing(e) ? vf__graph_refuse_slow(e, who) : 0;
}

/* A node of a replay finished (exec.c's finish, in place of releasing its
 * vars): its failure and versions go to the vars it writes, its
 * successors whose last predecessor it was go to `ready` (their active
 * count is the finish's to take), and each boundary var whose last use it
 * was is released (ops that makes ready, too). */
void vf__graph_op_finished(vf__op *op, vf__readylist *ready);

/* The finish of `k` nodes of one launch is over, `op` the last of them (in
 * place of freeing their blocks; vf__graph_node_reset has made each ready
 * for the next launch): when they were the launch's last, the launch ends
 * (its pending count out, wakes done). The last touch of the engine. */
void vf__graph_ops_done(vf__op *op, uint32_t k);

/* A node's finish is over: its block made ready for the next launch
 * (its failure let go), then vf__graph_ops_done (one call for a run of
 * nodes whose finishes end together). */
static inline void vf__graph_node_reset(vf__op *op)
{
    if (VF__UNLIKELY(op->failure != NULL)) {
        vf__failure_unref(op->failure);
        op->failure = NULL;
    }
    op->skipped = false;
}

/* One node's finish is over: both of the above. */
static inline void vf__graph_op_done(vf__op *op)
{
    vf__graph_node_reset(op);
    vf__graph_ops_done(op, 1);
}

/* The worker of its pool (an index into its workers) a replay's node
 * `op` goes to when it becomes ready, or -1 for any (graph.c: homes). */
int vf__graph_node_home(const vf__op *op);

/* The homes of g's first `n` nodes into homes_out (the unit tests' view
 * of the plan); returns the graph's node count, 0 when it has no plan (it
 * does not replay). */
size_t vf__graph_homes(const vf_graph *g, int *homes_out, size_t n);

/* The places in push order the launch op `op` takes: one per node. */
uint64_t vf__graph_launch_places(const vf__op *op);

/* Free every graph of the engine (destroy: no op is left): how many the
 * program left. */
uint64_t vf__graphs_free_all(vf_engine *e);

extern const vf__op_kind vf__kind_launch, vf__kind_graph_op;

#endif /* VF_GRAPH_H */
