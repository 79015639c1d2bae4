/*
 * failure.h: failure records for ops.
 *
 * An op fails when its function returns non-zero (or completes with an
 * error): a vf__failure record is made, stored on every var the op writes,
 * and passed on by skipped ops to the vars they write. One record is one
 * failure chain, so it is reported once: the first wait that sees it claims
 * it (`reported`), and from then on it is inert wherever it is still
 * stored. wait_all clears the rest by moving the engine to a new epoch: a
 * record of an older epoch is inert too.
 *
 * A failure must not be lost for want of memory: each engine keeps a small
 * reserve of records made in advance, used when malloc fails and refilled
 * by records that are let go (vf__failure_unref).
 */
#ifndef VF_FAILURE_H
#define VF_FAILURE_H

#include <pthread.h>
#include <stdbool.h>

#include "base/error.h"

typedef struct vf__failure vf__failure;
typedef struct vf__failure_reserve vf__failure_reserve;

struct vf__failure {
    atomic_int refs;              /* acq_rel: the last unref frees */
    atomic_bool reported;         /* acq_rel CAS: exactly one wait claims it */
    uint32_t epoch;               /* engine error epoch it was raised in */
    vf__failure *next;            /* engine's list (engine fail_lock), or the
                                     reserve's free list (reserve lock) */
    vf__failure_reserve *reserve; /* where it goes back when let go */
    vf_error info;
};

#define VF__FAILURE_RESERVE 4

struct vf__failure_reserve {
    pthread_mutex_t lock;
    vf__failure *head; /* lock */
    int count;         /* lock */
};

/* Fill a reserve (VF_ENOMEM when its records cannot be made). */
int vf__failure_reserve_init(vf__failure_reserve *r);
/* Free it; every record made from it must have been let go. */
void vf__failure_reserve_destroy(vf__failure_reserve *r);

/*
 * A new record with one reference: from malloc, else from the reserve;
 * NULL only when both are exhausted. `message` may be NULL.
 */
vf__failure *vf__failure_new(vf__failure_reserve *r, int code,
                             const char *op_name, const char *message,
                             uint32_t epoch);

void vf__failure_ref(vf__failure *f);
void vf__failure_unref(vf__failure *f);

/* True once, for the first caller: that caller reports the failure. */
static inline bool vf__failure_claim(vf__failure *f)
{
    bool expected = false;
    return atomic_compare_exchange_strong_explicit(&f->reported, &expected,
                                                   true, memory_order_acq_rel,
                                                   memory_order_acquire);
}

/* Whether the record still makes ops skip: unreported and of the epoch. */
static inline bool vf__failure_active(const vf__failure *f, uint32_t epoch)
{
    return f->epoch == epoch &&
           !atomic_load_explicit(&f->reported, memory_order_acquire);
}

#endif /* VF_FAILURE_H */
