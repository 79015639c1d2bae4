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
 *   if (condition holds)                   if (vf__ecount_unwoken(ec) > 0)
 *       vf__ecount_cancel(ec);                 vf__ecount_notify(ec, false);
 *   else
 *       vf__ecount_wait(ec, key, until);
 *
 * prepare counts the sleeper in and reads the epoch; notify bumps the
 * epoch and wakes. All of it is seq_cst, so the two sides form Dekker's
 * pattern: either the publisher's load sees the sleeper counted, and then
 * its bump comes after the sleeper's read of the epoch, so the sleeper
 * either does not block (the epoch is no longer `key`) or is blocked and
 * woken; or the load sees it not counted, and then the sleeper's check
 * comes after the publication and sees it.
 *
 * A notify-one also counts the wake it owes: a sleeper woken stays
 * counted until it runs again, and a publisher that finds every sleeper
 * already owed a wake makes no system call (one is awake or about to be,
 * and checks again before it sleeps). A sleeper leaving, woken or not,
 * pays off one owed wake, if any, so the owed count never exceeds the
 * sleepers. The sleepers, the owed wakes and the epoch share one word:
 * counting in and reading the epoch is one step, and so is owing a wake
 * and bumping the epoch. (With two steps a notify could fall between a
 * sleeper's count and its read of the epoch: owed to that sleeper, its
 * bump would not stop it from blocking, and a later notify, finding
 * every sleeper owed a wake, would wake nobody; model/sleep.pml finds
 * that.) A publisher with nobody to wake pays one load, of a line only
 * sleepers and wakers write: while every thread is busy the line stays
 * shared in every cache, and no system call is made.
 *
 * Linux: the epoch half is a futex word; a wait is FUTEX_WAIT_BITSET, which
 * takes the deadline's absolute CLOCK_MONOTONIC time as it is, and a
 * notify FUTEX_WAKE of one or all, both process-private. Elsewhere (or
 * built with VF_ECOUNT_CONDVAR, which a unit test does to cover it): a
 * mutex and a condition variable, where the sleeper compares the epoch
 * under the mutex and a notifier takes it after its bump, so a wake-up
 * cannot fall between the compare and the sleep.
 *
 * The epoch wraps at 2^32: a sleeper would miss a wake-up only if exactly
 * 2^32 notifies ran between its prepare and its wait.
 *
 * Tags. A sleeper may wait for an event of its own as well, one a
 * publisher signals to it alone: it waits with a tag (1 to
 * VF__ECOUNT_TAGS), and vf__ecount_wake_tag bumps the epoch, as a notify
 * does, owing nothing, and wakes only the sleepers with that tag (a
 * futex bitset; the fallback wakes all). Every other sleeper blocked in
 * the kernel sleeps on (one that had not blocked yet returns, the epoch
 * having moved, and looks again); a notify wakes tagged sleepers as
 * untagged ones. A pool's nested waiters sleep so (core/wait.c): the end
 * of a wait woke every sleeper of the pool, hundreds in a deep
 * recursion, to wake one. Owing nothing, it can only leave the owed
 * count short (a tagged sleeper leaving pays off a wake owed to
 * another): a later notify then makes a system call it might have
 * spared, never one fewer. A notify-one's wake goes to the sleeper
 * blocked longest, which may be a tagged one that wakes for its own
 * event at the same time: it must pass the wake on (core/wait.c does,
 * as a sleeper that will not use it).
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
    /* seq_cst, one word (see above): bits 0-15 the sleepers counted in,
     * 16-31 the wakes owed to them (never more than the sleepers), 32-63
     * the epoch, bumped by each notify (the futex word). A pool's sleepers
     * are its workers: far fewer than 65536. */
    _Atomic uint64_t state;
#if !VF__ECOUNT_FUTEX
    pthread_mutex_t lock; /* a leaf: guards the compare-and-sleep only */
    pthread_cond_t cond;  /* on CLOCK_MONOTONIC */
#endif
} vf__ecount;

#define VF__ECOUNT_OWED ((uint64_t)1 << 16)
#define VF__ECOUNT_EPOCH ((uint64_t)1 << 32)

static inline uint32_t vf__ecount_sleepers_(uint64_t s)
{
    return (uint32_t)(s & 0xffff);
}

static inline uint32_t vf__ecount_owed_(uint64_t s)
{
    return (uint32_t)(s >> 16 & 0xffff);
}

/* 0, or VF_ESYSTEM when the fallback's mutex or condition cannot be made. */
int vf__ecount_init(vf__ecount *ec);
void vf__ecount_destroy(vf__ecount *ec);

/* A sleeper counts itself in and reads the epoch, in one step: call
 * before checking the condition it would sleep on; then exactly one of
 * cancel or wait. */
static inline uint32_t vf__ecount_prepare(vf__ecount *ec)
{
    return (uint32_t)(atomic_fetch_add(&ec->state, 1) >> 32);
}

/* A sleeper leaves: counted out, paying off one owed wake if any. */
static inline void vf__ecount_leave_(vf__ecount *ec)
{
    uint64_t s = atomic_load(&ec->state), n;
    do {
        n = s - 1 - (vf__ecount_owed_(s) > 0 ? VF__ECOUNT_OWED : 0);
    } while (!atomic_compare_exchange_weak(&ec->state, &s, n));
}

/* The condition held after prepare: count the sleeper out, not asleep. */
static inline void vf__ecount_cancel(vf__ecount *ec)
{
    vf__ecount_leave_(ec);
}

/* Block until a notify after the prepare that returned `key`, or until
 * `until` passes (NULL: no deadline); returns at once when one already
 * came. Spurious returns happen: callers check again. Counts the sleeper
 * out. The caller holds no lock. */
void vf__ecount_wait(vf__ecount *ec, uint32_t key, const vf__deadline *until);

/* The tags a sleeper may wait with (see "Tags" above). */
#define VF__ECOUNT_TAGS 31u

/* vf__ecount_wait for a sleeper with tag `tag` (1 to VF__ECOUNT_TAGS),
 * which vf__ecount_wake_tag(tag) wakes besides any notify; tag 0 is
 * vf__ecount_wait's, untagged. */
void vf__ecount_wait_tagged(vf__ecount *ec, uint32_t key, unsigned tag,
                            const vf__deadline *until);

/* Bump the epoch and wake the sleepers that wait with `tag` (the
 * fallback: every sleeper); owes no wake. The publisher's change comes
 * first (seq_cst), as a notify's. No system call when no sleeper, of any
 * tag, is counted in. */
void vf__ecount_wake_tag(vf__ecount *ec, unsigned tag);

/* Sleepers counted in and owed no wake (one seq_cst load): a publisher
 * notifies one only when this is not zero. */
static inline uint32_t vf__ecount_unwoken(vf__ecount *ec)
{
    uint64_t s = atomic_load(&ec->state);
    return vf__ecount_sleepers_(s) - vf__ecount_owed_(s);
}

/* Sleepers counted in, woken or not (one seq_cst load). */
static inline uint32_t vf__ecount_waiters(vf__ecount *ec)
{
    return vf__ecount_sleepers_(atomic_load(&ec->state));
}

/* The epoch (tests). */
static inline uint32_t vf__ecount_epoch(vf__ecount *ec)
{
    return (uint32_t)(atomic_load(&ec->state) >> 32);
}

/* Wake one sleeper owed no wake yet (none: nothing, no system call), or
 * every sleeper: bump the epoch and FUTEX_WAKE (or the fallback's
 * signal). Callers check vf__ecount_unwoken (one) or vf__ecount_waiters
 * (all) first. Never blocks beyond the fallback's lock. */
void vf__ecount_notify(vf__ecount *ec, bool all);

#endif /* VF_ECOUNT_H */
