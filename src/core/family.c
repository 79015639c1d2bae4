/* family.c: families, tree order and the running op (see family.h). */
#include "core/family.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/ref.h"
#include "core/bulk.h"
#include "core/failure.h"
#include "core/freelist.h"
#include "core/op.h"
#include "core/var.h"

_Thread_local vf__running vf__running_now;

/* Drop a reference to `f`: true when it was the last. Only a holder
 * passes a reference on (a run to its children, a child to its own
 * family), so a holder that sees itself alone stays alone, and frees
 * without a locked subtract (acquire: after every other holder's drop). */
static inline bool drop(vf__family *f)
{
    return atomic_load_explicit(&f->refs, memory_order_acquire) == 1 ||
           vf__ref_drop(&f->refs);
}

void vf__family_unref(vf__family *f)
{
    while (f != NULL && drop(f)) {
        /* Borrowed: only its run's end frees it so (run_over), and its
         * parent's run still holds `up`. */
        vf__family *up = f->up_borrowed ? NULL : f->up;
        vf__failure_unref(atomic_load(&f->first)); /* NULL: taken */
        /* A waiter is exchanged out by the wait that registered it or the
         * child that fires it, before the run's reference goes (wait.c). */
        VF__ASSERT(atomic_load(&f->waiter) == NULL);
        if (f->writes != f->own)
            free(f->writes);
        vf__fl_free(VF__FL_FAMILY, f);
        f = up;
    }
}

/* One level up: the key of the ancestor among the children of the
 * family above; `by_path`: the place of the ancestor a family stands for
 * past VF__FAMILY_DEPTH (`path_place`), not its own op's. */
static inline __attribute__((always_inline)) void
step_up(const vf__family **up, uint64_t *place, bool by_path)
{
    *place = by_path ? (*up)->path_place : (*up)->place;
    *up = (*up)->up;
}

/* The deeper of two keys climbs to the other's depth; returns 1 when a
 * climbed, -1 when b did, 0 when neither. */
static inline __attribute__((always_inline)) int
to_one_depth(const vf__family **a_up, uint64_t *a_place,
             const vf__family **b_up, uint64_t *b_place, bool by_path)
{
    uint32_t da = *a_up != NULL ? (*a_up)->depth : 0;
    uint32_t db = *b_up != NULL ? (*b_up)->depth : 0;
    int deeper = 0;
    for (; da > db; da--, deeper = 1)
        step_up(a_up, a_place, by_path);
    for (; db > da; db--, deeper = -1)
        step_up(b_up, b_place, by_path);
    return deeper;
}

/* Two keys of one depth climb together to the children of one family (or
 * the top level). */
static inline __attribute__((always_inline)) void
to_one_family(const vf__family **a_up, uint64_t *a_place,
              const vf__family **b_up, uint64_t *b_place, bool by_path)
{
    while (*a_up != *b_up) {
        step_up(a_up, a_place, by_path);
        step_up(b_up, b_place, by_path);
    }
}

bool vf__family_before(const vf__family *a_up, uint64_t a_place,
                       const vf__family *b_up, uint64_t b_place)
{
    /* The deeper key climbs to the other's depth (its ancestor's place
     * stands for it there); an ancestor comes before its descendants. */
    int deeper = to_one_depth(&a_up, &a_place, &b_up, &b_place, false);
    if (a_up == b_up && a_place == b_place)
        return deeper == -1; /* a is b's ancestor, or b is a's, or a is b */
    /* Up to the children of one family (or the top level): there, the
     * places of the two ancestors decide (one thread pushed both). */
    to_one_family(&a_up, &a_place, &b_up, &b_place, false);
    return a_place < b_place;
}

struct vf__failure *vf__family_take_first_slow(vf__family *f)
{
    vf__spin_lock(&f->lock);
    struct vf__failure *first = atomic_exchange(&f->first, NULL);
    vf__spin_unlock(&f->lock);
    return first;
}

void vf__family_run_over(vf__family *f)
{
    /* The run holds the only reference: no child is left that could keep
     * a failure meanwhile (a child holds one until it finished), and the
     * unref frees what `first` keeps. */
    if (atomic_load_explicit(&f->refs, memory_order_acquire) == 1) {
        vf__family_unref(f);
        return;
    }
    if (f->up_borrowed) { /* it outlives its run: hold `up` itself now */
        vf__family_ref(f->up);
        f->up_borrowed = false;
    }
    /* Then `first`: a child's failure kept meanwhile sees `run_over`
     * (vf__wait_child_failed stores, then loads; all seq_cst). */
    atomic_store(&f->run_over, true);
    if (atomic_load(&f->first) != NULL)
        vf__failure_unref(vf__family_take_first_slow(f));
    vf__family_unref(f);
}

void vf__family_run_ended(vf__op *op, vf__family *f)
{
    if (VF__LIKELY(op->def != NULL)) /* (none: unit tests' ops) */
        vf__bulk_run_over(op, f);
    vf__family_run_over(f);
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const vf__family_var *)a)->var,
              y = (uintptr_t)((const vf__family_var *)b)->var;
    return x < y ? -1 : x > y;
}

static const struct vf__var *write_at(const void *writes, int i)
{
    return ((const vf__family_var *)writes)[i].var;
}

/* Keep the vars `op` writes in `f` (vf__family_writes); false out of
 * memory. */
static bool keep_writes(vf__family *f, const vf__op *op)
{
    /* The vars the running op writes: its entries, or for a fused batch
     * those of its running op (bulk.h), whose children these are: the
     * other ops of the batch are not their ancestors. */
    const uint32_t *refs = NULL;
    int nrefs = op->nvars;
    if (VF__UNLIKELY(op->def != NULL && op->def->kind == &vf__kind_bulk))
        nrefs = vf__bulk_running_refs(op, &refs); /* (no def: unit tests) */
    int n = 0;
    for (int i = 0; i < nrefs; i++)
        n += refs != NULL ? (int)(refs[i] & 1u)
                          : vf__dep_write(vf__op_dep(op, i));
    f->nwrites = 0;
    f->writes = f->own;
    if (n > VF__FAMILY_OWN_WRITES &&
        (f->writes = vf__malloc((size_t)n * sizeof *f->writes)) == NULL)
        return false;
    /* The running op holds its vars: none is deleted under it, so each
     * one's generation is still its push's. */
    for (int i = 0; i < nrefs; i++) {
        const vf__dep *d = vf__op_dep(op,
                                      refs != NULL ? (int)(refs[i] >> 1) : i);
        if (refs != NULL ? (refs[i] & 1u) != 0 : vf__dep_write(d)) {
            const vf__var *v = vf__dep_var(d);
            f->writes[f->nwrites++] = (vf__family_var){
                v, atomic_load_explicit(&v->gen, memory_order_relaxed)};
        }
    }
    /* By address, for writer_of's search: a var set's order (a fused
     * batch's running item's refs may come in another). */
    for (int i = 1; i < f->nwrites; i++)
        if ((uintptr_t)f->writes[i - 1].var > (uintptr_t)f->writes[i].var) {
            qsort(f->writes, (size_t)f->nwrites, sizeof *f->writes, by_address);
            break;
        }
    return true;
}

/* The family of `up`'s chain whose op writes `var` (of generation
 * `gen`), or NULL. */
static const vf__family *writer_of(const vf__family *up,
                                   const struct vf__var *var, uint32_t gen)
{
    /* A search in each: a parent of thousands of vars may push a child
     * on each of them, and every child's var is looked up here from its
     * parent on (found by a reviewer: quadratic, 1.2 s for 80,000). */
    for (const vf__family *f = up; f != NULL; f = f->up) {
        int i = vf__varset_find(f->writes, f->nwrites, var, write_at);
        if (i >= 0 && f->writes[i].gen == gen)
            return f;
    }
    return NULL;
}

int vf__family_writes(const vf__family *up, const struct vf__var *var,
                      uint32_t gen)
{
    const vf__family *w = writer_of(up, var, gen);
    return w != NULL ? (int)(up->level - w->level) + 1 : 0;
}

void vf__family_child_var(vf__family *f, const struct vf__var *var,
                          uint32_t gen)
{
    /* The child's parent (f's op) and the ops above it: f->up, or past
     * VF__FAMILY_DEPTH the family f stands beside. Counted from the
     * child: 1 for its parent. */
    const vf__family *w = writer_of(f, var, gen);
    if (w == NULL)
        return;
    /* The highest level: an async parent's own writes (1) are let go by
     * its completion, which may come before its wait, an ancestor's never
     * (wait.c). */
    int level = (int)(f->level - w->level) + 1;
    int was = atomic_load_explicit(&f->waits_up, memory_order_relaxed);
    while (was < level && !atomic_compare_exchange_weak_explicit(
                              &f->waits_up, &was, level, memory_order_relaxed,
                              memory_order_relaxed)) {
    }
}

vf__family *vf__running_family(const vf__op *op, vf__family *up, uint64_t place)
{
    vf__family *f = vf__running_now.family;
    if (f == NULL) {
        f = vf__fl_alloc(VF__FL_FAMILY);
        if (f == NULL)
            return NULL;
        if (!keep_writes(f, op)) {
            vf__fl_free(VF__FL_FAMILY, f);
            return NULL;
        }
        atomic_init(&f->refs, 1); /* the run's */
        atomic_init(&f->pending, 0);
        atomic_init(&f->waited_from, 0);
        atomic_init(&f->notice_skipped, false);
        atomic_init(&f->skipped_by_later, false);
        atomic_init(&f->waits_up, 0);
        vf__spin_init(&f->lock);
        atomic_init(&f->first, NULL);
        atomic_init(&f->run_over, false);
        atomic_init(&f->waiter, NULL);
        f->place = place;
        f->level = up != NULL ? up->level + 1 : 1;
        f->root = vf__family_root(up, f->place);
        if (up != NULL && up->depth >= VF__FAMILY_DEPTH) {
            /* Deep: in its parent's stead, beside it (family.h). */
            f->depth = up->depth;
            f->up = up->up;
            f->path_place = up->path_place;
        } else {
            f->depth = up != NULL ? up->depth + 1 : 1;
            f->up = up;
            f->path_place = f->place;
        }
        f->up_borrowed = f->up != NULL && op->alone;
        if (f->up != NULL && !f->up_borrowed)
            vf__family_ref(f->up);
        vf__running_now.family = f;
    }
    return f;
}

/* Tree order by the places of the ancestors the families stand for
 * (`path_place`): -1 when the op at `a_place` under `a_up` comes before
 * the one at `b_place` under `b_up`, 1 after it, 0 when the families do
 * not tell them apart (the one descends from the other, or both from an
 * op whose levels below them no family keeps). */
static int path_order(const vf__family *a_up, uint64_t a_place,
                      const vf__family *b_up, uint64_t b_place)
{
    (void)to_one_depth(&a_up, &a_place, &b_up, &b_place, true);
    to_one_family(&a_up, &a_place, &b_up, &b_place, true);
    return a_place < b_place ? -1 : a_place > b_place;
}

/* Whether the op of family `f` is the op at `place` or descends from it:
 * 1 yes, 0 no, -1 unknown. The families beside their parents, past
 * VF__FAMILY_DEPTH, skip levels, and keep only the place of the ancestor
 * they stand for (`path_place`): an op whose own family stands beside its
 * parent (`beside`) may be on a skipped level; any other is kept. */
static int runs_within(const vf__family *f, uint64_t place, bool beside)
{
    bool skipped = false;
    for (; f != NULL; f = f->up) {
        if (f->place == place || f->path_place == place)
            return 1;
        skipped |= f->path_place != f->place; /* vf__running_family */
    }
    return skipped && beside ? -1 : 0;
}

/* Whether the family of the op at `place`, among the ancestors of the op
 * whose family is `up`, stands beside its parent (or is not found: it
 * may be anywhere). A family 128 levels down is deep but skips nothing
 * (its reviewer: a child of an op there was refused). */
static bool beside_or_unknown(const vf__family *up, uint64_t place)
{
    for (; up != NULL; up = up->up)
        if (up->place == place)
            return up->path_place != up->place;
    return true;
}

bool vf__family_after_delete(const vf__family *up, uint64_t place,
                             uint64_t holder, const vf__family *from,
                             uint64_t at)
{
    /* Pushed outside the run of the op it goes ahead behind, the delete
     * queued after that op, and after what that op pushes, as after
     * the ops the program's thread pushed meanwhile (varflow.h:
     * vf_var_destroy; found by the reviewer: the child of such an op was
     * refused, the op taken). */
    int within = runs_within(from, holder, beside_or_unknown(up, holder));
    if (within <= 0)
        return within < 0 && place > at;
    /* Within the deleting op's subtree: the place of its child on the
     * op's path decides. */
    uint64_t x = place;
    for (const vf__family *f = up; f != NULL; x = f->path_place, f = f->up)
        if (f == from)
            return x > at;
    /* Outside it, as far as the families tell: against the deleting op
     * (the delete is inside its run). */
    int order = path_order(up, place, from->up, from->path_place);
    return order != 0 ? order > 0 : place > at;
}
