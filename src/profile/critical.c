/*
 * critical.c: the critical path of a snapshot.
 *
 * The recorded DAG has an edge u -> v for every id u in v's deps that the
 * snapshot holds (u's finishing released one of v's vars). Ids follow push
 * order, but an edge may still go from a larger id to a smaller one (two
 * threads pushing at once take ids before they take var locks), so the
 * nodes are put in topological order by Kahn's algorithm rather than by id;
 * a cycle can only come from a corrupt file and is refused.
 *
 * In that order each node gets dist(v) = run(v) + max over its preds u of
 * dist(u), with run(v) = end - start: the most run time of any chain that
 * ends with v. The path ends at the node of largest dist and is walked back
 * through each node's chosen predecessor. All in integer nanoseconds, so
 * the result is exact; ties are broken the same way every time (the
 * predecessor, or the last node, that ended last, then the smaller id).
 * Waiting is deliberately not in the weights: the critical path says how
 * fast the DAG could go with unlimited workers and a free engine; the
 * chain's own waiting (elapsed - length) says how far the run was from it.
 * O(n log n + edges log n) (deps are looked up by binary search).
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "profile/out.h"

/* Whether record a should be preferred to record b at equal dist. */
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
    uint64_t *dist;
    ptrdiff_t *pred;
} dag;

static void release(dag *g)
{
    free(g->dep_index);
    free(g->first_dep);
    free(g->succ_start);
    free(g->succ);
    free(g->indeg);
    free(g->queue);
    free(g->dist);
    free(g->pred);
}

static int build(const vf_profile *p, dag *g)
{
    size_t n = p->count, ndeps = 0;
    for (size_t i = 0; i < n; i++)
        ndeps += (size_t)p->records[i].ndeps;
    memset(g, 0, sizeof *g);
    g->n = n;
    g->dep_index = vf__malloc((ndeps + 1) * sizeof *g->dep_index);
    g->first_dep = vf__malloc((n + 1) * sizeof *g->first_dep);
    g->succ_start = vf__calloc(n + 2, sizeof *g->succ_start);
    g->succ = vf__malloc((ndeps + 1) * sizeof *g->succ);
    g->indeg = vf__calloc(n + 1, sizeof *g->indeg);
    g->queue = vf__malloc((n + 1) * sizeof *g->queue);
    g->dist = vf__malloc((n + 1) * sizeof *g->dist);
    g->pred = vf__malloc((n + 1) * sizeof *g->pred);
    if (!g->dep_index || !g->first_dep || !g->succ_start || !g->succ ||
        !g->indeg || !g->queue || !g->dist || !g->pred)
        return VF_ENOMEM;
    size_t slot = 0;
    for (size_t v = 0; v < n; v++) {
        const vf_profile_record *r = &p->records[v];
        g->first_dep[v] = slot;
        for (int k = 0; k < r->ndeps; k++, slot++) {
            ptrdiff_t u = vf__prof_find(p, r->deps[k]);
            g->dep_index[slot] = u;
            if (u >= 0) {
                g->succ_start[u + 1]++;
                g->indeg[v]++;
            }
        }
    }
    g->first_dep[n] = slot;
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

/* dist and pred of v, once all its preds are done. */
static void settle(const vf_profile *p, dag *g, size_t v)
{
    const vf_profile_record *r = &p->records[v];
    ptrdiff_t best = -1;
    for (size_t s = g->first_dep[v]; s < g->first_dep[v + 1]; s++) {
        ptrdiff_t u = g->dep_index[s];
        if (u < 0)
            continue;
        if (best < 0 || g->dist[u] > g->dist[best] ||
            (g->dist[u] == g->dist[best] &&
             better_tie(&p->records[u], &p->records[best])))
            best = u;
    }
    g->pred[v] = best;
    g->dist[v] = (r->end_ns - r->start_ns) + (best >= 0 ? g->dist[best] : 0);
}

VF_API int vf_profile_critical_path(const vf_profile *p, vf_profile_path *out)
{
    static const char who[] = "vf_profile_critical_path";
    if (p == NULL || out == NULL)
        return vf__fail(VF_EINVAL, "%s: NULL argument", who);
    memset(out, 0, sizeof *out);
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
        if (g.dist[v] > g.dist[last] ||
            (g.dist[v] == g.dist[last] &&
             better_tie(&p->records[v], &p->records[last])))
            last = v;
    size_t count = 0;
    for (ptrdiff_t v = (ptrdiff_t)last; v >= 0; v = g.pred[v])
        count++;
    out->ids = vf__malloc(count * sizeof *out->ids);
    if (out->ids == NULL) {
        release(&g);
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    size_t i = count;
    ptrdiff_t first = (ptrdiff_t)last;
    for (ptrdiff_t v = (ptrdiff_t)last; v >= 0; v = g.pred[v]) {
        out->ids[--i] = p->records[v].id;
        first = v;
    }
    out->count = count;
    out->length_ns = g.dist[last];
    if (p->records[last].end_ns > p->records[first].start_ns)
        out->elapsed_ns = p->records[last].end_ns - p->records[first].start_ns;
    release(&g);
    return 0;
}

VF_API void vf_profile_path_free(vf_profile_path *path)
{
    if (path == NULL)
        return;
    free(path->ids);
    memset(path, 0, sizeof *path);
}
