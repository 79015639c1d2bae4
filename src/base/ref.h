/*
 * ref.h: reference counts. An object shared by several owners counts them
 * in an atomic_int its creator sets; each owner drops its reference once,
 * and the one that drops the last frees the object.
 */
#ifndef VF_REF_H
#define VF_REF_H

#include <stdatomic.h>
#include <stdbool.h>

/* Drop one reference: true when it was the last (the caller frees the
 * object). acq_rel: the last dropper sees every write the other owners
 * made before they dropped theirs. */
static inline bool vf__ref_drop(atomic_int *refs)
{
    return atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) == 1;
}

#endif /* VF_REF_H */
