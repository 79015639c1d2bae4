/*
 * dot.c: the recorded DAG as a Graphviz dot file.
 *
 * A node per op (its name and id, "op #<id>" alone for an unnamed one; its
 * worker and run time; skipped ops dashed and
 * grey, failed ops orange), an edge per recorded dependency (once per pair
 * of ops), a dashed one from each child's parent (vf_profile_record.parent),
 * left to right in dependency order. The critical path
 * (critical.c) is drawn in red with thick edges, and the graph's
 * label says its length against the span. Graphviz lays out a few thousand
 * nodes at most in reasonable time, so only the first VF__PROF_DOT_MAX ops
 * by id are written, and the label says so; edges to ops left out are left
 * out too.
 */
#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/engine_type.h"
#include "profile/out.h"
#include "varflow_profile.h"

#define CRIT_COLOR "#d62728"

static void dot_node(FILE *f, const vf_profile_record *r, int critical)
{
    char d[32];
    fprintf(f, "  n%" PRIu64 " [label=\"", r->id);
    if (vf__prof_unnamed(r)) { /* "op #3": its id is its name */
        fprintf(f, "op #%" PRIu64 "\\n", r->id);
    } else {
        vf__prof_text_string(f, r->name, -1, 1);
        fprintf(f, "\\n#%" PRIu64 " ", r->id);
    }
    if (r->worker >= 0)
        fprintf(f, "w%d", r->worker);
    else
        fprintf(f, "inline");
    if (r->status == VF_ESKIPPED)
        fprintf(f, " skipped\"");
    else
        fprintf(f, " %s%s\"", vf__prof_human(d, r->end_ns - r->start_ns),
                r->status != 0 ? " FAILED" : "");
    if (r->status == VF_ESKIPPED)
        fprintf(f, ", style=\"rounded,filled,dashed\", fillcolor=\"#f2f2f2\", "
                   "fontcolor=\"#777777\"");
    else if (r->status != 0)
        fprintf(f, ", fillcolor=\"#ffe0b2\"");
    if (critical)
        fprintf(f, ", color=\"" CRIT_COLOR "\", penwidth=2.5");
    fprintf(f, "];\n");
}

/* Whether the path goes from op `from` to op `to`, one right after the
 * other (its edge is drawn red). */
static bool path_step(const vf_profile_path *path, uint64_t from, uint64_t to)
{
    for (size_t j = 1; j < path->count; j++)
        if (path->ids[j] == to && path->ids[j - 1] == from)
            return true;
    return false;
}

int vf__prof_write_dot(const vf_profile *p, FILE *f)
{
    size_t shown = p->count < VF__PROF_DOT_MAX ? p->count : VF__PROF_DOT_MAX;
    unsigned char *crit = vf__calloc(p->count + 1, 1);
    if (crit == NULL)
        return VF_ENOMEM;
    vf_profile_path path;
    int prc = vf_profile_critical_path(p, &path);
    if (prc == VF_ENOMEM) {
        free(crit);
        return prc;
    }
    for (size_t i = 0; prc == 0 && i < path.count; i++) {
        ptrdiff_t k = vf__prof_find(p, path.ids[i]);
        if (k >= 0)
            crit[k] = 1;
    }
    char a[32], b[32];
    fprintf(f,
            "digraph varflow {\n  graph [rankdir=LR, fontname=\"Helvetica\","
            " fontsize=12, labelloc=t, label=\"varflow profile: %s engine, "
            "%zu ops",
            vf__engine_type_name(p->kind), p->count);
    if (prc == 0 && path.count > 0)
        fprintf(f, "; critical path (red) %s of %s span (%.1f%%), %zu ops",
                vf__prof_human(a, path.length_ns),
                vf__prof_human(b, p->span_ns),
                p->span_ns ? 100.0 * (double)path.length_ns / (double)p->span_ns
                           : 0.0,
                path.count);
    if (shown < p->count)
        fprintf(f, "\\ntruncated: showing the first %zu of %zu ops (by id)",
                shown, p->count);
    if (p->dropped)
        fprintf(f, "\\n%" PRIu64 " ops were dropped while recording",
                p->dropped);
    fprintf(f, "\"];\n  node [shape=box, style=\"rounded,filled\", "
               "fontname=\"Helvetica\", fontsize=10, fillcolor=\"#e8eef7\", "
               "color=\"#7f8fa6\"];\n  edge [color=\"#7f8fa6\", "
               "arrowsize=0.7];\n");
    for (size_t i = 0; i < shown; i++)
        dot_node(f, &p->records[i], crit[i]);
    for (size_t i = 0; i < shown; i++) {
        const vf_profile_record *r = &p->records[i];
        for (int k = 0; k < r->ndeps; k++) {
            ptrdiff_t u = vf__prof_find(p, r->deps[k]);
            if (u < 0 || (size_t)u >= shown)
                continue;
            fprintf(f, "  n%" PRIu64 " -> n%" PRIu64, r->deps[k], r->id);
            if (crit[i] && crit[u] && path_step(&path, r->deps[k], r->id))
                fprintf(f, " [color=\"" CRIT_COLOR "\", penwidth=3]");
            fprintf(f, ";\n");
        }
        /* From its parent, dashed; on the path either way round (a
         * child that ended first leads to its parent: critical.c). */
        ptrdiff_t u = r->parent != 0 ? vf__prof_find(p, r->parent) : -1;
        if (u < 0 || (size_t)u >= shown)
            continue;
        fprintf(f, "  n%" PRIu64 " -> n%" PRIu64 " [style=dashed", r->parent,
                r->id);
        if (crit[i] && crit[u] &&
            (path_step(&path, r->parent, r->id) ||
             path_step(&path, r->id, r->parent)))
            fprintf(f, ", color=\"" CRIT_COLOR "\", penwidth=3");
        fprintf(f, "];\n");
    }
    fprintf(f, "}\n");
    if (prc == 0)
        vf_profile_path_destroy(&path);
    free(crit);
    return 0;
}
