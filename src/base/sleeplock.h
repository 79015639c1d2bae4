/*
 * sleeplock.h: a lock that spins a little, then sleeps (a futex on Linux).
 *
 * For a lock that is nearly always free but that, in some programs, many
 * threads want at once: a bulk state's (bulk.c), which every pushing
 * thread of a shared var takes in turn. spinlock.h's lock yields after a
 * short spin and never sleeps; with hundreds of threads after it and its
 * holder preempted, the holder ran once a round of them, and a program
 * that pushed from a thread per request crawled (found by a user tester).
 * A pthread mutex sleeps too, but is two calls: 56 more instructions a
 * bulked push (callgrind, vf-bulk64 W1). This one is the inline fast path
 * of a compare-and-swap to lock and an exchange to unlock, after Ulrich
 * Drepper's "Futexes Are Tricky": the state 0 free, 1 held, 2 held with
 * sleepers maybe; the unlock that finds 2 wakes one. Elsewhere than Linux
 * it yields instead of sleeping, as spinlock.h does.
 *
 * Acquire/release orders make what one holder wrote visible to the next
 * (TSan sees them: the futex only waits).
 */
#ifndef VF_SLEEPLOCK_H
#define VF_SLEEPLOCK_H

#include <stdatomic.h>

#include "base/common.h"

typedef struct vf__sleeplock {
    atomic_int state; /* 0 free, 1 held, 2 held and maybe slept on */
} vf__sleeplock;

static inline void vf__sleeplock_init(vf__sleeplock *l)
{
    atomic_init(&l->state, 0);
}

/* The ways out of line: the wait once the spin gave up, and the wake. */
void vf__sleeplock_lock_slow(vf__sleeplock *l);
void vf__sleeplock_wake(vf__sleeplock *l);

static inline void vf__sleeplock_lock(vf__sleeplock *l)
{
    int free = 0;
    if (VF__LIKELY(atomic_compare_exchange_strong_explicit(
            &l->state, &free, 1, memory_order_acquire, memory_order_relaxed)))
        return;
    vf__sleeplock_lock_slow(l);
}

static inline void vf__sleeplock_unlock(vf__sleeplock *l)
{
    if (VF__UNLIKELY(
            atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2))
        vf__sleeplock_wake(l);
}

#endif /* VF_SLEEPLOCK_H */
