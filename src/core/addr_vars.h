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
 * Lifetime: an entry lives until the engine is destroyed or the var's
 * delete has run. Across vf_var_destroy the address keeps the serial
 * order: vf_var_destroy marks the entry (the value's engine-tag field
 * zeroed: a live handle's tag is never 0), and a vf_var_of that finds the
 * mark revives the slot (vf__var_revive) under a new handle, live again,
 * so that what is pushed with it queues on the same var behind the
 * delete, after every op of the destroyed var. The delete then leaves the
 * slot alone. A delete that finishes with no revival frees the slot and
 * drops the entry, under the entry's forward stripe: revival and free are
 * decided under that lock and the var's, so exactly one of them happens,
 * and the next vf_var_of makes a fresh var only once nothing of the old
 * one is pending. A delete held by a stopped engine is not queued yet:
 * vf_var_of turns it into one that keeps the var (vf__var_api_revive_held)
 * and returns the same handle.
 * An address whose memory is freed and used again for other data keeps
 * its var: ops on the new data are ordered after ops on the old (extra
 * order, never a wrong result), as with OpenMP's depend clauses.
 */
#ifndef VF_ADDR_VARS_H
#define VF_ADDR_VARS_H

#include "base/common.h"
#include "core/var.h"

typedef struct vf__addr_vars vf__addr_vars;

/* After vf_var_destroy(v) pushed (or held) v's delete, and before that
 * delete calls its free callback: mark v's entry, if vf_var_of made v and
 * it is not marked yet, so that the next vf_var_of of the address revives
 * it. Takes stripe locks; a no-op for an engine that never called
 * vf_var_of. */
void vf__addr_vars_destroyed(vf_engine *e, vf_var v);

/* The delete of slot `v` (pushed with generation `gen`) finished: when v
 * is an address's var, free the slot (vf__var_free_slot) and drop the
 * entry, unless vf_var_of revived it, and return true; false when v is
 * not one of the table's vars at that generation (the caller frees it).
 * Called on the finishing thread; takes stripe locks, holds nothing. */
bool vf__addr_vars_free_slot(vf_engine *e, vf__var *v, uint32_t gen);

/* Lock (before a fork) or unlock (after it, in parent and child) every
 * stripe of the engine's table, forward ones first, so no thread holds one
 * across the fork. Taken before the bulk locks (a stripe is held across
 * vf_var_create, and, out of memory, vf_var_destroy). */
void vf__addr_vars_fork_lock(vf_engine *e, bool lock);

/* Free the table (engine destroy: no other thread uses the engine). */
void vf__addr_vars_free(vf__addr_vars *t);

#endif /* VF_ADDR_VARS_H */
