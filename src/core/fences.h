/*
 * fences.h: what a var remembers of device work in flight on it, and how
 * the host meets it (device_ops.h tells the whole story of device ops).
 *
 * A var keeps the fence of its last device write and those of the device
 * reads since (at most VF__VAR_READ_FENCES, one per stream). A device op
 * collects the fences it must follow (vf__fences_of_var) and, once its
 * function returned, leaves its own on its vars (vf__fences_leave); an op
 * that runs on the host waits for them (vf__fences_host_wait) and, for
 * what it writes, drops them (vf__fences_clear_written): a failure its
 * last device write's work left becomes the var's own (rule 9: it sticks).
 * Which failure a var holds for an op is vf__fences_var_failure's answer.
 *
 * Locks: a var's read fences are guarded by the var's spinlock; its write
 * fence changes only under an op that holds the var exclusively, also
 * under the spinlock so that a host waiter may read it (engine.h has the
 * lock order).
 */
#ifndef VF_FENCES_H
#define VF_FENCES_H

#include <stdbool.h>

#include "core/failure.h"
#include "core/skip_mark.h"
#include "device/device.h"

typedef struct vf__op vf__op;
typedef struct vf__var vf__var;

#define VF__VAR_READ_FENCES 4 /* reads in flight a var remembers */

/* A device op's event, as its vars see it. Reference counted. */
typedef struct vf__fence {
    atomic_int refs; /* acq_rel: the last unref frees */
    const vf__device_class *cls;
    vf__event *ev;
    const vf__stream *stream; /* identity only: same stream, same order */
    /* Set by the completer once `ev` completed, then `resolved` is stored
     * (release); read after an acquire load of `resolved`. */
    vf__failure *failure;
    /* Its op's work was skipped on the stream for `failure`, a later op's:
     * the write's mark (skip_mark.h), or NULL; written and read as
     * `failure`. */
    vf__skip_mark *mark;
    atomic_bool resolved;
    /* vf__failure_claims when its op began to wait for what it follows:
     * no failure its work may inherit on the device was claimed by then
     * (less, when its op carries one that was: device_ops.h, "A claim
     * while work is in flight"). */
    uint64_t claims;
} vf__fence;

void vf__fence_ref(vf__fence *f);
void vf__fence_unref(vf__fence *f);

/* The failure a resolved fence carries (no reference), or NULL (none, or
 * not resolved yet). */
static inline vf__failure *vf__fence_failure(vf__fence *f)
{
    return atomic_load_explicit(&f->resolved, memory_order_acquire) ? f->failure
                                                                    : NULL;
}

/* Wait on the host until f's work completed and the completer resolved
 * it; returns the failure it carries (no reference: the caller holds f),
 * or NULL. */
vf__failure *vf__fence_host_wait(vf_engine *e, vf__fence *f);

/* A write fence an op would carry, for an op that began when the
 * process's count of claims was `claims`: still in flight from before a
 * claim, its work may have inherited a failure a wait has since claimed
 * (device_ops.h, "A claim while work is in flight"), so it is met on the
 * host, where its outcome is known. */
static inline void vf__fence_meet_if_claimed(vf_engine *e, vf__fence *f,
                                             uint64_t claims)
{
    if (VF__UNLIKELY(f->claims != claims) &&
        !atomic_load_explicit(&f->resolved, memory_order_acquire))
        vf__fence_host_wait(e, f);
}

/* The fences an op depends on through var v, copied (with references)
 * into out[] (room for 1 + VF__VAR_READ_FENCES) in one visit under the
 * var's lock; returns how many. With `write_fence`, the write fence: the
 * work that wrote what the op uses, whose failure the op inherits. With
 * `reads`, for a var the op writes, the read fences: work that only read
 * v, which the op must follow (it overwrites what they read) but whose
 * failure is none of its business (rule 9 puts a failure on what the
 * failing op writes only). */
int vf__fences_of_var(vf__var *v, bool write_fence, bool reads,
                      vf__fence **out);

/* Leave a device op's fence `f` on its vars (each takes a reference): the
 * write fence of what it writes, a read fence of what it reads. A var with
 * no room left for a read fence waits on the host for its oldest one. A
 * read fence replaces an older one of the same stream (its work completes
 * after the older's): so the fences of a device graph's nodes, which
 * complete in no order, leave `rf` for their reads instead, a fence of the
 * whole graph's launch (vf__fences_leave_rw). */
void vf__fences_leave(vf__op *op, vf__fence *f);
void vf__fences_leave_rw(vf__op *op, vf__fence *f, vf__fence *rf);

/* Before a host-side op runs (engine with devices): wait on the host for
 * the fences of its vars that it depends on. */
void vf__fences_host_wait(vf__op *op);

/* The failure var v holds (no reference; NULL: none), for an op that
 * holds v (or a wait whose marker does), v's own being `own` (v->failure,
 * loaded by the caller), which is live for that op or not (`own_live`,
 * failure.h): its last device write's, when that work failed after the op
 * released v (its write fence, resolved), else v's own. The
 * fence's is the newer: a host write turns it into v's own and drops the
 * fence before it runs (vf__fences_clear_written), and a device write
 * replaces the fence, the replaced one's failure becoming v's own
 * (vf__fences_leave). A fence still in flight is waited for on the host
 * only when v's own failure is live for the op (which of the two holds
 * depends on that work); otherwise its failure is met on the device,
 * where the stream that waits for it inherits it (device.h). */
vf__failure *vf__fences_var_failure(vf_engine *e, vf__var *v, vf__failure *own,
                                    bool own_live);

/* A host-side op that met its fences (vf__fences_host_wait), before it
 * runs: the vars it writes take their last device write's failure, if
 * its work failed (rule 9: it sticks to the var), and drop their fences
 * (the op holds them exclusively, and nothing of theirs is in flight). */
void vf__fences_clear_written(const vf__op *op);

/* Drop everything a var remembers of device work, by one that holds it
 * exclusively or when no op runs (its slot is freed, the engine is
 * destroyed): a failure its last device write's work left becomes the
 * var's own. */
void vf__fences_drop(vf__var *v);

/* In a child after fork(), its only thread: drop the fences of the
 * parent's device work, without its lock (the parent's threads are gone,
 * and whatever var lock one held with them). The stop before the fork
 * waited for that work, so the write fence is resolved, and a failure it
 * carries becomes the var's own, as vf__fences_drop makes it: forgotten
 * with the fence, an op reading the var ran in the child where the serial
 * program skips it (found by a user tester). A device usable after a fork
 * (the emulated one) has its fences freed; CUDA's events cannot be
 * touched in the child and are left (a user tester found the emulated
 * device's leaked in every child that destroyed its engine). */
void vf__fences_drop_after_fork(vf__var *v);

#endif /* VF_FENCES_H */
