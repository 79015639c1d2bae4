/*
 * defs.h: the definitions an engine's ops share (vf__opdef, op.h).
 *
 * A one-shot push does not copy a definition into its op block: what ops
 * of one kind, route and flags have in common (the pool, the device, the
 * property, no_skip, nonblocking, sync or async) is one definition the
 * engine keeps, and the op points at it. There are few such combinations
 * (routes are a property by a device: a finite set), so the engine makes
 * each on first use and keeps it until it is destroyed.
 *
 * A CPU user op (nearly every push) finds its definition in a table
 * indexed by property and flags: one acquire load. Every other
 * combination (device ops, waits, deletes, batches) is on a list, read
 * lock-free and added to under `lock` (a leaf of the lock order).
 */
#ifndef VF_DEFS_H
#define VF_DEFS_H

#include <pthread.h>

#include "core/op.h"

#define VF__DEF_PROPS 6 /* vf_property's values */
#define VF__DEF_FLAGS 8 /* no_skip, nonblocking, async */

typedef struct vf__defs {
    pthread_mutex_t lock; /* adding a definition */
    /* CPU user ops by property and flags (acquire/release). */
    _Atomic(vf__opdef *) cpu[VF__DEF_PROPS][VF__DEF_FLAGS];
    _Atomic(vf__opdef *) others; /* the list, newest first (acq/rel) */
} vf__defs;

int vf__defs_init(vf__defs *d);

/* Free every definition (the engine is going: no op is left). */
void vf__defs_destroy(vf__defs *d);

/* The engine's definition equal to `proto` in everything ops share (its
 * function, argument, done and name are not looked at), made on first
 * use; NULL without memory. */
const vf__opdef *vf__defs_share(vf__defs *d, const vf__opdef *proto);

/* A definition's column in `cpu` (its flags). */
static inline unsigned vf__defs_flag_bits(bool no_skip, bool nonblocking,
                                          bool async)
{
    return (no_skip ? 1u : 0u) | (nonblocking ? 2u : 0u) | (async ? 4u : 0u);
}

/* The definition of a one-shot push of `desc` when it is a CPU op seen
 * before (one load, inline on the push's path), else NULL: then
 * vf__defs_for_push. Only an op known to be well formed is looked up (a
 * slot is only ever filled by a definition that was). */
static inline const vf__opdef *vf__defs_seen(vf__defs *d, const vf_op *desc)
{
    if (VF__LIKELY(desc != NULL) && desc->device.type == VF_DEVICE_CPU &&
        desc->device.id == 0 && (unsigned)desc->property < VF__DEF_PROPS &&
        (desc->fn == NULL) != (desc->async_fn == NULL))
        return atomic_load_explicit(
            &d->cpu[desc->property][vf__defs_flag_bits(
                desc->no_skip, desc->nonblocking, desc->async_fn != NULL)],
            memory_order_acquire);
    return NULL;
}

/* The engine's definition for a one-shot push of `desc`, checked and
 * routed as vf__opdef_fill does (vf__defs_seen first). 0, or a VF_E*
 * code with a detail naming `who`. */
int vf__defs_for_push(vf_engine *e, const char *who, const vf_op *desc,
                      const vf__opdef **def);

#endif /* VF_DEFS_H */
