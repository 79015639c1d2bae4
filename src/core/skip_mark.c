/* skip_mark.c: marks of writes skipped for a later op's failure (see
 * skip_mark.h), and a var's (var.h). Every change and read of a var's
 * mark is under the var's lock: the writes that clear it
 * (vf__var_recomputed) and the waits that read it may be on other threads
 * than the op that made it. */
#include "core/skip_mark.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "core/family.h"
#include "core/var.h"

/* Out of memory for a mark: one that names no failure and no key, and
 * counts as before every wait, so the waits still say VF_ESKIPPED. Never
 * freed. */
static vf__skip_mark unknown_mark = {0, NULL, NULL};

vf__skip_mark *vf__skip_mark_make(vf__failure *f, vf__family *up,
                                  uint64_t place)
{
    /* Only a child meets a later op's failure: a top-level op is queued on
     * its vars before any descendant of an op pushed after it. */
    if (f == NULL || up == NULL || !vf__failure_after(f, up, place))
        return NULL;
    vf__skip_mark *m = vf__malloc(sizeof *m);
    if (m == NULL)
        return &unknown_mark;
    m->place = place;
    m->up = up;
    vf__family_ref(up);
    m->cause = f;
    vf__failure_ref(f);
    return m;
}

void vf__skip_mark_free(vf__skip_mark *m)
{
    if (m == NULL || m == &unknown_mark)
        return;
    vf__failure_unref(m->cause);
    vf__family_unref(m->up);
    free(m);
}

bool vf__skip_mark_before(const vf__skip_mark *m, vf__wait_key key,
                          vf__failure **cause)
{
    if (m == NULL ||
        (m != &unknown_mark &&
         !vf__wait_key_after(m->up, m->place, key.up, key.next, key.self)))
        return false;
    *cause = m->cause;
    if (m->cause != NULL)
        vf__failure_ref(m->cause);
    return true;
}

/* v's mark becomes `m` (NULL: none); the one it replaces is freed. */
static void var_mark_set(vf__var *v, vf__skip_mark *m)
{
    vf__spin_lock(&v->lock);
    vf__skip_mark *old = atomic_exchange_explicit(&v->skip_mark, m,
                                                  memory_order_relaxed);
    vf__spin_unlock(&v->lock);
    vf__skip_mark_free(old);
}

void vf__var_write_skipped(vf__var *v, vf__failure *f, vf__family *up,
                           uint64_t place)
{
    vf__skip_mark *m = vf__skip_mark_make(f, up, place);
    if (m != NULL)
        var_mark_set(v, m);
    else
        vf__var_recomputed(v); /* skipped in push order: the rule's */
}

void vf__var_unmark(vf__var *v)
{
    var_mark_set(v, NULL);
}

bool vf__var_skip_before(const vf__var *v, vf__wait_key key,
                         vf__failure **cause)
{
    return vf__skip_mark_before(
        atomic_load_explicit(&v->skip_mark, memory_order_relaxed), key, cause);
}
