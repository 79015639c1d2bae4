/*
 * addr_vars.h: the engine's table from addresses to vars (vf_var_of).
 *
 * OpenMP names a dependence by an address; vf_var_of gives the var of an
 * address, made on its first use. The table is two sets of stripes, made
 * on the engine's first vf_var_of (an engine that never calls it pays
 * nothing but one pointer):
 *   forward: address -> var id, in VF__ADDR_STRIPES maps picked by the
 *            address's hash, each under its own mutex; a lookup is one
 *            find in one map under one uncontended lock;
 *   reverse: var id -> address, picked by the id, so vf_var_destroy of a
 *            var made here can find and drop its entry.
 * Both maps are base/hashmap.h's, which is not thread-safe: each stripe's
 * lock guards its map. Lock order: a forward stripe, then a reverse one
 * (never the other way round); vf_var_create runs under a forward stripe
 * (it takes the var table's lock: that one is never held while taking a
 * stripe). No user code runs under either.
 * Lifetime: an entry lives until the engine is destroyed or the var is
 * destroyed (vf_var_destroy; then the next vf_var_of of the address makes
 * a new var). An address whose memory is freed and used again for other
 * data keeps its var: ops on the new data are ordered after ops on the old
 * (extra order, never a wrong result), as with OpenMP's depend clauses.
 */
#ifndef VF_ADDR_VARS_H
#define VF_ADDR_VARS_H

#include "base/common.h"

typedef struct vf__addr_vars vf__addr_vars;

/* Drop the var `id`'s entry, if vf_var_of made it (after its delete was
 * pushed). Takes stripe locks; a no-op for an engine that never called
 * vf_var_of. */
void vf__addr_vars_forget(vf_engine *e, vf_var v);

/* Lock (before a fork) or unlock (after it, in parent and child) every
 * stripe of the engine's table, forward ones first, so no thread holds one
 * across the fork. Taken before the bulk locks (a stripe is held across
 * vf_var_create, and, out of memory, vf_var_destroy). */
void vf__addr_vars_fork_lock(vf_engine *e, bool lock);

/* Free the table (engine destroy: no other thread uses the engine). */
void vf__addr_vars_free(vf__addr_vars *t);

#endif /* VF_ADDR_VARS_H */
