/*
 * critical.c: the critical path of a snapshot.
 *
 * The recorded DAG has an edge u -> v for every id u in v's deps that the
 * snapshot holds (u's finishing released one of v's vars), and one
 * between each child and its parent (parent_edge): child -> parent when
 * the child ended first (the parent's end waited for it: fork-join, as
 * Cilk's span counts it, the parent's own time after its children's),
 * parent -> child when the child outlived it. Ids follow push
 * order, but an edge may still go from a larger id to a smaller one (two
 * threads pushing at once take ids before they take var locks), so the
 * nodes are put in topological order by Kahn's algorithm rather than by id;
 * a cycle can only come from a corrupt file and is refused.
 *
 * Stages. An op has a host stage, its function on a worker (start .. end);
 * a device op the device timed (vf__prof_has_device_span) also has a
 * device stage, its work on its stream, which runs on after its function
 * returned: the engine released its vars at its host end, so its
 * dependents' functions may run while its work still does. So, in the
 * best schedule (unlimited workers and streams, a free engine), with H(v)
 * and D(v) the times v's stages end:
 *   H(v) = h(v) + max over preds u of R(u, v), where u releases v at H(u)
 *          when u is a device op and v too (its function only queues work
 *          behind u's: a stream wait; also when v's stream then skipped
 *          its work, which left v no device stage), and at u's done time
 *          otherwise (a host op waits for u's work on the host);
 *   D(v) = d(v) + max(H(v), D(u) over preds u that are device ops): v's
 *          work starts once queued and once the work it waits for is done.
 * A host op's done time is H, a device op's D. Weights, from the record:
 * h(v) = end - start, less its time not its own (the record's inside_ns:
 * its waits, ops run above them, its children run at their push, which
 * have weights of their own), and, for a host op, the part of it spent
 * waiting on the host for a device pred's work (before that pred's device
 * end: the engine meets those fences before the function runs); d(v) = the part
 * of the device span after the host end (work a device op waited for inside its
 * own function, with device_sync, is in h already). Without device spans, D is
 * never used and H(v) = run(v) + max H(u): the heaviest chain of run times, as
 * before.
 *
 * The path ends at the node of largest done time and is walked back
 * through each stage's binding predecessor (the own host stage, or a
 * pred's stage); the ops it passes, each with the stages it passed (its
 * weight on the path), make the path. All in integer nanoseconds, so the
 * result is exact; ties are broken the same way every time (the
 * predecessor, or the last node, that ended last, then the smaller id; a
 * device stage prefers waiting for a pred's work to its own host stage).
 * Waiting is deliberately not in the weights: the critical path says how
 * fast the DAG could go with unlimited workers and streams and a free
 * engine; the chain's own waiting (elapsed - length) says how far the run
 * was from it. O(n log n + edges log n) (deps are looked up by binary
 * search).
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "profile/out.h"
#include "varflow_profile.h"

/* Whether record a should be preferred to record b at equal time. */
static int better_tie(const vf_profile_record *a, const vf_profile_record *b)
{
    if (a->end_ns != b->end_ns)
        return a->end_ns > b->end_ns;
    return a->id < b->id;
}

/* Everything the walk needs; freed by release(). */
typedef struct dag {
    size_t n;
    ptrdiff_t *dep_index; /* per dep slot of the snapshot: record index, -1 */
    size_t *first_dep;    /* per record: its first slot in dep_index */
    size_t *succ_start;   /* CSR of successors: n + 1 offsets */
    size_t *succ;
    size_t *indeg;
    size_t *queue;
    uint64_t *host, *dev; /* H and D (see the top) */
    ptrdiff_t *pred_host; /* the pred binding H, or -1 */
    bool *pred_host_dev;  /* ... through its device stage */
    ptrdiff_t *pred_dev;  /* the pred binding D through its device stage,
                             or -1: the op's own host stage */
    uint64_t total;       /* every op's h + d: the DAG's work, so weighed */
} dag;

static void release(dag *g)
{
    free(g->dep_index);
    free(g->first_dep);
    free(g->succ_start);
    free(g->succ);
    free(g->indeg);
    free(g->queue);
    free(g->host);
    free(g->dev);
    free(g->pred_host);
    free(g->pred_host_dev);
    free(g->pred_dev);
}

/* The edge between record v and its parent (vf_profile_record.parent),
 * from *from to *to, when there is one: v -> parent when v ended first
 * (the parent's end waits for it, as a fork-join program's wait for its
 * children), parent -> v when v outlived it; equal ends, or a parent not
 * in the snapshot: none. Each edge goes from an op that ended strictly
 * earlier, and a dependency edge never from one that ended later (an op
 * is released by an end before its start), so these make no cycle. */
static bool parent_edge(const vf_profile *p, size_t v, size_t *from, size_t *to)
{
    const vf_profile_record *r = &p->records[v];
    ptrdiff_t u = r->parent != 0 ? vf__prof_find(p, r->parent) : -1;
    if (u < 0 || p->records[u].end_ns == r->end_ns)
        return false;
    bool join = r->end_ns < p->records[u].end_ns;
    *from = join ? v : (size_t)u;
    *to = join ? (size_t)u : v;
    return true;
}

static int build(const vf_profile *p, dag *g)
{
    size_t n = p->count, nslots = 0;
    memset(g, 0, sizeof *g);
    g->n = n;
    /* Slots: each record's deps, then the parent edges that end at it. */
    size_t *fill = vf__calloc(n + 1, sizeof *fill);
    if (fill == NULL)
        return VF_ENOMEM;
    for (size_t v = 0, from, to; v < n; v++) {
        if (parent_edge(p, v, &from, &to))
            fill[to]++;
        nslots += (size_t)p->records[v].ndeps;
    }
    for (size_t v = 0; v < n; v++)
        nslots += fill[v];
    g->dep_index = vf__malloc((nslots + 1) * sizeof *g->dep_index);
    g->first_dep = vf__malloc((n + 1) * sizeof *g->first_dep);
    g->succ_start = vf__calloc(n + 2, sizeof *g->succ_start);
    g->succ = vf__malloc((nslots + 1) * sizeof *g->succ);
    g->indeg = vf__calloc(n + 1, sizeof *g->indeg);
    g->queue = vf__malloc((n + 1) * sizeof *g->queue);
    g->host = vf__malloc((n + 1) * sizeof *g->host);
    g->dev = vf__malloc((n + 1) * sizeof *g->dev);
    g->pred_host = vf__malloc((n + 1) * sizeof *g->pred_host);
    g->pred_host_dev = vf__malloc((n + 1) * sizeof *g->pred_host_dev);
    g->pred_dev = vf__malloc((n + 1) * sizeof *g->pred_dev);
    if (!g->dep_index || !g->first_dep || !g->succ_start || !g->succ ||
        !g->indeg || !g->queue || !g->host || !g->dev || !g->pred_host ||
        !g->pred_host_dev || !g->pred_dev) {
        free(fill);
        return VF_ENOMEM;
    }
    size_t slot = 0;
    for (size_t v = 0; v < n; v++) {
        const vf_profile_record *r = &p->records[v];
        g->first_dep[v] = slot;
        for (int k = 0; k < r->ndeps; k++)
            g->dep_index[slot++] = vf__prof_find(p, r->deps[k]);
        size_t extra = fill[v];
        fill[v] = slot; /* now its cursor */
        slot += extra;
    }
    g->first_dep[n] = slot;
    for (size_t v = 0, from, to; v < n; v++)
        if (parent_edge(p, v, &from, &to))
            g->dep_index[fill[to]++] = (ptrdiff_t)from;
    free(fill);
    for (size_t v = 0; v < n; v++)
        for (size_t s = g->first_dep[v]; s < g->first_dep[v + 1]; s++)
            if (g->dep_index[s] >= 0) {
                g->succ_start[g->dep_index[s] + 1]++;
                g->indeg[v]++;
            }
    for (size_t v = 0; v < n; v++)
        g->succ_start[v + 1] += g->succ_start[v];
    /* Fill the successor lists (succ_start[u] runs ahead, then is reset). */
    for (size_t v = 0; v < n; v++)
        for (size_t s = g->first_dep[v]; s < g->first_dep[v + 1]; s++)
            if (g->dep_index[s] >= 0)
                g->succ[g->succ_start[g->dep_index[s]]++] = v;
    for (size_t u = n; u > 0; u--)
        g->succ_start[u] = g->succ_start[u - 1];
    g->succ_start[0] = 0;
    return 0;
}

static bool has_dev(const vf_profile_record *r)
{
    return vf__prof_has_device_span(r);
}

/* Whether the host waited for the device work of v's preds before v ran:
 * a host op's run does; a device op's function does not (its stream
 * waits), also when its stream then skipped its work, which left it no
 * device span (its path ended at its preds' work, past its own end, and
 * the path's length passed its elapsed time: found by a user tester). */
static bool host_waits_for_work(const vf_profile_record *r)
{
    return !has_dev(r) && r->device.type == VF_DEVICE_CPU;
}

/* The time u's stage that v waits for ends, and whether it is u's device
 * stage (see the top: R(u, v)). A parent edge (`dep` false) is its ops'
 * functions' only: nothing on the host waited for either's device work
 * there (a parent's wait for a device child is inside its own run; a path
 * through the work ran longer than the run: found by a reviewer). */
static uint64_t released_at(const dag *g, const vf_profile *p, size_t u,
                            size_t v, bool dep, bool *through_dev)
{
    *through_dev = dep && has_dev(&p->records[u]) &&
                   host_waits_for_work(&p->records[v]);
    return *through_dev ? g->dev[u] : g->host[u];
}

/* The weights of v's stages (see the top). */
static uint64_t host_weight(const vf_profile *p, const dag *g, size_t v)
{
    const vf_profile_record *r = &p->records[v];
    uint64_t from = r->start_ns;
    if (host_waits_for_work(r)) /* for its device preds' work, first */
        for (size_t s = g->first_dep[v]; s < g->first_dep[v] + (size_t)r->ndeps;
             s++) { /* not a child's */
            ptrdiff_t u = g->dep_index[s];
            if (u >= 0 && has_dev(&p->records[u]) &&
                p->records[u].device_end_ns > from)
                from = p->records[u].device_end_ns;
        }
    /* Its time not its own (its waits, its children run inside it) is
     * not in it: a parent that waits for its children weighed as much as
     * all of them, as if they could not run beside each other. */
    uint64_t run = r->end_ns > from ? r->end_ns - from : 0;
    return run > r->inside_ns ? run - r->inside_ns : 0;
}

static uint64_t dev_weight(const vf_profile_record *r)
{
    uint64_t from = r->device_start_ns > r->end_ns ? r->device_start_ns
                                                   : r->end_ns;
    return r->device_end_ns > from ? r->device_end_ns - from : 0;
}

/* H, D and their binding preds of v, once all its preds are done. */
static void settle(const vf_profile *p, dag *g, size_t v)
{
    const vf_profile_record *r = &p->records[v];
    ptrdiff_t best = -1, best_dev = -1;
    uint64_t at = 0;
    bool through = false;
    for (size_t s = g->first_dep[v]; s < g->first_dep[v + 1]; s++) {
        ptrdiff_t u = g->dep_index[s];
        if (u < 0)
            continue;
        bool t;
        bool dep = s < g->first_dep[v] + (size_t)r->ndeps; /* not a child's */
        uint64_t x = released_at(g, p, (size_t)u, v, dep, &t);
        if (best < 0 || x > at ||
            (x == at && better_tie(&p->records[u], &p->records[best]))) {
            best = u;
            at = x;
            through = t;
        }
        if (dep && has_dev(r) && has_dev(&p->records[u]) &&
            (best_dev < 0 || g->dev[u] > g->dev[best_dev] ||
             (g->dev[u] == g->dev[best_dev] &&
              better_tie(&p->records[u], &p->records[best_dev]))))
            best_dev = u;
    }
    g->pred_host[v] = best;
    g->pred_host_dev[v] = through;
    uint64_t h = host_weight(p, g, v);
    g->total += h;
    g->host[v] = h + at;
    g->pred_dev[v] = -1;
    g->dev[v] = g->host[v];
    if (!has_dev(r))
        return;
    if (best_dev >= 0 && g->dev[best_dev] >= g->host[v]) {
        g->pred_dev[v] = best_dev;
        g->dev[v] = g->dev[best_dev];
    }
    uint64_t d = dev_weight(r);
    g->total += d;
    g->dev[v] += d;
}

/* The time v is done: its device stage's end when it has one. */
static uint64_t done_at(const vf_profile *p, const dag *g, size_t v)
{
    return has_dev(&p->records[v]) ? g->dev[v] : g->host[v];
}

int vf__prof_critical(const vf_profile *p, vf_profile_path *out,
                      vf__prof_crit_stages *stages)
{
    static const char who[] = "vf_profile_critical_path";
    if (p == NULL || out == NULL)
        return vf__fail(VF_EINVAL, "%s: NULL argument", who);
    memset(out, 0, sizeof *out);
    if (stages != NULL)
        memset(stages, 0, sizeof *stages);
    out->span_ns = p->span_ns;
    if (p->count == 0)
        return 0;
    dag g;
    if (build(p, &g) != 0) {
        release(&g);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    size_t head = 0, tail = 0;
    for (size_t v = 0; v < g.n; v++)
        if (g.indeg[v] == 0)
            g.queue[tail++] = v;
    while (head < tail) {
        size_t v = g.queue[head++];
        settle(p, &g, v);
        for (size_t s = g.succ_start[v]; s < g.succ_start[v + 1]; s++)
            if (--g.indeg[g.succ[s]] == 0)
                g.queue[tail++] = g.succ[s];
    }
    if (tail != g.n) {
        release(&g);
        return vf__fail(VF_EINVAL,
                        "%s: the dependency edges form a cycle "
                        "(%zu of %zu ops ordered)",
                        who, tail, g.n);
    }
    size_t last = 0;
    for (size_t v = 1; v < g.n; v++)
        if (done_at(p, &g, v) > done_at(p, &g, last) ||
            (done_at(p, &g, v) == done_at(p, &g, last) &&
             better_tie(&p->records[v], &p->records[last])))
            last = v;
    /* Walk back through the binding stages, twice: count, then fill (in
     * reverse). `dev`: the stage we are at is v's device stage. */
    size_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t i = count;
        ptrdiff_t v = (ptrdiff_t)last, prev = -1;
        bool dev = has_dev(&p->records[last]);
        uint64_t w = 0;
        while (v >= 0) {
            const vf_profile_record *r = &p->records[v];
            if (v != prev) { /* a new op on the path */
                if (pass == 0)
                    count++;
                else {
                    out->ids[--i] = r->id;
                }
                prev = v;
            }
            if (dev) {
                w = dev_weight(r);
                if (pass == 1 && stages != NULL) {
                    stages->weight[i] += w;
                    stages->device_ns[i] += w;
                    stages->device[i] = 1;
                }
                if (g.pred_dev[v] >= 0)
                    v = g.pred_dev[v]; /* still a device stage */
                else
                    dev = false; /* its own host stage */
                continue;
            }
            w = host_weight(p, &g, (size_t)v);
            if (pass == 1 && stages != NULL)
                stages->weight[i] += w;
            dev = g.pred_host_dev[v];
            v = g.pred_host[v];
        }
        if (pass == 0) {
            out->ids = vf__malloc(count * sizeof *out->ids);
            if (out->ids != NULL && stages != NULL) {
                stages->weight = vf__calloc(count, sizeof *stages->weight);
                stages->device = vf__calloc(count, sizeof *stages->device);
                stages->device_ns = vf__calloc(count,
                                               sizeof *stages->device_ns);
            }
            if (out->ids == NULL ||
                (stages != NULL &&
                 (stages->weight == NULL || stages->device == NULL ||
                  stages->device_ns == NULL))) {
                free(out->ids);
                out->ids = NULL;
                vf__prof_crit_stages_free(stages);
                release(&g);
                return vf__fail(VF_ENOMEM, "%s: out of memory", who);
            }
        }
    }
    out->count = count;
    out->length_ns = done_at(p, &g, last);
    /* The work beside it, weighed alike: busy time counts an op's waits
     * and the ops run inside it (the naive engine's children, a nested
     * wait's) twice, and a recursion of 30 ms of work on a span of 8
     * "allowed" 12.1 where it allows 3.75 (found by a user tester). */
    if (stages != NULL)
        stages->total_ns = g.total;
    const vf_profile_record *rl = &p->records[last];
    const vf_profile_record *rf = &p->records[vf__prof_find(p, out->ids[0])];
    uint64_t end = has_dev(rl) && rl->device_end_ns > rl->end_ns
                       ? rl->device_end_ns
                       : rl->end_ns;
    if (end > rf->start_ns)
        out->elapsed_ns = end - rf->start_ns;
    release(&g);
    return 0;
}

void vf__prof_crit_stages_free(vf__prof_crit_stages *stages)
{
    if (stages == NULL)
        return;
    free(stages->weight);
    free(stages->device);
    free(stages->device_ns);
    stages->weight = NULL;
    stages->device = NULL;
    stages->device_ns = NULL;
}

VF_API int vf_profile_critical_path(const vf_profile *p, vf_profile_path *out)
{
    return vf__prof_critical(p, out, NULL);
}

VF_API void vf_profile_path_destroy(vf_profile_path *path)
{
    if (path == NULL)
        return;
    free(path->ids);
    memset(path, 0, sizeof *path);
}
