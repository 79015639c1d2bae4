/*
 * graph_impl.h: what the two halves of a graph's replay share inside the
 * core: the graph itself, its recorded pushes, and the instance and launch
 * plumbing (graph.c); the replay of a graph of device ops as a device
 * graph is graph_device.c (see graph.h for the whole story).
 */
#ifndef VF_GRAPH_IMPL_H
#define VF_GRAPH_IMPL_H

#include <pthread.h>

#include "core/device_pools.h"
#include "core/graph.h"
#include "core/op.h"

/* A recorded push. */
typedef struct node {
    const vf__opdef *def; /* the push's: the engine's, or the operator's */
    vf_operator *opr;     /* an operator's run (a reference), or NULL */
    vf_op desc;           /* a one-shot push's description (its lists
                             point at `handles`); never written after
                             the capture: its arg is `arg`'s first value,
                             `arg` the one to use (g->lock) */
    int priority;
    /* Its argument: a pointer (arg_size 0), or the graph's copy of
     * arg_size bytes (set_arg writes it, under the graph's lock). */
    void *arg;
    size_t arg_size;
    vf_var *handles; /* a one-shot push's reads, then writes */
    int nvars;
    vf__varref *vars; /* normal form: a one-shot push's own, or the
                         operator's (not owned) */
} node;

struct vf_graph {
    vf_engine *engine;
    vf_graph *prev_live, *next_live; /* the engine's graphs.lock */
    /* The handle (until vf_graph_destroy), each launch running, and each
     * call on the handle in progress (graph.c: handle_hold). */
    atomic_int refs;
    /* Every node a sync CPU user op: a launch may replay it (graph.h). */
    bool replayable;
    /* Every node runs inline (the naive engine): a replay runs them one
     * after the other, in push order, where the launch op is ready. */
    bool in_order;
    pthread_mutex_t lock; /* the nodes' arguments, the free instances */
    node *nodes;
    size_t n, cap;
    uint64_t arg_gen; /* lock: bumped when set_arg changes a pointer */
    /* The plan (replayable only). */
    vf__plan_node *pn; /* per node */
    uint32_t *succ, *last;
    vf__var **writes;
    int nb;            /* boundary vars */
    vf__varref *bvars; /* in normal form: the launch op's var set */
    uint32_t *bnlast;  /* per boundary var: its last uses */
    uint32_t *copied;  /* the nodes with a copied argument */
    uint32_t *roots;   /* the nodes without predecessors, in push order */
    uint32_t nroots;
    uint32_t ncopied;
    const vf__opdef *launch_def; /* its launch op's */
    /* Device replay (graph_device.c): the device of its device ops when
     * every node is a sync device op of that device or a sync CPU op
     * (else NULL), its part of the plan once worked out (with the
     * recordings: lock), whether the program allows it
     * (vf_graph_device_replay), and the generation of the arguments
     * (lock: set_arg bumps it, so the device work is recorded again). */
    vf__devctx *device;
    /* Why `device` is NULL, naming the node, for vf_graph_device_replay's
     * refusal (it gave one sentence for every reason: a user tester). */
    char no_device_why[128];
    struct vf__devplan *devplan;
    atomic_bool device_replay;
    uint64_t dev_gen;
    struct vf__graph_inst *free_insts; /* lock */
    struct vf__graph_inst *all_insts;  /* lock */
    /* Launches made and not started (their stand-ins, graph.h), and the
     * stand-ins free for the next launches. */
    struct vf__graph_inst *unbound, *free_stubs; /* lock */
};

/* The graph's reference count: each launch running holds one. */
void vf__graph_unref(vf_graph *g);

/* An instance back to the graph's free ones once its launch is over (a
 * launch takes one when it starts: vf__graph_bind). */
void vf__graph_inst_put(vf__graph_inst *in);

/* The launch's last node is over (its instance `in`): the launch op goes,
 * the instance goes back, and the launch's `counts` (pending, and active
 * where it kept that) go out: the last touch of the engine. */
void vf__graph_launch_end(vf__graph_inst *in, uint64_t counts);

/* A launch op held by a stopped engine could not be pushed at start: its
 * ops fail with `rc` (a kind's `dropped`, op.h). */
void vf__graph_launch_dropped(vf_engine *e, vf__op *op, int rc);

/* --- device replay (graph_device.c) -------------------------------------- */

/* At vf_graph_end, after the plan: the device replay's part of it, when
 * every node is a sync device op of one device whose class records device
 * graphs, or a sync CPU op. 0 or VF_ENOMEM. */
int vf__devgraph_plan(vf_graph *g, const char *who);

/* A launch of a device replay is over: the recordings it ran are let go
 * of (nothing for any other launch). */
void vf__devgraph_launch_over(vf__graph_inst *in);

/* Free the device replay's part of the plan (and its recording), and an
 * instance's scratch. */
void vf__devgraph_plan_free(vf_graph *g);
void vf__devgraph_inst_free(vf__graph_inst *in);

#endif /* VF_GRAPH_IMPL_H */
