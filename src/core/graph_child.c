/* graph_child.c: a replay's node's children on the vars it uses: the
 * graph's hold on such a var splits around them (graph.h). */
#include "core/graph.h"
#include "core/graph_impl.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "core/defs.h"
#include "core/exec.h"
#include "core/var.h"

/* The index of v among the graph's vars (sorted by address), or -1. */
static int bvar_index(const vf_graph *g, const vf__var *v)
{
    int lo = 0, hi = g->nb - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (g->bvars[mid].var == v)
            return mid;
        if ((uintptr_t)g->bvars[mid].var < (uintptr_t)v)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

bool vf__graph_launch_takes(const vf__op *nd, const vf__var *v, uint32_t gen,
                            bool *write)
{
    const vf_graph *g = nd->graph->g;
    int b = bvar_index(g, v);
    /* Another generation is the graph's var only while the graph still
     * holds the slot (vf_var_of revived it behind the graph's hold, where
     * the same pushes would have met the var itself); once the graph let
     * go, the slot's delete may have run and a new var taken it. */
    if (b < 0 ||
        (g->bvars[b].gen != gen &&
         atomic_load_explicit(&nd->graph->bleft[b], memory_order_acquire) == 0))
        return false;
    *write = g->bvars[b].write;
    return true;
}

/* How node i of the graph's plan uses v (vf__op_uses of its push). */
static int plan_uses(const vf_graph *g, uint32_t i, const vf__var *v)
{
    for (int j = 0; j < g->nodes[i].nvars; j++)
        if (g->nodes[i].vars[j].var == v)
            return g->nodes[i].vars[j].write ? VF__USES_TO_WRITE
                                             : VF__USES_TO_READ;
    return VF__USES_NOT;
}

/* The first node after p that writes v, or g->n. */
static uint32_t next_write(const vf_graph *g, uint32_t p, const vf__var *v)
{
    uint32_t i = p + 1;
    while (i < g->n && plan_uses(g, i, v) != VF__USES_TO_WRITE)
        i++;
    return i;
}

/* A read of boundary var b a running node holds for its children until its
 * finish (graph.h). */
typedef struct vf__graph_pin {
    uint64_t place; /* the node's */
    int b;
    /* The rest op whose write place became this read (its hold's
     * reference goes with the pin), or NULL. */
    vf__op *was_holder;
    struct vf__graph_pin *next;
} vf__graph_pin;

/* The next of the uses of v that come right after node p, as the var's
 * queue would have them: the write after p, or the reads up to the next
 * write (each later use waits for them, directly or through them). Call
 * with *at == p first; false when none is left. */
static bool use_after(const vf_graph *g, const vf__var *v, uint32_t p,
                      uint32_t *at)
{
    if (*at != p && plan_uses(g, *at, v) == VF__USES_TO_WRITE)
        return false; /* the write after p was the one */
    for (uint32_t i = *at + 1; i < g->n; i++) {
        int use = plan_uses(g, i, v);
        if (use == VF__USES_NOT)
            continue;
        if (use == VF__USES_TO_WRITE && *at != p)
            return false; /* the write after the reads */
        *at = i;
        return true;
    }
    return false;
}

/* The op whose place holds boundary var b for the instance now. */
static vf__op *holder_of(const vf__graph_inst *in, int b)
{
    vf__op *h = atomic_load_explicit(&in->split[b].holder,
                                     memory_order_acquire);
    return h != NULL ? h : in->launch;
}

/* A node of a CPU replay (a device replay's nodes have no instance in
 * `graph`: graph.h). */
static bool is_replay_node(const vf__op *op)
{
    return op != NULL && (op->def->kind->flags & VF__KIND_GRAPH) &&
           op->graph != NULL;
}

uint64_t vf__graph_holder_place(const vf__op *holder, const vf__var *v,
                                const vf__op *parent)
{
    if (!is_replay_node(parent))
        return 0;
    const vf__graph_inst *in = parent->graph;
    int b = bvar_index(in->g, v);
    /* A node that writes v; on the naive engine, one that does not use
     * it too: the nodes before it have finished, so the hold stands for
     * the graph's later uses only (graph.h). */
    int use = vf__op_uses(parent, v);
    return b >= 0 && holder_of(in, b) == holder &&
                   (use == VF__USES_TO_WRITE ||
                    (use == VF__USES_NOT && in->in_order))
               ? parent->place
               : 0;
}

vf__dep *vf__graph_rest_ahead(const vf__var *v, const vf__op *parent)
{
    if (!is_replay_node(parent) || !parent->graph->in_order)
        return NULL;
    const vf__graph_inst *in = parent->graph;
    int b = bvar_index(in->g, v);
    if (b < 0 ||
        atomic_load_explicit(&in->split[b].downgraded, memory_order_relaxed))
        return NULL; /* a read the graph's nodes hold: not queued */
    const vf__op *h = atomic_load_explicit(&in->split[b].holder,
                                           memory_order_acquire);
    if (h == NULL || h->place <= parent->place)
        return NULL; /* the launch's, or one before the node */
    vf__dep *d = vf__op_dep(h, 0);
    return v->nreaders == VF__WRITE_RUNNING && v->head == d ? NULL : d;
}

bool vf__graph_hold_is_over(const vf__op *holder, const vf__op *cur)
{
    if (!vf__graph_holds_for(holder))
        return false;
    /* A launch op's may be replaced as it starts, on another thread
     * (vf__graph_bind: the stand-in by its instance, with release). */
    const vf__graph_inst *in = __atomic_load_n(&holder->graph,
                                               __ATOMIC_ACQUIRE);
    if (!in->in_order)
        return false;
    if (is_replay_node(cur) && cur->graph == in)
        return true; /* a node of it */
    /* The holder, queued on the var, keeps its instance and launch. */
    uint64_t root = cur->up != NULL ? cur->up->root : 0;
    return root >= in->base && root < in->base + in->g->n;
}

const vf__op *vf__graph_var_holder(const vf__op *nd, const vf__var *v)
{
    const vf__graph_inst *in = nd->graph;
    int b = bvar_index(in->g, v);
    return b >= 0 ? holder_of(in, b) : in->launch;
}

/* A rest op's argument: its var, and its references: one for its hold
 * (its place holds the var for the graph, or is a node's read since a
 * child read beside it: graph.h), one for its run (from its place's grant
 * to rest_run's end, which may come after the hold's: a granted rest op
 * whose run had not begun was freed by its hold's end, and then run:
 * found by the second reviewer of the splits). */
typedef struct rest_state {
    int b;
    atomic_int refs;
    atomic_bool ran; /* its run has come (vf__graph_in_order_waits) */
} rest_state;

/* A rest op for boundary var b of `in`, whose place the graph's uses of v
 * right after node p wait for (rest_run): it stands after p and its
 * children in the serial program (var.c: queued_before), as the node
 * after p. NULL without memory. */
static vf__op *rest_new(vf__graph_inst *in, int b, uint32_t p)
{
    const vf_graph *g = in->g;
    const vf__opdef *def = vf__defs_share(
        &g->engine->defs, &(vf__opdef){.engine = g->engine,
                                       .kind = &vf__kind_graph_rest,
                                       .inline_run = true});
    vf__op *rest = def != NULL ? vf__op_alloc_arg(1, sizeof(rest_state)) : NULL;
    if (rest == NULL)
        return NULL;
    rest->def = def;
    rest_state st = {.b = b};
    if (vf__op_copy_arg(rest, "graph rest", &st, sizeof st) != 0) {
        vf__op_free(rest);
        return NULL;
    }
    atomic_init(&((rest_state *)rest->arg)->refs, 2);
    atomic_init(&((rest_state *)rest->arg)->ran, false);
    rest->fn = NULL;
    rest->done = NULL;
    rest->name = "graph rest";
    rest->place = in->base + p + 1;
    rest->graph = in;
    vf__op_stage_vars(rest, &(vf__varref){.var = g->bvars[b].var,
                                          .gen = g->bvars[b].gen,
                                          .write = true});
    atomic_store_explicit(&rest->wait, 1, memory_order_relaxed);
    return rest;
}

/* Free a rest op never queued (made and not needed). */
static void rest_free(vf__op *rest)
{
    rest->graph = NULL; /* the side block's word: none of its own */
    vf__op_free(rest);
}

/* A rest op's hold, or its run, is over: the last of the two frees it. */
static void rest_unref(vf__op *rest)
{
    if (atomic_fetch_sub_explicit(&((rest_state *)rest->arg)->refs, 1,
                                  memory_order_acq_rel) == 1)
        rest_free(rest);
}

/* The place at the head of v, running its write for instance `in` (the
 * launch op's, or a rest op's), or NULL (v's lock held). */
static vf__op *hold_running(const vf__var *v, const vf__graph_inst *in)
{
    if (v->nreaders != VF__WRITE_RUNNING || v->head == NULL)
        return NULL;
    vf__op *h = vf__dep_op(v->head);
    return vf__graph_holds_for(h) && h->graph == in ? h : NULL;
}

/* A child of node `parent` (at index p) reads v, boundary var b, which
 * `parent` only reads and the graph holds to write: it may run beside the
 * node at once (graph.h). Decided under v's lock, on the hold that heads v
 * then (a holder looked at before the lock may have been converted and
 * let go meanwhile by another reading node: the child then queued at the
 * var's end, found by the second reviewer of the splits). 0, or
 * VF_ENOMEM. */
static int read_beside(vf__graph_inst *in, vf__op *parent, uint32_t p, int b,
                       const char *who)
{
    const vf_graph *g = in->g;
    vf__var *v = g->bvars[b].var;
    /* The graph's hold reads v (a stale false only adds a pin: below). */
    if (atomic_load_explicit(&in->split[b].downgraded, memory_order_relaxed))
        return 0;
    /* The graph's next write of v: before p's finish, it waits for p. */
    uint32_t w = next_write(g, p, v);
    vf__op *rest = w < g->n ? rest_new(in, b, w - 1) : NULL;
    vf__graph_pin *pin = vf__malloc(sizeof *pin);
    if ((w < g->n && rest == NULL) || pin == NULL) {
        if (rest != NULL)
            rest_free(rest);
        free(pin);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    /* Before the rest op's place can be granted (at p's finish at the
     * earliest): it takes the count back (rest_run). Node w waits for p
     * (p reads v, w writes it next), which runs: w's count is above zero
     * here, and the add can be taken back below. */
    if (rest != NULL && !in->in_order)
        atomic_fetch_add_explicit(&in->ops[w]->wait, 1, memory_order_relaxed);
    vf__dep *first_read = NULL;
    int nreads = 0;
    bool pinned = false;
    vf__spin_lock(&v->lock);
    vf__op *holder = hold_running(v, in);
    if (holder != NULL && rest != NULL) {
        /* The hold's place becomes the node's read (a pin); the rest op's
         * place holds v for the graph from now on. */
        if (in->in_order) /* queued: its run to come */
            atomic_fetch_add(&in->rests_unrun, 1);
        vf__var_hold_to_read_locked(v, vf__op_dep(rest, 0));
        atomic_store_explicit(&in->split[b].holder, rest, memory_order_release);
        pin->was_holder = holder != in->launch ? holder : NULL;
        rest = NULL;
        pinned = true;
    } else if (holder != NULL) {
        /* The graph writes v no more: its hold reads it from now on. */
        nreads = vf__var_downgrade_locked(v, &first_read);
        atomic_store_explicit(&in->split[b].downgraded, true,
                              memory_order_relaxed);
    } else if (v->nreaders > 0 && v->nreaders != VF__WRITE_RUNNING) {
        v->nreaders++; /* reads run for the graph: one more, the node's */
        pin->was_holder = NULL;
        pinned = true;
    }
    vf__spin_unlock(&v->lock);
    if (rest != NULL) { /* not needed: its count goes back */
        if (!in->in_order)
            atomic_fetch_sub_explicit(&in->ops[w]->wait, 1,
                                      memory_order_relaxed);
        rest_free(rest);
    }
    if (pinned) {
        pin->place = parent->place;
        pin->b = b;
        vf__spin_lock(&in->pins_lock);
        pin->next = in->pins;
        in->pins = pin;
        vf__spin_unlock(&in->pins_lock);
        parent->splits = true;
    } else {
        free(pin);
    }
    if (nreads != 0) { /* reads queued behind the downgraded hold */
        vf__readylist ready;
        vf__readylist_init(&ready);
        vf__var_release_reads(v, first_read, nreads, holder, &ready);
        vf__engine_count_in(g->engine,
                            (uint64_t)ready.count * VF__COUNT_ACTIVE);
        vf__exec_dispatch_ready(&ready);
    }
    return 0;
}

/* Whether the graph's hold on v, boundary var b of `in`, is a running
 * write of its launch or rest op (not let go, not made a read). */
static bool holds_to_write(const vf__graph_inst *in, int b)
{
    vf__var *v = in->g->bvars[b].var;
    vf__spin_lock(&v->lock);
    bool held = hold_running(v, in) != NULL;
    vf__spin_unlock(&v->lock);
    return held;
}

int vf__graph_child_pushed(vf__op *parent, const vf__op *child, const char *who)
{
    if (!is_replay_node(parent))
        return 0;
    vf__graph_inst *in = parent->graph;
    const vf_graph *g = in->g;
    uint32_t p = (uint32_t)(parent->place - in->base);
    for (int i = 0; i < child->nvars; i++) {
        const vf__dep *cd = vf__op_dep(child, i);
        const vf__var *v = vf__dep_var(cd);
        int use = vf__op_uses(parent, v);
        int b = use != VF__USES_NOT || in->in_order ? bvar_index(g, v) : -1;
        if (b < 0)
            continue;
        if (use == VF__USES_TO_READ) {
            /* A read beside the node's, where the graph writes v later. */
            int rc = !vf__dep_write(cd) && g->bvars[b].write
                         ? read_beside(in, parent, p, b, who)
                         : 0;
            if (rc != 0)
                return rc;
            continue;
        }
        /* On a var the node does not use, only where the nodes run one
         * after the other (the naive engine), while the graph holds it to
         * write: the child went ahead behind that hold (var.c:
         * holder_place, through vf__graph_holder_place); elsewhere it takes
         * its place at its push, after the graph's later ops. Under v's
         * lock, though only this thread changes the graph's holds then
         * (its nodes and their children's pushes). */
        if (use == VF__USES_NOT && !holds_to_write(in, b))
            continue;
        /* Split already (one node writes v at a time: its own), or the
         * node is v's last use, whose finish lets v go to the children. */
        if (atomic_load_explicit(&in->split[b].pending, memory_order_relaxed) !=
            NULL)
            continue;
        uint32_t at = p;
        if (!use_after(g, v, p, &at))
            continue;
        vf__op *rest = rest_new(in, b, p);
        if (rest == NULL)
            return vf__fail(VF_ENOMEM, "%s: out of memory", who);
        /* Not ready before p's finish (each waits for p): one count more
         * each, for the rest op to take back once p's children are over.
         * The naive engine's in-order run keeps no counts: it runs the
         * children before the next node (exec.c). */
        if (!in->in_order)
            do
                atomic_fetch_add_explicit(&in->ops[at]->wait, 1,
                                          memory_order_relaxed);
            while (use_after(g, v, p, &at));
        /* Released: another node's finish may look at it (its place). */
        atomic_store_explicit(&in->split[b].pending, rest,
                              memory_order_release);
        parent->splits = true;
    }
    return 0;
}

/* Node `rest->place - 1`'s finish: the rest op's place behind its
 * children on var b, and the graph's place before them lets the var go. */
static void split(vf__graph_inst *in, int b, vf__op *rest, vf__readylist *ready)
{
    vf__var *v = in->g->bvars[b].var;
    vf__op *holder = holder_of(in, b);
    if (in->in_order) /* queued: its run to come */
        atomic_fetch_add(&in->rests_unrun, 1);
    vf__spin_lock(&v->lock);
    bool now = vf__var_insert_rest(v, vf__op_dep(rest, 0), holder);
    /* Under the lock, where a node's wait looks the holder up (push.c). */
    atomic_store_explicit(&in->split[b].holder, rest, memory_order_release);
    vf__spin_unlock(&v->lock);
    VF__ASSERT(!now); /* the graph writes v: held to write */
    (void)now;
    vf__var_complete_write(v, holder, NULL, false, ready);
    if (holder != in->launch)
        rest_unref(holder); /* an earlier split's: its hold is over */
}

/* The reads node `op` held for its children (pins) let go. */
static void pins_finished(vf__graph_inst *in, const vf__op *op,
                          vf__readylist *ready)
{
    vf__graph_pin *mine = NULL;
    vf__spin_lock(&in->pins_lock);
    for (vf__graph_pin **at = &in->pins; *at != NULL;) {
        vf__graph_pin *pin = *at;
        if (pin->place == op->place) {
            *at = pin->next;
            pin->next = mine;
            mine = pin;
        } else {
            at = &pin->next;
        }
    }
    vf__spin_unlock(&in->pins_lock);
    while (mine != NULL) {
        vf__graph_pin *pin = mine;
        mine = pin->next;
        vf__var_complete_read(in->g->bvars[pin->b].var, op, ready);
        if (pin->was_holder != NULL)
            rest_unref(pin->was_holder); /* its place's read is over */
        free(pin);
    }
}

/* The splits node `op`'s children left pending (their rest ops, placed
 * right after it) are made; with `unused_only`, only on the vars `op`
 * does not use (those it uses it holds to its finish). */
static void split_pending(vf__graph_inst *in, const vf__op *op,
                          bool unused_only, vf__readylist *ready)
{
    for (int b = 0; b < in->g->nb; b++) {
        vf__op *rest = atomic_load_explicit(&in->split[b].pending,
                                            memory_order_acquire);
        if (rest == NULL || rest->place != op->place + 1 ||
            (unused_only &&
             vf__op_uses(op, in->g->bvars[b].var) != VF__USES_NOT))
            continue; /* another running node's, or held to its finish */
        atomic_store_explicit(&in->split[b].pending, NULL,
                              memory_order_relaxed);
        split(in, b, rest, ready);
    }
}

void vf__graph_splits_finished(vf__graph_inst *in, vf__op *op,
                               vf__readylist *ready)
{
    op->splits = false;
    pins_finished(in, op, ready);
    split_pending(in, op, false, ready);
}

void vf__graph_child_queued(vf__op *op)
{
    if (!is_replay_node(op) || !op->graph->in_order || !op->splits)
        return;
    vf__graph_inst *in = op->graph;
    vf__readylist ready;
    vf__readylist_init(&ready);
    split_pending(in, op, true, &ready);
    /* Each ready as at its push: run now, inside it (exec.c). */
    vf__engine_count_in(in->g->engine,
                        (uint64_t)ready.count * VF__COUNT_ACTIVE);
    vf__op *r;
    while ((r = vf__readylist_pop(&ready)) != NULL)
        vf__exec_dispatch_pushed(r, true);
}

void vf__graph_holder_let_go(vf__graph_inst *in, int b, vf__readylist *ready)
{
    const vf_graph *g = in->g;
    vf__var *v = g->bvars[b].var;
    vf__op *holder = holder_of(in, b);
    bool write = g->bvars[b].write &&
                 !atomic_load_explicit(&in->split[b].downgraded,
                                       memory_order_relaxed);
    atomic_store_explicit(&in->split[b].downgraded, false,
                          memory_order_relaxed);
    if (holder != in->launch) {
        /* Under v's lock, before the rest op may go: a node's wait looks
         * its graph's holder up there (push.c), and never meets a freed
         * one. */
        vf__spin_lock(&v->lock);
        atomic_store_explicit(&in->split[b].holder, NULL, memory_order_relaxed);
        vf__spin_unlock(&v->lock);
    }
    if (write) {
        /* The launch's nodes wrote v, each run or skipped in push order
         * (a node is top level: no later op's failure reaches it), so v's
         * mark (var.h) goes: once here, not at each node's write. */
        vf__var_recomputed(v);
        vf__var_complete_write(v, holder, NULL, false, ready);
    } else
        vf__var_complete_read(v, holder, ready);
    if (holder != in->launch)
        rest_unref(holder);
}

/* A rest op's place is granted (the node's children on its var are over):
 * it gives the graph's next uses of the var their counts back, and holds
 * the var for the graph (its work in flight) until the last use lets it
 * go. Its active count passes to the first node it makes ready. */
static bool rest_run(vf__op *rest, int worker, bool shutdown)
{
    (void)worker;
    (void)shutdown; /* the nodes see the notice themselves */
    vf__graph_inst *in = rest->graph;
    const vf_graph *g = in->g;
    vf_engine *e = g->engine;
    rest_state *st = rest->arg;
    vf__var *v = g->bvars[st->b].var;
    /* A child's failure on v: the nodes that read it look (graph.h). */
    if (atomic_load_explicit(&v->failure, memory_order_acquire) != NULL)
        atomic_store_explicit(&in->failures, true, memory_order_relaxed);
    /* Its run has come, which the in-order run may have stopped for: then
     * it goes on here, with this op's active count (sequentially
     * consistent, against vf__graph_in_order_waits's store and look). */
    bool resume = false;
    if (in->in_order) {
        atomic_store(&st->ran, true);
        atomic_fetch_sub(&in->rests_unrun, 1);
        atomic_fetch_add(&in->rests_run, 1);
        resume = atomic_exchange(&in->suspended, false);
    }
    vf__readylist ready;
    vf__readylist_init(&ready);
    if (!in->in_order) {
        uint32_t p = (uint32_t)(rest->place - 1 - in->base);
        for (uint32_t at = p; use_after(g, v, p, &at);) {
            vf__op *next = in->ops[at];
            if (vf__op_release(next, 1)) {
                next->place = in->base + at;
                vf__readylist_add(&ready, next);
            }
        }
    }
    if (ready.count != 0) {
        if (ready.count > 1)
            vf__engine_count_in(e,
                                (uint64_t)(ready.count - 1) * VF__COUNT_ACTIVE);
        vf__exec_dispatch_nodes(&ready);
    } else if (!resume) {
        unsigned wake = vf__engine_count_out(e, VF__COUNT_ACTIVE, true);
        if (wake != 0)
            vf__engine_wake(e, wake);
    }
    rest_unref(rest); /* its run is over; its place holds v on */
    if (resume)       /* the launch may end in it: nothing of it read after */
        vf__exec_run_in_order(in->ops, (uint32_t)g->n, in->base, in->resume_at);
    return false; /* holds v until the graph's last use of it */
}

/* Whether node i waits for a rest op whose run has not come. */
static bool node_waits(const vf__graph_inst *in, uint32_t i)
{
    const node *nd = &in->g->nodes[i];
    for (int j = 0; j < nd->nvars; j++) {
        int b = bvar_index(in->g, nd->vars[j].var);
        /* A holder that is a rest op lives while it holds v, which only
         * this run's later nodes let go. */
        const vf__op *h = b >= 0 ? atomic_load_explicit(&in->split[b].holder,
                                                        memory_order_acquire)
                                 : NULL;
        if (h != NULL && !atomic_load(&((rest_state *)h->arg)->ran))
            return true;
    }
    return false;
}

bool vf__graph_in_order_waits(vf__graph_inst *in, uint32_t i)
{
    vf_engine *e = in->g->engine;
    for (;;) {
        /* The sole runner here: the rests it reads hold their vars. */
        unsigned runs = atomic_load(&in->rests_run);
        if (!node_waits(in, i))
            return false;
        /* Stopping: once `suspended` is published, a rest op's run may go
         * on with the launch at once, on another thread, and end it: this
         * thread keeps it from ending (a node's count on `left`) until it
         * is done here, and reads only the instance's own words (it read
         * the rest ops, freed by then, and the instance, freed with its
         * graph: found by the reviewer of the stop). Its active count goes
         * first, the launch still pending. */
        atomic_fetch_add(&in->left, 1);
        unsigned wake = vf__engine_count_out(e, VF__COUNT_ACTIVE, true);
        if (wake != 0)
            vf__engine_wake(e, wake);
        in->resume_at = i;
        atomic_store(&in->suspended, true);
        bool mine = true;
        if (atomic_load(&in->rests_run) == runs || /* a run to come resumes */
            !atomic_compare_exchange_strong(&in->suspended, &mine, false)) {
            /* Stopped: the resumed run may have run the rest but for this
             * count, which then ends the launch here. */
            if (atomic_fetch_sub(&in->left, 1) == 1)
                vf__graph_launch_end(in, VF__COUNT_PENDING);
            return true;
        }
        /* A rest op ran meanwhile and left the run here: look again. Not
         * the launch's last count: node i is still to run. */
        vf__engine_count_in(e, VF__COUNT_ACTIVE);
        atomic_fetch_sub(&in->left, 1);
    }
}

const vf__op_kind vf__kind_graph_rest = {
    .name = "graph rest", .run = rest_run, .flags = VF__KIND_NO_CODE};
