/*
 * ecount.h: an event count, so that a thread can sleep until something is
 * published without the publisher taking a lock.
 *
 * A thread that finds nothing to do cannot simply check and then sleep: a
 * publication landing between the two would be missed and the thread
 * would sleep on with work waiting. The event count closes that gap:
 *
 *   sleeper                                publisher
 *   key = vf__ecount_prepare(ec);          publish (a seq_cst store or RMW);
 *   if (condition holds)                   if (vf__ecount_waiters(ec) > 0)
 *       vf__ecount_cancel(ec);                 vf__ecount_notify(ec, all);
 *   else
 *       vf__ecount_wait(ec, key, until);
 *
 * prepare counts the sleeper in (`waiters`) and reads the epoch; notify
 * bumps the epoch and wakes. All of it is seq_cst, so the two sides form
 * Dekker's pattern: either the publisher's load sees waiters > 0, and then
 * its bump comes after the sleeper's read of the epoch, so the sleeper
 * either does not block (the epoch is no longer `key`) or is blocked and
 * woken; or the load sees 0, and then the sleeper's check comes after the
 * publication and sees it. A publisher with nobody asleep pays that one
 * load, of a line only sleepers and wakers write: while every thread is
 * busy the line stays shared in every cache, and no system call is made.
 *
 * Linux: the epoch is a futex word; a wait is FUTEX_WAIT_BITSET, which
 * takes the deadline's absolute CLOCK_MONOTONIC time as it is, and a
 * notify FUTEX_WAKE of one or all, both process-private. Elsewhere (or
 * built with VF_ECOUNT_CONDVAR, which a unit test does to cover it): a
 * mutex and a condition variable, where the sleeper compares the epoch
 * under the mutex and a notifier takes it after its bump, so a wake-up
 * cannot fall between the compare and the sleep.
 *
 * The epoch wraps at 2^32: a sleeper would miss a wake-up only if exactly
 * 2^32 notifies ran between its prepare and its wait.
 */
#ifndef VF_ECOUNT_H
#define VF_ECOUNT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/deadline.h"

#if defined(__linux__) && !defined(VF_ECOUNT_CONDVAR)
#define VF__ECOUNT_FUTEX 1
#else
#define VF__ECOUNT_FUTEX 0
#endif

typedef struct vf__ecount {
    _Atomic uint32_t epoch; /* seq_cst: bumped by each notify (the futex) */
    atomic_int waiters;     /* seq_cst: sleepers between prepare and return */
#if !VF__ECOUNT_FUTEX
    pthread_mutex_t lock; /* a leaf: guards the compare-and-sleep only */
    pthread_cond_t cond;  /* on CLOCK_MONOTONIC */
#endif
} vf__ecount;

/* 0, or VF_ESYSTEM when the fallback's mutex or condition cannot be made. */
int vf__ecount_init(vf__ecount *ec);
void vf__ecount_destroy(vf__ecount *ec);

/* A sleeper counts itself in and reads the epoch: call before checking
 * the condition it would sleep on; then exactly one of cancel or wait. */
static inline uint32_t vf__ecount_prepare(vf__ecount *ec)
{
    atomic_fetch_add(&ec->waiters, 1);
    return atomic_load(&ec->epoch);
}

/* The condition held after prepare: count the sleeper out, not asleep. */
static inline void vf__ecount_cancel(vf__ecount *ec)
{
    atomic_fetch_sub(&ec->waiters, 1);
}

/* Block until a notify after the prepare that returned `key`, or until
 * `until` passes (NULL: no deadline); returns at once when one already
 * came. Spurious returns happen: callers check again. Counts the sleeper
 * out. The caller holds no lock. */
void vf__ecount_wait(vf__ecount *ec, uint32_t key, const vf__deadline *until);

/* Sleepers counted in (one seq_cst load): a publisher notifies only when
 * this is not zero. */
static inline int vf__ecount_waiters(vf__ecount *ec)
{
    return atomic_load(&ec->waiters);
}

/* Bump the epoch and wake one blocked sleeper, or every one: a system
 * call (or the fallback's lock) each time, so callers check waiters
 * first. Never blocks beyond that. */
void vf__ecount_notify(vf__ecount *ec, bool all);

#endif /* VF_ECOUNT_H */
