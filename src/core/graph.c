/* graph.c: capture and replay (see graph.h). */
#include "core/graph.h"
#include "core/graph_impl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "core/arg.h"
#include "core/bulk.h"
#include "core/defs.h"
#include "core/exec.h"
#include "core/guard.h"
#include "core/lifecycle.h"
#include "core/push.h"
#include "core/var.h"

_Thread_local vf__capture vf__capture_now;

/* --- the handles the program holds --------------------------------------- */

/* Every graph vf_graph_end gave the program and it has not destroyed, with
 * its engine: a call checks its handle here before it reads the memory it
 * points at, so a destroyed graph (or garbage) is VF_EINVAL, never a read
 * of freed memory, and another engine's is VF_EXDEV. A handle whose
 * address a new graph reuses is that graph's, as an engine's is (guard.h).
 * One lock for the process: a launch takes it once, whatever its ops. */
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static vf__hashmap handles; /* graph -> engine; handles_lock */
static bool handles_made;   /* handles_lock */

static int handle_add(vf_graph *g)
{
    pthread_mutex_lock(&handles_lock);
    if (!handles_made) {
        vf__hashmap_init(&handles, vf__calloc);
        handles_made = true;
    }
    int rc = vf__hashmap_put(&handles, (uint64_t)(uintptr_t)g,
                             (uint64_t)(uintptr_t)g->engine, NULL);
    pthread_mutex_unlock(&handles_lock);
    return rc < 0 ? rc : 0; /* 1: listed already (never: g is new) */
}

/* The value of a retired graph's handle (graphs_retire): listed, with no
 * engine. */
#define RETIRED 0

/* A graph the program left to its engine's destroy stays listed as
 * retired, its block kept (never reused, so its address names no new
 * graph): a call on its handle is VF_EINVAL, even with an engine made at
 * the old one's address since (a C++ graph destroyed after its engine
 * destroyed the new engine's graph at its address: found by a user
 * tester). */
static void handle_retire(vf_graph *g)
{
    pthread_mutex_lock(&handles_lock);
    uint64_t *engine = handles_made
                           ? vf__hashmap_find(&handles, (uint64_t)(uintptr_t)g)
                           : NULL;
    if (engine != NULL)
        *engine = RETIRED;
    pthread_mutex_unlock(&handles_lock);
}

/* Whether g is a handle of the program's. */
static bool handle_listed(vf_graph *g)
{
    pthread_mutex_lock(&handles_lock);
    bool listed = handles_made &&
                  vf__hashmap_find(&handles, (uint64_t)(uintptr_t)g) != NULL;
    pthread_mutex_unlock(&handles_lock);
    return listed;
}

/* Whether g was a handle of the program's (now no more). */
static bool handle_remove(vf_graph *g)
{
    pthread_mutex_lock(&handles_lock);
    bool was = handles_made &&
               vf__hashmap_remove(&handles, (uint64_t)(uintptr_t)g);
    pthread_mutex_unlock(&handles_lock);
    return was;
}

/* A call's hold on `g`, a handle of the program's on `e`: 0 with a
 * reference taken (the call's vf__graph_unref lets it go), so a destroy
 * racing the call frees the graph after it; or VF_EINVAL, VF_EXDEV. */
static int handle_hold(vf_engine *e, vf_graph *g, const char *who)
{
    pthread_mutex_lock(&handles_lock);
    uint64_t *engine = handles_made
                           ? vf__hashmap_find(&handles, (uint64_t)(uintptr_t)g)
                           : NULL;
    vf_engine *of = engine != NULL ? (vf_engine *)(uintptr_t)*engine : NULL;
    if (of == e)
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&handles_lock);
    if (engine != NULL && of == NULL)
        return vf__fail(VF_EINVAL, "%s: the graph's engine was destroyed", who);
    if (of == NULL)
        return vf__fail(VF_EINVAL,
                        "%s: not a graph (NULL, destroyed, or not one "
                        "vf_graph_end made)",
                        who);
    if (of != e)
        return vf__fail(VF_EXDEV, "%s: the graph belongs to another engine",
                        who);
    return 0;
}

void vf__graph_handles_fork_lock(bool lock)
{
    if (lock)
        pthread_mutex_lock(&handles_lock);
    else
        pthread_mutex_unlock(&handles_lock);
}

void vf__graph_fork_lock(vf_engine *e, bool lock)
{
    if (lock) {
        pthread_mutex_lock(&e->graphs.lock);
        for (vf_graph *g = e->graphs.head; g != NULL; g = g->next_live)
            pthread_mutex_lock(&g->lock);
    } else {
        for (vf_graph *g = e->graphs.head; g != NULL; g = g->next_live)
            pthread_mutex_unlock(&g->lock);
        pthread_mutex_unlock(&e->graphs.lock);
    }
}

/* --- life ---------------------------------------------------------------- */

/* Let go of what a node holds. */
static void node_drop(node *nd)
{
    if (nd->opr != NULL)
        vf__operator_unref(nd->opr);
    else
        free(nd->vars);
    free(nd->handles);
    if (nd->arg_size != 0)
        free(nd->arg);
}

/* Free what the graph holds, its block too unless `keep` (retired). */
static void graph_free_as(vf_graph *g, bool keep)
{
    vf_engine *e = g->engine;
    if (keep)
        handle_retire(g);
    else
        (void)handle_remove(g);
    pthread_mutex_lock(&e->graphs.lock);
    if (g->prev_live != NULL)
        g->prev_live->next_live = g->next_live;
    else
        e->graphs.head = g->next_live;
    if (g->next_live != NULL)
        g->next_live->prev_live = g->prev_live;
    pthread_mutex_unlock(&e->graphs.lock);
    for (size_t i = 0; i < g->n; i++)
        node_drop(&g->nodes[i]);
    free(g->nodes);
    for (vf__graph_inst *in = g->all_insts, *next; in != NULL; in = next) {
        next = in->next_all;
        vf__devgraph_inst_free(in);
        free(in->slab);
        free(in->ops);
        free(in->bleft);
        free(in->split);
        free(in);
    }
    for (vf__graph_inst *st = g->free_stubs, *next; st != NULL; st = next) {
        next = st->next_free; /* no launch is left: every one is free */
        free(st);
    }
    vf__devgraph_plan_free(g);
    free(g->pn);
    free(g->writes);
    free(g->succ);
    free(g->last);
    free(g->bvars);
    free(g->bnlast);
    free(g->copied);
    free(g->roots);
    pthread_mutex_destroy(&g->lock);
    if (keep) { /* vf_graph_ops of the retired handle: none */
        pthread_mutex_lock(&handles_lock);
        g->n = 0;
        pthread_mutex_unlock(&handles_lock);
    } else {
        free(g);
    }
}

static void graph_free(vf_graph *g)
{
    graph_free_as(g, false);
}

void vf__graph_unref(vf_graph *g)
{
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1)
        graph_free(g);
}

uint64_t vf__graphs_free_all(vf_engine *e)
{
    uint64_t n = 0;
    vf_graph *g;
    while ((g = e->graphs.head) != NULL) { /* no launch is left: the engine
                                              drained */
        graph_free_as(g, handle_listed(g));
        n++;
    }
    return n;
}

/* --- capture ------------------------------------------------------------- */

int vf__graph_refuse_slow(const vf_engine *e, const char *who)
{
    (void)e;
    return vf__fail(VF_EINVAL,
                    "%s: not allowed while this thread captures a graph "
                    "on the engine (between vf_graph_begin and vf_graph_end)",
                    who);
}

static bool has_serial(const vf_engine *e, const void *serial)
{
    return e->counts.serial == *(const uint64_t *)serial;
}

/* A capture of this thread left on an engine that was destroyed (by
 * another thread: its own destroy ends it), whatever engine has its
 * address now: over, its graph gone with the engine. */
static void forget_stale_capture(void)
{
    const vf__capture *c = &vf__capture_now;
    if (c->engine != NULL &&
        !vf__guard_listed_with(c->engine, has_serial, &c->serial))
        vf__capture_now = (vf__capture){0};
}

static int begin(vf_engine *e, const char *who)
{
    int rc = vf__push_check_engine(e, who);
    if (rc != 0)
        return rc;
    forget_stale_capture();
    if (vf__capture_now.engine != NULL)
        return vf__fail(VF_EINVAL,
                        "%s: this thread already captures a graph "
                        "(vf_graph_end it first)",
                        who);
    if (!vf__exec_at_top())
        return vf__fail(VF_EINVAL,
                        "%s: not from inside an op, a done callback or "
                        "device work",
                        who);
    vf_graph *g = vf__calloc(1, sizeof *g);
    if (g == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    g->engine = e;
    atomic_init(&g->refs, 1);
    pthread_mutex_init(&g->lock, NULL);
    pthread_mutex_lock(&e->graphs.lock); /* destroy frees it if need be */
    g->next_live = e->graphs.head;
    if (g->next_live != NULL)
        g->next_live->prev_live = g;
    e->graphs.head = g;
    pthread_mutex_unlock(&e->graphs.lock);
    vf__capture_now = (vf__capture){
        .engine = e, .serial = e->counts.serial, .graph = g};
    return 0;
}

VF_API int vf_graph_begin(vf_engine *e)
{
    static const char who[] = "vf_graph_begin";
    return VF__GUARDED(e, who, begin(e, who));
}

/* Refuse a var of the recorded push whose delete was pushed, as the push
 * would (VF_ESTALE naming it). */
/* The first of `n` vars whose delete was pushed, or -1 (one var lock at a
 * time). */
static int first_deleted(const vf__varref *vars, int n)
{
    for (int i = 0; i < n; i++) {
        vf__var *v = vars[i].var;
        vf__spin_lock(&v->lock);
        /* A delete held by a stopped engine counts (var.h: delete_held). */
        bool usable = vf__var_nameable(v, vars[i].gen);
        vf__spin_unlock(&v->lock);
        if (!usable)
            return i;
    }
    return -1;
}

static int check_usable(vf_engine *e, const char *who, const vf_op *desc,
                        const char *name, const vf__varref *vars, int n)
{
    int i = first_deleted(vars, n);
    if (i < 0)
        return 0;
    return desc != NULL
               ? vf__varset_deleted(e, who, name, desc->reads, desc->writes,
                                    vars[i].var, vars[i].gen)
               : vf__fail_deleted(e, who, name, vars[i].var, vars[i].gen);
}

/* Record a one-shot push into `nd`: checked as vf_engine_push checks it. */
static int record_push(vf_engine *e, const char *who, const vf_op *desc,
                       node *nd)
{
    const vf__opdef *def;
    int rc = vf__defs_for_push(e, who, desc, &def);
    if (rc != 0)
        return rc;
    if ((rc = vf__arg_check(who, desc->arg, desc->arg_size)) != 0)
        return rc;
    vf__varref none, *heap = NULL;
    int n = vf__varset_build(e, who, desc->reads, desc->writes, &none, 0,
                             &heap);
    if (n < 0)
        return n;
    nd->def = def;
    nd->desc = *desc;
    nd->priority = desc->priority;
    nd->nvars = n;
    nd->vars = heap;
    if ((rc = check_usable(e, who, desc, desc->name, heap, n)) != 0)
        return rc;
    size_t nh = (size_t)desc->reads.count + (size_t)desc->writes.count;
    if (nh != 0) {
        if ((nd->handles = vf__malloc(nh * sizeof(vf_var))) == NULL)
            return vf__fail(VF_ENOMEM, "%s: out of memory", who);
        if (desc->reads.count != 0)
            memcpy(nd->handles, desc->reads.vars,
                   (size_t)desc->reads.count * sizeof(vf_var));
        if (desc->writes.count != 0)
            memcpy(nd->handles + desc->reads.count, desc->writes.vars,
                   (size_t)desc->writes.count * sizeof(vf_var));
    }
    nd->desc.reads.vars = desc->reads.count ? nd->handles : NULL;
    nd->desc.writes.vars = desc->writes.count ? nd->handles + desc->reads.count
                                              : NULL;
    nd->arg = desc->arg;
    return 0;
}

/* Give the node a copy of its argument (arg_size > 0). */
static int copy_arg(node *nd, const char *who, const void *arg, size_t size)
{
    if (size == 0)
        return 0;
    void *copy = vf__malloc(size);
    if (copy == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    nd->arg = memcpy(copy, arg, size);
    nd->arg_size = size;
    return 0;
}

int vf__graph_record(vf_engine *e, const char *who, const vf_op *desc,
                     vf_operator *opr, int priority, bool with_arg, void *arg,
                     size_t arg_size)
{
    vf_graph *g = vf__capture_now.graph;
    node nd;
    memset(&nd, 0, sizeof nd);
    int rc;
    if (opr == NULL) {
        if (desc == NULL)
            return vf__fail(VF_EINVAL, "%s: op is NULL", who);
        if ((rc = record_push(e, who, desc, &nd)) == 0 && desc->nonblocking)
            rc = vf__fail(VF_EINVAL,
                          "%s: a captured op cannot be nonblocking (a "
                          "launch pushes all of its ops)",
                          who);
        if (rc == 0)
            rc = copy_arg(&nd, who, desc->arg, desc->arg_size);
    } else {
        nd.def = &opr->def;
        nd.nvars = opr->nvars;
        nd.vars = opr->vars;
        nd.priority = priority;
        nd.arg = with_arg ? arg : opr->def.arg;
        atomic_fetch_add_explicit(&opr->refs, 1, memory_order_relaxed);
        nd.opr = opr; /* from here node_drop lets go of it */
        if (opr->def.nonblocking)
            rc = vf__fail(VF_EINVAL,
                          "%s: a captured operator cannot be nonblocking (a "
                          "launch pushes all of its ops)",
                          who);
        else if ((rc = check_usable(e, who, NULL, opr->def.name, opr->vars,
                                    opr->nvars)) == 0 &&
                 with_arg)
            rc = copy_arg(&nd, who, arg, arg_size);
        else if (rc == 0) /* the operator's argument, a copy if it has one */
            rc = copy_arg(&nd, who, opr->argcopy.ptr, opr->argcopy.size);
    }
    if (rc == 0 && g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        node *nodes = cap <= SIZE_MAX / sizeof *nodes
                          ? realloc(g->nodes, cap * sizeof *nodes)
                          : NULL;
        if (nodes == NULL || g->n >= UINT32_MAX - 1)
            rc = vf__fail(VF_ENOMEM, "%s: out of memory", who);
        else {
            g->nodes = nodes;
            g->cap = cap;
        }
    }
    if (rc != 0) {
        node_drop(&nd);
        return rc;
    }
    g->nodes[g->n++] = nd;
    return 0;
}

/* --- the plan ------------------------------------------------------------ */

/* A node's use of a var, for sorting by var, then node. */
typedef struct use {
    vf__var *var;
    uint32_t node, gen;
    bool write;
} use;

static int use_cmp(const void *pa, const void *pb)
{
    const use *a = pa, *b = pb;
    if (a->var != b->var)
        return (uintptr_t)a->var < (uintptr_t)b->var ? -1 : 1;
    return a->node < b->node ? -1 : a->node > b->node;
}

static int u64_cmp(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

/* A growable array of (pred << 32 | succ) edges, then of (node << 32 |
 * boundary var) last uses. */
typedef struct pairs {
    uint64_t *v;
    size_t n, cap;
} pairs;

static bool pairs_add(pairs *p, uint32_t a, uint32_t b)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        uint64_t *v = realloc(p->v, cap * sizeof *v);
        if (v == NULL)
            return false;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = (uint64_t)a << 32 | b;
    return true;
}

/* The uses of one var (a run of `u`, in node order): the edges the var's
 * queue would make among them (a write after the last write and the reads
 * since; a read after the last write), its last uses, and how the graph
 * uses it as a whole. */
static bool plan_var(const use *u, size_t n, uint32_t b, pairs *edges,
                     pairs *lasts, bool *writes)
{
    size_t reads_at = 0; /* the reads since the last write: [reads_at, i) */
    long last_write = -1;
    *writes = false;
    for (size_t i = 0; i < n; i++) {
        if (u[i].write) {
            *writes = true;
            if (last_write >= 0 && reads_at == i &&
                !pairs_add(edges, u[last_write].node, u[i].node))
                return false;
            for (size_t r = reads_at; r < i; r++)
                if (!pairs_add(edges, u[r].node, u[i].node))
                    return false;
            last_write = (long)i;
            reads_at = i + 1;
        } else if (last_write >= 0 &&
                   !pairs_add(edges, u[last_write].node, u[i].node)) {
            return false;
        }
    }
    if (reads_at < n) {
        for (size_t r = reads_at; r < n; r++)
            if (!pairs_add(lasts, u[r].node, b))
                return false;
    } else if (!pairs_add(lasts, u[last_write].node, b)) {
        return false;
    }
    return true;
}

/* Each node's home: the worker of the CPU pool it goes to when it becomes
 * ready (-1: none, where the pool is not the engine's CPU pool, or there
 * is one worker). The pool's nodes at the same depth of the graph (the
 * longest path of edges from a node without predecessors) are split into as
 * many runs, in capture order, as the pool has workers, one run a worker: the
 * columns of a stencil's step, the tiles of a sweep, go to the same worker
 * step after step, so each step hands over only its boundary and a chain
 * stays on one core. False when out of memory. */
static bool homes(vf_graph *g)
{
    const vf__pool *p = g->engine->cpu_pool;
    int nworkers = p != NULL ? p->nworkers : 0;
    for (uint32_t i = 0; i < g->n; i++)
        g->pn[i].home = -1;
    if (nworkers < 2)
        return true;
    /* Per node its depth; per depth its nodes of the pool, and how many
     * of them have a home so far. */
    uint32_t *depth = vf__calloc(3 * (size_t)g->n + 2, sizeof *depth);
    if (depth == NULL)
        return false;
    uint32_t *level = depth + g->n, *at = level + g->n + 1;
    /* Capture order is an order the edges allow: a node's depth is final
     * before its successors are seen. */
    for (uint32_t i = 0; i < g->n; i++) {
        const vf__plan_node *nd = &g->pn[i];
        for (uint32_t s = 0; s < nd->nsucc; s++) {
            uint32_t to = g->succ[nd->succ_at + s];
            if (depth[to] < depth[i] + 1)
                depth[to] = depth[i] + 1;
        }
        level[depth[i]] += g->nodes[i].def->pool == p;
    }
    for (uint32_t i = 0; i < g->n; i++)
        if (g->nodes[i].def->pool == p) {
            uint32_t d = depth[i];
            uint64_t k = at[d]++;
            g->pn[i].home = (int)(k * (uint64_t)nworkers / level[d]);
        }
    free(depth);
    return true;
}

size_t vf__graph_homes(const vf_graph *g, int *homes_out, size_t n)
{
    if (g->pn == NULL)
        return 0;
    for (size_t i = 0; i < n && i < g->n; i++)
        homes_out[i] = g->pn[i].home;
    return g->n;
}

/* Work out the plan (graph.h). 0, VF_ENOMEM, or VF_ESTALE when a var
 * changed identity during the capture (deleted and made again). */
static int plan(vf_graph *g, const char *who)
{
    size_t nuses = 0;
    g->replayable = true;
    g->in_order = true;
    g->device = NULL;
    g->no_device_why[0] = '\0';
    bool devices = true; /* every node may be a device replay's */
    for (size_t i = 0; i < g->n; i++) {
        const vf__opdef *def = g->nodes[i].def;
        if (def->kind != &vf__kind_user || def->async || def->devctx != NULL)
            g->replayable = false;
        /* A device replay: sync device ops of one device, none no_skip
         * (it meets its inputs on the host: graph_device.c), and sync CPU
         * ops between them. */
        if (def->kind == &vf__kind_device && !def->async && !def->no_skip &&
            (g->device == NULL || def->devctx == g->device)) {
            g->device = def->devctx;
        } else if (def->kind != &vf__kind_user || def->async) {
            if (devices) {
                char label[VF__OP_LABEL_MAX];
                const char *what =
                    def->async ? "is async"
                    : def->kind != &vf__kind_device
                        ? "is not an op of the program (a delete, say)"
                    : def->no_skip ? "is a no_skip device op"
                                   : "runs on a second device";
                snprintf(g->no_device_why, sizeof g->no_device_why,
                         "recorded op %zu (%s) %s", i + 1,
                         vf__op_label(def->name, 0, label), what);
            }
            devices = false;
        }
        g->in_order &= def->inline_run;
        nuses += (size_t)g->nodes[i].nvars;
    }
    if (devices && g->device == NULL)
        snprintf(g->no_device_why, sizeof g->no_device_why,
                 "it recorded no device op");
    if (!devices)
        g->device = NULL;
    if ((!g->replayable && g->device == NULL) || g->n == 0)
        return 0;
    int rc = VF_ENOMEM;
    use *u = vf__malloc((nuses ? nuses : 1) * sizeof *u);
    pairs edges = {0}, lasts = {0};
    if (u == NULL)
        goto out;
    size_t k = 0;
    for (uint32_t i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].nvars; j++) {
            const vf__varref *r = &g->nodes[i].vars[j];
            u[k++] = (use){r->var, i, r->gen, r->write};
        }
    if (nuses != 0)
        qsort(u, nuses, sizeof *u, use_cmp);
    size_t nb = 0;
    for (size_t i = 0; i < nuses; i++)
        nb += i == 0 || u[i].var != u[i - 1].var;
    if (nb > VF_MAX_OP_VARS) {
        /* Too wide for one launch op to hold: pushed op by op, as each op
         * alone may be (vf_graph_end refused such a graph of CPU ops with
         * VF_EINVAL and ended the capture: found by an auditor). */
        g->replayable = false;
        g->device = NULL;
        snprintf(g->no_device_why, sizeof g->no_device_why,
                 "its ops name %zu vars, more than one launch may hold (%d)",
                 nb, VF_MAX_OP_VARS);
        rc = 0;
        goto out;
    }
    g->nb = (int)nb;
    g->bvars = vf__malloc((nb ? nb : 1) * sizeof *g->bvars);
    g->bnlast = vf__calloc(nb ? nb : 1, sizeof *g->bnlast);
    g->pn = vf__calloc(g->n, sizeof *g->pn);
    if (g->bvars == NULL || g->bnlast == NULL || g->pn == NULL)
        goto out;
    for (size_t i = 0, b = 0; i < nuses; b++) {
        size_t j = i;
        while (j < nuses && u[j].var == u[i].var) {
            if (u[j].gen != u[i].gen) {
                rc = vf__fail(VF_ESTALE,
                              "%s: a variable of the graph was deleted and "
                              "made again during the capture",
                              who);
                goto out;
            }
            j++;
        }
        bool writes;
        if (!plan_var(u + i, j - i, (uint32_t)b, &edges, &lasts, &writes))
            goto out;
        g->bvars[b] = (vf__varref){u[i].var, u[i].gen, writes};
        i = j;
    }
    /* Edges, each once (two vars may order the same pair), by predecessor:
     * the successor lists; the counts of predecessors. */
    if (edges.n != 0)
        qsort(edges.v, edges.n, sizeof *edges.v, u64_cmp);
    size_t ne = 0;
    for (size_t i = 0; i < edges.n; i++)
        if (i == 0 || edges.v[i] != edges.v[i - 1])
            edges.v[ne++] = edges.v[i];
    g->succ = vf__malloc((ne ? ne : 1) * sizeof *g->succ);
    g->last = vf__malloc((lasts.n ? lasts.n : 1) * sizeof *g->last);
    if (g->succ == NULL || g->last == NULL)
        goto out;
    for (size_t i = 0; i < ne; i++) {
        uint32_t from = (uint32_t)(edges.v[i] >> 32), to = (uint32_t)edges.v[i];
        vf__plan_node *f = &g->pn[from];
        if (f->nsucc++ == 0)
            f->succ_at = (uint32_t)i;
        g->succ[i] = to;
        g->pn[to].npred++;
    }
    if (!homes(g))
        goto out;
    if (lasts.n != 0)
        qsort(lasts.v, lasts.n, sizeof *lasts.v, u64_cmp);
    for (size_t i = 0; i < lasts.n; i++) {
        vf__plan_node *nd = &g->pn[lasts.v[i] >> 32];
        uint32_t b = (uint32_t)lasts.v[i];
        if (nd->nlast++ == 0)
            nd->last_at = (uint32_t)i;
        g->last[i] = b;
        g->bnlast[b]++;
    }
    size_t nwrites = 0;
    for (uint32_t i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].nvars; j++)
            nwrites += g->nodes[i].vars[j].write;
    if ((g->writes = vf__malloc((nwrites ? nwrites : 1) * sizeof *g->writes)) ==
        NULL)
        goto out;
    for (uint32_t i = 0, w = 0; i < g->n; i++) {
        g->pn[i].writes_at = w;
        for (int j = 0; j < g->nodes[i].nvars; j++)
            if (g->nodes[i].vars[j].write)
                g->writes[w++] = g->nodes[i].vars[j].var;
        g->pn[i].nwrites = w - g->pn[i].writes_at;
    }
    for (uint32_t i = 0; i < g->n; i++)
        g->ncopied += g->nodes[i].arg_size != 0;
    g->copied = vf__malloc((g->ncopied ? g->ncopied : 1) * sizeof *g->copied);
    if (g->copied == NULL)
        goto out;
    for (uint32_t i = 0, c = 0; i < g->n; i++)
        if (g->nodes[i].arg_size != 0)
            g->copied[c++] = i;
    for (uint32_t i = 0; i < g->n; i++)
        g->nroots += g->pn[i].npred == 0;
    g->roots = vf__malloc((g->nroots ? g->nroots : 1) * sizeof *g->roots);
    if (g->roots == NULL)
        goto out;
    for (uint32_t i = 0, r = 0; i < g->n; i++)
        if (g->pn[i].npred == 0)
            g->roots[r++] = i;
    rc = vf__devgraph_plan(g, who);
out:
    free(u);
    free(edges.v);
    free(lasts.v);
    if (rc == VF_ENOMEM)
        vf__fail(VF_ENOMEM, "%s: out of memory", who);
    return rc;
}

static int end(vf_engine *e, vf_graph **out, const char *who)
{
    forget_stale_capture();
    if (!vf__graph_capturing(e))
        return vf__fail(VF_EINVAL,
                        vf__capture_now.engine == e
                            ? "%s: not from inside an op, a done callback or "
                              "device work (the capture is the thread's own "
                              "code's)"
                        : vf__capture_now.engine != NULL
                            ? "%s: this thread captures a graph on another "
                              "engine, not this one"
                            : "%s: this thread does not capture a graph on "
                              "the engine (vf_graph_begin)",
                        who);
    if (out == NULL)
        return vf__fail(VF_EINVAL, "%s: out is NULL", who);
    vf_graph *g = vf__capture_now.graph;
    vf__capture_now = (vf__capture){0};
    int rc = plan(g, who);
    if (rc == 0 && (g->replayable || g->device != NULL) && g->n != 0) {
        vf__opdef proto;
        memset(&proto, 0, sizeof proto);
        proto.engine = e;
        proto.name = "";
        if (g->replayable) {
            proto.kind = &vf__kind_launch;
            proto.inline_run = true; /* it starts the graph where it is
                                        ready */
        } else { /* it runs where its device's ops run (graph_device.c) */
            const vf__opdef *first = NULL;
            for (size_t i = 0; first == NULL; i++)
                if (g->nodes[i].def->devctx != NULL)
                    first = g->nodes[i].def;
            proto.kind = &vf__kind_devlaunch;
            proto.pool = first->pool;
            proto.devctx = g->device;
            proto.device = first->device;
            proto.inline_run = first->pool == NULL;
        }
        if ((g->launch_def = vf__defs_share(&e->defs, &proto)) == NULL)
            rc = vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    if (rc == 0 && handle_add(g) != 0)
        rc = vf__fail(VF_ENOMEM, "%s: out of memory", who);
    if (rc != 0) {
        vf__graph_unref(g);
        return rc;
    }
    *out = g;
    return 0;
}

VF_API int vf_graph_end(vf_engine *e, vf_graph **out)
{
    static const char who[] = "vf_graph_end";
    vf__guard guard;
    int rc = vf__guard_enter(e, &guard, who);
    if (rc != 0) {
        /* The engine was destroyed under the capture: this thread no
         * longer captures (its graph went with the engine). */
        if (vf__capture_now.engine == e)
            vf__capture_now = (vf__capture){0};
        return rc;
    }
    rc = vf__lifecycle_refuse_fork_dead(e, who);
    if (rc == 0)
        rc = end(e, out, who);
    else if (vf__capture_now.engine == e)
        /* Over too: the thread may capture on the child's live engines
         * (it could not: found by a reviewer). */
        vf__capture_now = (vf__capture){0};
    vf__guard_leave(&guard);
    return rc;
}

/* --- launch -------------------------------------------------------------- */

/* A node's definition as a replay's node (the kind is the only change). */
static const vf__opdef *node_def(vf_engine *e, const vf__opdef *def)
{
    vf__opdef proto = *def;
    proto.kind = &vf__kind_graph_op;
    proto.opr = NULL;
    return vf__defs_share(&e->defs, &proto);
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* A new instance of the graph's blocks (graph.h); NULL without memory. */
static vf__graph_inst *inst_new(vf_graph *g)
{
    vf_engine *e = g->engine;
    vf__graph_inst *in = vf__calloc(1, sizeof *in);
    if (in == NULL)
        return NULL;
    in->g = g;
    in->pn = g->pn;
    in->writes = g->writes;
    in->succ = g->succ;
    in->in_order = g->in_order;
    in->ops = vf__malloc(g->n * sizeof *in->ops);
    in->bleft = vf__calloc((size_t)(g->nb ? g->nb : 1), sizeof *in->bleft);
    in->split = vf__calloc((size_t)(g->nb ? g->nb : 1), sizeof *in->split);
    vf__spin_init(&in->pins_lock);
    size_t total = 0;
    for (size_t i = 0; i < g->n; i++)
        total += round_up(vf__op_block_size(g->nodes[i].nvars) +
                              round_up(g->nodes[i].arg_size, 16),
                          VF__CACHELINE);
    in->slab = vf__aligned_calloc(VF__CACHELINE, total);
    if (in->ops == NULL || in->bleft == NULL || in->split == NULL ||
        in->slab == NULL)
        goto fail;
    size_t at = 0;
    for (size_t i = 0; i < g->n; i++) {
        const node *nd = &g->nodes[i];
        vf__op *op = (vf__op *)(in->slab + at);
        size_t block = vf__op_block_size(nd->nvars);
        at += round_up(block + round_up(nd->arg_size, 16), VF__CACHELINE);
        vf__op_init_header(op, nd->nvars, 0);
        op->status = 0; /* each launch's node_run starts from it */
        /* Its predecessors in the graph, for the first launch (its
         * finish sets it again for the next: vf__graph_op_finished). */
        atomic_store_explicit(&op->wait, (int)g->pn[i].npred,
                              memory_order_relaxed);
        /* A device replay's node runs as its push would (graph_device.c):
         * its own definition. */
        op->def = g->device != NULL ? nd->def : node_def(e, nd->def);
        if (op->def == NULL)
            goto fail;
        const vf__opdef *run = nd->opr != NULL ? nd->def : NULL;
        vf__op_set_run(op, false, run ? run->fn : nd->desc.fn, NULL, nd->arg,
                       run ? run->done : nd->desc.done,
                       run ? run->name : nd->desc.name);
        if (nd->arg_size != 0)
            op->arg = (char *)op + block;
        op->priority = nd->def->property == VF_PROP_DELETE_VAR ? INT_MAX
                                                               : nd->priority;
        vf__op_stage_vars(op, nd->vars);
        op->graph = g->device != NULL ? NULL : in; /* a device node's is
                                                      its run state */
        in->ops[i] = op;
    }
    return in;
fail:
    free(in->slab);
    free(in->ops);
    free(in->bleft);
    free(in->split);
    free(in);
    return NULL;
}

/* An instance, its arguments as the pushes would copy them now (the
 * graph's lock held); NULL without memory. Its counts are set when its
 * launch starts (inst_counts). */
static vf__graph_inst *inst_get_locked(vf_graph *g)
{
    vf__graph_inst *in = g->free_insts;
    if (in != NULL) {
        g->free_insts = in->next_free;
    } else if ((in = inst_new(g)) != NULL) {
        in->next_all = g->all_insts;
        g->all_insts = in;
        in->arg_gen = g->arg_gen;
    } else {
        return NULL;
    }
    for (uint32_t c = 0; c < g->ncopied; c++) {
        const node *nd = &g->nodes[g->copied[c]];
        memcpy(in->ops[g->copied[c]]->arg, nd->arg, nd->arg_size);
    }
    if (in->arg_gen != g->arg_gen) { /* a pointer changed (set_arg) */
        for (size_t i = 0; i < g->n; i++)
            if (g->nodes[i].arg_size == 0)
                in->ops[i]->arg = g->nodes[i].arg;
        in->arg_gen = g->arg_gen;
    }
    in->dev_gen = g->dev_gen;
    return in;
}

static void inst_counts(vf__graph_inst *in)
{
    const vf_graph *g = in->g;
    for (int b = 0; b < g->nb; b++)
        atomic_store_explicit(&in->bleft[b], g->bnlast[b],
                              memory_order_relaxed);
    atomic_store_explicit(&in->left, (unsigned)g->n, memory_order_relaxed);
}

/* --- a launch's stand-in until it starts --------------------------------- */

/* A stand-in for a new launch, in the graph's list of launches not
 * started; NULL without memory. */
static vf__graph_inst *stub_get(vf_graph *g)
{
    pthread_mutex_lock(&g->lock);
    vf__graph_inst *st = g->free_stubs;
    if (st != NULL)
        g->free_stubs = st->next_free;
    else if ((st = vf__calloc(1, sizeof *st)) != NULL)
        st->g = g;
    if (st != NULL) {
        st->bound = NULL;
        st->unbound_prev = NULL;
        st->unbound_next = g->unbound;
        if (g->unbound != NULL)
            g->unbound->unbound_prev = st;
        g->unbound = st;
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* Out of the list of launches not started without an instance, if it is
 * there (set_arg takes out those it gives one); the lock held. */
static void unbound_unlink(vf_graph *g, vf__graph_inst *st)
{
    if (st->unbound_prev != NULL)
        st->unbound_prev->unbound_next = st->unbound_next;
    else if (g->unbound == st)
        g->unbound = st->unbound_next;
    else
        return;
    if (st->unbound_next != NULL)
        st->unbound_next->unbound_prev = st->unbound_prev;
    st->unbound_prev = st->unbound_next = NULL;
}

/* A stand-in back to the graph's free ones, with the instance set_arg
 * gave it if its launch never took it (the lock held). */
static void stub_put_locked(vf_graph *g, vf__graph_inst *st)
{
    unbound_unlink(g, st);
    if (st->bound != NULL) {
        st->bound->next_free = g->free_insts;
        g->free_insts = st->bound;
        st->bound = NULL;
    }
    st->launch = NULL;
    st->next_free = g->free_stubs;
    g->free_stubs = st;
}

static void stub_put(vf_graph *g, vf__graph_inst *st)
{
    pthread_mutex_lock(&g->lock);
    stub_put_locked(g, st);
    pthread_mutex_unlock(&g->lock);
}

vf__graph_inst *vf__graph_bind(vf__op *op)
{
    vf__graph_inst *st = op->graph;
    vf_graph *g = st->g;
    pthread_mutex_lock(&g->lock);
    vf__graph_inst *in = st->bound != NULL ? st->bound : inst_get_locked(g);
    if (in != NULL) {
        st->bound = NULL; /* it is this launch's now */
        stub_put_locked(g, st);
    }
    pthread_mutex_unlock(&g->lock);
    if (in == NULL)
        return NULL;
    inst_counts(in);
    in->launch = op;
    /* With release: a wait inside an op on another thread reads it, the
     * op found on a var's queue (vf__graph_hold_is_over), as the launch
     * starts (a data race by TSan: found by a reviewer). */
    __atomic_store_n(&op->graph, in, __ATOMIC_RELEASE);
    return in;
}

void vf__graph_stub_release(vf__op *op)
{
    vf__graph_inst *st = op->graph;
    op->graph = NULL;
    stub_put(st->g, st);
}

/* The name, `done` and argument node i's op has (as inst_new gives them),
 * for a launch that has no instance (`in` NULL) or one. */
static void node_names(vf_graph *g, const vf__graph_inst *in, size_t i,
                       const char **name, vf_done_fn *done, void **arg)
{
    const node *nd = &g->nodes[i];
    const vf__opdef *run = nd->opr != NULL ? nd->def : NULL;
    *name = run ? run->name : nd->desc.name;
    *done = run ? run->done : nd->desc.done;
    if (in != NULL) {
        *arg = in->ops[i]->arg;
    } else { /* the graph's own, which set_arg writes */
        pthread_mutex_lock(&g->lock);
        *arg = nd->arg;
        pthread_mutex_unlock(&g->lock);
    }
}

/* Each op of the launch op `op`, which never started, fails with `rc`
 * (its `done`, its failure record, the stats); `on_vars`: the launch holds
 * its vars, and each op's failure goes to the vars it writes, as a failed
 * op's does (a held launch that could not be pushed holds none). */
static void launch_ops_fail(vf__op *op, int rc, const char *why, bool on_vars)
{
    const vf__graph_inst *st = op->graph;
    vf_graph *g = st->g;
    vf_engine *e = g->engine;
    for (size_t i = 0; i < g->n; i++) {
        const char *name;
        vf_done_fn done;
        void *arg;
        node_names(g, st->bound, i, &name, &done, &arg);
        vf__failure *f = vf__engine_record_failure(e, rc, name, why,
                                                   op->place + i, NULL);
        const vf__plan_node *pn = &g->pn[i];
        for (uint32_t w = 0; on_vars && w < pn->nwrites; w++) {
            vf__var *v = g->writes[pn->writes_at + w];
            vf__failure_ref(f);
            vf__var_set_failure(v, f);
            vf__var_wrote(v);
        }
        vf__failure_unref(f);
        if (done != NULL)
            vf__exec_call_done(e, done, arg, rc);
        atomic_fetch_add_explicit(&e->failed, 1, memory_order_relaxed);
    }
}

void vf__graph_launch_lost(vf__op *op)
{
    launch_ops_fail(op, VF_ENOMEM,
                    "out of memory for its graph launch's instance at the "
                    "launch's start",
                    true);
}

void vf__graph_inst_put(vf__graph_inst *in)
{
    vf_graph *g = in->g;
    pthread_mutex_lock(&g->lock);
    in->next_free = g->free_insts;
    g->free_insts = in;
    pthread_mutex_unlock(&g->lock);
}

uint64_t vf__graph_launch_places(const vf__op *op)
{
    return op->graph->g->n;
}

/* launch_run on the naive engine: every node runs here, now, in push
 * order (an order the edges allow: the serial program's), the launch
 * op's active count passing from node to node; the successors' counts
 * are not kept (graph_op_finished). The last node's end ends the launch
 * and may free the instance and the graph: nothing of them is read after
 * it. */
static void run_in_order(vf__op *launch, vf__graph_inst *in)
{
    uint32_t n = (uint32_t)in->g->n;
    vf__engine_count_in(vf__op_engine(launch), (uint64_t)n * VF__COUNT_PENDING);
    vf__exec_run_in_order(in->ops, n, in->base, 0);
}

/* The launch op is ready (every earlier op it conflicts with finished):
 * start the graph. Its places are its nodes'; its active count passes to
 * the first node without predecessors, the others are counted in; it
 * stays pending until its last node's finish is over (graph_end). */
static bool launch_run(vf__op *op, int worker, bool shutdown)
{
    (void)worker;
    (void)shutdown; /* the nodes see the notice themselves (exec.c) */
    vf__graph_inst *in = vf__graph_bind(op);
    if (VF__UNLIKELY(in == NULL)) {
        vf__graph_launch_lost(op);
        return true; /* finished as an op: launch_lost_finished */
    }
    const vf_graph *g = in->g;
    in->base = op->place;
    /* The launch holds its vars: no failure reaches them now but its
     * nodes'. */
    bool failures = false;
    for (int b = 0; b < g->nb && !failures; b++)
        failures = atomic_load_explicit(&g->bvars[b].var->failure,
                                        memory_order_acquire) != NULL;
    atomic_store_explicit(&in->failures, failures, memory_order_relaxed);
    if (g->in_order) {
        run_in_order(op, in);
        return false;
    }
    /* Each node's wait count is its predecessors' already (inst_new, then
     * its finish for the next launch), and its place is set by whoever
     * makes it ready (vf__graph_op_finished): here, the roots'. */
    vf__readylist ready;
    vf__readylist_init(&ready);
    for (uint32_t r = 0; r < g->nroots; r++) {
        vf__op *n = in->ops[g->roots[r]];
        n->place = in->base + g->roots[r];
        vf__readylist_add(&ready, n);
    }
    vf__engine_count_in(vf__op_engine(op),
                        (uint64_t)g->n * VF__COUNT_PENDING +
                            (uint64_t)(ready.count - 1) * VF__COUNT_ACTIVE);
    vf__exec_dispatch_nodes(&ready);
    return false; /* in flight until its last node */
}

void vf__graph_launch_end(vf__graph_inst *in, uint64_t counts)
{
    vf_graph *g = in->g;
    vf_engine *e = g->engine;
    vf__op *launch = in->launch;
    in->launch = NULL;
    launch->graph = NULL;
    vf__op_free(launch);
    vf__devgraph_launch_over(in);
    vf__graph_inst_put(in);
    vf__graph_unref(g);
    unsigned wake = vf__engine_count_out(e, counts, true);
    if (VF__UNLIKELY(wake != 0))
        vf__engine_wake(e, wake);
}

void vf__graph_failure_written(vf__graph_inst *in, vf__failure *f,
                               vf__var *const *writes, uint32_t nwrites)
{
    if (nwrites != 0)
        atomic_store_explicit(&in->failures, true, memory_order_relaxed);
    for (uint32_t i = 0; i < nwrites; i++) {
        vf__failure_ref(f);
        vf__var_set_failure(writes[i], f);
    }
}

void vf__graph_lasts_finished(vf__graph_inst *in, const vf__plan_node *nd,
                              vf__readylist *ready)
{
    const vf_graph *g = in->g;
    const uint32_t *last = g->last + nd->last_at;
    for (uint32_t l = 0, nlast = nd->nlast; l < nlast; l++) {
        uint32_t b = last[l];
        if (atomic_fetch_sub_explicit(&in->bleft[b], 1, memory_order_acq_rel) ==
            1)
            vf__graph_holder_let_go(in, (int)b, ready);
    }
}

void vf__graph_ops_done(vf__op *op, uint32_t k)
{
    vf__graph_inst *in = op->graph;
    if (atomic_fetch_sub_explicit(&in->left, k, memory_order_acq_rel) == k)
        vf__graph_launch_end(in, VF__COUNT_PENDING); /* its active count
                                                        went to its nodes */
}

/* A launch held by a stopped engine could not be pushed at start (`rc`):
 * each of its ops fails with that code, as a held push does
 * (lifecycle.c). */
void vf__graph_launch_dropped(vf_engine *e, vf__op *op, int rc)
{
    (void)e;                    /* the graph's */
    vf_graph *g = op->graph->g; /* never started: its stand-in */
    launch_ops_fail(op, rc,
                    "held while the engine was stopped, and could not be "
                    "pushed at start",
                    false);
    vf__graph_stub_release(op);
    vf__op_free(op);
    vf__graph_unref(g);
}

/* Its kind's finished (op.h), for a launch op that finished as an op
 * because its instance could not be had (vf__graph_launch_lost): its
 * stand-in back, the graph let go of. */
static void launch_lost_finished(vf__op *op)
{
    vf_graph *g = op->graph->g;
    vf__graph_stub_release(op);
    vf__graph_unref(g);
}

const vf__op_kind vf__kind_launch = {.name = "graph launch",
                                     .run = launch_run,
                                     .finished = launch_lost_finished,
                                     .dropped = vf__graph_launch_dropped,
                                     .flags = VF__KIND_NUMBERED |
                                              VF__KIND_HELD | VF__KIND_LAUNCH};

/* A replay's node: a user op (exec.c runs it as one) whose finish is
 * graph.c's. */
const vf__op_kind vf__kind_graph_op = {
    .name = "user", .flags = VF__KIND_COUNTED | VF__KIND_GRAPH};

/* Whether this launch replays (graph.h), or pushes op by op: a graph of
 * CPU ops on an engine without devices, or, where the program allows it,
 * one of device ops (graph_device.c). */
static bool replays_now(vf_engine *e, const vf_graph *g)
{
    return (g->replayable ? !vf__engine_has_devices(e)
                          : g->device != NULL &&
                                atomic_load_explicit(&g->device_replay,
                                                     memory_order_relaxed)) &&
           atomic_load_explicit(&e->hooks, memory_order_relaxed) == 0 &&
           e->max_inflight == 0 &&
           (!vf__bulk_maybe(e->bulk.size) || !vf__bulk_this_thread_bulks(e)) &&
           vf__current_op() == NULL && !vf__exec_in_done(e);
}

/* A launch refused because a variable of the graph was deleted since the
 * capture: VF_ESTALE naming the recorded op that uses it (its index in
 * the capture, its name) and the variable; 0 when every variable is
 * still usable. Cold: one var lock at a time. */
static int stale_node(vf_engine *e, vf_graph *g, const char *who)
{
    for (size_t i = 0; i < g->n; i++) {
        const node *nd = &g->nodes[i];
        int k = first_deleted(nd->vars, nd->nvars);
        if (k < 0)
            continue;
        const char *name = nd->opr ? nd->def->name : nd->desc.name;
        char label[VF__OP_LABEL_MAX];
        return vf__fail(
            VF_ESTALE,
            "%s: recorded op %zu (%s) uses a variable (id %#llx) whose "
            "vf_var_destroy was pushed after the capture: nothing of the "
            "graph is launched",
            who, i,
            name != NULL && *name != '\0' ? vf__op_label(name, 0, label)
                                          : "unnamed",
            (unsigned long long)vf__var_handle(&e->vars, nd->vars[k].var,
                                               nd->vars[k].gen)
                .id);
    }
    return 0;
}

static int launch_replay(vf_engine *e, vf_graph *g, const char *who)
{
    vf__graph_inst *in = stub_get(g); /* its instance: when it starts */
    vf__op *op = in != NULL ? vf__op_alloc(g->nb) : NULL;
    if (op == NULL) {
        if (in != NULL)
            stub_put(g, in);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    vf__op_stage_vars(op, g->bvars);
    op->def = g->launch_def;
    vf__op_set_run(op, false, NULL, NULL, NULL, NULL, "a graph launch");
    op->graph = in;
    in->launch = op;
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    /* Counted before the push: its ops may finish inside it, and a wait
     * after it must see the launch. */
    atomic_fetch_add_explicit(&e->graphs.launches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->graphs.replays, 1, memory_order_relaxed);
    /* After other threads' open batches on its vars, as the pushes would
     * be (replays_now: this thread's own pushes would not be batched). */
    if (vf__bulk_maybe(e->bulk.size))
        vf__bulk_after_batches(e, g->bvars, g->nb);
    int rc = vf__push_enqueue(e, op, who);
    if (rc == VF_ESTALE) /* which recorded op, rather than the launch op */
        rc = stale_node(e, g, who) != 0 ? VF_ESTALE : rc;
    if (rc != 0) { /* nothing ran: a var was deleted, say */
        atomic_fetch_sub_explicit(&e->graphs.launches, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&e->graphs.replays, 1, memory_order_relaxed);
        vf__graph_stub_release(op);
        vf__op_free(op);
        vf__graph_unref(g);
    }
    return rc; /* from here the launch may be over: no touch of `in` */
}

/* Push the recorded ops one by one (graph.h), each with its argument as
 * it stands now. Every var is checked first, so a deleted one refuses the
 * whole launch, as a replay's launch op is refused. */
static int launch_by_push(vf_engine *e, vf_graph *g, const char *who)
{
    int stale = stale_node(e, g, who);
    if (stale != 0)
        return stale;
    /* Every op's argument as the launch has it, copied at once under the
     * lock: an op of the launch (run inside its push on the naive engine,
     * or as a child at its push) or another thread may set the next
     * launch's while this one pushes. */
    size_t total = 0;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->n; i++)
        total += g->nodes[i].arg_size;
    pthread_mutex_unlock(&g->lock); /* sizes never change (set_arg) */
    void **args = vf__malloc(g->n * sizeof *args + total);
    if (args == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    char *copies = (char *)(args + g->n);
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->n; i++) {
        const node *nd = &g->nodes[i];
        args[i] = nd->arg;
        if (nd->arg_size != 0) {
            args[i] = memcpy(copies, nd->arg, nd->arg_size);
            copies += nd->arg_size;
        }
    }
    pthread_mutex_unlock(&g->lock);
    atomic_fetch_add_explicit(&e->graphs.launches, 1, memory_order_relaxed);
    int first = 0;
    vf_engine *was = vf__push_admit_launch(e); /* whole: a destroy midway
                                                  waits for the call */
    for (size_t i = 0; i < g->n; i++) {
        const node *nd = &g->nodes[i];
        int rc;
        if (nd->opr != NULL) {
            rc = vf__push_operator_run(e, nd->opr, nd->priority, args[i],
                                       nd->arg_size, who);
        } else {
            vf_op desc = nd->desc;
            desc.arg = args[i];
            desc.arg_size = nd->arg_size;
            rc = vf__push_recorded(e, &desc, who);
        }
        if (rc != 0 && first == 0)
            first = rc; /* the others are still pushed, in order */
    }
    vf__push_admit_launch(was);
    free(args);
    return first;
}

static int launch(vf_engine *e, vf_graph *g, const char *who)
{
    int rc = vf__push_check_engine(e, who);
    if (rc != 0 || (rc = handle_hold(e, g, who)) != 0)
        return rc;
    rc = vf__graph_refuse(e, who);
    if (rc == 0 && g->n == 0)
        atomic_fetch_add_explicit(&e->graphs.launches, 1, memory_order_relaxed);
    else if (rc == 0)
        rc = replays_now(e, g) ? launch_replay(e, g, who)
                               : launch_by_push(e, g, who);
    vf__graph_unref(g); /* the call's hold */
    return rc;
}

VF_API int vf_graph_launch(vf_engine *e, vf_graph *g)
{
    static const char who[] = "vf_graph_launch";
    return VF__GUARDED(e, who, launch(e, g, who));
}

/* --- arguments, size, destroy -------------------------------------------- */

static int set_arg_held(vf_graph *g, size_t index, void *arg, size_t arg_size,
                        const char *who)
{
    int rc;
    if (index >= g->n)
        return vf__fail(VF_EINVAL, "%s: no op %zu (the graph has %zu)", who,
                        index, g->n);
    node *nd = &g->nodes[index];
    if (arg_size != nd->arg_size && nd->arg_size == 0)
        return vf__fail(VF_EINVAL,
                        "%s: op %zu was recorded with a pointer argument; "
                        "arg_size must be 0, not %zu",
                        who, index, arg_size);
    if (arg_size != nd->arg_size)
        return vf__fail(VF_EINVAL,
                        "%s: op %zu was recorded with a copied argument of "
                        "%zu bytes; arg_size must be %zu, not %zu",
                        who, index, nd->arg_size, nd->arg_size, arg_size);
    if (arg_size != 0 && (rc = vf__arg_check(who, arg, arg_size)) != 0)
        return rc;
    pthread_mutex_lock(&g->lock);
    /* The launches made and not started keep the arguments they were
     * made with: each takes its instance now, the arguments in it (and
     * leaves the list, so a time loop's set_arg looks at each launch
     * once). */
    while (g->unbound != NULL) {
        vf__graph_inst *st = g->unbound;
        if ((st->bound = inst_get_locked(g)) == NULL) {
            pthread_mutex_unlock(&g->lock);
            return vf__fail(VF_ENOMEM,
                            "%s: out of memory for the arguments of a launch "
                            "made before it (nothing changed)",
                            who);
        }
        unbound_unlink(g, st);
    }
    if (arg_size != 0) {
        memcpy(nd->arg, arg, arg_size);
    } else {
        nd->arg = arg;
        g->arg_gen++;
    }
    g->dev_gen++; /* a device replay records its work again */
    pthread_mutex_unlock(&g->lock);
    return 0;
}

static int set_arg(vf_engine *e, vf_graph *g, size_t index, void *arg,
                   size_t arg_size, const char *who)
{
    int rc = handle_hold(e, g, who);
    if (rc != 0)
        return rc;
    rc = set_arg_held(g, index, arg, arg_size, who);
    vf__graph_unref(g); /* the call's hold */
    return rc;
}

VF_API int vf_graph_set_arg(vf_engine *e, vf_graph *g, size_t index, void *arg,
                            size_t arg_size)
{
    static const char who[] = "vf_graph_set_arg";
    return VF__GUARDED_LIVE(e, who, set_arg(e, g, index, arg, arg_size, who));
}

static int device_replay(vf_engine *e, vf_graph *g, bool on, const char *who)
{
    int rc = handle_hold(e, g, who);
    if (rc != 0)
        return rc;
    if (on && g->device == NULL)
        rc = vf__fail(VF_ENOTSUP,
                      "%s: %s; a device replay needs synchronous device ops "
                      "(not no_skip) of one device whose kind records "
                      "device graphs (the emulated device, CUDA) and "
                      "synchronous CPU ops",
                      who,
                      g->no_device_why[0] ? g->no_device_why
                                          : "the graph cannot be replayed "
                                            "on its device");
    else
        atomic_store_explicit(&g->device_replay, on, memory_order_relaxed);
    vf__graph_unref(g); /* the call's hold */
    return rc;
}

VF_API int vf_graph_device_replay(vf_engine *e, vf_graph *g, bool on)
{
    static const char who[] = "vf_graph_device_replay";
    return VF__GUARDED_LIVE(e, who, device_replay(e, g, on, who));
}

VF_API size_t vf_graph_ops(const vf_graph *g)
{
    pthread_mutex_lock(&handles_lock); /* a graph listed is not freed */
    bool listed = handles_made &&
                  vf__hashmap_find(&handles, (uint64_t)(uintptr_t)g);
    size_t n = listed ? g->n : 0;
    pthread_mutex_unlock(&handles_lock);
    return n;
}

VF_API bool vf_graph_capturing(vf_engine *e)
{
    if (vf__capture_now.engine != e || e == NULL)
        return false; /* no guard needed: nothing of e is read */
    vf__guard guard;
    if (vf__guard_enter(e, &guard, "vf_graph_capturing") != 0)
        return false;
    bool capturing = vf__graph_capturing(e);
    vf__guard_leave(&guard);
    return capturing;
}

static int destroy(vf_engine *e, vf_graph *g, const char *who)
{
    int rc = handle_hold(e, g, who);
    if (rc != 0)
        return rc;
    if (!handle_remove(g)) /* a destroy racing this one took it first */
        rc = vf__fail(VF_EINVAL, "%s: the graph was destroyed", who);
    else
        vf__graph_unref(g); /* the handle's */
    vf__graph_unref(g);     /* the call's hold */
    return rc;
}

VF_API int vf_graph_destroy(vf_engine *e, vf_graph *g)
{
    static const char who[] = "vf_graph_destroy";
    return VF__GUARDED_LIVE(e, who, destroy(e, g, who));
}
