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
#include "core/exec.h"
#include "core/var.h"

/* Fork (lifecycle.c): the lock of the graph handles the program holds,
 * taken before the fork and let go after it, in parent and child. */
void vf__graph_handles_fork_lock(bool lock);

/* Fork: the engine's list of graphs, then each graph's lock (a thread
 * launching, setting an argument or starting a launch holds it, and the
 * child's start takes it for the launches it pushes: found hung in the
 * child, the lock held by a thread the child does not have). Taken after
 * the engine is stopped, before the free lists (an instance's blocks are
 * taken under it). */
void vf__graph_fork_lock(vf_engine *e, bool lock);

/* This thread's capture: the engine (and its serial number, never reused,
 * so an engine destroyed meanwhile is never taken for a new one at the
 * same address) and the graph being recorded. */
typedef struct vf__capture {
    vf_engine *engine;
    uint64_t serial;
    vf_graph *graph;
} vf__capture;

extern _Thread_local vf__capture vf__capture_now;

/* Whether this thread captures on `e`: one compare on every push. A
 * capture is the thread's own code's: an op, a `done` callback or device
 * work that runs on the thread meanwhile (a call of its own runs it
 * inline: a push to a naive engine, a completion, a wait that helps)
 * pushes and waits as it would anywhere else (its pushes were recorded
 * and never run, its waits refused: found by an auditor of the graphs). */
static inline bool vf__graph_capturing(const vf_engine *e)
{
    return VF__UNLIKELY(vf__capture_now.engine == e) &&
           vf__capture_now.serial == e->counts.serial && vf__exec_at_top();
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

/* A node's part of the plan (graph.c works it out at vf_graph_end): its
 * in-graph predecessors, its successors (at succ_at in the plan's `succ`),
 * the boundary vars it uses last (at last_at in the graph's `last`), the
 * vars it writes (at writes_at in `writes`), and the worker of its pool it
 * runs on when free (homes). */
typedef struct vf__plan_node {
    uint32_t npred, succ_at, nsucc, last_at, nlast;
    uint32_t writes_at, nwrites;
    int home;
} vf__plan_node;

/* The blocks and counts of one launch in flight: an instance (see the
 * top of this file). */
typedef struct vf__graph_inst {
    vf_graph *g;
    /* The graph's plan, as a node's finish reads it (inline where the node
     * runs: vf__graph_op_finished), so it needs nothing of vf_graph. */
    const vf__plan_node *pn;
    vf__var *const *writes;
    const uint32_t *succ;
    bool in_order; /* the nodes run in push order: no successors' counts */
    /* A var of the launch may carry a failure a node could inherit: one
     * did at the launch's start (launch_run looks), or a node's failure
     * went to the vars it writes since (relaxed: a node that could inherit
     * it runs after that node's finish, which orders the store). While
     * false, a node skips looking at each of its vars. */
    atomic_bool failures;
    struct vf__graph_inst *next_free, *next_all;
    vf__op *launch; /* its launch op */
    uint64_t base;  /* the place of its first node */
    /* Nodes whose finish is not over: written by every node's end, on
     * whichever worker, so on a line of its own (padding: the fields
     * around it are read by every node's finish). */
    char pad_left_[VF__CACHELINE];
    atomic_uint left;
    char pad_after_left_[VF__CACHELINE];
    atomic_uint *bleft; /* per boundary var: last uses not finished */
    /* Per boundary var (graph_child.c: vf__graph_split). */
    struct vf__graph_split *split;
    /* Where the nodes run one after the other (the naive engine): the
     * rest ops queued whose run has not come (a node's children on their
     * var in flight), and, where the run stopped before node `resume_at`
     * for one of them, `suspended` (vf__graph_in_order_waits): that rest
     * op's run goes on with it (graph_child.c: rest_run). */
    atomic_int rests_unrun;
    atomic_uint rests_run; /* runs of them so far: the handshake's look */
    atomic_bool suspended;
    uint32_t resume_at;
    /* The reads of boundary vars running nodes hold for their children
     * (graph_child.c: a child reading beside its node), each let go at its
     * node's finish. */
    vf__spinlock pins_lock;
    struct vf__graph_pin *pins; /* pins_lock */
    uint64_t arg_gen;           /* the graph's arg_gen its pointers are from */
    uint64_t dev_gen;           /* the graph's dev_gen at this launch's start */
    vf__op **ops;               /* each node's block */
    char *slab;
    /* A device replay's (graph_device.c): its recorded device graph and
     * the scratch of its launches; NULL until its first. */
    struct vf__devinst *dev;
    /* A launch's stand-in until the launch op starts (`ops` NULL: see
     * vf__graph_bind): in the graph's list of launches not started (lock),
     * and the instance vf_graph_set_arg bound to it (the arguments as they
     * were at the launch), or NULL. */
    struct vf__graph_inst *unbound_prev, *unbound_next, *bound;
} vf__graph_inst;

/*
 * A child of a replay's node (pushed from inside its function) on a var
 * its node writes goes where its push beside the node would put it: right
 * behind the node, before the graph's later ops on the var (varflow.h).
 * Where the nodes run one after the other (the naive engine: in_order),
 * so does a child on a var the graph holds to write and its node does not
 * use: the nodes before its node have finished, so the hold stands for
 * the later ones only; the hold splits once the child is queued
 * (vf__graph_child_queued), where the push would have found the var
 * free, and a later child of the node goes before the rest op that split
 * left waiting (vf__graph_rest_ahead), as its push would go behind the
 * earlier one only.
 * The launch op holds the var for the whole graph, and the graph's later
 * ops wait for the node through their counts, not the var's queue; so the
 * child queues right behind the launch op's place (var.c: holder_place,
 * through vf__graph_holder_place), and the graph's hold splits around it
 * (graph_child.c), as a fused batch's does (bulk.h):
 *   - at the child's push (vf__graph_child_pushed), the graph's next uses
 *     of the var after the node get one more count to wait for, and a rest
 *     op is made for the var: pending until the node's finish;
 *   - at the node's finish (vf__graph_splits_finished), the rest op's place
 *     goes behind the children queued there, and the place that held the
 *     var for the graph (the launch op's, or the last split's rest op's)
 *     lets it go: the children run;
 *   - once they have finished, the rest op's place is granted: it takes
 *     back the counts, and holds the var for the graph until its last use
 *     (vf__graph_lasts_finished lets the holder go).
 * A child that reads a var its node only reads runs beside the node, at
 * once, before the graph's next write of the var: at its push, the place
 * that holds the var for the graph, a running write, becomes a running
 * read that the node holds until its finish, with a rest op's write place
 * at the queue's head that the next write waits for (through one more
 * count), or, when the graph writes the var no more, the graph's read
 * hold until its last use; where reads already run on the var for the
 * graph, the node holds one more (a pin) until its finish.
 * The children are ordinary ops (their vars, failures, versions and waits
 * as any op's), and so are the ops they push.
 */
typedef struct vf__graph_split {
    /* The rest op whose place holds the var for the graph, or NULL: the
     * launch op's does (or none is left). Written under the var's lock
     * (by a node's finish that splits it, a reading node's child's push,
     * the var's last use); read by a child's push and, under the lock, a
     * node's wait on the var (push.c). */
    _Atomic(vf__op *) holder;
    /* The rest op a running node's child made, placed at its finish. */
    _Atomic(vf__op *) pending;
    /* The holder holds the var to read since a node that reads it let a
     * child read beside it, the graph writing it no more (graph_child.c);
     * its last use lets it go as a read. */
    atomic_bool downgraded;
} vf__graph_split;

/* Register a child `child` of the replay's node `parent` (push.c, before
 * the child's vars are locked): a split of each var it uses that `parent`
 * writes (in_order: or does not use, and the graph holds to write) and a
 * later node of the graph uses, and a read beside `parent`'s of each it
 * reads that `parent` only reads and the graph writes. 0, or VF_ENOMEM
 * (naming `who`). */
int vf__graph_child_pushed(vf__op *parent, const vf__op *child,
                           const char *who);

/* The place a child of `parent` (NULL: not known) waits behind on v, whose
 * running write `holder` holds for a graph (a launch op or a rest op):
 * `parent`'s when it is a node of that graph that writes v (in_order: or
 * does not use it), else 0 (var.c: holder_place). */
uint64_t vf__graph_holder_place(const vf__op *holder, const vf__var *v,
                                const vf__op *parent);

/* The place of the rest op that holds v, one of the boundary vars of the
 * replay whose node `parent` runs (a child of it is pushed; lock held),
 * where it waits in v's queue for ops before it (`parent`'s children, let
 * go to them by a split) and stands for the graph's later nodes: a child
 * of `parent` goes before it (var.c: VF__CHILD_BEFORE_REST). Only where
 * the nodes run one after the other (the naive engine), else NULL; NULL
 * too when the graph's place on v is granted, or before `parent`. */
vf__dep *vf__graph_rest_ahead(const vf__var *v, const vf__op *parent);

extern const vf__op_kind vf__kind_graph_rest;

/* Whether `holder`, the last write queued on a var before a wait inside
 * `cur` (running on this thread), is the hold of a launch whose nodes run
 * one after the other (the naive engine) that `cur` is a node of or
 * descends from: the graph's ops before that node have finished, so the
 * wait waits for none of it (wait.c). */
bool vf__graph_hold_is_over(const vf__op *holder, const vf__op *cur);

/* Whether `op`'s kind holds a var for a graph: a launch or rest op. */
static inline bool vf__graph_holds_for(const vf__op *op)
{
    return (op->def->kind->flags & VF__KIND_LAUNCH) ||
           op->def->kind == &vf__kind_graph_rest;
}

/* Whether the launch of node `nd` takes v, named by a handle of
 * generation `gen`: at the capture's generation, or at another while the
 * graph still holds the slot (vf_var_of revived it); not a new var in the
 * slot of one the graph let go of and the program deleted. Then *write
 * says whether to write. */
bool vf__graph_launch_takes(const vf__op *nd, const vf__var *v, uint32_t gen,
                            bool *write);

/* The op whose place holds v for the graph of node `nd` now (the launch
 * op, or a split's rest op), for a node's wait on v (push.c: under v's
 * lock). */
const vf__op *vf__graph_var_holder(const vf__op *nd, const vf__var *v);

/* The node `op`, whose children split vars (vf__op.splits), finished:
 * the splits are made (the vars let go to its children go to `ready`). */
void vf__graph_splits_finished(vf__graph_inst *in, vf__op *op,
                               vf__readylist *ready);

/* A child of `op`, the node of a replay running on this thread, was
 * queued (push.c, once it no longer touches the child): where the nodes
 * run one after the other (the naive engine), the graph's hold on each var
 * the node does not use that such a child went ahead on splits now (the
 * split the node's finish would make: graph_child.c), and what that makes
 * ready runs as at its push, as the push finds the var free of the ops
 * before the node there (it ran after the graph's later ops, a wait for
 * it in the node got VF_EDEADLK, and a wait on its var returned before it
 * had run: found by a user tester). */
void vf__graph_child_queued(vf__op *op);

/* Where the nodes of `in` run one after the other (the naive engine),
 * whether node i must wait before it runs: a var it uses is held for the
 * graph by a rest op whose run has not come, the node's predecessors'
 * children there still in flight (an async one: the run went on, and the
 * rest op's place, let go at the var's last use before it was granted,
 * corrupted the var's queue; found by the reviewer of stop 66's
 * children). Then the run stops, its active count let go (the caller, the
 * in-order run, returns: exec.c), and a rest op's run resumes it at node
 * i (vf__exec_run_in_order) with its own; false when it may go on, the
 * count kept. The caller asks only while in->rests_unrun is not 0 (none
 * waits then), with the nodes before i told (nodes_over). */
bool vf__graph_in_order_waits(vf__graph_inst *in, uint32_t i);

/* The graph's last use of boundary var b finished: the place that holds
 * it for the graph (the launch op's, or a split's rest op's, then freed)
 * lets it go; ops that makes ready go to `ready`. */
void vf__graph_holder_let_go(vf__graph_inst *in, int b, vf__readylist *ready);

/* Whether `in` is a launch's stand-in, not started yet (vf__graph_bind). */
static inline bool vf__graph_is_stub(const vf__graph_inst *in)
{
    return in->ops == NULL;
}

/* A node's rare finishes, out of line (graph.c): its failure to the vars
 * it writes; the boundary vars whose last uses include node `nd`'s, those
 * it was the last to finish let go (as their use by the launch op). */
void vf__graph_failure_written(vf__graph_inst *in, vf__failure *f,
                               vf__var *const *writes, uint32_t nwrites);
void vf__graph_lasts_finished(vf__graph_inst *in, const vf__plan_node *nd,
                              vf__readylist *ready);

/* Whether a node of `op`'s launch may inherit a failure from its vars
 * (vf__graph_inst.failures): if not, it need not look. */
static inline bool vf__graph_failures_possible(const vf__op *op)
{
    return atomic_load_explicit(&op->graph->failures, memory_order_relaxed);
}

/* A node of a replay finished (exec.c's finish, in place of releasing its
 * vars): its failure and versions go to the vars it writes, its
 * successors whose last predecessor it was go to `ready` (their active
 * count is the finish's to take), and each boundary var whose last use it
 * was is released (ops that makes ready, too). `in_order`: the
 * instance's (a constant where the caller knows it). Inline: it is most
 * of a node's finish, and a call's register saves were a fifth of it. */
static inline void vf__graph_op_finished(vf__op *op, bool in_order,
                                         vf__readylist *ready)
{
    vf__graph_inst *in = op->graph;
    const vf__plan_node *nd = &in->pn[op->place - in->base];
    /* Bounds in locals: the atomics below would make them reloaded. */
    uint32_t nwrites = nd->nwrites;
    vf__var *const *writes = in->writes + nd->writes_at;
    if (VF__UNLIKELY(op->failure != NULL))
        vf__graph_failure_written(in, op->failure, writes, nwrites);
    /* One writer at a time (the launch holds the var; the graph's edges
     * order its writes): a plain add, no locked read-modify-write. */
    if (VF__LIKELY(!op->skipped))
        for (uint32_t i = 0; i < nwrites; i++) {
            _Atomic uint64_t *version = &writes[i]->version;
            atomic_store_explicit(
                version,
                atomic_load_explicit(version, memory_order_relaxed) + 1,
                memory_order_relaxed);
        }
    /* Successors' counts (none kept where the nodes run in push order).
     * The one whose count this takes to zero sets the successor's place
     * (nothing reads it before it is ready), and this node's count is
     * made its predecessors' again for the next launch: every one of them
     * has released it in this one, and the next launch of this instance
     * starts only after this launch's end. */
    if (!in_order) {
        vf__op *const *ops = in->ops;
        const uint32_t *succ = in->succ + nd->succ_at;
        uint32_t nsucc = nd->nsucc;
        for (uint32_t s = 0; s < nsucc; s++) {
            vf__op *next = ops[succ[s]];
            /* At VF__NODE_WATCHED + 1, its watcher takes it (exec.c). */
            if (vf__op_release(next, 1)) {
                next->place = in->base + succ[s];
                vf__readylist_add(ready, next);
            }
        }
        atomic_store_explicit(&op->wait, (int)nd->npred, memory_order_relaxed);
    }
    if (VF__UNLIKELY(op->splits))
        vf__graph_splits_finished(in, op, ready);
    if (VF__UNLIKELY(nd->nlast != 0))
        vf__graph_lasts_finished(in, nd, ready);
}

/* A node's wait count with this bit: the worker it is at home on, with
 * nothing else to run, watches the count (exec.c: node_watched) and runs
 * the node itself when it reaches zero; the predecessor whose finish takes
 * it there (to exactly the bit) leaves the node to that worker, as it
 * would have sent it there, without the hand-over: the successor's count
 * line crosses once, where the hand-over's inbox and queue crossed too. */
#define VF__NODE_WATCHED (1 << 30)

/* A successor of `op`, a node of a replay that just finished on the
 * worker of index `home` in `pool`, at home on that worker and not ready
 * yet, now marked watched (its count has VF__NODE_WATCHED), its place in
 * *place for the watcher to set once the node is its own (vf__graph_watch
 * _ready, _end: a node not watched any more may run elsewhere meanwhile,
 * so nothing of it is written before); or NULL (none, or each became
 * ready meanwhile, made so by another thread, which dispatches it). */
static inline vf__op *vf__graph_watch_begin(const vf__op *op,
                                            const vf__pool *pool, int home,
                                            uint64_t *place)
{
    const vf__graph_inst *in = op->graph;
    const vf__plan_node *nd = &in->pn[op->place - in->base];
    const uint32_t *succ = in->succ + nd->succ_at;
    for (uint32_t s = 0; s < nd->nsucc; s++) {
        vf__op *next = in->ops[succ[s]];
        if (in->pn[succ[s]].home != home || next->def->pool != pool)
            continue; /* homes are indexes into the node's pool */
        int c = atomic_load_explicit(&next->wait, memory_order_relaxed);
        while (c > 0 && !(c & VF__NODE_WATCHED))
            if (atomic_compare_exchange_weak_explicit(
                    &next->wait, &c, c | VF__NODE_WATCHED, memory_order_relaxed,
                    memory_order_relaxed)) {
                *place = in->base + succ[s];
                return next;
            }
    }
    return NULL;
}

/* Whether `next`, watched (vf__graph_watch_begin), is ready: its last
 * predecessor's finish left it to the watcher, whose run it now is. */
static inline bool vf__graph_watch_ready(vf__op *next)
{
    return atomic_load_explicit(&next->wait, memory_order_acquire) ==
           VF__NODE_WATCHED;
}

/* The watcher of `next` stops watching: true if it could (the node is not
 * ready, and whoever makes it ready dispatches it), false if it is ready,
 * left to the watcher, whose run it now is. */
static inline bool vf__graph_watch_end(vf__op *next)
{
    int c = atomic_load_explicit(&next->wait, memory_order_acquire);
    while (c != VF__NODE_WATCHED)
        if (atomic_compare_exchange_weak_explicit(
                &next->wait, &c, c & ~VF__NODE_WATCHED, memory_order_release,
                memory_order_acquire))
            return true;
    return false;
}

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
    op->status = 0;
}

/* One node's finish is over: both of the above. */
static inline void vf__graph_op_done(vf__op *op)
{
    vf__graph_node_reset(op);
    vf__graph_ops_done(op, 1);
}

/* The worker of its pool (an index into its workers) a replay's node
 * `op` goes to when it becomes ready, or -1 for any (graph.c: homes).
 * Inline: a worker asks it of each node of a chain it runs on. */
static inline int vf__graph_node_home(const vf__op *op)
{
    const vf__graph_inst *in = op->graph;
    return in->pn[op->place - in->base].home;
}

/* The homes of g's first `n` nodes into homes_out (the unit tests' view
 * of the plan); returns the graph's node count, 0 when it has no plan (it
 * does not replay). */
size_t vf__graph_homes(const vf_graph *g, int *homes_out, size_t n);

/* The stream this thread records a device graph on now (graph_device.c),
 * or NULL: a device op the naive engine would run on it (pushed from
 * inside a function being recorded) fails instead (device_ops.c), rather
 * than have its work recorded into the graph. */
extern _Thread_local const struct vf__stream *vf__devgraph_recording;

/* A node of a graph's device replay completed (device_ops.c, in place of
 * freeing it: graph_device.c): its block made ready for the next launch,
 * and when it was the launch's last, the launch ends. */
void vf__graph_devnode_over(vf__op *op);

/* The places in push order the launch op `op` takes: one per node. */
uint64_t vf__graph_launch_places(const vf__op *op);

/* The launch op `op` starts: its instance (the nodes' blocks and counts)
 * in place of its stand-in (op->graph), taken now, so that only the
 * launches running hold one (their blocks stay in the caches) however
 * many are queued; the arguments are those of the launch's call (as they
 * stand now, or as vf_graph_set_arg kept them for it). NULL without
 * memory: then vf__graph_launch_lost. */
vf__graph_inst *vf__graph_bind(vf__op *op);

/* A launch op whose instance could not be had at its start
 * (vf__graph_bind): each of its ops fails with VF_ENOMEM, its failure on
 * the vars it writes, as if it had run and failed; the launch op then
 * finishes as an op (its vars let go) and its stand-in goes back. */
void vf__graph_launch_lost(vf__op *op);

/* A launch op's stand-in back to its graph (the launch never started, or
 * was lost), with the instance vf_graph_set_arg gave it, if any. */
void vf__graph_stub_release(vf__op *op);

/* Free every graph of the engine (destroy: no op is left): how many the
 * program left. */
uint64_t vf__graphs_free_all(vf_engine *e);

extern const vf__op_kind vf__kind_launch, vf__kind_graph_op, vf__kind_devlaunch;

#endif /* VF_GRAPH_H */
