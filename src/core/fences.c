/* fences.c: the fences device ops leave on vars, and how the host meets
 * them (see fences.h). */
#include "core/fences.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ref.h"
#include "core/engine.h"

/* --- a fence ------------------------------------------------------------ */

void vf__fence_ref(vf__fence *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void vf__fence_unref(vf__fence *f)
{
    if (f == NULL || !vf__ref_drop(&f->refs))
        return;
    f->cls->event_release(f->ev);
    vf__failure_unref(f->failure);
    vf__skip_mark_free(f->mark);
    free(f);
}

vf__failure *vf__fence_host_wait(vf_engine *e, vf__fence *f)
{
    if (!atomic_load_explicit(&f->resolved, memory_order_acquire)) {
        f->cls->event_wait(f->ev, NULL);
        atomic_fetch_add_explicit(&e->dev.host_syncs, 1, memory_order_relaxed);
        /* Complete: the completer resolves it as soon as it reaches it,
         * which may be after a long op of another stream (it completes
         * the engine's device ops in turn): yields first, then growing
         * naps (a waiter yielding all that time burned a core: found by
         * an auditor, 0.8-1.2 s of CPU in a 1.4 s wait). */
        long nap_ns = 20 * 1000;
        for (int tries = 0;
             !atomic_load_explicit(&f->resolved, memory_order_acquire);
             tries++) {
            if (tries < 64) {
                sched_yield();
                continue;
            }
            nanosleep(&(struct timespec){0, nap_ns}, NULL);
            if (nap_ns < 1000 * 1000)
                nap_ns *= 2;
        }
    }
    return f->failure;
}

/* --- a var's fences ---------------------------------------------------- */

int vf__fences_of_var(vf__var *v, bool write_fence, bool reads, vf__fence **out)
{
    int n = 0;
    vf__spin_lock(&v->lock);
    if (write_fence && v->wfence != NULL) {
        vf__fence_ref(v->wfence);
        out[n++] = v->wfence;
    }
    for (int i = 0; reads && i < v->nrfences; i++) {
        vf__fence_ref(v->rfences[i]);
        out[n++] = v->rfences[i];
    }
    vf__spin_unlock(&v->lock);
    return n;
}

/* Under v's lock: what v's write fence `w` (may be NULL) left becomes
 * v's own failure, in the same step as the caller's change of v's fences
 * (var.h: vf__var_swap_failure_locked; a wait reads both under the lock).
 * Returns the record it replaced, for the caller to let go of after
 * unlocking. A failure sticks to what it wrote until a newer one
 * replaces it (rule 9), and vf__fences_var_failure reads the newest
 * fence's failure, else v's own: when w goes, its failure would be lost
 * and an older one of v's own come back.
 *
 * Its two callers: a device write replacing w (the writer holds v
 * exclusively), whose new fence is newer (w still in flight needs
 * nothing: the writer's stream waited for it carrying its failure,
 * device_op_begin, and the new fence carries it if it comes; a no_skip
 * writer, whose waits only order, met its fences on the host before it
 * ran, run_body, and found none); and the drop of w once resolved (the
 * caller holds v exclusively, or no op runs). */
static vf__failure *take_fence_failure(vf__var *v, vf__fence *w)
{
    vf__failure *f = w != NULL ? vf__fence_failure(w) : NULL;
    if (f == NULL)
        return NULL;
    vf__failure_ref(f);
    return vf__var_swap_failure_locked(v, f);
}

void vf__fences_leave(vf__op *op, vf__fence *f)
{
    vf__fences_leave_rw(op, f, f);
}

void vf__fences_leave_rw(vf__op *op, vf__fence *wf, vf__fence *rf)
{
    for (int i = 0; i < op->nvars; i++) {
        vf__var *v = vf__dep_var(vf__op_dep(op, i));
        bool write = vf__dep_write(vf__op_dep(op, i));
        vf__fence *f = write ? wf : rf;
        vf__fence *drop[1 + VF__VAR_READ_FENCES];
        int ndrop = 0;
        vf__failure *replaced = NULL;
        vf__fence_ref(f);
        vf__spin_lock(&v->lock);
        if (write) {
            if (v->wfence != NULL)
                drop[ndrop++] = v->wfence;
            replaced = take_fence_failure(v, v->wfence);
            for (int k = 0; k < v->nrfences; k++)
                drop[ndrop++] = v->rfences[k];
            v->nrfences = 0;
            v->wfence = f;
        } else {
            int k = 0; /* a newer read fence of the same stream replaces */
            while (k < v->nrfences && v->rfences[k]->stream != f->stream)
                k++;
            if (k == v->nrfences && k == VF__VAR_READ_FENCES)
                k = 0; /* full: the oldest goes (waited for below) */
            if (k < v->nrfences)
                drop[ndrop++] = v->rfences[k];
            else
                v->nrfences++;
            v->rfences[k] = f;
        }
        vf__spin_unlock(&v->lock);
        vf__failure_unref(replaced);
        for (int k = 0; k < ndrop; k++) {
            /* A read fence pushed out by a full var, from another stream,
             * must still be met by the next writer: meet it now. */
            if (!write && drop[k]->stream != f->stream)
                vf__fence_host_wait(vf__op_engine(op), drop[k]);
            vf__fence_unref(drop[k]);
        }
    }
}

/* --- meeting them on the host ------------------------------------------ */

void vf__fences_host_wait(vf__op *op)
{
    vf_engine *e = vf__op_engine(op);
    vf__fence *fs[1 + VF__VAR_READ_FENCES];
    for (int i = 0; i < op->nvars; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        int n = vf__fences_of_var(vf__dep_var(d), true, vf__dep_write(d), fs);
        for (int k = 0; k < n; k++) {
            vf__fence_host_wait(e, fs[k]);
            vf__fence_unref(fs[k]);
        }
    }
}

vf__failure *vf__fences_var_failure(vf_engine *e, vf__var *v, vf__failure *own,
                                    bool own_live)
{
    /* No lock: the write fence changes only under an op that holds v
     * exclusively, and the caller holds v (the queue's hand-off orders
     * the last change before this read). */
    vf__fence *w = v->wfence;
    if (w == NULL)
        return own;
    /* The last write's work still in flight decides between its own
     * failure and v's, which it supersedes only by failing: the host
     * waits for it, when v's is one that matters. */
    if (!atomic_load_explicit(&w->resolved, memory_order_acquire) &&
        own != NULL && own_live)
        vf__fence_host_wait(e, w);
    vf__failure *f = vf__fence_failure(w);
    return f != NULL ? f : own;
}

void vf__fences_drop(vf__var *v)
{
    vf__spin_lock(&v->lock);
    if (v->wfence == NULL && v->nrfences == 0) {
        vf__spin_unlock(&v->lock);
        return;
    }
    vf__fence *w = v->wfence;
    vf__fence *r[VF__VAR_READ_FENCES];
    int n = v->nrfences;
    memcpy(r, v->rfences, sizeof r);
    vf__failure *replaced = take_fence_failure(v, w);
    v->wfence = NULL;
    v->nrfences = 0;
    vf__spin_unlock(&v->lock);
    vf__failure_unref(replaced);
    vf__fence_unref(w);
    for (int i = 0; i < n; i++)
        vf__fence_unref(r[i]);
}

void vf__fences_clear_written(const vf__op *op)
{
    for (int i = 0; i < op->nvars; i++) {
        const vf__dep *d = vf__op_dep(op, i);
        if (vf__dep_write(d))
            vf__fences_drop(vf__dep_var(d));
    }
}

void vf__fences_drop_after_fork(vf__var *v)
{
    vf__failure_unref(take_fence_failure(v, v->wfence)); /* no op runs */
    vf__fence *f[1 + VF__VAR_READ_FENCES];
    int n = 0;
    if (v->wfence != NULL)
        f[n++] = v->wfence;
    for (int i = 0; i < v->nrfences; i++)
        f[n++] = v->rfences[i];
    v->wfence = NULL;
    v->nrfences = 0;
    /* Their events are complete (the fork drained the engine first) and
     * no thread of the parent's holds their locks here; CUDA's cannot be
     * touched after a fork: left. */
    for (int i = 0; i < n; i++)
        if (f[i]->cls->usable_after_fork)
            vf__fence_unref(f[i]);
}
