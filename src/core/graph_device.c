/*
 * graph_device.c: a graph of device ops replayed as a device graph (a CUDA
 * graph on CUDA; vf_graph_device_replay, varflow.h).
 *
 * When. Every node is a sync device op of one device whose class records
 * device graphs (device.h), none no_skip, or a sync CPU op, and the
 * program allowed it: a device graph replays the work the ops' functions
 * submitted when it was recorded, without calling them again, which only
 * the program can say is the same thing. Otherwise the launch runs as
 * graph.c says. The nodes are split into segments (devseg: by phase),
 * each a device graph and then CPU nodes run by hand (cpu_by_hand); the
 * steps below are a segment's.
 *
 * A launch. Its launch op (vf__kind_devlaunch) is queued on the graph's
 * vars as one op, as a CPU replay's is, and runs where the device's ops
 * run (a worker of its pool, or the naive engine's thread), on that
 * worker's stream, holding every var of the graph:
 *   1. The boundary. For each var of the segment, the work in flight it
 *      waits for (its fences): the last device write, whose failure the
 *      nodes that first use the var inherit, and for a var the segment
 *      writes the device reads since, which only order. A failure the host
 *      already knows of (a var's own, a fence resolved failed), a fence of
 *      another kind of device, or the shutdown notice: the segment runs its
 *      nodes by hand (below) instead, as their pushes would, since a device
 *      graph's nodes cannot be skipped one by one from the host.
 *   2. The recording. Each segment keeps one (vf__devrec: the device
 *      graph and the copied arguments it was recorded with); the first
 *      launch that finds none, or one older than the last
 *      vf_graph_set_arg, records one: on the stream, each node's function
 *      is called under capture, given the recording's copy of its argument
 *      (capture_node names its predecessors, and those it carries a
 *      failure from: the last writers in the segment of the vars it uses).
 *      A function that fails ends the recording there: the graph of the
 *      nodes so far (the failed one included, with the work it submitted,
 *      as its push would run it) is launched this once and not kept, and
 *      the rest go by hand. A launch that finds another launch recording
 *      goes by hand. Then one graph_launch runs the recorded work after
 *      the boundary's fences; each node gets an event of its own.
 *   3. Each node then leaves a fence of its event on what it writes, and
 *      the launch's (an event recorded after it: launch_fence) on what it
 *      reads, and goes to the completer, in node order, exactly as a
 *      pushed device op whose work is in flight does (device_ops.h): the
 *      completer resolves its outcome (its own failure, or the one it
 *      inherited on the device, found among the fences it carries from),
 *      bumps its versions, calls its `done` and counts it; with
 *      device_sync or the naive engine it is completed here, at once.
 *   4. The launch op lets go of its vars (the host runs ahead of the
 *      device, as with pushes), and ends when its last node completed.
 * By hand: a node runs through the device op's own body
 * (vf__device_op_run): skipped on the host for an inherited failure, or
 * its function called on the stream between the fences it waits for and
 * the one it leaves; in node order, so each sees the fences and failures
 * the earlier ones left, as the serial program's pushes would.
 *
 * Counts. The launch op is pending and active from its push until its end;
 * its nodes are pending from the launch's run until each completes. The
 * instance's `left` counts the nodes not completed plus one for the launch
 * op's own release of its vars, so whichever of the two is last ends it.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "core/completer.h"
#include "core/device_ops.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/fences.h"
#include "core/graph_impl.h"
#include "core/var.h"

_Thread_local const vf__stream *vf__devgraph_recording;

/* --- the plan ------------------------------------------------------------ */

/* A node's part of the device plan: its segment (see below) and, for a
 * device node, its index there; its predecessors in its segment (at
 * pred_at in `pred`: the plan's edges, reversed) and the nodes of its
 * segment it carries a failure from (at carry_at in `carry`), both as
 * indices in the segment; and the boundary vars it uses before any node of
 * its segment wrote them, whose last device write it carries from (at
 * ext_at in `ext`, indices into the graph's bvars). */
#define NONE UINT32_MAX /* no writer yet; not seen in this segment */

typedef struct devnode {
    uint32_t seg, local, pred_at, npred, carry_at, ncarry, ext_at, next;
} devnode;

/*
 * A segment: one device graph, then the CPU nodes that run after it. A
 * node's segment is its *phase*: for a device node, the most CPU nodes on
 * a path of edges into it; for a CPU node, the greatest phase of its
 * predecessors. A launch runs segment after segment: the device graph of
 * its device nodes (at nodes_at in `segnode`, in node order), then its CPU
 * nodes one after the other (at cpu_at in `cpunode`, in node order). Every
 * edge then goes forward (a device node follows a CPU node only from a
 * later segment; a CPU node, the device graph of its own segment or
 * earlier ones, and the CPU nodes before it), so the order is one the
 * serial program allows, and the device work of independent ops stays in
 * one device graph however the program interleaved its CPU ops. Also: the
 * boundary vars its device nodes use (at vars_at in svar, each written by
 * one of them or not: swrite), and its recording (the graph's lock: `rec`,
 * and whether a launch is making one: `recording`).
 */
typedef struct devseg {
    uint32_t nodes_at, n, cpu_at, ncpu, vars_at, nvars;
    struct vf__devrec *rec;
    bool recording;
} devseg;

typedef struct vf__devplan {
    devnode *nodes;
    devseg *segs;
    uint32_t nsegs;
    uint32_t *segnode, *cpunode;
    uint32_t *pred, *carry, *ext, *svar;
    bool *swrite;
    uint32_t max_inputs; /* a segment's most inputs */
    uint32_t max_n;      /* a segment's most device nodes */
} vf__devplan;

/* A recording: the device graph, and the copied arguments its work was
 * recorded with (its functions were given these, not an instance's, so the
 * work any instance replays reads what it was recorded with, while the
 * instances' own copies serve their `done` and their by-hand runs). */
typedef struct vf__devrec {
    atomic_int refs; /* acq_rel: the graph's, and each launch running it */
    const vf__device_class *cls;
    vf__devgraph *dg;
    uint64_t gen; /* the graph's dev_gen it was recorded at */
    char *args;
} vf__devrec;

/* An instance's scratch for its launches' runs, and the recordings its
 * launch in flight runs (per segment, references let go of at the
 * launch's end). */
typedef struct vf__devinst {
    vf__devrec **rec;
    vf__fence **wfence;         /* per boundary var: its last device write
                                   in flight, or NULL */
    vf__devgraph_input *inputs; /* room: a segment's most */
    vf__event **events;         /* per node of a segment, its launch's */
    vf__fence **nfence;         /* per node of a segment, during a launch */
    uint64_t claims; /* vf__failure_claims at the segment's boundary: its
                        nodes' fences' (fences.h) */
} vf__devinst;

static void devrec_unref(vf__devrec *rec)
{
    if (rec == NULL ||
        atomic_fetch_sub_explicit(&rec->refs, 1, memory_order_acq_rel) != 1)
        return;
    rec->cls->graph_release(rec->dg);
    free(rec->args);
    free(rec);
}

/* The index of `v` in the graph's boundary (sorted by address). */
static uint32_t bvar_index(const vf_graph *g, const vf__var *v)
{
    uint32_t lo = 0, hi = (uint32_t)g->nb;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)g->bvars[mid].var <= (uintptr_t)v)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Each node's segment (its phase: see devseg), into dp->nodes[].seg;
 * returns how many segments. `gpred`: each node's predecessors, at
 * gpred_at[node]. */
static uint32_t phases(const vf_graph *g, vf__devplan *dp,
                       const uint32_t *gpred_at, const uint32_t *gpred)
{
    uint32_t most = 0;
    for (uint32_t i = 0; i < g->n; i++) {
        bool dev = g->nodes[i].def->devctx != NULL;
        uint32_t ph = 0;
        for (uint32_t k = gpred_at[i]; k < gpred_at[i + 1]; k++) {
            uint32_t p = gpred[k];
            uint32_t q = dp->nodes[p].seg +
                         (dev && g->nodes[p].def->devctx == NULL);
            if (q > ph)
                ph = q;
        }
        dp->nodes[i].seg = ph;
        if (ph > most)
            most = ph;
    }
    return most + 1;
}

int vf__devgraph_plan(vf_graph *g, const char *who)
{
    if (g->device == NULL)
        return 0;
    if (g->device->cls->capture_begin == NULL) {
        g->device = NULL; /* its class records no device graph */
        snprintf(g->no_device_why, sizeof g->no_device_why,
                 "its device's kind records no device graph");
        return 0;
    }
    size_t uses = 0, edges = 0;
    for (size_t i = 0; i < g->n; i++) {
        uses += (size_t)g->nodes[i].nvars;
        edges += g->pn[i].npred;
    }
    size_t nb = (size_t)(g->nb ? g->nb : 1);
    vf__devplan *dp = vf__calloc(1, sizeof *dp);
    /* Per var: its last writer in the segment, the segment it was last
     * seen in (a stamp: nothing to reset per segment), and its place in
     * that segment's vars; then every node's predecessors (the plan's
     * edges reversed), at gpred_at. */
    uint32_t *lastw = vf__malloc((3 * nb + g->n + 1 + (edges ? edges : 1)) *
                                 sizeof *lastw);
    if (dp != NULL) {
        dp->nodes = vf__calloc(g->n, sizeof *dp->nodes);
        dp->segnode = vf__malloc(g->n * sizeof *dp->segnode);
        dp->cpunode = vf__malloc(g->n * sizeof *dp->cpunode);
        dp->pred = vf__malloc((edges ? edges : 1) * sizeof *dp->pred);
        dp->carry = vf__malloc((uses ? uses : 1) * sizeof *dp->carry);
        dp->ext = vf__malloc((uses ? uses : 1) * sizeof *dp->ext);
        dp->svar = vf__malloc((uses ? uses : 1) * sizeof *dp->svar);
        dp->swrite = vf__malloc((uses ? uses : 1) * sizeof *dp->swrite);
    }
    if (dp == NULL || lastw == NULL || dp->nodes == NULL ||
        dp->segnode == NULL || dp->cpunode == NULL || dp->pred == NULL ||
        dp->carry == NULL || dp->ext == NULL || dp->svar == NULL ||
        dp->swrite == NULL)
        goto nomem;
    uint32_t *seen = lastw + nb, *slot = seen + nb;
    uint32_t *gpred_at = slot + nb, *gpred = gpred_at + g->n + 1;
    for (size_t b = 0; b < nb; b++)
        seen[b] = NONE;
    gpred_at[0] = 0;
    for (uint32_t i = 0; i < g->n; i++)
        gpred_at[i + 1] = gpred_at[i] + g->pn[i].npred;
    for (uint32_t i = 0; i < g->n; i++) {
        const vf__plan_node *pn = &g->pn[i];
        for (uint32_t k = 0; k < pn->nsucc; k++) /* gpred_at[to] moves on */
            gpred[gpred_at[g->succ[pn->succ_at + k]]++] = i;
    }
    for (uint32_t i = g->n; i > 0; i--) /* each back at its start */
        gpred_at[i] = gpred_at[i - 1];
    gpred_at[0] = 0;
    dp->nsegs = phases(g, dp, gpred_at, gpred);
    if ((dp->segs = vf__calloc(dp->nsegs, sizeof *dp->segs)) == NULL)
        goto nomem;
    /* The segments' node lists: counted, then filled in node order. */
    for (uint32_t i = 0; i < g->n; i++) {
        devseg *sg = &dp->segs[dp->nodes[i].seg];
        if (g->nodes[i].def->devctx != NULL)
            sg->n++;
        else
            sg->ncpu++;
    }
    for (uint32_t k = 0, at = 0, cat = 0; k < dp->nsegs; k++) {
        dp->segs[k].nodes_at = at;
        dp->segs[k].cpu_at = cat;
        at += dp->segs[k].n;
        cat += dp->segs[k].ncpu;
        if (dp->segs[k].n > dp->max_n)
            dp->max_n = dp->segs[k].n;
        dp->segs[k].n = dp->segs[k].ncpu = 0;
    }
    for (uint32_t i = 0; i < g->n; i++) {
        devseg *sg = &dp->segs[dp->nodes[i].seg];
        if (g->nodes[i].def->devctx != NULL) {
            dp->nodes[i].local = sg->n;
            dp->segnode[sg->nodes_at + sg->n++] = i;
        } else {
            dp->cpunode[sg->cpu_at + sg->ncpu++] = i;
        }
    }
    /* Per segment, per device node in its order: its predecessors and
     * carries in the segment, the vars it uses first. */
    uint32_t np = 0, nc = 0, ne = 0, nv = 0;
    for (uint32_t si = 0; si < dp->nsegs; si++) {
        devseg *sg = &dp->segs[si];
        sg->vars_at = nv;
        for (uint32_t l = 0; l < sg->n; l++) {
            uint32_t i = dp->segnode[sg->nodes_at + l];
            const node *nd = &g->nodes[i];
            devnode *dn = &dp->nodes[i];
            dn->pred_at = np;
            for (uint32_t k = gpred_at[i]; k < gpred_at[i + 1]; k++) {
                const devnode *pd = &dp->nodes[gpred[k]];
                if (pd->seg == si && g->nodes[gpred[k]].def->devctx != NULL)
                    dp->pred[np++] = pd->local;
            }
            dn->npred = np - dn->pred_at;
            dn->carry_at = nc;
            dn->ext_at = ne;
            for (int j = 0; j < nd->nvars; j++) {
                uint32_t b = bvar_index(g, nd->vars[j].var);
                if (seen[b] != si) { /* its first use in the segment */
                    seen[b] = si;
                    lastw[b] = NONE;
                    slot[b] = nv;
                    dp->svar[nv] = b;
                    dp->swrite[nv++] = false;
                }
                dp->swrite[slot[b]] |= nd->vars[j].write;
                uint32_t w = lastw[b]; /* a local index */
                if (w == NONE) {
                    dp->ext[ne++] = b;
                    continue;
                }
                bool dup = false; /* two vars may have the same writer */
                for (uint32_t c = dn->carry_at; c < nc && !dup; c++)
                    dup = dp->carry[c] == w;
                if (!dup)
                    dp->carry[nc++] = w;
            }
            for (int j = 0; j < nd->nvars; j++)
                if (nd->vars[j].write)
                    lastw[bvar_index(g, nd->vars[j].var)] = l;
            dn->ncarry = nc - dn->carry_at;
            dn->next = ne - dn->ext_at;
        }
        sg->nvars = nv - sg->vars_at;
        uint32_t next = 0;
        for (uint32_t l = 0; l < sg->n; l++)
            next += dp->nodes[dp->segnode[sg->nodes_at + l]].next;
        uint32_t most = next + sg->nvars * VF__VAR_READ_FENCES;
        if (most > dp->max_inputs)
            dp->max_inputs = most;
    }
    free(lastw);
    g->devplan = dp;
    return 0;
nomem:
    free(lastw);
    g->devplan = dp;
    vf__devgraph_plan_free(g);
    return vf__fail(VF_ENOMEM, "%s: out of memory", who);
}

void vf__devgraph_plan_free(vf_graph *g)
{
    vf__devplan *dp = g->devplan;
    if (dp == NULL)
        return;
    for (uint32_t k = 0; dp->segs != NULL && k < dp->nsegs; k++)
        devrec_unref(dp->segs[k].rec); /* no launch is left */
    free(dp->nodes);
    free(dp->segs);
    free(dp->segnode);
    free(dp->cpunode);
    free(dp->pred);
    free(dp->carry);
    free(dp->ext);
    free(dp->svar);
    free(dp->swrite);
    free(dp);
    g->devplan = NULL;
}

void vf__devgraph_inst_free(vf__graph_inst *in)
{
    vf__devinst *di = in->dev;
    if (di == NULL)
        return;
    for (uint32_t k = 0; di->rec != NULL && k < in->g->devplan->nsegs; k++)
        devrec_unref(di->rec[k]);
    free(di->rec);
    free(di->wfence);
    free(di->inputs);
    free(di->events);
    free(di->nfence);
    free(di);
    in->dev = NULL;
}

/* The instance's scratch, made at its first launch; NULL without memory. */
static vf__devinst *devinst_of(vf__graph_inst *in)
{
    if (in->dev != NULL)
        return in->dev;
    const vf_graph *g = in->g;
    size_t nb = (size_t)(g->nb ? g->nb : 1);
    vf__devinst *di = vf__calloc(1, sizeof *di);
    if (di == NULL)
        return NULL;
    const vf__devplan *dp = g->devplan;
    di->rec = vf__calloc(dp->nsegs ? dp->nsegs : 1, sizeof *di->rec);
    di->wfence = vf__calloc(nb, sizeof *di->wfence);
    di->inputs = vf__malloc(((size_t)dp->max_inputs + 1) * sizeof *di->inputs);
    di->events = vf__calloc(dp->max_n ? dp->max_n : 1, sizeof *di->events);
    di->nfence = vf__calloc(dp->max_n ? dp->max_n : 1, sizeof *di->nfence);
    in->dev = di;
    if (di->rec == NULL || di->wfence == NULL || di->inputs == NULL ||
        di->events == NULL || di->nfence == NULL) {
        vf__devgraph_inst_free(in);
        return NULL;
    }
    return di;
}

/* --- a node's end -------------------------------------------------------- */

/* One of the launch's counts in `left` is over (a node, or the launch
 * op's release of its vars); the last ends the launch, which was pending
 * and active until then. */
static void left_over(vf__graph_inst *in)
{
    if (atomic_fetch_sub_explicit(&in->left, 1, memory_order_acq_rel) == 1)
        vf__graph_launch_end(in, VF__COUNT_PENDING | VF__COUNT_ACTIVE);
}

/* A node is over: its block ready for the next launch, counted out. */
static void node_over(vf__graph_inst *in, vf__op *op)
{
    vf_engine *e = in->g->engine; /* alive: the launch op is pending */
    vf__devrun_free(op);
    vf__graph_node_reset(op);
    unsigned wake = vf__engine_count_out(e, VF__COUNT_PENDING, true);
    if (VF__UNLIKELY(wake != 0))
        vf__engine_wake(e, wake);
    left_over(in);
}

void vf__graph_devnode_over(vf__op *op)
{
    node_over(op->dev->graph, op);
}

/* What a node's push would do to its vars once its body returned (exec.c's
 * finish, device_ops.c's release in flight): a failure known now goes to
 * what it writes (rule 9), and when it is done on the host, having run,
 * its versions are bumped (rule 8; work in flight bumps them when it
 * resolves). */
static void node_released(vf__op *op, bool done)
{
    for (int i = 0; i < op->nvars; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        if (!vf__dep_write(d))
            continue;
        vf__var *v = vf__dep_var(d);
        if (op->failure != NULL) {
            vf__failure_ref(op->failure);
            vf__var_set_failure(v, op->failure);
        }
        if (done && !op->skipped)
            vf__var_wrote(v);
    }
}

/* A node done on the host (skipped, or failed before its work could be
 * put in flight, or completed in its body): `done` and counts, as finish
 * does, and its end. */
static void node_done_here(vf__graph_inst *in, vf__op *op)
{
    vf_engine *e = in->g->engine;
    node_released(op, true);
    if (op->done != NULL)
        vf__exec_call_done(e, op->done, op->arg, op->status);
    vf__exec_count_op(e, op);
    node_over(in, op);
}

/* A node whose work is in flight, its fence left: to the completer, or,
 * with device_sync or on the naive engine, completed here (`sync`).
 * Returns whether it went to the completer. */
static bool node_in_flight(vf__graph_inst *in, vf__op *op, bool sync)
{
    node_released(op, false);
    op->dev->graph = in;
    if (sync) {
        vf__device_op_completed(op); /* waits for its event */
        return false;
    }
    vf__completer_add(&in->g->engine->dev.completer, op);
    return true;
}

/* Node i by hand: its push's body (see the top of the file). Returns
 * whether it went to the completer. */
static bool by_hand(vf__graph_inst *in, uint32_t i, int worker, bool shutdown,
                    bool sync)
{
    vf__op *op = in->ops[i];
    op->place = in->base + i;
    if (vf__device_op_run(op, worker, shutdown)) {
        node_done_here(in, op);
        return false;
    }
    return node_in_flight(in, op, sync);
}

/* --- the boundary and the device graph ---------------------------------- */

/* Let go of the segment's outside write fences (boundary). */
static void wfences_drop(vf__graph_inst *in, const devseg *sg, vf__devinst *di)
{
    const vf__devplan *dp = in->g->devplan;
    for (uint32_t x = sg->vars_at; x < sg->vars_at + sg->nvars; x++) {
        uint32_t b = dp->svar[x];
        if (di->wfence[b] != NULL) {
            vf__fence_unref(di->wfence[b]);
            di->wfence[b] = NULL;
        }
    }
}

/* Step 1 (top of the file) for segment `sg`: the fences its work follows,
 * into di->inputs (*ninputs of them, each naming a node by its index in
 * the segment) and di->wfence; false when the segment must go by hand
 * (the fences are let go of then). */
static bool boundary(vf__graph_inst *in, const devseg *sg, vf__devinst *di,
                     const vf__device_class *cls, uint32_t *ninputs)
{
    const vf_graph *g = in->g;
    const vf__devplan *dp = g->devplan;
    uint64_t place = in->base + dp->segnode[sg->nodes_at]; /* its first */
    uint32_t n = 0;
    bool ok = true;
    di->claims = vf__failure_claims_now(); /* before anything is looked at */
    for (uint32_t x = sg->vars_at; x < sg->vars_at + sg->nvars; x++) {
        uint32_t b = dp->svar[x];
        vf__var *v = g->bvars[b].var;
        vf__failure *f = atomic_load_explicit(&v->failure,
                                              memory_order_acquire);
        if (f != NULL && vf__failure_live_for(f, NULL, place))
            ok = false;
        vf__fence *fs[1 + VF__VAR_READ_FENCES];
        int k = vf__fences_of_var(v, true, false, fs);
        di->wfence[b] = NULL;
        if (k == 1) {
            vf__fence *wf = fs[0];
            if (wf->cls == cls)
                vf__fence_meet_if_claimed(g->engine, wf, di->claims);
            if (wf->cls != cls) {
                ok = false;
            } else if (atomic_load_explicit(&wf->resolved,
                                            memory_order_acquire)) {
                vf__failure *ff = wf->failure;
                if (ff != NULL && vf__failure_live_for(ff, NULL, place))
                    ok = false; /* known now: by hand */
            } else {
                di->wfence[b] = wf; /* kept: the nodes carry it */
                wf = NULL;
            }
            if (wf != NULL)
                vf__fence_unref(wf);
        }
        if (!dp->swrite[x])
            continue;
        k = vf__fences_of_var(v, false, true, fs);
        for (int r = 0; r < k; r++) {
            if (fs[r]->cls != cls)
                ok = false;
            else if (!atomic_load_explicit(&fs[r]->resolved,
                                           memory_order_acquire))
                di->inputs[n++] = (vf__devgraph_input){fs[r]->ev, 0, false};
            vf__fence_unref(fs[r]); /* the event outlives the launch call:
                                       the var's own reference holds it */
        }
    }
    for (uint32_t i = 0; i < sg->n; i++) {
        const devnode *dn = &dp->nodes[dp->segnode[sg->nodes_at + i]];
        for (uint32_t x = 0; x < dn->next; x++) {
            vf__fence *wf = di->wfence[dp->ext[dn->ext_at + x]];
            if (wf != NULL)
                di->inputs[n++] = (vf__devgraph_input){wf->ev, i, true};
        }
    }
    *ninputs = n;
    if (!ok)
        wfences_drop(in, sg, di);
    return ok;
}

/* A node whose function was called while recording, whose work is lost
 * (the recording or its launch failed with `rc`): it fails with that. */
static void lost_work(vf__graph_inst *in, vf__op *op, int rc)
{
    if (op->failure == NULL)
        vf__exec_op_failed(op, rc, vf_error_detail());
    node_done_here(in, op);
}

/* A new recording's block for segment `sg`, with room for the copied
 * arguments of its nodes at this launch (copied in); NULL without memory. */
static vf__devrec *devrec_new(vf__graph_inst *in, const devseg *sg)
{
    const vf_graph *g = in->g;
    const uint32_t *nodes = g->devplan->segnode + sg->nodes_at;
    size_t size = 0;
    for (size_t l = 0; l < sg->n; l++)
        size += (g->nodes[nodes[l]].arg_size + 15) / 16 * 16;
    vf__devrec *rec = vf__calloc(1, sizeof *rec);
    char *args = size != 0 ? vf__malloc(size) : NULL;
    if (rec == NULL || (size != 0 && args == NULL)) {
        free(rec);
        free(args);
        return NULL;
    }
    atomic_init(&rec->refs, 1);
    rec->cls = g->device->cls;
    rec->gen = in->dev_gen;
    rec->args = args;
    for (size_t l = 0, at = 0; l < sg->n; l++) {
        size_t n = g->nodes[nodes[l]].arg_size;
        if (n != 0)
            memcpy(args + at, in->ops[nodes[l]]->arg, n);
        at += (n + 15) / 16 * 16;
    }
    return rec;
}

/* Step 2, recording, into `rec`: each node's function called under
 * capture on `s`, given the recording's copy of its argument; rec->dg the
 * recorded graph (NULL when none is), *kept whether it covers every node
 * and may be kept. Returns the nodes whose functions were called (0: no
 * capture could begin; their work is in rec->dg, or, when it is NULL,
 * lost: each has failed and is over). */
static uint32_t record(vf__graph_inst *in, const devseg *sg, vf__devrec *rec,
                       vf__stream *s, int worker, bool *kept)
{
    const vf_graph *g = in->g;
    const vf__devplan *dp = g->devplan;
    const vf__device_class *cls = g->device->cls;
    *kept = false;
    if (cls->capture_begin(s) != 0)
        return 0;
    vf__devgraph_recording = s;
    vf_run run; /* not zero-initialized: the message is 256 bytes */
    run.worker = worker;
    run.cls = cls;
    run.stream = s;
    run.item_refs = NULL;
    uint32_t k = 0;
    size_t at = 0;
    int rc = 0;
    bool failed = false;
    while (k < sg->n && !failed) {
        uint32_t i = dp->segnode[sg->nodes_at + k];
        const devnode *dn = &dp->nodes[i];
        if ((rc = cls->capture_node(s, dp->pred + dn->pred_at, dn->npred,
                                    dp->carry + dn->carry_at, dn->ncarry)) != 0)
            break;
        size_t size = g->nodes[i].arg_size;
        vf__op *op = in->ops[i];
        op->place = in->base + i;
        k++;
        run.op = op;
        run.name = op->name;
        void *own = op->arg;
        if (size != 0)
            op->arg = rec->args + at;
        at += (size + 15) / 16 * 16;
        vf__exec_call_fn(op, &run);
        op->arg = own;
        failed = op->failure != NULL; /* the rest by hand */
    }
    vf__devgraph_recording = NULL;
    int erc = cls->capture_end(s, rc == 0 ? &rec->dg : NULL);
    if (rc == 0)
        rc = erc;
    if (rc != 0) {
        rec->dg = NULL;
        for (uint32_t l = 0; l < k; l++)
            lost_work(in, in->ops[dp->segnode[sg->nodes_at + l]], rc);
        return k;
    }
    *kept = k == sg->n && !failed;
    return k;
}

/* A node whose function failed while it was recorded (record), its
 * device graph now launched: had the work it follows failed, its push
 * would have been skipped, its function never called (rule 9; a pushed
 * op's own_failure_or_skip, device_ops.c). That work is met on the host
 * now, as the push meets it (the failing path only): its inputs that
 * carry a failure (d->inputs, the first d->ncarry), each the fence of an
 * earlier node of the launch or of a write before it. A failure it
 * inherits replaces its own, taken back from the log (nobody saw it: it
 * is not the op's), before its vars are given a failure. */
static void recorded_failure_or_skip(vf_engine *e, vf__op *op,
                                     const vf__devrun *d)
{
    vf__failure *inherited = NULL;
    for (int k = 0; k < d->ncarry; k++) {
        vf__failure *f = vf__fence_host_wait(e, d->inputs[k]);
        if (f != NULL && vf__failure_live_for(f, op->up, op->place) &&
            vf__failure_before(f, inherited))
            inherited = f;
    }
    if (inherited == NULL)
        return;
    vf__failure_log_retract(&e->failures, op->failure, op->place);
    vf__exec_op_skipped(op, inherited);
}

/* The read fence of a device graph's launch on `s`: an event recorded
 * after it, so complete once all of its nodes are (their own events
 * complete in no order, where a var's read fences must: fences.h); NULL
 * when none could be made. */
static vf__fence *launch_fence(const vf__device_class *cls, vf__stream *s)
{
    vf__event *ev = NULL;
    if (cls->record(s, &ev) != 0)
        return NULL;
    vf__fence *rf = vf__calloc(1, sizeof *rf);
    if (rf == NULL) {
        cls->event_release(ev);
        return NULL;
    }
    atomic_init(&rf->refs, 1);
    rf->cls = cls;
    rf->ev = ev;
    rf->stream = s;
    atomic_init(&rf->resolved, false);
    return rf;
}

/* Step 3 for the first `m` nodes of segment `sg`, which a launch of its
 * device graph ran: fences (each node's own on what it writes, the
 * launch's on what it reads, resolved with the last node), then the
 * completer. Returns how many went to the completer. */
static uint32_t nodes_launched(vf__graph_inst *in, const devseg *sg,
                               vf__devinst *di, vf__stream *s, uint32_t m,
                               bool sync)
{
    char label[VF__OP_LABEL_MAX];
    const vf_graph *g = in->g;
    const vf__devplan *dp = g->devplan;
    const vf__device_class *cls = g->device->cls;
    vf__fence *rf = launch_fence(cls, s);
    uint32_t sent = 0;
    for (uint32_t l = 0; l < m; l++) {
        uint32_t i = dp->segnode[sg->nodes_at + l];
        vf__op *op = in->ops[i];
        const devnode *dn = &dp->nodes[i];
        op->place = in->base + i;
        int cap = (int)(dn->next + dn->ncarry);
        vf__devrun *d = vf__devrun_new(cls, cap);
        vf__fence *f = vf__calloc(1, sizeof *f);
        if (d == NULL || f == NULL) {
            /* Its work runs, but nothing can follow it: wait for it here
             * and report it failed (out of memory), as a push would. */
            free(d);
            free(f);
            cls->event_wait(di->events[l], NULL);
            cls->event_release(di->events[l]);
            di->events[l] = NULL;
            di->nfence[l] = NULL;
            lost_work(in, op,
                      vf__fail(VF_ENOMEM, "device %s: out of memory",
                               vf__op_label(op->name, op->place, label)));
            if (l == m - 1 && rf != NULL) { /* nobody to resolve it */
                cls->event_wait(rf->ev, NULL);
                atomic_store_explicit(&rf->resolved, true,
                                      memory_order_release);
            }
            continue;
        }
        atomic_init(&f->refs, 1); /* the op's */
        f->cls = cls;
        f->ev = di->events[l]; /* the event's reference is the fence's */
        /* Without the launch's fence, its own stands for its reads too:
         * a stream of its own then, so that none replaces another. */
        f->stream = rf != NULL ? s : (const vf__stream *)f;
        atomic_init(&f->resolved, false);
        f->claims = di->claims;
        d->graph = in;
        if (l == m - 1 && rf != NULL) {
            vf__fence_ref(rf);
            d->graph_end = rf;
        }
        d->fence = f;
        d->claims = di->claims; /* its fence's */
        /* No seals: a recorded function only submits work. */
        /* What it carries from: the outside writes it uses first, then the
         * nodes it carries from (their fences made before it). */
        for (uint32_t x = 0; x < dn->next; x++) {
            vf__fence *wf = di->wfence[dp->ext[dn->ext_at + x]];
            if (wf != NULL) {
                vf__fence_ref(wf);
                d->inputs[d->ninputs++] = wf;
            }
        }
        for (uint32_t c = 0; c < dn->ncarry; c++) {
            vf__fence *pf = di->nfence[dp->carry[dn->carry_at + c]];
            if (pf != NULL) {
                vf__fence_ref(pf);
                d->inputs[d->ninputs++] = pf;
            }
        }
        d->ncarry = d->ninputs;
        op->dev = d;
        if (VF__UNLIKELY(op->failure != NULL) && !op->skipped)
            recorded_failure_or_skip(g->engine, op, d);
        di->nfence[l] = f;
        vf__fences_leave_rw(op, f, rf != NULL ? rf : f);
        sent += node_in_flight(in, op, sync);
    }
    vf__fence_unref(rf);
    return sent;
}

/* The recording this launch runs (a reference, into di->rec): the
 * graph's when it has the launch's arguments; else NULL and *record_now
 * when this launch records (no other is recording: then this one is). */
static vf__devrec *recording_of(vf__graph_inst *in, devseg *sg,
                                bool *record_now)
{
    vf_graph *g = in->g;
    vf__devrec *rec = NULL, *stale = NULL;
    *record_now = false;
    pthread_mutex_lock(&g->lock);
    if (sg->rec != NULL && sg->rec->gen == in->dev_gen) {
        rec = sg->rec;
        atomic_fetch_add_explicit(&rec->refs, 1, memory_order_relaxed);
    } else if (!sg->recording) {
        sg->recording = *record_now = true;
        stale = sg->rec;
        sg->rec = NULL;
    }
    pthread_mutex_unlock(&g->lock);
    devrec_unref(stale);
    return rec;
}

/* A recording made by this launch is over: kept as the graph's when it
 * covers every node (its reference passes to the graph), else let go. */
static void recording_done(vf__graph_inst *in, devseg *sg, vf__devrec *rec,
                           bool kept)
{
    vf_graph *g = in->g;
    pthread_mutex_lock(&g->lock);
    sg->recording = false;
    if (kept && rec != NULL && sg->rec == NULL) {
        sg->rec = rec;
        rec = NULL;
    }
    pthread_mutex_unlock(&g->lock);
    devrec_unref(rec);
}

/* Steps 1-3 for segment `sg` on stream `s`: returns how many of its
 * nodes, from its first, are done with (the rest go by hand), *sent how
 * many of them went to the completer. */
static uint32_t replay_segment(vf__graph_inst *in, devseg *sg, vf__stream *s,
                               int worker, bool sync, uint32_t *sent)
{
    const vf_graph *g = in->g;
    const vf__device_class *cls = g->device->cls;
    vf__devinst *di = devinst_of(in);
    uint32_t ninputs = 0, m = 0;
    *sent = 0;
    if (di == NULL || !boundary(in, sg, di, cls, &ninputs))
        return 0;
    bool fresh = false, kept = false;
    vf__devrec *rec = recording_of(in, sg, &fresh);
    if (rec == NULL && fresh) { /* this launch records */
        if ((rec = devrec_new(in, sg)) != NULL) {
            atomic_store_explicit(&rec->refs, 2, memory_order_relaxed);
            m = record(in, sg, rec, s, worker, &kept);
        }
        recording_done(in, sg, rec, kept);
        if (rec == NULL || rec->dg == NULL) { /* nothing to launch */
            devrec_unref(rec);
            goto out;
        }
    } else if (rec == NULL) { /* another launch is recording */
        goto out;
    } else {
        m = sg->n;
    }
    di->rec[sg - g->devplan->segs] = rec; /* let go of at the launch's end */
    if (m < sg->n) { /* a part: the inputs of the nodes it holds */
        uint32_t kept_inputs = 0;
        for (uint32_t i = 0; i < ninputs; i++)
            if (di->inputs[i].node < m)
                di->inputs[kept_inputs++] = di->inputs[i];
        ninputs = kept_inputs;
    }
    int rc = cls->graph_launch(rec->dg, s, di->inputs, ninputs, di->events);
    if (rc == 0) {
        *sent = nodes_launched(in, sg, di, s, m, sync);
    } else if (fresh) { /* the calls are made, their work is lost */
        for (uint32_t i = 0; i < m; i++)
            lost_work(in, in->ops[g->devplan->segnode[sg->nodes_at + i]], rc);
    } else {
        m = 0; /* nothing called: all by hand */
    }
out:
    wfences_drop(in, sg, di);
    return m;
}

/* A CPU node of a graph with device replay, by hand, where the launch
 * runs: its push's body and finish (exec.c's run_body and finish for a
 * user op on an engine with devices), its vars' device work met on the
 * host first. */
static void cpu_by_hand(vf__graph_inst *in, uint32_t i, int worker,
                        bool shutdown)
{
    vf__op *op = in->ops[i];
    op->place = in->base + i;
    op->status = 0;
    vf__fences_host_wait(op);
    vf__fences_clear_written(op);
    vf__failure *f = NULL;
    if (shutdown)
        vf__exec_op_skipped(op, NULL);
    else if (!op->def->no_skip &&
             (f = vf__exec_inherited_failure(op, NULL, 0, op->up, op->place,
                                             true)) != NULL)
        vf__exec_op_skipped(op, f);
    else
        vf__exec_run_fn(op, worker);
    node_done_here(in, op);
}

void vf__devgraph_launch_over(vf__graph_inst *in)
{
    vf__devinst *di = in->dev;
    for (uint32_t k = 0; di != NULL && k < in->g->devplan->nsegs; k++) {
        devrec_unref(di->rec[k]);
        di->rec[k] = NULL;
    }
}

/* --- the launch op ------------------------------------------------------- */

/* Its kind's run (op.h): the whole launch (the top of the file). True when
 * every node is over now (finish lets go of its vars, then `finished`);
 * false when some are in flight (released_in_flight follows). */
static bool devlaunch_run(vf__op *op, int worker, bool shutdown)
{
    vf__graph_inst *in = vf__graph_bind(op);
    if (VF__UNLIKELY(in == NULL)) {
        /* Its ops fail on the host: the device work before them met
         * there, as a host op meets it, before their failures are
         * written. */
        vf__fences_host_wait(op);
        vf__fences_clear_written(op);
        vf__graph_launch_lost(op);
        return true; /* finished as an op: devlaunch_finished */
    }
    const vf_graph *g = in->g;
    vf_engine *e = vf__op_engine(op);
    uint32_t n = (uint32_t)g->n;
    in->base = op->place;
    atomic_store_explicit(&in->left, n + 1, memory_order_relaxed);
    vf__engine_count_in(e, (uint64_t)n * VF__COUNT_PENDING);
    bool sync = e->dev.sync || op->def->pool == NULL;
    vf__stream *s = NULL;
    if (op->def->pool != NULL)
        s = vf__this_worker()->stream;
    else if (vf__device_thread_stream(e, g->device, &s) != 0)
        s = NULL; /* each node reports it, by hand */
    /* Segment after segment: its device graph, then its CPU nodes (see
     * devseg). */
    const vf__devplan *dp = g->devplan;
    uint32_t sent = 0;
    for (uint32_t k = 0; k < dp->nsegs; k++) {
        devseg *sg = &dp->segs[k];
        uint32_t done = 0, gone = 0;
        if (sg->n != 0 && s != NULL && !shutdown)
            done = replay_segment(in, sg, s, worker, sync, &gone);
        sent += gone;
        for (uint32_t l = done; l < sg->n; l++)
            sent += by_hand(in, dp->segnode[sg->nodes_at + l], worker, shutdown,
                            sync);
        for (uint32_t c = 0; c < sg->ncpu; c++)
            cpu_by_hand(in, dp->cpunode[sg->cpu_at + c], worker, shutdown);
    }
    if (sent != 0)
        return false;
    /* Every node is over: `left` is down to the launch's own one. */
    atomic_store_explicit(&in->left, 0, memory_order_relaxed);
    return true;
}

/* Its kind's released_in_flight (op.h): the launch lets go of its vars
 * while its nodes' work is in flight (their fences are on the vars). */
static void devlaunch_released(vf__op *op, vf__readylist *ready)
{
    vf__graph_inst *in = op->graph; /* the op's vars are the graph's */
    vf__device_release_vars(op, NULL, ready);
    left_over(in); /* after the count in: it may end the launch */
}

/* Its kind's finished (op.h): a launch over in its run; finish has let go
 * of its vars and counts it out. */
static void devlaunch_finished(vf__op *op)
{
    vf__graph_inst *in = op->graph;
    vf_graph *g = in->g;
    if (VF__UNLIKELY(vf__graph_is_stub(in))) { /* vf__graph_launch_lost */
        vf__graph_stub_release(op);
        vf__graph_unref(g);
        return;
    }
    in->launch = NULL;
    op->graph = NULL;
    vf__devgraph_launch_over(in);
    vf__graph_inst_put(in);
    vf__graph_unref(g);
}

const vf__op_kind vf__kind_devlaunch = {
    .name = "graph launch",
    .run = devlaunch_run,
    .released_in_flight = devlaunch_released,
    .finished = devlaunch_finished,
    .dropped = vf__graph_launch_dropped,
    .flags = VF__KIND_NUMBERED | VF__KIND_HELD | VF__KIND_OWN_FENCES |
             VF__KIND_LAUNCH};
